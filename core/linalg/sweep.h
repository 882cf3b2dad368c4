/* sweep.h -- the worker sweep: n independent units (heads, tiles, a conversion's layers) run on a few pthreads; the
 * first error (the lowest failing unit's) or an interrupt stops it. The one scheduler of core/: pool.c runs the same
 * runs on its persistent workers, and tmla_lanes.h's lanes are a sweep with turns. */
#ifndef AL_SWEEP_H
#define AL_SWEEP_H

#include <pthread.h>
#include <stddef.h>

/* One unit of a sweep (a head): returns AL_OK or AL_ERR (with al_err). `worker` is the index of
 * the calling thread in [0, nthreads) for per-thread scratch. */
typedef int (*sweep_task_fn)(size_t i, int worker, void *ud);

/* One run in progress: its units, the next one to take, the lowest failing unit and its message, and (runs with turns)
 * the turn and the units finished. Opaque; pool.c keeps one for its runs. */
typedef struct Sweep Sweep;

/* A unit of a run with turns (sweep_run_turns): unit i of the run sw. */
typedef int (*sweep_turn_fn)(Sweep *sw, size_t i, void *ud);

/* Runs fn(i) for i in [0, n) on nthreads pthreads (0: al_threads(), capped at n), the calling thread worker 0, each
 * with ONE BLAS thread (the OpenBLAS thread count is restored afterwards). Units are taken in index order;
 * al_interrupted() is polled between units. Returns AL_OK, AL_ERR (the message of the lowest failing unit -- the one a
 * plain loop would have stopped at --, on this thread), a unit's own other status (AL_INTERRUPTED), or AL_INTERRUPTED
 * (units already started finish; the rest are skipped; never inside a span al_interrupt_defer protects). */
int sweep_run(size_t n, int nthreads, sweep_task_fn fn, void *ud);
/* The number of threads sweep_run would use for n units when given nthreads. */
int sweep_threads(size_t n, int nthreads);

/* sweep_run's contract for long units that take turns (a conversion's layers): fn(sw, i, ud) on t = sweep_threads(n,
 * nthreads) threads of their own (signals blocked), each thread's own work (matmul, the pool) on al_threads() / t
 * threads (al_threads_here) and OpenBLAS at most at that share during the run; the calling thread runs no unit but
 * waits, reporting al_progress(label, done, n) as units finish (label NULL: silent). One thread: the units run on the
 * calling thread, a plain loop reporting after each. A failing unit (or Ctrl-C) stops the taking of units; those
 * taken finish. Returns what sweep_run returns. */
int sweep_run_turns(size_t n, int nthreads, sweep_turn_fn fn, void *ud, const char *label);
/* Inside unit i of a run with turns: waits until every unit before i has passed its turn (sweep_turn_end, or
 * finished), so a step of each unit runs in unit order, one at a time. AL_ERR when a unit before i failed (the step is
 * not taken, as a plain loop would not have reached it). sw NULL: AL_OK at once. */
int sweep_turn_begin(Sweep *sw, size_t i);
/* Ends unit i's turn (a unit that finishes without one passes it then). sw NULL: nothing. */
void sweep_turn_end(Sweep *sw, size_t i);

/* ---------------------------------------------------------------- for pool.c: one run on threads kept elsewhere */

/* A run's state, made once and reused run after run (NULL: out of memory, with al_err). */
Sweep *sweep_new(void);
void sweep_free(Sweep *sw);
/* Makes sw the run of fn over [0, n) (no run may be in progress on it). */
void sweep_reset(Sweep *sw, size_t n, sweep_task_fn fn, void *ud);
/* Worker `worker`'s share of the run: units until none is left, a failure or an interrupt. */
void sweep_units(Sweep *sw, int worker);
/* The run's result as sweep_run returns it (after every worker's sweep_units has returned). */
int sweep_result(Sweep *sw);
/* Starts a thread running fn(arg) with every signal blocked (Ctrl-C reaches the program's own threads): 0 or
 * pthread_create's error. */
int sweep_spawn(pthread_t *th, void *(*fn)(void *), void *arg);

#endif
