/* lua_shell.c -- the session's Lua 5.4 state and module `attn`, generated from the command table.
 *
 * attn.run("cmd ...; cmd ...") runs command lines and returns the last command's result as Lua
 * values; attn.<command>(positional..., {keyword = value}) calls one command through a single
 * trampoline (the command's table entry is its upvalue), which turns Lua values into the same
 * tokens the prompt would give, parses them against the table, dispatches, and turns an error
 * into luaL_error. Results: a table becomes an array of row tables keyed by column name (a
 * "total" last row comes back as a second value; a record such as `info` as one table keyed by
 * field, out.h), an array a Lua array of numbers, numbers and strings themselves. A keyword whose
 * value is a table (series, a matrix, a list) becomes words through lua_data.h (CSV files). attn.get(KEY)
 * reads a setting (typed); attn.set is silent here, as every command's narration is.
 * Commands called from Lua run with narration off (Out.quiet = OUT_QUIET: the values come back
 * instead); attn.quiet(true) drops their stdout text altogether (OUT_SILENT). print() writes
 * through the current Out. Ctrl-C while Lua runs sets a hook that raises "interrupted" at the
 * next instruction. */
#define _GNU_SOURCE
#include "lua_shell.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua_data.h"
#include "progress.h"
#include "shell.h"

/* What a Lua state knows about its host: stored in the state's extra space. */
typedef struct {
    Session *s;
    Out *out;                  /* where print() and command text go (NULL: stdout) */
    bool quiet;                /* attn.quiet(true): commands' narration is dropped (warnings stay) */
} LuaCtx;

static LuaCtx *ctx_of(lua_State *L) { return *(LuaCtx **)lua_getextraspace(L); }

/* The innermost running state, for the SIGINT handler. */
static lua_State *volatile running_L;
static volatile sig_atomic_t running_depth;

bool shell_lua_running(void) { return running_depth > 0; }

/* Hook set by SIGINT: stops the running code with an error. */
static void stop_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted");
}

void shell_lua_interrupt(void) {
    lua_State *L = running_L;
    if (L) lua_sethook(L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

void shell_lua_name(const Command *c, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", c->lua_name ? c->lua_name : c->name);
    for (char *p = buf; *p; p++) if (*p == '-') *p = '_';
}

/* ================================================================ values */

/* Pushes one cell's value (nil for an empty cell). */
static void push_cell(lua_State *L, const Cell *c) {
    switch (c->kind) {
    case CELL_NULL: lua_pushnil(L); break;
    case CELL_INT: lua_pushinteger(L, (lua_Integer)c->num); break;
    case CELL_NUM: lua_pushnumber(L, c->num); break;
    case CELL_STR: lua_pushstring(L, c->str); break;
    case CELL_BOOL: lua_pushboolean(L, c->b); break;
    }
}

/* Pushes row i of t as a table keyed by column, from column j0 on. */
static void push_row(lua_State *L, const Table *t, size_t i, size_t j0) {
    lua_createtable(L, 0, (int)t->ncols);
    for (size_t j = j0; j < t->ncols; j++) {
        push_cell(L, table_cell(t, i, j));
        lua_setfield(L, -2, t->cols[j]);      /* nil: no field */
    }
}

/* Pushes a table result (out.h): a record as one table keyed by its first column; else the rows
 * keyed by column, and a last row labelled "total" as a second value. Returns the count. */
static int push_table(lua_State *L, const Table *t) {
    if (t->record && t->ncols == 2) {
        lua_createtable(L, 0, (int)t->nrows);
        for (size_t i = 0; i < t->nrows; i++) {
            const Cell *k = table_cell(t, i, 0);
            if (k->kind != CELL_STR) continue;
            push_cell(L, table_cell(t, i, 1));
            lua_setfield(L, -2, k->str);
        }
        return 1;
    }
    const Cell *last = t->nrows ? table_cell(t, t->nrows - 1, 0) : NULL;
    bool total = last && last->kind == CELL_STR && !strcmp(last->str, "total");
    size_t n = t->nrows - (total ? 1 : 0);
    lua_createtable(L, n > 1e6 ? 0 : (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        push_row(L, t, i, 0);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    if (!total) return 1;
    push_row(L, t, n, 1);
    return 2;
}

/* Pushes a command's result; returns the number of values pushed (0 for none). */
static int push_result(lua_State *L, const Out *o) {
    switch (o->kind) {
    case RES_NONE: return 0;
    case RES_NUMBER:
        if (o->num == (double)(lua_Integer)o->num) lua_pushinteger(L, (lua_Integer)o->num);
        else lua_pushnumber(L, o->num);
        return 1;
    case RES_STRING: lua_pushstring(L, o->str); return 1;
    case RES_ARRAY:
        lua_createtable(L, o->narr > 1e6 ? 0 : (int)o->narr, 0);
        for (size_t i = 0; i < o->narr; i++) {
            if (o->arr_int) lua_pushinteger(L, (lua_Integer)o->arr[i]); else lua_pushnumber(L, o->arr[i]);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        return 1;
    case RES_TABLE: return push_table(L, o->table);
    }
    return 0;
}

/* A Lua value as a token (numbers without a trailing .0 when integral); NULL for nil. Uses the
 * stack slot idx; the returned text is copied. */
static char *value_text(lua_State *L, int idx) {
    if (lua_isnoneornil(L, idx)) return NULL;
    if (lua_isinteger(L, idx)) return al_asprintf("%lld", (long long)lua_tointeger(L, idx));
    if (lua_type(L, idx) == LUA_TNUMBER) return al_asprintf("%.17g", lua_tonumber(L, idx));
    size_t n;
    const char *s = luaL_tolstring(L, idx, &n);
    char *c = strndup(s, n);
    lua_pop(L, 1);
    return c;
}

static bool add_token(Tokens *t, char *text, bool quoted) {
    if (!text || t->n >= ARGS_TOKENS_MAX) { free(text); return false; }
    t->tok[t->n++] = (Token){ .text = text, .quoted = quoted };
    return true;
}

/* ================================================================ the trampoline */

/* Runs parsed args and leaves the result in o. Returns the status; the message is in al_errmsg.
 * Lua takes the values, so narration is off (OUT_QUIET); attn.quiet(true) drops all stdout. */
static int run_args(Session *s, const Args *a, Out *o, LuaCtx *ctx) {
    if (ctx->out) { o->sink = ctx->out->sink; o->sink_ud = ctx->out->sink_ud; }
    o->quiet = ctx->quiet ? OUT_SILENT : OUT_QUIET;
    if (ctx->out && ctx->out->quiet > o->quiet) o->quiet = ctx->out->quiet;
    int rc = cmd_dispatch(s, a, o);
    shell_progress_end();
    shell_drain_warnings(o);
    return rc;
}

/* attn.<command>(positional..., {keyword = value, flag = true}) */
static int l_command(lua_State *L) {
    const Command *c = lua_touserdata(L, lua_upvalueindex(1));
    LuaCtx *ctx = ctx_of(L);
    char fname[80], err[1200];
    shell_lua_name(c, fname, sizeof fname);
    if (c->flags & CMD_NOLUA) return luaL_error(L, "attn.%s: '%s' is not available from Lua", fname, c->name);
    int n = lua_gettop(L), last = n;
    if (n >= 1 && lua_type(L, n) == LUA_TTABLE) last = n - 1;
    for (int i = 1; i <= last; i++)
        if (lua_isnil(L, i)) return luaL_error(L, "bad argument #%d to 'attn.%s' (a value expected, got nil)", i, fname);

    Tokens t = {0};
    bool ok = add_token(&t, al_strdup(c->name), false);
    for (int i = 1; ok && i <= last; i++) ok = add_token(&t, value_text(L, i), i > 1 || !c->sub);
    if (ok && last < n) {
        lua_pushnil(L);
        while (ok && lua_next(L, n)) {
            if (lua_type(L, -2) != LUA_TSTRING) {
                lua_pop(L, 2);
                tokens_free(&t);
                return luaL_error(L, "attn.%s: keyword table keys must be strings (e.g. {layer = 8})", fname);
            }
            const char *k = lua_tostring(L, -2);
            if (lua_type(L, -1) == LUA_TTABLE) {        /* data: a CSV file or joined words (lua_data.h) */
                if (lua_data_words(L, k, -1, &t)) {
                    char msg[600];
                    snprintf(msg, sizeof msg, "%s", al_errmsg());
                    lua_pop(L, 2);
                    tokens_free(&t);
                    return luaL_error(L, "attn.%s: %s", fname, msg);
                }
            } else if (lua_isboolean(L, -1)) {
                if (lua_toboolean(L, -1)) ok = add_token(&t, al_strdup(k), false);
            } else {
                ok = add_token(&t, al_strdup(k), false) && add_token(&t, value_text(L, -1), true);
            }
            lua_pop(L, 1);
        }
        if (!ok) lua_pop(L, 1);   /* the key left by an interrupted lua_next walk */
    }
    if (!ok) { tokens_free(&t); return luaL_error(L, "attn.%s: too many arguments or out of memory", fname); }

    Args a;
    ParseErr e;
    int rc = cmd_parse_tokens(ctx->s, &t, NULL, &a, &e);
    tokens_free(&t);
    if (rc) {
        args_free(&a);
        return luaL_error(L, "attn.%s: %s", fname, e.msg);
    }
    Out o;
    out_init(&o);
    rc = run_args(ctx->s, &a, &o, ctx);
    args_free(&a);
    if (rc != AL_OK) {
        snprintf(err, sizeof err, "%s", rc == AL_EXIT ? "quit" : al_errmsg());
        out_free(&o);
        return luaL_error(L, "attn.%s: %s", fname, err);
    }
    int nres = push_result(L, &o);
    out_free(&o);
    return nres;
}

/* attn.run("cmd ...; cmd ...") -> the last command's result */
static int l_run(lua_State *L) {
    const char *line = luaL_checkstring(L, 1);
    LuaCtx *ctx = ctx_of(L);
    size_t pos = 0, n = strlen(line);
    char err[1400];
    Out last;
    out_init(&last);
    while (pos < n) {
        Tokens t = {0};
        ParseErr e;
        Args a;
        size_t next;
        if (cmd_tokenize(line, pos, &next, &t, &e)) {
            out_free(&last);
            return luaL_error(L, "attn.run: %s (column %d of \"%s\")", e.msg, (int)e.col + 1, line);
        }
        pos = next;
        if (t.n == 0) continue;
        if (!strcmp(t.tok[0].text, "=")) {
            tokens_free(&t);
            out_free(&last);
            return luaL_error(L, "attn.run: '=' is for the prompt; in Lua evaluate the expression directly");
        }
        int rc = cmd_parse_tokens(ctx->s, &t, line, &a, &e);
        tokens_free(&t);
        if (rc) {
            args_free(&a);
            out_free(&last);
            return luaL_error(L, "attn.run: %s (column %d of \"%s\")", e.msg, (int)e.col + 1, line);
        }
        out_reset(&last);
        rc = run_args(ctx->s, &a, &last, ctx);
        args_free(&a);
        if (rc != AL_OK) {
            snprintf(err, sizeof err, "%s", rc == AL_EXIT ? "quit is not available from Lua" : al_errmsg());
            out_free(&last);
            return luaL_error(L, "attn.run: %s", err);
        }
    }
    int nres = push_result(L, &last);
    out_free(&last);
    return nres;
}

/* attn.commands() -> array of top-level command names */
static int l_commands(lua_State *L) {
    const Command *c;
    lua_newtable(L);
    for (size_t i = 0; (c = cmd_at(i, NULL)); i++) {
        lua_pushstring(L, c->name);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* attn.quiet(on) -> previous setting: with true, commands called from Lua print nothing but
 * warnings (their results still come back as values). */
static int l_quiet(lua_State *L) {
    LuaCtx *ctx = ctx_of(L);
    bool prev = ctx->quiet;
    if (!lua_isnone(L, 1)) ctx->quiet = lua_toboolean(L, 1);
    lua_pushboolean(L, prev);
    return 1;
}

/* Pushes setting st's value: a number for number and integer settings, else its text. */
static bool push_setting(lua_State *L, const Session *s, const Setting *st) {
    if (st->type == SET_NUMBER) { lua_pushnumber(L, *(const double *)((const char *)s + st->off)); return true; }
    if (st->type == SET_INT) { lua_pushinteger(L, *(const int *)((const char *)s + st->off)); return true; }
    char *v = session_get(s, st->name);
    if (!v) return false;
    lua_pushstring(L, v);
    free(v);
    return true;
}

/* attn.get(KEY) -> the setting's value (attn.get("tau") == 0.999); attn.get() -> every setting in
 * one table keyed by name. An unknown key is an error listing the settings. */
static int l_get(lua_State *L) {
    LuaCtx *ctx = ctx_of(L);
    const Setting *st;
    if (lua_isnoneornil(L, 1)) {
        lua_newtable(L);
        for (size_t i = 0; (st = session_setting_at(i)); i++)
            if (push_setting(L, ctx->s, st)) lua_setfield(L, -2, st->name);
        return 1;
    }
    const char *key = luaL_checkstring(L, 1);
    for (size_t i = 0; (st = session_setting_at(i)); i++)
        if (!strcmp(st->name, key) && push_setting(L, ctx->s, st)) return 1;
    char *v = session_get(ctx->s, key);  /* NULL: unknown, with the message */
    bool known = v != NULL;
    free(v);
    return luaL_error(L, "attn.get: %s", known ? "out of memory" : al_errmsg());
}

/* print(...) through the Out sink. */
static int l_print(lua_State *L) {
    LuaCtx *ctx = ctx_of(L);
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1) luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_addchar(&b, '\n');
    luaL_pushresult(&b);
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    out_write(ctx->out, OUT_STDOUT, s, len);
    return 0;
}

/* Builds module attn on the stack. */
static int open_attn(lua_State *L) {
    const Command *c;
    char name[80];
    lua_newtable(L);
    for (size_t i = 0; (c = cmd_at(i, NULL)); i++) {
        shell_lua_name(c, name, sizeof name);
        lua_pushlightuserdata(L, (void *)c);
        lua_pushcclosure(L, l_command, 1);
        lua_setfield(L, -2, name);
    }
    lua_pushcfunction(L, l_run);
    lua_setfield(L, -2, "run");
    lua_pushcfunction(L, l_commands);
    lua_setfield(L, -2, "commands");
    lua_pushcfunction(L, l_quiet);
    lua_setfield(L, -2, "quiet");
    lua_pushcfunction(L, l_get);
    lua_setfield(L, -2, "get");
    return 1;
}

/* ================================================================ the state */

/* Closes the Lua state of st (if any); installed as st->lua_close, called when the session's
 * front-end state is freed. */
static void shell_lua_close(ShellState *st) {
    if (!st || !st->L) return;
    LuaCtx *ctx = ctx_of(st->L);
    lua_close(st->L);
    free(ctx);
    st->L = NULL;
    lua_data_cleanup();     /* the CSV files of Lua tables (replot could read them until now) */
}

lua_State *shell_lua(Session *s) {
    ShellState *st = shell_state(s);
    if (!st) return NULL;
    if (st->L) return st->L;
    lua_State *L = luaL_newstate();
    LuaCtx *ctx = calloc(1, sizeof *ctx);
    if (!L || !ctx) { if (L) lua_close(L); free(ctx); al_err("cannot create the Lua state (out of memory)"); return NULL; }
    ctx->s = s;
    *(LuaCtx **)lua_getextraspace(L) = ctx;
    luaL_openlibs(L);
    lua_pushcfunction(L, l_print);
    lua_setglobal(L, "print");
    luaL_requiref(L, "attn", open_attn, 1);
    lua_pop(L, 1);
    st->L = L;
    st->lua_close = shell_lua_close;
    return L;
}

/* Message handler: the error with a traceback. */
static int msghandler(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* Calls the function below narg arguments under the message handler, interruptible. */
static int docall(lua_State *L, int narg, int nres) {
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    lua_State *prev = running_L;
    running_L = L;
    running_depth++;
    if (al_interrupted()) shell_lua_interrupt();   /* Ctrl-C came just before the code started */
    int status = lua_pcall(L, narg, nres, base);
    running_depth--;
    running_L = prev;
    lua_remove(L, base);
    return status;
}

/* Prints the Lua error on top of the stack, sets al_errmsg to its first line, pops it. */
static int report_lua_error(Session *s, lua_State *L, Out *out) {
    const char *msg = lua_tostring(L, -1);
    if (!msg) msg = "(error object is not a string)";
    out_eprintf(out, "%s\n", msg);
    size_t first = strcspn(msg, "\n");
    al_err("%.*s", (int)first, msg);
    lua_pop(L, 1);
    ShellState *st = shell_state(s);
    if (st) st->err_reported = true;
    return AL_ERR;
}

/* ================================================================ printing values */

/* A growable C string (Lua's luaL_Buffer cannot be used while the walk pushes values). */
typedef struct { char *p; size_t n, cap; } Str;

static void str_add(Str *b, const char *s, size_t n) {
    if (al_reserve(&b->p, &b->cap, b->n + n + 1, 1, "a printed value") != AL_OK) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void str_puts(Str *b, const char *s) { str_add(b, s, strlen(s)); }

static void dump_value(lua_State *L, int idx, Str *b, int depth);

static int cmp_keys(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* {1, 2, k=v}: the array part in order, then string keys sorted; nested to 3 levels. */
static void dump_table(lua_State *L, int idx, Str *b, int depth) {
    if (depth >= 3) { str_puts(b, "{...}"); return; }
    lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
    str_puts(b, "{");
    int shown = 0;
    for (lua_Integer i = 1; i <= len; i++) {
        if (shown++) str_puts(b, ", ");
        if (shown > 50) { str_puts(b, "..."); break; }
        lua_rawgeti(L, idx, i);
        dump_value(L, lua_gettop(L), b, depth + 1);
        lua_pop(L, 1);
    }
    size_t nk = 0, cap = 0;
    char **keys = NULL;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) continue;    /* array part shown above; others skipped */
        if (nk == cap) {
            cap = cap ? cap * 2 : 16;
            char **k = realloc(keys, cap * sizeof *k);
            if (!k) { lua_pop(L, 1); break; }
            keys = k;
        }
        keys[nk++] = strdup(lua_tostring(L, -1));
    }
    if (nk) qsort(keys, nk, sizeof *keys, cmp_keys);
    for (size_t i = 0; i < nk; i++) {
        if (!keys[i]) continue;
        if (shown++) str_puts(b, ", ");
        str_puts(b, keys[i]);
        str_puts(b, "=");
        lua_getfield(L, idx, keys[i]);
        dump_value(L, lua_gettop(L), b, depth + 1);
        lua_pop(L, 1);
    }
    for (size_t i = 0; i < nk; i++) free(keys[i]);
    free(keys);
    str_puts(b, "}");
}

/* Renders the value at absolute index idx; strings inside tables are quoted. */
static void dump_value(lua_State *L, int idx, Str *b, int depth) {
    int t = lua_type(L, idx);
    if (t == LUA_TTABLE) {
        if (luaL_getmetafield(L, idx, "__tostring") == LUA_TNIL) { dump_table(L, idx, b, depth); return; }
        lua_pop(L, 1);
    }
    if (t == LUA_TSTRING && depth > 0) {
        str_puts(b, "\"");
        for (const char *p = lua_tostring(L, idx); *p; p++) {
            if (*p == '"' || *p == '\\') str_add(b, "\\", 1);
            if (*p == '\n') str_puts(b, "\\n");
            else str_add(b, p, 1);
        }
        str_puts(b, "\"");
        return;
    }
    size_t n;
    const char *s = luaL_tolstring(L, idx, &n);
    str_add(b, s, n);
    lua_pop(L, 1);
}

/* Prints the values from stack index `from` to the top through out (tab-separated), pops them. */
static void print_values(lua_State *L, int from, Out *out) {
    int top = lua_gettop(L);
    if (top < from) return;
    Str b = {0};
    for (int i = from; i <= top; i++) {
        dump_value(L, i, &b, 0);
        str_puts(&b, i < top ? "\t" : "\n");
    }
    if (b.p) out_write(out, OUT_STDOUT, b.p, b.n);
    free(b.p);
    lua_settop(L, from - 1);
}

bool shell_lua_incomplete(Session *s, const char *line) {
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    bool expr = *p == '=';
    if (expr) p++;
    else if (!strncmp(p, "lua", 3) && (p[3] == ' ' || p[3] == '\t' || p[3] == '\n')) p += 3;
    else return false;
    lua_State *L = shell_lua(s);
    if (!L) return false;
    char *code = al_asprintf("%s%s", expr ? "return " : "", p);
    if (!code) return false;
    int status = luaL_loadbuffer(L, code, strlen(code), "=lua");
    bool incomplete = false;
    if (status == LUA_ERRSYNTAX) {
        size_t n;
        const char *msg = lua_tolstring(L, -1, &n);
        incomplete = msg && n >= 5 && !strcmp(msg + n - 5, "<eof>");
    }
    lua_pop(L, 1);
    free(code);
    return incomplete;
}

int shell_lua_exec(Session *s, const char *code, bool expr, Out *parent) {
    lua_State *L = shell_lua(s);
    if (!L) return AL_ERR;
    LuaCtx *ctx = ctx_of(L);
    Out *saved = ctx->out;
    ctx->out = parent;
    int base = lua_gettop(L);
    char *ret = al_asprintf("return %s", code);
    if (!ret) { ctx->out = saved; return AL_ERR; }
    int status = luaL_loadbuffer(L, ret, strlen(ret), expr ? "=expr" : "=lua");
    free(ret);
    if (status != LUA_OK && !expr) {
        lua_pop(L, 1);
        status = luaL_loadbuffer(L, code, strlen(code), "=lua");
    }
    if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
    int rc = AL_OK;
    if (status != LUA_OK) rc = report_lua_error(s, L, parent);
    else print_values(L, base + 1, parent);
    lua_settop(L, base);
    ctx->out = saved;
    return rc;
}

int shell_lua_file(Session *s, const char *path, int argc, char **argv, Out *parent) {
    lua_State *L = shell_lua(s);
    if (!L) return AL_ERR;
    LuaCtx *ctx = ctx_of(L);
    Out *saved = ctx->out;
    ctx->out = parent;
    int base = lua_gettop(L);
    lua_createtable(L, argc, 1);
    lua_pushstring(L, path);
    lua_rawseti(L, -2, 0);
    for (int i = 0; i < argc; i++) { lua_pushstring(L, argv[i]); lua_rawseti(L, -2, i + 1); }
    lua_setglobal(L, "arg");
    int status = luaL_loadfile(L, path);
    if (status == LUA_OK) {
        for (int i = 0; i < argc; i++) lua_pushstring(L, argv[i]);
        status = docall(L, argc, 0);
    }
    int rc = status == LUA_OK ? AL_OK : report_lua_error(s, L, parent);
    lua_settop(L, base);
    ctx->out = saved;
    return rc;
}
