/* ref_forward.c -- the float64 reference forward pass of the tests (see ref_forward.h), written
 * from the Hugging Face modeling files. Per family, what it computes (HF names):
 *   llama, mistral, qwen2   RMSNorm (w x), q/k/v/o_proj (+ q/k/v biases for qwen2, attention_bias),
 *                           RoPE rotate_half on the whole head, GQA, SwiGLU, sliding window (mistral;
 *                           qwen2 from max_window_layers with use_sliding_window)
 *   mimo                    qwen2's model (MiMoModel is Qwen2Model; its mtp_layers only draft tokens)
 *   qwen3, qwen3_moe        + q_norm / k_norm RMSNorm per head before RoPE; MoE: softmax router,
 *                           top-k, renormalised when norm_topk_prob
 *   qwen3_vl_moe            qwen3_moe's text tower, top-k always renormalised, experts fused: gate_up_proj
 *                           (E, D, 2I) as x @ W with [gate | up] column halves, down_proj (E, I, D) as x @ W
 *   gemma2                  RMSNorm x (1 + w), embeddings x sqrt(hidden) (rounded to the dtype),
 *                           sandwich norms, GeGLU (tanh), scale query_pre_attn_scalar^-1/2,
 *                           tanh soft-caps of scores and of the final logits, sliding window on
 *                           even layers, tied embeddings
 *   gemma3_text             + q_norm / k_norm (1 + w) per head, no soft-caps by default, 5 local :
 *                           1 global (sliding_window_pattern), local RoPE base rope_local_base_freq
 *                           and no rope_scaling on local layers
 *   mixtral                 Mistral attention, softmax router, top-k renormalised, w1 / w3 / w2
 *   phi3                    fused qkv_proj rows [Q; K; V], gate_up_proj rows [gate; up], partial
 *                           rotary (the first partial_rotary_factor x head_dim dims of each head)
 *   gpt_neox                query_key_value rows head by head [q; k; v] with bias, rotary_pct,
 *                           LayerNorm with bias, exact GELU MLP with biases, parallel residual
 *                           x + attn(ln1(x)) + mlp(ln2(x)), untied embed_out
 *   olmo2                   q_norm / k_norm over the whole projection, norms after attention and
 *                           MLP only (x + norm(attn(x)), x + norm(mlp(x)))
 *   olmo3                   OLMo 2's block; sliding window on the layer_types "sliding_attention"
 *                           layers (default: all but every 4th), which use the plain RoPE of
 *                           rope_theta; rope_scaling (YaRN) on the full-attention layers only:
 *                           inv_freq blended between f and f / factor by a linear ramp over the
 *                           pairs [floor(d ln(L0 / (2 pi beta_fast)) / (2 ln theta)), ceil(same with
 *                           beta_slow)], cos and sin times attention_factor (default 0.1 ln(factor) + 1)
 *   smollm3                 Llama's layer, but no RoPE on q and k of the layers whose no_rope_layers
 *                           entry is 0 (without the list: every no_rope_layer_interval-th, default 4);
 *                           with use_sliding_window and no layer_types, the window on those layers;
 *                           tied embeddings by default
 *   deepseek_v3             MLA: q_a_proj -> q_a_layernorm -> q_b_proj (or q_proj), kv_a_proj_with_mqa
 *                           -> kv_a_layernorm -> kv_b_proj [k_nope; v] per head, one shared RoPE key,
 *                           rope_interleave (pairs (2i, 2i+1)), scale (nope + rope)^-1/2; MoE from
 *                           first_k_dense_replace: sigmoid scores, e_score_correction_bias for the
 *                           choice only, top-2 sum per group, topk_group groups, top-k, weights
 *                           renormalised (+1e-20) times routed_scaling_factor, shared experts; YaRN
 *                           (rope_scaling / rope_parameters, Kimi-K2.5): olmo3's frequencies on the
 *                           de-interleaved RoPE dims, the scale times yarn_get_mscale(factor, mscale_all_dim)^2
 *   gemma3, qwen3_vl,       the text model of a multimodal checkpoint: text_config read as gemma3_text /
 *   mistral3, kimi_k25      qwen3 (qwen3_vl_text: M-RoPE on text-only positions is rotate_half RoPE) /
 *                           mistral / deepseek_v3; tensors under language_model.model. (head language_model.lm_head) or
 *                           model.language_model. (head lm_head); gemma3's multimodal head: no final soft-cap
 *   glm4_moe                q/k/v_proj with biases when attention_bias, o_proj never; q_norm / k_norm
 *                           per head before RoPE when use_qk_norm; RoPE rotate_half on the first
 *                           int(head_dim x partial_rotary_factor) dims (default 0.5); rms_norm_eps
 *                           1e-5; MoE from first_k_dense_replace (default 1) routed as deepseek_v3's
 *                           (norm_topk_prob default true), plus n_shared_experts (default 1) x
 *                           moe_intermediate_size shared experts
 *   gpt_oss                 q/k/v/o_proj with biases (attention_bias, default true), a learned sink logit
 *                           per head in every softmax row (unscaled; its weight dropped), sliding window on
 *                           the layer_types "sliding_attention" layers (default: even layers), YaRN on
 *                           every layer with `truncate` (false: the ramp bounds are not floored / ceiled),
 *                           rms_norm_eps 1e-5; every layer MoE: router logits x W^T + b, top-k of the
 *                           logits, softmax over those k; experts gate_up_proj (E, D, 2I) as x @ W + bias,
 *                           gate = columns 0, 2, 4..., up = 1, 3, 5...; gate clamped above at 7, up to
 *                           [-7, 7]; (up + 1) * gate * sigmoid(1.702 gate) @ down_proj (E, I, D) + bias
 *   deepseek_v32            deepseek_v3's MLA and MoE, and the lightning indexer (DeepseekV32Indexer): query t
 *                           attends only to the index_topk keys s <= t of highest sum_h w_h relu(q_h . k_s /
 *                           sqrt(index_head_dim)), q = indexer.wq_b(q latent), k = LayerNorm(indexer.wk(x),
 *                           eps 1e-6), both with rotate_half RoPE on their first qk_rope_head_dim dims,
 *                           w = indexer.weights_proj(x) / sqrt(index_n_heads); every key while t < index_topk
 *   glm_moe_dsa             deepseek_v32's, with interleaved RoPE in MLA (rope_interleave) and in the indexer
 *                           (indexer_rope_interleave, default true: modeling_glm_moe_dsa since PR #46372 applies
 *                           apply_rotary_pos_emb_interleave to both), rope_theta from rope_parameters,
 *                           rms_norm_eps 1e-5; IndexShare (GLM-5.2): the indexer_types "shared" layers take the
 *                           previous full layer's selection
 *   kimi_linear             (modeling_kimi.py) KimiDeltaAttention on the kda_layers (1-based): q / k / v_proj each
 *                           through its causal depthwise conv (no bias) and SiLU, q and k L2-normalised per
 *                           head (eps 1e-6 under the root), q x head_dim^-1/2; per channel the log-decay
 *                           -exp(A_log[h]) softplus(f_b(f_a(x)) + dt_bias), beta = sigmoid(b_proj(x)); the
 *                           state S (k dims x v dims) decays row by row, S += k (beta (v - S^T k))^T, o = S^T q;
 *                           o_norm: RMSNorm (rms_norm_eps) x weight x sigmoid(g_b(g_a(x))); o_proj. MLA layers
 *                           with q_proj and no RoPE (mla_use_nope); MoE as deepseek_v3's under
 *                           block_sparse_moe. (gate + gate.e_score_correction_bias, experts w1/w3/w2,
 *                           shared_experts), KimiLinearConfig's key names
 *   exaone4                 OLMo 2's block (norms after attention and MLP only) with q_norm / k_norm per
 *                           head after the projections; sliding window on the layer_types
 *                           "sliding_attention" layers (or sliding_window_pattern: "LLLG" per layer, or
 *                           every n-th layer global, default 4); with a window, no RoPE on the others;
 *                           rope_scaling llama3 (f / factor above orig / low_freq_factor wavelengths, f
 *                           below orig / high_freq_factor, blended between) on every rotating layer
 *   minimax_m2              q_norm / k_norm over the whole projection; RoPE rotate_half on the first
 *                           rotary_dim dims of each head; every layer a MoE: sigmoid scores, top-k of
 *                           scores + block_sparse_moe.e_score_correction_bias, the chosen (unbiased)
 *                           scores renormalised, experts w1 / w3 / w2 of intermediate_size
 *   ministral3              Mistral's layer (no window unless sliding_window); rope_scaling or, in
 *                           transformers 5 configs, rope_parameters (with rope_theta): YaRN as olmo3's on
 *                           every layer, attention factor get_mscale(f, mscale) / get_mscale(f,
 *                           mscale_all_dim) when both are given; q at position p times 1 + beta ln(1 +
 *                           floor(p / original_max_position_embeddings)) (llama_4_scaling_beta)
 *   qwen3_next              Qwen3NextRMSNorm x (1 + w) everywhere (input / post-attention / final norms,
 *                           q_norm / k_norm per head); layers "linear_attention" by layer_types, else
 *                           all but every full_attention_interval-th (4). Full layers: q_proj viewed
 *                           (H, 2 hd) and chunked into [query | gate] per head, RoPE rotate_half on
 *                           the first hd x partial_rotary_factor (0.25) dims, attention output x
 *                           sigmoid(gate) before o_proj. Linear layers (Qwen3NextGatedDeltaNet):
 *                           in_proj_qkvz viewed (Hk, 2 dk + 2 (Hv/Hk) dv) split [q | k | v | z],
 *                           in_proj_ba viewed (Hk, 2 Hv/Hk) split [b | a]; depthwise causal conv1d
 *                           (padding K-1, the first T outputs) then SiLU over the concatenation
 *                           [q | k | v] (flattened head-major); q, k repeat_interleave'd to Hv heads;
 *                           l2norm (x rsqrt(sum x^2 + 1e-6)) of q and k, q x dk^-1/2; beta =
 *                           sigmoid(b), g = -exp(A_log) softplus(a + dt_bias); per step
 *                           S = S e^g, kv_mem = Sᵀk, delta = (v - kv_mem) beta, S += k deltaᵀ,
 *                           o = Sᵀq (torch_recurrent_gated_delta_rule); Qwen3NextRMSNormGated
 *                           o rsqrt(mean o^2 + eps) w silu(z) (plain w); out_proj. MoE as qwen3_moe's
 *                           (softmax, top-k, renormalised when norm_topk_prob; qwen3_5_moe always) plus the shared expert
 *                           (shared_expert_intermediate_size) times sigmoid(shared_expert_gate(x))
 *   llama4_text, llama4     Llama 4 (modeling_llama4): q/k/v/o_proj, RoPE as complex numbers over ADJACENT pairs
 *                           (2i, 2i + 1) with llama3 frequencies (rope_scaling; low = high: no blend band) on the
 *                           layers whose no_rope_layers entry is 1 (absent or []: all but every
 *                           no_rope_layer_interval-th, 4); there, with use_qk_norm (default true), q and k per head
 *                           x rsqrt(mean x^2 + rms_norm_eps) after RoPE (Llama4TextL2Norm, no weight), and
 *                           attention within chunks: key j seen from query i when j <= i and j >= i - i %
 *                           attention_chunk_size; on the NoPE layers every earlier key, and with
 *                           attn_temperature_tuning q x (1 + attn_scale ln(1 + floor((i + 1) / floor_scale)));
 *                           MoE on moe_layers (default every interleave_moe_layer_step-th): feed_forward.router
 *                           logits, top-k, the chosen weight sigmoid(logit) multiplying the expert's INPUT,
 *                           experts feed_forward.experts.gate_up_proj (E, D, 2I) as x @ W with [gate | up]
 *                           halves, down_proj (E, I, D), plus feed_forward.shared_expert (intermediate_size);
 *                           dense layers feed_forward.{gate,up,down}_proj of intermediate_size_mlp; the
 *                           multimodal llama4: text_config, tensors under language_model.model.
 * Sliding windows: key j is seen from query i when j <= i and i - j < window (transformers'
 * masking_utils sliding_window_overlay). */
#define _GNU_SOURCE
#include "ref_forward.h"

#include "al.h"
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { R_LLAMA, R_MISTRAL, R_QWEN2, R_QWEN3, R_QWEN3_MOE, R_GEMMA2, R_GEMMA3, R_MIXTRAL, R_PHI3, R_NEOX,
               R_OLMO2, R_OLMO3, R_DSV3, R_GLM4_MOE, R_SMOLLM3, R_GPT_OSS, R_DSV32, R_GLM_DSA, R_EXAONE4,
               R_MINIMAX_M2, R_MINISTRAL3, R_QWEN3_NEXT, R_LLAMA4,
               R_KIMI_LINEAR, R_GEMMA4 } rfam;
typedef enum { A_SILU, A_GELU_TANH, A_GELU } ract;

#define REF_MAX_LAYERS 256

struct RefModel {
    rfam fam;
    st_file *st;
    const char *prefix;            /* "model." / "gpt_neox." (a text tower: "language_model.model." / "model.language_model.") */
    const char *head;              /* the output layer's tensor name */
    bool tower;                    /* the text model of a multimodal checkpoint (config.json's text_config) */
    bool experts_xw;               /* Qwen3-VL MoE: gate_up_proj (E, D, 2I) as x @ W, [gate | up] halves; down (E, I, D) */
    int D, H, KV, hd, L, V, F;
    double eps;
    double theta, local_theta, rope_factor;   /* rope_factor: linear scaling (1: none) */
    int rot;                       /* rotary dims per head (the first rot dims) */
    bool tied, qkv_bias, o_bias, parallel, head_qk_norm;
    int window;                    /* 0: none */
    /* rope_scaling yarn (olmo3: full-attention layers only) */
    bool yarn;
    double yarn_factor, yarn_orig, beta_fast, beta_slow, yarn_attn;
    bool yarn_truncate;
    double yarn_softmax;          /* MLA: the softmax scale's factor mscale^2 (DeepSeek's yarn_get_mscale) */
    bool sinks;                    /* gpt_oss: self_attn.sinks */
    int cap_L, cap_h;              /* ref_capture: the head whose attention weights go to cap_P (cap_n, cap_n) */
    double *cap_P;
    size_t cap_n;
    /* rope_scaling llama3 (exaone4): every layer that rotates */
    bool llama3;
    double l3_factor, l3_low, l3_high, l3_orig;
    /* Ministral 3: q at position p times 1 + q_beta ln(1 + floor(p / q_floor)) (q_beta 0: none) */
    double q_beta, q_floor;
    bool sliding[REF_MAX_LAYERS];
    bool no_rope[REF_MAX_LAYERS];  /* no RoPE on this layer (SmolLM3) */
    double scale, attn_cap, final_cap, embed_scale;
    ract act;
    /* mixture of experts */
    int E, topk, eF, first_dense, layer_freq, sparse_step, n_group, topk_group, n_shared, n_only, only[64];
    bool norm_topk, sigmoid;
    double routed_scale;
    /* MLA */
    int qlora, kvlora, nope, rope, vdim;
    bool interleave;
    /* the lightning indexer (deepseek_v32, glm_moe_dsa; topk 0: none) */
    int ih, id, topk_keys;
    bool idx_interleave;           /* its RoPE pairs interleaved (GLM-5's indexer_rope_interleave), else rotate_half */
    bool no_select;                /* ref_no_indexer: every key, as if the indexer were switched off */
    bool shared[REF_MAX_LAYERS];   /* indexer_types "shared": the previous full layer's selection (IndexShare) */
    bool no_share;                 /* ref_no_index_share: the shared layers attend to every key */
    unsigned char *sel;            /* (T x T) the last full layer's selection in ref_logits, or NULL */
    /* Qwen3-Next: the output gate, the Gated DeltaNet layers and their dims */
    bool gate;
    bool linear[REF_MAX_LAYERS];
    int lk, lv, ldk, ldv, lconv;
    int shared_ff;                 /* shared_expert_intermediate_size (0: none) */
    unsigned ablate;               /* REF_ABLATE_* (tests that the checks see each feature) */
    /* Llama 4: chunk of the RoPE layers (0: none), the L2 q/k norm there, the NoPE layers' temperature, the dense
       width, the MoE layers */
    int chunk, Fmlp;
    bool l2qk;
    double temp_scale, temp_floor;
    bool moe_on[REF_MAX_LAYERS];
    /* Gemma 4: attention_k_eq_v, the first KV-shared layer (0: none), use_double_wide_mlp, the full layers'
       proportional partial_rotary_factor, and each layer's K / V (T x KV hd, after norms and RoPE) in ref_logits */
    bool k_eq_v, double_wide;
    int kv_from, ghd, gkv;         /* + the full layers' global_head_dim and KV heads (num_global_key_value_heads) */
    double prop;
    double **g4k, **g4v;
    int ple, ple_vocab;            /* hidden_size_per_layer_input, vocab_size_per_layer_input (0: no per-layer inputs) */
    int g4e, g4top, g4i;           /* the MoE block: num_experts (0: none), top_k_experts, moe_intermediate_size */
    double *ple_in;                /* (T, L ple) the per-layer inputs in ref_logits */
};

/* ================================================================ config.json */

/* Number at key: dflt when absent, if_null when null. */
static double jnum(const cJSON *r, const char *k, double dflt, double if_null) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r, k);
    if (!j) return dflt;
    if (cJSON_IsNull(j)) return if_null;
    if (cJSON_IsBool(j)) return cJSON_IsTrue(j);
    return cJSON_IsNumber(j) ? j->valuedouble : dflt;
}
static bool jbool(const cJSON *r, const char *k, bool dflt) { return jnum(r, k, dflt, dflt) != 0; }
static const char *jstr(const cJSON *r, const char *k) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r, k);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

static int parse_family(const char *mt, rfam *f) {
    static const struct { const char *n; rfam f; } t[] = {
        {"llama", R_LLAMA}, {"mistral", R_MISTRAL}, {"qwen2", R_QWEN2}, {"qwen3", R_QWEN3},
        {"qwen3_moe", R_QWEN3_MOE}, {"gemma2", R_GEMMA2}, {"gemma3_text", R_GEMMA3}, {"mixtral", R_MIXTRAL},
        {"phi3", R_PHI3}, {"gpt_neox", R_NEOX}, {"olmo2", R_OLMO2}, {"olmo3", R_OLMO3}, {"deepseek_v3", R_DSV3},
        {"glm4_moe", R_GLM4_MOE}, {"smollm3", R_SMOLLM3}, {"qwen3_vl_text", R_QWEN3}, {"qwen3_vl_moe_text", R_QWEN3_MOE}, {"gpt_oss", R_GPT_OSS},
        {"deepseek_v32", R_DSV32}, {"glm_moe_dsa", R_GLM_DSA},
        {"mimo", R_QWEN2}, {"exaone4", R_EXAONE4}, {"minimax_m2", R_MINIMAX_M2},
        {"ministral3", R_MINISTRAL3},              /* MiMoModel is Qwen2Model (+ mtp_layers the logits never read) */
        {"qwen3_next", R_QWEN3_NEXT}, {"qwen3_5_text", R_QWEN3_NEXT}, {"qwen3_5_moe_text", R_QWEN3_NEXT},
        {"llama4_text", R_LLAMA4}, {"kimi_linear", R_KIMI_LINEAR}, {"gemma4_text", R_GEMMA4}};
    for (size_t i = 0; mt && i < sizeof t / sizeof *t; i++)
        if (!strcmp(mt, t[i].n)) { *f = t[i].f; return AL_OK; }
    return al_err("ref: model_type '%s' is not covered by the reference", mt ? mt : "(none)");
}

static bool gemma(const RefModel *m) { return m->fam == R_GEMMA2 || m->fam == R_GEMMA3; }
/* RMSNorm x (1 + w): Gemma's, Qwen3-Next's (unless ablated). */
static bool one_plus(const RefModel *m) {
    return gemma(m) || (m->fam == R_QWEN3_NEXT && !(m->ablate & REF_ABLATE_ONE_PLUS));
}
static bool olmo(const RefModel *m) { return m->fam == R_OLMO2 || m->fam == R_OLMO3; }
/* MLA: DeepSeek-V3, and V3.2 / GLM-5 with their indexer. */
static bool mla(const RefModel *m) {
    return m->fam == R_DSV3 || m->fam == R_DSV32 || m->fam == R_GLM_DSA || m->fam == R_KIMI_LINEAR;
}
/* Norms after attention and MLP only: OLMo 2 / 3 and EXAONE 4 (Exaone4DecoderLayer). */
static bool post_block(const RefModel *m) { return olmo(m) || m->fam == R_EXAONE4; }
/* Qwen3-MoE's routing and layers (Qwen3-Next: and its shared expert). */
static bool qwen_moe(const RefModel *m) { return m->fam == R_QWEN3_MOE || m->fam == R_QWEN3_NEXT; }
/* DeepSeek-V3's router, correction bias and shared experts (GLM-4 MoE's Glm4MoeTopkRouter is the same). */
static bool ds_router(const RefModel *m) { return mla(m) || m->fam == R_GLM4_MOE; }
/* Sigmoid scores with a correction bias for the choice only: DeepSeek-V3's and MiniMax-M2's
 * (MiniMaxM2TopKRouter: top-k of sigmoid + bias, the unbiased sigmoids renormalised, no groups). */
static bool sig_router(const RefModel *m) { return ds_router(m) || m->fam == R_MINIMAX_M2; }
/* Mixtral's expert names block_sparse_moe.experts.E.{w1,w3,w2} (MiniMax-M2 too). */
static bool mixtral_names(const RefModel *m) { return m->fam == R_MIXTRAL || m->fam == R_MINIMAX_M2; }

/* SmolLM3Config: no_rope_layers[L] 0 means no RoPE on layer L; absent (null), layers with
 * (L + 1) % no_rope_layer_interval == 0 have none. */
static void parse_nope(RefModel *m, const cJSON *r) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(r, "no_rope_layers");
    int every = (int)jnum(r, "no_rope_layer_interval", 4, 4);
    bool given = cJSON_IsArray(list) && (m->fam != R_LLAMA4 || cJSON_GetArraySize(list) > 0);   /* Llama4: `if x else` */
    for (int L = 0; (m->fam == R_SMOLLM3 || m->fam == R_LLAMA4) && L < m->L && L < REF_MAX_LAYERS; L++) {
        const cJSON *e = given ? cJSON_GetArrayItem(list, L) : NULL;
        m->no_rope[L] = given ? (cJSON_IsNumber(e) && e->valuedouble == 0) : (L + 1) % every == 0;
    }
}

/* Sliding layers: layer_types, else the family's pattern (HF configuration classes). */
static void parse_windows(RefModel *m, const cJSON *r) {
    double w = jnum(r, "sliding_window", m->fam == R_MISTRAL || gemma(m) || m->fam == R_OLMO3 || m->fam == R_EXAONE4
                                             ? 4096 : m->fam == R_GPT_OSS ? 128 : m->fam == R_GEMMA4 ? 512 : 0, 0);
    if ((m->fam == R_QWEN2 || m->fam == R_QWEN3 || m->fam == R_QWEN3_MOE || m->fam == R_SMOLLM3) &&
        !jbool(r, "use_sliding_window", false))
        w = 0;
    m->window = (int)w;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(r, "layer_types");
    int pattern = (int)jnum(r, "sliding_window_pattern", m->fam == R_EXAONE4 ? 4 : 6, 6);
    int mwl = (int)jnum(r, "max_window_layers", 0, 0);
    const char *lg = jstr(r, "sliding_window_pattern");      /* EXAONE 4: "LLLG" */
    for (int L = 0; L < m->L && L < REF_MAX_LAYERS; L++) {
        const cJSON *e = cJSON_IsArray(lt) ? cJSON_GetArrayItem(lt, L) : NULL;
        bool s;
        if (e) s = cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention");
        else if (m->fam == R_GEMMA2 || m->fam == R_GPT_OSS) s = L % 2 == 0;
        else if (m->fam == R_GEMMA3 || m->fam == R_GEMMA4) s = (L + 1) % pattern != 0;
        else if (m->fam == R_OLMO3) s = (L + 1) % 4 != 0;
        else if (m->fam == R_EXAONE4 && lg) s = lg[0] && lg[(size_t)L % strlen(lg)] == 'L';
        else if (m->fam == R_EXAONE4) s = (L + 1) % pattern != 0;
        else if (m->fam == R_QWEN2 || m->fam == R_QWEN3 || m->fam == R_QWEN3_MOE) s = L >= mwl;
        else if (m->fam == R_SMOLLM3) s = m->no_rope[L];      /* sliding on the NoPE layers */
        else s = true;
        m->sliding[L] = s && m->window > 0;
        /* Exaone4Attention: `if self.sliding_window is None or self.is_sliding`: RoPE */
        if (m->fam == R_EXAONE4) m->no_rope[L] = m->window > 0 && !m->sliding[L];
    }
    if (m->fam == R_GEMMA4 && m->L <= REF_MAX_LAYERS) m->sliding[m->L - 1] = false;   /* Gemma4TextConfig: last layer full */
}

/* YaRN as transformers' _compute_yarn_parameters reads it (DeepSeek's note: with
 * original_max_position_embeddings given, factor = max_position_embeddings / original -- the test
 * configs make the two agree); attention_factor, else 0.1 ln(factor) + 1. */
static void parse_yarn(RefModel *m, const cJSON *r, const cJSON *rs) {
    double maxpos = jnum(r, "max_position_embeddings", 2048, 2048);
    m->yarn = true;
    m->yarn_factor = jnum(rs, "factor", 1, 1);
    m->yarn_orig = jnum(rs, "original_max_position_embeddings", maxpos, maxpos);
    if (cJSON_HasObjectItem(rs, "original_max_position_embeddings")) m->yarn_factor = maxpos / m->yarn_orig;
    m->beta_fast = jnum(rs, "beta_fast", 32, 32);
    m->beta_slow = jnum(rs, "beta_slow", 1, 1);
    m->yarn_truncate = jbool(rs, "truncate", true);
    m->yarn_attn = jnum(rs, "attention_factor", -1, -1);
    double ms = jnum(rs, "mscale", 0, 0), msa = jnum(rs, "mscale_all_dim", 0, 0), f = m->yarn_factor;
    if (m->yarn_attn < 0 && ms != 0 && msa != 0)          /* get_mscale(f, mscale) / get_mscale(f, mscale_all_dim) */
        m->yarn_attn = f <= 1 ? 1.0 : (0.1 * ms * log(f) + 1.0) / (0.1 * msa * log(f) + 1.0);
    if (m->yarn_attn < 0) m->yarn_attn = m->yarn_factor <= 1 ? 1.0 : 0.1 * log(m->yarn_factor) + 1.0;
    /* DeepseekV3Attention: scaling *= yarn_get_mscale(factor, mscale_all_dim)^2 when mscale_all_dim */
    double cf = jnum(rs, "factor", 1, 1), ym = cf <= 1 ? 1.0 : 0.1 * msa * log(cf) + 1.0;
    m->yarn_softmax = msa != 0 ? ym * ym : 1.0;
}

static int parse_rope(RefModel *m, const cJSON *r) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(r, "rope_scaling");
    if (!cJSON_IsObject(rs)) rs = cJSON_GetObjectItemCaseSensitive(r, "rope_parameters");   /* transformers 5 */
    m->theta = jnum(r, m->fam == R_NEOX ? "rotary_emb_base" : "rope_theta", jnum(rs, "rope_theta", 10000, 10000), 10000);
    m->local_theta = m->fam == R_GEMMA3 ? jnum(r, "rope_local_base_freq", 10000, 10000) : 0;
    double pf0 = m->fam == R_GLM4_MOE ? 0.5 : m->fam == R_QWEN3_NEXT ? 0.25 : 1;   /* the config classes' defaults */
    if (m->fam == R_MINIMAX_M2) pf0 = jnum(r, "rotary_dim", m->hd, m->hd) / m->hd;   /* MiniMaxM2Config */
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(r, "rope_parameters");   /* Qwen3.5: theta, factor there */
    if (cJSON_IsObject(rp)) {
        pf0 = jnum(rp, "partial_rotary_factor", pf0, pf0);
        m->theta = jnum(r, "rope_theta", jnum(rp, "rope_theta", 10000, 10000), 10000);
    }
    double pf = m->fam == R_NEOX ? jnum(r, "rotary_pct", 0.25, 0.25) : jnum(r, "partial_rotary_factor", pf0, pf0);
    m->rot = (int)(m->hd * pf);
    m->rope_factor = 1;
    if (cJSON_IsObject(rs)) {
        const char *t = jstr(rs, "rope_type") ? jstr(rs, "rope_type") : jstr(rs, "type");
        if (t && !strcmp(t, "linear")) m->rope_factor = jnum(rs, "factor", 1, 1);
        else if (t && !strcmp(t, "yarn") && (m->fam == R_OLMO3 || m->fam == R_GPT_OSS || m->fam == R_MINISTRAL3 || mla(m)))
            parse_yarn(m, r, rs);
        else if (t && !strcmp(t, "llama3") && (m->fam == R_EXAONE4 || m->fam == R_LLAMA4)) {
            m->llama3 = true;
            m->l3_factor = jnum(rs, "factor", 1, 1);
            m->l3_low = jnum(rs, "low_freq_factor", 1, 1);
            m->l3_high = jnum(rs, "high_freq_factor", 4, 4);
            m->l3_orig = jnum(rs, "original_max_position_embeddings", 8192, 8192);
        }
        else if (t && strcmp(t, "default")) return al_err("ref: rope_scaling '%s' is not covered", t);
    }
    if (m->fam == R_MINISTRAL3 && cJSON_IsObject(rs)) {   /* Ministral3Attention: _get_llama_4_attn_scale */
        m->q_beta = jnum(rs, "llama_4_scaling_beta", 0, 0);
        m->q_floor = jnum(rs, "original_max_position_embeddings", 0, 0);
    }
    return AL_OK;
}

static void parse_moe(RefModel *m, const cJSON *r) {
    m->E = (int)(mixtral_names(m) || m->fam == R_GPT_OSS ? jnum(r, "num_local_experts", m->fam == R_GPT_OSS ? 128 : 8, 0)
                 : qwen_moe(m) ? jnum(r, "num_experts", 0, 0) : jnum(r, "n_routed_experts", 0, 0));
    if (!mixtral_names(m) && !qwen_moe(m) && m->fam != R_GPT_OSS && !ds_router(m)) m->E = 0;
    m->shared_ff = m->fam == R_QWEN3_NEXT ? (int)jnum(r, "shared_expert_intermediate_size", 0, 0) : 0;
    m->topk = (int)jnum(r, "num_experts_per_tok", 2, 2);
    m->eF = (int)jnum(r, "moe_intermediate_size", m->F, m->F);
    if (mixtral_names(m) || m->fam == R_GPT_OSS) m->eF = m->F;
    const char *mt = jstr(r, "model_type");   /* Qwen3-VL MoE, Qwen3.5 MoE (Qwen3_5MoeTopKRouter): always */
    m->norm_topk = mixtral_names(m) || m->experts_xw || (mt && !strcmp(mt, "qwen3_5_moe_text")) ||
                   jbool(r, "norm_topk_prob", ds_router(m));
    m->first_dense = (int)jnum(r, "first_k_dense_replace", m->fam == R_GLM4_MOE, m->fam == R_GLM4_MOE);
    m->layer_freq = (int)jnum(r, "moe_layer_freq", 1, 1);
    m->sparse_step = (int)jnum(r, "decoder_sparse_step", 1, 1);
    m->n_group = (int)jnum(r, "n_group", 1, 1);
    m->topk_group = (int)jnum(r, "topk_group", 1, 1);
    m->n_shared = (int)jnum(r, "n_shared_experts", m->fam == R_GLM4_MOE, m->fam == R_GLM4_MOE);
    if (m->fam == R_KIMI_LINEAR) {              /* KimiLinearConfig's names of DeepSeek-V3's keys */
        m->E = (int)jnum(r, "num_experts", 0, 0);
        m->topk = (int)jnum(r, "num_experts_per_token", 2, 2);
        m->n_shared = (int)jnum(r, "num_shared_experts", 0, 0);
        m->n_group = (int)jnum(r, "num_expert_group", 1, 1);
        m->norm_topk = jbool(r, "moe_renormalize", true);
    }
    m->routed_scale = jnum(r, "routed_scaling_factor", 1, 1);
    m->sigmoid = sig_router(m);
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(r, "mlp_only_layers"), *e;
    if (cJSON_IsArray(mo))
        cJSON_ArrayForEach(e, mo) if (m->n_only < 64 && cJSON_IsNumber(e)) m->only[m->n_only++] = e->valueint;
}

/* GlmMoeDsaConfig.__post_init__'s indexer_types: the list, else index_topk_pattern ("F" / "S" per layer),
 * else "full" where max(L - index_skip_topk_offset + 1, 0) % index_topk_freq == 0 (defaults 2 and 1). */
static void parse_index_share(RefModel *m, const cJSON *r) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "indexer_types");
    const char *pat = jstr(r, "index_topk_pattern");
    int freq = (int)jnum(r, "index_topk_freq", 1, 1), off = (int)jnum(r, "index_skip_topk_offset", 2, 2);
    for (int L = 0; L < m->L && L < REF_MAX_LAYERS; L++) {
        const cJSON *e = cJSON_IsArray(t) ? cJSON_GetArrayItem(t, L) : NULL;
        if (e) m->shared[L] = cJSON_IsString(e) && !strcmp(e->valuestring, "shared");
        else if (pat) m->shared[L] = (int)strlen(pat) > L && pat[L] == 'S';
        else m->shared[L] = (L - off + 1 > 0 ? L - off + 1 : 0) % (freq > 0 ? freq : 1) != 0;
    }
}

/* Qwen3NextConfig: layer_types, else "linear_attention" but every full_attention_interval-th layer;
 * linear_* dims (defaults 16, 32, 128, 128, 4); the gated q_proj (attn_output_gate, default true). */
static void parse_linear(RefModel *m, const cJSON *r) {
    if (m->fam == R_KIMI_LINEAR) {              /* KimiLinearConfig.is_kda_layer: (L + 1) in kda_layers */
        const cJSON *la = cJSON_GetObjectItemCaseSensitive(r, "linear_attn_config"), *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(la, "kda_layers"))
            if (cJSON_IsNumber(e) && e->valueint >= 1 && e->valueint <= m->L && e->valueint <= REF_MAX_LAYERS)
                m->linear[e->valueint - 1] = true;
        m->lk = m->lv = (int)jnum(la, "num_heads", 32, 32);
        m->ldk = m->ldv = (int)jnum(la, "head_dim", 128, 128);
        m->lconv = (int)jnum(la, "short_conv_kernel_size", 4, 4);
    }
    if (m->fam != R_QWEN3_NEXT) return;
    m->gate = jbool(r, "attn_output_gate", true);
    int every = (int)jnum(r, "full_attention_interval", 4, 4);
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(r, "layer_types");
    for (int L = 0; L < m->L && L < REF_MAX_LAYERS; L++) {
        const cJSON *e = cJSON_IsArray(lt) ? cJSON_GetArrayItem(lt, L) : NULL;
        m->linear[L] = e ? cJSON_IsString(e) && !strcmp(e->valuestring, "linear_attention") : (L + 1) % every != 0;
    }
    m->lk = (int)jnum(r, "linear_num_key_heads", 16, 16);
    m->lv = (int)jnum(r, "linear_num_value_heads", 32, 32);
    m->ldk = (int)jnum(r, "linear_key_head_dim", 128, 128);
    m->ldv = (int)jnum(r, "linear_value_head_dim", 128, 128);
    m->lconv = (int)jnum(r, "linear_conv_kernel_dim", 4, 4);
}

/* Llama4TextConfig: attention_chunk_size (8192; null: none), use_qk_norm (true), attn_temperature_tuning (true;
 * a number counts as its truth), floor_scale (8192), attn_scale (0.1); num_local_experts (16) top-k
 * num_experts_per_tok (1) of intermediate_size (8192), dense layers intermediate_size_mlp (16384); moe_layers, else
 * range(step - 1, layers, step) with step interleave_moe_layer_step (1). */
static void parse_llama4(RefModel *m, const cJSON *r) {
    if (m->fam != R_LLAMA4) return;
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(r, "attention_chunk_size");
    m->chunk = cJSON_IsNull(ch) ? 0 : (int)jnum(r, "attention_chunk_size", 8192, 0);
    m->l2qk = jbool(r, "use_qk_norm", true);
    bool tune = jnum(r, "attn_temperature_tuning", 1, 0) != 0;
    m->temp_floor = jnum(r, "floor_scale", 8192, 8192);
    m->temp_scale = tune ? jnum(r, "attn_scale", 0.1, 0.1) : 0;
    m->E = (int)jnum(r, "num_local_experts", 16, 16);
    m->topk = (int)jnum(r, "num_experts_per_tok", 1, 1);
    m->eF = m->F;
    m->Fmlp = (int)jnum(r, "intermediate_size_mlp", 16384, 16384);
    int step = (int)jnum(r, "interleave_moe_layer_step", 1, 1);
    const cJSON *ml = cJSON_GetObjectItemCaseSensitive(r, "moe_layers"), *e, *list = cJSON_IsArray(ml) ? ml : NULL;
    for (int L = 0; L < m->L && L < REF_MAX_LAYERS; L++) m->moe_on[L] = !list && step > 0 && L % step == step - 1;
    cJSON_ArrayForEach(e, list)
        if (cJSON_IsNumber(e) && e->valueint >= 0 && e->valueint < REF_MAX_LAYERS) m->moe_on[e->valueint] = true;
}

/* Gemma4TextConfig: rope_parameters per layer type (sliding_attention: rope_theta, default 1e4; full_attention:
 * rope_theta 1e6, rope_type "proportional" with partial_rotary_factor, 1.0 when the dict omits it, 0.25 when
 * rope_parameters is absent), attention_k_eq_v, num_kv_shared_layers, use_double_wide_mlp; per-layer embeddings and
 * the MoE block, and per-type head dims, are not covered. */
static int parse_gemma4(RefModel *m, const cJSON *r) {
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(r, "rope_parameters");
    const cJSON *full = cJSON_GetObjectItemCaseSensitive(rp, "full_attention");
    const cJSON *slide = cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention");
    const char *ft = jstr(full, "rope_type");
    m->theta = jnum(full, "rope_theta", 1e6, 1e6);
    m->local_theta = jnum(slide, "rope_theta", 1e4, 1e4);
    m->prop = !rp ? 0.25 : ft && !strcmp(ft, "proportional") ? jnum(full, "partial_rotary_factor", 1, 1) : 1;
    m->rot = m->hd;
    if (jnum(full, "factor", 1, 1) != 1) return al_err("ref: a proportional RoPE factor is not covered");
    m->k_eq_v = jbool(r, "attention_k_eq_v", false);
    int shared = (int)jnum(r, "num_kv_shared_layers", 0, 0);
    m->kv_from = shared > 0 ? m->L - shared : 0;
    m->double_wide = jbool(r, "use_double_wide_mlp", false);
    m->ple = (int)jnum(r, "hidden_size_per_layer_input", 256, 0);
    m->ple_vocab = (int)jnum(r, "vocab_size_per_layer_input", 262144, 262144);
    m->g4e = jbool(r, "enable_moe_block", false) ? (int)jnum(r, "num_experts", 0, 0) : 0;
    m->g4top = (int)jnum(r, "top_k_experts", 0, 0);
    m->g4i = (int)jnum(r, "moe_intermediate_size", 0, 0);
    if (m->g4e && (m->g4top <= 0 || m->g4top > m->g4e || m->g4i <= 0)) return al_err("ref: bad Gemma 4 MoE block");
    m->ghd = (int)jnum(r, "global_head_dim", 512, m->hd);             /* None: head_dim */
    m->gkv = m->k_eq_v ? (int)jnum(r, "num_global_key_value_heads", m->KV, m->KV) : m->KV;
    if (m->ghd <= 0 || m->ghd > 512 || m->gkv <= 0 || m->H % m->gkv) return al_err("ref: bad Gemma 4 global dims");
    return AL_OK;
}

static int parse_config(RefModel *m, const cJSON *r) {
    if (parse_family(jstr(r, "model_type"), &m->fam)) return AL_ERR;
    m->experts_xw = jstr(r, "model_type") && !strcmp(jstr(r, "model_type"), "qwen3_vl_moe_text");
    m->prefix = m->fam == R_NEOX ? "gpt_neox." : "model.";
    m->head = m->fam == R_NEOX ? "embed_out.weight" : "lm_head.weight";
    m->D = (int)jnum(r, "hidden_size", 0, 0);
    m->H = (int)jnum(r, "num_attention_heads", 0, 0);
    m->KV = m->fam == R_NEOX ? m->H : (int)jnum(r, "num_key_value_heads", m->H, m->H);
    m->L = (int)jnum(r, "num_hidden_layers", 0, 0);
    m->V = (int)jnum(r, "vocab_size", 0, 0);
    m->F = (int)jnum(r, "intermediate_size", 0, 0);
    if (m->D <= 0 || m->H <= 0 || m->KV <= 0 || m->L <= 0 || m->L > REF_MAX_LAYERS || m->V <= 0)
        return al_err("ref: config.json lacks hidden_size / heads / layers / vocab");
    m->hd = m->fam == R_PHI3 || m->fam == R_NEOX || olmo(m) ? m->D / m->H
                                                            : (int)jnum(r, "head_dim", m->D / m->H, m->D / m->H);
    m->eps = m->fam == R_NEOX ? jnum(r, "layer_norm_eps", 1e-5, 1e-5)
                              : jnum(r, "rms_norm_eps", m->fam == R_MIXTRAL || m->fam == R_PHI3 || olmo(m) ||
                                                            m->fam == R_GLM4_MOE || m->fam == R_GPT_OSS || m->fam == R_GLM_DSA ||
                                                            m->fam == R_EXAONE4 || m->fam == R_MINISTRAL3 ||
                                                            m->fam == R_LLAMA4 ? 1e-5 : 1e-6,
                                    1e-6);
    m->tied = jbool(r, "tie_word_embeddings", gemma(m) || m->fam == R_SMOLLM3 || m->fam == R_GEMMA4);
    bool ab = jbool(r, "attention_bias", m->fam == R_NEOX || m->fam == R_GPT_OSS);
    m->sinks = m->fam == R_GPT_OSS;
    m->qkv_bias = m->fam == R_QWEN2 || ab;
    m->o_bias = m->fam != R_QWEN2 && m->fam != R_GLM4_MOE && ab;     /* GLM: o_proj bias=False */
    m->head_qk_norm = m->fam == R_QWEN3 || m->fam == R_QWEN3_MOE || m->fam == R_GEMMA3 || m->fam == R_EXAONE4 ||
                      m->fam == R_QWEN3_NEXT || m->fam == R_GEMMA4 ||
                      (m->fam == R_GLM4_MOE && jbool(r, "use_qk_norm", false));
    m->parallel = m->fam == R_NEOX && jbool(r, "use_parallel_residual", true);
    bool g4 = m->fam == R_GEMMA4;
    const char *act = jstr(r, gemma(m) || g4 ? "hidden_activation" : "hidden_act");
    if (!act) act = gemma(m) || g4 ? "gelu_pytorch_tanh" : m->fam == R_NEOX ? "gelu" : "silu";
    if (!strcmp(act, "silu")) m->act = A_SILU;
    else if (!strcmp(act, "gelu_pytorch_tanh") || !strcmp(act, "gelu_new")) m->act = A_GELU_TANH;
    else if (!strcmp(act, "gelu")) m->act = A_GELU;
    else return al_err("ref: activation '%s' is not covered", act);
    if (mla(m)) {
        m->qlora = (int)jnum(r, "q_lora_rank", 0, 0);
        m->kvlora = (int)jnum(r, "kv_lora_rank", 0, 0);
        m->nope = (int)jnum(r, "qk_nope_head_dim", 0, 0);
        m->rope = (int)jnum(r, "qk_rope_head_dim", 0, 0);
        m->vdim = (int)jnum(r, "v_head_dim", 0, 0);
        m->interleave = jbool(r, "rope_interleave", true);
        m->idx_interleave = jbool(r, "indexer_rope_interleave", m->fam == R_GLM_DSA);   /* DeepSeek-V3.2: rotate_half */
        m->hd = m->nope + m->rope;
        m->ih = (int)jnum(r, "index_n_heads", 0, 0);
        m->id = (int)jnum(r, "index_head_dim", 0, 0);
        m->topk_keys = m->fam == R_DSV3 ? 0 : (int)jnum(r, "index_topk", 0, 0);
        for (int L = 0; m->fam == R_KIMI_LINEAR && L < m->L && L < REF_MAX_LAYERS; L++)   /* KimiMLAAttention: use_nope */
            m->no_rope[L] = jbool(r, "mla_use_nope", false);
        parse_index_share(m, r);
    }
    if (parse_rope(m, r)) return AL_ERR;
    if (mla(m)) m->rot = m->rope;
    double qpas = gemma(m) ? jnum(r, "query_pre_attn_scalar", 256, 256) : m->hd;
    m->scale = g4 ? 1.0 : 1.0 / sqrt(qpas);              /* Gemma4TextAttention: scaling = 1.0 */
    if (mla(m) && m->yarn) m->scale *= m->yarn_softmax;
    if (g4 && parse_gemma4(m, r)) return AL_ERR;
    m->attn_cap = m->fam == R_GEMMA2 ? jnum(r, "attn_logit_softcapping", 50, 0) : jnum(r, "attn_logit_softcapping", 0, 0);
    m->final_cap = m->fam == R_GEMMA2 ? jnum(r, "final_logit_softcapping", 30, 0) : jnum(r, "final_logit_softcapping", 0, 0);
    /* Gemma: normalizer = tensor(hidden ** 0.5, dtype = the activations' dtype) */
    m->embed_scale = 1;
    if (gemma(m) || g4) {
        float s = (float)sqrt((double)m->D), b;
        const char *td = jstr(r, "torch_dtype");
        if (td && !strcmp(td, "bfloat16")) { uint16_t u; dt_from_f32(DT_BF16, &s, 1, &u); dt_to_f32(DT_BF16, &u, 1, &b); s = b; }
        m->embed_scale = s;
    }
    parse_nope(m, r);
    parse_windows(m, r);
    parse_moe(m, r);
    parse_linear(m, r);
    parse_llama4(m, r);
    return AL_OK;
}

/* A multimodal checkpoint (Gemma3ForConditionalGeneration, Qwen3VLForConditionalGeneration,
 * Mistral3ForConditionalGeneration): the text model's config is text_config (tie_word_embeddings
 * from it, else from the top level, else the text class's default); Gemma3ForConditionalGeneration's
 * forward applies lm_head with no final soft-cap. */
static int ref_config(RefModel *m, const cJSON *root) {
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (!cJSON_IsObject(text)) return parse_config(m, root);
    if (parse_config(m, text)) return AL_ERR;
    m->tower = true;
    if (!cJSON_GetObjectItemCaseSensitive(text, "tie_word_embeddings"))
        m->tied = jbool(root, "tie_word_embeddings", m->tied);
    const char *mt = jstr(root, "model_type");
    if (mt && !strcmp(mt, "gemma3")) m->final_cap = 0;
    return AL_OK;
}

/* The text tower's names as the checkpoint has them (the transformers classes' _checkpoint_conversion_mapping:
 * "language_model.model" <-> "model.language_model", "language_model.lm_head" <-> "lm_head"). */
static void ref_tower_names(RefModel *m) {
    bool old = st_find(m->st, "language_model.model.embed_tokens.weight") != NULL;
    m->prefix = old ? "language_model.model." : "model.language_model.";
    m->head = old ? "language_model.lm_head.weight" : "lm_head.weight";
}

int ref_open(const char *dir, RefModel **out) {
    *out = NULL;
    char *cp = al_asprintf("%s/config.json", dir), *sp = al_asprintf("%s/model.safetensors", dir);
    size_t n = 0;
    char *text = cp ? al_read_file(cp, &n) : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    RefModel *m = calloc(1, sizeof *m);
    int rc = root && m ? ref_config(m, root) : al_err("ref: cannot read %s", cp ? cp : dir);
    if (rc == AL_OK) rc = st_open(sp, &m->st);
    if (rc == AL_OK && m->tower) ref_tower_names(m);
    cJSON_Delete(root);
    free(text);
    free(cp);
    free(sp);
    if (rc != AL_OK) { ref_free(m); return rc; }
    *out = m;
    return AL_OK;
}

void ref_free(RefModel *m) {
    if (!m) return;
    if (m->st) st_close(m->st);
    free(m->sel);
    free(m);
}

size_t ref_vocab(const RefModel *m) { return (size_t)m->V; }
void ref_ablate(RefModel *m, unsigned what) {
    if (mla(m) && m->yarn) {                     /* the softmax scale's mscale^2 off and on again */
        if (m->ablate & REF_ABLATE_YARN) m->scale *= m->yarn_softmax;
        if (what & REF_ABLATE_YARN) m->scale /= m->yarn_softmax;
    }
    m->ablate = what;
}

static bool moe_layer(const RefModel *m, int L);
static void layer_rope(const RefModel *m, int L, double *theta, double *factor);
static bool layer_yarn(const RefModel *m, int L);

void ref_describe(const RefModel *m, int L, RefLayerInfo *o) {
    *o = (RefLayerInfo){0};
    if (L < 0 || L >= m->L) return;
    o->window = m->sliding[L] ? m->window : 0;
    layer_rope(m, L, &o->theta, &o->rope_factor);
    o->yarn = layer_yarn(m, L);
    o->attn_factor = o->yarn ? m->yarn_attn : 1.0;
    o->scale = m->scale;
    o->rot = m->rot;
    o->moe = moe_layer(m, L);
    o->eps = m->eps;
    o->embed_scale = m->embed_scale;
    o->attn_cap = m->attn_cap;
    o->final_cap = m->final_cap;
    o->tied = m->tied;
    o->rope = !m->no_rope[L];
}

/* ================================================================ tensors and small kernels */

/* The tensor name (layer L's "<prefix>layers.L.<what>", or what itself when L < 0) as doubles,
 * checked to hold rows x cols values (cols 0: a vector of rows). Caller frees. */
static double *tget(const RefModel *m, int L, const char *what, size_t rows, size_t cols) {
    char name[256];
    if (L >= 0) snprintf(name, sizeof name, "%slayers.%d.%s", m->prefix, L, what);
    else snprintf(name, sizeof name, "%s", what);
    const st_entry *e = st_find(m->st, name);
    size_t want = rows * (cols ? cols : 1);
    if (!e) { al_err("ref: tensor %s missing", name); return NULL; }
    if (st_numel(e) != want || (cols && (e->ndim != 2 || e->shape[0] != rows))) {
        al_err("ref: tensor %s has %zu values, want %zu x %zu", name, st_numel(e), rows, cols);
        return NULL;
    }
    float *f = malloc(want * sizeof *f);
    double *d = malloc(want * sizeof *d);
    if (!f || !d || dt_to_f32(e->dtype, st_data(m->st, e), want, f)) { free(f); free(d); al_err("ref: reading %s", name); return NULL; }
    for (size_t i = 0; i < want; i++) d[i] = f[i];
    free(f);
    return d;
}

/* y (T x out) = x (T x in, row stride ldx) W^T (+ b); W (out x in). */
static void lin(const double *x, size_t ldx, size_t T, size_t in, const double *W, const double *b, size_t out,
                double *y) {
    for (size_t t = 0; t < T; t++)
        for (size_t o = 0; o < out; o++) {
            double s = b ? b[o] : 0;
            for (size_t i = 0; i < in; i++) s += x[t * ldx + i] * W[o * in + i];
            y[t * out + o] = s;
        }
}

/* Loads W (out x in) and, when bias, b (out) of "<what>.weight" / ".bias", and applies them. */
static int lin_named(const RefModel *m, int L, const char *what, bool bias, const double *x, size_t ldx, size_t T,
                     size_t in, size_t out, double *y) {
    char n[160];
    snprintf(n, sizeof n, "%s.weight", what);
    double *W = tget(m, L, n, out, in), *b = NULL;
    snprintf(n, sizeof n, "%s.bias", what);
    if (W && bias) b = tget(m, L, n, out, 0);
    int rc = W && (!bias || b) ? AL_OK : AL_ERR;
    if (rc == AL_OK) lin(x, ldx, T, in, W, b, out, y);
    free(W);
    free(b);
    return rc;
}

/* RMSNorm of n values in place: x / sqrt(mean x^2 + eps) * w (Gemma: * (1 + w)). */
static void rms(double *x, size_t n, const double *w, double eps, bool one_plus) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i] * x[i];
    double r = 1.0 / sqrt(s / (double)n + eps);
    for (size_t i = 0; i < n; i++) x[i] = x[i] * r * (one_plus ? 1.0 + w[i] : w[i]);
}

/* LayerNorm with bias (biased variance). */
static void layernorm(double *x, size_t n, const double *w, const double *b, double eps) {
    double mu = 0, v = 0;
    for (size_t i = 0; i < n; i++) mu += x[i];
    mu /= (double)n;
    for (size_t i = 0; i < n; i++) v += (x[i] - mu) * (x[i] - mu);
    double r = 1.0 / sqrt(v / (double)n + eps);
    for (size_t i = 0; i < n; i++) x[i] = (x[i] - mu) * r * w[i] + b[i];
}

/* The model's norm named what (layer L or a full name) over T rows of n values, stride ld. */
static int norm_rows(const RefModel *m, int L, const char *what, double *x, size_t T, size_t n, size_t ld) {
    char wn[160], bn[160];
    snprintf(wn, sizeof wn, "%s.weight", what);
    snprintf(bn, sizeof bn, "%s.bias", what);
    double *w = tget(m, L, wn, n, 0), *b = m->fam == R_NEOX && w ? tget(m, L, bn, n, 0) : NULL;
    if (!w || (m->fam == R_NEOX && !b)) { free(w); return AL_ERR; }
    for (size_t t = 0; t < T; t++) {
        if (m->fam == R_NEOX) layernorm(x + t * ld, n, w, b, m->eps);
        else rms(x + t * ld, n, w, m->eps, one_plus(m));
    }
    free(w);
    free(b);
    return AL_OK;
}

static double act(const RefModel *m, double x) {
    switch (m->act) {
    case A_SILU: return x / (1.0 + exp(-x));
    case A_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    default: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    }
}

/* RoPE at position p on the first rot dims of x: rotate_half (dim i pairs with i + rot/2), after
 * de-interleaving (dims 2i, 2i+1 -> i, i + rot/2) when interleave (DeepSeek's rope_interleave). */
static void rope(double *x, int rot, double p, double theta, double factor, bool interleave) {
    int half = rot / 2;
    double tmp[512];
    if (interleave) {
        for (int i = 0; i < half; i++) { tmp[i] = x[2 * i]; tmp[i + half] = x[2 * i + 1]; }
        memcpy(x, tmp, (size_t)rot * sizeof *x);
    }
    for (int i = 0; i < half; i++) {
        double f = 1.0 / pow(theta, 2.0 * i / rot) / factor, c = cos(p * f), s = sin(p * f);
        double a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = b * c + a * s;
    }
}

/* Llama 3's frequency of pair i (transformers' _compute_llama3_parameters): wavelength 2 pi / f;
 * above orig / low_freq_factor f / factor, below orig / high_freq_factor f, between a blend by
 * (orig / wavelength - low) / (high - low). */
static double llama3_freq(const RefModel *m, double f) {
    double wl = 2 * M_PI / f, lo_wl = m->l3_orig / m->l3_low, hi_wl = m->l3_orig / m->l3_high;
    if (wl > lo_wl) return f / m->l3_factor;
    if (wl < hi_wl || m->l3_high <= m->l3_low) return f;
    double sm = (m->l3_orig / wl - m->l3_low) / (m->l3_high - m->l3_low);
    return (1 - sm) * f / m->l3_factor + sm * f;
}

/* rotate_half RoPE at position p on the rot dims of x with Llama 3's frequencies. */
static void rope_llama3(const RefModel *m, double *x, int rot, double p, double theta) {
    int half = rot / 2;
    for (int i = 0; i < half; i++) {
        double f = llama3_freq(m, pow(theta, -2.0 * i / rot)), c = cos(p * f), s = sin(p * f), a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = b * c + a * s;
    }
}

/* YaRN's rotation at position p on the rot dims of x: pair i's frequency f_i = theta^(-2i/rot)
 * blended with f_i / factor by ramp(i) over [low, high] (0: f_i, 1: f_i / factor), and cos, sin
 * times the attention factor (transformers: cos = cos(p f) * attention_scaling). */
static void rope_yarn(const RefModel *m, double *x, int rot, double p, double theta) {
    int half = rot / 2;
    double lo = rot * log(m->yarn_orig / (m->beta_fast * 2 * M_PI)) / (2 * log(theta));
    double hi = rot * log(m->yarn_orig / (m->beta_slow * 2 * M_PI)) / (2 * log(theta));
    if (m->yarn_truncate) { lo = floor(lo); hi = ceil(hi); }
    lo = fmax(lo, 0);
    hi = fmin(hi, rot - 1);
    if (lo == hi) hi += 0.001;
    for (int i = 0; i < half; i++) {
        double ramp = fmin(fmax((i - lo) / (hi - lo), 0), 1), f = pow(theta, -2.0 * i / rot);
        f = f / m->yarn_factor * ramp + f * (1 - ramp);
        double c = cos(p * f) * m->yarn_attn, s = sin(p * f) * m->yarn_attn, a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = b * c + a * s;
    }
}

/* Llama 4's apply_rotary_emb at position p: x viewed as complex numbers (x[2i], x[2i + 1]) times e^(i p f_i),
 * f_i = theta^(-2i/rot) with llama3's scaling when rope_scaling says so. */
static void rope_complex(const RefModel *m, double *x, int rot, double p, double theta) {
    for (int i = 0; i < rot / 2; i++) {
        double f = pow(theta, -2.0 * i / rot);
        if (m->llama3) f = llama3_freq(m, f);
        double c = cos(p * f), s = sin(p * f), a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * c - b * s;
        x[2 * i + 1] = a * s + b * c;
    }
}

/* Llama 4 after RoPE: Llama4TextL2Norm (x rsqrt(mean x^2 + eps), no weight) of every q / k head on the RoPE
 * layers with use_qk_norm; q x (1 + attn_scale log1p(floor((t + 1) / floor_scale))) on the NoPE layers. */
static void llama4_qk(const RefModel *m, int L, double *Q, double *K, size_t T) {
    const size_t hd = (size_t)m->hd, nq = T * (size_t)m->H, nk = T * (size_t)m->KV;
    for (size_t r = 0; m->l2qk && !m->no_rope[L] && !(m->ablate & REF_ABLATE_QK_L2) && r < nq + nk; r++) {
        double *v = r < nq ? Q + r * hd : K + (r - nq) * hd, ss = 0;
        for (size_t d = 0; d < hd; d++) ss += v[d] * v[d];
        for (size_t d = 0; d < hd; d++) v[d] /= sqrt(ss / (double)hd + m->eps);
    }
    for (size_t t = 0; m->temp_scale != 0 && m->no_rope[L] && !(m->ablate & REF_ABLATE_TEMP) && t < T; t++) {
        double sc = log1p(floor(((double)t + 1.0) / m->temp_floor)) * m->temp_scale + 1.0;
        for (size_t j = 0; j < (size_t)m->H * hd; j++) Q[t * m->H * hd + j] *= sc;
    }
}

/* Softmax attention of one query row over keys 0..i (window: i - j < window) with scale and soft-cap:
 * out (dv) = sum_j p_j v_j. q (dq), k rows at k + j*ldk, v rows at v + j*ldv. */
static void attend(const RefModel *m, int L, size_t i, const double *q, const double *k, size_t ldk, const double *v,
                   size_t ldv, size_t dq, size_t dv, double *p, double *out, const double *sink,
                   const unsigned char *allow) {
    size_t w = m->sliding[L] ? (size_t)m->window : 0, j0 = w && i + 1 > w ? i + 1 - w : 0;
    if (m->chunk > 0 && !m->no_rope[L] && !(m->ablate & REF_ABLATE_CHUNK))   /* Llama 4's chunked_attention */
        j0 = i - i % (size_t)m->chunk;
    double mx = -INFINITY, sum = 0;
    for (size_t j = j0; j <= i; j++) {
        double s = 0;
        if (allow && !allow[j]) { p[j] = -INFINITY; continue; }
        for (size_t d = 0; d < dq; d++) s += q[d] * k[j * ldk + d];
        s *= m->scale;
        if (m->attn_cap > 0) s = m->attn_cap * tanh(s / m->attn_cap);
        p[j] = s;
        if (s > mx) mx = s;
    }
    if (sink && *sink > mx) mx = *sink;                   /* gpt-oss: the sink joins the row, unscaled */
    for (size_t j = j0; j <= i; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
    if (sink) sum += exp(*sink - mx);                     /* ... and its weight is dropped */
    for (size_t d = 0; d < dv; d++) out[d] = 0;
    for (size_t j = 0; j <= i; j++) p[j] = j < j0 ? 0 : p[j] / sum;   /* the weights, for ref_capture */
    for (size_t j = j0; j <= i; j++)
        for (size_t d = 0; d < dv; d++) out[d] += p[j] * v[j * ldv + d];
}

/* Query i's weights p[0..i] of head h of layer L into the capture when it asks for that head. */
static void cap_row(const RefModel *m, int L, size_t h, size_t i, const double *p) {
    if (!m->cap_P || m->cap_L != L || (size_t)m->cap_h != h || i >= m->cap_n) return;
    for (size_t j = 0; j < m->cap_n; j++) m->cap_P[i * m->cap_n + j] = j <= i ? p[j] : 0;
}

void ref_capture(RefModel *m, int L, int h, double *P, size_t n) {
    m->cap_L = L;
    m->cap_h = h;
    m->cap_P = P;
    m->cap_n = n;
}

/* ================================================================ attention */

/* True when layer L rotates with YaRN (OLMo 3: the full-attention layers; sliding ones plain RoPE). */
static bool layer_yarn(const RefModel *m, int L) { return m->yarn && (m->fam == R_GPT_OSS || !m->sliding[L]); }

/* RoPE base and linear factor of layer L (Gemma 3: local layers use rope_local_base_freq, unscaled). */
static void layer_rope(const RefModel *m, int L, double *theta, double *factor) {
    bool local = (m->fam == R_GEMMA3 || m->fam == R_GEMMA4) && m->sliding[L];
    *theta = local ? m->local_theta : m->theta;
    *factor = local ? 1.0 : m->rope_factor;
}

/* Qwen3-Next: q_proj(h).view(T, H, 2 hd), torch.chunk(2, dim=-1): query = [..., :hd], gate = [..., hd:]
 * of each head; Q, G (T x H hd). */
static int gated_query(const RefModel *m, int L, const double *h, size_t T, double *Q, double *G) {
    const size_t D = (size_t)m->D, H = (size_t)m->H, hd = (size_t)m->hd;
    double *y = malloc(T * 2 * H * hd * sizeof *y);
    int rc = y ? lin_named(m, L, "self_attn.q_proj", false, h, D, T, D, 2 * H * hd, y) : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t i = 0; i < H; i++)
            for (size_t d = 0; d < hd; d++) {
                Q[t * H * hd + i * hd + d] = y[t * 2 * H * hd + i * 2 * hd + d];
                G[t * H * hd + i * hd + d] = y[t * 2 * H * hd + i * 2 * hd + hd + d];
            }
    free(y);
    return rc;
}

/* Q (T x H hd), K, V (T x KV hd) of layer L from the family's layout (G: Qwen3-Next's gate, T x H hd). */
static int qkv_proj(const RefModel *m, int L, const double *h, size_t T, double *Q, double *K, double *V, double *G) {
    const size_t D = (size_t)m->D, qd = (size_t)(m->H * m->hd), kd = (size_t)(m->KV * m->hd), hd = (size_t)m->hd;
    if (m->fam == R_PHI3 || m->fam == R_NEOX) {
        size_t n = qd + 2 * kd;
        double *y = malloc(T * n * sizeof *y);
        int rc = y ? lin_named(m, L, m->fam == R_PHI3 ? "self_attn.qkv_proj" : "attention.query_key_value",
                               m->fam == R_NEOX, h, D, T, D, n, y) : AL_ERR;
        for (size_t t = 0; rc == AL_OK && t < T; t++) {
            if (m->fam == R_PHI3) {                       /* [Q heads ; K heads ; V heads] */
                memcpy(Q + t * qd, y + t * n, qd * sizeof *y);
                memcpy(K + t * kd, y + t * n + qd, kd * sizeof *y);
                memcpy(V + t * kd, y + t * n + qd + kd, kd * sizeof *y);
            } else                                        /* head by head [q_h ; k_h ; v_h] */
                for (size_t hh = 0; hh < (size_t)m->H; hh++) {
                    memcpy(Q + t * qd + hh * hd, y + t * n + 3 * hh * hd, hd * sizeof *y);
                    memcpy(K + t * kd + hh * hd, y + t * n + 3 * hh * hd + hd, hd * sizeof *y);
                    memcpy(V + t * kd + hh * hd, y + t * n + 3 * hh * hd + 2 * hd, hd * sizeof *y);
                }
        }
        free(y);
        return rc;
    }
    int rc = m->gate ? gated_query(m, L, h, T, Q, G)
                     : lin_named(m, L, "self_attn.q_proj", m->qkv_bias, h, D, T, D, qd, Q);
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.k_proj", m->qkv_bias, h, D, T, D, kd, K);
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.v_proj", m->qkv_bias, h, D, T, D, kd, V);
    if (rc != AL_OK) return rc;
    if (olmo(m) || m->fam == R_MINIMAX_M2) {              /* over the whole projection */
        rc = norm_rows(m, L, "self_attn.q_norm", Q, T, qd, qd);
        if (rc == AL_OK) rc = norm_rows(m, L, "self_attn.k_norm", K, T, kd, kd);
    } else if (m->head_qk_norm) {                         /* per head */
        rc = norm_rows(m, L, "self_attn.q_norm", Q, T * (size_t)m->H, hd, hd);
        if (rc == AL_OK) rc = norm_rows(m, L, "self_attn.k_norm", K, T * (size_t)m->KV, hd, hd);
    }
    return rc;
}

/* GQA attention of layer L: out (T x D). */
static int attn_gqa(const RefModel *m, int L, const double *h, size_t T, double *out) {
    const size_t D = (size_t)m->D, H = (size_t)m->H, KV = (size_t)m->KV, hd = (size_t)m->hd;
    const size_t qd = H * hd, kd = KV * hd;
    double *Q = malloc(T * qd * sizeof *Q), *K = malloc(T * kd * sizeof *K), *V = malloc(T * kd * sizeof *V);
    double *A = malloc(T * qd * sizeof *A), *p = malloc(T * sizeof *p);
    double *G = m->gate ? malloc(T * qd * sizeof *G) : NULL;
    int rc = Q && K && V && A && p && (!m->gate || G) ? qkv_proj(m, L, h, T, Q, K, V, G) : AL_ERR;
    double theta, factor;
    layer_rope(m, L, &theta, &factor);
    for (size_t t = 0; rc == AL_OK && !m->no_rope[L] && t < T; t++) {
        for (size_t i = 0; m->fam == R_LLAMA4 && i < H + KV; i++)
            rope_complex(m, i < H ? Q + t * qd + i * hd : K + t * kd + (i - H) * hd, m->rot, (double)t, theta);
        for (size_t i = 0; m->fam != R_LLAMA4 && i < H; i++)
            if (m->llama3) rope_llama3(m, Q + t * qd + i * hd, m->rot, (double)t, theta);
            else if (layer_yarn(m, L)) rope_yarn(m, Q + t * qd + i * hd, m->rot, (double)t, theta);
            else rope(Q + t * qd + i * hd, m->rot, (double)t, theta, factor, false);
        for (size_t g = 0; m->fam != R_LLAMA4 && g < KV; g++)
            if (m->llama3) rope_llama3(m, K + t * kd + g * hd, m->rot, (double)t, theta);
            else if (layer_yarn(m, L)) rope_yarn(m, K + t * kd + g * hd, m->rot, (double)t, theta);
            else rope(K + t * kd + g * hd, m->rot, (double)t, theta, factor, false);
    }
    if (rc == AL_OK && m->fam == R_LLAMA4) llama4_qk(m, L, Q, K, T);
    double *sk = rc == AL_OK && m->sinks ? tget(m, L, "self_attn.sinks", H, 0) : NULL;
    if (m->sinks && !sk) rc = AL_ERR;
    for (size_t t = 0; rc == AL_OK && m->q_beta != 0 && t < T; t++) {
        double sc = 1 + m->q_beta * log(1 + floor((double)t / m->q_floor));
        for (size_t j = 0; j < qd; j++) Q[t * qd + j] *= sc;
    }
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t i = 0; i < H; i++) {
            size_t g = i / (H / KV);
            attend(m, L, t, Q + t * qd + i * hd, K + g * hd, kd, V + g * hd, kd, hd, hd, p, A + t * qd + i * hd,
                   sk ? sk + i : NULL, NULL);
            cap_row(m, L, i, t, p);
        }
    free(sk);
    for (size_t i = 0; rc == AL_OK && m->gate && !(m->ablate & REF_ABLATE_GATE) && i < T * qd; i++)
        A[i] *= 1.0 / (1.0 + exp(-G[i]));                 /* attn_output * sigmoid(gate) */
    const char *o = m->fam == R_NEOX ? "attention.dense" : "self_attn.o_proj";
    if (rc == AL_OK) rc = lin_named(m, L, o, m->o_bias, A, qd, T, qd, D, out);
    free(Q); free(K); free(V); free(A); free(p); free(G);
    return rc;
}

/* Gemma 4's RoPE at position p on one head x (hd): sliding layers rotate_half over the head at sliding_attention's
 * theta; full layers "proportional" (_compute_proportional_rope_parameters): pair (i, i + hd/2) turns at
 * theta^(-2i/hd) for i < floor(partial_rotary_factor hd / 2), the other pairs not at all. Ablated: the common misreading
 * "rotate the first factor x hd dims" (rotate_half within them, theta^(-2i/rot)). */
static void rope_g4(const RefModel *m, int L, double *x, double p) {
    int hd = m->sliding[L] ? m->hd : m->ghd, half = hd / 2, n = m->sliding[L] ? half : (int)floor(m->prop * hd / 2);
    double theta = m->sliding[L] ? m->local_theta : m->theta;
    if (!m->sliding[L] && (m->ablate & REF_ABLATE_PROPORTIONAL)) { rope(x, 2 * n, p, theta, 1, false); return; }
    for (int i = 0; i < n; i++) {
        double f = pow(theta, -2.0 * i / hd), c = cos(p * f), s = sin(p * f), a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = b * c + a * s;
    }
}

/* Gemma 4's K and V of layer L (T x KV hd) into m->g4k[L], m->g4v[L]: k = k_proj(h), v = v_proj(h) or, with
 * attention_k_eq_v on a full layer, k_proj(h) itself; k = k_norm(k) (x w), RoPE; v = v_norm(v): x / sqrt(mean x^2 +
 * eps), no weight. Ablated: k_eq_v's V taken after k_norm and RoPE; v_norm skipped. */
static int kv_g4(const RefModel *m, int L, const double *h, size_t T) {
    const size_t D = (size_t)m->D, KV = (size_t)(m->sliding[L] ? m->KV : m->gkv);
    const size_t hd = (size_t)(m->sliding[L] ? m->hd : m->ghd), kd = KV * hd;
    bool keqv = m->k_eq_v && !m->sliding[L];
    double *K = malloc(T * kd * sizeof *K), *V = malloc(T * kd * sizeof *V);
    int rc = K && V ? lin_named(m, L, "self_attn.k_proj", false, h, D, T, D, kd, K) : AL_ERR;
    if (rc == AL_OK && keqv) memcpy(V, K, T * kd * sizeof *V);
    else if (rc == AL_OK) rc = lin_named(m, L, "self_attn.v_proj", false, h, D, T, D, kd, V);
    if (rc == AL_OK) rc = norm_rows(m, L, "self_attn.k_norm", K, T * KV, hd, hd);
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t g = 0; g < KV; g++) rope_g4(m, L, K + t * kd + g * hd, (double)t);
    if (rc == AL_OK && keqv && (m->ablate & REF_ABLATE_K_EQ_V)) memcpy(V, K, T * kd * sizeof *V);
    for (size_t i = 0; rc == AL_OK && !(m->ablate & REF_ABLATE_V_NORM) && i < T * KV; i++) {
        double ss = 0, *v = V + i * hd;
        for (size_t d = 0; d < hd; d++) ss += v[d] * v[d];
        for (size_t d = 0; d < hd; d++) v[d] /= sqrt(ss / (double)hd + m->eps);
    }
    if (rc != AL_OK) { free(K); free(V); return rc; }
    m->g4k[L] = K;
    m->g4v[L] = V;
    return AL_OK;
}

/* Gemma 4's attention (Gemma4TextAttention) of layer L: q = q_norm(q_proj(h)) per head, RoPE; K / V its own
 * (kv_g4) or, from num_kv_shared_layers' first layer on, those of the last earlier layer of its type (ablated: the
 * layer just before the shared ones, whatever its type); softmax scale 1; o_proj. */
static int attn_g4(const RefModel *m, int L, const double *h, size_t T, double *out) {
    const size_t D = (size_t)m->D, H = (size_t)m->H, KV = (size_t)(m->sliding[L] ? m->KV : m->gkv);
    const size_t hd = (size_t)(m->sliding[L] ? m->hd : m->ghd), qd = H * hd, kd = KV * hd;   /* each type its own */
    int src = L;
    if (m->kv_from > 0 && L >= m->kv_from) {
        src = m->kv_from - 1;
        while (!(m->ablate & REF_ABLATE_KV_SHARE) && src > 0 && m->sliding[src] != m->sliding[L]) src--;
    }
    double *Q = malloc(T * qd * sizeof *Q), *A = malloc(T * qd * sizeof *A), *p = malloc(T * sizeof *p);
    int rc = Q && A && p ? lin_named(m, L, "self_attn.q_proj", false, h, D, T, D, qd, Q) : AL_ERR;
    if (rc == AL_OK) rc = norm_rows(m, L, "self_attn.q_norm", Q, T * H, hd, hd);
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t i = 0; i < H; i++) rope_g4(m, L, Q + t * qd + i * hd, (double)t);
    if (rc == AL_OK && src == L) rc = kv_g4(m, L, h, T);
    if (rc == AL_OK && !m->g4k[src]) rc = al_err("ref: layer %d shares layer %d's K / V, which it has not computed", L, src);
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t i = 0; i < H; i++) {
            size_t g = i / (H / KV);
            attend(m, L, t, Q + t * qd + i * hd, m->g4k[src] + g * hd, kd, m->g4v[src] + g * hd, kd, hd, hd, p,
                   A + t * qd + i * hd, NULL, NULL);
            cap_row(m, L, i, t, p);
        }
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.o_proj", false, A, qd, T, qd, D, out);
    free(Q); free(A); free(p);
    return rc;
}

/* The lightning indexer of layer L (transformers' DeepseekV32Indexer / GlmMoeDsaIndexer): allow (T x T) row t
 * marks the keys query t attends to -- every key s <= t while t + 1 <= index_topk, else the index_topk of
 * highest score(t, s) = sum_h w_h relu(q_h . k_s / sqrt(ID)) (ties: the earlier key), with
 * q = wq_b(qa) and k = LayerNorm(wk(h)) (eps 1e-6), RoPE on their first qk_rope_head_dim dims (rotate_half;
 * GLM-5's apply_rotary_pos_emb_interleave under indexer_rope_interleave), w = weights_proj(h) / sqrt(IH). */
static int indexer(const RefModel *m, int L, const double *h, const double *qa, size_t T, unsigned char *allow) {
    const size_t D = (size_t)m->D, IH = (size_t)m->ih, ID = (size_t)m->id, QL = (size_t)m->qlora, K = (size_t)m->topk_keys;
    double *q = malloc(T * IH * ID * sizeof *q), *k = malloc(T * ID * sizeof *k), *w = malloc(T * IH * sizeof *w);
    double *s = malloc(T * sizeof *s), *kn = tget(m, L, "self_attn.indexer.k_norm.weight", ID, 0);
    double *kb = tget(m, L, "self_attn.indexer.k_norm.bias", ID, 0);
    int rc = q && k && w && s && kn && kb ? AL_OK : AL_ERR;
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.indexer.wq_b", false, qa, QL, T, QL, IH * ID, q);
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.indexer.wk", false, h, D, T, D, ID, k);
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.indexer.weights_proj", false, h, D, T, D, IH, w);
    for (size_t t = 0; rc == AL_OK && t < T; t++) {
        layernorm(k + t * ID, ID, kn, kb, 1e-6);
        rope(k + t * ID, m->rope, (double)t, m->theta, m->rope_factor, m->idx_interleave);
        for (size_t i = 0; i < IH; i++)
            rope(q + (t * IH + i) * ID, m->rope, (double)t, m->theta, m->rope_factor, m->idx_interleave);
    }
    for (size_t t = 0; rc == AL_OK && t < T; t++) {
        for (size_t j = 0; j <= t; j++) {
            s[j] = 0;
            for (size_t i = 0; i < IH; i++) {
                double d = 0;
                for (size_t e = 0; e < ID; e++) d += q[(t * IH + i) * ID + e] * k[j * ID + e];
                s[j] += w[t * IH + i] / sqrt((double)IH) * fmax(d / sqrt((double)ID), 0);
            }
        }
        for (size_t n = 0; n < K && n <= t; n++) {            /* the K best, the earlier key on ties */
            size_t b = T;
            for (size_t j = 0; j <= t; j++)
                if (!allow[t * T + j] && (b == T || s[j] > s[b])) b = j;
            allow[t * T + b] = 1;
        }
    }
    free(q); free(k); free(w); free(s); free(kn); free(kb);
    return rc;
}

void ref_no_indexer(RefModel *m, bool off) { m->no_select = off; }
void ref_no_index_share(RefModel *m, bool off) { m->no_share = off; }

/* MLA's RoPE at position p on rot dims (de-interleaved first under rope_interleave); YaRN's frequencies with
 * rope_scaling / rope_parameters yarn (Kimi-K2.5). */
static void rope_mla(const RefModel *m, double *x, int rot, double p) {
    if (!m->yarn || (m->ablate & REF_ABLATE_YARN)) { rope(x, rot, p, m->theta, m->rope_factor, m->interleave); return; }
    double tmp[512];
    int half = rot / 2;
    if (m->interleave) {
        for (int i = 0; i < half; i++) { tmp[i] = x[2 * i]; tmp[i + half] = x[2 * i + 1]; }
        memcpy(x, tmp, (size_t)rot * sizeof *x);
    }
    rope_yarn(m, x, rot, p, m->theta);
}

/* DeepSeek MLA attention of layer L: out (T x D). */
static int attn_mla(const RefModel *m, int L, const double *h, size_t T, double *out) {
    const size_t D = (size_t)m->D, H = (size_t)m->H, np = (size_t)m->nope, rp = (size_t)m->rope, dv = (size_t)m->vdim;
    const size_t KL = (size_t)m->kvlora, QL = (size_t)m->qlora, dq = np + rp;
    double *qa = QL ? malloc(T * QL * sizeof *qa) : NULL, *q = malloc(T * H * dq * sizeof *q);
    double *ckv = malloc(T * (KL + rp) * sizeof *ckv), *kvb = malloc(T * H * (np + dv) * sizeof *kvb);
    double *kf = malloc(T * H * dq * sizeof *kf), *A = malloc(T * H * dv * sizeof *A), *p = malloc(T * sizeof *p);
    int rc = q && ckv && kvb && kf && A && p && (!QL || qa) ? AL_OK : AL_ERR;
    if (rc == AL_OK && QL) {
        rc = lin_named(m, L, "self_attn.q_a_proj", false, h, D, T, D, QL, qa);
        if (rc == AL_OK) rc = norm_rows(m, L, "self_attn.q_a_layernorm", qa, T, QL, QL);
        if (rc == AL_OK) rc = lin_named(m, L, "self_attn.q_b_proj", false, qa, QL, T, QL, H * dq, q);
    } else if (rc == AL_OK)
        rc = lin_named(m, L, "self_attn.q_proj", false, h, D, T, D, H * dq, q);
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.kv_a_proj_with_mqa", false, h, D, T, D, KL + rp, ckv);
    if (rc == AL_OK) rc = norm_rows(m, L, "self_attn.kv_a_layernorm", ckv, T, KL, KL + rp);
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.kv_b_proj", false, ckv, KL + rp, T, KL, H * (np + dv), kvb);
    for (size_t t = 0; rc == AL_OK && t < T; t++) {
        double *kpe = ckv + t * (KL + rp) + KL;          /* one RoPE key shared by the heads */
        if (!m->no_rope[L]) rope_mla(m, kpe, (int)rp, (double)t);          /* Kimi-Linear: mla_use_nope */
        for (size_t i = 0; i < H; i++) {
            if (!m->no_rope[L]) rope_mla(m, q + (t * H + i) * dq + np, (int)rp, (double)t);
            memcpy(kf + (t * H + i) * dq, kvb + (t * H + i) * (np + dv), np * sizeof *kf);
            memcpy(kf + (t * H + i) * dq + np, kpe, rp * sizeof *kf);
        }
    }
    /* a full layer selects; a shared one (IndexShare) takes the previous full layer's selection, as
       transformers passes prev_topk_indices on (the first layer has none to take: it selects); with
       ref_no_index_share the shared layers attend to every key instead */
    bool reuse = m->shared[L] && !m->no_share && m->sel, dense = m->shared[L] && m->no_share && m->sel;
    unsigned char *allow = m->topk_keys > 0 && !m->no_select && !reuse && !dense ? calloc(T * T, 1) : NULL;
    if (rc == AL_OK && allow) rc = indexer(m, L, h, qa, T, allow);
    if (allow) { free(m->sel); ((RefModel *)m)->sel = allow; }   /* the pass's state across layers */
    if (reuse) allow = m->sel;
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t i = 0; i < H; i++) {
            attend(m, L, t, q + (t * H + i) * dq, kf + i * dq, H * dq, kvb + i * (np + dv) + np, H * (np + dv), dq, dv,
                   p, A + (t * H + i) * dv, NULL, allow ? allow + t * T : NULL);
            cap_row(m, L, i, t, p);
        }
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.o_proj", false, A, H * dv, T, H * dv, D, out);
    free(qa); free(q); free(ckv); free(kvb); free(kf); free(A); free(p);
    return rc;
}

/* ================================================================ Kimi Delta Attention */

/* x (T x n) through a causal depthwise conv (weight n x K: y_t = sum_j w_j x_{t-K+1+j}) and SiLU, in place. */
static void kda_conv(double *x, size_t T, size_t n, size_t K, const double *w) {
    for (size_t tt = T; tt-- > 0;)                     /* from the last token back: no output overwrites an input */
        for (size_t c = 0; c < n; c++) {
            double s = 0;
            for (size_t j = 0; j < K; j++)
                if (tt + j + 1 >= K) s += w[c * K + j] * x[(tt + j + 1 - K) * n + c];
            x[tt * n + c] = s / (1 + exp(-s));
        }
}

/* The KDA state update and read-out of one head at one token: S (d x d) decayed row i by a[i], the delta rule
 * with k, v, beta, o = S^T q; o then RMSNorm-ed, times w and sigmoid(gate). */
static void kda_head(double *S, size_t d, const double *q, const double *k, const double *v, const double *a,
                     double beta, const double *w, const double *gate, double eps, double *o) {
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j < d; j++) S[i * d + j] *= a[i];
    for (size_t j = 0; j < d; j++) {
        double pred = 0;
        for (size_t i = 0; i < d; i++) pred += k[i] * S[i * d + j];
        double u = beta * (v[j] - pred);
        for (size_t i = 0; i < d; i++) S[i * d + j] += k[i] * u;
    }
    double ms = 0;
    for (size_t j = 0; j < d; j++) {
        double s = 0;
        for (size_t i = 0; i < d; i++) s += q[i] * S[i * d + j];
        o[j] = s;
        ms += s * s / (double)d;
    }
    for (size_t j = 0; j < d; j++) o[j] = o[j] / sqrt(ms + eps) * w[j] / (gate ? 1 + exp(-gate[j]) : 1);
}

/* KimiDeltaAttention of layer L: out (T x D). */
static int attn_kda(const RefModel *m, int L, const double *h, size_t T, double *out) {
    const size_t D = (size_t)m->D, H = (size_t)m->lv, d = (size_t)m->ldv, n = H * d, K = (size_t)m->lconv;
    static const char *const pr[3] = {"q", "k", "v"};
    double *x[3], *cw[3] = {0}, *fa = malloc(T * d * sizeof *fa), *fg = malloc(T * n * sizeof *fg);
    double *og = malloc(T * n * sizeof *og), *b = malloc(T * H * sizeof *b), *o = malloc(T * n * sizeof *o);
    double *S = calloc(H * d * d, sizeof *S), *al = tget(m, L, "self_attn.A_log", H, 0);
    double *dtb = tget(m, L, "self_attn.dt_bias", n, 0), *nw = tget(m, L, "self_attn.o_norm.weight", d, 0), a[512];
    int rc = fa && fg && og && b && o && S && al && dtb && nw ? AL_OK : AL_ERR;
    for (int i = 0; i < 3; i++) {
        char pn[64], cn[64];
        snprintf(pn, sizeof pn, "self_attn.%s_proj", pr[i]);
        snprintf(cn, sizeof cn, "self_attn.%s_conv1d.weight", pr[i]);
        x[i] = malloc(T * n * sizeof *x[i]);
        if (rc == AL_OK) rc = x[i] ? lin_named(m, L, pn, false, h, D, T, D, n, x[i]) : AL_ERR;
        if (rc == AL_OK) rc = (cw[i] = tget(m, L, cn, n * K, 0)) ? AL_OK : AL_ERR;
        if (rc == AL_OK && cw[i]) kda_conv(x[i], T, n, K, cw[i]);
    }
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.f_a_proj", false, h, D, T, D, d, fa);
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.f_b_proj", false, fa, d, T, d, n, fg);
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.g_a_proj", false, h, D, T, D, d, fa);
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.g_b_proj", false, fa, d, T, d, n, og);
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.b_proj", false, h, D, T, D, H, b);
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t hh = 0; hh < H; hh++) {
            double *q = x[0] + t * n + hh * d, *k = x[1] + t * n + hh * d, sq = 0, sk = 0;
            for (size_t i = 0; i < d; i++) { sq += q[i] * q[i]; sk += k[i] * k[i]; }
            for (size_t i = 0; i < d; i++) {
                q[i] = q[i] / sqrt(sq + 1e-6) / sqrt((double)d);
                k[i] = k[i] / sqrt(sk + 1e-6);
                double z = fg[t * n + hh * d + i] + dtb[hh * d + i], sp = z > 20 ? z : log1p(exp(z));
                a[i] = exp(-exp(al[hh]) * sp);
            }
            if (m->ablate & REF_ABLATE_CHANNEL_DECAY) {         /* one decay per head: the channels' mean */
                double mean = 0;
                for (size_t i = 0; i < d; i++) mean += log(a[i]) / (double)d;
                for (size_t i = 0; i < d; i++) a[i] = exp(mean);
            }
            if (m->ablate & REF_ABLATE_STATE) memset(S + hh * d * d, 0, d * d * sizeof *S);   /* no recurrence */
            kda_head(S + hh * d * d, d, q, k, x[2] + t * n + hh * d, a, 1 / (1 + exp(-b[t * H + hh])), nw,
                     m->ablate & REF_ABLATE_GATE ? NULL : og + t * n + hh * d, m->eps, o + t * n + hh * d);
        }
    if (rc == AL_OK) rc = lin_named(m, L, "self_attn.o_proj", false, o, n, T, n, D, out);
    for (int i = 0; i < 3; i++) { free(x[i]); free(cw[i]); }
    free(fa); free(fg); free(og); free(b); free(o); free(S); free(al); free(dtb); free(nw);
    return rc;
}

/* ================================================================ Gated DeltaNet */

/* The tensor "linear_attn.<what>" of layer L (n values) without a ".weight" suffix check. */
static double *lin_tensor(const RefModel *m, int L, const char *what, size_t n) {
    char name[96];
    snprintf(name, sizeof name, "linear_attn.%s", what);
    return tget(m, L, name, n, 0);
}

static double silu(double x) { return x / (1.0 + exp(-x)); }

/* Qwen3_5GatedDeltaNet's projections: mixed_qkv = in_proj_qkv(h) (T x C, [q | k | v] whole), z =
 * in_proj_z(h) (T x Hv dv), b = in_proj_b(h), a = in_proj_a(h) (T x Hv). */
static int split_proj(const RefModel *m, int L, const double *h, size_t T, double *mixed, double *z, double *b,
                      double *a) {
    const size_t D = (size_t)m->D, Hv = (size_t)m->lv, C = 2 * (size_t)(m->lk * m->ldk) + Hv * (size_t)m->ldv;
    int rc = lin_named(m, L, "linear_attn.in_proj_qkv", false, h, D, T, D, C, mixed);
    if (rc == AL_OK) rc = lin_named(m, L, "linear_attn.in_proj_z", false, h, D, T, D, Hv * (size_t)m->ldv, z);
    if (rc == AL_OK) rc = lin_named(m, L, "linear_attn.in_proj_b", false, h, D, T, D, Hv, b);
    if (rc == AL_OK) rc = lin_named(m, L, "linear_attn.in_proj_a", false, h, D, T, D, Hv, a);
    return rc;
}

/* Qwen3NextGatedDeltaNet of layer L: out (T x D). The mixed [q | k | v] of the conv, per position
 * t: mixed[t] (C = 2 Hk dk + Hv dv), z[t] (Hv dv), b[t], a[t] (Hv). */
static int attn_linear(const RefModel *m, int L, const double *h, size_t T, double *out) {
    const size_t D = (size_t)m->D, Hk = (size_t)m->lk, Hv = (size_t)m->lv, dk = (size_t)m->ldk, dv = (size_t)m->ldv;
    const size_t r = Hv / Hk, K = (size_t)m->lconv, C = 2 * Hk * dk + Hv * dv, P = C + Hv * dv;
    const size_t grp = 2 * dk + 2 * r * dv;
    double *qkvz = malloc(T * P * sizeof *qkvz), *ba = malloc(T * 2 * Hv * sizeof *ba);
    double *mixed = malloc(T * C * sizeof *mixed), *conv = malloc(T * C * sizeof *conv);
    double *z = malloc(T * Hv * dv * sizeof *z);
    double *S = calloc(Hv * dk * dv, sizeof *S), *o = malloc(T * Hv * dv * sizeof *o), *b = malloc(T * Hv * sizeof *b);
    double *a = malloc(T * Hv * sizeof *a);
    double *cw = lin_tensor(m, L, "conv1d.weight", C * K), *alog = lin_tensor(m, L, "A_log", Hv);
    double *dtb = lin_tensor(m, L, "dt_bias", Hv), *nw = lin_tensor(m, L, "norm.weight", dv);
    int rc = qkvz && ba && mixed && conv && z && S && o && b && a && cw && alog && dtb && nw ? AL_OK : AL_ERR;
    char qn[96];
    snprintf(qn, sizeof qn, "%slayers.%d.linear_attn.in_proj_qkv.weight", m->prefix, L);
    if (rc == AL_OK && st_find(m->st, qn)) {               /* Qwen3.5: in_proj_qkv [q | k | v], in_proj_z, _b, _a */
        rc = split_proj(m, L, h, T, mixed, z, b, a);
    } else {
        if (rc == AL_OK) rc = lin_named(m, L, "linear_attn.in_proj_qkvz", false, h, D, T, D, P, qkvz);
        if (rc == AL_OK) rc = lin_named(m, L, "linear_attn.in_proj_ba", false, h, D, T, D, 2 * Hv, ba);
    }
    for (size_t t = 0; rc == AL_OK && !st_find(m->st, qn) && t < T; t++)   /* fix_query_key_value_ordering */
        for (size_t g = 0; g < Hk; g++) {
            const double *src = qkvz + t * P + g * grp, *sb = ba + t * 2 * Hv + g * 2 * r;
            for (size_t i = 0; i < dk; i++) {
                mixed[t * C + g * dk + i] = src[i];
                mixed[t * C + Hk * dk + g * dk + i] = src[dk + i];
            }
            for (size_t i = 0; i < r * dv; i++) {
                mixed[t * C + 2 * Hk * dk + g * r * dv + i] = src[2 * dk + i];
                z[t * Hv * dv + g * r * dv + i] = src[2 * dk + r * dv + i];
            }
            for (size_t i = 0; i < r; i++) { b[t * Hv + g * r + i] = sb[i]; a[t * Hv + g * r + i] = sb[r + i]; }
        }
    for (size_t t = 0; rc == AL_OK && t < T; t++)          /* conv1d(padding K - 1)[..., :T], SiLU */
        for (size_t c = 0; c < C; c++) {
            double s = 0;
            for (size_t i = 0; i < K; i++) {
                long src = (long)t + (long)i - (long)(K - 1);
                if (src >= 0) s += cw[c * K + i] * mixed[(size_t)src * C + c];
            }
            conv[t * C + c] = silu(s);
        }
    for (size_t t = 0; rc == AL_OK && t < T; t++) {
        if (m->ablate & REF_ABLATE_STATE) memset(S, 0, Hv * dk * dv * sizeof *S);   /* no recurrence */
        for (size_t j = 0; j < Hv; j++) {
            double q[512], k[512], v[512], nq = 0, nk = 0;
            size_t kh = j / r;                             /* repeat_interleave(r) */
            for (size_t i = 0; i < dk; i++) {
                q[i] = conv[t * C + kh * dk + i];
                k[i] = conv[t * C + Hk * dk + kh * dk + i];
                nq += q[i] * q[i];
                nk += k[i] * k[i];
            }
            for (size_t i = 0; i < dk; i++) { q[i] /= sqrt(nq + 1e-6) * sqrt((double)dk); k[i] /= sqrt(nk + 1e-6); }
            for (size_t c = 0; c < dv; c++) v[c] = conv[t * C + 2 * Hk * dk + j * dv + c];
            double x = a[t * Hv + j] + dtb[j], sp = x > 20 ? x : log(1 + exp(x));
            double g = -exp(alog[j]) * sp, beta = 1 / (1 + exp(-b[t * Hv + j]));
            double *Sj = S + j * dk * dv;
            for (size_t i = 0; i < dk * dv; i++) Sj[i] *= exp(g);
            for (size_t c = 0; c < dv; c++) {
                double mem = 0;
                for (size_t i = 0; i < dk; i++) mem += Sj[i * dv + c] * k[i];
                double delta = (v[c] - mem) * beta;
                for (size_t i = 0; i < dk; i++) Sj[i * dv + c] += k[i] * delta;
            }
            double *oj = o + t * Hv * dv + j * dv, ss = 0;
            for (size_t c = 0; c < dv; c++) {
                oj[c] = 0;
                for (size_t i = 0; i < dk; i++) oj[c] += Sj[i * dv + c] * q[i];
                ss += oj[c] * oj[c];
            }
            double inv = 1 / sqrt(ss / (double)dv + m->eps);
            for (size_t c = 0; c < dv; c++) oj[c] = oj[c] * inv * nw[c] * silu(z[t * Hv * dv + j * dv + c]);
        }
    }
    if (rc == AL_OK) rc = lin_named(m, L, "linear_attn.out_proj", false, o, Hv * dv, T, Hv * dv, D, out);
    free(qkvz); free(ba); free(mixed); free(conv); free(z); free(S); free(o); free(b); free(a);
    free(cw); free(alog); free(dtb); free(nw);
    return rc;
}

/* ================================================================ MLP and experts */

/* Gated MLP "<pre>{gate,up,down}" (names g, u, d) of width F on the rows listed in rows[0..n)
 * (all T rows when rows is NULL), y[row] += w[k] * mlp(x[row]) (w NULL: weight 1). */
static int gated(const RefModel *m, int L, const char *pre, const char *const nm[3], size_t F, const double *x,
                 size_t T, const size_t *rows, const double *w, size_t n, double *y) {
    const size_t D = (size_t)m->D;
    char a[160], b[160], c[160];
    snprintf(a, sizeof a, "%s%s.weight", pre, nm[0]);
    snprintf(b, sizeof b, "%s%s.weight", pre, nm[1]);
    snprintf(c, sizeof c, "%s%s.weight", pre, nm[2]);
    double *G = tget(m, L, a, F, D), *U = G ? tget(m, L, b, F, D) : NULL, *Dn = U ? tget(m, L, c, D, F) : NULL;
    double *hbuf = malloc(F * sizeof *hbuf);
    int rc = G && U && Dn && hbuf ? AL_OK : AL_ERR;
    size_t cnt = rows ? n : T;
    for (size_t k = 0; rc == AL_OK && k < cnt; k++) {
        size_t t = rows ? rows[k] : k;
        double g, u;
        for (size_t f = 0; f < F; f++) {
            lin(x + t * D, D, 1, D, G + f * D, NULL, 1, &g);
            lin(x + t * D, D, 1, D, U + f * D, NULL, 1, &u);
            hbuf[f] = act(m, g) * u;
        }
        for (size_t o = 0; o < D; o++) {
            double s = 0;
            for (size_t f = 0; f < F; f++) s += Dn[o * F + f] * hbuf[f];
            y[t * D + o] += (w ? w[k] : 1.0) * s;
        }
    }
    free(G); free(U); free(Dn); free(hbuf);
    return rc;
}

static const char *const NM_PROJ[3] = {"gate_proj", "up_proj", "down_proj"};
static const char *const NM_MIXTRAL[3] = {"w1", "w3", "w2"};

static bool moe_layer(const RefModel *m, int L) {
    if (m->E <= 0) return false;
    if (mla(m)) return L >= m->first_dense && L % m->layer_freq == 0;
    if (m->fam == R_GLM4_MOE) return L >= m->first_dense;
    if (qwen_moe(m)) {
        for (int i = 0; i < m->n_only; i++)
            if (m->only[i] == L) return false;
        return (L + 1) % m->sparse_step == 0;
    }
    if (m->fam == R_LLAMA4) return m->moe_on[L];
    return true;
}

/* Indices of the k largest of s[0..n) (first index wins ties) into idx. */
static void topk(const double *s, int n, int k, int *idx) {
    bool used[512] = {0};
    for (int j = 0; j < k; j++) {
        int b = -1;
        for (int e = 0; e < n; e++)
            if (!used[e] && (b < 0 || s[e] > s[b])) b = e;
        idx[j] = b;
        used[b] = true;
    }
}

/* Router of one token: the chosen experts idx[0..top_k) and their weights w. */
static void route(const RefModel *m, const double *logit, const double *bias, int *idx, double *w) {
    const int E = m->E, k = m->topk;
    double s[512], c[512], sum = 0;
    if (!m->sigmoid) {                                    /* softmax over all experts, top-k */
        double mx = -INFINITY, z = 0;
        for (int e = 0; e < E; e++) mx = fmax(mx, logit[e]);
        for (int e = 0; e < E; e++) { s[e] = exp(logit[e] - mx); z += s[e]; }
        for (int e = 0; e < E; e++) s[e] /= z;
        topk(s, E, k, idx);
    } else {                                              /* DeepSeek-V3 noaux_tc */
        for (int e = 0; e < E; e++) { s[e] = 1.0 / (1.0 + exp(-logit[e])); c[e] = s[e] + (bias ? bias[e] : 0); }
        int G = m->n_group > 1 ? m->n_group : 1, per = E / G, gidx[64], two[2];
        double gs[64];
        for (int g = 0; g < G; g++) {
            topk(c + g * per, per, per < 2 ? per : 2, two);
            gs[g] = c[g * per + two[0]] + (per < 2 ? 0 : c[g * per + two[1]]);
        }
        topk(gs, G, G > 1 ? m->topk_group : 1, gidx);
        for (int e = 0; e < E; e++) {
            bool keep = G == 1;
            for (int j = 0; j < (G > 1 ? m->topk_group : 1); j++) keep |= gidx[j] == e / per;
            if (!keep) c[e] = 0.0;                        /* masked_fill(~mask, 0.0) */
        }
        topk(c, E, k, idx);
    }
    for (int j = 0; j < k; j++) { w[j] = s[idx[j]]; sum += w[j]; }
    for (int j = 0; j < k; j++) {
        if (m->norm_topk) w[j] /= m->sigmoid ? sum + 1e-20 : sum;
        if (m->sigmoid) w[j] *= m->routed_scale;
    }
}

/* Expert e of Qwen3.5 MoE's fused tensors (transformers' experts: gate, up = linear(x,
 * gate_up_proj[e]).chunk(2); linear(act(gate) * up, down_proj[e])) on rows[0..n), weights w: y += w h.
 * Qwen3-VL MoE (Qwen3VLMoeTextExperts): gate, up = (x @ gate_up_proj[e]).chunk(2); (act(gate) * up) @ down_proj[e]. */
static int fused_expert(const RefModel *m, int L, size_t e, const double *x, const size_t *rows, const double *w,
                        size_t n, double *y) {
    const size_t D = (size_t)m->D, F = (size_t)m->eF, E = (size_t)m->E;
    double *GU = tget(m, L, "mlp.experts.gate_up_proj", E * 2 * F * D, 0);
    double *DN = GU ? tget(m, L, "mlp.experts.down_proj", E * D * F, 0) : NULL, *hb = malloc(2 * F * sizeof *hb);
    int rc = GU && DN && hb ? AL_OK : AL_ERR;
    for (size_t k = 0; rc == AL_OK && k < n; k++) {
        const double *xr = x + rows[k] * D;
        if (m->experts_xw)                                /* Qwen3-VL MoE: x @ gate_up_proj[e], (D, 2F) */
            for (size_t j = 0; j < 2 * F; j++) {
                double s = 0;
                for (size_t i = 0; i < D; i++) s += xr[i] * GU[e * D * 2 * F + i * 2 * F + j];
                hb[j] = s;
            }
        else
            lin(xr, D, 1, D, GU + e * 2 * F * D, NULL, 2 * F, hb);
        for (size_t f = 0; f < F; f++) hb[f] = act(m, hb[f]) * hb[F + f];
        for (size_t o = 0; o < D; o++) {
            double s = 0;
            for (size_t f = 0; f < F; f++)              /* down_proj[e]: (F, D) as x @ W, else (D, F) */
                s += (m->experts_xw ? DN[e * D * F + f * D + o] : DN[e * D * F + o * F + f]) * hb[f];
            y[rows[k] * D + o] += w[k] * s;
        }
    }
    free(GU); free(DN); free(hb);
    return rc;
}

/* Qwen3NextSparseMoeBlock's shared expert: y += sigmoid(shared_expert_gate(x)) * shared_expert(x). */
static int shared_expert(const RefModel *m, int L, const double *x, size_t T, double *y) {
    const size_t D = (size_t)m->D;
    double *g = malloc(T * sizeof *g);
    int rc = g ? lin_named(m, L, "mlp.shared_expert_gate", false, x, D, T, D, 1, g) : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        g[t] = m->ablate & REF_ABLATE_SHARED_GATE ? 1.0 : 1.0 / (1.0 + exp(-g[t]));
    if (rc == AL_OK) rc = gated(m, L, "mlp.shared_expert.", NM_PROJ, (size_t)m->shared_ff, x, T, NULL, g, T, y);
    free(g);
    return rc;
}

/* Mixture-of-experts MLP of layer L: y (T x D, zeroed by the caller) += the routed experts. */
static int moe(const RefModel *m, int L, const double *x, size_t T, double *y) {
    const size_t D = (size_t)m->D, E = (size_t)m->E, k = (size_t)m->topk;
    const bool kimi = m->fam == R_KIMI_LINEAR, mix = mixtral_names(m) || kimi;   /* Kimi: w1/w3/w2 under block_sparse_moe */
    const char *base = mix ? "block_sparse_moe." : "mlp.";
    char n[160];
    snprintf(n, sizeof n, "%sgate", base);
    double *logit = malloc(T * E * sizeof *logit), *bias = NULL, *w = malloc(T * k * sizeof *w);
    int *idx = malloc(T * k * sizeof *idx);
    size_t *rows = malloc(T * sizeof *rows);
    double *rw = malloc(T * sizeof *rw);
    int rc = logit && w && idx && rows && rw ? lin_named(m, L, n, false, x, D, T, D, E, logit) : AL_ERR;
    char fn[160];
    snprintf(fn, sizeof fn, "%slayers.%d.mlp.experts.gate_up_proj", m->prefix, L);
    bool fused = st_find(m->st, fn) != NULL;                /* Qwen3.5 MoE: one [E, 2I, D] tensor */
    if (rc == AL_OK && sig_router(m))
        rc = (bias = tget(m, L, kimi ? "block_sparse_moe.gate.e_score_correction_bias"
                                : mix ? "block_sparse_moe.e_score_correction_bias" : "mlp.gate.e_score_correction_bias",
                          E, 0)) ? AL_OK : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++) route(m, logit + t * E, bias, idx + t * k, w + t * k);
    for (size_t e = 0; rc == AL_OK && e < E; e++) {
        size_t cnt = 0;
        for (size_t t = 0; t < T; t++)
            for (size_t j = 0; j < k; j++)
                if ((size_t)idx[t * k + j] == e) { rows[cnt] = t; rw[cnt++] = w[t * k + j]; }
        snprintf(n, sizeof n, "%sexperts.%zu.", base, e);
        if (cnt && fused) rc = fused_expert(m, L, e, x, rows, rw, cnt, y);
        else if (cnt) rc = gated(m, L, n, mix ? NM_MIXTRAL : NM_PROJ, (size_t)m->eF, x, T, rows, rw, cnt, y);
    }
    if (rc == AL_OK && ds_router(m) && m->n_shared > 0)
        rc = gated(m, L, kimi ? "block_sparse_moe.shared_experts." : "mlp.shared_experts.", NM_PROJ,
                   (size_t)(m->eF * m->n_shared), x, T, NULL, NULL, 0, y);
    if (rc == AL_OK && m->shared_ff > 0) rc = shared_expert(m, L, x, T, y);
    free(logit); free(bias); free(w); free(idx); free(rows); free(rw);
    return rc;
}

/* gpt-oss's expert e on one row x (D): (clamp(up) + 1) * glu(clamp(gate)) @ down + bias, from the
 * fused tensors GU (E, D, 2F) with interleaved (gate, up) columns, GB (E, 2F), DN (E, F, D), DB (E, D). */
static void oss_expert(const RefModel *m, const double *const t[4], size_t e, const double *x, double wt, double *y) {
    const size_t D = (size_t)m->D, F = (size_t)m->eF;
    const double *GU = t[0] + e * D * 2 * F, *GB = t[1] + e * 2 * F, *DN = t[2] + e * F * D, *DB = t[3] + e * D;
    double h[1024];
    for (size_t f = 0; f < F; f++) {
        double g = GB[2 * f], u = GB[2 * f + 1];
        for (size_t i = 0; i < D; i++) { g += x[i] * GU[i * 2 * F + 2 * f]; u += x[i] * GU[i * 2 * F + 2 * f + 1]; }
        g = fmin(g, 7.0);
        u = fmin(fmax(u, -7.0), 7.0);
        h[f] = (u + 1) * g / (1 + exp(-1.702 * g));
    }
    for (size_t o = 0; o < D; o++) {
        double s = DB[o];
        for (size_t f = 0; f < F; f++) s += h[f] * DN[f * D + o];
        y[o] += wt * s;
    }
}

/* gpt-oss's MoE of layer L: router logits x W^T + b, top-k of the logits, softmax over those k. */
static int moe_oss(const RefModel *m, int L, const double *x, size_t T, double *y) {
    const size_t D = (size_t)m->D, E = (size_t)m->E, F = (size_t)m->eF;
    const int k = m->topk;
    double *logit = malloc(T * E * sizeof *logit), *t[4];
    t[0] = tget(m, L, "mlp.experts.gate_up_proj", E * D * 2 * F, 0);
    t[1] = tget(m, L, "mlp.experts.gate_up_proj_bias", E, 2 * F);
    t[2] = tget(m, L, "mlp.experts.down_proj", E * F * D, 0);
    t[3] = tget(m, L, "mlp.experts.down_proj_bias", E, D);
    int rc = logit && t[0] && t[1] && t[2] && t[3] && F <= 1024 ? lin_named(m, L, "mlp.router", true, x, D, T, D, E, logit)
                                                              : AL_ERR;
    for (size_t r = 0; rc == AL_OK && r < T; r++) {
        int idx[64];
        double w[64], mx = -INFINITY, sum = 0;
        topk(logit + r * E, (int)E, k, idx);
        for (int j = 0; j < k; j++) mx = fmax(mx, logit[r * E + (size_t)idx[j]]);
        for (int j = 0; j < k; j++) { w[j] = exp(logit[r * E + (size_t)idx[j]] - mx); sum += w[j]; }
        for (int j = 0; j < k; j++) oss_expert(m, (const double *const *)t, (size_t)idx[j], x + r * D, w[j] / sum, y + r * D);
    }
    free(logit);
    for (int i = 0; i < 4; i++) free(t[i]);
    return rc;
}

/* Llama4TextMoe of layer L: scores = sigmoid of the top-k router logits (the others -inf, sigmoid 0); each expert
 * e runs on x * score_e (Llama4TextExperts: bmm(x, gate_up_proj[e]).chunk(2) -> (up * act(gate)) @ down_proj[e]),
 * the outputs summed, plus shared_expert(x). y (T x D, zeroed) +=. */
static int moe_llama4(const RefModel *m, int L, const double *x, size_t T, double *y) {
    const size_t D = (size_t)m->D, E = (size_t)m->E, F = (size_t)m->eF;
    const int k = m->topk;
    double *logit = malloc(T * E * sizeof *logit), *xi = malloc(D * sizeof *xi), *hb = malloc(2 * F * sizeof *hb);
    double *GU = tget(m, L, "feed_forward.experts.gate_up_proj", E * D * 2 * F, 0);
    double *DN = GU ? tget(m, L, "feed_forward.experts.down_proj", E * F * D, 0) : NULL;
    int rc = logit && xi && hb && GU && DN ? lin_named(m, L, "feed_forward.router", false, x, D, T, D, E, logit) : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++) {
        int idx[64];
        topk(logit + t * E, (int)E, k, idx);
        for (int j = 0; j < k; j++) {
            size_t e = (size_t)idx[j];
            double sc = 1.0 / (1.0 + exp(-logit[t * E + e])), in = m->ablate & REF_ABLATE_ROUTER_IN ? 1.0 : sc;
            for (size_t i = 0; i < D; i++) xi[i] = x[t * D + i] * in;
            for (size_t c = 0; c < 2 * F; c++) {
                double s = 0;
                for (size_t i = 0; i < D; i++) s += xi[i] * GU[e * D * 2 * F + i * 2 * F + c];
                hb[c] = s;
            }
            for (size_t f = 0; f < F; f++) hb[f] = hb[F + f] * act(m, hb[f]);
            for (size_t o = 0; o < D; o++) {
                double s = 0;
                for (size_t f = 0; f < F; f++) s += hb[f] * DN[e * F * D + f * D + o];
                y[t * D + o] += (m->ablate & REF_ABLATE_ROUTER_IN ? sc : 1.0) * s;
            }
        }
    }
    if (rc == AL_OK) rc = gated(m, L, "feed_forward.shared_expert.", NM_PROJ, F, x, T, NULL, NULL, 0, y);
    free(logit); free(xi); free(hb); free(GU); free(DN);
    return rc;
}

/* MLP of layer L: y (T x D) = mlp(x). */
static int mlp(const RefModel *m, int L, const double *x, size_t T, double *y) {
    const size_t D = (size_t)m->D, F = (size_t)m->F;
    memset(y, 0, T * D * sizeof *y);
    if (moe_layer(m, L) && m->fam == R_GPT_OSS) return moe_oss(m, L, x, T, y);
    if (moe_layer(m, L) && m->fam == R_LLAMA4) return moe_llama4(m, L, x, T, y);
    if (m->fam == R_LLAMA4) return gated(m, L, "feed_forward.", NM_PROJ, (size_t)m->Fmlp, x, T, NULL, NULL, 0, y);
    if (moe_layer(m, L)) return moe(m, L, x, T, y);
    if (m->fam == R_PHI3 || m->fam == R_NEOX) {
        size_t n = m->fam == R_PHI3 ? 2 * F : F;
        double *u = malloc(T * n * sizeof *u), *hh = malloc(T * F * sizeof *hh);
        int rc = u && hh ? lin_named(m, L, m->fam == R_PHI3 ? "mlp.gate_up_proj" : "mlp.dense_h_to_4h", m->fam == R_NEOX,
                                     x, D, T, D, n, u) : AL_ERR;
        for (size_t t = 0; rc == AL_OK && t < T; t++)
            for (size_t f = 0; f < F; f++)      /* Phi-3: rows [gate ; up] -> up * act(gate) */
                hh[t * F + f] = m->fam == R_PHI3 ? u[t * n + F + f] * act(m, u[t * n + f]) : act(m, u[t * n + f]);
        if (rc == AL_OK)
            rc = lin_named(m, L, m->fam == R_PHI3 ? "mlp.down_proj" : "mlp.dense_4h_to_h", m->fam == R_NEOX, hh, F, T, F,
                           D, y);
        free(u);
        free(hh);
        return rc;
    }
    bool wide = m->double_wide && m->kv_from > 0 && L >= m->kv_from;   /* Gemma 4's use_double_wide_mlp */
    return gated(m, L, "mlp.", NM_PROJ, wide ? 2 * F : F, x, T, NULL, NULL, 0, y);
}

/* ================================================================ the pass */

/* Gemma 4's per-layer inputs (Gemma4TextModel.get_per_layer_inputs, project_per_layer_inputs): for token t and layer l,
 * (rmsnorm_w(per_layer_model_projection(e_t)[l] / sqrt(D)) + embed_tokens_per_layer[token][l] sqrt(P)) / sqrt(2), e_t
 * the scaled token embedding, rmsnorm_w per_layer_projection_norm over the layer's P values. */
static int ple_inputs(RefModel *m, const int *tokens, const double *x, size_t T) {
    const size_t D = (size_t)m->D, P = (size_t)m->ple, LP = P * (size_t)m->L;
    char n[160];
    snprintf(n, sizeof n, "%sembed_tokens_per_layer.weight", m->prefix);
    double *E = tget(m, -1, n, (size_t)m->ple_vocab, LP), *w = NULL;
    snprintf(n, sizeof n, "%sper_layer_projection_norm.weight", m->prefix);
    if (E) w = tget(m, -1, n, P, 0);
    m->ple_in = malloc(T * LP * sizeof *m->ple_in);
    snprintf(n, sizeof n, "%sper_layer_model_projection", m->prefix);
    int rc = E && w && m->ple_in ? lin_named(m, -1, n, false, x, D, T, D, LP, m->ple_in) : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t l = 0; l < (size_t)m->L; l++) {
            double *v = m->ple_in + t * LP + l * P;
            for (size_t j = 0; j < P; j++) v[j] /= sqrt((double)D);
            rms(v, P, w, m->eps, false);
            for (size_t j = 0; j < P; j++) v[j] = (v[j] + E[(size_t)tokens[t] * LP + l * P + j] * sqrt((double)P)) / sqrt(2.0);
        }
    free(E);
    free(w);
    return rc;
}

/* One token's Gemma 4 experts (Gemma4TextRouter, Gemma4TextExperts) into y (D): the router reads r = x / sqrt(mean x^2 +
 * eps) x router.scale / sqrt(D), softmax over proj(r), the top k (ties: the earlier expert) renormalised x
 * per_expert_scale; expert e on xn: gelu(gate) x up of gate_up_proj[e] xn (rows [gate ; up]), then down_proj[e]. */
static void experts_g4(const RefModel *m, const double *const t[5], const double *x, const double *xn, double *y) {
    const size_t D = (size_t)m->D, E = (size_t)m->g4e, K = (size_t)m->g4top, NI = (size_t)m->g4i;
    double r[512], p[64], ss = 0, mx = -INFINITY, s = 0, sel = 0, h[512];
    int idx[64];
    for (size_t j = 0; j < D; j++) ss += x[j] * x[j];
    for (size_t j = 0; j < D; j++) r[j] = x[j] / sqrt(ss / (double)D + m->eps) * t[1][j] / sqrt((double)D);
    for (size_t e = 0; e < E; e++) {
        p[e] = 0;
        for (size_t j = 0; j < D; j++) p[e] += t[0][e * D + j] * r[j];
        mx = fmax(mx, p[e]);
    }
    for (size_t e = 0; e < E; e++) s += exp(p[e] - mx);
    topk(p, (int)E, (int)K, idx);
    for (size_t i = 0; i < K; i++) sel += exp(p[idx[i]] - mx) / s;
    for (size_t j = 0; j < D; j++) y[j] = 0;
    for (size_t i = 0; i < K; i++) {
        size_t e = (size_t)idx[i];
        double wt = exp(p[e] - mx) / s / sel * t[2][e];
        for (size_t a = 0; a < NI; a++) {
            double g = 0, u = 0;
            for (size_t j = 0; j < D; j++) {
                g += t[3][(e * 2 * NI + a) * D + j] * xn[j];
                u += t[3][(e * 2 * NI + NI + a) * D + j] * xn[j];
            }
            h[a] = act(m, g) * u;
        }
        for (size_t j = 0; j < D; j++) {
            double o = 0;
            for (size_t a = 0; a < NI; a++) o += t[4][(e * D + j) * NI + a] * h[a];
            y[j] += wt * o;
        }
    }
}

/* Gemma 4's MoE block of layer L beside the dense MLP (Gemma4TextDecoderLayer with enable_moe_block): f (the dense MLP's
 * output, T x D) becomes post_feedforward_layernorm_1(f) + post_feedforward_layernorm_2(experts(
 * pre_feedforward_layernorm_2(x))), x the residual stream. */
static int moe_g4(const RefModel *m, int L, const double *x, size_t T, double *f) {
    const size_t D = (size_t)m->D, E = (size_t)m->g4e, NI = (size_t)m->g4i;
    if (D > 512 || E > 64 || NI > 512) return al_err("ref: Gemma 4 MoE block too large for the reference");
    const double *t[5] = {tget(m, L, "router.proj.weight", E, D), tget(m, L, "router.scale", D, 0),
                          tget(m, L, "router.per_expert_scale", E, 0), tget(m, L, "experts.gate_up_proj", E * 2 * NI * D, 0),
                          tget(m, L, "experts.down_proj", E * D * NI, 0)};
    double *xn = malloc(T * D * sizeof *xn), *y = malloc(T * D * sizeof *y);
    int rc = t[0] && t[1] && t[2] && t[3] && t[4] && xn && y ? AL_OK : AL_ERR;
    if (rc == AL_OK) memcpy(xn, x, T * D * sizeof *xn);
    if (rc == AL_OK) rc = norm_rows(m, L, "pre_feedforward_layernorm_2", xn, T, D, D);
    for (size_t i = 0; rc == AL_OK && i < T; i++) experts_g4(m, t, x + i * D, xn + i * D, y + i * D);
    if (rc == AL_OK) rc = norm_rows(m, L, "post_feedforward_layernorm_2", y, T, D, D);
    if (rc == AL_OK) rc = norm_rows(m, L, "post_feedforward_layernorm_1", f, T, D, D);
    for (size_t i = 0; rc == AL_OK && i < T * D; i++) f[i] += y[i];
    for (int i = 0; i < 5; i++) free((void *)t[i]);
    free(xn);
    free(y);
    return rc;
}

/* Gemma4TextDecoderLayer's per-layer input after the MLP's residual: x += post_per_layer_input_norm(
 * per_layer_projection(act(per_layer_input_gate(x)) * ple_L)). */
static int ple_layer(const RefModel *m, int L, double *x, size_t T) {
    const size_t D = (size_t)m->D, P = (size_t)m->ple, LP = P * (size_t)m->L;
    double *g = malloc(T * P * sizeof *g), *y = malloc(T * D * sizeof *y);
    int rc = g && y ? lin_named(m, L, "per_layer_input_gate", false, x, D, T, D, P, g) : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t j = 0; j < P; j++) g[t * P + j] = act(m, g[t * P + j]) * m->ple_in[t * LP + (size_t)L * P + j];
    if (rc == AL_OK) rc = lin_named(m, L, "per_layer_projection", false, g, P, T, P, D, y);
    if (rc == AL_OK) rc = norm_rows(m, L, "post_per_layer_input_norm", y, T, D, D);
    for (size_t i = 0; rc == AL_OK && i < T * D; i++) x[i] += y[i];
    free(g);
    free(y);
    return rc;
}

/* Decoder layer L on the residual stream x (T x D), in place. */
static int layer(const RefModel *m, int L, double *x, size_t T) {
    const size_t D = (size_t)m->D, n = T * D;
    double *h = malloc(n * sizeof *h), *a = malloc(n * sizeof *a), *f = malloc(n * sizeof *f);
    int rc = h && a && f ? AL_OK : AL_ERR;
    if (rc == AL_OK) memcpy(h, x, n * sizeof *h);
    if (rc == AL_OK && !post_block(m)) rc = norm_rows(m, L, "input_layernorm", h, T, D, D);
    if (rc == AL_OK)
        rc = m->fam == R_KIMI_LINEAR && m->linear[L] ? attn_kda(m, L, h, T, a)
             : mla(m)         ? attn_mla(m, L, h, T, a)
             : m->linear[L] ? attn_linear(m, L, h, T, a)
             : m->fam == R_GEMMA4 ? attn_g4(m, L, h, T, a)
                            : attn_gqa(m, L, h, T, a);
    if (rc == AL_OK && m->parallel) {                     /* x + attn(ln1(x)) + mlp(ln2(x)) */
        memcpy(h, x, n * sizeof *h);
        rc = norm_rows(m, L, "post_attention_layernorm", h, T, D, D);
        if (rc == AL_OK) rc = mlp(m, L, h, T, f);
        for (size_t i = 0; rc == AL_OK && i < n; i++) x[i] += a[i] + f[i];
    } else if (rc == AL_OK) {
        bool sandwich = gemma(m) || m->fam == R_GEMMA4, post = post_block(m);
        if (sandwich || post) rc = norm_rows(m, L, "post_attention_layernorm", a, T, D, D);
        for (size_t i = 0; rc == AL_OK && i < n; i++) x[i] += a[i];
        if (rc == AL_OK) memcpy(h, x, n * sizeof *h);
        if (rc == AL_OK && !post)
            rc = norm_rows(m, L, sandwich ? "pre_feedforward_layernorm" : "post_attention_layernorm", h, T, D, D);
        if (rc == AL_OK) rc = mlp(m, L, h, T, f);
        if (rc == AL_OK && m->g4e && !(m->ablate & REF_ABLATE_MOE_BLOCK)) rc = moe_g4(m, L, x, T, f);
        if (rc == AL_OK && (sandwich || post)) rc = norm_rows(m, L, "post_feedforward_layernorm", f, T, D, D);
        for (size_t i = 0; rc == AL_OK && i < n; i++) x[i] += f[i];
    }
    if (rc == AL_OK && m->ple_in && !(m->ablate & REF_ABLATE_PLE)) rc = ple_layer(m, L, x, T);
    double *ls = rc == AL_OK && m->fam == R_GEMMA4 ? tget(m, L, "layer_scalar", 1, 0) : NULL;   /* hidden *= layer_scalar */
    if (rc == AL_OK && m->fam == R_GEMMA4 && !ls) rc = AL_ERR;
    for (size_t i = 0; ls && !(m->ablate & REF_ABLATE_LAYER_SCALAR) && i < n; i++) x[i] *= ls[0];
    free(ls);
    free(h); free(a); free(f);
    return rc;
}

int ref_logits(RefModel *m, const int *tokens, size_t T, double *logits) {
    const size_t D = (size_t)m->D, V = (size_t)m->V;
    char emb[96];
    snprintf(emb, sizeof emb, "%s%s", m->prefix, m->fam == R_NEOX ? "embed_in.weight" : "embed_tokens.weight");
    double *E = tget(m, -1, emb, V, D), *x = malloc(T * D * sizeof *x), *W = NULL;
    int rc = E && x ? AL_OK : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++) {
        if (tokens[t] < 0 || (size_t)tokens[t] >= V) { rc = al_err("ref: token %d outside the vocabulary", tokens[t]); break; }
        for (size_t i = 0; i < D; i++) x[t * D + i] = E[(size_t)tokens[t] * D + i] * m->embed_scale;
    }
    if (rc == AL_OK && m->fam == R_GEMMA4 && m->ple > 0) rc = ple_inputs(m, tokens, x, T);
    if (m->fam == R_GEMMA4) {
        m->g4k = calloc((size_t)m->L, sizeof *m->g4k);
        m->g4v = calloc((size_t)m->L, sizeof *m->g4v);
        if (!m->g4k || !m->g4v) rc = AL_ERR;
    }
    for (int L = 0; rc == AL_OK && L < m->L; L++) rc = layer(m, L, x, T);
    for (int L = 0; m->g4k && m->g4v && L < m->L; L++) { free(m->g4k[L]); free(m->g4v[L]); }
    free(m->g4k);
    free(m->g4v);
    m->g4k = m->g4v = NULL;
    free(m->ple_in);
    m->ple_in = NULL;
    char fn[96];
    snprintf(fn, sizeof fn, "%s%s", m->prefix, m->fam == R_NEOX ? "final_layer_norm" : "norm");
    if (rc == AL_OK) rc = norm_rows(m, -1, fn, x, T, D, D);
    if (rc == AL_OK && !m->tied) rc = (W = tget(m, -1, m->head, V, D)) ? AL_OK : AL_ERR;
    if (rc == AL_OK) lin(x, D, T, D, m->tied ? E : W, NULL, V, logits);
    free(m->sel);
    m->sel = NULL;
    for (size_t i = 0; rc == AL_OK && m->final_cap > 0 && i < T * V; i++)
        logits[i] = m->final_cap * tanh(logits[i] / m->final_cap);
    free(E); free(x); free(W);
    return rc;
}

int ref_mean_nll(RefModel *m, const int *tokens, size_t T, double *nll) {
    if (T < 2) return al_err("ref: perplexity needs at least 2 tokens");
    const size_t V = (size_t)m->V;
    double *z = malloc(T * V * sizeof *z), s = 0;
    int rc = z ? ref_logits(m, tokens, T, z) : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t + 1 < T; t++) {
        double mx = -INFINITY, sum = 0;
        for (size_t v = 0; v < V; v++) mx = fmax(mx, z[t * V + v]);
        for (size_t v = 0; v < V; v++) sum += exp(z[t * V + v] - mx);
        s += mx + log(sum) - z[t * V + (size_t)tokens[t + 1]];
    }
    free(z);
    if (rc == AL_OK) *nll = s / (double)(T - 1);
    return rc;
}
