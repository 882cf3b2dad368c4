/* test_tmla_lazy.c -- issue 32's memory: `convert mla stats act` on a large model no longer forms
 * every layer's attention-input second moment at once (calib_input_arrays: layers x hidden^2
 * doubles, 4.3 GB on an 8B shape, beside the calibration's own); TmlaOpts.calib forms each layer's
 * in its turn. The results must not move: on a qwen2 model (biases: the mean matters) calibrated by
 * the forward pass, the conversion from o.calib equals the one from the arrays bit for bit (every
 * report number, every converted layer's output on random inputs), activation_stats is set, and
 * the digest formed one layer at a time (ci_digest_layer) is ci_digest of the arrays. */
#include "tiny_model.h"
#include "testutil.h"
#include "calib.h"

static bool same_layer(const AttnLayer *a, const AttnLayer *b) {
    size_t T = 16;
    int pos[16];
    for (size_t t = 0; t < T; t++) pos[t] = (int)(2 * t);
    Mat *X = attn_random_input(T, a->hidden, 77);
    AttnOut *oa = NULL, *ob = NULL;
    bool same = attn_eval(a, X, pos, true, &oa) == AL_OK && attn_eval(b, X, pos, true, &ob) == AL_OK &&
                oa->out->rows == ob->out->rows && oa->out->cols == ob->out->cols &&
                !memcmp(oa->out->data, ob->out->data, oa->out->rows * oa->out->cols * sizeof(float));
    attn_out_free(oa);
    attn_out_free(ob);
    mat_free(X);
    return same;
}

int main(void) {
    const char *tmp = test_tmpdir();
    Forward *f;
    Model *m = tu_open_tiny(tmp, "lazy-qwen2", tu_tiny("qwen2", 3, 2), &f);
    if (!m) return check_done();
    size_t n = 200, seqlen = 50;
    int ids[200];
    tu_tiny_ids(ids, n, 5);
    double **S, **mu;
    CalibStats *st = tu_tiny_calib(m, f, ids, n, seqlen, &S, &mu);
    fwd_free(f);
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 12;
    o.sigma = (const double *const *)S;
    o.mu = (const double *const *)mu;
    TmlaResult *ra = NULL, *rl = NULL;
    CHECK_OK(tmla_convert(m, &o, &ra));
    o.sigma = o.mu = NULL;
    o.calib = st;
    CHECK_OK(tmla_convert(m, &o, &rl));
    if (ra && rl) {
        CHECK(rl->activation_stats && ra->activation_stats, "activation statistics used: arrays %d, calib %d",
              ra->activation_stats, rl->activation_stats);
        CHECK(!rl->opts.calib, "the result keeps no pointer to the calibration");
        for (int l = 0; l < 3; l++) {
            const TmlaLayerReport *a = &ra->rep[l], *b = &rl->rep[l];
            double va[] = {a->alpha, a->rope_energy, a->joint_energy, a->score_err, a->out_err, a->joint_energy_alt},
                   vb[] = {b->alpha, b->rope_energy, b->joint_energy, b->score_err, b->out_err, b->joint_energy_alt};
            CHECK(!memcmp(va, vb, sizeof va), "layer %d: report alpha %.17g / %.17g, out_err %.17g / %.17g", l, va[0],
                  vb[0], va[4], vb[4]);
            CHECK(a->alpha != 1 && isfinite(a->out_err) && a->out_err > 0, "layer %d: a truncated, balanced conversion "
                  "(alpha %g, out_err %g)", l, a->alpha, a->out_err);
            CHECK(same_layer(ra->layers[l], rl->layers[l]), "layer %d: the converted layers compute the same", l);
        }
        /* against the weights' conversion: the statistics were used */
        TmlaOpts w = tmla_opts_default();
        w.kv_rank = 12;
        TmlaResult *rw = NULL;
        CHECK_OK(tmla_convert(m, &w, &rw));
        CHECK(rw && rw->rep[0].alpha != rl->rep[0].alpha, "weights' alpha %g differs from the activations' %g",
              rw ? rw->rep[0].alpha : NAN, rl->rep[0].alpha);
        tmla_result_free(rw);
    }
    uint64_t h = 0;
    for (int l = 0; S && l < 3; l++) h = ci_digest_layer(h, l, 32, S[l], mu[l]);
    uint64_t d = S ? ci_digest(3, 32, (const double *const *)S, (const double *const *)mu) : 0;
    CHECK(S && h == d && d != 0, "digest by layer %016llx, of the arrays %016llx", (unsigned long long)h,
          (unsigned long long)d);
    CHECK(mu && mu[0], "the calibration kept a mean");
    tmla_result_free(ra);
    tmla_result_free(rl);
    calib_free_arrays(3, S, mu);
    calib_free(st);
    model_free(m);
    return check_done();
}
