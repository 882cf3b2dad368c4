/* shell.h -- the bottom of repl/: the front end's per-session state (ShellState, hung off
 * Session.front) and the queued warnings printed after each command. Every other repl/ module
 * builds on this one; it calls none of them (the Lua module installs its closer here).
 *
 * The layers of repl/, bottom to top (each calls only those below it):
 *   shell.c (state, warnings), progress.c (the terminal progress line), history.c (the prompt's
 *   history) -> lua_shell.c (the Lua state, module attn) -> exec.c (command lines, `run FILE`)
 *   -> cmd_shell.c (run, lua, echo, history, quit, exit) -> repl.c (the program) -> main.c.
 * Lua code that runs command lines, and command lines that run Lua, meet only through the
 * command table (cmd_dispatch), never by a direct call upwards. */
#ifndef AL_SHELL_H
#define AL_SHELL_H

#include <stdbool.h>
#include "out.h"
#include "session.h"

/* What the front end keeps per session, hung off Session.front (commands/ never looks inside)
 * and freed with the session through a SessionHook. */
typedef struct ShellState {
    struct lua_State *L;       /* the Lua state with module `attn` (created on first use) */
    /* Closes L; installed by the Lua module (lua_shell.c) with L, called when the state is freed. */
    void (*lua_close)(struct ShellState *st);
    bool want_exit;            /* `quit` ran */
    int exit_code;
    int depth;                 /* nesting of `run` (guards against run loops) */
    bool err_reported;         /* the last failure was already printed (Lua traceback, file:line:) */
} ShellState;

/* The session's front-end state, created on first use. NULL + error on failure. */
ShellState *shell_state(Session *s);
/* Prints "warning: ..." for every queued al_warn. */
void shell_drain_warnings(Out *o);

#endif
