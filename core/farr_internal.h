/* farr_internal.h -- counters of core/farr.c's spectrum cache that only tests use (not part of
 * the API the shell builds on). */
#ifndef AL_FARR_INTERNAL_H
#define AL_FARR_INTERNAL_H

#include "farr.h"

/* Number of cache hits and computed layers so far (asking again is a hit). */
void farr_state_stats(const FarrState *st, size_t *hits, size_t *computed);

#endif
