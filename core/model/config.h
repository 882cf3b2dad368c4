/* config.h -- the model description: config.json parsed once, at load, into ModelConfig (family,
 * dims, the RoPE spec, attention scale / soft-caps / sliding windows, QK normalisation, norm kind,
 * activation, MLP and MoE routing, biases, tied embeddings). Every consumer reads this
 * description; no other module parses config.json. A family's defaults and layouts are its row of
 * the family table (core/model/family.h), read here once; its keys are one of the few readers here. A
 * multimodal checkpoint's row (text_config set) is read from config.json's text_config: its language model. 
 *
 * What a model can be used for is not decided here: the description records what the config
 * says (a YaRN scaling, a sliding window, per-head Q/K norms) and core/model/analyses.c decides, per
 * analysis, whether attnlab covers it. */
#ifndef AL_CONFIG_H
#define AL_CONFIG_H

#include "family.h"
#include "tensor.h"

struct cJSON;

/* rope_scaling of config.json. */
typedef enum {
    RS_NONE,            /* absent, null or "default" */
    RS_LINEAR,          /* every frequency / factor */
    RS_LLAMA3,          /* low frequencies / factor, a blend between two wavelengths */
    RS_YARN,            /* frequency interpolation with a ramp, and an attention factor */
    RS_LONGROPE,        /* per-frequency short / long factors (recorded; not computed) */
    RS_OTHER            /* a type attnlab does not know ("dynamic", ...): `type` names it */
} rope_scaling_kind;

#define CFG_MAX_ROPE_PAIRS 256

typedef struct {
    rope_scaling_kind kind;
    char type[32];                /* as config.json spells it ("" when none) */
    double factor;                /* 1 when absent */
    double orig_max_pos;          /* original_max_position_embeddings (llama3 default 8192; yarn: max_pos or 4096) */
    double low_freq_factor, high_freq_factor;           /* llama3 (defaults 1, 4) */
    double beta_fast, beta_slow;                        /* yarn (defaults 32, 1) */
    double mscale, mscale_all_dim;                      /* yarn (0 when absent) */
    bool truncate;                                      /* yarn: ramp bounds floored / ceiled (default true;
                                                           gpt-oss: false) */
    double attention_factor;                            /* yarn / longrope; NAN when absent */
    int n_short, n_long;                                /* longrope factor arrays (pairs) */
    double short_factor[CFG_MAX_ROPE_PAIRS], long_factor[CFG_MAX_ROPE_PAIRS];
} RopeScaling;

typedef struct {
    rope_layout layout;           /* pairing applied to q/k (MLA: rotate_half after de-interleaving
                                     when interleaved; DeepSeek's rope_interleave: false -> ROPE_HALF) */
    int head_dim;                 /* per-head dims that carry RoPE (= qk_rope_dim) */
    int rotary_dim;               /* dims actually rotated (partial rotary: < head_dim) */
    double partial_factor;        /* partial_rotary_factor / rotary_pct (1: full) */
    double theta;                 /* rope_theta */
    double local_theta;           /* rope_local_base_freq of local (sliding) layers; 0: theta everywhere */
    RopeScaling scaling;          /* rope_scaling, else the rope_parameters of newer configs */
    double prop_factor;           /* Gemma 4's "proportional" RoPE on full-attention layers: rotate_half over the whole
                                     head, pairs (j, j + d/2) with j < int(factor d / 2) turn at theta^(-2j/d), the
                                     others not at all (0: none; not "the first factor x d dims") */
    double q_beta, q_floor;       /* Ministral 3's llama_4_scaling_beta: q at position p times
                                     1 + q_beta ln(1 + floor(p / q_floor)) (q_beta 0: none) */
} RopeSpec;

typedef enum { ACT_SILU, ACT_GELU, ACT_GELU_TANH, ACT_RELU, ACT_UNKNOWN, ACT_RELU2 } act_kind;   /* RELU2: relu(x)² */

typedef struct {
    int n_experts;                /* n_routed_experts / num_experts (0: dense) */
    int top_k;                    /* num_experts_per_tok */
    bool norm_topk_prob;
    int n_shared;                 /* n_shared_experts (or 1 with a shared_expert_intermediate_size) */
    int shared_ffn;               /* shared_expert_intermediate_size (0: expert_ffn x n_shared) */
    double routed_scaling;        /* routed_scaling_factor (1) */
    int first_dense;              /* first_k_dense_replace */
    int layer_freq;               /* moe_layer_freq (1) */
    int sparse_step;              /* decoder_sparse_step (1) */
    int n_mlp_only;               /* mlp_only_layers */
    int mlp_only[64];
    int expert_ffn;               /* moe_intermediate_size */
    bool listed;                  /* moe_layers given (Llama 4): layer L routes when on[L] */
    unsigned char on[CFG_MAX_LAYERS];
    moe_layout layout;            /* tensor names (MOE_NONE for dense models) */
    bool sigmoid;                 /* scoring_func "sigmoid" (DeepSeek-V3); else softmax */
    bool softmax;                 /* scoring_func "softmax" written out: a DeepSeek-V3 row then routes as vLLM and
                                     SGLang do (softmax scores), not sigmoid as transformers' DeepseekV3 always does */
    router_kind router;           /* the family's router (family.h) */
    int n_group, topk_group;      /* DeepSeek grouped routing (n_group 0 or 1: no groups) */
    char topk_method[24];         /* DeepSeek topk_method ("greedy", "group_limited_greedy", "noaux_tc") */
} MoeSpec;

/* The linear-attention layers of a hybrid (Qwen3-Next's Gated DeltaNet, a Mamba-2 hybrid's SSM layers): which
 * layers, their dims. A Mamba-2 layer reads as a linear attention whose keys are B, queries C and values x:
 * k_heads n_groups, dk ssm_state_size, v_heads the Mamba heads, dv their head dim. */
typedef struct {
    linear_layout layout;         /* LIN_NONE: every layer is softmax attention */
    int n_linear;                 /* layers without softmax attention (linear / Mamba-2 mixers, Nemotron-H's MLP blocks) */
    int n_mlp_blocks;             /* of them, Nemotron-H's MLP / MoE blocks (no mixer at all) */
    int k_heads, v_heads;         /* linear_num_key_heads, linear_num_value_heads (Mamba-2: n_groups, heads) */
    int dk, dv;                   /* linear_key_head_dim, linear_value_head_dim (Mamba-2: ssm_state_size, head_dim) */
    int conv;                     /* linear_conv_kernel_dim (Mamba-2: conv_kernel) */
    bool mamba;                   /* the layers are Mamba-2 mixers (LIN_MAMBA2_*) */
    bool conv_bias;               /* conv1d has a bias (Mamba-2's use_conv_bias / mamba_conv_bias) */
    bool full_rank_gate;          /* KDA's output gate one full-rank self_attn.g_proj (H d, D), not g_a / g_b
                                     (linear_attn_config.use_full_rank_gate: Kimi-K3) */
    bool mla_gate;                /* the MLA layers' output gate self_attn.g_proj (H v, D) (mla_use_output_gate: Kimi-K3) */
    int norm_groups;              /* Mamba-2's gated norm: groups normalised apart (Nemotron-H: n_groups; Granite: 1) */
    bool proj_bias;               /* Mamba-2's in_proj / out_proj have biases (use_bias / mamba_proj_bias) */
    int moe_latent;               /* Nemotron-H's moe_latent_size (0: none; the experts then work in a latent space) */
    bool state_f32;               /* mamba_ssm_cache_dtype "float32": the SSM state is cached in float32 */
    double dt_min;                /* Mamba-2's floor on dt (Nemotron-H's torch_forward: time_step_min; Granite: 0) */
    bool blocks;                  /* one mixer per layer (Nemotron-H): attention and Mamba layers have no MLP */
    unsigned char layer[CFG_MAX_LAYERS];   /* 1: layer L is linear attention / Mamba-2; 2: an MLP block (no mixer) */
    char block[CFG_MAX_LAYERS];   /* Nemotron-H: hybrid_override_pattern's letter of layer L (M * - E) */
} LinearSpec;

typedef struct {
    model_family family;
    char model_type[32];      /* as config.json spells it */
    int n_layers;
    int n_heads;              /* query heads */
    int n_kv_heads;           /* KV heads (MLA: = n_heads) */
    int hidden;               /* d_model */
    int vocab;
    int intermediate;
    int max_pos;
    int qk_nope_dim;          /* per-head Q/K dims without RoPE (GPT-2: all of them; Llama: 0) */
    int qk_rope_dim;          /* per-head Q/K dims with RoPE (Llama: head_dim; DeepSeek: qk_rope_head_dim) */
    int v_dim;                /* per-head value dim */
    int q_lora_rank;          /* 0: no query latent (plain q_proj) */
    int kv_lora_rank;         /* 0: not MLA */
    unsigned short compress[CFG_MAX_LAYERS];   /* DeepSeek-V4's compress_ratios[L]: 0 the window only, 4 CSA, else HCA */
    int o_lora_rank, o_groups;    /* DeepSeek-V4's grouped low-rank output (o_groups 0: none): head h's output goes through
                                     rows [g o_lora, +o_lora) of wo_a, g = h / (n_heads / o_groups), then wo_b */
    double rope_theta;
    rope_layout rope;
    double norm_eps;
    bool qkv_bias;            /* Qwen2, GPT-2, Llama with attention_bias */
    bool o_bias;              /* GPT-2 c_proj bias; Llama attention_bias */
    bool tie_embeddings;
    bool latent_norm;         /* MLA: RMSNorm on the q/kv latents (q_a_layernorm, kv_a_layernorm);
                                 false when config says qk_latent_layernorm: false (TransMLA exports) */
    int index_heads, index_head_dim, index_topk;   /* MLA's lightning indexer (DeepSeek-V3.2, GLM-5): index_n_heads,
                                 index_head_dim, index_topk (0: no indexer, dense attention) */
    rope_layout index_rope;   /* the indexer's RoPE on its first qk_rope_head_dim dims: ROPE_INTERLEAVED with
                                 indexer_rope_interleave (GLM-5's default), else ROPE_HALF (DeepSeek-V3.2's) */
    unsigned char index_shared[CFG_MAX_LAYERS];  /* 1: layer L reuses the last full layer's selection (GLM-5.2's
                                 indexer_types "shared"; IndexShare) */
    dt_type dtype;            /* storage dtype of the attention weights */
    char prefix[24];          /* tensor name prefix: "model." / "transformer." / "" */

    /* ---- the rest of the description (config.c) */
    RopeSpec rope_spec;       /* layout, rotary dims, theta(s), scaling */
    bool rope_interleave;     /* DeepSeek's rope_interleave (default true) */
    double query_pre_attn_scalar;  /* softmax scale = this^-1/2 when > 0 (else d_qk^-1/2) */
    bool scale_attn;          /* GPT-2 scale_attn_weights (true: scale d^-1/2; false: 1) */
    bool scale_by_layer;      /* GPT-2 scale_attn_by_inverse_layer_idx */
    double attn_softcap;      /* attn_logit_softcapping (0: none) */
    bool attn_sinks;          /* a learned logit per head (self_attn.sinks) joins each softmax row (gpt-oss) */
    double final_softcap;     /* final_logit_softcapping (0: none) */
    int sliding_window;       /* tokens of the window where layers have one (0: none) */
    int window_from;          /* Qwen2: max_window_layers (layers below have full attention) */
    int window_pattern;       /* sliding_window_pattern: every n-th layer is global (0: none) */
    int window_declared;      /* a numeric sliding_window not disabled by use_sliding_window (tokens; -1: none) */
    bool has_layer_types;     /* layer_types given: layer_sliding holds it */
    unsigned char layer_sliding[CFG_MAX_LAYERS];
    bool has_nope;            /* some layer applies no RoPE (no_rope_layers / no_rope_layer_interval) */
    unsigned char layer_nope[CFG_MAX_LAYERS];   /* 1: layer L has no RoPE (SmolLM3's every fourth) */
    qk_norm_kind qk_norm;     /* the family's (Qwen3, Gemma 3: per head; OLMo 2: projection), else from the
                                 checkpoint's q_norm / k_norm tensors (model.c) */
    norm_kind norm;
    char activation[32];      /* hidden_act / activation_function (default silu; GPT-2 gelu_new) */
    act_kind act;             /* what it names (ACT_UNKNOWN: a name attnlab does not compute) */
    mlp_kind mlp;
    MoeSpec moe;
    double swiglu_limit, swiglu_alpha;   /* the experts' clamped SwiGLU (gpt-oss; limit 0: plain act(gate) * up) */
    char torch_dtype[16];     /* torch_dtype / dtype ("" when absent) */

    /* ---- layout of the weights and the block (families beyond Llama) */
    attn_layout attn;         /* where the attention weights live */
    block_layout block;       /* norms and residuals of a layer */
    bool rope_first;          /* partial rotary (GPT-NeoX, Phi-3): Q/K columns [0, qk_rope) carry RoPE and
                                 [qk_rope, qk_rope + qk_nope) do not; else NoPE first (DeepSeek) */
    double embed_scale;       /* embeddings times this (Gemma: sqrt(hidden); else 1) */
    bool mlp_fused;           /* Phi-3: mlp.gate_up_proj rows [gate ; up] */
    bool mlp_bias;            /* GPT-NeoX: MLP linears with biases */
    norm_names norms;         /* what the layer norms are called */
    ffn_layout ffn;           /* what the dense MLP's linears are called */
    model_names names;        /* where the layers, embeddings, final norm and output layer are */
    LinearSpec lin;           /* Gated DeltaNet layers (layer_types "linear_attention" / full_attention_interval) */
    bool attn_gate;           /* attn_output_gate: q_proj per head [query | gate], output x sigmoid(gate) */
    /* Llama 4 (its row's chunked / qk_l2 / temp_tuning): see cfg_layer_chunk, cfg_layer_qk_l2, cfg_q_temperature */
    int attn_chunk;           /* attention_chunk_size of the RoPE layers (0: none) */
    unsigned short layer_kv_rank[CFG_MAX_LAYERS];   /* attnlab_mla with per-layer kv ranks (attnlab_kv_ranks: CARE's
                                 allocation): layer L's latent, its first columns of the kv_lora_rank written (the
                                 rest zeros); 0: kv_lora_rank */
    bool layer_rope_freqs;    /* attnlab_mla whose layers carry their own RoPE frequencies (attnlab_layer_rope:
                                 MHA2MLA's selected pairs) in self_attn.rope_inv_freq (F64, qk_rope_head_dim / 2) */
    int kv_rebuild;           /* attnlab's layout of a qk-norm keep conversion (attnlab_export.h): the values cached per
                                 token (attnlab_kv_cache_dim), keys and values rebuilt from them (kv_a_proj_with_mqa,
                                 kv_b_proj) before the source's norm and RoPE; 0: none */
    bool qk_l2;               /* use_qk_norm: weightless RMS norm of each q / k head after RoPE on the RoPE layers */
    double temp_scale, temp_floor;   /* attn_temperature_tuning's attn_scale, floor_scale (temp_scale 0: none) */
    double attn_mult;         /* Granite's attention_multiplier: the softmax scale itself (0: none) */
    double residual_mult;     /* Granite's residual_multiplier on each block's output (1: none) */
    double logits_div;        /* Granite's logits_scaling: logits divided by it (1: none) */

    /* ---- per-layer-type attention (the row's per_type_attn: Gemma 4) */
    bool v_norm;              /* values RMS-normed per head without a weight (v_norm) */
    bool k_eq_v;              /* attention_k_eq_v: full-attention layers take V from k_proj's output (no v_proj) */
    int global_head_dim;      /* global_head_dim of the full-attention layers (0: head_dim) */
    int global_kv_heads;      /* num_global_key_value_heads of k_eq_v full layers (0: num_key_value_heads) */
    int kv_shared_from;       /* first layer that reuses an earlier layer's K / V (num_kv_shared_layers; 0: none) */
    bool double_wide_mlp;     /* use_double_wide_mlp: the KV-shared layers' MLP is twice intermediate_size */
    int ple_dim;              /* hidden_size_per_layer_input: per-layer embeddings (0: none) */
    int ple_vocab;            /* vocab_size_per_layer_input: rows of embed_tokens_per_layer */
    int moe_block_experts;    /* enable_moe_block: num_experts of the MoE beside each dense MLP (0: none) */
    int moe_block_topk;       /* top_k_experts */
    int moe_block_ffn;        /* moe_intermediate_size (expert_intermediate_size) of each expert */
} ModelConfig;

/* Parses config.json text into cfg (the one parser). `where` names the file in messages. An
 * unknown family is an error naming the fields it lacked. Strict where a default would hide a
 * damaged file: bytes after the JSON, a number given as a string (or true, or 1e999), rope_theta
 * <= 0 and negative epsilons are errors naming the field; a repeated key keeps the last value, as
 * Hugging Face does, with a warning (al_warn). Names kept or echoed (model_type, activation,
 * torch_dtype, the RoPE scaling type) have control characters escaped (\xNN). */
int model_config_parse(const char *json_text, const char *where, ModelConfig *cfg);
/* The same, handing the parsed tree to *tree (caller frees; set even when the description fails,
 * NULL when the text is not JSON). What model_open keeps in Model.config_tree. */
int model_config_parse_keep(const char *json_text, const char *where, ModelConfig *cfg, struct cJSON **tree);
/* Sets the layouts (attention, block, norms, MLP, names, prefix) of c->family's row; the readers
 * then adjust what config.json says otherwise. */
void cfg_layouts_from_row(ModelConfig *c);
/* Fills the description beyond the dims (RoPE spec, attention, blocks) from root, or with the
 * defaults of the family's dims when root is NULL (llama2.c). */
void model_config_describe(const struct cJSON *root, ModelConfig *cfg);
/* For a DeepSeek-layout export of a converted GQA model: YaRN's attention factor (on every dim
 * of a GQA head) is folded into the converted weights, so the exported rope_scaling (object
 * `rope_scaling` of an exported config, changed in place; NULL or other types: nothing) says
 * attention_factor 1 and no mscale / mscale_all_dim. */
void model_config_yarn_folded(struct cJSON *rope_scaling);
/* Integer ids of key in a parsed config (a number or an array of numbers, e.g. eos_token_id)
 * appended to list[n..cap); returns the new count. model_config_ids (model.h) reads a model's. */
size_t config_tree_ids(const struct cJSON *root, const char *key, int *list, size_t n, size_t cap);

static inline int cfg_d_qk(const ModelConfig *c) { return c->qk_nope_dim + c->qk_rope_dim; }
static inline int cfg_d_in_q(const ModelConfig *c) { return c->q_lora_rank ? c->q_lora_rank : c->hidden; }
static inline int cfg_d_in_kv(const ModelConfig *c) { return c->kv_lora_rank ? c->kv_lora_rank : c->hidden; }
static inline bool cfg_is_mla(const ModelConfig *c) { return c->kv_lora_rank > 0; }
/* True when an MLA model's lightning indexer picks index_topk keys per query (DeepSeek-V3.2, GLM-5). */
static inline bool cfg_has_indexer(const ModelConfig *c) { return cfg_is_mla(c) && c->index_topk > 0 && c->index_heads > 0; }
/* First Q/K column that carries RoPE, and the first that does not (see rope_first). */
static inline int cfg_rope_col(const ModelConfig *c) { return c->rope_first ? 0 : c->qk_nope_dim; }
static inline int cfg_nope_col(const ModelConfig *c) { return c->rope_first ? c->qk_rope_dim : 0; }
/* The KV head serving query head h. */
static inline int cfg_kv_group(const ModelConfig *c, int h) {
    return c->n_kv_heads > 0 ? h / (c->n_heads / c->n_kv_heads) : h;
}

/* The family as `info` shows it ("deepseek" for deepseek_v2 / v3 and kimi_k2). */
const char *model_family_name(model_family f);
static inline const FamilyRow *cfg_row(const ModelConfig *c) { return family_row(c->family); }

/* ---------------------------------------------------------------- tensors by role
 * The Hugging Face name of a role's tensor in this model's layouts (family.h). */
const RoleName *cfg_role(const ModelConfig *c, tensor_role r);
/* Writes the full name of role r into buf: in layer `layer` (ignored for model-level roles), of
 * expert `expert` (expert roles only), followed by "." and what ("weight", "bias"; NULL: no
 * suffix). Returns false (buf "") when this model's layouts have no such role. */
bool cfg_role_name(const ModelConfig *c, tensor_role r, int layer, int expert, const char *what, char *buf, size_t cap);
/* The name under which layer L's tensors start ("model.layers.3."). */
void cfg_layer_prefix(const ModelConfig *c, int layer, char *buf, size_t cap);
const char *rope_layout_name(rope_layout r);
const char *rope_scaling_name(const RopeScaling *s);     /* "none", "linear", ... or the config's type */
const char *qk_norm_name(qk_norm_kind k);
const char *norm_kind_name(norm_kind k);
const char *mlp_kind_name(mlp_kind k);

/* Softmax scale of layer's attention: d_qk^-1/2 (or query_pre_attn_scalar^-1/2), GPT-2's
 * scale_attn_weights / scale_attn_by_inverse_layer_idx, times YaRN's mscale^2 for MLA when
 * rope_scaling sets mscale_all_dim (DeepSeek). */
double cfg_attn_scale(const ModelConfig *c, int layer);
/* Sliding window of layer's attention in tokens (0: full causal): Mistral's on every layer,
 * Qwen2's from max_window_layers on when use_sliding_window, layer_types / sliding_window_pattern. */
size_t cfg_layer_window(const ModelConfig *c, int layer);
/* RoPE base of layer (rope_local_base_freq on sliding layers where set). */
double cfg_layer_theta(const ModelConfig *c, int layer);
/* True when layer's RoPE uses the config's rope_scaling (Gemma 3: global layers only; local
 * layers use plain RoPE with rope_local_base_freq). */
bool cfg_layer_rope_scaled(const ModelConfig *c, int layer);
/* True when layer applies RoPE to q and k: every layer of a RoPE model but the NoPE layers of
 * no_rope_layers (1: RoPE, 0: none) or, without that list, every no_rope_layer_interval-th layer
 * (SmolLM3); false for models without RoPE. */
bool cfg_layer_rope(const ModelConfig *c, int layer);
/* The layers of a RoPE model that apply none, as "3, 7, 11" into buf ("" when none); their count. */
int cfg_nope_layers(const ModelConfig *c, char *buf, size_t cap);
/* True when layer L of an indexer model runs its own lightning indexer ("full"); false on the layers that
 * reuse the last full layer's selection (GLM-5.2's indexer_types "shared") and on models without one. */
bool cfg_layer_indexer(const ModelConfig *c, int layer);
/* True when layer L is a linear-attention (Gated DeltaNet) layer: no softmax attention, no KV heads. */
static inline bool cfg_layer_linear(const ModelConfig *c, int layer) {
    return c->lin.layout != LIN_NONE && layer >= 0 && layer < CFG_MAX_LAYERS && c->lin.layer[layer];
}
/* What a hybrid's layers without softmax attention are ("Gated DeltaNet", "Kimi Delta Attention", "Mamba-2"). */
static inline const char *cfg_linear_name(const ModelConfig *c) {
    return c->lin.mamba ? "Mamba-2" : c->lin.layout == LIN_KDA ? "Kimi Delta Attention" : "Gated DeltaNet";
}
/* The layers with softmax attention and a KV cache (all but a hybrid's linear-attention layers). */
static inline int cfg_n_attn_layers(const ModelConfig *c) { return c->n_layers - c->lin.n_linear; }
/* True when layer L is a Mamba-2 (SSM) layer of a Mamba-2 hybrid (Nemotron-H, Granite 4.0-H). */
static inline bool cfg_layer_mamba(const ModelConfig *c, int layer) {
    return c->lin.mamba && layer >= 0 && layer < CFG_MAX_LAYERS && c->lin.layer[layer] == 1;
}
/* True when layer L has an MLP (or experts): every layer but a one-mixer-per-block model's mixer layers. */
static inline bool cfg_layer_mlp(const ModelConfig *c, int layer) {
    return !c->lin.blocks || (layer >= 0 && layer < CFG_MAX_LAYERS && c->lin.layer[layer] == 2);
}
/* The layers with a KV cache of their own: the softmax-attention layers but Gemma 4's KV-shared ones (which read an
 * earlier layer's cache). */
static inline int cfg_n_kv_layers(const ModelConfig *c) {
    return cfg_n_attn_layers(c) - (c->kv_shared_from > 0 ? c->n_layers - c->kv_shared_from : 0);
}
/* The softmax-attention layers of a hybrid as "3, 7, 11" into buf; their count. */
int cfg_attn_layers(const ModelConfig *c, char *buf, size_t cap);
/* Refuses layer with a message naming the analysis `what` when it is a linear-attention layer. */
int cfg_check_attn_layer(const ModelConfig *c, int layer, const char *what);
/* Llama 4's chunked attention: the chunk of layer L in tokens (attention_chunk_size on the RoPE layers;
 * 0: none): the query at position p sees keys [p - p % chunk, p]. */
size_t cfg_layer_chunk(const ModelConfig *c, int layer);
/* True when layer L L2-normalises (weightless RMS, eps rms_norm_eps) each q and k head after RoPE (Llama 4's
 * use_qk_norm on its RoPE layers). */
bool cfg_layer_qk_l2(const ModelConfig *c, int layer);
/* The factor on q at position pos of layer L: 1 + attn_scale ln(1 + floor((pos + 1) / floor_scale)) on Llama 4's
 * NoPE layers with attn_temperature_tuning, else 1. */
double cfg_q_temperature(const ModelConfig *c, int layer, size_t pos);
/* Takes the other layout of the same experts (family_moe_alt: Llama 4's fused or one Linear per expert) when the
 * first MoE layer's experts are named by it and not by c's; has(ud, name): the checkpoint holds that tensor. */
void cfg_moe_pick(ModelConfig *c, bool (*has)(void *ud, const char *name), void *ud);
/* The layer whose K / V layer L attends to: L itself, or for the last num_kv_shared_layers layers (Gemma 4) the
 * last earlier layer of its type (sliding / full) before them, whose cache it reads. */
int cfg_kv_source(const ModelConfig *c, int layer);
/* True when layer L computes V from k_proj's output (attention_k_eq_v on a full-attention layer): no v_proj. */
bool cfg_layer_v_is_k(const ModelConfig *c, int layer);
/* True when the per-type attention's full-attention layers differ from the sliding ones in head_dim or KV heads
 * (global_head_dim, num_global_key_value_heads): attnlab's per-head views assume one of each (refused at load). */
bool cfg_per_type_dims(const ModelConfig *c);
/* True when layer L is a full-attention layer of a per_type_attn model (Gemma 4): its head dims are cfg_full_view's. */
bool cfg_layer_full_type(const ModelConfig *c, int layer);
/* The description of a per_type_attn model's full-attention layers into out: c with head_dim global_head_dim (Q/K and
 * V, all rotating) and num_global_key_value_heads KV heads; a plain copy of c for other models. */
void cfg_full_view(const ModelConfig *c, ModelConfig *out);

/* True when layer L's MLP is a mixture of experts by the config's routing fields. */
bool cfg_moe_layer(const ModelConfig *c, int layer);

#endif
