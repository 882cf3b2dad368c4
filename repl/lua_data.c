/* lua_data.c -- Lua tables as a command's keyword values: CSV files and joined words (lua_data.h). */
#define _GNU_SOURCE
#include "lua_data.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ================================================================ temporary files */

static char **tmp_files;
static size_t n_tmp, cap_tmp;

void lua_data_cleanup(void) {
    for (size_t i = 0; i < n_tmp; i++) {
        unlink(tmp_files[i]);
        free(tmp_files[i]);
    }
    free(tmp_files);
    tmp_files = NULL;
    n_tmp = cap_tmp = 0;
}

/* A new temporary CSV file, open for writing; its path in *path (kept in the list, not the caller's). */
static FILE *tmp_csv(const char **path) {
    const char *dir = getenv("TMPDIR");
    char *p = al_asprintf("%s/attnlab-lua-XXXXXX.csv", dir && *dir ? dir : "/tmp");
    if (!p) return NULL;
    int fd = mkstemps(p, 4);
    if (fd < 0 || al_reserve(&tmp_files, &cap_tmp, n_tmp + 1, sizeof *tmp_files, "temporary files")) {
        if (fd >= 0) { close(fd); unlink(p); }
        else al_err("cannot make a temporary file for a Lua table (%s); set TMPDIR", p);
        free(p);
        return NULL;
    }
    tmp_files[n_tmp++] = p;
    *path = p;
    FILE *f = fdopen(fd, "w");
    if (!f) { close(fd); al_err("cannot write the temporary file %s", p); }
    return f;
}

/* ================================================================ words */

static int add_word(Tokens *t, char *text, bool quoted) {
    if (!text) return AL_ERR;
    if (t->n >= ARGS_TOKENS_MAX) { free(text); return al_err("too many arguments"); }
    t->tok[t->n++] = (Token){ .text = text, .quoted = quoted };
    return AL_OK;
}

/* The numbers of the array at idx into a new (n) array (NaN where the value is nan). */
static int num_array(lua_State *L, int idx, const char *what, double **v, size_t *n) {
    size_t len = (size_t)lua_rawlen(L, idx);
    *n = len;
    *v = al_malloc3(len ? len : 1, 1, sizeof(double), "Lua numbers");
    if (!*v) return AL_ERR;
    for (size_t i = 0; i < len; i++) {
        lua_rawgeti(L, idx, (lua_Integer)i + 1);
        int isnum;
        (*v)[i] = lua_tonumberx(L, -1, &isnum);
        const char *tn = luaL_typename(L, -1);
        lua_pop(L, 1);
        if (!isnum) { free(*v); *v = NULL; return al_err("%s[%zu] is a %s, not a number", what, i + 1, tn); }
    }
    return AL_OK;
}

/* Writes one CSV cell: the value, or nothing for a gap / past the end. */
static void cell(FILE *f, const double *v, size_t n, size_t r, bool first) {
    if (!first) fputc(',', f);
    if (v && r < n && isfinite(v[r])) fprintf(f, "%.17g", v[r]);
}

/* A name as a header cell: in double quotes, "" for a quote (a line break becomes a space). */
static void header_name(FILE *f, const char *s, size_t i) {
    if (!s || !*s) { fprintf(f, "series %zu", i + 1); return; }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

/* ================================================================ series */

#define SERIES_MAX 16

typedef struct {
    double *x, *y, *e;
    size_t nx, ny, ne;
    char name[128], marker[32];
    int dash;
} LSeries;

/* Reads field `k` of the table at idx as numbers (absent: *v NULL). */
static int series_field(lua_State *L, int idx, const char *k, size_t i, double **v, size_t *n) {
    char what[64];
    *v = NULL;
    *n = 0;
    int ty = lua_getfield(L, idx, k);
    int rc = AL_OK;
    snprintf(what, sizeof what, "series[%zu].%s", i + 1, k);
    if (ty == LUA_TTABLE) rc = num_array(L, lua_gettop(L), what, v, n);
    else if (ty != LUA_TNIL) rc = al_err("%s is a %s; give a table of numbers", what, lua_typename(L, ty));
    lua_pop(L, 1);
    return rc;
}

/* One series table (at idx) into s: y required, x default 1..n, lengths checked. */
static int series_read(lua_State *L, int idx, size_t i, LSeries *s) {
    memset(s, 0, sizeof *s);
    if (!lua_istable(L, idx)) return al_err("series[%zu] is a %s; each series is a table {x = ..., y = ...}", i + 1, luaL_typename(L, idx));
    if (series_field(L, idx, "y", i, &s->y, &s->ny) || series_field(L, idx, "x", i, &s->x, &s->nx) ||
        series_field(L, idx, "yerr", i, &s->e, &s->ne))
        return AL_ERR;
    if (!s->y || !s->ny) return al_err("series[%zu] has no y values (y = {...})", i + 1);
    if (s->x && s->nx != s->ny) return al_err("series[%zu]: x has %zu value%s, y has %zu; they must have one length", i + 1, s->nx, al_s(s->nx), s->ny);
    if (s->e && s->ne != s->ny) return al_err("series[%zu]: yerr has %zu value%s, y has %zu; they must have one length", i + 1, s->ne, al_s(s->ne), s->ny);
    if (!s->x) {
        if (!(s->x = al_malloc3(s->ny, 1, sizeof(double), "series x"))) return AL_ERR;
        for (size_t r = 0; r < s->ny; r++) s->x[r] = (double)(r + 1);
        s->nx = s->ny;
    }
    lua_getfield(L, idx, "name");
    if (lua_isstring(L, -1)) snprintf(s->name, sizeof s->name, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_getfield(L, idx, "marker");
    if (lua_isstring(L, -1)) snprintf(s->marker, sizeof s->marker, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_getfield(L, idx, "dash");
    s->dash = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 0;
    lua_pop(L, 1);
    return AL_OK;
}

/* The CSV of the series: per series x<i>, its name, and yerr<i> when any series has errors. */
static int series_csv(const LSeries *s, size_t n, bool err, const char **path) {
    FILE *f = tmp_csv(path);
    if (!f) return AL_ERR;
    size_t rows = 0;
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%sx%zu,", i ? "," : "", i + 1);
        header_name(f, s[i].name, i);
        if (err) fprintf(f, ",yerr%zu", i + 1);
        if (s[i].ny > rows) rows = s[i].ny;
    }
    fputc('\n', f);
    for (size_t r = 0; r < rows; r++) {
        for (size_t i = 0; i < n; i++) {
            cell(f, s[i].x, s[i].nx, r, i == 0);
            cell(f, s[i].y, s[i].ny, r, false);
            if (err) cell(f, s[i].e, s[i].ne, r, false);
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0) return al_err("cannot write the temporary file %s", *path);
    return AL_OK;
}

/* The words of `series`: data FILE x .. y .. [yerr ..] [marker ..] [dash ..]. */
static int series_words(const LSeries *s, size_t n, bool err, const char *path, Tokens *t) {
    char xs[256] = "", ys[256] = "", es[256] = "", ms[512] = "", ds[128] = "";
    size_t w = err ? 3 : 2, kx = 0, ky = 0, ke = 0, km = 0, kd = 0;
    bool marker = false, dash = false;
    for (size_t i = 0; i < n; i++) {
        const char *sep = i ? "," : "";
        kx += (size_t)snprintf(xs + kx, sizeof xs - kx, "%s%zu", sep, i * w + 1);
        ky += (size_t)snprintf(ys + ky, sizeof ys - ky, "%s%zu", sep, i * w + 2);
        if (err) ke += (size_t)snprintf(es + ke, sizeof es - ke, "%s%zu", sep, i * w + 3);
        char dm[8];
        snprintf(dm, sizeof dm, "%zu", i % 6 + 1);
        km += (size_t)snprintf(ms + km, sizeof ms - km, "%s%s", sep, s[i].marker[0] ? s[i].marker : dm);
        kd += (size_t)snprintf(ds + kd, sizeof ds - kd, "%s%d", sep, s[i].dash > 0 ? s[i].dash : (int)(i % 8) + 1);
        marker |= s[i].marker[0] != 0;
        dash |= s[i].dash > 0;
    }
    int rc = add_word(t, al_strdup("data"), false) || add_word(t, al_strdup(path), true) ||
             add_word(t, al_strdup("x"), false) || add_word(t, al_strdup(xs), true) ||
             add_word(t, al_strdup("y"), false) || add_word(t, al_strdup(ys), true);
    if (!rc && err) rc = add_word(t, al_strdup("yerr"), false) || add_word(t, al_strdup(es), true);
    if (!rc && marker) rc = add_word(t, al_strdup("marker"), false) || add_word(t, al_strdup(ms), true);
    if (!rc && dash) rc = add_word(t, al_strdup("dash"), false) || add_word(t, al_strdup(ds), true);
    return rc ? AL_ERR : AL_OK;
}

static int series_arg(lua_State *L, int idx, Tokens *t) {
    size_t n = (size_t)lua_rawlen(L, idx);
    if (!n) return al_err("series is empty; give {{x = {...}, y = {...}}, ...}");
    if (n > SERIES_MAX) return al_err("series: at most %d series in one figure (got %zu)", SERIES_MAX, n);
    LSeries s[SERIES_MAX];
    memset(s, 0, sizeof s);
    int rc = AL_OK;
    bool err = false;
    for (size_t i = 0; i < n && !rc; i++) {
        lua_rawgeti(L, idx, (lua_Integer)i + 1);
        rc = series_read(L, lua_gettop(L), i, &s[i]);
        lua_pop(L, 1);
        err |= s[i].e != NULL;
    }
    const char *path = NULL;
    if (!rc) rc = series_csv(s, n, err, &path);
    if (!rc) rc = series_words(s, n, err, path, t);
    for (size_t i = 0; i < n; i++) { free(s[i].x); free(s[i].y); free(s[i].e); }
    return rc;
}

/* ================================================================ other tables */

/* Rows of numbers as a CSV grid; the path is the value. */
static int grid_arg(lua_State *L, int idx, const char *key, Tokens *t) {
    const char *path;
    size_t n = (size_t)lua_rawlen(L, idx), cols = 0;
    FILE *f = tmp_csv(&path);
    int rc = f ? AL_OK : AL_ERR;
    for (size_t i = 0; i < n && !rc; i++) {
        char what[64];
        double *v;
        size_t m;
        snprintf(what, sizeof what, "%s[%zu]", key, i + 1);
        lua_rawgeti(L, idx, (lua_Integer)i + 1);
        rc = lua_istable(L, -1) ? num_array(L, lua_gettop(L), what, &v, &m)
                                : al_err("%s is a %s; a matrix is a table of rows of numbers", what, luaL_typename(L, -1));
        lua_pop(L, 1);
        if (rc) break;
        if (i == 0) cols = m;
        if (m != cols || !m) rc = al_err("%s has %zu value%s, row 1 has %zu; every row needs the same length", what, m, al_s(m), cols);
        for (size_t j = 0; !rc && j < m; j++) cell(f, v, m, j, j == 0);
        if (!rc) fputc('\n', f);
        free(v);
    }
    if (f && fclose(f) != 0 && !rc) rc = al_err("cannot write the temporary file %s", path);
    if (!rc) rc = add_word(t, al_strdup(key), false) || add_word(t, al_strdup(path), true) ? AL_ERR : AL_OK;
    return rc;
}

/* An array of strings joined by "; ", or of numbers by ","; the joined text is the value. */
static int list_arg(lua_State *L, int idx, const char *key, Tokens *t) {
    size_t n = (size_t)lua_rawlen(L, idx), len = 0, cap = 0;
    char *buf = NULL;
    bool strings = false;
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, idx, (lua_Integer)i + 1);
        if (i == 0) strings = lua_type(L, -1) == LUA_TSTRING;
        const char *tn = luaL_typename(L, -1);
        bool ok = strings ? lua_type(L, -1) == LUA_TSTRING : lua_type(L, -1) == LUA_TNUMBER;
        size_t sl = 0;
        const char *sv = ok ? lua_tolstring(L, -1, &sl) : NULL;
        if (!ok || al_reserve(&buf, &cap, len + sl + 3, 1, "a list")) {
            lua_pop(L, 1);
            free(buf);
            return ok ? AL_ERR : al_err("%s[%zu] is a %s; the list holds %s", key, i + 1, tn, strings ? "strings" : "numbers");
        }
        if (i) { memcpy(buf + len, strings ? "; " : ",", strings ? 2 : 1); len += strings ? 2 : 1; }
        memcpy(buf + len, sv, sl);
        len += sl;
        buf[len] = '\0';
        lua_pop(L, 1);
    }
    if (!buf) return al_err("%s is an empty table", key);
    if (add_word(t, al_strdup(key), false)) { free(buf); return AL_ERR; }
    return add_word(t, buf, true);
}

int lua_data_words(lua_State *L, const char *key, int idx, Tokens *t) {
    idx = lua_absindex(L, idx);
    int top = lua_gettop(L);
    if (!strcmp(key, "series")) {
        int rc = series_arg(L, idx, t);
        lua_settop(L, top);
        return rc;
    }
    lua_rawgeti(L, idx, 1);
    int first = lua_type(L, -1);
    lua_pop(L, 1);
    int rc = first == LUA_TTABLE ? grid_arg(L, idx, key, t)
           : first == LUA_TSTRING || first == LUA_TNUMBER ? list_arg(L, idx, key, t)
           : al_err("%s: a table here is a list of numbers or strings, or rows of numbers", key);
    lua_settop(L, top);
    return rc;
}
