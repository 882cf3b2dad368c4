/* repl.h -- the program: `attnlab [-h] [-e "cmds"] [FILE.lua|FILE [args]]`, the prompt, piped
 * input and Ctrl-C. The top of repl/ (see shell.h for the layers); main.c calls it. */
#ifndef AL_REPL_H
#define AL_REPL_H

/* The whole program: `attnlab [-h] [-e "cmds"] [FILE.lua|FILE [args]]`; returns the exit status. */
int shell_main(int argc, char **argv);

#endif
