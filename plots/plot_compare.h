/* plot_compare.h -- the figures of every KV-cache reduction at one budget (`plot compare`,
 * `plot compare-budgets`; data from core/compare.h, picked out by commands/cmd_plot_compare.c).
 *
 * The generic several-curves figure of plot.h (plot_curves) with two things those figures need:
 * each curve names its colour slot, so that a method keeps its colour in every figure (and when
 * others are left out), and the x axis can be whole numbers only (layers). Draws only. */
#ifndef AL_PLOT_COMPARE_H
#define AL_PLOT_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include "plot.h"

/* One method's curve. */
typedef struct {
    const char *label;         /* legend text */
    const double *x;           /* (n) */
    const double *y;           /* (n); non-finite values (and y <= 0 on a log axis) break the line */
    size_t n;
    int slot;                  /* colour slot (the method's index): the same slot, the same colour */
} PlotMethodCurve;

/* Curves with dots at every point and a legend above; opts->logy logs y; x_whole puts x ticks
 * on whole numbers only (at least 1 apart). An error when no point can be drawn. */
int plot_method_curves(const PlotOpts *opts, const PlotMethodCurve *curves, size_t n_curves, bool x_whole);

#endif
