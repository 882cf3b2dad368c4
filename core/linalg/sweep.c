/* sweep.c -- the worker sweep (sweep.h), the one scheduler of core/: units handed out in index order by an atomic
 * counter, the lowest failing unit's status and message kept under the run's mutex, and in a run with turns the turn
 * and the units finished under the same mutex, the calling thread waiting on its condition to report progress.
 * pool.c runs the same Sweep on its persistent workers. Owns nothing global; its threads are temporary. */
#define _GNU_SOURCE
#include "sweep.h"

#include <cblas.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"

struct Sweep {
    size_t n;
    sweep_task_fn task;       /* sweep_run's units, or */
    sweep_turn_fn turn_fn;    /* sweep_run_turns' */
    void *ud;
    atomic_size_t next;       /* the next unit to take */
    atomic_int halt;          /* 1 after a failure or an interrupt: no unit is taken */
    atomic_int interrupted;   /* 1 after an interrupt seen between units */
    pthread_mutex_t mu;       /* guards what follows */
    size_t first_bad;         /* the lowest unit that did not return AL_OK (n: none) */
    int bad_rc;               /* its status */
    char err[1024];           /* its message when AL_ERR */
    /* runs with turns */
    pthread_cond_t cv;        /* a unit finished or passed its turn, or a thread ended */
    bool *passed;             /* (n) the units that passed their turn; NULL: a run without turns */
    size_t turn;              /* units [0, turn) have passed */
    size_t done;              /* units finished */
    int running;              /* threads yet to end */
    int inner;                /* al_threads_here of each thread */
    const char *label;        /* al_progress's label (NULL: silent) */
    bool caller_runs;         /* the calling thread is the one worker and reports progress itself */
};

typedef struct { Sweep *sw; int worker; } SweepArg;

/* ---------------------------------------------------------------- one run's state */

static void sweep_init(Sweep *sw) {
    memset(sw, 0, sizeof *sw);
    pthread_mutex_init(&sw->mu, NULL);
    pthread_cond_init(&sw->cv, NULL);
}

static void sweep_destroy(Sweep *sw) {
    pthread_mutex_destroy(&sw->mu);
    pthread_cond_destroy(&sw->cv);
}

Sweep *sweep_new(void) {
    Sweep *sw = malloc(sizeof *sw);
    if (!sw) { al_err("out of memory for a sweep"); return NULL; }
    sweep_init(sw);
    return sw;
}

void sweep_free(Sweep *sw) {
    if (!sw) return;
    sweep_destroy(sw);
    free(sw);
}

void sweep_reset(Sweep *sw, size_t n, sweep_task_fn fn, void *ud) {
    sw->n = n;
    sw->task = fn;
    sw->turn_fn = NULL;
    sw->ud = ud;
    atomic_store(&sw->next, 0);
    atomic_store(&sw->halt, 0);
    atomic_store(&sw->interrupted, 0);
    sw->first_bad = n;
    sw->bad_rc = AL_OK;
    sw->err[0] = 0;
    sw->passed = NULL;
    sw->turn = sw->done = 0;
    sw->running = 0;
    sw->inner = 0;
    sw->label = NULL;
    sw->caller_runs = false;
}

/* ---------------------------------------------------------------- the units */

/* Under sw->mu: unit i passed its turn; the turn moves past every unit that has. */
static void pass_locked(Sweep *sw, size_t i) {
    sw->passed[i] = true;
    while (sw->turn < sw->n && sw->passed[sw->turn]) sw->turn++;
    pthread_cond_broadcast(&sw->cv);
}

/* Unit i returned rc: a failure stops the taking of units and is kept when it is the lowest; in a run with turns the
 * unit is counted and its turn passed. A plain run's unit that succeeded takes no lock. */
static void unit_done(Sweep *sw, size_t i, int rc) {
    if (rc == AL_OK && !sw->passed) return;
    pthread_mutex_lock(&sw->mu);
    if (rc != AL_OK) {
        atomic_store(&sw->halt, 1);
        if (i < sw->first_bad) {
            sw->first_bad = i;
            sw->bad_rc = rc;
            if (rc == AL_ERR) snprintf(sw->err, sizeof sw->err, "%s", al_errmsg());
        }
    }
    if (sw->passed) {
        sw->done++;
        if (!sw->passed[i]) pass_locked(sw, i);
        pthread_cond_broadcast(&sw->cv);
    }
    pthread_mutex_unlock(&sw->mu);
}

void sweep_units(Sweep *sw, int worker) {
    for (;;) {
        if (atomic_load(&sw->halt)) return;
        if (al_interrupted()) {
            atomic_store(&sw->interrupted, 1);
            atomic_store(&sw->halt, 1);
            return;
        }
        size_t i = atomic_fetch_add(&sw->next, 1);
        if (i >= sw->n) return;
        int rc = sw->task ? sw->task(i, worker, sw->ud) : sw->turn_fn(sw, i, sw->ud);
        unit_done(sw, i, rc);
        if (sw->caller_runs && sw->label) al_progress(sw->label, i + 1, sw->n);   /* the one worker: i + 1 done */
        if (rc != AL_OK) return;
    }
}

int sweep_result(Sweep *sw) {
    if (sw->first_bad < sw->n) return sw->bad_rc == AL_ERR ? al_err("%s", sw->err) : sw->bad_rc;
    return atomic_load(&sw->interrupted) ? AL_INTERRUPTED : AL_OK;
}

int sweep_spawn(pthread_t *th, void *(*fn)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(th, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* ---------------------------------------------------------------- turns */

int sweep_turn_begin(Sweep *sw, size_t i) {
    if (!sw || !sw->passed) return AL_OK;
    pthread_mutex_lock(&sw->mu);
    while (sw->turn < i) pthread_cond_wait(&sw->cv, &sw->mu);
    bool bad = sw->first_bad < i;
    pthread_mutex_unlock(&sw->mu);
    return bad ? al_err("stopped: an earlier unit failed") : AL_OK;
}

void sweep_turn_end(Sweep *sw, size_t i) {
    if (!sw || !sw->passed) return;
    pthread_mutex_lock(&sw->mu);
    pass_locked(sw, i);
    pthread_mutex_unlock(&sw->mu);
}

/* ---------------------------------------------------------------- the runs */

int sweep_threads(size_t n, int nthreads) {
    int t = nthreads > 0 ? nthreads : al_threads();
    if (t < 1) t = 1;
    if ((size_t)t > n) t = n ? (int)n : 1;
    return t;
}

static void *plain_worker(void *p) {
    SweepArg *a = p;
    sweep_units(a->sw, a->worker);
    return NULL;
}

int sweep_run(size_t n, int nthreads, sweep_task_fn fn, void *ud) {
    int t = sweep_threads(n, nthreads);
    Sweep sw;
    sweep_init(&sw);
    sweep_reset(&sw, n, fn, ud);
    int blas_threads = openblas_get_num_threads();
    if (blas_threads != 1) openblas_set_num_threads(1);
    pthread_t *th = t > 1 ? al_calloc((size_t)t, sizeof *th, "sweep threads") : NULL;
    SweepArg *args = t > 1 ? al_calloc((size_t)t, sizeof *args, "sweep threads") : NULL;
    bool alloc_failed = t > 1 && (!th || !args);
    if (!alloc_failed) {
        int started = 0;          /* worker 0 runs on this thread; the others on new pthreads */
        for (int w = 1; w < t; w++) {
            args[w] = (SweepArg){&sw, w};
            if (sweep_spawn(&th[w], plain_worker, &args[w]) != 0) break;
            started = w;
        }
        sweep_units(&sw, 0);
        for (int w = 1; w <= started; w++) pthread_join(th[w], NULL);
    }
    if (blas_threads != 1) openblas_set_num_threads(blas_threads);
    free(th);
    free(args);
    int rc = alloc_failed ? AL_ERR : sweep_result(&sw);
    sweep_destroy(&sw);
    return rc;
}

/* A thread of a run with turns: its units on its share of the cores, then counted out. */
static void *turn_worker(void *p) {
    SweepArg *a = p;
    Sweep *sw = a->sw;
    al_threads_here(sw->inner);
    sweep_units(sw, a->worker);
    pthread_mutex_lock(&sw->mu);
    sw->running--;
    pthread_cond_broadcast(&sw->cv);
    pthread_mutex_unlock(&sw->mu);
    return NULL;
}

/* Starts t threads of a run with turns; returns how many started. */
static int start_turn_threads(Sweep *sw, pthread_t *th, SweepArg *args, int t) {
    pthread_mutex_lock(&sw->mu);
    sw->running = t;
    pthread_mutex_unlock(&sw->mu);
    int started = 0;
    for (; started < t; started++) {
        args[started] = (SweepArg){sw, started};
        if (sweep_spawn(&th[started], turn_worker, &args[started]) != 0) break;
    }
    pthread_mutex_lock(&sw->mu);
    sw->running -= t - started;
    pthread_mutex_unlock(&sw->mu);
    return started;
}

/* Waits for the threads to end, reporting progress as units finish. */
static void wait_turn_threads(Sweep *sw) {
    size_t shown = 0;
    pthread_mutex_lock(&sw->mu);
    while (sw->running > 0 || shown < sw->done) {
        if (shown < sw->done) {
            shown = sw->done;
            pthread_mutex_unlock(&sw->mu);
            if (sw->label) al_progress(sw->label, shown, sw->n);
            pthread_mutex_lock(&sw->mu);
        } else
            pthread_cond_wait(&sw->cv, &sw->mu);
    }
    pthread_mutex_unlock(&sw->mu);
}

/* The run with turns on t threads (none started: on this thread); sw set up. */
static int run_turns(Sweep *sw, int t) {
    pthread_t *th = t > 1 ? al_calloc((size_t)t, sizeof *th, "a sweep's threads") : NULL;
    SweepArg *args = t > 1 ? al_calloc((size_t)t, sizeof *args, "a sweep's threads") : NULL;
    if (t > 1 && (!th || !args)) { free(th); free(args); return AL_ERR; }
    int started = t > 1 ? start_turn_threads(sw, th, args, t) : 0;
    if (started == 0) {
        sw->caller_runs = true;
        sweep_units(sw, 0);
    } else
        wait_turn_threads(sw);
    for (int w = 0; w < started; w++) pthread_join(th[w], NULL);
    free(th);
    free(args);
    return sweep_result(sw);
}

int sweep_run_turns(size_t n, int nthreads, sweep_turn_fn fn, void *ud, const char *label) {
    int t = sweep_threads(n, nthreads), inner = al_threads() / t;
    if (inner < 1) inner = 1;
    int blas = openblas_get_num_threads();     /* each unit's BLAS on its thread's share: the same bits at any t */
    if (blas > inner) openblas_set_num_threads(inner);
    Sweep sw;
    sweep_init(&sw);
    sweep_reset(&sw, n, NULL, ud);
    sw.turn_fn = fn;
    sw.label = label;
    sw.inner = inner;
    sw.passed = al_calloc(n ? n : 1, sizeof *sw.passed, "a sweep's turns");
    int rc = sw.passed ? run_turns(&sw, t) : AL_ERR;
    free(sw.passed);
    sweep_destroy(&sw);
    if (blas > inner) openblas_set_num_threads(blas);
    return rc;
}
