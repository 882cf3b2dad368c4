/* kimik3.h -- Kimi-K3's config.json (model_type kimi_k3, KimiK3ForConditionalGeneration; its row's KEYS_KIMI_K3)
 * read and described. config.c checks it, then reads the text tower as Kimi-Linear's (the MLA layers' per-head
 * analyses run); analyses.c refuses the forward pass naming what is not built.
 *
 * Kimi-K3 keeps its language model under text_config (model_type kimi_linear, tensors under
 * language_model.model., a MoonViT vision tower beside it) and is Kimi-Linear's layer plan -- Kimi Delta
 * Attention on linear_attn_config's kda_layers, MLA (no RoPE: mla_use_nope) on its full_attn_layers, both
 * 1-based -- with what Kimi-Linear lacks: a full-rank output gate on every layer (self_attn.g_proj,
 * use_full_rank_gate / mla_use_output_gate), attention residuals (attn_res_block_size: each layer's
 * self_attention_res_{norm,proj} and mlp_res_{norm,proj}, the model's output_attn_res_{norm,proj}), the SiTU
 * activation (hidden_act "situ", activation_situ_beta, activation_situ_linear_beta), latent experts
 * (routed_expert_hidden_size: block_sparse_moe.routed_expert_{up_proj,norm,down_proj} around experts that work
 * in that width) in compressed-tensors MXFP4. None of it is built: `info` describes it, the forward pass is refused. */
#ifndef AL_KIMIK3_H
#define AL_KIMIK3_H

#include "family.h"   /* CFG_MAX_LAYERS (config.c includes this header: no cycle) */

struct cJSON;

typedef struct {
    int layers, heads, hidden, kda_heads, kda_head_dim;
    int n_kda, n_mla;                /* layers of each kind */
    unsigned char mla[CFG_MAX_LAYERS];   /* 1: layer L (0-based) is MLA */
    int res_block;                   /* attn_res_block_size (0: none) */
    char act[16];                    /* hidden_act */
    double situ_beta, situ_linear_beta;
    bool mla_gate, full_rank_gate;   /* mla_use_output_gate, linear_attn_config.use_full_rank_gate */
    int experts, top_k, shared, latent;   /* num_experts, num_experts_per_token, num_shared_experts,
                                             routed_expert_hidden_size (0: none) */
} KimiK3Spec;

/* Reads root's text_config into s; AL_ERR naming the field when text_config is missing or not kimi_linear's,
 * a count is not a whole number >= 0, or a layer listed in linear_attn_config is out of range or listed twice. */
int kimik3_parse(const struct cJSON *root, const char *where, KimiK3Spec *s);
/* One paragraph: the layer plan and what Kimi-Linear lacks. Returns buf. */
const char *kimik3_describe(const KimiK3Spec *s, char *buf, size_t cap);

#endif
