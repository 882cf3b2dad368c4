/* cmd_farr.c -- the FaRR command group (seed 000): spectrum, ranks, fuse, fused, truncate,
 * export. Handlers call core/analysis/farr.h and core/export/export.h and turn their results into table values
 * (Lua gets rows keyed by column name) or arrays (spectra).
 *
 * State: the workspace's FarrState (ws_farr, core/analysis/farr.h) holds every layer's spectra keyed by
 * (model, kind, layer, offset) -- ranks at any tau derive from them, so asking again is instant and
 * a new tau never reuses stale ranks -- plus the working copy (the latest `truncate vo` and
 * `truncate qk` plans per model, what `export` writes) and the kept `fuse` head. The plot group
 * reads the same state. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cmd_farr.h"
#include "analyses.h"
#include "budget_compare.h"
#include "export.h"
#include "farr.h"
#include "kvcache.h"
#include "layersel.h"
#include "registry.h"
#include "farr_groups.h"
#include "params.h"
#include "session.h"
#include "spectral_table.h"
#include "tpa.h"
#include "seeds.h"
#include "workspace.h"
#include "ws_calib.h"
#include "ws_check.h"
#include "ws_lm.h"
#include "xform.h"

static const char *const KIND_CHOICES[] = {"q", "k", "v", "o", "qk", "vo", NULL};
static const char *const POLICY_CHOICES[] = {"head", "layer-max", "model-max", NULL};
static const char *const FUSED_CHOICES[] = {"info", "sigma", "energy", "u", "v", "a", "b", NULL};

#define PARAM_LAYER { .name = "layer", .type = ARG_INT, .comp = COMP_LAYERS, .metavar = "L", .help = "layer number" }
#define PARAM_HEAD { .name = "head", .type = ARG_INT, .comp = COMP_HEADS, .metavar = "H", \
    .help = "query head number (k and v: the KV head it reads)" }

static int need_layer_head(const Args *a, int *layer, int *head) {
    if (!args_given(a, "layer") || !args_given(a, "head"))
        return al_err("%s needs a layer and a head, e.g. `%s %s layer 2 head 0`", a->path, a->path,
                      args_str(a, "kind") ? args_str(a, "kind") : "vo");
    *layer = (int)args_int(a, "layer");
    *head = (int)args_int(a, "head");
    return AL_OK;
}

/* "W_V", "W_O", "W_V W_O", ... for kind index of KIND_CHOICES. */
static const char *kind_label(int k) {
    static const char *const names[] = {"W_Q", "W_K", "W_V", "W_O", "W_Q W_K^T", "W_V W_O"};
    return names[k];
}

/* On partial-rotary models, the line saying which Q/K dims QK fusion used. */
static void say_qk_dims(Session *s, Out *out, farr_kind kind) {
    char dims[160];
    if (kind == FARR_QK && farr_qk_dims(&s->cur->cfg, dims, sizeof dims)) out_printf(out, "QK uses the %s\n", dims);
}

/* QK over layers lo..hi of c that apply no RoPE (SmolLM3's no_rope_layers): said, with what an
 * offset does there (nothing: W_Q W_Kᵀ is the exact map). */
static void say_nope_layers(Out *out, const ModelConfig *c, farr_kind kind, long lo, long hi, int offset) {
    char list[256] = "";
    int n = 0;
    for (long L = lo; kind == FARR_QK && c->rope != ROPE_NONE && L <= hi; L++)
        if (!cfg_layer_rope(c, (int)L) && strlen(list) + 16 < sizeof list)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%ld", n++ ? ", " : "", L);
    if (n)
        out_printf(out, "layer%s %s: no RoPE (no_rope_layers): W_Q W_K^T is the exact map there%s\n", n > 1 ? "s" : "",
                   list, offset != FARR_NO_OFFSET ? ", the offset is not applied" : "");
}

/* A model with attention sinks (gpt-oss): what they do to the fused maps (nothing) and to the softmax. */
static void say_sinks(Out *out, const ModelConfig *c, farr_kind kind) {
    if (c->attn_sinks)
        out_printf(out, "attention sinks: a learned logit per head joins each softmax row, so %s is the map the model "
                   "computes; the sink only lowers every attention weight of a row (%s)\n",
                   kind == FARR_QK ? "W_Q W_K^T" : "W_V W_O",
                   c->attn == QKV_DSV4 ? "DeepSeek-V4: K = V, W_O through wo_a / wo_b; truncate refused" : "truncate keeps it");
}

/* ================================================================ spectrum */

static const char SPECTRUM_HELP[] =
    "Singular values of one head's matrix (seed 000, 1.3-1.4) with the cumulative energy\n"
    "sum_{j<=i} sigma_j^2 / sum sigma^2 and the effective ranks at tau 0.99 and 0.999 (and the\n"
    "session tau). KIND: q, k, v, o (one projection; for GQA k and v are the KV head that query\n"
    "head H reads) or qk, vo (the fused pair, from its factors -- never formed). qk uses the NoPE\n"
    "columns where RoPE is partial (MLA; GPT-NeoX and Phi-3 partial rotary, which rotate each head's\n"
    "first dims: the output names the dims used) and all columns without RoPE (GPT-2); full-RoPE models\n"
    "(Llama, Mistral, Qwen2) need `offset D` for qk (not on SmolLM3's layers without RoPE, which fuse\n"
    "exactly), while q and k there are the whole projection of\n"
    "one head: RoPE rotates a projection's output, so a single W_Q or W_K has no RoPE problem. Where a\n"
    "Q/K norm sits between projection and score (Qwen3, Gemma 3, OLMo 2), qk is refused and q / k are\n"
    "the whole projection too. The result is a table of one row per singular value: index\n"
    "(1-based), sigma and energy (cumulative); `to FILE.csv` writes those columns, and from Lua\n"
    "attn.spectrum(...) returns the rows, one Lua table {index, sigma, energy} each, largest first.\n"
    "`stats` gives the matrix's spectral health instead, one row: rank (at the session tau),\n"
    "stable_rank ||W||_F^2 / ||W||_2^2, entropy_rank (Roy & Vetterli: exp of the entropy of\n"
    "sigma_i / sum sigma), participation ((sum l)^2 / sum l^2, l = sigma^2), norm (sigma_1), and\n"
    "of the ESD -- the nonzero eigenvalues l / N of WᵀW / N, N the larger side -- the power law\n"
    "WeightWatcher fits (alpha by maximum likelihood above xmin, xmin by the smallest KS distance\n"
    "ks, alpha_sigma its error, tail the eigenvalues >= xmin; none under 10 eigenvalues) and the\n"
    "Marchenko-Pastur bulk edge mp_edge of the shape with the spikes above it (`plot esd` draws it).\n"
    "Examples:\n"
    "  spectrum vo layer 2 head 0\n"
    "  spectrum o layer 1 head 3 stats\n"
    "  spectrum q layer 3 head 5 to q_3_5.csv\n"
    "  = attn.spectrum(\"qk\", {layer=1, head=2})[1].sigma";

static const Param spectrum_pos[] = {
    { .name = "kind", .type = ARG_ENUM, .choices = KIND_CHOICES, .comp = COMP_CHOICES,
      .help = "q, k, v, o, or the fused qk / vo" },
    {0}
};

static const Param spectrum_kw[] = {
    PARAM_LAYER, PARAM_HEAD, PARAM_OFFSET,
    { .name = "stats", .type = ARG_FLAG, .comp = COMP_NONE,
      .help = "the spectral health instead: stable / entropy rank, participation, norm, ESD power law, MP edge" },
    PARAM_TO, {0}
};

static int spectrum_show(Session *s, const Args *a, Out *out, int k, int layer, int head, const Spectrum *sp);

static int cmd_spectrum(Session *s, const Args *a, Out *out) {
    int k = args_enum(a, "kind"), layer, head;
    if (need_layer_head(a, &layer, &head)) return AL_ERR;
    farr_kind kind = (k == 0 || k == 1 || k == 4) ? FARR_QK : FARR_VO;
    int side = (k == 4 || k == 5) ? 2 : (k == 0 || k == 2) ? 0 : 1;
    Spectrum *own = NULL;          /* q / k alone where QK fusion is refused (Q/K norm, full RoPE) */
    Mat *W = NULL;
    if (kind == FARR_QK && side != 2 && farr_side_alone(s->cur, side, layer, head, param_offset(a), &W)) return AL_ERR;
    if (W) {
        int rc = spectra_svd(W, 0, &own);
        mat_free(W);
        if (rc) return rc;
    }
    if (own) {
        int rc = spectrum_show(s, a, out, k, layer, head, own);
        spectrum_free(own);
        return rc;
    }
    FarrState *st;
    const FarrLayer *fl;
    if (ws_farr(s, &st)) return AL_ERR;
    int rc = farr_state_layer(st, s->cur, kind, layer, param_offset(a), &fl);
    if (rc) return rc;
    if (head < 0 || head >= fl->n_heads) return al_err("head %d out of range: heads 0-%d", head, fl->n_heads - 1);
    return spectrum_show(s, a, out, k, layer, head, side == 0 ? fl->a[head] : side == 1 ? fl->b[head] : fl->fused[head]);
}

/* `spectrum ... stats`: one row of spectral health (spectral_table.h) as the table and result. */
static int spectrum_stats(Session *s, const Args *a, Out *out, int k, int layer, int head, const Spectrum *sp) {
    static const char *const mats[] = {"Q", "K", "V", "O", "QK", "VO"};
    Table *t = health_table_new(true);
    if (!t || health_table_row(t, true, layer, head, mats[k], sp, s->tau)) { table_free(t); return AL_ERR; }
    if (out_narrates(out))
        out_printf(out, "%s of layer %d head %d: %zu x %zu, %zu singular values; rank at tau %g; ESD of sigma^2 / %zu\n",
                   kind_label(k), layer, head, sp->m, sp->n, sp->p, s->tau, sp->m > sp->n ? sp->m : sp->n);
    return out_table_to(out, args_str(a, "to"), t);
}

/* The table, the narration and the result of one spectrum. */
static int spectrum_show(Session *s, const Args *a, Out *out, int k, int layer, int head, const Spectrum *sp) {
    farr_kind kind = (k == 0 || k == 1 || k == 4) ? FARR_QK : FARR_VO;
    int rc = AL_OK;
    if (args_flag(a, "stats")) return spectrum_stats(s, a, out, k, layer, head, sp);
    double *energy = al_calloc(sp->p ? sp->p : 1, sizeof(double), "energies");
    if (!energy) return AL_ERR;
    spectra_cum_energy(sp->sigma, sp->p, energy);
    Table *t = table_new(3, "index", "sigma", "energy");
    for (size_t i = 0; t && i < sp->p; i++) {
        if (table_row(t)) { table_free(t); t = NULL; break; }
        table_int(t, (long long)i + 1);
        table_num(t, sp->sigma[i]);
        table_num(t, energy[i]);
    }
    free(energy);
    if (!t) return AL_ERR;
    size_t r99 = spectra_effective_rank(sp->sigma, sp->p, 0.99), r999 = spectra_effective_rank(sp->sigma, sp->p, 0.999);
    if (out_narrates(out)) {
        out_printf(out, "%s of layer %d head %d: %zu x %zu, %zu singular values; effective rank %zu at tau "
                   "0.99, %zu at tau 0.999", kind_label(k), layer, head, sp->m, sp->n, sp->p, r99, r999);
        if (s->tau != 0.99 && s->tau != 0.999)
            out_printf(out, ", %zu at tau %g", spectra_effective_rank(sp->sigma, sp->p, s->tau), s->tau);
        out_printf(out, "\n");
        say_qk_dims(s, out, kind);
    }
    const char *to = args_str(a, "to");
    if (to) {
        rc = table_write_file(out, t, to, 9);
        if (rc == AL_OK) out_printf(out, "wrote %zu row%s to %s\n", t->nrows, al_s(t->nrows), to);
    } else if (out_narrates(out)) {
        char *text = table_render(t, out->fmt, out->prec);
        if (text) { out_write(out, OUT_STDOUT, text, strlen(text)); free(text); }
    }
    if (rc) { table_free(t); return rc; }
    out_table(out, t);       /* the value: rows {index, sigma, energy} */
    out->written = true;     /* printed above (or written to the file) */
    return AL_OK;
}

/* ================================================================ ranks */

static const char RANKS_HELP[] =
    "Per head, the effective rank of each factor and of the fused map at tau (default: set tau,\n"
    "0.999 unless changed): vo gives layer,head,rank_v,rank_o,rank_vo and qk gives\n"
    "layer,head,rank_q,rank_k,rank_qk (for GQA, rank_v / rank_k is the rank of the query head's\n"
    "shared KV head). Fused spectra come from the factors, never the formed product: each side's\n"
    "Gram is read straight from the checkpoint (FP8 dequantized chunk by chunk, one layer's pages\n"
    "resident at a time, so a 671B checkpoint sweeps in ~160 MB), then small eigen-solves. Sweeps\n"
    "use every core, show progress (layers done, rate, time left) on a terminal, stop with\n"
    "Ctrl-C (finished layers are kept) and are cached: asking again, at any tau, is instant.\n"
    "qk on partial RoPE fuses the NoPE dims only (DeepSeek MLA; GPT-NeoX rotary_pct and Phi-3\n"
    "partial_rotary_factor, whose RoPE dims come first: the output names the dims used). qk is\n"
    "refused where a Q/K RMSNorm sits between projection and score (Qwen3, Gemma 3: per head; OLMo 2:\n"
    "whole projection): q and k are divided by their own per-token RMS, so the score is not a\n"
    "bilinear form and W_Q W_K^T is not what the model computes; `spectrum q|k` still gives each\n"
    "projection's own spectrum there. Layers without RoPE in a RoPE model (SmolLM3's no_rope_layers)\n"
    "fuse whole heads exactly, without an offset (one given is not applied there). On a hybrid\n"
    "(Qwen3-Next, Kimi-Linear, Nemotron-H, Granite 4.0-H) `all` and ranges sweep the softmax-attention\n"
    "layers and say which they left out; a linear / Mamba-2 layer named alone is an error.\n"
    "Views: `order rank` sorts each layer's heads by fused rank (head ids kept in the head column;\n"
    "default `order head`). `summary` gives one row per layer instead: layer, heads, the min and\n"
    "max of each factor's rank, the min / median / max fused rank and the heads holding the min\n"
    "and max. On the terminal a table of more than 64 rows prints that summary (with a note); the\n"
    "result (Lua, `to FILE`) is still every head's row, and `heads` prints them all. `model NAME`\n"
    "reads another loaded model (or loads NAME as `load` does) without switching to it.\n"
    "On a GQA model `truncate ... tau T` ranks each KV head's group (its query heads' fused maps\n"
    "stacked), not each head: a line under the table says so, and `groups` gives one row per\n"
    "group instead -- layer, kv_head, query_heads and the group's rank at tau, the rank truncate\n"
    "keeps (policy head; at least the largest of its heads' ranks).\n"
    "`metrics` gives instead one row per head and matrix (V, O, VO or Q, K, QK; GQA repeats the\n"
    "shared head's rows): layer, head, matrix, rank, stable_rank, entropy_rank, participation,\n"
    "norm, alpha, alpha_sigma, xmin, ks, tail, mp_edge, spikes (`help spectrum`: `stats`), from the\n"
    "spectra the sweep cached: no SVD is redone. With `summary` (and on the terminal past 64 rows)\n"
    "one row per layer and matrix: the medians over its heads, the largest norm, the median alpha\n"
    "of the heads with a fit and their count, the spikes of all heads.\n"
    "Examples:\n"
    "  ranks vo layer 8\n"
    "  ranks qk all tau 0.99 to qk_ranks.csv\n"
    "  ranks vo 0-3 order rank\n"
    "  ranks qk layers 2-4\n"
    "  ranks vo all summary\n"
    "  ranks vo all model demo-llama\n"    "  ranks vo all metrics to health.csv\n"
    "  = attn.run(\"ranks vo layer 2\")[1].rank_vo";

static const char *const ORDER_CHOICES[] = {"head", "rank", NULL};

static const Param ranks_pos[] = {
    PARAM_PAIR,
    { .name = "range", .type = ARG_RANGE, .def = "all", .comp = COMP_LAYERS,
      .help = "a layer, a range A-B, or all" },
    {0}
};

#define PARAM_RANKS_MODEL { .name = "model", .type = ARG_STRING, .comp = COMP_MODELS, .metavar = "NAME", \
    .help = "another model (loaded, or loaded now as `load` does) instead of the current one; no switch" }

static const Param ranks_kw[] = {
    { .name = "layer", .type = ARG_INT, .flags = PF_ALL, .comp = COMP_LAYERS, .metavar = "L|all",
      .help = "one layer (or all)" },
    PARAM_LAYERS_OPT("layers A-B (or all), as every other command takes them"),
    PARAM_TAU, PARAM_OFFSET,
    { .name = "order", .type = ARG_ENUM, .flags = PF_VIEW, .choices = ORDER_CHOICES,
      .def = "head", .comp = COMP_CHOICES,
      .help = "rows in head order, or by fused rank within each layer" },
    { .name = "summary", .type = ARG_FLAG, .comp = COMP_NONE,
      .help = "one row per layer: min / median / max ranks and the heads holding them" },
    { .name = "heads", .type = ARG_FLAG, .comp = COMP_NONE, .help = "print every head's row even when the table is large" },
    { .name = "metrics", .type = ARG_FLAG, .comp = COMP_NONE,
      .help = "spectral health rows per head and matrix: stable / entropy rank, participation, norm, alpha, MP edge" },
    { .name = "groups", .type = ARG_FLAG, .comp = COMP_NONE,
      .help = "GQA: one row per KV head's group, its rank at tau -- the rank `truncate ... tau T` keeps" },
    PARAM_RANKS_MODEL,
    PARAM_TO, {0}
};

/* Rows printed on the terminal before `ranks` shows the per-layer summary instead. */
#define RANKS_TERMINAL_ROWS 64

/* The model a command reads: `model NAME` (loaded aside when needed) or the current one. */
static int target_model(Session *s, const Args *a, Model **m) {
    const char *name = args_str(a, "model");
    if (!name || !*name) { *m = s->cur; return AL_OK; }
    return session_model_aside(s, name, m);
}

/* The rank table of q's layers at tau, swept (cached) first; *rows the caller's; *cap the largest
 * head dim of those layers. Interrupted: q->hi becomes the last layer kept (cached from q->lo on). */
static int rank_rows(Session *s, FarrQuery *q, double tau, FarrRankRow **rows, size_t *n, int *cap) {
    FarrState *st;
    *cap = 0;
    if (ws_farr(s, &st)) return AL_ERR;
    int asked = q->hi, rc = farr_state_sweep(st, q);
    if (rc == AL_INTERRUPTED)        /* Ctrl-C: keep the layers finished (cached) from lo on */
        for (q->hi = q->lo - 1;
             q->hi < asked && (!layersel_attn(&q->m->cfg, q->hi + 1) ||
                               farr_state_get_layer(st, q->m, q->kind, q->hi + 1, q->offset)); q->hi++) {}
    if (rc && (rc != AL_INTERRUPTED || q->hi < q->lo)) return rc;
    int rc2 = farr_state_rank_table(st, q, tau, rows, n);
    if (rc2) return rc2;
    for (int L = q->lo; L <= q->hi; L++) {   /* the largest head: Gemma 4's full layers have their own */
        const FarrLayer *fl = farr_state_get_layer(st, q->m, q->kind, L, q->offset);
        if (fl && fl->head_dim > *cap) *cap = fl->head_dim;
    }
    return rc;                       /* AL_OK, or AL_INTERRUPTED with q->hi the last layer kept */
}

/* "rank_v", "rank_o", "rank_vo" (side 0, 1, 2) into buf. */
static const char *rank_col(farr_kind kind, int side, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "rank_%s%s", side == 2 ? farr_kind_name(kind) : kind == FARR_VO ? (side ? "o" : "v")
                                                                                       : (side ? "k" : "q"),
             suffix);
    return buf;
}

static int by_layer_rank(const void *x, const void *y) {
    const FarrRankRow *a = x, *b = y;
    if (a->layer != b->layer) return a->layer < b->layer ? -1 : 1;
    if (a->rank_fused != b->rank_fused) return a->rank_fused < b->rank_fused ? -1 : 1;
    return (a->head > b->head) - (a->head < b->head);
}

static Table *ranks_table(farr_kind kind, const FarrRankRow *rows, size_t n) {
    char c2[24], c3[24], c4[24];
    Table *t = table_new(5, "layer", "head", rank_col(kind, 0, "", c2, sizeof c2), rank_col(kind, 1, "", c3, sizeof c3),
                         rank_col(kind, 2, "", c4, sizeof c4));
    for (size_t i = 0; t && i < n; i++) {
        const FarrRankRow *r = &rows[i];
        if (table_row(t)) { table_free(t); return NULL; }
        table_int(t, r->layer); table_int(t, r->head);
        table_int(t, r->rank_a); table_int(t, r->rank_b); table_int(t, r->rank_fused);
    }
    return t;
}

static int cmp_int(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* One row per layer of a head-ordered or rank-ordered rank table (rows of a layer contiguous). */
static Table *ranks_summary(farr_kind kind, const FarrRankRow *rows, size_t n) {
    char c[7][32];
    const char *names[11] = {"layer", "heads", rank_col(kind, 0, "_min", c[0], 32), rank_col(kind, 0, "_max", c[1], 32),
                             rank_col(kind, 1, "_min", c[2], 32), rank_col(kind, 1, "_max", c[3], 32),
                             rank_col(kind, 2, "_min", c[4], 32), rank_col(kind, 2, "_median", c[5], 32),
                             rank_col(kind, 2, "_max", c[6], 32), "head_min", "head_max"};
    Table *t = table_new_v(11, names);
    int *f = al_calloc(n ? n : 1, sizeof(int), "fused ranks");
    if (!t || !f) { table_free(t); free(f); return NULL; }
    for (size_t i = 0; i < n;) {
        size_t j = i, k;
        while (j < n && rows[j].layer == rows[i].layer) j++;
        int amin = 1 << 30, amax = 0, bmin = 1 << 30, bmax = 0;
        const FarrRankRow *lo = &rows[i], *hi = &rows[i];
        for (k = i; k < j; k++) {
            const FarrRankRow *r = &rows[k];
            if (r->rank_a < amin) amin = r->rank_a;
            if (r->rank_a > amax) amax = r->rank_a;
            if (r->rank_b < bmin) bmin = r->rank_b;
            if (r->rank_b > bmax) bmax = r->rank_b;
            if (r->rank_fused < lo->rank_fused || (r->rank_fused == lo->rank_fused && r->head < lo->head)) lo = r;
            if (r->rank_fused > hi->rank_fused || (r->rank_fused == hi->rank_fused && r->head < hi->head)) hi = r;
            f[k - i] = r->rank_fused;
        }
        size_t m = j - i;
        qsort(f, m, sizeof *f, cmp_int);
        if (table_row(t)) { table_free(t); free(f); return NULL; }
        table_int(t, rows[i].layer); table_int(t, (long long)m);
        table_int(t, amin); table_int(t, amax); table_int(t, bmin); table_int(t, bmax);
        table_int(t, lo->rank_fused);
        table_count(t, m % 2 ? f[m / 2] : 0.5 * (f[m / 2 - 1] + f[m / 2]));
        table_int(t, hi->rank_fused); table_int(t, lo->head); table_int(t, hi->head);
        i = j;
    }
    free(f);
    return t;
}

/* `ranks ... metrics`: the health of A, B and the fused map of every head of q's layers, from the
 * spectra the sweep cached (no SVD redone); `summary` (and the terminal past RANKS_TERMINAL_ROWS
 * rows, as `ranks`) one row per layer and matrix; interrupted, the layers kept. */
static int ranks_metrics(Session *s, const Args *a, Out *out, const FarrQuery *q, double tau, long asked) {
    FarrState *st;
    char lt[256];
    Table *t = health_table_new(true);
    int rc = t && !ws_farr(s, &st) ? health_table_layers(t, st, q, tau) : AL_ERR;
    if (rc) { table_free(t); return rc; }     /* AL_INTERRUPTED: Ctrl-C during the statistics */
    bool summary = args_flag(a, "summary");
    bool brief = !summary && !args_flag(a, "heads") && !args_str(a, "to") && out_narrates(out) &&
                 out->fmt == FMT_TABLE && t->nrows > RANKS_TERMINAL_ROWS;
    if (out_narrates(out))
        out_printf(out, "%s: spectral health of %s, %s and %s, layers %s (rank at tau %g; ESD of sigma^2 / max dim)\n",
                   q->m->name, farr_side_name(q->kind, 0), farr_side_name(q->kind, 1), farr_fused_name(q->kind),
                   layersel_text(&q->m->cfg, q->lo, q->hi, lt, sizeof lt), tau);
    if (summary || brief) {
        Table *sum = health_table_summary(t);
        if (!sum) { table_free(t); return AL_ERR; }
        if (summary) { table_free(t); t = sum; }
        else {
            char *text = table_render(sum, out->fmt, out->prec);
            if (text) out_printf(out, "%s", text);
            free(text);
            table_free(sum);
            out_printf(out, "(%zu row%s: one row per layer and matrix shown; `heads` prints every row, `to FILE.csv` writes them)\n",
                       t->nrows, al_s(t->nrows));
            out_table(out, t);
            out->written = true;
            t = NULL;
        }
    }
    if (t) rc = out_table_to(out, args_str(a, "to"), t);
    if (rc || q->hi == asked) return rc;
    al_err("ranks: interrupted: kept layers %d-%d (run it again to go on: finished layers are cached)", q->lo, q->hi);
    return AL_INTERRUPTED;
}

static int cmd_ranks(Session *s, const Args *a, Out *out) {
    farr_kind kind = param_pair(a);
    double tau = param_tau(s, a);
    int offset = param_offset(a);
    long lo, hi;
    Model *m;
    const char *which = args_given(a, "layer") ? "layer" : args_given(a, "layers") ? "layers" : "range";
    if (args_given(a, "layer") + args_given(a, "layers") + args_given(a, "range") > 1)
        return al_err("ranks: give one of a range, `layer L` or `layers A-B`, not two");
    if (args_flag(a, "summary") && args_flag(a, "heads"))
        return al_err("ranks: give `summary` (one row per layer) or `heads` (every head), not both");
    if (args_flag(a, "metrics") && !strcmp(args_str(a, "order"), "rank"))
        return al_err("ranks: `metrics` rows are in head order; drop `order rank`");
    if (target_model(s, a, &m)) return AL_ERR;
    if (param_layers(out, a, which, m, &lo, &hi)) return AL_ERR;
    if (args_flag(a, "groups") && (args_flag(a, "metrics") || args_flag(a, "summary") || args_given(a, "offset")))
        return al_err("ranks: `groups` gives the ranks truncate keeps (no offset), one row per group: drop metrics, "
                      "summary and offset");
    if (args_flag(a, "groups")) return farr_groups_ranks(m, kind, tau, (int)lo, (int)hi, a, out);
    FarrRankRow *rows;
    size_t n;
    FarrQuery q = { .m = m, .kind = kind, .lo = (int)lo, .hi = (int)hi, .offset = offset,
                    .ranks_only = !args_flag(a, "metrics") };   /* metrics show values: not the coarse route */
    int cap, rc = rank_rows(s, &q, tau, &rows, &n, &cap);
    if (rc && rc != AL_INTERRUPTED) return rc;
    long asked = hi;
    hi = q.hi;
    if (args_flag(a, "metrics")) { free(rows); return ranks_metrics(s, a, out, &q, tau, asked); }
    if (!strcmp(args_str(a, "order"), "rank")) qsort(rows, n, sizeof *rows, by_layer_rank);
    int fmin = 1 << 30, fmax = 0;
    double fsum = 0;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].rank_fused < fmin) fmin = rows[i].rank_fused;
        if (rows[i].rank_fused > fmax) fmax = rows[i].rank_fused;
        fsum += rows[i].rank_fused;
    }
    bool summary = args_flag(a, "summary");
    char lt[256];
    bool brief = !summary && !args_flag(a, "heads") && !args_str(a, "to") && out_narrates(out) &&
                 out->fmt == FMT_TABLE && n > RANKS_TERMINAL_ROWS;
    Table *t = summary ? ranks_summary(kind, rows, n) : ranks_table(kind, rows, n);
    Table *brief_t = brief ? ranks_summary(kind, rows, n) : NULL;
    free(rows);
    if (!t || (brief && !brief_t)) { table_free(t); table_free(brief_t); return AL_ERR; }
    if (out_narrates(out))
        out_printf(out, "%s: %s effective ranks at tau %g, %s: fused %d-%d (mean %.1f) of %d, %zu head%s%s\n",
                   m->name, farr_fused_name(kind), tau, layersel_words(&m->cfg, (int)lo, (int)hi, lt, sizeof lt), fmin, fmax,
                   n ? fsum / (double)n : 0.0, cap, n, al_s(n),
                   offset != FARR_NO_OFFSET ? " (K at a fixed RoPE offset: analysis only)" : "");
    if (out_narrates(out)) say_qk_dims(s, out, kind);
    if (out_narrates(out)) say_nope_layers(out, &m->cfg, kind, lo, hi, offset);
    if (out_narrates(out)) say_sinks(out, &m->cfg, kind);
    if (out_narrates(out)) farr_groups_note(out, m, kind, tau);
    if (brief) {
        char *text = table_render(brief_t, out->fmt, out->prec);
        if (text) out_printf(out, "%s", text);
        free(text);
        table_free(brief_t);
        out_printf(out, "(%zu row%s: one row per layer shown; `heads` prints every head, `to FILE.csv` writes them)\n", n, al_s(n));
        out_table(out, t);
        out->written = true;
    } else if ((rc = out_table_to(out, args_str(a, "to"), t)))
        return rc;
    if (hi == asked) return AL_OK;
    al_err("ranks: interrupted after %ld of %ld layers: kept layers %ld-%ld (run it again to go on: finished layers are cached)",
           hi - lo + 1, asked - lo + 1, lo, hi);
    return AL_INTERRUPTED;
}

/* ================================================================ diff ranks */

static const char DIFF_HELP[] =
    "Compares two models' analysis tables head by head; `help diff ranks`.";

static const char DIFF_RANKS_HELP[] =
    "Two models' rank tables of one pair, head by head (say a model and its fine-tune, or two\n"
    "checkpoints of a run): layer, head, each factor's rank and the fused rank in model A and in\n"
    "model B, and delta = B's fused rank minus A's. Models are loaded names, or loaded now as\n"
    "`load` does, without switching the session's model; both must have the same layers and heads.\n"
    "Prints how many heads changed and by how much; the result is the table (from Lua: one\n"
    "table per head keyed by column, attn.diff(\"ranks\", \"vo\", \"A\", \"B\")[1].delta).\n"
    "Examples:\n"
    "  diff ranks vo demo-r1 demo-r1-bf16\n"
    "  diff ranks vo base tuned layers 0-3 tau 0.99 to vo_diff.csv";

static const Param diff_ranks_pos[] = {
    PARAM_PAIR,
    { .name = "a", .type = ARG_STRING, .comp = COMP_MODELS, .metavar = "A", .help = "the first model" },
    { .name = "b", .type = ARG_STRING, .comp = COMP_MODELS, .metavar = "B", .help = "the second model" },
    {0}
};

static const Param diff_ranks_kw[] = { PARAM_LAYERS("layers A-B to compare"), PARAM_TAU, PARAM_TO, {0} };

static Table *diff_table(farr_kind kind, const FarrRankRow *ra, const FarrRankRow *rb, size_t n) {
    char c[6][32];
    const char *names[9] = {"layer", "head", rank_col(kind, 0, "_a", c[0], 32), rank_col(kind, 0, "_b", c[1], 32),
                            rank_col(kind, 1, "_a", c[2], 32), rank_col(kind, 1, "_b", c[3], 32),
                            rank_col(kind, 2, "_a", c[4], 32), rank_col(kind, 2, "_b", c[5], 32), "delta"};
    Table *t = table_new_v(9, names);
    for (size_t i = 0; t && i < n; i++) {
        if (table_row(t)) { table_free(t); return NULL; }
        table_int(t, ra[i].layer); table_int(t, ra[i].head);
        table_int(t, ra[i].rank_a); table_int(t, rb[i].rank_a);
        table_int(t, ra[i].rank_b); table_int(t, rb[i].rank_b);
        table_int(t, ra[i].rank_fused); table_int(t, rb[i].rank_fused);
        table_int(t, rb[i].rank_fused - ra[i].rank_fused);
    }
    return t;
}

static int cmd_diff_ranks(Session *s, const Args *a, Out *out) {
    farr_kind kind = param_pair(a);
    double tau = param_tau(s, a);
    Model *ma, *mb;
    if (session_model_aside(s, args_str(a, "a"), &ma) || session_model_aside(s, args_str(a, "b"), &mb)) return AL_ERR;
    const ModelConfig *ca = &ma->cfg, *cb = &mb->cfg;
    if (ca->n_layers != cb->n_layers || ca->n_heads != cb->n_heads)
        return al_err("diff ranks: %s has %d layer%s x %d heads, %s has %d x %d: a head-by-head diff needs the same "
                      "shape (compare them side by side with `plot ranks-by-layer %s models %s,%s`)", ma->name,
                      ca->n_layers, al_s(ca->n_layers), ca->n_heads, mb->name, cb->n_layers, cb->n_heads, farr_kind_name(kind), ma->name,
                      mb->name);
    long lo, hi;
    if (param_layers(out, a, "layers", ma, &lo, &hi)) return AL_ERR;
    FarrRankRow *ra = NULL, *rb = NULL;
    size_t na = 0, nb = 0;
    int cap_a, cap_b;
    FarrQuery qa = { .m = ma, .kind = kind, .lo = (int)lo, .hi = (int)hi, .offset = FARR_NO_OFFSET,
                     .ranks_only = true };
    FarrQuery qb = qa;
    qb.m = mb;
    int rc = rank_rows(s, &qa, tau, &ra, &na, &cap_a);
    if (rc == AL_OK) rc = rank_rows(s, &qb, tau, &rb, &nb, &cap_b);
    if (rc == AL_OK && na != nb) rc = al_err("diff ranks: %zu row%s against %zu", na, al_s(na), nb);
    Table *t = rc ? NULL : diff_table(kind, ra, rb, na);
    size_t changed = 0, up = 0;
    int dmin = 0, dmax = 0;
    for (size_t i = 0; t && i < na; i++) {
        int d = rb[i].rank_fused - ra[i].rank_fused;
        changed += d != 0;
        up += d > 0;
        if (d < dmin) dmin = d;
        if (d > dmax) dmax = d;
    }
    free(ra);
    free(rb);
    if (!t) return rc ? rc : AL_ERR;
    char lt[256];
    if (out_narrates(out))
        out_printf(out, "%s ranks at tau %g, %s: A = %s, B = %s; %zu of %zu heads differ (%zu up, %zu down), "
                   "delta %d to %+d\n", farr_fused_name(kind), tau, layersel_words(ca, (int)lo, (int)hi, lt, sizeof lt), ma->name, mb->name, changed, na, up,
                   changed - up, dmin, dmax);
    return out_table_to(out, args_str(a, "to"), t);
}

static const Command diff_subs[] = {
    { .name = "ranks", .summary = "two models' rank tables head by head, with the fused rank's change",
      .help = DIFF_RANKS_HELP, .pos = diff_ranks_pos, .kw = diff_ranks_kw, .fn = cmd_diff_ranks },
    {0}
};

/* ================================================================ fuse / fused */

static const char FUSE_HELP[] =
    "Fuses one head pair without forming the product and keeps it as the session's fused head:\n"
    "its factors, singular values and singular vectors, read with `fused WHAT` (and from Lua:\n"
    "attn.fused(\"u\", {index=1})). Prints the ranks of the factors and of the fused map; the\n"
    "result is the array of singular values.\n"
    "Examples:\n"
    "  fuse vo layer 2 head 0\n"
    "  fuse qk layer 1 head 3; fused u index 1";

static const Param fuse_pos[] = {
    PARAM_PAIR,
    {0}
};

static const Param fuse_kw[] = { PARAM_LAYER, PARAM_HEAD, PARAM_OFFSET, {0} };

static int cmd_fuse(Session *s, const Args *a, Out *out) {
    farr_kind kind = param_pair(a);
    int layer, head;
    if (need_layer_head(a, &layer, &head)) return AL_ERR;
    FarrState *st;
    FarrFused *f;
    if (ws_farr(s, &st)) return AL_ERR;
    int rc = farr_fuse(s->cur, kind, layer, head, param_offset(a), &f);
    if (rc) return rc;
    farr_state_set_fused(st, f);
    const Spectrum *sp = f->s;
    double tau = s->tau;
    if (!out_narrates(out)) goto result;
    out_printf(out, "fused %s of layer %d head %d: %zu x %zu map = (%zu x %zu) @ (%zu x %zu)%s\n",
               farr_fused_name(kind), layer, head, sp->m, sp->n, f->A->rows, f->A->cols,
               f->op == SPECTRA_AB ? f->B->rows : f->B->cols, f->op == SPECTRA_AB ? f->B->cols : f->B->rows,
               f->offset != FARR_NO_OFFSET ? " (K at a fixed RoPE offset: analysis only)" : "");
    out_printf(out, "effective ranks at tau %g: %s %zu, %s %zu, %s %zu; sigma_1 = %.6g\n", tau,
               farr_side_name(kind, 0), spectra_effective_rank(f->sa->sigma, f->sa->p, tau),
               farr_side_name(kind, 1), spectra_effective_rank(f->sb->sigma, f->sb->p, tau),
               farr_fused_name(kind), spectra_effective_rank(sp->sigma, sp->p, tau), sp->p ? sp->sigma[0] : 0.0);
    say_qk_dims(s, out, kind);
    out_printf(out, "kept: `fused info|sigma|energy|u|v|a|b` reads it\n");
result:
    if (out_array(out, sp->sigma, sp->p)) return AL_ERR;
    out->written = true;
    return AL_OK;
}

static const char FUSED_HELP[] =
    "Reads the fused head kept by `fuse`: info (one row: where it came from, shapes, ranks at the\n"
    "session tau), sigma (singular values), energy (cumulative energy), u / v (left / right\n"
    "singular vectors: with `index N` the N-th vector as an array, else a table with one column\n"
    "per vector), a / b (the two factors as tables, columns c1..ck: VO is a @ b, QK is a @ b^T).\n"
    "Examples:\n"
    "  fused sigma\n"
    "  fused u index 1\n"
    "  fused a to W_V.csv";

static const Param fused_pos[] = {
    { .name = "what", .type = ARG_ENUM, .choices = FUSED_CHOICES, .def = "info", .comp = COMP_CHOICES,
      .help = "info, sigma, energy, u, v, a or b" },
    {0}
};

static const Param fused_kw[] = {
    { .name = "index", .type = ARG_INT, .min = 1, .max = 1e9, .comp = COMP_NONE, .metavar = "N",
      .help = "u / v: the N-th singular vector (1-based) as an array" },
    PARAM_TO, {0}
};

/* A row-major double (or float) matrix as a table with columns <prefix>1..<prefix>cols. */
static Table *matrix_table(const char *prefix, size_t rows, size_t cols, const double *d, const float *f,
                           size_t ld, bool transpose) {
    char **names = al_calloc(cols ? cols : 1, sizeof(char *), "column names");
    if (!names) return NULL;
    for (size_t j = 0; j < cols; j++) names[j] = al_asprintf("%s%zu", prefix, j + 1);
    Table *t = table_new_v(cols, (const char *const *)names);
    for (size_t j = 0; j < cols; j++) free(names[j]);
    free(names);
    for (size_t i = 0; t && i < rows; i++) {
        if (table_row(t)) { table_free(t); return NULL; }
        for (size_t j = 0; j < cols; j++) {
            size_t at = transpose ? j * ld + i : i * ld + j;
            table_num(t, d ? d[at] : (double)f[at]);
        }
    }
    return t;
}

static int cmd_fused(Session *s, const Args *a, Out *out) {
    FarrState *st;
    if (ws_farr(s, &st)) return AL_ERR;
    const FarrFused *f = farr_state_fused(st);
    if (!f) return al_err("no fused head kept: run `fuse vo|qk layer L head H` first");
    const Spectrum *sp = f->s;
    const char *what = args_str(a, "what");
    bool has_index = args_given(a, "index");
    size_t idx = has_index ? (size_t)args_int(a, "index") : 0;
    if (!strcmp(what, "sigma")) return out_array(out, sp->sigma, sp->p);
    if (!strcmp(what, "energy")) {
        double *e = al_calloc(sp->p ? sp->p : 1, sizeof(double), "energies");
        if (!e) return AL_ERR;
        spectra_cum_energy(sp->sigma, sp->p, e);
        int rc = out_array(out, e, sp->p);
        free(e);
        return rc;
    }
    if (!strcmp(what, "u") || !strcmp(what, "v")) {
        bool u = what[0] == 'u';
        size_t len = u ? sp->m : sp->n;
        if (has_index) {
            if (idx > sp->p) return al_err("fused %s index %zu out of range: 1-%zu", what, idx, sp->p);
            double *v = al_calloc(len ? len : 1, sizeof(double), "a singular vector");
            if (!v) return AL_ERR;
            for (size_t i = 0; i < len; i++) v[i] = u ? sp->U[i * sp->p + idx - 1] : sp->Vt[(idx - 1) * sp->n + i];
            int rc = out_array(out, v, len);
            free(v);
            return rc;
        }
        Table *t = u ? matrix_table("u", sp->m, sp->p, sp->U, NULL, sp->p, false)
                     : matrix_table("v", sp->n, sp->p, sp->Vt, NULL, sp->n, true);
        return t ? out_table_to(out, args_str(a, "to"), t) : AL_ERR;
    }
    if (!strcmp(what, "a") || !strcmp(what, "b")) {
        const Mat *M = what[0] == 'a' ? f->A : f->B;
        Table *t = matrix_table("c", M->rows, M->cols, NULL, M->data, M->cols, false);
        return t ? out_table_to(out, args_str(a, "to"), t) : AL_ERR;
    }
    /* info */
    double tau = s->tau;
    Table *t = table_new(12, "model", "pair", "layer", "head", "offset", "rows", "cols", "inner", "tau",
                         "rank_a", "rank_b", "rank_fused");
    if (!t || table_row(t)) { table_free(t); return AL_ERR; }
    table_str(t, f->model->name);
    table_str(t, farr_kind_name(f->kind));
    table_int(t, f->layer);
    table_int(t, f->head);
    if (f->offset == FARR_NO_OFFSET) table_null(t); else table_int(t, f->offset);
    table_int(t, (long long)sp->m);
    table_int(t, (long long)sp->n);
    table_int(t, (long long)f->A->cols);
    table_num(t, tau);
    table_int(t, (long long)spectra_effective_rank(f->sa->sigma, f->sa->p, tau));
    table_int(t, (long long)spectra_effective_rank(f->sb->sigma, f->sb->p, tau));
    table_int(t, (long long)spectra_effective_rank(sp->sigma, sp->p, tau));
    return out_table_to(out, args_str(a, "to"), t);
}

/* ================================================================ truncate */

static const char TRUNCATE_HELP[] =
    "Truncate-and-split (seed 000, 1.5 / 2.2 / 2.4) on a working copy of the current model (the\n"
    "loaded one is not changed): each fused head is cut to rank r and split back into two\n"
    "factors of r columns / rows with sigma folded into the query (Q) or output (O) side, so the\n"
    "shared side (V, K: what is cached) keeps orthonormal columns. r comes from `rank R`, or is\n"
    "the smallest rank keeping tau of the head's energy (`tau T`, default: set tau). Policies:\n"
    "head (each head its own rank), layer-max (one rank per layer: the largest its heads need,\n"
    "so attention kernels keep one head size), model-max (one rank for the whole model). For\n"
    "GQA the K / V head is shared by a group of query heads: the group's fused maps are stacked\n"
    "(KQ-SVD Theorem 5) and the rank keeps tau of every head's energy. Reports per layer and in\n"
    "total: parameters before / after, energy kept (min, mean over heads), relative Frobenius\n"
    "error of the fused maps, and the KV-cache values per token where a cached dim shrinks\n"
    "(MLA caches the latent: unchanged). A V bias o_proj's bias cannot take (none there, or\n"
    "gpt-oss's sinks) is truncated with W_V: the map [x, 1] [W_V; b_V] W_O, energies included,\n"
    "[W_V'; b_V'] the orthonormal side. `heads` gives one row per head instead. Full-RoPE\n"
    "models cannot truncate qk (seed A.3) but on their layers without RoPE (SmolLM3's no_rope_layers,\n"
    "named alone: `truncate qk rank 8 layers 3`). `export DIR` writes the result; `ppl` and `generate` run it\n"
    "(`source`: the loaded model) and `check` compares it with the model, layer by layer.\n"
    "On a hybrid it truncates the range's softmax-attention layers. On Gemma 4 it refuses the\n"
    "k_eq_v and KV-shared layers (name the others: `layers 0-2`) and notes the KV-shared layers\n"
    "that read a truncated layer's V (they read its cut cache in the session too); `ppl` there\n"
    "(v_norm, like Qwen3-Next's output gate) runs in the session, as on its export.\n"
    "Examples:\n"
    "  truncate vo tau 0.999 layers 1-3\n"
    "  truncate qk rank 16 policy model-max\n"
    "  truncate vo tau 0.99 policy layer-max heads to vo_trunc.csv";

static const Param truncate_pos[] = {
    PARAM_PAIR,
    {0}
};

static const Param truncate_kw[] = {
    PARAM_TAU,
    { .name = "rank", .type = ARG_INT, .min = 1, .max = 1e9, .comp = COMP_NONE, .metavar = "R",
      .help = "keep exactly R dims per head (instead of tau)" },
    PARAM_LAYERS("layers A-B to truncate"),
    { .name = "policy", .type = ARG_ENUM, .choices = POLICY_CHOICES, .def = "head", .comp = COMP_CHOICES,
      .help = "head, layer-max or model-max" },
    { .name = "heads", .type = ARG_FLAG, .comp = COMP_NONE, .help = "report one row per head" },
    PARAM_TO, {0}
};

/* "1,234,567" */
static const char *grouped(char *buf, size_t cap, size_t v) {
    char raw[32];
    snprintf(raw, sizeof raw, "%zu", v);
    size_t n = strlen(raw), j = 0;
    for (size_t i = 0; i < n && j + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) buf[j++] = ',';
        buf[j++] = raw[i];
    }
    buf[j] = 0;
    return buf;
}

/* Per layer: ranks, parameters, energy, error and the KV cache in the one unit (K+V values per
 * token in that layer; the total row: their mean over the truncated layers). The error is the
 * fused map's, ||VO - (VO)_r|| / ||VO||, named as every error column: vo_err_max / qk_err_max. */
static Table *truncate_layer_table(const FarrPlan *p, const ModelConfig *c) {
    char err_col[16];
    snprintf(err_col, sizeof err_col, "%s_err_max", farr_kind_name(p->opts.kind));
    Table *t = table_new(10, "layer", "rank_min", "rank_max", "params_before", "params_after", "energy_min",
                         "energy_mean", err_col, "kv_before", "kv_after");
    if (!t) return NULL;
    size_t kv = cfg_kv_values(c), nl = (size_t)layersel_count(c, p->lo, p->hi);
    for (int L = p->lo; L <= p->hi; L++) {
        const FarrTruncLayer *tl = farr_plan_layer(p, L);
        if (!tl) continue;                   /* a hybrid's linear-attention layer */
        int rmin = 1 << 30, rmax = 0;
        for (int g = 0; g < tl->n_kv; g++) {
            if (tl->groups[g]->rank < rmin) rmin = tl->groups[g]->rank;
            if (tl->groups[g]->rank > rmax) rmax = tl->groups[g]->rank;
        }
        if (table_row(t)) { table_free(t); return NULL; }
        table_int(t, L); table_int(t, rmin); table_int(t, rmax);
        table_int(t, (long long)tl->params_before); table_int(t, (long long)tl->params_after);
        table_num(t, tl->energy_min); table_num(t, tl->energy_mean); table_num(t, tl->err_max);
        table_int(t, (long long)kv); table_int(t, (long long)(kv - (tl->kv_before - tl->kv_after)));
    }
    if (table_row(t)) { table_free(t); return NULL; }
    int rmin = 1 << 30;
    for (int L = p->lo; L <= p->hi; L++) {
        const FarrTruncLayer *tl = farr_plan_layer(p, L);
        for (int g = 0; tl && g < tl->n_kv; g++) if (tl->groups[g]->rank < rmin) rmin = tl->groups[g]->rank;
    }
    table_str(t, "total"); table_int(t, rmin); table_int(t, p->rank_max);
    table_int(t, (long long)p->params_before); table_int(t, (long long)p->params_after);
    table_num(t, p->energy_min); table_num(t, p->energy_mean); table_num(t, p->err_max);
    table_int(t, (long long)kv); table_count(t, (double)kv - (double)(p->kv_before - p->kv_after) / (double)nl);
    return t;
}

static Table *truncate_head_table(const FarrPlan *p, const ModelConfig *c) {
    char err_col[16];
    snprintf(err_col, sizeof err_col, "%s_err", farr_kind_name(p->opts.kind));
    Table *t = table_new(6, "layer", "head", "kv_head", "rank", "energy", err_col);
    if (!t) return NULL;
    for (int L = p->lo; L <= p->hi; L++)
        for (int h = 0; farr_plan_layer(p, L) && h < c->n_heads; h++) {
            int idx;
            const FarrGroup *g = farr_plan_head(p, c, L, h, &idx);
            if (table_row(t)) { table_free(t); return NULL; }
            table_int(t, L); table_int(t, h); table_int(t, cfg_kv_group(c, h)); table_int(t, g->rank);
            table_num(t, g->energy[idx]); table_num(t, g->err[idx]);
        }
    return t;
}

/* Gemma 4: the KV-shared layers that read a truncated layer's K / V (cfg_kv_source) take its cut W_V
 * with their own W_O, so the export changes their V-O maps too; one line naming them. */
static void say_kv_readers(Out *out, const ModelConfig *c, int lo, int hi) {
    char buf[256];
    size_t at = 0;
    for (int M = c->kv_shared_from > 0 ? c->kv_shared_from : c->n_layers; M < c->n_layers && at < sizeof buf; M++) {
        int src = cfg_kv_source(c, M);
        if (src >= lo && src <= hi && src != M)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%d (V of layer %d)", at ? ", " : "", M, src);
    }
    if (at)
        out_printf(out, "note: the KV-shared layers reading a truncated layer's values -- %s -- change with it: the "
                   "working copy and its export change their V-O maps too (their own W_O with the cut W_V)\n", buf);
}

static int cmd_truncate(Session *s, const Args *a, Out *out) {
    const ModelConfig *c = &s->cur->cfg;
    FarrTruncOpts o = { .kind = param_pair(a) };
    if (args_given(a, "tau") && args_given(a, "rank"))
        return al_err("truncate: give tau T or rank R, not both");
    o.by_rank = args_given(a, "rank");
    o.rank = o.by_rank ? (int)args_int(a, "rank") : 0;
    o.tau = param_tau(s, a);
    long lo, hi;
    if (param_layers(out, a, "layers", s->cur, &lo, &hi)) return AL_ERR;
    o.layer_lo = (int)lo;
    o.layer_hi = (int)hi;
    if (farr_policy_parse(args_str(a, "policy"), &o.policy)) return AL_ERR;
    FarrState *st;
    FarrPlan *p;
    if (ws_farr(s, &st)) return AL_ERR;
    int rc = farr_truncate(s->cur, &o, &p);
    if (rc) return rc;
    Table *t = args_flag(a, "heads") ? truncate_head_table(p, c) : truncate_layer_table(p, c);
    if (!t) { farr_plan_free(p); return AL_ERR; }
    char b1[32], b2[32];
    double cut = p->params_before ? 100.0 * (1.0 - (double)p->params_after / (double)p->params_before) : 0;
    if (out_narrates(out)) {
        char lt[256];
        out_printf(out, "truncated %s of %s (", farr_fused_name(o.kind), layersel_words(c, p->lo, p->hi, lt, sizeof lt));
        if (o.by_rank) out_printf(out, "rank %d", o.rank);
        else out_printf(out, "tau %g", o.tau);
        out_printf(out, ", policy %s): ranks %s%d, %s parameters %s -> %s (%.1f%% fewer)\n",
                   farr_policy_name(o.policy), p->uniform ? "" : "up to ", p->rank_max, o.kind == FARR_VO ? "V / O" : "Q / K",
                   grouped(b1, sizeof b1, p->params_before), grouped(b2, sizeof b2, p->params_after), cut);
        out_printf(out, "energy kept: min %.6f, mean %.6f; relative error of the fused maps: max %.4g, mean %.4g\n",
                   p->energy_min, p->energy_mean, p->err_max, p->err_mean);
        if (cfg_is_mla(c))
            out_printf(out, "KV cache: unchanged (MLA caches the %d-dim latent, not the heads)\n", c->kv_lora_rank);
        else {                   /* K+V per token per layer as info, convert and kv-cache count it */
            /* the layers with a KV cache (a hybrid's linear-attention layers and Gemma 4's KV-shared ones have none),
               each at its own dims (Gemma 4's full layers: global_head_dim, their KV heads), as kv-cache counts them */
            size_t L = (size_t)cfg_n_kv_layers(c), all = model_kv_values_total(s->cur);
            size_t now = all - (p->kv_before - p->kv_after);
            char why[160];
            dt_type kd = kvcache_dtype(s->cur, why, sizeof why);     /* info's and kv-cache's, one rule */
            out_printf(out, "KV cache per token per layer (K+V, mean over the %zu layer%s): %.6g -> %.6g values "
                       "(%.1f%%); whole model %zu -> %zu byte%s per token (%s: %s) in an engine that caches each KV "
                       "head's rank-r K / V; no export holds that cache (`format dense` and `format factors` keep the "
                       "source's shapes: %zu)\n", L, al_s(L), (double)all / (double)L, (double)now / (double)L,
                       100.0 * (double)now / (double)all, all * dt_size(kd), now * dt_size(kd), al_s(now * dt_size(kd)), dt_name(kd), why,
                       all * dt_size(kd));
        }
        say_kv_readers(out, c, p->lo, p->hi);
        char why[512];
        if (analysis_available(s->cur, AN_EVAL, why, sizeof why))
            out_printf(out, "working copy updated (the loaded model is unchanged): `ppl`, `generate` and `check` measure "
                       "it, `export DIR` writes it\n");
        else            /* Gemma 4's v_norm, Qwen3-Next's gate: the session's layers cannot run it */
            out_printf(out, "working copy updated (the loaded model is unchanged): `export DIR` writes it; `ppl`, "
                       "`generate` and `check` measure the export (`load DIR`, `check DIR`), not the working copy (%s)\n",
                       why);
    }
    if ((rc = farr_state_set_plan(st, s->cur, p)) != AL_OK || (rc = xform_add(s, &cmd_farr_xform, s->cur, NULL)) != AL_OK) {
        table_free(t);
        return rc;
    }
    return out_table_to(out, args_str(a, "to"), t);
}

/* ================================================================ the transformation */

/* The working copy's plans of m (NULL when none). */
static void farr_plans(Session *s, const Model *m, const FarrPlan **vo, const FarrPlan **qk) {
    FarrState *st;
    *vo = *qk = NULL;
    if (ws_farr(s, &st) == AL_OK) {
        *vo = farr_state_plan(st, m, FARR_VO);
        *qk = farr_state_plan(st, m, FARR_QK);
    }
}

static bool farr_xf_alive(Session *s, const Xform *x) {
    const FarrPlan *vo, *qk;
    farr_plans(s, x->src, &vo, &qk);
    return vo || qk;
}

/* The export's line on quantized shards written unquantized beside a rewritten one (export.h). */
static void say_fused_plain(Out *out, const ExportReport *rep) {
    if (rep->fused_plain)
        out_printf(out, "%zu of them (%s) unchanged by the cut but written %s too and listed unquantized: vLLM fuses "
                   "them with a rewritten shard (q/k/v_proj into qkv_proj) and refuses a fused layer whose shards are "
                   "not all quantized alike\n", rep->fused_plain, rep->fused_names, dt_name(rep->reenc_to));
}

/* `export DIR` after `truncate`: the working copy (the latest `truncate vo` / `truncate qk` plans). */
static int farr_xf_export(Session *s, const Xform *x, const Args *a, Out *out) {
    const FarrPlan *vo, *qk;
    farr_plans(s, x->src, &vo, &qk);
    const char *dir = args_str(a, "dir");
    ExportOpts o = { .format = EXPORT_AUTO, .force = args_flag(a, "force"), .dtype_set = args_given(a, "dtype") };
    if (args_given(a, "format") && export_format_parse(args_str(a, "format"), &o.format)) return AL_ERR;
    if (o.dtype_set && strcmp(args_str(a, "dtype"), "fp8") == 0) o.dtype = DT_F8_E4M3;
    else if (o.dtype_set && xform_export_dtype(a, DT_INVALID, &o.dtype))
        return al_err("export: dtype %s: a FaRR export writes its changed tensors in f32, f16, bf16 or fp8 (fp8: "
                      "an FP8 source's blocks kept)", args_str(a, "dtype"));
    ExportReport rep;
    int rc = farr_export(x->src, vo, qk, dir, &o, &rep);
    if (rc) return rc;
    out_printf(out, "exported %s%s%s of %s to %s (format %s): %zu file%s, %zu tensor%s copied bit for bit, %zu rewritten\n",
               vo ? "VO" : "", vo && qk ? " + " : "", qk ? "QK" : "", x->src->name, dir,
               export_format_name(rep.format), rep.files, al_s(rep.files), rep.tensors_copied, al_s(rep.tensors_copied), rep.tensors_rewritten);
    char rl[256];   /* a hybrid's truncated layers are its attention layers in the range ("1, 4", not "1-4") */
    if (rep.reenc_tensors)
        out_printf(out, "re-encoded %zu changed tensors (%s; %s) %s -> %s: added error %.3g (||W_written - W'|| / "
                   "||W'||, max)\n", rep.reenc_tensors, rep.reenc_names,
                   layersel_words(&x->src->cfg, rep.reenc_lo, rep.reenc_hi, rl, sizeof rl), export_reenc_from(&rep),
                   dt_name(rep.reenc_to), rep.reenc_err);
    if (!rep.reenc_tensors && !rep.tensors_rewritten && o.dtype_set)
        out_printf(out, "dtype %s: nothing re-encoded: the cut changed no tensor (every rank kept in full), so every "
                   "tensor is the source's, in its own dtype\n", args_str(a, "dtype"));
    if (rep.reenc_tensors && rep.reenc_from == DT_F8_E4M3 && rep.reenc_to != DT_F8_E4M3 && rep.plain_lists[0])
        out_printf(out, "their %s%s dropped and their modules listed in %s (transformers and vLLM load them "
                   "unquantized beside the FP8 ones)\n", rep.dropped_scales & 1 ? "_scale_inv" : "weight_scale",
                   rep.dropped_scales & 4 ? " / input_scale" : "", rep.plain_lists);
    else if (rep.reenc_tensors && rep.reenc_fp4 != DT_FP4_NONE && rep.plain_lists[0])
        out_printf(out, "their %s scales dropped and their modules listed in %s (engines load them unquantized "
                   "beside the %s ones)\n", export_reenc_from(&rep), rep.plain_lists, export_reenc_from(&rep));
    say_fused_plain(out, &rep);
    if (rep.ct_bf16)
        out_printf(out, "%zu of them (o_proj) written in BF16 and listed unquantized: their static input_scale "
                   "calibrates an input the cut changed, and an FP8 module of a static scheme needs one\n", rep.ct_bf16);
    if (rep.kv_scales_dropped)
        out_printf(out, "dropped %zu static KV cache scales (k_scale / v_scale%s) of %s: calibrated on keys and values "
                   "the cut changes; vLLM and SGLang take 1.0 there (their default with none): recalibrate them for an "
                   "FP8 KV cache\n", rep.kv_scales_dropped, rep.kv_q ? " / q_scale" : "",
                   layersel_words(&x->src->cfg, rep.kv_lo, rep.kv_hi, rl, sizeof rl));
    if (rep.fp8_blocks)
        out_printf(out, "FP8 blocks of the changed tensors: %zu of %zu unchanged, kept bit for bit with their scales\n",
                   rep.fp8_blocks_kept, rep.fp8_blocks);
    if (rep.format == EXPORT_HF && qk)
        out_printf(out, "query rows scaled by %.6f so that scores keep their 1/sqrt(d) scale\n", rep.q_scale);
    out_printf(out, "manifest: %s/farr_manifest.json\n", dir);
    out_string(out, dir);
    out->written = true;
    return AL_OK;
}

/* The smallest and largest rank a plan keeps over its layers and groups. */
static void plan_rank_range(const FarrPlan *p, int *rmin, int *rmax) {
    *rmin = 1 << 30;
    *rmax = 0;
    for (int L = p->lo; L <= p->hi; L++) {
        const FarrTruncLayer *tl = farr_plan_layer(p, L);
        for (int g = 0; tl && g < tl->n_kv; g++) {
            if (tl->groups[g]->rank < *rmin) *rmin = tl->groups[g]->rank;
            if (tl->groups[g]->rank > *rmax) *rmax = tl->groups[g]->rank;
        }
    }
}

/* "VO: V 4 dims per KV head in layers 0-4; " into buf at *n: what one plan keeps of the cached side
 * (MLA: "VO: rank 4 in layers 0-4; ", no head is cached). */
static void plan_kv_text(const FarrPlan *p, const ModelConfig *c, char *buf, size_t cap, size_t *n) {
    int rmin, rmax;
    bool mla = cfg_is_mla(c);
    char lt[128];
    if (!p || *n >= cap) return;
    plan_rank_range(p, &rmin, &rmax);
    char r[32];
    if (rmin == rmax) snprintf(r, sizeof r, "%d", rmax);
    else snprintf(r, sizeof r, "%d-%d", rmin, rmax);
    if (mla) *n += (size_t)snprintf(buf + *n, cap - *n, "%s: rank %s in %s; ", farr_fused_name(p->opts.kind), r,
                                    layersel_words(c, p->lo, p->hi, lt, sizeof lt));
    else *n += (size_t)snprintf(buf + *n, cap - *n, "%s: %s %s dims per KV head in %s; ",
                                farr_fused_name(p->opts.kind), p->opts.kind == FARR_VO ? "V" : "K", r,
                                layersel_words(c, p->lo, p->hi, lt, sizeof lt));
}

/* `kv-cache` row of the working copy: truncating VO shrinks each KV head's cached V to the rank
 * kept (the shared side W_V' keeps r orthonormal columns), truncating QK its cached K (the NoPE
 * part where RoPE is partial); K+V values per token per layer are their mean over the model's
 * layers (untruncated layers keep the model's), as `truncate` reports them. MLA caches its latent:
 * unchanged. Parameters: the model's attention parameters per layer less the mean removed. */
static bool farr_xf_kv_row(const Xform *x, const XformKvCtx *c, XformKvRow *row) {
    const FarrPlan *vo = NULL, *qk = NULL;
    if (c->s) farr_plans(c->s, x->src, &vo, &qk);
    if (!vo && !qk) return false;
    size_t removed = 0, pr = 0, n = 0, L = c->layers ? c->layers : 1;
    if (vo) { removed += vo->kv_before - vo->kv_after; pr += vo->params_before - vo->params_after; }
    if (qk) { removed += qk->kv_before - qk->kv_after; pr += qk->params_before - qk->params_after; }
    size_t all = c->before * L - removed;            /* K+V per token, all layers */
    double now = (double)all / (double)L;
    char what[160] = "";
    bool mla = cfg_is_mla(&x->src->cfg);
    plan_kv_text(vo, &x->src->cfg, what, sizeof what, &n);
    plan_kv_text(qk, &x->src->cfg, what, sizeof what, &n);
    if (mla)
        snprintf(row->scheme, sizeof row->scheme, "truncate (%sMLA caches the latent: unchanged; %zu byte%s per token in "
                 "%zu layer%s; x1)", what, c->before * c->bytes * L, al_s(c->before * c->bytes * L), L, al_s(L));
    else
        snprintf(row->scheme, sizeof row->scheme, "truncate (%sK+V per token per layer %zu -> %.6g, mean over %zu layer%s; "
                 "%zu byte%s per token in %zu layer%s with rank-r K / V cached, no export's: they keep %zu; x%.4g)", what,
                 c->before, now, L, al_s(L), all * c->bytes, al_s(all * c->bytes), L, al_s(L), c->before * L * c->bytes, c->before ? now / (double)c->before : 1.0);
    row->values = now;
    size_t ap = cfg_attn_params(&x->src->cfg);
    row->params = (size_t)llround((double)ap - (double)pr / (double)L);
    return true;
}

static void farr_xf_describe(const Xform *x, char *buf, size_t cap) {
    snprintf(buf, cap, "truncate of %s (FaRR working copy)", x->src->name);
}

/* ---------------------------------------------------------------- the check's inputs */

/* The random tokens of a FaRR check (in the session or of an export), drawn as `compare` draws its
 * own (core/methods/budget_compare.c: tpa_random_input with seed AL_SEED_COMPARE and each layer's input second
 * moment from the session's calibration of the source, ws_calib_fit_sigma; unit variance without
 * one), so that the check's errors and compare's answer the same question. */
typedef struct {
    size_t T;
    uint64_t seed;
    double **sigma;           /* per layer E[x xᵀ] (n_layers entries; NULL: unit variance) */
    int n_layers, hidden;
    int *pos;                 /* 0..T-1 */
    char desc[384];           /* which tokens, for the headline */
} FarrDraw;

static void farr_draw_free(FarrDraw *d) {
    ws_calib_free_sigma(d->sigma, d->n_layers);
    free(d->pos);
    d->sigma = NULL;
    d->pos = NULL;
}

static int farr_draw_open(Session *s, Model *src, const Args *a, FarrDraw *d) {
    memset(d, 0, sizeof *d);
    d->T = (size_t)args_int(a, "tokens");
    d->seed = args_given(a, "seed") ? (uint64_t)args_int(a, "seed") : AL_SEED_COMPARE;
    d->n_layers = src->cfg.n_layers;
    d->hidden = src->cfg.hidden;
    size_t ntok = 0;
    if (ws_calib_fit_sigma(s, src, 0, 0, d->n_layers - 1, &d->sigma, &ntok)) return AL_ERR;
    if (!(d->pos = al_malloc3(d->T, 1, sizeof *d->pos, "positions"))) { farr_draw_free(d); return AL_ERR; }
    for (size_t i = 0; i < d->T; i++) d->pos[i] = (int)i;
    int n = snprintf(d->desc, sizeof d->desc, "%zu random Gaussian tokens, seed %llu%s, ", d->T,
                     (unsigned long long)d->seed, args_given(a, "seed") ? " (given)" : " (compare's)");
    if (d->sigma)
        snprintf(d->desc + n, sizeof d->desc - (size_t)n, "with each layer's input second moment from the session's "
                 "calibration of %s (%zu token%s), as `compare` draws them", src->name ? src->name : src->path, ntok, al_s(ntok));
    else
        snprintf(d->desc + n, sizeof d->desc - (size_t)n, "unit variance (the session has no calibration of %s with "
                 "attention inputs), as `compare` draws them", src->name ? src->name : src->path);
    return AL_OK;
}

/* Relative error of the causal scores b against a up to a constant per query (row), over the keys
 * each query sees (both scores 0: masked): the softmax ignores such a shift, and the truncation
 * makes one where it drops b_K (its score term is constant per query). */
static double score_err_shift(const AttnOut *a, const AttnOut *b) {
    if (!a->scores || !b->scores || a->T != b->T || a->n_heads != b->n_heads) return NAN;
    size_t T = a->T;
    double num = 0, den = 0;
    for (size_t row = 0; row < (size_t)a->n_heads * T; row++) {
        const float *x = a->scores + row * T, *y = b->scores + row * T;
        double md = 0, ma = 0;
        size_t k = 0;
        for (size_t j = 0; j < T; j++)
            if (x[j] != 0 || y[j] != 0) { md += (double)y[j] - x[j]; ma += x[j]; k++; }
        if (!k) continue;
        md /= (double)k;
        ma /= (double)k;
        for (size_t j = 0; j < T; j++)
            if (x[j] != 0 || y[j] != 0) {
                double e = (double)y[j] - x[j] - md, r = x[j] - ma;
                num += e * e;
                den += r * r;
            }
    }
    if (isnan(num) || isnan(den)) return NAN;
    return den > 0 ? sqrt(num / den) : num > 0 ? INFINITY : 0;
}

/* ---------------------------------------------------------------- the per-layer table */

/* The layer a check measures (the working copy's or the export's); *W NULL: not truncated. */
typedef int (*FarrLayerFn)(void *ctx, int layer, AttnLayer **W);

typedef struct {
    Model *m;
    const FarrPlan *vo, *qk;
} PlanLayers;

static int plan_layer_fn(void *ctx, int layer, AttnLayer **W) {
    PlanLayers *c = ctx;
    return farr_attn_layer(c->m, c->vo, c->qk, layer, W);
}

typedef struct {
    Model *ex;
    const bool *want;         /* the manifest's truncated layers */
} ExportLayers;

static int export_layer_fn(void *ctx, int layer, AttnLayer **W) {
    ExportLayers *c = ctx;
    *W = NULL;
    return c->want[layer] ? attn_layer_load(c->ex, layer, W) : AL_OK;
}

/* The one rank every group of p keeps in layer l (full when p does not cover it; -1: ranks differ). */
static int plan_layer_rank(const FarrPlan *p, int l, int full) {
    const FarrTruncLayer *tl = p ? farr_plan_layer(p, l) : NULL;
    if (!tl || tl->n_kv < 1) return full;
    for (int g = 1; g < tl->n_kv; g++)
        if (tl->groups[g]->rank != tl->groups[0]->rank) return -1;
    return tl->groups[0]->rank;
}

/* compare's farr out_err of source layer S at the plans' ranks of layer l on X (NaN where compare
 * has no such row: MLA, per-head ranks, a QK cut under RoPE, where compare keeps keys whole). */
static int compare_out_err(const AttnLayer *S, const PlanLayers *p, int l, const Mat *X, const int *pos, double *ce) {
    *ce = NAN;
    if (S->kind != ATTN_GQA) return AL_OK;
    int rk = plan_layer_rank(p->qk, l, S->head_dim), rv = plan_layer_rank(p->vo, l, S->v_dim);
    if (rk < 1 || rv < 1 || (S->rope_dim > 0 && rk < S->head_dim)) return AL_OK;
    BudgetRow row;
    if (budget_farr_layer(S, rk, rv, X, pos, &row)) return AL_ERR;
    *ce = row.out_err;
    return AL_OK;
}

/* The row of layer l: W against the source's layer on d's tokens of l (and compare's number). */
static int layer_row(Model *src, const AttnLayer *W, int l, const FarrDraw *d, const PlanLayers *cmp, Table *t,
                     int *nan_layer) {
    AttnLayer *S = NULL;
    AttnOut *y = NULL, *y2 = NULL;
    double se = NAN, oe = NAN, ce = NAN;
    Mat *X = tpa_random_input(d->T, d->hidden, d->seed, d->sigma ? d->sigma[l] : NULL);
    int rc = X ? attn_layer_load(src, l, &S) : AL_ERR;
    if (rc == AL_OK) rc = attn_eval(S, X, d->pos, true, &y);
    if (rc == AL_OK) rc = attn_eval(W, X, d->pos, true, &y2);
    if (rc == AL_OK) {
        attn_rel_err(y, y2, NULL, &oe);
        se = score_err_shift(y, y2);
    }
    if (rc == AL_OK && cmp) rc = compare_out_err(S, cmp, l, X, d->pos, &ce);
    if (rc == AL_OK && (rc = table_row(t)) == AL_OK) {
        table_int(t, l);
        table_num(t, se);
        table_num(t, oe);
        if (cmp) table_num(t, ce);
        if (*nan_layer < 0 && (isnan(se) || isnan(oe))) *nan_layer = l;
    }
    attn_out_free(y);
    attn_out_free(y2);
    attn_layer_free(S);
    mat_free(X);
    return rc;
}

/* layer, score_err, out_err (and compare_out_err with cmp) of every layer get() gives. */
static int err_table(Model *src, const FarrDraw *d, FarrLayerFn get, void *ctx, const PlanLayers *cmp, Table **out,
                     int *nan_layer) {
    Table *t = cmp ? table_new(4, "layer", "score_err", "out_err", "compare_out_err")
                   : table_new(3, "layer", "score_err", "out_err");
    int rc = t ? AL_OK : AL_ERR;
    *nan_layer = -1;
    for (int l = 0; rc == AL_OK && l < src->cfg.n_layers; l++) {
        AttnLayer *W = NULL;
        rc = get(ctx, l, &W);
        if (rc == AL_OK && W) rc = layer_row(src, W, l, d, cmp, t, nan_layer);
        attn_layer_free(W);
        if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
    }
    if (rc) { table_free(t); t = NULL; }
    *out = t;
    return rc;
}

/* What the errors are, for both checks' headlines. */
#define ERRS_WHAT                                                                                                   \
    "relative Frobenius errors ||Y - Y'|| / ||Y|| of the causal attention scores up to a constant per query "      \
    "(score_err; the softmax ignores such a shift, which dropping b_K makes) and of the attention outputs after "  \
    "o_proj (out_err)"

/* The table of a check (after its lines), and the NaN failure. */
static int check_table(Out *out, const Args *a, Table *t, int nan_layer) {
    if (nan_layer >= 0) out_note_nan(out, "layer %d", nan_layer);
    int rc = out_table_to(out, args_str(a, "to"), t);
    if (rc == AL_OK && nan_layer >= 0) {
        out_emit_result(out);
        return al_err("check failed: layer %d's errors are NaN (NaN/Inf in the source or the truncation)", nan_layer);
    }
    return rc;
}

/* ---------------------------------------------------------------- check DIR */

/* The layers the manifest of dir truncates (want: n entries). */
static int manifest_layers(const char *dir, int n, bool *want) {
    char *path = NULL, *text = NULL;
    size_t len;
    if (asprintf(&path, "%s/farr_manifest.json", dir) < 0) return al_err("out of memory");
    cJSON *root = (text = al_read_file(path, &len)) ? cJSON_Parse(text) : NULL;
    const cJSON *t;
    int rc = root ? AL_OK : al_err("%s: no readable manifest", path);
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(root, "truncations")) {
        const cJSON *ly = cJSON_GetObjectItemCaseSensitive(t, "layers");
        if (cJSON_GetArraySize(ly) != 2) continue;
        int lo = cJSON_GetArrayItem(ly, 0)->valueint, hi = cJSON_GetArrayItem(ly, 1)->valueint;
        for (int l = lo < 0 ? 0 : lo; l <= hi && l < n; l++) want[l] = true;
    }
    cJSON_Delete(root);
    free(text);
    free(path);
    return rc;
}

/* A forward pass of m: the session's (lm_forward) or, for a model the check opened, its own (*own). */
static int check_forward(Session *s, Model *m, bool session, Forward **f, Forward **own) {
    *own = NULL;
    if (session) return lm_forward(s, m, f);
    if (fwd_new(m, NULL, own)) return AL_ERR;
    fwd_set_compute(*own, mm_compute_parse(s->compute));
    *f = *own;
    return AL_OK;
}

/* The perplexity's outcome beside a check's table, which stands either way: an error (a text too
 * short, a model the forward pass refuses) becomes a line; Ctrl-C is kept (*interrupted) for after
 * the table is printed. */
static void ppl_outcome(int rc, Out *out, bool *interrupted) {
    if (rc == AL_INTERRUPTED) *interrupted = true;
    else if (rc != AL_OK) {
        out_printf(out, "perplexity: not measured (%s)\n", al_errmsg());
        al_err_clear();
    }
}

/* Perplexity before (src's forward pass) / after (the export's own forward pass) on the check's text. */
static int export_ppl(Session *s, Model *src, bool src_in_session, Model *ex, const Args *a, Out *out) {
    CheckText t;
    Forward *fs = NULL, *fe = NULL, *own = NULL;
    FwdPpl b = {0}, w = {0};
    int rc = ws_check_text(s, src, a, &t);
    if (rc == AL_OK && t.ids && (rc = check_forward(s, src, src_in_session, &fs, &own)) == AL_OK) {
        rc = fwd_ppl(fs, t.ids, t.n, t.seqlen, &b);
        fwd_free(own);
        own = NULL;
    }
    if (rc == AL_OK && t.ids && (rc = check_forward(s, ex, false, &fe, &own)) == AL_OK) {
        rc = fwd_ppl(fe, t.ids, t.n, t.seqlen, &w);
        fwd_free(own);
    }
    if (rc == AL_OK) ws_check_ppl_line(out, &t, w.tokens, b.nll, w.nll, "the export, its own forward pass");
    ws_check_text_free(&t);
    return rc;
}

/* The second part of `check DIR`: the export loaded as a model, each truncated layer against the
 * source's on the in-session check's tokens, and the perplexity before / after. */
static int export_errors(Session *s, const char *dir, Model *src, bool src_in_session, const Args *a, Out *out) {
    Model *ex = NULL;
    bool *want = al_calloc((size_t)src->cfg.n_layers, sizeof *want, "layers");
    FarrDraw d = {0};
    Table *t = NULL;
    int nan_layer = -1, rc = want ? manifest_layers(dir, src->cfg.n_layers, want) : AL_ERR;
    for (int L = 0; rc == AL_OK && L < src->cfg.n_layers; L++)
        want[L] = want[L] && layersel_attn(&src->cfg, L);   /* a hybrid's range holds layers without attention */
    char why[512];             /* Gemma 4's v_norm, Qwen3-Next's gate: no one-layer table, the ppl still runs */
    bool by_layer = analysis_available(src, AN_EVAL, why, sizeof why);
    if (rc == AL_OK) rc = model_open(dir, &ex);
    if (rc == AL_OK && by_layer) rc = farr_draw_open(s, src, a, &d);
    if (rc == AL_OK && by_layer)
        out_printf(out, "the export's layers (%s loaded as a model) against %s, per truncated layer: " ERRS_WHAT
                   " on %s\n", dir, src->name ? src->name : src->path, d.desc);
    else if (rc == AL_OK)
        out_printf(out, "the export's layers against %s: no per-layer errors (%s); the perplexity runs the whole "
                   "model\n", src->name ? src->name : src->path, why);
    ExportLayers c = {.ex = ex, .want = want};
    if (rc == AL_OK && by_layer) rc = err_table(src, &d, export_layer_fn, &c, NULL, &t, &nan_layer);
    farr_draw_free(&d);
    bool interrupted = false;
    if (rc == AL_OK) ppl_outcome(export_ppl(s, src, src_in_session, ex, a, out), out, &interrupted);
    if (rc == AL_OK && by_layer) rc = check_table(out, a, t, nan_layer);
    else table_free(t);
    model_free(ex);
    free(want);
    return rc == AL_OK && interrupted ? AL_INTERRUPTED : rc;
}

/* `check DIR` of a FaRR export (any format): first its fused maps against the source's at the
 * manifest's ranks, within 1e-2 of the largest singular value, or, where the changed tensors were
 * re-encoded in FP8, within twice the error that encoding added to each factor (measured at export
 * and in the manifest); then the in-session check's table and perplexity on the export's weights. */
static int farr_xf_check_dir(Session *s, const char *dir, const Args *a, Out *out) {
    const char *name = args_str(a, "source");
    Model *src = name && *name ? session_find(s, name) : NULL, *opened = NULL;
    FarrDenseCheck *c = NULL;
    if (farr_dense_check(dir, src, &c)) return AL_ERR;
    double tol = strcmp(c->encoding, "F8_E4M3") == 0 ? fmax(1e-2, 2 * c->added_err) : 1e-2;
    out_printf(out, "%s (format %s%s%s) against %s: %zu truncated heads; fused maps: kept singular values within %.3g "
               "of the source's (relative to the largest; per-head truncations), past the rank %.3g; tolerance %.3g\n",
               c->export_path, c->format, *c->encoding ? ", changed tensors in " : "", c->encoding, c->source_path,
               c->heads, c->sv_err, c->tail, tol);
    bool ok = c->sv_err < tol && c->tail < tol;
    out_printf(out, "%s\n", ok ? "PASS: the export's fused maps are the plan's" : "FAIL: the export's fused maps are not the plan's");
    int rc = src ? AL_OK : ws_check_source(s, a, c->source_path, dir, "farr_manifest.json", &src, &opened);
    farr_dense_check_free(c);
    if (rc == AL_OK) rc = export_errors(s, dir, src, opened == NULL, a, out);
    model_free(opened);
    if (rc) return rc;
    return ok ? AL_OK : al_err("check: %s's fused maps differ from the truncation's", dir);
}

/* ---------------------------------------------------------------- check */

/* Perplexity before / after on the check's text (`text FILE`, else the held-out windows of the
 * session's calibration text of the source: ws_check_text), or a line saying there is none. */
static int farr_check_ppl(Session *s, const Xform *x, const Args *a, Out *out) {
    CheckText t;
    Forward *f = NULL;
    FwdPpl b = {0}, w = {0};
    int rc = ws_check_text(s, x->src, a, &t);
    if (rc == AL_OK && t.ids) rc = lm_forward(s, x->src, &f);
    if (rc == AL_OK && t.ids) rc = xform_ppl_pair(s, x, f, t.ids, t.n, t.seqlen, &b, &w);
    if (rc == AL_OK) ws_check_ppl_line(out, &t, w.tokens, b.nll, w.nll, "the working copy, in the session");
    ws_check_text_free(&t);
    return rc;
}

/* `check` with no folder after `truncate`: every truncated layer of the working copy (both plans,
 * farr_attn_layer) against the source's, on random tokens drawn as `compare` draws them, with
 * compare's farr number at the same ranks, and the perplexity before / after on held-out text
 * when the session has it. */
static int farr_xf_check(Session *s, const Xform *x, const Args *a, Out *out) {
    Model *m = x->src;
    const char *name = args_str(a, "source");
    if (name && *name && session_find(s, name) != m)
        return al_err("check: the working copy is checked against the model it was made of, %s (not %s)", m->name, name);
    PlanLayers p = {.m = m};
    farr_plans(s, m, &p.vo, &p.qk);
    FarrDraw d;
    Table *t = NULL;
    int nan_layer = -1;
    if (farr_draw_open(s, m, a, &d)) return AL_ERR;
    out_printf(out, "the FaRR working copy (%s%s%s) against %s, per truncated layer: " ERRS_WHAT " on %s; "
               "compare_out_err: `compare`'s farr out_err at the same ranks on the same tokens (nan: compare has no "
               "such row: per-head ranks, a QK cut under RoPE, MLA)\n", p.vo ? "VO" : "", p.vo && p.qk ? " + " : "",
               p.qk ? "QK" : "", m->name, d.desc);
    int rc = err_table(m, &d, plan_layer_fn, &p, &p, &t, &nan_layer);
    farr_draw_free(&d);
    bool interrupted = false;
    if (rc == AL_OK) ppl_outcome(farr_check_ppl(s, x, a, out), out, &interrupted);
    if (rc != AL_OK) { table_free(t); return rc; }
    rc = check_table(out, a, t, nan_layer);
    return rc == AL_OK && interrupted ? AL_INTERRUPTED : rc;
}

/* `undo`: drops m's working copy (and its spectra cache); undo re-runs the older truncations. */
static void farr_xf_reset(Session *s, Model *m) {
    FarrState *st;
    if (ws_farr(s, &st) == AL_OK) farr_state_drop_model(st, m);
}

/* `export FILE.gguf` after `truncate`: the dense export (source names, shapes and dtypes). */
static int farr_xf_engine_export(Session *s, const Xform *x, const char *dir) {
    const FarrPlan *vo, *qk;
    farr_plans(s, x->src, &vo, &qk);
    ExportOpts o = { .format = EXPORT_DENSE };
    return farr_export(x->src, vo, qk, dir, &o, NULL);
}

/* The working copy's attention of one layer (both plans folded in): farr_attn_layer. */
static int farr_xf_attn_layer(Session *s, const Xform *x, int layer, const AttnLayer **out, bool *owned) {
    const FarrPlan *vo, *qk;
    AttnLayer *L = NULL;
    farr_plans(s, x->src, &vo, &qk);
    int rc = farr_attn_layer_run(x->src, vo, qk, layer, mm_compute_parse(s->compute), &L);   /* one number */
    *out = L;
    *owned = true;
    return rc;
}

const XformKind cmd_farr_xform = { .name = "truncate", .export_to = farr_xf_export, .describe = farr_xf_describe,
                                   .kv_row = farr_xf_kv_row,
                                   .alive = farr_xf_alive, .export_label = "a FaRR export",
                                   .owns_dir = farr_is_export, .check_dir = farr_xf_check_dir,
                                   .no_shard_mb = "it keeps the source's shards",
                                   .engine_export = farr_xf_engine_export, .engine_form = "its dense FaRR export",
                                   .reset = farr_xf_reset, .replays = true, .supersede_words = 2,
                                   .attn_layer = farr_xf_attn_layer, .attn_what = "FaRR working copy",
                                   .check = farr_xf_check };

/* ================================================================ the table */

static const Command farr_cmds[] = {
    { .name = "spectrum", .summary = "singular values, cumulative energy and ranks of one head's matrix",
      .help = SPECTRUM_HELP, .pos = spectrum_pos, .kw = spectrum_kw, .fn = cmd_spectrum, .flags = CMD_MODEL },
    { .name = "ranks", .summary = "effective ranks of V, O and VO (or Q, K and QK) per head",
      .help = RANKS_HELP, .pos = ranks_pos, .kw = ranks_kw, .fn = cmd_ranks, .flags = CMD_MODEL },
    { .name = "fuse", .summary = "fuse one head pair and keep it (factors, spectrum, vectors)",
      .help = FUSE_HELP, .pos = fuse_pos, .kw = fuse_kw, .fn = cmd_fuse, .flags = CMD_MODEL },
    { .name = "fused", .summary = "read the kept fused head: info, sigma, energy, u, v, a, b",
      .returns = "sigma, energy, u, v: an array of numbers; info, a, b: " CMD_RETURNS_ROWS,
      .help = FUSED_HELP, .pos = fused_pos, .kw = fused_kw, .fn = cmd_fused },
    { .name = "truncate", .summary = "FaRR truncate-and-split on a working copy, with accounting",
      .returns = "the per-layer rows (per-head with `heads`), one Lua table each keyed by column name, and the "
                 "totals row as a second value",
      .help = TRUNCATE_HELP, .pos = truncate_pos, .kw = truncate_kw, .fn = cmd_truncate, .flags = CMD_MODEL },
    { .name = "diff", .summary = "two models side by side: `diff ranks vo A B`", .help = DIFF_HELP, .sub = diff_subs },
    {0}
};

const CommandGroup cmd_group_farr = { .title = "FaRR: fused head ranks and truncation", .cmds = farr_cmds };
