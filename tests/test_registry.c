/* test_registry.c -- walks the whole command table and fails if any command or sub-command lacks
 * a summary, long help, a handler, a help line or completion hint per parameter, defaults that
 * parse, or a Lua binding in module attn; checks that `help` lists every command and that
 * `help CMD [SUB]` prints each generated usage line. */
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "check.h"
#include "lua_shell.h"
#include "registry.h"
#include "session.h"
#include "shell.h"
#include "test_shell_util.h"

int main(void) {
    const Command *c;
    const CommandGroup *g;
    size_t ncmd = 0;

    /* ---- every entry is complete (cmd_validate walks sub-commands too), the front end's too */
    CHECK_OK(shell_register());
    for (size_t i = 0; (c = cmd_at(i, &g)); i++, ncmd++) {
        CHECK(g->title && *g->title, "group of '%s' has no title", c->name);
        CHECK_OK(cmd_validate(c, NULL));
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(cmd_at(j, NULL)->name, c->name), "command '%s' is declared twice", c->name);
    }
    CHECK(ncmd >= 10, "only %zu commands in the table", ncmd);
    CHECK(cmd_find("help") && cmd_find("load") && cmd_find("info") && cmd_find("lua") && cmd_find("quit"),
          "base commands missing");

    /* cmd_validate can fail: a broken entry is caught */
    static const Param bad_kw[] = { { .name = "layer", .type = ARG_INT, .help = "x" }, {0} };
    static const Param bad_def[] = { { .name = "n", .type = ARG_INT, .def = "x", .comp = COMP_NONE, .help = "x" }, {0} };
    static const Command bad[] = {
        { .name = "nohelp", .summary = "s", .fn = (cmd_fn)1 },
        { .name = "nocomp", .summary = "s", .help = "h", .kw = bad_kw, .fn = (cmd_fn)1 },
        { .name = "baddef", .summary = "s", .help = "h", .kw = bad_def, .fn = (cmd_fn)1 },
        { .name = "nofn", .summary = "s", .help = "h" },
    };
    CHECK_ERR(cmd_validate(&bad[0], NULL), "no long help");
    CHECK_ERR(cmd_validate(&bad[1], NULL), "no completion hint");
    CHECK_ERR(cmd_validate(&bad[2], NULL), "does not parse");
    CHECK_ERR(cmd_validate(&bad[3], NULL), "handler");

    /* ---- a Lua binding per top-level command, with distinct names */
    Session *s = session_new();
    CHECK(s != NULL, "session_new: %s", al_errmsg());
    lua_State *L = shell_lua(s);
    CHECK(L != NULL, "shell_lua: %s", al_errmsg());
    char name[80], other[80];
    for (size_t i = 0; L && (c = cmd_at(i, NULL)); i++) {
        shell_lua_name(c, name, sizeof name);
        CHECK(strcmp(name, "run") && strcmp(name, "commands") && strcmp(name, "quiet"), "'%s' would hide attn.%s", c->name, name);
        for (size_t j = 0; j < i; j++) {
            shell_lua_name(cmd_at(j, NULL), other, sizeof other);
            CHECK(strcmp(name, other), "commands '%s' and '%s' share attn.%s", c->name, cmd_at(j, NULL)->name, name);
        }
        lua_getglobal(L, "attn");
        lua_getfield(L, -1, name);
        CHECK(lua_type(L, -1) == LUA_TFUNCTION, "command '%s' has no Lua binding attn.%s", c->name, name);
        lua_pop(L, 2);
    }
    lua_getglobal(L, "attn");
    lua_getfield(L, -1, "run");
    CHECK(lua_type(L, -1) == LUA_TFUNCTION, "attn.run missing");
    lua_pop(L, 2);

    /* ---- help lists every command; help CMD [SUB] prints the generated usage */
    Capture *cap = calloc(1, sizeof *cap);
    CHECK_OK(run(s, cap, "help"));
    for (size_t i = 0; (c = cmd_at(i, NULL)); i++) {
        char want[128];
        snprintf(want, sizeof want, "  %s ", c->name);
        CHECK(strstr(cap->buf, want) != NULL, "help does not list '%s'", c->name);
    }
    for (size_t i = 0; (c = cmd_at(i, NULL)); i++) {
        char line[160];
        snprintf(line, sizeof line, "help %s", c->name);
        CHECK_OK(run(s, cap, line));
        char *u = cmd_usage(c, NULL);
        CHECK(u && strstr(cap->buf, u), "help %s lacks its usage '%s'", c->name, u ? u : "?");
        free(u);
        for (const Command *sc = c->sub; sc && sc->name; sc++) {
            snprintf(line, sizeof line, "help %s %s", c->name, sc->name);
            CHECK_OK(run(s, cap, line));
            u = cmd_usage(sc, c->name);
            CHECK(u && strstr(cap->buf, u), "help %s %s lacks its usage '%s'", c->name, sc->name, u ? u : "?");
            free(u);
        }
    }
    CHECK(run(s, cap, "help nosuch") == AL_ERR && strstr(cap->buf, "no command 'nosuch'"), "help nosuch: %s", cap->buf);

    free(cap);
    session_free(s);
    return check_done();
}
