/* layersel.h -- which layers an analysis over a layer range runs. On a hybrid (Qwen3-Next, Qwen3.5:
 * Gated DeltaNet linear-attention layers between softmax-attention ones) a sweep runs the attention
 * layers of the range only and says which it left out; a range of no attention layer (one linear
 * layer named alone) is an error naming the attention layers. The one place the commands' ranges
 * and core's sweeps (FaRR spectra, ranks, truncation) ask which layer is swept: a new kind of
 * non-attention layer needs only cfg_layer_linear (config.h) to say so (and its name in
 * layersel_other_kind, else "not softmax attention"). */
#ifndef AL_LAYERSEL_H
#define AL_LAYERSEL_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* True when layer L has softmax attention with heads (false on a hybrid's linear-attention layers). */
bool layersel_attn(const ModelConfig *c, int layer);
/* The first attention layer in [layer, hi], or hi + 1 when none: the loop
 *   for (int L = layersel_next(c, lo, hi); L <= hi; L = layersel_next(c, L + 1, hi)) */
int layersel_next(const ModelConfig *c, int layer, int hi);
/* Attention layers in [lo, hi]. */
int layersel_count(const ModelConfig *c, int lo, int hi);
/* What the non-attention layers of c are ("Gated DeltaNet linear attention"). */
const char *layersel_other_kind(const ModelConfig *c);
/* The line saying which layers of [lo, hi] are not attention ("layers 0-2, 4-6 are Gated DeltaNet linear
 * attention: VERB the 2 attention layers 3, 7") into note ("" when every layer is, or none); the
 * number of attention layers in [lo, hi]. */
int layersel_note(const ModelConfig *c, int lo, int hi, const char *verb, char *note, size_t cap);
/* The attention layers of [lo, hi] as text into buf: "lo-hi" when every layer is (as the commands
 * always said), else the list ("3, 7"; runs "3-5, 9"). Returns buf. */
const char *layersel_text(const ModelConfig *c, int lo, int hi, char *buf, size_t cap);
/* The same with its noun: "layer 3" for one layer, else "layers " and layersel_text's. Returns buf. */
const char *layersel_words(const ModelConfig *c, int lo, int hi, char *buf, size_t cap);
/* Resolves the inclusive range [*lo, *hi] for analysis `what`: narrowed to its first and last
 * attention layer, with note (cap > 0) the line saying which layers are left out ("layers 0-2, 4-6
 * are Gated DeltaNet linear attention: sweeping the 2 attention layers 3, 7"; "" when none is).
 * AL_ERR when the range holds no attention layer (one linear layer: cfg_check_attn_layer's error). */
int layersel_range(const ModelConfig *c, const char *what, int *lo, int *hi, char *note, size_t cap);

#endif
