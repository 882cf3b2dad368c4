/* shapes.c -- the shape rule of each layout's tensor roles (see shapes.h). */
#include "shapes.h"

size_t shape_dim(const ModelConfig *c, dim_rule d) {
    size_t h = (size_t)c->hidden, f = (size_t)c->intermediate, H = (size_t)c->n_heads, G = (size_t)c->n_kv_heads;
    size_t hd = (size_t)cfg_d_qk(c), vd = (size_t)c->v_dim, kr = (size_t)c->kv_lora_rank;
    switch (d) {
    case D_H: return h;
    case D_F: return f;
    case D_2F: return 2 * f;
    case D_3H: return 3 * h;
    case D_Q: return H * hd;
    case D_KV: return G * hd;
    case D_VV: return G * vd;
    case D_QKV: return H * hd + G * hd + G * vd;
    case D_3Q: return 3 * H * hd;
    case D_HV: return H * vd;
    case D_HD: return hd;
    case D_QR: return (size_t)c->q_lora_rank;
    case D_QB: return H * hd;
    case D_KR: return kr;
    case D_KR_ROPE: return kr + (size_t)c->qk_rope_dim;
    case D_KVB: return H * (size_t)(c->qk_nope_dim + c->v_dim);
    case D_IQ: return (size_t)c->index_heads * (size_t)c->index_head_dim;
    case D_ID: return (size_t)c->index_head_dim;
    case D_IH: return (size_t)c->index_heads;
    case D_Q2: return 2 * H * hd;
    case D_LQKVZ: return 2 * (size_t)c->lin.k_heads * (size_t)c->lin.dk + 2 * (size_t)c->lin.v_heads * (size_t)c->lin.dv;
    case D_LBA: return 2 * (size_t)c->lin.v_heads;
    case D_LCONV: return 2 * (size_t)c->lin.k_heads * (size_t)c->lin.dk + (size_t)c->lin.v_heads * (size_t)c->lin.dv;
    case D_LHV: return (size_t)c->lin.v_heads;
    case D_LDV: return (size_t)c->lin.dv;
    case D_LVV: return (size_t)c->lin.v_heads * (size_t)c->lin.dv;
    case D_MIN: return 2 * (size_t)c->lin.v_heads * (size_t)c->lin.dv + 2 * (size_t)c->lin.k_heads * (size_t)c->lin.dk +
                       (size_t)c->lin.v_heads;
    case D_OA: return (size_t)c->o_groups * (size_t)c->o_lora_rank;
    case D_OG: return c->o_groups > 0 ? H * vd / (size_t)c->o_groups : 0;
    case D_REB: return (size_t)c->kv_rebuild;
    case D_KVV: return G * (hd + vd);
    default: return 0;
    }
}


#define HD_H "num_attention_heads x head_dim"
#define KV_H "num_key_value_heads x head_dim"
#define MLA_QB "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim)"
#define KV_ROPE "kv_lora_rank + qk_rope_head_dim"

/* A layer's attention per attn_layout, in the order the findings name them: Llama's q/k/v/o_proj
 * (biases per attention_bias / Qwen2; the family's q_norm / k_norm), Phi-3's fused qkv_proj
 * [Q ; K ; V], GPT-NeoX's query_key_value head by head, GPT-2's Conv1D (in, out), DeepSeek's MLA (and its
 * lightning indexer where index_topk is set: DeepSeek-V3.2, GLM-5). */
/* Each list ends with an explicit {0}: a list that outgrows its row is an "excess elements" warning
 * at build time, never a read past the row. */
#define SHAPES_PER_LAYOUT 20
static const RoleShape ATTN_SHAPES[ATTN_LAYOUT_COUNT][SHAPES_PER_LAYOUT] = {
    [QKV_SPLIT] = {{ROLE_Q, false, D_Q, D_H, SHAPE_IF_NO_GATE, HD_H ", hidden_size"},
                   {ROLE_Q, false, D_Q2, D_H, SHAPE_IF_GATE,
                    "2 x " HD_H " (attn_output_gate: [query | gate] per head), hidden_size"},
                   {ROLE_K, false, D_KV, D_H, SHAPE_IF_NO_REBUILD, KV_H ", hidden_size"},
                   {ROLE_V, false, D_VV, D_H, SHAPE_IF_NO_REBUILD, KV_H ", hidden_size"}, {ROLE_O, false, D_H, D_HV, 0, "hidden_size, " HD_H},
                   {ROLE_Q, true, D_Q, D_NONE, SHAPE_IF_QKV_BIAS, HD_H},
                   {ROLE_K, true, D_KV, D_NONE, SHAPE_IF_QKV_BIAS | SHAPE_IF_NO_REBUILD, KV_H},
                   {ROLE_V, true, D_VV, D_NONE, SHAPE_IF_QKV_BIAS | SHAPE_IF_NO_REBUILD, KV_H}, {ROLE_O, true, D_H, D_NONE, SHAPE_IF_O_BIAS, "hidden_size"},
                   {ROLE_KV_A, false, D_REB, D_H, SHAPE_IF_REBUILD, "attnlab_kv_cache_dim, hidden_size"},
                   {ROLE_KV_B, false, D_KVV, D_REB, SHAPE_IF_REBUILD, KV_H " + num_key_value_heads x v_head_dim, "
                    "attnlab_kv_cache_dim"},
                   {ROLE_Q_NORM, false, D_HD, D_NONE, SHAPE_IF_QKN_HEAD, "head_dim (per-head q_norm)"},
                   {ROLE_K_NORM, false, D_HD, D_NONE, SHAPE_IF_QKN_HEAD, "head_dim (per-head k_norm)"},
                   {ROLE_Q_NORM, false, D_Q, D_NONE, SHAPE_IF_QKN_PROJ, HD_H " (q_norm over the projection)"},
                   {ROLE_K_NORM, false, D_KV, D_NONE, SHAPE_IF_QKN_PROJ, KV_H " (k_norm over the projection)"}, {0}},
    [QKV_MIXER] = {{ROLE_Q, false, D_Q, D_H, 0, HD_H ", hidden_size"}, {ROLE_K, false, D_KV, D_H, 0, KV_H ", hidden_size"},
                   {ROLE_V, false, D_VV, D_H, 0, KV_H ", hidden_size"}, {ROLE_O, false, D_H, D_HV, 0, "hidden_size, " HD_H},
                   {0}},
    [QKV_DSV4] = {{ROLE_Q_A, false, D_QR, D_H, 0, "q_lora_rank, hidden_size"},
                  {ROLE_Q_A_NORM, false, D_QR, D_NONE, 0, "q_lora_rank"},
                  {ROLE_Q_B, false, D_QB, D_QR, 0, HD_H ", q_lora_rank"},
                  {ROLE_KV_A, false, D_KV, D_H, 0, "head_dim (one KV head: key and value), hidden_size"},
                  {ROLE_KV_A_NORM, false, D_HD, D_NONE, 0, "head_dim"},
                  {ROLE_O_A, false, D_OA, D_OG, 0, "o_groups x o_lora_rank, " HD_H " / o_groups"},
                  {ROLE_O, false, D_H, D_OA, 0, "hidden_size, o_groups x o_lora_rank"}, {0}},
    [QKV_CAT] = {{ROLE_QKV, false, D_QKV, D_H, 0, "(num_attention_heads + 2 num_key_value_heads) x head_dim, hidden_size"},
                 {ROLE_O, false, D_H, D_HV, 0, "hidden_size, " HD_H}, {0}},
    [QKV_HEADS] = {{ROLE_QKV, false, D_3Q, D_H, 0, "3 x hidden_size, hidden_size"},
                   {ROLE_QKV, true, D_3Q, D_NONE, SHAPE_IF_QKV_BIAS, "3 x hidden_size (attention_bias)"},
                   {ROLE_O, false, D_H, D_HV, 0, "hidden_size, hidden_size"},
                   {ROLE_O, true, D_H, D_NONE, SHAPE_IF_O_BIAS, "hidden_size (attention_bias)"}, {0}},
    [QKV_CONV1D] = {{ROLE_QKV, false, D_H, D_3H, 0, "n_embd, 3 x n_embd (Conv1D: in, out)"},
                    {ROLE_QKV, true, D_3H, D_NONE, 0, "3 x n_embd"}, {ROLE_O, false, D_H, D_H, 0, "n_embd, n_embd"},
                    {ROLE_O, true, D_H, D_NONE, 0, "n_embd"}, {0}},
    [QKV_MLA] = {{ROLE_Q_A, false, D_QR, D_H, SHAPE_IF_Q_LORA, "q_lora_rank, hidden_size"},
                 {ROLE_Q_A, true, D_QR, D_NONE, SHAPE_IF_Q_LORA | SHAPE_IF_QKV_BIAS, "q_lora_rank (attention_bias)"},
                 {ROLE_Q_A_NORM, false, D_QR, D_NONE, SHAPE_IF_Q_LORA, "q_lora_rank"},
                 {ROLE_Q_B, false, D_QB, D_QR, SHAPE_IF_Q_LORA, MLA_QB ", q_lora_rank"},
                 {ROLE_Q, false, D_QB, D_H, SHAPE_IF_NO_Q_LORA, MLA_QB ", hidden_size"},
                 {ROLE_KV_A, false, D_KR_ROPE, D_H, 0, KV_ROPE ", hidden_size"},
                 {ROLE_KV_A, true, D_KR_ROPE, D_NONE, SHAPE_IF_QKV_BIAS, KV_ROPE " (attention_bias)"},
                 {ROLE_KV_A_NORM, false, D_KR, D_NONE, 0, "kv_lora_rank"},
                 {ROLE_KV_B, false, D_KVB, D_KR, 0, "num_attention_heads x (qk_nope_head_dim + v_head_dim), kv_lora_rank"},
                 {ROLE_O, false, D_H, D_HV, 0, "hidden_size, num_attention_heads x v_head_dim"},
                 {ROLE_O, true, D_H, D_NONE, SHAPE_IF_QKV_BIAS, "hidden_size (attention_bias)"},
                 {ROLE_IDX_Q_B, false, D_IQ, D_QR, SHAPE_IF_INDEXER, "index_n_heads x index_head_dim, q_lora_rank"},
                 {ROLE_IDX_K, false, D_ID, D_H, SHAPE_IF_INDEXER, "index_head_dim, hidden_size"},
                 {ROLE_IDX_K_NORM, false, D_ID, D_NONE, SHAPE_IF_INDEXER, "index_head_dim (LayerNorm weight)"},
                 {ROLE_IDX_K_NORM, true, D_ID, D_NONE, SHAPE_IF_INDEXER, "index_head_dim (LayerNorm bias)"},
                 {ROLE_IDX_W, false, D_IH, D_H, SHAPE_IF_INDEXER, "index_n_heads, hidden_size"}, {0}},
};

/* A dense MLP per ffn_layout: gate/up/down_proj (biases per Llama's mlp_bias), Phi-3's fused
 * gate_up_proj [gate ; up], GPT-2's Conv1D c_fc / c_proj, GPT-NeoX's dense_h_to_4h / dense_4h_to_h. */
static const RoleShape FFN_SHAPES[FFN_LAYOUT_COUNT][SHAPES_PER_LAYOUT] = {
    [FFN_GATED] = {{ROLE_FFN_GATE, false, D_F, D_H, 0, "intermediate_size, hidden_size"},
                   {ROLE_FFN_GATE, true, D_F, D_NONE, SHAPE_IF_MLP_BIAS, "intermediate_size, hidden_size"},
                   {ROLE_FFN_UP, false, D_F, D_H, 0, "intermediate_size, hidden_size"},
                   {ROLE_FFN_UP, true, D_F, D_NONE, SHAPE_IF_MLP_BIAS, "intermediate_size, hidden_size"},
                   {ROLE_FFN_DOWN, false, D_H, D_F, 0, "intermediate_size, hidden_size"},
                   {ROLE_FFN_DOWN, true, D_H, D_NONE, SHAPE_IF_MLP_BIAS, "hidden_size"}, {0}},
    [FFN_FUSED] = {{ROLE_FFN_GATE_UP, false, D_2F, D_H, 0, "2 x intermediate_size, hidden_size"},
                   {ROLE_FFN_DOWN, false, D_H, D_F, 0, "hidden_size, intermediate_size"}, {0}},
    [FFN_MIXER] = {{ROLE_FFN_UP, false, D_F, D_H, 0, "intermediate_size, hidden_size"},
                   {ROLE_FFN_DOWN, false, D_H, D_F, 0, "hidden_size, intermediate_size"}, {0}},
    [FFN_GRANITE] = {{ROLE_FFN_GATE_UP, false, D_2F, D_H, 0, "2 x shared_intermediate_size, hidden_size"},
                     {ROLE_FFN_DOWN, false, D_H, D_F, 0, "hidden_size, shared_intermediate_size"}, {0}},
    [FFN_CONV1D] = {{ROLE_FFN_UP, false, D_H, D_F, 0, "n_embd, n_inner (Conv1D: in, out)"},
                    {ROLE_FFN_UP, true, D_F, D_NONE, 0, "n_inner"},
                    {ROLE_FFN_DOWN, false, D_F, D_H, 0, "n_inner, n_embd (Conv1D: in, out)"},
                    {ROLE_FFN_DOWN, true, D_H, D_NONE, 0, "n_embd"}, {0}},
    [FFN_NEOX] = {{ROLE_FFN_UP, false, D_F, D_H, 0, "intermediate_size, hidden_size"},
                  {ROLE_FFN_DOWN, false, D_H, D_F, 0, "hidden_size, intermediate_size"},
                  {ROLE_FFN_UP, true, D_F, D_NONE, SHAPE_IF_MLP_BIAS, "intermediate_size"},
                  {ROLE_FFN_DOWN, true, D_H, D_NONE, SHAPE_IF_MLP_BIAS, "hidden_size"}, {0}},
    [FFN_LLAMA4] = {{ROLE_FFN_GATE, false, D_F, D_H, 0, "intermediate_size_mlp, hidden_size"},
                    {ROLE_FFN_UP, false, D_F, D_H, 0, "intermediate_size_mlp, hidden_size"},
                    {ROLE_FFN_DOWN, false, D_H, D_F, 0, "hidden_size, intermediate_size_mlp"}, {0}},
};

#undef HD_H
#undef KV_H
#undef MLA_QB
#undef KV_ROPE

/* A Gated DeltaNet layer (Qwen3-Next: in_proj_qkvz, in_proj_ba, conv1d, A_log, dt_bias, norm, out_proj). */
#define LIN_KEYS "linear_num_{key,value}_heads, linear_{key,value}_head_dim"
#define KDA_HD "linear_attn_config num_heads x head_dim"
/* A Mamba-2 layer (Nemotron-H's mixer., Granite's mamba.): in_proj [z | x B C | dt], the depthwise conv1d over x B C
 * (and its bias), A_log, D, dt_bias per head, the gated norm over the heads' values, out_proj. */
#define M_XBC "mamba heads x head dim + 2 n_groups x ssm_state_size"
#define MAMBA2_SHAPES {{ROLE_LIN_IN, false, D_MIN, D_H, 0, "2 x mamba heads x head dim + 2 n_groups x ssm_state_size " \
                                                          "+ mamba heads, hidden_size"}, \
                       {ROLE_LIN_CONV, false, D_LCONV, D_NONE, 0, M_XBC ", 1, conv kernel"}, \
                       {ROLE_LIN_CONV, true, D_LCONV, D_NONE, SHAPE_IF_CONV_BIAS, M_XBC " (conv bias)"}, \
                       {ROLE_LIN_A_LOG, false, D_LHV, D_NONE, 0, "mamba heads"}, \
                       {ROLE_LIN_D, false, D_LHV, D_NONE, 0, "mamba heads"}, \
                       {ROLE_LIN_DT_BIAS, false, D_LHV, D_NONE, 0, "mamba heads"}, \
                       {ROLE_LIN_NORM, false, D_LVV, D_NONE, 0, "mamba heads x head dim"}, \
                       {ROLE_LIN_OUT, false, D_H, D_LVV, 0, "hidden_size, mamba heads x head dim"}, {0}}
static const RoleShape LINEAR_SHAPES[LIN_LAYOUT_COUNT][SHAPES_PER_LAYOUT] = {
    [LIN_QWEN3_NEXT] = {{ROLE_LIN_QKVZ, false, D_LQKVZ, D_H, 0,
                         "2 (key heads x key dim + value heads x value dim), hidden_size"},
                        {ROLE_LIN_BA, false, D_LBA, D_H, 0, "2 x linear_num_value_heads, hidden_size"},
                        {ROLE_LIN_CONV, false, D_LCONV, D_NONE, 0, "2 key heads x key dim + value heads x value dim, 1, "
                                                                   "linear_conv_kernel_dim"},
                        {ROLE_LIN_A_LOG, false, D_LHV, D_NONE, 0, "linear_num_value_heads"},
                        {ROLE_LIN_DT_BIAS, false, D_LHV, D_NONE, 0, "linear_num_value_heads"},
                        {ROLE_LIN_NORM, false, D_LDV, D_NONE, 0, "linear_value_head_dim"},
                        {ROLE_LIN_OUT, false, D_H, D_LVV, 0, "hidden_size, " LIN_KEYS}, {0}},
    [LIN_KDA] = {{ROLE_LIN_Q, false, D_LVV, D_H, 0, KDA_HD ", hidden_size"},
                 {ROLE_LIN_K, false, D_LVV, D_H, 0, KDA_HD ", hidden_size"},
                 {ROLE_LIN_V, false, D_LVV, D_H, 0, KDA_HD ", hidden_size"},
                 {ROLE_LIN_Q_CONV, false, D_LVV, D_NONE, 0, KDA_HD ", 1, short_conv_kernel_size"},
                 {ROLE_LIN_K_CONV, false, D_LVV, D_NONE, 0, KDA_HD ", 1, short_conv_kernel_size"},
                 {ROLE_LIN_V_CONV, false, D_LVV, D_NONE, 0, KDA_HD ", 1, short_conv_kernel_size"},
                 {ROLE_LIN_A_LOG, false, D_LHV, D_NONE, 0, "num_heads (1, 1, H, 1)"},
                 {ROLE_LIN_F_A, false, D_LDV, D_H, 0, "head_dim, hidden_size"},
                 {ROLE_LIN_F_B, false, D_LVV, D_LDV, 0, KDA_HD ", head_dim"},
                 {ROLE_LIN_DT_BIAS, false, D_LVV, D_NONE, 0, KDA_HD},
                 {ROLE_LIN_B, false, D_LHV, D_H, 0, "num_heads, hidden_size"},
                 {ROLE_LIN_G_A, false, D_LDV, D_H, SHAPE_IF_KDA_LOW_GATE, "head_dim, hidden_size"},
                 {ROLE_LIN_G_B, false, D_LVV, D_LDV, SHAPE_IF_KDA_LOW_GATE, KDA_HD ", head_dim"},
                 {ROLE_ATTN_GATE, false, D_LVV, D_H, SHAPE_IF_KDA_FULL_GATE, KDA_HD ", hidden_size (use_full_rank_gate)"},
                 {ROLE_LIN_NORM, false, D_LDV, D_NONE, 0, "head_dim"},
                 {ROLE_LIN_OUT, false, D_H, D_LVV, 0, "hidden_size, " KDA_HD}, {0}},
    [LIN_QWEN3_5] = {{ROLE_LIN_QKV, false, D_LCONV, D_H, 0,
                      "2 key heads x key dim + value heads x value dim, hidden_size"},
                     {ROLE_LIN_Z, false, D_LVV, D_H, 0, "linear value heads x value dim, hidden_size"},
                     {ROLE_LIN_B, false, D_LHV, D_H, 0, "linear_num_value_heads, hidden_size"},
                     {ROLE_LIN_A, false, D_LHV, D_H, 0, "linear_num_value_heads, hidden_size"},
                     {ROLE_LIN_CONV, false, D_LCONV, D_NONE, 0, "2 key heads x key dim + value heads x value dim, 1, "
                                                                "linear_conv_kernel_dim"},
                     {ROLE_LIN_A_LOG, false, D_LHV, D_NONE, 0, "linear_num_value_heads"},
                     {ROLE_LIN_DT_BIAS, false, D_LHV, D_NONE, 0, "linear_num_value_heads"},
                     {ROLE_LIN_NORM, false, D_LDV, D_NONE, 0, "linear_value_head_dim"},
                     {ROLE_LIN_OUT, false, D_H, D_LVV, 0, "hidden_size, " LIN_KEYS}, {0}},
    [LIN_MAMBA2_NEMOTRON] = MAMBA2_SHAPES, [LIN_MAMBA2_GRANITE] = MAMBA2_SHAPES,
};
#undef LIN_KEYS
#undef KDA_HD
#undef MAMBA2_SHAPES

static const RoleShape NO_SHAPES[1] = {{0}};
const RoleShape *shape_linear(linear_layout l) { return l < LIN_LAYOUT_COUNT ? LINEAR_SHAPES[l] : NO_SHAPES; }

bool shape_linear_conv(tensor_role r) {
    return r == ROLE_LIN_CONV || r == ROLE_LIN_Q_CONV || r == ROLE_LIN_K_CONV || r == ROLE_LIN_V_CONV;
}

const RoleShape *shape_attn(attn_layout a) { return a < ATTN_LAYOUT_COUNT ? ATTN_SHAPES[a] : NO_SHAPES; }
const RoleShape *shape_ffn(ffn_layout f) { return f < FFN_LAYOUT_COUNT ? FFN_SHAPES[f] : NO_SHAPES; }

unsigned shape_conditions(const ModelConfig *c, bool mlp_bias) {
    return (c->qkv_bias ? SHAPE_IF_QKV_BIAS : 0) | (c->o_bias ? SHAPE_IF_O_BIAS : 0) |
           (mlp_bias ? SHAPE_IF_MLP_BIAS : 0) | (c->qk_norm == QKN_HEAD ? SHAPE_IF_QKN_HEAD : 0) |
           (c->qk_norm == QKN_PROJ ? SHAPE_IF_QKN_PROJ : 0) | (c->q_lora_rank ? SHAPE_IF_Q_LORA : SHAPE_IF_NO_Q_LORA) |
           (cfg_has_indexer(c) ? SHAPE_IF_INDEXER : 0) | (c->attn_gate ? SHAPE_IF_GATE : SHAPE_IF_NO_GATE) |
           (c->lin.mamba && c->lin.conv_bias ? SHAPE_IF_CONV_BIAS : 0) |
           (c->lin.full_rank_gate ? SHAPE_IF_KDA_FULL_GATE : SHAPE_IF_KDA_LOW_GATE) |
           (c->kv_rebuild ? SHAPE_IF_REBUILD : SHAPE_IF_NO_REBUILD);
}
