/* test_mamba2.c -- the forward pass of the Mamba-2 hybrids (nemotron_h, granitemoehybrid: core/model/mamba2.c and
 * forward.c's blocks) on their synthetic checkpoints against the independent float64 reference tests/ref_mamba2.c
 * (the SSD in its quadratic form, from the modeling files):
 *   (a) logits of 24 tokens to 1e-4 relative (max |diff| / max |ref|), in one call and token by token through the
 *       Mamba-2 state and the KV cache; mean NLL over 40 tokens to 1e-4 relative;
 *   (b) each feature switched off in the reference (the D skip, the conv's taps on earlier tokens, the SSM state
 *       across tokens, Nemotron-H's gated norm per group, Granite's residual_multiplier) moves its logits by more
 *       than 100 x the tolerance: the checks of (a) see every one of them;
 * The nemotron_h recipe has an MoE block ('E': 4 experts without a gate, sigmoid routing with its bias, a shared
 * expert), so (a) checks it too;
 * The same checks of (a) on the recipes written in BF16.
 *   (c) the forward pass refuses latent experts (moe_latent_size) by name. */
#define _GNU_SOURCE
#include "check.h"
#include "family_models.h"
#include "config.h"
#include "forward.h"
#include "model.h"
#include "ref_mamba2.h"
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_LOGITS 24
#define T_PPL 40
#define REL_TOL 1e-4

/* max |a - b| and max |b| over n values. */
static void dist(const float *a, const double *b, size_t n, double *dmax, double *rmax) {
    *dmax = *rmax = 0;
    for (size_t i = 0; i < n; i++) {
        *dmax = fmax(*dmax, fabs((double)a[i] - b[i]));
        *rmax = fmax(*rmax, fabs(b[i]));
    }
}

/* (b): each ablation of the reference moves it far from attnlab's logits z. */
static void check_ablations(const char *fam, RefMamba *r, const int *ids, const float *z, size_t V) {
    static const struct { unsigned bit; const char *name; bool nemotron_only, granite_only; } off[] = {
        {REFM_NO_D, "D skip", false, false}, {REFM_NO_CONV_PAST, "conv over earlier tokens", false, false},
        {REFM_NO_STATE, "SSM state across tokens", false, false},
        {REFM_ONE_NORM_GROUP, "gated norm per group", true, false},
        {REFM_NO_ROUTE_BIAS, "routing bias of the MoE block", true, false},
        {REFM_NO_RESIDUAL_MULT, "residual_multiplier", false, true}};
    bool nemotron = !strcmp(fam, "nemotron_h");
    double *zr = malloc(T_LOGITS * V * sizeof *zr);
    for (size_t k = 0; zr && k < sizeof off / sizeof *off; k++) {
        if ((off[k].nemotron_only && !nemotron) || (off[k].granite_only && nemotron)) continue;
        refm_ablate(r, off[k].bit);
        CHECK_OK(refm_logits(r, ids, T_LOGITS, zr));
        double d, rmax;
        dist(z, zr, T_LOGITS * V, &d, &rmax);
        CHECK(d > 100 * REL_TOL * rmax, "%s: without the %s the reference moves only rel %.3g", fam, off[k].name,
              d / rmax);
        printf("  %-16s without the %s the reference is off by rel %.3g\n", fam, off[k].name, d / rmax);
    }
    refm_ablate(r, 0);
    free(zr);
}

/* (a) logits, token-by-token decoding and NLL of attnlab against the reference; then (b). */
static void check_family(const char *fam, const char *tmp, dt_type dt) {
    char *dir = al_asprintf("%s/%s%s", tmp, fam, dt == DT_BF16 ? "-bf16" : "");
    Model *m = NULL;
    RefMamba *r = NULL;
    Forward *f = NULL;
    CHECK_OK(synth_family_write(fam, dt, SYNTH_DEFAULT_SEED, dir));
    CHECK_OK(model_open(dir, &m));
    CHECK_OK(refm_open(dir, &r));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (!f || !r) { fwd_free(f); model_free(m); refm_free(r); free(dir); return; }
    size_t V = refm_vocab(r);
    int ids[T_PPL];
    tu_tokens(ids, T_LOGITS, V, 7);
    float *z = malloc(T_LOGITS * V * sizeof *z), *z1 = malloc(V * sizeof *z1);
    double *zr = malloc(T_LOGITS * V * sizeof *zr), d, rmax, dstep = 0;
    CHECK_OK(refm_logits(r, ids, T_LOGITS, zr));
    CHECK_OK(fwd_run(f, ids, T_LOGITS, FWD_LOGITS_ALL, z));
    dist(z, zr, T_LOGITS * V, &d, &rmax);
    CHECK(d <= REL_TOL * rmax, "%s: logits differ by %.3g (rel %.3g)", fam, d, d / rmax);
    printf("  %-16s logits %s: max |diff| %.3g of max |logit| %.3g (rel %.2g)\n", fam, d <= REL_TOL * rmax ? "ok" : "FAIL",
           d, rmax, d / rmax);
    fwd_reset(f);
    int rc = AL_OK;
    for (size_t t = 0; rc == AL_OK && t < T_LOGITS; t++) {
        rc = fwd_run(f, ids + t, 1, FWD_LOGITS_LAST, z1);
        for (size_t v = 0; rc == AL_OK && v < V; v++) dstep = fmax(dstep, fabs((double)z1[v] - zr[t * V + v]));
    }
    CHECK(rc == AL_OK && dstep <= REL_TOL * rmax, "%s: token by token: %s, max |diff| %.3g", fam,
          rc == AL_OK ? "ran" : al_errmsg(), dstep);
    printf("  %-16s decode token by token: max |diff| %.3g\n", fam, dstep);
    if (dt == DT_F32) check_ablations(fam, r, ids, z, V);
    tu_tokens(ids, T_PPL, V, 11);
    double nref = 0;
    FwdPpl p = {0};
    CHECK_OK(refm_mean_nll(r, ids, T_PPL, &nref));
    CHECK_OK(fwd_ppl(f, ids, T_PPL, T_PPL, &p));
    CHECK(fabs(p.nll - nref) <= REL_TOL * fabs(nref) && p.tokens == T_PPL - 1, "%s: NLL %.9g, reference %.9g", fam, p.nll,
          nref);
    printf("  %-16s NLL %.7f, reference %.7f\n", fam, p.nll, nref);
    free(z); free(z1); free(zr);
    fwd_free(f);
    model_free(m);
    refm_free(r);
    free(dir);
}

/* (c) the nemotron_h checkpoint with a moe_latent_size (Nemotron 3 Super's latent experts): the forward pass refuses
 * it by name, the attention analyses still load. */
static void check_latent_refused(const char *tmp) {
    char *dir = al_asprintf("%s/nemotron_h", tmp), *cp = al_asprintf("%s/config.json", dir);
    size_t n = 0;
    char *text = al_read_file(cp, &n);
    char *latent = text ? al_asprintf("{\"moe_latent_size\": 16, %s", strchr(text, '{') + 1) : NULL;
    FILE *fp = latent ? fopen(cp, "w") : NULL;
    if (fp) { fputs(latent, fp); fclose(fp); }
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(dir, &m));
    CHECK(m && m->cfg.mlp == MLP_MOE && cfg_moe_layer(&m->cfg, 2) && !cfg_moe_layer(&m->cfg, 5), "'E' is the MoE block");
    if (m) CHECK_ERR(fwd_new(m, NULL, &f), "moe_latent_size 16");
    fwd_free(f);
    model_free(m);
    free(latent);
    free(text);
    free(cp);
    free(dir);
}

int main(void) {
    const char *tmp = test_tmpdir();
    check_family("nemotron_h", tmp, DT_F32);
    check_family("granitemoehybrid", tmp, DT_F32);
    check_family("nemotron_h", tmp, DT_BF16);            /* BF16 weights: the conv, norms and projections widened */
    check_family("granitemoehybrid", tmp, DT_BF16);
    check_latent_refused(tmp);
    return check_done();
}
