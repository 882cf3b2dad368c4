/* cmd_calib.c -- the calibration and KQ-SVD command group: `calibrate` (activation statistics of a
 * text through the forward pass, core/calib.h), `calib info|save|load`, `kvsvd learn|eval`
 * (K-SVD / Eigen / KQ-SVD projections and their errors, core/kqsvd.h), the projections' writer
 * that `export DIR` calls after `kvsvd learn` (cmd_kvsvd_export), and the
 * figures `plot kvsvd-errors` and `plot kvsvd-unbalance` (plugged into `plot` through
 * cmd_calib.h). The group's state -- the statistics, the calibration text's token ids, the learned
 * projections and the last evaluation -- lives behind Session.calib for one model at a time and
 * is dropped when that model closes. */
#define _GNU_SOURCE
#include "cmd_calib.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd_lm.h"
#include "kqsvd.h"
#include "plot.h"
#include "plot_dest.h"

/* ================================================================ state */

typedef struct CalibState {
    Model *m;                       /* the model the statistics belong to (NULL: none) */
    CalibStats *st;
    int *ids;                       /* token ids of the calibration text (for eval splits), owned */
    size_t nids;
    char *text;                     /* where the ids came from */
    CalibRequest req;               /* the run that made st from ids (req.text = text) */
    size_t first, count;            /* its windows */
    KqProj *proj[KQ_NMETHODS];      /* learned projections, NULL when not learned */
    double *gw;                     /* W_O Grams of m (kq_wo_grams), cached */
    KqErr *errs[KQ_NMETHODS];       /* last `kvsvd eval`: (n_layers) per method, or NULL */
    char eval_split[8];
    size_t eval_seqs;
} CalibState;

static void drop_eval(CalibState *c) {
    for (int k = 0; k < KQ_NMETHODS; k++) { free(c->errs[k]); c->errs[k] = NULL; }
    c->eval_split[0] = 0;
}

static void drop_proj(CalibState *c) {
    for (int k = 0; k < KQ_NMETHODS; k++) { kq_proj_free(c->proj[k]); c->proj[k] = NULL; }
    drop_eval(c);
}

/* Forgets everything (statistics, text, projections). */
static void drop_all(CalibState *c) {
    drop_proj(c);
    calib_free(c->st);
    c->st = NULL;
    free(c->ids);
    c->ids = NULL;
    c->nids = 0;
    free(c->text);
    c->text = NULL;
    free(c->gw);
    c->gw = NULL;
    c->m = NULL;
}

static void calib_on_free(Session *s) {
    if (!s->calib) return;
    drop_all(s->calib);
    free(s->calib);
    s->calib = NULL;
}

static void calib_on_close(Session *s, Model *m) {
    if (s->calib && s->calib->m == m) drop_all(s->calib);
}

static const SessionHook calib_hook = {.name = "calib", .on_free = calib_on_free, .on_model_close = calib_on_close};

static int state(Session *s, CalibState **out) {
    if (!s->calib) {
        if (!(s->calib = al_calloc(1, sizeof *s->calib, "the calibration state"))) return AL_ERR;
        if (session_hook_add(s, &calib_hook)) return AL_ERR;
    }
    *out = s->calib;
    return AL_OK;
}

/* The statistics of the current model, or an error saying how to get them. */
static int need_stats(Session *s, CalibState **out) {
    CalibState *c;
    *out = NULL;
    if (state(s, &c)) return AL_ERR;
    if (!c->st || c->m != s->cur) {
        if (c->st && c->m)
            return al_err("the calibration statistics belong to model %s, not %s: `use %s`, or `calibrate FILE` this one",
                          c->m->name, s->cur->name, c->m->name);
        return al_err("no calibration statistics for %s: run `calibrate FILE` (or `calib load FILE`) first", s->cur->name);
    }
    *out = c;
    return AL_OK;
}

int cmd_calib_stats(Session *s, const Model *m, const CalibStats **out) {
    *out = s->calib && s->calib->st && s->calib->m == m ? s->calib->st : NULL;
    return AL_OK;
}

bool cmd_calib_text(const Session *s, const Model *m, CalibText *out) {
    memset(out, 0, sizeof *out);
    const CalibState *c = s->calib;
    if (!c || !c->st || c->m != m || !c->ids) return false;
    *out = (CalibText){.ids = c->ids, .n = c->nids, .first = c->first, .count = c->count, .req = c->req};
    return true;
}

bool cmd_kvsvd_pending(const Session *s, const Model *m) {
    const CalibState *c = s->calib;
    if (!c || (m && c->m != m)) return false;
    for (int k = 0; k < KQ_NMETHODS; k++)
        if (c->proj[k]) return true;
    return false;
}

/* ================================================================ helpers */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cmd_calib_read_tokens(Session *s, Model *m, const char *path, bool ids_file, int **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    int rc;
    if (ids_file) rc = lm_read_ids(path, ids, n);
    else {
        Tokenizer *t;
        size_t len;
        char *text = NULL;
        rc = lm_tokenizer(s, m, &t);
        if (rc == AL_OK && !(text = al_read_file(path, &len))) rc = AL_ERR;
        if (rc == AL_OK) rc = tok_encode(t, text, len, true, ids, n);
        free(text);
    }
    for (size_t i = 0; rc == AL_OK && i < *n; i++)
        if ((*ids)[i] < 0 || (*ids)[i] >= m->cfg.vocab)
            rc = al_err("%s: token %zu is id %d, outside %s's vocabulary (0-%d)", path, i + 1, (*ids)[i], m->name,
                        m->cfg.vocab - 1);
    if (rc) { free(*ids); *ids = NULL; *n = 0; }
    return rc;
}

/* Token ids of `what` (a text file) or, when what is the word ids, of the id file `file`. */
static int read_tokens(Session *s, const char *cmd, const char *what, const char *file, int **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    if (file && *file && strcmp(what, "ids") != 0)
        return al_err("%s: give FILE (text) or `ids FILE` (token ids), not '%s' followed by '%s'", cmd, what, file);
    return cmd_calib_read_tokens(s, s->cur, file && *file ? file : what, file && *file, ids, n);
}

/* A per-layer summary of statistics: tokens and RMS of keys, queries, values. */
static Table *stats_table(const CalibStats *st) {
    const CalibShape *sh = &st->sh;
    Table *t = table_new(6, "layer", "tokens", "sequences", "rms_k", "rms_q", "rms_v");
    size_t G = (size_t)sh->n_kv_heads, d = (size_t)sh->d_qk, dv = (size_t)sh->d_v, n = d > dv ? d : dv;
    double *g = malloc(n * n * sizeof *g);
    if (!t || !g) { table_free(t); free(g); al_err("out of memory"); return NULL; }
    for (int l = 0; l < sh->n_layers; l++) {
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

static const char *const SPLIT_CHOICES[] = {"train", "valid", NULL};
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
    "text. Ctrl-C stops after the current layer and keeps what was accumulated. The statistics\n"
    "replace earlier ones (and any learned projections); `calib save FILE` keeps them.\n"
    "Examples:\n"
    "  calibrate wiki.train.txt samples 128 seqlen 256\n"
    "  calibrate ids c4.ids samples 32 seqlen 2048 split valid";

int cmd_calib_run(Session *s, Model *m, int *ids, size_t n, const CalibRequest *rq, Out *out) {
    CalibState *c;
    Forward *f;
    if (state(s, &c) || lm_forward(s, m, &f)) { free(ids); return AL_ERR; }
    size_t L = rq->seqlen, first, count;
    const char *split = rq->split == CALIB_VALID ? "valid" : "train";
    int rc = L > fwd_max_ctx(f) ? al_err("calibrate: seqlen %zu is longer than the model's context %zu", L, fwd_max_ctx(f))
                                : calib_windows(n, L, rq->split, rq->samples, &first, &count);
    CalibShape sh;
    CalibStats *st = NULL;
    char *text = NULL;
    if (rc == AL_OK) rc = calib_shape_of(m, &sh);
    if (rc == AL_OK) rc = calib_new(&sh, rq->with_x, &st);
    if (rc == AL_OK) rc = calib_set_meta(st, m->name, rq->text, split);
    if (rc == AL_OK && !(text = al_strdup(rq->text))) rc = AL_ERR;
    if (rc) { free(ids); free(text); calib_free(st); return AL_ERR; }
    out_printf(out, "calibrating %s on %zu %s window%s of %zu tokens (windows %zu..%zu of %zu)%s\n", m->name, count,
               split, count == 1 ? "" : "s", L, first, first + count - 1, n / L,
               rq->with_x ? ", with the attention input's second moments" : "");
    rc = calib_run(st, f, ids + first * L, count, L);
    if (rc != AL_OK && !(rc == AL_INTERRUPTED && st->seqs[0] > 0)) { free(ids); free(text); calib_free(st); return rc; }
    drop_all(c);
    c->m = m;
    c->st = st;
    c->ids = ids;
    c->nids = n;
    c->text = text;
    c->req = *rq;
    c->req.text = text;
    c->first = first;
    c->count = count;
    return rc;
}

static int cmd_calibrate(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    const char *what = args_str(a, "what"), *file = args_str(a, "file");
    int *ids = NULL;
    size_t n = 0;
    CalibShape sh;
    if (calib_shape_of(m, &sh) || read_tokens(s, "calibrate", what, file, &ids, &n)) return AL_ERR;
    int inputs = args_enum(a, "inputs");
    CalibRequest rq = {.text = file && *file ? file : what, .ids_file = file && *file,
                       .samples = (size_t)args_int(a, "samples"), .seqlen = (size_t)args_int(a, "seqlen"),
                       .split = args_enum(a, "split") == 1 ? CALIB_VALID : CALIB_TRAIN,
                       .with_x = inputs == 1 || (inputs <= 0 && sh.hidden <= 2048)};
    double t0 = now_s();
    int rc = cmd_calib_run(s, m, ids, n, &rq, out);
    double dt = now_s() - t0;
    if (rc != AL_OK && rc != AL_INTERRUPTED) return rc;
    const CalibStats *st = s->calib->st;
    out_printf(out, "%zu sequences, %zu tokens in %.2f s (%.1f tok/s)%s\n", st->seqs[0], st->tokens[0], dt,
               (double)st->tokens[0] / fmax(dt, 1e-9), rc == AL_INTERRUPTED ? " -- interrupted, statistics kept" : "");
    int r2 = out_table_to(out, a, stats_table(st));
    return rc == AL_INTERRUPTED ? rc : r2;
}

/* ================================================================ calib info | save | load */

static const char CALIB_HELP[] =
    "The session's calibration statistics (from `calibrate`):\n"
    "  calib info         per layer: tokens, sequences, RMS of keys, queries and values\n"
    "  calib save FILE    writes them (safetensors, F64 Grams per layer and KV head, counts and\n"
    "                     the source in the metadata), so a large model is calibrated once\n"
    "  calib load FILE    reads them back for the current model (shapes must match)\n"
    "`kvsvd eval` also needs the text of an evaluation split: after `calib load`, give it with\n"
    "`kvsvd eval text FILE` (or `ids FILE`).";

static int cmd_calib_info(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (need_stats(s, &c)) return AL_ERR;
    const CalibStats *st = c->st;
    out_printf(out, "calibration of %s: %zu sequences x %zu tokens from %s (split %s)%s\n", c->m->name, st->seqs[0],
               st->seqlen, st->source ? st->source : "?", st->split ? st->split : "?",
               st->has_x ? ", attention-input second moments kept" : "");
    return out_table_to(out, a, stats_table(st));
}

static int cmd_calib_save(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (need_stats(s, &c)) return AL_ERR;
    const char *file = args_str(a, "file");
    if (calib_save(c->st, file)) return AL_ERR;
    out_printf(out, "wrote the calibration of %s (%zu tokens) to %s\n", c->m->name, c->st->tokens[0], file);
    out_string(out, file);
    out->written = true;
    return AL_OK;
}

static int cmd_calib_load(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (state(s, &c)) return AL_ERR;
    const char *file = args_str(a, "file");
    CalibStats *st;
    if (calib_load(file, &st)) return AL_ERR;
    if (calib_check_model(st, s->cur)) { calib_free(st); return al_err_ctx("%s", file); }
    drop_all(c);
    c->m = s->cur;
    c->st = st;
    out_printf(out, "loaded the calibration in %s (%zu sequences, %zu tokens%s%s) for %s\n", file, st->seqs[0], st->tokens[0],
               st->source ? ", from " : "", st->source ? st->source : "", s->cur->name);
    return out_table_to(out, a, stats_table(st));
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
    "The table gives the ranks and the relative squared Frobenius errors on the calibration set\n"
    "(whole concatenated caches): keys, queries, values, the score matrix K Qᵀ, and V W_O.\n"
    "KQ-SVD's err_kq is never above the others' there (Theorem 2).\n"
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

static int cmd_kvsvd_learn(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (need_stats(s, &c)) return AL_ERR;
    KqSpec spec;
    if (read_spec(a, &spec)) return AL_ERR;
    int which = args_enum(a, "method");
    int lo = which == 3 ? 0 : which, hi = which == 3 ? KQ_NMETHODS - 1 : which;
    for (int k = lo; k <= hi; k++) {
        int rc = learn_one(s, c, (kq_method)k, &spec);
        if (rc) return rc;
    }
    Table *t = table_new(9, "layer", "method", "rank_k", "rank_v", "err_k", "err_q", "err_v", "err_kq", "err_vo");
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
    out_printf(out, "%s; errors on the calibration set (%zu tokens)\n", spec.beta != 1 ? ", with keys x beta, queries / beta" : "",
               c->st->tokens[0]);
    return out_table_to(out, a, t);
}

/* ================================================================ kvsvd eval */

static const char EVAL_HELP[] =
    "Evaluates the learned projections (section 6.1): runs the forward pass again over N windows\n"
    "of a split of the calibration text (default: the validation split, at most 32 windows, the\n"
    "calibration's seqlen) and, per layer and sequence, measures the relative squared Frobenius\n"
    "errors ||M - M̃||² / ||M||² of the keys, queries, values, the full T x T score matrix K Qᵀ (no\n"
    "mask) -- from per-sequence Gram matrices -- and of the attention output MHA(X) = [softmax(Q\n"
    "K̃ᵀ s) Ṽ]_h W_O recomputed with the causal mask (no output bias); errors are summed over a\n"
    "layer's heads, averaged over the sequences. One row per layer and learned method; `to\n"
    "FILE.csv` writes the header layer,method,rank,err_k,err_q,err_v,err_kq,err_out (rank: the\n"
    "key rank). After `calib load` give the text with `text FILE` or `ids FILE`.\n"
    "Examples:\n"
    "  kvsvd eval\n"
    "  kvsvd eval split train samples 8 to errors.csv";

/* Token windows for an evaluation: ids (borrowed from the state or owned in *own), first, count. */
static int eval_tokens(Session *s, CalibState *c, const Args *a, const char *cmd, int **own, const int **ids,
                       size_t *seqlen, size_t *first, size_t *count) {
    *own = NULL;
    size_t n = c->nids;
    *ids = c->ids;
    const char *text = args_str(a, "text"), *idf = args_str(a, "ids");
    if ((text && *text) || (idf && *idf)) {
        if (read_tokens(s, cmd, idf && *idf ? "ids" : text, idf && *idf ? idf : NULL, own, &n)) return AL_ERR;
        *ids = *own;
    } else if (!c->ids)
        return al_err("%s: the session has no calibration text (statistics were loaded): give `text FILE` or `ids FILE`", cmd);
    *seqlen = args_given(a, "seqlen") ? (size_t)args_int(a, "seqlen") : c->st->seqlen;
    if (*seqlen == 0) return al_err("%s: give `seqlen L` (the statistics do not record one)", cmd);
    calib_split split = args_enum(a, "split") == 0 ? CALIB_TRAIN : CALIB_VALID;
    size_t N = args_given(a, "samples") ? (size_t)args_int(a, "samples") : 32;
    if (calib_windows(n, *seqlen, split, N, first, count)) { free(*own); *own = NULL; return al_err_ctx("%s", cmd); }
    return AL_OK;
}

static int cmd_kvsvd_eval(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (need_stats(s, &c)) return AL_ERR;
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
    if (eval_tokens(s, c, a, "kvsvd eval", &own, &ids, &L, &first, &count)) return AL_ERR;
    KqEval *ev;
    if (kq_eval_new(&c->st->sh, sets, ns, &ev)) { free(own); return AL_ERR; }
    const char *split = args_str(a, "split");
    out_printf(out, "evaluating %zu method%s on %zu %s window%s of %zu tokens\n", ns, ns == 1 ? "" : "s", count, split,
               count == 1 ? "" : "s", L);
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
    drop_eval(c);
    Table *t = table_new(8, "layer", "method", "rank", "err_k", "err_q", "err_v", "err_kq", "err_out");
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
            table_num(t, e.k); table_num(t, e.q); table_num(t, e.v); table_num(t, e.kq); table_num(t, e.out);
            double v[5] = {e.k, e.q, e.v, e.kq, e.out};
            for (int j = 0; j < 5; j++) mean[meth[i]][j] += v[j] / sh->n_layers;
        }
    kq_eval_free(ev);
    if (!t || rc == AL_ERR) { table_free(t); drop_eval(c); return AL_ERR; }
    snprintf(c->eval_split, sizeof c->eval_split, "%s", split);
    c->eval_seqs = e0.n_seq;
    double dt = now_s() - t0;
    out_printf(out, "%zu sequences in %.2f s%s; means over layers:\n", e0.n_seq, dt,
               rc == AL_INTERRUPTED ? " -- interrupted" : "");
    for (size_t i = 0; i < ns; i++) {
        const double *m = mean[meth[i]];
        out_printf(out, "  %-7s err_k %.4g  err_q %.4g  err_v %.4g  err_kq %.4g  err_out %.4g\n", kq_method_label(meth[i]),
                   m[0], m[1], m[2], m[3], m[4]);
    }
    bool diff_rank = false;
    for (int l = 0; l < sh->n_layers; l++)
        diff_rank |= sets[0]->rank_k[l] != sets[0]->rank_v[l];
    if (diff_rank) out_printf(out, "(rank is the key rank; value ranks differ: see `kvsvd learn`)\n");
    int r2 = out_table_to(out, a, t);
    return rc == AL_INTERRUPTED ? rc : r2;
}

/* ================================================================ export (kvsvd) */

/* What `export DIR` does after `kvsvd learn` (see EXPORT in commands/cmd_farr.c): writes to DIR
 * kvsvd-<method>.safetensors per learned method with F32 tensors layers.L.proj_k and
 * layers.L.proj_q of shape (kv_heads, d, R) -- the cache keeps k @ proj_k, queries are multiplied
 * by proj_q -- and layers.L.proj_v, layers.L.proj_o of shape (kv_heads, d_v, R_v) (v @ proj_v
 * cached, proj_oᵀ folded into o_proj), plus kvsvd_manifest.json with the ranks, the calibration
 * and the errors measured. DIR must be new or empty unless force. */
int cmd_kvsvd_export(Session *s, const char *dir, bool force, Out *out) {
    CalibState *c;
    if (need_stats(s, &c)) return AL_ERR;
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
    out_printf(out, "wrote %zu files to %s (%zu method%s and %s)\n", files, dir, ns, ns == 1 ? "" : "s", KQ_MANIFEST);
    out_string(out, dir);
    out->written = true;
    return AL_OK;
}

/* ================================================================ figures */

static const char *const WHAT_CHOICES[] = {"out", "k", "q", "v", "kq", NULL};

const char CMD_PLOT_KVSVD_ERRORS_HELP[] =
    "KQ-SVD Figure 1 (top): the relative squared Frobenius error of the attention output per\n"
    "layer, one curve per method, from the last `kvsvd eval` (run it first). `what k|q|v|kq`\n"
    "plots the error on keys, queries, values or the score matrix K Qᵀ instead; `log` logs y.\n"
    "Examples:\n"
    "  kvsvd learn all eps 0.1; kvsvd eval; plot kvsvd-errors to fig1.png\n"
    "  plot kvsvd-errors what kq log";

const Param cmd_plot_kvsvd_errors_kw[] = {
    { .name = "what", .type = ARG_ENUM, .choices = WHAT_CHOICES, .def = "out", .comp = COMP_CHOICES,
      .help = "which error: attention output (out), keys, queries, values, or scores (kq)" },
    { .name = "log", .type = ARG_FLAG, .comp = COMP_NONE, .help = "errors on a log axis" },
    { .name = "to", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "write the figure to FILE.png, .svg or .pdf (no extension: plot.format)" },
    { .name = "window", .type = ARG_FLAG, .comp = COMP_NONE, .help = "show the figure in a window (needs a display)" },
    {0}
};

static double err_pick(const KqErr *e, int what) {
    switch (what) {
    case 1: return e->k;
    case 2: return e->q;
    case 3: return e->v;
    case 4: return e->kq;
    default: return e->out;
    }
}

int cmd_plot_kvsvd_errors(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (need_stats(s, &c)) return AL_ERR;
    int what = args_enum(a, "what");
    int L = c->st->sh.n_layers;
    PlotCurve cv[KQ_NMETHODS];
    double *x = al_malloc3((size_t)L, 1, sizeof *x, "layers"), *y = al_malloc3((size_t)L, KQ_NMETHODS, sizeof *y, "errors");
    if (!x || !y) { free(x); free(y); return AL_ERR; }
    size_t nc = 0;
    for (int l = 0; l < L; l++) x[l] = l;
    for (int k = 0; k < KQ_NMETHODS; k++) {
        if (!c->errs[k]) continue;
        for (int l = 0; l < L; l++) y[nc * (size_t)L + (size_t)l] = err_pick(&c->errs[k][l], what);
        cv[nc] = (PlotCurve){.label = kq_method_label((kq_method)k), .x = x, .y = y + nc * (size_t)L, .n = (size_t)L,
                             .points = true};
        nc++;
    }
    if (!nc) { free(x); free(y); return al_err("plot kvsvd-errors: no evaluation yet: run `kvsvd learn all` and `kvsvd eval` first"); }
    static const char *names[] = {"attention output", "keys K", "queries Q", "values V", "scores K Qᵀ"};
    char title[256], sub[256], ylab[128], auto_name[256];
    snprintf(title, sizeof title, "%s: relative error on the %s per layer", s->cur->name, names[what]);
    const KqProj *p = NULL;
    for (int k = 0; k < KQ_NMETHODS && !p; k++) p = c->proj[k];
    if (p && p->spec.by_eps)
        snprintf(sub, sizeof sub, "ranks from eps %g; %zu %s sequences of %zu tokens", p->spec.eps, c->eval_seqs,
                 c->eval_split, c->st->seqlen);
    else
        snprintf(sub, sizeof sub, "rank %d; %zu %s sequences of %zu tokens", p ? p->spec.rank : 0, c->eval_seqs,
                 c->eval_split, c->st->seqlen);
    snprintf(ylab, sizeof ylab, "||M - M~||^2 / ||M||^2 (%s)", WHAT_CHOICES[what]);
    snprintf(auto_name, sizeof auto_name, "%s-kvsvd-errors-%s", s->cur->name, WHAT_CHOICES[what]);
    PlotDest d;
    int rc = plot_dest_init(s, a, auto_name, &d);
    if (rc == AL_OK) {
        d.o.title = title;
        d.o.subtitle = sub;
        d.o.xlabel = "layer";
        d.o.ylabel = ylab;
        d.o.logy = args_flag(a, "log");
        if (d.o.window) out_printf(out, "showing the figure: press a key or click in its window to go on\n");
        rc = plot_dest_done(out, &d, plot_curves(&d.o, cv, nc));
    }
    free(x);
    free(y);
    return rc;
}

const char CMD_PLOT_KVSVD_UNBALANCE_HELP[] =
    "KQ-SVD Figure 2: the attention output error averaged over layers against the unbalance beta\n"
    "(keys multiplied by beta, queries divided by it: the scores do not change). For each beta the\n"
    "three methods are learned at the rank setting of the last `kvsvd learn` (default eps 0.1)\n"
    "and evaluated as `kvsvd eval` does (one forward pass for all). K-SVD and KQ-SVD stay flat;\n"
    "Eigen drifts to K-SVD as beta grows (Theorem 4). The values are printed too.\n"
    "Examples:\n"
    "  plot kvsvd-unbalance\n"
    "  plot kvsvd-unbalance betas 1,2,4,8,16 samples 4 to fig2.png";

const Param cmd_plot_kvsvd_unbalance_kw[] = {
    { .name = "betas", .type = ARG_STRING, .def = "1,2,3,5,10", .comp = COMP_NONE, .metavar = "B,B,...",
      .help = "unbalance factors (positive numbers, comma-separated)" },
    { .name = "split", .type = ARG_ENUM, .choices = SPLIT_CHOICES, .def = "valid", .comp = COMP_CHOICES,
      .help = "the split of the calibration text to evaluate on" },
    { .name = "samples", .type = ARG_INT, .min = 1, .max = 1e6, .comp = COMP_NONE, .metavar = "N",
      .help = "windows evaluated (default: at most 32)" },
    { .name = "seqlen", .type = ARG_INT, .min = 2, .max = 1e7, .comp = COMP_NONE, .metavar = "L",
      .help = "tokens per window (default: the calibration's)" },
    { .name = "text", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "evaluation text (default: the calibration text)" },
    { .name = "ids", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE", .help = "evaluation token ids instead of text" },
    { .name = "log", .type = ARG_FLAG, .comp = COMP_NONE, .help = "errors on a log axis" },
    { .name = "to", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "write the figure to FILE.png, .svg or .pdf (no extension: plot.format)" },
    { .name = "window", .type = ARG_FLAG, .comp = COMP_NONE, .help = "show the figure in a window (needs a display)" },
    {0}
};

/* Parses "1,2,5" into at most cap positive numbers. */
static int parse_betas(const char *list, double *b, size_t cap, size_t *n) {
    *n = 0;
    for (const char *p = list; p && *p;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v > 0) || !isfinite(v))
            return al_err("plot kvsvd-unbalance: betas '%s' must be positive numbers separated by commas (1,2,5)", list);
        if (*n == cap) return al_err("plot kvsvd-unbalance: at most %zu betas", cap);
        b[(*n)++] = v;
        if (*end && *end != ',') return al_err("plot kvsvd-unbalance: betas '%s': separate the values with commas", list);
        p = *end == ',' ? end + 1 : end;
    }
    if (!*n) return al_err("plot kvsvd-unbalance: give at least one beta");
    return AL_OK;
}

#define MAX_BETAS 16

int cmd_plot_kvsvd_unbalance(Session *s, const Args *a, Out *out) {
    CalibState *c;
    if (need_stats(s, &c)) return AL_ERR;
    double betas[MAX_BETAS];
    size_t nb;
    if (parse_betas(args_str(a, "betas"), betas, MAX_BETAS, &nb)) return AL_ERR;
    KqSpec spec = {.by_eps = true, .eps = 0.1, .beta = 1};
    for (int k = 0; k < KQ_NMETHODS; k++)
        if (c->proj[k]) { spec = c->proj[k]->spec; break; }
    if (!c->gw && kq_wo_grams(s->cur, &c->gw)) return AL_ERR;
    Forward *f;
    if (lm_forward(s, s->cur, &f)) return AL_ERR;
    KqProj *sets[MAX_BETAS * KQ_NMETHODS] = {0};
    size_t ns = 0;
    int rc = AL_OK;
    for (size_t i = 0; i < nb && rc == AL_OK; i++)
        for (int k = 0; k < KQ_NMETHODS && rc == AL_OK; k++) {
            spec.beta = betas[i];
            rc = kq_learn(c->st, c->gw, (kq_method)k, &spec, &sets[ns]);
            if (rc == AL_OK) ns++;
        }
    int *own = NULL;
    const int *ids;
    size_t L, first, count;
    KqEval *ev = NULL;
    if (rc == AL_OK) rc = eval_tokens(s, c, a, "plot kvsvd-unbalance", &own, &ids, &L, &first, &count);
    if (rc == AL_OK) rc = kq_eval_new(&c->st->sh, (const KqProj *const *)sets, ns, &ev);
    if (rc == AL_OK) {
        out_printf(out, "learned 3 methods at %zu betas; evaluating on %zu %s window%s of %zu tokens\n", nb, count,
                   args_str(a, "split"), count == 1 ? "" : "s", L);
        rc = kq_eval_run(ev, s->cur, f, ids + first * L, count, L);
    }
    free(own);
    double y[KQ_NMETHODS][MAX_BETAS];
    int nl = c->st->sh.n_layers;
    if (rc == AL_OK) {
        out_printf(out, "%8s %12s %12s %12s\n", "beta", "K-SVD", "Eigen", "KQ-SVD");
        for (size_t i = 0; i < nb; i++) {
            for (int k = 0; k < KQ_NMETHODS; k++) {
                double sum = 0;
                for (int l = 0; l < nl; l++) {
                    KqErr e;
                    kq_eval_result(ev, i * KQ_NMETHODS + (size_t)k, l, &e);
                    sum += e.out;
                }
                y[k][i] = sum / nl;
            }
            out_printf(out, "%8g %12.6g %12.6g %12.6g\n", betas[i], y[0][i], y[1][i], y[2][i]);
        }
    }
    kq_eval_free(ev);
    for (size_t i = 0; i < ns; i++) kq_proj_free(sets[i]);
    if (rc) return rc;
    PlotCurve cv[KQ_NMETHODS];
    for (int k = 0; k < KQ_NMETHODS; k++)
        cv[k] = (PlotCurve){.label = kq_method_label((kq_method)k), .x = betas, .y = y[k], .n = nb, .points = true};
    char title[256], sub[256], auto_name[256];
    snprintf(title, sizeof title, "%s: attention output error against key/query unbalance", s->cur->name);
    if (spec.by_eps) snprintf(sub, sizeof sub, "keys x beta, queries / beta; ranks from eps %g; mean over %d layers, %zu sequences", spec.eps, nl, count);
    else snprintf(sub, sizeof sub, "keys x beta, queries / beta; rank %d; mean over %d layers, %zu sequences", spec.rank, nl, count);
    snprintf(auto_name, sizeof auto_name, "%s-kvsvd-unbalance", s->cur->name);
    PlotDest d;
    rc = plot_dest_init(s, a, auto_name, &d);
    if (rc == AL_OK) {
        d.o.title = title;
        d.o.subtitle = sub;
        d.o.xlabel = "unbalance factor beta";
        d.o.ylabel = "relative output error (mean over layers)";
        d.o.logy = args_flag(a, "log");
        if (d.o.window) out_printf(out, "showing the figure: press a key or click in its window to go on\n");
        rc = plot_dest_done(out, &d, plot_curves(&d.o, cv, KQ_NMETHODS));
    }
    return rc;
}

/* ================================================================ the table */

static const Param calibrate_pos[] = {
    { .name = "what", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE|ids",
      .help = "a text file, or the word ids followed by a file of token ids" },
    { .name = "file", .type = ARG_PATH, .def = "", .comp = COMP_FILES, .metavar = "FILE",
      .help = "after the word ids: whitespace-separated token ids" },
    {0}
};
static const Param calibrate_kw[] = {
    { .name = "samples", .type = ARG_INT, .def = "128", .min = 1, .max = 1e7, .comp = COMP_NONE, .metavar = "N",
      .help = "most windows (sequences) to run" },
    { .name = "seqlen", .type = ARG_INT, .def = "256", .min = 2, .max = 1e7, .comp = COMP_NONE, .metavar = "L",
      .help = "tokens per window" },
    { .name = "split", .type = ARG_ENUM, .choices = SPLIT_CHOICES, .def = "train", .comp = COMP_CHOICES,
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
    { .name = "split", .type = ARG_ENUM, .choices = SPLIT_CHOICES, .def = "valid", .comp = COMP_CHOICES,
      .help = "the split of the calibration text to evaluate on" },
    { .name = "samples", .type = ARG_INT, .min = 1, .max = 1e6, .comp = COMP_NONE, .metavar = "N",
      .help = "windows evaluated (default: at most 32)" },
    { .name = "seqlen", .type = ARG_INT, .min = 2, .max = 1e7, .comp = COMP_NONE, .metavar = "L",
      .help = "tokens per window (default: the calibration's)" },
    { .name = "text", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "evaluation text (default: the calibration text)" },
    { .name = "ids", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE", .help = "evaluation token ids instead of text" },
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
      .pos = learn_pos, .kw = learn_kw, .fn = cmd_kvsvd_learn, .flags = CMD_MODEL, .xform = XF_KVSVD },
    { .name = "eval", .summary = "errors on K, Q, V, K Qᵀ and the attention output over a split", .help = EVAL_HELP,
      .kw = eval_kw, .fn = cmd_kvsvd_eval, .flags = CMD_MODEL },
    {0}
};

static const Command calib_cmds[] = {
    { .name = "calibrate", .summary = "activation statistics of a text (Grams of K, Q, V per head)",
      .help = CALIBRATE_HELP, .pos = calibrate_pos, .kw = calibrate_kw, .fn = cmd_calibrate, .flags = CMD_MODEL },
    { .name = "calib", .summary = "calibration statistics: info, save, load", .help = CALIB_HELP, .sub = calib_subs,
      .flags = CMD_MODEL },
    { .name = "kvsvd", .summary = "KQ-SVD: learn and evaluate low-rank KV-cache projections", .help = KVSVD_HELP,
      .sub = kvsvd_subs, .flags = CMD_MODEL },
    {0}
};

const CommandGroup cmd_group_calib = { .title = "Calibration and KQ-SVD", .cmds = calib_cmds };
