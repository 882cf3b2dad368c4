/* sweep.c -- the worker sweep (sweep.h): units handed out by an atomic counter, worker 0 on the
 * calling thread. Owns nothing global except its temporary threads. */
#include "sweep.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "al.h"

typedef struct {
    size_t n;
    sweep_task_fn fn;
    void *ud;
    atomic_size_t next;
    atomic_int failed;          /* 1 after the first error */
    atomic_int stopped;         /* 1 after an interrupt */
    pthread_mutex_t mu;
    char err[1024];
} SweepCtx;

typedef struct { SweepCtx *c; int worker; } SweepArg;

static void *sweep_worker(void *p) {
    SweepArg *a = p;
    SweepCtx *c = a->c;
    for (;;) {
        if (atomic_load(&c->failed) || atomic_load(&c->stopped)) break;
        if (al_interrupted()) { atomic_store(&c->stopped, 1); break; }
        size_t i = atomic_fetch_add(&c->next, 1);
        if (i >= c->n) break;
        if (c->fn(i, a->worker, c->ud) != AL_OK) {
            pthread_mutex_lock(&c->mu);
            if (!atomic_load(&c->failed)) snprintf(c->err, sizeof c->err, "%s", al_errmsg());
            atomic_store(&c->failed, 1);
            pthread_mutex_unlock(&c->mu);
            break;
        }
    }
    return NULL;
}

int sweep_threads(size_t n, int nthreads) {
    int t = nthreads > 0 ? nthreads : al_threads();
    if (t < 1) t = 1;
    if ((size_t)t > n) t = n ? (int)n : 1;
    return t;
}

int sweep_run(size_t n, int nthreads, sweep_task_fn fn, void *ud) {
    int t = sweep_threads(n, nthreads);
    SweepCtx c = { .n = n, .fn = fn, .ud = ud };
    atomic_init(&c.next, 0);
    atomic_init(&c.failed, 0);
    atomic_init(&c.stopped, 0);
    pthread_mutex_init(&c.mu, NULL);
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    pthread_t *th = al_calloc((size_t)t, sizeof *th, "sweep threads");
    SweepArg *args = al_calloc((size_t)t, sizeof *args, "sweep threads");
    int started = 0;
    if (th && args) {
        /* Worker 0 runs on this thread; the others on new pthreads. */
        for (int w = 1; w < t; w++) {
            args[w] = (SweepArg){ &c, w };
            if (pthread_create(&th[w], NULL, sweep_worker, &args[w]) != 0) break;
            started = w;
        }
        args[0] = (SweepArg){ &c, 0 };
        sweep_worker(&args[0]);
        for (int w = 1; w <= started; w++) pthread_join(th[w], NULL);
    }
    openblas_set_num_threads(blas_threads);
    pthread_mutex_destroy(&c.mu);
    int alloc_failed = !th || !args;
    free(th); free(args);
    if (alloc_failed) return AL_ERR;
    if (atomic_load(&c.failed)) return al_err("%s", c.err);
    if (atomic_load(&c.stopped)) return AL_INTERRUPTED;
    return AL_OK;
}

