/* cmd_convert.h -- what other command groups may ask of the TransMLA group (cmd_convert.c):
 * whether the session holds a conversion of a model, and writing it (what `export DIR` does
 * after `convert mla`). */
#ifndef AL_CMD_CONVERT_H
#define AL_CMD_CONVERT_H

#include "registry.h"
#include "session.h"

/* True when the session holds a `convert mla` result of model m (NULL: of any model). */
bool cmd_convert_pending(const Session *s, const Model *m);
/* Exports the session's conversion to dir in DeepSeek-V3 layout (core/mla_export.h) and narrates
 * it on out; dtype "f32" | "f16" | "bf16" or NULL (the source's). */
int cmd_convert_export(Session *s, const char *dir, const char *dtype, Out *out);

#endif
