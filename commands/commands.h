/* commands.h -- the top of the command layer: registers commands/'s own command groups with the
 * registry, in `help` order. A front end (repl/, a test, a bench) calls commands_init() once
 * before it parses a line, then adds its own groups with cmd_register_group(). */
#ifndef AL_COMMANDS_H
#define AL_COMMANDS_H

/* Registers every group of commands/ (a second call is a no-op). AL_ERR with the message when
 * the table is inconsistent (a command name defined twice). */
int commands_init(void);

#endif
