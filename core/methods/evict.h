/* evict.h -- token-eviction policies of the KV cache (NVIDIA kvpress's "presses" and the papers they cite), as
 * key masks of the forward pass (core/model/forward.h fwd_set_evict): which cached keys each query position
 * sees, per layer and per KV head, under a cache of C tokens (the query's own key counts; a position p with
 * p + 1 <= C sees every key). Every policy keeps exactly min(p + 1, C) keys at position p.
 *
 *   streaming-llm  StreamingLLM (Xiao et al. 2023, arXiv 2309.17453; kvpress StreamingLLMPress): the first
 *                  `sinks` tokens (4, at most C - 1) and the last C - sinks (keys keep their RoPE positions:
 *                  kvpress without KeyRerotationPress).
 *   h2o            H2O (Zhang et al. 2023, arXiv 2306.14048, Algorithm 1 with its recent window): a cache that
 *                  grows one token per position; the query at p attends over the cache plus its own key, every
 *                  key's accumulated score grows by the attention weight it got (summed over the KV head's query
 *                  heads, as kvpress averages a group), and when the cache is full (C keys seen) the key with the
 *                  lowest accumulated score outside the `recent` newest (C / 2: half heavy hitters, half recent)
 *                  leaves for good (ties: the earlier). Evicted keys never return.
 *   snapkv         SnapKV (Li et al. 2024, arXiv 2404.14469; kvpress SnapKVPress) at prefill, applied to every
 *                  prefix: the cache position p sees is what SnapKV leaves of the prompt 0..p: its last w
 *                  queries (observation window, w = min(64, C / 2), at least 1) vote with their attention over
 *                  the whole prompt (the model's softmax), averaged over the window, average-pooled over keys
 *                  (kernel 5, zero padding as F.avg_pool1d), averaged over the KV head's query heads; the window's
 *                  own keys and the C - w best voted earlier keys are kept (ties: the earlier).
 *
 * Budgets: at a width of B values per token per layer against the model's W, "the same KV bytes per token
 * on average" is the same cache summed over the query positions of a window of T tokens (what every
 * position's attention reads): C = evict_capacity(T, B / W), the largest C with
 * sum_{p<T} min(p + 1, C) <= (B / W) sum_{p<T} (p + 1); with sliding-window layers the sums run over the layers
 * and each reads at most its window (evict_capacity_layers). A combination (a width method at W' with eviction
 * on top) takes the capacity of B / W'. */
#ifndef AL_EVICT_H
#define AL_EVICT_H

#include "forward.h"

typedef enum { EVICT_STREAMING, EVICT_H2O, EVICT_SNAPKV, EVICT_NKINDS } evict_kind;

/* "streaming-llm", "h2o", "snapkv". */
const char *evict_name(evict_kind k);

typedef struct {
    evict_kind kind;
    size_t capacity;          /* C: keys a query sees at most, its own included (>= 1) */
    size_t sinks;             /* streaming-llm: first tokens kept (4; at most C - 1) */
    size_t recent;            /* h2o: newest tokens never evicted (C / 2; at most C - 1) */
    size_t obs_window;        /* snapkv: observation window (64; at most C / 2, at least 1) */
    size_t kernel;            /* snapkv: pooling kernel (5; odd; 0 or 1: none) */
    int layer;                /* < 0: every layer; else this layer alone (the others keep every key) */
} EvictPolicy;

/* The policy at capacity C with the defaults above (the papers' and kvpress's). */
EvictPolicy evict_policy(evict_kind kind, size_t capacity);

/* The keep mask of one layer's call (e->keep, (G, T, nkeys), all 1 on entry): the policy at e's positions.
 * The call must start the sequence (e->pos0 == 0: perplexity windows, not decoding token by token). */
int evict_mask(const EvictPolicy *p, const FwdEvict *e);

/* fwd_evict_fn over ud = const EvictPolicy *. */
int evict_fwd(const FwdEvict *e, void *ud);

/* Keys a layer with sliding window w (0: none) reads over a window of T positions under a cache of C:
 * sum_{p<T} min(p + 1, C, w). */
double evict_reads(size_t T, size_t C, size_t w);
/* Over those it reads with every key, without a window: sum_{p<T} min(p + 1, C) / sum_{p<T} (p + 1). */
double evict_read_frac(size_t T, size_t C);
/* The largest C >= 1 with evict_read_frac(T, C) <= frac (T for frac >= 1). */
size_t evict_capacity(size_t T, double frac);
/* The same over nl layers with sliding windows w (0: none; NULL: none anywhere): the largest C whose keys read,
 * summed over the layers, are at most frac of theirs with every key (a layer whose window is shorter than C
 * reads what it read: eviction spares it). */
size_t evict_capacity_layers(size_t T, double frac, const size_t *w, int nl);
/* The keys read under C over those read with every key, summed over such layers. */
double evict_read_frac_layers(size_t T, size_t C, const size_t *w, int nl);

#endif
