/* cmd_lint.c -- the `lint` command group: `lint DIR` runs core/lint/lint.c on a checkpoint folder and
 * shows, per target (transformers, vLLM, SGLang, llama.cpp by conversion), whether the folder
 * loads and why not, then the warnings and advisories. The per-target table is the result (Lua,
 * `to FILE.csv|.json`); at the prompt a compact table with numbered findings is printed instead.
 * The command succeeds whatever it finds: the findings are its output. */
#define _GNU_SOURCE
#include "cmd_lint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "resolve.h"
#include "session.h"

static const unsigned target_bits[LINT_NTARGETS] = {LT_HF, LT_VLLM, LT_SGLANG, LT_LLAMACPP};

/* A .gguf file was linted: only llama.cpp reads that format, and it has no config.json. */
static bool is_gguf(const LintReport *r) {
    size_t n = strlen(r->path);
    return n > 5 && !strcasecmp(r->path + n - 5, ".gguf");
}
#define GGUF_OTHER "not its format"    /* the verdict of a target that reads folders, on a .gguf */

/* What the target builds from the folder: the transformers class, architectures[0], or the GGUF
 * architecture llama.cpp's converter writes (buf holds it). */
static const char *target_reads(const LintReport *r, int i, char *buf, size_t cap) {
    const char *c = i == 0 && r->hf_class[0] ? r->hf_class : r->arch;
    if (i == LINT_NTARGETS - 1 && r->gguf_arch[0]) snprintf(buf, cap, "%s (GGUF)", r->gguf_arch);
    else if (is_gguf(r)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, "%s", c[0] ? c : "?");
    return buf;
}

/* "a; b; c" of the findings of target bit `tb` whose severity is in [lo, hi] (caller frees; "" if
 * none). With numbers, "1, 4" (the findings' 1-based numbers) instead of their messages. */
static char *joined(const LintReport *r, unsigned tb, lint_severity lo, lint_severity hi, bool numbers) {
    char *s = al_strdup("");
    for (size_t k = 0; s && k < r->n; k++) {
        const LintFinding *f = &r->f[k];
        if (!(f->targets & tb) || f->sev < lo || f->sev > hi) continue;
        char *n = numbers ? al_asprintf("%s%s%zu", s, *s ? ", " : "", k + 1)
                          : al_asprintf("%s%s%s", s, *s ? "; " : "", f->msg);
        free(s);
        s = n;
    }
    return s;
}

/* One row per target; numbers: the compact form printed at the prompt. */
static Table *lint_table(const LintReport *r, bool numbers) {
    Table *t = numbers ? table_new(4, "target", "reads", "verdict", "errors")
                       : table_new(5, "target", "reads", "verdict", "reasons", "notes");
    for (int i = 0; t && i < LINT_NTARGETS; i++) {
        char *why = joined(r, target_bits[i], LINT_ERROR, LINT_ERROR, numbers);
        char *notes = numbers ? NULL : joined(r, target_bits[i], LINT_WARNING, LINT_ADVISORY, false);
        if (!why || (!numbers && !notes) || table_row(t) != AL_OK) {
            free(why);
            free(notes);
            table_free(t);
            return NULL;
        }
        table_str(t, lint_target_name(i));
        char reads[128];
        table_str(t, target_reads(r, i, reads, sizeof reads));
        table_str(t, is_gguf(r) && i != LINT_NTARGETS - 1 ? GGUF_OTHER : lint_verdict_name(lint_verdict_of(r, target_bits[i])));
        table_str(t, why);
        if (!numbers) table_str(t, notes);
        free(why);
        free(notes);
    }
    if (!t) al_err("lint: out of memory");
    return t;
}

Table *cmd_lint_table(const LintReport *r) { return lint_table(r, false); }

/* "all targets" or "vLLM, SGLang". */
static void targets_str(unsigned bits, char *buf, size_t cap) {
    if ((bits & LT_ALL) == LT_ALL) { snprintf(buf, cap, "all targets"); return; }
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < LINT_NTARGETS && o < cap; i++)
        if (bits & target_bits[i]) o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", lint_target_name(i));
}

/* The header line. */
static void narrate_header(Out *out, const LintReport *r) {
    size_t ne = lint_count(r, LINT_ERROR), nw = lint_count(r, LINT_WARNING), na = lint_count(r, LINT_ADVISORY);
    if (is_gguf(r)) {
        out_printf(out, "lint %s: GGUF file for llama.cpp, architecture %s, %zu tensor%s: %zu error%s, %zu warning%s, "
                   "%zu advisor%s (transformers, vLLM and SGLang read checkpoint folders: " GGUF_OTHER ")\n", r->path,
                   r->gguf_arch[0] ? r->gguf_arch : "(none)", r->ntensors, al_s(r->ntensors), ne, al_s(ne),
                   nw, al_s(nw), na, na == 1 ? "y" : "ies");
        return;
    }
    out_printf(out, "lint %s: %s%s%s%s, %zu tensor%s in %zu file%s: %zu error%s, %zu warning%s, %zu advisor%s\n", r->path,
               r->model_type[0] ? r->model_type : "(no model_type)", r->arch[0] ? " (" : "", r->arch,
               r->arch[0] ? ")" : "", r->ntensors, al_s(r->ntensors), r->nfiles, al_s(r->nfiles),
               ne, al_s(ne), nw, al_s(nw), na, na == 1 ? "y" : "ies");
}

/* The numbered findings: errors, then warnings, then advisories. */
static void narrate_findings(Out *out, const LintReport *r) {
    for (size_t k = 0; k < r->n; k++) {
        const LintFinding *f = &r->f[k];
        char tg[96];
        targets_str(f->targets, tg, sizeof tg);
        out_printf(out, "%3zu. %-8s %s: %s\n", k + 1, lint_severity_name(f->sev), tg, f->msg);
    }
}

/* At the prompt: the header, the compact per-target table (errors by number), the numbered
 * findings; the full table is the value (already shown). Else the header and findings, then the
 * value printed in the session's format or written `to FILE`. */
static int cmd_lint(Session *s, const Args *a, Out *out) {
    (void)s;
    const char *dir = args_str(a, "dir"), *to = args_str(a, "to");
    char *resolved = NULL;                          /* an alias or org/name in the Hugging Face cache */
    struct stat sb;
    if (stat(dir, &sb) != 0 && resolve_model(dir, &resolved) == AL_OK) dir = resolved;
    al_err_clear();
    LintReport *r = NULL;
    int rc = lint_folder(dir, &r);
    free(resolved);
    if (rc != AL_OK) return AL_ERR;
    Table *full = lint_table(r, false);
    Table *compact = out_narrates(out) && !to && out->fmt == FMT_TABLE ? lint_table(r, true) : NULL;
    if (!full) { table_free(compact); lint_report_free(r); return AL_ERR; }
    if (out_narrates(out)) narrate_header(out, r);
    char *text = compact ? table_render(compact, FMT_TABLE, out->prec) : NULL;
    if (text) out_printf(out, "%s", text);
    free(text);
    if (out_narrates(out)) narrate_findings(out, r);
    lint_report_free(r);
    if (!compact) return out_table_to(out, to, full);
    table_free(compact);
    out_table(out, full);
    out->written = true;
    return AL_OK;
}

static const char LINT_HELP[] =
    "Checks a checkpoint folder against what the engines people deploy read, and says per\n"
    "target -- transformers (the family's class), vLLM, SGLang, llama.cpp (by convert_hf_to_gguf.py)\n"
    "-- whether it loads, \"will not load\", or \"loads, but computes a different model\", and why\n"
    "(vLLM / SGLang on a folder without tokenizer files: \"loads with --skip-tokenizer-init ...\").\n"
    "Checked: config.json (present, parsed, model_type and architectures known to each engine);\n"
    "every tensor the family's loader expects, with the shape config.json implies (hidden, heads,\n"
    "KV heads, head_dim, intermediate, vocab, MLA ranks and head dims, experts, FP8 scales) for\n"
    "every family attnlab loads (`help load` lists them: q/k norms, sandwich and post norms,\n"
    "fused qkv_proj / gate_up_proj, routers and experts), tensors no loader places, a tied head that\n"
    "differs; keys stock loaders ignore but attnlab reads (qk_latent_layernorm: false), DeepSeek\n"
    "keys vLLM/SGLang read otherwise (rope_interleave: false, attention_bias, rope_scaling) and\n"
    "deepseek_v3 keys left to DeepSeek-V3's defaults (q_lora_rank, first_k_dense_replace, ...);\n"
    "the index (weight_map covers every tensor, every shard exists, metadata.total_size = the\n"
    "tensors' bytes); each shard's header and __metadata__ {\"format\": \"pt\"}; torch_dtype\n"
    "against the weights, FP8 without a quantization_config; tokenizer files; FlashMLA's shapes\n"
    "(kv_lora_rank 512 + qk_rope_head_dim 64). DIR may be an alias or org/name found in the\n"
    "Hugging Face cache, as for `load`.\n"
    "At the prompt the findings are numbered and the table names them; the result (Lua, `to`)\n"
    "has the messages in full (columns target, reads, verdict, reasons, notes). The command\n"
    "succeeds whatever it finds -- `attnlab -e 'lint DIR'` exits 0 unless DIR does not exist --\n"
    "so read the verdicts (e.g. attn.lint(DIR)[2].verdict in Lua).\n"
    "A FILE.gguf is checked for llama.cpp, the engine that reads GGUF: a readable file, an\n"
    "architecture llama.cpp knows, the metadata keys it requires, the vocabulary and, for the\n"
    "architectures attnlab maps, the tensors; transformers, vLLM and SGLang read checkpoint\n"
    "folders, so their verdict there is \"" GGUF_OTHER "\".\n"
    "Examples:\n"
    "  lint out/llama-mla\n"
    "  lint Qwen/Qwen2.5-0.5B\n"
    "  synth demo-r1 /tmp/r1; lint /tmp/r1 to lint.json\n"
    "  lua for _, r in ipairs(attn.lint('out/farr')) do print(r.target, r.verdict) end";

static const Param lint_pos[] = {
    { .name = "dir", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "DIR",
      .help = "the checkpoint folder (config.json, safetensors, tokenizer), or an alias / org/name in the HF cache" },
    {0}
};
static const Param lint_kw[] = { PARAM_TO, {0} };

static const Command lint_cmds[] = {
    { .name = "lint", .summary = "will a checkpoint folder load in transformers, vLLM, SGLang, llama.cpp?",
      .help = LINT_HELP, .pos = lint_pos, .kw = lint_kw, .fn = cmd_lint },
    {0}
};

const CommandGroup cmd_group_lint = { .title = "Export", .cmds = lint_cmds };
