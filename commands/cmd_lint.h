/* cmd_lint.h -- the `lint` command group (cmd_lint.c): `lint DIR` checks a checkpoint folder
 * against what transformers, vLLM, SGLang and llama.cpp's converter read (core/lint/lint.h) and gives
 * one row per target: its verdict and the reasons. */
#ifndef AL_CMD_LINT_H
#define AL_CMD_LINT_H

#include "lint.h"
#include "registry.h"

extern const CommandGroup cmd_group_lint;

/* The per-target table of a report (columns target, reads, verdict, reasons, notes): reasons are
 * the errors concerning the target, notes its warnings and advisories, each joined by "; ".
 * NULL + error when out of memory. */
Table *cmd_lint_table(const LintReport *r);

#endif
