/* pool.h -- the persistent worker pool: the threads that run matmul's products (and the forward
 * pass's attention heads), started once and kept, so that a product of a few microseconds (decoding
 * one token) does not pay for starting and joining threads. */
#ifndef AL_POOL_H
#define AL_POOL_H

#include <stddef.h>

#include "sweep.h"

/* sweep_run's contract on the pool (the run is a Sweep, sweep.h): fn(i, worker, ud) for i in [0, n) on nthreads
 * workers (0: al_threads(), capped at n), worker 0 the calling thread, each with ONE BLAS thread (the OpenBLAS
 * thread count is restored afterwards); units taken in index order, al_interrupted() polled between units. Returns
 * AL_OK, AL_ERR (the lowest failing unit's message, on this thread), a unit's own AL_INTERRUPTED, or AL_INTERRUPTED
 * (units already started finish, the rest are skipped). The workers are started on first use (more when a run asks
 * for more), woken per run (an idle one polls ~50 us -- pausing, then yielding the core -- then
 * sleeps on a futex) and joined at exit. A run while
 * another one holds the pool (another thread's, or one started from inside a unit) runs as
 * sweep_run, on threads of its own. */
int pool_run(size_t n, int nthreads, sweep_task_fn fn, void *ud);

/* Workers started so far (the calling thread not counted). For tests. */
int pool_workers(void);

/* Stops and joins the workers (registered with atexit on first use; a later pool_run starts them
 * again). Does nothing while a run holds the pool. */
void pool_stop(void);

#endif
