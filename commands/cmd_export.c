/* cmd_export.c -- `export DIR`: writes the session's latest transformation of the current model
 * to a new folder. The transformation decides the format: a FaRR truncation (core/export.h: hf
 * or factors), a TransMLA conversion (DeepSeek-V3 checkpoint, core/mla_export.h), a
 * non-contextual TPA conversion (attnlab's own layout, core/tpa.h) or KQ-SVD projections
 * (core/kqsvd.h). "Latest" is what the dispatcher recorded from the commands marked .xform
 * (registry.h); with none recorded for this model, whichever one is pending. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cmd_calib.h"
#include "cmd_convert.h"
#include "cmd_tpa.h"
#include "export.h"
#include "farr.h"
#include "registry.h"
#include "session.h"

static const char EXPORT_HELP[] =
    "Writes the session's latest transformation of the current model to a new folder DIR, which\n"
    "attnlab (and, for Hugging Face layouts, the family's loader) can open:\n"
    "- after `truncate` (FaRR): `format hf` (DeepSeek-V3 layout, one rank over all layers, e.g.\n"
    "  policy model-max) sets qk_nope_head_dim / v_head_dim and reslices q_b_proj, kv_b_proj and\n"
    "  o_proj (queries scaled so the 1/sqrt(d) softmax scale keeps the scores); `format factors`\n"
    "  (any family) keeps the layout with the truncated heads zero-padded and writes the compact\n"
    "  per-head factors to farr/factors.safetensors. Default: hf when the truncation allows it;\n"
    "- after `convert mla`: a DeepSeek-V3 checkpoint (`dtype` of the new attention tensors, default\n"
    "  the source's; `shard-mb` to split the weights); `check DIR` compares it with its source;\n"
    "- after `convert tpa`: the non-contextual TPA factors in attnlab's own layout\n"
    "  (tpa_manifest.json + tpa_factors.safetensors; no other loader reads it; `dtype`);\n"
    "- after `kvsvd learn`: the projections, per layer (kv_heads, d, R), and a manifest.\n"
    "Tensors the transformation did not touch are copied bit for bit (dtype and FP8 scales kept);\n"
    "the folder is built beside DIR and renamed into place only when complete; a manifest records\n"
    "what was done. Never writes into (or inside) the source folder; an existing non-empty DIR\n"
    "needs `force`, which replaces it as a whole. `dtype`, `shard-mb` and `format` are refused\n"
    "where the export cannot honour them.\n"
    "Examples:\n"
    "  truncate vo rank 8 policy model-max; export out/r1-vo8\n"
    "  convert mla kv-rank 64; export out/llama-mla dtype bf16\n"
    "  export out/llama-farr format factors force";

static const char *const FORMAT_CHOICES[] = {"hf", "factors", NULL};
static const char *const DTYPE_CHOICES[] = {"f32", "f16", "bf16", NULL};

static const Param export_pos[] = {
    { .name = "dir", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "DIR", .help = "the new folder" },
    {0}
};

static const Param export_kw[] = {
    { .name = "format", .type = ARG_ENUM, .choices = FORMAT_CHOICES, .comp = COMP_CHOICES,
      .help = "FaRR: hf (DeepSeek-V3 layout) or factors (default: hf when possible)" },
    { .name = "dtype", .type = ARG_ENUM, .choices = DTYPE_CHOICES, .comp = COMP_CHOICES,
      .help = "TransMLA / TPA: dtype of the new tensors (default: the source's for TransMLA, f32 for TPA)" },
    { .name = "shard-mb", .type = ARG_INT, .min = 1, .max = 1 << 20, .comp = COMP_NONE, .metavar = "MB",
      .help = "TransMLA: split the weights into shards of at most MB MiB (default 4096)" },
    { .name = "force", .type = ARG_FLAG, .comp = COMP_NONE, .help = "replace an existing non-empty folder as a whole" },
    {0}
};

/* Writes the FaRR working copy (the latest `truncate vo` / `truncate qk` plans). */
static int export_farr(Session *s, const Args *a, const FarrPlan *vo, const FarrPlan *qk, Out *out) {
    const char *dir = args_str(a, "dir");
    ExportOpts o = { .format = EXPORT_AUTO, .force = args_flag(a, "force") };
    if (args_given(a, "format") && export_format_parse(args_str(a, "format"), &o.format)) return AL_ERR;
    ExportReport rep;
    int rc = farr_export(s->cur, vo, qk, dir, &o, &rep);
    if (rc) return rc;
    out_printf(out, "exported %s%s%s of %s to %s (format %s): %zu files, %zu tensors copied bit for bit, %zu rewritten\n",
               vo ? "VO" : "", vo && qk ? " + " : "", qk ? "QK" : "", s->cur->name, dir,
               export_format_name(rep.format), rep.files, rep.tensors_copied, rep.tensors_rewritten);
    if (rep.format == EXPORT_HF && qk)
        out_printf(out, "query rows scaled by %.6f so that scores keep their 1/sqrt(d) scale\n", rep.q_scale);
    out_printf(out, "manifest: %s/farr_manifest.json\n", dir);
    out_string(out, dir);
    out->written = true;
    return AL_OK;
}

/* Refuses a keyword the chosen export cannot honour (never silently ignored). */
static int refuse_kw(const Args *a, const char *kw, const char *what) {
    return args_given(a, kw) ? al_err("export: %s is not taken by %s", kw, what) : AL_OK;
}

static int cmd_export(Session *s, const Args *a, Out *out) {
    const FarrPlan *vo = s->farr ? farr_state_plan(s->farr, s->cur, FARR_VO) : NULL;
    const FarrPlan *qk = s->farr ? farr_state_plan(s->farr, s->cur, FARR_QK) : NULL;
    bool farr = vo || qk, mla = cmd_convert_pending(s, s->cur), tpa = cmd_tpa_pending(s, s->cur);
    bool kv = cmd_kvsvd_pending(s, s->cur);
    int last = s->last_xform_model == s->cur ? s->last_xform : XF_NONE;
    const char *dir = args_str(a, "dir"), *dtype = args_given(a, "dtype") ? args_str(a, "dtype") : NULL;
    size_t shard_mb = args_given(a, "shard-mb") ? (size_t)args_int(a, "shard-mb") : 0;
    if (last == XF_NONE)                 /* nothing recorded: the one that is pending, FaRR first */
        last = farr ? XF_FARR : mla ? XF_MLA : tpa ? XF_TPA : kv ? XF_KVSVD : XF_NONE;
    bool force = args_flag(a, "force");
    if (last == XF_FARR && farr)
        return refuse_kw(a, "dtype", "a FaRR export (each tensor keeps its dtype)") ||
               refuse_kw(a, "shard-mb", "a FaRR export (it keeps the source's shards)") ? AL_ERR
               : export_farr(s, a, vo, qk, out);
    if (last == XF_MLA && mla)
        return refuse_kw(a, "format", "a TransMLA export (always DeepSeek-V3 layout)") ? AL_ERR
               : cmd_convert_export(s, dir, dtype, shard_mb, force, out);
    if (last == XF_TPA && tpa)
        return refuse_kw(a, "format", "a TPA export") || refuse_kw(a, "shard-mb", "a TPA export (one factors file)")
                   ? AL_ERR : cmd_tpa_export(s, dir, dtype, force, out);
    if (last == XF_KVSVD && kv)
        return refuse_kw(a, "format", "a KQ-SVD export") || refuse_kw(a, "dtype", "a KQ-SVD export (F32 projections)") ||
               refuse_kw(a, "shard-mb", "a KQ-SVD export") ? AL_ERR : cmd_kvsvd_export(s, dir, force, out);
    return al_err("nothing to export for %s: run `truncate vo|qk ...`, `convert mla ...`, `convert tpa ...` or "
                  "`kvsvd learn ...` first", s->cur->name);
}

static const Command export_cmds[] = {
    { .name = "export", .summary = "write the latest truncation, conversion or projections to a new folder",
      .help = EXPORT_HELP, .pos = export_pos, .kw = export_kw, .fn = cmd_export, .flags = CMD_MODEL },
    {0}
};

const CommandGroup cmd_group_export = { .title = "Export", .cmds = export_cmds };
