/* pool.c -- the persistent worker pool (pool.h). Owns the process's one pool: workers 1..N started
 * on first use (sweep_spawn: signals blocked in them), a run published by one more generation (the futex word
 * the idle workers wait on: ~50 us of spinning, then sleep), the run itself a Sweep (sweep.h: units in index order,
 * the lowest failure, interrupts) kept from run to run, and the run's end counted down by every started worker
 * (pending: the caller's futex word), so no worker can still be inside one run when the next begins. A waker makes the
 * futex call only when someone sleeps (each side bumps its counter, then reads the other's word:
 * sequentially consistent, so one of them sees the other). */
#define _GNU_SOURCE
#include "pool.h"

#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <sched.h>

#include "al.h"

#define POOL_MAX 64          /* workers beyond the caller; a run asking for more takes sweep_run */
#define POOL_SPIN_NS 50000   /* how long an idle worker (or the waiting caller) spins before sleeping */
#define POOL_PAUSES 256      /* pause instructions before it yields the core between polls */

static struct {
    pthread_mutex_t mu;      /* held by the run in progress (and by pool_stop) */
    int nstarted;            /* workers 1..nstarted run pool_worker */
    pthread_t th[POOL_MAX + 1];
    unsigned start_gen;      /* the generation a worker being started has seen */
    bool hooks;              /* atexit / pthread_atfork registered */
    atomic_uint gen;         /* one more per run and at stop: the workers' futex word */
    atomic_int sleepers;     /* workers asleep on gen */
    atomic_uint pending;     /* started workers yet to finish the run: the caller's futex word */
    atomic_int caller_asleep;
    atomic_int stop;
    /* the run */
    Sweep *run;              /* made with the first worker, reset per run */
    int active;              /* workers [0, active) take units; the others only count down */
} P = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---------------------------------------------------------------- waiting */

static void futex_wait(atomic_uint *w, unsigned v) {
#ifdef __linux__
    syscall(SYS_futex, (void *)w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
#else
    (void)w; (void)v;
    sched_yield();
#endif
}

static void futex_wake(atomic_uint *w) {
#ifdef __linux__
    syscall(SYS_futex, (void *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)w;
#endif
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Waits until *w differs from v and returns its new value: spins POOL_SPIN_NS (the first ~2 us on
 * pause, then yielding the core, so that on a machine with more runnable threads than cores the
 * thread this one waits for can run), then sleeps on the futex, counted in *asleep so that the waker
 * skips the system call when nobody sleeps. */
static unsigned wait_change(atomic_uint *w, unsigned v, atomic_int *asleep) {
    uint64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        unsigned c = atomic_load_explicit(w, memory_order_acquire);
        if (c != v) return c;
        if (i % 64 == 0) {
            uint64_t t = now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > POOL_SPIN_NS) break;
        }
        if (i < POOL_PAUSES) cpu_relax();
        else sched_yield();
    }
    for (;;) {
        atomic_fetch_add(asleep, 1);
        if (atomic_load(w) == v) futex_wait(w, v);
        atomic_fetch_sub(asleep, 1);
        unsigned c = atomic_load_explicit(w, memory_order_acquire);
        if (c != v) return c;
    }
}

/* ---------------------------------------------------------------- the run */

static void *pool_worker(void *arg) {
    int w = (int)(intptr_t)arg;
    unsigned seen = P.start_gen;
    for (;;) {
        seen = wait_change(&P.gen, seen, &P.sleepers);
        if (atomic_load(&P.stop)) return NULL;
        if (w < P.active) sweep_units(P.run, w);
        if (atomic_fetch_sub(&P.pending, 1) == 1 && atomic_load(&P.caller_asleep)) futex_wake(&P.pending);
    }
}

static void pool_child_reset(void) {   /* a forked child has none of the workers */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    P.mu = fresh;
    P.nstarted = 0;
    P.run = NULL;            /* the parent's copy, left as it is */
}

static void pool_at_exit(void) { pool_stop(); }

/* Starts workers up to index k (under P.mu, between runs). Returns the number started in all. */
static int pool_grow(int k) {
    if (!P.hooks) {
        atexit(pool_at_exit);
        pthread_atfork(NULL, NULL, pool_child_reset);
        P.hooks = true;
    }
    if (!P.run && !(P.run = sweep_new())) return P.nstarted;
    if (k <= P.nstarted) return P.nstarted;
    P.start_gen = atomic_load(&P.gen);
    for (int w = P.nstarted + 1; w <= k; w++) {
        if (sweep_spawn(&P.th[w], pool_worker, (void *)(intptr_t)w) != 0) break;
        P.nstarted = w;
    }
    return P.nstarted;
}

int pool_run(size_t n, int nthreads, sweep_task_fn fn, void *ud) {
    int t = sweep_threads(n, nthreads);
    if (t <= 1 || t - 1 > POOL_MAX || pthread_mutex_trylock(&P.mu) != 0) return sweep_run(n, nthreads, fn, ud);
    if (pool_grow(t - 1) < t - 1 || !P.run) {
        pthread_mutex_unlock(&P.mu);
        return sweep_run(n, nthreads, fn, ud);
    }
    sweep_reset(P.run, n, fn, ud);
    P.active = t;
    atomic_store(&P.pending, (unsigned)P.nstarted);
    int blas_threads = openblas_get_num_threads();
    if (blas_threads != 1) openblas_set_num_threads(1);
    atomic_fetch_add(&P.gen, 1);
    if (atomic_load(&P.sleepers) > 0) futex_wake(&P.gen);
    sweep_units(P.run, 0);
    for (unsigned c; (c = atomic_load_explicit(&P.pending, memory_order_acquire)) != 0;)
        wait_change(&P.pending, c, &P.caller_asleep);
    if (blas_threads != 1) openblas_set_num_threads(blas_threads);
    int rc = sweep_result(P.run);
    pthread_mutex_unlock(&P.mu);
    return rc;
}

int pool_workers(void) { return P.nstarted; }

void pool_stop(void) {
    if (pthread_mutex_trylock(&P.mu) != 0) return;
    atomic_store(&P.stop, 1);
    atomic_fetch_add(&P.gen, 1);
    futex_wake(&P.gen);
    for (int w = 1; w <= P.nstarted; w++) pthread_join(P.th[w], NULL);
    P.nstarted = 0;
    sweep_free(P.run);
    P.run = NULL;
    atomic_store(&P.stop, 0);
    pthread_mutex_unlock(&P.mu);
}
