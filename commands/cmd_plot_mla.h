/* cmd_plot_mla.h -- the TransMLA figures as `plot` sub-commands (handlers in cmd_plot_mla.c):
 *   plot key-norms layer L [freqfold M]   TransMLA Figure 3a: key norm per dimension, original vs
 *                                         RoRoPE vs RoRoPE + FreqFold, real / imaginary halves
 *   plot rope-energy layer L              key energy kept in the RoPE dims against RoPE dims
 *                                         kept, one curve per FreqFold M
 *   plot rope-removal                     Figure 3b: log-perplexity against the fraction of RoPE
 *                                         dims removed (RoRoPE, + FreqFold, MHA2MLA)
 *   plot kv-balance layer L               Figure 4a: NoPE key and value norms before / after KV
 *                                         balancing
 *   plot mla-table kv-ranks R,R,...       the one-shot strategies (TransMLA, MHA2MLA, CARE):
 *                                         held-out perplexity against KV values per token
 * The figures take the statistics keywords of ws_tmla.h (activation- or weight-based).
 * To plug them into `plot`, put CMD_PLOT_MLA_SUBS among the entries of cmd_plot.c's plot_subs. */
#ifndef AL_CMD_PLOT_MLA_H
#define AL_CMD_PLOT_MLA_H

#include "registry.h"

int cmd_plot_key_norms(Session *s, const Args *a, Out *out);
int cmd_plot_rope_energy(Session *s, const Args *a, Out *out);
int cmd_plot_rope_removal(Session *s, const Args *a, Out *out);
int cmd_plot_kv_balance(Session *s, const Args *a, Out *out);
int cmd_plot_mla_table(Session *s, const Args *a, Out *out);

extern const Param cmd_plot_key_norms_kw[];
extern const Param cmd_plot_rope_energy_kw[];
extern const Param cmd_plot_rope_removal_kw[];
extern const char CMD_PLOT_KEY_NORMS_HELP[];
extern const char CMD_PLOT_ROPE_ENERGY_HELP[];
extern const char CMD_PLOT_ROPE_REMOVAL_HELP[];
extern const char CMD_PLOT_KV_BALANCE_HELP[];
extern const Param cmd_plot_mla_table_kw[];
extern const char CMD_PLOT_MLA_TABLE_HELP[];

#define CMD_PLOT_MLA_SUBS                                                                                  \
    { .name = "key-norms", .summary = "TransMLA Fig. 3a: key norm per dim, original / RoRoPE / FreqFold", \
      .help = CMD_PLOT_KEY_NORMS_HELP, .kw = cmd_plot_key_norms_kw, .fn = cmd_plot_key_norms,          \
      .flags = CMD_MODEL },                                                                                \
    { .name = "rope-energy", .summary = "TransMLA: key energy kept against RoPE dims, per FreqFold",     \
      .help = CMD_PLOT_ROPE_ENERGY_HELP, .kw = cmd_plot_rope_energy_kw, .fn = cmd_plot_rope_energy,    \
      .flags = CMD_MODEL },                                                                                \
    { .name = "rope-removal", .summary = "TransMLA Fig. 3b: log-perplexity against RoPE dims removed",   \
      .help = CMD_PLOT_ROPE_REMOVAL_HELP, .kw = cmd_plot_rope_removal_kw, .fn = cmd_plot_rope_removal, \
      .flags = CMD_MODEL },                                                                                \
    { .name = "kv-balance", .summary = "TransMLA Fig. 4a: key and value norms before / after KV balancing", \
      .help = CMD_PLOT_KV_BALANCE_HELP, .kw = cmd_plot_key_norms_kw, .fn = cmd_plot_kv_balance,        \
      .flags = CMD_MODEL },                                                                                \
    { .name = "mla-table", .summary = "one-shot MLA strategies: held-out perplexity against KV values per token", \
      .help = CMD_PLOT_MLA_TABLE_HELP, .kw = cmd_plot_mla_table_kw, .fn = cmd_plot_mla_table,          \
      .flags = CMD_MODEL }

#endif
