/* cmd_plot_attend.h -- what a head does on real text, drawn, as `plot` sub-commands (handlers in
 * cmd_plot_attend.c, numbers from headprobe.h):
 *   plot attention "TEXT" layer L head H [compare]   the head's pattern, token strings on both axes;
 *                                    compare: the source's and the newest transformation's side by side
 *   plot head-importance FILE [layer L|all]          delta ppl per head (ablation) beside its VO rank
 * To plug them into `plot`, put CMD_PLOT_ATTEND_SUBS among the entries of cmd_plot.c's plot_subs. */
#ifndef AL_CMD_PLOT_ATTEND_H
#define AL_CMD_PLOT_ATTEND_H

#include "registry.h"

int cmd_plot_attention(Session *s, const Args *a, Out *out);
int cmd_plot_head_importance(Session *s, const Args *a, Out *out);

extern const Param cmd_plot_attention_pos[], cmd_plot_attention_kw[];
extern const Param cmd_plot_importance_pos[], cmd_plot_importance_kw[];
extern const char CMD_PLOT_ATTENTION_HELP[], CMD_PLOT_IMPORTANCE_HELP[];

#define CMD_PLOT_ATTEND_SUBS                                                                                   \
    { .name = "attention", .summary = "a head's attention pattern on a text, token strings on both axes",     \
      .help = CMD_PLOT_ATTENTION_HELP, .pos = cmd_plot_attention_pos, .kw = cmd_plot_attention_kw,           \
      .fn = cmd_plot_attention, .flags = CMD_MODEL },                                                          \
    { .name = "head-importance", .summary = "perplexity without each head, beside its fused VO rank",         \
      .help = CMD_PLOT_IMPORTANCE_HELP, .pos = cmd_plot_importance_pos, .kw = cmd_plot_importance_kw,        \
      .fn = cmd_plot_head_importance, .flags = CMD_MODEL }

#endif
