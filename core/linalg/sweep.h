/* sweep.h -- the worker sweep: n independent units (heads, tiles) run on a few pthreads, each with
 * one BLAS thread; the first error or an interrupt stops it. */
#ifndef AL_SWEEP_H
#define AL_SWEEP_H

#include <stddef.h>

/* One unit of a sweep (a head): returns AL_OK or AL_ERR (with al_err). `worker` is the index of
 * the calling thread in [0, nthreads) for per-thread scratch. */
typedef int (*sweep_task_fn)(size_t i, int worker, void *ud);

/* Runs fn(i) for i in [0, n) on nthreads pthreads (0: al_threads(), capped at n), each with ONE
 * BLAS thread (the OpenBLAS thread count is restored afterwards). al_interrupted() is polled
 * between units. Returns AL_OK, AL_ERR (the first failing unit's message, on this thread) or
 * AL_INTERRUPTED (units already started finish; the rest are skipped; never inside a span
 * al_interrupt_defer protects). */
int sweep_run(size_t n, int nthreads, sweep_task_fn fn, void *ud);
/* The number of threads sweep_run would use for n units when given nthreads. */
int sweep_threads(size_t n, int nthreads);

#endif
