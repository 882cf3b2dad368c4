/* dsv4.h -- DeepSeek-V4's config.json (model_type deepseek_v4, DeepseekV4ForCausalLM; its row's KEYS_DSV4):
 * the keys read into Dsv4Spec, each layer's attention kind said in words, and the load refused naming
 * what attnlab does not build.
 *
 * What the release computes (DeepSeek's inference/model.py, as vLLM / SGLang port it): per layer a query
 * latent (attn.wq_a, q_lora_rank; attn.q_norm; attn.wq_b to H heads of head_dim 512, each RMS-normalised
 * without a weight), ONE 512-wide KV head (attn.wkv, attn.kv_norm) that is both key and value, RoPE on its
 * last qk_rope_head_dim dims (adjacent pairs; the output's RoPE dims rotated back), a sink logit per head
 * (attn.attn_sink), and a grouped low-rank output: the heads' outputs in o_groups groups, each through its
 * block of attn.wo_a (o_groups x o_lora_rank, H x 512 / o_groups) and all through attn.wo_b. compress_ratios
 * gives each layer's kind: 0 a sliding window of sliding_window tokens only; 4 (CSA) the window plus KV
 * compressed 4 : 1 (attn.compressor.*) of which a lightning indexer (attn.indexer.*) picks index_topk per
 * query; another ratio r (HCA, 128) the window plus every r : 1 compressed entry; entries past
 * num_hidden_layers belong to the MTP layers. The residual stream is hc_mult wide (hyper-connections:
 * hc_attn_* / hc_ffn_* per layer, hc_head_* at the end, Sinkhorn-normalised hc_sinkhorn_iters times); the
 * first num_hash_layers MoE layers route by a token hash. Released tensors sit under layers.L. (embed,
 * norm, head at the top), experts in FP4.
 *
 * attnlab reads the attention's per-head maps (config.c's dsv4_dims, model.c's block_dsv4): H query heads of head_dim
 * from the query latent (wq_b's rows of the head, after q_norm), the one KV head wkv (its kv_norm weight on its
 * columns) as both key and value, the output of head h through its group's block of wo_a then wo_b. The window /
 * compressed KV, the indexer, hyper-connections and hash routing are not built: analyses.c refuses the forward
 * pass naming them. */
#ifndef AL_DSV4_H
#define AL_DSV4_H

#include <stddef.h>

#include "family.h"   /* CFG_MAX_LAYERS (config.c includes this header: no cycle) */

struct cJSON;

typedef struct {
    int layers, mtp;                 /* num_hidden_layers; num_nextn_predict_layers (default 1) */
    int heads, kv_heads, head_dim, rope_dim, hidden;
    int q_lora, o_lora, o_groups;    /* q_lora_rank; o_lora_rank, o_groups: the grouped low-rank output */
    int hc_mult, hc_iters;           /* hyper-connections: the residual's width, Sinkhorn iterations */
    int hash_layers;                 /* num_hash_layers */
    int window;                      /* sliding_window (128) */
    int index_heads, index_head_dim, index_topk;
    int experts, top_k;              /* n_routed_experts, num_experts_per_tok */
    int n_ratios;                    /* entries of compress_ratios (0: absent -- every layer a window) */
    int ratio[CFG_MAX_LAYERS];       /* compress_ratios[L] (0: window only; 4: CSA; else HCA) */
} Dsv4Spec;

/* Reads root's DeepSeek-V4 keys into s; AL_ERR naming the field when one is missing, not a whole number
 * >= 0, or compress_ratios is shorter than num_hidden_layers (the tail past it is the MTP layers'). */
int dsv4_parse(const struct cJSON *root, const char *where, Dsv4Spec *s);
/* Layer L's attention kind: "window", "CSA" or "HCA". */
const char *dsv4_layer_kind(const Dsv4Spec *s, int layer);
/* The layers of one kind ("0-1", "2-42 every 2nd", "0, 5, 9") into buf; returns how many. */
int dsv4_layers_of(const Dsv4Spec *s, const char *kind, char *buf, size_t cap);
/* The layers l[0..n) into buf (emptied first): "a-b" when contiguous, "a-b every s" when evenly spaced, else a
 * list (also core/model/kimik3.c's). */
void dsv4_layer_list(const int *l, int n, char *buf, size_t cap);
/* One paragraph: dims, the attention of each kind of layer and which layers, hyper-connections, hash
 * layers. Returns buf. */
const char *dsv4_describe(const Dsv4Spec *s, char *buf, size_t cap);
#endif
