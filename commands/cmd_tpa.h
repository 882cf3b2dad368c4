/* cmd_tpa.h -- what the TPA group (cmd_tpa.c, whose own table has `kv-cache` and `compare`) plugs
 * into the verbs: the sub-command `convert tpa` (CMD_CONVERT_TPA_SUB, listed by methods.c in the
 * `convert` hub) and the kind of transformation it leaves (cmd_tpa_xform: export in attnlab's own
 * layout, check in the session or of an export folder, its kv-cache row). */
#ifndef AL_CMD_TPA_H
#define AL_CMD_TPA_H

#include "registry.h"
#include "xform.h"

extern const XformKind cmd_tpa_xform;

/* `convert tpa` (keywords kv-rank, k-rank, v-rank, form, layers, tokens, fit, to). */
extern const Param cmd_tpa_convert_kw[];
extern const char CMD_TPA_CONVERT_HELP[];
int cmd_tpa_convert(Session *s, const Args *a, Out *out);

#define CMD_CONVERT_TPA_SUB                                                                                    \
    { .name = "tpa", .summary = "non-contextual Tensor Product Attention (TPA paper 3.4): form a or b at rank R", \
      .help = CMD_TPA_CONVERT_HELP, .kw = cmd_tpa_convert_kw, .fn = cmd_tpa_convert, .flags = CMD_MODEL }

#endif
