/* mla_gaps.h -- the one table of what a converted model can hold that DeepSeek-V3's stock
 * checkpoint layout cannot (transformers' DeepseekV3ForCausalLM, vLLM's and SGLang's DeepseekV2
 * model): sliding windows, attention sinks, output gates, q/k norms, parallel residuals, other
 * block norms, LayerNorm, embedding scales, soft-caps, a multimodal tower, MoE routers without a
 * DeepSeek form. Each row names the feature, what the layout lacks and what an engine would need
 * to run it; `export` of a `convert mla` conversion refuses with every row that applies, and the
 * session's own forward pass (`ppl`, `check`) still runs the conversion. */
#ifndef AL_MLA_GAPS_H
#define AL_MLA_GAPS_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *feature;      /* "sliding window" */
    const char *lacks;        /* what DeepSeek-V3's layout has no form for */
    const char *needs;        /* which engine would need what */
    bool (*has)(const ModelConfig *c);
} MlaGap;

/* Row i of the table (NULL past the end). */
const MlaGap *mla_gaps_row(size_t i);
/* True when no row applies to c (sets no error). qk_norm_plain: the conversion folded or dropped the
 * q/k norm (`convert mla qk-norm fold|drop`, tmla_qkn.h), its layers are plain: the q/k norm row does not apply. */
bool mla_gaps_none(const ModelConfig *c, bool qk_norm_plain);
/* AL_OK when no row applies to c; else AL_ERR with every row that does as the error. */
int mla_gaps_check(const ModelConfig *c, bool qk_norm_plain);

#endif
