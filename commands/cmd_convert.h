/* cmd_convert.h -- what TransMLA (cmd_convert.c) plugs into the verbs: the sub-commands `convert
 * mla` and `convert mla-table` (CMD_CONVERT_MLA_SUBS, listed by methods.c in the `convert` hub) and
 * the kind of transformation `convert mla` leaves (cmd_convert_xform: export, check, kv-cache). */
#ifndef AL_CMD_CONVERT_H
#define AL_CMD_CONVERT_H

#include "registry.h"
#include "xform.h"

extern const XformKind cmd_convert_xform;

int cmd_convert_mla(Session *s, const Args *a, Out *out);
int cmd_convert_mla_table(Session *s, const Args *a, Out *out);
extern const Param cmd_convert_mla_kw[];
extern const Param cmd_convert_mla_table_kw[];
extern const char CMD_CONVERT_MLA_HELP[];
extern const char CMD_CONVERT_MLA_TABLE_HELP[];

#define CMD_CONVERT_MLA_SUB                                                                                      \
    { .name = "mla", .summary = "TransMLA: GQA -> DeepSeek-V3 style MLA with RoRoPE, FreqFold, balanced KV",     \
      .returns = CMD_RETURNS_ROWS,                                                                             \
      .help = CMD_CONVERT_MLA_HELP, .kw = cmd_convert_mla_kw, .fn = cmd_convert_mla, .flags = CMD_MODEL }
#define CMD_CONVERT_MLA_TABLE_SUB                                                                                \
    { .name = "mla-table", .summary = "TransMLA Fig. 4b: perplexity of W- vs activation-based PCA, with/without BKV", \
      .returns = CMD_RETURNS_ROWS,                                                                             \
      .help = CMD_CONVERT_MLA_TABLE_HELP, .kw = cmd_convert_mla_table_kw, .fn = cmd_convert_mla_table,          \
      .flags = CMD_MODEL }

#endif
