/* test_check_stock.c -- issue 32: `check` with no folder after `convert mla` (mla_check_stock) builds the
 * stock DeepSeek-V3 layers in memory instead of writing a float32 scratch export and reading it back
 * (mla_check_in). Both routes on the same conversion and inputs give the same check: every per-layer
 * column (each engine's, attnlab's), the KV widths, the whole-model NLL of the source and of the
 * converted model, and the notes -- on Llama, Qwen2 with biases (q_proj.bias: the stock view; the
 * engines that drop the biases), a query latent of full rank, and llama3 RoPE scaling (the export
 * turns at unscaled frequencies, which the layers built in memory must too). The per-layer columns agree to
 * 1e-9 relative; the NLL of the converted model to 1e-7 (4e-8 on llama: the export runs its MLA layers
 * through the forward pass's own kernels, the session through attn_eval's sgemm). */
#include "test_transmla_util.h"
#include "mla_export.h"

static void same_check(const MlaCheck *a, const MlaCheck *b, const char *what) {
    double worst = 0;
    for (int l = 0; l < a->n_layers && l < b->n_layers; l++) {
        double v[][2] = {{a->score_err[l], b->score_err[l]}, {a->out_err[l], b->out_err[l]},
                         {a->own_out_err[l], b->own_out_err[l]}, {a->engine_out_err[0][l], b->engine_out_err[0][l]},
                         {a->engine_out_err[1][l], b->engine_out_err[1][l]}, {a->engine_out_err[2][l], b->engine_out_err[2][l]}};
        for (size_t i = 0; i < sizeof v / sizeof *v; i++) worst = fmax(worst, fabs(v[i][0] - v[i][1]) / (fabs(v[i][1]) + 1e-30));
    }
    CHECK(a->n_layers == b->n_layers && worst < 1e-9, "%s: per-layer columns differ by %.3g relative", what, worst);
    CHECK(a->kv_source == b->kv_source && a->kv_export == b->kv_export && a->latent_eps == b->latent_eps,
          "%s: KV %zu -> %zu / %zu -> %zu, eps %g / %g", what, a->kv_source, a->kv_export, b->kv_source, b->kv_export,
          a->latent_eps, b->latent_eps);
    CHECK(a->nll_tokens == b->nll_tokens && fabs(a->nll_source - b->nll_source) <= 1e-12 * fabs(b->nll_source) &&
          fabs(a->nll_export - b->nll_export) <= 1e-7 * fabs(b->nll_export),
          "%s: NLL %.12g / %.12g (source %.12g / %.12g)", what, a->nll_export, b->nll_export, a->nll_source, b->nll_source);
    CHECK(!strcmp(a->notes, b->notes), "%s: notes\n[%s]\nvs the export's\n[%s]", what, a->notes, b->notes);
    CHECK(a->stock_session && !b->stock_session && !a->export_path, "%s: in memory, no export path", what);
}

static void compare(const char *tmp) {
    struct { TuModel m; int q_rank; const char *what; } cases[] = {
        {{.model_type = "llama", .layers = 2, .hidden = 32, .heads = 4, .kv_heads = 2, .head_dim = 8, .inter = 24,
          .vocab = 50, .dtype = DT_F32}, 0, "llama"},
        {{.model_type = "qwen2", .layers = 2, .hidden = 24, .heads = 4, .kv_heads = 2, .head_dim = 8, .inter = 20,
          .vocab = 30, .dtype = DT_F32}, 0, "qwen2 with biases"},
        {{.model_type = "qwen2", .layers = 1, .hidden = 24, .heads = 4, .kv_heads = 1, .head_dim = 8, .inter = 20,
          .vocab = 30, .dtype = DT_F32}, 32, "qwen2, query latent"},
        {{.model_type = "llama", .layers = 1, .hidden = 32, .heads = 4, .kv_heads = 1, .head_dim = 8, .inter = 24,
          .vocab = 50, .dtype = DT_BF16, .extra_config = "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
          "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}"},
         0, "llama3 rope scaling, BF16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char src[4096], out[4096];
        snprintf(src, sizeof src, "%s/src%zu", tmp, i);
        snprintf(out, sizeof out, "%s/mla%zu", tmp, i);
        CHECK_OK(tu_write_model(src, &cases[i].m));
        Model *m = NULL;
        CHECK_OK(model_open(src, &m));
        if (!m) continue;
        TmlaOpts o = tmla_opts_default();
        o.q_rank = cases[i].q_rank;
        o.kv_rank = 6;
        TmlaResult *r = NULL;
        CHECK_OK(tmla_convert(m, &o, &r));
        MlaExportOpts eo = {.dtype = DT_F32};          /* what `check` wrote to its scratch folder */
        if (r) CHECK_OK(mla_export(r, out, &eo));
        int ids[40];
        for (int t = 0; t < 40; t++) ids[t] = (t * 7 + 3) % m->cfg.vocab;
        MlaCheckIn in = {.tokens = 24, .seed = 5, .ids = ids, .n = 40, .seqlen = 20};
        MlaCheck *a = NULL, *b = NULL;
        if (r) CHECK_OK(mla_check_stock(r, &in, &a));
        if (r) CHECK_OK(mla_check_in(out, m, &in, &b));
        if (a && b) same_check(a, b, cases[i].what);
        if (a) printf("%s: out_err[0] %.6g, NLL %.9g -> %.9g, notes: %s\n", cases[i].what, a->out_err[0], a->nll_source,
                      a->nll_export, a->notes[0] ? "yes" : "none");
        mla_check_free(a);
        mla_check_free(b);
        tmla_result_free(r);
        model_free(m);
    }
}

int main(void) {
    compare(test_tmpdir());
    return check_done();
}
