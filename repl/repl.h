/* repl.h -- the program: `attnlab [-h] [--version] [-e "cmds"] [FILE.lua|FILE [args]]`, the prompt (with a one-line banner), piped
 * input and Ctrl-C. The top of repl/ (see shell.h for the layers); main.c calls it. */
#ifndef AL_REPL_H
#define AL_REPL_H

/* The program's version: `attnlab --version`, the banner at the prompt, attn.version in Lua. */
#define ATTNLAB_VERSION "0.15.0"

/* The whole program: `attnlab [-h] [-e "cmds"] [FILE.lua|FILE [args]]`; returns the exit status. */
int shell_main(int argc, char **argv);

#endif
