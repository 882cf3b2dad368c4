/* analyses.h -- what attnlab can do with a loaded model, decided per analysis from its
 * description (core/model/config.h), never at load: a model whose QK cannot be fused still gives VO
 * ranks, single-head spectra and perplexity. Each analysis is available or not, with the reason;
 * the modules that run an analysis call analysis_check so the refusal reads the same everywhere,
 * and `info` lists them all. */
#ifndef AL_ANALYSES_H
#define AL_ANALYSES_H

#include "model.h"

typedef enum {
    AN_RANKS_VO,        /* ranks vo: FaRR of W_V W_O */
    AN_RANKS_QK,        /* ranks qk: FaRR of W_Q W_Kᵀ */
    AN_SPECTRUM,        /* spectra of single heads */
    AN_PPL,             /* the forward pass: ppl, calibrate, generate */
    AN_CONVERT_MLA,     /* convert mla (TransMLA) */
    AN_CONVERT_TPA,     /* convert tpa */
    AN_KVSVD,           /* kvsvd learn / eval (calibration through the forward pass) */
    AN_COMPARE,         /* compare (KV budget across methods) */
    AN_EXPORT,          /* export formats: the exports of the transformations available */
    AN_EVAL,            /* the one-layer attention evaluator (check, attention layers of conversions) */
    AN_COUNT
} analysis_kind;

#define AN_LISTED AN_EVAL   /* analyses `info` lists: [0, AN_LISTED) */

/* "ranks vo", "ppl/calibrate", ... */
const char *analysis_name(analysis_kind a);
/* JSON key: "ranks_vo", "ppl", ... */
const char *analysis_key(analysis_kind a);
/* True when analysis a is available on m; otherwise false with the reason in why. A note may be
 * written to why when it is available with a condition (e.g. ranks qk needs an offset). */
bool analysis_available(const Model *m, analysis_kind a, char *why, size_t cap);
/* Whether the layers around attention fit the DeepSeek-V3 checkpoint convert mla's export writes
 * (gate / up MLPs, a fused gate_up_proj split, or softmax top-k experts: analysis_moe_exportable; pre-norm
 * RMSNorm blocks, unscaled embeddings); false with the reason in
 * why (why may be NULL with cap 0). `info`'s export line and mla_export's refusal both ask it. */
bool analysis_mla_exportable(const ModelConfig *c, char *why, size_t cap);
/* Whether c's mixture of experts has a DeepSeek-V3 form that vLLM and SGLang compute as the source
 * does (scoring_func softmax, greedy top-k, norm_topk_prob, no shared experts; experts one tensor
 * per projection in Mixtral's or Qwen's names; dense layers, if any, first): the router softmax,
 * top-k, renormalised when norm_topk_prob. False with the missing feature in why (why may be NULL
 * with cap 0); true for a dense model. */
bool analysis_moe_exportable(const ModelConfig *c, char *why, size_t cap);
/* What a stock layout (layout: "the DeepSeek-V3 checkpoint it writes", ...) lacks to hold a conversion
 * of c's attention: sliding windows, sinks, soft-caps, NoPE layers; true with the missing feature and
 * what an engine would need in why (why may be NULL with cap 0). The MLA and TPA exports ask it. */
bool analysis_attn_export_lacks(const ModelConfig *c, const char *layout, char *why, size_t cap);
/* AL_OK when available, else AL_ERR with the reason as the error. */
int analysis_check(const Model *m, analysis_kind a);

#endif
