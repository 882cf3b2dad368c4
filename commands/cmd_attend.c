/* cmd_attend.c -- what a head does on real text: `attend` (one head's attention pattern on a text,
 * token strings as labels; with the newest transformation beside it) and `ablate` (perplexity with
 * heads' outputs removed). The numbers come from the forward pass through headprobe.h. */
#define _GNU_SOURCE
#include "headprobe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layersel.h"
#include "registry.h"
#include "ws_lm.h"

/* ================================================================ attend */

#define ATTEND_MATRIX_MAX 12   /* texts of up to this many tokens print the whole matrix unless `top K` is given */

static const char ATTEND_HELP[] =
    "The attention pattern of query head H of layer L on TEXT (quoted; `file FILE` reads a file;\n"
    "`ids FILE` takes token ids as they are, labelled #id without a tokenizer), encoded with the\n"
    "model's tokenizer (BOS first), as the forward pass computes it: each row a query, its\n"
    "weights over the keys before it (causal; a sliding window, chunk, soft-cap, DeepSeek-V3.2's\n"
    "indexer selection as the model has them; the headline names them and a GQA head's KV head). A text of up to 12 tokens prints every weight, one column per key (as\n"
    "`matrix` does for any length; `to FILE.csv` writes it); a longer one (or `top K`) one row per\n"
    "query with its K largest keys (position, token string, weight; K 3 by default).\n"
    "gpt-oss: each head's sink logit takes part of every row's weight, so rows sum to less than 1:\n"
    "the `sink` column and a line say how much. `compare` adds the newest transformation of the\n"
    "model (truncate, convert mla, convert tpa: as `ppl` runs it) beside the source: its top keys\n"
    "and the total-variation distance of each row from the source's. Linear-attention and Mamba-2\n"
    "layers have no pattern (refused, naming the attention layers). `tokenize TEXT strings` shows the\n"
    "token strings alone.\n"
    "Examples:\n"
    "  attend \"Once upon a time there was a cat\" layer 2 head 1\n"
    "  truncate vo rank 2; attend file story.txt max-tokens 40 layer 2 head 3 compare top 2";

/* "j 'tok' 0.53  j 'tok' 0.21" : the K largest weights of row i of P (T, T). */
static void top_keys(const float *P, size_t T, size_t i, size_t K, char *const *str, char *buf, size_t cap) {
    size_t k = 0, used[16];
    buf[0] = 0;
    for (size_t r = 0; r < K && r < 16 && r <= i; r++) {
        size_t best = SIZE_MAX;
        for (size_t j = 0; j <= i; j++) {
            bool taken = false;
            for (size_t u = 0; u < r; u++) taken |= used[u] == j;
            if (!taken && (best == SIZE_MAX || P[i * T + j] > P[i * T + best])) best = j;
        }
        used[r] = best;
        char lab[48];
        probe_label(str[best], lab, sizeof lab);
        if (k < cap) k += (size_t)snprintf(buf + k, cap - k, "%s%zu '%s' %.3f", r ? "  " : "", best, lab, P[i * T + best]);
    }
}

/* Total variation 1/2 sum |p - q| of row i of two patterns. */
static double row_tv(const float *P, const float *Q, size_t T, size_t i) {
    double d = 0;
    for (size_t j = 0; j <= i; j++) d += fabs((double)P[i * T + j] - Q[i * T + j]);
    return d / 2;
}

/* The top-K table: pos, token, top (and sink; top_after, tv with a second pattern). */
static Table *attend_top(const ProbePattern *p, const ProbePattern *q, char *const *str, size_t K) {
    bool sink = p->sink > 0;
    const char *names[6] = {"pos", "token", "top"};
    size_t nc = 3;
    if (sink) names[nc++] = "sink";
    if (q) { names[nc++] = "top_after"; names[nc++] = "tv"; }
    Table *t = table_new_v(nc, names);
    char buf[1024], lab[64];
    for (size_t i = 0; t && i < p->T; i++) {
        if (table_row(t)) { table_free(t); return NULL; }
        table_int(t, (long long)i);
        probe_label(str[i], lab, sizeof lab);
        table_str(t, lab);
        top_keys(p->P, p->T, i, K, str, buf, sizeof buf);
        table_str(t, buf);
        if (sink) {
            double s = 1;
            for (size_t j = 0; j <= i; j++) s -= p->P[i * p->T + j];
            table_num(t, s);
        }
        if (q) {
            top_keys(q->P, q->T, i, K, str, buf, sizeof buf);
            table_str(t, buf);
            table_num(t, row_tv(p->P, q->P, p->T, i));
        }
    }
    return t;
}

/* The full matrix: pos, token, then one column per key ("j:token"). */
static Table *attend_matrix(const ProbePattern *p, char *const *str) {
    size_t T = p->T;
    char **names = al_calloc(T + 2, sizeof *names, "column names");
    if (!names) return NULL;
    names[0] = strdup("pos");
    names[1] = strdup("token");
    for (size_t j = 0; j < T; j++) {
        char lab[48];
        probe_label(str[j], lab, sizeof lab);
        names[j + 2] = al_asprintf("%zu:%s", j, lab);
    }
    Table *t = table_new_v(T + 2, (const char *const *)names);
    for (size_t i = 0; t && i < T; i++) {
        if (table_row(t)) { table_free(t); t = NULL; break; }
        table_int(t, (long long)i);
        table_str(t, names[i + 2] + strcspn(names[i + 2], ":") + 1);
        for (size_t j = 0; j < T; j++) table_num(t, p->P[i * T + j]);
    }
    for (size_t j = 0; j < T + 2; j++) free(names[j]);
    free(names);
    return t;
}

/* The source's pattern (and the transformation's with `compare`) of the arguments' head on ids. */
static int attend_patterns(Session *s, Model *m, const Args *a, const int *ids, size_t T, ProbePattern *p,
                           ProbePattern *q, bool *have_q, Out *out) {
    int layer = (int)args_int(a, "layer"), head = (int)args_int(a, "head");
    Forward *f;
    *have_q = false;
    if (probe_check_head(m, layer, head, T) || lm_forward(s, m, &f)) return AL_ERR;
    int rc = probe_pattern(f, ids, T, layer, head, p);
    if (rc != AL_OK || !args_flag(a, "compare")) return rc;
    char head_line[1024];
    const Xform *x = probe_xform(s, m, head_line, sizeof head_line);
    if (!x) return al_err("attend compare: %s has no transformation that runs as attention layers (truncate, convert "
                          "mla, convert tpa make one)", m->name);
    if (out_narrates(out)) out_printf(out, "%s\n", head_line);
    if ((rc = probe_pattern_xform(s, x, f, ids, T, layer, head, q)) == AL_OK) *have_q = true;
    return rc;
}

/* What shapes the head's pattern, for the headline: " (KV head 1 of 4; sliding window of 8; soft-cap 50)". */
static void attend_traits(const Model *m, int layer, int head, char *buf, size_t cap) {
    const ModelConfig *c = &m->cfg, *lc = model_layer_cfg(m, layer);   /* Gemma 4's full layers: their own KV heads */
    size_t k = 0, w = cfg_layer_window(c, layer), ch = cfg_layer_chunk(c, layer);
    buf[0] = 0;
    if (lc->n_kv_heads < lc->n_heads && !cfg_is_mla(c))
        k += (size_t)snprintf(buf + k, cap - k, "; KV head %d of %d", head / (lc->n_heads / lc->n_kv_heads),
                              lc->n_kv_heads);
    if (cfg_is_mla(c) && k < cap) k += (size_t)snprintf(buf + k, cap - k, "; MLA");
    if (cfg_kv_source(c, layer) != layer && k < cap)        /* Gemma 4's KV-shared layers */
        k += (size_t)snprintf(buf + k, cap - k, "; keys of layer %d", cfg_kv_source(c, layer));
    if (w && k < cap) k += (size_t)snprintf(buf + k, cap - k, "; sliding window of %zu token%s", w, al_s(w));
    if (ch && k < cap) k += (size_t)snprintf(buf + k, cap - k, "; chunks of %zu token%s", ch, al_s(ch));
    if (c->attn_softcap > 0 && k < cap) k += (size_t)snprintf(buf + k, cap - k, "; soft-cap %g", c->attn_softcap);
    if (k && k + 1 < cap) {                     /* "; a; b" -> " (a; b)" */
        buf[0] = ' ';
        buf[1] = '(';
        buf[k] = ')';
        buf[k + 1] = 0;
    }
}

static int cmd_attend(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    Tokenizer *tok;
    int *ids = NULL;
    size_t T = 0;
    char **str = NULL;
    ProbePattern p = {0}, q = {0};
    bool have_q = false;
    int rc = probe_encode(s, m, args_str(a, "text"), args_str(a, "file"), "attend", &tok, &ids, &T);
    if (rc == AL_OK && args_given(a, "max-tokens") && (size_t)args_int(a, "max-tokens") < T) T = (size_t)args_int(a, "max-tokens");
    if (rc == AL_OK) rc = probe_strings(tok, ids, T, &str);
    if (rc == AL_OK) rc = attend_patterns(s, m, a, ids, T, &p, &q, &have_q, out);
    if (rc == AL_OK && out_narrates(out)) {
        char traits[256];
        attend_traits(m, (int)args_int(a, "layer"), (int)args_int(a, "head"), traits, sizeof traits);
        out_printf(out, "%s layer %ld head %ld on %zu token%s%s\n", m->name, args_int(a, "layer"), args_int(a, "head"), T, al_s(T),
                   traits);
        if (p.sink > 0)
            out_printf(out, "sink: the head's sink logit takes %.1f%% of the weight per row on average (rows sum to "
                            "less than 1)\n", 100 * p.sink);
    }
    if (rc == AL_OK) {
        bool matrix = args_flag(a, "matrix") || (T <= ATTEND_MATRIX_MAX && !args_given(a, "top") && !have_q);
        Table *t = matrix ? attend_matrix(&p, str)
                                          : attend_top(&p, have_q ? &q : NULL, str, (size_t)args_int(a, "top"));
        rc = t ? out_table_to(out, args_str(a, "to"), t) : AL_ERR;
    }
    probe_strings_free(str, T);
    free(ids);
    free(p.P);
    free(q.P);
    return rc;
}

/* ================================================================ ablate */

static const char ABLATE_HELP[] =
    "Perplexity of the model on a text FILE (or `text FILE`, `ids FILE`; `seqlen`, `max-tokens` as `ppl`\n"
    "takes them) with a head's output removed: its slice of o_proj's input zeroed in the forward pass,\n"
    "exactly the model with that head's o_proj columns set to 0. One row per head: layer, head, ppl\n"
    "and delta (ppl minus the intact model's, printed first): which heads the model needs and which\n"
    "it can lose. `head H` one head; `heads 0,3,5` (or 2-4, all) each of those in turn; neither:\n"
    "every head of the layer; `together` removes the listed heads at once (one row). `layer all`\n"
    "runs every attention layer. It measures the loaded model (not a transformation);\n"
    "`plot head-importance` draws the result beside each head's VO rank.\n"
    "Examples:\n"
    "  ablate tinystory.txt layer 1 head 3\n"
    "  ablate tinystory.txt layer all max-tokens 2000";

/* The heads the arguments name for a model of H heads. */
static int ablate_heads(const Args *a, int H, int **heads, size_t *n) {
    if (args_given(a, "head")) {
        long h = args_int(a, "head");
        if (h < 0 || h >= H) return al_err("head %ld is out of range 0-%d", h, H - 1);
        char buf[24];
        snprintf(buf, sizeof buf, "%ld", h);
        return probe_head_list(buf, H, heads, n);
    }
    return probe_head_list(args_given(a, "heads") ? args_str(a, "heads") : "all", H, heads, n);
}

/* One row of the ablation table. */
static int ablate_row(Table *t, int layer, const char *heads, const FwdPpl *p, double base) {
    if (table_row(t)) return AL_ERR;
    table_int(t, layer);
    table_str(t, heads);
    table_num(t, exp(p->nll));
    table_num(t, exp(p->nll) - base);
    return AL_OK;
}

/* Every row of the ablation over layers lo..hi. */
static int ablate_run(ProbeAblation *pa, const Args *a, const ModelConfig *c, int lo, int hi, Table *t, double base) {
    int *heads = NULL;
    size_t nh = 0;
    int rc = ablate_heads(a, c->n_heads, &heads, &nh);
    bool together = args_flag(a, "together");
    for (int layer = layersel_next(c, lo, hi); rc == AL_OK && layer <= hi; layer = layersel_next(c, layer + 1, hi))
        for (size_t i = 0; rc == AL_OK && i < (together ? 1 : nh); i++) {
            FwdPpl p;
            char name[24];
            rc = probe_ablation_run(pa, layer, heads + (together ? 0 : i), together ? nh : 1, &p);
            snprintf(name, sizeof name, "%d", heads[i]);
            if (rc == AL_OK) rc = ablate_row(t, layer, together ? (args_given(a, "heads") ? args_str(a, "heads") : "all") : name, &p, base);
            if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
        }
    free(heads);
    return rc;
}

static int cmd_ablate(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    const ModelConfig *c = &m->cfg;
    int *ids = NULL;
    size_t n = 0, L = 0;
    long lo = 0, hi = c->n_layers - 1;
    Forward *f;
    if (!args_all(a, "layer")) {
        lo = hi = args_int(a, "layer");
        if (probe_check_head(m, (int)lo, 0, 0)) return al_err_ctx("ablate");
    }
    if (args_flag(a, "together") && args_given(a, "head"))
        return al_err("ablate: `together` goes with `heads LIST` (one head alone is `head H`)");
    int *named = NULL;                 /* the heads checked before the intact model's perplexity runs */
    size_t n_named = 0;
    if (ablate_heads(a, c->n_heads, &named, &n_named)) return al_err_ctx("ablate");
    free(named);
    ProbeAblation *pa = NULL;
    if (probe_ppl_tokens(s, m, a, &ids, &n, &L) || lm_forward(s, m, &f) || probe_ablation_new(f, ids, n, L, &pa)) {
        free(ids);
        return AL_ERR;
    }
    FwdPpl b;
    int rc = probe_ablation_base(pa, layersel_next(c, (int)lo, (int)hi), &b);
    Table *t = rc == AL_OK ? table_new(4, "layer", "heads", "ppl", "delta") : NULL;
    if (rc == AL_OK && !t) rc = AL_ERR;
    if (rc == AL_OK) {
        if (out_narrates(out))
            out_printf(out, "%s: ppl %.6g intact (%zu token%s predicted in windows of %zu)%s\n", m->name, exp(b.nll), b.tokens, al_s(b.tokens), L,
                       xform_newest(s, m, NULL) ? "; the loaded model: its transformations are not ablated" : "");
        rc = ablate_run(pa, a, c, (int)lo, (int)hi, t, exp(b.nll));
    }
    probe_ablation_free(pa);
    free(ids);
    if (rc != AL_OK && rc != AL_INTERRUPTED) { table_free(t); return rc; }
    int r2 = out_table_to(out, args_str(a, "to"), t);
    return rc == AL_INTERRUPTED ? rc : r2;
}

/* ================================================================ the table */

static const Param attend_pos[] = {
    { .name = "text", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "TEXT|file|ids",
      .help = "the text (quoted), or the word file (ids) followed by FILE" },
    { .name = "file", .type = ARG_PATH, .def = "", .comp = COMP_FILES, .metavar = "FILE",
      .help = "after the word file: the text file; after ids: whitespace-separated token ids" },
    {0}
};
static const Param attend_kw[] = {
    { .name = "layer", .type = ARG_INT, .def = "0", .comp = COMP_LAYERS, .metavar = "L", .help = "the layer" },
    { .name = "head", .type = ARG_INT, .def = "0", .min = 0, .max = 1e6, .comp = COMP_NONE, .metavar = "H",
      .help = "the query head" },
    { .name = "top", .type = ARG_INT, .def = "3", .min = 1, .max = 16, .comp = COMP_NONE, .metavar = "K",
      .help = "keys shown per query, the largest weights (shown past 12 tokens, or when given)" },
    { .name = "max-tokens", .type = ARG_INT, .min = 2, .max = 1e9, .comp = COMP_NONE, .metavar = "N",
      .help = "only the first N tokens of the text" },
    { .name = "matrix", .type = ARG_FLAG, .comp = COMP_NONE, .help = "every weight, one column per key" },
    { .name = "compare", .type = ARG_FLAG, .comp = COMP_NONE,
      .help = "also the newest transformation's pattern (its top keys, and each row's distance)" },
    PARAM_TO,
    {0}
};
static const Param ablate_pos[] = {
    { .name = "what", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE|text|ids",
      .help = "a text file, or the word text followed by one (as ppl takes it), or the word ids followed by a file of token ids" },
    { .name = "file", .type = ARG_PATH, .def = "", .comp = COMP_FILES, .metavar = "FILE",
      .help = "after the word text: a text file; after ids: whitespace-separated token ids" },
    {0}
};
static const Param ablate_kw[] = {
    { .name = "layer", .type = ARG_INT, .flags = PF_ALL, .def = "0", .comp = COMP_LAYERS, .metavar = "L|all",
      .help = "the layer (or all)" },
    { .name = "head", .type = ARG_INT, .min = 0, .max = 1e6, .comp = COMP_NONE, .metavar = "H", .help = "one head" },
    { .name = "heads", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "LIST",
      .help = "heads 0,3,5 or 2-4 or all (default: all), each in turn" },
    { .name = "together", .type = ARG_FLAG, .comp = COMP_NONE, .help = "remove the listed heads at once" },
    { .name = "seqlen", .type = ARG_INT, .min = 2, .max = 1e7, .comp = COMP_NONE, .metavar = "L",
      .help = "window length in tokens (default: min(512, the model's context))" },
    { .name = "max-tokens", .type = ARG_INT, .min = 2, .max = 1e12, .comp = COMP_NONE, .metavar = "N",
      .help = "use only the first N tokens (default: all)" },
    PARAM_TO,
    {0}
};

static const Command attend_cmds[] = {
    { .name = "attend", .summary = "one head's attention pattern on a text, token strings as labels",
      .returns = CMD_RETURNS_ROWS,
      .help = ATTEND_HELP, .pos = attend_pos, .kw = attend_kw, .fn = cmd_attend, .flags = CMD_MODEL },
    { .name = "ablate", .summary = "perplexity on a text with heads' outputs removed, per head",
      .returns = CMD_RETURNS_ROWS,
      .help = ABLATE_HELP, .pos = ablate_pos, .kw = ablate_kw, .fn = cmd_ablate, .flags = CMD_MODEL },
    {0}
};

const CommandGroup cmd_group_attend = { .title = "Language model: tokenizers, generation, perplexity",
                                        .cmds = attend_cmds };
