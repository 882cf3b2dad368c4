/* cmd_convert.c -- TransMLA (seed 003): the sub-commands `convert mla` (GQA -> MLA with weight or
 * activation statistics and the perplexity before and after) and `convert mla-table` (W- vs
 * activation-based PCA, with and without KV balancing: Figure 4b), plugged into the `convert` hub
 * through cmd_convert.h; and the transformation `convert mla` leaves (cmd_convert_xform,
 * xform.h): its export in DeepSeek-V3 layout, its check against the source (in the session, or an
 * exported folder), its `kv-cache` row. The figures are `plot key-norms`, `plot rope-energy` and
 * `plot rope-removal` (commands/cmd_plot_mla.c); statistics and their text come from ws_tmla.h. */
#define _GNU_SOURCE
#include "cmd_convert.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layersel.h"
#include "mla_export.h"
#include "params.h"
#include "seeds.h"
#include "tmla_qkn.h"
#include "tmla_study.h"
#include "transmla.h"
#include "tmla_hold.h"
#include "ws_calib.h"
#include "ws_lm.h"
#include "ws_tmla.h"
#include "ws_check.h"
#include "ws_mlastrat.h"
#include "xform.h"

/* ================================================================ perplexity before and after */

/* Mean NLL of the source and of the converted model, in one pass over the weights (fwd_ppl_pair: each
 * window runs layer by layer as two streams, the source's and the one with the converted layers swapped in,
 * so each layer's weights are read once for both), each as `ppl` runs it. When every layer is converted and
 * the DeepSeek-V3 export can hold it, the converted stream runs at the norm eps that export writes: the
 * export's perplexity but for its latent norms' linear bound (mla_export.h; cli_pipeline: the reloaded F32
 * export within 2e-6 of it on demo-llama; 4e-6 relative in log on a random 2048-wide BF16 model), with
 * nothing written. */
static int ppl_before_after(TmlaResult *r, mm_compute mode, Forward *f, const TmlaStatsUse *u, FwdPpl *before,
                            FwdPpl *after, const char **route) {
    bool all = true;
    for (int l = 0; l < r->n_layers; l++) all &= r->layers[l] != NULL;
    if (all && mla_exportable(r) != AL_OK) { al_err_clear(); all = false; }   /* no DeepSeek-V3 form: source eps */
    AttnLayer *const *run = NULL;
    int rc = mla_run_for(r, mode, &run);                   /* as its BF16 export where that is the session's */
    const AttnLayer **ov = rc == AL_OK ? al_calloc((size_t)r->n_layers, sizeof *ov, "attention overrides") : NULL;
    if (rc == AL_OK && !ov) rc = AL_ERR;
    for (int l = 0; rc == AL_OK && l < r->n_layers; l++) ov[l] = r->layers[l] ? run[l] : NULL;
    double eps = all ? mla_export_norm_eps(r->src, true, r->opts.qk_norm != TMLA_QKN_NONE) : 0;
    if (rc == AL_OK) rc = fwd_ppl_pair(f, ov, eps, u->ids, u->ppl_tokens, u->seqlen, before, after);
    free(ov);
    *route = all ? "the converted layers in memory at its DeepSeek-V3 export's norm eps, run by the forward pass "
                   "(as `ppl` runs it; nothing written)"
                 : "the converted layers swapped in memory, run by the forward pass";
    return rc;
}

/* ================================================================ convert mla */

const char CMD_CONVERT_MLA_HELP[] =
    "TransMLA on every layer (seed 003, 4.1-4.3, App. B-D). Every PCA reads second moments: of the\n"
    "calibration activations when there are any (`calib FILE`, `ids FILE`, or the session's\n"
    "`calibrate`: the paper's WX-based variant; `stats act`), else of the weights under\n"
    "unit-variance inputs (W-based; `stats weights` forces it):\n"
    "  1. merge the KV heads into one latent head (exact);\n"
    "  2. RoRoPE: per RoPE frequency one PCA rotation across the KV heads, the same for the\n"
    "     real and imaginary dims (exact), 3. FreqFold M: M adjacent frequencies share one PCA\n"
    "     and the D = d/M kept RoPE dims turn at every M-th frequency (a standard RoPE of dim D);\n"
    "     the other key dims lose RoPE;\n"
    "  4. balanced KV: NoPE keys / alpha (alpha = RMS key / RMS value) and values share one PCA\n"
    "     basis of rank R (the KV latent), alpha folded back into the key up-projection;\n"
    "  5. the softmax scale (nope + D)^-1/2 is corrected in the query.\n"
    "Per layer it reports alpha, the key energy kept in the RoPE dims, the energy kept by the\n"
    "joint basis, and the relative Frobenius error of attention scores and outputs on random\n"
    "Gaussian tokens (`tokens T`, `seed S`; both printed, and `check` reuses them), with the\n"
    "other balance setting beside it. The KV cache goes from G (d + dv) to R + D values per\n"
    "token and layer (`kv-cache` tabulates it). `export DIR [dtype T] [shard-mb MB]` writes the\n"
    "result; `check` compares it with the model, `check DIR` an export.\n"
    "kv-rank full keeps every direction: with one KV head or identical KV heads and D = d the\n"
    "conversion is exact; otherwise the one RoPE key of D dims cannot hold the G d RoPE dims of\n"
    "the merged key, the rest lose RoPE, and that dominates the error (a note says so).\n"
    "Partial rotary (GPT-NeoX rotary_pct, Phi-3 partial_rotary_factor: the first rd dims of a head\n"
    "turn): RoRoPE rotates the rotary dims only, rope-dim and freqfold count them (default D = rd);\n"
    "the NoPE dims of every KV head join the latent with the values, and each query's NoPE dims\n"
    "pair with them as MLA's NoPE part does (qk_nope_head_dim = d). Where the source's other\n"
    "layers have no DeepSeek-V3 form (NeoX's parallel LayerNorm blocks, MoE routers other than\n"
    "softmax top-k) the stock export is refused, naming why, and `check` and the perplexity run the\n"
    "conversion in the session; Phi-3's fused gate_up_proj is exported split, Mixtral's experts in\n"
    "DeepSeek-V3's MoE layout (`help export`).\n"
    "Q/K RMSNorm (Qwen3, OLMo 2, MiniMax-M2): no latent caches the normed keys exactly; `qk-norm\n"
    "fold` folds the gains and the norm's 1/RMS at the PCA statistics (1/sqrt(E[ms] + eps), per head\n"
    "or per projection) into W_Q / W_K, `qk-norm drop` removes the norm (the naive baseline),\n"
    "`qk-norm keep` caches fold's latent and keeps the norm on the keys and values rebuilt from it\n"
    "(least squares under the statistics), RoPE after it on every rotary dim: exact at full rank, not\n"
    "absorbable (no stock export: `export DIR format attnlab` writes it, `load DIR` runs it); the\n"
    "lines say which, and the errors are against the\n"
    "source with its norm.\n"
    "Sliding windows, soft-caps and sinks (Gemma 2, gpt-oss) stay on the converted layers; a NoPE layer\n"
    "(SmolLM3) converts with RoPE frequencies 0 (exact at full rank); each layer turns at its own\n"
    "RoPE base (Gemma 3's sliding layers: rope_local_base_freq, unscaled); attention without RoPE\n"
    "(Nemotron-H) converts with RoPE dims 0, the whole key in the latent; the stock export is refused,\n"
    "named (`export DIR format attnlab` keeps them; convert tpa's own layout too).\n"
    "Activation statistics: `calib FILE` runs `calibrate` over up to `samples` training windows of\n"
    "`seqlen` tokens of the text (TransMLA: 128 x 256 of WikiText-2), keeping E[x xᵀ] and E[x] of\n"
    "every layer's attention input, so keys, values and queries get their exact activation second\n"
    "moments (alpha is then the RMS ratio of the activation NoPE keys and values). They become the\n"
    "session's calibration (`calib info`, `calib save`), used by later TransMLA commands.\n"
    "Perplexity: with a calibration text, the perplexity of up to `ppl-tokens` tokens (windows of\n"
    "seqlen) of its validation split -- the last tenth of its windows, never calibrated on -- or,\n"
    "with `split train`, of the calibrated windows (in-sample, said so), or of `eval FILE` (a\n"
    "held-out text; `eval-ids FILE` as token ids) is reported before (the loaded model) and after\n"
    "(the forward pass with the converted layers swapped in, at the norm eps of the DeepSeek-V3\n"
    "export, as `ppl` runs it: the export's perplexity but for its latent norms' bound, nothing\n"
    "written; with only some layers converted, at the source's eps); `ppl\n"
    "off` skips it. A text too short for a validation window falls back to in-sample, said so.\n"
    "Examples:\n"
    "  convert mla kv-rank full\n"
    "  convert mla kv-rank 512 rope-dim 64\n"
    "  convert mla kv-rank 256 freqfold 4 balance off q-rank 1024 to conv.csv\n"
    "  convert mla kv-rank 64 rope-dim 32 calib wiki.train.txt samples 128 seqlen 256\n"
    "  convert mla kv-rank 256 qk-norm fold calib wiki.train.txt        (Qwen3, OLMo 2)\n"
    "Strategies (core/methods/mla_strategy.h; `convert mla-table ... strategies all` side by side):\n"
    "`strategy transmla` is the above. `strategy mha2mla-SEL` is MHA2MLA's (Ji et al. 2025): no\n"
    "rotation; per KV head `rope-pairs` r frequencies keep RoPE (default rope-dim / (2 x KV heads)),\n"
    "SEL high (the r highest), low (the r lowest), uniform (every (rd/2)/r-th) or 2norm (largest\n"
    "query-norm x key-norm product under the statistics); the SOURCE's other key dims lose RoPE, so\n"
    "it is NOT exact at full kv rank (unless r = rd/2); then the SVD of the NoPE key and value\n"
    "weights: one latent for [W_k_nope | W_v], or with -split one each (R/2 + R/2); -rN (or\n"
    "`rope-pairs N`) keeps N frequencies per KV head (mha2mla-low-split-r2). `strategy care`\n"
    "is CARE's (ICLR 2026): RoRoPE, then the SVD of C^1/2 [W_k_nope | W_v] mapped back by C^-1/2\n"
    "(C: the activations' second moment, damped as its code does), no balancing; it needs\n"
    "activation statistics. A trailing -alloc (any strategy) spreads the same total kv rank over\n"
    "the layers as CARE's MLA converter: K and V apart, half each, by its greedy rule on their H^4\n"
    "spectra. Per-pair RoPE frequencies (mha2mla) and per-layer\n"
    "ranks (-alloc) have no DeepSeek-V3 form: the stock export refuses them, naming it; check and the\n"
    "perplexity run them in the session, `export DIR format attnlab` writes them.\n"
    "  convert mla kv-rank 32 strategy mha2mla-2norm calib story.txt\n"
    "  convert mla kv-rank 32 strategy care-alloc calib story.txt";

static const char *const ONOFF[] = {"on", "off", NULL};
static const char *const QKN_MODES[] = {"fold", "drop", "keep", NULL};     /* TMLA_QKN_FOLD, _DROP, _KEEP */

const Param cmd_convert_mla_kw[] = {
    { .name = "kv-rank", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "R|full",
      .help = "latent dims of the joint NoPE key / value basis, or full (required)" },
    { .name = "rope-dim", .type = ARG_INT, .min = 2, .max = 1 << 20, .comp = COMP_NONE, .metavar = "D",
      .help = "RoPE dims kept = head dim / freqfold (default: head dim)" },
    { .name = "freqfold", .type = ARG_INT, .min = 1, .max = 1 << 20, .comp = COMP_NONE, .metavar = "M",
      .help = "adjacent RoPE frequencies per PCA (default: head dim / rope-dim, else 1 as in the figures)" },
    { .name = "balance", .type = ARG_ENUM, .choices = ONOFF, .def = "on", .comp = COMP_CHOICES,
      .help = "KV balancing before the joint PCA" },
    { .name = "q-rank", .type = ARG_INT, .min = 1, .max = 1 << 24, .comp = COMP_NONE, .metavar = "Rq",
      .help = "factor the query through a latent of this rank (q_a_proj / q_b_proj)" },
    PARAM_LAYERS("layers to convert (export needs all)"),
    PARAM_TOKENS("64", "random tokens for the error report"),
    PARAM_SEED,
    { .name = "ppl", .type = ARG_ENUM, .choices = ONOFF, .def = "on", .comp = COMP_CHOICES,
      .help = "perplexity before and after, when there is a calibration text" },
    { .name = "qk-norm", .type = ARG_ENUM, .choices = QKN_MODES, .comp = COMP_CHOICES,
      .help = "a source with Q/K RMSNorm: fold its gains and calibrated 1/RMS into W_Q / W_K, drop it, or keep it on "
              "keys rebuilt from the cache (session only)" },
    PARAM_TMLA_STATS,
    PARAM_MLASTRAT,
    PARAM_TO,
    {0}
};

/* Parses kv-rank: a positive number or `full`. */
static int parse_rank(const Args *a, int *R) {
    const char *v = args_str(a, "kv-rank");
    if (!v || !*v)
        return al_err("convert mla needs kv-rank R (latent dims, or full), e.g. convert mla kv-rank 512 rope-dim 64");
    if (!strcmp(v, "full")) { *R = TMLA_FULL; return AL_OK; }
    char *end;
    long r = strtol(v, &end, 10);
    if (*end || r < 1 || r > (1L << 24)) return al_err("kv-rank '%s': give a positive number of latent dims or full", v);
    *R = (int)r;
    return AL_OK;
}

/* Says when the one RoPE key of D dims cannot hold the merged keys (G d RoPE dims): the dims that
 * lose RoPE then cost accuracy at any kv-rank, full included (seed 003, 4.2). */
static void note_rope_loss(const Model *m, const TmlaResult *r, Out *out) {
    const TmlaOpts *ro = &r->opts;
    int G = m->cfg.n_kv_heads, d = cfg_d_qk(&m->cfg), worst = -1;
    for (int l = ro->layer_lo; l <= ro->layer_hi; l++)
        if (r->layers[l] && (worst < 0 || r->rep[l].rope_energy < r->rep[worst].rope_energy)) worst = l;
    if (worst < 0 || G * d <= r->rope_dim || !(r->rep[worst].rope_energy < 1 - 1e-6)) return;
    out_printf(out, "note: %snot lossless: the merged key has %d x %d = %d RoPE dims and MLA keeps one RoPE key of %d; "
               "the others lose RoPE (rope_energy down to %.4g in layer %d, out_err %.3g there), which dominates the "
               "error%s (exact only with one KV head or identical KV heads)\n", ro->kv_rank == TMLA_FULL ?
               "kv-rank full keeps every latent direction but is " : "", G, d, G * d, r->rope_dim,
               r->rep[worst].rope_energy, worst, r->rep[worst].out_err, ro->kv_rank == TMLA_FULL ? "" : " beside the rank");
}

/* convert mla's options from its arguments: kv-rank, RoPE dims, freqfold, balance, q-rank, tokens,
 * seed, layers. */
static int mla_args_opts(const Model *m, const Args *a, Out *out, TmlaOpts *o) {
    *o = tmla_opts_default();
    if (parse_rank(a, &o->kv_rank)) return AL_ERR;
    o->rope_dim = args_given(a, "rope-dim") ? (int)args_int(a, "rope-dim") : 0;
    o->freqfold = args_given(a, "freqfold") ? (int)args_int(a, "freqfold") : 0;
    o->balance = args_enum(a, "balance") != 1;
    o->q_rank = args_given(a, "q-rank") ? (int)args_int(a, "q-rank") : 0;
    o->eval_tokens = (size_t)args_int(a, "tokens");
    static const int qkn[] = {TMLA_QKN_FOLD, TMLA_QKN_DROP, TMLA_QKN_KEEP};
    if (args_given(a, "qk-norm")) o->qk_norm = qkn[args_enum(a, "qk-norm")];
    if (args_given(a, "seed")) o->seed = (uint64_t)args_int(a, "seed");
    long lo, hi;
    if (param_layers(out, a, "layers", m, &lo, &hi)) return AL_ERR;
    o->layer_lo = (int)lo;
    o->layer_hi = (int)hi;
    return AL_OK;
}

/* The variant tag of every line of a conversion of a source with Q/K RMSNorm ("" without). */
static const char *qkn_tag(const Model *m, const TmlaResult *r) {
    if (m->cfg.qk_norm == QKN_NONE) return "";
    return r->opts.qk_norm == TMLA_QKN_FOLD ? "q/k norm fold: " : r->opts.qk_norm == TMLA_QKN_KEEP ? "q/k norm keep: "
                                                                                                  : "q/k norm drop: ";
}

/* What the conversion r of m is: dims, query latent, KV cache and parameters, PCA statistics. */
static void mla_describe(Out *out, const Model *m, const Args *a, const TmlaResult *r, const TmlaStatsUse *u) {
    const TmlaOpts *ro = &r->opts;
    bool fold_default = !args_given(a, "rope-dim") && !args_given(a, "freqfold");
    char lt[256];
    out_printf(out, "converted %s of %s to MLA: kv_lora_rank %d, RoPE dims %d (freqfold %d), nope %d, v %d%s\n",
               layersel_words(&m->cfg, ro->layer_lo, ro->layer_hi, lt, sizeof lt), m->name, r->kv_rank, r->rope_dim, ro->freqfold, r->qk_nope, r->v_dim,
               fold_default ? "; freqfold: TransMLA's default, the TransMLA figures' too" : "");
    if (r->q_rank) out_printf(out, "query latent of rank %d\n", r->q_rank);
    size_t nl = (size_t)layersel_count(&m->cfg, ro->layer_lo, ro->layer_hi);   /* params_*: sums over them */
    nl = nl ? nl : 1;
    out_printf(out, "KV cache per token per layer: %zu -> %zu value%s (%.1f%%); attention parameters per layer%s %zu -> %zu "
               "(%zu converted layer%s: %zu -> %zu)\n", r->kv_before, r->kv_after, al_s(r->kv_after),
               100.0 * (double)r->kv_after / (double)r->kv_before,
               r->params_before % nl || r->params_after % nl ? " (a mean: the layers differ)" : "",
               r->params_before / nl, r->params_after / nl, nl, al_s(nl),
               r->params_before, r->params_after);
    out_printf(out, "PCA statistics: %s\n", u->source);
    if (r->solve_s > 0)
        out_printf(out, "conversion: %.2f s (CPU %.2f s): the layers' PCAs, builds and reports, %d layer%s at a time\n",
                   r->solve_s, r->solve_cpu_s, r->lanes, al_s(r->lanes));
    if (m->cfg.qk_norm != QKN_NONE)
        out_printf(out, "%s; the errors below are against the source with its norm\n",
                   tmla_qkn_words((tmla_qkn_mode)ro->qk_norm));
}

/* Perplexity before and after on u's text (a failure only warned: the conversion stands);
 * AL_INTERRUPTED stops the command. */
static int mla_ppl(Session *s, Model *m, TmlaResult *r, const TmlaStatsUse *u, Out *out) {
    FwdPpl before, after;
    Forward *f = NULL;
    const char *route = "";
    int rc = lm_forward(s, m, &f);
    if (rc == AL_OK) rc = ppl_before_after(r, mm_compute_parse(s->compute), f, u, &before, &after, &route);
    if (rc == AL_INTERRUPTED) return rc;
    if (rc == AL_OK)
        out_printf(out, "%sperplexity on %zu token%s, %s, windows of %zu: %.6g before, %.6g after (%+.2f%%; log "
                   "%.5f -> %.5f), after = %s\n", qkn_tag(m, r), after.tokens, al_s(after.tokens), u->ppl_on, u->seqlen, exp(before.nll), exp(after.nll),
                   100.0 * (exp(after.nll - before.nll) - 1), before.nll, after.nll, route);
    else                      /* the conversion stands; say why there is no perplexity */
        out_eprintf(out, "warning: perplexity not measured: %s\n", al_errmsg());
    return AL_OK;
}

/* A q/k-norm source: the errors of its plain layer alone (the norm's approximation, before TransMLA). */
static void note_qkn_alone(Out *out, const Model *m, const TmlaResult *r) {
    if (m->cfg.qk_norm == QKN_NONE) return;
    char buf[1024];
    size_t n = 0;
    for (int l = r->opts.layer_lo; l <= r->opts.layer_hi && n < sizeof buf; l++)
        if (r->layers[l])
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%d: %.4g / %.4g", n ? ", " : "", l, r->rep[l].qkn_score_err,
                                  r->rep[l].qkn_out_err);
    out_printf(out, "%sthe plain layer alone (the norm's approximation, before TransMLA) against the source, score_err / "
               "out_err per layer: %s\n", qkn_tag(m, r), buf);
}

/* r's per-layer report (balance on and `other`; the first layer with a NaN noted, then the RoPE
 * loss) as the result. */
static int mla_report_table(Out *out, const Args *a, const Model *m, const TmlaResult *r) {
    const TmlaOpts *ro = &r->opts;
    Table *t = table_new(9, "layer", "alpha", "rope_energy", "joint_energy", "score_err", "out_err", "joint_energy_other",
                         "score_err_other", "out_err_other");
    if (!t) return AL_ERR;
    int nan_layer = -1;
    for (int l = ro->layer_lo; l <= ro->layer_hi; l++) {
        if (!r->layers[l]) continue;            /* a hybrid's linear-attention layer */
        const TmlaLayerReport *p = &r->rep[l];
        if (table_row(t)) { table_free(t); return AL_ERR; }
        table_int(t, l);
        double v[] = {p->alpha, p->rope_energy, p->joint_energy, p->score_err, p->out_err, p->joint_energy_alt,
                      p->score_err_alt, p->out_err_alt};
        for (size_t i = 0; i < sizeof v / sizeof *v; i++)
            if (isfinite(v[i]) || i == 3 || i == 4) table_num(t, v[i]);     /* score_err, out_err: nan shows */
            else table_null(t);
        if (nan_layer < 0 && (isnan(p->score_err) || isnan(p->out_err))) nan_layer = l;
    }
    if (nan_layer >= 0) out_note_nan(out, "layer %d", nan_layer);
    note_qkn_alone(out, m, r);
    note_rope_loss(m, r, out);
    return out_table_to(out, args_str(a, "to"), t);
}

/* tmla_convert in the session's compute mode: compute bf16 on a BF16 source holds the rewritten matrices in BF16 and
 * runs the layers as the BF16 export reads them back (tmla_hold.h, mla_run_layers) -- where a DeepSeek-V3 export can
 * hold the conversion (its family here, its layers in tmla_convert); else float32, as `format attnlab` writes them. */
static int convert_held(Session *s, Model *m, TmlaOpts *o, TmlaResult **r) {
    o->hold_bf16 = tmla_hold_bf16_default(m, mm_compute_parse(s->compute)) &&
                   mla_export_norm_eps(m, true, tmla_qkn_is_plain(o->qk_norm)) > 0;
    int rc = tmla_convert(m, o, r);
    if (rc == AL_OK && (rc = mla_run_layers(*r))) { tmla_result_free(*r); *r = NULL; }
    return rc;
}

/* The conversion (strategy st, or TransMLA's own: convert_held) and what check needs to draw its report's inputs again
 * (r->check_in): the digest of calibration o->calib taken as the conversion forms each layer's moments (not formed a
 * second time for it), or of u's arrays. */
static int convert_kept(Session *s, Model *m, TmlaOpts *o, const MlastratOpts *st, bool strat, const TmlaStatsUse *u,
                        TmlaResult **r) {
    WsCheckDigest dg;
    if (o->calib) {
        ws_check_digest_begin(&dg, o->calib);
        o->moments_seen = ws_check_digest_layer;
        o->moments_ctx = &dg;
    }
    int rc = strat ? mlastrat_convert(m, o, st, r) : convert_held(s, m, o, r);
    if (rc) return rc;
    const TmlaOpts *ro = &(*r)->opts;
    if (o->calib ? ws_check_keep_calib(m, ro->seed, false, ro->eval_tokens, &dg, &(*r)->check_in)
                 : ws_check_keep(s, m, ro->seed, false, ro->eval_tokens, u->act ? u->sigma : NULL, u->act ? u->mu : NULL,
                                 &(*r)->check_in)) {
        tmla_result_free(*r);
        *r = NULL;
        return AL_ERR;
    }
    return AL_OK;
}

static void qbias_line(Out *out, const TmlaResult *r);

/* qk-norm keep made in compute bf16 on a source with BF16 weights (said after the conversion). */
static bool ro_keep_bf16(Session *s, const TmlaResult *r) {
    return r->opts.qk_norm == TMLA_QKN_KEEP && tmla_hold_bf16_default(r->src, mm_compute_parse(s->compute));
}

int cmd_convert_mla(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    TmlaOpts o;
    MlastratOpts st;
    bool strat_given;
    if (mla_args_opts(m, a, out, &o) || ws_mlastrat_opts(a, &st, &strat_given)) return AL_ERR;
    bool strat = st.kind != MLASTRAT_TRANSMLA || st.alloc != MLASTRAT_ALLOC_UNIFORM;   /* else TransMLA's own */
    if (strat) o.compare_balance = false;
    TmlaStatsUse u;       /* TransMLA's own forms each layer's moments in its turn (u.cst) where all are large */
    int src = strat ? ws_tmla_stats(s, m, a, false, &u, out) : ws_tmla_stats_lazy(s, m, a, false, &u, out);
    if (src) return src;
    o.sigma = u.act ? (const double *const *)u.sigma : NULL;
    o.mu = u.act ? (const double *const *)u.mu : NULL;
    o.calib = u.act ? u.cst : NULL;
    TmlaResult *r = NULL;
    int rc = convert_kept(s, m, &o, &st, strat, &u, &r);
    if (rc) { ws_tmla_stats_release(&u); return rc; }
    if (xform_add(s, &cmd_convert_xform, m, r)) { ws_tmla_stats_release(&u); return AL_ERR; }
    mla_describe(out, m, a, r, &u);
    if (strat) ws_mlastrat_line(out, m, &st, r);
    int prc = u.ids && args_enum(a, "ppl") != 1 ? mla_ppl(s, m, r, &u, out) : AL_OK;   /* its other errors: said */
    qbias_line(out, r);
    if (ro_keep_bf16(s, r))
        out_printf(out, "note: qk-norm keep in compute bf16: the session runs these layers with float32 products; `load` of "
                   "their `format attnlab` export runs the source's BF16 q_proj / o_proj with BF16 products and rebuilds K / "
                   "V in the forward pass's own kernels, so its perplexity differs (1e-4 relative on the synthetic qwen3; "
                   "1e-6 in compute f32)\n");
    ws_tmla_stats_release(&u);
    if (prc == AL_INTERRUPTED) return AL_INTERRUPTED;
    const TmlaOpts *ro = &r->opts;
    char lab[96];
    out_printf(out, "%srelative Frobenius errors on %zu random Gaussian tokens, seed %llu (%s); %s %s, `other` = "
               "%s\n", qkn_tag(m, r), ro->eval_tokens, (unsigned long long)ro->seed,
               r->activation_stats ? "with the activations' mean and covariance" : "unit variance",
               strat ? "strategy" : "balance", strat ? mlastrat_label(&st, lab, sizeof lab) : ro->balance ? "on" : "off",
               strat ? "none (empty)" : ro->balance ? "balance off" : "balance on");
    return mla_report_table(out, a, m, r);
}

/* ================================================================ convert mla-table */

const char CMD_CONVERT_MLA_TABLE_HELP[] =
    "TransMLA Figure 4b as a table: every layer converted four ways per kv-rank -- joint PCA of\n"
    "NoPE keys and values from the weights (W) or from the calibration activations (WX), each\n"
    "without and with KV balancing (+BKV) -- and the perplexity of each, on the calibration text's\n"
    "validation split (held out; `split train`: the calibrated windows, in-sample; `eval FILE`:\n"
    "another text; up to `ppl-tokens` tokens, windows of seqlen), with the converted layers swapped into the\n"
    "model's forward pass in memory (core/methods/tmla_study.h; the same numbers as on an export: each\n"
    "row is `convert mla kv-rank R [stats weights] [balance off]`'s conversion run as `ppl` runs it). The\n"
    "RoRoPE rotation follows the PCA statistics too (W or WX); rope_energy is the key energy the\n"
    "RoPE dims keep, measured on the calibration activations for both (WX keeps at least as much);\n"
    "joint_energy is what the rank-R basis keeps of its own (balanced) PCA input; alpha is the\n"
    "balancing factor. These three are means over the converted layers (columns mean_alpha,\n"
    "mean_rope_energy, mean_joint_energy; `convert mla` gives them per layer). Needs activation\n"
    "statistics: `calib FILE`, `ids FILE`, or the session's `calibrate`.\n"
    "Examples:\n"
    "  convert mla-table kv-ranks 24,40 calib story.txt seqlen 64\n"
    "  convert mla-table kv-ranks 128,256,512 rope-dim 64 to fig4b.csv\n"
    "`strategies all|S,S,...`: the published one-shot strategies side by side instead, one block of\n"
    "rows per kv-rank (rows: transmla, mha2mla-high|low|uniform|2norm[-split][-rN], care, any with -alloc\n"
    "for CARE's rank allocation; `all`: those eight), each with its KV values per token (mean R + D),\n"
    "its rank range over the layers, whether it removes RoPE from the source's dims (then not exact\n"
    "at full rank), the mean score and output errors over the layers (relative Frobenius, 64\n"
    "Gaussian tokens with each layer's activation statistics, as `check`) and the held-out\n"
    "perplexity (`help convert mla` says what each strategy does; `plot mla-table` draws it):\n"
    "  convert mla-table kv-ranks 16,32 strategies all calib story.txt seqlen 64";

const Param cmd_convert_mla_table_kw[] = {
    { .name = "kv-ranks", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "R,R,...",
      .help = "joint ranks to compare (numbers, or full), comma-separated (required)" },
    { .name = "rope-dim", .type = ARG_INT, .min = 2, .max = 1 << 20, .comp = COMP_NONE, .metavar = "D",
      .help = "RoPE dims kept = head dim / freqfold (default: head dim)" },
    { .name = "freqfold", .type = ARG_INT, .min = 1, .max = 1 << 20, .comp = COMP_NONE, .metavar = "M",
      .help = "adjacent RoPE frequencies per PCA (default: head dim / rope-dim, else 1 as in the figures)" },
    PARAM_LAYERS("layers to convert"),
    { .name = "strategies", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "all|S,S,...",
      .help = "compare the one-shot strategies (transmla, mha2mla-..., care, -alloc) instead of Fig. 4b" },
    { .name = "qk-norm", .type = ARG_ENUM, .choices = QKN_MODES, .comp = COMP_CHOICES,
      .help = "with strategies, a source with Q/K RMSNorm: every row converts it so (as convert mla's qk-norm)" },
    PARAM_TMLA_STATS,
    PARAM_TO,
    {0}
};

/* Parses a comma-separated list of ranks (numbers or `full`) into R[cap]. */
static int parse_ranks(const char *list, int *R, size_t cap, size_t *n) {
    return ws_mlastrat_ranks("convert mla-table", list, R, cap, n);
}

int cmd_convert_mla_table(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    int ranks[32];
    size_t nr;
    long lo, hi;
    if (parse_ranks(args_str(a, "kv-ranks"), ranks, 32, &nr)) return AL_ERR;
    if (args_given(a, "qk-norm") && !args_given(a, "strategies"))
        return al_err("convert mla-table: qk-norm goes with strategies (the Fig. 4b rows take no q/k norm): add "
                      "strategies transmla,care or all");
    if (args_given(a, "strategies")) {               /* the strategies side by side (ws_mlastrat.h) */
        MlastratTable *st = NULL;
        int rc = ws_mlastrat_table(s, m, a, ranks, nr, false, out, &st);
        if (rc) return rc;
        Table *tb = ws_mlastrat_rows(m, st);
        mlastrat_table_free(st);
        return tb ? out_table_to(out, args_str(a, "to"), tb) : AL_ERR;
    }
    if (args_range(a, "layers", m->cfg.n_layers, &lo, &hi)) return AL_ERR;
    TmlaOpts o = tmla_opts_default();        /* the options as convert mla would resolve them */
    o.rope_dim = args_given(a, "rope-dim") ? (int)args_int(a, "rope-dim") : 0;
    o.freqfold = args_given(a, "freqfold") ? (int)args_int(a, "freqfold") : 0;
    if (tmla_resolve_opts(m, &o)) return AL_ERR;
    TmlaStatsUse u;
    int src = ws_tmla_stats(s, m, a, true, &u, out);
    if (src) return src;
    if (!u.act) {
        ws_tmla_stats_release(&u);
        return al_err("convert mla-table compares weight- and activation-based PCAs: it needs activation statistics "
                      "(calib FILE, ids FILE, or calibrate FILE first), not stats weights");
    }
    Forward *f = NULL;
    TstudyKvTable *kt = NULL;
    TstudyKvTableOpts ko = {.kv_ranks = ranks, .n_ranks = nr, .rope_dim = o.rope_dim, .freqfold = o.freqfold,
                         .layer_lo = (int)lo, .layer_hi = (int)hi, .sigma = (const double *const *)u.sigma,
                         .mu = (const double *const *)u.mu, .ids = u.ids, .n_ids = u.ppl_tokens, .seqlen = u.seqlen,
                         .norm_eps = mla_export_norm_eps(m, lo == 0 && (int)hi == m->cfg.n_layers - 1, false),
                         .run_layers = mla_run_for};        /* each row run as `ppl` runs convert mla's */
    int rc = lm_forward(s, m, &f);
    if (rc == AL_OK) rc = tstudy_kv_table(f, &ko, &kt);
    if (rc) { ws_tmla_stats_release(&u); return rc; }
    const ModelConfig *c = &m->cfg;
    int nJ = (c->n_kv_heads * cfg_d_qk(c) - kt->rope_dim) + c->n_kv_heads * c->v_dim;
    out_printf(out, "%s layers %ld-%ld, RoPE dims %d (freqfold %d), PCA activations: %s; alpha, rope_energy and "
               "joint_energy are means over these %ld layer%s\n", m->name, lo, hi, kt->rope_dim, kt->freqfold, u.source,
               hi - lo + 1, al_s(hi - lo + 1));
    out_printf(out, "perplexity on %zu token%s, %s, windows of %zu: original %.6g (log %.5f)\n", kt->tokens, al_s(kt->tokens), u.ppl_on,
               u.seqlen, exp(kt->base_nll), kt->base_nll);
    ws_tmla_stats_release(&u);
    Table *tb = table_new(8, "kv_rank", "pca", "balance", "mean_alpha", "mean_rope_energy", "mean_joint_energy", "nll",
                          "ppl");
    for (size_t i = 0; tb && i < kt->n; i++) {
        const TstudyKvRow *w = &kt->rows[i];
        if (table_row(tb)) { table_free(tb); tb = NULL; break; }
        table_int(tb, w->kv_rank == TMLA_FULL ? nJ : w->kv_rank);
        table_str(tb, w->act ? "WX" : "W");
        table_str(tb, w->balance ? "on" : "off");
        table_num(tb, w->alpha);
        table_num(tb, w->rope_energy);
        table_num(tb, w->joint_energy);
        table_num(tb, w->nll);
        table_num(tb, exp(w->nll));
    }
    tstudy_kv_table_free(kt);
    return tb ? out_table_to(out, args_str(a, "to"), tb) : AL_ERR;
}

/* ================================================================ the transformation */

/* The inputs x's report drew (seed, tokens, the digest of its statistics) and, when the session
 * still has them (the calibration of the same digest), the statistics (ci_free). *why: why not. */
static int conv_inputs(Session *s, const Xform *x, CheckInputs *ci, const char **why) {
    const TmlaResult *r = x->data;
    *why = NULL;
    if (ci_copy(&r->check_in, ci)) return AL_ERR;
    return ws_check_take_for_export(s, x->src, true, 0, -1, ci, why);   /* formed only where they fit CI_MAX_BYTES */
}

static const char *export_attn_dtype(const char *dir, char *buf, size_t cap);

/* The export's line naming the dtype of the attention tensors it wrote (the manifest's): the one
 * asked, else the source's, or BF16 for a quantized source (its encoding is not written again). */
static void export_dtype_line(Out *out, const char *dir, bool asked, const Model *src, bool attnlab) {
    char dt[16];
    dt_type s = src->cfg.dtype;
    export_attn_dtype(dir, dt, sizeof dt);
    if (attnlab && !asked && src->fp4 == DT_FP4_NONE && (s == DT_F16 || s == DT_BF16))   /* it said "the source's dtype" */
        out_printf(out, "attention tensors written in %s (format attnlab's default, which holds the session's float32 "
                   "layers exactly; the source's is %s: `dtype bf16` asks for BF16)\n", dt, model_dtype_name(src));
    else if (asked || (src->fp4 == DT_FP4_NONE && (s == DT_F32 || s == DT_F16 || s == DT_BF16)))
        out_printf(out, "attention tensors written in %s (%s)\n", dt, asked ? "the dtype asked" : "the source's dtype");
    else
        out_printf(out, "attention tensors written in %s: the source's %s attention is not quantized again (`dtype "
                   "f32|f16|bf16` chooses)\n", dt, model_dtype_name(src));
}

static const char *export_attn_dtype(const char *dir, char *buf, size_t cap);

/* The export's dtype line, and where the conversion holds its rewritten matrices in BF16 (compute bf16, tmla_hold.h)
 * but the export writes another dtype, what that export holds: those BF16 values widened. */
/* The export's line on a static FP8 KV cache it dropped (its manifest's kv_scales_dropped; mla_quant.h). */
static void kv_scales_line(Out *out, const char *dir, const TmlaResult *r) {
    cJSON *man = mla_manifest(dir), *kv = cJSON_GetObjectItemCaseSensitive(man, "kv_scales_dropped");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(kv, "tensors"), *lr = cJSON_GetObjectItemCaseSensitive(kv, "layers");
    char w[96] = "", l[80];
    if (cJSON_GetArraySize(lr) == 2)
        snprintf(w, sizeof w, " of %s", layersel_words(&r->src->cfg, cJSON_GetArrayItem(lr, 0)->valueint,
                                                      cJSON_GetArrayItem(lr, 1)->valueint, l, sizeof l));
    if (cJSON_IsNumber(n))
        out_printf(out, "dropped %d static KV cache scales (k_scale / v_scale)%s%s: an MLA layer caches its latent (vLLM "
                   "and SGLang quantize it with k_scale alone), which the source's GQA key / value scales were not "
                   "calibrated on; vLLM and SGLang take 1.0 (their default with none): recalibrate them for an FP8 KV "
                   "cache\n", n->valueint, w, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(kv, "scheme_dropped"))
                   ? " and the static scheme in quantization_config" : "");
    if (!man) al_err_clear();
    cJSON_Delete(man);
}

/* A q_proj bias without a query latent (Qwen2's q/k/v biases, no q-rank): DeepSeek-V3 builds q_proj without one
 * (transformers' DeepseekV3Attention: attention_bias reaches q_a_proj, kv_a_proj_with_mqa and o_proj only), so the
 * engines drop the bias the session and attnlab's reading of the export keep: said, with the way to carry it. */
static void qbias_line(Out *out, const TmlaResult *r) {
    bool qb = false;
    for (int l = 0; l < r->n_layers; l++) qb |= r->layers[l] && !r->layers[l]->q_rank && r->layers[l]->b_Q;
    if (!qb || mla_exportable(r)) { al_err_clear(); return; }
    out_printf(out, "note: q_proj bias: the session's perplexity, `ppl` and `generate` keep the source's query bias, as "
               "attnlab reads the export's q_proj.bias; a DeepSeek-V3 layer without a query latent has none (transformers' "
               "DeepseekV3Attention: q_proj bias=False; attention_bias reaches q_a_proj, kv_a_proj_with_mqa, o_proj), so "
               "transformers, vLLM and SGLang drop it, and `check` gives their number: convert with q-rank to carry it in "
               "q_a_proj.bias\n");
}

static void held_dtype_lines(Out *out, const char *dir, const Args *a, const TmlaResult *r) {
    char dt[16];
    kv_scales_line(out, dir, r);
    export_dtype_line(out, dir, args_given(a, "dtype"), r->src, args_given(a, "format"));
    if (tmla_held_bf16(r->layers, r->n_layers) && strcmp(export_attn_dtype(dir, dt, sizeof dt), "BF16"))
        out_printf(out, "the conversion was made in compute bf16, which holds its rewritten matrices (q_proj / q_b_proj, "
                   "kv_b_proj) in BF16 as a BF16 export stores them: written as those BF16 values widened to %s (convert "
                   "again in compute f32 for float32 matrices)\n", dt);
}

/* `export DIR` after `convert mla`: a DeepSeek-V3 checkpoint (dtype, shard-mb). */
static int mla_xf_export(Session *s, const Xform *x, const Args *a, Out *out) {
    (void)s;
    const TmlaResult *r = x->data;
    const char *dir = args_str(a, "dir");
    size_t shard_mb = args_given(a, "shard-mb") ? (size_t)args_int(a, "shard-mb") : 0;
    MlaExportOpts eo = {.dtype = DT_INVALID, .shard_bytes = shard_mb << 20, .force = args_flag(a, "force")};
    const char *fmt = args_given(a, "format") ? args_str(a, "format") : NULL;
    if (fmt && strcmp(fmt, "attnlab"))
        return al_err("export: format %s is not taken by a TransMLA export (DeepSeek-V3's layout, or `format attnlab`: "
                      "attnlab's own)", fmt);
    eo.attnlab = fmt != NULL;
    if (eo.attnlab) eo.norm_eps = x->kind->norm_eps ? x->kind->norm_eps(x) : 0;
    if (xform_export_dtype(a, DT_INVALID, &eo.dtype)) return AL_ERR;
    CheckInputs ci;
    const char *why = NULL;
    if (conv_inputs(s, x, &ci, &why)) return AL_ERR;
    eo.check = &ci;
    int rc = mla_export(r, dir, &eo);
    bool fits = ci_fits(&ci);
    ci_free(&ci);
    if (rc) return AL_ERR;
    if (eo.attnlab)
        out_printf(out, "exported %s in attnlab's own layout (model_type attnlab_mla: no engine runs it; `load %s` does) "
                   "to %s: kv_lora_rank %d, qk_rope_head_dim %d, qk_nope_head_dim %d, v_head_dim %d\n", r->src->name,
                   dir, dir, r->kv_rank, r->rope_dim, r->qk_nope, r->v_dim);
    else {
        out_printf(out, "exported %s as DeepSeek-V3 MLA to %s: kv_lora_rank %d, qk_rope_head_dim %d, qk_nope_head_dim %d, "
                   "v_head_dim %d, q_lora_rank %s%.0d\n", r->src->name, dir, r->kv_rank, r->rope_dim, r->qk_nope, r->v_dim,
                   r->q_rank ? "" : "null", r->q_rank);
        double eps = engine_common_eps();
        if (fabs(eps - r->src->cfg.norm_eps) > 1e-15)   /* measured by check (two forward passes: not here) */
            out_printf(out, "rms_norm_eps %g (the source's: %g), the latent eps of every engine, so transformers, vLLM and "
                       "SGLang compute the same model; the other RMSNorms use it too (`check %s` measures what that moves)\n",
                       eps, r->src->cfg.norm_eps, dir);
    }
    held_dtype_lines(out, dir, a, r);
    if (!eo.attnlab) qbias_line(out, r);
    out_printf(out, "manifest: %s/%s; `check %s` compares it with the source\n", dir, MLA_MANIFEST, dir);
    ws_check_recorded_line(out, &ci, fits, why);
    out_string(out, dir);
    out->written = true;
    return AL_OK;
}

/* The dtype the export in dir wrote its attention in (its manifest's attention_dtype: "F32",
 * "BF16", ...) into buf; "float32" when the manifest does not say. */
static const char *export_attn_dtype(const char *dir, char *buf, size_t cap) {
    cJSON *man = dir ? mla_manifest(dir) : NULL;
    const cJSON *d = man ? cJSON_GetObjectItemCaseSensitive(man, "attention_dtype") : NULL;
    snprintf(buf, cap, "%s", cJSON_IsString(d) && strcmp(d->valuestring, "F32") ? d->valuestring : "float32");
    if (!man) al_err_clear();
    cJSON_Delete(man);
    return buf;
}

/* The line comparing the check's output errors with the conversion's report on the same inputs
 * (rep: per layer, NaN where unknown): they differ by the export's rounding (its attention dtype)
 * only. */
static void note_report(Out *out, const MlaCheck *c, const double *rep) {
    double worst = 0;
    int n = 0;
    for (int l = 0; l < c->n_layers; l++)
        if (isfinite(rep[l]) && isfinite(c->out_err[l])) { worst = fmax(worst, fabs(c->out_err[l] - rep[l])); n++; }
    char dt[16];
    if (!n) return;
    if (c->in_session)
        out_printf(out, "the conversion's report on the same inputs: out_err within %.2g of it in all %d layers (the "
                   "same layers)\n", worst, n);
    else
        out_printf(out, "the conversion's report on the same inputs: out_err within %.2g of it in all %d layers (the "
                   "export's rounding: %s%s)\n", worst, n, c->stock_bf16 ? "BF16" : export_attn_dtype(c->export_path, dt, sizeof dt),
                   c->own_layout ? "" : ", latent norms");
}

/* The conversion's reported output error per layer: of r, or of the manifest's "layers" (NULL when
 * it has none). Caller frees. */
static double *report_errs(const TmlaResult *r, const cJSON *man, int n) {
    double *e = al_malloc3((size_t)n, 1, sizeof(double), "reported errors");
    const cJSON *ls = man ? cJSON_GetObjectItemCaseSensitive(man, "layers") : NULL;
    for (int l = 0; e && l < n; l++) {
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ls, l), "output_rel_err");
        e[l] = r ? (r->layers[l] ? r->rep[l].out_err : NAN) : cJSON_IsNumber(it) ? it->valuedouble : NAN;
    }
    return e;
}

/* The line of a check built in memory as the DeepSeek-V3 export reads back: which export's numbers
 * (float32, or BF16 where the conversion is held in BF16) and, when `export DIR` with no dtype writes
 * another one (dflt: the source's dtype, BF16 for a quantized source), that it differs and the dtype
 * that writes the one measured here. */
static void say_stock_export(Out *out, const MlaCheck *c, dt_type dflt) {
    dt_type p = c->stock_bf16 ? DT_BF16 : DT_F32;
    out_printf(out, "evaluated as its %s DeepSeek-V3 export reads back, built in memory (no export written; "
               "non-attention tensors: the source's, which the export copies byte for byte)", p == DT_BF16 ? "BF16" : "float32");
    if (dflt != p)
        out_printf(out, "; `export DIR dtype %s` writes that export -- the default `export DIR` writes %s attention, the "
                   "source's dtype, and `check DIR` of it differs by that rounding", p == DT_BF16 ? "bf16" : "f32",
                   dt_name(dflt));
    out_printf(out, "\n");
}

/* Prints an MlaCheck as text (`inputs`: what the layers were evaluated on; t: the perplexity's
 * text) and a layer table; dflt: the dtype `export DIR` writes the attention in by default. */
static int report_mla_check(const MlaCheck *c, const char *what, const char *inputs, const CheckText *t,
                            const double *rep, dt_type dflt, const Args *a, Out *out) {
    out_printf(out, "%s against %s: %d layer%s; KV cache %zu -> %zu value%s per token per layer\n",
               what ? what : c->export_path, c->source_path, c->n_layers, al_s(c->n_layers), c->kv_source, c->kv_export, al_s(c->kv_export));
    if (c->in_session)
        out_printf(out, "evaluated as converted in the session (no export written); non-attention layers: the source's\n");
    else if (c->stock_session)
        say_stock_export(out, c, dflt);
    else if (c->copied_diff)
        out_printf(out, "non-attention tensors: %zu identical, %zu DIFFER (first: %s)\n", c->copied_same, c->copied_diff,
                   c->first_diff);
    else
        out_printf(out, "non-attention tensors: all %zu identical (name, dtype, shape, bytes)\n", c->copied_same);
    if (c->own_layout)
        out_printf(out, "evaluated as attnlab reads it (its own layout: no stock engine runs it, so no engine columns)\n");
    else if (!c->in_session) {
        out_printf(out, "evaluated as each stock DeepSeek-V3 engine runs it (interleaved RoPE, softmax scale "
                   "(nope + rope)^-1/2), one column each:");
        for (int i = 0; i < ENG_N; i++)
            out_printf(out, "%s %s latent eps %g%s", i ? "," : "", engine_row(i)->name,
                       engine_latent_eps(engine_row(i), c->latent_eps), engine_row(i)->attn_bias ? "" : ", no biases");
        out_printf(out, "; out_err: the largest of them; out_err_attnlab: as attnlab reads it\n");
    }
    out_printf(out, "relative Frobenius errors per layer on %s\n", inputs);
    if (rep) note_report(out, c, rep);
    ws_check_ppl_line(out, t, c->nll_tokens, c->nll_source, c->nll_export,
                      c->in_session ? "converted, in the session" : c->own_layout ? "the export, as attnlab reads it"
                                                                                    : "the export, as stock engines run it");
    if (c->notes[0]) out_printf(out, "%s", c->notes);
    Table *tb = c->own_layout ? table_new(3, "layer", "score_err", "out_err")
                              : table_new(4 + ENG_N, "layer", "score_err", "out_err", engine_row(ENG_HF)->column,
                                          engine_row(ENG_VLLM)->column, engine_row(ENG_SGLANG)->column, "out_err_attnlab");
    int nan_layer = -1;
    for (int l = 0; tb && l < c->n_layers; l++) {
        if (table_row(tb)) { table_free(tb); tb = NULL; break; }
        table_int(tb, l);
        table_num(tb, c->score_err[l]);
        table_num(tb, c->out_err[l]);
        for (int i = 0; !c->own_layout && i < ENG_N; i++) table_num(tb, c->engine_out_err[i][l]);
        if (!c->own_layout) table_num(tb, c->own_out_err[l]);
        if (nan_layer < 0 && (isnan(c->score_err[l]) || isnan(c->out_err[l]))) nan_layer = l;
    }
    if (nan_layer >= 0) out_note_nan(out, "layer %d", nan_layer);
    int rc = tb ? out_table_to(out, args_str(a, "to"), tb) : AL_ERR;
    if (rc == AL_OK && nan_layer >= 0) {
        out_emit_result(out);
        return al_err("check failed: layer %d's errors are NaN (NaN/Inf in the source or the export)", nan_layer);
    }
    return rc;
}

/* Checks dir (NULL: r in the session, why: the export's refusal) against src on ci's inputs
 * (completed by ws_check_inputs) and the check's text, and reports it as `what`. */
static int run_mla_check(Session *s, const char *dir, const TmlaResult *r, const char *why, Model *src, CheckInputs *ci,
                         const double *rep, const char *what, const Args *a, Out *out) {
    char desc[768] = "";
    CheckText t;
    MlaCheck *c = NULL;
    int rc = ws_check_inputs(s, src, a, true, 0, -1, ci, desc, sizeof desc);
    if (rc == AL_OK) rc = ws_check_text(s, src, a, &t);
    if (rc) return rc;
    MlaCheckIn in = {.tokens = ci->tokens, .seed = ci->seed, .sigma = (const double *const *)ci->sigma,
                     .mu = (const double *const *)ci->mu, .ids = t.ids, .n = t.n, .seqlen = t.seqlen,
                     .compute = mm_compute_parse(s->compute)};
    rc = dir ? mla_check_in(dir, src, &in, &c) : why ? mla_check_session(r, why, &in, &c) : mla_check_stock(r, &in, &c);
    bool own = !args_given(a, "tokens") && !args_given(a, "seed") && (!ci->stats || ci->sigma);
    dt_type sd = src->cfg.dtype, dflt = sd == DT_F32 || sd == DT_F16 || sd == DT_BF16 ? sd : DT_BF16;   /* mla_export's */
    if (rc == AL_OK) rc = report_mla_check(c, what, desc, &t, own ? rep : NULL, dflt, a, out);
    mla_check_free(c);
    ws_check_text_free(&t);
    return rc;
}

/* `check` with no folder after `convert mla`: the conversion checked against the model it came from
 * as its float32 DeepSeek-V3 export would read back, built in memory (nothing written; it used to be
 * exported to a scratch folder in /tmp and read back); a conversion the export refuses is checked as
 * the session holds it. The inputs are the conversion's own unless `tokens` / `seed` say otherwise:
 * its tokens and seed, and its calibration's statistics when it used them (while the session still
 * has that calibration) -- so the errors reproduce its report. */
static int mla_xf_check(Session *s, const Xform *x, const Args *a, Out *out) {
    const TmlaResult *r = x->data;
    CheckInputs ci;
    const char *unused;
    if (conv_inputs(s, x, &ci, &unused)) return AL_ERR;
    char why[512] = "";
    bool stock = mla_exportable(r) == AL_OK;
    if (!stock) {                                 /* no DeepSeek-V3 form: the conversion as held */
        snprintf(why, sizeof why, "%s", al_errmsg());
        al_err_clear();
    }
    double *rep = report_errs(r, NULL, r->n_layers);
    int rc = run_mla_check(s, NULL, r, stock ? NULL : why, x->src, &ci, rep,
                           stock ? "the session's conversion (its DeepSeek-V3 export, in memory)" : "the session's conversion",
                           a, out);
    free(rep);
    ci_free(&ci);
    return rc;
}

/* `check DIR` of a TransMLA export against its source (`source NAME`, else the manifest's path: the
 * session's model there, or opened for the check), on the inputs its manifest records. */
static int mla_xf_check_dir(Session *s, const char *dir, const Args *a, Out *out) {
    Model *src = NULL, *opened = NULL;
    cJSON *man = mla_manifest(dir);
    if (!man) return AL_ERR;
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(man, "source");
    if (ws_check_source(s, a, cJSON_IsString(sp) ? sp->valuestring : NULL, dir, MLA_MANIFEST, &src, &opened)) {
        cJSON_Delete(man);
        return AL_ERR;
    }
    CheckInputs ci;
    bool found;
    int rc = ci_read(dir, man, &ci, &found);
    double *rep = report_errs(NULL, man, src->cfg.n_layers);
    cJSON_Delete(man);
    if (rc == AL_OK && !found) {     /* an export of an older attnlab: the check's own defaults */
        ci = (CheckInputs){.seed = AL_SEED_MLA_CHECK, .tokens = 64, .n_layers = src->cfg.n_layers,
                           .hidden = src->cfg.hidden};
        out_printf(out, "note: %s/%s records no check inputs (an older export): unit-variance tokens, seed %llu\n", dir,
                   MLA_MANIFEST, (unsigned long long)AL_SEED_MLA_CHECK);
    }
    if (rc == AL_OK) rc = run_mla_check(s, dir, NULL, NULL, src, &ci, found ? rep : NULL, NULL, a, out);
    free(rep);
    ci_free(&ci);
    model_free(opened);
    return rc;
}

static bool mla_xf_kv_row(const Xform *x, const XformKvCtx *c, XformKvRow *row) {
    const TmlaResult *mr = x->data;
    size_t conv = 0;
    for (int l = 0; l < mr->n_layers; l++) conv += mr->layers[l] != NULL;
    snprintf(row->scheme, sizeof row->scheme, "convert mla (MLA R %d + D %d; %zu byte%s per token in %zu layer%s; x%.4g)",
             mr->kv_rank, mr->rope_dim, xform_kv_bytes(c, mr->kv_after, conv), al_s(xform_kv_bytes(c, mr->kv_after, conv)), c->layers, al_s(c->layers),
             c->before ? (double)mr->kv_after / (double)c->before : 1.0);
    row->values = mr->kv_after;
    row->params = conv ? mr->params_after / conv : 0;   /* params_after sums the converted layers: per layer */
    return true;
}

static void mla_xf_describe(const Xform *x, char *buf, size_t cap) {
    const TmlaResult *r = x->data;
    snprintf(buf, cap, "convert mla of %s: kv_lora_rank %d, RoPE dims %d%s%s", x->src->name, r->kv_rank, r->rope_dim,
             r->opts.strategy[0] ? ", strategy " : "", r->opts.strategy);
}

static void mla_xf_free(void *data) { tmla_result_free(data); }

/* `export FILE.gguf` after `convert mla`: the stock DeepSeek-V3 checkpoint in float32. */
static int mla_xf_engine_export(Session *s, const Xform *x, const char *dir) {
    (void)s;
    MlaExportOpts eo = { .dtype = DT_F32 };
    return mla_export(x->data, dir, &eo);
}

/* The converted MLA layer as the forward pass runs it (the result's own; NULL where the layer was
 * not converted): what `convert mla`'s own perplexity runs when only some layers are converted. */
/* The eps its export's norms run at (ppl and generate run the conversion as the export computes it). */
static double mla_xf_norm_eps(const Xform *x) {
    const TmlaResult *r = x->data;
    if (mla_exportable(r) != AL_OK) { al_err_clear(); return 0; }    /* no export: the source's eps stands */
    return mla_export_norm_eps(r->src, true, tmla_qkn_is_plain(r->opts.qk_norm));
}

/* What `ppl` / `generate` run when the session's mode is not the one that made the conversion (mla_run_for's rule). */
static const char *mla_xf_mode_note(Session *s, const Xform *x) {
    const TmlaResult *r = x->data;
    bool bf16 = mm_compute_parse(s->compute) == MM_BF16;
    if (!bf16 && r->run)
        return "made in compute bf16: its layers are its BF16 export's (the rewritten matrices rounded to BF16), run here "
               "with float32 products, as `load` of that export runs in compute f32";
    if (!bf16 || r->run || r->opts.hold_bf16 || !tmla_hold_bf16_default(r->src, MM_BF16)) return NULL;
    if (mla_exportable(r)) { al_err_clear(); return NULL; }
    return "made in compute f32: run as its BF16 export reads back (its float32 matrices rounded as that export writes "
           "them), as every conversion is in compute bf16 (`check DIR` of that export gives the same number)";
}

static int mla_xf_attn_layer(Session *s, const Xform *x, int layer, const AttnLayer **out, bool *owned) {
    TmlaResult *r = x->data;
    AttnLayer *const *run = NULL;
    *owned = false;
    *out = NULL;
    if (layer < 0 || layer >= r->n_layers) return AL_OK;
    if (mla_run_for(r, mm_compute_parse(s->compute), &run)) return AL_ERR;   /* one rule for ppl, check, convert */
    *out = run[layer];
    return AL_OK;
}

const XformKind cmd_convert_xform = {
    .name = "convert mla", .export_to = mla_xf_export, .check = mla_xf_check, .kv_row = mla_xf_kv_row,
    .describe = mla_xf_describe, .free = mla_xf_free, .check_dir = mla_xf_check_dir,
    .dir_manifest = MLA_MANIFEST,
    .export_label = "a TransMLA export",
    .engine_export = mla_xf_engine_export, .engine_form = "its stock DeepSeek-V3 export",
    .attn_layer = mla_xf_attn_layer, .norm_eps = mla_xf_norm_eps, .attn_what = "the converted MLA layers swapped in",
    .mode_note = mla_xf_mode_note,
};
