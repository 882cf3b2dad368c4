/* spectral_table.h -- the spectral health of heads as tables (`ranks ... metrics`, `spectrum ...
 * stats`) and one head's spectrum by matrix kind (`spectrum ... stats`, `plot esd`): the
 * statistics of core/analysis/spectral_stats.h over the spectra the FaRR cache already holds (the
 * sweep's eigenvalues; no SVD is redone). */
#ifndef AL_SPECTRAL_TABLE_H
#define AL_SPECTRAL_TABLE_H

#include "farr.h"
#include "out.h"
#include "session.h"

/* The matrix kinds, in the order of `spectrum`'s and `plot`'s kind argument. */
enum { HEALTH_Q, HEALTH_K, HEALTH_V, HEALTH_O, HEALTH_QK, HEALTH_VO };

/* The columns: layer, head (with per_head), matrix, rank (at tau), stable_rank, entropy_rank,
 * participation, norm, alpha, alpha_sigma, xmin, ks, tail, mp_edge, spikes. */
Table *health_table_new(bool per_head);
/* One row per layer and matrix of a health_table_new(true) table t (rows of a layer contiguous):
 * layer, matrix, heads, the medians over the heads of rank, stable_rank, entropy_rank and
 * participation, the largest norm, the median alpha of the fitted heads and their count, the
 * spikes of all heads. NULL + error on failure. */
Table *health_table_summary(const Table *t);
/* One row: the statistics of sp (named `matrix`: "V", "VO", ...). */
int health_table_row(Table *t, bool per_head, int layer, int head, const char *matrix, const Spectrum *sp,
                     double tau);
/* Rows for every head of the cached layers q->lo..q->hi (sweep them first): A, B and the fused map
 * of each query head, head by head. A layer not cached (a hybrid's linear layer) is skipped. */
int health_table_layers(Table *t, const FarrState *st, const FarrQuery *q, double tau);
/* The singular values of matrix kind mk (HEALTH_*) of query head `head` of layer `layer` of the
 * current model: the FaRR cache's (computed now if needed), or, for a Q or K projection that QK
 * fusion does not hand over (full RoPE, Q/K norm), its own SVD in *own (the caller frees it with
 * spectrum_free; NULL otherwise). */
int health_head_spectrum(Session *s, int mk, int layer, int head, int offset, const Spectrum **out, Spectrum **own);

#endif
