/* session.h -- the one session struct every handler gets: loaded models (one current), settings,
 * and opaque per-subsystem state owned by the command groups.
 *
 * Subsystem state: everything the command groups keep between commands (tokenizer and forward
 * pass, calibration, the FaRR cache, kept comparisons, pending transformations) lives in the
 * workspace behind s->ws (commands/workspace.h), created on first use and released through one
 * SessionHook. Hooks remain for other owners (session_hook_add).
 */
#ifndef AL_SESSION_H
#define AL_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include "model.h"
#include "out.h"

typedef struct Session Session;

typedef struct SessionHook {
    const char *name;
    void (*on_free)(Session *s);                    /* release the group's state (may be NULL) */
    void (*on_model_close)(Session *s, Model *m);   /* m is about to be freed (may be NULL) */
} SessionHook;

#define SESSION_MAX_HOOKS 16

struct Session {
    /* ---- models: several loaded at once, each with a session name (Model.name) */
    Model **models;            /* (nmodels) owned */
    size_t nmodels, cap_models;
    Model *cur;                /* the current model (one of models) or NULL */

    /* ---- settings (`set KEY VALUE`; `set` alone lists them) */
    double tau;                /* effective-rank energy threshold, default 0.999 */
    out_format fmt;            /* how results print: table | csv | json */
    int prec;                  /* significant digits for numbers in results (default 6) */
    int plot_w, plot_h;        /* plot.size WxH in pixels, default 1200x800 */
    char *plot_dir;            /* plot.dir: folder for figures, default "." (owned) */
    char *plot_fmt;            /* plot.format: png | svg | pdf, default png (owned) */

    /* ---- what commands keep between commands (commands/workspace.h), freed through its hook */
    struct Workspace *ws;

    /* ---- front-end state (repl/) */
    struct lua_State *L;       /* the Lua state with module `attn` (created on first use) */
    bool interactive;          /* stdin is a terminal and the prompt is shown */
    bool want_exit;            /* `quit` ran (also from Lua) */
    int exit_code;
    int depth;                 /* nesting of `run` (guards against run loops) */
    bool err_reported;         /* the last failure was already printed (Lua traceback, file:line:) */

    const SessionHook *hooks[SESSION_MAX_HOOKS];
    size_t nhooks;
};

/* A fresh session with default settings and no model. NULL + error on failure. */
Session *session_new(void);
/* Runs every hook's on_free, closes all models, frees the Lua state. NULL is fine. */
void session_free(Session *s);
/* Registers a hook once (a second call with the same pointer is ignored). */
int session_hook_add(Session *s, const SessionHook *h);

/* ---- models */

/* Loads what the user typed after `load`: a demo name (synth_demo_name: written into
 * <cache>/NAME on first use), else resolve_model() + model_open(). `as` is the session name
 * (NULL: the demo name, or the folder's base name, made unique with -2, -3, ...). The model
 * becomes current. *out (may be NULL) receives it. */
int session_load(Session *s, const char *what, const char *as, Model **out);
/* Adds an already opened model under name (or its current name) and makes it current; the
 * session takes ownership. A name already in use is an error. */
int session_add_model(Session *s, Model *m, const char *name);
/* Model by session name, NULL when none. */
Model *session_find(const Session *s, const char *name);
/* Makes the named model current; error listing loaded names when unknown. */
int session_use(Session *s, const char *name);
/* Closes the named model (hooks' on_model_close first); if it was current, the most recently
 * loaded remaining model becomes current. */
int session_close(Session *s, const char *name);
/* The current model, or an error telling the user to `load` one. */
int session_model(Session *s, Model **out);

/* ---- settings */

/* Sets a setting from text; errors name the setting and the accepted values. */
int session_set(Session *s, const char *key, const char *value);
/* Setting value as text (caller frees), NULL + error for an unknown key. */
char *session_get(const Session *s, const char *key);
/* The i-th setting name and its one-line help; false past the end (for `set`, completion). */
bool session_setting_at(size_t i, const char **name, const char **help);

#endif
