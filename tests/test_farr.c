/* test_farr.c -- FaRR numerics: the seed's parameter accounting on a planted 1536x128 / 512x128
 * head pair, group truncation against dense references (single head = truncated SVD; GQA stacks
 * = projection onto a shared basis), RoPE offsets, per-layer ranks of the demo models against
 * their planted ranks (core/methods/synth.c), truncation policies and accounting, the session cache, and
 * the real small checkpoints (skipped when absent). */
#define TU_RNG_SEED 0x2545F4914F6CDD1DULL
#include "farr_internal.h"
#include "testutil.h"
#include "farr.h"
#include "synth.h"
#include "safetensors.h"
#include "attn_eval.h"
#include "export.h"

#include <sys/stat.h>

#include <cblas.h>

/* ---------------------------------------------------------------- random helpers */

/* M (a x b) = X (a x r) Yᵀ with Y (b x r), X and Y given by column lists of a wider basis. */
static Mat *outer(const double *X, size_t a, size_t xs, const double *Y, size_t b, size_t ys,
                  const size_t *xc, const size_t *yc, size_t r) {
    Mat *M = mat_new(a, b);
    for (size_t i = 0; i < a; i++)
        for (size_t j = 0; j < b; j++) {
            double v = 0;
            for (size_t t = 0; t < r; t++) v += X[i * xs + xc[t]] * Y[j * ys + yc[t]];
            M->data[i * b + j] = (float)v;
        }
    return M;
}

/* Dense fused map in double: A @ B (op SPECTRA_AB) or A @ Bᵀ; caller frees. */
static double *dense_product(const Mat *A, const Mat *B, spectra_op op, size_t *m, size_t *n) {
    size_t k = A->cols;
    *m = A->rows;
    *n = op == SPECTRA_AB ? B->cols : B->rows;
    double *F = calloc(*m * *n, sizeof(double));
    for (size_t i = 0; i < *m; i++)
        for (size_t a = 0; a < k; a++) {
            double x = A->data[i * k + a];
            for (size_t j = 0; j < *n; j++)
                F[i * *n + j] += x * (op == SPECTRA_AB ? B->data[a * *n + j] : B->data[j * k + a]);
        }
    return F;
}

static double fro2(const double *F, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += F[i] * F[i];
    return s;
}

/* ---------------------------------------------------------------- the seed's accounting */

/* A query head Q (1536x128) and key head K (512x128), each of exact rank 72 with equal singular
 * values, sharing 41 of their 72 head-space directions: Q Kᵀ has rank 41. Reproduces seed 000
 * sections 1.5 / 2.2: 262,144 parameters before, 165,888 after separate truncation at 72, 83,968
 * after FaRR at 41. */
static void test_seed_accounting(void) {
    size_t dq = 1536, dk = 512, d = 128;
    double *E = orth(d, 103);                 /* head-space basis: 41 shared + 31 Q-only + 31 K-only */
    double *Uq = orth(dq, 72), *Uk = orth(dk, 72);
    size_t qc[72], kc[72], hq[72], hk[72];
    for (size_t t = 0; t < 72; t++) {
        qc[t] = kc[t] = t;
        hq[t] = t < 41 ? t : t;               /* E columns 0..71 */
        hk[t] = t < 41 ? t : t + 31;          /* E columns 0..40, 72..102 */
    }
    Mat *Q = outer(Uq, dq, 72, E, d, 103, qc, hq, 72);
    Mat *K = outer(Uk, dk, 72, E, d, 103, kc, hk, 72);
    Spectrum *f = NULL, *sq = NULL, *sk = NULL;
    CHECK_OK(spectra_product_svd(Q, K, SPECTRA_ABT, 0, &f, &sq, &sk));
    size_t rq = spectra_effective_rank(sq->sigma, sq->p, 0.999), rk = spectra_effective_rank(sk->sigma, sk->p, 0.999);
    size_t rf = spectra_effective_rank(f->sigma, f->p, 0.999);
    CHECK(rq == 72 && rk == 72 && rf == 41, "planted ranks Q %zu K %zu QK %zu (want 72 72 41)", rq, rk, rf);
    CHECK(farr_params_pair(dq, dk, d) == 262144, "before: %zu", farr_params_pair(dq, dk, d));
    CHECK(farr_params_separate(dq, rq, dk, rk, d) == 165888, "separate: %zu", farr_params_separate(dq, rq, dk, rk, d));
    CHECK(farr_params_fused(dq, dk, rf) == 83968, "FaRR: %zu", farr_params_fused(dq, dk, rf));

    /* The same through the truncation path: group of one head, rank from tau. */
    const Mat *heads[1] = { Q };
    FarrGroup *g = NULL;
    CHECK_OK(farr_group_analyse(FARR_QK, K, heads, 1, 0.999, &g));
    if (g) {
        CHECK(g->rank_tau == 41, "group rank at 0.999: %d", g->rank_tau);
        CHECK_OK(farr_group_split(g, FARR_QK, K, heads, g->rank_tau));
        CHECK(g->shared->rows == dk && g->shared->cols == 41, "K' is %zux%zu", g->shared->rows, g->shared->cols);
        CHECK(g->head[0]->rows == dq && g->head[0]->cols == 41, "Q' is %zux%zu", g->head[0]->rows, g->head[0]->cols);
        size_t params = g->shared->rows * g->shared->cols + g->head[0]->rows * g->head[0]->cols;
        CHECK(params == 83968, "FaRR factors hold %zu parameters", params);
        /* Q' K'ᵀ reproduces Q Kᵀ (rank 41 exactly). */
        size_t m, n, m2, n2;
        double *F = dense_product(Q, K, SPECTRA_ABT, &m, &n);
        double *F2 = dense_product(g->head[0], g->shared, SPECTRA_ABT, &m2, &n2);
        double diff = 0;
        for (size_t i = 0; i < m * n; i++) diff += (F[i] - F2[i]) * (F[i] - F2[i]);
        CHECK(sqrt(diff / fro2(F, m * n)) < 1e-5, "QK reproduced to %.3g", sqrt(diff / fro2(F, m * n)));
        CHECK_NEAR(g->energy[0], 1.0, 1e-9);
        free(F); free(F2);
    }
    farr_group_free(g);
    spectrum_free(f); spectrum_free(sq); spectrum_free(sk);
    mat_free(Q); mat_free(K);
    free(E); free(Uq); free(Uk);
}

/* ---------------------------------------------------------------- groups vs dense */

/* One head: the split at r is the rank-r truncated SVD: error^2 = tail energy, and the fused map
 * of the factors equals U_r diag(sigma_r) V_rᵀ from a dense SVD. */
static void test_single_head_split(farr_kind kind) {
    Mat *S = randn(40, 12, 1.0);
    Mat *P = kind == FARR_VO ? randn(12, 50, 0.5) : randn(30, 12, 0.5);
    for (size_t i = 0; i < S->rows; i++) for (size_t j = 0; j < 12; j++) S->data[i * 12 + j] *= (float)exp(-0.3 * j);
    const Mat *heads[1] = { P };
    FarrGroup *g = NULL;
    CHECK_OK(farr_group_analyse(kind, S, heads, 1, 0.99, &g));
    /* Dense reference of the fused map in the group's orientation: VO: S P; QK: S Pᵀ (= (Q Kᵀ)ᵀ). */
    Spectrum *ref = NULL;
    CHECK_OK(spectra_dense_product_svd(S, P, kind == FARR_VO ? SPECTRA_AB : SPECTRA_ABT, 0, &ref));
    if (g && ref) {
        CHECK((size_t)g->rank_tau == spectra_effective_rank(ref->sigma, ref->p, 0.99), "rank %d vs dense %zu",
              g->rank_tau, spectra_effective_rank(ref->sigma, ref->p, 0.99));
        int r = 5;
        CHECK_OK(farr_group_split(g, kind, S, heads, r));
        double tail = 0;
        for (size_t j = (size_t)r; j < ref->p; j++) tail += ref->sigma[j] * ref->sigma[j];
        size_t m, n;
        double *F = kind == FARR_VO ? dense_product(S, P, SPECTRA_AB, &m, &n) : dense_product(P, S, SPECTRA_ABT, &m, &n);
        double *F2 = kind == FARR_VO ? dense_product(g->shared, g->head[0], SPECTRA_AB, &m, &n)
                                     : dense_product(g->head[0], g->shared, SPECTRA_ABT, &m, &n);
        double diff = 0;
        for (size_t i = 0; i < m * n; i++) diff += (F[i] - F2[i]) * (F[i] - F2[i]);
        CHECK(fabs(diff - tail) < 1e-5 * ref->total, "split error %.6g vs tail energy %.6g", diff, tail);
        CHECK_NEAR(g->err[0], sqrt(tail / ref->total), 1e-5);
        CHECK_NEAR(g->energy[0], 1 - tail / ref->total, 1e-6);
        /* The shared factor has orthonormal columns (what a cache stores). */
        double worst = 0;
        for (int a = 0; a < r; a++)
            for (int b = 0; b < r; b++) {
                double d = 0;
                for (size_t i = 0; i < g->shared->rows; i++)
                    d += (double)g->shared->data[i * r + a] * g->shared->data[i * r + b];
                if (fabs(d - (a == b)) > worst) worst = fabs(d - (a == b));
            }
        CHECK(worst < 1e-5, "shared factor orthonormal (off by %.3g)", worst);
        free(F); free(F2);
    }
    farr_group_free(g);
    spectrum_free(ref);
    mat_free(S); mat_free(P);
}

/* GQA: a group of 4 heads sharing S. The rank at tau keeps >= tau of EVERY head's energy and is
 * minimal; each head's reported error matches the dense error of its projected map. */
static void test_group_stack(farr_kind kind) {
    int n = 4;
    Mat *S = randn(48, 16, 1.0);
    for (size_t i = 0; i < S->rows; i++) for (size_t j = 0; j < 16; j++) S->data[i * 16 + j] *= (float)exp(-0.2 * j);
    Mat *P[4];
    for (int i = 0; i < n; i++) P[i] = kind == FARR_VO ? randn(16, 40, 1.0 + i) : randn(36, 16, 1.0 + i);
    const Mat *heads[4] = { P[0], P[1], P[2], P[3] };
    double tau = 0.97;
    FarrGroup *g = NULL;
    CHECK_OK(farr_group_analyse(kind, S, heads, n, tau, &g));
    if (!g) goto out;
    int rt = g->rank_tau;
    CHECK(rt >= 1 && rt <= 16, "rank at tau %d", rt);
    /* Minimality: at rt every head keeps >= tau; at rt-1 some head does not. */
    double min_at = 1, min_below = 1;
    for (int i = 0; i < n; i++) {
        if (g->cum[(size_t)i * g->p + rt - 1] < min_at) min_at = g->cum[(size_t)i * g->p + rt - 1];
        if (rt > 1 && g->cum[(size_t)i * g->p + rt - 2] < min_below) min_below = g->cum[(size_t)i * g->p + rt - 2];
    }
    CHECK(min_at >= tau, "every head keeps tau at the group rank (%.6f)", min_at);
    CHECK(rt == 1 || min_below < tau, "the group rank is minimal (%.6f at r-1)", min_below);
    CHECK_OK(farr_group_split(g, kind, S, heads, rt));
    for (int i = 0; i < n; i++) {
        size_t m, nn;
        double *F = kind == FARR_VO ? dense_product(S, P[i], SPECTRA_AB, &m, &nn) : dense_product(P[i], S, SPECTRA_ABT, &m, &nn);
        double *F2 = kind == FARR_VO ? dense_product(g->shared, g->head[i], SPECTRA_AB, &m, &nn)
                                     : dense_product(g->head[i], g->shared, SPECTRA_ABT, &m, &nn);
        double diff = 0;
        for (size_t t = 0; t < m * nn; t++) diff += (F[t] - F2[t]) * (F[t] - F2[t]);
        double err = sqrt(diff / fro2(F, m * nn));
        CHECK(fabs(err - g->err[i]) < 1e-4, "head %d: dense error %.6f vs reported %.6f", i, err, g->err[i]);
        CHECK(g->energy[i] >= tau, "head %d keeps %.6f", i, g->energy[i]);
        free(F); free(F2);
    }
    /* At full rank every map is reproduced. */
    FarrGroup *g2 = NULL;
    CHECK_OK(farr_group_analyse(kind, S, heads, n, tau, &g2));
    if (g2) {
        CHECK_OK(farr_group_split(g2, kind, S, heads, 16));
        for (int i = 0; i < n; i++) CHECK(g2->err[i] < 1e-6, "full rank error %.3g", g2->err[i]);
    }
    farr_group_free(g2);
out:
    farr_group_free(g);
    mat_free(S);
    for (int i = 0; i < n; i++) mat_free(P[i]);
}

/* ---------------------------------------------------------------- RoPE */

/* q R_a (k R_b)ᵀ depends only on b - a; rotation keeps each pair's norm; p = 0 is the identity. */
static void test_rope(void) {
    for (int layout = ROPE_HALF; layout <= ROPE_INTERLEAVED; layout++) {
        Mat *Q = randn(6, 16, 1.0), *K = randn(5, 16, 1.0);
        Mat *Q1 = mat_copy(Q), *K1 = mat_copy(K), *Q2 = mat_copy(Q), *K2 = mat_copy(K), *Q0 = mat_copy(Q);
        farr_rope_rotate(Q0, (rope_layout)layout, 10000.0, 0);
        CHECK(memcmp(Q0->data, Q->data, 6 * 16 * sizeof(float)) == 0, "p = 0 is the identity");
        farr_rope_rotate(Q1, (rope_layout)layout, 10000.0, 3);
        farr_rope_rotate(K1, (rope_layout)layout, 10000.0, 8);
        farr_rope_rotate(K2, (rope_layout)layout, 10000.0, 5);
        size_t m, n;
        double *F1 = dense_product(Q1, K1, SPECTRA_ABT, &m, &n), *F2 = dense_product(Q2, K2, SPECTRA_ABT, &m, &n);
        double worst = 0;
        for (size_t i = 0; i < m * n; i++) if (fabs(F1[i] - F2[i]) > worst) worst = fabs(F1[i] - F2[i]);
        CHECK(worst < 1e-4, "relative position: scores differ by %.3g", worst);
        CHECK_NEAR(mat_fro(Q1), mat_fro(Q), 1e-4);
        free(F1); free(F2);
        /* Distinct offsets give distinct maps. */
        CHECK(memcmp(K1->data, K2->data, 5 * 16 * sizeof(float)) != 0, "offsets differ");
        mat_free(Q); mat_free(K); mat_free(Q1); mat_free(K1); mat_free(Q2); mat_free(K2); mat_free(Q0);
    }
}

/* ---------------------------------------------------------------- demo models */

static const char *tmp_root;

static Model *open_demo(const char *name) { return tu_open_synth(tmp_root, name, SYNTH_DEFAULT_SEED); }

typedef struct { int a, b, f; } Want;

/* Checks one layer's ranks at 0.999 against want(h), and a few heads' fused spectra against a
 * dense product SVD. */
static void check_layer(Model *m, farr_kind kind, int layer, Want (*want)(int layer, int h)) {
    FarrLayer *l = NULL;
    CHECK_OK(farr_layer_compute(m, kind, layer, FARR_NO_OFFSET, &l));
    if (!l) return;
    for (int h = 0; h < l->n_heads; h++) {
        int ra, rb, rf;
        farr_layer_ranks(l, h, 0.999, &ra, &rb, &rf);
        Want w = want(layer, h);
        CHECK(ra == w.a && rb == w.b && rf == w.f, "%s %s layer %d head %d: ranks %d %d %d, planted %d %d %d",
              m->cfg.model_type, farr_kind_name(kind), layer, h, ra, rb, rf, w.a, w.b, w.f);
    }
    for (int h = 0; h < l->n_heads; h += 3) {
        Mat *A, *B;
        spectra_op op;
        CHECK_OK(farr_head_factors(m, kind, layer, h, FARR_NO_OFFSET, &A, &B, &op));
        Spectrum *ref = NULL;
        CHECK_OK(spectra_dense_product_svd(A, B, op, 0, &ref));
        const Spectrum *s = l->fused[h];
        int bad = 0;
        for (size_t i = 0; i < ref->p; i++) {
            double g = i < s->p ? s->sigma[i] : 0;
            if (fabs(g - ref->sigma[i]) > 1e-5 * ref->sigma[0]) bad++;
            if (ref->sigma[i] > 1e-3 * ref->sigma[0] && fabs(g - ref->sigma[i]) > 1e-4 * ref->sigma[i]) bad++;
        }
        CHECK(bad == 0, "layer %d head %d: %d singular values off the dense reference", layer, h, bad);
        spectrum_free(ref);
        mat_free(A); mat_free(B);
    }
    farr_layer_free(l);
}

/* demo-r1's planted ranks at 0.999 (core/methods/synth.c header). */
static Want r1_vo(int L, int h) {
    switch (L) {
    case 1: return h % 2 == 0 ? (Want){6, 32, 6} : (Want){32, 32, 32};
    case 2: return (Want){31, 31, 4};
    case 3: return h % 2 == 0 ? (Want){6, 32, 6} : (Want){31, 31, 3};
    default: return (Want){32, 32, 32};
    }
}
static Want r1_qk(int L, int h) {
    switch (L) {
    case 1: return (Want){32, 8, 8};
    case 2: return (Want){31, 31, 4};
    case 3: return (Want){32, 2 * (h + 1), 2 * (h + 1)};
    default: return (Want){32, 32, 32};
    }
}
static Want llama_vo(int L, int h) {
    if (L == 1) return h < 4 ? (Want){6, 32, 6} : (Want){32, 32, 32};
    return (Want){31, 31, 4};
}

static void test_demo_r1(void) {
    Model *m = open_demo("demo-r1-f32");
    if (!m) return;
    for (int L = 1; L <= 4; L++) {
        check_layer(m, FARR_VO, L, r1_vo);
        check_layer(m, FARR_QK, L, r1_qk);
    }
    /* An offset is refused on a partial-RoPE model (its NoPE part fuses exactly). */
    FarrLayer *l = NULL;
    CHECK_ERR(farr_layer_compute(m, FARR_QK, 1, 4, &l), "partial RoPE");

    /* Truncation policies on layers 1-3, VO at 0.999. */
    FarrTruncOpts o = { .kind = FARR_VO, .tau = 0.999, .policy = FARR_POLICY_HEAD, .layer_lo = 1, .layer_hi = 3 };
    FarrPlan *p = NULL;
    CHECK_OK(farr_truncate(m, &o, &p));
    if (p) {
        const ModelConfig *c = &m->cfg;
        for (int L = 1; L <= 3; L++) {
            const FarrTruncLayer *tl = farr_plan_layer(p, L);
            size_t after = 0;
            for (int h = 0; h < c->n_heads; h++) {
                int idx;
                const FarrGroup *g = farr_plan_head(p, c, L, h, &idx);
                CHECK(g->rank == r1_vo(L, h).f, "head policy layer %d head %d: rank %d, want %d", L, h, g->rank, r1_vo(L, h).f);
                CHECK(g->energy[idx] >= 0.999, "energy %.6f", g->energy[idx]);
                CHECK(g->shared->rows == (size_t)c->kv_lora_rank && g->shared->cols == (size_t)g->rank, "V' shape");
                CHECK(g->head[idx]->rows == (size_t)g->rank && g->head[idx]->cols == (size_t)c->hidden, "O' shape");
                after += (size_t)g->rank * ((size_t)c->kv_lora_rank + (size_t)c->hidden);
            }
            size_t before = (size_t)c->n_heads * (size_t)c->v_dim * ((size_t)c->kv_lora_rank + (size_t)c->hidden);
            CHECK(tl->params_before == before, "layer %d params before %zu want %zu", L, tl->params_before, before);
            CHECK(tl->params_after == after, "layer %d params after %zu want %zu", L, tl->params_after, after);
            CHECK(tl->kv_before == 0 && tl->kv_after == 0, "MLA caches the latent: no KV change");
            if (L == 1) CHECK(tl->err_max < 1e-4, "bottleneck/flat heads are exact (err %.3g)", tl->err_max);
            CHECK(tl->energy_min >= 0.999 && tl->energy_mean >= tl->energy_min, "energy stats");
        }
        CHECK(!p->uniform && p->rank_max == 32, "head policy: mixed ranks, max %d", p->rank_max);
    }
    farr_plan_free(p);
    o.policy = FARR_POLICY_LAYER_MAX;
    CHECK_OK(farr_truncate(m, &o, &p));
    if (p) {
        int want[4] = {0, 32, 4, 6};
        for (int L = 1; L <= 3; L++) {
            const FarrTruncLayer *tl = farr_plan_layer(p, L);
            for (int g = 0; g < tl->n_kv; g++)
                CHECK(tl->groups[g]->rank == want[L], "layer-max layer %d: rank %d want %d", L, tl->groups[g]->rank, want[L]);
        }
    }
    farr_plan_free(p);
    o.policy = FARR_POLICY_MODEL_MAX;
    o.layer_lo = 2; o.layer_hi = 3;
    CHECK_OK(farr_truncate(m, &o, &p));
    if (p) {
        CHECK(p->uniform && p->rank_max == 6, "model-max over layers 2-3: uniform %d rank %d", p->uniform, p->rank_max);
        CHECK(p->energy_min >= 0.999, "model-max keeps tau everywhere (%.6f)", p->energy_min);
        CHECK(p->params_after < p->params_before, "parameters go down");
    }
    farr_plan_free(p);
    /* Fixed rank, QK (NoPE part): shapes and accounting. */
    FarrTruncOpts oq = { .kind = FARR_QK, .by_rank = true, .rank = 8, .policy = FARR_POLICY_HEAD, .layer_lo = 1, .layer_hi = 1 };
    CHECK_OK(farr_truncate(m, &oq, &p));
    if (p) {
        const ModelConfig *c = &m->cfg;
        const FarrTruncLayer *tl = farr_plan_layer(p, 1);
        CHECK(tl->err_max < 1e-4, "QK layer 1 has K NoPE rank 8: rank 8 is exact (err %.3g)", tl->err_max);
        size_t H = (size_t)c->n_heads, nope = (size_t)c->qk_nope_dim;
        size_t before = H * nope * ((size_t)c->q_lora_rank + (size_t)c->kv_lora_rank);
        CHECK(tl->params_before == before, "QK params before %zu want %zu", tl->params_before, before);
        CHECK(tl->params_after == H * 8 * ((size_t)c->q_lora_rank + (size_t)c->kv_lora_rank), "QK params after %zu", tl->params_after);
        CHECK(tl->groups[0]->head[0]->rows == (size_t)c->q_lora_rank && tl->groups[0]->head[0]->cols == 8, "Q' shape");
    }
    farr_plan_free(p);
    model_free(m);
}

static void test_demo_llama(void) {
    Model *m = open_demo("demo-llama");
    if (!m) return;
    check_layer(m, FARR_VO, 1, llama_vo);
    check_layer(m, FARR_VO, 2, llama_vo);
    FarrLayer *l = NULL;
    CHECK_ERR(farr_layer_compute(m, FARR_QK, 0, FARR_NO_OFFSET, &l), "seed 000, A.3");
    FarrTruncOpts oq = { .kind = FARR_QK, .tau = 0.999 };
    FarrPlan *p = NULL;
    CHECK_ERR(farr_truncate(m, &oq, &p), "A.3");
    /* With an offset: Q at p=0, K at p=D; D = 0 is the plain (unrotated) product. */
    CHECK_OK(farr_layer_compute(m, FARR_QK, 0, 0, &l));
    if (l) {
        Mat *Q, *K;
        CHECK_OK(model_head(m, HK_Q, 0, 5, PART_ALL, &Q));
        CHECK_OK(model_head(m, HK_K, 0, cfg_kv_group(&m->cfg, 5), PART_ALL, &K));
        Spectrum *ref = NULL;
        CHECK_OK(spectra_dense_product_svd(Q, K, SPECTRA_ABT, 0, &ref));
        CHECK_NEAR(l->fused[5]->sigma[0], ref->sigma[0], 1e-5 * ref->sigma[0]);
        spectrum_free(ref);
        farr_rope_rotate(K, m->cfg.rope, m->cfg.rope_theta, 7);
        FarrLayer *l7 = NULL;
        CHECK_OK(farr_layer_compute(m, FARR_QK, 0, 7, &l7));
        CHECK_OK(spectra_dense_product_svd(Q, K, SPECTRA_ABT, 0, &ref));
        if (l7 && ref) {
            CHECK_NEAR(l7->fused[5]->sigma[0], ref->sigma[0], 1e-5 * ref->sigma[0]);
            CHECK_NEAR(l7->fused[5]->sigma[10], ref->sigma[10], 1e-5 * ref->sigma[0]);
        }
        spectrum_free(ref);
        farr_layer_free(l7);
        mat_free(Q); mat_free(K);
        farr_layer_free(l);
    }
    /* GQA VO truncation: a group's V serves its 4 query heads. Layer 1: group 0 has V rank 6
     * (heads 0-3 fused 6), group 1 flat (32). KV cache: values per token 2 x 32 -> 6 + 32. */
    FarrTruncOpts o = { .kind = FARR_VO, .tau = 0.999, .policy = FARR_POLICY_HEAD, .layer_lo = 1, .layer_hi = 2 };
    CHECK_OK(farr_truncate(m, &o, &p));
    if (p) {
        const FarrTruncLayer *t1 = farr_plan_layer(p, 1), *t2 = farr_plan_layer(p, 2);
        CHECK(t1->groups[0]->rank == 6 && t1->groups[1]->rank == 32, "layer 1 group ranks %d %d",
              t1->groups[0]->rank, t1->groups[1]->rank);
        CHECK(t1->kv_before == 64 && t1->kv_after == 38, "KV values per token %zu -> %zu", t1->kv_before, t1->kv_after);
        CHECK(t1->err_max < 1e-4, "exact planted ranks: err %.3g", t1->err_max);
        CHECK(t2->groups[0]->rank == 4 && t2->groups[1]->rank == 4, "layer 2 fused-low groups: %d %d",
              t2->groups[0]->rank, t2->groups[1]->rank);
        CHECK(t2->energy_min >= 0.999, "every head of each group keeps tau (%.6f)", t2->energy_min);
        const ModelConfig *c = &m->cfg;
        size_t before = 2 * (size_t)c->hidden * 32 + 8 * 32 * (size_t)c->hidden;
        CHECK(t1->params_before == before, "GQA params before %zu want %zu", t1->params_before, before);
        size_t after = (size_t)c->hidden * (6 + 32) + 4 * 6 * (size_t)c->hidden + 4 * 32 * (size_t)c->hidden;
        CHECK(t1->params_after == after, "GQA params after %zu want %zu", t1->params_after, after);
        CHECK(p->kv_before == 128 && p->kv_after == 38 + 8, "total KV %zu -> %zu", p->kv_before, p->kv_after);
    }
    farr_plan_free(p);
    model_free(m);
}

static Want gpt2_vo(int L, int h) { return L == 1 ? r1_vo(1, h) : (Want){31, 31, 4}; }
static Want gpt2_qk(int L, int h) { (void)h; return L == 1 ? (Want){32, 8, 8} : (Want){31, 31, 4}; }

static void test_demo_gpt2(void) {
    Model *m = open_demo("demo-gpt2");
    if (!m) return;
    check_layer(m, FARR_VO, 1, gpt2_vo);
    check_layer(m, FARR_VO, 2, gpt2_vo);
    check_layer(m, FARR_QK, 1, gpt2_qk);
    check_layer(m, FARR_QK, 2, gpt2_qk);
    /* QK truncation without RoPE shrinks the key cache: 8 heads x 32 -> 8 x 8 on layer 1. */
    FarrTruncOpts o = { .kind = FARR_QK, .tau = 0.999, .policy = FARR_POLICY_LAYER_MAX, .layer_lo = 1, .layer_hi = 1 };
    FarrPlan *p = NULL;
    CHECK_OK(farr_truncate(m, &o, &p));
    if (p) {
        const FarrTruncLayer *tl = farr_plan_layer(p, 1);
        CHECK(tl->kv_before == 256 && tl->kv_after == 64, "key cache %zu -> %zu", tl->kv_before, tl->kv_after);
        CHECK(tl->head_bias && tl->shared_bias, "GPT-2 biases carried over");
    }
    farr_plan_free(p);
    model_free(m);
}

/* ---------------------------------------------------------------- the session cache */

static void test_state(void) {
    Model *m = open_demo("demo-r1-f32");
    if (!m) return;
    FarrState *st = farr_state_new();
    const FarrLayer *l = NULL, *l2 = NULL;
    CHECK(farr_state_get_layer(st, m, FARR_VO, 2, FARR_NO_OFFSET) == NULL, "empty cache");
    CHECK_OK(farr_state_layer(st, m, FARR_VO, 2, FARR_NO_OFFSET, &l));
    CHECK_OK(farr_state_layer(st, m, FARR_VO, 2, FARR_NO_OFFSET, &l2));
    size_t hits, computed;
    farr_state_stats(st, &hits, &computed);
    CHECK(l == l2 && hits == 1 && computed == 1, "asking again is a cache hit (%zu hits, %zu computed)", hits, computed);
    CHECK(farr_state_get_layer(st, m, FARR_VO, 2, FARR_NO_OFFSET) == l, "get_layer finds it");
    CHECK(farr_state_get_layer(st, m, FARR_QK, 2, FARR_NO_OFFSET) == NULL, "other kind not cached");
    /* A different tau reads the same spectra: ranks differ, nothing stale. */
    int r999, r99;
    farr_layer_ranks(l, 0, 0.999, NULL, NULL, &r999);
    farr_layer_ranks(l, 0, 0.99, &r99, NULL, NULL);
    CHECK(r999 == 4 && r99 == 19, "ranks from cached spectra: fused@0.999 %d, V@0.99 %d", r999, r99);
    FarrQuery vo = { .m = m, .kind = FARR_VO, .lo = 0, .hi = 5, .offset = FARR_NO_OFFSET };
    CHECK_OK(farr_state_sweep(st, &vo));
    farr_state_stats(st, &hits, &computed);
    CHECK(computed == 6 && hits == 2, "sweep computed the 5 missing layers (%zu computed, %zu hits)", computed, hits);
    FarrRankRow *rows = NULL;
    size_t nrows = 0;
    vo.lo = 1, vo.hi = 3;
    CHECK_OK(farr_state_rank_table(st, &vo, 0.999, &rows, &nrows));
    CHECK(nrows == 24 && rows[0].layer == 1 && rows[nrows - 1].layer == 3, "rank table rows %zu, layers %d-%d of the query",
          nrows, rows ? rows[0].layer : -1, rows ? rows[nrows - 1].layer : -1);
    for (size_t i = 0; rows && i < nrows; i++) {
        Want w = r1_vo(rows[i].layer, rows[i].head);
        CHECK(rows[i].rank_a == w.a && rows[i].rank_b == w.b && rows[i].rank_fused == w.f,
              "rank table layer %d head %d", rows[i].layer, rows[i].head);
    }
    free(rows);
    FarrQuery qk = { .m = m, .kind = FARR_QK, .lo = 1, .hi = 1, .offset = FARR_NO_OFFSET };
    CHECK_ERR(farr_state_rank_table(st, &qk, 0.999, &rows, &nrows), "sweep it first");
    qk.lo = 0, qk.hi = 5;
    al_interrupt_flag = 1;
    CHECK(farr_state_sweep(st, &qk) == AL_INTERRUPTED, "Ctrl-C stops a sweep");
    al_interrupt_flag = 0;
    FarrTruncOpts o = { .kind = FARR_VO, .by_rank = true, .rank = 4, .layer_lo = 2, .layer_hi = 2 };
    FarrPlan *p = NULL;
    CHECK_OK(farr_truncate(m, &o, &p));
    if (p) {
        CHECK_OK(farr_state_set_plan(st, m, p));
        CHECK(farr_state_plan(st, m, FARR_VO) == p && farr_state_plan(st, m, FARR_QK) == NULL, "working copy kept");
    }
    farr_state_drop_model(st, m);
    CHECK(farr_state_get_layer(st, m, FARR_VO, 2, FARR_NO_OFFSET) == NULL, "dropped with its model");
    CHECK(farr_state_plan(st, m, FARR_VO) == NULL, "plan dropped with its model");
    farr_state_free(st);
    model_free(m);
}

/* ---------------------------------------------------------------- real checkpoints */

static void test_real(void) {
    const char *models = getenv("ATTNLAB_MODELS");
    if (!models) return;
    char *path = al_asprintf("%s/stories260K-hf", models);
    Model *m = NULL;
    if (model_open(path, &m) == AL_OK) {
        FarrLayer *l = NULL;
        CHECK_OK(farr_layer_compute(m, FARR_VO, 0, FARR_NO_OFFSET, &l));
        if (l) {
            for (int h = 0; h < l->n_heads; h++) {
                Mat *A, *B;
                spectra_op op;
                CHECK_OK(farr_head_factors(m, FARR_VO, 0, h, FARR_NO_OFFSET, &A, &B, &op));
                Spectrum *ref = NULL;
                CHECK_OK(spectra_dense_product_svd(A, B, op, 0, &ref));
                int rf;
                farr_layer_ranks(l, h, 0.999, NULL, NULL, &rf);
                CHECK((size_t)rf == spectra_effective_rank(ref->sigma, ref->p, 0.999), "stories260K head %d", h);
                CHECK_NEAR(l->fused[h]->sigma[0], ref->sigma[0], 1e-5 * ref->sigma[0]);
                spectrum_free(ref);
                mat_free(A); mat_free(B);
            }
        }
        farr_layer_free(l);
        model_free(m);
    } else {
        printf("note: %s not loadable (%s); skipped\n", path, al_errmsg());
    }
    free(path);
    path = al_asprintf("%s/gpt2-tiny-random", models);
    if (model_open(path, &m) == AL_OK) {
        FarrLayer *l = NULL;
        CHECK_OK(farr_layer_compute(m, FARR_QK, 0, FARR_NO_OFFSET, &l));
        if (l) CHECK(l->head_dim == 16 && l->fused[0]->p == 16, "gpt2 QK is the full 16-dim head");
        farr_layer_free(l);
        model_free(m);
    }
    free(path);
}


/* ---------------------------------------------------------------- partial rotary, Q/K norms */

/* Writes a one-layer checkpoint of layout `type` (gpt_neox: query_key_value head by head; qwen3:
 * split with q_norm / k_norm) with hidden 32, 4 heads of 8. The NoPE columns of every query head
 * (neox: dims 2-7 of each head, rotary_pct 0.25) are planted at rank 3: W_Q^h[:, 2:8] = A_h B_h. */
static Model *open_family(const char *type) {
    size_t D = 32, H = 4, d = 8, rot = 2;
    bool neox = strcmp(type, "gpt_neox") == 0;
    Mat *Wq = randn(H * d, D, 0.2), *Wk = randn(H * d, D, 0.2), *Wv = randn(H * d, D, 0.2), *Wo = randn(D, H * d, 0.2);
    for (size_t h = 0; h < H; h++) {
        Mat *A = randn(d - rot, 3, 1.0), *B = randn(3, D, 0.2);        /* rows (out) h d + 2.. of (out, in) */
        for (size_t i = 0; i < d - rot; i++)
            for (size_t j = 0; j < D; j++) {
                double v = 0;
                for (size_t k = 0; k < 3; k++) v += (double)*mat_at(A, i, k) * *mat_at(B, k, j);
                *mat_at(Wq, h * d + rot + i, j) = (float)v;
            }
        mat_free(A);
        mat_free(B);
    }
    st_writer *w = st_writer_new();
    if (neox) {
        Mat *qkv = mat_new(3 * H * d, D);             /* head h: rows [q_h ; k_h ; v_h] from 3 d h */
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < d; i++) {
                memcpy(mat_at(qkv, 3 * d * h + i, 0), mat_at(Wq, h * d + i, 0), D * sizeof(float));
                memcpy(mat_at(qkv, 3 * d * h + d + i, 0), mat_at(Wk, h * d + i, 0), D * sizeof(float));
                memcpy(mat_at(qkv, 3 * d * h + 2 * d + i, 0), mat_at(Wv, h * d + i, 0), D * sizeof(float));
            }
        Mat *qb = randn(1, 3 * H * d, 0.1), *ob = randn(1, D, 0.1);
        for (size_t i = 0; i < 3 * H * d; i++)   /* no query bias: its term b_Q W_Kᵀ x' lies outside a low-rank */
            if ((i / d) % 3 == 0) qb->data[i] = 0;   /* fused map's range (truncate keeps it only there) */
        CHECK_OK(st_writer_add_mat(w, "gpt_neox.layers.0.attention.query_key_value.weight", DT_F32, qkv));
        CHECK_OK(st_writer_add_mat(w, "gpt_neox.layers.0.attention.query_key_value.bias", DT_F32, qb));
        CHECK_OK(st_writer_add_mat(w, "gpt_neox.layers.0.attention.dense.weight", DT_F32, Wo));
        CHECK_OK(st_writer_add_mat(w, "gpt_neox.layers.0.attention.dense.bias", DT_F32, ob));
        mat_free(qkv); mat_free(qb); mat_free(ob);
    } else {
        Mat *nw = randn(1, d, 1.0);
        CHECK_OK(st_writer_add_mat(w, "model.layers.0.self_attn.q_proj.weight", DT_F32, Wq));
        CHECK_OK(st_writer_add_mat(w, "model.layers.0.self_attn.k_proj.weight", DT_F32, Wk));
        CHECK_OK(st_writer_add_mat(w, "model.layers.0.self_attn.v_proj.weight", DT_F32, Wv));
        CHECK_OK(st_writer_add_mat(w, "model.layers.0.self_attn.o_proj.weight", DT_F32, Wo));
        CHECK_OK(st_writer_add_mat(w, "model.layers.0.self_attn.q_norm.weight", DT_F32, nw));
        CHECK_OK(st_writer_add_mat(w, "model.layers.0.self_attn.k_norm.weight", DT_F32, nw));
        mat_free(nw);
    }
    mat_free(Wq); mat_free(Wk); mat_free(Wv); mat_free(Wo);
    char *dir = al_asprintf("%s/fam-%s", tmp_root, type), *cfgp = al_asprintf("%s/config.json", dir);
    char *stp = al_asprintf("%s/model.safetensors", dir);
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{\"model_type\": \"%s\", \"hidden_size\": 32, \"num_attention_heads\": 4, "
             "\"num_key_value_heads\": 4, \"head_dim\": 8, \"num_hidden_layers\": 1, \"rotary_pct\": 0.25, "
             "\"vocab_size\": 64, \"intermediate_size\": 64}", type);
    mkdir(dir, 0755);
    CHECK_OK(st_writer_write(w, stp));
    st_writer_free(w);
    CHECK_OK(al_write_file_atomic(cfgp, cfg, strlen(cfg)));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    free(dir); free(cfgp); free(stp);
    return m;
}

/* Exact truncations (VO at the full rank 8; QK at the planted NoPE rank 3) exported in factors
 * format reproduce the layer: the fused query_key_value is rewritten where the QK views are, the
 * RoPE rows kept (VO at full rank cuts nothing: its rows and dense stay the source's). */
static void export_exact(Model *m) {
    FarrPlan *vo = NULL, *qk = NULL;
    FarrTruncOpts ov = {.kind = FARR_VO, .by_rank = true, .rank = 8, .policy = FARR_POLICY_HEAD, .layer_lo = 0, .layer_hi = -1};
    FarrTruncOpts oq = {.kind = FARR_QK, .by_rank = true, .rank = 3, .policy = FARR_POLICY_HEAD, .layer_lo = 0, .layer_hi = -1};
    CHECK_OK(farr_truncate(m, &ov, &vo));
    CHECK_OK(farr_truncate(m, &oq, &qk));
    char *dst = al_asprintf("%s/fam-export-%s", tmp_root, m->cfg.model_type);
    ExportOpts eo = {.format = EXPORT_FACTORS};
    ExportReport rep = {0};
    if (vo && qk) CHECK_OK(farr_export(m, vo, qk, dst, &eo, &rep));
    /* VO at full rank cuts nothing: dense stays the source's; the QK cut rewrites query_key_value (+ bias) */
    CHECK(rep.tensors_rewritten == 2, "%s: query_key_value and its bias rewritten, dense kept (%zu)", m->cfg.model_type,
          rep.tensors_rewritten);
    Model *e = NULL;
    CHECK_OK(model_open(dst, &e));
    AttnLayer *a = NULL, *b = NULL;
    CHECK_OK(attn_layer_load(m, 0, &a));
    if (e) CHECK_OK(attn_layer_load(e, 0, &b));
    if (a && b) {
        int pos[16];
        for (int t = 0; t < 16; t++) pos[t] = t;
        Mat *X = attn_random_input(16, 32, 3);
        AttnOut *oa = NULL, *ob = NULL;
        double se = 1, oe = 1;
        CHECK_OK(attn_eval(a, X, pos, true, &oa));
        CHECK_OK(attn_eval(b, X, pos, true, &ob));
        if (oa && ob) attn_rel_err(oa, ob, &se, &oe);
        /* b_K is dropped (q . b_K is the same for every key: the softmax ignores it), so the logits move
         * by a constant per query and only the outputs are compared */
        CHECK(oe < 1e-5 && se > 0, "%s export reproduces the layer: outputs %.3g (logits %.3g)", m->cfg.model_type, oe, se);
        CHECK(fabs(a->W_Q->data[5] - b->W_Q->data[5]) > 1e-7 || fabs(a->W_Q->data[7] - b->W_Q->data[7]) > 1e-7,
              "the query factors were rewritten");
        attn_out_free(oa); attn_out_free(ob); mat_free(X);
    }
    attn_layer_free(a); attn_layer_free(b);
    model_free(e);
    farr_plan_free(vo); farr_plan_free(qk);
    free(dst);
}

static void test_families(void) {
    Model *m = open_family("gpt_neox");
    if (m) {
        FarrLayer *l = NULL;
        char dims[160];
        CHECK(farr_qk_dims(&m->cfg, dims, sizeof dims) &&
              strcmp(dims, "NoPE dims 2-7 of each head (6 of 8; dims 0-1 carry RoPE)") == 0, "dims: %s", dims);
        CHECK_ERR(farr_layer_compute(m, FARR_QK, 0, 3, &l), "fuses its 6 NoPE columns exactly");
        CHECK_OK(farr_layer_compute(m, FARR_QK, 0, FARR_NO_OFFSET, &l));
        for (int h = 0; l && h < 4; h++) {
            const Spectrum *f = l->fused[h];
            CHECK(l->head_dim == 6 && f->p >= 4, "NoPE head dim %d, %zu values", l->head_dim, f->p);
            if (f->p < 4) continue;
            CHECK(f->sigma[2] > 1e-3 * f->sigma[0] && f->sigma[3] < 1e-5 * f->sigma[0],
                  "head %d: planted NoPE rank 3 (sigma 3 / 1 = %.3g, 4 / 1 = %.3g)", h, f->sigma[2] / f->sigma[0],
                  f->sigma[3] / f->sigma[0]);
            CHECK(spectra_effective_rank(f->sigma, f->p, 0.999999) == 3, "head %d: effective rank %zu", h,
                  spectra_effective_rank(f->sigma, f->p, 0.999999));
        }
        farr_layer_free(l);
        l = NULL;
        export_exact(m);
        Spectrum *none = (Spectrum *)1;
        CHECK_OK(farr_normed_side(m, 0, 0, 0, &none));
        CHECK(none == NULL, "no Q/K norm: QK goes through the fusion");
        CHECK_OK(farr_layer_compute(m, FARR_VO, 0, FARR_NO_OFFSET, &l));
        CHECK(l && l->head_dim == 8, "VO on the whole head");
        farr_layer_free(l);
        model_free(m);
    }
    m = open_family("qwen3");
    if (m) {
        FarrLayer *l = NULL;
        CHECK_ERR(farr_layer_compute(m, FARR_QK, 0, 0, &l), "per-head Q/K RMSNorm (q_norm / k_norm, as in Qwen3");
        CHECK_ERR(farr_layer_compute(m, FARR_QK, 0, 0, &l), "not a bilinear form of the input");
        Spectrum *sq = NULL, *ref = NULL;                 /* q alone: the whole projection's spectrum */
        Mat *Wq = NULL;
        CHECK_OK(farr_normed_side(m, 0, 0, 2, &sq));
        CHECK_OK(model_head(m, HK_Q, 0, 2, PART_ALL, &Wq));
        if (Wq) CHECK_OK(spectra_svd(Wq, 0, &ref));
        CHECK(sq && ref && sq->p == 8 && fabs(sq->sigma[7] - ref->sigma[7]) < 1e-9 * ref->sigma[0], "qwen3 W_Q spectrum");
        spectrum_free(sq); spectrum_free(ref); mat_free(Wq);
        CHECK_OK(farr_layer_compute(m, FARR_VO, 0, FARR_NO_OFFSET, &l));      /* V and O are untouched by the norm */
        farr_layer_free(l);
        model_free(m);
    }
}

/* The fusion refusals count their dims in the singular for one: "its 1 NoPE column", "all 1 Q/K dim"
 * (configs made by hand: no model loads). */
static void test_fuse_mode_plurals(void) {
    ModelConfig c = {0};
    head_part part;
    bool rot;
    snprintf(c.model_type, sizeof c.model_type, "toy");
    c.rope = ROPE_HALF;
    c.qk_rope_dim = 4;
    c.qk_nope_dim = 1;
    CHECK_ERR(farr_fuse_mode(&c, FARR_QK, 3, &part, &rot), "fuses its 1 NoPE column exactly");
    c.qk_nope_dim = 6;
    CHECK_ERR(farr_fuse_mode(&c, FARR_QK, 3, &part, &rot), "fuses its 6 NoPE columns exactly");
    c.qk_nope_dim = 0;
    c.qk_rope_dim = 1;
    CHECK_ERR(farr_fuse_mode(&c, FARR_QK, FARR_NO_OFFSET, &part, &rot), "applies RoPE to all 1 Q/K dim, a rotation");
    c.qk_rope_dim = 8;
    CHECK_ERR(farr_fuse_mode(&c, FARR_QK, FARR_NO_OFFSET, &part, &rot), "applies RoPE to all 8 Q/K dims, a rotation");
}

int main(void) {
    tmp_root = test_tmpdir();
    test_seed_accounting();
    test_single_head_split(FARR_VO);
    test_single_head_split(FARR_QK);
    test_group_stack(FARR_VO);
    test_group_stack(FARR_QK);
    test_rope();
    test_demo_r1();
    test_demo_llama();
    test_demo_gpt2();
    test_state();
    test_real();
    test_families();
    test_fuse_mode_plurals();
    return check_done();
}
