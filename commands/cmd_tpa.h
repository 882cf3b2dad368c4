/* cmd_tpa.h -- what other command groups may ask of the TPA group (cmd_tpa.c), so that the
 * issue's command names (`convert tpa`, `export`, `check`) dispatch here (the group's own table
 * has `kv-cache` and `compare`):
 *   convert tpa ...   a sub-command entry { .name = "tpa", .kw = cmd_tpa_convert_kw,
 *                     .fn = cmd_tpa_convert, .help = cmd_tpa_convert_help, ... } in `convert`'s table;
 *   export DIR        cmd_tpa_pending() tells whether the session holds a TPA conversion of the
 *                     current model; cmd_tpa_export() writes it;
 *   check             with no folder: cmd_tpa_check_session(); with a folder that tpa_is_export()
 *                     recognizes (core/tpa.h): cmd_tpa_check_dir();
 *   kv-cache          Table 1's rows, the model as loaded and the session's conversions (TransMLA
 *                     through cmd_convert_result, TPA): cmd_tpa_kv_table, keywords cmd_tpa_kv_kw;
 *   plot compare      the last `compare` result (cmd_tpa_compare_get runs one when it does not match). */
#ifndef AL_CMD_TPA_H
#define AL_CMD_TPA_H

#include "compare.h"
#include "registry.h"
#include "session.h"

/* True when the session holds a TPA conversion of m (NULL: of any model). */
bool cmd_tpa_pending(const Session *s, const Model *m);

/* `convert tpa` (keywords kv-rank, k-rank, v-rank, form, layers, tokens, fit, to). */
extern const Param cmd_tpa_convert_kw[];
extern const char cmd_tpa_convert_help[];
int cmd_tpa_convert(Session *s, const Args *a, Out *out);

/* Writes the session's TPA conversion to dir (attnlab-tpa layout); dtype "f32" | "f16" | "bf16" or
 * NULL (f32); force replaces an existing dir. Narrates on out. */
int cmd_tpa_export(Session *s, const char *dir, const char *dtype, bool force, Out *out);

/* Compares the session's TPA conversion with its source (src_name: another loaded model, or
 * NULL) on `tokens` random inputs; table layer, score_err, out_err; AL_ERR when the conversion
 * claims to be exact and a layer's output error is above 1e-4. `to` as out_table_to (may be NULL). */
int cmd_tpa_check_session(Session *s, const char *src_name, size_t tokens, const Args *a, Out *out);
/* The same for an export folder (source: src_name, or the manifest's source path). */
int cmd_tpa_check_dir(Session *s, const char *dir, const char *src_name, size_t tokens, const Args *a, Out *out);

/* ---- the last comparison (`compare kv-budget B`), kept for `plot compare` */

/* What a comparison runs with: the key of the result the session keeps. Zero fields (and
 * layer_lo < 0) match any kept result and take defaults when the comparison has to run. */
typedef struct {
    size_t budget;            /* B, values cached per token per layer (0: the kept one's) */
    int layer_lo, layer_hi;   /* inclusive, resolved; layer_lo < 0: the kept ones, else all */
    size_t tokens;            /* evaluation tokens (0: the kept one's, else 64) */
    int fit;                  /* 0 auto, 1 weights, 2 calib (`compare`'s fit keyword) */
} CmdCmpKey;

/* The session's last comparison of m when it matches q (same budget, tokens and calibration, and
 * its layers cover q's; *reused = true), else runs cmp_kv_budget for q and keeps that as the last
 * (*reused = false; q->budget must then be set). *out is owned by the session: valid until the next
 * comparison or m closes. Rows of layers outside q's range may be present: filter by layer. */
int cmd_tpa_compare_get(Session *s, Model *m, const CmdCmpKey *q, const CmpResult **out, bool *reused);
/* Runs the comparison q of m (inputs drawn from the session's calibration as q->fit says) without
 * keeping it: *out is the caller's (cmp_result_free). q->budget must be set. */
int cmd_tpa_compare_run(Session *s, Model *m, const CmdCmpKey *q, CmpResult **out);
/* The last comparison kept for m (NULL when none). */
const CmpResult *cmd_tpa_compare_last(const Session *s, const Model *m);
/* The FITS choices of `compare` ("auto", "weights", "calib", NULL), for other commands' keywords. */
extern const char *const cmd_tpa_fit_choices[];

/* `kv-cache` (keywords rq, rk, rv, groups, kv-lora, q-lora, rope-dim, bytes, scheme, to). */
extern const Param cmd_tpa_kv_kw[];
extern const char cmd_tpa_kv_help[];
int cmd_tpa_kv_table(Session *s, const Args *a, Out *out);

#endif
