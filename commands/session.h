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

    /* ---- settings (`set KEY VALUE`; `set` alone lists them): names, bounds and defaults are in
       the settings table of session.c */
    double tau;                /* tau: effective-rank energy threshold */
    out_format fmt;            /* format: how results print (table | csv | json) */
    int prec;                  /* precision: significant digits for numbers in results */
    int plot_w, plot_h;        /* plot.size WxH in pixels */
    char *plot_dir;            /* plot.dir: folder for figures (owned) */
    char *plot_fmt;            /* plot.format: png | svg | pdf (owned) */
    char *csv_params;          /* csv.params: on | off -- settings and parameters as CSV columns (owned) */
    char *compute;             /* compute: f32 | bf16, the forward pass's products (core/linalg/matmul.h; owned) */

    /* ---- what commands keep between commands (commands/workspace.h), freed through its hook */
    struct Workspace *ws;
    char *last_plot;           /* the last figure's command line, as `replot` re-runs it (owned; NULL: none) */

    /* ---- the front end */
    void *front;               /* the front end's own state (repl/: the Lua state, `quit`, `run`
                                  nesting), opaque here; it registers a SessionHook to free it */
    bool interactive;          /* a person at a terminal sees the prompt (plots may open windows) */

    const SessionHook *hooks[SESSION_MAX_HOOKS];
    size_t nhooks;
};

/* A fresh session with the settings at their defaults (from the settings table) and no model.
 * NULL + error on failure. */
Session *session_new(void);
/* Closes all models (hooks' on_model_close first), then runs every hook's on_free, newest
 * first (the front end's state goes this way too). NULL is fine. */
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
/* A loaded model by session name, else `what` loaded (as `load` does) WITHOUT making it current:
 * for commands that read several models side by side (`ranks ... model NAME`, `diff ranks`,
 * `plot ranks-by-layer ... models A,B`). The model stays loaded under its session name. */
int session_model_aside(Session *s, const char *what, Model **out);
/* The current model, or an error telling the user to `load` one. */
int session_model(Session *s, Model **out);

/* ---- settings: ONE table in session.c; `set`, `set KEY`, the listing, completion and the
   defaults of session_new all come from it */

typedef enum {
    SET_NUMBER,   /* double in (min, max]                              (tau) */
    SET_INT,      /* int in [min, max]                                 (precision) */
    SET_FORMAT,   /* out_format, one of .choices                       (format) */
    SET_WORD,     /* owned string, one of .choices                     (plot.format) */
    SET_SIZE,     /* "WxH": W in [min, max], H in [min2, max]          (plot.size) */
    SET_FOLDER    /* owned string, not empty                           (plot.dir) */
} setting_type;

typedef struct Setting {
    const char *name;             /* as typed after `set` */
    setting_type type;
    size_t off, off2;             /* offsetof(Session, field); SET_SIZE: off2 is the height's */
    double min, max;              /* bounds (see the types) */
    double min2;                  /* SET_SIZE: the height's minimum */
    const char *const *choices;   /* SET_FORMAT, SET_WORD: NULL-terminated */
    const char *def;              /* the default, as typed */
    const char *example;          /* a value for messages and completion ("0.99", "figures") */
    const char *help;             /* one line; the listing adds " (default DEF)" */
} Setting;

/* Sets a setting from text; errors name the setting and the accepted values. */
int session_set(Session *s, const char *key, const char *value);
/* Setting value as text (caller frees), NULL + error for an unknown key. */
char *session_get(const Session *s, const char *key);
/* The i-th setting of the table; NULL past the end. */
const Setting *session_setting_at(size_t i);
/* Its help line with the default: "energy threshold ... (default 0.999)" (caller frees). */
char *session_setting_help(const Setting *st);

#endif
