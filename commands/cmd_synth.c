/* cmd_synth.c -- the `synth` command group: writes the demo models (demo-r1, demo-llama,
 * demo-gpt2: small HF-layout checkpoints with planted, documented low-rank heads; demo-kvnorm:
 * planted key-norm concentration for the TransMLA figures), one tiny
 * checkpoint per model family (family NAME: core/methods/synth_family.c) and DeepSeek-R1-shaped FP8
 * checkpoints (ds-r1-shape) into a folder, through core/methods/synth.c.
 * The planted structure is documented in examples/README.md. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "registry.h"
#include "session.h"
#include "synth.h"

/* ================================================================ helpers */

static const char *const DTYPE_CHOICES[] = {"f32", "bf16", "fp8", NULL};

/* Prints the files of dir with their sizes and sets the result to dir (a string Lua can pass on
 * to attn.load). */
static void report_dir(Out *out, const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    double total = 0;
    size_t nfiles = 0;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = al_asprintf("%s/%s", dir, e->d_name);
        struct stat sb;
        if (p && stat(p, &sb) == 0) {
            total += (double)sb.st_size;
            nfiles++;
        }
        free(p);
    }
    if (d) closedir(d);
    out_printf(out, "%zu file%s, %.1f MB in %s\n", nfiles, al_s(nfiles), total / 1e6, dir);
    out_string(out, dir);
}

/* ================================================================ synth demo-* */

static const char DEMO_HELP[] =
    "Writes a small Hugging Face-layout checkpoint (config.json + safetensors) with planted,\n"
    "documented low-rank attention heads into DIR (created; it must not exist or be empty):\n"
    "  demo-r1     DeepSeek-V3 layout (MLA): 6 layers, 8 heads, hidden 320, q_lora 192,\n"
    "              kv_lora 96; FP8 with 128x128 block scales and 3 shards by default\n"
    "  demo-llama  Llama, GQA 8 query / 2 KV heads, head_dim 32, rotate_half RoPE; BF16\n"
    "  demo-gpt2   GPT-2, MHA, fused c_attn (Conv1D), no RoPE; F32\n"
    "  demo-kvnorm Llama, GQA 8 query / 4 KV heads, head_dim 32, 2 layers; BF16: TransMLA's\n"
    "              key-norm concentration (plot key-norms, plot kv-balance): RoPE pairs 1, 6, 13\n"
    "              of every KV head carry keys up to 8x the other dims (rank 1 across the heads,\n"
    "              so RoRoPE gathers them into the first head), values 8x smaller than keys\n"
    "Planted (by layer): random full-rank heads; \"bottleneck\" heads whose V (or K) has\n"
    "exact low rank; \"only low when fused\" heads whose V and O are high rank but whose\n"
    "product is rank 3-4; flat full-rank heads; low-rank QK in the NoPE part. The exact\n"
    "ranks per layer and head are in examples/README.md. The same seed gives byte-identical\n"
    "files. `load demo-r1` (and -f32 / -bf16 / -fp8 variants) writes these into the cache\n"
    "folder on first use; `synth` is for writing them anywhere, with other dtypes, shard\n"
    "counts or seeds. Only the DeepSeek layout is offered in fp8, as real checkpoints are.";

static const Param demo_pos[] = {
    { .name = "dir", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "DIR",
      .help = "output folder (created; must not exist or be empty)" },
    {0}
};

#define DEMO_KW(dflt_dtype, dflt_shards)                                                                    \
    {                                                                                                      \
        { .name = "dtype", .type = ARG_ENUM, .choices = DTYPE_CHOICES, .def = dflt_dtype,                    \
          .comp = COMP_CHOICES, .help = "storage dtype of the weights (fp8: demo-r1 only)" },               \
        { .name = "shards", .type = ARG_INT, .def = dflt_shards, .min = 1, .max = 99, .comp = COMP_NONE,     \
          .metavar = "N", .help = "number of safetensors files (>1 adds model.safetensors.index.json)" },   \
        { .name = "seed", .type = ARG_INT, .def = "42", .min = 0, .max = 4294967295.0, .comp = COMP_NONE,    \
          .metavar = "S", .help = "random seed (same seed, same bytes)" },                                   \
        {0}                                                                                                \
    }

static const Param r1_kw[] = DEMO_KW("fp8", "3");
static const Param llama_kw[] = DEMO_KW("bf16", "1");
static const Param gpt2_kw[] = DEMO_KW("f32", "1");

/* Shared handler of the three demo sub-commands: the kind comes from the sub-command's name. */
static int cmd_synth_demo(Session *s, const Args *a, Out *out) {
    (void)s;
    SynthOptions o;
    if (!synth_demo_name(a->cmd->name, &o)) return al_err("synth: '%s' is not a demo model", a->cmd->name);
    static const dt_type dts[] = {DT_F32, DT_BF16, DT_F8_E4M3};
    int dt = args_enum(a, "dtype");
    o.dtype = dts[dt >= 0 && dt < 3 ? dt : 0];
    o.shards = (int)args_int(a, "shards");
    o.seed = (unsigned long)args_int(a, "seed");
    const char *dir = args_str(a, "dir");
    int rc = synth_write(&o, dir);
    if (rc != AL_OK) return rc;
    out_printf(out, "wrote %s (%s, %d shard%s, seed %lu): ", a->cmd->name, dt_name(o.dtype), o.shards,
               al_s(o.shards), o.seed);
    report_dir(out, dir);
    return AL_OK;
}

/* ================================================================ synth family */

static const char FAMILY_HELP[] =
    "Writes a tiny checkpoint of one model family into DIR (created; it must not exist or be\n"
    "empty), with the real Hugging Face tensor names, shapes and config.json keys of the family\n"
    "(NAME: a row of the family table with a recipe; the usage line lists them)\n"
    "(hidden 64-128, 3-8 layers, vocab 256, head_dim 32 -- gemma4's full layers 64; MoE: 4\n"
    "experts top-2, deepseek_v3 and glm4_moe: 8 routed experts in 4 groups + 1 shared, layer 0\n"
    "dense). Planted VO per KV head: layer 0 random; layer 1 KV head 0 bottleneck V rank 6, the\n"
    "others flat (32); layer 2 fused-low (V, O 31 at tau 0.999, VO 4); later layers random.\n"
    "gpt_neox (NoPE columns 8..31) and the MLA rows (qk_nope 32: deepseek_v3, kimi_k25,\n"
    "kimi_linear, ...) also plant QK: layer 1 K rank 8, layer 2 flat. Small sliding windows (8)\n"
    "and, for gemma2, low soft-caps (5, 10), so short sequences exercise them. The structure is\n"
    "in core/methods/synth_family.c's header, the dims in core/model/family.c. qwen3_next,\n"
    "qwen3_5(_moe): layers 0-2 Gated DeltaNet, layer 3 gated attention planted as layer 1 above;\n"
    "qwen3_next and qwen3_5_moe: 4 experts top-2 and a shared expert. The other hybrids plant\n"
    "their n-th attention layer as layer 1 + n % 2 above: nemotron_h layers 1 and 4,\n"
    "granitemoehybrid 1 and 3, kimi_linear (MLA; Kimi Delta Attention on 0-2, 4-6) 3 and 7.\n"
    "deepseek_v4: one KV head that is key and value, so layer 1's V rank 6 is also its key's\n"
    "NoPE rank (QK 6; each query's 24 NoPE dims flat); its outputs factored through 2 groups of\n"
    "wo_a / wo_b (forward pass refused: no ppl). kimi_k3: kimi_linear's plan and planted layers\n"
    "under language_model.model. with a vision tower beside them (forward pass refused).\n"
    "No tokenizer: feed token ids.";

static const Param family_pos[] = {
    { .name = "name", .type = ARG_ENUM, .choices = synth_family_names, .comp = COMP_CHOICES,
      .help = "the family (its config's model_type)" },
    { .name = "dir", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "DIR",
      .help = "output folder (created; must not exist or be empty)" },
    {0}
};

static const char *const FAMILY_DTYPES[] = {"f32", "bf16", NULL};

static const Param family_kw[] = {
    { .name = "dtype", .type = ARG_ENUM, .choices = FAMILY_DTYPES, .def = "f32", .comp = COMP_CHOICES,
      .help = "storage dtype of the weights" },
    { .name = "seed", .type = ARG_INT, .def = "42", .min = 0, .max = 4294967295.0, .comp = COMP_NONE,
      .metavar = "S", .help = "random seed (same seed, same bytes)" },
    {0}
};

static int cmd_synth_family(Session *s, const Args *a, Out *out) {
    (void)s;
    int f = args_enum(a, "name");
    const char *name = f >= 0 ? synth_family_names[f] : "?";
    dt_type dt = args_enum(a, "dtype") == 1 ? DT_BF16 : DT_F32;
    unsigned long seed = (unsigned long)args_int(a, "seed");
    const char *dir = args_str(a, "dir");
    int rc = synth_family_write(name, dt, seed, dir);
    if (rc != AL_OK) return rc;
    out_printf(out, "wrote family %s (%s, seed %lu): ", name, dt_name(dt), seed);
    report_dir(out, dir);
    return AL_OK;
}

/* ================================================================ synth ds-r1-shape */

static const char DS_HELP[] =
    "Writes DeepSeek-R1's exact attention tensors for N layers into DIR: q_a_proj,\n"
    "q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj\n"
    "(hidden 7168, 128 heads, q_lora 1536, kv_lora 512, qk_nope 128, qk_rope 64, v 128),\n"
    "FP8 E4M3 with 128x128 block scales, two layers per shard, an index, and R1's\n"
    "config.json (num_hidden_layers = N). About 190 MB per layer, written in a second or\n"
    "two each. The weights are random FP8 codes, except that heads 0, 8, 16, ... of every\n"
    "layer have a V of exact rank 16 (so V and fused VO are rank 16 there). For benchmarks\n"
    "at real scale with no download.";

static const Param ds_kw[] = {
    { .name = "layers", .type = ARG_INT, .def = "2", .min = 1, .max = 61, .comp = COMP_NONE, .metavar = "N",
      .help = "number of layers (R1 has 61)" },
    { .name = "seed", .type = ARG_INT, .def = "42", .min = 0, .max = 4294967295.0, .comp = COMP_NONE, .metavar = "S",
      .help = "random seed" },
    {0}
};

static int cmd_synth_ds(Session *s, const Args *a, Out *out) {
    (void)s;
    const char *dir = args_str(a, "dir");
    int layers = (int)args_int(a, "layers");
    int rc = synth_ds_r1_shape(dir, layers, (unsigned long)args_int(a, "seed"));
    if (rc != AL_OK) return rc;
    out_printf(out, "wrote ds-r1-shape (%d layer%s, FP8): ", layers, al_s(layers));
    report_dir(out, dir);
    return AL_OK;
}

/* ================================================================ table */

static const char SYNTH_HELP[] =
    "Writes synthetic checkpoints: the demo models with planted low-rank heads (the same ones\n"
    "`load demo-r1` opens), one tiny checkpoint per model family (`synth family NAME DIR`) and\n"
    "DeepSeek-R1-shaped FP8 checkpoints for benchmarks. From Lua each returns the folder it\n"
    "wrote (a string).\n"
    "Examples:\n"
    "  synth demo-llama /tmp/llama dtype f32\n"
    "  synth demo-kvnorm /tmp/kv; load /tmp/kv; plot kv-balance layer 0\n"
    "  synth family gemma2 /tmp/g2; load /tmp/g2\n"
    "  synth demo-r1 /tmp/r1 shards 1 seed 7; load /tmp/r1\n"
    "  synth ds-r1-shape /tmp/r1big layers 4";

static const Command synth_subs[] = {
    { .name = "demo-r1", .summary = "DeepSeek-V3 layout (MLA) demo model, FP8 sharded by default",
      .help = DEMO_HELP, .pos = demo_pos, .kw = r1_kw, .fn = cmd_synth_demo },
    { .name = "demo-llama", .summary = "Llama (GQA, RoPE) demo model, BF16 by default",
      .help = DEMO_HELP, .pos = demo_pos, .kw = llama_kw, .fn = cmd_synth_demo },
    { .name = "demo-gpt2", .summary = "GPT-2 (MHA, Conv1D, no RoPE) demo model, F32 by default",
      .help = DEMO_HELP, .pos = demo_pos, .kw = gpt2_kw, .fn = cmd_synth_demo },
    { .name = "demo-kvnorm", .summary = "Llama (GQA) demo with planted key-norm concentration (TransMLA)",
      .help = DEMO_HELP, .pos = demo_pos, .kw = llama_kw, .fn = cmd_synth_demo },
    { .name = "family", .summary = "a tiny checkpoint of one model family (qwen3, gemma2, phi3, ...)",
      .help = FAMILY_HELP, .pos = family_pos, .kw = family_kw, .fn = cmd_synth_family },
    { .name = "ds-r1-shape", .summary = "DeepSeek-R1's exact attention shapes in FP8 (benchmarks)",
      .help = DS_HELP, .pos = demo_pos, .kw = ds_kw, .fn = cmd_synth_ds },
    {0}
};

static const Command synth_cmds[] = {
    { .name = "synth", .summary = "write a demo model, a family's tiny checkpoint or an R1-shaped one",
      .returns = "the folder written (a string)",
      .help = SYNTH_HELP, .sub = synth_subs },
    {0}
};

const CommandGroup cmd_group_synth = { .title = "Synthetic models", .cmds = synth_cmds };
