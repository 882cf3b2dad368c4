/* test_transmla.c -- each TransMLA step on its own: the merge and the RoRoPE rotation are exact
 * (1e-5 relative on scores and outputs, rotate_half, interleaved, Qwen2 biases), the rotation is
 * orthogonal and the same for real and imaginary dims, FreqFold keeps less energy as M grows and
 * more than M = 1 at equal dims (Prop. 2), the whole pipeline with kv-rank full and D = d is exact
 * for one KV head and for identical KV heads, errors grow as ranks shrink, balancing's alpha and
 * its effect (alpha stays 1 where the NoPE keys carry no energy: a Qwen2 checkpoint with biases and
 * identical KV heads converts exactly), the query latent, option checks, and the real stories260K in
 * both RoPE layouts. */
#include "test_transmla_util.h"
#include "transmla.h"

#include <cblas.h>

/* ---------------------------------------------------------------- steps */

/* Runs merge (+ rorope M when M > 0) and returns the built layer. */
static AttnLayer *stage(const AttnLayer *gqa, int M, bool fold, TmlaLayer **keep) {
    TmlaLayer *T = NULL;
    double *C_kv = NULL, *C_K = NULL;
    AttnLayer *L = NULL;
    CHECK_OK(tmla_merge(gqa, &T));
    if (!T) return NULL;
    if (M > 0) {
        CHECK_OK(tmla_kv_cov_from_weights(gqa, NULL, &C_kv));
        C_K = tmla_key_cov(T, C_kv);
        CHECK_OK(tmla_rorope(T, M, C_K));
    }
    if (fold) CHECK_OK(tmla_fold_scale(T));
    CHECK_OK(tmla_build(T, &L));
    free(C_kv);
    free(C_K);
    if (keep) *keep = T;
    else tmla_layer_free(T);
    return L;
}

/* U orthogonal, and columns (2p, 2p+1) the same rotation on the real and imaginary dims. */
static void check_rotation(const TmlaLayer *T, const char *what) {
    size_t n = (size_t)T->G * T->d, d = (size_t)T->d;
    double *P = calloc(n * n, sizeof(double)), err = 0;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, T->U, (int)n, T->U, (int)n, 0.0, P, (int)n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) err = fmax(err, fabs(P[i * n + j] - (i == j)));
    CHECK(err < 1e-12, "%s: U is not orthogonal (%.3g)", what, err);
    double diff = 0;
    bool inter = T->src->rope == ROPE_INTERLEAVED;
    for (size_t p = 0; p < n / 2; p++)
        for (size_t g = 0; g < (size_t)T->G; g++)
            for (size_t l = 0; l < d / 2; l++) {
                size_t re = g * d + (inter ? 2 * l : l), im = g * d + (inter ? 2 * l + 1 : l + d / 2);
                diff = fmax(diff, fabs(T->U[re * n + 2 * p] - T->U[im * n + 2 * p + 1]));
                diff = fmax(diff, fabs(T->U[re * n + 2 * p + 1]) + fabs(T->U[im * n + 2 * p]));
            }
    CHECK(diff == 0, "%s: real and imaginary dims are not rotated alike (%.3g)", what, diff);
    free(P);
}

static void test_exact_steps(rope_layout lay, bool bias, const char *what) {
    AttnLayer *gqa = tu_gqa(6, 3, 8, 20, lay, bias, false);
    double se, oe;
    AttnLayer *m1 = stage(gqa, 0, false, NULL);
    tu_errs(gqa, m1, &se, &oe);
    CHECK(se < 1e-5 && oe < 1e-5, "%s: merge is not exact: scores %.3g outputs %.3g", what, se, oe);
    CHECK(m1 && m1->qk_nope == 0 && m1->rope_dim == 24 && m1->kv_rank == 24, "%s: merged dims", what);
    TmlaLayer *T = NULL;
    AttnLayer *m2 = stage(gqa, 1, false, &T);
    tu_errs(gqa, m2, &se, &oe);
    CHECK(se < 1e-5 && oe < 1e-5, "%s: RoRoPE is not exact: scores %.3g outputs %.3g", what, se, oe);
    if (T) {
        check_rotation(T, what);
        double sum = 0;                    /* energy is preserved, and sorted within each frequency */
        for (int i = 0; i < 24; i++) sum += T->key_energy[i];
        CHECK_NEAR(sum / T->key_total, 1.0, 1e-12);
        for (int l = 0; l < 4; l++)
            CHECK(T->group_eig[l * 3] >= T->group_eig[l * 3 + 1] && T->group_eig[l * 3 + 1] >= T->group_eig[l * 3 + 2],
                  "%s: eigenvalues of frequency %d not descending", what, l);
        /* the first d coordinates (component 0 of every frequency) carry the most energy */
        double first = 0, second = 0;
        for (int i = 0; i < 8; i++) { first += T->key_energy[i]; second += T->key_energy[8 + i]; }
        CHECK(first >= second, "%s: RoRoPE did not concentrate the keys (%g < %g)", what, first, second);
    }
    tmla_layer_free(T);
    AttnLayer *m3 = stage(gqa, 1, true, NULL);
    tu_errs(gqa, m3, &se, &oe);
    CHECK(se < 1e-5 && oe < 1e-5, "%s: folding the softmax scale changed the scores: %.3g %.3g", what, se, oe);
    CHECK(m3 && fabs(m3->scale - 1 / sqrt(24.0)) < 1e-15, "%s: scale %g", what, m3 ? m3->scale : 0);
    AttnLayer *m4 = stage(gqa, 2, false, NULL);       /* FreqFold's collapse is an approximation */
    tu_errs(gqa, m4, &se, &oe);
    CHECK(se > 1e-4, "%s: FreqFold M = 2 should not be exact (%.3g)", what, se);
    attn_layer_free(m1); attn_layer_free(m2); attn_layer_free(m3); attn_layer_free(m4);
    attn_layer_free(gqa);
}

/* The whole pipeline on one layer. */
static AttnLayer *pipeline(const AttnLayer *gqa, int R, int M, bool balance, int q_rank, TmlaLayerReport *rep) {
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = R;
    o.freqfold = M;
    o.rope_dim = gqa->head_dim / M;
    o.balance = balance;
    o.q_rank = q_rank;
    o.eval_tokens = 24;
    AttnLayer *L = NULL;
    TmlaLayerReport r;
    CHECK_OK(tmla_convert_layer(gqa, &o, NULL, &L, rep ? rep : &r));
    return L;
}

static void test_exact_pipeline(void) {
    struct { int H, G; bool ident, bias; rope_layout lay; const char *what; } cases[] = {
        {4, 1, false, false, ROPE_HALF, "one KV head"},
        {4, 1, false, true, ROPE_INTERLEAVED, "one KV head, interleaved, biases"},
        {6, 3, true, false, ROPE_HALF, "identical KV heads"},
        {4, 2, true, true, ROPE_INTERLEAVED, "identical KV heads, interleaved, biases"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        AttnLayer *gqa = tu_gqa(cases[i].H, cases[i].G, 8, 24, cases[i].lay, cases[i].bias, cases[i].ident);
        TmlaLayerReport rep;
        AttnLayer *L = pipeline(gqa, TMLA_FULL, 1, true, 0, &rep);
        double se, oe;
        tu_errs(gqa, L, &se, &oe);
        CHECK(se < 1e-5 && oe < 1e-5, "%s: kv-rank full, D = d is not exact: scores %.3g outputs %.3g", cases[i].what,
              se, oe);
        CHECK(rep.out_err < 1e-5 && rep.score_err < 1e-5, "%s: reported errors %.3g %.3g", cases[i].what, rep.score_err,
              rep.out_err);
        CHECK_NEAR(rep.rope_energy, 1.0, 1e-6);
        CHECK(L && L->rope_dim == 8 && L->kv_rank == (cases[i].G - 1) * 8 + cases[i].G * 8, "%s: dims", cases[i].what);
        CHECK(L && fabs(L->scale - 1 / sqrt((double)(L->qk_nope + L->rope_dim))) < 1e-15, "%s: DeepSeek scale", cases[i].what);
        /* the RoPE dims are a standard RoPE of dim D with the same theta */
        for (int j = 0; L && j < 4; j++) CHECK_NEAR(L->inv_freq[j], pow(10000.0, -2.0 * j / 8), 1e-15);
        attn_layer_free(L);
        attn_layer_free(gqa);
    }
}

static void test_errors_grow(void) {
    /* KV heads that are near copies of head 0 (5% noise): RoPE removal costs little, so the rank
     * decides the error. */
    AttnLayer *gqa = tu_gqa(8, 4, 8, 40, ROPE_HALF, false, true);
    Mat *noise = tu_randm(40, 32, 0.05 / sqrt(40.0));
    for (size_t i = 0; i < 40 * 32; i++) { gqa->W_K->data[i] += noise->data[i]; gqa->W_V->data[i] += noise->data[i]; }
    mat_free(noise);
    int ranks[] = {TMLA_FULL, 48, 32, 16, 8, 4};
    double prev_oe = -1, prev_se = -1, prev_en = 2;
    for (size_t i = 0; i < sizeof ranks / sizeof *ranks; i++) {
        TmlaLayerReport rep;
        AttnLayer *L = pipeline(gqa, ranks[i], 1, true, 0, &rep);
        printf("kv-rank %3d: energy %.4f scores %.4g outputs %.4g (alpha %.3f)\n", ranks[i], rep.joint_energy,
               rep.score_err, rep.out_err, rep.alpha);
        CHECK(rep.joint_energy <= prev_en + 1e-12, "joint energy grew when the rank shrank to %d", ranks[i]);
        CHECK(rep.out_err >= prev_oe - 1e-6 && rep.score_err >= prev_se - 1e-6,
              "errors shrank with the rank %d: %g < %g or %g < %g", ranks[i], rep.out_err, prev_oe, rep.score_err, prev_se);
        CHECK(L && L->kv_rank == (ranks[i] == TMLA_FULL ? 56 : ranks[i]), "kv_rank of the layer");
        if (i == 0) CHECK(rep.out_err < 0.05, "near-identical heads: full rank costs little (%g)", rep.out_err);
        prev_oe = rep.out_err; prev_se = rep.score_err; prev_en = rep.joint_energy;
        attn_layer_free(L);
    }
    CHECK(prev_oe > 0.1, "rank 4 of 56 should cost something (%g)", prev_oe);
    /* RoPE dims: D = d / M shrinking keeps less key energy (M = 1, 2, 4). */
    double prev = 2;
    for (int M = 1; M <= 4; M *= 2) {
        TmlaLayerReport rep;
        AttnLayer *L = pipeline(gqa, TMLA_FULL, M, true, 0, &rep);
        printf("freqfold %d (rope-dim %d): rope energy %.4f scores %.4g outputs %.4g\n", M, 8 / M, rep.rope_energy,
               rep.score_err, rep.out_err);
        CHECK(rep.rope_energy < prev + 1e-12 && rep.rope_energy > 0, "rope energy %g with M = %d", rep.rope_energy, M);
        CHECK(L && L->rope_dim == 8 / M && L->qk_nope == 8, "M = %d dims", M);
        prev = rep.rope_energy;
        attn_layer_free(L);
    }
    attn_layer_free(gqa);
}

static void test_balance(void) {
    /* Loud keys (x 20) over quiet values: without balancing the joint PCA spends its rank on keys. */
    AttnLayer *gqa = tu_gqa(4, 4, 8, 48, ROPE_HALF, false, false);
    for (size_t i = 0; i < gqa->W_K->rows * gqa->W_K->cols; i++) gqa->W_K->data[i] *= 20;
    TmlaLayerReport on, off;
    AttnLayer *a = pipeline(gqa, 28, 1, true, 0, &on), *b = pipeline(gqa, 28, 1, false, 0, &off);
    printf("balance on: alpha %.3f energy %.4f out %.4g | off: energy %.4f out %.4g | alt of on: %.4g\n", on.alpha,
           on.joint_energy, on.out_err, off.joint_energy, off.out_err, on.out_err_alt);
    /* alpha = RMS NoPE key / RMS value from the weights: recompute it from W_K U and W_V. */
    TmlaLayer *T = NULL;
    double *C_kv = NULL, *C_K = NULL, *C_J = NULL;
    CHECK_OK(tmla_merge(gqa, &T));
    CHECK_OK(tmla_kv_cov_from_weights(gqa, NULL, &C_kv));
    C_K = tmla_key_cov(T, C_kv);
    CHECK_OK(tmla_rorope(T, 1, C_K));
    CHECK_OK(tmla_remove_rope(T, 8, NULL));
    CHECK_OK(tmla_joint_cov(T, C_kv, &C_J));
    CHECK_OK(tmla_balance(T, true, C_J));
    double kk = 0, vv = 0;
    for (int e = 0; e < 8; e++) kk -= T->key_energy[e];
    for (int e = 0; e < 32; e++) kk += T->key_energy[e];
    for (size_t i = 0; i < gqa->W_V->rows * gqa->W_V->cols; i++) vv += (double)gqa->W_V->data[i] * gqa->W_V->data[i];
    CHECK_NEAR(T->alpha, sqrt(kk / vv), 1e-9 * T->alpha);
    CHECK_NEAR(on.alpha, T->alpha, 1e-12);
    CHECK(off.alpha == 1, "alpha without balancing is 1 (%g)", off.alpha);
    CHECK(on.alpha > 5, "loud keys give a large alpha (%g)", on.alpha);
    CHECK(on.out_err < off.out_err, "balancing should help here: %g vs %g", on.out_err, off.out_err);
    CHECK_NEAR(on.out_err_alt, off.out_err, 1e-12);        /* the report's comparison is the other run */
    CHECK_NEAR(off.out_err_alt, on.out_err, 1e-12);
    tmla_layer_free(T);
    free(C_kv); free(C_K); free(C_J);
    attn_layer_free(a); attn_layer_free(b); attn_layer_free(gqa);
}

/* The PCAs read the input second moment they are given: c^2 I changes nothing but scale, a
 * non-isotropic one changes the bases; NULL and I agree. */
static void test_sigma(void) {
    AttnLayer *gqa = tu_gqa(4, 2, 8, 12, ROPE_HALF, false, false);
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 12;
    o.eval_tokens = 16;
    double *Id = calloc(144, sizeof(double)), *S4 = calloc(144, sizeof(double)), *Sd = calloc(144, sizeof(double));
    for (int i = 0; i < 12; i++) { Id[i * 13] = 1; S4[i * 13] = 4; Sd[i * 13] = i < 6 ? 10 : 0.1; }
    TmlaLayerReport r0, r1, r4, rd;
    AttnLayer *a = NULL, *b = NULL, *c = NULL, *e = NULL;
    o.freqfold = 1; o.rope_dim = 8;
    CHECK_OK(tmla_convert_layer(gqa, &o, NULL, &a, &r0));
    CHECK_OK(tmla_convert_layer(gqa, &o, Id, &b, &r1));
    CHECK_OK(tmla_convert_layer(gqa, &o, S4, &c, &r4));
    CHECK_OK(tmla_convert_layer(gqa, &o, Sd, &e, &rd));
    CHECK_NEAR(r1.out_err, r0.out_err, 1e-9);
    CHECK_NEAR(r1.alpha, r0.alpha, 1e-12);
    CHECK_NEAR(r4.alpha, r0.alpha, 1e-9);
    CHECK_NEAR(r4.rope_energy, r0.rope_energy, 1e-9);
    CHECK_NEAR(r4.joint_energy, r0.joint_energy, 1e-9);
    CHECK(fabs(rd.rope_energy - r0.rope_energy) > 1e-3 || fabs(rd.joint_energy - r0.joint_energy) > 1e-3,
          "a non-isotropic input moment should change the PCA (%g %g vs %g %g)", rd.rope_energy, rd.joint_energy,
          r0.rope_energy, r0.joint_energy);
    attn_layer_free(a); attn_layer_free(b); attn_layer_free(c); attn_layer_free(e); attn_layer_free(gqa);
    free(Id); free(S4); free(Sd);
}

static void test_q_rank(void) {
    AttnLayer *gqa = tu_gqa(4, 2, 8, 16, ROPE_HALF, true, false);
    AttnLayer *plain = pipeline(gqa, 20, 1, true, 0, NULL);
    AttnLayer *full = pipeline(gqa, 20, 1, true, 64, NULL), *low = pipeline(gqa, 20, 1, true, 8, NULL);
    double se, oe, se2, oe2;
    tu_errs(plain, full, &se, &oe);
    CHECK(se < 1e-5 && oe < 1e-5, "q-rank full changed the layer: %.3g %.3g", se, oe);
    CHECK(full && full->q_rank == 64 && full->W_QA && full->W_QB && !full->W_Q && full->b_QA, "query latent fields");
    tu_errs(plain, low, &se2, &oe2);
    CHECK(oe2 > 1e-3, "q-rank 8 of 64 should cost something (%g)", oe2);
    attn_layer_free(plain); attn_layer_free(full); attn_layer_free(low); attn_layer_free(gqa);
}

/* ---------------------------------------------------------------- model level */

static void test_models(const char *tmp) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/llama", tmp);
    TuModel tm = {.model_type = "llama", .layers = 2, .hidden = 32, .heads = 4, .kv_heads = 2, .head_dim = 8,
                  .inter = 24, .vocab = 40, .dtype = DT_F32};
    CHECK_OK(tu_write_model(dir, &tm));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    if (!m) return;
    TmlaOpts o = tmla_opts_default();
    o.rope_dim = 5;
    CHECK_ERR(tmla_resolve_opts(m, &o), "rope-dim 5");
    o = tmla_opts_default(); o.freqfold = 3;
    CHECK_ERR(tmla_resolve_opts(m, &o), "freqfold 3");
    o = tmla_opts_default(); o.freqfold = 2; o.rope_dim = 8;
    CHECK_ERR(tmla_resolve_opts(m, &o), "give one of the two");
    o = tmla_opts_default(); o.kv_rank = 100;
    CHECK_ERR(tmla_resolve_opts(m, &o), "24 directions");
    o = tmla_opts_default(); o.rope_dim = 4;
    CHECK_OK(tmla_resolve_opts(m, &o));
    CHECK(o.freqfold == 2 && o.rope_dim == 4, "rope-dim 4 -> freqfold %d", o.freqfold);
    o = tmla_opts_default(); o.kv_rank = 12; o.freqfold = 2;
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    if (r) {
        CHECK(r->kv_before == 2 * 16 && r->kv_after == 12 + 4, "kv values %zu -> %zu", r->kv_before, r->kv_after);
        CHECK(r->layers[0] && r->layers[1] && r->rep[1].layer == 1, "both layers converted");
        CHECK(isfinite(r->rep[0].out_err_alt) && r->rep[0].out_err_alt != r->rep[0].out_err, "balance comparison");
    }
    tmla_result_free(r);
    /* figures */
    TmlaKeyNorms *k = NULL;
    CHECK_OK(tmla_key_norms(m, 1, 2, NULL, &k));
    if (k) {
        AttnLayer *L = NULL;
        CHECK_OK(attn_layer_load(m, 1, &L));
        double rn = 0, so = 0, sr = 0, sf = 0;                /* pair 5 = head 1, frequency 1: column 8 + 1 */
        for (size_t i = 0; i < 32; i++) rn += (double)L->W_K->data[i * 16 + 9] * L->W_K->data[i * 16 + 9];
        CHECK_NEAR(k->orig_re[5], sqrt(rn), 1e-6);
        for (size_t p = 0; p < k->n_pairs; p++) {
            so += k->orig_re[p] * k->orig_re[p] + k->orig_im[p] * k->orig_im[p];
            sr += k->rot_re[p] * k->rot_re[p] + k->rot_im[p] * k->rot_im[p];
            sf += k->fold_re[p] * k->fold_re[p] + k->fold_im[p] * k->fold_im[p];
        }
        CHECK_NEAR(sr, so, 1e-9 * so);
        CHECK_NEAR(sf, so, 1e-9 * so);
        CHECK(k->n_pairs == 8 && k->pairs_per_head == 4, "pairs %zu", k->n_pairs);
        attn_layer_free(L);
    }
    tmla_key_norms_free(k);
    TmlaRopeEnergy *e = NULL;
    int Ms[] = {1, 2, 4};
    CHECK_OK(tmla_rope_energy(m, 0, Ms, 3, NULL, &e));
    if (e) {
        CHECK(e->n_curves == 4 && e->curves[3].M == 0, "three FreqFold curves and the baseline");
        /* Prop. 2: at d = 8 RoPE dims, M = 2 (two components per group) keeps at least M = 1's energy */
        CHECK(e->curves[0].dims[0] == 8 && e->curves[1].dims[1] == 8, "dims %g %g", e->curves[0].dims[0], e->curves[1].dims[1]);
        CHECK(e->curves[1].energy[1] >= e->curves[0].energy[0] - 1e-12, "Prop. 2: %g < %g", e->curves[1].energy[1],
              e->curves[0].energy[0]);
        for (size_t k = 0; k < 2; k++)       /* Ky Fan: the top-k eigenvalues beat any k diagonal entries */
            CHECK(e->curves[0].energy[k] >= e->curves[3].energy[k] - 1e-12 && e->curves[3].dims[k] == e->curves[0].dims[k],
                  "RoRoPE keeps at least the strongest heads' energy at %g dims", e->curves[0].dims[k]);
        for (size_t c = 0; c < e->n_curves; c++) CHECK_NEAR(e->curves[c].energy[e->curves[c].n - 1], 1.0, 1e-9);
    }
    tmla_rope_energy_free(e);
    model_free(m);
    /* refusals */
    /* a sliding window converts now (the converted layers keep it: test_convert_windows.c) */
    const char *bad[][2] = {{"\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}", "rope_scaling type 'dynamic'"},
                            {NULL, "per-head Q/K RMSNorm"}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, "%s/bad%zu", tmp, i);
        TuModel b = tm;
        b.model_type = "mistral";
        b.extra_config = bad[i][0];
        b.qk_norm = bad[i][0] == NULL;
        b.layers = 1;
        CHECK_OK(tu_write_model(dir, &b));
        /* the writer names Llama's architecture; model_type decides the family */
        Model *bm = NULL;
        CHECK_OK(model_open(dir, &bm));
        o = tmla_opts_default();
        if (bm) CHECK_ERR(tmla_resolve_opts(bm, &o), bad[i][1]);
        model_free(bm);
    }
    /* partial rotary is converted now (test_transmla_partial.c): the RoPE dims default to the 4
     * rotary dims of a head of 8 */
    snprintf(dir, sizeof dir, "%s/partial", tmp);
    TuModel pm = tm;
    pm.model_type = "mistral";
    pm.extra_config = "\"partial_rotary_factor\": 0.5";
    pm.layers = 1;
    CHECK_OK(tu_write_model(dir, &pm));
    Model *bm = NULL;
    CHECK_OK(model_open(dir, &bm));
    o = tmla_opts_default();
    if (bm) CHECK_OK(tmla_resolve_opts(bm, &o));
    CHECK(o.rope_dim == 4 && o.freqfold == 1, "partial rotary: rope-dim %d freqfold %d", o.rope_dim, o.freqfold);
    model_free(bm);
}

static void test_stories(void) {
    const char *dir = getenv("ATTNLAB_MODELS");
    char hf[4096], bin[4096];
    snprintf(hf, sizeof hf, "%s/stories260K-hf", dir ? dir : "");
    snprintf(bin, sizeof bin, "%s/stories260K/stories260K.bin", dir ? dir : "");
    struct stat sb;
    if (!dir || stat(hf, &sb) || stat(bin, &sb)) { printf("stories260K not found: real-model checks skipped\n"); return; }
    Model *a = NULL, *b = NULL;
    CHECK_OK(model_open(hf, &a));
    CHECK_OK(model_open(bin, &b));
    if (a && b) {
        AttnLayer *L = NULL;
        CHECK_OK(attn_layer_load(a, 2, &L));
        AttnLayer *R = L ? stage(L, 1, true, NULL) : NULL;
        double se, oe;
        if (R) {
            tu_errs(L, R, &se, &oe);
            CHECK(se < 1e-5 && oe < 1e-5, "stories260K layer 2: merge + RoRoPE + scale fold not exact: %.3g %.3g", se, oe);
        }
        attn_layer_free(L);
        attn_layer_free(R);
        TmlaOpts o = tmla_opts_default();
        o.kv_rank = 32;
        TmlaResult *ra = NULL, *rb = NULL;
        CHECK_OK(tmla_convert(a, &o, &ra));
        CHECK_OK(tmla_convert(b, &o, &rb));
        for (int l = 0; ra && rb && l < 5; l++) {
            printf("stories260K layer %d: alpha %.3f rope energy %.4f joint %.4f scores %.4g outputs %.4g "
                   "(unbalanced %.4g)\n", l, ra->rep[l].alpha, ra->rep[l].rope_energy, ra->rep[l].joint_energy,
                   ra->rep[l].score_err, ra->rep[l].out_err, ra->rep[l].out_err_alt);
            CHECK_NEAR(ra->rep[l].rope_energy, rb->rep[l].rope_energy, 1e-6);
            CHECK_NEAR(ra->rep[l].joint_energy, rb->rep[l].joint_energy, 1e-6);
            CHECK_NEAR(ra->rep[l].out_err, rb->rep[l].out_err, 1e-3 * ra->rep[l].out_err + 1e-6);
            CHECK(ra->rep[l].out_err > 0 && ra->rep[l].out_err < 1, "layer %d error %g", l, ra->rep[l].out_err);
        }
        tmla_result_free(ra);
        tmla_result_free(rb);
    }
    model_free(a);
    model_free(b);
    char g2[4096];
    snprintf(g2, sizeof g2, "%s/gpt2-tiny-random", dir);
    Model *g = NULL;
    if (stat(g2, &sb) == 0 && model_open(g2, &g) == AL_OK) {
        TmlaOpts o = tmla_opts_default();
        CHECK_ERR(tmla_resolve_opts(g, &o), "has no RoPE");
    }
    model_free(g);
}

/* A Qwen2 checkpoint (q/k/v biases) with identical KV heads: the NoPE keys carry no energy, so
 * balancing must leave alpha at 1 (dividing rounding noise by alpha ~ 1e-17 lost the values), and
 * kv-rank full -- and even the G dv / G = 8 distinct value dims -- is exact. */
static void test_bias_identical(const char *tmp) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/qwen2-ident", tmp);
    TuModel tm = {.model_type = "qwen2", .layers = 2, .hidden = 32, .heads = 4, .kv_heads = 2, .head_dim = 8,
                  .inter = 24, .vocab = 40, .identical_kv = true, .dtype = DT_F32};
    tu_seed = 4000;               /* a draw where the NoPE keys' rounding noise gave alpha ~ 1e-17 */
    CHECK_OK(tu_write_model(dir, &tm));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    if (!m) return;
    int ranks[2] = {TMLA_FULL, 8};
    for (int k = 0; k < 2; k++) {
        TmlaOpts o = tmla_opts_default();
        o.kv_rank = ranks[k];
        TmlaResult *r = NULL;
        CHECK_OK(tmla_convert(m, &o, &r));
        for (int l = 0; r && l < r->n_layers; l++) {
            AttnLayer *gqa = NULL;
            CHECK_OK(attn_layer_load(m, l, &gqa));
            CHECK(gqa && gqa->b_K && gqa->b_V, "layer %d has key and value biases", l);
            double se = INFINITY, oe = INFINITY;
            if (gqa) tu_errs(gqa, r->layers[l], &se, &oe);
            CHECK(se < 1e-5 && oe < 1e-5, "kv-rank %d, layer %d: identical KV heads with biases: scores %.3g, outputs %.3g",
                  ranks[k], l, se, oe);
            CHECK(r->rep[l].alpha == 1, "kv-rank %d, layer %d: no NoPE key energy, yet alpha %.3g", ranks[k], l,
                  r->rep[l].alpha);
            CHECK(r->rep[l].out_err < 1e-5, "kv-rank %d, layer %d: reported output error %.3g", ranks[k], l,
                  r->rep[l].out_err);
            attn_layer_free(gqa);
        }
        tmla_result_free(r);
    }
    model_free(m);
}

int main(void) {
    const char *tmp = test_tmpdir();
    test_exact_steps(ROPE_HALF, false, "rotate_half");
    test_exact_steps(ROPE_INTERLEAVED, false, "interleaved");
    test_exact_steps(ROPE_HALF, true, "Qwen2 biases");
    test_exact_pipeline();
    test_errors_grow();
    test_balance();
    test_q_rank();
    test_sigma();
    test_models(tmp);
    test_stories();
    test_bias_identical(tmp);     /* last: the random layers above depend on tu_seed's sequence */
    return check_done();
}
