/* test_scheduler.c -- core/'s one scheduler (sweep.h) keeps the rules the conversion's lanes had (issue 32, helper
 * one), for sweep_run's temporary threads and pool_run's persistent workers alike:
 *   - a failure's message is the LOWEST failing unit's -- the unit a plain loop would have stopped at --, not the first
 *     to fail in time: unit 5 fails at once, unit 3 (taken before it) later; no unit after 5 is taken;
 *   - a unit's own AL_INTERRUPTED comes back as AL_INTERRUPTED (it was AL_ERR with a stale message);
 *   - the threads a sweep starts block every signal, as the pool's do (Ctrl-C reaches the program's own thread);
 *   - a run with turns (sweep_run_turns, as the conversion's lanes call it: tmla_lanes_run): the turns in unit order on
 *     two threads, and a unit may run products on the pool inside it (every inner unit once). */
#include "check.h"
#include "pool.h"
#include "sweep.h"
#include "tmla_lanes.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

enum { NU = 12 };

typedef struct {
    atomic_int calls[NU];
    atomic_int started;          /* units begun: unit 0 waits for a second one (both workers busy) */
    atomic_int sigint_open;      /* units that ran on a started thread with SIGINT not blocked */
    pthread_t caller;
    int slow_fail, fast_fail;    /* units that fail after 200 ms / at once (-1: none) */
    int interrupt_unit;          /* a unit that returns AL_INTERRUPTED itself (-1: none) */
} Job;

static void job_init(Job *j, int slow_fail, int fast_fail) {
    memset(j, 0, sizeof *j);
    j->caller = pthread_self();
    j->slow_fail = slow_fail;
    j->fast_fail = fast_fail;
    j->interrupt_unit = -1;
}

static int unit(size_t i, int worker, void *ud) {
    (void)worker;
    Job *j = ud;
    atomic_fetch_add(&j->calls[i], 1);
    atomic_fetch_add(&j->started, 1);
    for (int k = 0; i == 0 && k < 2000 && atomic_load(&j->started) < 2; k++) usleep(500);   /* both threads in */
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    if (!pthread_equal(pthread_self(), j->caller) && !sigismember(&now, SIGINT)) atomic_fetch_add(&j->sigint_open, 1);
    if ((int)i == j->interrupt_unit) return AL_INTERRUPTED;
    if ((int)i == j->fast_fail) return al_err("unit %zu failed", i);
    if ((int)i == j->slow_fail) { usleep(200000); return al_err("unit %zu failed", i); }
    return AL_OK;
}

typedef int (*run_fn)(size_t n, int nthreads, sweep_task_fn fn, void *ud);

static void rules(run_fn run, const char *name) {
    static Job j;
    job_init(&j, 3, 5);
    CHECK_ERR(run(NU, 2, unit, &j), "unit 3 failed");
    CHECK(atomic_load(&j.calls[NU - 1]) == 0 && atomic_load(&j.calls[6]) == 0, "%s: a unit after 5 was taken", name);
    job_init(&j, -1, -1);
    j.interrupt_unit = 4;
    int rc = run(NU, 2, unit, &j);
    CHECK(rc == AL_INTERRUPTED, "%s: a unit's AL_INTERRUPTED came back as %d", name, rc);
    job_init(&j, -1, -1);
    CHECK_OK(run(NU, 2, unit, &j));
    CHECK(atomic_load(&j.sigint_open) == 0, "%s: %d units ran on a started thread with SIGINT open", name,
          atomic_load(&j.sigint_open));
    al_err_clear();
}

/* ---------------------------------------------------------------- turns */

typedef struct {
    pthread_mutex_t mu;
    int order[NU], n_order;
    atomic_int inner_calls[64];
} TurnJob;

static int inner_unit(size_t i, int worker, void *ud) {
    (void)worker;
    atomic_fetch_add(&((TurnJob *)ud)->inner_calls[i], 1);
    return AL_OK;
}

static int turn_unit(TmlaLanes *ln, size_t i, void *ud) {
    TurnJob *j = ud;
    usleep(i % 2 ? 1000 : 4000);                     /* the threads reach their turns out of order */
    int rc = tmla_lanes_turn_begin(ln, i);
    if (rc == AL_OK) {
        pthread_mutex_lock(&j->mu);
        j->order[j->n_order++] = (int)i;
        pthread_mutex_unlock(&j->mu);
        tmla_lanes_turn_end(ln, i);
    }
    if (rc == AL_OK && i == 1) rc = pool_run(64, 2, inner_unit, j);
    return rc;
}

static void turns(void) {
    static TurnJob j = {.mu = PTHREAD_MUTEX_INITIALIZER};
    CHECK_OK(tmla_lanes_run(NU, 2, turn_unit, &j, NULL));
    bool ordered = j.n_order == NU;
    for (int k = 0; ordered && k < NU; k++) ordered = j.order[k] == k;
    CHECK(ordered, "the turns were not taken in unit order (%d of %d)", j.n_order, NU);
    int once = 0;
    for (int k = 0; k < 64; k++) once += atomic_load(&j.inner_calls[k]) == 1;
    CHECK(once == 64, "a pool run inside a unit with turns ran %d of 64 units once", once);
}

int main(void) {
    setenv("ATTNLAB_THREADS", "2", 1);   /* two lanes on any machine */
    rules(sweep_run, "sweep_run");
    rules(pool_run, "pool_run");
    turns();
    return check_done();
}
