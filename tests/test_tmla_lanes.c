/* test_tmla_lanes.c -- issue 32 (cvp): `convert mla` converts two layers at a time (tmla_lanes.h), each lane on one
 * thread (al_threads_here, OpenBLAS at one thread), with the one-lane loop's results bit for bit:
 *   - the scheduler: every unit once, two in flight at most and two reached, each lane's al_threads() 1, the turns in
 *     unit order, progress counted to n, the lowest failing unit's message (not the first to fail in time), no unit
 *     taken after a failure's turn, Ctrl-C before the first unit;
 *   - a 6-layer BF16 Llama converted with activation moments at lanes 1 (ATTNLAB_THREADS 1) and 2 (ATTNLAB_THREADS 2:
 *     one BLAS thread per lane either way), held in BF16 and in float32: the reports bit for bit, the attention
 *     parameters, and the exports (BF16 and float32) the same bytes; TmlaResult.lanes says 2. */
#include "test_transmla_util.h"
#include "test_mem_util.h"
#include "mla_export.h"
#include "tmla_lanes.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

enum { N = 7 };

typedef struct {
    atomic_int calls[N], in_flight, most, inner_bad;
    pthread_mutex_t mu;
    int order[N], n_order;    /* the units in the order they took their turn */
    int fail_a, fail_b;       /* units that fail (-1: none); fail_a after a delay, fail_b at once */
    int ctrl_c;               /* the unit that presses Ctrl-C (-1: none) */
} Rec;

static int unit(TmlaLanes *ln, size_t k, void *ud) {
    Rec *r = ud;
    atomic_fetch_add(&r->calls[k], 1);
    if ((int)k == r->ctrl_c) al_interrupt_flag = 1;
    int now = atomic_fetch_add(&r->in_flight, 1) + 1;
    for (int m = atomic_load(&r->most); now > m && !atomic_compare_exchange_weak(&r->most, &m, now);) {}
    if (ln && (al_threads() != 1 || openblas_get_num_threads() != 1)) atomic_fetch_add(&r->inner_bad, 1);
    int rc = (int)k == r->fail_b ? al_err("unit %zu", k) : tmla_lanes_turn_begin(ln, k);
    if (rc == AL_OK) {
        pthread_mutex_lock(&r->mu);
        r->order[r->n_order++] = (int)k;
        pthread_mutex_unlock(&r->mu);
        tmla_lanes_turn_end(ln, k);
        usleep(k % 2 ? 2000 : 6000);          /* the lanes finish out of order */
    }
    if (rc == AL_OK && (int)k == r->fail_a) { usleep(30000); rc = al_err("unit %zu", k); }
    atomic_fetch_sub(&r->in_flight, 1);
    return rc;
}

static size_t shown[64], n_shown;
static void progress(const char *label, size_t done, size_t total, void *ud) {
    (void)label; (void)total; (void)ud;
    if (n_shown < 64) shown[n_shown++] = done;
}

static Rec *rec_new(int fail_a, int fail_b) {
    Rec *r = calloc(1, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    r->fail_a = fail_a;
    r->fail_b = fail_b;
    r->ctrl_c = -1;
    return r;
}

static void scheduler(void) {
    CHECK(tmla_lanes_count(7, 0) == 2 && tmla_lanes_count(1, 0) == 1 && tmla_lanes_count(7, 1) == 1,
          "lanes: %d %d %d", tmla_lanes_count(7, 0), tmla_lanes_count(1, 0), tmla_lanes_count(7, 1));
    Rec *r = rec_new(-1, -1);
    n_shown = 0;
    al_set_progress(progress, NULL);
    CHECK_OK(tmla_lanes_run(N, 0, unit, r, "unit"));
    for (int k = 0; k < N; k++) CHECK(atomic_load(&r->calls[k]) == 1 && r->order[k] == k, "unit %d: %d calls, turn %d",
                                      k, atomic_load(&r->calls[k]), r->order[k]);
    CHECK(atomic_load(&r->most) == 2, "units in flight at most %d, want 2", atomic_load(&r->most));
    CHECK(atomic_load(&r->inner_bad) == 0 && al_threads() == 2, "a lane's own threads: not 1 (%d times)",
          atomic_load(&r->inner_bad));
    CHECK(n_shown > 0 && shown[n_shown - 1] == N, "progress ends at %zu of %d", n_shown ? shown[n_shown - 1] : 0, N);
    for (size_t i = 1; i < n_shown; i++) CHECK(shown[i] > shown[i - 1], "progress goes back at %zu", i);
    free(r);
    r = rec_new(3, 5);                  /* unit 5 fails first in time, unit 3 later: the loop would stop at 3 */
    CHECK_ERR(tmla_lanes_run(N, 0, unit, r, "unit"), "unit 3");
    CHECK(atomic_load(&r->calls[6]) == 0, "unit 6 taken after unit 5 failed");
    free(r);
    r = rec_new(-1, -1);
    al_interrupt_flag = 1;
    CHECK(tmla_lanes_run(N, 0, unit, r, "unit") == AL_INTERRUPTED && atomic_load(&r->calls[0]) + atomic_load(&r->calls[1]) == 0,
          "Ctrl-C before the first unit: nothing run");
    al_interrupt_flag = 0;
    free(r);
    r = rec_new(-1, -1);
    r->ctrl_c = 2;      /* Ctrl-C as unit 2 starts: the units started finish (at most unit 3 beside it), no later one starts */
    int rc = tmla_lanes_run(N, 0, unit, r, "unit"), ran = 0;
    for (int k = 0; k < N; k++) ran += atomic_load(&r->calls[k]);
    CHECK(rc == AL_INTERRUPTED && atomic_load(&r->calls[2]) == 1 && ran <= 4 && atomic_load(&r->calls[N - 1]) == 0,
          "Ctrl-C in unit 2: rc %d, %d units ran", rc, ran);
    al_interrupt_flag = 0;
    al_err_clear();
    free(r);
    al_set_progress(NULL, NULL);
}

/* Per layer a second moment A Aᵀ / n + I and a mean, fixed by the seed. */
static void moments(int layers, int n, double **sigma, double **mu) {
    for (int l = 0; l < layers; l++) {
        Mat *A = tu_randm((size_t)n, (size_t)n, 1.0);
        sigma[l] = calloc((size_t)n * n, sizeof(double));
        mu[l] = calloc((size_t)n, sizeof(double));
        for (int i = 0; i < n; i++) {
            mu[l][i] = 0.1 * A->data[i];
            for (int j = 0; j < n; j++) {
                double s = i == j;
                for (int t = 0; t < n; t++) s += (double)A->data[i * n + t] * A->data[j * n + t] / n;
                sigma[l][i * n + j] = s;
            }
        }
        mat_free(A);
    }
}

/* lanes layers at a time on as many threads: one BLAS thread per lane either way. */
static TmlaResult *convert(Model *m, int lanes, bool bf16, double **sigma, double **mu) {
    setenv("ATTNLAB_THREADS", lanes == 1 ? "1" : "2", 1);
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 20;
    o.hold_bf16 = bf16;
    o.lanes = lanes;
    o.sigma = (const double *const *)sigma;
    o.mu = (const double *const *)mu;
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    return r;
}

static void same_conversion(Model *m, const char *tmp, bool bf16, double **sigma, double **mu) {
    TmlaResult *a = convert(m, 1, bf16, sigma, mu), *b = convert(m, 2, bf16, sigma, mu);
    if (!a || !b) { tmla_result_free(a); tmla_result_free(b); return; }
    CHECK(a->lanes == 1 && b->lanes == 2, "lanes %d and %d, want 1 and 2", a->lanes, b->lanes);
    for (int l = 0; l < a->n_layers; l++) {
        const TmlaLayerReport *x = &a->rep[l], *y = &b->rep[l];
        const double va[] = {x->alpha, x->rope_energy, x->joint_energy, x->score_err, x->out_err, x->joint_energy_alt,
                             x->score_err_alt, x->out_err_alt, x->qkn_score_err, x->qkn_out_err};
        const double vb[] = {y->alpha, y->rope_energy, y->joint_energy, y->score_err, y->out_err, y->joint_energy_alt,
                             y->score_err_alt, y->out_err_alt, y->qkn_score_err, y->qkn_out_err};
        CHECK(x->layer == y->layer && !memcmp(va, vb, sizeof va), "bf16 %d: layer %d's report differs (score_err %.17g "
              "against %.17g)", bf16, l, x->score_err, y->score_err);
    }
    CHECK(a->params_before == b->params_before && a->params_after == b->params_after, "attention parameters differ");
    char ea[4200], eb[4200], fa[4300], fb[4300];
    snprintf(ea, sizeof ea, "%s/e1-%d", tmp, bf16);
    snprintf(eb, sizeof eb, "%s/e2-%d", tmp, bf16);
    MlaExportOpts eo = {.dtype = bf16 ? DT_BF16 : DT_F32};
    CHECK_OK(mla_export(a, ea, &eo));
    CHECK_OK(mla_export(b, eb, &eo));
    snprintf(fa, sizeof fa, "%s/model.safetensors", ea);
    snprintf(fb, sizeof fb, "%s/model.safetensors", eb);
    CHECK(same_file(fa, fb), "bf16 %d: the exports at lanes 1 and 2 differ", bf16);
    al_err_clear();
    tmla_result_free(a);
    tmla_result_free(b);
}

int main(void) {
    setenv("ATTNLAB_THREADS", "2", 1);  /* two cores' worth, on any machine */
    scheduler();
    const char *tmp = test_tmpdir();
    char src[4096];
    snprintf(src, sizeof src, "%s/src", tmp);
    enum { L = 6, D = 64 };
    TuModel spec = {.model_type = "llama", .layers = L, .hidden = D, .heads = 4, .kv_heads = 2, .head_dim = 32,
                    .inter = 48, .vocab = 50, .dtype = DT_BF16};
    CHECK_OK(tu_write_model(src, &spec));
    Model *m = NULL;
    CHECK_OK(model_open(src, &m));
    if (!m) return check_done();
    double *sigma[L], *mu[L];
    moments(L, D, sigma, mu);
    same_conversion(m, tmp, true, sigma, mu);
    same_conversion(m, tmp, false, sigma, mu);
    for (int l = 0; l < L; l++) { free(sigma[l]); free(mu[l]); }
    model_free(m);
    return check_done();
}
