/* tmla_lanes.h -- a conversion's layers on lanes: n units (the layers `convert mla` converts, in layer order) run
 * `lanes` at a time, each lane a thread of its own whose work (matmul, the pool) runs on al_threads() / lanes threads
 * (al_threads_here), so the two cores of a small machine each convert one layer -- the eigen-solves (dsytrd) do not
 * scale over two threads, two layers side by side do. OpenBLAS runs on that share too while the units run, one lane or
 * several: its threaded dsymv sums in another order (the old loop's float32 export of demo-llama had one hash at
 * OPENBLAS_NUM_THREADS=1, another at 2), so the bits depend on the share, not on the lanes -- on two cores one BLAS
 * thread a layer at ATTNLAB_THREADS 1 and 2 alike. The units' results are the caller's (each writes its own slots),
 * so they do not depend on the lanes' timing. The lanes are a sweep with turns (sweep.h: sweep_run_turns, the one
 * scheduler); this module is the conversion's policy over it: how many lanes. */
#ifndef AL_TMLA_LANES_H
#define AL_TMLA_LANES_H

#include <stddef.h>

#include "sweep.h"

/* A run of lanes: the sweep it is. */
typedef Sweep TmlaLanes;

/* Unit k of n, on a lane: AL_OK, AL_ERR (al_err on this thread) or AL_INTERRUPTED. */
typedef sweep_turn_fn tmla_lane_fn;

/* The lanes tmla_lanes_run uses for n units when `lanes` is asked (0: min(2, al_threads())): at most n, at most
 * al_threads(), at least 1. Two lanes at most by default: each holds one layer's working set (an 8B layer's Σ alone is
 * 134 MB), so the memory in flight stays two layers'. */
int tmla_lanes_count(size_t n, int lanes);

/* Runs fn(k) for k in [0, n): units taken in order, `lanes` (tmla_lanes_count) at a time (sweep_run_turns); with one
 * lane, on this thread as a plain loop. al_progress(label, done, n) on this thread as units finish. After a unit fails
 * (or Ctrl-C) no further unit is taken; the units taken finish. Returns AL_OK, or the result of the lowest unit that
 * did not return AL_OK -- the unit a one-lane loop would have stopped at -- with its message on this thread. */
int tmla_lanes_run(size_t n, int lanes, tmla_lane_fn fn, void *ud, const char *label);

/* Inside unit k: waits until every unit before k has passed its turn (tmla_lanes_turn_end, or finished), so a step of
 * each unit (the calibration digest's moments_seen) runs in unit order, one at a time (sweep_turn_begin). AL_ERR when a
 * unit before k failed (the step is not taken, as a one-lane loop would not have reached it). ln NULL: AL_OK at once. */
int tmla_lanes_turn_begin(TmlaLanes *ln, size_t k);
/* Ends unit k's turn (also when it finishes without one). ln NULL: nothing. */
void tmla_lanes_turn_end(TmlaLanes *ln, size_t k);

#endif
