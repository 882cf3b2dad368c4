/* lua_data.h -- Lua tables given as a command's keyword values, turned into the words the command
 * reads (used by lua_shell.c's trampoline, attn.<command>(..., {key = TABLE})).
 *
 * commands/ knows no Lua, and the prompt, `-e` and `replot` pass data as files, so a table of
 * numbers becomes a CSV file that the command reads like any other (one reader, one set of errors,
 * and `replot` re-reads it). The files are temporary ($TMPDIR, else /tmp), kept until the Lua state
 * closes so `replot` and `plot panels` can read them again. The rules:
 *   series = {{x = {...}, y = {...}, name = "max", yerr = {...}, marker = "square", dash = 2}, ...}
 *                  -> `data FILE x 1,4,... y 2,5,... [yerr 3,6,...] [marker ...] [dash ...]`, one x,
 *                     y (and yerr) column per series, the names in the header (x defaults to 1..n;
 *                     x, y and yerr of one series must have one length)
 *   key = {{1, 2}, {3, 4}}   (rows of numbers)  -> key FILE, a CSV grid (`plot matrix`'s data)
 *   key = {"a", "b"}         (strings)          -> key "a; b" (`plot panels`' figures)
 *   key = {1, 2, 3}          (numbers)          -> key 1,2,3 */
#ifndef AL_LUA_DATA_H
#define AL_LUA_DATA_H

#include <lua.h>
#include "registry.h"

/* Appends the words for keyword `key` whose value, a table, is at stack index idx. AL_ERR with
 * al_err set (the table's shape, or too many words); the stack is left as it was. */
int lua_data_words(lua_State *L, const char *key, int idx, Tokens *t);
/* Removes the temporary files written so far (when the Lua state closes). */
void lua_data_cleanup(void);

#endif
