/* methods.h -- the one place that lists what the methods plug into the shared verbs (methods.c):
 * the sub-commands of the `convert` hub and the transformation kinds whose export folders
 * `check DIR` recognizes. A method adds its entries there (one line each); the verbs (cmd_export.c)
 * read only these lists and xform.h, never a method's group file. */
#ifndef AL_METHODS_H
#define AL_METHODS_H

#include "registry.h"
#include "xform.h"

/* `convert mla|tpa|mla-table`, {0}-terminated. */
extern const Command methods_convert_subs[];
/* Kinds whose export folders `check DIR` can check, asked in this order (owns_dir, else their
 * dir_manifest is there); NULL-terminated. */
extern const XformKind *const methods_checkable_kinds[];
/* Commands (paths, "calib load") whose effect is session state other commands build on: `save
 * session` writes the latest of each per model before the transformations; NULL-terminated. */
extern const char *const methods_state_commands[];

#endif
