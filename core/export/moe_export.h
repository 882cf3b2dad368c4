/* moe_export.h -- the mixture of experts in a TransMLA export (mla_export.c): Mixtral's and
 * Qwen3-MoE's routed experts written in DeepSeek-V3's layout with the config keys under which
 * vLLM and SGLang compute the source's routing (scoring_func softmax, topk_method greedy, n_group 1,
 * norm_topk_prob as the source, routed_scaling_factor 1, n_shared_experts null: no shared experts).
 * transformers' DeepseekV3 always scores with a sigmoid and DeepseekV2 never renormalises (and adds
 * shared experts unconditionally): no transformers class computes softmax top-k renormalised in a
 * DeepSeek layout, which lint says. What can be exported: analysis_moe_exportable (analyses.h).
 *
 * Names: Mixtral's block_sparse_moe.gate -> mlp.gate, block_sparse_moe.experts.E.w1 / w3 / w2 ->
 * mlp.experts.E.gate_proj / up_proj / down_proj (every suffix: weight, FP8 scales); Qwen's names
 * are DeepSeek's already. Bytes are copied as they are. */
#ifndef AL_MOE_EXPORT_H
#define AL_MOE_EXPORT_H

#include "model.h"

#include <cjson/cJSON.h>
#include <stddef.h>

typedef struct MoeNames MoeNames;

/* The source-to-export renames of c's expert tensors (an empty map for a dense model or one whose
 * names are DeepSeek's); NULL + error on allocation failure. */
MoeNames *moe_names(const ModelConfig *c);
void moe_names_free(MoeNames *m);
/* The export's name of source tensor src into buf (src itself when it is not renamed). */
const char *moe_rename(const MoeNames *m, const char *src, char *buf, size_t cap);
/* The source's name of export tensor dst into buf (dst itself when it is not renamed). */
const char *moe_source_name(const MoeNames *m, const char *dst, char *buf, size_t cap);
/* The DeepSeek-V3 MoE keys of c (a model with experts that analysis_moe_exportable accepts) into o. */
int moe_config(const ModelConfig *c, cJSON *o);

#endif
