/* engines.h -- the one table of how the stock engines compute a DeepSeek-V3 (deepseek_v3 /
 * deepseek_v2) checkpoint where they differ from each other and from attnlab's reading of its
 * config.json. `check` of a TransMLA export evaluates the export once per row (core/export/mla_export.c:
 * one error column per engine) and `lint` derives its per-engine verdicts from the same rows
 * (core/lint/lint.c), so the two cannot disagree about what an engine computes.
 *
 * attnlab's reading (the model a folder describes): the latent RMSNorms (kv_a_layernorm,
 * q_a_layernorm) use the config's rms_norm_eps like every other RMSNorm, attention_bias adds the
 * q_a_proj / kv_a_proj_with_mqa / o_proj biases, rope_interleave and rope_scaling mean what they say.
 * Rows, from the engines' sources:
 *   transformers  models/deepseek_v3/modeling_deepseek_v3.py: DeepseekV3RMSNorm(hidden_size,
 *                 eps=1e-6); q_a_layernorm = DeepseekV3RMSNorm(config.q_lora_rank) and
 *                 kv_a_layernorm = DeepseekV3RMSNorm(self.kv_lora_rank) take that default, while
 *                 input_layernorm, post_attention_layernorm and the final norm pass
 *                 config.rms_norm_eps; attention_bias read; rope_interleave read. Its MoE router
 *                 (DeepseekV3TopkRouter) scores with a sigmoid whatever scoring_func says, and
 *                 DeepseekV3MoE builds shared_experts of moe_intermediate_size * n_shared_experts
 *                 (null: a TypeError). (DeepseekV2Moe scores softmax but never renormalises.)
 *   vLLM          model_executor/models/deepseek_v2.py: q_a_layernorm / kv_a_layernorm =
 *                 RMSNorm(..., eps=config.rms_norm_eps); every attention projection bias=False;
 *                 RoPE is_neox_style=False (interleaved) always; any rope_scaling but the
 *                 default becomes "deepseek_yarn". DeepseekV2MoE: FusedMoE(scoring_func=
 *                 config.scoring_func, renormalize=config.norm_topk_prob, grouped top-k over
 *                 n_group); n_shared_experts null: no shared experts.
 *   SGLang        srt/models/deepseek_v2.py: the same as vLLM (RMSNorm(kv_lora_rank,
 *                 eps=config.rms_norm_eps), no biases, interleaved, "deepseek_yarn"). */
#ifndef AL_ENGINES_H
#define AL_ENGINES_H

#include <stdbool.h>
#include <stddef.h>

/* Row indices; the same order as lint's targets (core/lint/lint.h: LT_HF, LT_VLLM, LT_SGLANG = 1 << i). */
enum { ENG_HF, ENG_VLLM, ENG_SGLANG, ENG_N };

typedef struct {
    const char *name;        /* "transformers", "vLLM", "SGLang" */
    const char *column;      /* check's error column: "out_err_transformers", ... */
    double latent_eps;       /* eps of the latent RMSNorms: > 0 fixed, 0 the config's rms_norm_eps */
    bool attn_bias;          /* builds the attention biases attention_bias asks for */
    bool q_proj_bias;        /* builds a q_proj bias (MLA without a query latent) */
    bool rope_interleave;    /* reads rope_interleave (false: always rotates interleaved pairs) */
    bool rope_scaling;       /* computes each rope_scaling type as named (false: all as DeepSeek YaRN) */
    const char *source;      /* where the row comes from (file and construct) */
    bool scoring_func;       /* routes with the scoring_func the config names (false: a sigmoid whatever it says) */
    bool shared_null;        /* builds no shared experts for n_shared_experts null (false: multiplies by it, fails) */
} Engine;

/* Row i (0..ENG_N-1), NULL out of range. */
const Engine *engine_row(int i);
/* The eps engine e normalises the latents with under a config whose rms_norm_eps is rms_eps. */
double engine_latent_eps(const Engine *e, double rms_eps);
/* The rms_norm_eps under which every engine normalises the latents with the same eps (the fixed eps
 * of the rows that have one: 1e-6); 0 when no row fixes it. */
double engine_common_eps(void);

/* The engines (bit i: row i) that normalise the latents with another eps than built, the eps an
 * export's latent norms were built for (attnlab_manifest.json latent_norm_eps; a folder without
 * one: its rms_norm_eps, the model its config describes), under a config whose rms_norm_eps is
 * rms_eps. Those compute another model than the one built. */
unsigned engine_latent_eps_off(double rms_eps, double built);
/* "transformers normalises the latents with 1e-06, vLLM and SGLang with 1e-05": the engines of off
 * grouped by the eps they use under rms_eps, into buf (returned). */
const char *engine_eps_phrase(unsigned off, double rms_eps, char *buf, size_t cap);

#endif
