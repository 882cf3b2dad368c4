/* tmla_lanes.c -- a conversion's layers on lanes (tmla_lanes.h): how many lanes, over sweep.h's run with turns, which
 * owns the threads, the turns, the lowest failure and Ctrl-C. */
#include "tmla_lanes.h"

#include "al.h"

enum { TMLA_LANES_DEFAULT = 2 };

int tmla_lanes_count(size_t n, int lanes) {
    int t = lanes > 0 ? lanes : TMLA_LANES_DEFAULT, cores = al_threads();
    if (t > cores) t = cores;
    if ((size_t)t > n) t = (int)n;
    return t < 1 ? 1 : t;
}

int tmla_lanes_run(size_t n, int lanes, tmla_lane_fn fn, void *ud, const char *label) {
    return sweep_run_turns(n, tmla_lanes_count(n, lanes), fn, ud, label);
}

int tmla_lanes_turn_begin(TmlaLanes *ln, size_t k) { return sweep_turn_begin(ln, k); }

void tmla_lanes_turn_end(TmlaLanes *ln, size_t k) { sweep_turn_end(ln, k); }
