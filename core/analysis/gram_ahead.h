/* gram_ahead.h -- a sweep's reads of the next layer's weights while it computes this one.
 *
 * A rank sweep reads each layer's pair of tensors once (a VO sweep: V and O; a QK sweep: Q and K;
 * 134 MB a layer of R1). Where those pages are in the page cache (warm), the reading thread maps
 * them into this process's page tables (MADV_POPULATE_READ). Where they are not (cold), it reads
 * them with O_DIRECT into one of the sweep's own two buffers (GramSlots: this layer's and the next
 * one's) and gram_prefetch_wait lends them to the store (store_lend), so the layer's Grams read
 * memory that is used again layer after layer: a page-cache page just filled costs the sweep's
 * packers ~2x to touch first on this machine (bench/README.md, "The integrator's idle runs (s16)").
 * The bytes are the file's either way: the results are the same.
 *
 * A file system without O_DIRECT (tmpfs), a failed read, or a pair larger than an eighth of the
 * memory falls back to the page cache. Reads past the page cache leave nothing in it: a later
 * command reads those tensors from the disk again. */
#ifndef AL_GRAM_AHEAD_H
#define AL_GRAM_AHEAD_H

#include "model.h"

typedef enum {
    GRAM_DIRECT_AUTO,        /* past the page cache when under half of the pair's pages are in it */
    GRAM_DIRECT_ALWAYS,      /* past the page cache wherever the file system allows (tests) */
    GRAM_DIRECT_NEVER        /* through the page cache, as before (bench: the two compared) */
} gram_direct;

/* The policy farr_state_sweep's reads take (process-wide; AUTO unless set). */
void gram_direct_set(gram_direct policy);
gram_direct gram_direct_get(void);
/* Tensors lent to a store by reads past the page cache so far in this process (for tests: that
 * the direct path was taken). */
size_t gram_direct_reads(void);

/* A sweep's two buffers (grown to the largest pair, freed by gram_slots_free after every GramAhead
 * that used them ended). NULL: out of memory (reads then take the page cache). */
typedef struct GramSlots GramSlots;
GramSlots *gram_slots_new(gram_direct policy);
void gram_slots_free(GramSlots *s);

/* Starts reading the tensors of `layer` that views of kinds a and b read, on a thread of its own.
 * Only the pair's tensors (and their FP8 block scales): a `ranks vo` that also read q_proj would
 * read 2.3 GB more of an R1 checkpoint for nothing. slots NULL: through the page cache only.
 * NULL when there is nothing to read or no thread to be had (the sweep then faults its pages in:
 * slower, same result).
 * gram_prefetch_wait waits for the reads and lends what went to a slot to the store, until
 * gram_prefetch_end, which waits (stop: cuts the reads short), takes the loan back, frees the slot
 * and g (NULL: nothing). End g before its model goes and before the layer's tensors are read by
 * another thread than the sweep's. */
typedef struct GramAhead GramAhead;
GramAhead *gram_prefetch_start(const Model *m, int layer, head_kind a, head_kind b, GramSlots *slots);
void gram_prefetch_wait(GramAhead *g);
void gram_prefetch_end(GramAhead *g, bool stop);

#endif
