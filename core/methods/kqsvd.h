/* kqsvd.h -- calibrated low-rank projections of the KV cache (seed 001): K-SVD (section 3.3),
 * Eigen (3.4) and KQ-SVD (4.3, Theorem 2, with the GQA stacking of Theorem 5 and the value-output
 * variant of Appendix B), computed from the Gram matrices of calibration activations
 * (core/analysis/calib.h) in O(d³) per head, never forming a T x T matrix; their errors (section 6.1);
 * export of the projections.
 *
 * Every method gives, per layer and KV head, a rank-R map S = A Bᵀ (A, B: d x R):
 *   the cache stores K A (T x R); queries are multiplied by B; scores Q B Aᵀ Kᵀ = Q (K S)ᵀ.
 *   The approximations (seed 3.4: S is idempotent, so K S Qᵀ = (K S)(Q Sᵀ)ᵀ) are
 *   K̃ = K S = K A Bᵀ and Q̃ = Q Sᵀ = Q B Aᵀ; values Ṽ = V A_V B_Vᵀ, B_Vᵀ folded into W_O.
 *   K-SVD:  A = B = top-R eigenvectors of G_K = KᵀK (right singular vectors of K); values the
 *           same on G_V.
 *   Eigen:  A = B = top-R eigenvectors of G_K + G_Q (right singular vectors of [K ; Q]); values
 *           as K-SVD.
 *   KQ-SVD: with G_K = V_K Λ_K V_Kᵀ and G_Q = V_Q Λ_Q V_Qᵀ, the core C = Λ_K^½ V_Kᵀ V_Q Λ_Q^½
 *           (d x d; the paper's Σ_K V_Kᵀ V_Q Σ_Q) has the singular values of K Qᵀ; with U' its
 *           left singular vectors, A = K⁺ Û = V_K Λ_K^{+½} U'_R and B = Kᵀ Û = V_K Λ_K^½ U'_R
 *           (Û = U_K U'_R, the top left singular vectors of K Qᵀ). G_Q is the group's stacked
 *           queries (Theorem 5). Values: the same with (G_V, G_W), G_W = Σ_h W_O[h] W_O[h]ᵀ over
 *           the group's output heads (Appendix B: V S W_O ≈ V W_O).
 *
 * Errors: relative Frobenius ||M - M̃|| / ||M|| (unsquared, as every error attnlab reports; the
 * paper's section 6.1 tabulates their squares), from the squared norms that Grams give, E = I - S:
 *   ||K - K S||²        = tr(Eᵀ G_K E)
 *   ||Q - Q Sᵀ||²       = tr(E G_Q Eᵀ)
 *   ||K Qᵀ - K S Qᵀ||²  = tr(Eᵀ G_K E G_Q)     (the full score matrix, no mask), over tr(G_K G_Q)
 * Per layer, numerators and norms are summed over heads (the norm of the whole layer's tensor),
 * then the relative errors of the sequences are averaged. The attention output error is that of
 * MHA(X) = [softmax(mask(Q_h K̃ᵀ s)) Ṽ]_h W_O (causal mask, the model's softmax scale s, no
 * output bias), recomputed in float from the sequence's Q, K, V.
 *
 * Rank from eps (3.3 with the per-layer choice of 6.1): the smallest R whose cumulative energy
 * curve, averaged over the layer's KV heads, keeps at least 1 - eps (keys and values apart). */
#ifndef AL_KQSVD_H
#define AL_KQSVD_H

#include <math.h>

#include "calib.h"

typedef enum { KQ_KSVD, KQ_EIGEN, KQ_KQSVD, KQ_NMETHODS } kq_method;

/* "ksvd", "eigen", "kqsvd" (as typed) and "K-SVD", "Eigen", "KQ-SVD" (for figures). */
const char *kq_method_name(kq_method m);
const char *kq_method_label(kq_method m);

/* ================================================================ one head, from Grams */

/* Eigen-decomposition of a symmetric n x n matrix: lambda descending (rounding negatives clamped
 * to 0), V (n x n row-major) with the eigenvectors as columns. Caller's buffers. */
int kq_eig(const double *G, size_t n, double *lambda, double *V);

/* The rank-R projection of one head (see the top): A, B (n x R row-major, caller's). KQ_KSVD uses
 * G_K only; KQ_EIGEN uses G_K + G_Q; KQ_KQSVD uses both (G_Q may be any PSD "right" Gram, e.g.
 * G_W for values). sigma_kq (optional, n values): the singular values of K Qᵀ (KQ_KQSVD only).
 * R is clipped to n. */
int kq_proj(kq_method m, const double *G_K, const double *G_Q, size_t n, size_t R, double *A, double *B,
            double *sigma_kq);

/* Absolute squared errors of S = A Bᵀ (see the top) and the norms they are relative to. */
typedef struct {
    double k, q, kq;          /* ||K - K S||², ||Q - Q Sᵀ||², ||K Qᵀ - K S Qᵀ||² */
    double nk, nq, nkq;       /* ||K||², ||Q||², ||K Qᵀ||² */
} KqGramErr;

/* Errors of (A, B) (n x R) against G_K and G_Q (G_Q may be NULL: q and kq are then 0). */
int kq_gram_err(const double *G_K, const double *G_Q, size_t n, const double *A, const double *B, size_t R,
                KqGramErr *e);

/* Smallest R (1..n) with the head-averaged cumulative energy >= 1 - eps; lambdas is (nheads, n),
 * each row descending (eigenvalues of a Gram = squared singular values). */
size_t kq_rank_eps(const double *lambdas, size_t nheads, size_t n, double eps);

/* ================================================================ a model's projections */

typedef struct {
    bool by_eps;              /* rank from eps (else the fixed rank) */
    double eps;               /* 0 < eps < 1 */
    int rank;                 /* >= 1 (clipped to the head dims) */
    double beta;              /* unbalance (6.2): keys x beta, queries / beta before learning (1: none) */
} KqSpec;

typedef struct KqProj {
    kq_method method;
    KqSpec spec;
    CalibShape sh;
    int *rank_k, *rank_v;     /* (n_layers) */
    double **A_K, **B_K;      /* per layer (G, d, rank_k[l]) row-major: head g's d x R block */
    double **A_V, **B_V;      /* per layer (G, dv, rank_v[l]) */
    KqGramErr *cal_k;         /* (n_layers) calibration-set errors of the keys/queries, summed over heads */
    KqGramErr *cal_v;         /* (n_layers) of the values (k: V, q/kq: against G_W for KQ-SVD, else 0) */
} KqProj;

void kq_proj_free(KqProj *p);

/* G_W per layer and KV head: Σ over the group's query heads h of W_O[h] W_O[h]ᵀ, (L, G, dv, dv),
 * malloc'ed (caller frees). Reads o_proj through model_head. */
int kq_wo_grams(Model *m, double **out);

/* Learns one method's projections for every layer from st. G_W (from kq_wo_grams) is needed for
 * KQ-SVD's values (NULL is an error for KQ_KQSVD, ignored otherwise). Ctrl-C between layers
 * returns AL_INTERRUPTED (nothing kept). Caller frees *out with kq_proj_free. */
int kq_learn(const CalibStats *st, const double *G_W, kq_method m, const KqSpec *spec, KqProj **out);

/* The relative Frobenius error ||M - M̃|| / ||M|| from the squared norms num = ||M - M̃||² and
 * den = ||M||² (0 when the norm is 0). */
static inline double kq_rel(double num, double den) { return den > 0 && num > 0 ? sqrt(num / den) : 0.0; }

/* ================================================================ evaluation */

typedef struct {
    double k, q, v, kq, out;  /* relative Frobenius errors (kq_rel), averaged over sequences */
    size_t n_seq;             /* sequences averaged */
} KqErr;

typedef struct KqEval KqEval;

/* An evaluator of nsets projection sets (all of shape sh; the sets must outlive it). */
int kq_eval_new(const CalibShape *sh, const KqProj *const *sets, size_t nsets, KqEval **out);
void kq_eval_free(KqEval *ev);

/* One sequence's layer, as kq_eval_layer reads it. */
typedef struct {
    size_t tokens;                     /* T: the sequence's tokens */
    const float *Q; size_t ldq;        /* (T, H d) after RoPE, row stride */
    const float *K; size_t ldk;        /* (T, G d) after RoPE */
    const float *V; size_t ldv;        /* (T, G dv) */
    const float *W_O; size_t hidden;   /* (H dv, hidden) row-major (rows of head h at h dv) */
    double scale; size_t window;       /* as the forward pass's (fwd_attn_scale, fwd_attn_window) */
    const float *attn_ref; size_t ld_ref;   /* optional (T, H dv): the forward pass's own attention
                                               output, compared with the exact recomputation
                                               (kq_eval_ref_diff) */
} KqLayerIn;

/* Accumulates every set's errors for one sequence's layer. */
int kq_eval_layer(KqEval *ev, int layer, const KqLayerIn *in);

/* Runs nseq sequences of seqlen tokens through f with hooks and evaluates every layer of each
 * (W_O read from m). Progress "sequence"; Ctrl-C stops after the current sequence, keeping the
 * sequences done: every layer has averaged the same ones. */
int kq_eval_run(KqEval *ev, Model *m, Forward *f, const int *tokens, size_t nseq, size_t seqlen);

/* Averaged errors of set s at layer L. */
void kq_eval_result(const KqEval *ev, size_t s, int layer, KqErr *out);
/* Largest relative difference seen between the recomputed exact attention and attn_ref. */
double kq_eval_ref_diff(const KqEval *ev);

/* ================================================================ export */

typedef struct {
    const char *model_name;   /* for the manifest */
    const char *model_path;   /* the source folder: the export refuses to write there */
    const CalibStats *st;     /* calibration it came from (counts, source; may be NULL) */
    const KqErr *const *errs; /* NULL, or per set NULL / (n_layers) evaluation errors */
    const char *eval_split;   /* split the errors were measured on */
    bool force;               /* write into an existing non-empty folder */
} KqExportInfo;

/* Writes DIR/kvsvd-<method>.safetensors per set -- F32 tensors layers.<l>.proj_k = A_K and
 * layers.<l>.proj_q = B_K of shape (G, d, R_K), layers.<l>.proj_v = A_V and layers.<l>.proj_o =
 * B_V of shape (G, dv, R_V) -- and DIR/kvsvd_manifest.json (methods, spec, per-layer ranks,
 * calibration and evaluation errors, how to apply them), staged and swapped in whole
 * (kqsvd_export.c, core/io/ckpt_write.h); force replaces an existing folder entirely.
 * *files (optional) receives the number of files written. */
int kqsvd_export(const char *dir, const KqProj *const *sets, size_t nsets, const KqExportInfo *info, size_t *files);

#define KQ_MANIFEST "kvsvd_manifest.json"

/* An export read back (kqsvd_load): its projection sets and what its manifest recorded. */
typedef struct {
    size_t nsets;
    KqProj *sets[KQ_NMETHODS];
    KqErr *errs[KQ_NMETHODS];  /* per set the recorded evaluation errors (n_layers; n_seq 1 where
                                  recorded, 0 where not), or NULL */
    char *model_path;          /* the model it was learned on ("" when not recorded) */
    char *model_name;
    char *eval_split;          /* the split of the recorded errors ("valid" / "train"), or NULL */
    char *calib_source;        /* the calibration text, or NULL */
    size_t calib_seqlen;       /* its window (0: not recorded) */
} KqExport;

/* Reads dir (kqsvd_export's layout) for a model of shape sh: every set's projections, checked
 * against sh (kv heads, dims, layers; ranks from the tensors), and the manifest's record. */
int kqsvd_load(const char *dir, const CalibShape *sh, KqExport **out);
void kqsvd_export_free(KqExport *e);
/* The manifest's model path (caller frees; NULL + error when dir has no readable manifest). */
char *kqsvd_export_model(const char *dir);

#endif
