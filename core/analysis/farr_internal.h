/* farr_internal.h -- counters of core/analysis/farr.c's spectrum cache and the route switch that only
 * tests and benchmarks use (not part of the API the shell builds on). */
#ifndef AL_FARR_INTERNAL_H
#define AL_FARR_INTERNAL_H

#include "farr.h"

/* Number of cache hits and computed layers so far (asking again is a hit). */
void farr_state_stats(const FarrState *st, size_t *hits, size_t *computed);
/* Fast-route heads the state has recomputed in double so far (certification, exact views). */
size_t farr_state_redone(const FarrState *st);
/* true: sweeps take the double route (FARR_ROUTE_STREAM); false (the default): the fast one
 * (FARR_ROUTE_FAST, certified at tau) where gram_fast_pays(). Process-wide; tests and benchmarks. */
void farr_force_double(bool on);

#endif
