/* cmd_export.c -- the verbs that act on transformations (xform.h) without knowing the methods:
 * `convert` (a hub like `plot`: its sub-commands are the methods', listed in methods.c), `export
 * DIR` (writes the newest transformation of the current model: a FaRR truncation, a TransMLA or
 * TPA conversion, KQ-SVD projections -- the transformation decides the format) and `check [DIR]`
 * (the newest checkable transformation of the current model, or an export folder, against its
 * source). `kv-cache` (cmd_tpa.c) lists a row for each transformation. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf_convert.h"
#include "methods.h"
#include "params.h"
#include "registry.h"
#include "session.h"
#include "ws_check.h"
#include "xform.h"

/* ================================================================ export */

static const char EXPORT_HELP[] =
    "Writes the session's latest transformation of the current model to a new folder DIR, which\n"
    "attnlab (and, for Hugging Face layouts, the family's loader) can open:\n"
    "- after `truncate` (FaRR): `format hf` (DeepSeek-V3 layout, one rank over all layers, e.g.\n"
    "  policy model-max) sets qk_nope_head_dim / v_head_dim and reslices q_b_proj, kv_b_proj and\n"
    "  o_proj (queries scaled so the 1/sqrt(d) softmax scale keeps the scores); `format factors`\n"
    "  (any family) keeps the layout with the truncated heads zero-padded and writes the compact\n"
    "  per-head factors to farr/factors.safetensors; `format dense` (any family) writes the same\n"
    "  weights without side files: the source's names, shapes and dtypes, each truncated head's\n"
    "  rank-r factors at full shape, so any engine loads it (`check DIR` confirms its fused maps).\n"
    "  Default: hf when the truncation allows it. Only the tensors the truncation changes are\n"
    "  re-encoded, in `dtype` (default the source's; for FP8, MXFP4 and NVFP4 bf16, scales dropped\n"
    "  and the modules listed in the source's list: quantization_config.modules_to_not_convert\n"
    "  (fine-grained FP8, MXFP4), ignore (compressed-tensors), ModelOpt's exclude_modules / ignore;\n"
    "  a static FP8 KV cache's k_scale / v_scale of a cut layer dropped; `dtype fp8` keeps every unchanged\n"
    "  128x128 block and its scale and prints the error it adds); layers and heads kept at full\n"
    "  rank stay the source's bit for bit;\n"
    "- after `convert mla`: a DeepSeek-V3 checkpoint (`dtype` of the new attention tensors, default\n"
    "  the source's; `shard-mb` to split the weights); `check DIR` compares it with its source;\n"
    "  softmax top-k experts (Mixtral) go into DeepSeek-V3's MoE layout as vLLM / SGLang route them,\n"
    "  Phi-3's gate_up_proj is split; a quantized source's quantization_config is kept in its form,\n"
    "  the new attention modules listed as unquantized; what the layout cannot hold (windows, sinks,\n"
    "  output gates, q/k norms, parallel residuals, ...) is refused, naming what an engine would need;\n"
    "  `format attnlab` writes any conversion in attnlab's own layout instead: the source's config.json\n"
    "  and tensors with model_type attnlab_mla and the MLA attention (f32 unless `dtype`), which\n"
    "  `load DIR` runs as the session did (no engine does: `lint DIR` says so); `check DIR` compares it;\n"
    "  it holds qk-norm keep (the cache and the rebuild of K / V), per-layer kv ranks (care-alloc) and\n"
    "  RoPE frequencies (mha2mla-*), and Qwen3.5's text tower with keep (the vision tower copied);\n"
    "- after `convert tpa`: the non-contextual TPA factors in attnlab's own layout\n"
    "  (tpa_manifest.json + tpa_factors.safetensors; no other loader reads it; `dtype`);\n"
    "- after `kvsvd learn`: the projections, per layer (kv_heads, d, R), and a manifest.\n"
    "`format gguf` (or DIR ending in .gguf) writes the current model as one GGUF file for llama.cpp\n"
    "(DIR/model.gguf, or the file named) -- after `truncate` the dense FaRR export of it, after\n"
    "`convert mla` the stock DeepSeek-V3 one (each written to a scratch folder beside DIR, read\n"
    "back and removed) --: architectures llama (Llama, Mistral, llama2.c, Mistral 3.1's text tower),\n"
    "mistral3 (Ministral 3), qwen2 (also MiMo), qwen3 (dense; also Qwen3-VL's text tower), olmo2\n"
    "(OLMo 2 and 3), phi3, gptneox, gemma2, gemma3, smollm3, exaone4, gpt-oss (its experts), gpt2\n"
    "and deepseek2 (a loaded DeepSeek-V3 / TransMLA export folder or a `convert mla`); other MoE\n"
    "models and other families are refused by name (README.md lists what each file holds), the\n"
    "tokenizer beside the model as llama.cpp's metadata; `dtype f32|f16|bf16|q8_0` for the 2-D\n"
    "weights (default: the source's; norms and 1-D tensors stay f32). `load FILE.gguf` reads it back.\n"
    "Tensors the transformation did not touch are copied bit for bit (dtype and FP8 scales kept);\n"
    "the folder is built beside DIR and renamed into place only when complete; a manifest records\n"
    "what was done. Never writes into (or inside) the source folder; an existing non-empty DIR\n"
    "needs `force`, which replaces it as a whole. `dtype`, `shard-mb` and `format` are refused\n"
    "where the export cannot honour them. From Lua: the folder (or .gguf file) written (a string).\n"
    "Examples:\n"
    "  truncate vo rank 8 policy model-max; export out/r1-vo8\n"
    "  convert mla kv-rank 64; export out/llama-mla dtype bf16\n"
    "  export out/llama-farr format factors force\n"
    "  export out/stories.gguf dtype q8_0\n"
    "  truncate vo rank 8; export out/r8.gguf";

static const char *const FORMAT_CHOICES[] = {"hf", "factors", "dense", "gguf", "attnlab", NULL};
static const char *const DTYPE_CHOICES[] = {"f32", "f16", "bf16", "fp8", "q8_0", NULL};

static const Param export_pos[] = {
    { .name = "dir", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "DIR", .help = "the new folder" },
    {0}
};

static const Param export_kw[] = {
    { .name = "format", .type = ARG_ENUM, .choices = FORMAT_CHOICES, .comp = COMP_CHOICES,
      .help = "FaRR: hf (DeepSeek-V3 layout), factors or dense (default: hf when possible); gguf: the model for llama.cpp; "
              "attnlab: a convert mla in attnlab's own layout (windows, sinks, soft-caps kept; `load DIR` reads it)" },
    { .name = "dtype", .type = ARG_ENUM, .choices = DTYPE_CHOICES, .comp = COMP_CHOICES,
      .help = "dtype of the new tensors (default: the source's for TransMLA, FaRR and gguf -- bf16 for a FaRR export of FP8, MXFP4 or NVFP4 --, f32 for TPA; fp8: FaRR of FP8 only)" },
    { .name = "shard-mb", .type = ARG_INT, .min = 1, .max = 1 << 20, .comp = COMP_NONE, .metavar = "MB",
      .help = "TransMLA: split the weights into shards of at most MB MiB (default 4096)" },
    { .name = "force", .type = ARG_FLAG, .comp = COMP_NONE, .help = "replace an existing non-empty folder as a whole" },
    {0}
};

/* The model GGUF writes for m: m itself, or (a transformation pending) *tmp_model opened from a
 * scratch folder *scratch beside dest that holds its engine_export (xform.h). */
static int gguf_source(Session *s, Model *m, const char *dest, Model **tmp_model, char **scratch) {
    const Xform *x = xform_newest(s, m, NULL);
    *tmp_model = NULL, *scratch = NULL;
    if (!x) return AL_OK;
    if (!x->kind->engine_export)
        return al_err("export: GGUF of a transformation (%s) is not written directly: `export DIR` it, `load DIR`, "
                      "then `export FILE.gguf` (written directly: after `truncate` and `convert mla`)",
                      x->kind->export_label ? x->kind->export_label : x->kind->name);
    const char *slash = strrchr(dest, '/');
    char *parent = slash ? al_asprintf("%.*s", (int)(slash - dest), dest) : al_strdup(".");
    int rc = parent && (!*parent || al_mkdirs_here(parent) == AL_OK) ? AL_OK : AL_ERR;
    char *tmpl = rc ? NULL : al_asprintf("%s/.attnlab-gguf-XXXXXX", *parent ? parent : "/");
    free(parent);
    if (!tmpl) return AL_ERR;
    if (!mkdtemp(tmpl)) {
        rc = al_err("export: cannot make a scratch folder %s beside %s: %s", tmpl, dest, strerror(errno));
        free(tmpl);
        return rc;
    }
    *scratch = tmpl;
    char *dir = al_asprintf("%s/export", tmpl);
    rc = dir ? x->kind->engine_export(s, x, dir) : AL_ERR;
    if (rc == AL_OK) rc = model_open(dir, tmp_model);
    free(dir);
    if (rc == AL_OK) {
        char *name = al_asprintf("%s", m->name);      /* general.name and messages: the source's */
        if (name) free((*tmp_model)->name), (*tmp_model)->name = name;
    }
    return rc;
}

/* `export DIR format gguf` / `export FILE.gguf`: the current model itself, or its pending
 * `truncate` / `convert mla` through a scratch export (gguf_source) removed afterwards, also on
 * errors and Ctrl-C (core/export/gguf_convert.h). */
static int export_gguf(Session *s, const Args *a, Out *out) {
    Model *m = s->cur, *g = NULL;
    if (args_given(a, "shard-mb")) return al_err("export: shard-mb is not taken by GGUF (one file)");
    dt_type src = m->cfg.dtype;
    GgufExportOpts o = {.dtype = src == DT_F16 ? GG_F16 : src == DT_F32 ? GG_F32 : GG_BF16, .force = args_flag(a, "force"),
                        .src = m->path};
    if (args_given(a, "dtype") && gg_type_parse(args_str(a, "dtype"), &o.dtype)) return AL_ERR;
    const Xform *x = xform_newest(s, m, NULL);
    char *scratch = NULL;
    GgufExportReport r;
    int rc = x ? gguf_dest_check(m, args_str(a, "dir"), &o) : AL_OK;  /* before the scratch export */
    if (rc == AL_OK) rc = gguf_source(s, m, args_str(a, "dir"), &g, &scratch);
    if (rc == AL_OK) rc = gguf_export(g ? g : m, args_str(a, "dir"), &o, &r);
    if (g) model_free(g);
    if (scratch) al_remove_tree(scratch);
    free(scratch);
    if (rc) return rc;
    char what[300] = "";
    if (x) snprintf(what, sizeof what, " with its %s (through %s)", x->kind->name, x->kind->engine_form);
    out_printf(out, "exported %s%s as GGUF to %s: llama.cpp architecture %s, %s, %zu tensor%s (%.1f MiB), %zu metadata keys, "
               "tokenizer %s\n", m->name, what, r.path, r.arch, gg_type_name(o.dtype), r.tensors, al_s(r.tensors),
               (double)r.bytes / 1048576.0, r.kvs, r.tokenizer);
    if (m->fp4 != DT_FP4_NONE || m->cfg.dtype == DT_F8_E4M3)
        out_printf(out, "  %s weights dequantized to %s%s\n", model_dtype_name(m), o.dtype == GG_Q8_0 ? "float32, then "
                   "quantized again to " : "", gg_type_name(o.dtype));
    if (r.mxfp4_kept || r.mxfp4_f32)
        out_printf(out, "  %zu MXFP4 expert tensors %s\n", r.mxfp4_kept + r.mxfp4_f32, r.mxfp4_kept ? "written as ggml's "
                   "MXFP4 (type 39, each block repacked bit for bit, as llama.cpp's converter does)" : "dequantized to F32");
    if (r.f16_fallback)
        out_printf(out, "  %zu tensor%s written F16: their rows are not whole Q8_0 blocks of 32\n", r.f16_fallback, al_s(r.f16_fallback));
    if (r.latent_scaled)
        out_printf(out, "  MLA latents scaled so that llama.cpp's latent RMSNorm acts linearly (relative error < 5e-7)\n");
    if (r.tied_output)
        out_printf(out, "  output.weight written from the tied embeddings (llama.cpp b5415 requires it for %s)\n", r.arch);
    if (r.q_less_old)
        out_printf(out, "  no query latent: llama.cpp b5415 .. b6845 (node-llama-cpp 3.8.1 .. 3.14.2) fail on it (they build "
                   "q_proj only for 27 layers); convert mla with q-rank for those builds\n");
    if (r.mtp_skipped)
        out_printf(out, "  %zu tensor%s of the multi-token-prediction layers left out (the logits never read them)\n",
                   r.mtp_skipped, al_s(r.mtp_skipped));
    if (r.note[0]) out_printf(out, "  %s\n", r.note);
    out_string(out, r.path);      /* Lua: the file written, as the other exports give their folder */
    out->written = true;
    return AL_OK;
}

static bool is_gguf_export(const Args *a) {
    const char *d = args_str(a, "dir");
    size_t n = d ? strlen(d) : 0;
    return (args_given(a, "format") && strcmp(args_str(a, "format"), "gguf") == 0) || (n > 5 && !strcmp(d + n - 5, ".gguf"));
}

static int cmd_export(Session *s, const Args *a, Out *out) {
    if (is_gguf_export(a)) return export_gguf(s, a, out);
    const Xform *x = xform_newest(s, s->cur, NULL);
    char other[512];
    if (!x) ws_check_elsewhere(s, s->cur, false, "export DIR", other, sizeof other);
    if (!x)
        return al_err("nothing to export for %s (the current model): %s%srun `truncate vo|qk ...`, `convert mla ...`, "
                      "`convert tpa ...` or `kvsvd learn ...` on it first (or `export FILE.gguf` for the model itself)",
                      s->cur->name, other, *other ? "; or " : "");
    const XformKind *k = x->kind;
    const char *kw[] = {"format", "dtype", "shard-mb"}, *why[] = {k->no_format, k->no_dtype, k->no_shard_mb};
    for (size_t i = 0; i < 3; i++)
        if (why[i] && args_given(a, kw[i]))
            return al_err("export: %s is not taken by %s (%s)", kw[i], k->export_label ? k->export_label : k->name, why[i]);
    return k->export_to(s, x, a, out);
}

/* ================================================================ convert */

static const char CONVERT_HELP[] =
    "Model conversions. `convert mla` turns a GQA model with RoPE (Llama, Mistral, Qwen2,\n"
    "llama2.c) into DeepSeek-V3 style multi-head latent attention (TransMLA, seed 003);\n"
    "`convert mla-table` compares weight- and activation-based conversions by perplexity;\n"
    "`convert tpa` re-factors keys and values as non-contextual Tensor Product Attention.\n"
    "Then `export DIR` writes the latest conversion, `check` compares it with the model, and\n"
    "`kv-cache` puts its KV cache beside the model's and Table 1's.";

/* ================================================================ check */

static const char CHECK_HELP[] =
    "Compares a conversion with the model it came from, layer by layer: relative Frobenius error of\n"
    "the causal attention scores and of the attention outputs on random Gaussian tokens drawn as the\n"
    "conversion's report drew them -- its tokens, its seed (TPA: seed + layer) and, when it was\n"
    "calibrated, its calibration's statistics -- so the numbers are its report's (`tokens T` /\n"
    "`seed S` draw others; what was drawn is printed). An export records these inputs in its\n"
    "manifest (check_inputs) and the statistics in check_inputs.safetensors when they fit 64 MiB;\n"
    "otherwise `check DIR` takes them from the session's calibration of the source when its digest\n"
    "matches, and else says so and draws unit-variance tokens.\n"
    "Perplexity before and after only on a text: `text FILE` or `ids FILE` (token ids), the forms `ppl`\n"
    "takes, windows as ppl's default (its `after` is ppl's number), else the held-out validation split of\n"
    "the session's calibration text of the source (the tokens `convert mla` measures); none without.\n"
    "With no folder it checks the session's latest transformation of the current model (`truncate`:\n"
    "the FaRR working copy, on tokens drawn as `compare` draws them, with compare's farr out_err at\n"
    "the same ranks beside, and the perplexity before and after on the validation windows of the\n"
    "session's calibration text when it has one; `convert mla`: its DeepSeek-V3 export's layers built\n"
    "in memory as `export` builds them, nothing written; `convert tpa`), named in its first\n"
    "line. With DIR it loads the export there -- each kind is known by its manifest:\n"
    "attnlab_manifest.json (TransMLA), tpa_manifest.json (TPA), kvsvd_manifest.json (KQ-SVD: its\n"
    "projections evaluated as `kvsvd eval` did, on the recorded split of the calibration text or\n"
    "`text FILE`), a FaRR dense export -- and compares it with its source (the manifest's path, or\n"
    "`source NAME`, a loaded model); for TransMLA also\n"
    "every non-attention tensor byte for byte. TransMLA exports are evaluated as stock DeepSeek-V3\n"
    "engines run them (latent RMSNorms, interleaved RoPE, stock softmax scale, no q_proj bias), with\n"
    "notes on what engines compute differently and how close the errors are to the report's; an\n"
    "exact conversion (kv-rank full, D = d, one KV head or identical KV heads) shows errors at float\n"
    "precision. A FaRR export (any format): its fused maps against the source's at the manifest's\n"
    "ranks, then the same table as `check` after `truncate` (scores compared up to a constant per\n"
    "query, which the softmax ignores; tokens drawn as `compare` draws them: its seed and, in a\n"
    "calibrated session, the calibration's second moment) on the export's own weights, and the\n"
    "perplexity before / after from the export's own forward pass. TPA evaluates from its factors (RoPE as TPA applies it), and a TPA conversion that claims\n"
    "to be exact (form a with R = the KV heads, form b with R = the head dim) fails when any layer's\n"
    "output error is above 1e-4.\n"
    "Examples:\n"
    "  convert tpa kv-rank 2; check\n"
    "  check out/llama-mla\n"
    "  check out/llama-mla source llama text story.txt to check.json";

static const Param check_pos[] = {
    { .name = "dir", .type = ARG_PATH, .def = "", .comp = COMP_FILES, .metavar = "DIR",
      .help = "an export folder (TransMLA, TPA, KQ-SVD, FaRR); none: the session's conversion" },
    {0}
};
static const Param check_kw[] = {
    { .name = "source", .type = ARG_STRING, .comp = COMP_MODELS, .metavar = "NAME",
      .help = "a loaded model to compare with (default: the manifest's source)" },
    PARAM_TOKENS("64", "random tokens per layer (default: the conversion's, as its report drew them; 64 where it "
                       "recorded none, and for truncate)"),
    PARAM_SEED,
    PARAM_CHECK_TEXT,
    PARAM_TO,
    {0}
};

/* Whether dir is an export of kind k: its owns_dir, else its manifest file is there. */
static bool kind_owns(const XformKind *k, const char *dir) {
    if (k->owns_dir) return k->owns_dir(dir);
    if (!k->dir_manifest) return false;
    char *p = al_asprintf("%s/%s", dir, k->dir_manifest);
    struct stat sb;
    bool yes = p && stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
    free(p);
    al_err_clear();
    return yes;
}

/* check with no folder and nothing to check: what to do -- load a model, `use` the one with a transformation, or
 * make one. */
static int check_nothing(Session *s) {
    char other[512];
    if (!s->cur)
        return al_err("check: nothing to check: no model is loaded -- `load NAME`, truncate or convert it, then `check`; "
                      "or `check DIR` of an export folder (no model needed)");
    ws_check_elsewhere(s, s->cur, true, "check", other, sizeof other);
    return al_err("check: nothing to check for %s (the current model): %s%sgive an export folder (check DIR), or "
                  "truncate or convert %s first (truncate vo ..., convert mla ..., convert tpa ...); KQ-SVD is measured "
                  "by `kvsvd eval`", s->cur->name, other, *other ? "; or " : "", s->cur->name);
}

static int cmd_check(Session *s, const Args *a, Out *out) {
    const char *name = args_str(a, "source"), *dir = args_str(a, "dir");
    if (name && *name && !session_find(s, name)) return al_err("check: no loaded model named '%s'", name);
    if (!dir || !*dir) {                 /* the newest conversion of the current model */
        char head[1024];                 /* ppl's and generate's rule: xform_measured */
        const Xform *x = s->cur ? xform_measured(s, s->cur, false, true, "check", head, sizeof head) : NULL;
        if (x) {                         /* the headline names the model and the transformation */
            out_printf(out, "%s\n", head);
            return x->kind->check(s, x, a, out);
        }
        return check_nothing(s);
    }
    for (size_t i = 0; methods_checkable_kinds[i]; i++) {
        const XformKind *k = methods_checkable_kinds[i];
        if (k->check_dir && kind_owns(k, dir)) return k->check_dir(s, dir, a, out);
    }
    char known[768] = "";
    for (size_t i = 0, n = 0; methods_checkable_kinds[i]; i++) {
        const XformKind *k = methods_checkable_kinds[i];
        if (!k->check_dir) continue;
        size_t len = strlen(known);
        snprintf(known + len, sizeof known - len, "%s%s (%s%s%s)", n++ ? "; " : "", k->name,
                 k->export_label ? k->export_label : "its export", k->dir_manifest ? ": " : "",
                 k->dir_manifest ? k->dir_manifest : "");
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return al_err("check: %s: no such folder", dir);
    return al_err("check: %s is no attnlab export: check DIR reads the folders `export` writes, each marked by its "
                  "manifest -- %s", dir, known);
}

/* ================================================================ the tables */

static const Command export_cmds[] = {
    { .name = "export", .summary = "write the latest truncation, conversion or projections to a new folder",
      .help = EXPORT_HELP, .pos = export_pos, .kw = export_kw, .fn = cmd_export, .flags = CMD_MODEL },
    {0}
};

const CommandGroup cmd_group_export = { .title = "Export", .cmds = export_cmds };

static const Command convert_cmds[] = {
    { .name = "convert", .summary = "convert the current model: convert mla kv-rank R [rope-dim D] ...",
      .help = CONVERT_HELP, .sub = methods_convert_subs, .flags = CMD_MODEL },
    { .name = "check", .summary = "compare a conversion (or its export) with its source, layer by layer",
      .help = CHECK_HELP, .pos = check_pos, .kw = check_kw, .fn = cmd_check },
    {0}
};

const CommandGroup cmd_group_convert = { .title = "Conversions: TransMLA (GQA -> MLA), TPA", .cmds = convert_cmds };
