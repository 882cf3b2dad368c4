/* lua_shell.h -- the session's Lua 5.4 state with module `attn` (generated from the command
 * table), running Lua code and Lua files, and stopping them on Ctrl-C. Below exec.c: Lua reaches
 * command lines only through the command table (cmd_dispatch), never through exec.c. */
#ifndef AL_LUA_SHELL_H
#define AL_LUA_SHELL_H

#include <stdbool.h>
#include <stddef.h>
#include "out.h"
#include "registry.h"
#include "session.h"

/* The session's Lua state (created on first use, with module `attn` as global and in
 * package.loaded). NULL + error on failure. The state closes with the session. */
struct lua_State *shell_lua(Session *s);
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

#endif
