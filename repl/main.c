/* main.c -- attnlab's entry point; everything else is in repl/repl.c (shell_main). */
#include "repl.h"

int main(int argc, char **argv) { return shell_main(argc, argv); }
