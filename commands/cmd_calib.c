/* cmd_calib.c -- the calibration and KQ-SVD command group: `calibrate` (activation statistics of a
 * text through the forward pass, core/analysis/calib.h), `calib info|save|load`, `kvsvd learn|eval`
 * (K-SVD / Eigen / KQ-SVD projections and their errors, core/methods/kqsvd.h), and the transformation
 * `kvsvd learn` leaves (its projections, which `export DIR` writes: xform.h). The state -- the
 * statistics, the calibration text's token ids, the learned projections and the last evaluation
 * -- is the workspace's calibration (ws_calib.h), one model at a time; the figures `plot
 * kvsvd-errors` and `plot kvsvd-unbalance` are in cmd_plot_kvsvd.c. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd_calib_check.h"
#include "kqsvd.h"
#include "layersel.h"
#include "params.h"
#include "registry.h"
#include "ws_calib.h"
#include "ws_lm.h"
#include "xform.h"

/* ================================================================ helpers */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A per-layer summary of statistics: tokens and RMS of keys, queries, values; on a hybrid the rows of
 * m's attention layers, the others said in one line (they have no keys, queries or values). */
static Table *stats_table(const CalibStats *st, const Model *m, Out *out) {
    const CalibShape *sh = &st->sh;
    Table *t = table_new(6, "layer", "tokens", "sequences", "rms_k", "rms_q", "rms_v");
    size_t G = (size_t)sh->n_kv_heads, d = (size_t)sh->d_qk, dv = (size_t)sh->d_v, n = d > dv ? d : dv;
    double *g = malloc(n * n * sizeof *g);
    if (!t || !g) { table_free(t); free(g); al_err("out of memory"); return NULL; }
    char note[640];
    layersel_note(&m->cfg, 0, sh->n_layers - 1, "statistics of", note, sizeof note);
    if (note[0] && out_narrates(out)) out_printf(out, "%s\n", note);
    for (int l = 0; l < sh->n_layers; l++) {
        if (!layersel_attn(&m->cfg, l)) continue;
        double tr[3] = {0, 0, 0};
        for (size_t h = 0; h < G; h++)
            for (int w = 0; w < 3; w++) {
                size_t m = w == CALIB_V ? dv : d;
                calib_gram(st, (calib_which)w, l, (int)h, g);
                for (size_t i = 0; i < m; i++) tr[w] += g[i * m + i];
            }
        double T = (double)st->tokens[l];
        if (table_row(t)) { table_free(t); free(g); return NULL; }
        table_int(t, l);
        table_int(t, (long long)st->tokens[l]);
        table_int(t, (long long)st->seqs[l]);
        table_num(t, T > 0 ? sqrt(tr[CALIB_K] / (T * G * d)) : 0);
        table_num(t, T > 0 ? sqrt(tr[CALIB_Q] / (T * sh->n_heads * d)) : 0);
        table_num(t, T > 0 ? sqrt(tr[CALIB_V] / (T * G * dv)) : 0);
    }
    free(g);
    return t;
}

/* ================================================================ calibrate */

static const char *const INPUTS_CHOICES[] = {"auto", "on", "off", NULL};

static const char CALIBRATE_HELP[] =
    "Runs the current model's forward pass over a text and keeps, per layer and KV head, what\n"
    "KQ-SVD, K-SVD and Eigen (seed 001) need: Gram matrices in double precision of the keys\n"
    "after RoPE, of the group's stacked queries (Theorem 5) and of the values, with token\n"
    "counts; optionally the attention input's second moment E[x xᵀ] and mean E[x] (for\n"
    "activation-based TransMLA; `inputs auto` keeps them when hidden <= 2048). Nothing is cached\n"
    "per token. `convert mla ... calib FILE` runs this too (inputs on, training windows).\n"
    "The text (encoded with the model's tokenizer, BOS first; or `ids FILE` of token ids) is cut\n"
    "into whole windows of L tokens: the last tenth (at least one window) is the validation split,\n"
    "the rest the training split; N windows of the chosen split are used, each a fresh sequence.\n"
    "TransMLA calibrates on 128 x 256 tokens of WikiText-2, KQ-SVD on 128 x 2048 of C4: bring the\n"
    "text. Ctrl-C stops within a layer's window and leaves the earlier calibration as it was (a\n"
    "calibration either completes or changes nothing). The statistics replace the\n"
    "current model's earlier ones (and its learned projections: said in one line); other models keep\n"
    "theirs (one calibration per model). `calib save FILE` keeps them.\n"
    "Examples:\n"
    "  calibrate wiki.train.txt samples 128 seqlen 256\n"
    "  calibrate ids c4.ids samples 32 seqlen 2048 split valid";

static int cmd_calibrate(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    const char *what = args_str(a, "what"), *file = args_str(a, "file");
    int *ids = NULL;
    size_t n = 0;
    CalibShape sh;
    if (calib_shape_of(m, &sh) || ws_read_tokens_arg(s, "calibrate", what, file, &ids, &n)) return AL_ERR;
    int inputs = args_enum(a, "inputs");
    CalibRequest rq = {.text = file && *file ? file : what, .ids_file = file && *file && !strcmp(what, "ids"),
                       .samples = (size_t)args_int(a, "samples"), .seqlen = (size_t)args_int(a, "seqlen"),
                       .split = args_enum(a, "split") == 1 ? CALIB_VALID : CALIB_TRAIN,
                       .with_x = inputs == 1 || (inputs <= 0 && sh.hidden <= 2048)};
    double t0 = now_s();
    const CalibStats *was = NULL;
    ws_calib_stats(s, m, &was);
    int rc = ws_calib_run(s, m, ids, n, &rq, out);
    double dt = now_s() - t0;
    if (rc != AL_OK && rc != AL_INTERRUPTED) return rc;
    const CalibStats *st = NULL;
    ws_calib_stats(s, m, &st);
    if (!st || st == was) return rc;                    /* interrupted: the earlier calibration stays, said so */
    out_printf(out, "%zu sequence%s, %zu token%s in %.2f s (%.1f tok/s)\n", st->seqs[0], al_s(st->seqs[0]), st->tokens[0], al_s(st->tokens[0]), dt,
               (double)st->tokens[0] / fmax(dt, 1e-9));
    int r2 = out_table_to(out, args_str(a, "to"), stats_table(st, m, out));
    return rc == AL_INTERRUPTED ? rc : r2;
}

/* ================================================================ calib info | save | load */

static const char CALIB_HELP[] =
    "The session's calibration statistics (from `calibrate`):\n"
    "  calib info         per layer: tokens, sequences, RMS of keys, queries and values\n"
    "  calib save FILE    writes them (safetensors, F64 Grams per layer and KV head, counts and\n"
    "                     the source in the metadata), so a large model is calibrated once\n"
    "  calib load FILE    reads them back for the current model (shapes must match)\n"
    "                     -- or the same statistics from PyTorch on GPUs: scripts/attnlab_collect.py\n"
    "                     (`calib info` then shows the collector, date, versions and devices)\n"
    "`kvsvd eval` also needs the text of an evaluation split: after `calib load`, give it with\n"
    "`kvsvd eval text FILE` (or `ids FILE`).";

static int cmd_calib_info(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (ws_calib_need(s, &c)) return AL_ERR;
    const CalibStats *st = c->st;
    out_printf(out, "calibration of %s: %zu sequence%s x %zu tokens from %s (split %s)%s\n", c->m->name, st->seqs[0], al_s(st->seqs[0]),
               st->seqlen, st->source ? st->source : "?", st->split ? st->split : "?",
               st->has_x ? ", attention-input second moments kept" : "");
    char prov[768];
    calib_provenance(st, prov, sizeof prov);
    if (*prov) out_printf(out, "provenance: %s\n", prov);
    return out_table_to(out, args_str(a, "to"), stats_table(st, c->m, out));
}

static int cmd_calib_save(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (ws_calib_need(s, &c)) return AL_ERR;
    const char *file = args_str(a, "file");
    if (out_may_write(out, file) || al_parent_here(file) || calib_save(c->st, file)) return AL_ERR;
    out_printf(out, "wrote the calibration of %s (%zu token%s) to %s\n", c->m->name, c->st->tokens[0], al_s(c->st->tokens[0]), file);
    out_string(out, file);
    out->written = true;
    return AL_OK;
}

static int cmd_calib_load(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (ws_calib(s, &c)) return AL_ERR;
    const char *file = args_str(a, "file");
    CalibStats *st;
    if (calib_load(file, &st)) return AL_ERR;
    if (calib_check_model(st, s->cur)) { calib_free(st); return al_err_ctx("%s", file); }
    const Xform *newest = xform_newest(s, s->cur, NULL);
    ws_calib_set(c, st, file, newest ? newest->serial : 0, out);
    out_printf(out, "loaded the calibration in %s (%zu sequence%s, %zu token%s%s%s) for %s\n", file, st->seqs[0], al_s(st->seqs[0]), st->tokens[0], al_s(st->tokens[0]),
               st->source ? ", from " : "", st->source ? st->source : "", s->cur->name);
    return out_table_to(out, args_str(a, "to"), stats_table(st, s->cur, out));
}

/* ================================================================ kvsvd learn */

static const char *const METHOD_CHOICES[] = {"ksvd", "eigen", "kqsvd", "all", NULL};

static const char KVSVD_HELP[] =
    "Low-rank projections of the KV cache learned from the calibration statistics (seed 001):\n"
    "  kvsvd learn ksvd|eigen|kqsvd|all [rank R | eps E] [beta B]\n"
    "  kvsvd eval [split train|valid] [samples N] [to FILE.csv]\n"
    "K-SVD keeps the top right singular vectors of the key cache (3.3), Eigen those of keys and\n"
    "queries stacked (3.4), KQ-SVD the optimal rank-R factorization of the score matrix K Qᵀ\n"
    "(Theorem 2), with a KV group's queries stacked (Theorem 5), and for values the optimal\n"
    "factorization of V W_O (Appendix B). Keys and queries are taken after RoPE (the cache).\n"
    "`export DIR [force]` after `kvsvd learn` writes the learned projections to a new (or empty,\n"
    "or with `force` any) folder: kvsvd-<method>.safetensors per learned method with F32 tensors\n"
    "layers.L.proj_k and layers.L.proj_q of shape (kv_heads, d, R) -- the cache keeps k @ proj_k,\n"
    "queries are multiplied by proj_q -- and layers.L.proj_v, layers.L.proj_o of shape (kv_heads,\n"
    "d_v, R_v) (v @ proj_v cached, proj_oᵀ folded into o_proj), plus kvsvd_manifest.json with the\n"
    "ranks, the calibration, and the errors measured.\n"
    "Example:\n"
    "  kvsvd learn all eps 0.1; kvsvd eval; export out/kv";

static const char LEARN_HELP[] =
    "Learns, per layer and KV head, a rank-R projection of the key cache (A: what the cache keeps,\n"
    "K A; B: what queries are multiplied by) and one of the value cache, for K-SVD, Eigen, KQ-SVD\n"
    "or all three, from the Gram matrices `calibrate` kept (O(d³) per head; no T x T matrix).\n"
    "`rank R` fixes the rank (clipped to the head dims); `eps E` (default 0.1, as in the paper)\n"
    "takes per layer the smallest rank keeping 1 - E of the energy of the key (and, apart, the\n"
    "value) spectra averaged over the layer's heads. `beta B` learns with keys times B and queries\n"
    "divided by B (section 6.2: K-SVD and KQ-SVD do not change, Eigen drifts towards K-SVD).\n"
    "The table gives the ranks and the relative Frobenius errors ||Y - Y'|| / ||Y|| (unsquared, as\n"
    "every error attnlab reports) on the calibration set (whole concatenated caches): keys k_err,\n"
    "queries q_err, values v_err, the score matrix K Qᵀ kq_err, and V W_O vo_err. KQ-SVD's kq_err\n"
    "is never above the others' there (Theorem 2).\n"
    "Examples:\n"
    "  kvsvd learn all eps 0.1\n"
    "  kvsvd learn kqsvd rank 32 to kqsvd.csv";

/* Learns method k into the state. */
static int learn_one(Session *s, CalibState *c, kq_method k, const KqSpec *spec) {
    if (!c->gw && kq_wo_grams(s->cur, &c->gw)) return AL_ERR;     /* KQ-SVD's values; V W_O errors of all */
    KqProj *p;
    int rc = kq_learn(c->st, c->gw, k, spec, &p);
    if (rc) return rc;
    kq_proj_free(c->proj[k]);
    c->proj[k] = p;
    free(c->errs[k]);
    c->errs[k] = NULL;
    return AL_OK;
}

/* The spec typed in a (rank or eps, beta). */
static int read_spec(const Args *a, KqSpec *spec) {
    memset(spec, 0, sizeof *spec);
    spec->beta = args_given(a, "beta") ? args_float(a, "beta") : 1.0;
    if (args_given(a, "rank") && args_given(a, "eps")) return al_err("kvsvd learn: give `rank R` or `eps E`, not both");
    spec->by_eps = !args_given(a, "rank");
    spec->rank = spec->by_eps ? 0 : (int)args_int(a, "rank");
    spec->eps = args_given(a, "eps") ? args_float(a, "eps") : 0.1;
    if (spec->by_eps && !(spec->eps > 0 && spec->eps < 1)) return al_err("kvsvd learn: eps %g must be between 0 and 1", spec->eps);
    return AL_OK;
}

/* What learning method which (0-2, 3: all) of c replaces: "the earlier K-SVD, KQ-SVD projections
 * of M and their kvsvd eval errors", or "" when none was learned. */
static void learn_replaces(const CalibState *c, int which, char *buf, size_t cap) {
    size_t n = 0;
    bool errs = false;
    *buf = 0;
    for (int k = 0; k < KQ_NMETHODS && n < cap; k++)
        if ((which == 3 || which == k) && c->proj[k]) {
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "the earlier ", kq_method_label((kq_method)k));
            errs |= c->errs[k] != NULL;
        }
    if (n && n < cap)
        snprintf(buf + n, cap - n, " projections of %s%s", c->m->name, errs ? " and their kvsvd eval errors" : "");
}

static int cmd_kvsvd_learn(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (ws_calib_need(s, &c)) return AL_ERR;
    KqSpec spec;
    if (read_spec(a, &spec)) return AL_ERR;
    char was[256];
    learn_replaces(c, args_enum(a, "method"), was, sizeof was);
    int which = args_enum(a, "method");
    int lo = which == 3 ? 0 : which, hi = which == 3 ? KQ_NMETHODS - 1 : which;
    for (int k = lo; k <= hi; k++) {
        int rc = learn_one(s, c, (kq_method)k, &spec);
        if (rc) return rc;
    }
    Table *t = table_new(9, "layer", "method", "rank_k", "rank_v", "k_err", "q_err", "v_err", "kq_err", "vo_err");
    if (!t) return AL_ERR;
    const CalibShape *sh = &c->st->sh;
    for (int l = 0; l < sh->n_layers; l++)
        for (int k = lo; k <= hi; k++) {
            const KqProj *p = c->proj[k];
            if (table_row(t)) { table_free(t); return AL_ERR; }
            table_int(t, l);
            table_str(t, kq_method_name((kq_method)k));
            table_int(t, p->rank_k[l]);
            table_int(t, p->rank_v[l]);
            table_num(t, kq_rel(p->cal_k[l].k, p->cal_k[l].nk));
            table_num(t, kq_rel(p->cal_k[l].q, p->cal_k[l].nq));
            table_num(t, kq_rel(p->cal_v[l].k, p->cal_v[l].nk));
            table_num(t, kq_rel(p->cal_k[l].kq, p->cal_k[l].nkq));
            if (p->cal_v[l].nkq > 0) table_num(t, kq_rel(p->cal_v[l].kq, p->cal_v[l].nkq));
            else table_null(t);
        }
    if (spec.by_eps) out_printf(out, "ranks from eps %g (per layer, keys and values apart)", spec.eps);
    else out_printf(out, "rank %d", spec.rank);
    out_printf(out, "%s; relative Frobenius errors on the calibration set (%zu token%s of %s, in-sample)\n",
               spec.beta != 1 ? ", with keys x beta, queries / beta" : "", c->st->tokens[0], al_s(c->st->tokens[0]),
               c->st->source ? c->st->source : "?");
    int rc = xform_add(s, &cmd_kvsvd_xform, s->cur, NULL);
    if (rc) { table_free(t); return rc; }
    if (*was) out_printf(out, "replaced %s; `undo` learns them again\n", was);
    return out_table_to(out, args_str(a, "to"), t);
}

/* ================================================================ kvsvd eval */

static const char EVAL_HELP[] =
    "Evaluates the learned projections (section 6.1): runs the forward pass again over N windows\n"
    "of the calibration text -- `split valid` (default): its validation windows, held out; `split\n"
    "train`: exactly the windows the statistics came from (in-sample); at most 32 (`samples N`),\n"
    "the calibration's seqlen -- and, per layer and sequence, measures the relative Frobenius\n"
    "errors ||Y - Y'|| / ||Y|| (unsquared; the paper tabulates their squares) of the keys, queries,\n"
    "values, the full T x T score matrix K Qᵀ (no mask) -- from per-sequence Gram matrices -- and\n"
    "of the attention output MHA(X) = [softmax(Q K̃ᵀ s) Ṽ]_h W_O recomputed with the causal mask\n"
    "(no output bias); errors are summed over a layer's heads, averaged over the sequences. One\n"
    "row per layer and learned method; `to FILE.csv` writes the header\n"
    "layer,method,rank_k,rank_v,k_err,q_err,v_err,kq_err,out_err (the names of `kvsvd learn`'s\n"
    "columns; learn's vo_err is V W_O, out_err here the attention output). After `calib load`\n"
    "give the text with `text FILE` or `ids FILE` (its split train / valid windows).\n"
    "Examples:\n"
    "  kvsvd eval\n"
    "  kvsvd eval split train samples 8 to errors.csv";

static int cmd_kvsvd_eval(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (ws_calib_need(s, &c)) return AL_ERR;
    const KqProj *sets[KQ_NMETHODS];
    kq_method meth[KQ_NMETHODS];
    size_t ns = 0;
    for (int k = 0; k < KQ_NMETHODS; k++)
        if (c->proj[k]) { meth[ns] = (kq_method)k; sets[ns++] = c->proj[k]; }
    if (!ns) return al_err("kvsvd eval: nothing learned yet: run `kvsvd learn all` (or one method) first");
    Forward *f;
    if (lm_forward(s, s->cur, &f)) return AL_ERR;
    int *own;
    const int *ids;
    size_t L, first, count;
    char on[256];
    if (ws_calib_eval_tokens(s, c, a, "kvsvd eval", &own, &ids, &L, &first, &count, on, sizeof on)) return AL_ERR;
    const ModelConfig *mc = &s->cur->cfg;
    if (cfg_has_indexer(mc) && L > (size_t)mc->index_topk) {      /* DeepSeek-V3.2 / GLM-5 */
        free(own);
        return al_err("kvsvd eval: it recomputes each layer's attention over every key, but %s's lightning indexer "
                      "selects %d key%s per query from position %d on, and these windows have %zu token%s: calibrate "
                      "with seqlen %d or less", s->cur->name, mc->index_topk, al_s(mc->index_topk), mc->index_topk, L, al_s(L), mc->index_topk);
    }
    KqEval *ev;
    if (kq_eval_new(&c->st->sh, sets, ns, &ev)) { free(own); return AL_ERR; }
    const char *split = args_str(a, "split");
    out_printf(out, "evaluating %zu method%s on %s\n", ns, al_s(ns), on);
    double t0 = now_s();
    int rc = kq_eval_run(ev, s->cur, f, ids + first * L, count, L);
    free(own);
    const CalibShape *sh = &c->st->sh;
    KqErr e0;
    kq_eval_result(ev, 0, 0, &e0);
    if (rc != AL_OK && !(rc == AL_INTERRUPTED && e0.n_seq > 0)) { kq_eval_free(ev); return rc; }
    if (kq_eval_ref_diff(ev) > 1e-3)
        al_warn("kvsvd eval: the recomputed attention differs from the forward pass's by %.2g (relative); the softmax "
                "scale or mask of this model may not be reproduced exactly", kq_eval_ref_diff(ev));
    ws_calib_drop_eval(c);
    Table *t = table_new(9, "layer", "method", "rank_k", "rank_v", "k_err", "q_err", "v_err", "kq_err", "out_err");
    double mean[KQ_NMETHODS][5] = {{0}};
    for (size_t i = 0; rc != AL_ERR && i < ns; i++)
        if (!(c->errs[meth[i]] = al_calloc((size_t)sh->n_layers, sizeof(KqErr), "evaluation results"))) rc = AL_ERR;
    for (int l = 0; t && rc != AL_ERR && l < sh->n_layers; l++)
        for (size_t i = 0; i < ns; i++) {
            KqErr e;
            kq_eval_result(ev, i, l, &e);
            c->errs[meth[i]][l] = e;
            if (table_row(t)) { rc = AL_ERR; break; }
            table_int(t, l);
            table_str(t, kq_method_name(meth[i]));
            table_int(t, sets[i]->rank_k[l]);
            table_int(t, sets[i]->rank_v[l]);
            table_num(t, e.k); table_num(t, e.q); table_num(t, e.v); table_num(t, e.kq); table_num(t, e.out);
            double v[5] = {e.k, e.q, e.v, e.kq, e.out};
            for (int j = 0; j < 5; j++) mean[meth[i]][j] += v[j] / sh->n_layers;
        }
    kq_eval_free(ev);
    if (!t || rc == AL_ERR) { table_free(t); ws_calib_drop_eval(c); return AL_ERR; }
    snprintf(c->eval_split, sizeof c->eval_split, "%s", split);
    snprintf(c->eval_on, sizeof c->eval_on, "%s", on);
    c->eval_seqs = e0.n_seq;
    double dt = now_s() - t0;
    out_printf(out, "%zu sequence%s in %.2f s%s; relative Frobenius errors, means over layers:\n", e0.n_seq, al_s(e0.n_seq), dt,
               rc == AL_INTERRUPTED ? " -- interrupted" : "");
    for (size_t i = 0; i < ns; i++) {
        const double *m = mean[meth[i]];
        out_printf(out, "  %-7s k_err %.4g  q_err %.4g  v_err %.4g  kq_err %.4g  out_err %.4g\n", kq_method_label(meth[i]),
                   m[0], m[1], m[2], m[3], m[4]);
    }
    bool diff_rank = false;
    for (int l = 0; l < sh->n_layers; l++)
        diff_rank |= sets[0]->rank_k[l] != sets[0]->rank_v[l];
    if (diff_rank) out_printf(out, "(rank is the key rank; value ranks differ: see `kvsvd learn`)\n");
    int r2 = out_table_to(out, args_str(a, "to"), t);
    return rc == AL_INTERRUPTED ? rc : r2;
}

/* ================================================================ the transformation */

/* `export DIR` after `kvsvd learn` (see EXPORT_HELP in commands/cmd_export.c): writes to DIR
 * kvsvd-<method>.safetensors per learned method with F32 tensors layers.L.proj_k and
 * layers.L.proj_q of shape (kv_heads, d, R) -- the cache keeps k @ proj_k, queries are multiplied
 * by proj_q -- and layers.L.proj_v, layers.L.proj_o of shape (kv_heads, d_v, R_v) (v @ proj_v
 * cached, proj_oᵀ folded into o_proj), plus kvsvd_manifest.json with the ranks, the calibration
 * and the errors measured. DIR must be new or empty unless force. */
static int kvsvd_xf_export(Session *s, const Xform *x, const Args *a, Out *out) {
    const char *dir = args_str(a, "dir");
    bool force = args_flag(a, "force");
    CalibState *c;
    if (ws_calib_of(s, x->src, &c)) return AL_ERR;
    if (!c->st) return al_err("export: %s has no calibration statistics any more: run `calibrate FILE` and `kvsvd learn` "
                              "again", x->src->name);
    const KqProj *sets[KQ_NMETHODS];
    const KqErr *errs[KQ_NMETHODS];
    size_t ns = 0;
    for (int k = 0; k < KQ_NMETHODS; k++)
        if (c->proj[k]) { errs[ns] = c->errs[k]; sets[ns++] = c->proj[k]; }
    if (!ns) return al_err("export: nothing learned for %s: run `kvsvd learn` first", s->cur->name);
    KqExportInfo info = {.model_name = s->cur->name, .model_path = s->cur->path, .st = c->st, .errs = errs,
                         .eval_split = c->eval_split[0] ? c->eval_split : NULL, .force = force};
    size_t files;
    if (kqsvd_export(dir, sets, ns, &info, &files)) return AL_ERR;
    out_printf(out, "wrote %zu file%s to %s (%zu method%s and %s)\n", files, al_s(files), dir, ns, al_s(ns), KQ_MANIFEST);
    out_string(out, dir);
    out->written = true;
    return AL_OK;
}

/* The projections live in the workspace's calibration: gone when it is replaced or m closes. */
static bool kvsvd_xf_alive(Session *s, const Xform *x) {
    CalibState *c;
    if (ws_calib_of(s, x->src, &c)) return false;
    for (int k = 0; k < KQ_NMETHODS; k++)
        if (c->proj[k]) return true;
    return false;
}

static void kvsvd_xf_describe(const Xform *x, char *buf, size_t cap) {
    snprintf(buf, cap, "kvsvd learn of %s (KV-cache projections)", x->src->name);
}

/* `kv-cache` rows of the learned projections, one per method (c->part-th learned): the cache holds k @ proj_k and
 * v @ proj_v, G (rank_k + rank_v) values per token per layer, their mean over the layers (exact, as truncate's);
 * parameters per layer: the model's attention and the projections `export` writes (proj_k, proj_q: G d R_k;
 * proj_v, proj_o: G dv R_v), their mean. */
static bool kvsvd_xf_kv_row(const Xform *x, const XformKvCtx *c, XformKvRow *row) {
    CalibState *cs;
    if (!c->s || ws_calib_of(c->s, x->src, &cs)) { al_err_clear(); return false; }
    int k = -1;
    for (size_t i = 0, j = 0; i < KQ_NMETHODS; i++)
        if (cs->proj[i] && j++ == c->part) { k = (int)i; break; }
    if (k < 0) return false;
    const KqProj *p = cs->proj[k];
    size_t G = (size_t)p->sh.n_kv_heads, L = (size_t)p->sh.n_layers, all = 0, extra = 0;
    int lo = 1 << 30, hi = 0;
    for (size_t l = 0; l < L; l++) {
        size_t rk = (size_t)p->rank_k[l], rv = (size_t)p->rank_v[l];
        all += G * (rk + rv);
        extra += 2 * G * ((size_t)p->sh.d_qk * rk + (size_t)p->sh.d_v * rv);
        int r[2] = {p->rank_k[l], p->rank_v[l]};
        for (int i = 0; i < 2; i++) { lo = r[i] < lo ? r[i] : lo; hi = r[i] > hi ? r[i] : hi; }
    }
    double now = L ? (double)all / (double)L : 0;
    snprintf(row->scheme, sizeof row->scheme, "kvsvd learn %s (K / V ranks %d-%d per KV head, k @ proj_k and v @ "
             "proj_v cached; K+V per token per layer %zu -> %.6g, mean over %zu layer%s; %zu byte%s per token in %zu "
             "layer%s; x%.4g)", kq_method_name((kq_method)k), lo, hi, c->before, now, L, al_s(L), all * c->bytes, al_s(all * c->bytes), L,
             al_s(L),             c->before ? now / (double)c->before : 1.0);
    row->values = now;
    row->params = cfg_attn_params(&x->src->cfg) + (size_t)llround((double)extra / (double)(L ? L : 1));
    for (size_t i = (size_t)k + 1; i < KQ_NMETHODS; i++) row->more |= cs->proj[i] != NULL;
    return true;
}

const XformKind cmd_kvsvd_xform = { .name = "kvsvd learn", .export_to = kvsvd_xf_export, .kv_row = kvsvd_xf_kv_row,
                                .check_dir = cmd_kvsvd_check_dir, .dir_manifest = KQ_MANIFEST,
                                       .describe = kvsvd_xf_describe, .alive = kvsvd_xf_alive,
                                       .export_label = "a KQ-SVD export", .no_format = "one layout",
                                       .no_dtype = "F32 projections", .no_shard_mb = "one file per method",
                                       .replays = true,     /* undo: kvsvd learn overwrites all learned state */
                                       /* no attn_layer: the projections act on the cached keys after RoPE
                                          (and several methods may be learned at once) */
                                       .no_attn = "KV-cache projections of keys after RoPE, one set per learned "
                                                  "method, not a layer's weights: `kvsvd eval` measures them" };

/* ================================================================ the table */

static const Param calibrate_pos[] = {
    { .name = "what", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE|text|ids",
      .help = "a text file; or the word text followed by a text file, or ids followed by a file of token ids" },
    { .name = "file", .type = ARG_PATH, .def = "", .comp = COMP_FILES, .metavar = "FILE",
      .help = "after the word text: a text file; after ids: whitespace-separated token ids" },
    {0}
};
static const Param calibrate_kw[] = {
    { .name = "samples", .type = ARG_INT, .def = "128", .min = 1, .max = 1e7, .comp = COMP_NONE, .metavar = "N",
      .help = "most windows (sequences) to run" },
    { .name = "seqlen", .type = ARG_INT, .def = "256", .min = 2, .max = 1e7, .comp = COMP_NONE, .metavar = "L",
      .help = "tokens per window" },
    { .name = "split", .type = ARG_ENUM, .choices = PARAM_SPLIT_CHOICES, .def = "train", .comp = COMP_CHOICES,
      .help = "which part of the text: train (the first nine tenths) or valid (the last tenth)" },
    { .name = "inputs", .type = ARG_ENUM, .choices = INPUTS_CHOICES, .def = "auto", .comp = COMP_CHOICES,
      .help = "also keep the attention input's second moments (auto: when hidden <= 2048)" },
    PARAM_TO,
    {0}
};
static const Param file_pos[] = {
    { .name = "file", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE", .help = "the statistics file (.safetensors)" },
    {0}
};
static const Param to_kw[] = { PARAM_TO, {0} };
static const Param learn_pos[] = {
    { .name = "method", .type = ARG_ENUM, .choices = METHOD_CHOICES, .comp = COMP_CHOICES,
      .help = "ksvd, eigen, kqsvd, or all three" },
    {0}
};
static const Param learn_kw[] = {
    { .name = "rank", .type = ARG_INT, .min = 1, .max = 65536, .comp = COMP_NONE, .metavar = "R",
      .help = "a fixed rank for keys and values (clipped to the head dims)" },
    { .name = "eps", .type = ARG_FLOAT, .min = 0, .max = 1, .comp = COMP_NONE, .metavar = "E",
      .help = "rank per layer keeping 1 - E of the head-averaged energy (default 0.1)" },
    { .name = "beta", .type = ARG_FLOAT, .min = 1e-6, .max = 1e6, .comp = COMP_NONE, .metavar = "B",
      .help = "learn with keys x B and queries / B (default 1)" },
    PARAM_TO,
    {0}
};
static const Param eval_kw[] = {
    PARAM_EVAL_WINDOWS,
    PARAM_TO,
    {0}
};

static const Command calib_subs[] = {
    { .name = "info", .summary = "per-layer summary of the calibration statistics", .help = CALIB_HELP, .kw = to_kw,
      .fn = cmd_calib_info, .flags = CMD_MODEL },
    { .name = "save", .summary = "write the calibration statistics to a safetensors file", .help = CALIB_HELP,
      .pos = file_pos, .fn = cmd_calib_save, .flags = CMD_MODEL },
    { .name = "load", .summary = "read calibration statistics for the current model", .help = CALIB_HELP,
      .pos = file_pos, .kw = to_kw, .fn = cmd_calib_load, .flags = CMD_MODEL },
    {0}
};

static const Command kvsvd_subs[] = {
    { .name = "learn", .summary = "K-SVD / Eigen / KQ-SVD projections per layer and KV head", .help = LEARN_HELP,
      .returns = CMD_RETURNS_ROWS,
      .pos = learn_pos, .kw = learn_kw, .fn = cmd_kvsvd_learn, .flags = CMD_MODEL },
    { .name = "eval", .summary = "errors on K, Q, V, K Qᵀ and the attention output over a split", .help = EVAL_HELP,
      .kw = eval_kw, .fn = cmd_kvsvd_eval, .flags = CMD_MODEL },
    {0}
};

static const Command calib_cmds[] = {
    { .name = "calibrate", .summary = "activation statistics of a text (Grams of K, Q, V per head)",
      .returns = CMD_RETURNS_ROWS,
      .help = CALIBRATE_HELP, .pos = calibrate_pos, .kw = calibrate_kw, .fn = cmd_calibrate, .flags = CMD_MODEL },
    { .name = "calib", .summary = "calibration statistics: info, save, load", .help = CALIB_HELP, .sub = calib_subs,
      .flags = CMD_MODEL },
    { .name = "kvsvd", .summary = "KQ-SVD: learn and evaluate low-rank KV-cache projections", .help = KVSVD_HELP,
      .sub = kvsvd_subs, .flags = CMD_MODEL },
    {0}
};

const CommandGroup cmd_group_calib = { .title = "Calibration and KQ-SVD", .cmds = calib_cmds };
