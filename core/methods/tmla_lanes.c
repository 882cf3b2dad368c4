/* tmla_lanes.c -- a conversion's layers on lanes (tmla_lanes.h). Owns the lanes' threads of one run: units handed out
 * in order under one mutex, each unit's result and message kept in its slot, the turn (the lowest unit that has not
 * passed) advanced under the same mutex; the calling thread only waits and reports progress. */
#define _GNU_SOURCE
#include "tmla_lanes.h"

#include <cblas.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "al.h"

enum { TMLA_LANES_DEFAULT = 2 };

struct TmlaLanes {
    size_t n;
    tmla_lane_fn fn;
    void *ud;
    int inner;                /* al_threads_here of each lane */
    pthread_mutex_t mu;       /* guards everything below */
    pthread_cond_t cv;        /* a unit finished or passed its turn, or a lane ended */
    size_t next;              /* the next unit to take */
    size_t turn;              /* units [0, turn) have passed their turn */
    size_t done;              /* units finished */
    size_t first_bad;         /* the lowest unit that did not return AL_OK (n: none) */
    int running;              /* lanes not yet ended */
    bool *passed;             /* (n) */
    int *rc;                  /* (n) */
    char (*err)[1024];        /* (n) the message of a unit that returned AL_ERR */
};

int tmla_lanes_count(size_t n, int lanes) {
    int t = lanes > 0 ? lanes : TMLA_LANES_DEFAULT, cores = al_threads();
    if (t > cores) t = cores;
    if ((size_t)t > n) t = (int)n;
    return t < 1 ? 1 : t;
}

/* Under ln->mu: unit k passed; the turn moves past every passed unit. */
static void pass_locked(TmlaLanes *ln, size_t k) {
    ln->passed[k] = true;
    while (ln->turn < ln->n && ln->passed[ln->turn]) ln->turn++;
    pthread_cond_broadcast(&ln->cv);
}

int tmla_lanes_turn_begin(TmlaLanes *ln, size_t k) {
    if (!ln) return AL_OK;
    pthread_mutex_lock(&ln->mu);
    while (ln->turn < k) pthread_cond_wait(&ln->cv, &ln->mu);
    bool bad = ln->first_bad < k;
    pthread_mutex_unlock(&ln->mu);
    return bad ? al_err("stopped: an earlier layer failed") : AL_OK;
}

void tmla_lanes_turn_end(TmlaLanes *ln, size_t k) {
    if (!ln) return;
    pthread_mutex_lock(&ln->mu);
    pass_locked(ln, k);
    pthread_mutex_unlock(&ln->mu);
}

/* Under ln->mu: unit k returned rc. */
static void finish_locked(TmlaLanes *ln, size_t k, int rc) {
    ln->rc[k] = rc;
    if (rc != AL_OK && k < ln->first_bad) ln->first_bad = k;
    ln->done++;
    if (!ln->passed[k]) pass_locked(ln, k);
    pthread_cond_broadcast(&ln->cv);
}

static void *lane_main(void *arg) {
    TmlaLanes *ln = arg;
    al_threads_here(ln->inner);
    pthread_mutex_lock(&ln->mu);
    while (ln->first_bad == ln->n && ln->next < ln->n) {
        size_t k = ln->next++;
        pthread_mutex_unlock(&ln->mu);
        int rc = al_interrupted() ? AL_INTERRUPTED : ln->fn(ln, k, ln->ud);
        if (rc == AL_ERR) snprintf(ln->err[k], sizeof ln->err[k], "%s", al_errmsg());
        pthread_mutex_lock(&ln->mu);
        finish_locked(ln, k, rc);
    }
    ln->running--;
    pthread_cond_broadcast(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
    return NULL;
}

/* One lane: the plain loop, on this thread. */
static int run_here(size_t n, tmla_lane_fn fn, void *ud, const char *label) {
    int rc = AL_OK;
    for (size_t k = 0; rc == AL_OK && k < n; k++) {
        if (al_interrupted()) return AL_INTERRUPTED;
        rc = fn(NULL, k, ud);
        al_progress(label, k + 1, n);
    }
    return rc;
}

/* Starts t lanes with every signal blocked in them (Ctrl-C reaches the program's own thread). Returns how many
 * started. */
static int start_lanes(TmlaLanes *ln, pthread_t *th, int t) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int started = 0;
    pthread_mutex_lock(&ln->mu);
    ln->running = t;
    pthread_mutex_unlock(&ln->mu);
    while (started < t && pthread_create(&th[started], NULL, lane_main, ln) == 0) started++;
    pthread_mutex_lock(&ln->mu);
    ln->running -= t - started;
    pthread_mutex_unlock(&ln->mu);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return started;
}

/* Waits for the lanes to end, reporting progress as units finish. */
static void wait_lanes(TmlaLanes *ln, const char *label) {
    size_t shown = 0;
    pthread_mutex_lock(&ln->mu);
    while (ln->running > 0 || shown < ln->done) {
        if (shown < ln->done) {
            shown = ln->done;
            pthread_mutex_unlock(&ln->mu);
            al_progress(label, shown, ln->n);
            pthread_mutex_lock(&ln->mu);
        } else
            pthread_cond_wait(&ln->cv, &ln->mu);
    }
    pthread_mutex_unlock(&ln->mu);
}

static void lanes_free(TmlaLanes *ln) {
    pthread_mutex_destroy(&ln->mu);
    pthread_cond_destroy(&ln->cv);
    free(ln->passed); free(ln->rc); free(ln->err);
}

/* t lanes of al_threads() / t threads each: the lanes' results, as tmla_lanes_run returns them. */
static int run_lanes(TmlaLanes *ln, int t, const char *label) {
    pthread_t *th = al_calloc((size_t)t, sizeof *th, "the lanes");
    ln->passed = al_calloc(ln->n, sizeof *ln->passed, "the lanes' turns");
    ln->rc = al_calloc(ln->n, sizeof *ln->rc, "the lanes' results");
    ln->err = al_calloc(ln->n, sizeof *ln->err, "the lanes' messages");
    if (!ln->passed || !ln->rc || !ln->err || !th) { free(th); return AL_ERR; }
    int started = start_lanes(ln, th, t);
    if (started > 0) wait_lanes(ln, label);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(th);
    return started == 0 ? run_here(ln->n, ln->fn, ln->ud, label)
           : ln->first_bad == ln->n ? AL_OK
           : ln->rc[ln->first_bad] == AL_ERR ? al_err("%s", ln->err[ln->first_bad]) : ln->rc[ln->first_bad];
}

int tmla_lanes_run(size_t n, int lanes, tmla_lane_fn fn, void *ud, const char *label) {
    int t = tmla_lanes_count(n, lanes), inner = al_threads() / t;
    if (inner < 1) inner = 1;
    int blas = openblas_get_num_threads();        /* each layer's BLAS on its lane's share: the same bits at any t */
    if (blas > inner) openblas_set_num_threads(inner);
    TmlaLanes ln = {.n = n, .fn = fn, .ud = ud, .first_bad = n, .inner = inner};
    pthread_mutex_init(&ln.mu, NULL);
    pthread_cond_init(&ln.cv, NULL);
    int rc = t <= 1 ? run_here(n, fn, ud, label) : run_lanes(&ln, t, label);
    lanes_free(&ln);
    if (blas > inner) openblas_set_num_threads(blas);
    return rc;
}
