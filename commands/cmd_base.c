/* cmd_base.c -- the base command group: help, load, models, use, close, info, set. The front
 * end adds run, lua, echo, history and quit under the same heading (repl/cmd_shell.c). Each
 * handler's long help sits next to it. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyses.h"
#include "dsv4.h"
#include "gguf_arch.h"
#include "kimik3.h"
#include "kvcache.h"
#include "matmul.h"
#include "registry.h"
#include "resolve.h"
#include "session.h"
#include "quant_fused.h"
#include "tokenizer.h"

/* ================================================================ help */

static const char HELP_HELP[] =
    "Without arguments: every command, one line each, grouped. With a command (and a\n"
    "sub-command): its usage line, what it does, and its arguments with their defaults.\n"
    "Keywords take a value (layer 8, tau 0.99, to FILE.csv) unless shown as [word] alone.\n"
    "Lines starting with '=' (print a Lua expression) or 'lua' (run Lua code) are Lua;\n"
    "';' separates commands; quote paths with spaces (\"...\" or '...'); in \"...\", \\n and \\t are a newline\n"
    "and a tab, \\\" and \\\\ a quote and a backslash (any other backslash stays); '...' keeps every character.";

/* One line per parameter: name, placeholder, default, help. */
static void help_params(Out *out, const Param *ps, bool kw) {
    char mv[1024];   /* an enum's choices: synth family's rows pass 256 bytes */
    for (const Param *p = ps; p && p->name; p++) {
        cmd_metavar(p, mv, sizeof mv);
        if (kw) out_printf(out, "  %s%s%s\n", p->name, *mv ? " " : "", mv);
        else out_printf(out, "  %s%s%s\n", p->name, strcmp(mv, p->name) ? "  " : "", strcmp(mv, p->name) ? mv : "");
        out_printf(out, "      %s", p->help ? p->help : "");
        if (p->def && *p->def && !(p->help && strstr(p->help, "(default"))) out_printf(out, " (default %s)", p->def);
        else if (!kw && !p->def) out_printf(out, " (required)");
        out_printf(out, "\n");
    }
}

/* `help load`'s list of families: the family table's rows (core/model/family.h). */
static void help_families(Out *out) {
    out_printf(out, "\nfamilies (config.json model_type: what it is):\n");
    for (int f = 0; f < FAM_COUNT; f++)
        out_printf(out, "  %-14s %s\n", FAMILY[f].model_type, FAMILY[f].help);
}

/* `help load`'s list of aliases: the user's file first (they win), then the built-in ones. */
static void help_aliases(Out *out) {
    const char *alias, *target;
    out_printf(out, "\naliases (yours from $ATTNLAB_HOME/aliases first):\n");
    for (size_t i = 0; resolve_alias_at(i, &alias, &target); i++) out_printf(out, "  %-14s %s\n", alias, target);
}

/* Help for one command (a leaf or a command with sub-commands); parent: the command c is a
 * sub-command of (NULL at the top). */
static void help_command(Out *out, const Command *c, const Command *parent) {
    const char *prefix = parent ? parent->name : NULL;
    char *u = cmd_usage(c, prefix);
    out_printf(out, "usage: %s\n  %s\n", u ? u : c->name, c->summary ? c->summary : "");
    free(u);
    if (c->help && *c->help) out_printf(out, "\n%s\n", c->help);
    const char *ret = c->returns ? c->returns : parent ? parent->returns : NULL;
    if (ret) out_printf(out, "\nreturns (Lua): %s\n", ret);
    if (c->pos && c->pos->name) { out_printf(out, "\narguments:\n"); help_params(out, c->pos, false); }
    if (c->kw && c->kw->name) { out_printf(out, "\nkeywords:\n"); help_params(out, c->kw, true); }
    if (c->sub) {
        out_printf(out, "\nsub-commands (help %s%s%s SUB):\n", prefix ? prefix : "", prefix ? " " : "", c->name);
        for (const Command *sc = c->sub; sc->name; sc++)
            out_printf(out, "  %-14s %s\n", sc->name, sc->summary ? sc->summary : "");
    }
}

static int cmd_help(Session *s, const Args *a, Out *out) {
    (void)s;
    const char *name = args_str(a, "command"), *sub = args_str(a, "sub");
    if (name && *name) {
        const Command *c = cmd_find(name);
        if (!c) return al_err("help: no command '%s'; type help for the list", name);
        if (sub && *sub) {
            const Command *sc = cmd_find_sub(c, sub);
            if (!sc) return al_err("help: '%s' has no sub-command '%s'%s", name, sub,
                                   c->sub ? " (help for the list: help CMD)" : "");
            help_command(out, sc, c);
        } else {
            help_command(out, c, NULL);
            if (!strcmp(c->name, "load")) { help_families(out); help_aliases(out); }
        }
        return AL_OK;
    }
    const CommandGroup *g, *last = NULL;
    const Command *c;
    for (size_t i = 0; (c = cmd_at(i, &g)); i++) {
        if (!last || strcmp(g->title, last->title)) out_printf(out, "%s%s\n", last ? "\n" : "", g->title);
        last = g;
        out_printf(out, "  %-10s %s\n", c->name, c->summary ? c->summary : "");
    }
    out_printf(out, "\nhelp CMD for details (help load). '= expr' and 'lua CODE' run Lua; ';' separates commands.\n");
    return AL_OK;
}

/* ================================================================ models */

static const char LOAD_HELP[] =
    "Opens a checkpoint and makes it the current model. MODEL is one of:\n"
    "  - a demo name: demo-r1 (DeepSeek-style MLA), demo-llama (GQA), demo-gpt2, demo-kvnorm\n"
    "    (GQA with TransMLA's key-norm concentration), with variants such as demo-r1-bf16;\n"
    "    written into the cache folder ($ATTNLAB_CACHE) on first use;\n"
    "  - a path: a folder with config.json and safetensors (single file or sharded index),\n"
    "    a .safetensors file with config.json beside it, a llama2.c .bin, or a .gguf file;\n"
    "  - a short alias (e.g. ds-r1) or org/name[@revision], found in the Hugging Face cache,\n"
    "    else streamed from the Hub ($HF_ENDPOINT, $HF_TOKEN; tensors fetched on first use;\n"
    "    $HF_HUB_OFFLINE=1: the caches only; README \"Models from the Hub\"); your own\n"
    "    aliases are lines `NAME org/name` or `NAME /path/to/folder` in $ATTNLAB_HOME/aliases\n"
    "    (~/.config/attnlab/aliases); the list is at the end of this help.\n"
    "Several models can be open at once; each has a name (the demo name, the folder's base\n"
    "name, or `as NAME`). Tensors are read lazily: loading a 671B checkpoint is instant.\n"
    "From Lua, attn.load(MODEL) returns that name (a string).\n"
    "\n"
    "The families (config.json's model_type) are listed below, one line each from the family\n"
    "table; `info` says per model which analyses run on it and why not (README.md's Families\n"
    "table summarises them per family).\n"
    "`synth family NAME DIR` writes a tiny checkpoint with planted ranks of each family that has a\n"
    "recipe (`help synth family` lists them; Llama and GPT-2: `synth demo-llama|demo-gpt2 DIR`).";

static int cmd_load(Session *s, const Args *a, Out *out) {
    Model *m;
    const char *as = args_str(a, "as");
    if (session_load(s, args_str(a, "model"), as, &m)) return AL_ERR;
    const ModelConfig *c = &m->cfg;
    out_printf(out, "loaded %s: %s, %d layer%s, %d head%s (%d KV), hidden %d, %s -- %s\n", m->name,
               model_family_name(c->family), c->n_layers, al_s(c->n_layers), c->n_heads, al_s(c->n_heads), c->n_kv_heads, c->hidden,
               model_dtype_name(m), m->path);
    out_string(out, m->name);
    out->written = true;      /* the name is for Lua; the line above says it at the prompt */
    return AL_OK;
}

static const char MODELS_HELP[] =
    "Lists the loaded models: name, whether it is current, family, layers, heads, KV heads,\n"
    "attention dtype and path. `use NAME` switches the current model. From Lua: one table per\n"
    "model keyed by column (attn.models()[1].name); `use` and `close` return nothing.";

static int cmd_models(Session *s, const Args *a, Out *out) {
    Table *t = table_new(8, "name", "current", "family", "layers", "heads", "kv_heads", "dtype", "path");
    if (!t) return AL_ERR;
    for (size_t i = 0; i < s->nmodels; i++) {
        const Model *m = s->models[i];
        if (table_row(t)) { table_free(t); return AL_ERR; }
        table_str(t, m->name);
        table_bool(t, m == s->cur);
        table_str(t, model_family_name(m->cfg.family));
        table_int(t, m->cfg.n_layers);
        table_int(t, m->cfg.n_heads);
        table_int(t, m->cfg.n_kv_heads);
        table_str(t, model_dtype_name(m));
        table_str(t, m->path);
    }
    if (!s->nmodels && !args_given(a, "to")) out_printf(out, "no models loaded (load demo-r1, load PATH)\n");
    return out_table_to(out, args_str(a, "to"), t);
}

static int cmd_use(Session *s, const Args *a, Out *out) {
    if (session_use(s, args_str(a, "name"))) return AL_ERR;
    out_printf(out, "current model: %s\n", s->cur->name);
    return AL_OK;
}

static int cmd_close(Session *s, const Args *a, Out *out) {
    const char *name = args_str(a, "name");
    if (name && !strcmp(name, "all")) {
        while (s->nmodels)
            if (session_close(s, s->models[0]->name)) return AL_ERR;
        out_printf(out, "closed all models\n");
        return AL_OK;
    }
    if (!name || !*name) {
        if (!s->cur) return al_err("close: no model is loaded");
        name = s->cur->name;
    }
    char *keep = al_strdup(name);
    if (!keep) return AL_ERR;
    int rc = session_close(s, keep);
    if (rc == AL_OK)
        out_printf(out, "closed %s%s%s\n", keep, s->cur ? "; current model: " : "", s->cur ? s->cur->name : "");
    free(keep);
    return rc;
}

/* ================================================================ info */

static const char INFO_HELP[] =
    "The current model's attention architecture, one field per row: family, layers, heads,\n"
    "KV heads, hidden size, head dims (qk nope / rope, v), query / KV latent ranks (MLA),\n"
    "RoPE theta and layout, storage dtype of the attention weights (MXFP4 / NVFP4 for FP4 ones),\n"
    "each tensor group's stored encodings (weights: attention, mlp, experts, embeddings) and, for a quantized\n"
    "checkpoint, what its quantization config says (quantization) and, per group, the encoding it decides and\n"
    "the key or list entry that decided (quantized_by), attention parameters\n"
    "per layer and in total, and the KV cache per token per layer: values (MLA: kv_lora_rank\n"
    "+ qk_rope_head_dim; otherwise 2 x KV heads x head dim) and bytes in the cache dtype, which\n"
    "kv_cache_dtype_from says the source of: the config's torch_dtype / dtype, as vLLM's and transformers'\n"
    "dtype \"auto\" take it, whatever dtype the weights are stored in (BF16 for FP8 / FP4 / INT4 weights:\n"
    "the engines run them with 16-bit activations; F16 for a GGUF, llama.cpp's default cache type;\n"
    "without a torch_dtype, the weights' dtype); kv-cache and truncate count the same bytes.\n"
    "Then the rest of the description (RoPE scaling, rotary dims, softmax scale, sliding window,\n"
    "the layers without RoPE where some have none (nope_layers: SmolLM3's no_rope_layers),\n"
    "`attention`: the layers grouped by what each runs -- sliding window or full, RoPE theta and\n"
    "scaling, or none -- e.g. \"layers 0-2 sliding 8 (RoPE theta 500000); layer 3 full (yarn x8,\n"
    "theta 500000)\" (sliding_window and rope_scaling are the config's, for the whole model),\n"
    "QK norm, norm, activation, MLP kind) and, per analysis (ranks vo, ranks qk, spectrum,\n"
    "ppl/calibrate, convert mla, convert tpa, kvsvd, compare, export formats), whether it is\n"
    "available on this model and, if not, why.\n"
    "`to FILE.json` (and `set format json`) writes one JSON object with these fields (one key per analysis:\n"
    "{available, reason}); `to FILE.csv` the rows. From Lua, attn.info() is one table keyed\n"
    "by field (attn.info().layers).";

/* Adds a field/value row; value is an integer, a number, or a string. */
static void info_str(Table *t, cJSON *o, const char *k, const char *v);

/* A .gguf model's tokenizer: the one its tokenizer.ggml.* keys hold (tokenizer.h), which `ppl`,
 * `generate` and `tokenize` use, or why there is none. */
static void info_gguf_tokenizer(Table *t, cJSON *o, const Model *m) {
    if (!m->from_gguf) return;
    char *path = NULL, row[320];
    Tokenizer *tk = NULL;
    if (tok_find(m->path, &path) == AL_OK && tok_open(path, &tk) == AL_OK)
        snprintf(row, sizeof row, "%s: %s, %zu id%s, BOS %d, EOS %d%s", tok_embedded(tk) ? "embedded (tokenizer.ggml.*)" :
                 path, tok_name(tk), tok_vocab(tk), al_s(tok_vocab(tk)), tok_bos(tk), tok_eos(tk),
                 tok_embedded(tk) ? "; ppl, generate and tokenize use it" : "");
    else snprintf(row, sizeof row, "none read: %s", al_errmsg());
    al_err_clear();
    info_str(t, o, "tokenizer", row);
    tok_free(tk);
    free(path);
    if (gguf_stored_types(m->path, row, sizeof row) == AL_OK) info_str(t, o, "gguf_tensors", row);
    al_err_clear();
}

/* A static FP8 KV cache's per-layer scales (quant_fused.h: quant_kv_scale): in how many layers, and that
 * attnlab's own forward pass keeps the cache in float (engines quantize it with --kv-cache-dtype fp8). */
static void info_kv_scales(Table *t, cJSON *o, const Model *m) {
    char pat[96];
    int with = 0, L, prev = -1;
    if (!m->store) return;
    snprintf(pat, sizeof pat, "%s%s", m->cfg.prefix, family_layer_pattern(m->cfg.names));
    for (size_t i = 0; i < store_count(m->store); i++) {       /* sorted by name: a layer's scales together */
        const char *n = store_name_at(m->store, i);
        int side = quant_kv_scale(n);
        if (side && side != 'q' && sscanf(n, pat, &L) == 1 && L != prev) { with++; prev = L; }
    }
    if (!with) return;
    char row[200];
    snprintf(row, sizeof row, "k_scale / v_scale in %d of %d layers (a static FP8 KV cache for engines run with "
             "--kv-cache-dtype fp8); ppl and generate keep the cache unquantized", with, cfg_n_kv_layers(&m->cfg));
    info_str(t, o, "kv_cache_scales", row);
}

static void info_int(Table *t, cJSON *o, const char *k, long long v) {
    if (table_row(t) == AL_OK) { table_str(t, k); table_int(t, v); }
    if (o) cJSON_AddNumberToObject(o, k, (double)v);
}
static void info_num(Table *t, cJSON *o, const char *k, double v) {
    if (table_row(t) == AL_OK) { table_str(t, k); table_num(t, v); }
    if (o) cJSON_AddNumberToObject(o, k, v);
}
static void info_str(Table *t, cJSON *o, const char *k, const char *v) {
    if (table_row(t) == AL_OK) { table_str(t, k); table_str(t, v); }
    if (o) cJSON_AddStringToObject(o, k, v);
}
static void info_bool(Table *t, cJSON *o, const char *k, bool v) {
    if (table_row(t) == AL_OK) { table_str(t, k); table_bool(t, v); }
    if (o) cJSON_AddBoolToObject(o, k, v);
}

/* layer_types with both kinds: which layers slide ("sliding_layers  0, 2, 4 (window 128); full 1, 3, 5"). */
static void info_layer_kinds(Table *t, cJSON *o, const ModelConfig *c) {
    char sl[200] = "", fu[200] = "", row[460];
    int ns = 0, nf = 0;
    for (int L = 0; c->has_layer_types && L < c->n_layers; L++) {
        bool w = cfg_layer_window(c, L) > 0;
        char *b = w ? sl : fu;
        size_t n = strlen(b);
        if (n + 16 < sizeof sl) snprintf(b + n, sizeof sl - n, "%s%d", (w ? ns : nf) ? ", " : "", L);
        else if (n + 4 < sizeof sl && !strstr(b, "...")) snprintf(b + n, sizeof sl - n, ", ...");
        if (w) ns++; else nf++;
    }
    if (!ns || !nf) return;
    snprintf(row, sizeof row, "%s (window %d); full: %s", sl, c->sliding_window, fu);
    info_str(t, o, "sliding_layers", row);
}

/* What layer L's attention is, as `attention` groups it: "Gated DeltaNet (linear attention)", "Kimi Delta
 * Attention (linear attention)", "Mamba-2 (SSM)", "MLP block (no mixer)", or "sliding 8" / "chunked 8" (Llama 4) /
 * "full" and its RoPE: "(RoPE theta 10000)", "(yarn x8, theta 500000)", "(no RoPE)"; Gemma 4's full layers with their
 * own dims add them ("; head_dim 32, 1 KV heads"), its KV-shared layers their source ("; K/V of layer 5"). */
static void info_layer_attention(const ModelConfig *c, int L, char *buf, size_t cap) {
    if (cfg_layer_linear(c, L)) {
        snprintf(buf, cap, "%s", c->lin.layer[L] == 2 ? "MLP block (no mixer)" : c->lin.mamba ? "Mamba-2 (SSM)"
                                 : c->lin.layout == LIN_KDA ? "Kimi Delta Attention (linear attention)"
                                 : "Gated DeltaNet (linear attention)");
        return;
    }
    size_t w = cfg_layer_window(c, L), ch = cfg_layer_chunk(c, L);
    char win[48], rope[96], more[80] = "";
    if (w) snprintf(win, sizeof win, "sliding %zu", w);
    else if (ch) snprintf(win, sizeof win, "chunked %zu", ch);
    else snprintf(win, sizeof win, "full");
    if (cfg_per_type_dims(c) && cfg_layer_full_type(c, L)) {
        ModelConfig f;
        cfg_full_view(c, &f);
        snprintf(more, sizeof more, "; head_dim %d, %d KV head%s", cfg_d_qk(&f), f.n_kv_heads, al_s(f.n_kv_heads));
    }
    if (cfg_kv_source(c, L) != L)
        snprintf(more + strlen(more), sizeof more - strlen(more), "; K/V of layer %d", cfg_kv_source(c, L));
    const RopeScaling *sc = &c->rope_spec.scaling;
    if (!cfg_layer_rope(c, L)) snprintf(rope, sizeof rope, "no RoPE");
    else if (sc->kind != RS_NONE && cfg_layer_rope_scaled(c, L))
        snprintf(rope, sizeof rope, "%s x%g, theta %g", rope_scaling_name(sc), sc->factor, cfg_layer_theta(c, L));
    else snprintf(rope, sizeof rope, "RoPE theta %g", cfg_layer_theta(c, L));
    snprintf(buf, cap, "%s (%s%s)", win, rope, more);
}

/* The layers in[0..n) (ascending) as "layer 3" or "layers 0-2, 5", appended to buf at *at. */
static void info_layer_set(const int *in, int n, char *buf, size_t cap, size_t *at) {
    int k = snprintf(buf + *at, cap - *at, "layer%s ", n > 1 ? "s" : "");
    *at += k > 0 && (size_t)k < cap - *at ? (size_t)k : cap - *at - 1;
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j + 1 < n && in[j + 1] == in[j] + 1) j++;
        k = j > i ? snprintf(buf + *at, cap - *at, "%s%d-%d", i ? ", " : "", in[i], in[j])
                  : snprintf(buf + *at, cap - *at, "%s%d", i ? ", " : "", in[i]);
        *at += k > 0 && (size_t)k < cap - *at ? (size_t)k : cap - *at - 1;
        i = j;
    }
}

/* `attention`: the layers grouped by what their attention is (info_layer_attention), in order of
 * their first layer: "layers 0-2 sliding 8 (RoPE theta 10000); layer 3 full (yarn x8, theta
 * 500000)" -- sliding_window and rope_scaling are the config's, this is what each layer runs. */
static void info_attention_groups(Table *t, cJSON *o, const ModelConfig *c) {
    int n = c->n_layers < CFG_MAX_LAYERS ? c->n_layers : CFG_MAX_LAYERS;
    char what[CFG_MAX_LAYERS][160], row[2048];
    int set[CFG_MAX_LAYERS];
    bool done[CFG_MAX_LAYERS] = { false };
    size_t at = 0;
    row[0] = 0;
    for (int L = 0; L < n; L++) info_layer_attention(c, L, what[L], sizeof what[L]);
    for (int L = 0; L < n && at + 1 < sizeof row; L++) {
        if (done[L]) continue;
        int k = 0;
        for (int j = L; j < n; j++)
            if (!done[j] && strcmp(what[j], what[L]) == 0) { set[k++] = j; done[j] = true; }
        if (at) at += (size_t)snprintf(row + at, sizeof row - at, "; ");
        if (at + 1 < sizeof row) info_layer_set(set, k, row, sizeof row, &at);
        if (at + 1 < sizeof row) {
            int w = snprintf(row + at, sizeof row - at, " %s", what[L]);
            at += w > 0 && (size_t)w < sizeof row - at ? (size_t)w : sizeof row - at - 1;
        }
    }
    info_str(t, o, "attention", row);
}

/* The lightning indexer (DeepSeek-V3.2, GLM-5): index_topk, its heads and its weights, and what it does. */
static void info_indexer(Table *t, cJSON *o, const ModelConfig *c) {
    long long IH = c->index_heads, ID = c->index_head_dim, K = c->index_topk;
    long long w = IH * ID * c->q_lora_rank + ID * c->hidden + 2 * ID + IH * c->hidden;
    info_int(t, o, "index_topk", K);
    info_int(t, o, "index_n_heads", IH);
    info_int(t, o, "index_head_dim", ID);
    char v[400];
    const RoleName *q = cfg_role(c, ROLE_IDX_Q_B), *k = cfg_role(c, ROLE_IDX_K), *n = cfg_role(c, ROLE_IDX_K_NORM),
                   *p = cfg_role(c, ROLE_IDX_W);                /* the names by role (family.c) */
    if (!q || !k || !n || !p) return;
    snprintf(v, sizeof v, "%s [%lld, %d], %s [%lld, %d], %s [%lld] + bias, %s [%lld, %d]: %lld weight%s per layer; its "
             "keys add %lld value%s per token per layer to the cache", q->name, IH * ID, c->q_lora_rank, k->name, ID,
             c->hidden, n->name, ID, p->name, IH, c->hidden, w, al_s(w), ID, al_s(ID));
    info_str(t, o, "indexer_weights", v);
    snprintf(v, sizeof v, "positions below %lld attend to every earlier key (dense: the selection keeps them all); "
             "later ones to the %lld of highest index score (indexer_shared_layers: the last full layer's); QK and "
             "VO maps are the heads' own (the selection only masks keys)", K, K);
    info_str(t, o, "indexer", v);
    size_t at = 0;
    for (int L = 0; L < c->n_layers && at < sizeof v; L++)        /* GLM-5.2's IndexShare */
        if (!cfg_layer_indexer(c, L)) {
            int k = snprintf(v + at, sizeof v - at, "%s%d", at ? ", " : "", L);
            at += k > 0 ? (size_t)k : 0;
        }
    if (at) info_str(t, o, "indexer_shared_layers", v);
}

/* A Mamba-2 hybrid's SSM dims, Nemotron-H's block pattern and Granite's multipliers. */
static void info_mamba(Table *t, cJSON *o, const ModelConfig *c) {
    char row[512];
    snprintf(row, sizeof row, "%d head%s x %d, n_groups %d, ssm_state_size %d, conv kernel %d%s; its state is constant per "
             "sequence (no KV cache)", c->lin.v_heads, al_s(c->lin.v_heads), c->lin.dv, c->lin.k_heads, c->lin.dk, c->lin.conv,
             c->lin.conv_bias ? " with bias" : "");
    info_str(t, o, "mamba2", row);
    if (c->lin.blocks) {
        snprintf(row, sizeof row, "%.*s (M Mamba-2, * attention, - MLP, E MoE: one mixer per block)",
                 c->n_layers < CFG_MAX_LAYERS ? c->n_layers : CFG_MAX_LAYERS, c->lin.block);
        info_str(t, o, "block_pattern", row);
    }
    if (c->rope == ROPE_NONE) info_str(t, o, "attention_rope", "none (NoPE): QK fusion is exact on the whole head");
    if (c->attn_mult > 0 || c->residual_mult != 1 || c->logits_div != 1) {
        snprintf(row, sizeof row, "embeddings x %g, softmax scale %g (attention_multiplier), block outputs x %g, logits / %g",
                 c->embed_scale, c->attn_mult, c->residual_mult, c->logits_div);
        info_str(t, o, "multipliers", row);
    }
}

/* Gemma 4's per-layer-type attention: each type's heads and RoPE, k_eq_v, the KV-shared layers, v_norm, layer_scalar. */
static void info_per_type(Table *t, cJSON *o, const ModelConfig *c) {
    char row[640];
    const RopeSpec *r = &c->rope_spec;
    int hd = c->global_head_dim ? c->global_head_dim : cfg_d_qk(c), pairs = (int)floor(r->prop_factor * hd / 2);
    snprintf(row, sizeof row, "sliding: head_dim %d, %d KV head%s, RoPE theta %g (rotate_half over the head); full: "
             "head_dim %d, %d KV head%s, RoPE theta %g %s", cfg_d_qk(c), c->n_kv_heads, al_s(c->n_kv_heads), r->local_theta, hd,
             c->global_kv_heads, al_s(c->global_kv_heads), r->theta, r->prop_factor > 0 ? "proportional" : "over the head");
    if (r->prop_factor > 0)
        snprintf(row + strlen(row), sizeof row - strlen(row), " %g: pairs (j, j + %d) for j < %d turn at theta^(-2j/%d), "
                 "the other %d pair%s carry no position (QK over those dims is position-free)", r->prop_factor, hd / 2,
                 pairs, hd, hd / 2 - pairs, al_s(hd / 2 - pairs));
    info_str(t, o, "layer_types_attention", row);
    info_str(t, o, "v_norm", "values RMS-normed per head without a weight; softmax scale 1 (q_norm / k_norm set the "
             "logits' size)");
    if (c->k_eq_v)
        info_str(t, o, "attention_k_eq_v", "full layers: no v_proj, V = v_norm(x W_K): V-O and Q-K are tied to one "
                 "projection (W_K W_O and W_Q W_K^T); truncate refuses these layers");
    if (c->kv_shared_from > 0) {
        size_t at = 0;
        for (int L = c->kv_shared_from; L < c->n_layers && at < sizeof row; L++) {
            int k = snprintf(row + at, sizeof row - at, "%s%d <- %d", at ? ", " : "", L, cfg_kv_source(c, L));
            at += k > 0 ? (size_t)k : 0;
        }
        if (at < sizeof row)
            snprintf(row + at, sizeof row - at, " (no k_proj / v_proj of their own: they attend to the source layer's "
                     "K / V; the KV cache counts them once, in their source; kv_bytes_per_token covers %d layer%s)",
                     cfg_n_kv_layers(c), al_s(cfg_n_kv_layers(c)));
        info_str(t, o, "kv_shared_layers", row);
    }
    if (c->ple_dim > 0) {
        snprintf(row, sizeof row, "%d per layer (embed_tokens_per_layer of %d token%s, per_layer_model_projection): each "
                 "layer adds norm(per_layer_projection(act(per_layer_input_gate(x)) x its input)) after its MLP; the "
                 "attention maps are unchanged", c->ple_dim, c->ple_vocab, al_s(c->ple_vocab));
        info_str(t, o, "per_layer_embeddings", row);
    }
    if (c->moe_block_experts > 0) {
        snprintf(row, sizeof row, "%d expert%s, top %d of %d wide beside each dense MLP: router softmax over "
                 "rmsnorm(x) x scale / sqrt(hidden), top-k renormalised x per_expert_scale; experts on "
                 "pre_feedforward_layernorm_2(x); the two outputs normed (_1, _2) and summed", c->moe_block_experts, al_s(c->moe_block_experts),
                 c->moe_block_topk, c->moe_block_ffn);
        info_str(t, o, "moe_block", row);
    }
}

/* A hybrid's layers (Qwen3-Next: Gated DeltaNet linear attention, no KV heads) and the attention
 * layers' output gate. */
static void info_hybrid(Table *t, cJSON *o, const ModelConfig *c) {
    char list[256], row[512];
    if (cfg_row(c)->per_type_attn) info_per_type(t, o, c);
    if (c->lin.layout != LIN_NONE) {
        cfg_attn_layers(c, list, sizeof list);
        char kind[64];
        snprintf(kind, sizeof kind, c->lin.mamba ? "%s (SSM) layers" : "%s linear attention", cfg_linear_name(c));
        snprintf(row, sizeof row, "%s (%d of %d; the other %d are %s: a recurrence with a fixed state, no Q/K/V "
                 "heads, no KV cache)", list, cfg_n_attn_layers(c), c->n_layers, c->lin.n_linear - c->lin.n_mlp_blocks,
                 kind);
        if (c->lin.n_mlp_blocks)                                /* Nemotron-H: blocks of one mixer */
            snprintf(row + strlen(row) - 1, sizeof row - strlen(row) + 1, "; %d MLP / MoE blocks without a mixer)",
                     c->lin.n_mlp_blocks);
        info_str(t, o, "attention_layers", row);
        if (c->lin.mamba) info_mamba(t, o, c);
        else {
            snprintf(row, sizeof row, "%d key head%s x %d, %d value head%s x %d, conv kernel %d", c->lin.k_heads, al_s(c->lin.k_heads), c->lin.dk,
                     c->lin.v_heads, al_s(c->lin.v_heads), c->lin.dv, c->lin.conv);
            info_str(t, o, "linear_attention", row);
        }
    }
    if (c->attn_gate)
        info_str(t, o, "attn_output_gate", "yes: q_proj per head [query | gate]; the attention output times "
                 "sigmoid(x W_gate) before o_proj, so the V-O map is W_V diag(g(x)) W_O (input-dependent)");
}

/* Llama 4: the chunked RoPE layers, the NoPE layers' temperature, the weightless q/k norm, the MoE layers and their
 * router (core/model/config.h: cfg_layer_chunk, cfg_layer_qk_l2, cfg_q_temperature). */
static void info_llama4(Table *t, cJSON *o, const ModelConfig *c) {
    char rope[256] = "", nope[256], row[600];
    int nn = cfg_nope_layers(c, nope, sizeof nope);
    for (int L = 0, n = 0; L < c->n_layers && strlen(rope) + 8 < sizeof rope; L++)
        if (cfg_layer_rope(c, L)) snprintf(rope + strlen(rope), sizeof rope - strlen(rope), "%s%d", n++ ? ", " : "", L);
    if (c->attn_chunk > 0) {
        snprintf(row, sizeof row, "layers %s (RoPE) attend within chunks of %d token%s: the query at p sees keys "
                 "[p - p %% %d, p]; %s%s see every earlier key", rope, c->attn_chunk, al_s(c->attn_chunk), c->attn_chunk,
                 nn ? "NoPE layers " : "no NoPE layer", nn ? nope : "");
        info_str(t, o, "chunked_attention", row);
    }
    if (c->qk_l2) info_str(t, o, "qk_l2_norm", "use_qk_norm: on the RoPE layers each q and k head is divided by its "
                           "RMS after RoPE (no weight): a per-token scalar, so the ranks of W_Q R W_Kᵀ hold, the scale "
                           "of the logits does not");
    if (c->temp_scale != 0 && nn) {
        snprintf(row, sizeof row, "q on NoPE layers %s times 1 + %g ln(1 + floor((p + 1) / %g)) (attn_temperature_tuning"
                 "; 1 before position %g)", nope, c->temp_scale, c->temp_floor, c->temp_floor - 1);
        info_str(t, o, "attn_temperature", row);
    }
    if (nn) {
        snprintf(row, sizeof row, "layers %s rotate nothing: W_Q W_Kᵀ is the exact score map of the whole head there "
                 "(ranks qk layer L, no offset)%s", nope, c->qk_l2 ? " and no q/k norm applies" : "");
        info_str(t, o, "nope_qk", row);
    }
    if (c->mlp != MLP_MOE) return;
    char moe[256] = "", dense[256] = "";
    for (int L = 0; L < c->n_layers; L++) {
        char *b = cfg_moe_layer(c, L) ? moe : dense;
        if (strlen(b) + 8 < sizeof moe) snprintf(b + strlen(b), sizeof moe - strlen(b), "%s%d", b[0] ? ", " : "", L);
    }
    snprintf(row, sizeof row, "MoE on layers %s (%d expert%s of %d, top-%d: sigmoid(logit) scales the chosen expert's "
             "INPUT; a shared expert of %d on each); dense (%d) on %s", moe, c->moe.n_experts, al_s(c->moe.n_experts), c->moe.expert_ffn,
             c->moe.top_k, c->moe.shared_ffn, c->intermediate, dense[0] ? dense : "none");
    info_str(t, o, "moe_layers", row);
}

/* How many layers hold role r's weight (or, where the role is a parameter without ".weight", the tensor itself). */
static int layers_with(const Model *m, tensor_role r, const char *what) {
    int n = 0;
    for (int L = 0; L < m->cfg.n_layers; L++) {
        char name[192];
        n += cfg_role_name(&m->cfg, r, L, -1, what, name, sizeof name) && store_has(m->store, name);
    }
    return n;
}

/* DeepSeek-V4 (core/model/dsv4.h): dsv4_describe's paragraph, how its attention is read, and the tensors of the paths
 * the per-head maps leave out (present, not analysed). */
static void info_dsv4(Table *t, cJSON *o, const Model *m) {
    const ModelConfig *c = &m->cfg;
    Dsv4Spec s;
    char d[900], row[700];
    if (!m->config_tree || dsv4_parse(m->config_tree, m->path, &s) != AL_OK) { al_err_clear(); return; }
    info_str(t, o, "deepseek_v4", dsv4_describe(&s, d, sizeof d));
    snprintf(row, sizeof row, "%d query head%s of %d from the q_norm'ed latent (wq_a %d -> wq_b; each head then "
             "RMS-normed without a weight), ONE KV head wkv (kv_norm) that is both key and value (K = V: the V-O and "
             "Q-K maps share it), RoPE on the last %d dim%s of each head (adjacent pairs; the output's rotated back), a "
             "sink logit per head (attn_sink), head h's output through its group's block of wo_a (%d group%s x o_lora "
             "%d) then wo_b; YaRN and compress_rope_theta apply on the compressed layers only (rope_theta, unscaled, on "
             "the window-only ones)", c->n_heads, al_s(c->n_heads), cfg_d_qk(c), c->q_lora_rank, c->qk_rope_dim, al_s(c->qk_rope_dim), c->o_groups, al_s(c->o_groups), c->o_lora_rank);
    info_str(t, o, "attention", row);
    snprintf(row, sizeof row, "present, not analysed (the per-head maps leave these paths out): compressor on %d "
             "layer%s (attn.compressor.*), indexer on %d (attn.indexer.*), hyper-connections on %d (hc_attn_* / "
             "hc_ffn_*)", layers_with(m, ROLE_CMP_WKV, "weight"), al_s(layers_with(m, ROLE_CMP_WKV, "weight")),
             layers_with(m, ROLE_IDX_Q_B, "weight"),
             layers_with(m, ROLE_HC_ATTN_FN, NULL));
    info_str(t, o, "extra_paths", row);
}

/* Kimi-K3 (core/model/kimik3.h): kimik3_describe's paragraph, and what the per-head maps read of it. */
static void info_kimik3(Table *t, cJSON *o, const Model *m) {
    KimiK3Spec s;
    char d[640];
    if (!m->config_tree || kimik3_parse(m->config_tree, m->path, &s) != AL_OK) { al_err_clear(); return; }
    info_str(t, o, "kimi_k3", kimik3_describe(&s, d, sizeof d));
    char row[400];
    snprintf(row, sizeof row, "the MLA layers read as Kimi-Linear's (q_a / q_b, kv_a_proj_with_mqa, kv_b_proj, o_proj; "
             "no RoPE): their per-head V-O and Q-K maps; present, not analysed: the output gate self_attn.g_proj on %d "
             "layer%s, the attention residuals, the latent experts and the Kimi Delta Attention layers' recurrence",
             layers_with(m, ROLE_ATTN_GATE, "weight"), al_s(layers_with(m, ROLE_ATTN_GATE, "weight")));
    info_str(t, o, "kimi_k3_read", row);
}

/* The rest of the description (core/model/config.h) and, per analysis (core/model/analyses.h), whether it is
 * available on this model and why not: rows "ranks vo  yes" / "no: REASON"; in JSON one key per
 * analysis, {"available": bool, "reason": "..."} (a note when available with a condition). */
static void info_description(Table *t, cJSON *o, const Model *m) {
    const ModelConfig *c = &m->cfg;
    info_str(t, o, "rope_scaling", rope_scaling_name(&c->rope_spec.scaling));
    if (c->rope_spec.scaling.kind != RS_NONE) info_num(t, o, "rope_scaling_factor", c->rope_spec.scaling.factor);
    info_int(t, o, "rotary_dims", c->rope_spec.rotary_dim);
    if (c->rope_spec.q_beta != 0) {                      /* Ministral 3's llama_4_scaling_beta */
        char qs[160];
        snprintf(qs, sizeof qs, "1 + %g ln(1 + floor(p / %g)) at position p (llama_4_scaling_beta; 1 before %g)",
                 c->rope_spec.q_beta, c->rope_spec.q_floor, c->rope_spec.q_floor);
        info_str(t, o, "q_scaling", qs);
    }
    info_num(t, o, "softmax_scale", cfg_attn_scale(c, 0));
    info_int(t, o, "sliding_window", c->sliding_window);
    if (c->rope_spec.scaling.kind == RS_YARN && !c->rope_spec.scaling.truncate)
        info_str(t, o, "yarn_truncate", "false: the ramp's bounds are not rounded (gpt-oss)");
    info_layer_kinds(t, o, c);
    info_attention_groups(t, o, c);
    if (c->attn_sinks)
        info_str(t, o, "attention_sinks", "a learned logit per head joins each softmax row (unscaled, its weight "
                 "dropped): the V·O and Q·K maps are unchanged, the softmax is not");
    if (cfg_has_indexer(c)) info_indexer(t, o, c);            /* DeepSeek-V3.2 / GLM-5's lightning indexer */
    if (c->attn == QKV_DSV4) info_dsv4(t, o, m);              /* DeepSeek-V4 */
    if (cfg_row(c)->keys == KEYS_KIMI_K3) info_kimik3(t, o, m);   /* Kimi-K3 */
    if (cfg_row(c)->chunked) info_llama4(t, o, c);            /* Llama 4 */
    char nope[256];
    if (cfg_nope_layers(c, nope, sizeof nope)) info_str(t, o, "nope_layers", nope);   /* SmolLM3's no_rope_layers */
    const cJSON *mtp = m->config_tree ? cJSON_GetObjectItemCaseSensitive(m->config_tree, "num_nextn_predict_layers") : NULL;
    if (cfg_row(c)->mtp_layers && cJSON_IsNumber(mtp) && mtp->valuedouble > 0) {   /* MiMo */
        char what[160];
        snprintf(what, sizeof what, "%d skipped (%s%sN.*: they draft tokens; the logits never read them)",
                 mtp->valueint, c->prefix, cfg_row(c)->mtp_layers);
        info_str(t, o, "mtp_layers", what);
    }
    info_hybrid(t, o, c);
    info_str(t, o, "qk_norm", qk_norm_name(c->qk_norm));
    info_str(t, o, "norm", norm_kind_name(c->norm));
    info_str(t, o, "activation", c->activation);
    info_str(t, o, "mlp", mlp_kind_name(c->mlp));
    if (c->mlp == MLP_MOE) info_int(t, o, "routed_experts", c->moe.n_experts);
    if (c->mlp == MLP_MOE) info_int(t, o, "experts_per_token", c->moe.top_k);
    if (c->swiglu_limit > 0) {
        char sw[200];
        snprintf(sw, sizeof sw, "clamped SwiGLU over interleaved gate/up columns: (clamp(up, +-%g) + 1) * g "
                 "sigmoid(%g g), g = min(gate, %g)", c->swiglu_limit, c->swiglu_alpha, c->swiglu_limit);
        info_str(t, o, "experts_mlp", sw);
    }
    info_bool(t, o, "tie_embeddings", c->tie_embeddings);
    if (cfg_row(c)->text_config) {          /* a multimodal checkpoint: its language model only */
        char tower[256];
        snprintf(tower, sizeof tower, "text tower of a multimodal checkpoint (text_config, tensors under %s); vision "
                 "tower not loaded%s%s", c->prefix, cfg_row(c)->tower_note ? "; " : "",
                 cfg_row(c)->tower_note ? cfg_row(c)->tower_note : "");
        info_str(t, o, "multimodal", tower);
    }
    for (int k = 0; k < AN_LISTED; k++) {
        char why[1024], row[1100];
        bool ok = analysis_available(m, (analysis_kind)k, why, sizeof why);
        snprintf(row, sizeof row, "%s%s%s", ok ? "yes" : "no", why[0] ? ": " : "", why);
        if (table_row(t) == AL_OK) { table_str(t, analysis_name((analysis_kind)k)); table_str(t, row); }
        cJSON *j = o ? cJSON_AddObjectToObject(o, analysis_key((analysis_kind)k)) : NULL;
        if (j) cJSON_AddBoolToObject(j, "available", ok);
        if (j && why[0]) cJSON_AddStringToObject(j, ok ? "note" : "reason", why);
    }
}

/* info's compute row: the session's mode, or where bf16 mode leaves this model's products in float32
 * (its weights not BF16) what `ppl` says of it. */
static void info_compute(Table *t, cJSON *o, const Session *s, const Model *m) {
    char buf[400];
    model_compute_note(m, mm_compute_parse(s->compute), buf, sizeof buf);
    info_str(t, o, "compute", buf);
}

/* A per-type model's (Gemma 4) attention parameters and KV values per layer of each type: the full layers at their
 * own head dims and KV heads, without v_proj where attention_k_eq_v; the KV-shared layers without k_proj / v_proj. */
static void info_by_type(Table *t, cJSON *o, const Model *m) {
    const ModelConfig *c = &m->cfg, *f = m->cfg_full;
    size_t kvw = (size_t)f->hidden * (size_t)f->n_kv_heads, pf = cfg_attn_params(f);
    if (c->k_eq_v) pf -= kvw * (size_t)f->v_dim;
    char row[400];
    snprintf(row, sizeof row, "sliding %zu, full %zu%s%s", cfg_attn_params(c), pf,
             c->k_eq_v ? " (no v_proj: attention_k_eq_v)" : "",
             c->kv_shared_from > 0 ? "; the KV-shared layers have no k_proj / v_proj" : "");
    info_str(t, o, "attn_params_per_layer_by_type", row);
    snprintf(row, sizeof row, "sliding %zu (%d KV head%s x (%d + %d)), full %zu (%d KV head%s x (%d + %d)%s)%s",
             cfg_kv_values(c), c->n_kv_heads, al_s(c->n_kv_heads), cfg_d_qk(c), c->v_dim, cfg_kv_values(f), f->n_kv_heads, al_s(f->n_kv_heads), cfg_d_qk(f),
             f->v_dim, c->k_eq_v ? ": K and V cached apart, V = v_norm(k_proj x)" : "",
             c->kv_shared_from > 0 ? "; the KV-shared layers none of their own" : "");
    info_str(t, o, "kv_values_per_token_per_layer_by_type", row);
}

static int cmd_info(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    const ModelConfig *c = &m->cfg;
    const char *to = args_str(a, "to");
    size_t tl = to ? strlen(to) : 0;
    bool json_stdout = !to && out->fmt == FMT_JSON && out_narrates(out);   /* `set format json`: the same object */
    bool json = json_stdout || (to && tl > 5 && !strcasecmp(to + tl - 5, ".json"));
    Table *t = table_new(2, "field", "value");
    cJSON *o = json ? cJSON_CreateObject() : NULL;
    if (!t || (json && !o)) { table_free(t); cJSON_Delete(o); return al_err("info: out of memory"); }
    t->record = true;          /* Lua: attn.info().layers */

    char kvwhy[160];
    dt_type kvd = kvcache_dtype(m, kvwhy, sizeof kvwhy);    /* kv-cache's and truncate's, one rule (kvcache.h) */
    size_t per_layer = cfg_attn_params(c), kvv = cfg_kv_values(c);
    info_str(t, o, "name", m->name);
    info_str(t, o, "family", model_family_name(c->family));
    info_str(t, o, "model_type", c->model_type);
    info_int(t, o, "layers", c->n_layers);
    info_int(t, o, "heads", c->n_heads);
    info_int(t, o, "kv_heads", c->n_kv_heads);
    info_int(t, o, "hidden", c->hidden);
    info_int(t, o, "qk_nope_head_dim", c->qk_nope_dim);
    info_int(t, o, "qk_rope_head_dim", c->qk_rope_dim);
    info_int(t, o, "v_head_dim", c->v_dim);
    info_int(t, o, "q_lora_rank", c->q_lora_rank);
    info_int(t, o, "kv_lora_rank", c->kv_lora_rank);
    info_num(t, o, "rope_theta", c->rope_theta);
    info_str(t, o, "rope_layout", rope_layout_name(cfg_is_mla(c) ? c->rope_spec.layout : c->rope));
    info_str(t, o, "dtype", model_dtype_name(m));
    char enc[256];
    model_weight_encodings(m, enc, sizeof enc);
    info_str(t, o, "weights", enc);
    if (m->quant.present) {                  /* what the quantization config says, and which key decided */
        char qd[400];
        quant_describe(&m->quant, qd, sizeof qd);
        info_str(t, o, "quantization", qd);
        char qs[1200];
        model_quant_sources(m, qs, sizeof qs);
        info_str(t, o, "quantized_by", qs);
    }
    info_compute(t, o, s, m);
    info_bool(t, o, "qkv_bias", c->qkv_bias);
    info_int(t, o, "attn_params_per_layer", (long long)per_layer);
    info_int(t, o, "attn_params_total", (long long)model_attn_params_total(m));   /* softmax-attention layers */
    info_int(t, o, "kv_values_per_token_per_layer", (long long)kvv);
    if (m->cfg_full) info_by_type(t, o, m);     /* Gemma 4: the two fields above are the sliding layers' */
    info_str(t, o, "kv_cache_dtype", dt_name(kvd));
    info_str(t, o, "kv_cache_dtype_from", kvwhy);
    info_kv_scales(t, o, m);
    info_int(t, o, "kv_bytes_per_token_per_layer", (long long)(kvv * dt_size(kvd)));
    /* every layer with a cache of its own at its own dims (Gemma 4: not the KV-shared ones; full layers' head dims) */
    info_int(t, o, "kv_bytes_per_token", (long long)(model_kv_values_total(m) * dt_size(kvd)));
    info_str(t, o, "path", m->path);
    info_gguf_tokenizer(t, o, m);
    uint64_t local = 0, total = 0;           /* a model streamed from the Hub (hub.h) */
    char *held = m->store && store_local_bytes(m->store, &local, &total)
                     ? al_asprintf("%llu of %llu bytes (%.1f%%); the rest is fetched from the Hub on first use",
                                   (unsigned long long)local, (unsigned long long)total, total ? 100.0 * (double)local / (double)total : 0.0)
                     : NULL;
    if (held) info_str(t, o, "hub_local", held);
    free(held);
    info_description(t, o, m);

    if (!json) return out_table_to(out, args_str(a, "to"), t);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    out_table(out, t);
    char *withnl = text ? al_asprintf("%s\n", text) : NULL;
    free(text);
    if (!withnl) return al_err("info: out of memory writing JSON");
    if (json_stdout) {
        out_write(out, OUT_STDOUT, withnl, strlen(withnl));
        free(withnl);
        out->written = true;
        return AL_OK;
    }
    int rc = out_write_file(out, to, withnl, strlen(withnl));
    free(withnl);
    if (rc) return AL_ERR;
    out->written = true;
    out_printf(out, "wrote %s\n", to);
    return AL_OK;
}

/* ================================================================ settings */

static const char SET_HELP[] =
    "Session settings. `set` lists them with their values; `set KEY` prints one;\n"
    "`set KEY VALUE` changes it (e.g. set tau 0.99, set format csv, set plot.size 1600x900),\n"
    "saying the new value at the prompt (silently from Lua: attn.set(\"tau\", 0.99); read one\n"
    "with attn.get(\"tau\"), typed, or all as one table with attn.get()).";

static int cmd_set(Session *s, const Args *a, Out *out) {
    const char *key = args_str(a, "key"), *val = args_str(a, "value");
    if (key && *key && val && *val) {
        if (session_set(s, key, val)) return AL_ERR;
        out->fmt = s->fmt;                         /* `set format csv` already speaks on stderr */
        if (!out_narrates(out)) return AL_OK;      /* silent in notebooks (attn.set) */
        char *v = session_get(s, key);
        out_printf(out, "%s = %s\n", key, v ? v : "?");
        free(v);
        return AL_OK;
    }
    if (key && *key) {
        char *v = session_get(s, key);
        if (!v) return AL_ERR;
        out_string(out, v);
        free(v);
        return AL_OK;
    }
    Table *t = table_new(3, "setting", "value", "help");
    if (!t) return AL_ERR;
    const Setting *st;
    for (size_t i = 0; (st = session_setting_at(i)); i++) {
        char *v = session_get(s, st->name), *help = session_setting_help(st);
        int rc = table_row(t);
        if (rc == AL_OK) {
            table_str(t, st->name);
            table_str(t, v);
            table_str(t, help);
        }
        free(v);
        free(help);
        if (rc) { table_free(t); return AL_ERR; }
    }
    out_table(out, t);
    return AL_OK;
}

/* ================================================================ the table */

static const Param help_pos[] = {
    { .name = "command", .type = ARG_STRING, .def = "", .comp = COMP_COMMANDS, .help = "a command name" },
    { .name = "sub", .type = ARG_STRING, .def = "", .comp = COMP_COMMANDS, .help = "one of its sub-commands" },
    {0}
};
static const Param load_pos[] = {
    { .name = "model", .type = ARG_STRING, .comp = COMP_LOADABLE, .metavar = "MODEL",
      .help = "demo name, path, alias or org/name" },
    {0}
};
static const Param load_kw[] = {
    { .name = "as", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "NAME", .help = "session name for the model" },
    {0}
};
static const Param to_kw[] = { PARAM_TO, {0} };
static const Param use_pos[] = {
    { .name = "name", .type = ARG_STRING, .comp = COMP_MODELS, .metavar = "NAME", .help = "a loaded model's name" },
    {0}
};
static const Param close_pos[] = {
    { .name = "name", .type = ARG_STRING, .def = "", .comp = COMP_MODELS, .metavar = "NAME|all",
      .help = "model to close, or all (default: the current one)" },
    {0}
};
static const Param info_kw[] = {
    { .name = "to", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "write FILE.json (one object) or FILE.csv (the rows) instead of printing" },
    {0}
};
static const Param set_pos[] = {
    { .name = "key", .type = ARG_STRING, .def = "", .comp = COMP_SETTINGS, .metavar = "KEY", .help = "setting name" },
    { .name = "value", .type = ARG_STRING, .def = "", .comp = COMP_NONE, .metavar = "VALUE", .help = "new value" },
    {0}
};

static const Command base_cmds[] = {
    { .name = "help", .summary = "list commands, or explain one: help CMD [SUB]", .help = HELP_HELP,
      .pos = help_pos, .fn = cmd_help },
    { .name = "load", .summary = "open a checkpoint, demo model, alias or org/name; it becomes current",
      .help = LOAD_HELP, .pos = load_pos, .kw = load_kw, .fn = cmd_load },
    { .name = "models", .summary = "list the loaded models", .help = MODELS_HELP, .kw = to_kw, .fn = cmd_models },
    { .name = "use", .summary = "make a loaded model the current one",
      .help = "Switches the current model; commands act on it.", .pos = use_pos, .fn = cmd_use, .returns = "nothing" },
    { .name = "close", .summary = "close a model (default: the current one), or all",
      .help = "Frees the model and every cache tied to it. The most recently loaded remaining\n"
              "model becomes current.", .pos = close_pos, .fn = cmd_close, .returns = "nothing" },
    { .name = "info", .summary = "the current model: its description (dims, RoPE, norms, MLP, KV cache) and what each analysis can do",
      .help = INFO_HELP, .kw = info_kw, .fn = cmd_info, .flags = CMD_MODEL },
    { .name = "set", .summary = "show or change settings (tau, format, precision, compute, plot.*, csv.params)", .help = SET_HELP,
      .pos = set_pos, .fn = cmd_set },
    {0}
};

const CommandGroup cmd_group_base = { .title = "Models and session", .cmds = base_cmds };
