/* cmd_plot_compare.h -- the figures of `compare kv-budget B` (every KV-cache reduction at one
 * budget, core/methods/budget_compare.h) as `plot` sub-commands (handlers in cmd_plot_compare.c):
 *   plot compare [kv-budget B] [layers A-B] [what out|score]
 *                                   the relative error per layer, one curve per method, log-y;
 *                                   from the session's last `compare` when it matches, else runs it
 *   plot compare-budgets [budgets B1,B2,...]
 *                                   the error averaged over layers against the values each method
 *                                   caches: the cache / fidelity trade-off, one curve per method
 * To plug them into `plot`, put CMD_PLOT_COMPARE_SUBS among the entries of cmd_plot.c's plot_subs. */
#ifndef AL_CMD_PLOT_COMPARE_H
#define AL_CMD_PLOT_COMPARE_H

#include "registry.h"

int cmd_plot_compare(Session *s, const Args *a, Out *out);
int cmd_plot_compare_budgets(Session *s, const Args *a, Out *out);

extern const Param cmd_plot_compare_kw[];
extern const Param cmd_plot_compare_budgets_kw[];
extern const char CMD_PLOT_COMPARE_HELP[];
extern const char CMD_PLOT_COMPARE_BUDGETS_HELP[];

#define CMD_PLOT_COMPARE_SUBS                                                                                \
    { .name = "compare", .summary = "every KV-cache reduction at one budget: error per layer, per method", \
      .help = CMD_PLOT_COMPARE_HELP, .kw = cmd_plot_compare_kw, .fn = cmd_plot_compare,                    \
      .flags = CMD_MODEL },                                                                                  \
    { .name = "compare-budgets", .summary = "mean error over layers against KV cache, per method",         \
      .help = CMD_PLOT_COMPARE_BUDGETS_HELP, .kw = cmd_plot_compare_budgets_kw,                              \
      .fn = cmd_plot_compare_budgets, .flags = CMD_MODEL }

#endif
