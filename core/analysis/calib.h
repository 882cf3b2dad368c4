/* calib.h -- calibration statistics: what KQ-SVD, K-SVD and Eigen (seed 001) and the activation-
 * based TransMLA (seed 003) need from activations of real text, accumulated as the forward pass
 * streams them, so the caches are never stored.
 *
 * Per layer l and KV head g (d = d_qk, dv = d_v, double precision, sums over every token seen):
 *   G_K[l][g] = Kᵀ K        (d, d)    keys AFTER RoPE (what the KV cache holds)
 *   G_Q[l][g] = Σ_h Q_hᵀ Q_h (d, d)   queries after RoPE, summed over the query heads h of the
 *                                     group of g: the Gram of the group's stacked queries
 *                                     [Q_h1; Q_h2; ...] (seed 001, Theorem 5)
 *   G_V[l][g] = Vᵀ V        (dv, dv)
 *   G_X[l]    = Xᵀ X        (hidden, hidden)  optional, with S_X: the normalized attention input
 *   S_X[l]    = Σ_t x_t     (hidden)          (the x of x @ W_Q), so E[x xᵀ] = G_X / tokens and
 *                                     E[x] = S_X / tokens feed the activation-based TransMLA (seed
 *                                     003): every key / value / query second moment it needs, bias
 *                                     cross terms included, is a linear image of the two
 * and per layer the tokens and sequences accumulated (the same in every layer unless a run was
 * interrupted: the forward pass stops between layers, so each layer holds whole sequences).
 * Tokens are counted from the attention-input rows when G_X is kept, else from the key rows.
 * MLA models have one "KV head" per query head (keys per head, the shared RoPE part repeated).
 *
 * Accumulators keep the upper triangle (dsyrk; G_X packed: L x hidden^2 / 2 doubles, the largest part
 * of the statistics); read full symmetric matrices with calib_gram. G_X, and G_K / G_Q / G_V together, live from
 * calib_new on in spill mappings (core/base/spill.h) where a file can be made, so calibrating more layers grows
 * page cache, not anonymous memory; else they are calloc'd (the same bits either way).
 *
 * Text splits (calibrate ... split train|valid): the token stream is cut into W = n / L whole
 * windows of L tokens; the last max(1, W / 10) windows (none when W < 2) are the validation
 * split, the others the training split.
 *
 * File format (calib_save / calib_load): safetensors, F64 tensors
 *   layers.<l>.gram_k (G, d, d), layers.<l>.gram_q (G, d, d), layers.<l>.gram_v (G, dv, dv),
 *   layers.<l>.gram_x (hidden, hidden) and layers.<l>.sum_x (hidden) when present, counts
 *   (n_layers, 2) I64 (tokens, sequences),
 * and metadata: format "attnlab-calib", version (2; version 1 files, without sum_x, still load,
 * with no mean), the shape, model, source, split, seqlen, and the provenance (CALIB_PROV_KEYS:
 * collector, created, torch, transformers, dtype, devices, world_size; `calibrate` writes
 * collector "attnlab calibrate" and created, scripts/attnlab_collect.py all of them). The same
 * file comes from PyTorch for models no CPU can run: scripts/attnlab_collect.py. */
#ifndef AL_CALIB_H
#define AL_CALIB_H

#include "forward.h"

/* ================================================================ shape and statistics */

typedef struct {
    int n_layers;
    int n_heads;              /* query heads H */
    int n_kv_heads;           /* KV heads G (MLA: H) */
    int d_qk;                 /* per-head query/key dim d */
    int d_v;                  /* per-head value dim dv */
    int hidden;               /* width of the attention input */
} CalibShape;

/* The shape of m's attention (errors name the model when it has no attention dims). */
int calib_shape_of(const Model *m, CalibShape *sh);
/* Query heads per KV head (H / G). */
static inline int calib_group(const CalibShape *sh) { return sh->n_heads / sh->n_kv_heads; }

typedef enum { CALIB_K, CALIB_Q, CALIB_V, CALIB_X } calib_which;

/* Provenance metadata keys, kept through load and save (calib_provenance joins them). */
#define CALIB_NPROV 7
extern const char *const CALIB_PROV_KEYS[CALIB_NPROV];

typedef struct CalibStats {
    CalibShape sh;
    bool has_x;               /* G_X (and S_X) are accumulated */
    size_t *tokens;           /* (n_layers) token rows accumulated per layer */
    size_t *seqs;             /* (n_layers) sequences accumulated per layer */
    size_t seqlen;            /* tokens per sequence of the runs (0: none yet) */
    char *model;              /* metadata, owned, may be NULL: the model's name */
    char *source;             /*   the text or id file */
    char *split;              /*   "train" / "valid" / other */
    char *prov[CALIB_NPROV];  /*   provenance values of CALIB_PROV_KEYS, owned, NULL when absent */
    double *gk;               /* (L, G, d, d) upper triangles; see calib_gram */
    double *gq;               /* (L, G, d, d) */
    double *gv;               /* (L, G, dv, dv) */
    double *gx;               /* (L, hidden (hidden + 1) / 2): each layer's upper triangle packed row by
                                 row (row i: columns i..hidden-1; half the doubles of the full matrix), or NULL */
    size_t gx_spill;          /* bytes of gx when it is a spill mapping (calib_new, calib_spill), 0 when malloc'd */
    size_t kqv_spill;         /* bytes of the one spill mapping [gk | gq | gv] (calib_new), 0 when each is malloc'd */
    double *sx;               /* (L, hidden) Σ x, or NULL (no G_X, or a version-1 file) */
    double *buf;              /* scratch for one block converted to double */
    size_t buf_cap;           /* doubles in buf */
    double *xfull;            /* scratch (hidden, hidden) of one G_X block while accumulating, or NULL
                                 (calib_run frees it at its end) */
    double *gx_hold;          /* layer-major calib_run over a spilled G_X: layer gx_hold_layer's packed G_X, copied
                                 out of the mapping when its group starts and back once when it ends (the mapping
                                 dirtied once per layer and group), or NULL */
    int gx_hold_layer;        /* -1: none held */
    size_t gx_hold_flushes;   /* layers' G_X written back into the mapping by the last calib_run */
} CalibStats;

/* Zeroed statistics of shape sh (with G_X when with_x). Caller frees with calib_free. */
int calib_new(const CalibShape *sh, bool with_x, CalibStats **out);
void calib_free(CalibStats *st);
/* "collected by X on DATE (torch T, transformers V, dtype, devices, N processes)" into buf from
 * the provenance present; "" when there is none. */
void calib_provenance(const CalibStats *st, char *buf, size_t cap);
/* Sets the metadata strings (copies; NULL leaves one unchanged). */
int calib_set_meta(CalibStats *st, const char *model, const char *source, const char *split);

/* Accumulates T rows of one layer's activation: x + t * ld is row t, heads side by side
 * (K: G x d, Q: H x d, V: G x dv, X: hidden; X also into S_X). The rows count as tokens when they
 * are X (with G_X kept) or K (without). Works from any source (the forward pass's hooks, synthetic
 * blocks in tests). */
int calib_add(CalibStats *st, calib_which which, int layer, const float *x, size_t T, size_t ld);
/* Moves G_X (the statistics' largest part: L x hidden (hidden + 1) / 2 doubles, 2.1 GB on an 8B model) out of
 * anonymous memory into a shared mapping of an unlinked file under $TMPDIR (core/base/spill.h), its bytes written
 * once: the kernel drops its pages under memory pressure and reads them back when a later command (convert, check,
 * calib save) reads them. calib_new already puts G_X there when it can (then this does nothing); calib_run and
 * calib_load end with it for statistics made while no file could be. Where no file can be made G_X stays malloc'd
 * (no error); already moved or absent: nothing. The numbers are the same bits. */
void calib_spill(CalibStats *st);
/* True when G_X lives in a spill mapping. */
static inline bool calib_spilled(const CalibStats *st) { return st->gx_spill != 0; }
/* Marks one more whole sequence seen by layer (calib_run does it). */
void calib_seq_done(CalibStats *st, int layer);
/* The forward-pass hook adapter: K_ROPE, Q_ROPE, V and ATTN_IN chunks go to calib_add (their
 * shapes are checked against st); other kinds are ignored. Sequences are not counted here
 * (calib_run does it). */
int calib_add_act(CalibStats *st, const FwdAct *a);
/* The FWD_* mask the statistics need. */
unsigned calib_hook_mask(const CalibStats *st);

/* Runs nseq sequences of seqlen tokens (tokens[s * seqlen ...]) through f, each a fresh
 * sequence, accumulating into st: layer-major where the pass allows (fwd_run_hooked_route: each layer's
 * weights read once per group of windows, the same sums in the same order, so the same bits), else window
 * by window. Ctrl-C returns AL_INTERRUPTED within one layer's window (layer-major; window by window: after the
 * current sequence), st then holding partial sums -- layer-major, the layers have seen different windows --
 * that the caller drops: a calibration either completes or leaves the earlier one (ws_calib_run). The hooks of
 * f are removed afterwards. */
int calib_run(CalibStats *st, Forward *f, const int *tokens, size_t nseq, size_t seqlen);

/* Full symmetric Gram (n x n, row-major, caller's buffer): n = d for K and Q, dv for V, hidden for
 * X (g ignored). An absent G_X is an error. */
int calib_gram(const CalibStats *st, calib_which which, int layer, int g, double *out);
/* E[x xᵀ] of layer's attention input, (hidden, hidden) into out (G_X / tokens). */
int calib_second_moment(const CalibStats *st, int layer, double *out);
/* How many second moments calib_second_moment has formed in this process (tests count that a pipeline forms
 * each layer's once). */
size_t calib_second_moment_forms(void);
/* E[x] of layer's attention input, (hidden) into out (S_X / tokens); an error when the statistics
 * keep no mean (no G_X, or a version-1 file). */
int calib_mean(const CalibStats *st, int layer, double *out);
/* Per-layer arrays for TmlaOpts.sigma / .mu (core/methods/transmla.h): n_layers entries each, E[x xᵀ] and
 * E[x] of layers [lo, hi] (an error on one that saw no tokens; hi < 0: to the last, leaving out -- NULL -- the layers
 * that saw none, a hybrid's without softmax attention), NULL elsewhere (and every mu entry NULL when there is no
 * mean). Free with calib_free_arrays. */
int calib_input_arrays(const CalibStats *st, int lo, int hi, double ***sigma, double ***mu);
void calib_free_arrays(int n_layers, double **sigma, double **mu);
/* Checks that st fits model m (same layer count, heads, dims); the error names what differs. */
int calib_check_model(const CalibStats *st, const Model *m);

/* ================================================================ text windows */

typedef enum { CALIB_TRAIN, CALIB_VALID } calib_split;

/* Windows of a split (see the top of this file) for ntok tokens in windows of seqlen: the first
 * window index and how many (at most nmax; 0 = all of the split). Errors say how many tokens a
 * window or the split needs. */
int calib_windows(size_t ntok, size_t seqlen, calib_split split, size_t nmax, size_t *first, size_t *count);

/* ================================================================ files */

/* Writes st to path (safetensors, see the top; atomically). */
int calib_save(const CalibStats *st, const char *path);
/* Reads statistics written by calib_save. Errors name the file and what is wrong. */
int calib_load(const char *path, CalibStats **out);

#endif
