/* shapes.h -- the shape of each tensor role in each layout, from the model description: what a
 * layout's loader expects, weight or bias, [d0] or [d0, d1], under which conditions, and the
 * config.json keys that give it (for messages). The one shape rule: model_open validates a
 * checkpoint's attention weights with it, lint walks every role with it. */
#ifndef AL_SHAPES_H
#define AL_SHAPES_H

#include "config.h"

/* The sizes a tensor's shape is made of (config.json's dims). */
typedef enum {
    D_NONE, D_H, D_F, D_2F, D_3H,     /* hidden, intermediate, 2 x intermediate, 3 x hidden */
    D_Q, D_KV, D_VV, D_QKV, D_3Q,     /* H hd, KV hd, KV vd, their sum, 3 H hd */
    D_HV, D_HD,                       /* H vd, hd */
    D_QR, D_QB, D_KR, D_KR_ROPE, D_KVB,  /* MLA: q_lora, H (nope + rope), kv_lora, kv_lora + rope, H (nope + v) */
    D_IQ, D_ID, D_IH,                    /* MLA's indexer: index_n_heads x index_head_dim, index_head_dim, index_n_heads */
    D_Q2,                             /* 2 H hd: a gated q_proj, per head [query | gate] (attn_output_gate) */
    D_LQKVZ, D_LBA, D_LCONV, D_LHV, D_LDV, D_LVV,  /* Gated DeltaNet: 2 Hk dk + 2 Hv dv, 2 Hv, 2 Hk dk + Hv dv,
                                                     Hv, dv, Hv dv */
    D_MIN,                            /* Mamba-2's in_proj: [z | x B C | dt] = 2 H P + 2 G N + H */
    D_OA, D_OG,                       /* DeepSeek-V4's grouped output: o_groups x o_lora_rank, H vd / o_groups */
    D_REB, D_KVV                      /* attnlab's qk-norm keep: the cache's width (kv_rebuild), G hd + G vd */
} dim_rule;

/* The size d stands for in the description c (D_NONE: 0). */
size_t shape_dim(const ModelConfig *c, dim_rule d);

/* When a tensor is expected: every bit given must hold (0: always). */
enum {
    SHAPE_IF_QKV_BIAS = 1, SHAPE_IF_O_BIAS = 2, SHAPE_IF_MLP_BIAS = 4, SHAPE_IF_QKN_HEAD = 8, SHAPE_IF_QKN_PROJ = 16,
    SHAPE_IF_Q_LORA = 32, SHAPE_IF_NO_Q_LORA = 64, SHAPE_IF_INDEXER = 128, SHAPE_IF_GATE = 256, SHAPE_IF_NO_GATE = 512,
    SHAPE_IF_CONV_BIAS = 1024,        /* Mamba-2's conv1d has a bias (use_conv_bias / mamba_conv_bias) */
    SHAPE_IF_KDA_LOW_GATE = 2048, SHAPE_IF_KDA_FULL_GATE = 4096,  /* KDA's gate g_a / g_b, or one g_proj (Kimi-K3) */
    SHAPE_IF_REBUILD = 8192, SHAPE_IF_NO_REBUILD = 16384          /* attnlab's qk-norm keep layout (cfg kv_rebuild) */
};

/* One tensor a layout's loader expects: its role, weight or bias, shape [d0] (d1 D_NONE) or
 * [d0, d1], when, and the config keys that give the shape. */
typedef struct {
    tensor_role role;
    bool bias;
    dim_rule d0, d1;
    unsigned when;
    const char *why;          /* NULL ends a list */
} RoleShape;

/* The attention tensors of a layer in layout a, and a dense MLP's in layout f, in the order
 * lint's findings name them; each list ends with why == NULL. */
const RoleShape *shape_attn(attn_layout a);
const RoleShape *shape_ffn(ffn_layout f);
/* The tensors of a linear-attention layer in layout l (conv1d's [conv_dim, 1, kernel] as its
 * [d0, d1] = [conv_dim, kernel] values; A_log, dt_bias and Mamba-2's D have no ".weight"). */
const RoleShape *shape_linear(linear_layout l);
/* True for a linear-attention layer's causal conv1d weights ([channels, 1, kernel]: Gated DeltaNet's one, KDA's three). */
bool shape_linear_conv(tensor_role r);
/* The SHAPE_IF_* conditions that hold for c (mlp_bias: the MLP linears have biases). */
unsigned shape_conditions(const ModelConfig *c, bool mlp_bias);

#endif
