/* test_transmla_partial.c -- TransMLA on partial-rotary sources (GPT-NeoX rotary_pct, Phi-3
 * partial_rotary_factor: the first rd of each head's d dims turn, the rest never do). RoRoPE rotates
 * the rotary dims only and leaves the NoPE dims as they are (U's last columns: identity); the NoPE
 * dims join the latent with V. Checked: merge and RoRoPE exact (rotate_half, interleaved, biases),
 * the whole pipeline at full kv rank with every rotary dim kept (D = G rd) reproduces scores and
 * outputs to 1e-5, and so does D = rd for one KV head or identical KV heads; the output error
 * grows as kv rank shrinks; the GPT-NeoX and Phi-3 checkpoint layouts convert through the model
 * driver; a Mistral with partial_rotary_factor is exported as DeepSeek-V3 (qk_rope_head_dim = rd,
 * qk_nope_head_dim = d) and `check` finds it exact, also in the session without an export (one layer
 * converted); and `compare` on partial rotary: every row
 * computed, exact at the model's own budget (all but TransMLA with several KV heads), KQ-SVD's keys
 * turned on the rotary dims only. */
#include "test_transmla_util.h"
#include "analyses.h"
#include "budget_compare.h"
#include "mla_export.h"
#include "transmla.h"

#include <cblas.h>

/* A random GQA layer whose first rd dims per head carry RoPE. */
static AttnLayer *partial_gqa(int H, int G, int d, int rd, rope_layout lay, bool bias, bool identical_kv) {
    AttnLayer *L = tu_gqa(H, G, d, 24, lay, bias, identical_kv);
    free(L->inv_freq);
    L->rope_dim = rd;
    L->inv_freq = attn_rope_freqs(rd, 10000.0);
    return L;
}

/* The pipeline at full kv rank with D RoPE dims kept (M = 1); errors into se, oe. */
static void full_rank(const AttnLayer *gqa, int D, bool balance, double *se, double *oe, AttnLayer **keep) {
    TmlaOpts o = tmla_opts_default();
    o.freqfold = 1;
    o.rope_dim = D;
    o.balance = balance;
    o.compare_balance = false;
    AttnLayer *mla = NULL;
    TmlaLayerReport rep;
    *se = *oe = INFINITY;
    CHECK_OK(tmla_convert_layer(gqa, &o, NULL, &mla, &rep));
    if (mla) tu_errs(gqa, mla, se, oe);
    if (keep) *keep = mla;
    else attn_layer_free(mla);
}

/* Merge, RoRoPE: exact; U orthogonal with its NoPE columns the identity on the NoPE dims. */
static void test_steps(rope_layout lay, bool bias, const char *what) {
    int H = 6, G = 3, d = 8, rd = 4;
    AttnLayer *gqa = partial_gqa(H, G, d, rd, lay, bias, false);
    TmlaLayer *T = NULL;
    AttnLayer *L = NULL;
    double se, oe, *C_kv = NULL, *C_K = NULL;
    CHECK_OK(tmla_merge(gqa, &T));
    if (!T) { attn_layer_free(gqa); return; }
    CHECK(T->rd == rd && T->D == G * rd && T->n_J == G * (d - rd) + G * d, "%s: merged dims rd %d D %d n_J %d", what,
          T->rd, T->D, T->n_J);
    CHECK_OK(tmla_build(T, &L));
    tu_errs(gqa, L, &se, &oe);
    CHECK(se < 1e-5 && oe < 1e-5, "%s: merge is not exact: scores %.3g outputs %.3g", what, se, oe);
    CHECK(L && L->qk_nope == d && L->rope_dim == G * rd && L->kv_rank == G * (d - rd) + G * d, "%s: built dims", what);
    attn_layer_free(L);
    CHECK_OK(tmla_kv_cov_from_weights(gqa, NULL, &C_kv));
    C_K = tmla_key_cov(T, C_kv);
    CHECK_OK(tmla_rorope(T, 1, C_K));
    size_t n = (size_t)G * d, nr = (size_t)G * rd;
    double *P = calloc(n * n, sizeof(double)), err = 0, nope = 0;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, T->U, (int)n, T->U, (int)n, 0.0, P,
                (int)n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) err = fmax(err, fabs(P[i * n + j] - (i == j)));
    CHECK(err < 1e-12, "%s: U not orthogonal (%.3g)", what, err);
    for (size_t i = 0; i < n; i++)                /* the rotary columns never touch a NoPE dim, and back */
        for (size_t j = 0; j < n; j++) {
            bool rot_row = (i % (size_t)d) < (size_t)rd, rot_col = j < nr;
            if (rot_row != rot_col) nope = fmax(nope, fabs(T->U[i * n + j]));
        }
    CHECK(nope == 0, "%s: RoRoPE mixes rotary and NoPE dims (%.3g)", what, nope);
    double rot = 0;
    for (size_t g = 0; g < (size_t)G; g++)
        for (size_t e = 0; e < (size_t)rd; e++) rot += C_K[(g * d + e) * n + g * d + e];
    CHECK_NEAR(T->key_total, rot, 1e-9 * rot);
    CHECK_OK(tmla_build(T, &L));
    tu_errs(gqa, L, &se, &oe);
    CHECK(se < 1e-5 && oe < 1e-5, "%s: RoRoPE is not exact: scores %.3g outputs %.3g", what, se, oe);
    attn_layer_free(L);
    CHECK_ERR(tmla_remove_rope(T, (int)nr + 2, NULL), "KV heads x rotary dims");
    free(P); free(C_kv); free(C_K);
    tmla_layer_free(T);
    attn_layer_free(gqa);
}

/* The whole pipeline: exact at full kv rank keeping every rotary dim (and with D = rd where one
 * rotary head holds all of them); errors grow as kv rank shrinks. */
static void test_pipeline(void) {
    double se, oe;
    AttnLayer *gqa = partial_gqa(6, 3, 8, 4, ROPE_HALF, true, false), *mla = NULL;
    full_rank(gqa, 12, true, &se, &oe, &mla);
    CHECK(se < 1e-5 && oe < 1e-5, "D = G rd, full rank (balanced): scores %.3g outputs %.3g", se, oe);
    CHECK(mla && mla->qk_nope == 8 && mla->rope_dim == 12, "qk_nope %d rope %d", mla ? mla->qk_nope : -1,
          mla ? mla->rope_dim : -1);
    attn_layer_free(mla);
    full_rank(gqa, 12, false, &se, &oe, NULL);
    CHECK(se < 1e-5 && oe < 1e-5, "D = G rd, full rank (unbalanced): scores %.3g outputs %.3g", se, oe);
    full_rank(gqa, 4, true, &se, &oe, NULL);
    CHECK(oe > 1e-3, "D = rd of 3 distinct KV heads drops RoPE from real key energy (out %.3g)", oe);
    attn_layer_free(gqa);
    struct { int H, G; bool ident; rope_layout lay; const char *what; } exact[] = {
        {4, 1, false, ROPE_HALF, "one KV head"}, {6, 3, true, ROPE_HALF, "identical KV heads"},
        {4, 1, false, ROPE_INTERLEAVED, "one KV head, interleaved"}};
    for (size_t i = 0; i < 3; i++) {
        AttnLayer *g = partial_gqa(exact[i].H, exact[i].G, 8, 4, exact[i].lay, true, exact[i].ident);
        full_rank(g, 4, true, &se, &oe, NULL);
        CHECK(se < 1e-5 && oe < 1e-5, "%s, D = rd: scores %.3g outputs %.3g", exact[i].what, se, oe);
        attn_layer_free(g);
    }
    /* lower kv ranks: the output error does not shrink */
    gqa = partial_gqa(4, 2, 16, 4, ROPE_HALF, false, false);
    int ranks[] = {TMLA_FULL, 40, 32, 24, 16, 8, 4};
    double prev = 0;
    for (size_t i = 0; i < sizeof ranks / sizeof *ranks; i++) {
        TmlaOpts o = tmla_opts_default();
        o.freqfold = 1; o.rope_dim = 8; o.kv_rank = ranks[i]; o.compare_balance = false;
        AttnLayer *m = NULL;
        TmlaLayerReport rep;
        CHECK_OK(tmla_convert_layer(gqa, &o, NULL, &m, &rep));
        CHECK(rep.out_err >= prev - 1e-6, "kv-rank %d: output error %.4g below the larger rank's %.4g", ranks[i],
              rep.out_err, prev);
        if (ranks[i] == TMLA_FULL) CHECK(rep.out_err < 1e-5 && rep.joint_energy > 1 - 1e-12, "full: %.3g", rep.out_err);
        printf("partial kv-rank %3d: joint energy %.4f outputs %.4g\n", ranks[i], rep.joint_energy, rep.out_err);
        prev = rep.out_err;
        attn_layer_free(m);
    }
    attn_layer_free(gqa);
}

/* compare on a partial-rotary model at its own cache size: every method computes a row, and
 * every row but TransMLA's (one shared RoPE key for several KV heads) reproduces the layer. */
static void test_compare(Model *m, const char *what) {
    char why[1024];
    CHECK(analysis_available(m, AN_COMPARE, why, sizeof why), "%s: compare refused: %s", what, why);
    BudgetOpts o = budget_opts_default();
    o.budget = cfg_kv_values(&m->cfg);
    o.tokens = 32;
    o.fit_tokens = 128;
    BudgetResult *r = NULL;
    CHECK_OK(budget_compare(m, &o, &r));
    for (int i = 0; r && i < r->n_rows; i++) {
        const BudgetRow *w = &r->rows[i];
        CHECK(w->ok, "%s layer %d %s: no row: %s", what, w->layer, budget_method_name(w->method), w->setting);
        if (w->method != BUDGET_TRANSMLA)
            CHECK(w->out_err < 1e-4, "%s layer %d %s at the full budget: output error %.3g", what, w->layer,
                  budget_method_name(w->method), w->out_err);
        else
            CHECK(isfinite(w->out_err) && w->kv_values <= o.budget, "%s layer %d transmla: %.3g (%s)", what, w->layer,
                  w->out_err, w->setting);
    }
    budget_result_free(r);
}

/* GPT-NeoX and Phi-3 layouts: allowed, converted by the driver, exact at full rank with every
 * rotary dim kept, errors monotone in kv rank. */
static void test_families(const char *tmp) {
    struct { const char *type; int H, G, d, rd; const char *extra; } fam[] = {
        {"gpt_neox", 4, 4, 16, 4, "\"rotary_pct\": 0.25, \"layer_norm_eps\": 1e-5"},
        {"phi3", 4, 2, 16, 8, "\"partial_rotary_factor\": 0.5, \"rms_norm_eps\": 1e-5"}};
    char dir[200], why[1024];
    for (size_t f = 0; f < 2; f++) {
        snprintf(dir, sizeof dir, "%s/%s", tmp, fam[f].type);
        CHECK_OK(tu_write_family(dir, fam[f].type, 2, fam[f].H, fam[f].G, fam[f].d, fam[f].H * fam[f].d, false,
                                fam[f].extra));
        Model *m = NULL;
        CHECK_OK(model_open(dir, &m));
        if (!m) continue;
        CHECK(m->cfg.qk_rope_dim == fam[f].rd && m->cfg.rope_first, "%s: rotary dims %d", fam[f].type, m->cfg.qk_rope_dim);
        CHECK(analysis_available(m, AN_CONVERT_MLA, why, sizeof why), "%s: convert mla refused: %s", fam[f].type, why);
        AttnLayer *gqa = NULL;
        CHECK_OK(attn_layer_load(m, 1, &gqa));
        double se, oe;
        if (gqa) {
            full_rank(gqa, fam[f].G * fam[f].rd, true, &se, &oe, NULL);
            CHECK(se < 1e-5 && oe < 1e-5, "%s: full rank, D = G rd: scores %.3g outputs %.3g", fam[f].type, se, oe);
        }
        attn_layer_free(gqa);
        TmlaOpts o = tmla_opts_default();
        CHECK_OK(tmla_resolve_opts(m, &o));
        CHECK(o.rope_dim == fam[f].rd && o.freqfold == 1, "%s: default rope-dim %d", fam[f].type, o.rope_dim);
        int nJ = fam[f].G * fam[f].d - fam[f].rd + fam[f].G * fam[f].d;
        int ranks[] = {TMLA_FULL, nJ / 2, nJ / 4, nJ / 8};
        double prev = 0;
        for (size_t i = 0; i < 4; i++) {
            o = tmla_opts_default();
            o.kv_rank = ranks[i];
            TmlaResult *r = NULL;
            CHECK_OK(tmla_convert(m, &o, &r));
            if (!r) continue;
            CHECK(r->rope_dim == fam[f].rd && r->qk_nope == fam[f].d && r->head_dim == fam[f].d, "%s: dims rope %d nope %d",
                  fam[f].type, r->rope_dim, r->qk_nope);
            if (ranks[i] == TMLA_FULL)
                CHECK(r->kv_rank == nJ && r->kv_after == (size_t)(nJ + fam[f].rd), "%s: full rank %d", fam[f].type, r->kv_rank);
            double e = fmax(r->rep[0].out_err, r->rep[1].out_err);
            if (i == 0) {             /* NeoX: no DeepSeek-V3 form, export refused; Phi-3: gate_up_proj split on export */
                if (f) CHECK_OK(mla_exportable(r));
                else CHECK_ERR(mla_exportable(r), "other norms around the blocks");
                MlaCheck *c = NULL;
                CHECK_OK(mla_check_session(r, "no export", &(MlaCheckIn){.tokens = 32, .seed = 99}, &c));
                for (int l = 0; c && l < 2; l++)
                    CHECK(isfinite(c->out_err[l]) && c->out_err[l] > 0, "%s: session check layer %d: %.3g", fam[f].type,
                          l, c->out_err[l]);
                mla_check_free(c);
            }
            CHECK(isfinite(e) && e >= prev - 1e-6, "%s kv-rank %d: error %.4g below the larger rank's %.4g", fam[f].type,
                  ranks[i], e, prev);
            printf("%s kv-rank %3d: rope energy %.4f outputs %.4g\n", fam[f].type, r->kv_rank, r->rep[1].rope_energy, e);
            prev = e;
            tmla_result_free(r);
        }
        test_compare(m, fam[f].type);
        model_free(m);
    }
}

/* A Llama-layout source with partial_rotary_factor: exported as DeepSeek-V3 with qk_rope_head_dim =
 * rd and qk_nope_head_dim = d, and check finds the export exact (one KV head: D = rd keeps all). */
static void test_export(const char *tmp) {
    char src[4200], out[4200];
    snprintf(src, sizeof src, "%s/mistral-partial", tmp);
    snprintf(out, sizeof out, "%s/mistral-partial-mla", tmp);
    TuModel tm = {.model_type = "mistral", .layers = 2, .hidden = 32, .heads = 4, .kv_heads = 1, .head_dim = 16,
                  .inter = 48, .vocab = 64, .dtype = DT_F32, .extra_config = "\"partial_rotary_factor\": 0.25"};
    CHECK_OK(tu_write_model(src, &tm));
    Model *m = NULL;
    CHECK_OK(model_open(src, &m));
    if (!m) return;
    int ids[32];                        /* the perplexity's text: 32 token ids, one window */
    for (int t = 0; t < 32; t++) ids[t] = (t * 7 + 3) % 64;
    MlaCheckIn in = {.tokens = 32, .seed = 99, .ids = ids, .n = 32, .seqlen = 32};
    TmlaResult *r = NULL;
    TmlaOpts o = tmla_opts_default();
    CHECK_OK(tmla_convert(m, &o, &r));
    if (r) {
        CHECK(r->rope_dim == 4 && r->qk_nope == 16, "dims rope %d nope %d", r->rope_dim, r->qk_nope);
        CHECK(r->rep[0].out_err < 1e-5 && r->rep[1].out_err < 1e-5, "one KV head, full rank: %.3g %.3g",
              r->rep[0].out_err, r->rep[1].out_err);
        MlaExportOpts eo = {.dtype = DT_F32};
        CHECK_OK(mla_export(r, out, &eo));
        Model *ex = NULL;
        CHECK_OK(model_open(out, &ex));
        if (ex)
            CHECK(ex->cfg.qk_rope_dim == 4 && ex->cfg.qk_nope_dim == 16 && ex->cfg.kv_lora_rank == 16 - 4 + 16,
                  "export dims rope %d nope %d rank %d", ex->cfg.qk_rope_dim, ex->cfg.qk_nope_dim, ex->cfg.kv_lora_rank);
        model_free(ex);
        MlaCheck *c = NULL;
        CHECK_OK(mla_check_in(out, m, &in, &c));
        if (c) {
            for (int l = 0; l < c->n_layers; l++)
                CHECK(c->out_err[l] < 1e-4, "check layer %d: out_err %.3g", l, c->out_err[l]);
            CHECK(fabs(c->nll_export - c->nll_source) < 1e-4, "NLL %.6g vs %.6g", c->nll_export, c->nll_source);
        }
        mla_check_free(c);
    }
    tmla_result_free(r);
    /* only layer 0 converted: no export, and check runs on the conversion as the session holds it */
    o = tmla_opts_default();
    o.layer_hi = 0;
    r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    if (r) {
        CHECK_ERR(mla_exportable(r), "layer 1 was not converted");
        MlaCheck *c = NULL;
        CHECK_OK(mla_check_session(r, "layer 1 was not converted", &in, &c));
        if (c) {
            CHECK(c->in_session && !c->export_path && c->n_layers == 2, "session check header");
            CHECK(c->out_err[0] < 1e-5 && c->out_err[1] == 0, "session check errors %.3g %.3g", c->out_err[0], c->out_err[1]);
            CHECK(c->nll_tokens == 31 && fabs(c->nll_export - c->nll_source) < 1e-4, "session NLL %.6g vs %.6g",
                  c->nll_export, c->nll_source);
            CHECK(strstr(c->notes, "layer 1 was not converted") != NULL, "notes: %s", c->notes);
        }
        mla_check_free(c);
    }
    tmla_result_free(r);
    model_free(m);
}

int main(void) {
    const char *tmp = test_tmpdir();
    test_steps(ROPE_HALF, false, "rotate_half");
    test_steps(ROPE_HALF, true, "rotate_half + biases");
    test_steps(ROPE_INTERLEAVED, true, "interleaved + biases");
    test_pipeline();
    test_families(tmp);
    test_export(tmp);
    return check_done();
}
