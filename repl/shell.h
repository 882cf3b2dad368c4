/* shell.h -- the front doors over the command registry: running command lines (the prompt, `-e`,
 * `run FILE`), the Lua state with module `attn`, history, the progress line and Ctrl-C.
 *
 * Error reports depend on where a line came from (LineSrc): at the prompt a caret under the bad
 * token, from `-e` / piped input the line echoed with a caret under it, from a file
 * `file:line:col: message`. Errors and warnings go to the Out's stderr stream. */
#ifndef AL_SHELL_H
#define AL_SHELL_H

#include <stdbool.h>
#include <stddef.h>
#include "out.h"
#include "registry.h"
#include "session.h"

/* ================================================================ the front end's state */

/* What the front end keeps per session, hung off Session.front (commands/ never looks inside)
 * and freed with the session through a SessionHook. */
typedef struct ShellState {
    struct lua_State *L;       /* the Lua state with module `attn` (created on first use) */
    bool want_exit;            /* `quit` ran */
    int exit_code;
    int depth;                 /* nesting of `run` (guards against run loops) */
    bool err_reported;         /* the last failure was already printed (Lua traceback, file:line:) */
} ShellState;

/* The session's front-end state, created on first use. NULL + error on failure. */
ShellState *shell_state(Session *s);
/* Adds the front end's commands (run, lua, echo, history, quit, exit) to the command table;
 * once per process, before the first command line (shell_main does it). */
int shell_register(void);

/* ================================================================ running lines */

typedef struct {
    const char *file;     /* script file name (errors as file:line:col:), or NULL */
    long line;            /* line number in file */
    size_t prompt_w;      /* > 0: the line was typed after a prompt this wide: caret under it */
} LineSrc;

/* Runs every command of a line (';'-separated; '= expr' and 'lua CODE' are Lua), printing
 * results in the session format, errors with carets, and queued warnings ("warning: ...").
 * Stops at the first failing command. `parent` supplies the sink (NULL: stdout/stderr).
 * Returns AL_OK, AL_ERR (already reported), AL_EXIT (quit) or AL_INTERRUPTED. */
int shell_exec_line(Session *s, const char *line, const LineSrc *src, Out *parent);
/* Runs a file of commands, one line per command line ('#' starts a comment line); stops at the
 * first failing line (reported as file:line:). */
int shell_run_commands_file(Session *s, const char *path, Out *parent);
/* Prints "warning: ..." for every queued al_warn. */
void shell_drain_warnings(Out *o);

/* ================================================================ Lua */

/* The session's Lua state (created on first use, with module `attn` as global and in
 * package.loaded). NULL + error on failure. */
struct lua_State *shell_lua(Session *s);
/* Closes the Lua state of st (if any); the shell's SessionHook calls it. */
void shell_lua_close(ShellState *st);
/* Runs Lua code; with `expr` it is an expression whose values are printed (`= expr`); without,
 * a statement block, tried first as `return CODE` so bare expressions print too. A Lua error
 * prints its traceback on stderr and returns AL_ERR with al_errmsg set to the message. */
int shell_lua_exec(Session *s, const char *code, bool expr, Out *parent);
/* Runs a Lua file with the global `arg` = { [0] = path, argv[0], ... }. */
int shell_lua_file(Session *s, const char *path, int argc, char **argv, Out *parent);
/* True when line is Lua (`lua CODE` or `= expr`) that stops in the middle of a construct, so the
 * prompt should read another line and append it (like lua.c's continuation prompt). */
bool shell_lua_incomplete(Session *s, const char *line);
/* True while Lua code runs (SIGINT then also stops the Lua VM through a hook). */
bool shell_lua_running(void);
/* Called from the SIGINT handler: makes running Lua code stop at its next instruction. */
void shell_lua_interrupt(void);
/* The Lua function name of a top-level command (name with '-' -> '_', or .lua_name). */
void shell_lua_name(const Command *c, char *buf, size_t cap);

/* ================================================================ REPL pieces */

/* Prints the last n history entries (all with n <= 0). */
int shell_history_list(long n, Out *out);
/* Installs the terminal progress line (only draws when stderr is a terminal). */
void shell_progress_install(void);
/* Clears a progress line left on the screen (a command ended early); no-op when none. */
void shell_progress_end(void);
/* The whole program: `attnlab [-h] [-e "cmds"] [FILE.lua|FILE [args]]`; returns the exit status. */
int shell_main(int argc, char **argv);

#endif
