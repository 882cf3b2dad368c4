/* shell.c -- the front end's per-session state (ShellState), hung off Session.front and freed
 * through a SessionHook, and the warnings queued by al_warn, printed after each command. */
#include "shell.h"

#include <stdlib.h>

/* ================================================================ the session's front-end state */

static void shell_state_free(Session *s) {
    ShellState *st = s->front;
    if (!st) return;
    if (st->lua_close) st->lua_close(st);
    free(st);
    s->front = NULL;
}

static const SessionHook shell_hook = { .name = "shell", .on_free = shell_state_free };

ShellState *shell_state(Session *s) {
    if (s->front) return s->front;
    ShellState *st = al_calloc(1, sizeof *st, "the shell state");
    if (!st) return NULL;
    if (session_hook_add(s, &shell_hook)) { free(st); return NULL; }
    s->front = st;
    return st;
}

/* ================================================================ warnings */

void shell_drain_warnings(Out *o) {
    char buf[1024];
    while (al_warn_pop(buf, sizeof buf)) out_eprintf(o, "warning: %s\n", buf);
}
