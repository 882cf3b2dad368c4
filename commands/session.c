/* session.c -- the session: loaded models by name (one current), the settings table, and the
 * hooks through which command groups release their state. */
#define _GNU_SOURCE
#include "session.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "resolve.h"
#include "synth.h"

/* ================================================================ new / free */

Session *session_new(void) {
    Session *s = al_calloc(1, sizeof *s, "the session");
    if (!s) return NULL;
    const Setting *st;
    for (size_t i = 0; (st = session_setting_at(i)); i++)
        if (session_set(s, st->name, st->def)) {
            al_err_ctx("the default of setting %s", st->name);
            session_free(s);
            return NULL;
        }
    return s;
}

void session_free(Session *s) {
    if (!s) return;
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
    free(s->last_plot);
    const Setting *st;
    for (size_t i = 0; (st = session_setting_at(i)); i++)
        if (st->type == SET_WORD || st->type == SET_FOLDER) free(*(char **)((char *)s + st->off));
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
    if (al_reserve(&s->models, &s->cap_models, s->nmodels + 1, sizeof *s->models, "the model list")) return AL_ERR;
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
    char *real = NULL;
    size_t n0 = strlen(path);
    if (n0 && path[n0 - 1] == '.' && (n0 == 1 || path[n0 - 2] == '/' || (path[n0 - 2] == '.' && (n0 == 2 || path[n0 - 3] == '/'))))
        if ((real = realpath(path, NULL))) path = real;   /* `load .`: the folder's own name, not "." */
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    char *s = strndup(path + b, n - b);
    free(real);
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

/* Opens a demo model from the cache, writing it there on first use. synth_write builds it in a
 * private staging folder beside dir (core/io/ckpt_write.h: mkdtemp, O_EXCL files) renamed into place
 * only when complete, so concurrent attnlab processes never see a half-written demo and no
 * predictable temporary name is used: the loser of the rename race opens the winner's. */
static int open_demo(const char *what, const SynthOptions *opt, Model **out) {
    char *cache = resolve_cache_dir();
    if (!cache) return al_err_ctx("load %s", what);
    /* the generator version is part of the folder name, so a changed generator never serves a stale demo */
    char *dir = al_asprintf("%s/%s-v%d", cache, what, SYNTH_VERSION);
    char *cfg = dir ? al_asprintf("%s/config.json", dir) : NULL;
    free(cache);
    int rc = AL_OK;
    if (!dir || !cfg) rc = AL_ERR;
    else if (!file_exists(cfg)) {
        rc = synth_write(opt, dir);
        if (rc == AL_ERR && file_exists(cfg)) { al_err_clear(); rc = AL_OK; }   /* another process won */
        else if (rc == AL_ERR) al_err_ctx("writing demo model %s into %s", what, dir);
    }
    if (rc == AL_OK) rc = model_open(dir, out);
    free(cfg);
    free(dir);
    return rc;
}

/* Adds " (did you mean 'x'?)" to a failed load's error when what is no file and close to a demo
 * name, an alias or a loaded model's name: after "'what' not found" when the message has it. */
static void load_suggest(const Session *s, const char *what) {
    char demos[16][32], near[160];
    OutSuggest sg = {0};
    for (size_t nd = 0; nd < 16 && synth_demo_at(nd, demos[nd], sizeof demos[nd]); nd++)
        out_suggest_try(&sg, what, demos[nd]);
    const char *alias, *target;
    for (size_t i = 0; resolve_alias_at(i, &alias, &target); i++) out_suggest_try(&sg, what, alias);
    for (size_t i = 0; i < s->nmodels; i++) out_suggest_try(&sg, what, s->models[i]->name);
    if (!sg.best) return;
    out_suggest_text(&sg, near, sizeof near);
    char *msg = al_strdup(al_errmsg());
    if (!msg) return;
    char key[320];
    snprintf(key, sizeof key, "'%s' not found", what);
    char *at = strstr(msg, key);
    size_t cut = at ? (size_t)(at - msg) + strlen(key) : strlen(msg);
    al_err("%.*s%s%s", (int)cut, msg, near, msg + cut);
    free(msg);
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
        if (rc != AL_OK && !file_exists(what)) load_suggest(s, what);
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

/* " (did you mean 'x'?)" for a name no loaded model has, or "". */
static const char *near_model(const Session *s, const char *name, char *buf, size_t cap) {
    OutSuggest sg = {0};
    for (size_t i = 0; i < s->nmodels; i++) out_suggest_try(&sg, name, s->models[i]->name);
    return out_suggest_text(&sg, buf, cap);
}

int session_use(Session *s, const char *name) {
    Model *m = session_find(s, name);
    char buf[512], near[160];
    if (!m) {
        loaded_names(s, buf, sizeof buf);
        return al_err("no model named '%s'%s (loaded: %s)", name, near_model(s, name, near, sizeof near), buf);
    }
    s->cur = m;
    return AL_OK;
}

int session_close(Session *s, const char *name) {
    char buf[512], near[160];
    size_t i = 0;
    while (i < s->nmodels && strcmp(s->models[i]->name, name)) i++;
    if (i == s->nmodels) {
        loaded_names(s, buf, sizeof buf);
        return al_err("no model named '%s' to close%s (loaded: %s)", name, near_model(s, name, near, sizeof near), buf);
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

int session_model_aside(Session *s, const char *what, Model **out) {
    if ((*out = session_find(s, what))) return AL_OK;
    Model *keep = s->cur;
    int rc = session_load(s, what, NULL, out);
    if (keep) s->cur = keep;
    return rc;
}

int session_model(Session *s, Model **out) {
    *out = s->cur;
    if (!s->cur) return al_err("no model loaded: load one first (load demo-r1, load PATH, or load org/name)");
    return AL_OK;
}

/* ================================================================ settings */

static const char *const format_choices[] = { "table", "csv", "json", NULL };
static const char *const plot_format_choices[] = { "png", "svg", "pdf", NULL };
static const char *const on_off_choices[] = { "on", "off", NULL };
static const char *const compute_choices[] = { "f32", "bf16", NULL };

static const Setting settings[] = {
    { .name = "tau", .type = SET_NUMBER, .off = offsetof(Session, tau), .min = 0, .max = 1,
      .def = "0.999", .example = "0.99", .help = "energy threshold of effective ranks, 0 < tau <= 1" },
    { .name = "format", .type = SET_FORMAT, .off = offsetof(Session, fmt), .choices = format_choices,
      .def = "table", .help = "how results print: table | csv | json" },
    { .name = "precision", .type = SET_INT, .off = offsetof(Session, prec), .min = 1, .max = 17,
      .def = "6", .help = "significant digits of numbers in results, 1-17" },
    { .name = "plot.size", .type = SET_SIZE, .off = offsetof(Session, plot_w), .off2 = offsetof(Session, plot_h),
      .min = 200, .min2 = 150, .max = 10000, .def = "1200x800", .example = "1200x800",   /* what PLplot draws */
      .help = "figure size WxH in pixels" },
    { .name = "plot.dir", .type = SET_FOLDER, .off = offsetof(Session, plot_dir), .def = ".",
      .example = "figures", .help = "folder figures are written to" },
    { .name = "plot.format", .type = SET_WORD, .off = offsetof(Session, plot_fmt), .choices = plot_format_choices,
      .def = "png", .help = "figure file type when a name has no extension: png | svg | pdf" },
    { .name = "csv.params", .type = SET_WORD, .off = offsetof(Session, csv_params), .choices = on_off_choices,
      .def = "off", .help = "on: CSV output ends with the model, settings and parameters as columns (sweeps concatenate)" },
    { .name = "compute", .type = SET_WORD, .off = offsetof(Session, compute), .choices = compute_choices,
      .def = "f32", .help = "forward-pass products: f32 (weights widened to float32) | bf16 (activations rounded to BF16; AMX tiles or vdpbf16ps)" },
};
#define NSETTINGS (sizeof settings / sizeof *settings)

const Setting *session_setting_at(size_t i) { return i < NSETTINGS ? &settings[i] : NULL; }

char *session_setting_help(const Setting *st) { return al_asprintf("%s (default %s)", st->help, st->def); }

static const Setting *find_setting(const char *key) {
    for (size_t i = 0; i < NSETTINGS; i++)
        if (!strcmp(settings[i].name, key)) return &settings[i];
    return NULL;
}

/* The field of setting st in session s. */
#define FIELD(s, T, off) ((T *)((char *)(s) + (off)))
#define CFIELD(s, T, off) ((const T *)((const char *)(s) + (off)))

/* "table, csv, json" */
static void choice_list(const char *const *c, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; c[i]; i++) n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", i ? ", " : "", c[i]);
}

/* Index of value in choices, -1 when absent. */
static int choice_index(const char *const *c, const char *value) {
    for (int i = 0; c[i]; i++)
        if (!strcmp(c[i], value)) return i;
    return -1;
}

/* Replaces an owned string setting. */
static int set_str(char **dst, const char *v) {
    char *c = al_strdup(v);
    if (!c) return AL_ERR;
    free(*dst);
    *dst = c;
    return AL_OK;
}

/* Parses value for st into s (the messages name the setting and what it accepts). */
static int setting_parse(Session *s, const Setting *st, const char *value) {
    const char *k = st->name;
    char *end, list[128];
    errno = 0;
    switch (st->type) {
    case SET_NUMBER: {
        double t = strtod(value, &end);
        if (!*value || *end || errno || !(t > st->min && t <= st->max))
            return al_err("set %s: '%s' is not a number in (%g, %g] (e.g. set %s %s)", k, value, st->min, st->max, k, st->example);
        *FIELD(s, double, st->off) = t;
        return AL_OK;
    }
    case SET_INT: {
        long p = strtol(value, &end, 10);
        if (!*value || *end || p < st->min || p > st->max)
            return al_err("set %s: '%s' is not an integer %.0f-%.0f", k, value, st->min, st->max);
        *FIELD(s, int, st->off) = (int)p;
        return AL_OK;
    }
    case SET_FORMAT: case SET_WORD: {
        int i = choice_index(st->choices, value);
        choice_list(st->choices, list, sizeof list);
        if (i < 0) {
            char near[96];
            OutSuggest sg = {0};
            for (size_t j = 0; st->choices[j]; j++) out_suggest_try(&sg, value, st->choices[j]);
            return al_err("set %s: '%s' is not one of %s%s", k, value, list, out_suggest_text(&sg, near, sizeof near));
        }
        if (st->type == SET_WORD) return set_str(FIELD(s, char *, st->off), value);
        *FIELD(s, out_format, st->off) = (out_format)out_format_parse(value);
        return AL_OK;
    }
    case SET_SIZE: {
        long w = strtol(value, &end, 10), h = 0;
        if (*end == 'x' || *end == 'X') h = strtol(end + 1, &end, 10);
        if (*end || w < st->min || h < st->min2 || w > st->max || h > st->max)
            return al_err("set %s: '%s' is not WxH in pixels, width %.0f-%.0f and height %.0f-%.0f (what figures can be drawn "
                          "at; e.g. set %s %s)", k, value, st->min, st->max, st->min2, st->max, k, st->example);
        *FIELD(s, int, st->off) = (int)w;
        *FIELD(s, int, st->off2) = (int)h;
        return AL_OK;
    }
    case SET_FOLDER:
        if (!*value) return al_err("set %s: give a folder (e.g. set %s %s)", k, k, st->example);
        if (al_mkdirs_here(value)) return al_err_ctx("set %s", k);    /* the rule of every command that writes */
        return set_str(FIELD(s, char *, st->off), value);
    }
    return al_err("set %s: unknown setting type", k);
}

/* " (did you mean 'x'?)" for an unknown setting, or "". */
static const char *near_setting(const char *key, char *buf, size_t cap) {
    OutSuggest sg = {0};
    for (size_t i = 0; i < NSETTINGS; i++) out_suggest_try(&sg, key, settings[i].name);
    return out_suggest_text(&sg, buf, cap);
}

int session_set(Session *s, const char *key, const char *value) {
    const Setting *st = find_setting(key);
    if (st) return setting_parse(s, st, value);
    char names[256], near[96];
    size_t n = 0;
    for (size_t i = 0; i < NSETTINGS; i++)
        n += (size_t)snprintf(names + n, n < sizeof names ? sizeof names - n : 0, "%s%s", i ? ", " : "", settings[i].name);
    return al_err("unknown setting '%s'%s (settings: %s)", key, near_setting(key, near, sizeof near), names);
}

char *session_get(const Session *s, const char *key) {
    const Setting *st = find_setting(key);
    if (!st) {
        char near[96];
        al_err("unknown setting '%s'%s (type set to list them)", key, near_setting(key, near, sizeof near));
        return NULL;
    }
    switch (st->type) {
    case SET_NUMBER: return al_asprintf("%g", *CFIELD(s, double, st->off));
    case SET_INT: return al_asprintf("%d", *CFIELD(s, int, st->off));
    case SET_FORMAT: return al_strdup(out_format_name(*CFIELD(s, out_format, st->off)));
    case SET_SIZE: return al_asprintf("%dx%d", *CFIELD(s, int, st->off), *CFIELD(s, int, st->off2));
    case SET_WORD: case SET_FOLDER: return al_strdup(*CFIELD(s, char *const, st->off));
    }
    return NULL;
}
