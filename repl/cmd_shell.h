/* cmd_shell.h -- the front end's own commands (run, lua, echo, history, quit, exit), added to the
 * one command table so `help`, completion, `-e` and Lua see them like any other. */
#ifndef AL_CMD_SHELL_H
#define AL_CMD_SHELL_H

/* Adds the front end's commands to the command table; once per process, before the first
 * command line (shell_main does it). */
int shell_register(void);

#endif
