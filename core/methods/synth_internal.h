/* synth_internal.h -- what the generators of core/methods/synth.c (demo models) and core/methods/synth_family.c
 * (one tiny checkpoint per family) share: the PRNG streams, the planted head pairs, the tensor
 * list and the writing of a listed model. Private to those two files. */
#ifndef AL_SYNTH_INTERNAL_H
#define AL_SYNTH_INTERNAL_H

#include "tensor.h"

#include <stdint.h>

struct cJSON;

/* splitmix64 state plus one spare Box-Muller deviate. */
typedef struct {
    uint64_t s;
    bool has_spare;
    double spare;
} Rng;

/* A stream for (seed, name): FNV-1a of the name mixed into the seed. */
void syn_rng_init(Rng *r, unsigned long seed, const char *stream);
/* Standard normal deviate. */
double syn_rng_gauss(Rng *r);

/* ---------------------------------------------------------------- planted pairs (synth.c's header) */

typedef enum { PAT_RANDOM, PAT_FLAT, PAT_BOTTLENECK, PAT_FUSED_LOW } pair_pattern;

typedef struct {
    pair_pattern pat;
    int r;          /* bottleneck / fused-low rank */
    double beta;    /* fused-low: weak singular value relative to the strong ones */
} PairSpec;

static inline PairSpec p_random(void) { return (PairSpec){PAT_RANDOM, 0, 0}; }
static inline PairSpec p_flat(void) { return (PairSpec){PAT_FLAT, 0, 0}; }
static inline PairSpec p_bottle(int r) { return (PairSpec){PAT_BOTTLENECK, r, 0}; }
static inline PairSpec p_low(int r, double beta) { return (PairSpec){PAT_FUSED_LOW, r, beta}; }

/* A planted pair: the shared side L (m x k) -- W_V[g], or W_K[g] for QK -- and G per-head sides
 * R[j] (n x k) -- W_O[h]^T, or W_Q[h] -- whose fused maps L R[j]^T have the spectrum of sp.
 * Element RMS of L and R about rms_l and rms_r. Caller frees L and R[0..G). */
int syn_gen_pair(Rng *rng, const PairSpec *sp, size_t m, size_t n, size_t k, int G, double rms_l, double rms_r,
                 Mat **L, Mat **R);

/* MLA attention dims (DeepSeek layout): hidden, heads, q_lora, kv_lora, qk_nope, qk_rope, v. */
typedef struct { size_t D, H, QL, KL, NP, RP, V; } MlaDims;
typedef PairSpec (*syn_pair_fn)(int layer, int head);
/* The planted MLA matrices of layer L: q_b_proj (H (NP + RP) x QL), kv_b_proj (H (NP + V) x KL)
 * and o_proj (D x H V), head h's VO pair planted by vo(L, h) and its NoPE QK pair by qk(L, h),
 * from the streams "<kind>.L<L>.h<h>.vo" / ".qk". On failure all three are NULL. */
int syn_mla_heads(unsigned long seed, const char *kind, int L, const MlaDims *d, syn_pair_fn vo, syn_pair_fn qk,
                  Mat **qb, Mat **kvb, Mat **op);

/* GQA attention dims: hidden, query heads, KV heads, head_dim. */
typedef struct { size_t D, H, KV, HD; } GqaDims;
/* The planted V and O of layer L in HF layout: v_proj (KV HD x D) and o_proj (D x H HD), KV head
 * g's pair (V[g] with the O of its H / KV query heads) planted by vo(L, g) from the stream
 * "<kind>.L<L>.g<g>.vo". On failure both are NULL. */
int syn_gqa_vo(unsigned long seed, const char *kind, int L, const GqaDims *d, syn_pair_fn vo, Mat **vp, Mat **op);

/* ---------------------------------------------------------------- tensor list */

typedef struct {
    char *name;
    int ndim;            /* 1, 2, or 3 ([rows, 1, cols]: a depthwise conv1d; with lead, [lead, rows / lead, cols]) */
    size_t lead;         /* ndim 3: the first dim (fused experts), or 0 */
    Mat *m;              /* values (rows, cols); a 1-D tensor is 1 x n */
    dt_type dtype;       /* storage: F32, BF16, or F8_E4M3 (+ a scale tensor) */
    size_t nbytes;       /* bytes on disk, scale tensor included */
} SynTensor;

typedef struct {
    SynTensor *t;
    size_t n, cap;
} SynList;

void synlist_free(SynList *l);
/* Appends m (ownership taken, also on failure; NULL m is an error) under name with storage dtype. */
int synlist_add(SynList *l, const char *name, int ndim, Mat *m, dt_type dtype);
/* The same for a 3-D tensor (lead, m->rows / lead, m->cols) (every expert in one tensor). */
int synlist_add3(SynList *l, const char *name, size_t lead, Mat *m, dt_type dtype);
/* Constant vector (1 x n). */
Mat *syn_vec_const(size_t n, float v);
/* Gaussian matrix (rows x cols) with element RMS sd from the stream (seed, name). */
Mat *syn_gauss_named(unsigned long seed, const char *name, size_t rows, size_t cols, double sd);

/* ---------------------------------------------------------------- config.json and the folder */

void syn_add_num(struct cJSON *o, const char *k, double v);
void syn_add_str(struct cJSON *o, const char *k, const char *v);
/* The "attnlab_synth" block every generated config carries (what made it). */
void syn_add_provenance(struct cJSON *root, const char *kind, unsigned long seed, dt_type dt);
/* Writes the listed tensors in `shards` files and config.json (cfg, freed) into dir through the
 * checkpoint writer (staged, renamed into place when complete). */
int syn_write_model(const SynList *l, struct cJSON *cfg, const char *dir, int shards);

#endif
