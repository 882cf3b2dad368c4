/* test_tpa_real.c -- non-contextual TPA on the small real checkpoints ($ATTNLAB_MODELS): the
 * trained stories260K (Llama, 8 heads, 4 KV heads, head dim 8; HF layout with rotate_half RoPE and
 * the llama2.c .bin with interleaved RoPE) and the GPT-2 loader check model. Form a at R = 4 (the
 * KV heads) and form b at R = 8 (the head dim) reproduce every layer; lower ranks give strictly
 * larger key errors, and an export round trip checks exact. Skips when the models are absent. */
#include "check.h"
#include "tpa.h"

#include <sys/stat.h>

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* Converts m at ranks (rk, rv) in form f; checks every converted layer's errors against tol
 * (exact) or above it (approximate), returning the largest output error. */
static double convert_check(Model *m, tpa_form f, int rk, int rv, bool exact, TpaModel **keep) {
    TpaOpts o = tpa_opts_default();
    o.form = f;
    o.k_rank = rk;
    o.v_rank = rv;
    o.eval_tokens = 32;
    TpaModel *t = NULL;
    double worst = 0;
    CHECK_OK(tpa_convert(m, &o, &t));
    if (!t) return INFINITY;
    CHECK(t->exact == exact, "%s form %s R %d/%d exact flag %d", m->path, tpa_form_name(f), rk, rv, t->exact);
    for (int l = 0; l < t->n_layers; l++) {
        const TpaLayerReport *r = &t->layers[l]->rep;
        if (exact)
            CHECK(r->out_err < 1e-5 && r->score_err < 1e-5 && r->k_err < 1e-6, "%s layer %d form %s exact: out %.3g",
                  m->path, l, tpa_form_name(f), r->out_err);
        else
            CHECK(r->k_err > 1e-3, "%s layer %d form %s R %d: k_err %.3g", m->path, l, tpa_form_name(f), rk, r->k_err);
        if (r->out_err > worst) worst = r->out_err;
    }
    if (keep) *keep = t;
    else tpa_model_free(t);
    return worst;
}

int main(void) {
    const char *models = getenv("ATTNLAB_MODELS");
    char hf[4096], bin[4096], gpt2[4096], out[4200];
    if (!models) check_skip("ATTNLAB_MODELS is not set");
    snprintf(hf, sizeof hf, "%s/stories260K-hf", models);
    snprintf(bin, sizeof bin, "%s/stories260K/stories260K.bin", models);
    snprintf(gpt2, sizeof gpt2, "%s/gpt2-tiny-random", models);
    if (!exists(hf) || !exists(bin)) check_skip("the stories260K checkpoints are not in $ATTNLAB_MODELS");
    const char *tmp = test_tmpdir();

    Model *m = NULL;
    CHECK_OK(model_open(hf, &m));
    if (m) {
        TpaModel *t = NULL;
        convert_check(m, TPA_FORM_A, 4, 4, true, &t);
        convert_check(m, TPA_FORM_B, 8, 8, true, NULL);
        /* The cache/fidelity curve of a trained model: fewer ranks, larger errors. */
        double e3 = convert_check(m, TPA_FORM_A, 3, 3, false, NULL);
        double e1 = convert_check(m, TPA_FORM_A, 1, 1, false, NULL);
        CHECK(e1 > e3, "form a: R 1 error %.4g above R 3 error %.4g", e1, e3);
        double b6 = convert_check(m, TPA_FORM_B, 6, 6, false, NULL);
        double b2 = convert_check(m, TPA_FORM_B, 2, 2, false, NULL);
        CHECK(b2 > b6, "form b: R 2 error %.4g above R 6 error %.4g", b2, b6);
        if (t) {
            CHECK(t->kv_after == t->kv_before && t->kv_before == 4 * 16, "cache %zu", t->kv_after);
            snprintf(out, sizeof out, "%s/stories-tpa", tmp);
            CHECK_OK(tpa_export(t, out, DT_F32));
            TpaModel *ld = NULL;
            CHECK_OK(tpa_load(out, &ld));
            TpaCheck *k = NULL;
            if (ld) CHECK_OK(tpa_check(ld, m, 24, 11, &k));
            if (k) CHECK(k->exact && k->pass && k->max_out_err < 1e-5, "export checks exact: %.3g", k->max_out_err);
            tpa_check_free(k);
            tpa_model_free(ld);
            tpa_model_free(t);
        }
        model_free(m);
    }
    /* The llama2.c file pairs RoPE dims (2j, 2j + 1): both forms stay exact. */
    if (model_open(bin, &m) == AL_OK) {
        convert_check(m, TPA_FORM_A, 4, 4, true, NULL);
        convert_check(m, TPA_FORM_B, 8, 8, true, NULL);
        model_free(m);
    } else
        CHECK(0, "cannot open %s: %s", bin, al_errmsg());
    if (exists(gpt2) && model_open(gpt2, &m) == AL_OK) {
        convert_check(m, TPA_FORM_A, 1, 1, true, NULL);
        convert_check(m, TPA_FORM_B, 16, 16, true, NULL);
        model_free(m);
    }
    return check_done();
}
