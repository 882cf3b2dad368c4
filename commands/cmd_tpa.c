/* cmd_tpa.c -- the Tensor Product Attention command group (seed 004): `kv-cache` (Table 1: KV cache
 * and attention parameters of MHA, MQA, GQA, MLA and TPA's variants for the current model, plus the
 * model as loaded and the session's conversions) and `compare` (every KV-cache reduction at one
 * budget); and what it plugs into the verbs through cmd_tpa.h (listed by methods.c): `convert tpa`
 * (a GQA / MHA model re-factored into non-contextual TPA, form a or b), whose export (attnlab's own
 * layout), check (a conversion or an export against its source) and kv-cache row go through xform.h. `convert tpa` leaves a
 * transformation (cmd_tpa_xform, xform.h); the kept comparison is the workspace's (ws_compare.h). */
#define _GNU_SOURCE
#include "cmd_tpa.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyses.h"
#include "kvcache.h"
#include "layersel.h"
#include "params.h"
#include "seeds.h"
#include "ws_calib.h"
#include "ws_compare.h"
#include "ws_lm.h"
#include "budget_compare.h"
#include "tpa.h"
#include "ws_check.h"
#include "xform.h"

/* ================================================================ convert tpa */

const char CMD_TPA_CONVERT_HELP[] =
    "Re-factors the keys and values of every layer into non-contextual TPA (seed 004, 3.4-3.5).\n"
    "A GQA / MHA layer is already non-contextual TPA (its keys are a rank-G sum over the KV heads);\n"
    "this fits it at a chosen rank instead:\n"
    "  form a  fixed head factors a_r (in R^G), cached token factors b_r(x) = x W_r in R^d_h: the\n"
    "          optimal rank-R fit across the head axis (SVD of the head-unfolded weight). Caches\n"
    "          (R_K + R_V) d_h values per token; R = the KV heads reproduces the model.\n"
    "  form b  cached head factors a_r(x) in R^G, fixed token factors b_r in R^d_h: the same fit\n"
    "          across the d_h axis. Caches (R_K + R_V) G values per token (Table 1 writes h; the\n"
    "          factors are equal within a GQA group); R = d_h reproduces the model.\n"
    "RoPE acts on the d_h axis and stays exact (Theorem 1): form a rotates the cached b_r once\n"
    "before caching; form b rotates the fixed b_r to each key's position when it is used.\n"
    "Queries and W_O are kept (TPA KV-only). The fit is activation-weighted when the session has\n"
    "calibration statistics of the model's attention inputs (`calibrate`), else it is the weights'\n"
    "own (unit-variance inputs); `fit weights|calib` forces one.\n"
    "Per layer it reports the energy kept, the relative Frobenius errors of keys and values, and of\n"
    "the attention scores and outputs on random Gaussian tokens (`seed S`, layer l drawing with S +\n"
    "l; printed), with the factored evaluator against the model.\n"
    "kv-rank R sets both ranks; k-rank / v-rank set one each (the other stays exact).\n"
    "`export DIR` writes the result in attnlab's own layout (there is no standard loader for\n"
    "non-contextual TPA): tpa_manifest.json (format attnlab-tpa v1: source path and config, form,\n"
    "ranks, dims, RoPE, KV cache and parameter counts, the per-layer report) and\n"
    "tpa_factors.safetensors (per layer L: layers.L.q / .o weight and bias, layers.L.rope.inv_freq,\n"
    "and for k and v .fixed, the non-contextual factors, and .ctx.weight / .ctx.bias, the cached\n"
    "ones' maps; F32, row-vector convention y = x @ W); the MLP, norms and embeddings stay in the\n"
    "source checkpoint. `check` compares the conversion with the model, `check DIR` an export;\n"
    "`kv-cache` puts its cache and parameters beside Table 1's. Sliding windows, soft-caps, sinks and\n"
    "NoPE layers stay on the converted layers (ppl, check) and in the export (per layer sliding_window\n"
    "and attn_softcap in the manifest, layers.L.sinks, a NoPE layer's frequencies 0).\n"
    "Perplexity before (the loaded model) and after (the converted layers swapped into the forward\n"
    "pass) is reported on the validation windows of the session's calibration text (`calibrate\n"
    "FILE` first), never on random tokens (`ppl off` skips it); `ppl FILE` measures the conversion\n"
    "on any text.\n"
    "Examples:\n"
    "  convert tpa kv-rank 2\n"
    "  convert tpa k-rank 1 v-rank 2 form a to tpa.csv\n"
    "  convert tpa kv-rank 16 form b layers 0-3; export out/llama-tpa; check out/llama-tpa";

static const char *const FORMS[] = {"a", "b", NULL};
static const char *const TPA_ONOFF[] = {"on", "off", NULL};

const Param cmd_tpa_convert_kw[] = {
    { .name = "kv-rank", .type = ARG_INT, .min = 1, .max = 1 << 20, .comp = COMP_NONE, .metavar = "R",
      .help = "rank of both keys and values (form a: up to the KV heads; form b: up to the head dim)" },
    { .name = "k-rank", .type = ARG_INT, .min = 1, .max = 1 << 20, .comp = COMP_NONE, .metavar = "Rk",
      .help = "rank of the keys (default: kv-rank, else exact)" },
    { .name = "v-rank", .type = ARG_INT, .min = 1, .max = 1 << 20, .comp = COMP_NONE, .metavar = "Rv",
      .help = "rank of the values (default: kv-rank, else exact)" },
    { .name = "form", .type = ARG_ENUM, .choices = FORMS, .def = "a", .comp = COMP_CHOICES,
      .help = "a: fixed head factors, cached token factors; b: cached head factors, fixed token factors" },
    PARAM_LAYERS("layers to convert (export needs all)"),
    PARAM_TOKENS("64", "random tokens for the error report"),
    PARAM_SEED,
    PARAM_FIT("auto: calibration statistics when the session has them, else the weights"),
    { .name = "ppl", .type = ARG_ENUM, .choices = TPA_ONOFF, .def = "on", .comp = COMP_CHOICES,
      .help = "perplexity before and after, when the session has a calibration text" },
    PARAM_TO,
    {0}
};

/* Perplexity before (the loaded model) and after (the converted layers swapped into its forward
 * pass) on the validation windows of the session's calibration text of m (ws_check_heldout), as
 * `convert mla` and `check` report it; a line saying there is none otherwise. A failure is a
 * warning: the conversion stands. */
static int report_ppl(Session *s, Model *m, Out *out) {
    CheckText t;
    Forward *f = NULL;
    FwdPpl b = {0}, w = {0};
    const Xform *x = xform_newest(s, m, &cmd_tpa_xform);
    if (!x) return AL_OK;
    int rc = ws_check_heldout(s, m, &t);
    if (rc == AL_OK && !t.ids) {
        out_printf(out, "perplexity: none (the session has no calibration text of %s: `calibrate FILE` first gives "
                   "held-out windows; `ppl FILE` measures the conversion on any text)\n", m->name);
        return AL_OK;
    }
    if (rc == AL_OK) rc = lm_forward(s, m, &f);
    if (rc == AL_OK) rc = xform_ppl_pair(s, x, f, t.ids, t.n, t.seqlen, &b, &w);
    if (rc == AL_OK)
        ws_check_ppl_line(out, &t, w.tokens, b.nll, w.nll, "the converted layers swapped in memory, run by the forward pass");
    else if (rc != AL_INTERRUPTED)
        out_eprintf(out, "warning: perplexity not measured: %s\n", al_errmsg());
    ws_check_text_free(&t);
    return rc == AL_INTERRUPTED ? rc : AL_OK;
}

/* Adds a number cell, null when not finite. */
static void num_or_null(Table *t, double v) {
    if (isfinite(v)) table_num(t, v);
    else table_null(t);
}

/* convert tpa's options from its arguments: form, ranks (kv-rank, or k-rank / v-rank), tokens,
 * seed and layers. */
static int tpa_args_opts(const Model *m, const Args *a, Out *out, TpaOpts *o) {
    *o = tpa_opts_default();
    o->form = args_enum(a, "form") == 1 ? TPA_FORM_B : TPA_FORM_A;
    bool kv = args_given(a, "kv-rank"), k = args_given(a, "k-rank"), v = args_given(a, "v-rank");
    if (kv && (k || v))
        return al_err("convert tpa: give kv-rank R, or k-rank Rk and/or v-rank Rv, not both");
    if (!kv && !k && !v)
        return al_err("convert tpa needs a rank: kv-rank R (or k-rank Rk v-rank Rv); form a takes 1..%d (the KV heads), "
                      "form b 1..%d (the head dim); the largest reproduces the model",
                      m->cfg.n_kv_heads, cfg_d_qk(&m->cfg));
    o->k_rank = kv ? (int)args_int(a, "kv-rank") : k ? (int)args_int(a, "k-rank") : 0;
    o->v_rank = kv ? (int)args_int(a, "kv-rank") : v ? (int)args_int(a, "v-rank") : 0;
    o->eval_tokens = (size_t)args_int(a, "tokens");
    o->seed = args_given(a, "seed") ? (uint64_t)args_int(a, "seed") : AL_SEED_TPA_EVAL;
    long lo, hi;
    if (param_layers(out, a, "layers", m, &lo, &hi)) return AL_ERR;
    o->layer_lo = (int)lo;
    o->layer_hi = (int)hi;
    return AL_OK;
}

/* What the conversion r of m is: ranks and factors, KV cache and parameters, RoPE, the fit (ntok
 * calibration tokens per layer when activation-weighted). */
static void tpa_describe(Out *out, const Model *m, const TpaModel *r, size_t ntok) {
    const TpaOpts *ro = &r->opts;
    bool fa = ro->form == TPA_FORM_A;
    char lt[256];
    out_printf(out, "converted %s of %s to non-contextual TPA, form %s: R_K %d, R_V %d (%s; exact at %d / %d)%s\n",
               layersel_words(&m->cfg, ro->layer_lo, ro->layer_hi, lt, sizeof lt), m->name, tpa_form_name(ro->form), ro->k_rank, ro->v_rank,
               fa ? "fixed head factors over the KV heads, cached token factors"
                  : "cached head factors over the KV heads, fixed token factors",
               fa ? r->n_kv_heads : r->head_dim, fa ? r->n_kv_heads : r->v_dim, r->exact ? ": exact" : "");
    size_t nl = (size_t)layersel_count(&m->cfg, ro->layer_lo, ro->layer_hi);   /* params_*: one layer's */
    out_printf(out, "KV cache per token per layer: %zu -> %zu value%s (%.1f%%) = %s; attention parameters per layer %zu "
               "-> %zu (%zu converted layer%s: %zu -> %zu)\n", r->kv_before, r->kv_after, al_s(r->kv_after),
               100.0 * (double)r->kv_after / (double)r->kv_before, fa ? "R_K d_k + R_V d_v" : "(R_K + R_V) G",
               r->params_before, r->params_after, nl, al_s(nl), r->params_before * nl, r->params_after * nl);
    out_printf(out, "RoPE exact: %s\n",
               m->cfg.rope == ROPE_NONE ? "the model has no RoPE"
               : fa ? "the cached token factors are rotated before caching (Theorem 1, eq. 3.6)"
                    : "the fixed token factors are rotated to each key's position when used");
    if (r->activation_stats)
        out_printf(out, "fit: activation-weighted by the calibration's attention inputs (%zu token%s per layer)\n", ntok, al_s(ntok));
    else
        out_printf(out, "fit: the weights' own (unit-variance inputs)\n");
}

/* r's per-layer report (energies and errors; the first layer with a NaN noted) as the result. */
static int tpa_report_table(Out *out, const Args *a, const TpaModel *r) {
    Table *t = table_new(7, "layer", "k_energy", "v_energy", "k_err", "v_err", "score_err", "out_err");
    if (!t) return AL_ERR;
    int nan_layer = -1;
    for (int l = r->opts.layer_lo; l <= r->opts.layer_hi; l++) {
        if (!r->layers[l]) continue;            /* a hybrid's linear-attention layer */
        const TpaLayerReport *p = &r->layers[l]->rep;
        if (table_row(t)) { table_free(t); return AL_ERR; }
        table_int(t, l);
        num_or_null(t, p->k_energy);
        num_or_null(t, p->v_energy);
        double e[] = {p->k_err, p->v_err, p->score_err, p->out_err};
        bool nan = false;
        for (size_t i = 0; i < sizeof e / sizeof *e; i++) { table_num(t, e[i]); nan |= isnan(e[i]); }
        if (nan && nan_layer < 0) nan_layer = l;
    }
    if (nan_layer >= 0) out_note_nan(out, "layer %d", nan_layer);
    return out_table_to(out, args_str(a, "to"), t);
}

int cmd_tpa_convert(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    TpaOpts o;
    if (tpa_args_opts(m, a, out, &o)) return AL_ERR;
    double **sigma = NULL;
    size_t ntok = 0;
    if (ws_calib_fit_sigma(s, m, args_enum(a, "fit"), o.layer_lo, o.layer_hi, &sigma, &ntok)) return AL_ERR;
    o.sigma = (const double *const *)sigma;
    TpaModel *r = NULL;
    int rc = tpa_convert(m, &o, &r);
    if (rc == AL_OK && (rc = ws_check_keep(s, m, r->opts.seed, true, r->opts.eval_tokens, sigma, NULL, &r->check_in)))
        tpa_model_free(r);                      /* what check needs to draw the report's inputs again */
    ws_calib_free_sigma(sigma, m->cfg.n_layers);
    if (rc || (rc = xform_add(s, &cmd_tpa_xform, m, r))) return rc;
    tpa_describe(out, m, r, ntok);
    if (args_enum(a, "ppl") != 1 && (rc = report_ppl(s, m, out)) != AL_OK) return rc;
    out_printf(out, "relative Frobenius errors on %zu random Gaussian tokens, seed %llu + layer (%s), TPA evaluated "
               "from its factors\n", r->opts.eval_tokens, (unsigned long long)r->opts.seed,
               r->activation_stats ? "with the calibration's second moment" : "unit variance");
    return tpa_report_table(out, a, r);
}

/* ================================================================ export */

/* The inputs t's report drew (a copy: ci_free), without statistics when t does not hold them;
 * for a loaded export (no record held) the check's defaults. */
static int conv_inputs(const TpaModel *t, const Model *src, CheckInputs *ci) {
    if (t->check_in.tokens) return ci_copy(&t->check_in, ci);
    *ci = (CheckInputs){.seed = AL_SEED_TPA_CHECK, .tokens = 64, .n_layers = src->cfg.n_layers, .hidden = src->cfg.hidden};
    return AL_OK;
}

/* `export DIR` after `convert tpa`: attnlab's own layout (dtype, default f32). */
static int tpa_xf_export(Session *s, const Xform *x, const Args *a, Out *out) {
    const char *dir = args_str(a, "dir");
    dt_type dt;
    if (xform_export_dtype(a, DT_F32, &dt)) return AL_ERR;
    const TpaModel *r = x->data;
    CheckInputs ci;
    const char *why = NULL;            /* the statistics, while the session has the conversion's */
    if (conv_inputs(r, x->src, &ci)) return AL_ERR;
    if (ws_check_take_for_export(s, x->src, false, r->opts.layer_lo, r->opts.layer_hi, &ci, &why))
        { ci_free(&ci); return AL_ERR; }
    int rc = tpa_export_opts(r, dir, &(TpaExportOpts){.dtype = dt, .force = args_flag(a, "force"), .check = &ci});
    bool fits = ci_fits(&ci);
    ci_free(&ci);
    if (rc) return AL_ERR;
    out_printf(out, "exported %s as non-contextual TPA form %s (R_K %d, R_V %d, %s) to %s: %s + %s\n",
               r->src_name, tpa_form_name(r->opts.form), r->opts.k_rank, r->opts.v_rank, dt_name(dt), dir, TPA_MANIFEST,
               TPA_FACTORS);
    out_printf(out, "attnlab's own layout (no standard loader reads non-contextual TPA); `check %s` compares it "
               "with the source\n", dir);
    ws_check_recorded_line(out, &ci, fits, why);
    out_string(out, dir);
    out->written = true;
    return AL_OK;
}

/* ================================================================ check */

/* Runs the check of t against src on ci's inputs (completed by ws_check_inputs) and the check's
 * text, and turns it into the result table (and the verdict). */
static int check_report(Session *s, const TpaModel *t, Model *src, CheckInputs *ci, const char *what, const Args *a,
                        Out *out) {
    TpaCheck *c = NULL;
    char desc[768];
    CheckText txt;
    int lo = t->src ? t->opts.layer_lo : 0, hi = t->src ? t->opts.layer_hi : t->n_layers - 1;
    int rc = ws_check_inputs(s, src, a, false, lo, hi, ci, desc, sizeof desc);
    if (rc == AL_OK) rc = ws_check_text(s, src, a, &txt);
    if (rc) return rc;
    TpaCheckIn in = {.tokens = ci->tokens, .seed = ci->seed, .plus_layer = ci->plus_layer,
                     .sigma = (const double *const *)ci->sigma, .ids = txt.ids, .n = txt.n, .seqlen = txt.seqlen,
                     .compute = mm_compute_parse(s->compute)};
    rc = tpa_check_in(t, src, &in, &c);
    if (rc) { ws_check_text_free(&txt); return rc; }
    out_printf(out, "%s (form %s, R_K %d, R_V %d) against %s: KV cache %zu -> %zu value%s per token per layer\n", what,
               tpa_form_name(t->opts.form), t->opts.k_rank, t->opts.v_rank, src->name ? src->name : src->path,
               t->kv_before, t->kv_after, al_s(t->kv_after));
    out_printf(out, "relative Frobenius errors per layer on %s\n", desc);
    ws_check_ppl_line(out, &txt, c->nll_tokens, c->nll_source, c->nll_conv, "the TPA layers swapped in");
    ws_check_text_free(&txt);
    Table *tb = table_new(3, "layer", "score_err", "out_err");
    int bad = -1;
    for (int l = 0; tb && l < c->n_layers; l++) {
        if (!t->layers[l]) continue;
        if (table_row(tb)) { table_free(tb); tb = NULL; break; }
        table_int(tb, l);
        table_num(tb, c->score_err[l]);               /* nan: the note below says why */
        table_num(tb, c->out_err[l]);
        if (c->exact && bad < 0 && !(c->out_err[l] <= TPA_EXACT_TOL)) bad = l;
    }
    if (!tb) { tpa_check_free(c); return AL_ERR; }
    int nan_layer = c->first_nan;
    if (nan_layer >= 0)
        out_note_nan(out, "layer %d", nan_layer);
    else if (c->exact)
        out_printf(out, "the conversion claims to be exact: largest output error %.3g %s %.0e: %s\n", c->max_out_err,
                   c->pass ? "<=" : ">", TPA_EXACT_TOL, c->pass ? "PASS" : "FAIL");
    else
        out_printf(out, "approximate conversion (no exactness claimed): largest output error %.3g\n", c->max_out_err);
    double worst = bad >= 0 ? c->out_err[bad] : 0;
    bool pass = c->pass;
    tpa_check_free(c);
    rc = out_table_to(out, args_str(a, "to"), tb);
    if (rc == AL_OK && nan_layer >= 0) {
        out_emit_result(out);
        return al_err("check failed: layer %d's errors are NaN (NaN/Inf in the source or the conversion)", nan_layer);
    }
    if (rc == AL_OK && !pass) {
        out_emit_result(out);
        return al_err("check failed: layer %d's output error %.3g is above %.0e although the conversion claims to "
                      "reproduce the model", bad, worst, TPA_EXACT_TOL);
    }
    return rc;
}

/* `check` after `convert tpa`: the conversion against its source (or `source NAME`), on the
 * inputs its report drew. */
static int tpa_xf_check(Session *s, const Xform *x, const Args *a, Out *out) {
    const char *src_name = args_str(a, "source");
    const TpaModel *t = x->data;
    Model *src = t->src;
    if (src_name && *src_name && !(src = session_find(s, src_name)))
        return al_err("check: no loaded model named '%s'", src_name);
    CheckInputs ci;
    if (conv_inputs(t, src, &ci)) return AL_ERR;
    int rc = check_report(s, t, src, &ci, "the session's conversion", a, out);
    ci_free(&ci);
    return rc;
}

/* `check DIR` of a TPA export against its source (`source NAME`, else the manifest's path: the
 * session's model there, or opened for the check), on the inputs its manifest records. */
static int tpa_xf_check_dir(Session *s, const char *dir, const Args *a, Out *out) {
    Model *src = NULL, *opened = NULL;
    if (!tpa_is_export(dir))
        return al_err("check: %s holds no %s: give a folder written by export after convert tpa", dir, TPA_MANIFEST);
    TpaModel *t = NULL;
    if (tpa_load(dir, &t)) return AL_ERR;
    if (ws_check_source(s, a, t->src_path, dir, TPA_MANIFEST, &src, &opened)) { tpa_model_free(t); return AL_ERR; }
    CheckInputs ci;
    bool found;
    int rc = ci_read_dir(dir, TPA_MANIFEST, &ci, &found);
    if (rc == AL_OK && !found) {     /* an export of an older attnlab: the check's own defaults */
        ci = (CheckInputs){.seed = AL_SEED_TPA_CHECK, .tokens = 64, .n_layers = src->cfg.n_layers,
                           .hidden = src->cfg.hidden};
        out_printf(out, "note: %s/%s records no check inputs (an older export): unit-variance tokens, seed %llu\n", dir,
                   TPA_MANIFEST, (unsigned long long)AL_SEED_TPA_CHECK);
    }
    if (rc == AL_OK) rc = check_report(s, t, src, &ci, dir, a, out);
    ci_free(&ci);
    tpa_model_free(t);
    model_free(opened);
    return rc;
}

/* ================================================================ kv-cache */

static const char KV_HELP[] =
    "KV cache and attention parameters per token per layer for the current model: Table 1 of the\n"
    "TPA paper at the model's dimensions -- values cached per token per layer, their bytes, and\n"
    "attention parameters per layer of MHA, MQA, GQA, MLA, TPA, TPA KV-only and TPA with\n"
    "non-contextual A or B (formulas in core/methods/tpa.h; with d_k = d_v = d_h and h d_h = d_model they\n"
    "are Table 1's, plus W_O for MLA, which Table 1 leaves out) -- then the model as loaded (its\n"
    "own counts, biases included) and every conversion of it in the session: `convert mla`\n"
    "(TransMLA: R + D values), `convert tpa`, `kvsvd learn` (a row per learned method: each KV head\n"
    "caches k @ proj_k and v @ proj_v, R_K + R_V values, the mean over the layers; parameters the\n"
    "model's plus the projections) and `truncate` (FaRR: each KV head caches V, or K,\n"
    "at the rank kept; the mean over the layers; MLA's latent unchanged). Those rows carry in their scheme name what the\n"
    "four columns do not: the attention type as loaded, the conversion's settings, the bytes per\n"
    "token over all layers and the cache as a fraction of the model's (xF).\n"
    "Ranks default to the model's own (its KV heads; its MLA latents) or, where it has none, to\n"
    "d_c = 4 d_k, d_c' = 2 d_c, d_h^R = d_k / 2 and the paper's R_Q 6, R_K = R_V = 2.\n"
    "Bytes are counted in the KV cache dtype info's kv_cache_dtype states, for the reason the first\n"
    "line says (config torch_dtype: 2 for bf16 / f16 and for FP8 / FP4 / INT4 checkpoints, 4 for f32),\n"
    "unless `bytes N` says otherwise. `family F` keeps one Table 1 row\n"
    "(and drops the session's rows). `to FILE.csv` writes\n"
    "scheme,kv_values_per_token,kv_bytes_per_token,attn_params.\n"
    "`context N` gives instead, per layer type, what the cache holds at a context of N tokens: a\n"
    "sliding-window layer min(N, window) tokens, Llama 4's chunked layers at most a chunk (min(N,\n"
    "chunk)), Gemma 4's KV-shared layers nothing of their own (its full layers at their own head\n"
    "dims), a hybrid's Gated DeltaNet / KDA / Mamba-2 layers a constant state per sequence: the\n"
    "recurrent state v_heads x dk x dv (in float32 where mamba_ssm_cache_dtype says so, else at the\n"
    "KV's bytes) and, in a row of its own, the short conv's last conv - 1 inputs of 2 k_heads dk +\n"
    "v_heads dv channels (Nemotron-H's MLP blocks keep nothing); the\n"
    "lightning indexer's keys (DeepSeek-V3.2, GLM-5: index_head_dim per token on each layer that\n"
    "runs its own indexer) in a row of their own; then\n"
    "the totals of the KV cache, of the state (recurrent + conv) and of both, and a `total KV cache\n"
    "with ...` row for each of the session's rows above (its values per token per layer on every\n"
    "layer, N tokens; where layers keep windows, chunks or states a line says why not). `to FILE.csv` writes\n"
    "layer_type,layers,n_layers,tokens_cached,kv_values_per_token_per_layer,values,bytes.\n"
    "Examples:\n"
    "  kv-cache\n"
    "  kv-cache rk 1 rv 1 rq 4 groups 2\n"
    "  convert mla kv-rank 48; convert tpa kv-rank 1; kv-cache bytes 1 to kv.csv\n"
    "  kv-cache family tpa-nonctx-a to kv.csv\n"
    "  kv-cache context 32768 to kv32k.json";

static const char *const SCHEMES[] = {"all", "mha", "mqa", "gqa", "mla", "tpa", "tpa-kvonly", "tpa-nonctx-a",
                                      "tpa-nonctx-b", NULL};

#define RANK_KW(nm, mv, hp) { .name = nm, .type = ARG_INT, .min = 1, .max = 1 << 24, .comp = COMP_NONE, \
                              .metavar = mv, .help = hp }
static const Param kv_kw[] = {
    RANK_KW("rq", "Rq", "TPA query rank R_Q (default 6)"),
    RANK_KW("rk", "Rk", "TPA key rank R_K (default 2)"),
    RANK_KW("rv", "Rv", "TPA value rank R_V (default 2)"),
    RANK_KW("groups", "G", "GQA groups g (default: the model's KV heads)"),
    RANK_KW("kv-lora", "Dc", "MLA KV latent d_c (default: the model's, else 4 d_k)"),
    RANK_KW("q-lora", "Dq", "MLA query latent d_c' (default: the model's, else 2 d_c)"),
    RANK_KW("rope-dim", "Dr", "MLA RoPE dims d_h^R (default: the model's, else d_k / 2)"),
    { .name = "bytes", .type = ARG_INT, .min = 1, .max = 16, .comp = COMP_NONE, .metavar = "N",
      .help = "bytes per cached value (default: from the model's dtype)" },
    { .name = "family", .type = ARG_ENUM, .choices = SCHEMES, .def = "all", .comp = COMP_CHOICES,
      .help = "one row of Table 1 only" },
    { .name = "context", .type = ARG_INT, .min = 1, .max = 1 << 30, .comp = COMP_NONE, .metavar = "N",
      .help = "the cache per layer type at a context of N tokens (windows, chunks, shared layers, states)" },
    PARAM_TO,
    {0}
};

/* values: per token per layer, a mean over the layers where they differ (FaRR's `truncate`): exact,
 * its bytes from it, not from a rounded count. */
static int kv_row(Table *t, const char *scheme, double values, size_t bytes, size_t params) {
    if (table_row(t)) return AL_ERR;
    table_str(t, scheme);
    double b = values * (double)bytes;
    table_count(t, values);
    table_count(t, b);
    table_int(t, (long long)params);
    return AL_OK;
}

/* The rows of the model as loaded and of the session's transformations of it that have one
 * (`convert mla`, `convert tpa`, oldest first) in t: the scheme name carries the attention type or
 * the settings, the bytes per token over all layers (unconverted layers at the model's cache) and,
 * for conversions, the converted layers' cache as a fraction of the model's (xF). Says on out when
 * there is no conversion. */
static int kv_session_rows(Session *s, Model *m, Table *t, size_t bytes, Out *out) {
    char name[256];
    /* a hybrid's linear-attention layers keep a fixed-size state, no KV cache: the attention layers only */
    XformKvCtx c = {.before = cfg_kv_values(&m->cfg), .bytes = bytes, .layers = (size_t)cfg_n_kv_layers(&m->cfg),
                    .s = s};
    const char *kind = cfg_is_mla(&m->cfg) ? "MLA"
                       : m->cfg.n_kv_heads == m->cfg.n_heads ? "MHA"
                       : m->cfg.n_kv_heads == 1 ? "MQA" : "GQA";
    snprintf(name, sizeof name, "%s as loaded (%s; %zu byte%s per token in %zu layer%s%s)", m->name, kind,
             model_kv_values_total(m) * bytes, al_s(model_kv_values_total(m) * bytes), c.layers, al_s(c.layers),    /* Gemma 4: each layer type at its own dims */
             m->cfg.lin.mamba ? "; the Mamba-2 layers' state is constant per sequence, not counted" : "");
    if (kv_row(t, name, c.before, bytes, cfg_attn_params(&m->cfg))) return AL_ERR;
    const Xform *mine[64];
    size_t n = 0, rows = 0;
    for (const Xform *x = xform_list(s); x && n < 64; x = x->next)
        if (x->src == m && x->kind->kv_row) mine[n++] = x;
    while (n--) {
        XformKvRow r = {.more = true};
        for (c.part = 0; r.more; c.part++) {          /* KQ-SVD: a row per learned method */
            r.more = false;
            if (!mine[n]->kind->kv_row(mine[n], &c, &r)) break;
            if (kv_row(t, r.scheme, r.values, bytes, r.params)) return AL_ERR;
            rows++;
        }
    }
    if (!rows) {              /* the commands that run on m (an MLA model takes neither conversion) */
        char why[512];
        bool mla = analysis_available(m, AN_CONVERT_MLA, why, sizeof why);
        bool tpa = analysis_available(m, AN_CONVERT_TPA, why, sizeof why);
        out_printf(out, "(no conversion of %s in this session: %s%s%s%s`truncate vo|qk ...` adds its row)\n", m->name,
                   mla ? "`convert mla kv-rank R`" : "", mla && tpa ? ", " : "", tpa ? "`convert tpa kv-rank R`" : "",
                   mla || tpa ? " or " : "");
    }
    if (cfg_has_indexer(&m->cfg))      /* DeepSeek-V3.2 / GLM-5: the indexer's keys are cached beside the latent */
        out_printf(out, "(%s's lightning indexer caches %d more values per token per layer, its keys (index_head_dim), "
                   "not in the rows above: %zu in all with the latent)\n", m->name, m->cfg.index_head_dim,
                   c.before + (size_t)m->cfg.index_head_dim);
    size_t chunk = 0, nc = 0;                    /* Llama 4: the chunked layers keep the current chunk only */
    for (int L = 0; L < m->cfg.n_layers; L++)
        if (cfg_layer_chunk(&m->cfg, L)) chunk = cfg_layer_chunk(&m->cfg, L), nc++;
    if (nc)
        out_printf(out, "(%s: %zu of its %d layer%s attend within chunks of %zu token%s: their cache holds at most the "
                   "current chunk, %zu value%s per layer (%zu token%s x %zu) whatever the context; at a context of N > %zu "
                   "tokens the rows above are per token of the %d full layer%s, the chunked ones keep %zu / N per token)\n",
                   m->name, nc, m->cfg.n_layers, al_s(m->cfg.n_layers), chunk, al_s(chunk), chunk * c.before, al_s(chunk * c.before), chunk, al_s(chunk), c.before, chunk,
                   m->cfg.n_layers - (int)nc, al_s(m->cfg.n_layers - (int)nc), chunk * c.before);
    size_t nw = 0;                               /* windows, chunks, shared layers, states: the cache depends on N */
    for (int L = 0; L < m->cfg.n_layers; L++)
        nw += cfg_layer_window(&m->cfg, L) || cfg_layer_chunk(&m->cfg, L) || cfg_kv_source(&m->cfg, L) != L ||
              cfg_layer_linear(&m->cfg, L);
    if (nw)
        out_printf(out, "(%zu of %s's %d layer%s cache no N tokens of their own (windows, chunks, KV-shared or recurrent "
                   "layers): `kv-cache context N` gives the cache at a context of N tokens per layer type)\n", nw,
                   m->name, m->cfg.n_layers, al_s(m->cfg.n_layers));
    return AL_OK;
}

/* One row of `kv-cache context N` (values and their bytes); tokens / per_token of a constant row as NULL. */
static int kv_ctx_row(Table *t, const char *type, const KvcacheRow *r, int n_layers, size_t values, size_t bytes) {
    if (table_row(t)) return AL_ERR;
    table_str(t, type);
    table_str(t, r ? r->layers : "");
    table_int(t, r ? r->n_layers : n_layers);
    if (r && !kvcache_constant(r->kind)) table_int(t, (long long)r->tokens);
    else table_null(t);
    if (r && !kvcache_constant(r->kind)) table_int(t, (long long)r->per_token);
    else table_null(t);
    table_int(t, (long long)values);
    table_int(t, (long long)bytes);
    return AL_OK;
}

/* The layer_type cell of row r of m, and the bytes per value of its row (a Mamba-2 state of mamba_ssm_cache_dtype
 * float32: 4; else bytes). */
static size_t kv_ctx_type(const Model *m, const KvcacheRow *r, size_t bytes, char *type, size_t cap) {
    if (r->kind == KVC_WINDOW || r->kind == KVC_CHUNK) snprintf(type, cap, "%s %zu", kvcache_kind_name(r->kind), r->span);
    else if (r->span && (r->kind == KVC_COMPRESSED || r->kind == KVC_INDEX))   /* DeepSeek-V4: an entry per span */
        snprintf(type, cap, "%s %zu:1", kvcache_kind_name(r->kind), r->span);
    else if (r->kind == KVC_STATE) snprintf(type, cap, "%s state (constant per sequence)", cfg_linear_name(&m->cfg));
    else if (r->kind == KVC_CONV)
        snprintf(type, cap, "%s conv window (last %d input%s)", cfg_linear_name(&m->cfg), m->cfg.lin.conv - 1, al_s(m->cfg.lin.conv - 1));
    else snprintf(type, cap, "%s", kvcache_kind_name(r->kind));
    return r->kind == KVC_STATE && m->cfg.lin.state_f32 ? 4 : bytes;
}

/* `kv-cache context N`'s rows of the session's transformations of m (kv_session_rows' rows at N tokens): the
 * model's total kv with its attention layers' cache (values per token per layer c.before) replaced by the row's.
 * Exact where every layer keeps N tokens (full is kv's values without windows or chunks); else a line says why
 * there is no such row. */
static int kv_ctx_xform_rows(Session *s, Model *m, Table *t, size_t N, size_t bytes, size_t kv, bool full, Out *out) {
    XformKvCtx c = {.before = cfg_kv_values(&m->cfg), .bytes = bytes, .layers = (size_t)cfg_n_kv_layers(&m->cfg),
                    .s = s};
    const Xform *mine[64];
    size_t n = 0;
    for (const Xform *x = xform_list(s); x && n < 64; x = x->next)
        if (x->src == m && x->kind->kv_row) mine[n++] = x;
    while (n--) {                                     /* oldest first, as `kv-cache` lists them */
        const Xform *x = mine[n];
        XformKvRow r = {.more = true};
        for (c.part = 0; r.more; c.part++) {
            r.more = false;
            if (!x->kind->kv_row(x, &c, &r)) break;
            if (!full) {
                out_printf(out, "(%s: not counted at a context of %zu token%s: its layers keep windows, chunks or states, "
                           "and its row gives a mean over the layers, not each layer's; `kv-cache` gives it per token)\n",
                           r.scheme, N, al_s(N));
                continue;
            }
            double v = (double)kv - (double)(c.before * c.layers * N) + r.values * (double)(c.layers * N);
            if (table_row(t)) return AL_ERR;
            char type[420];
            snprintf(type, sizeof type, "total KV cache with %s", r.scheme);
            table_str(t, type); table_str(t, ""); table_int(t, (long long)c.layers); table_int(t, (long long)N);
            table_count(t, r.values);
            table_int(t, llround(v)); table_int(t, llround(v * (double)bytes));
        }
    }
    return AL_OK;
}

/* `kv-cache context N`: per layer type what the cache holds at N tokens, then the totals, then the session's
 * transformations of m at N (kv_ctx_xform_rows). */
static int cmd_kv_context(Session *s, Model *m, size_t N, size_t bytes, const char *bw, const char *to, Out *out) {
    KvcacheRow r[KVCACHE_MAX_ROWS];
    int n;
    if (kvcache_at(m, N, r, &n)) return AL_ERR;
    Table *t = table_new(7, "layer_type", "layers", "n_layers", "tokens_cached", "kv_values_per_token_per_layer",
                         "values", "bytes");
    if (!t) return AL_ERR;
    size_t kv = 0, st = 0, kvb = 0, stb = 0, full = 0;    /* full: every layer with a cache of its own keeping N tokens */
    int rc = AL_OK, nkv = 0, nst = 0;
    for (int i = 0; rc == AL_OK && i < n; i++) {
        char type[96];
        size_t b = kv_ctx_type(m, &r[i], bytes, type, sizeof type) * r[i].values;
        bool c = kvcache_constant(r[i].kind);
        rc = kv_ctx_row(t, type, &r[i], 0, r[i].values, b);
        *(c ? &st : &kv) += r[i].values, *(c ? &stb : &kvb) += b;
        bool extra = r[i].kind == KVC_INDEX || r[i].kind == KVC_CONV || r[i].kind == KVC_COMPRESSED;
        if (!extra) *(c ? &nst : &nkv) += r[i].n_layers;   /* layers once */
        if (!c && r[i].kind != KVC_COMPRESSED && !(r[i].kind == KVC_INDEX && r[i].span))   /* V4's: beside the window */
            full += r[i].per_token * N * (size_t)r[i].n_layers;
    }
    if (rc == AL_OK) rc = kv_ctx_row(t, "total KV cache", NULL, nkv, kv, kvb);
    if (rc == AL_OK && st) rc = kv_ctx_row(t, "total state (recurrent + conv)", NULL, nst, st, stb);
    if (rc == AL_OK && st) rc = kv_ctx_row(t, "total", NULL, nkv + nst, kv + st, kvb + stb);
    if (rc == AL_OK) rc = kv_ctx_xform_rows(s, m, t, N, bytes, kv, full == kv && !st, out);
    if (rc) { table_free(t); return rc; }
    out_printf(out, "%s at a context of %zu token%s, %zu byte%s per value (%s): the KV cache holds %zu value%s (%.4g per "
               "token; %zu without windows or chunks: x%.4g)%s\n", m->name, N, al_s(N), bytes, al_s(bytes), bw, kv, al_s(kv), (double)kv / (double)N, full,
               full ? (double)kv / (double)full : 1.0, !st ? "" : m->cfg.lin.state_f32
               ? "; the recurrent state is counted apart, per sequence (its SSM state in float32: mamba_ssm_cache_dtype)"
               : "; the recurrent state is counted apart, per sequence");
    return out_table_to(out, to, t);
}

/* The bytes per cached value (`bytes N`, else kvcache_dtype's: info's and truncate's) and the words saying
 * which, into w ("BF16: config torch_dtype bfloat16; weights stored F32"). */
static size_t kv_value_bytes(const Model *m, const Args *a, char *w, size_t cap) {
    char why[160];
    dt_type d = kvcache_dtype(m, why, sizeof why);
    if (args_given(a, "bytes")) { snprintf(w, cap, "as given"); return (size_t)args_int(a, "bytes"); }
    snprintf(w, cap, "%s: %s", dt_name(d), why);
    return dt_size(d);
}

static int cmd_kv_table(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    char bw[200];
    size_t bytes = kv_value_bytes(m, a, bw, sizeof bw);
    if (args_given(a, "context"))
        return cmd_kv_context(s, m, (size_t)args_int(a, "context"), bytes, bw, args_str(a, "to"), out);
    TpaDims d = tpa_dims_from_config(&m->cfg);
    if (args_given(a, "rq")) d.r_q = (size_t)args_int(a, "rq");
    if (args_given(a, "rk")) d.r_k = (size_t)args_int(a, "rk");
    if (args_given(a, "rv")) d.r_v = (size_t)args_int(a, "rv");
    if (args_given(a, "groups")) d.g = (size_t)args_int(a, "groups");
    if (args_given(a, "kv-lora")) d.d_c = (size_t)args_int(a, "kv-lora");
    if (args_given(a, "q-lora")) d.d_cq = (size_t)args_int(a, "q-lora");
    if (args_given(a, "rope-dim")) d.d_hr = (size_t)args_int(a, "rope-dim");
    if (tpa_dims_check(&d)) return AL_ERR;
    int only = args_enum(a, "family") - 1;   /* -1: all */
    out_printf(out, "%s: d_model %zu, h %zu, d_k %zu, d_v %zu, g %zu; MLA d_c %zu, d_c' %zu, d_h^R %zu, d_h^N %zu; "
               "TPA R_Q %zu, R_K %zu, R_V %zu; %zu byte%s per value (%s); per layer (%d layer%s)\n",
               m->name, d.d_model, d.h, d.d_k, d.d_v, d.g, d.d_c, d.d_cq, d.d_hr, d.d_hn, d.r_q, d.r_k, d.r_v, bytes, al_s(bytes),
               bw, m->cfg.n_layers, al_s(m->cfg.n_layers));
    char note[640];
    layersel_note(&m->cfg, 0, m->cfg.n_layers - 1, "the KV cache is that of", note, sizeof note);
    if (note[0]) out_printf(out, "%s\n", note);
    Table *t = table_new(4, "scheme", "kv_values_per_token", "kv_bytes_per_token", "attn_params");
    if (!t) return AL_ERR;
    int rc = AL_OK;
    for (int sc = 0; rc == AL_OK && sc < TPA_SCHEME_COUNT; sc++)
        if (only < 0 || only == sc)
            rc = kv_row(t, tpa_scheme_name((tpa_scheme)sc), tpa_kv_values(&d, (tpa_scheme)sc), bytes,
                        tpa_attn_params(&d, (tpa_scheme)sc));
    if (rc == AL_OK && only < 0) rc = kv_session_rows(s, m, t, bytes, out);
    if (rc) { table_free(t); return rc; }
    return out_table_to(out, args_str(a, "to"), t);
}

/* ================================================================ compare */

static const char COMPARE_HELP[] =
    "Every KV-cache reduction of the seeds on the current model at one budget B (values cached per\n"
    "token per layer), layer by layer: the relative error of the attention scores and outputs of\n"
    "  farr       FaRR truncation of the cached V dims (and K dims where there is no RoPE);\n"
    "  transmla   TransMLA with balanced KV and its best FreqFold (kv_rank R = B - D);\n"
    "  kqsvd      KQ-SVD projections of the cached keys and values, refit at B like every\n"
    "             method: from the session's calibration Grams (`calibrate`), else from random\n"
    "             tokens (those `kvsvd learn kqsvd` made are reused only where their ranks are\n"
    "             B's, and the row says \"reused\");\n"
    "  tpa-a      non-contextual TPA, fixed head factors (R_K d + R_V dv values);\n"
    "  tpa-b      non-contextual TPA, fixed token factors ((R_K + R_V) G values);\n"
    "  mean-pool  KV heads averaged into fewer groups.\n"
    "Each method takes the largest setting that fits B (K and V ranks filled alternately); one that\n"
    "cannot fit says why. Errors are relative Frobenius errors ||Y - Y'|| / ||Y|| (unsquared, as\n"
    "everywhere in attnlab) on random Gaussian tokens (`seed S`, printed), the same for every method: of unit\n"
    "variance, or, when the session has calibration statistics of the attention inputs\n"
    "(`calibrate ... inputs on`), with each layer's second moment, which TransMLA and TPA then fit\n"
    "to (`fit weights` ignores the calibration). The summary gives each method's mean output error\n"
    "over the layers. GQA / MHA models only; a sliding window or soft-cap of the model applies to\n"
    "every method as to the model. The session keeps the result: `plot compare` draws it\n"
    "(one curve per method against the layer).\n"
    "\n"
    "On real tokens (`text FILE`, `ids FILE`, or `heldout`: the held-out windows of the session's\n"
    "calibration text), width against length through the model's forward pass, every attention\n"
    "layer: each method's layer errors on the hidden states of the text's first window (fit on the\n"
    "second), and the perplexity of the text in windows of `seqlen` with every layer replaced by\n"
    "the method's (KQ-SVD has none: its projections act on the cached keys after RoPE); beside them\n"
    "token eviction at the same KV bytes per token on average:\n"
    "  streaming-llm  4 attention sinks + the most recent tokens (Xiao et al. 2023; kvpress\n"
    "                 StreamingLLMPress, keys keep their positions);\n"
    "  h2o            heavy hitters by accumulated attention + the C/2 most recent, one eviction per\n"
    "                 token, evicted for good (Zhang et al. 2023, Algorithm 1);\n"
    "  snapkv         the last min(64, C/2) queries vote with their attention, pooled (kernel 5) and\n"
    "                 averaged over the KV head's query heads; the window + the best voted (Li et al.\n"
    "                 2024; kvpress SnapKVPress), applied as the prefill of every prefix;\n"
    "and each width method at 2B with StreamingLLM on top back to B (`width+eviction`). The budget\n"
    "maps to a cache of C tokens per layer and KV head by the keys read: the largest C with\n"
    "sum_p min(p+1, C) <= (B / W) sum_p (p+1) over a window's positions p (W: the model's values per\n"
    "token per layer; on a model with sliding windows, summed over the layers, each reading at most\n"
    "its window), so every position's attention reads on average what a width-B cache holds.\n"
    "Eviction layer errors: that layer alone evicting. `plot compare-budgets text FILE` draws the\n"
    "perplexity against the values per token.\n"
    "Examples:\n"
    "  compare kv-budget 64; plot compare to cmp.png\n"
    "  compare kv-budget 512 layers 0-3 tokens 128 to cmp.csv\n"
    "  compare kv-budget 32 text story.txt seqlen 256 to width-vs-length.csv";

static const Param compare_kw[] = {
    { .name = "kv-budget", .type = ARG_INT, .min = 1, .max = 1 << 30, .comp = COMP_NONE, .metavar = "B",
      .help = "values cached per token per layer (required)" },
    PARAM_LAYERS("layers to compare"),
    PARAM_TOKENS("64", "random tokens of the evaluation"),
    PARAM_FIT("auto: calibration statistics when the session has them, else unit-variance inputs"),
    PARAM_SEED,
    WS_CMP_TEXT_KW,
    PARAM_TO,
    {0}
};

/* The per-layer output errors of a comparison on a text: a layer per line, a column per method. */
static void text_layer_lines(Out *out, const BudgetText *bt) {
    const BudgetResult *r = bt->layers;
    out_printf(out, "output error per layer on the first window (%zu token%s):\n%-6s", bt->err_tokens, al_s(bt->err_tokens), "layer");
    for (int k = 0; k < BUDGET_NMETHODS; k++) out_printf(out, " %10s", budget_method_name((budget_method)k));
    for (int k = 0; k < EVICT_NKINDS; k++) out_printf(out, " %13s", evict_name((evict_kind)k));
    out_printf(out, "\n");
    for (int i = 0; i < r->n_rows / BUDGET_NMETHODS; i++) {
        const BudgetRow *w = r->rows + (size_t)i * BUDGET_NMETHODS;
        out_printf(out, "%-6d", w[0].layer);
        for (int k = 0; k < BUDGET_NMETHODS; k++)
            if (w[k].ok) out_printf(out, " %10.4g", w[k].out_err);
            else out_printf(out, " %10s", "n/a");
        for (int k = 0; k < EVICT_NKINDS; k++) out_printf(out, " %13.4g", bt->evict_err[(size_t)i * EVICT_NKINDS + k]);
        out_printf(out, "\n");
    }
}

static const char *const FAMILY_NAMES[] = {"model", "width", "eviction", "width+eviction"};

/* `compare kv-budget B text FILE | ids FILE | heldout`: budget_text's rows. */
static int compare_text(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    if (!args_given(a, "kv-budget"))
        return al_err("compare needs kv-budget B (values cached per token per layer; %s caches %zu)", m->name,
                      cfg_kv_values(&m->cfg));
    if (args_given(a, "layers") || args_given(a, "tokens") || args_given(a, "seed"))
        return al_err("compare on a text runs every attention layer on the text's own tokens: drop layers / tokens / "
                      "seed (seqlen sets its windows)");
    CheckText tx;
    BudgetText *bt = NULL;
    if (ws_compare_text(s, m, a, &tx)) return AL_ERR;
    int rc = ws_compare_text_run(s, m, args_enum(a, "fit"), (size_t)args_int(a, "kv-budget"), &tx, &bt);
    if (rc == AL_OK)
        out_printf(out, "%s at a KV budget of %zu value%s per token per layer (the model caches %zu: %.1f%%), on %s: "
                   "perplexity over %zu token%s in %zu window%s of %zu; layer errors on the first window's %zu token%s, the "
                   "methods fit on %s\n", m->name, bt->budget, al_s(bt->budget), bt->kv_model, 100.0 * (double)bt->budget /
                   (double)bt->kv_model, tx.on, bt->tokens, al_s(bt->tokens), bt->windows, al_s(bt->windows), bt->seqlen, bt->err_tokens, al_s(bt->err_tokens),
                   bt->fit_own ? "the same window (the text has one)" : "the second window");
    ws_check_text_free(&tx);
    if (rc) return rc;
    out_printf(out, "token eviction at the same keys read per window of %zu: a cache of %zu token%s (%.1f%% of the keys "
               "read%s); StreamingLLM 4 sinks, H2O half heavy hitters, SnapKV window <= 64 and pooling 5 (kvpress's "
               "StreamingLLMPress and SnapKVPress, H2O's Algorithm 1); width+eviction: the method at 2B with "
               "StreamingLLM back to B\n", bt->seqlen, bt->capacity, al_s(bt->capacity), 100.0 * bt->read_frac,
               bt->windowed ? ", the sliding-window layers reading at most their window" : "");
    text_layer_lines(out, bt);
    Table *t = table_new(7, "method", "family", "kv_values", "setting", "out_err", "ppl", "ppl_ratio");
    double ppl0 = bt->rows[0].ok ? exp(bt->rows[0].nll) : NAN;
    for (int i = 0; t && i < bt->n_rows; i++) {
        const BudgetTextRow *w = &bt->rows[i];
        if (table_row(t)) { table_free(t); t = NULL; break; }
        table_str(t, w->method);
        table_str(t, FAMILY_NAMES[w->family]);
        if (w->ok) table_count(t, w->kv_values); else table_null(t);
        table_str(t, w->setting);
        if (w->ok && !isnan(w->out_err)) table_num(t, w->out_err); else table_null(t);
        if (w->ok && !isnan(w->nll)) { table_num(t, exp(w->nll)); table_num(t, exp(w->nll) / ppl0); }
        else { table_null(t); table_null(t); }
    }
    budget_text_free(bt);
    return t ? out_table_to(out, args_str(a, "to"), t) : AL_ERR;
}

static int cmd_compare(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    long lo, hi;
    if (ws_compare_on_text(a)) return compare_text(s, a, out);
    if (param_layers(out, a, "layers", m, &lo, &hi)) return AL_ERR;
    WsCmpKey q = {.budget = args_given(a, "kv-budget") ? (size_t)args_int(a, "kv-budget") : 0,
                   .layer_lo = (int)lo, .layer_hi = (int)hi, .tokens = (size_t)args_int(a, "tokens"),
                   .fit = args_enum(a, "fit"), .seed = args_given(a, "seed") ? (uint64_t)args_int(a, "seed") : 0};
    BudgetResult *r = NULL;
    int rc = ws_compare_run(s, m, &q, &r);
    if (rc == AL_OK) rc = ws_compare_keep(s, m, &q, r);     /* for `plot compare` */
    if (rc) return rc;
    out_printf(out, "%s at a KV budget of %zu value%s per token per layer (the model caches %zu: %.1f%%); relative "
               "Frobenius errors on %zu random Gaussian tokens, seed %llu (%s)\n", m->name, r->budget, al_s(r->budget), r->kv_model,
               100.0 * (double)r->budget / (double)r->kv_model, r->tokens, (unsigned long long)r->seed,
               r->activation_stats ? "with the calibration's second moment per layer; TransMLA and TPA fit to it"
                                   : "unit variance");
    if (m->cfg.window_declared >= 0 || m->cfg.attn_softcap > 0)
        out_printf(out, "the model's %s applied to every method as to the model (per layer)\n",
                   m->cfg.window_declared >= 0 && m->cfg.attn_softcap > 0 ? "sliding windows and score soft-cap"
                   : m->cfg.window_declared >= 0 ? "sliding windows" : "score soft-cap");
    out_printf(out, "KQ-SVD's projections: %s\n", r->kq_from == BUDGET_KQ_LEARNED ? "those `kvsvd learn kqsvd` made, "
                                                     "reused: their ranks are the budget's"
                                                   : r->kq_from == BUDGET_KQ_CALIB ? "learned at the budget from the "
                                                     "session's calibration (its Grams of real text)"
                                                   : "learned at the budget from random tokens (no calibration)");
    Table *t = table_new(6, "layer", "method", "kv_values", "setting", "score_err", "out_err");
    if (!t) return AL_ERR;
    double sum[BUDGET_NMETHODS] = {0};
    int cnt[BUDGET_NMETHODS] = {0};
    int nan_row = -1;
    for (int i = 0; i < r->n_rows; i++) {
        const BudgetRow *w = &r->rows[i];
        if (table_row(t)) { table_free(t); return AL_ERR; }
        table_int(t, w->layer);
        table_str(t, budget_method_name(w->method));
        if (w->ok) table_int(t, (long long)w->kv_values);
        else table_null(t);
        table_str(t, w->setting);
        if (w->ok) { table_num(t, w->score_err); table_num(t, w->out_err); }    /* nan: NaN/Inf weights */
        else { table_null(t); table_null(t); }
        if (w->ok) { sum[w->method] += w->out_err; cnt[w->method]++; }
        if (w->ok && nan_row < 0 && (isnan(w->score_err) || isnan(w->out_err))) nan_row = i;
    }
    if (nan_row >= 0)
        out_note_nan(out, "layer %d (%s)", r->rows[nan_row].layer, budget_method_name(r->rows[nan_row].method));
    out_printf(out, "mean output error over the layers:");
    for (int k = 0; k < BUDGET_NMETHODS; k++)
        if (cnt[k]) out_printf(out, " %s %.4g;", budget_method_name((budget_method)k), sum[k] / cnt[k]);
        else out_printf(out, " %s n/a;", budget_method_name((budget_method)k));
    out_printf(out, "\n");
    return out_table_to(out, args_str(a, "to"), t);
}

/* ================================================================ the table */

static const Command tpa_cmds[] = {
    { .name = "kv-cache", .summary = "KV cache and attention parameters per token: Table 1 schemes, as loaded, converted",
      .returns = CMD_RETURNS_ROWS,
      .help = KV_HELP, .kw = kv_kw, .fn = cmd_kv_table, .flags = CMD_MODEL },
    { .name = "compare", .summary = "every KV-cache reduction at one budget: compare kv-budget B",
      .help = COMPARE_HELP, .kw = compare_kw, .fn = cmd_compare, .flags = CMD_MODEL },
    {0}
};

const CommandGroup cmd_group_tpa = { .title = "Tensor Product Attention (TPA)", .cmds = tpa_cmds };

/* ================================================================ the transformation */

static bool tpa_xf_kv_row(const Xform *x, const XformKvCtx *c, XformKvRow *row) {
    const TpaModel *tr = x->data;
    size_t conv = 0;
    for (int l = 0; l < tr->n_layers; l++) conv += tr->layers[l] != NULL;
    snprintf(row->scheme, sizeof row->scheme, "convert tpa (form %s R_K %d R_V %d; %zu byte%s per token in %zu layer%s; x%.4g)",
             tpa_form_name(tr->opts.form), tr->opts.k_rank, tr->opts.v_rank, xform_kv_bytes(c, tr->kv_after, conv), al_s(xform_kv_bytes(c, tr->kv_after, conv)),
             c->layers, al_s(c->layers), c->before ? (double)tr->kv_after / (double)c->before : 1.0);
    row->values = tr->kv_after;
    row->params = tr->params_after;
    return true;
}

static void tpa_xf_describe(const Xform *x, char *buf, size_t cap) {
    const TpaModel *t = x->data;
    snprintf(buf, cap, "convert tpa of %s: form %s, R_K %d, R_V %d", x->src->name, tpa_form_name(t->opts.form),
             t->opts.k_rank, t->opts.v_rank);
}

static void tpa_xf_free(void *data) { tpa_model_free(data); }

/* The converted layer as the forward pass runs it: TpaLayer.dense, keys and values projected onto the
 * kept TPA factors (what tpa_eval computes from the factors, RoPE after: core/methods/tpa.h); NULL where the
 * layer was not converted. */
static int tpa_xf_attn_layer(Session *s, const Xform *x, int layer, const AttnLayer **out, bool *owned) {
    const TpaModel *t = x->data;
    AttnLayer *run = NULL;                             /* compute bf16: run as a loaded model's layer */
    int rc = tpa_run_layer(t, x->src, layer, mm_compute_parse(s->compute), &run);
    *owned = run != NULL;
    *out = run ? run : layer >= 0 && layer < t->n_layers && t->layers[layer] ? t->layers[layer]->dense : NULL;
    return rc;
}

const XformKind cmd_tpa_xform = {
    .name = "convert tpa", .export_to = tpa_xf_export, .check = tpa_xf_check, .kv_row = tpa_xf_kv_row,
    .describe = tpa_xf_describe, .free = tpa_xf_free, .owns_dir = tpa_is_export, .check_dir = tpa_xf_check_dir,
    .dir_manifest = TPA_MANIFEST,
    .export_label = "a TPA export", .no_format = "attnlab's own layout", .no_shard_mb = "one factors file",
    .attn_layer = tpa_xf_attn_layer, .attn_what = "the TPA layers swapped in: keys and values on the kept factors",
};
