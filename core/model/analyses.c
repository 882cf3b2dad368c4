/* analyses.c -- per analysis, whether a model's description allows it and why not (see
 * analyses.h). The refusals of the evaluator, the forward pass, TransMLA, TPA and compare live
 * here, once. */
#define _GNU_SOURCE
#include "analyses.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layersel.h"
#include "rope.h"

static const char *names[AN_COUNT][2] = {
    [AN_RANKS_VO] = {"ranks vo", "ranks_vo"},         [AN_RANKS_QK] = {"ranks qk", "ranks_qk"},
    [AN_SPECTRUM] = {"spectrum", "spectrum"},         [AN_PPL] = {"ppl/calibrate", "ppl"},
    [AN_CONVERT_MLA] = {"convert mla", "convert_mla"}, [AN_CONVERT_TPA] = {"convert tpa", "convert_tpa"},
    [AN_KVSVD] = {"kvsvd", "kvsvd"},                  [AN_COMPARE] = {"compare", "compare"},
    [AN_EXPORT] = {"export formats", "export"},       [AN_EVAL] = {"attention evaluator", "eval"},
};

const char *analysis_name(analysis_kind a) { return a >= 0 && a < AN_COUNT ? names[a][0] : "?"; }
const char *analysis_key(analysis_kind a) { return a >= 0 && a < AN_COUNT ? names[a][1] : "?"; }

/* Writes the reason and returns true (unavailable). */
__attribute__((format(printf, 3, 4))) static bool why_set(char *why, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return true;
}

static const char *mname(const Model *m) { return m->name ? m->name : m->path; }

/* A scaling rope.c does not compute: its message as the reason. */
static bool rope_reason(const ModelConfig *c, const char *where, char *why, size_t cap) {
    if (rope_scaling_check(&c->rope_spec.scaling, where) == AL_OK) return false;
    why_set(why, cap, "%s", al_errmsg());
    al_err_clear();
    return true;
}

/* Per-layer RoPE bases (rope_local_base_freq on sliding layers): recorded, not computed yet. */
static bool local_theta_reason(const ModelConfig *c, const char *where, char *why, size_t cap) {
    for (int L = 0; L < c->n_layers; L++)
        if (cfg_layer_theta(c, L) != c->rope_spec.theta)
            return why_set(why, cap, "%s: rope_local_base_freq %g on sliding layers (layer %d): per-layer RoPE bases "
                           "are not computed by attnlab yet", where, c->rope_spec.local_theta, L);
    return false;
}

/* The Q/K norm, named for messages. */
static const char *qk_norm_words(const ModelConfig *c) {
    return c->qk_norm == QKN_PROJ ? "Q/K RMSNorm over the whole projection (q_norm / k_norm, as in OLMo 2)"
                                  : "per-head Q/K RMSNorm (q_norm / k_norm, as in Qwen3 and Gemma 3)";
}

/* What the one-layer evaluator does not cover. It computes Q/K norms, partial rotary, soft-caps,
 * per-layer sliding windows and local RoPE bases, Gemma 4's v_norm, k_eq_v and per-type head dims (a KV-shared
 * layer alone it refuses: attn_layer_load), the output gate (core/model/attn_eval.c). */
static bool eval_reason(const Model *m, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    const char *name = mname(m);
    if (rope_reason(c, name, why, cap)) return true;
    if (cfg_is_mla(c) && c->qk_rope_dim <= 0)
        return why_set(why, cap, "%s: an MLA model without RoPE dims is not covered", name);
    if (!cfg_is_mla(c) && c->qk_nope_dim > 0 && c->qk_rope_dim > 0 && rope_attention_factor(&c->rope_spec) != 1.0)
        return why_set(why, cap, "%s: %s scaling multiplies the rotated dims only, and with partial rotary (%d of %d "
                       "dims) the evaluator cannot fold it into the softmax scale", name,
                       rope_scaling_name(&c->rope_spec.scaling), c->qk_rope_dim, cfg_d_qk(c));
    if (c->rope_spec.q_beta != 0)                         /* Ministral 3 */
        return why_set(why, cap, "%s: llama_4_scaling_beta %g scales q by 1 + beta ln(1 + floor(p / %g)) from position "
                       "%g on, which the evaluator of converted and compared layers (and their exports) does not do",
                       name, c->rope_spec.q_beta, c->rope_spec.q_floor, c->rope_spec.q_floor);
    return false;
}

/* Gemma 4's attention in a method that rebuilds each layer's keys and values (convert mla / tpa, compare, kvsvd). */
static bool per_type_reason(const Model *m, const char *what, char *why, size_t cap) {
    if (!cfg_row(&m->cfg)->per_type_attn) return false;
    return why_set(why, cap, "%s: Gemma 4's attention (k_eq_v layers take V from k_proj, KV-shared layers read an "
                   "earlier layer's K / V, the full layers have their own head dims) is not carried by %s's layers; "
                   "not covered (truncate runs on the other layers)", mname(m), what);
}

/* The output gate in a method whose layers are evaluated from their keys and values alone (convert tpa, compare). */
static bool gate_reason(const Model *m, const char *what, char *why, size_t cap) {
    if (!m->cfg.attn_gate) return false;
    return why_set(why, cap, "%s: the attention output is gated (attn_output_gate: x sigmoid(x W_gate) before o_proj), "
                   "which %s's layers do not apply", mname(m), what);
}

/* Llama 4's chunked attention, L2 q/k norm and NoPE temperature: the evaluator (truncate's layers) computes them;
 * a method that factors or re-learns the keys (convert mla / tpa, compare's methods, kvsvd) does not. */
static bool llama4_reason(const Model *m, const char *what, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    if (c->attn_chunk <= 0 && !c->qk_l2 && c->temp_scale == 0) return false;
    return why_set(why, cap, "%s: Llama 4's chunked attention (attention_chunk_size %d on the RoPE layers), L2 q/k norm "
                   "after RoPE and the NoPE layers' temperature: %s's layers do not carry them; not covered", mname(m),
                   c->attn_chunk, what);
}

/* What a conversion does not cover: Q/K norms (what = "convert mla", ...).
 * Sliding windows, soft-caps, sinks, NoPE layers and per-layer RoPE bases convert: the converted layer keeps the
 * source's window, soft-cap and sinks (the evaluator applies them on both sides), a NoPE layer converts
 * with RoPE frequencies 0 and a layer with its own base (Gemma 3's rope_local_base_freq) with that base's frequencies;
 * the stock MLA export refuses them (analysis_attn_export_lacks), attnlab's own layouts
 * (TPA, `export DIR format attnlab`) keep them. */
static bool convert_reason(const Model *m, const char *what, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    const char *name = mname(m);
    if (c->qk_norm != QKN_NONE && strcmp(what, "convert mla"))    /* convert mla: qk-norm fold|drop */
        return why_set(why, cap, "%s: the attention has %s between the projection and RoPE: %s factors the projections, "
                       "and the norm divides each q / k by its own per-token RMS, which the converted layer would not "
                       "reproduce; not covered", name, qk_norm_words(c), what);
    return false;
}

bool analysis_attn_export_lacks(const ModelConfig *c, const char *layout, char *why, size_t cap) {
    char list[256], buf[1024] = "";
    size_t n = 0;
    int nope = cfg_nope_layers(c, list, sizeof list);
    if (c->window_declared >= 0 && n < sizeof buf)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%sa sliding window of %d token%s (config.json; per layer as "
                              "layer_types or the pattern says: an engine would need a per-layer sliding_window)",
                              n ? ", " : "", c->window_declared, al_s(c->window_declared));
    if (c->attn_sinks && n < sizeof buf)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%sattention sinks (a learned logit per head in each softmax "
                              "row, gpt-oss: an engine would need per-head sinks in the converted softmax)", n ? ", " : "");
    if (c->attn_softcap > 0 && n < sizeof buf)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%sscores soft-capped at %g (attn_logit_softcapping: an engine "
                              "would need Gemma 2's soft-cap on the converted logits)", n ? ", " : "", c->attn_softcap);
    if (c->attn_gate && n < sizeof buf)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%san output gate (attn_output_gate: an engine would need "
                              "sigmoid(x W_gate) on the converted attention's output)", n ? ", " : "");
    if (nope && n < sizeof buf)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%sNoPE layer%s %s of %d (no_rope_layers: an engine would need "
                              "per-layer NoPE; converted here with RoPE frequencies 0)", n ? ", " : "", nope > 1 ? "s" : "",
                              list, c->n_layers);
    if (!n) return false;
    return why_set(why, cap, "%s cannot hold %s, which the converted attention keeps in the session (ppl, check)",
                   layout, buf);
}

/* True when layer L of m holds expert 0's gate in MoE layout x (whatever layout the config routes
 * with: a dense config may hold experts it does not route to). */
static bool layer_has_expert0(moe_layout x, const Model *m, int L) {
    const RoleName *rn = role_in_moe(x, ROLE_EXP_GATE);
    if (!rn) return false;
    char where[96], expert[96], name[256];
    cfg_layer_prefix(&m->cfg, L, where, sizeof where);
    snprintf(expert, sizeof expert, rn->name, 0);
    snprintf(name, sizeof name, "%s%s.weight", where, expert);
    return store_has(m->store, name);
}

/* What the forward pass cannot run in m's mixture-of-experts layers (the reason into why): a layer
 * with expert tensors the config does not route, or routing fields it does not implement. */
static bool moe_layer(const Model *m, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    const MoeSpec *e = &c->moe;
    if (c->ffn == FFN_CONV1D) return false;               /* GPT-2's MLP has no experts to look for */
    for (int L = 0; m->store && L < c->n_layers; L++) {   /* a description alone has no tensors */
        bool experts = false;
        for (int x = 0; x < MOE_LAYOUT_COUNT && !experts; x++) experts = layer_has_expert0((moe_layout)x, m, L);
        if (experts && !cfg_moe_layer(c, L))
            return why_set(why, cap, "%s: layer %d holds experts but config.json does not route to them there (num_experts "
                           "/ n_routed_experts %d, first_k_dense_replace %d, moe_layer_freq %d, decoder_sparse_step %d, "
                           "mlp_only_layers)", m->path, L, e->n_experts, e->first_dense, e->layer_freq, e->sparse_step);
    }
    if (c->mlp != MLP_MOE) return false;
    bool ds = e->router != ROUTER_SOFTMAX, v2 = e->router == ROUTER_DS_V2;
    int first = 0;
    while (first < c->n_layers && !cfg_moe_layer(c, first)) first++;
    if (e->layout == MOE_NONE || e->top_k <= 0 || e->top_k > e->n_experts)
        return why_set(why, cap, "layer %d is a mixture-of-experts layer (%d expert%s) but num_experts_per_tok is %d: the "
                       "forward pass needs 1 <= top-k <= experts", first, e->n_experts, al_s(e->n_experts), e->top_k);
    char gu[192], blk[210];
    dt_fp4 q;
    size_t qE = 0;
    if (m->store && cfg_role_name(c, ROLE_EXPS_GATE_UP, first, -1, NULL, gu, sizeof gu) &&
        (snprintf(blk, sizeof blk, "%s_blocks", gu), store_has(m->store, blk) || !store_has(m->store, gu))) {
        if (!store_has(m->store, blk))
            return why_set(why, cap, "%s: layer %d has no %s (every expert in one tensor)", m->path, first, gu);
        int qrc = store_fp4_experts(m->store, gu, &qE, &q);             /* gpt-oss as released: read per expert */
        if (qrc != AL_OK || q.enc == DT_FP4_NONE)
            return why_set(why, cap, "%s: the experts are stored under MXFP4's names (%s / _scales) but not as MXFP4 "
                           "experts (U8 [E, rows, cols/32, 16], E8M0 scales [E, rows, cols/32])%s%s", m->path, blk,
                           qrc != AL_OK ? ": " : "", qrc != AL_OK ? al_errmsg() : "");
    }
    if (!ds && e->n_shared > 0 && !role_in_moe(e->layout, ROLE_SHEXP_SCALE))
        return why_set(why, cap, "%s: a shared expert in a %s MoE (shared_expert_intermediate_size) is not covered by "
                       "the forward pass (Mixtral, Qwen3-MoE and DeepSeek layouts are)", m->path, c->model_type);
    if (ds && v2 && e->topk_method[0] && strcmp(e->topk_method, "greedy") && strcmp(e->topk_method, "group_limited_greedy"))
        return why_set(why, cap, "%s: DeepSeek-V2 topk_method '%s' is not covered (greedy, group_limited_greedy are)",
                       m->path, e->topk_method);
    bool groups = ds && e->n_group > 1 && (!v2 || !strcmp(e->topk_method, "group_limited_greedy"));
    if (groups && (e->n_experts % e->n_group || e->topk_group < 1 || e->topk_group > e->n_group ||
                   e->topk_group * (e->n_experts / e->n_group) < e->top_k || (!v2 && e->n_experts / e->n_group < 2)))
        return why_set(why, cap, "%s: grouped routing with %d expert%s, n_group %d, topk_group %d, top-k %d is "
                       "inconsistent", m->path, e->n_experts, al_s(e->n_experts), e->n_group, e->topk_group, e->top_k);
    return false;
}

/* Longrope as the forward pass computes it: dim / 2 short and long factors. */
static bool longrope_reason(const ModelConfig *c, const char *where, char *why, size_t cap) {
    const RopeScaling *s = &c->rope_spec.scaling;
    if (s->n_short == c->qk_rope_dim / 2 && s->n_long == c->qk_rope_dim / 2) return false;
    return why_set(why, cap, "%s: rope_scaling longrope has %d short and %d long factors; the %d rotary dims need %d of "
                   "each", where, s->n_short, s->n_long, c->qk_rope_dim, c->qk_rope_dim / 2);
}

/* DeepSeek-V4: what is not built, for every analysis that runs its layers (the forward pass, the evaluator, the
 * conversions that evaluate or rewrite them). */
static bool dsv4_reason(const Model *m, const char *what, char *why, size_t cap) {
    if (m->cfg.attn != QKV_DSV4) return false;
    return why_set(why, cap, "%s: %s needs DeepSeek-V4's layers, which attnlab does not build: the compressed KV (the "
                   "compressor's 4:1 CSA and 128:1 HCA entries, the lightning indexer's top-k over them), the "
                   "hyper-connections (hc_mult parallel residual streams mixed by Sinkhorn-normalised hc_attn_* / "
                   "hc_ffn_* / hc_head_*), the hash routing of the first num_hash_layers MoE layers (ffn.gate.tid2eid), "
                   "sqrtsoftplus scores and the clamped SwiGLU; the per-head analyses (ranks vo|qk, spectrum, fuse, "
                   "plot vo-ranks) read its attention weights", mname(m), what);
}

/* Kimi-K3 (kimik3.h): what is not built, for every analysis that runs its layers, as dsv4_reason. */
static bool k3_reason(const Model *m, const char *what, char *why, size_t cap) {
    if (cfg_row(&m->cfg)->keys != KEYS_KIMI_K3) return false;
    return why_set(why, cap, "%s: %s needs Kimi-K3's layers, which attnlab does not build: the attention residuals "
                   "(attn_res_block_size: self_attention_res_* / mlp_res_* / output_attn_res_*), the SiTU activation, "
                   "the latent experts (routed_expert_up_proj / _norm / _down_proj around experts in "
                   "routed_expert_hidden_size) and the full-rank output gates (self_attn.g_proj on the MLA and the "
                   "Kimi Delta Attention layers); the per-head analyses (ranks vo|qk, spectrum, fuse, plot vo-ranks) "
                   "read the MLA layers' attention weights", mname(m), what);
}

/* What the forward pass does not cover. */
static bool ppl_reason(const Model *m, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    if (dsv4_reason(m, "the forward pass (ppl, generate, calibrate)", why, cap)) return true;
    if (k3_reason(m, "the forward pass (ppl, generate, calibrate)", why, cap)) return true;
    bool mla = cfg_is_mla(c), gpt2 = c->attn == QKV_CONV1D;
    if (c->lin.proj_bias)
        return why_set(why, cap, "%s: the Mamba-2 projections have biases (use_bias / mamba_proj_bias true), which the "
                       "forward pass does not add; the attention analyses run on the attention layers", m->path);
    if (c->lin.moe_latent > 0)                             /* Nemotron 3 Super's latent experts */
        return why_set(why, cap, "%s: moe_latent_size %d: the experts' latent projections (fc1 / fc2_latent_proj) are not "
                       "in the forward pass; the attention analyses run on the '*' layers", m->path, c->lin.moe_latent);
    if (c->vocab == 0 || c->intermediate == 0)
        return why_set(why, cap, "%s: the forward pass needs vocab_size and intermediate_size in the config", m->path);
    if (c->act == ACT_UNKNOWN)
        return why_set(why, cap, "%s: activation '%s' is not supported (silu, gelu, gelu_new, gelu_pytorch_tanh, relu, "
                       "relu2 are)", m->path, c->activation);
    if (c->rope_spec.partial_factor < 1.0 && !mla && !gpt2 && !c->rope_first)
        return why_set(why, cap, "%s: partial_rotary_factor %g is not supported by the forward pass", m->path,
                       c->rope_spec.partial_factor);
    bool rope = c->qk_rope_dim > 0 && c->rope != ROPE_NONE;
    if (rope && c->rope_spec.scaling.kind == RS_LONGROPE) {
        if (longrope_reason(c, m->path, why, cap)) return true;
    } else if (rope && rope_reason(c, m->path, why, cap))
        return true;
    if (moe_layer(m, why, cap)) return true;
    if ((m->cfg_full || c->kv_shared_from > 0) && !why[0])   /* Gemma 4: a note, not a refusal */
        snprintf(why, cap, "ppl and generate; calibrate refused (its statistics take one head shape and every layer's "
                 "own K / V: %s)", m->cfg_full ? "the full layers have their own head dims" : "KV-shared layers");
    if (cfg_has_indexer(c) && !why[0])            /* DeepSeek-V3.2 / GLM-5: a note, not a refusal */
        snprintf(why, cap, "with the lightning indexer's selection of %d key%s per query from position %d on (dense "
                 "before it); a transformed layer (truncate) and kvsvd eval run dense, so they measure sequences of at "
                 "most %d token%s", c->index_topk, al_s(c->index_topk), c->index_topk, c->index_topk, al_s(c->index_topk));
    return false;
}

static bool mla_reason(const Model *m, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    const char *name = mname(m);
    if (dsv4_reason(m, "convert mla", why, cap)) return true;
    if (k3_reason(m, "convert mla", why, cap)) return true;
    if (cfg_is_mla(c))
        return why_set(why, cap, "%s is already MLA (%s, kv_lora_rank %d): its keys and values come from one shared "
                       "latent, so there are no GQA key heads to merge, rotate or balance; convert mla and the TransMLA "
                       "figures take GQA models with RoPE (Llama, Mistral, Qwen2), e.g. `load demo-kvnorm` (planted "
                       "key-norm concentration) or `load demo-llama`", name, c->model_type, c->kv_lora_rank);
    char pos[64];
    if (c->rope == ROPE_NONE && cfg_role_name(c, ROLE_POS_EMBED, 0, 0, "weight", pos, sizeof pos))
        return why_set(why, cap, "%s has no RoPE (%s): TransMLA's RoRoPE step needs rotary keys; convert mla takes Llama, "
                       "Mistral and Qwen2 models, and attention without positions (Nemotron-H)", name, c->model_type);
    /* Partial rotary: RoRoPE on the rotary dims, the NoPE dims join the latent (transmla.h); the
     * evaluator turns the FIRST rope dims of a head, which is where rope_first puts them. */
    if (c->qk_nope_dim > 0 && c->qk_rope_dim > 0 && !c->rope_first)
        return why_set(why, cap, "%s: the NoPE dims of each head come before the RoPE dims (%d + %d): convert mla takes "
                       "partial rotary with the rotary dims first (GPT-NeoX, Phi-3)", name, c->qk_nope_dim,
                       c->qk_rope_dim);
    if (eval_reason(m, why, cap) || per_type_reason(m, "convert mla", why, cap) ||
        llama4_reason(m, "convert mla", why, cap) || convert_reason(m, "convert mla", why, cap))
        return true;
    if (c->qk_norm != QKN_NONE)                     /* a note: available with qk-norm fold|drop|keep (tmla_qkn.h) */
        snprintf(why, cap, "with qk-norm fold|drop|keep only: the %s is approximated by fold (its gains and calibrated "
                 "1/RMS folded into W_Q / W_K) and drop (removed), never exact; keep keeps it on keys rebuilt from the "
                 "cache (exact at full rank; the session only)", qk_norm_words(c));
    return false;
}

static bool tpa_reason(const Model *m, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    if (dsv4_reason(m, "convert tpa", why, cap)) return true;
    if (k3_reason(m, "convert tpa", why, cap)) return true;
    if (cfg_is_mla(c))
        return why_set(why, cap, "%s is MLA (%s): it already caches one shared latent of %d + %d value%s per token; "
                       "non-contextual TPA conversion takes a GQA / MHA model (Llama, Mistral, Qwen2, llama2.c, GPT-2)",
                       mname(m), model_family_name(c->family), c->kv_lora_rank, c->qk_rope_dim, al_s(c->qk_rope_dim));
    return eval_reason(m, why, cap) || per_type_reason(m, "convert tpa", why, cap) ||
           gate_reason(m, "convert tpa", why, cap) || llama4_reason(m, "convert tpa", why, cap) ||
           convert_reason(m, "convert tpa", why, cap);
}

static bool compare_reason(const Model *m, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    if (dsv4_reason(m, "compare", why, cap)) return true;
    if (k3_reason(m, "compare", why, cap)) return true;
    if (cfg_is_mla(c))
        return why_set(why, cap, "%s is MLA: it already caches one shared latent of %d + %d value%s; the "
                       "comparison takes GQA / MHA models (Llama, Mistral, Qwen2, llama2.c, GPT-2)", mname(m),
                       c->kv_lora_rank, c->qk_rope_dim, al_s(c->qk_rope_dim));
    if (c->qk_nope_dim > 0 && c->qk_rope_dim > 0 && !c->rope_first)
        return why_set(why, cap, "%s has its NoPE dims before its RoPE dims (%d + %d per head): the "
                       "comparison's methods turn the first dims of a head", mname(m), c->qk_nope_dim, c->qk_rope_dim);
    /* compare exports nothing: sliding windows and soft-caps are applied on both sides (the
     * evaluator computes them); an output gate and Q/K norms leave the rows of the methods they do not pass
     * through "not applicable" (budget_compare.c), the others and the evictions run; per-layer RoPE bases
     * stay refused. */
    if (eval_reason(m, why, cap) || per_type_reason(m, "compare", why, cap) || llama4_reason(m, "compare", why, cap))
        return true;
    return local_theta_reason(c, mname(m), why, cap);
}

/* QK fusion. With a Q/K RMSNorm between projection and score, q = g (x W_Q) / rms(x W_Q): the
 * score is a bilinear form of the input divided by two per-token norms that depend on the
 * projections themselves, so W_Q W_Kᵀ (or W_Q diag(g_q g_k) W_Kᵀ) is not the map the model
 * computes, and truncating W_Q / W_K would change the norms too: refused. */
static bool qk_reason(const Model *m, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    if (c->qk_norm != QKN_NONE)
        return why_set(why, cap, "%s: %s sits between the projections and the scores: each q and k is divided by its own "
                       "per-token RMS (a function of x W_Q, x W_K), so the score is not a bilinear form of the input and "
                       "W_Q W_Kᵀ is not the map the model computes (ranks vo, spectra of single heads and the forward "
                       "pass are unaffected)", mname(m), qk_norm_words(c));
    char nope[256];
    int n = cfg_nope_layers(c, nope, sizeof nope);
    if (c->qk_l2 && n && n < c->n_layers)                   /* Llama 4 */
        snprintf(why, cap, "layer%s %s appl%s no RoPE and no q/k norm: W_Q W_Kᵀ is exact there, without an offset; on "
                 "the RoPE layers give `offset D` (the L2 q/k norm after RoPE scales each token's q and k by a scalar: "
                 "ranks hold, logit scales do not)", n > 1 ? "s" : "", nope, n > 1 ? "y" : "ies");
    else if (n && n == c->n_layers)
        snprintf(why, cap, "no layer applies RoPE (no_rope_layers): every QK fuses exactly, without an offset");
    else if (n && c->qk_nope_dim == 0)
        snprintf(why, cap, "RoPE on every Q/K dim of the other layers: give `offset D` there (a fixed position offset, "
                 "analysis only); layer%s %s appl%s no RoPE (no_rope_layers) and fuse%s exactly, without an offset",
                 n > 1 ? "s" : "", nope, n > 1 ? "y" : "ies", n > 1 ? "" : "s");
    else if (c->rope != ROPE_NONE && c->qk_rope_dim > 0 && c->qk_nope_dim == 0)
        snprintf(why, cap, "RoPE on every Q/K dim: give `offset D` (a fixed position offset, analysis only)");
    else if (c->qk_nope_dim > 0 && c->qk_rope_dim > 0 && cfg_is_mla(c) && c->rope == ROPE_NONE)
        snprintf(why, cap, "the %d column%s of each head keyed from the kv latent, dims 0-%d, exactly (no RoPE: "
                 "mla_use_nope; the %d dim%s of the shared key read the hidden state, another input)", c->qk_nope_dim, al_s(c->qk_nope_dim),
                 c->qk_nope_dim - 1, c->qk_rope_dim, al_s(c->qk_rope_dim));
    else if (c->qk_nope_dim > 0 && c->qk_rope_dim > 0)
        snprintf(why, cap, "the %d NoPE columns of each head, dims %d-%d (the RoPE part cannot be fused)", c->qk_nope_dim,
                 cfg_nope_col(c), cfg_nope_col(c) + c->qk_nope_dim - 1);
    return false;
}

bool analysis_moe_exportable(const ModelConfig *c, char *why, size_t cap) {
    const MoeSpec *e = &c->moe;
    if (c->mlp != MLP_MOE) return true;
    int first = 0;
    while (first < c->n_layers && !cfg_moe_layer(c, first)) first++;
    int late_dense = -1;
    for (int L = first; L < c->n_layers && late_dense < 0; L++)
        if (!cfg_moe_layer(c, L)) late_dense = L;
    const char *what = e->router != ROUTER_SOFTMAX || e->sigmoid ? "router is not softmax top-k (DeepSeek-V3's stock "
                           "layout computes softmax or sigmoid scores, top-k, renormalised or not)"
                       : e->layout != MOE_MIXTRAL && e->layout != MOE_QWEN ? "experts are not one gate / up / down "
                           "tensor per expert (Mixtral's or Qwen's names)"
                       : e->n_shared > 0 ? "shared expert is gated (DeepSeek-V3's shared experts are not)"
                       : late_dense >= 0 ? "dense MLP layers come after MoE layers (DeepSeek-V3 has dense layers "
                           "first_k_dense_replace first, then every layer MoE)" : NULL;
    if (what && cap)
        snprintf(why, cap, "the DeepSeek-V3 checkpoint it writes holds a mixture of experts as softmax top-k routed "
                 "experts after the first dense layers, but %s's %s", c->model_type, what);
    return what == NULL;
}

/* Export formats: those of the transformations available. */
bool analysis_mla_exportable(const ModelConfig *c, char *why, size_t cap) {
    if (!analysis_moe_exportable(c, why, cap)) return false;
    const char *what = c->block == BLOCK_PARALLEL ? "blocks are parallel (attention and MLP on one input)"
                       : c->block != BLOCK_PRE ? "blocks put other norms around attention and MLP"
                       : c->norm != NORM_RMS ? "norms are not plain RMSNorm"
                       : c->embed_scale != 1.0 ? "embeddings are scaled"
                       : cfg_row(c)->text_config ? "text model sits in a multimodal checkpoint (text_config), which the "
                                                   "export does not rewrite as a text-only one" : NULL;
    if (what && cap)
        snprintf(why, cap, "the DeepSeek-V3 checkpoint it writes has dense gate_proj / up_proj MLPs in pre-norm RMSNorm "
                 "blocks, but %s's %s", c->model_type, what);
    return what == NULL;
}

/* The formats `export` writes for the transformations available; the MLA export also needs the
 * layers around attention to fit DeepSeek-V3's (else convert mla runs in the session only). */
static bool export_reason(const Model *m, char *why, size_t cap) {
    static const struct { analysis_kind a; const char *fmt; } fmts[] = {
        {AN_RANKS_VO, "truncate"}, {AN_CONVERT_MLA, "mla"}, {AN_CONVERT_TPA, "tpa"}, {AN_KVSVD, "kvsvd"}};
    char tmp[512], ok[128] = "", no[128] = "", mla[384] = "";
    bool tpa_yes = false;
    for (size_t i = 0; i < sizeof fmts / sizeof *fmts; i++) {
        bool yes = analysis_available(m, fmts[i].a, tmp, sizeof tmp);
        if (fmts[i].a == AN_RANKS_VO && m->cfg.attn == QKV_DSV4) yes = false;   /* truncate: farr.c says why */
        if (fmts[i].a == AN_CONVERT_TPA) tpa_yes = yes;
        if (yes && fmts[i].a == AN_CONVERT_TPA && m->cfg.lin.n_linear > 0) continue;   /* said below */
        if (yes && fmts[i].a == AN_CONVERT_MLA && (!analysis_mla_exportable(&m->cfg, mla, sizeof mla) ||
                    analysis_attn_export_lacks(&m->cfg, "the DeepSeek-V3 checkpoint it writes", mla, sizeof mla)))
            continue;
        char *list = yes ? ok : no;
        size_t n = strlen(list);
        snprintf(list + n, sizeof ok - n, "%s%s", n ? ", " : "", fmts[i].fmt);
    }
    snprintf(why, cap, "%s%s%s%s%s%s%s", ok, no[0] ? " (not: " : "", no, no[0] ? ", see their own lines)" : "",
             mla[0] ? " (not: mla: " : "", mla, !mla[0] ? "" : m->cfg.lin.n_linear > 0
             ? "; convert mla runs on the attention layers in the session: ppl, check; no export holds the other layers)"
             : "; convert mla runs in the session: ppl, check; `export DIR format attnlab` saves it)");
    if (tpa_yes && m->cfg.lin.n_linear > 0 && strlen(why) + 1 < cap)   /* tpa_export_opts refuses a hybrid */
        snprintf(why + strlen(why), cap - strlen(why), " (not: tpa: its format holds every layer as TPA attention, "
                 "and %d of the %d layer%s are %s; convert tpa runs in the session: ppl, check)", m->cfg.lin.n_linear,
                 m->cfg.n_layers, al_s(m->cfg.n_layers), layersel_other_kind(&m->cfg));
    if (!ok[0]) {                             /* nothing exports: "no: none (not: ...)" rather than "yes:  (not: ...)" */
        memmove(why + 4, why, strnlen(why, cap - 5) + 1);
        memcpy(why, "none", 4);
        why[cap - 1] = '\0';
        return true;
    }
    return false;
}

/* Gemma 4's attention: what the per-head analyses mean on it (a note). */
static void per_type_note(const ModelConfig *c, char *why, size_t cap, bool more) {
    size_t n = (size_t)snprintf(why, cap, "%svalues are RMS-normed per head without a weight (v_norm): the V-O map is W_V "
                                "W_O up to one positive factor per token and head, so its ranks are W_V W_O's", more ? "; " : "");
    if (c->k_eq_v && n < cap)
        n += (size_t)snprintf(why + n, cap - n, "; attention_k_eq_v: the full-attention layers' V is k_proj's output, so "
                              "their V-O and Q-K maps share one projection (W_K: V-O is W_K W_O, Q-K is W_Q W_K^T)");
    if (c->kv_shared_from > 0 && n < cap)
        snprintf(why + n, cap - n, "; layers %d-%d share an earlier layer's K / V (num_kv_shared_layers): their V-O map is "
                 "that layer's W_V with their own W_O, and they add nothing to the KV cache", c->kv_shared_from,
                 c->n_layers - 1);
}

/* A hybrid's linear-attention layers and the output gate: what the per-head analyses mean (a note). */
static void hybrid_note(const Model *m, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    char list[256];
    size_t n = 0;
    if (c->lin.layout != LIN_NONE) {
        cfg_attn_layers(c, list, sizeof list);
        n = (size_t)snprintf(why, cap, "on the softmax-attention layers (%s; `all` and ranges sweep those, a linear "
                             "layer alone is an error): the %s layers have no heads%s", list, cfg_linear_name(c),
                             c->lin.n_mlp_blocks ? ", the MLP blocks no attention" : "");
    }
    if (c->lin.mamba && c->rope == ROPE_NONE && n < cap) {
        n += (size_t)snprintf(why + n, cap - n, "; the attention applies no RoPE, so QK fusion is exact on the whole head");
    }
    if (c->attn_gate && n < cap)
        n += (size_t)snprintf(why + n, cap - n, "%sthe output gate makes the V-O map W_V diag(sigmoid(x W_gate)) W_O: the "
                              "ranks of W_V and W_O bound it, the fused W_V W_O is it for a constant gate", n ? "; " : "");
    if (cfg_row(c)->per_type_attn && n < cap) per_type_note(c, why + n, cap - n, n > 0);
    if (cfg_row(c)->keys == KEYS_KIMI_K3 && n < cap)                          /* Kimi-K3's gate: its own g_proj */
        snprintf(why + n, cap - n, "%sKimi-K3's full-rank output gate (self_attn.g_proj, not read) makes head h's V-O "
                 "map W_V diag(sigmoid(x W_g)) W_O: the ranks of W_V and W_O bound it, the fused W_V W_O is it for a "
                 "constant gate", n ? "; " : "");
}

/* DeepSeek-V4: what the per-head maps are (a note; dsv4.h). */
static void dsv4_note(const Model *m, analysis_kind a, char *why, size_t cap) {
    const ModelConfig *c = &m->cfg;
    if (c->attn != QKV_DSV4) return;
    if (a == AN_RANKS_QK)
        snprintf(why, cap, "the %d NoPE dims of each head, dims 0-%d, exactly up to scalars: W_Q is wq_b's rows of the "
                 "head from the q_norm'ed latent (q_lora %d) and W_K the one KV head wkv with kv_norm's weight; the "
                 "latent's RMS, the head's weightless RMS and the key's RMS scale each score by per-token factors only; "
                 "the last %d dim%s rotate (adjacent pairs)", c->qk_nope_dim, c->qk_nope_dim - 1, c->q_lora_rank,
                 c->qk_rope_dim, al_s(c->qk_rope_dim));
    else
        snprintf(why, cap, "K = V: the one KV head (wkv, kv_norm's weight on its columns) is every head's W_V and W_K; "
                 "head h's W_O is its block of wo_a (group h / %d of %d, o_lora %d) times wo_b; exact on the %d NoPE "
                 "dims, while the release rotates the %d RoPE dims of each value by the key's position and back by the "
                 "query's (exact at offset 0); the sink adds a logit (the maps unchanged); the window / compressed KV "
                 "and the indexer are paths these maps leave out", c->n_heads / c->o_groups, c->o_groups, c->o_lora_rank,
                 c->qk_nope_dim, c->qk_rope_dim);
}

/* KQ-SVD learns the keys of every layer: a hybrid's linear-attention layers have none. */
static bool kvsvd_reason(const Model *m, char *why, size_t cap) {
    if (llama4_reason(m, "kvsvd", why, cap)) return true;
    if (cfg_per_type_dims(&m->cfg))                   /* Gemma 4 */
        return why_set(why, cap, "%s: the full-attention layers have their own head dims (global_head_dim %d, %d KV "
                       "head%s): kvsvd's statistics take one head shape; not covered", mname(m), m->cfg.global_head_dim,
                       m->cfg.global_kv_heads, al_s(m->cfg.global_kv_heads));
    if (m->cfg.kv_shared_from > 0)                    /* Gemma 4 */
        return why_set(why, cap, "%s: layers %d-%d read an earlier layer's K / V (num_kv_shared_layers): kvsvd learns "
                       "every layer's own keys; not covered", mname(m), m->cfg.kv_shared_from, m->cfg.n_layers - 1);
    if (m->cfg.lin.layout == LIN_NONE) return false;
    char list[256];
    int n = cfg_attn_layers(&m->cfg, list, sizeof list);
    return why_set(why, cap, "%s: the %s layers have no keys or KV cache (only %s %s %s): kvsvd "
                   "learns every layer's; not covered", mname(m), cfg_linear_name(&m->cfg), n == 1 ? "layer" : "layers",
                   list, n == 1 ? "has" : "have");
}

/* attnlab's layout of a qk-norm keep conversion (cfg kv_rebuild): no k_proj / v_proj to view per head. */
static bool rebuild_reason(const Model *m, char *why, size_t cap) {
    if (!m->cfg.kv_rebuild) return false;
    return why_set(why, cap, "%s: attnlab's layout of a qk-norm keep conversion rebuilds K and V from a cache "
                   "(kv_a_proj_with_mqa, kv_b_proj): it has no k_proj / v_proj to view per head; analyse its source "
                   "(its layers run in ppl, generate and check DIR)", mname(m));
}

bool analysis_available(const Model *m, analysis_kind a, char *why, size_t cap) {
    if (cap) why[0] = 0;
    bool no = false;
    switch (a) {
    case AN_RANKS_VO: case AN_SPECTRUM:
        if ((no = rebuild_reason(m, why, cap))) break;
        hybrid_note(m, why, cap);
        dsv4_note(m, a, why, cap);
        break;
    case AN_RANKS_QK: no = qk_reason(m, why, cap); dsv4_note(m, a, why, cap); break;
    case AN_PPL: no = ppl_reason(m, why, cap); break;
    case AN_KVSVD: no = ppl_reason(m, why, cap) || kvsvd_reason(m, why, cap); break;
    case AN_CONVERT_MLA: no = mla_reason(m, why, cap); break;
    case AN_CONVERT_TPA: no = tpa_reason(m, why, cap); break;
    case AN_COMPARE: no = compare_reason(m, why, cap); break;
    case AN_EXPORT: no = export_reason(m, why, cap); break;
    case AN_EVAL: no = dsv4_reason(m, "the attention evaluator", why, cap) ||
                       k3_reason(m, "the attention evaluator", why, cap) || eval_reason(m, why, cap); break;
    default: no = why_set(why, cap, "unknown analysis %d", (int)a);
    }
    return !no;
}

int analysis_check(const Model *m, analysis_kind a) {
    char why[1024];
    if (analysis_available(m, a, why, sizeof why)) return AL_OK;
    return al_err("%s", why);
}
