/* xform.h -- transformations: what `truncate`, `convert mla`, `convert tpa` and `kvsvd learn`
 * leave in the session, behind one interface, so the verbs `export`, `check` and `kv-cache` work
 * on any of them without knowing the methods.
 *
 * A method describes its kind once (in its command group file) and adds a transformation after
 * the command succeeds:
 *     const XformKind cmd_tpa_xform = { .name = "convert tpa", .export_to = tpa_xf_export,
 *         .check = tpa_xf_check, .kv_row = tpa_xf_kv_row, .describe = tpa_xf_describe,
 *         .free = tpa_xf_free, .owns_dir = tpa_is_export, .check_dir = tpa_xf_check_dir };
 *     xform_add(s, &cmd_tpa_xform, m, result);      -- the session takes result over
 * The session keeps them newest first (in the workspace, workspace.h), each with the command line
 * that made it (cmd_running). A newer transformation of the same kind and source replaces the
 * older one in the list and keeps it underneath (Xform.replaced), so the list is a stack per kind:
 * `undo` (xform_undo) pops the newest transformation of a model and the one it replaced stands
 * again; `transforms` lists them; `save session` writes their commands. Closing the source drops
 * them. `export` and `check` act on the newest transformation of the current model (check: the
 * newest that can be checked); `kv-cache` lists a row for each (oldest first, as they were made). */
#ifndef AL_XFORM_H
#define AL_XFORM_H

#include <stdbool.h>
#include <stddef.h>
#include "forward.h"
#include "registry.h"
#include "session.h"
#include "tensor.h"

typedef struct Xform Xform;

/* What a kv-cache row needs from the model: values cached per token per layer as loaded, bytes per
 * value, layers; the session (kinds whose state lives in the workspace, such as the FaRR working
 * copy, read it there). */
typedef struct {
    size_t before, bytes, layers;
    Session *s;
    size_t part;           /* which row of a kind that gives several (XformKvRow.more): 0, 1, ... */
} XformKvCtx;

/* A kv-cache row: scheme name, values per token per layer (a mean over layers that differ may be
 * fractional: kept exact, the bytes are computed from it), attention parameters per layer. */
typedef struct {
    char scheme[384];
    double values;
    size_t params;
    bool more;             /* another row follows (kv_row again with part + 1): KQ-SVD, one per learned method */
} XformKvRow;

typedef struct XformKind {
    const char *name;      /* the command that makes it ("convert tpa") */
    /* `export DIR ...` (keywords dir, format, dtype, shard-mb, force) */
    int (*export_to)(Session *s, const Xform *x, const Args *a, Out *out);
    /* `check` with no folder (keywords source, tokens, to); NULL: it cannot be checked */
    int (*check)(Session *s, const Xform *x, const Args *a, Out *out);
    /* its `kv-cache` row; false: none */
    bool (*kv_row)(const Xform *x, const XformKvCtx *c, XformKvRow *row);
    /* one line saying what it is ("convert tpa of d: form a, R_K 2, R_V 2") */
    void (*describe)(const Xform *x, char *buf, size_t cap);
    void (*free)(void *data);                          /* NULL: data is not owned */
    /* false when the state it stands for is gone (e.g. `calibrate` dropped learned projections);
       NULL: always there */
    bool (*alive)(Session *s, const Xform *x);
    /* `check DIR`: whether DIR is an export of this kind, and checking it against its source
       (keywords source, tokens, to); NULL: no export folder to check */
    bool (*owns_dir)(const char *dir);
    int (*check_dir)(Session *s, const char *dir, const Args *a, Out *out);
    /* the manifest file that marks its export folders ("tpa_manifest.json"): with owns_dir NULL,
       `check DIR` takes every folder holding it; listed when a folder is no known export */
    const char *dir_manifest;
    /* `export` keywords this kind cannot honour, with the reason shown when one is given (NULL:
       taken); cmd_export refuses them before export_to runs, so none is silently ignored */
    const char *no_format, *no_dtype, *no_shard_mb;
    const char *export_label;   /* "a FaRR export", for those refusals */
    /* writes x as a checkpoint any engine loads into the new folder dir (float32 where the form
       allows), which `export FILE.gguf` reads back and writes as GGUF; engine_form names it ("its
       dense FaRR export"); NULL: no such form (GGUF refused) */
    int (*engine_export)(Session *s, const Xform *x, const char *dir);
    const char *engine_form;
    /* A kind whose state lives outside its entries (data NULL: the FaRR working copy, learned
       KQ-SVD projections): drops that state of m; undo then re-runs the commands of the entries
       that stand again. NULL: each entry owns its state (data), undo just frees the newest. */
    void (*reset)(Session *s, Model *m);
    bool replays;          /* undo re-runs the older entries' commands (set with reset, or alone when
                              the command overwrites all of the kind's state) */
    int supersede_words;   /* a replayed stack's command is replaced by a later one that begins with
                              the same this many words (FaRR: 2, `truncate vo` replaces `truncate vo`):
                              xform_made_by names only what stands; 0: every command stands */
    /* The attention of `layer` as transformed, for the forward pass (fwd_set_attn): *out a layer --
       a new one (*owned true: the caller frees it, attn_layer_free) or one the transformation
       holds (*owned false: valid while x stands) -- or NULL when the transformation leaves the
       layer as the source has it. NULL hook: the transformation defines no runnable attention;
       no_attn says why (`ppl`, `generate` and `check` name it and pass over it: xform_measured). attn_what names what
       runs ("FaRR working copy"). */
    int (*attn_layer)(Session *s, const Xform *x, int layer, const AttnLayer **out, bool *owned);
    /* The eps every norm of the transformed model runs at, when its export writes another
       rms_norm_eps than the source's (TransMLA: mla_export_norm_eps); 0 or NULL: the source's. */
    double (*norm_eps)(const Xform *x);
    const char *no_attn, *attn_what;
    /* A line `ppl`, `generate` and `attend` print under their headline about which numbers they give in the session's
       compute mode (a conversion made in the other one), or NULL; NULL hook: none */
    const char *(*mode_note)(Session *s, const Xform *x);
} XformKind;

struct Xform {
    const XformKind *kind;
    Model *src;            /* the model it was made of (a session model) */
    void *data;            /* the method's result (owned when kind->free) */
    char *cmd;             /* the command line that made it (args_line), owned; NULL if unknown */
    Xform *replaced;       /* the older one of the same kind and source it replaced (undo restores it) */
    Xform *next;           /* the next older one */
    unsigned long serial;  /* creation order (1, 2, ...): what was made before or after it */
};

/* Adds a transformation of src (data taken over, freed on failure too), newest; one of the same
 * kind and source is replaced. */
int xform_add(Session *s, const XformKind *k, Model *src, void *data);
/* The newest transformation of m (NULL: of any model) of kind k (NULL: any kind) that still
 * stands, or NULL. */
const Xform *xform_newest(Session *s, const Model *m, const XformKind *k);
/* All transformations that still stand, newest first (NULL when none). */
const Xform *xform_list(Session *s);
/* Bytes per token over all layers when conv of them cache `after` values and the others the
 * model's c->before. */
size_t xform_kv_bytes(const XformKvCtx *c, size_t after, size_t conv);
/* `export`'s dtype keyword: *dt = its value, or def when absent. */
int xform_export_dtype(const Args *a, dt_type def, dt_type *dt);

/* `undo`: removes the newest transformation of m; the one it replaced (if any) stands again, its
 * kind's state rebuilt by re-running the commands of its stack (kind->replays). *what receives
 * the removed one's description (cap bytes). AL_ERR when m has none. */
int xform_undo(Session *s, Model *m, char *what, size_t cap);
/* The stack under x, oldest first: the i-th command line (x's own last), NULL past the end. */
const char *xform_stack_cmd(const Xform *x, size_t i);

/* Fills buf with x's description (its kind's describe, else "NAME of MODEL"). */
void xform_describe(const Xform *x, char *buf, size_t cap);

/* ---------------------------------------------------------------- the transformed model, run */

/* x's transformed layers, swapped into a forward pass of x->src. */
typedef struct {
    const AttnLayer **layers;  /* (n) NULL where the layer is the source's */
    bool *owned;           /* (n) layers[l] was made for this run (freed by xform_attn_clear) */
    int n;
    int changed;           /* layers swapped in */
    bool eps_set;          /* the pass's norm eps was set to the kind's (norm_eps), restored by clear */
} XformAttn;

/* Builds x's layers (kind->attn_layer) and swaps them into f (fwd_set_attn); f must run x->src.
 * On success held owns them until xform_attn_clear; on failure nothing is left set. */
int xform_attn_set(Session *s, const Xform *x, Forward *f, XformAttn *held);
/* Restores f's own attention (fwd_clear_attn) and frees the held layers. */
void xform_attn_clear(Forward *f, XformAttn *held);
/* What `ppl`, `generate` and `check` measure on m -- one rule for the three: the newest
 * transformation of m the verb can measure (runs as attention layers; check: has a check), NULL
 * with source or when there is none. headline gets "<verb> of M with CMD (WHAT)" or "<verb> of M
 * (the loaded model)", and on a second line the newer transformations it passed over and why
 * (KQ-SVD's projections: measured by `kvsvd eval`), so none is measured silently. */
const Xform *xform_measured(Session *s, Model *m, bool source, bool check, const char *verb, char *headline,
                            size_t cap);
/* Perplexity of x->src on ids[0..n) (windows of L) by f without overrides (before) and with x's layers
 * swapped in and its norm eps (after), in one pass over the weights (fwd_ppl_pair): fwd_ppl's numbers
 * bit for bit; f is left without overrides. */
int xform_ppl_pair(Session *s, const Xform *x, Forward *f, const int *ids, size_t n, size_t L, FwdPpl *before,
                   FwdPpl *after);

#endif
