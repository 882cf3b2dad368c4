/* cmd_lm.c -- the language-model command group: `tokenizer`, `tokenize`, `generate` and `ppl`,
 * over core/io/tokenizer.c and core/model/forward.c. The tokenizer and the forward pass of each loaded
 * model are the workspace's (ws_lm.h), shared with calibration and TransMLA. `generate` and `ppl`
 * run the model's newest transformation with its layers swapped in (xform.h), `source` the model. */
#define _GNU_SOURCE
#include "ws_lm.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "headprobe.h"
#include "registry.h"
#include "safetensors.h"
#include "xform.h"

/* ================================================================ helpers */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* What `ppl` and `generate` run on m (see xform_measured): the newest transformation of m swapped
 * into f (held: its layers, release with xform_attn_clear), unless `source`; the headline naming
 * the model and the transformation goes to out (stderr with to_err: generate's stdout is the text). */
static int lm_measured(Session *s, Model *m, const Args *a, const char *verb, Forward *f, XformAttn *held, bool to_err,
                       Out *out) {
    char head[1024];
    *held = (XformAttn){0};
    const Xform *x = xform_measured(s, m, args_flag(a, "source"), false, verb, head, sizeof head);
    int rc = x ? xform_attn_set(s, x, f, held) : AL_OK;
    if (rc != AL_OK && rc != AL_INTERRUPTED && !strcmp(x->kind->name, "truncate"))   /* its export loads */
        return al_err_ctx("%s of the newest transformation (`source`: the loaded model; `export DIR`, `load DIR` and "
                          "`%s` there measure the truncation)", verb, verb);
    if (rc != AL_OK)
        return rc == AL_INTERRUPTED ? rc : al_err_ctx("%s of the newest transformation (`source`: the loaded model)", verb);
    char tail[96] = "";
    if (x)
        snprintf(tail, sizeof tail, ": %d of %d layers run as transformed", held->changed, m->cfg.n_layers);
    char *more = strchr(head, '\n');      /* the newer transformations passed over, on their own line */
    if (more) *more++ = 0;
    if (to_err) out_eprintf(out, "%s%s\n%s%s", head, tail, more ? more : "", more ? "\n" : "");
    else out_printf(out, "%s%s\n%s%s", head, tail, more ? more : "", more ? "\n" : "");
    return AL_OK;
}

/* ================================================================ tokenizer / tokenize */

static const char TOKENIZER_HELP[] =
    "Without FILE: shows the tokenizer of the current model (found on first use beside the\n"
    "checkpoint: tokenizer.json in its folder, else tokenizer.bin or tok*.bin beside a llama2.c\n"
    ".bin). With FILE: uses that file for the current model from now on. Kinds: llama2.c\n"
    "tok*.bin (run.c's encoder: BOS, a dummy-prefix space, best-score merges); Hugging Face\n"
    "tokenizer.json with a BPE model, byte-level (GPT-2, Llama-3, Qwen2 split patterns) or\n"
    "SentencePiece-style (metaspace U+2581, byte fallback), with their added special tokens.\n"
    "From Lua: the tokenizer file's path (a string).";

static int cmd_tokenizer(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    const char *file = args_str(a, "file");
    Tokenizer *t;
    if (file && *file) {
        if (tok_open(file, &t) != AL_OK) return AL_ERR;
        if (lm_set_tokenizer(s, m, t) != AL_OK) { tok_free(t); return AL_ERR; }
    } else if (lm_tokenizer(s, m, &t) != AL_OK)
        return AL_ERR;
    out_printf(out, "tokenizer of %s: %s%s, %s, %zu id%s, BOS %d, EOS %d\n", m->name, tok_path(t),
               tok_embedded(t) ? " (embedded: tokenizer.ggml.*)" : "", tok_name(t), tok_vocab(t), al_s(tok_vocab(t)),
               tok_bos(t), tok_eos(t));
    if (tok_vocab(t) > (size_t)m->cfg.vocab)
        out_eprintf(out, "warning: the tokenizer has %zu id%s but the model's vocabulary is %d\n", tok_vocab(t), al_s(tok_vocab(t)),
                    m->cfg.vocab);
    out_string(out, tok_path(t));
    out->written = true;
    return AL_OK;
}

static const char TOKENIZE_HELP[] =
    "Encodes TEXT (quote it) or, with `file FILE`, the contents of FILE, with the tokenizer of\n"
    "the current model, and prints the token ids whitespace-separated on one line, starting\n"
    "with the BOS the tokenizer adds (llama2.c: 1). `to OUT` writes them to OUT instead, which\n"
    "`ppl ids OUT` reads back. From Lua the result is the array of ids. `strings` prints a table\n"
    "instead: each token's position, id and string -- its text as it reads in the decoded sequence\n"
    "(BOS / EOS as their piece; newlines, tabs and bytes of a split UTF-8 character escaped as \\n,\n"
    "\\t, \\xHH unless `raw`), so the strings after BOS concatenate to the text; from Lua its rows.\n"
    "The rule for files is the\n"
    "same everywhere: where a command takes text, a file is `file FILE` (a TEXT that names an\n"
    "existing file is refused, so a path is never encoded by mistake); where it takes a FILE\n"
    "(ppl, calibrate, run), the word is a path.";

/* `tokenize ... strings`: one row per token (pos, id, its string as it reads in the text); frees ids. */
static int tokenize_strings(const Tokenizer *t, int *ids, size_t n, const Args *a, Out *out) {
    char **str = NULL, lab[256];
    int rc = probe_strings(t, ids, n, &str);
    Table *tb = rc == AL_OK ? table_new(3, "pos", "id", "string") : NULL;
    for (size_t i = 0; tb && i < n; i++) {
        if (table_row(tb)) { table_free(tb); tb = NULL; break; }
        table_int(tb, (long long)i);
        table_int(tb, ids[i]);
        probe_label(str[i], lab, sizeof lab);
        table_str(tb, args_flag(a, "raw") ? str[i] : lab);
    }
    probe_strings_free(str, n);
    free(ids);
    return tb ? out_table_to(out, args_str(a, "to"), tb) : AL_ERR;
}

static int cmd_tokenize_text(Session *s, const Args *a, Out *out) {
    Tokenizer *t;
    if (lm_tokenizer(s, s->cur, &t) != AL_OK) return AL_ERR;
    const char *text = args_str(a, "text"), *file = args_str(a, "file");
    char *owned = NULL;
    size_t len;
    if (file && *file) {
        if (strcmp(text, "file") != 0)
            return al_err("tokenize: give TEXT (one quoted string) or `file FILE`, not '%s' followed by '%s'", text, file);
        if (!(owned = al_read_file(file, &len))) return AL_ERR;
        text = owned;
    } else if (al_check_regular(text, "a file") == AL_OK)   /* one rule: a file is always `file FILE` */
        return al_err("tokenize: '%s' is a file: `tokenize file %s` encodes its contents (TEXT is encoded as "
                      "typed; ppl FILE and calibrate FILE read files)", text, text);
    else {
        al_err_clear();
        len = strlen(text);
    }
    int *ids = NULL;
    size_t n = 0;
    int rc = tok_encode(t, text, len, true, &ids, &n);
    free(owned);
    if (rc != AL_OK) return rc;
    if (args_flag(a, "strings")) return tokenize_strings(t, ids, n, a, out);
    if (args_flag(a, "raw")) { free(ids); return al_err("tokenize: `raw` goes with `strings`"); }
    size_t cap = n * 12 + 2, k = 0;
    char *line = al_malloc(cap, "the id list");
    double *vals = al_malloc3(n ? n : 1, 1, sizeof *vals, "the id list");
    if (!line || !vals) { free(ids); free(line); free(vals); return AL_ERR; }
    for (size_t i = 0; i < n; i++) {
        k += (size_t)snprintf(line + k, cap - k, "%s%d", i ? " " : "", ids[i]);
        vals[i] = ids[i];
    }
    k += (size_t)snprintf(line + k, cap - k, "\n");
    const char *to = args_str(a, "to");
    if (to) {                                   /* "" is refused, never stdout */
        rc = out_write_file(out, to, line, k);
        if (rc == AL_OK) out_printf(out, "wrote %zu id%s to %s\n", n, al_s(n), to);
    } else
        out_write(out, OUT_STDOUT, line, k);
    if (rc == AL_OK) rc = out_array_int(out, vals, n);   /* ids: Lua integers */
    out->written = true;
    free(line);
    free(vals);
    free(ids);
    return rc;
}

/* ================================================================ generate */

static const char GENERATE_HELP[] =
    "Continues PROMPT (quote it; \"\" starts from the BOS token alone) with the current model:\n"
    "the prompt is encoded with its BOS, run as one batched prefill, then one token at a time\n"
    "through the KV cache, printing the text as it grows. Greedy (argmax) at temp 0, else\n"
    "sampled from softmax(logits / temp) with `seed`. Stops after N tokens, at an end-of-text\n"
    "token (config.json eos_token_id, the tokenizer's EOS; for llama2.c tokenizers also BOS, as\n"
    "run.c does) or when the context is full. Timing (prefill and decode tokens/s) goes to\n"
    "stderr. Ctrl-C stops it, keeping the text so far.\n"
    "It runs the current model's newest transformation (a `truncate` working copy, `convert mla`,\n"
    "`convert tpa`) with its layers swapped in, named in a first line on stderr; `source` runs the\n"
    "loaded model. From Lua: the whole text, prompt included (a string).";

/* xorshift64* in [0, 1). */
static double rng_next(uint64_t *st) {
    *st ^= *st >> 12; *st ^= *st << 25; *st ^= *st >> 27;
    return (double)((*st * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* Next token from logits z: argmax at temp 0, else a sample of softmax(z / temp). */
static int pick(const float *z, size_t V, double temp, uint64_t *rng) {
    size_t best = 0;
    for (size_t i = 1; i < V; i++)
        if (z[i] > z[best]) best = i;
    if (temp <= 0) return (int)best;
    double sum = 0, r;
    for (size_t i = 0; i < V; i++) sum += exp((z[i] - z[best]) / temp);
    r = rng_next(rng) * sum;
    for (size_t i = 0; i < V; i++) {
        r -= exp((z[i] - z[best]) / temp);
        if (r <= 0) return (int)i;
    }
    return (int)best;
}

/* Prints the part of the decoded ids not printed yet (*shown bytes so far). */
static int show_new(const Tokenizer *t, const int *ids, size_t n, size_t *shown, Out *out, char **text) {
    free(*text);
    *text = NULL;
    if (tok_decode(t, ids, n, true, text) != AL_OK) return AL_ERR;
    size_t len = strlen(*text);
    if (len > *shown) out_write(out, OUT_STDOUT, *text + *shown, len - *shown);
    *shown = len > *shown ? len : *shown;
    return AL_OK;
}

static int cmd_generate_run(Model *m, Tokenizer *t, Forward *f, const Args *a, Out *out);

/* ppl's and generate's line on bf16 mode (none in f32 mode): it changes only the products of BF16
 * weights (mm_xwt), so say when there were none. */
static void compute_line(const Forward *f, const Model *m, Out *out) {
    char note[400];
    if (fwd_compute(f) == MM_F32) return;
    model_compute_note(m, fwd_compute(f), note, sizeof note);
    out_eprintf(out, "compute %s\n", note);
}

static int cmd_generate(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    Tokenizer *t;
    Forward *f;
    XformAttn held;
    if (lm_tokenizer(s, m, &t) != AL_OK || lm_forward(s, m, &f) != AL_OK) return AL_ERR;
    int rc = lm_measured(s, m, a, "generate", f, &held, true, out);
    if (rc != AL_OK) return rc;
    compute_line(f, m, out);
    rc = cmd_generate_run(m, t, f, a, out);
    xform_attn_clear(f, &held);
    return rc;
}

/* generate's decoding on f (what lm_measured set up). */
static int cmd_generate_run(Model *m, Tokenizer *t, Forward *f, const Args *a, Out *out) {
    const char *prompt = args_str(a, "prompt");
    long ntok = args_int(a, "tokens");
    double temp = args_float(a, "temp");
    uint64_t rng = (uint64_t)args_int(a, "seed") * 0x9E3779B97F4A7C15ull + 1;
    int *pids = NULL;
    size_t np = 0;
    if (tok_encode(t, prompt, strlen(prompt), true, &pids, &np) != AL_OK) return AL_ERR;
    if (np == 0) {
        int bos[4];
        if (model_config_ids(m, "bos_token_id", bos, 0, 1) == 0) {
            free(pids);
            return al_err("generate: the prompt is empty and neither the tokenizer nor config.json gives a BOS token; "
                          "give a prompt");
        }
        pids[0] = bos[0];
        np = 1;
    }
    int stop[16];
    size_t nstop = model_config_ids(m, "eos_token_id", stop, 0, 14);
    if (tok_eos(t) >= 0) stop[nstop++] = tok_eos(t);
    if (tok_type(t) == TOK_LLAMA2C && tok_bos(t) >= 0) stop[nstop++] = tok_bos(t);
    size_t cap = np + (size_t)ntok, n = np, shown = 0, V = fwd_vocab(f);
    int *ids = al_malloc3(cap, 1, sizeof *ids, "token ids");
    float *z = al_malloc3(V, 1, sizeof *z, "logits");
    char *text = NULL;
    int rc = ids && z ? AL_OK : AL_ERR;
    if (rc == AL_OK) memcpy(ids, pids, np * sizeof *ids);
    free(pids);
    fwd_reset(f);
    double t0 = now_s(), t1 = t0;
    if (rc == AL_OK) rc = show_new(t, ids, n, &shown, out, &text);
    if (rc == AL_OK) rc = fwd_run(f, ids, n, FWD_LOGITS_LAST, z);
    t1 = now_s();
    size_t gen = 0;
    while (rc == AL_OK && gen < (size_t)ntok) {
        int next = pick(z, V, temp, &rng);
        bool end = false;
        for (size_t i = 0; i < nstop; i++) end |= next == stop[i];
        if (end) break;
        ids[n++] = next;
        gen++;
        rc = show_new(t, ids, n, &shown, out, &text);
        if (rc != AL_OK || gen == (size_t)ntok || fwd_pos(f) >= fwd_max_ctx(f)) break;
        if (al_interrupted()) { rc = AL_INTERRUPTED; break; }
        rc = fwd_run(f, &next, 1, FWD_LOGITS_LAST, z);
    }
    double t2 = now_s();
    out_write(out, OUT_STDOUT, "\n", 1);
    if (rc == AL_OK || rc == AL_INTERRUPTED) {
        out_eprintf(out, "%zu prompt tokens in %.3f s (%.1f tok/s), %zu generated in %.3f s (%.1f tok/s)\n", np, t1 - t0,
                    (double)np / fmax(t1 - t0, 1e-9), gen, t2 - t1, (double)gen / fmax(t2 - t1, 1e-9));
        out_string(out, text ? text : "");
        out->written = true;
    }
    free(text);
    free(ids);
    free(z);
    return rc;
}

/* ================================================================ ppl */

static const char PPL_HELP[] =
    "Perplexity of the current model on a text FILE (or `text FILE`, as `check` takes it; encoded\n"
    "with the model's tokenizer, BOS first) or, with `ids FILE`, on whitespace-separated token ids\n"
    "(from `tokenize ... to FILE` or any other tokenizer; `check` takes both forms too, and gives\n"
    "the same number for the same input as its `after`). The tokens are cut into non-overlapping windows of L tokens (the\n"
    "last one may be shorter, at least 2); each window is a fresh sequence that predicts its\n"
    "tokens 2..L. `max-tokens N` uses only the first N tokens. The result is one row:\n"
    "tokens (predicted), nll (mean negative log-likelihood, nats) and ppl = exp(nll); `to\n"
    "FILE.csv` writes it with the header tokens,nll,ppl. Ctrl-C stops after the current window\n"
    "and reports the windows done.\n"
    "It measures the current model's newest transformation -- the `truncate` working copy (its\n"
    "truncated heads folded back into dense weights, as `export ... format dense` writes them),\n"
    "`convert mla` or `convert tpa` -- with the transformed layers swapped into the forward pass,\n"
    "and its first line names the model and the transformation; `source` measures the loaded\n"
    "model. KQ-SVD projections (`kvsvd learn`) act on the cache and do not run here: the line says\n"
    "so and the loaded model is measured (`kvsvd eval` measures them).\n"
    "Examples:\n"
    "  truncate vo rank 4; ppl tinystory.txt; ppl tinystory.txt source";

static int ppl_run(Session *s, Model *m, const Args *a, Forward *f, bool ids_mode, Out *out);

static int cmd_ppl(Session *s, const Args *a, Out *out) {
    Model *m = s->cur;
    const char *what = args_str(a, "what"), *file = args_str(a, "file");
    bool ids_mode = file && *file && !strcmp(what, "ids");
    if (file && *file && !ids_mode && strcmp(what, "text") != 0)   /* check's forms: text FILE, ids FILE */
        return al_err("ppl: give FILE or `text FILE` (a text), or `ids FILE` (token ids), not '%s' followed by '%s'",
                      what, file);
    Forward *f;
    XformAttn held;
    if (lm_forward(s, m, &f) != AL_OK) return AL_ERR;
    int rc = lm_measured(s, m, a, "ppl", f, &held, false, out);
    if (rc != AL_OK) return rc;
    rc = ppl_run(s, m, a, f, ids_mode, out);
    xform_attn_clear(f, &held);
    return rc;
}

/* ppl's measurement on f (what lm_measured set up). */
static int ppl_run(Session *s, Model *m, const Args *a, Forward *f, bool ids_mode, Out *out) {
    const char *what = args_str(a, "what"), *file = args_str(a, "file");
    int *ids = NULL;
    size_t n = 0;
    if (file && *file) what = file;                     /* `text FILE` / `ids FILE`: the file */
    int rc = lm_text_ids(s, m, what, ids_mode ? file : NULL, &ids, &n);
    if (rc != AL_OK) return rc;
    long ctx = m->cfg.max_pos > 0 ? m->cfg.max_pos : 512;    /* default: min(512, the context) */
    size_t L = (size_t)(args_given(a, "seqlen") ? args_int(a, "seqlen") : ctx < 512 ? ctx : 512);
    if (args_given(a, "max-tokens") && (size_t)args_int(a, "max-tokens") < n) n = (size_t)args_int(a, "max-tokens");
    FwdPpl p;
    double t0 = now_s();
    rc = n < 2 ? al_err("ppl: %s has %zu token%s; at least 2 are needed", what, n, al_s(n))
               : fwd_ppl(f, ids, n, L, &p);
    free(ids);
    if (rc != AL_OK && !(rc == AL_INTERRUPTED && p.tokens > 0)) return rc;
    double dt = now_s() - t0;
    out_eprintf(out, "%zu window%s of up to %zu token%s, %zu predicted, %.2f s (%.1f tok/s)%s\n", p.windows, al_s(p.windows), L, al_s(L), p.tokens,
                dt, (double)(p.tokens + p.windows) / fmax(dt, 1e-9), rc == AL_INTERRUPTED ? " -- interrupted" : "");
    if (cfg_has_indexer(&m->cfg)) {                     /* DeepSeek-V3.2 / GLM-5: which attention ran */
        size_t K = (size_t)m->cfg.index_topk, w = L < n ? L : n;
        if (w <= K) out_eprintf(out, "indexer: windows of at most %zu token%s <= index_topk %zu: dense attention (the "
                                     "selection keeps every key)\n", w, al_s(w), K);
        else out_eprintf(out, "indexer: windows of up to %zu token%s > index_topk %zu: positions %zu.. attend to the "
                              "indexer's %zu selected keys, earlier ones densely\n", w, al_s(w), K, K, K);
    }
    compute_line(f, m, out);
    Table *tb = table_new(3, "tokens", "nll", "ppl");
    if (!tb || table_row(tb)) { table_free(tb); return AL_ERR; }
    table_int(tb, (long long)p.tokens);
    table_num(tb, p.nll);
    table_num(tb, exp(p.nll));
    int r2 = out_table_to(out, args_str(a, "to"), tb);
    return rc == AL_INTERRUPTED ? rc : r2;
}

/* ================================================================ the table */

#define PARAM_SOURCE_MODEL                                                                                     \
    { .name = "source", .type = ARG_FLAG, .comp = COMP_NONE,                                                   \
      .help = "the loaded model, not its newest transformation (truncate, convert mla, convert tpa)" }

static const Param tokenizer_pos[] = {
    { .name = "file", .type = ARG_PATH, .def = "", .comp = COMP_FILES, .metavar = "FILE",
      .help = "tokenizer.json or a llama2.c tok*.bin (default: show the one in use)" },
    {0}
};
static const Param tokenize_pos[] = {
    { .name = "text", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "TEXT|file",
      .help = "the text (quoted), or the word file followed by FILE" },
    { .name = "file", .type = ARG_PATH, .def = "", .comp = COMP_FILES, .metavar = "FILE",
      .help = "after the word file: the text file to encode" },
    {0}
};
static const Param tokenize_kw[] = {
    { .name = "to", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "write the ids (whitespace-separated, one line) to FILE instead of printing them" },
    { .name = "strings", .type = ARG_FLAG, .comp = COMP_NONE,
      .help = "a table of each token's position, id and string (to FILE.csv / .json with `to`)" },
    { .name = "raw", .type = ARG_FLAG, .comp = COMP_NONE,
      .help = "with strings: the strings as decoded (newlines, partial UTF-8 bytes), not escaped" },
    {0}
};
static const Param generate_pos[] = {
    { .name = "prompt", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "PROMPT",
      .help = "text to continue (quoted; \"\" for BOS alone)" },
    {0}
};
static const Param generate_kw[] = {
    { .name = "tokens", .type = ARG_INT, .def = "128", .min = 1, .max = 1e6, .comp = COMP_NONE, .metavar = "N",
      .help = "most tokens to generate" },
    { .name = "temp", .type = ARG_FLOAT, .def = "0", .min = 0, .max = 100, .comp = COMP_NONE, .metavar = "T",
      .help = "sampling temperature (0: greedy)" },
    { .name = "seed", .type = ARG_INT, .def = "1", .min = 0, .max = 1e15, .comp = COMP_NONE, .metavar = "S",
      .help = "random seed for temp > 0" },
    PARAM_SOURCE_MODEL,
    {0}
};
static const Param ppl_pos[] = {
    { .name = "what", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE|text|ids",
      .help = "a text file, or the word text followed by one, or the word ids followed by a file of token ids" },
    { .name = "file", .type = ARG_PATH, .def = "", .comp = COMP_FILES, .metavar = "FILE",
      .help = "after the word text: a text file; after the word ids: whitespace-separated token ids" },
    {0}
};
static const Param ppl_kw[] = {
    { .name = "seqlen", .type = ARG_INT, .min = 2, .max = 1e7, .comp = COMP_NONE, .metavar = "L",
      .help = "window length in tokens (default: min(512, the model's context))" },
    { .name = "max-tokens", .type = ARG_INT, .min = 2, .max = 1e12, .comp = COMP_NONE, .metavar = "N",
      .help = "use only the first N tokens (default: all)" },
    PARAM_SOURCE_MODEL,
    PARAM_TO,
    {0}
};

static const Command lm_cmds[] = {
    { .name = "tokenizer", .summary = "show the current model's tokenizer, or set it from a file",
      .help = TOKENIZER_HELP, .pos = tokenizer_pos, .fn = cmd_tokenizer, .flags = CMD_MODEL },
    { .name = "tokenize", .summary = "text (or a text file) to token ids with the model's tokenizer",
      .help = TOKENIZE_HELP, .pos = tokenize_pos, .kw = tokenize_kw, .fn = cmd_tokenize_text, .flags = CMD_MODEL },
    { .name = "generate", .summary = "continue a prompt with the current model (greedy or sampled)",
      .help = GENERATE_HELP, .pos = generate_pos, .kw = generate_kw, .fn = cmd_generate, .flags = CMD_MODEL },
    { .name = "ppl", .summary = "perplexity of a text or token-id file over windows of L tokens",
      .returns = CMD_RETURNS_ROWS,
      .help = PPL_HELP, .pos = ppl_pos, .kw = ppl_kw, .fn = cmd_ppl, .flags = CMD_MODEL },
    {0}
};

const CommandGroup cmd_group_lm = { .title = "Language model: tokenizers, generation, perplexity", .cmds = lm_cmds };
