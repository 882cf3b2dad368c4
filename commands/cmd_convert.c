/* cmd_convert.c -- the TransMLA command group: `convert mla` (GQA -> MLA, seed 003), `check DIR`
 * (an export against its source), `kv-cache` (bytes per token before and after), `export-mla DIR`
 * (the conversion in DeepSeek-V3 layout; `export DIR` dispatches here too). The figures are
 * `plot key-norms` and `plot rope-energy` (commands/cmd_plot_mla.c). The session keeps the last
 * conversion in struct ConvState (s->conv), dropped when its model closes. */
#define _GNU_SOURCE
#include "cmd_convert.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mla_export.h"
#include "transmla.h"

/* ================================================================ session state */

struct ConvState {
    TmlaResult *res;          /* the last conversion; res->src is a session model */
};

static void conv_free(Session *s) {
    if (s->conv) tmla_result_free(s->conv->res);
    free(s->conv);
    s->conv = NULL;
}

static void conv_model_closed(Session *s, Model *m) {
    if (s->conv && s->conv->res && s->conv->res->src == m) {
        tmla_result_free(s->conv->res);
        s->conv->res = NULL;
    }
}

static const SessionHook conv_hook = {.name = "convert", .on_free = conv_free, .on_model_close = conv_model_closed};

static int conv_state(Session *s, struct ConvState **out) {
    if (!s->conv) {
        if (!(s->conv = al_calloc(1, sizeof *s->conv, "the conversion state"))) return AL_ERR;
        if (session_hook_add(s, &conv_hook)) return AL_ERR;
    }
    *out = s->conv;
    return AL_OK;
}

bool cmd_convert_pending(const Session *s, const Model *m) {
    return s->conv && s->conv->res && (!m || s->conv->res->src == m);
}

/* ================================================================ convert mla */

static const char CONVERT_HELP[] =
    "Model conversions. `convert mla` turns a GQA model with RoPE (Llama, Mistral, Qwen2,\n"
    "llama2.c) into DeepSeek-V3 style multi-head latent attention (TransMLA, seed 003).";

static const char MLA_HELP[] =
    "TransMLA on every layer (seed 003, 4.1-4.3, App. B-D), with weight statistics (unit-variance\n"
    "inputs, the paper's W-based variant):\n"
    "  1. merge the KV heads into one latent head (exact);\n"
    "  2. RoRoPE: per RoPE frequency one PCA rotation across the KV heads, the same for the\n"
    "     real and imaginary dims (exact), 3. FreqFold M: M adjacent frequencies share one PCA\n"
    "     and the D = d/M kept RoPE dims turn at every M-th frequency (a standard RoPE of dim D);\n"
    "     the other key dims lose RoPE;\n"
    "  4. balanced KV: NoPE keys / alpha (alpha = RMS key / RMS value) and values share one PCA\n"
    "     basis of rank R (the KV latent), alpha folded back into the key up-projection;\n"
    "  5. the softmax scale (nope + D)^-1/2 is corrected in the query.\n"
    "Per layer it reports alpha, the key energy kept in the RoPE dims, the energy kept by the\n"
    "joint basis, and the relative error of attention scores and outputs on random inputs, with\n"
    "the other balance setting beside it. The KV cache goes from G (d + dv) to R + D values per\n"
    "token and layer. `export-mla DIR` (or `export DIR`) writes the result; `check DIR` compares.\n"
    "kv-rank full keeps every direction: with one KV head or identical KV heads and D = d the\n"
    "conversion is exact.\n"
    "Examples:\n"
    "  convert mla kv-rank full\n"
    "  convert mla kv-rank 512 rope-dim 64\n"
    "  convert mla kv-rank 256 freqfold 4 balance off q-rank 1024 to conv.csv";

static const char *const ONOFF[] = {"on", "off", NULL};

static const Param mla_kw[] = {
    { .name = "kv-rank", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "R|full",
      .help = "latent dims of the joint NoPE key / value basis, or full (required)" },
    { .name = "rope-dim", .type = ARG_INT, .min = 2, .max = 1 << 20, .comp = COMP_NONE, .metavar = "D",
      .help = "RoPE dims kept = head dim / freqfold (default: head dim)" },
    { .name = "freqfold", .type = ARG_INT, .min = 1, .max = 1 << 20, .comp = COMP_NONE, .metavar = "M",
      .help = "adjacent RoPE frequencies per PCA (default: head dim / rope-dim, else 1)" },
    { .name = "balance", .type = ARG_ENUM, .choices = ONOFF, .def = "on", .comp = COMP_CHOICES,
      .help = "KV balancing before the joint PCA" },
    { .name = "q-rank", .type = ARG_INT, .min = 1, .max = 1 << 24, .comp = COMP_NONE, .metavar = "Rq",
      .help = "factor the query through a latent of this rank (q_a_proj / q_b_proj)" },
    { .name = "layers", .type = ARG_RANGE, .def = "all", .comp = COMP_LAYERS,
      .help = "layers to convert (export needs all)" },
    { .name = "tokens", .type = ARG_INT, .def = "64", .min = 1, .max = 8192, .comp = COMP_NONE, .metavar = "T",
      .help = "random tokens for the error report" },
    PARAM_TO,
    {0}
};

/* Parses kv-rank: a positive number or `full`. */
static int parse_rank(const Args *a, int *R) {
    const char *v = args_str(a, "kv-rank");
    if (!v || !*v)
        return al_err("convert mla needs kv-rank R (latent dims, or full), e.g. convert mla kv-rank 512 rope-dim 64");
    if (!strcmp(v, "full")) { *R = TMLA_FULL; return AL_OK; }
    char *end;
    long r = strtol(v, &end, 10);
    if (*end || r < 1 || r > (1L << 24)) return al_err("kv-rank '%s': give a positive number of latent dims or full", v);
    *R = (int)r;
    return AL_OK;
}

static int cmd_convert_mla(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    struct ConvState *st;
    TmlaOpts o = tmla_opts_default();
    if (parse_rank(a, &o.kv_rank)) return AL_ERR;
    o.rope_dim = args_given(a, "rope-dim") ? (int)args_int(a, "rope-dim") : 0;
    o.freqfold = args_given(a, "freqfold") ? (int)args_int(a, "freqfold") : 0;
    o.balance = args_enum(a, "balance") != 1;
    o.q_rank = args_given(a, "q-rank") ? (int)args_int(a, "q-rank") : 0;
    o.eval_tokens = (size_t)args_int(a, "tokens");
    long lo, hi;
    if (args_range(a, "layers", m->cfg.n_layers, &lo, &hi)) return AL_ERR;
    o.layer_lo = (int)lo;
    o.layer_hi = (int)hi;
    if (conv_state(s, &st)) return AL_ERR;
    TmlaResult *r = NULL;
    int rc = tmla_convert(m, &o, &r);
    if (rc) return rc;
    tmla_result_free(st->res);
    st->res = r;
    const TmlaOpts *ro = &r->opts;
    out_printf(out, "converted layers %d-%d of %s to MLA: kv_lora_rank %d, RoPE dims %d (freqfold %d), nope %d, v %d\n",
               ro->layer_lo, ro->layer_hi, m->name, r->kv_rank, r->rope_dim, ro->freqfold, r->qk_nope, r->v_dim);
    if (r->q_rank) out_printf(out, "query latent of rank %d\n", r->q_rank);
    out_printf(out, "KV cache per token per layer: %zu -> %zu values (%.1f%%); attention parameters %zu -> %zu\n",
               r->kv_before, r->kv_after, 100.0 * (double)r->kv_after / (double)r->kv_before, r->params_before,
               r->params_after);
    out_printf(out, "errors on %zu random tokens (unit-variance inputs); balance %s, `other` = balance %s\n",
               ro->eval_tokens, ro->balance ? "on" : "off", ro->balance ? "off" : "on");
    Table *t = table_new(9, "layer", "alpha", "rope_energy", "joint_energy", "score_err", "out_err", "joint_energy_other",
                         "score_err_other", "out_err_other");
    if (!t) return AL_ERR;
    for (int l = ro->layer_lo; l <= ro->layer_hi; l++) {
        const TmlaLayerReport *p = &r->rep[l];
        if (table_row(t)) { table_free(t); return AL_ERR; }
        table_int(t, l);
        double v[] = {p->alpha, p->rope_energy, p->joint_energy, p->score_err, p->out_err, p->joint_energy_alt,
                      p->score_err_alt, p->out_err_alt};
        for (size_t i = 0; i < sizeof v / sizeof *v; i++)
            if (isfinite(v[i])) table_num(t, v[i]);
            else table_null(t);
    }
    return out_table_to(out, a, t);
}

/* ================================================================ export-mla */

static const char EXPORT_MLA_HELP[] =
    "Writes the session's `convert mla` result to DIR (new or empty; never the source's folder)\n"
    "as a DeepSeek-V3 checkpoint: config.json (model_type deepseek_v3, kv_lora_rank,\n"
    "q_lora_rank, qk_rope_head_dim = head_dim, qk_nope_head_dim, v_head_dim, attention_bias,\n"
    "qk_latent_layernorm false), q_proj (or q_a_proj + q_b_proj), kv_a_proj_with_mqa = [latent\n"
    "rows ; RoPE key rows, pairs interleaved], kv_b_proj, o_proj; every other tensor copied\n"
    "bit for bit; attnlab_manifest.json with the per-layer report; the tokenizer files.\n"
    "attnlab loads the result (`load DIR`), and `check DIR` compares it with the source.\n"
    "Examples:\n"
    "  export-mla out/llama-mla\n"
    "  export-mla out/llama-mla dtype bf16";

static const char *const DTYPES[] = {"f32", "f16", "bf16", NULL};

static const Param export_pos[] = {
    { .name = "dir", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "DIR", .help = "new or empty folder" },
    {0}
};
static const Param export_kw[] = {
    { .name = "dtype", .type = ARG_ENUM, .choices = DTYPES, .comp = COMP_CHOICES,
      .help = "dtype of the new attention tensors (default: the source's)" },
    { .name = "shard-mb", .type = ARG_INT, .min = 1, .max = 1 << 20, .comp = COMP_NONE, .metavar = "MB",
      .help = "largest weight file in MiB (default 4096)" },
    {0}
};

/* Exports the session's conversion; shard_mb 0: the default shard size. */
static int export_sharded(Session *s, const char *dir, const char *dtype, size_t shard_mb, Out *out) {
    if (!cmd_convert_pending(s, NULL))
        return al_err("export: this session holds no conversion: run convert mla kv-rank R first");
    const TmlaResult *r = s->conv->res;
    MlaExportOpts eo = {.dtype = DT_INVALID, .shard_bytes = shard_mb << 20};
    if (dtype && *dtype) {
        eo.dtype = !strcmp(dtype, "f32") ? DT_F32 : !strcmp(dtype, "f16") ? DT_F16 : !strcmp(dtype, "bf16") ? DT_BF16
                                                                                                          : DT_INVALID;
        if (eo.dtype == DT_INVALID) return al_err("export: dtype '%s': give f32, f16 or bf16", dtype);
    }
    if (mla_export(r, dir, &eo)) return AL_ERR;
    out_printf(out, "exported %s as DeepSeek-V3 MLA to %s: kv_lora_rank %d, qk_rope_head_dim %d, qk_nope_head_dim %d, "
               "v_head_dim %d, q_lora_rank %s%.0d\n", r->src->name, dir, r->kv_rank, r->rope_dim, r->qk_nope, r->v_dim,
               r->q_rank ? "" : "null", r->q_rank);
    out_printf(out, "manifest: %s/%s; `check %s` compares it with the source\n", dir, MLA_MANIFEST, dir);
    out_string(out, dir);
    out->written = true;
    return AL_OK;
}

int cmd_convert_export(Session *s, const char *dir, const char *dtype, Out *out) {
    return export_sharded(s, dir, dtype, 0, out);
}

static int cmd_export_mla(Session *s, const Args *a, Out *out) {
    size_t mb = args_given(a, "shard-mb") ? (size_t)args_int(a, "shard-mb") : 0;
    return export_sharded(s, args_str(a, "dir"), args_str(a, "dtype"), mb, out);
}

/* ================================================================ check */

static const char CHECK_HELP[] =
    "Loads the TransMLA export in DIR and compares it, layer by layer, with the model it came\n"
    "from (the manifest's source path, or `source NAME`, a loaded model): relative error of the\n"
    "causal attention scores and of the attention outputs on random inputs, and every\n"
    "non-attention tensor byte for byte. An exact conversion (kv-rank full, D = d, one KV head\n"
    "or identical KV heads) shows errors at float precision.\n"
    "Examples:\n"
    "  check out/llama-mla\n"
    "  check out/llama-mla source llama tokens 128 to check.json";

static const Param check_pos[] = {
    { .name = "dir", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "DIR", .help = "an export folder" },
    {0}
};
static const Param check_kw[] = {
    { .name = "source", .type = ARG_STRING, .comp = COMP_MODELS, .metavar = "NAME",
      .help = "a loaded model to compare with (default: the manifest's source)" },
    { .name = "tokens", .type = ARG_INT, .def = "64", .min = 1, .max = 8192, .comp = COMP_NONE, .metavar = "T",
      .help = "random tokens per layer" },
    PARAM_TO,
    {0}
};

static int cmd_check(Session *s, const Args *a, Out *out) {
    Model *src = NULL;
    const char *name = args_str(a, "source");
    if (name && *name && !(src = session_find(s, name))) return al_err("check: no loaded model named '%s'", name);
    MlaCheck *c = NULL;
    int rc = mla_check(args_str(a, "dir"), src, (size_t)args_int(a, "tokens"), 20250601, &c);
    if (rc) return rc;
    out_printf(out, "%s against %s: %d layers; KV cache %zu -> %zu values per token per layer\n", c->export_path,
               c->source_path, c->n_layers, c->kv_source, c->kv_export);
    if (c->copied_diff)
        out_printf(out, "non-attention tensors: %zu identical, %zu DIFFER (first: %s)\n", c->copied_same, c->copied_diff,
                   c->first_diff);
    else
        out_printf(out, "non-attention tensors: all %zu identical (name, dtype, shape, bytes)\n", c->copied_same);
    Table *t = table_new(3, "layer", "score_err", "out_err");
    for (int l = 0; t && l < c->n_layers; l++) {
        if (table_row(t)) { table_free(t); t = NULL; break; }
        table_int(t, l);
        table_num(t, c->score_err[l]);
        table_num(t, c->out_err[l]);
    }
    mla_check_free(c);
    return t ? out_table_to(out, a, t) : AL_ERR;
}

/* ================================================================ kv-cache */

static const char KVCACHE_HELP[] =
    "Bytes the KV cache takes per token and per layer (and for all layers) for the current model\n"
    "as loaded, and as converted when the session holds a `convert mla` result of it. GQA caches\n"
    "G (d + dv) values per token and layer, MLA kv_lora_rank + qk_rope_head_dim. Values are\n"
    "counted at the model's activation dtype (config torch_dtype: 2 bytes for bf16 / f16 and for\n"
    "FP8 checkpoints, 4 for f32) unless `bytes N` says otherwise.\n"
    "Examples:\n"
    "  kv-cache\n"
    "  kv-cache bytes 1 to kv.csv";

static const Param kvcache_kw[] = {
    { .name = "bytes", .type = ARG_INT, .min = 1, .max = 16, .comp = COMP_NONE, .metavar = "N",
      .help = "bytes per cached value (default: from the model's dtype)" },
    PARAM_TO,
    {0}
};

/* Bytes per cached value: config torch_dtype, else the weights' dtype (FP8 -> 2). */
static size_t value_bytes(const Model *m) {
    cJSON *root = m->config_json ? cJSON_Parse(m->config_json) : NULL;
    const cJSON *td = cJSON_GetObjectItemCaseSensitive(root, "torch_dtype");
    if (!cJSON_IsString(td)) td = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    size_t b = 0;
    if (cJSON_IsString(td)) b = !strcmp(td->valuestring, "float32") ? 4 : !strcmp(td->valuestring, "float64") ? 8 : 2;
    cJSON_Delete(root);
    if (b) return b;
    return m->cfg.dtype == DT_F32 ? 4 : 2;
}

static void kv_row(Table *t, const char *form, size_t values, size_t bytes, int layers, size_t base) {
    table_row(t);
    table_str(t, form);
    table_int(t, (long long)values);
    table_int(t, (long long)(values * bytes));
    table_int(t, (long long)(values * bytes * (size_t)layers));
    table_num(t, base ? (double)values / (double)base : 1.0);
}

static int cmd_kv_cache(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    size_t bytes = args_given(a, "bytes") ? (size_t)args_int(a, "bytes") : value_bytes(m);
    size_t before = cfg_kv_values(&m->cfg);
    Table *t = table_new(5, "form", "values_per_token_layer", "bytes_per_token_layer", "bytes_per_token", "ratio");
    if (!t) return AL_ERR;
    char form[128];
    snprintf(form, sizeof form, "%s as loaded (%s)", m->name, cfg_is_mla(&m->cfg) ? "MLA" : "GQA");
    kv_row(t, form, before, bytes, m->cfg.n_layers, before);
    if (cmd_convert_pending(s, m)) {
        const TmlaResult *r = s->conv->res;
        snprintf(form, sizeof form, "converted (MLA, R %d + D %d)", r->kv_rank, r->rope_dim);
        kv_row(t, form, r->kv_after, bytes, m->cfg.n_layers, before);
    } else
        out_printf(out, "(no conversion of %s in this session: `convert mla kv-rank R` adds the converted row)\n", m->name);
    out_printf(out, "%zu bytes per cached value, %d layers\n", bytes, m->cfg.n_layers);
    return out_table_to(out, a, t);
}

/* ================================================================ the table */

static const Command convert_subs[] = {
    { .name = "mla", .summary = "TransMLA: GQA -> DeepSeek-V3 style MLA with RoRoPE, FreqFold, balanced KV",
      .help = MLA_HELP, .kw = mla_kw, .fn = cmd_convert_mla, .flags = CMD_MODEL },
    {0}
};

static const Command convert_cmds[] = {
    { .name = "convert", .summary = "convert the current model: convert mla kv-rank R [rope-dim D] ...",
      .help = CONVERT_HELP, .sub = convert_subs, .flags = CMD_MODEL },
    { .name = "export-mla", .summary = "write the `convert mla` result as a DeepSeek-V3 checkpoint",
      .help = EXPORT_MLA_HELP, .pos = export_pos, .kw = export_kw, .fn = cmd_export_mla },
    { .name = "check", .summary = "compare a TransMLA export with its source, layer by layer",
      .help = CHECK_HELP, .pos = check_pos, .kw = check_kw, .fn = cmd_check },
    { .name = "kv-cache", .summary = "KV-cache bytes per token and layer, as loaded and as converted",
      .help = KVCACHE_HELP, .kw = kvcache_kw, .fn = cmd_kv_cache, .flags = CMD_MODEL },
    {0}
};

const CommandGroup cmd_group_convert = { .title = "TransMLA: GQA -> MLA conversion", .cmds = convert_cmds };
