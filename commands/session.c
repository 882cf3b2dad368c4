/* session.c -- the session: loaded models by name (one current), the settings table, and the
 * hooks through which command groups release their state. */
#define _GNU_SOURCE
#include "session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "resolve.h"
#include "synth.h"

void shell_lua_free(Session *s);   /* repl/lua_shell.c */

/* ================================================================ new / free */

Session *session_new(void) {
    Session *s = al_calloc(1, sizeof *s, "the session");
    if (!s) return NULL;
    s->tau = 0.999;
    s->fmt = FMT_TABLE;
    s->prec = 6;
    s->plot_w = 1200;
    s->plot_h = 800;
    s->plot_dir = al_strdup(".");
    s->plot_fmt = al_strdup("png");
    if (!s->plot_dir || !s->plot_fmt) { session_free(s); return NULL; }
    return s;
}

void session_free(Session *s) {
    if (!s) return;
    shell_lua_free(s);
    while (s->nmodels) {
        Model *m = s->models[s->nmodels - 1];
        for (size_t i = 0; i < s->nhooks; i++)
            if (s->hooks[i]->on_model_close) s->hooks[i]->on_model_close(s, m);
        model_free(m);
        s->nmodels--;
    }
    for (size_t i = s->nhooks; i-- > 0;)
        if (s->hooks[i]->on_free) s->hooks[i]->on_free(s);
    free(s->models);
    free(s->plot_dir);
    free(s->plot_fmt);
    free(s);
}

int session_hook_add(Session *s, const SessionHook *h) {
    for (size_t i = 0; i < s->nhooks; i++)
        if (s->hooks[i] == h) return AL_OK;
    if (s->nhooks >= SESSION_MAX_HOOKS)
        return al_err("too many session hooks (at most %d; raise SESSION_MAX_HOOKS)", SESSION_MAX_HOOKS);
    s->hooks[s->nhooks++] = h;
    return AL_OK;
}

/* ================================================================ models */

Model *session_find(const Session *s, const char *name) {
    for (size_t i = 0; i < s->nmodels; i++)
        if (s->models[i]->name && !strcmp(s->models[i]->name, name)) return s->models[i];
    return NULL;
}

/* "a, b, c" of the loaded names (or "none"). */
static void loaded_names(const Session *s, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < s->nmodels; i++)
        n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", i ? ", " : "", s->models[i]->name);
    if (!s->nmodels) snprintf(buf, cap, "none");
}

int session_add_model(Session *s, Model *m, const char *name) {
    const char *nm = name ? name : m->name;
    if (!nm || !*nm) return al_err("a model needs a name");
    if (session_find(s, nm)) return al_err("a model named '%s' is already loaded (close %s, or load ... as OTHER)", nm, nm);
    if (s->nmodels == s->cap_models) {
        size_t cap = s->cap_models ? s->cap_models * 2 : 4;
        Model **v = realloc(s->models, cap * sizeof *v);
        if (!v) return al_err("out of memory adding a model");
        s->models = v;
        s->cap_models = cap;
    }
    if (nm != m->name) {
        char *c = al_strdup(nm);
        if (!c) return AL_ERR;
        free(m->name);
        m->name = c;
    }
    s->models[s->nmodels++] = m;
    s->cur = m;
    return AL_OK;
}

/* The base name of a path without a trailing '/' or a .safetensors / .bin extension (caller frees). */
static char *base_name(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    char *s = strndup(path + b, n - b);
    if (!s) { al_err("out of memory"); return NULL; }
    for (const char *ext = ".safetensors"; ext; ext = strcmp(ext, ".bin") ? ".bin" : NULL) {
        size_t l = strlen(s), e = strlen(ext);
        if (l > e && !strcmp(s + l - e, ext)) { s[l - e] = 0; break; }
    }
    return s;
}

/* A name not yet used: base, base-2, base-3, ... (caller frees). */
static char *unique_name(const Session *s, const char *base) {
    if (!session_find(s, base)) return al_strdup(base);
    for (int k = 2; k < 10000; k++) {
        char *c = al_asprintf("%s-%d", base, k);
        if (!c || !session_find(s, c)) return c;
        free(c);
    }
    al_err("no free name for '%s'", base);
    return NULL;
}

static bool file_exists(const char *p) { struct stat sb; return stat(p, &sb) == 0; }

/* Removes a flat folder (the files in it, then the folder); best effort. */
static void remove_flat_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = al_asprintf("%s/%s", dir, e->d_name);
        if (p) unlink(p);
        free(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* Opens a demo model from the cache, writing it there on first use: into a private temporary
 * folder renamed into place, so concurrent attnlab processes never see a half-written demo
 * (the loser of the rename race drops its copy and opens the winner's). */
static int open_demo(const char *what, const SynthOptions *opt, Model **out) {
    char *cache = resolve_cache_dir();
    if (!cache) return al_err_ctx("load %s", what);
    /* the generator version is part of the folder name, so a changed generator never serves a stale demo */
    char *dir = al_asprintf("%s/%s-v%d", cache, what, SYNTH_VERSION);
    char *tmp = al_asprintf("%s/.%s.tmp.%ld", cache, what, (long)getpid());
    char *cfg = dir ? al_asprintf("%s/config.json", dir) : NULL;
    free(cache);
    int rc = AL_OK;
    if (!dir || !tmp || !cfg) rc = AL_ERR;
    else if (!file_exists(cfg)) {
        remove_flat_dir(tmp);
        rc = synth_write(opt, tmp);
        if (rc) al_err_ctx("writing demo model %s into %s", what, tmp);
        else if (rename(tmp, dir) != 0) {
            int e = errno;
            remove_flat_dir(tmp);
            if (!file_exists(cfg))
                rc = al_err("cannot move the demo model into %s: %s (remove that folder and load %s again)",
                            dir, strerror(e), what);
        }
        if (rc) remove_flat_dir(tmp);
    }
    if (rc == AL_OK) rc = model_open(dir, out);
    free(cfg);
    free(tmp);
    free(dir);
    return rc;
}

int session_load(Session *s, const char *what, const char *as, Model **out) {
    SynthOptions opt;
    Model *m = NULL;
    char *path = NULL, *base = NULL, *name = NULL;
    int rc;
    if (out) *out = NULL;
    if (as && session_find(s, as))
        return al_err("a model named '%s' is already loaded (close %s first, or pick another name after 'as')", as, as);
    bool demo = synth_demo_name(what, &opt);
    if (demo) rc = open_demo(what, &opt, &m);
    else {
        rc = resolve_model(what, &path);
        if (rc == AL_OK) rc = model_open(path, &m);
    }
    if (rc == AL_OK) {
        /* the session name: as given, the demo name, a path's base name, or org/NAME's NAME */
        base = as ? al_strdup(as) : demo || !file_exists(what) ? base_name(what) : base_name(path ? path : what);
        name = base ? (as ? al_strdup(base) : unique_name(s, base)) : NULL;
        rc = name ? session_add_model(s, m, name) : AL_ERR;
    }
    if (rc != AL_OK) model_free(m);
    else if (out) *out = m;
    free(path);
    free(base);
    free(name);
    return rc;
}

int session_use(Session *s, const char *name) {
    Model *m = session_find(s, name);
    char buf[512];
    if (!m) {
        loaded_names(s, buf, sizeof buf);
        return al_err("no model named '%s' (loaded: %s)", name, buf);
    }
    s->cur = m;
    return AL_OK;
}

int session_close(Session *s, const char *name) {
    char buf[512];
    size_t i = 0;
    while (i < s->nmodels && strcmp(s->models[i]->name, name)) i++;
    if (i == s->nmodels) {
        loaded_names(s, buf, sizeof buf);
        return al_err("no model named '%s' to close (loaded: %s)", name, buf);
    }
    Model *m = s->models[i];
    for (size_t k = 0; k < s->nhooks; k++)
        if (s->hooks[k]->on_model_close) s->hooks[k]->on_model_close(s, m);
    memmove(s->models + i, s->models + i + 1, (s->nmodels - i - 1) * sizeof *s->models);
    s->nmodels--;
    if (s->cur == m) s->cur = s->nmodels ? s->models[s->nmodels - 1] : NULL;
    model_free(m);
    return AL_OK;
}

int session_model(Session *s, Model **out) {
    *out = s->cur;
    if (!s->cur) return al_err("no model loaded: load one first (load demo-r1, load PATH, or load org/name)");
    return AL_OK;
}

/* ================================================================ settings */

typedef struct {
    const char *name;
    const char *help;
} Setting;

static const Setting settings[] = {
    { "tau", "energy threshold of effective ranks, 0 < tau <= 1 (default 0.999)" },
    { "format", "how results print: table | csv | json (default table)" },
    { "precision", "significant digits of numbers in results, 1-17 (default 6)" },
    { "plot.size", "figure size WxH in pixels (default 1200x800)" },
    { "plot.dir", "folder figures are written to (default .)" },
    { "plot.format", "figure file type when a name has no extension: png | svg | pdf (default png)" },
    { NULL, NULL }
};

bool session_setting_at(size_t i, const char **name, const char **help) {
    if (i >= sizeof settings / sizeof *settings - 1) return false;
    if (name) *name = settings[i].name;
    if (help) *help = settings[i].help;
    return true;
}

/* Replaces an owned string setting. */
static int set_str(char **dst, const char *v) {
    char *c = al_strdup(v);
    if (!c) return AL_ERR;
    free(*dst);
    *dst = c;
    return AL_OK;
}

int session_set(Session *s, const char *key, const char *value) {
    char *end;
    if (!strcmp(key, "tau")) {
        errno = 0;
        double t = strtod(value, &end);
        if (!*value || *end || errno || !(t > 0 && t <= 1))
            return al_err("set tau: '%s' is not a number in (0, 1] (e.g. set tau 0.99)", value);
        s->tau = t;
        return AL_OK;
    }
    if (!strcmp(key, "format")) {
        int f = out_format_parse(value);
        if (f < 0) return al_err("set format: '%s' is not one of table, csv, json", value);
        s->fmt = (out_format)f;
        return AL_OK;
    }
    if (!strcmp(key, "precision")) {
        long p = strtol(value, &end, 10);
        if (!*value || *end || p < 1 || p > 17)
            return al_err("set precision: '%s' is not an integer 1-17", value);
        s->prec = (int)p;
        return AL_OK;
    }
    if (!strcmp(key, "plot.size")) {
        long w = strtol(value, &end, 10), h = 0;
        if (*end == 'x' || *end == 'X') h = strtol(end + 1, &end, 10);
        if (*end || w < 16 || h < 16 || w > 20000 || h > 20000)
            return al_err("set plot.size: '%s' is not WxH in pixels, 16-20000 each (e.g. set plot.size 1200x800)", value);
        s->plot_w = (int)w;
        s->plot_h = (int)h;
        return AL_OK;
    }
    if (!strcmp(key, "plot.dir")) {
        if (!*value) return al_err("set plot.dir: give a folder (e.g. set plot.dir figures)");
        return set_str(&s->plot_dir, value);
    }
    if (!strcmp(key, "plot.format")) {
        if (strcmp(value, "png") && strcmp(value, "svg") && strcmp(value, "pdf"))
            return al_err("set plot.format: '%s' is not one of png, svg, pdf", value);
        return set_str(&s->plot_fmt, value);
    }
    char names[256];
    size_t n = 0;
    for (size_t i = 0; settings[i].name; i++)
        n += (size_t)snprintf(names + n, n < sizeof names ? sizeof names - n : 0, "%s%s", i ? ", " : "", settings[i].name);
    return al_err("unknown setting '%s' (settings: %s)", key, names);
}

char *session_get(const Session *s, const char *key) {
    if (!strcmp(key, "tau")) return al_asprintf("%g", s->tau);
    if (!strcmp(key, "format")) return al_strdup(out_format_name(s->fmt));
    if (!strcmp(key, "precision")) return al_asprintf("%d", s->prec);
    if (!strcmp(key, "plot.size")) return al_asprintf("%dx%d", s->plot_w, s->plot_h);
    if (!strcmp(key, "plot.dir")) return al_strdup(s->plot_dir);
    if (!strcmp(key, "plot.format")) return al_strdup(s->plot_fmt);
    al_err("unknown setting '%s' (type set to list them)", key);
    return NULL;
}
