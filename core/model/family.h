/* family.h -- the family table: one row per config.json `model_type`, and the tensor roles.
 *
 * A family is data. Its row (FAMILY[fam]) names the layouts its checkpoints use (attention weights,
 * block norms, MLP, mixture of experts, model-level names), its default traits (norm form,
 * activation, q/k norms, biases, tied embeddings, windows, soft-caps, ...), which config.json
 * reader knows its keys, its llama.cpp architecture, its help line, and the recipe of its tiny
 * synthetic checkpoint (`synth family`). config.c reads the row once into ModelConfig; code asks
 * the description for traits and asks for tensors by role, never by spelling a name.
 *
 * A tensor role (tensor_role) is the job a weight does: attention q / k / v / o, an MLP's down
 * projection, the router, the final norm. Each layout maps its roles to Hugging Face's name
 * pattern, and whether the tensor may be absent; cfg_role_name() (core/model/config.h) writes a role's full name
 * for a model (layer, expert, ".weight" / ".bias"). Adding a family that reuses known layouts is
 * one row here; a new layout is one more column of names. */
#ifndef AL_FAMILY_H
#define AL_FAMILY_H

#include <stdbool.h>
#include <stddef.h>

/* The most layers a model description holds (per-layer arrays of ModelConfig and of the family readers). */
#define CFG_MAX_LAYERS 512

/* One row per model_type attnlab reads (llama2.c .bin files have a row of their own). */
typedef enum {
    FAM_LLAMA, FAM_MISTRAL,              /* GQA, RoPE rotate_half (Mistral: a sliding window) */
    FAM_SMOLLM3,                         /* Llama's block with no RoPE on every fourth layer (no_rope_layers) */
    FAM_LLAMA4_TEXT, FAM_LLAMA4,         /* Llama 4: chunked RoPE layers, NoPE layers, L2 q/k norm, MoE (+ its tower) */
    FAM_MIXTRAL,                         /* Mistral attention, top-k of experts w1/w2/w3 */
    FAM_MIMO,                            /* issue 27: MiMo (Qwen2's layer, MTP layers skipped) */
    FAM_EXAONE4,                         /* OLMo 2's post-norms, per-head q/k norms, 3 sliding : 1 NoPE global */
    FAM_MINIMAX_M2,                      /* q/k norms over the projection, rotary_dim; sigmoid-routed w1/w2/w3 experts */
    FAM_MINISTRAL3,                      /* Mistral's layer, YaRN in rope_parameters, q scaled past the original context */
    FAM_QWEN2,                           /* q/k/v biases */
    FAM_QWEN3, FAM_QWEN3_MOE,            /* explicit head_dim, per-head q_norm / k_norm (+ routed experts) */
    FAM_GEMMA2, FAM_GEMMA3,              /* gemma2, gemma3_text: RMSNorm (1 + w), sandwich norms, GeGLU,
                                            embeddings x sqrt(hidden), soft-caps (2), q/k norms (3) */
    FAM_GEMMA3_MM, FAM_QWEN3_VL, FAM_QWEN3_VL_MOE, FAM_MISTRAL3,   /* text towers of multimodal checkpoints
                                                                     (text_config) */
    FAM_GEMMA4_TEXT, FAM_GEMMA4,         /* Gemma 4: per-layer-type attention (k_eq_v, KV-shared layers, proportional RoPE,
                                            values RMS-normed, unit scale), plain RMSNorm, layer_scalar (+ its text tower) */
    FAM_PHI3,                            /* fused qkv_proj and gate_up_proj, partial rotary */
    FAM_NEOX,                            /* gpt_neox (Pythia): fused query_key_value head by head, rotary_pct,
                                            parallel residual, LayerNorm with bias, GELU MLP with biases */
    FAM_OLMO2,                           /* q/k norms over the whole projection, post-norms only */
    FAM_OLMO3,                           /* OLMo 2's block; window on 3 layers of 4, YaRN on the full ones */
    FAM_NEMOTRON_H, FAM_GRANITE_HYBRID,  /* Mamba-2 hybrids: Nemotron-H's blocks of one mixer each (hybrid_override_pattern
                                            M / * / - / E), Granite 4.0-H's Mamba-2 or attention + MoE / shared MLP */
    FAM_QWEN3_NEXT,                      /* Gated DeltaNet linear-attention layers 3 : 1 gated full attention */
    FAM_QWEN3_5, FAM_QWEN3_5_MOE,        /* Qwen3.5 / 3.6: Qwen3-Next's layers with split projections, a text tower */
    FAM_DEEPSEEK_V2, FAM_DEEPSEEK,       /* MLA: deepseek_v2, deepseek_v3 (R1) */
    FAM_KIMI_K2,                         /* MLA (DeepSeek-V3's architecture) */
    FAM_DEEPSEEK_V32, FAM_GLM_MOE_DSA,   /* MLA + the lightning indexer (index_topk keys per query): DeepSeek-V3.2, GLM-5 */
    FAM_KIMI_K25,                        /* issue 27: Kimi-K2.5's text tower (DeepSeek-V3's MLA and MoE) */
    FAM_KIMI_LINEAR,                     /* issue 27: Kimi Delta Attention 3 : 1 MLA without RoPE; MoE */
    FAM_DEEPSEEK_V4,                     /* issue 27: DeepSeek-V4 (window / CSA / HCA layers): its attention's per-head maps;
                                            the forward pass refused */
    FAM_KIMI_K3,                         /* issue 27: Kimi-K3 (Kimi-Linear + attention residuals, SiTU, latent experts):
                                            its MLA layers analysed; the forward pass refused */
    FAM_GLM4_MOE,                        /* GQA, partial rotary 0.5, q/k/v biases, optional per-head q/k norms;
                                            DeepSeek-V3's MoE (sigmoid group routing, shared expert) */
    FAM_GPT_OSS,                         /* gpt-oss: a learned sink logit per head, sliding 128 / full layers, YaRN,
                                            q/k/v/o biases; MoE over fused experts, clamped SwiGLU */
    FAM_GPT2,                            /* MHA, no RoPE, Conv1D (in, out), fused c_attn */
    FAM_LLAMA2C,                         /* llama2.c .bin: GQA, RoPE on interleaved pairs */
    FAM_ATTNLAB_MLA,                     /* attnlab's own layout of a `convert mla` (`export DIR format attnlab`): the
                                            source family's model (attnlab_source_model_type) with MLA attention */
    FAM_COUNT
} model_family;

typedef enum {
    ROPE_NONE,
    ROPE_HALF,          /* rotate_half: dim j pairs with j + d/2 (HF Llama/Mistral/Qwen2) */
    ROPE_INTERLEAVED    /* dim 2j pairs with 2j + 1 (llama2.c; DeepSeek weights, de-interleaved in its code) */
} rope_layout;

typedef enum { QKN_NONE, QKN_HEAD, QKN_PROJ } qk_norm_kind;            /* per head | whole projection */
typedef enum { NORM_RMS, NORM_LAYER, NORM_RMS_1P } norm_kind;          /* RMS, LayerNorm with bias, RMS (1 + w) */
typedef enum { MLP_DENSE, MLP_GATED, MLP_MOE } mlp_kind;

/* Where a layer's attention weights live (core/model/model.c's per-head views follow it). */
typedef enum {
    QKV_SPLIT,          /* self_attn.{q,k,v,o}_proj (Llama, Mistral, Qwen, Gemma, Mixtral, OLMo 2) */
    QKV_CAT,            /* self_attn.qkv_proj rows [Q heads ; K heads ; V heads] (Phi-3) */
    QKV_HEADS,          /* attention.query_key_value rows head by head [q_h ; k_h ; v_h], attention.dense (GPT-NeoX) */
    QKV_CONV1D,         /* attn.c_attn (in, out) columns [Q | K | V], attn.c_proj (GPT-2) */
    QKV_MLA,            /* q(_a/_b)_proj, kv_a_proj_with_mqa, kv_b_proj (DeepSeek) */
    QKV_MIXER,          /* mixer.{q,k,v,o}_proj: Llama's projections in a block of one mixer (Nemotron-H) */
    QKV_DSV4,           /* attn.{wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, attn_sink}: one KV head that is key and value,
                           a grouped low-rank output (DeepSeek-V4; model.c's block_dsv4) */
    ATTN_LAYOUT_COUNT
} attn_layout;

/* How a decoder layer arranges its norms and residuals (the arithmetic; names: norm_names). */
typedef enum {
    BLOCK_PRE,          /* x += attn(n1(x)); x += mlp(n2(x))                              (Llama, GPT-2) */
    BLOCK_SANDWICH,     /* x += post_attn(attn(n1(x))); x += post_ff(mlp(pre_ff(x)))      (Gemma 2/3) */
    BLOCK_POST,         /* x += post_attn(attn(x)); x += post_ff(mlp(x))                  (OLMo 2) */
    BLOCK_PARALLEL      /* x += attn(n1(x)) + mlp(n2(x))            (GPT-NeoX use_parallel_residual) */
} block_layout;

/* What a layer's norms are called. */
typedef enum {
    NORMS_LLAMA,        /* input_layernorm, post_attention_layernorm (before the MLP) */
    NORMS_SANDWICH,     /* input_, post_attention_, pre_feedforward_, post_feedforward_layernorm */
    NORMS_POST,         /* post_attention_, post_feedforward_layernorm */
    NORMS_GPT2,         /* ln_1, ln_2 */
    NORMS_MIXER,        /* norm: the one norm of a block of one mixer (Nemotron-H) */
    NORMS_GEMMA4,       /* Gemma's sandwich norms + layer_scalar (1): the layer's output times it (Gemma 4) */
    NORMS_DSV4,         /* attn_norm, ffn_norm (DeepSeek-V4) */
    NORM_NAMES_COUNT
} norm_names;

/* What a dense MLP's linears are called. */
typedef enum {
    FFN_GATED,          /* mlp.{gate,up,down}_proj */
    FFN_FUSED,          /* mlp.gate_up_proj rows [gate ; up], mlp.down_proj (Phi-3) */
    FFN_CONV1D,         /* mlp.c_fc, mlp.c_proj, Conv1D (in, out) (GPT-2) */
    FFN_NEOX,           /* mlp.dense_h_to_4h, mlp.dense_4h_to_h with biases (GPT-NeoX) */
    FFN_LLAMA4,         /* feed_forward.{gate,up,down}_proj (Llama 4's dense layers) */
    FFN_MIXER,          /* mixer.up_proj, mixer.down_proj: no gate (Nemotron-H's relu2 MLP blocks) */
    FFN_GRANITE,        /* shared_mlp.input_linear rows [gate ; up], shared_mlp.output_linear (Granite 4.0-H) */
    FFN_LAYOUT_COUNT
} ffn_layout;

/* Where a linear-attention (Gated DeltaNet) layer keeps its weights (LIN_NONE: the family has none). */
typedef enum {
    LIN_NONE,
    LIN_QWEN3_NEXT,     /* linear_attn.{in_proj_qkvz, in_proj_ba, conv1d, A_log, dt_bias, norm, out_proj}: qkvz and
                           ba rows grouped per key head [q | k | v | z], [b | a] (Qwen3-Next) */
    LIN_QWEN3_5,        /* linear_attn.{in_proj_qkv [q | k | v], in_proj_z, in_proj_b, in_proj_a, ...} (Qwen3.5) */
    LIN_KDA,            /* Kimi Delta Attention: self_attn.{q,k,v}_proj, {q,k,v}_conv1d, f_a/f_b_proj (per-channel decay),
                           A_log, dt_bias, b_proj, g_a/g_b_proj (output gate), o_norm, o_proj (Kimi-Linear) */
    LIN_MAMBA2_NEMOTRON, /* mixer.{in_proj [z | x B C | dt], conv1d (+ bias), A_log, D, dt_bias, norm, out_proj}:
                           a Mamba-2 layer (Nemotron-H) */
    LIN_MAMBA2_GRANITE, /* mamba.{in_proj, conv1d, A_log, D, dt_bias, norm, out_proj}: the same (Granite 4.0-H) */
    LIN_LAYOUT_COUNT
} linear_layout;

/* Where a mixture-of-experts layer keeps its router and experts. */
typedef enum {
    MOE_NONE,
    MOE_MIXTRAL,        /* block_sparse_moe.gate, block_sparse_moe.experts.E.{w1,w3,w2} */
    MOE_QWEN,           /* mlp.gate, mlp.experts.E.{gate,up,down}_proj (Qwen3-MoE) */
    MOE_DEEPSEEK,       /* mlp.gate (+ e_score_correction_bias), mlp.experts.E.*, mlp.shared_experts.* */
    MOE_GPT_OSS,        /* mlp.router (+ bias), every expert in one tensor: mlp.experts.gate_up_proj (E, D, 2I) used as
                           x @ W with gate / up in interleaved columns (2i, 2i + 1), mlp.experts.down_proj (E, I, D),
                           and their _bias (E, 2I), (E, D) (gpt-oss; dequantized names of its MXFP4 experts) */
    MOE_MINIMAX,        /* Mixtral's block_sparse_moe.* + block_sparse_moe.e_score_correction_bias (MiniMax-M2) */
    MOE_QWEN_NEXT,      /* Qwen3-MoE's + mlp.shared_expert.* scaled by sigmoid(mlp.shared_expert_gate x) (Qwen3-Next) */
    MOE_QWEN3_5,        /* Qwen3-Next's with the experts fused: mlp.experts.gate_up_proj, mlp.experts.down_proj
                           (Qwen3.5 MoE) */
    MOE_KIMI,           /* block_sparse_moe.gate (+ .e_score_correction_bias), block_sparse_moe.experts.E.{w1,w3,w2},
                           block_sparse_moe.shared_experts.{gate,up,down}_proj (Kimi-Linear) */
    MOE_QWEN3_VL,       /* mlp.gate, every expert in one tensor: mlp.experts.gate_up_proj (E, D, 2I) used as x @ W with
                           gate / up the halves of the columns [gate | up], mlp.experts.down_proj (E, I, D) used as x @ W;
                           no biases, no shared expert (Qwen3-VL MoE) */
    MOE_LLAMA4,         /* feed_forward.router, feed_forward.experts.gate_up_proj (E, D, 2I) x @ W with [gate | up]
                           column halves, feed_forward.experts.down_proj (E, I, D), feed_forward.shared_expert.* (Llama 4) */
    MOE_LLAMA4_SPLIT,   /* ... with feed_forward.experts.E.{gate,up,down}_proj one expert per Linear, as transformers'
                           SequentialLlama4TextExperts saves quantized releases (model.c / lint pick it by the tensors) */
    MOE_NEMOTRON,       /* mixer.gate (+ e_score_correction_bias), mixer.experts.E.{up,down}_proj without a gate (relu2),
                           mixer.shared_experts.{up,down}_proj; DeepSeek-V3's sigmoid group routing (Nemotron 3) */
    MOE_GRANITE,        /* block_sparse_moe.router.layer, block_sparse_moe.input_linear (E, 2I, D) rows [gate ; up] per
                           expert used as W x, block_sparse_moe.output_linear (E, D, I); the shared MLP is the dense
                           FFN_GRANITE beside it (Granite 4.0-H) */
    MOE_DSV4,           /* ffn.gate (+ ffn.gate.bias), ffn.experts.E.{w1,w3,w2}, ffn.shared_experts.{w1,w3,w2} (DeepSeek-V4;
                           its hash-routed layers' ffn.gate.tid2eid and sqrtsoftplus scores: not computed) */
    MOE_LAYOUT_COUNT
} moe_layout;

/* How a mixture-of-experts router picks and weighs its experts (core/model/forward.c's route_token). */
typedef enum {
    ROUTER_SOFTMAX,     /* softmax, top-k, renormalised when norm_topk_prob (Mixtral, Qwen3-MoE) */
    ROUTER_DS_V2,       /* softmax, greedy or group_limited_greedy, x routed_scaling_factor (DeepSeek-V2) */
    ROUTER_DS_V3,       /* sigmoid, top-k of scores + e_score_correction_bias within the best groups,
                           renormalised when norm_topk_prob, x routed_scaling_factor (DeepSeek-V3) */
    ROUTER_LLAMA4       /* top-k of the logits, weights sigmoid(logit) (not renormalised) multiplying each chosen
                           expert's INPUT, not its output (Llama4Router, Llama4TextMoe) */
} router_kind;

/* Where the model keeps its layers and its embeddings, final norm and output layer. */
typedef enum {
    NAMES_HF,           /* model.layers.L., model.embed_tokens, model.norm, lm_head */
    NAMES_GPT2,         /* transformer.h.L., transformer.wte, transformer.ln_f, lm_head (tied) */
    NAMES_NEOX,         /* gpt_neox.layers.L., gpt_neox.embed_in, gpt_neox.final_layer_norm, embed_out */
    NAMES_LM_MODEL,     /* a multimodal checkpoint's text tower as released before transformers 4.52:
                           language_model.model.layers.L., ..., language_model.lm_head */
    NAMES_MODEL_LM,     /* ... as transformers 4.52+ saves it: model.language_model.layers.L., ..., lm_head */
    NAMES_BACKBONE,     /* backbone.layers.L., backbone.embeddings, backbone.norm_f, lm_head (Nemotron-H) */
    NAMES_DSV4,         /* layers.L., embed, norm, head: no prefix (DeepSeek-V4 as released) */
    MODEL_NAMES_COUNT
} model_names;

/* The engines people deploy (lint's targets): which implement a model_type. */
enum { ENGINE_HF = 1 << 0, ENGINE_VLLM = 1 << 1, ENGINE_SGLANG = 1 << 2, ENGINE_LLAMACPP = 1 << 3 };
#define ENGINES_ALL (ENGINE_HF | ENGINE_VLLM | ENGINE_SGLANG | ENGINE_LLAMACPP)

/* Which reader knows the family's config.json keys (core/model/config.c). */
typedef enum {
    KEYS_HF,            /* Llama's: hidden_size, num_attention_heads, num_key_value_heads, head_dim, rms_norm_eps */
    KEYS_MLA,           /* Llama's + q_lora_rank, kv_lora_rank, qk_{nope,rope}_head_dim, v_head_dim, rope_interleave */
    KEYS_GPT2,          /* n_embd, n_head, n_layer, n_inner, layer_norm_epsilon, scale_attn_* */
    KEYS_NEOX,          /* Llama's sizes + rotary_pct, rotary_emb_base, layer_norm_eps, use_parallel_residual */
    KEYS_DSV4,          /* DeepSeek-V4's (core/model/dsv4.c): Llama's + q_lora_rank, o_groups, o_lora_rank, compress_ratios,
                           hc_mult, ... (dsv4_config) */
    KEYS_KIMI_K3,       /* Kimi-K3: its text_config checked (core/model/kimik3.c), then read as KEYS_MLA (kimi_linear's) */
    KEYS_LLAMA2C,       /* no config.json: the .bin header (core/model/llama2c.c) */
    KEYS_ATTNLAB        /* attnlab_mla: the source family's keys (attnlab_source_model_type) + the MLA dims of KEYS_MLA */
} config_keys;

/* What a weight does. */
typedef enum {
    ROLE_Q, ROLE_K, ROLE_V, ROLE_O, ROLE_QKV,                  /* attention projections (QKV: fused) */
    ROLE_Q_A, ROLE_Q_A_NORM, ROLE_Q_B,                         /* MLA query latent */
    ROLE_KV_A, ROLE_KV_A_NORM, ROLE_KV_B,                      /* MLA KV latent (+ the shared RoPE key) */
    ROLE_IDX_Q_B, ROLE_IDX_K, ROLE_IDX_K_NORM, ROLE_IDX_W,     /* MLA's lightning indexer: wq_b, wk, k_norm, weights_proj */
    ROLE_Q_NORM, ROLE_K_NORM,                                  /* per-head or whole-projection q/k norms */
    ROLE_SINKS, ROLE_ATTN_GATE,                                /* attention sinks, output gate */
    ROLE_O_A, ROLE_CMP_WKV, ROLE_HC_ATTN_FN,                   /* DeepSeek-V4: the grouped output's first factor (wo_a),
                                                                  the compressor's wkv, the hyper-connections' hc_attn_fn */
    ROLE_ROPE_FREQ,                                            /* attnlab_mla: a layer's own RoPE frequencies (F64) */
    ROLE_LIN_QKVZ, ROLE_LIN_BA, ROLE_LIN_QKV, ROLE_LIN_Z, ROLE_LIN_B, ROLE_LIN_A, ROLE_LIN_CONV, ROLE_LIN_A_LOG,
    ROLE_LIN_DT_BIAS, ROLE_LIN_NORM, ROLE_LIN_OUT,
    ROLE_LIN_Q, ROLE_LIN_K, ROLE_LIN_V, ROLE_LIN_Q_CONV, ROLE_LIN_K_CONV, ROLE_LIN_V_CONV,   /* Kimi Delta Attention */
    ROLE_LIN_F_A, ROLE_LIN_F_B, ROLE_LIN_G_A, ROLE_LIN_G_B,
    ROLE_LIN_IN, ROLE_LIN_D,                                   /* Mamba-2's in_proj and D skip (linear_layout) */
                                                               /* Gated DeltaNet (linear_layout) */
    ROLE_NORM_ATTN_IN, ROLE_NORM_ATTN_OUT,                     /* before / after attention */
    ROLE_NORM_FFN_IN, ROLE_NORM_FFN_OUT,                       /* before / after the MLP */
    ROLE_FFN_GATE, ROLE_FFN_UP, ROLE_FFN_GATE_UP, ROLE_FFN_DOWN,   /* dense MLP */
    ROLE_ROUTER, ROLE_ROUTER_BIAS,                             /* MoE router (+ score-correction bias) */
    ROLE_EXP_GATE, ROLE_EXP_UP, ROLE_EXP_DOWN,                 /* routed expert E */
    ROLE_EXPS_GATE_UP, ROLE_EXPS_GATE_UP_BIAS, ROLE_EXPS_DOWN, ROLE_EXPS_DOWN_BIAS,   /* all experts in one tensor
                                                  (gpt-oss: [E, D, 2I] x @ W, gate / up interleaved; Qwen3.5 MoE:
                                                  [E, 2I, D] rows [gate ; up] per expert, down [E, D, I];
                                                  Qwen3-VL MoE: [E, D, 2I] x @ W, [gate | up] halves) */
    ROLE_SHEXP_GATE, ROLE_SHEXP_UP, ROLE_SHEXP_DOWN,           /* shared expert(s) */
    ROLE_SHEXP_SCALE,                                          /* the shared expert's sigmoid gate (1, hidden) */
    ROLE_LAYER_SCALAR,                                         /* a scalar the layer's output is multiplied by (Gemma 4) */
    ROLE_PLE_GATE, ROLE_PLE_PROJ, ROLE_PLE_NORM,               /* Gemma 4's per-layer input in a layer: per_layer_input_gate
                                                                  (P, D), per_layer_projection (D, P), its norm (D) */
    ROLE_G4_ROUTER, ROLE_G4_ROUTER_SCALE, ROLE_G4_EXPERT_SCALE, ROLE_G4_EXPS_GATE_UP, ROLE_G4_EXPS_DOWN,
    ROLE_NORM_FFN_OUT1, ROLE_NORM_FFN_OUT2, ROLE_NORM_FFN_IN2, /* Gemma 4's MoE block beside the dense MLP: router.proj (E, D),
                                                                  router.scale (D), router.per_expert_scale (E), experts
                                                                  [E, 2I, D] rows [gate ; up] as W x and [E, D, I], its norms */
    ROLE_EMBED, ROLE_POS_EMBED, ROLE_FINAL_NORM, ROLE_LM_HEAD, /* model level (POS: learned positions) */
    ROLE_PLE_EMBED, ROLE_PLE_MODEL_PROJ, ROLE_PLE_MODEL_NORM,  /* Gemma 4's per-layer embeddings: embed_tokens_per_layer
                                                                  (Vp, L P), per_layer_model_projection (L P, D), norm (P) */
    ROLE_COUNT
} tensor_role;

/* A role's name in one layout: the Hugging Face name without ".weight" / ".bias", relative to
 * the layer ("self_attn.q_proj"), the model ("lm_head", for model-level roles), or, for expert
 * roles, with %d for the expert ("mlp.experts.%d.gate_proj"). NULL: the layout has no such
 * tensor. optional: a checkpoint may lack it (a bias-free norm, a score-correction bias). */
typedef struct {
    const char *name;
    bool optional;
    bool unprefixed;      /* model level: not under the model's prefix ("lm_head", "embed_out") */
} RoleName;

/* The recipe of a family's tiny synthetic checkpoint (core/methods/synth_family.c): dims, and the
 * config.json members written after the keys every family shares, in file order. */
typedef struct {
    int hidden, heads, kv_heads, layers, vocab, inter;   /* the keys every family shares */
    bool tied;                               /* tie_word_embeddings */
    const char *config;                      /* the family's own members, e.g. "\"rope_theta\": 10000"
                                                (head_dim, experts, MLA dims, windows, ...) */
} SynthRecipe;

typedef struct {
    const char *model_type;       /* config.json's model_type */
    const char *arch;             /* architectures[0] (read when model_type is absent; NULL: none) */
    const char *name;             /* the family as `info` shows it ("deepseek" for deepseek_v2/v3, kimi_k2) */
    const char *help;             /* one line for `help load` and the README: what the family is */
    config_keys keys;
    /* layouts */
    attn_layout attn;
    block_layout block;           /* the default (GPT-NeoX: parallel unless use_parallel_residual false) */
    norm_names norms;
    ffn_layout ffn;
    moe_layout moe;               /* used when the config routes to experts */
    linear_layout lin;            /* the linear-attention layers' weights (LIN_NONE: none) */
    model_names names;
    /* default traits (config.json overrides where it has a key) */
    norm_kind norm;
    qk_norm_kind qk_norm;         /* the q/k norms the modeling code always builds */
    const char *qk_norm_key;      /* the config.json switch of per-head q/k norms (GLM-4 MoE: use_qk_norm; NULL: none) */
    const char *act;              /* activation when config.json names none */
    const char *act_key;          /* the key naming it before hidden_act (Gemma: hidden_activation) or
                                     instead of it (GPT-2: activation_function); NULL: hidden_act */
    double eps;                   /* norm epsilon when config.json gives none */
    double partial_rotary;        /* partial_rotary_factor when absent (GLM-4 MoE: 0.5; 0: 1, every dim rotates) */
    bool qkv_bias_always;         /* Qwen2: q/k/v biases whatever attention_bias says, no o bias */
    bool o_bias_never;            /* attention_bias gives q/k/v biases only, never o_proj's (GLM-4 MoE) */
    bool bias_default;            /* attention_bias when absent (GPT-NeoX: true) */
    bool tied;                    /* tie_word_embeddings when absent */
    bool windowed;                /* a numeric sliding_window applies (Mistral, Gemma, Phi-3) */
    bool window_opt_in;           /* ... only with use_sliding_window, from max_window_layers (Qwen) */
    int window_pattern;           /* every n-th layer global when sliding_window_pattern is absent */
    double pre_attn_scalar;       /* query_pre_attn_scalar when absent (Gemma: 256; 0: none) */
    double attn_softcap, final_softcap;   /* soft-caps when the keys are absent (Gemma 2: 50, 30) */
    double local_theta;           /* rope_local_base_freq when absent (Gemma 3: 10000) */
    bool local_rope_plain;        /* sliding layers skip rope_scaling (Gemma 3, OLMo 3) */
    int nope_interval;            /* no_rope_layer_interval when absent: without no_rope_layers, every n-th layer
                                     applies no RoPE (SmolLM3: 4); 0: the family has no NoPE layers and reads
                                     neither key */
    bool window_on_nope;          /* without layer_types, the sliding layers are the NoPE layers (SmolLM3) */
    bool nope_on_global;          /* with a sliding window, the layers without one apply no RoPE (EXAONE 4) */
    bool llama4_scaling;          /* rope_parameters' llama_4_scaling_beta scales q at position p by
                                     1 + beta ln(1 + floor(p / original_max_position_embeddings)) (Ministral 3) */
    bool rotary_dim_key;          /* config.json's rotary_dim gives the rotated dims of a head (MiniMax-M2: 64 of 128);
                                     a partial_rotary_factor beside it must name the same dims (refused otherwise) */
    const char *mtp_layers;       /* where multi-token-prediction layers live under the model's prefix, which
                                     attnlab and lint skip ("mtp_layers.": MiMo; NULL: none, or DeepSeek's
                                     past num_hidden_layers under layers.) */
    bool embed_scaled;            /* embeddings x sqrt(hidden) (Gemma) */
    bool sinks;                   /* a learned logit per head joins each softmax row unscaled, its weight
                                     dropped: self_attn.sinks (H) (gpt-oss) */
    double swiglu_limit;          /* experts' clamped SwiGLU (gpt-oss: 7; swiglu_limit overrides; 0: plain):
                                     (clamp(up, +-limit) + 1) * g sigmoid(alpha g), g = min(gate, limit) */
    double swiglu_alpha;          /* its alpha (gpt-oss: 1.702) */
    bool router_norm_topk;        /* top-k weights renormalised whatever norm_topk_prob says (Mixtral) */
    bool indexer_rope_interleave; /* the lightning indexer's RoPE pairs interleaved (2j, 2j + 1) unless config.json's
                                     indexer_rope_interleave says false (GLM-5; DeepSeek-V3.2's indexer: rotate_half) */
    router_kind router;           /* how the router chooses (whatever scoring_func says) */
    bool mup;                     /* Granite's multipliers: embedding_multiplier (embeddings), attention_multiplier (the
                                     softmax scale), residual_multiplier (each block's output), logits_scaling (logits
                                     divided); position_embedding_type other than "rope": no RoPE */
    bool rope_never;              /* the attention applies no RoPE whatever rope_theta says (Nemotron-H) */
    bool per_type_attn;           /* Gemma 4: full-attention layers have their own head_dim (global_head_dim), KV heads
                                     (num_global_key_value_heads, with attention_k_eq_v: V is k_proj's output, no
                                     v_proj) and RoPE (rope_parameters per layer type, "proportional" partial rotary);
                                     values RMS-normed per head without a weight, softmax scale 1; the last
                                     num_kv_shared_layers layers reuse the K / V of the last earlier layer of their type */
    bool attn_gate;               /* attn_output_gate when absent: q_proj rows per head [query | gate], the attention
                                     output times sigmoid(gate) before o_proj (Qwen3-Next) */
    bool rope_adjacent;           /* RoPE rotates adjacent pairs (2j, 2j + 1) of the HF weights (Llama 4's complex RoPE) */
    bool chunked;                 /* attention_chunk_size: each RoPE layer attends within its chunk of positions
                                     [p - p % chunk, p] (Llama 4's chunked_attention; NoPE layers stay full) */
    bool qk_l2;                   /* use_qk_norm (default true): a weightless RMS norm of each q / k head after RoPE,
                                     on the RoPE layers only (Llama4TextL2Norm) */
    bool temp_tuning;             /* attn_temperature_tuning: q on the NoPE layers times
                                     1 + attn_scale ln(1 + floor((p + 1) / floor_scale)) (Llama 4) */
    const char *dense_ffn_key;    /* the dense layers' width when experts take intermediate_size (Llama 4:
                                     intermediate_size_mlp; its shared expert is intermediate_size wide) */
    const char *gguf_arch;        /* llama.cpp's general.architecture of attnlab's GGUF export (NULL: none) */
    unsigned engines;             /* ENGINE_* that implement this model_type -- vLLM's registry, SGLang's
                                     model files, llama.cpp's convert_hf_to_gguf.py (0: lint does not
                                     know the family and checks no engine for it) */
    const char *llamacpp_arch;    /* the architecture convert_hf_to_gguf.py writes for it (lint) */
    /* the text tower of a multimodal checkpoint (text_config NULL: a text-only checkpoint) */
    const char *text_config;      /* text_config's model_type: the text model's keys sit under text_config */
    const char *text_defaults;    /* JSON members of the text config class's defaults, used where text_config lacks them */
    const char *tower_note;       /* what `info` adds about the text tower (Qwen3-VL's M-RoPE) */
    const char *vision[2];        /* two tensor names of its vision tower and projector (synth writes them) */
    const char *tower_keys;       /* the recipe's top-level members besides text_config (image tokens, vision_config) */
    bool final_softcap_off;       /* the multimodal head applies no final soft-cap (Gemma3ForConditionalGeneration) */
    SynthRecipe synth;            /* hidden 0: no synthetic checkpoint */
} FamilyRow;

extern const FamilyRow FAMILY[];          /* indexed by model_family; FAM_COUNT rows */

/* The row of f (a row of "?" for an out-of-range value). */
const FamilyRow *family_row(model_family f);
/* The family whose model_type is type (or, with type NULL, whose architectures[0] is arch);
 * false when none. */
bool family_find(const char *type, const char *arch, model_family *out);
/* Appends the model_types of every row to buf as "llama, mistral, ..." (rows with a config.json). */
void family_type_list(char *buf, size_t cap);

/* The name of role in a layout (NULL: none); the *_layout arguments pick the column. */
const RoleName *role_in_attn(attn_layout a, tensor_role r);
const RoleName *role_in_norms(norm_names n, tensor_role r);
const RoleName *role_in_ffn(ffn_layout f, tensor_role r);
const RoleName *role_in_moe(moe_layout m, tensor_role r);
const RoleName *role_in_linear(linear_layout l, tensor_role r);
const RoleName *role_in_model(model_names n, tensor_role r);
/* The prefix of a model_names layout ("model.", "transformer.", "gpt_neox.") and where it keeps
 * layer L under that prefix ("layers.%d.", "h.%d."; %d: the layer). */
const char *family_prefix(model_names n);
const char *family_layer_pattern(model_names n);
/* The other layout of a text tower's names (NAMES_LM_MODEL <-> NAMES_MODEL_LM; n itself otherwise):
 * transformers loads either (_checkpoint_conversion_mapping). */
model_names family_names_alt(model_names n);
/* The other layout of the same experts (MOE_LLAMA4 <-> MOE_LLAMA4_SPLIT: fused or one Linear per expert; m itself
 * otherwise): model.c and lint take the one the checkpoint's tensors have. */
moe_layout family_moe_alt(moe_layout m);
const char *tensor_role_name(tensor_role r);     /* "q", "ffn_down", ... for messages */

#endif
