/* test_sweep_pool.c -- the rank sweep on the persistent pool (core/linalg/pool.c): a layer's VO and
 * QK spectra (farr_layer_compute_route, fast and double routes, FP8 MLA and GQA demos) are the same
 * bits on 1, 2 and 3 workers; the sweep grows the pool instead of starting threads per sweep (the
 * pool's workers are there after it, and a dozen sweeps more start no thread); an interrupt before
 * or during a sweep returns AL_INTERRUPTED and leaves the pool usable: the next sweep's values are
 * the same bits as before. */
#define _GNU_SOURCE
#include "check.h"
#include "testutil.h"
#include "farr.h"
#include "pool.h"
#include "synth.h"

#include <dirent.h>
#include <pthread.h>
#include <unistd.h>

static const char *tmp_root;

/* Layer 1's VO or QK spectra (QK at offset 16 where the model has RoPE on every dim, not MLA; layer 0 of
 * a one-layer model) on `threads` workers. */
static FarrLayer *sweep(Model *m, farr_kind kind, farr_route route, const char *threads, int *rc) {
    setenv("ATTNLAB_THREADS", threads, 1);
    FarrLayer *l = NULL;
    int offset = kind == FARR_QK && !cfg_is_mla(&m->cfg) ? 16 : FARR_NO_OFFSET;
    *rc = farr_layer_compute_route(m, kind, m->cfg.n_layers > 1, offset, route, &l);
    return l;
}

static bool same_spectrum(const Spectrum *a, const Spectrum *b) {
    return a->p == b->p && memcmp(a->sigma, b->sigma, a->p * sizeof *a->sigma) == 0 && a->total == b->total;
}

/* Every head's three spectra (and the fast route's bounds) equal to the bit. */
static bool same_layer(const FarrLayer *x, const FarrLayer *y) {
    if (!x || !y || x->n_heads != y->n_heads || !x->eps != !y->eps) return false;
    for (int h = 0; h < x->n_heads; h++)
        if (!same_spectrum(x->a[h], y->a[h]) || !same_spectrum(x->b[h], y->b[h]) || !same_spectrum(x->fused[h], y->fused[h]))
            return false;
    return !x->eps || memcmp(x->eps, y->eps, 3 * (size_t)x->n_heads * sizeof *x->eps) == 0;
}

static int tasks(void) {     /* this process's threads */
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static void test_threads(Model *m, const char *name) {
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 2; k++) {
            farr_route route = r ? FARR_ROUTE_STREAM : FARR_ROUTE_FAST;
            int rc;
            FarrLayer *ref = sweep(m, (farr_kind)k, route, "1", &rc);
            CHECK(rc == AL_OK && ref, "%s: one-worker sweep: %s", name, al_errmsg());
            static const char *n[] = {"2", "3", "2"};
            for (int t = 0; t < 3; t++) {
                FarrLayer *l = sweep(m, (farr_kind)k, route, n[t], &rc);
                CHECK(rc == AL_OK && same_layer(ref, l), "%s %s %s route: %s workers differ from one", name,
                      k ? "QK" : "VO", r ? "double" : "fast", n[t]);
                farr_layer_free(l);
            }
            farr_layer_free(ref);
        }
}

typedef struct { useconds_t delay; } Stopper;

static void *stop_later(void *ud) {
    usleep(((Stopper *)ud)->delay);
    al_interrupt_flag = 1;
    return NULL;
}

/* Interrupts at delays from 0 (the flag set before the sweep) to 20 ms into a sweep of an
 * R1-shaped layer (~0.1-0.5 s); after each, with the flag cleared, a sweep on the same pool equals
 * the reference. */
static void test_interrupt(Model *m) {
    int rc, stopped = 0, workers = pool_workers();
    FarrLayer *ref = sweep(m, FARR_VO, FARR_ROUTE_FAST, "3", &rc);
    static const useconds_t delays[] = {0, 100, 300, 1000, 3000, 10000, 20000};
    for (size_t i = 0; i < sizeof delays / sizeof *delays; i++) {
        Stopper s = {delays[i]};
        pthread_t th;
        if (i == 0) al_interrupt_flag = 1;
        else pthread_create(&th, NULL, stop_later, &s);
        FarrLayer *l = sweep(m, FARR_VO, FARR_ROUTE_FAST, "3", &rc);
        if (i) pthread_join(th, NULL);
        CHECK(rc == AL_OK || rc == AL_INTERRUPTED, "an interrupted sweep returned %d: %s", rc, al_errmsg());
        CHECK(rc == AL_OK || !l, "an interrupted sweep left a layer");
        stopped += rc == AL_INTERRUPTED;
        farr_layer_free(l);
        al_interrupt_flag = 0;
        l = sweep(m, FARR_VO, FARR_ROUTE_FAST, "3", &rc);
        CHECK(rc == AL_OK && same_layer(ref, l), "the sweep after an interrupt at %u us differs", (unsigned)delays[i]);
        farr_layer_free(l);
    }
    CHECK(stopped >= 2, "only %d sweeps interrupted: none in the middle", stopped);
    CHECK(pool_workers() == workers, "the pool went from %d to %d workers across interrupts", workers, pool_workers());
    printf("interrupts: %d of 7 sweeps stopped; the pool kept its %d workers\n", stopped, pool_workers());
    farr_layer_free(ref);
}

int main(void) {
    tmp_root = test_tmpdir();
    Model *r1 = tu_open_synth(tmp_root, "demo-r1", SYNTH_DEFAULT_SEED);
    Model *llama = tu_open_synth(tmp_root, "demo-llama", SYNTH_DEFAULT_SEED);
    if (!r1 || !llama) return check_done();
    CHECK(pool_workers() == 0, "the pool had %d workers before any sweep", pool_workers());
    test_threads(r1, "demo-r1");
    CHECK(pool_workers() >= 2, "three-worker sweeps left %d pool workers: the sweep does not run on the pool",
          pool_workers());
    int before = tasks();
    test_threads(llama, "demo-llama");
    CHECK(tasks() == before, "a dozen sweeps on the pool: %d threads before, %d after", before, tasks());
    char *dir = al_asprintf("%s/ds-r1-shape", tmp_root);
    Model *big = NULL;
    if (synth_ds_r1_shape(dir, 1, 1) != AL_OK) CHECK(0, "synth ds-r1-shape: %s", al_errmsg());
    else CHECK_OK(model_open(dir, &big));
    free(dir);
    if (big) test_interrupt(big);
    model_free(big);
    model_free(r1);
    model_free(llama);
    return check_done();
}
