/* tpa.h -- Tensor Product Attention (seed 004): the KV-cache and parameter accounting of Table 1,
 * and the re-factoring of a pretrained GQA / MHA layer into non-contextual TPA (sections 3.4-3.5),
 * with its factored evaluator, its export in attnlab's own layout and the loader back.
 *
 * ---------------------------------------------------------------- accounting (Table 1)
 * Per token and per layer, for d_model = D, h query heads, head dims d_k (query/key) and d_v
 * (value), g KV groups, MLA latents d_c (KV) and d_c' (query; 0 = a plain query projection) with
 * d_h^R RoPE dims and d_h^N NoPE dims per head, TPA ranks R_Q, R_K, R_V:
 *   scheme         values cached                  attention parameters
 *   MHA            h (d_k + d_v)                  D h (2 d_k + 2 d_v)
 *   MQA            d_k + d_v                      D h d_k + D (d_k + d_v) + h d_v D
 *   GQA            g (d_k + d_v)                  D h d_k + g D (d_k + d_v) + h d_v D
 *   MLA            d_c + d_h^R                    d_c' (D + h d_h^N + h d_h^R) + D d_h^R
 *                                                 + d_c (D + h d_h^N + h d_v) + h d_v D
 *   TPA            R_K (h + d_k) + R_V (h + d_v)  D [R_Q (h + d_k) + R_K (h + d_k) + R_V (h + d_v)] + h d_v D
 *   TPA KV-only    as TPA                         D [R_K (h + d_k) + R_V (h + d_v)] + D h d_k + h d_v D
 *   TPA nonctx A   R_K d_k + R_V d_v              R_Q (D d_k + h) + R_K (D d_k + h) + R_V (D d_v + h) + D h d_v
 *   TPA nonctx B   (R_K + R_V) h                  R_Q (D h + d_k) + R_K (D h + d_k) + R_V (D h + d_v) + D h d_v
 * With d_k = d_v = d_h, d_h^N = d_h and h d_h = D these are Table 1's entries exactly (4 D^2 for
 * MHA, (2 + 2g/h) D^2 for GQA, ...), with one deliberate difference: Table 1's MLA entry leaves out
 * the output projection W_O (h d_h D) that every other row counts; attnlab counts it so that rows
 * compare. With a plain query (d_c' = 0) MLA's query term is D h (d_h^N + d_h^R). Biases are not
 * counted (Table 1 has none). Bytes are values x the bytes of one cached value.
 *
 * ---------------------------------------------------------------- non-contextual TPA (3.4-3.5)
 * The keys of one token form a tensor K_t (G x d_h): G KV heads (query head i reads KV head
 * i / (h / G), as GQA does; G = h for MHA) by the head dims. TPA writes it as
 *   K_t = (1/R) sum_r a_r ⊗ b_r        (3.2), a_r in R^G (head axis), b_r in R^{d_h} (token axis).
 * A pretrained layer is non-contextual TPA already (3.4: a_g = R e_g, b_g(x) = x W_K[g]: rank G
 * across the head axis). attnlab re-factors it at a chosen rank R_K (R_V for values):
 *   form a  non-contextual head factors a_r (fixed), contextual token factors b_r(x) = x W_r + c_r.
 *           The optimal rank-R fit across the head axis: with the head-unfolded weight
 *           M (G x (D+1) d_h) = rows [W_K[g] ; b_K[g]] (bias as one more input row), u_r the top R
 *           left singular vectors of M (eigenvectors of the G x G Gram M Mᵀ), a_r = R u_r,
 *           W_r = sum_g u_r[g] W_K[g]. K̂_t = U Uᵀ K_t: every token's key tensor projected onto
 *           the kept head subspace. Caches R_K d_h + R_V d_v values per token; exact at R = G.
 *   form b  contextual head factors a_r(x) = x W_r + c_r in R^G, fixed token factors b_r: the same
 *           across the d_h axis: b_r = R v_r with v_r the top R eigenvectors of the d_h x d_h Gram
 *           sum_g [W_K[g] ; b_K[g]]ᵀ [W_K[g] ; b_K[g]], and a_r(x)[g] = (x W_K[g] + b_K[g]) v_r.
 *           K̂_t = K_t V Vᵀ. Caches (R_K + R_V) G values per token (Table 1 says h: on a GQA model
 *           the head factors are equal within a group, so G distinct values are what is cached);
 *           exact at R = d_h.
 * Activation-weighted: with the second moment Sigma = E[x xᵀ] of the layer's input (calibration),
 * the Grams become Mᵀ-weighted by blockdiag(Sigma, 1) (inputs taken as zero-mean; the bias row
 * has weight 1), which minimises E ||K_t - K̂_t||^2 over those inputs; with no Sigma it is the
 * identity, i.e. unit-variance inputs (the weights alone). Values are factored the same way.
 *
 * RoPE acts on the d_h axis only, so both forms keep it exact (3.2, Theorem 1):
 *   form a  RoPE_t(sum_r a_r ⊗ b_r(x_t)) = sum_r a_r ⊗ RoPE_t(b_r(x_t)): the cached token factors
 *           are rotated once, before caching (eq. 3.6), and the fixed a_r never see the position.
 *   form b  RoPE_t(sum_r a_r(x_t) ⊗ b_r) = sum_r a_r(x_t) ⊗ T_t b_r: the cache holds a_r(x_t) only
 *           and the fixed b_r are rotated to the key's position when it is used (T_t b_r depends
 *           on the position, not on the content).
 * tpa_eval computes attention exactly that way, from the factors; tests check it against the
 * materialized layer (K̂ = projected weights, RoPE after) at every rank, so the only error of the
 * conversion is the rank truncation itself. Queries and W_O are kept as they are (TPA KV-only in
 * Table 1's terms), so the conversion's own parameter count is exact, biases included.
 *
 * ---------------------------------------------------------------- export (attnlab-tpa, v1)
 * There is no standard loader for non-contextual TPA, so attnlab writes its own layout: DIR/
 * tpa_manifest.json (format "attnlab-tpa", version, source path and config, form, ranks, dims,
 * RoPE, cache and parameter counts, per-layer report) and DIR/tpa_factors.safetensors with, per
 * layer L (row-vector convention, y = x @ W):
 *   layers.L.q.weight (D, h d_k), layers.L.q.bias, layers.L.o.weight (h d_v, D), layers.L.o.bias,
 *   layers.L.rope.inv_freq (d_k / 2, F64; absent without RoPE),
 *   layers.L.{k,v}.fixed     form a: (R, G) the a_r;   form b: (R, d_h) the b_r
 *   layers.L.{k,v}.ctx.weight form a: (D, R d_h) W_r side by side; form b: (D, R G), column r G + g
 *   layers.L.{k,v}.ctx.bias   the matching c_r (absent when the source has no K/V bias).
 * Biases are optional; tpa_load rebuilds every layer from these tensors alone. */
#ifndef AL_TPA_H
#define AL_TPA_H

#include "attn_eval.h"
#include "check_inputs.h"
#include "matmul.h"

/* ================================================================ accounting (Table 1) */

typedef enum {
    TPA_MHA, TPA_MQA, TPA_GQA, TPA_MLA, TPA_TPA, TPA_KVONLY, TPA_NONCTX_A, TPA_NONCTX_B,
    TPA_SCHEME_COUNT
} tpa_scheme;

/* "MHA", "MQA", "GQA", "MLA", "TPA", "TPA-KVonly", "TPA-nonctx-A", "TPA-nonctx-B". */
const char *tpa_scheme_name(tpa_scheme s);
/* Parses a scheme name (case-insensitive; also "kvonly", "nonctx-a", "nca", "ncb"); -1 if unknown. */
int tpa_scheme_parse(const char *name);

typedef struct {
    size_t d_model;          /* D */
    size_t h;                /* query heads */
    size_t d_k, d_v;         /* per-head query/key and value dims */
    size_t g;                /* KV groups of GQA */
    size_t d_c, d_cq;        /* MLA KV latent, query latent (0: plain query) */
    size_t d_hr, d_hn;       /* MLA RoPE and NoPE dims per head */
    size_t r_q, r_k, r_v;    /* TPA ranks */
} TpaDims;

/* Dims of a loaded model with defaults for what it does not have: g = its KV heads; MLA: its own
 * latents, else d_c = 4 d_k, d_c' = 2 d_c, d_h^R = d_k / 2, d_h^N = d_k (Table 7's proportions);
 * R_Q = 6, R_K = R_V = 2 (the paper's T6 setting, B.1). */
TpaDims tpa_dims_from_config(const ModelConfig *c);
/* Checks the dims (positive where needed, g divides h); the message names the field. */
int tpa_dims_check(const TpaDims *d);
/* Values cached per token per layer under scheme s. */
size_t tpa_kv_values(const TpaDims *d, tpa_scheme s);
/* Attention parameters per layer under scheme s (see the table at the top). */
size_t tpa_attn_params(const TpaDims *d, tpa_scheme s);

/* ================================================================ non-contextual TPA */

typedef enum { TPA_FORM_A, TPA_FORM_B } tpa_form;

/* "a" / "b". */
const char *tpa_form_name(tpa_form f);

/* K or V of one layer in TPA form (see the top of this file). */
typedef struct {
    tpa_form form;
    int R;                   /* rank */
    int G;                   /* head axis: KV heads */
    int dh;                  /* token axis: dims per head (d_k or d_v) */
    int hidden;              /* D */
    float *fixed;            /* form a: (R, G) rows a_r; form b: (R, dh) rows b_r (1/R folded in) */
    Mat *ctx;                /* form a: (D, R dh), b_r(x) = x ctx[:, r dh : (r+1) dh] + bias;
                                form b: (D, R G), a_r(x)[g] = x ctx[:, r G + g] + bias */
    float *bias;             /* (ctx cols) or NULL */
    double *eig;             /* (n_eig) eigenvalues of the (weighted) Gram, descending: energy per
                                direction of the unfolding; n_eig = G (form a) or dh (form b) */
    int n_eig;
    double energy;           /* fraction of the Gram's trace kept by the top R (1 when exact) */
} TpaFactor;

void tpa_factor_free(TpaFactor *f);   /* frees the members, not f */
/* Values this factor caches per token: R dh (form a) or R G (form b). */
size_t tpa_factor_cached(const TpaFactor *f);
/* Parameters of the factor: ctx + bias + fixed. */
size_t tpa_factor_params(const TpaFactor *f);
/* Factors W (D, G dh) + b (G dh, may be NULL) of a GQA layer's keys or values at rank R in form f
 * (R <= G for form a, R <= dh for form b; errors name the limit). Sigma: (D, D) second moment of
 * the inputs, or NULL (identity). */
int tpa_factorize(const Mat *W, const float *b, int G, int dh, tpa_form f, int R, const double *Sigma,
                  TpaFactor *out);
/* The materialized weights of a factor: W_hat (D, G dh) and b_hat (G dh, NULL when the factor
 * has no bias), so that x W_hat + b_hat = K̂ before RoPE. Caller frees both. */
int tpa_factor_dense(const TpaFactor *f, Mat **W_hat, float **b_hat);

typedef struct {
    int layer;
    double k_energy, v_energy;   /* fraction of the (weighted) energy kept (form a: head axis, b: d_h axis) */
    double k_err, v_err;         /* relative error of the keys (before RoPE) and values on the random inputs */
    double score_err, out_err;   /* relative error of the causal scores and attention outputs */
} TpaLayerReport;

/* One converted layer. */
typedef struct {
    AttnLayer *dense;        /* the layer with W_K, b_K, W_V, b_V replaced by their materialized
                                re-factorization (queries, W_O and RoPE as the source): the
                                evaluator's reference; owned */
    TpaFactor K, V;
    TpaLayerReport rep;
} TpaLayer;

void tpa_layer_free(TpaLayer *l);
/* Converts one GQA layer (not modified) at ranks Rk, Rv in form f (Sigma as tpa_factorize). The
 * report's errors are left NaN (tpa_layer_report fills them). Caller frees. */
int tpa_layer_convert(const AttnLayer *src, tpa_form f, int Rk, int Rv, const double *Sigma, TpaLayer **out);
/* Evaluates the converted layer from its factors, as TPA computes it (RoPE per form, see the top),
 * on X (T x D) at positions pos. *out is the caller's. */
int tpa_eval(const TpaLayer *l, const Mat *X, const int *pos, bool want_scores, AttnOut **out);
/* T x D Gaussian tokens with second moment Sigma (x = z Lᵀ with Sigma = L Lᵀ by Cholesky, a tiny
 * ridge added when Sigma is singular), or attn_random_input's unit-variance tokens when Sigma is
 * NULL. NULL + error on failure; caller frees. */
Mat *tpa_random_input(size_t T, int D, uint64_t seed, const double *Sigma);
/* Fills l->rep (except .layer) against the source layer on T random tokens (seed), positions
 * 0, 1, ... T-1: K/V errors, score and output errors of tpa_eval against attn_eval(src). The
 * tokens are Gaussian with second moment Sigma (D x D; NULL: unit variance), so a calibrated fit
 * is measured under its own input statistics. */
int tpa_layer_report(TpaLayer *l, const AttnLayer *src, size_t T, uint64_t seed, const double *Sigma);

/* ================================================================ whole model */

typedef struct {
    tpa_form form;
    int k_rank, v_rank;      /* R_K, R_V; 0: the exact rank of the form (G or dh) */
    int layer_lo, layer_hi;  /* inclusive; hi < 0: the last layer */
    size_t eval_tokens;      /* random tokens for the report (0: 64), drawn with the layer's sigma */
    uint64_t seed;           /* of those inputs (0: a fixed default) */
    const double *const *sigma;  /* NULL, or per layer (n_layers entries) E[x xᵀ] (D x D) of the
                                    layer's attention input; a NULL entry: identity */
} TpaOpts;

/* Form a, exact ranks, all layers, 64 tokens. */
TpaOpts tpa_opts_default(void);

typedef struct TpaModel {
    Model *src;              /* the model converted (borrowed), NULL when loaded from an export */
    char *src_path;          /* its path (from the manifest when loaded) */
    char *src_name;          /* its session name or the folder's base name */
    char *dir;               /* the export folder it was loaded from, or NULL */
    TpaOpts opts;            /* as resolved (ranks set; sigma NULL) */
    bool activation_stats;   /* some layer used a given Sigma */
    CheckInputs check_in;    /* the report's inputs for `check` (check_inputs.h; set by the command;
                                tokens 0: not set); owned, freed with the model */
    bool exact;              /* ranks reproduce the model: form a R = G, form b R = d_k / d_v */
    int n_layers;            /* = source layers; layers[l] NULL where not converted */
    TpaLayer **layers;
    int hidden, n_heads, n_kv_heads, head_dim, v_dim;
    size_t kv_before, kv_after;          /* values cached per token per layer */
    size_t params_before, params_after;  /* attention parameters of one converted layer (with biases) */
} TpaModel;

void tpa_model_free(TpaModel *t);
/* Checks that m can be converted (a GQA / MHA family the evaluator covers; MLA is refused) and
 * resolves o against its dims (errors say which rank is out of range and what fits). */
int tpa_resolve_opts(const Model *m, TpaOpts *o);
/* Converts the layers of m; al_progress("layer") per layer; AL_INTERRUPTED keeps nothing. */
int tpa_convert(Model *m, const TpaOpts *o, TpaModel **out);

/* ================================================================ export, load, check */

#define TPA_MANIFEST "tpa_manifest.json"
#define TPA_FACTORS "tpa_factors.safetensors"
#define TPA_FORMAT "attnlab-tpa"
#define TPA_FORMAT_VERSION 1

typedef struct {
    dt_type dtype;            /* of the weight matrices: F32, F16 or BF16 (others are refused) */
    bool force;               /* replace an existing non-empty dir as a whole */
    const CheckInputs *check; /* the report's inputs, recorded for `check DIR` (NULL: none) */
} TpaExportOpts;

/* Writes t (every layer converted) to dir (tpa_export.c, through core/io/ckpt_write.h: staged beside
 * dir and renamed into place whole; dir must be new or empty unless force, and not the source's
 * folder); dtype F32, F16 or BF16 for the weight matrices (fixed factors and RoPE frequencies
 * stay F32 / F64). tpa_export is tpa_export_opts without force. */
int tpa_export(const TpaModel *t, const char *dir, dt_type dtype);
int tpa_export_opts(const TpaModel *t, const char *dir, const TpaExportOpts *o);
/* Loads an export (src NULL, dir set); every layer is rebuilt from the factors. */
int tpa_load(const char *dir, TpaModel **out);
/* True when dir holds a TPA manifest. */
bool tpa_is_export(const char *dir);

typedef struct {
    int n_layers;
    double *score_err, *out_err;   /* (n_layers) NaN where the layer was not converted, or where the
                                       source or the conversion holds NaN/Inf (first_nan) */
    double max_out_err;             /* NaN when some converted layer's error is NaN */
    int first_nan;                  /* the first converted layer whose error is NaN, or -1 */
    bool exact;                     /* the conversion claims to reproduce the model */
    bool pass;                      /* no NaN error, and !exact or every out_err <= TPA_EXACT_TOL */
    double nll_source, nll_conv;    /* mean NLL per predicted token of the text (TpaCheckIn.ids): the
                                       source, and the source with the converted layers (NaN: none) */
    size_t nll_tokens;              /* tokens predicted (0: no text) */
} TpaCheck;

/* What a check draws: layer l's `tokens` inputs (0: 64) from seed (+ l when plus_layer, as
 * `convert tpa`'s report draws them) with second moment sigma[l] (NULL or a NULL entry: unit
 * variance), and the text ids[0..n) in windows of seqlen for the perplexity (NULL: none). */
typedef struct {
    size_t tokens;
    uint64_t seed;
    bool plus_layer;
    const double *const *sigma;
    const int *ids;
    size_t n, seqlen;
    mm_compute compute;       /* the forward pass's products for the perplexity (the session's setting) */
} TpaCheckIn;

#define TPA_EXACT_TOL 1e-4

void tpa_check_free(TpaCheck *c);
/* Compares t (converted in the session or loaded) with src, layer by layer, on T random tokens:
 * tpa_eval of each layer against attn_eval of src's layer. */
int tpa_check(const TpaModel *t, Model *src, size_t T, uint64_t seed, TpaCheck **out);
/* The same on the inputs in, and the whole model's perplexity on its text with the converted
 * layers swapped into src's forward pass. */
int tpa_check_in(const TpaModel *t, Model *src, const TpaCheckIn *in, TpaCheck **out);
/* Converted layer l as the forward pass runs it in compute mode c: in MM_BF16 on a source whose default dense export
 * is BF16, a copy of its dense layer with a stock (core/model/attn_stock.h) -- its K and V rounded to BF16 as a dense
 * BF16 checkpoint of it stores them, Q and O the source's own views, run by the model's own attention code, so an
 * exact conversion gives the source's perplexity -- (the caller's); else *out NULL: run TpaLayer.dense (attn_eval). */
int tpa_run_layer(const TpaModel *t, Model *src, int l, mm_compute c, AttnLayer **out);

#endif
