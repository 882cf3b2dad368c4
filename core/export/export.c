/* export.c -- writes a FaRR-truncated working copy to a new folder: bit-for-bit copies of every
 * untouched tensor and file, rewritten attention tensors (zero-padded in the original layout, or
 * resliced for DeepSeek-V3 `hf`), the compact factors, and farr_manifest.json. See export.h. */
#define _GNU_SOURCE
#include "export.h"

#include "ckpt_write.h"
#include "fp8ct.h"
#include "layersel.h"
#include "pad.h"
#include "quant_config.h"
#include "quant_fused.h"
#include "spectra.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ================================================================ names */

const char *export_format_name(export_format f) {
    return f == EXPORT_HF ? "hf" : f == EXPORT_FACTORS ? "factors" : f == EXPORT_DENSE ? "dense" : "auto";
}

const char *export_reenc_from(const ExportReport *r) {
    return r->reenc_fp4 != DT_FP4_NONE ? dt_fp4_traits(r->reenc_fp4)->name : dt_name(r->reenc_from);
}

int export_format_parse(const char *s, export_format *out) {
    if (strcmp(s, "hf") == 0) *out = EXPORT_HF;
    else if (strcmp(s, "factors") == 0) *out = EXPORT_FACTORS;
    else if (strcmp(s, "dense") == 0) *out = EXPORT_DENSE;
    else if (strcmp(s, "auto") == 0) *out = EXPORT_AUTO;
    else return al_err("unknown export format '%s': use hf, factors or dense", s);
    return AL_OK;
}

/* ================================================================ what hf can hold */

static _Thread_local char refusal[512];

static const char *plan_hf_refusal(const Model *m, const FarrPlan *p) {
    if (!p) return NULL;
    const char *k = farr_kind_name(p->opts.kind);
    if (layersel_count(&m->cfg, p->lo, p->hi) != layersel_count(&m->cfg, 0, m->cfg.n_layers - 1)) {
        snprintf(refusal, sizeof refusal, "the hf config has one %s size for all layers, but the %s "
                 "truncation covers layers %d-%d of 0-%d: truncate every layer (policy model-max) or "
                 "use format factors", p->opts.kind == FARR_VO ? "v_head_dim" : "qk_nope_head_dim", k,
                 p->lo, p->hi, m->cfg.n_layers - 1);
        return refusal;
    }
    if (!p->uniform) {
        snprintf(refusal, sizeof refusal, "the hf config has one %s size for every head, but the %s "
                 "truncation (policy %s) kept different ranks (up to %d): use policy model-max or a "
                 "fixed rank, or format factors",
                 p->opts.kind == FARR_VO ? "v_head_dim" : "qk_nope_head_dim", k,
                 farr_policy_name(p->opts.policy), p->rank_max);
        return refusal;
    }
    return NULL;
}

const char *export_hf_refusal(const Model *m, const FarrPlan *vo, const FarrPlan *qk) {
    const ModelConfig *c = &m->cfg;
    if (!cfg_is_mla(c)) {
        snprintf(refusal, sizeof refusal, "format hf is for DeepSeek-V3-layout models: a %s config has one "
                 "head_dim for Q, K and V (no qk_nope_head_dim / v_head_dim), so it cannot express "
                 "truncated heads; use format factors", c->model_type);
        return refusal;
    }
    const char *r = plan_hf_refusal(m, vo);
    return r ? r : plan_hf_refusal(m, qk);
}

/* ================================================================ the export context */

typedef struct {
    Model *m;
    const ModelConfig *c;
    const FarrPlan *plan[2];     /* by kind */
    export_format fmt;
    bool dtype_set;              /* ExportOpts.dtype given */
    dt_type dtype;
    double q_scale;              /* hf QK */
    int nope2, v2;               /* hf: the new qk_nope_head_dim / v_head_dim */
    float *scale;                /* FP8 block scales of the weight just written, for its grid (fp8_grid_form) */
    size_t scale_bytes;
    bool ct_pass;                /* a per-tensor FP8 weight's first pass: its amax (ct_amax), no codes */
    double ct_amax;
    float *balance[2];           /* dtype fp8, by kind: per (layer, group) the power of two c the
                                    shared factor is written times (the heads' factors / c), or NULL */
    char **keep_bf;              /* modules of FP8 weights re-encoded in another dtype (n_keep_bf) */
    size_t n_keep_bf;
    st_entry **fp4;              /* rewritten FP4 weights as (logical name, shape, BF16) entries (n_fp4) */
    size_t n_fp4;
    ExportReport rep;
} Ctx;

/* The plan's group of KV head g / head factor of query head h in layer L (NULL when the layer is
 * not truncated by that plan). */
static const FarrGroup *plan_group(const FarrPlan *p, int L, int g) {
    const FarrTruncLayer *tl = farr_plan_layer(p, L);
    return tl ? tl->groups[g] : NULL;
}
static const Mat *plan_head_mat(const Ctx *x, const FarrPlan *p, int L, int h) {
    int idx;
    const FarrGroup *g = p ? farr_plan_head(p, x->c, L, h, &idx) : NULL;
    return g ? g->head[idx] : NULL;
}

/* The width of a group's factor (S is (m x k)): VO the value dims of a head, QK the fused part of
 * a key head (the NoPE dims of a partial-rotary or MLA head). */
/* Layer L of the kind-k plan when it cuts something there, else NULL (farr_plan_cut_layer). */
static const FarrTruncLayer *cut_layer(const Ctx *x, farr_kind k, int L) {
    return farr_plan_cut_layer(x->plan[k], x->c, k, L);
}

/* True when group g of a cut layer keeps its full rank and its rows/columns keep the source's
 * values (factors/dense; not where the layer adjusts biases, which are the group's together). */
static bool keep_group(const FarrTruncLayer *tl, const ModelConfig *c, farr_kind k, int g) {
    return tl && !tl->shared_bias && !tl->head_bias && !tl->o_bias_delta && tl->groups[g]->rank >= farr_pair_width(c, k);
}

/* The balance of group g of layer L (1 where none). */
static float bal(const Ctx *x, farr_kind k, int L, int g) {
    return x->balance[k] ? x->balance[k][(size_t)L * (size_t)x->c->n_heads + (size_t)g] : 1.0f;
}

/* 448 x the smallest FP8 block scale under the view (kind, L, idx, part) in its weight: the largest
 * value those blocks hold at their scales; INFINITY when the weight is not FP8. */
static double block_cap(const Ctx *x, head_kind hk, int L, int idx, head_part part) {
    HeadBlock b;
    double cap = INFINITY;
    char *name = model_head_block(x->m, hk, L, idx, part, &b) == AL_OK ? model_tensor_name(x->m, L, b.suffix) : NULL;
    const st_entry *e;
    const void *sc;
    size_t scols, B = DT_FP8_BLOCK;
    if (name && b.nr && b.nc && store_entry(x->m->store, name, &e, NULL) == AL_OK && e->dtype == DT_F8_E4M3 &&
        e->ndim == 2 && store_fp8_scale(x->m->store, name, e->shape[0], e->shape[1], &sc, &scols) == AL_OK)
        for (size_t i = b.r0 / B; i <= (b.r0 + b.nr - 1) / B; i++)
            for (size_t j = b.c0 / B; j <= (b.c0 + b.nc - 1) / B; j++) {
                float s;
                memcpy(&s, (const char *)sc + (i * scols + j) * sizeof s, sizeof s);
                cap = fmin(cap, 448.0 * s);
            }
    al_err_clear();
    free(name);
    return cap;
}

static double mat_amax(const Mat *M) {
    double a = 0;
    for (size_t i = 0; M && i < M->rows * M->cols; i++) a = fmax(a, fabs(M->data[i]));
    return a;
}

/* dtype fp8 (not hf): W_V' = [F_V 0], W_O' = [F_O ; 0] may be written as c F_V and F_O / c (QK:
 * c F_K, F_Q / c) with the same fused map (to float rounding, far below FP8's). Per cut group, c
 * puts both sides' largest values under their blocks' old scales (the geometric mean of the
 * bounds), so the blocks keep their scales and the unchanged values in them their codes; when no c
 * fits both, the shared side fits (its blocks hold the K rows beside the V rows). */
static int balance_init(Ctx *x) {
    const ModelConfig *c = x->c;
    head_part part = c->qk_nope_dim > 0 && c->qk_rope_dim > 0 ? PART_NOPE : PART_ALL;
    for (int k = 0; k < 2; k++) {
        if (!x->plan[k] || !x->dtype_set || x->dtype != DT_F8_E4M3 || x->fmt == EXPORT_HF) continue;
        if (!(x->balance[k] = al_malloc3((size_t)c->n_layers, (size_t)c->n_heads, sizeof(float), "balances"))) return AL_ERR;
        for (size_t i = 0; i < (size_t)c->n_layers * (size_t)c->n_heads; i++) x->balance[k][i] = 1.0f;
        head_kind hs = k == FARR_VO ? HK_V : HK_K, hh = k == FARR_VO ? HK_O : HK_Q;
        head_part pt = k == FARR_VO ? PART_ALL : part;
        for (int L = 0; L < c->n_layers; L++) {
            const FarrTruncLayer *tl = cut_layer(x, (farr_kind)k, L);
            for (int g = 0; tl && !tl->shared_bias && !tl->head_bias && !tl->o_bias_delta && g < tl->n_kv; g++) {
                if (keep_group(tl, c, (farr_kind)k, g)) continue;
                double hi = block_cap(x, hs, L, g, pt) / mat_amax(tl->groups[g]->shared), lo = 0;   /* c <= hi */
                for (int h = 0; h < c->n_heads; h++)                                                /* c >= lo */
                    if (cfg_kv_group(c, h) == g)
                        lo = fmax(lo, mat_amax(plan_head_mat(x, x->plan[k], L, h)) / block_cap(x, hh, L, h, pt));
                hi *= 0.999, lo *= 1.001;                   /* room for the float rounding of c x F */
                if (isfinite(hi) && lo > 0 && hi > 0)     /* none fits both: the shared side (K rows beside V) */
                    x->balance[k][(size_t)L * (size_t)c->n_heads + (size_t)g] = (float)(lo <= hi ? sqrt(lo * hi) : hi);
            }
        }
    }
    return AL_OK;
}

/* True when `suffix` is the weight (or its bias: *bias) that holds the GQA views of `kind` in layer
 * L (model_head_block's suffix: q/k/v/o_proj, qkv_proj, query_key_value, dense). */
static bool gqa_holds(const Ctx *x, int L, head_kind kind, const char *suffix, bool *bias) {
    HeadBlock b;
    if (model_head_block(x->m, kind, L, 0, PART_ALL, &b) != AL_OK) { al_err_clear(); return false; }
    size_t n = strlen(b.suffix) - strlen("weight");
    *bias = strncmp(suffix, b.suffix, n) == 0 && strcmp(suffix + n, "bias") == 0;
    return strcmp(suffix, b.suffix) == 0 || *bias;
}

/* True when a layer's tensor `suffix` is role r's `what` ("weight", "bias"; NULL: either) in the
 * model's layouts (family.h): its name there, then "." and what. */
static bool is_role(const ModelConfig *c, const char *suffix, tensor_role r, const char *what) {
    const RoleName *rn = cfg_role(c, r);
    size_t n = rn ? strlen(rn->name) : 0;
    if (!rn || strncmp(suffix, rn->name, n) != 0 || suffix[n] != '.') return false;
    const char *rest = suffix + n + 1;
    return what ? strcmp(rest, what) == 0 : strcmp(rest, "weight") == 0 || strcmp(rest, "bias") == 0;
}

/* The attention tensors a truncation rewrites, per layout (HF suffixes, by role). */
static bool rewritten_suffix(const Ctx *x, const char *suffix, int L) {
    const FarrPlan *vo = cut_layer(x, FARR_VO, L) ? x->plan[FARR_VO] : NULL;
    const FarrPlan *qk = cut_layer(x, FARR_QK, L) ? x->plan[FARR_QK] : NULL;
    const ModelConfig *c = x->c;
    if (c->attn == QKV_CONV1D) {
        if (is_role(c, suffix, ROLE_QKV, NULL)) return vo || qk;
        if (is_role(c, suffix, ROLE_O, NULL)) return vo != NULL;
        return false;
    }
    if (cfg_is_mla(c)) {
        if (is_role(c, suffix, ROLE_KV_B, "weight")) return vo || qk;
        if (is_role(c, suffix, ROLE_O, "weight")) return vo != NULL;
        if (is_role(c, suffix, ROLE_Q_B, "weight") || is_role(c, suffix, ROLE_Q, "weight")) return qk != NULL;
        return false;
    }
    /* GQA layouts (split, Phi-3 qkv_proj, GPT-NeoX query_key_value): where the views live */
    bool bias;
    return (vo && (gqa_holds(x, L, HK_V, suffix, &bias) || gqa_holds(x, L, HK_O, suffix, &bias))) ||
           (qk && (gqa_holds(x, L, HK_Q, suffix, &bias) || gqa_holds(x, L, HK_K, suffix, &bias)));
}

/* Splits a tensor name into its layer and suffix; false when it is not a per-layer tensor. */
static bool layer_of(const Ctx *x, const char *name, int *L, const char **suffix) {
    char *pre = model_tensor_name(x->m, 0, "");
    if (!pre) return false;
    /* pre is "<prefix>layers.0." or "<prefix>h.0.": take the part before the 0 */
    size_t n = strlen(pre);
    pre[n - 2] = 0;
    size_t pn = strlen(pre);
    bool ok = strncmp(name, pre, pn) == 0;
    free(pre);
    if (!ok) return false;
    char *end;
    long v = strtol(name + pn, &end, 10);
    if (end == name + pn || *end != '.' || v < 0 || v >= x->c->n_layers) return false;
    *L = (int)v;
    *suffix = end + 1;
    return true;
}

/* ================================================================ rewriting tensors */

/* Each rewritten head is its factor written at the source's width, zeros past its rank: pad.h's pad_rows /
 * pad_cols / pad_vec, the padding truncate's layers and compare's compute-bf16 route write too. */

/* GQA layouts: the rows (Q/K/V, HF (out, in)) and columns (O) of each head where
 * model_head_block puts them -- Q/K over the part the QK plan fused (the NoPE rows of a
 * partial-rotary head; the RoPE rows stay) -- and the matching bias values. */
static void pad_gqa(const Ctx *x, int L, const char *suffix, Mat *W, size_t w0) {
    const ModelConfig *c = x->c;
    const FarrPlan *vo = x->plan[FARR_VO], *qk = x->plan[FARR_QK];
    const FarrTruncLayer *tv0 = cut_layer(x, FARR_VO, L), *tq0 = cut_layer(x, FARR_QK, L);
    head_part qpart = c->qk_nope_dim > 0 && c->qk_rope_dim > 0 ? PART_NOPE : PART_ALL;
    bool bias;
    for (int h = 0; h < c->n_heads; h++) {
        HeadBlock b;
        int g = cfg_kv_group(c, h);
        const FarrTruncLayer *tv = keep_group(tv0, c, FARR_VO, g) ? NULL : tv0;   /* kept: the source's */
        const FarrTruncLayer *tq = keep_group(tq0, c, FARR_QK, g) ? NULL : tq0;
        bool first = h == 0 || g != cfg_kv_group(c, h - 1);          /* each KV head once */
        if (tv && gqa_holds(x, L, HK_V, suffix, &bias) && first && !model_head_block(x->m, HK_V, L, g, PART_ALL, &b)) {
            if (bias) pad_vec(W->data + b.r0, b.nr, tv->shared_bias ? tv->shared_bias[g] : NULL, (size_t)plan_group(vo, L, g)->rank);
            else pad_rows(W, w0, b.r0, b.nr, pad_src(plan_group(vo, L, g)->shared, true, bal(x, FARR_VO, L, g)));
        }
        if (tv && gqa_holds(x, L, HK_O, suffix, &bias) && !model_head_block(x->m, HK_O, L, h, PART_ALL, &b)) {
            if (!bias) pad_cols(W, w0, b.c0, b.nc, pad_src(plan_head_mat(x, vo, L, h), false, 1.0f / bal(x, FARR_VO, L, g)));
            else if (h == 0 && tv->o_bias_delta)
                for (size_t i = 0; i < W->cols * W->rows; i++) W->data[i] += tv->o_bias_delta[i];
        }
        if (tq && gqa_holds(x, L, HK_Q, suffix, &bias) && !model_head_block(x->m, HK_Q, L, h, qpart, &b)) {
            const Mat *F = plan_head_mat(x, qk, L, h);
            if (bias) pad_vec(W->data + b.r0, b.nr, tq->head_bias ? tq->head_bias[h] : NULL, (size_t)F->cols);
            else pad_rows(W, w0, b.r0, b.nr, pad_src(F, true, 1.0f / bal(x, FARR_QK, L, g)));
        }
        if (tq && gqa_holds(x, L, HK_K, suffix, &bias) && first && !model_head_block(x->m, HK_K, L, g, qpart, &b)) {
            if (bias) pad_vec(W->data + b.r0, b.nr, NULL, 0);      /* b_K' = 0: constant per query */
            else pad_rows(W, w0, b.r0, b.nr, pad_src(plan_group(qk, L, g)->shared, true, bal(x, FARR_QK, L, g)));
        }
    }
}

/* The factors-format (zero-padded, same shape) version of tensor `suffix` of layer L. W holds
 * the original (dequantized) values of the weight's rows [w0, w0 + W->rows) and is edited in
 * place (a 1-D tensor: w0 = 0, whole). */
static void pad_tensor(const Ctx *x, int L, const char *suffix, Mat *W, size_t w0) {
    const ModelConfig *c = x->c;
    const FarrPlan *vo = x->plan[FARR_VO], *qk = x->plan[FARR_QK];
    const FarrTruncLayer *tv = cut_layer(x, FARR_VO, L), *tq = cut_layer(x, FARR_QK, L);
    int H = c->n_heads, G = c->n_kv_heads;
    size_t dqk = (size_t)cfg_d_qk(c), dv = (size_t)c->v_dim, nope = (size_t)c->qk_nope_dim;
    if (c->attn == QKV_CONV1D) {
        size_t D = (size_t)c->hidden, d = dqk;
        if (is_role(c, suffix, ROLE_QKV, "weight")) {
            for (int h = 0; tq && h < H; h++) pad_cols(W, w0, (size_t)h * d, d, pad_src(plan_head_mat(x, qk, L, h), true, 1.0f));
            for (int g = 0; tq && g < G; g++) pad_cols(W, w0, D + (size_t)g * d, d, pad_src(plan_group(qk, L, g)->shared, true, 1.0f));
            for (int g = 0; tv && g < G; g++)
                pad_cols(W, w0, 2 * D + (size_t)g * d, d, pad_src(plan_group(vo, L, g)->shared, true, 1.0f));
        } else if (is_role(c, suffix, ROLE_QKV, "bias")) {
            for (int h = 0; tq && h < H; h++)
                pad_vec(W->data + (size_t)h * d, d, tq->head_bias ? tq->head_bias[h] : NULL, (size_t)plan_head_mat(x, qk, L, h)->cols);
            for (int g = 0; tq && g < G; g++) pad_vec(W->data + D + (size_t)g * d, d, NULL, 0);
            for (int g = 0; tv && g < G; g++)
                pad_vec(W->data + 2 * D + (size_t)g * d, d, tv->shared_bias ? tv->shared_bias[g] : NULL,
                        (size_t)plan_group(vo, L, g)->rank);
        } else if (is_role(c, suffix, ROLE_O, "weight")) {
            for (int h = 0; h < H; h++) pad_rows(W, w0, (size_t)h * d, d, pad_src(plan_head_mat(x, vo, L, h), false, 1.0f));
        } else if (is_role(c, suffix, ROLE_O, "bias") && tv && tv->o_bias_delta) {
            for (size_t i = 0; i < D; i++) W->data[i] += tv->o_bias_delta[i];
        }
        return;
    }
    if (cfg_is_mla(c)) {
        size_t kvrow = nope + dv;
        /* MLA: one group per head; a head kept at full rank keeps the source's rows/columns */
        for (int h = 0; h < H; h++) {
            bool q = tq && !keep_group(tq, c, FARR_QK, h), v = tv && !keep_group(tv, c, FARR_VO, h);
            if (is_role(c, suffix, ROLE_Q_B, "weight") || is_role(c, suffix, ROLE_Q, "weight")) {
                if (q) pad_rows(W, w0, (size_t)h * dqk, nope, pad_src(plan_head_mat(x, qk, L, h), true, 1.0f / bal(x, FARR_QK, L, h)));
            } else if (is_role(c, suffix, ROLE_KV_B, "weight")) {
                if (q) pad_rows(W, w0, (size_t)h * kvrow, nope, pad_src(plan_group(qk, L, h)->shared, true, bal(x, FARR_QK, L, h)));
                if (v)
                    pad_rows(W, w0, (size_t)h * kvrow + nope, dv, pad_src(plan_group(vo, L, h)->shared, true, bal(x, FARR_VO, L, h)));
            } else if (is_role(c, suffix, ROLE_O, "weight")) {
                if (v) pad_cols(W, w0, (size_t)h * dv, dv, pad_src(plan_head_mat(x, vo, L, h), false, 1.0f / bal(x, FARR_VO, L, h)));
            }
        }
        return;
    }
    pad_gqa(x, L, suffix, W, w0);
}

/* Copies row src_row of S into row dst_row of D, times s. */
static void copy_row(Mat *D, size_t dst_row, const Mat *S, size_t src_row, float s) {
    for (size_t i = 0; i < D->cols; i++) D->data[dst_row * D->cols + i] = s * S->data[src_row * S->cols + i];
}

/* The hf-format (resliced) version of an MLA tensor of layer L, from the original O. o_proj may
 * be a stripe: O holds its rows [w0, w0 + O->rows) (the others: w0 = 0, O whole). */
static Mat *reslice_tensor(const Ctx *x, int L, const char *suffix, const Mat *O, size_t w0) {
    const ModelConfig *c = x->c;
    const FarrPlan *vo = cut_layer(x, FARR_VO, L) ? x->plan[FARR_VO] : NULL;
    const FarrPlan *qk = cut_layer(x, FARR_QK, L) ? x->plan[FARR_QK] : NULL;
    size_t H = (size_t)c->n_heads, nope = (size_t)c->qk_nope_dim, rope = (size_t)c->qk_rope_dim, dv = (size_t)c->v_dim;
    size_t n2 = (size_t)x->nope2, v2 = (size_t)x->v2;
    Mat *W = NULL;
    if (is_role(c, suffix, ROLE_Q_B, "weight") || is_role(c, suffix, ROLE_Q, "weight")) {
        float s = (float)x->q_scale;
        if (!(W = mat_new(H * (n2 + rope), O->cols))) return NULL;
        for (size_t h = 0; h < H; h++) {
            Mat tmp = { .rows = n2, .cols = O->cols, .data = W->data + h * (n2 + rope) * O->cols };
            if (qk) pad_rows(&tmp, 0, 0, n2, pad_src(plan_head_mat(x, qk, L, (int)h), true, 1.0f));
            else for (size_t j = 0; j < n2; j++) copy_row(&tmp, j, O, h * (nope + rope) + j, 1.0f);
            for (size_t j = 0; j < n2 * O->cols; j++) tmp.data[j] *= s;
            for (size_t t = 0; t < rope; t++) copy_row(W, h * (n2 + rope) + n2 + t, O, h * (nope + rope) + nope + t, s);
        }
    } else if (is_role(c, suffix, ROLE_KV_B, "weight")) {
        if (!(W = mat_new(H * (n2 + v2), O->cols))) return NULL;
        for (size_t h = 0; h < H; h++) {
            size_t base = h * (n2 + v2), obase = h * (nope + dv);
            if (qk) pad_rows(W, 0, base, n2, pad_src(plan_group(qk, L, (int)h)->shared, true, 1.0f));
            else for (size_t j = 0; j < n2; j++) copy_row(W, base + j, O, obase + j, 1.0f);
            if (vo) pad_rows(W, 0, base + n2, v2, pad_src(plan_group(vo, L, (int)h)->shared, true, 1.0f));
            else for (size_t j = 0; j < v2; j++) copy_row(W, base + n2 + j, O, obase + nope + j, 1.0f);
        }
    } else if (is_role(c, suffix, ROLE_O, "weight")) {
        if (!(W = mat_new(O->rows, H * v2))) return NULL;
        for (size_t h = 0; h < H; h++) {
            if (vo) pad_cols(W, w0, h * v2, v2, pad_src(plan_head_mat(x, vo, L, (int)h), false, 1.0f));
            else for (size_t i = 0; i < O->rows; i++)
                for (size_t j = 0; j < v2; j++) W->data[i * W->cols + h * v2 + j] = O->data[i * O->cols + h * dv + j];
        }
    } else {
        al_err("internal: no hf reslicing for %s", suffix);
    }
    return W;
}

/* A rewritten tensor, computed when its shard is written (so a shard of them never sits in
 * memory whole). */
typedef struct {
    Ctx *x;
    const char *name, *suffix;   /* the store's name and its per-layer suffix */
    const st_entry *e;           /* the source tensor */
    dt_type dt;                  /* the dtype it is written in */
    int L;
    bool scale;                  /* the FP8 "_scale_inv" of the weight written just before */
    size_t units;                /* FP8 per tensor / channel (fp8ct.h): its scale's values (1 or rows); 0: a grid */
    dt_type sdt;                 /* ... and their dtype */
} Job;

/* The (rows, cols) of an hf-format (resliced) MLA tensor, from the source's. */
static void rewritten_rows_cols(const Ctx *x, const char *suffix, size_t *rows, size_t *cols) {
    size_t H = (size_t)x->c->n_heads, rope = (size_t)x->c->qk_rope_dim, n2 = (size_t)x->nope2, v2 = (size_t)x->v2;
    if (is_role(x->c, suffix, ROLE_KV_B, "weight")) *rows = H * (n2 + v2);
    else if (is_role(x->c, suffix, ROLE_O, "weight")) *cols = H * v2;
    else *rows = H * (n2 + rope);                  /* q_b_proj / q_proj */
}

/* The shape of the rewritten tensor: the source's (factors) or resliced (hf); ST_MAX_DIMS. */
static int rewritten_shape(const Ctx *x, const char *suffix, const st_entry *e, size_t *shape) {
    memcpy(shape, e->shape, sizeof e->shape);
    if (x->fmt != EXPORT_HF) return e->ndim;
    rewritten_rows_cols(x, suffix, &shape[0], &shape[1]);
    return 2;
}

/* Adds ||dec - W||^2 and ||W||^2 to acc, dec being the n values W was stored as (in dt at p). */
static int measure(dt_type dt, const void *p, const float *scale, size_t r0, const Mat *W, double acc[2]) {
    float *dec = al_malloc3(W->rows, W->cols, sizeof(float), "a check of the encoding");
    if (!dec) return AL_ERR;
    if (dt == DT_F8_E4M3)
        dt_fp8_dequant(p, W->cols, scale, dt_fp8_nblocks(W->cols), r0, W->rows, 0, W->cols, dec, W->cols);
    else if (dt_to_f32(dt, (const uint8_t *)p + r0 * W->cols * dt_size(dt), W->rows * W->cols, dec) != AL_OK) {
        free(dec);
        return AL_ERR;
    }
    for (size_t i = 0; i < W->rows * W->cols; i++) {
        double d = (double)dec[i] - W->data[i];
        acc[0] += d * d;
        acc[1] += (double)W->data[i] * W->data[i];
    }
    free(dec);
    return AL_OK;
}

/* store_rows of a per-tensor / per-channel FP8 weight (fp8ct.h): its scales into x->scale, one per
 * row (channel) or x->scale[0] set before (tensor: the first pass only takes the amax). */
static int store_rows_ct(Ctx *x, const Job *j, const Mat *W, const Mat *Old, size_t r0, uint8_t *dst, double acc[2]) {
    const float *rs;
    const st_file *f;
    const st_entry *e;
    if (x->ct_pass) { x->ct_amax = fmax(x->ct_amax, mat_amax(W)); return AL_OK; }
    if (store_fp8_rscale(x->m->store, j->name, j->e->shape[0], &rs) != AL_OK || !rs ||
        store_entry(x->m->store, j->name, &e, &f) != AL_OK)
        return al_err("internal: no per-row FP8 scales for %s", j->name);
    for (size_t i = 0; i < W->rows; i++) {
        const float *w = W->data + i * W->cols;
        size_t r = r0 + i;
        if (j->units > 1) {
            Mat row = {.rows = 1, .cols = W->cols, .data = (float *)w};
            x->scale[r] = fp8ct_scale(rs[r], mat_amax(&row), j->sdt);
        }
        fp8ct_encode_row(w, W->cols, x->scale[j->units > 1 ? r : 0], Old ? Old->data + i * W->cols : NULL,
                         (const uint8_t *)st_data(f, e) + r * W->cols, rs[r], dst + r * W->cols, acc);
    }
    return AL_OK;
}

/* Stores W (rows [r0, r0 + W->rows) of the rewritten tensor, r0 a multiple of DT_FP8_BLOCK) in
 * j->dt into dst (the whole tensor's bytes) and measures what the encoding added (acc). FP8 fills
 * the matching rows of scale blocks too: from an FP8 source of the same shape (Old: the source's
 * values of these rows) its unchanged blocks, scales and values are kept (dt_fp8_reencode_rows),
 * else fresh 128x128 scales. */
static int store_rows(Ctx *x, const Job *j, const Mat *W, const Mat *Old, size_t r0, uint8_t *dst, double acc[2]) {
    size_t n = W->rows * W->cols;
    if (j->dt != DT_F8_E4M3) {
        if (dt_from_f32(j->dt, W->data, n, dst + r0 * W->cols * dt_size(j->dt)) != AL_OK) return AL_ERR;
        return measure(j->dt, dst, NULL, r0, W, acc);
    }
    if (j->units) return store_rows_ct(x, j, W, Old, r0, dst, acc);
    const void *old_scale;
    size_t scols, nb = dt_fp8_nblocks(W->cols);
    const st_file *f;
    const st_entry *e;
    if (Old && j->e->dtype == DT_F8_E4M3 && store_entry(x->m->store, j->name, &e, &f) == AL_OK &&
        store_fp8_scale(x->m->store, j->name, e->shape[0], e->shape[1], &old_scale, &scols) == AL_OK && scols == nb) {
        const uint8_t *old = (const uint8_t *)st_data(f, e) + r0 * W->cols;
        x->rep.fp8_blocks_kept += dt_fp8_reencode_rows(W->data, Old->data, old, old_scale, scols, r0, W->rows,
                                                       W->cols, dst + r0 * W->cols, x->scale);
    } else {
        al_err_clear();
        st_fp8_blocks(W, dst + r0 * W->cols, x->scale + (r0 / DT_FP8_BLOCK) * nb);
    }
    x->rep.fp8_blocks += nb;
    return measure(DT_F8_E4M3, dst, x->scale, r0, W, acc);
}

/* Factors format (padded in place), and hf's o_proj (columns resliced): read, rewritten and stored
 * DT_FP8_BLOCK rows at a time, so no float copy of a whole weight is ever made (an R1 o_proj is
 * 470 MB as float). */
static int fill_striped(Ctx *x, const Job *j, uint8_t *dst, size_t R, double acc[2]) {
    int rc = AL_OK;
    for (size_t r0 = 0; rc == AL_OK && r0 < R; r0 += DT_FP8_BLOCK) {
        size_t nr = R - r0 < DT_FP8_BLOCK ? R - r0 : DT_FP8_BLOCK;
        Mat *W = NULL, *Old = NULL;
        rc = store_read_rows(x->m->store, j->name, r0, nr, &W);
        if (rc == AL_OK && x->fmt == EXPORT_HF) {
            Mat *O = W;
            W = reslice_tensor(x, j->L, j->suffix, O, r0);
            mat_free(O);
            rc = W ? AL_OK : AL_ERR;
        } else if (rc == AL_OK) {
            if (j->dt == DT_F8_E4M3 && !(Old = mat_copy(W))) rc = AL_ERR;
            pad_tensor(x, j->L, j->suffix, W, r0);
        }
        if (rc == AL_OK) rc = store_rows(x, j, W, Old, r0, dst, acc);
        mat_free(W);
        mat_free(Old);
    }
    return rc;
}

/* A per-tensor FP8 weight's one scale (fp8ct.h) from a first pass over its rewritten rows. */
static int fill_ct_tensor_scale(Ctx *x, const Job *j, uint8_t *dst, size_t R, double acc[2]) {
    const float *rs;
    if (store_fp8_rscale(x->m->store, j->name, j->e->shape[0], &rs) != AL_OK || !rs)
        return al_err("internal: no FP8 scale for %s", j->name);
    x->ct_pass = true;
    x->ct_amax = 0;
    int rc = fill_striped(x, j, dst, R, acc);
    x->ct_pass = false;
    x->scale[0] = fp8ct_scale(rs[0], x->ct_amax, j->sdt);
    return rc;
}

static int fill_rewritten(void *ud, void *dst, size_t nbytes) {
    Job *j = ud;
    Ctx *x = j->x;
    if (j->scale) {        /* in the source grid's dtype (j->dt): its old scales times 2^k, exact */
        size_t n = x->scale_bytes / sizeof(float);
        if (!x->scale || n * dt_size(j->dt) != nbytes) return al_err("internal: no FP8 scales for %s", j->name);
        if (dt_from_f32(j->dt, x->scale, n, dst) != AL_OK) return AL_ERR;
        free(x->scale);
        x->scale = NULL;
        return AL_OK;
    }
    size_t R = 0, C = 0;
    if (store_shape2(x->m->store, j->name, &R, &C) != AL_OK) return AL_ERR;
    size_t rows = R, cols = C;
    if (x->fmt == EXPORT_HF) rewritten_rows_cols(x, j->suffix, &rows, &cols);
    if (rows * cols * dt_size(j->dt) != nbytes)
        return al_err("internal: %s rewritten to %zu value%s, %zu byte%s were planned", j->name, rows * cols, al_s(rows * cols), nbytes, al_s(nbytes));
    free(x->scale);
    x->scale = NULL;
    if (j->dt == DT_F8_E4M3) {
        x->scale_bytes = (j->units ? j->units : dt_fp8_nblocks(rows) * dt_fp8_nblocks(cols)) * sizeof(float);
        if (!(x->scale = al_malloc(x->scale_bytes, j->name))) return AL_ERR;
    }
    int rc = AL_OK;
    double acc[2] = {0, 0};
    if (j->units == 1) rc = fill_ct_tensor_scale(x, j, dst, R, acc);
    if (rc == AL_OK && (x->fmt != EXPORT_HF || is_role(x->c, j->suffix, ROLE_O, "weight"))) {
        rc = fill_striped(x, j, dst, R, acc);
    } else {
        Mat *O = NULL, *W = NULL;
        if (store_read(x->m->store, j->name, &O) != AL_OK) return AL_ERR;
        W = reslice_tensor(x, j->L, j->suffix, O, 0);
        mat_free(O);
        rc = W ? store_rows(x, j, W, NULL, 0, dst, acc) : AL_ERR;
        mat_free(W);
    }
    if (acc[1] > 0) x->rep.reenc_err = fmax(x->rep.reenc_err, sqrt(acc[0] / acc[1]));
    store_release_prefix(x->m->store, j->name);   /* its pages are written now */
    return rc;
}

/* The dtype a changed tensor of the source's dtype `src` is written in (ExportOpts.dtype). */
static dt_type out_dtype(const Ctx *x, dt_type src) {
    return x->dtype_set ? x->dtype : src == DT_F8_E4M3 ? DT_BF16 : src;
}

/* Notes a re-encoded tensor in the report; an FP8 weight leaving FP8 joins keep_bf (its module). */
static int note_reencoded(Ctx *x, const char *name, const char *suffix, int L, dt_type from, dt_type to) {
    ExportReport *r = &x->rep;
    if (r->reenc_tensors++ == 0) r->reenc_from = from, r->reenc_to = to, r->reenc_lo = r->reenc_hi = L;
    r->reenc_lo = L < r->reenc_lo ? L : r->reenc_lo;
    r->reenc_hi = L > r->reenc_hi ? L : r->reenc_hi;
    if (to == DT_F8_E4M3) r->reenc_to = to;     /* dtype fp8 with some modules in BF16 (fp8ct.h): FP8's error */
    if (!strstr(r->reenc_names, suffix) && strlen(r->reenc_names) + strlen(suffix) + 3 < sizeof r->reenc_names)
        snprintf(r->reenc_names + strlen(r->reenc_names), sizeof r->reenc_names - strlen(r->reenc_names), "%s%s",
                 *r->reenc_names ? ", " : "", suffix);
    if (from != DT_F8_E4M3 || to == DT_F8_E4M3) return AL_OK;
    char **k = realloc(x->keep_bf, (x->n_keep_bf + 1) * sizeof *k);
    if (!k) return al_err("out of memory");
    x->keep_bf = k;
    size_t n = strlen(name);
    k[x->n_keep_bf] = strndup(name, n > 7 && !strcmp(name + n - 7, ".weight") ? n - 7 : n);
    return k[x->n_keep_bf++] ? AL_OK : al_err("out of memory");
}

/* The per-tensor / per-channel scale of FP8 weight `name` (fp8ct.h: "<w>_scale" not a block grid, read
 * by the store as one float per row), or NULL (then no error is left). */
static const st_entry *ct_scale_entry(const Ctx *x, const char *name, const st_entry *e) {
    const float *rs = NULL;
    const st_entry *se = NULL;
    char *sn = e->dtype == DT_F8_E4M3 && e->ndim == 2 ? al_asprintf("%s_scale", name) : NULL;
    if (!sn || store_fp8_rscale(x->m->store, name, e->shape[0], &rs) != AL_OK || !rs ||
        store_entry(x->m->store, sn, &se, NULL) != AL_OK)
        se = NULL;
    al_err_clear();
    free(sn);
    return se;
}

/* Whether rewritten FP8 weight `name` (layer suffix `suffix`) of a per-tensor / per-channel source
 * is written in BF16 under dtype fp8 (fp8ct.h): its module has a static input_scale and the truncation
 * changes its input (o_proj after a VO cut), so no calibrated input scale exists for it. */
static bool ct_input_changes(const Ctx *x, const char *name, const st_entry *e, const char *suffix) {
    size_t n = strlen(name);
    if (!is_role(x->c, suffix, ROLE_O, "weight") || n < 7 || !ct_scale_entry(x, name, e)) return false;
    char *in = al_asprintf("%.*sinput_scale", (int)(n - 6), name);
    bool yes = in && store_entry(x->m->store, in, &e, NULL) == AL_OK;
    al_err_clear();
    free(in);
    return yes;
}

/* The dtype rewritten tensor `name` is written in: out_dtype, but BF16 for a weight ct_input_changes. */
static dt_type rewritten_dtype(const Ctx *x, const char *name, const st_entry *e, const char *suffix) {
    dt_type dt = out_dtype(x, e->dtype);
    return dt == DT_F8_E4M3 && ct_input_changes(x, name, e, suffix) ? DT_BF16 : dt;
}

/* Whether weight `suffix` of layer L, quantized in the source and left unchanged by the cut, is written
 * unquantized all the same (quant_fused.h): vLLM fuses it with another shard (q/k/v_proj into qkv_proj)
 * which the cut rewrites and writes unquantized (BF16, or the dtype asked; dtype fp8 keeps them all
 * FP8), and refuses a fused layer whose shards are not all quantized alike. Not in format hf (MLA:
 * its fused q_a_proj / kv_a_proj_with_mqa are never rewritten). */
static bool fused_sibling(const Ctx *x, const char *suffix, int L) {
    char sh[QUANT_FUSED_MAX][256], mod[256], shw[264];
    size_t n = strlen(suffix);
    if (x->fmt == EXPORT_HF || n <= 7 || strcmp(suffix + n - 7, ".weight") || out_dtype(x, DT_F8_E4M3) == DT_F8_E4M3 ||
        rewritten_suffix(x, suffix, L))
        return false;
    snprintf(mod, sizeof mod, "%.*s", (int)(n - 7), suffix);
    int k = quant_fused_shards(mod, sh, NULL);
    bool other = false;
    for (int i = 0; i < k && !other; i++)
        other = strcmp(sh[i], mod) && snprintf(shw, sizeof shw, "%s.weight", sh[i]) < (int)sizeof shw &&
                rewritten_suffix(x, shw, L);
    char *name = other ? model_tensor_name(x->m, L, suffix) : NULL;
    const st_entry *e;
    dt_fp4 q = {.enc = DT_FP4_NONE};
    bool quantized = name && ((store_entry(x->m->store, name, &e, NULL) == AL_OK && e->dtype == DT_F8_E4M3) ||
                              (store_fp4(x->m->store, name, &q) == AL_OK && q.enc != DT_FP4_NONE));
    al_err_clear();
    free(name);
    return quantized;
}

/* A layer's tensor the export writes anew: rewritten by the cut, or its fused_sibling. */
static bool written_suffix(const Ctx *x, const char *suffix, int L) {
    return rewritten_suffix(x, suffix, L) || fused_sibling(x, suffix, L);
}

/* The scale form a rewritten FP8 weight `name` is written with: the source's own, under the source's
 * name and dtype. A block grid (fill_striped re-encodes each block at its old scale times 2^k) --
 * DeepSeek's "<w>_scale_inv" in F32 (DeepSeek, MiniMax, GLM), BF16 (Qwen3-*-FP8) or F8_E8M0,
 * compressed-tensors FP8_BLOCK's "<w>_scale" -- so the rewritten module reads as its untouched
 * neighbours do; or a per-tensor / per-channel "<w>_scale" (*ct its entry, fp8ct.h), its shape kept. */
static int fp8_grid_form(const Ctx *x, const char *name, const st_entry *e, char **sname, dt_type *sdt,
                         const st_entry **ct) {
    const void *sc;
    size_t scols;
    const st_entry *se;
    const st_file *sf;
    if ((*ct = ct_scale_entry(x, name, e))) {
        *sdt = (*ct)->dtype;
        *sname = al_asprintf("%s_scale", name);
        return *sname ? AL_OK : AL_ERR;
    }
    if (store_fp8_scale(x->m->store, name, e->shape[0], e->shape[1], &sc, &scols) != AL_OK) {
        al_err_clear();
        return al_err("tensor '%s': dtype fp8 writes FP8 with the source's scales (a 128 x 128 block grid, or a "
                      "per-tensor / per-channel weight_scale), and its source has none; use bf16 or f32", name);
    }
    *sname = al_asprintf("%s_scale_inv", name);
    if (*sname && store_entry(x->m->store, *sname, &se, &sf) != AL_OK) {
        free(*sname);
        *sname = al_asprintf("%s_scale", name);      /* compressed-tensors' FP8_BLOCK grid */
        if (*sname && store_entry(x->m->store, *sname, &se, &sf) != AL_OK) {
            free(*sname);
            *sname = NULL;
            return al_err("tensor '%s': its block scales are not named <w>_scale_inv or <w>_scale; dtype fp8 "
                          "cannot write them in its form", name);
        }
    }
    if (!*sname) return AL_ERR;
    *sdt = se->dtype;
    return AL_OK;
}

/* Notes a fused_sibling written unquantized (its suffix once in fused_names). */
static void note_fused_plain(ExportReport *r, const char *suffix) {
    size_t n = strlen(r->fused_names);
    r->fused_plain++;
    if (!strstr(r->fused_names, suffix) && n + strlen(suffix) + 3 < sizeof r->fused_names)
        snprintf(r->fused_names + n, sizeof r->fused_names - n, "%s%s", n ? ", " : "", suffix);
}

/* Adds a rewritten tensor in its output dtype (FP8 with block scales in the source's form,
 * fp8_grid_form), computed when the shard is written. */
static int add_rewritten(Ctx *x, CkptWriter *w, const char *name, const st_entry *e, int L, const char *suffix) {
    dt_type dt = rewritten_dtype(x, name, e, suffix);
    if (dt == DT_BF16 && out_dtype(x, e->dtype) == DT_F8_E4M3) x->rep.ct_bf16++;
    if (!dt_is_float(e->dtype) || e->dtype == DT_F8_E5M2 || e->dtype == DT_F64)
        return al_err("tensor '%s': cannot write dtype %s after truncation", name, dt_name(e->dtype));
    if (dt == DT_F8_E4M3 && (e->ndim != 2 || e->dtype != DT_F8_E4M3))
        return al_err("tensor '%s' (%s): dtype fp8 re-encodes FP8 weights only; use bf16 or f32", name, dt_name(e->dtype));
    char *sname = NULL;
    dt_type sdt = DT_F32;
    const st_entry *ct = NULL;
    if (dt == DT_F8_E4M3 && fp8_grid_form(x, name, e, &sname, &sdt, &ct) != AL_OK) return AL_ERR;
    if (note_reencoded(x, name, suffix, L, e->dtype, dt) != AL_OK) { free(sname); return AL_ERR; }
    if (!rewritten_suffix(x, suffix, L)) note_fused_plain(&x->rep, suffix);
    size_t shape[ST_MAX_DIMS], numel = 1;
    int nd = rewritten_shape(x, suffix, e, shape);
    for (int d = 0; d < nd; d++) numel *= shape[d];
    Job *j = al_malloc(sizeof *j, name);
    if (!j) { free(sname); return AL_ERR; }
    size_t sshape[ST_MAX_DIMS] = {dt_fp8_nblocks(shape[0]), dt_fp8_nblocks(shape[1])}, units = sshape[0] * sshape[1];
    int snd = 2;
    if (ct) {          /* per tensor / channel: the source's shape ([], [1], [R, 1]), one value per unit */
        snd = ct->ndim;
        memcpy(sshape, ct->shape, sizeof sshape);
        units = 1;
        for (int d = 0; d < snd; d++) units *= sshape[d];
    }
    *j = (Job){.x = x, .name = name, .suffix = suffix, .e = e, .dt = dt, .L = L, .units = ct ? units : 0, .sdt = sdt};
    int rc = ckpt_add_lazy(w, name, dt, nd, shape, numel * dt_size(dt), fill_rewritten, j);
    if (rc != AL_OK || dt != DT_F8_E4M3) { free(sname); return rc; }
    Job *js = al_malloc(sizeof *js, name);
    if (!js) { free(sname); return AL_ERR; }
    *js = (Job){.x = x, .name = name, .suffix = suffix, .e = e, .dt = sdt, .L = L, .scale = true};
    rc = ckpt_add_lazy(w, sname, sdt, snd, sshape, units * dt_size(sdt), fill_rewritten, js);
    free(sname);
    return rc;
}

/* ---------------------------------------------------------------- FP4 sources (tensor.h) */

/* The pieces of an FP4 weight the truncation rewrites: the weight itself (NVFP4's U8 "<w>"),
 * "<w>_blocks" (MXFP4) or "<w>_packed" (compressed-tensors), written as the rewritten tensor w (1);
 * "<w>_scales", "<w>_scale", "<w>_scale_2", "<w>_global_scale" and the module's "input_scale" /
 * "input_global_scale" go with it (2); 0 for anything else. w (cap bytes, or NULL) gets the weight's
 * name. */
static int fp4_piece(const Ctx *x, const char *name, char *w, size_t cap) {
    static const struct { const char *suf; int what; } pieces[] = {
        {"_blocks", 1}, {"_packed", 1}, {"_scales", 2}, {"_scale_2", 2}, {".input_global_scale", 2},
        {"_global_scale", 2}, {".input_scale", 2}, {"_scale", 2}, {"_shape", 2}, {"", 1}};    /* longer suffixes first */
    char buf[512];
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++) {
        size_t sn = strlen(pieces[i].suf);
        if (n < sn || strcmp(name + n - sn, pieces[i].suf) != 0 || n - sn + 8 > sizeof buf) continue;
        snprintf(buf, sizeof buf, "%.*s%s", (int)(n - sn), name, pieces[i].suf[0] == '.' ? ".weight" : "");
        int L;
        const char *suffix;
        dt_fp4 q;
        if (!layer_of(x, buf, &L, &suffix) || !written_suffix(x, suffix, L)) return 0;
        if (store_fp4(x->m->store, buf, &q) != AL_OK) { al_err_clear(); return 0; }
        if (q.enc == DT_FP4_NONE) return 0;
        if (w) snprintf(w, cap, "%s", buf);
        return pieces[i].what;
    }
    return 0;
}

/* A rewritten FP4 weight `w` as an entry of its logical shape, BF16 (what it is written in by
 * default), owned by x; its module joins keep_bf. NULL + error when out of memory. */
static const st_entry *fp4_entry(Ctx *x, const char *w) {
    dt_fp4 q;
    if (store_fp4(x->m->store, w, &q) != AL_OK) return NULL;
    st_entry **a = realloc(x->fp4, (x->n_fp4 + 1) * sizeof *a), *e;
    if (!a) { al_err("out of memory"); return NULL; }
    x->fp4 = a;
    if (!(e = al_calloc(1, sizeof *e, w)) || !(e->name = strdup(w))) { free(e); al_err("out of memory"); return NULL; }
    e->dtype = DT_BF16;
    e->ndim = 2;
    e->shape[0] = q.rows;
    e->shape[1] = q.cols;
    x->fp4[x->n_fp4++] = e;
    char **k = realloc(x->keep_bf, (x->n_keep_bf + 1) * sizeof *k);
    if (!k) { al_err("out of memory"); return NULL; }
    x->keep_bf = k;
    size_t n = strlen(w);
    if (!(k[x->n_keep_bf] = strndup(w, n > 7 && !strcmp(w + n - 7, ".weight") ? n - 7 : n))) { al_err("out of memory"); return NULL; }
    x->n_keep_bf++;
    return e;
}

/* The FP4 weight whose piece `name` stands for it, rewritten (in BF16 unless `dtype` says). */
static int fp4_rewrite(Ctx *x, CkptWriter *w, const char *name) {
    char w4[512];
    int L;
    const char *suffix;
    fp4_piece(x, name, w4, sizeof w4);
    const st_entry *le = fp4_entry(x, w4);
    if (!le) return AL_ERR;
    dt_fp4 q;
    if (!x->rep.reenc_tensors && store_fp4(x->m->store, w4, &q) == AL_OK) x->rep.reenc_fp4 = q.enc;
    return layer_of(x, le->name, &L, &suffix) ? add_rewritten(x, w, le->name, le, L, suffix) : al_err("internal: %s", w4);
}

/* Is `name` the scale tensor of a rewritten FP8 weight: its "_scale_inv" (DeepSeek), or compressed-
 * tensors' "<w>_scale" (add_rewritten writes the new one), and the module's "input_scale" unless the
 * weight stays FP8 (fp8ct.h: the input it calibrates is unchanged; otherwise the weight is listed as
 * not quantized)? */
/* Adds word w to the sep-joined words of buf (cap bytes) when it is not there yet. */
static void join_once(char *buf, size_t cap, const char *w, const char *sep) {
    size_t n = strlen(buf);
    if (!strstr(buf, w) && n + strlen(sep) + strlen(w) < cap) snprintf(buf + n, cap - n, "%s%s", n ? sep : "", w);
}

static bool is_dropped_scale(Ctx *x, const char *name) {
    static const char *const sufs[] = {".weight_scale_inv", ".weight_scale", ".input_scale"};
    size_t n = strlen(name), k = 0;
    while (k < 3 && (n <= strlen(sufs[k]) || strcmp(name + n - strlen(sufs[k]), sufs[k]) != 0)) k++;
    if (k == 3) return false;
    char *w = al_asprintf("%.*s.weight", (int)(n - strlen(sufs[k])), name);
    if (!w) return false;
    int L;
    const char *s;
    bool drop = false;
    if (layer_of(x, w, &L, &s) && written_suffix(x, s, L)) {
        const st_entry *e;
        drop = store_entry(x->m->store, w, &e, NULL) == AL_OK && e->dtype == DT_F8_E4M3 &&
               (k < 2 || rewritten_dtype(x, w, e, s) != DT_F8_E4M3);
        if (drop && rewritten_dtype(x, w, e, s) != DT_F8_E4M3) x->rep.dropped_scales |= 1u << k;
    }
    free(w);
    return drop;
}

/* Is `name` a static KV cache scale (quant_fused.h) of a layer whose cached keys or values the cut
 * changes (a VO cut's values, a QK cut's keys; an MLA cache holds the latent, which no cut changes)?
 * It was calibrated on the source's values, so it is dropped: k_scale and v_scale together (vLLM copies
 * one found alone to the other, or asserts), q_scale under a QK cut. vLLM then takes 1.0 for both. */
static bool is_stale_kv_scale(Ctx *x, const char *name) {
    int L, side = quant_kv_scale(name);
    const char *suffix;
    if (!side || cfg_is_mla(x->c) || !layer_of(x, name, &L, &suffix)) return false;
    bool qk = cut_layer(x, FARR_QK, L) != NULL;
    if (!(side == 'q' ? qk : qk || cut_layer(x, FARR_VO, L))) return false;
    ExportReport *r = &x->rep;
    if (r->kv_scales_dropped++ == 0) r->kv_lo = r->kv_hi = L;
    r->kv_q |= side == 'q';
    r->kv_lo = L < r->kv_lo ? L : r->kv_lo;
    r->kv_hi = L > r->kv_hi ? L : r->kv_hi;
    return true;
}

/* Writes one output shard: the tensors of source shard `src` in order; copied tensors are
 * streamed from the source's mapping. */
static int write_shard(Ctx *x, CkptWriter *w, const char *src) {
    const Store *s = x->m->store;
    int rc = AL_OK;
    for (size_t i = 0; rc == AL_OK && i < store_count(s); i++) {
        const char *name = store_name_at(s, i);
        const st_entry *e;
        const st_file *f;
        if ((rc = store_entry(s, name, &e, &f)) != AL_OK) break;
        if (strcmp(st_path(f), src) != 0 || is_dropped_scale(x, name) || is_stale_kv_scale(x, name)) continue;
        int L;
        const char *suffix;
        int piece = fp4_piece(x, name, NULL, 0);
        if (piece) {
            if (piece == 1 && (rc = fp4_rewrite(x, w, name)) == AL_OK) x->rep.tensors_rewritten++;
        } else if (layer_of(x, name, &L, &suffix) && written_suffix(x, suffix, L)) {
            rc = add_rewritten(x, w, name, e, L, suffix);
            x->rep.tensors_rewritten++;
        } else {
            rc = ckpt_add(w, name, e->dtype, e->ndim, e->shape, st_data(f, e), e->end - e->begin);
            x->rep.tensors_copied++;
        }
    }
    if (rc == AL_OK) rc = ckpt_shard_end(w);
    store_release_prefix(s, "");   /* the pages the copies were streamed from: written now */
    if (rc == AL_ERR) al_err_ctx("writing the shard from %s", src);
    return rc;
}

/* ================================================================ manifest and factors */

/* The counts the plan and each of its layers report, under the same keys at both levels:
 * count = (params_before, params_after, kv_before, kv_after), quality = (energy_min,
 * energy_mean, err_max). */
static void add_counts(cJSON *o, const size_t count[4], const double quality[3]) {
    static const char *const count_keys[4] = {"params_before", "params_after", "kv_values_before", "kv_values_after"};
    static const char *const quality_keys[3] = {"energy_min", "energy_mean", "rel_error_max"};
    for (int i = 0; i < 4; i++) cJSON_AddNumberToObject(o, count_keys[i], (double)count[i]);
    for (int i = 0; i < 3; i++) cJSON_AddNumberToObject(o, quality_keys[i], quality[i]);
}

static cJSON *plan_json(const Ctx *x, const FarrPlan *p) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "kind", farr_kind_name(p->opts.kind));
    cJSON_AddStringToObject(j, "criterion", p->opts.by_rank ? "rank" : "tau");
    if (p->opts.by_rank) cJSON_AddNumberToObject(j, "rank", p->opts.rank);
    else cJSON_AddNumberToObject(j, "tau", p->opts.tau);
    cJSON_AddStringToObject(j, "policy", farr_policy_name(p->opts.policy));
    cJSON *lr = cJSON_AddArrayToObject(j, "layers");
    cJSON_AddItemToArray(lr, cJSON_CreateNumber(p->lo));
    cJSON_AddItemToArray(lr, cJSON_CreateNumber(p->hi));
    cJSON_AddStringToObject(j, "fused_columns", p->opts.kind == FARR_VO ? "all" :
                            x->c->qk_nope_dim && x->c->qk_rope_dim ? "nope" : "all");
    add_counts(j, (size_t[4]){p->params_before, p->params_after, p->kv_before, p->kv_after},
               (double[3]){p->energy_min, p->energy_mean, p->err_max});
    cJSON_AddNumberToObject(j, "rel_error_mean", p->err_mean);
    cJSON *layers = cJSON_AddArrayToObject(j, "per_layer");
    for (int L = p->lo; L <= p->hi; L++) {
        const FarrTruncLayer *tl = farr_plan_layer(p, L);
        if (!tl) continue;                   /* a hybrid's linear-attention layer */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "layer", L);
        cJSON *ranks = cJSON_AddArrayToObject(o, "ranks");
        for (int g = 0; g < tl->n_kv; g++) cJSON_AddItemToArray(ranks, cJSON_CreateNumber(tl->groups[g]->rank));
        add_counts(o, (size_t[4]){tl->params_before, tl->params_after, tl->kv_before, tl->kv_after},
                   (double[3]){tl->energy_min, tl->energy_mean, tl->err_max});
        if (x->balance[p->opts.kind]) {   /* the weights hold shared x c and head / c */
            cJSON *b = cJSON_AddArrayToObject(o, "fp8_balance");
            for (int g = 0; g < tl->n_kv; g++) cJSON_AddItemToArray(b, cJSON_CreateNumber(bal(x, p->opts.kind, L, g)));
        }
        cJSON *errs = cJSON_AddArrayToObject(o, "rel_errors");
        for (int h = 0; h < tl->n_heads; h++) {
            int idx;
            const FarrGroup *g = farr_plan_head(p, x->c, L, h, &idx);
            cJSON_AddItemToArray(errs, cJSON_CreateNumber(g->err[idx]));
        }
        cJSON_AddItemToArray(layers, o);
    }
    return j;
}

static int write_manifest(const Ctx *x, CkptWriter *w) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "method", "FaRR (fuse and rank reduce, seed 000)");
    cJSON_AddStringToObject(j, "format", export_format_name(x->fmt));
    char abs[PATH_MAX];              /* absolute, so `check DIR` finds it from any folder */
    cJSON_AddStringToObject(j, "source", realpath(x->m->path, abs) ? abs : x->m->path);
    cJSON_AddStringToObject(j, "model_type", x->c->model_type);
    cJSON *tr = cJSON_AddArrayToObject(j, "truncations");
    for (int k = 0; k < 2; k++) if (x->plan[k]) cJSON_AddItemToArray(tr, plan_json(x, x->plan[k]));
    if (x->fmt == EXPORT_HF) {
        cJSON *cc = cJSON_AddObjectToObject(j, "config_changes");
        if (x->plan[FARR_QK]) cJSON_AddNumberToObject(cc, "qk_nope_head_dim", x->nope2);
        if (x->plan[FARR_VO]) cJSON_AddNumberToObject(cc, "v_head_dim", x->v2);
        cJSON_AddNumberToObject(j, "q_scale", x->q_scale);
        cJSON_AddStringToObject(j, "note", "query rows are multiplied by q_scale = sqrt((qk_nope' + qk_rope) / "
                                "(qk_nope + qk_rope)) so that scores scaled by 1/sqrt(q_head_dim) are unchanged");
    } else if (x->fmt == EXPORT_DENSE) {
        cJSON_AddStringToObject(j, "weights", "the source's layout, config, names, shapes and dtypes; each truncated "
                                "head's rank-r factors at full shape (W_V' = [F_V 0], W_O' = [F_O ; 0]; W_Q', W_K' "
                                "alike): W_V' W_O' is the truncated fused map; no side files");
    } else {
        cJSON_AddStringToObject(j, "factors_file", "farr/factors.safetensors");
        cJSON_AddStringToObject(j, "factors_naming", "layers.L.<vo|qk>.shared.G = W_V'[G] or W_K'[G] "
                                "(d_in_kv x r, orthonormal columns); layers.L.<vo|qk>.head.H = W_O'[H] (r x hidden) "
                                "or W_Q'[H] (d_in_q x r); fused map = shared @ head (VO) or head @ shared^T (QK)");
        cJSON_AddStringToObject(j, "weights", "original layout and config; truncated heads zero-padded to "
                                "their original size (the padded model computes exactly the truncated maps)");
    }
    const ExportReport *r = &x->rep;
    if (r->reenc_tensors) {
        cJSON *re = cJSON_AddObjectToObject(j, "reencoded");
        cJSON_AddNumberToObject(re, "tensors", (double)r->reenc_tensors);
        cJSON_AddStringToObject(re, "names", r->reenc_names);
        cJSON *lr = cJSON_AddArrayToObject(re, "layers");
        cJSON_AddItemToArray(lr, cJSON_CreateNumber(r->reenc_lo));
        cJSON_AddItemToArray(lr, cJSON_CreateNumber(r->reenc_hi));
        cJSON_AddStringToObject(re, "from", export_reenc_from(r));
        cJSON_AddStringToObject(re, "to", dt_name(r->reenc_to));
        cJSON_AddNumberToObject(re, "added_rel_error_max", r->reenc_err);
        if (r->reenc_to == DT_F8_E4M3 && x->n_keep_bf) {      /* dtype fp8: the ones written BF16 (fp8ct.h) */
            cJSON *u = cJSON_AddArrayToObject(re, "bf16_modules");
            for (size_t i = 0; i < x->n_keep_bf; i++) cJSON_AddItemToArray(u, cJSON_CreateString(x->keep_bf[i]));
        }
        if (r->fused_plain) {      /* unchanged, written unquantized beside a rewritten shard vLLM fuses them with */
            cJSON *u = cJSON_AddArrayToObject(re, "fused_siblings");
            char *b = strdup(r->fused_names), *save = NULL;
            for (char *t = b ? strtok_r(b, ", ", &save) : NULL; t; t = strtok_r(NULL, ", ", &save))
                cJSON_AddItemToArray(u, cJSON_CreateString(t));
            free(b);
            cJSON_AddStringToObject(re, "fused_siblings_why", "vLLM and SGLang fuse q/k/v_proj into qkv_proj (gate/up_proj "
                                    "into gate_up_proj) and refuse a fused layer whose shards are not all quantized alike");
        }
        if (r->fp8_blocks) {
            cJSON_AddNumberToObject(re, "fp8_blocks", (double)r->fp8_blocks);
            cJSON_AddNumberToObject(re, "fp8_blocks_kept", (double)r->fp8_blocks_kept);
        }
    }
    if (r->kv_scales_dropped) {
        cJSON *kv = cJSON_AddObjectToObject(j, "kv_scales_dropped");
        cJSON_AddNumberToObject(kv, "tensors", (double)r->kv_scales_dropped);
        cJSON *lr = cJSON_AddArrayToObject(kv, "layers");
        cJSON_AddItemToArray(lr, cJSON_CreateNumber(r->kv_lo));
        cJSON_AddItemToArray(lr, cJSON_CreateNumber(r->kv_hi));
        cJSON_AddStringToObject(kv, "why", "a static FP8 KV cache's k_scale / v_scale were calibrated on the source's "
                                "keys and values, which the cut changes in these layers; vLLM and SGLang take 1.0 for a "
                                "layer with neither (their default); recalibrate them for an FP8 cache");
    }
    cJSON_AddStringToObject(j, "untouched", "every tensor the truncation does not change (layers kept at full rank "
                            "included) is the source's bit for bit; inside a changed tensor the rows and columns it does "
                            "not change (K rows beside cut V rows, heads kept at full rank) hold the source's values in "
                            "reencoded.to: its bytes and block scales for F8_E4M3 where the block's scale could stay, "
                            "exact in F32, rounded in BF16 / F16");
    if (x->c->qkv_bias && !cfg_is_mla(x->c))
        cJSON_AddStringToObject(j, "biases", x->c->o_bias
            ? "K bias set to 0 (softmax-invariant); Q bias projected (b_Q W_K^T U_r); V bias folded into the output bias"
            : "K bias set to 0 (softmax-invariant); Q bias projected (b_Q W_K^T U_r); V bias projected (z U_r, z W_V = b_V)");
    int rc = ckpt_write_json(w, "farr_manifest.json", j);
    cJSON_Delete(j);
    return rc;
}

static int add_f32(CkptWriter *w, const char *name, const Mat *M) {
    size_t shape[2] = { M->rows, M->cols };
    return ckpt_add(w, name, DT_F32, 2, shape, M->data, M->rows * M->cols * sizeof(float));
}

/* farr/factors.safetensors: the plans' factors (borrowed: the plans outlive the write). */
static int write_factors(Ctx *x, CkptWriter *w) {
    int rc = ckpt_file_begin(w, "farr/factors.safetensors", "pt");
    char name[256];
    for (int k = 0; k < 2 && rc == AL_OK; k++) {
        const FarrPlan *p = x->plan[k];
        if (!p) continue;
        const char *kn = farr_kind_name((farr_kind)k);
        for (int L = p->lo; L <= p->hi && rc == AL_OK; L++) {
            const FarrTruncLayer *tl = farr_plan_layer(p, L);
            if (!tl) continue;               /* a hybrid's linear-attention layer */
            for (int g = 0; g < tl->n_kv && rc == AL_OK; g++) {
                snprintf(name, sizeof name, "layers.%d.%s.shared.%d", L, kn, g);
                rc = add_f32(w, name, tl->groups[g]->shared);
                if (rc == AL_OK && tl->shared_bias) {
                    size_t sh[1] = { (size_t)tl->groups[g]->rank };
                    snprintf(name, sizeof name, "layers.%d.%s.shared_bias.%d", L, kn, g);
                    rc = ckpt_add(w, name, DT_F32, 1, sh, tl->shared_bias[g], sh[0] * sizeof(float));
                }
            }
            for (int h = 0; h < tl->n_heads && rc == AL_OK; h++) {
                snprintf(name, sizeof name, "layers.%d.%s.head.%d", L, kn, h);
                rc = add_f32(w, name, plan_head_mat(x, p, L, h));
                if (rc == AL_OK && tl->head_bias) {
                    int idx;
                    const FarrGroup *g = farr_plan_head(p, x->c, L, h, &idx);
                    size_t sh[1] = { (size_t)g->rank };
                    snprintf(name, sizeof name, "layers.%d.%s.head_bias.%d", L, kn, h);
                    rc = ckpt_add(w, name, DT_F32, 1, sh, tl->head_bias[h], sh[0] * sizeof(float));
                }
            }
            if (rc == AL_OK && tl->o_bias_delta) {
                size_t sh[1] = { (size_t)x->c->hidden };
                snprintf(name, sizeof name, "layers.%d.%s.o_bias_delta", L, kn);
                rc = ckpt_add(w, name, DT_F32, 1, sh, tl->o_bias_delta, sh[0] * sizeof(float));
            }
        }
    }
    return rc == AL_OK ? ckpt_file_end(w) : rc;
}

/* ================================================================ other files */

/* A new modules_to_not_convert list replaces transformers' default one (get_modules_to_not_convert
 * adds lm_head and tied outputs only when the config lists none): it starts with the source's
 * unquantized linear weights (2-D, not FP8, not embeddings or norms: lm_head). */
static void keep_source_linears(const Ctx *x, cJSON *a) {
    const Store *s = x->m->store;
    for (size_t i = 0; i < store_count(s); i++) {
        const char *name = store_name_at(s, i);
        const st_entry *e;
        size_t n = strlen(name);
        if (n <= 7 || strcmp(name + n - 7, ".weight") || strstr(name, "embed") || strstr(name, "norm") ||
            store_entry(s, name, &e, NULL) != AL_OK || e->ndim != 2 || e->dtype == DT_F8_E4M3) continue;
        char *mod = strndup(name, n - 7);
        if (mod) cJSON_AddItemToArray(a, cJSON_CreateString(mod));
        free(mod);
    }
    al_err_clear();
}

/* The FP8 weights written in another dtype join quantization_config's list of modules not
 * quantized: transformers' FineGrainedFP8 keeps them nn.Linear (modules_to_not_convert), vLLM's
 * Fp8Config reads `ignored_layers`, or modules_to_not_convert when that is absent or empty. */
static void keep_bf_config(Ctx *x, cJSON *j) {
    cJSON *q = cJSON_GetObjectItemCaseSensitive(j, "quantization_config");
    if (!cJSON_IsObject(q) || !x->n_keep_bf) return;
    cJSON *lists[4];
    bool created;
    int n = quant_config_plain_lists(q, lists, &created);
    if (created) keep_source_linears(x, lists[0]);      /* a new modules_to_not_convert replaces the default */
    for (int k = 0; k < n; k++) {
        for (size_t i = 0; i < x->n_keep_bf; i++) cJSON_AddItemToArray(lists[k], cJSON_CreateString(x->keep_bf[i]));
        char key[64];
        snprintf(key, sizeof key, "quantization_config.%s", lists[k]->string ? lists[k]->string : "?");
        join_once(x->rep.plain_lists, sizeof x->rep.plain_lists, key, ", ");
    }
}

/* config.json: the source's, as it is (factors, dense), with the new head sizes (hf; in text_config for a tower), and with the
 * FP8 weights written in another dtype listed as not quantized. */
static int write_config(Ctx *x, CkptWriter *w) {
    if (x->fmt != EXPORT_HF && !x->n_keep_bf)
        return ckpt_write_text(w, "config.json", x->m->config_json, strlen(x->m->config_json));
    cJSON *j = model_config_tree(x->m);
    if (!j) return al_err("cannot re-read the source config.json");
    keep_bf_config(x, j);
    cJSON *dims = cJSON_GetObjectItemCaseSensitive(j, "text_config");   /* a tower's sizes (Kimi-K2.5) are its text_config's */
    if (!cJSON_IsObject(dims)) dims = j;
    if (x->fmt == EXPORT_HF && x->plan[FARR_QK]) cJSON_ReplaceItemInObject(dims, "qk_nope_head_dim", cJSON_CreateNumber(x->nope2));
    if (x->fmt == EXPORT_HF && x->plan[FARR_VO]) cJSON_ReplaceItemInObject(dims, "v_head_dim", cJSON_CreateNumber(x->v2));
    int rc = ckpt_write_json(w, "config.json", j);
    cJSON_Delete(j);
    return rc;
}

/* ModelOpt's hf_quant_config.json (quant_config.h: vLLM and SGLang detect ModelOpt by it), when the
 * source has one: written with the modules written in another dtype added to quantization's
 * exclude_modules, as config.json's list gets them (keep_bf_config). */
static int write_hf_quant(Ctx *x, CkptWriter *w) {
    char *p = al_asprintf("%s/hf_quant_config.json", store_dir(x->m->store));
    size_t n = 0;
    char *text = p && access(p, F_OK) == 0 ? al_read_file_max(p, &n, AL_CAP_CONFIG, "hf_quant_config") : NULL;
    cJSON *j = text ? cJSON_ParseWithLength(text, n) : NULL, *q = cJSON_GetObjectItemCaseSensitive(j, "quantization");
    int rc = AL_OK;
    if (cJSON_IsObject(q)) {
        cJSON *a = cJSON_GetObjectItemCaseSensitive(q, "exclude_modules");
        if (!cJSON_IsArray(a) && x->n_keep_bf) {
            cJSON_DeleteItemFromObjectCaseSensitive(q, "exclude_modules");
            a = cJSON_AddArrayToObject(q, "exclude_modules");
        }
        for (size_t i = 0; a && i < x->n_keep_bf; i++) cJSON_AddItemToArray(a, cJSON_CreateString(x->keep_bf[i]));
        if (a && x->n_keep_bf)
            join_once(x->rep.plain_lists, sizeof x->rep.plain_lists, "hf_quant_config.json quantization.exclude_modules", ", ");
        rc = ckpt_write_json(w, "hf_quant_config.json", j);
    } else if (text) {
        rc = ckpt_write_text(w, "hf_quant_config.json", text, n);        /* not ModelOpt's form: as it is */
    }
    al_err_clear();
    cJSON_Delete(j);
    free(text);
    free(p);
    return rc;
}

/* ================================================================ export */

int farr_export(Model *m, const FarrPlan *vo, const FarrPlan *qk, const char *dir,
                const ExportOpts *opts, ExportReport *rep) {
    ExportOpts o = opts ? *opts : (ExportOpts){ 0 };
    if (!vo && !qk) return al_err("nothing to export: run `truncate vo ...` or `truncate qk ...` first");
    if (cfg_row(&m->cfg)->keys == KEYS_LLAMA2C || !m->config_json)
        return al_err("export needs a Hugging Face checkpoint (config.json + safetensors); %s is a llama2.c "
                      "checkpoint: load its HF conversion and truncate that", m->path);
    for (int k = 0; k < 2; k++) {
        const FarrPlan *p = k == 0 ? vo : qk;
        if (p && strcmp(p->model_path, m->path) != 0)
            return al_err("the %s truncation was made on %s, not on %s", farr_kind_name(p->opts.kind), p->model_path, m->path);
    }
    Ctx x = { .m = m, .c = &m->cfg, .plan = { vo, qk }, .q_scale = 1.0, .dtype_set = o.dtype_set, .dtype = o.dtype };
    if (o.dtype_set && o.dtype != DT_F32 && o.dtype != DT_F16 && o.dtype != DT_BF16 && o.dtype != DT_F8_E4M3)
        return al_err("export: dtype %s: a FaRR export writes its changed tensors in f32, f16, bf16 or fp8", dt_name(o.dtype));
    if (o.dtype_set && o.dtype == DT_F8_E4M3 && m->cfg.dtype != DT_F8_E4M3)
        return al_err("export: dtype fp8 keeps an FP8 checkpoint's blocks; %s is %s: use f32, f16 or bf16", m->name,
                      model_dtype_name(m));
    const char *why = export_hf_refusal(m, vo, qk);
    if (o.format == EXPORT_HF && why) return al_err("cannot export format hf: %s", why);
    x.fmt = o.format == EXPORT_AUTO ? (why ? EXPORT_FACTORS : EXPORT_HF) : o.format;
    if (x.fmt == EXPORT_HF && o.dtype_set && o.dtype == DT_F8_E4M3)
        return al_err("export: format hf with dtype fp8: hf shrinks kv_b_proj to the new ranks, which moves the rows "
                      "the truncation keeps (the K rows) into other 128x128 blocks, so their FP8 codes and scales "
                      "cannot be kept and would be re-quantized; use format dense or factors with dtype fp8 (every "
                      "block the cut leaves alone kept byte for byte), or format hf with bf16 (the default) or f32");
    if (x.fmt == EXPORT_HF) {
        const ModelConfig *c = x.c;
        x.nope2 = qk ? qk->rank_max : c->qk_nope_dim;
        x.v2 = vo ? vo->rank_max : c->v_dim;
        x.q_scale = sqrt((double)(x.nope2 + c->qk_rope_dim) / (double)(c->qk_nope_dim + c->qk_rope_dim));
    }
    CkptWriter *w;
    CkptOpts co = { .src = store_dir(m->store), .force = o.force, .can_force = true };
    if (balance_init(&x) != AL_OK || ckpt_begin(dir, &co, &w) != AL_OK) {
        free(x.balance[0]);
        free(x.balance[1]);
        return AL_ERR;
    }
    const Store *s = m->store;
    int rc = AL_OK;
    size_t nf = store_nfiles(s);
    for (size_t i = 0; rc == AL_OK && i < nf; i++) {
        rc = write_shard(&x, w, store_file_at(s, i));
        al_progress("file", i + 1, nf);
        if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
    }
    x.rep.bytes = ckpt_weight_bytes(w);
    if (rc == AL_OK) rc = write_config(&x, w);
    if (rc == AL_OK) rc = write_hf_quant(&x, w);
    if (rc == AL_OK && x.fmt == EXPORT_FACTORS) rc = write_factors(&x, w);
    if (rc == AL_OK) rc = ckpt_copy_aux(w, store_dir(s), NULL);
    if (rc == AL_OK) rc = write_manifest(&x, w);
    if (rc == AL_OK) rc = ckpt_commit(w, &x.rep.files);
    else ckpt_abort(w);
    free(x.scale);
    for (size_t i = 0; i < x.n_keep_bf; i++) free(x.keep_bf[i]);
    free(x.keep_bf);
    for (size_t i = 0; i < x.n_fp4; i++) { free(x.fp4[i]->name); free(x.fp4[i]); }
    free(x.fp4);
    free(x.balance[0]);
    free(x.balance[1]);
    x.rep.format = x.fmt;
    x.rep.q_scale = x.q_scale;
    if (rep) *rep = x.rep;
    return rc;
}

/* ================================================================ check of a dense export */

bool farr_is_export(const char *dir) {
    char *path = al_asprintf("%s/farr_manifest.json", dir);
    char *text = path ? al_read_file_max(path, NULL, AL_CAP_MANIFEST, "manifest") : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "method");
    bool yes = cJSON_IsString(f) && strncmp(f->valuestring, "FaRR", 4) == 0;
    cJSON_Delete(root);
    free(text);
    free(path);
    if (!yes) al_err_clear();          /* no manifest: an answer, not an error left behind */
    al_err_clear();
    return yes;
}

void farr_dense_check_free(FarrDenseCheck *c) {
    if (!c) return;
    free(c->export_path);
    free(c->source_path);
    free(c);
}

/* The fused map of head h of layer L (VO: W_V[g] W_O[h]; QK: W_Q[h] W_K[g]^T over the NoPE
 * columns where a head has RoPE and NoPE parts: MLA, partial rotary -- the part truncate fuses
 * (pair_width)) and its spectrum. */
static int head_spectrum(Model *m, farr_kind k, int L, int h, Spectrum **out) {
    Mat *A = NULL, *B = NULL;
    const ModelConfig *c = &m->cfg;
    int g = cfg_kv_group(c, h);
    head_part part = k == FARR_QK && c->qk_nope_dim > 0 && c->qk_rope_dim > 0 ? PART_NOPE : PART_ALL;
    int rc = k == FARR_VO ? model_head(m, HK_V, L, g, PART_ALL, &A) : model_head(m, HK_Q, L, h, part, &A);
    if (rc == AL_OK) rc = k == FARR_VO ? model_head(m, HK_O, L, h, PART_ALL, &B) : model_head(m, HK_K, L, g, part, &B);
    if (rc == AL_OK) rc = spectra_dense_product_svd(A, B, k == FARR_VO ? SPECTRA_AB : SPECTRA_ABT, 0, out);
    mat_free(A);
    mat_free(B);
    return rc;
}

/* One truncation of the manifest: every head of its layers, spectra of the export against the
 * source's leading singular values at the head's kept rank. */
static int check_truncation(Model *src, Model *ex, const cJSON *t, double q_scale, FarrDenseCheck *c) {
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(t, "kind"), *e;
    farr_kind k = cJSON_IsString(kind) && strcmp(kind->valuestring, "qk") == 0 ? FARR_QK : FARR_VO;
    bool per_head = src->cfg.n_kv_heads == src->cfg.n_heads || src->cfg.n_kv_heads <= 0;   /* else a group shares a basis */
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(t, "per_layer")) {
        const cJSON *lj = cJSON_GetObjectItemCaseSensitive(e, "layer"), *ranks = cJSON_GetObjectItemCaseSensitive(e, "ranks");
        int L = cJSON_IsNumber(lj) ? lj->valueint : -1;
        if (L < 0 || L >= src->cfg.n_layers || !cJSON_IsArray(ranks))
            return al_err("%s: farr_manifest.json: a truncated layer without a valid layer / ranks", c->export_path);
        for (int h = 0; h < src->cfg.n_heads; h++) {
            const cJSON *rj = cJSON_GetArrayItem(ranks, cfg_kv_group(&src->cfg, h));
            if (!cJSON_IsNumber(rj)) return al_err("%s: farr_manifest.json: layer %d has no rank for head %d", c->export_path, L, h);
            size_t r = (size_t)rj->valueint;
            Spectrum *a = NULL, *b = NULL;
            int rc = head_spectrum(src, k, L, h, &a);
            if (rc == AL_OK) rc = head_spectrum(ex, k, L, h, &b);
            if (rc == AL_OK && a->p > 0 && a->sigma[0] > 0) {
                double bs = k == FARR_QK ? 1.0 / q_scale : 1.0;   /* hf: query rows times q_scale */
                for (size_t i = 0; i < b->p; i++) {
                    double want = i < r && i < a->p ? a->sigma[i] : 0.0;
                    double d = fabs(b->sigma[i] * bs - want) / a->sigma[0];
                    if (i >= r) c->tail = fmax(c->tail, d);
                    else if (per_head) c->sv_err = fmax(c->sv_err, d);
                }
                c->heads++;
            }
            spectrum_free(a);
            spectrum_free(b);
            if (rc) return al_err_ctx("layer %d head %d", L, h);
        }
        al_progress("layer", (size_t)L + 1, (size_t)src->cfg.n_layers);
    }
    return AL_OK;
}

int farr_dense_check(const char *dir, Model *src, FarrDenseCheck **out) {
    *out = NULL;
    FarrDenseCheck *c = al_calloc(1, sizeof *c, "a check");
    char *path = al_asprintf("%s/farr_manifest.json", dir);
    char *text = path ? al_read_file_max(path, NULL, AL_CAP_MANIFEST, "manifest") : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    Model *ex = NULL, *own = NULL;
    int rc = c && root ? AL_OK : al_err("%s: no readable farr_manifest.json: not a FaRR export", dir);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "source"), *t;
    if (rc == AL_OK && !src)
        rc = cJSON_IsString(s) ? model_open(s->valuestring, &own) : al_err("%s: the manifest names no source", path);
    if (rc == AL_OK) src = src ? src : own;
    if (rc == AL_OK) rc = model_open(dir, &ex);
    if (rc == AL_OK && (ex->cfg.n_layers != src->cfg.n_layers || ex->cfg.n_heads != src->cfg.n_heads))
        rc = al_err("%s has other dims than the source %s: not its export", dir, src->path);
    if (rc == AL_OK) {
        c->export_path = al_strdup(dir);
        c->source_path = al_strdup(src->path);
        rc = c->export_path && c->source_path ? AL_OK : AL_ERR;
    }
    const cJSON *qs = cJSON_GetObjectItemCaseSensitive(root, "q_scale"), *fm = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(root, "reencoded");
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(re, "to"), *ae = cJSON_GetObjectItemCaseSensitive(re, "added_rel_error_max");
    double q_scale = cJSON_IsNumber(qs) && qs->valuedouble > 0 ? qs->valuedouble : 1.0;
    if (c) {
        snprintf(c->format, sizeof c->format, "%s", cJSON_IsString(fm) ? fm->valuestring : "?");
        snprintf(c->encoding, sizeof c->encoding, "%s", cJSON_IsString(to) ? to->valuestring : "");
        c->added_err = cJSON_IsNumber(ae) ? ae->valuedouble : 0.0;
    }
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(root, "truncations")) {
        if (rc == AL_OK) rc = check_truncation(src, ex, t, q_scale, c);
        if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
    }
    cJSON_Delete(root);
    free(text);
    free(path);
    model_free(ex);
    model_free(own);
    if (rc) { farr_dense_check_free(c); return rc; }
    *out = c;
    return AL_OK;
}
