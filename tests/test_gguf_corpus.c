/* test_gguf_corpus.c -- hostile tokenizer.ggml.* keys of a GGUF (core/io/tokenizer.c: load_gguf) get a clear
 * one-line error naming the file and the key, and nothing crashes (run it under -DATTNLAB_SANITIZE=ON too).
 *
 * A table of small GGUF files, each built here byte by byte (keys only, no tensors): tokens, scores,
 * token_type and merges of the wrong type, the wrong count, a count past the file, empty strings, ids out
 * of range, a model or pre-tokenizer attnlab does not know, raw control characters in what is echoed.
 * Each is opened with tok_open and its verdict and message checked, compared with the committed copy in
 * tests/corpus/gguf/ (the seed corpus of tests/fuzz/fuzz_gguf.c; a file there that is not in the table
 * fails the test), and run through the fuzz target's checks, with every truncation and a few byte
 * substitutions. `test_gguf_corpus --write-corpus DIR` regenerates the files and prints the README table. */
#include "check.h"
#include "fuzz/fuzz_gguf.c"     /* LLVMFuzzerTestOneInput: the fuzz target's invariants */

#include <dirent.h>
#include <stdint.h>
#include <time.h>

/* ================================================================ byte images */

static char tu_dir[4096];

typedef struct {
    uint8_t *b;
    size_t n, cap;
    uint64_t nkv;
} image;

static void put(image *m, const void *p, size_t n) {
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2 + 64;
        m->b = realloc(m->b, m->cap);
    }
    memcpy(m->b + m->n, p, n);
    m->n += n;
}
static void u32(image *m, uint32_t v) { put(m, &v, 4); }
static void u64(image *m, uint64_t v) { put(m, &v, 8); }
static void strn(image *m, const char *s, size_t n) { u64(m, n); put(m, s, n); }
static void str(image *m, const char *s) { strn(m, s, strlen(s)); }

enum { T_U32 = 4, T_I32 = 5, T_F32 = 6, T_STR = 8, T_ARR = 9 };

static void key(image *m, const char *k, uint32_t type) { str(m, k); u32(m, type); m->nkv++; }
static void kv_str(image *m, const char *k, const char *v) { key(m, k, T_STR); str(m, v); }
static void kv_u32(image *m, const char *k, uint32_t v) { key(m, k, T_U32); u32(m, v); }
static void arr(image *m, const char *k, uint32_t elt, uint64_t n) { key(m, k, T_ARR); u32(m, elt); u64(m, n); }
static void kv_strs(image *m, const char *k, const char *const *v, size_t n) {
    arr(m, k, T_STR, n);
    for (size_t i = 0; i < n; i++) str(m, v[i]);
}
static void kv_f32s(image *m, const char *k, size_t n, float v) {
    arr(m, k, T_F32, n);
    for (size_t i = 0; i < n; i++) put(m, &v, 4);
}
static void kv_i32s(image *m, const char *k, const int32_t *v, size_t n) {
    arr(m, k, T_I32, n);
    for (size_t i = 0; i < n; i++) put(m, &v[i], 4);
}

/* "GGUF", version 3, no tensors, body's keys. */
static image finish(image *body) {
    image m = {0};
    put(&m, "GGUF", 4);
    u32(&m, 3);
    u64(&m, 0);
    u64(&m, body->nkv);
    put(&m, body->b, body->n);
    free(body->b);
    return m;
}

static const char *const SPM[] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "\xe2\x96\x81" "a"};
static const char *const BPE[] = {"a", "b", "ab", "\xc4\xa0" "a", "<|endoftext|>"};
#define NSPM 7
#define NBPE 5

/* The keys a case starts from: llama's (tokens, scores) or gpt2's (tokens, merges "a b"), each optional. */
static void spm_base(image *m, bool tokens, bool scores) {
    kv_str(m, "general.architecture", "llama");
    kv_str(m, "tokenizer.ggml.model", "llama");
    if (tokens) kv_strs(m, "tokenizer.ggml.tokens", SPM, NSPM);
    if (scores) kv_f32s(m, "tokenizer.ggml.scores", NSPM, 0.0f);
}
static void bpe_base(image *m, bool merges) {
    static const char *const ab[] = {"a b"};
    kv_str(m, "general.architecture", "gpt2");
    kv_str(m, "tokenizer.ggml.model", "gpt2");
    kv_strs(m, "tokenizer.ggml.tokens", BPE, NBPE);
    if (merges) kv_strs(m, "tokenizer.ggml.merges", ab, 1);
}

/* A tiny llama model (hidden 8, 1 layer (block_count: layers), 2 heads, 1 KV head, the SPM vocabulary of 7) written by the core's
 * GgufWriter: BF16 matrices, F32 norms, the tokenizer keys; gguf_model_open reads it back. */
static image llama_model(uint32_t layers) {
    static const struct { const char *name; uint64_t ne0, ne1; } T[] = {
        {"token_embd.weight", 8, NSPM}, {"output_norm.weight", 8, 0}, {"blk.0.attn_norm.weight", 8, 0},
        {"blk.0.ffn_norm.weight", 8, 0}, {"blk.0.attn_q.weight", 8, 8}, {"blk.0.attn_k.weight", 8, 4},
        {"blk.0.attn_v.weight", 8, 4}, {"blk.0.attn_output.weight", 8, 8}, {"blk.0.ffn_gate.weight", 8, 8},
        {"blk.0.ffn_up.weight", 8, 8}, {"blk.0.ffn_down.weight", 8, 8}};
    static const float scores[NSPM] = {0, 0, 0, -1, -2, -3, -4};
    GgufWriter *w = gguf_writer_new();
    int rc = gguf_set_str(w, "general.architecture", "llama");
    static const char *const k[] = {"llama.embedding_length", "llama.block_count", "llama.attention.head_count",
                                    "llama.attention.head_count_kv", "llama.feed_forward_length", "llama.context_length"};
    const uint32_t v[] = {8, layers, 2, 1, 8, 16};
    for (size_t i = 0; i < 6; i++) rc |= gguf_set_u32(w, k[i], v[i]);
    rc |= gguf_set_str(w, "tokenizer.ggml.model", "llama");
    rc |= gguf_set_arr_str(w, "tokenizer.ggml.tokens", SPM, NULL, NSPM);
    rc |= gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, NSPM);
    for (size_t i = 0; i < sizeof T / sizeof *T; i++) {
        size_t n = T[i].ne0 * (T[i].ne1 ? T[i].ne1 : 1);
        float *x = malloc(n * sizeof *x);
        for (size_t j = 0; j < n; j++) x[j] = T[i].ne1 ? (float)((int)(j * 7 % 13) - 6) / 16 : 1.0f;
        uint64_t ne[2] = {T[i].ne0, T[i].ne1};
        rc |= gguf_add_tensor_f32(w, T[i].name, T[i].ne1 ? GG_BF16 : GG_F32, T[i].ne1 ? 2 : 1, ne, x);
    }
    char path[8400];
    snprintf(path, sizeof path, "%s/llama-model.tmp", tu_dir);
    rc |= gguf_write_file(w, path);
    gguf_writer_free(w);
    image m = {0};
    size_t n = 0;
    char *b = rc == AL_OK ? al_read_file(path, &n) : NULL;
    if (b) put(&m, b, n);
    free(b);
    unlink(path);
    return m;
}

/* A tiny gpt-oss model (hidden 32, 1 layer, 1 head of 32, 2 experts of width 32, the SPM vocabulary of 7):
 * Q8_0 attention, F32 norms and biases, the experts in ggml's MXFP4 (gguf_model_open keeps them 4-bit,
 * repacked: gguf_arch.c's back_mx_split), one block's E8M0 byte 255 when nan_scale (refused, naming it). */
static image oss_model(bool nan_scale) {
    static const struct { const char *name; gg_type t; int nd; uint64_t ne[3]; } T[] = {
        {"token_embd.weight", GG_F32, 2, {32, NSPM}}, {"output_norm.weight", GG_F32, 1, {32}},
        {"blk.0.attn_norm.weight", GG_F32, 1, {32}}, {"blk.0.post_attention_norm.weight", GG_F32, 1, {32}},
        {"blk.0.attn_q.weight", GG_Q8_0, 2, {32, 32}}, {"blk.0.attn_k.weight", GG_Q8_0, 2, {32, 32}},
        {"blk.0.attn_v.weight", GG_Q8_0, 2, {32, 32}}, {"blk.0.attn_output.weight", GG_Q8_0, 2, {32, 32}},
        {"blk.0.attn_q.bias", GG_F32, 1, {32}}, {"blk.0.attn_k.bias", GG_F32, 1, {32}},
        {"blk.0.attn_v.bias", GG_F32, 1, {32}}, {"blk.0.attn_output.bias", GG_F32, 1, {32}},
        {"blk.0.attn_sinks.weight", GG_F32, 1, {1}}, {"blk.0.ffn_gate_inp.weight", GG_F32, 2, {32, 2}},
        {"blk.0.ffn_gate_inp.bias", GG_F32, 1, {2}}, {"blk.0.ffn_gate_exps.weight", GG_MXFP4, 3, {32, 32, 2}},
        {"blk.0.ffn_up_exps.weight", GG_MXFP4, 3, {32, 32, 2}}, {"blk.0.ffn_down_exps.weight", GG_MXFP4, 3, {32, 32, 2}},
        {"blk.0.ffn_gate_exps.bias", GG_F32, 2, {32, 2}}, {"blk.0.ffn_up_exps.bias", GG_F32, 2, {32, 2}},
        {"blk.0.ffn_down_exps.bias", GG_F32, 2, {32, 2}}};
    static const char *const k[] = {"gpt-oss.embedding_length", "gpt-oss.block_count", "gpt-oss.attention.head_count",
                                    "gpt-oss.attention.head_count_kv", "gpt-oss.attention.key_length",
                                    "gpt-oss.expert_feed_forward_length", "gpt-oss.expert_count",
                                    "gpt-oss.expert_used_count", "gpt-oss.context_length"};
    static const uint32_t v[] = {32, 1, 1, 1, 32, 32, 2, 1, 16};
    static const float scores[NSPM] = {0, 0, 0, -1, -2, -3, -4};
    GgufWriter *w = gguf_writer_new();
    int rc = gguf_set_str(w, "general.architecture", "gpt-oss");
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) rc |= gguf_set_u32(w, k[i], v[i]);
    rc |= gguf_set_str(w, "tokenizer.ggml.model", "llama");
    rc |= gguf_set_arr_str(w, "tokenizer.ggml.tokens", SPM, NULL, NSPM);
    rc |= gguf_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, NSPM);
    for (size_t i = 0; i < sizeof T / sizeof *T; i++) {
        size_t n = T[i].ne[0] * (T[i].nd > 1 ? T[i].ne[1] : 1) * (T[i].nd > 2 ? T[i].ne[2] : 1);
        float *x = malloc(n * sizeof *x);
        for (size_t j = 0; j < n; j++) x[j] = T[i].nd > 1 ? (float)((int)(j * 7 % 13) - 6) / 16 : 1.0f;
        rc |= gguf_add_tensor_f32(w, T[i].name, T[i].t, T[i].nd, T[i].ne, x);
    }
    char path[8400];
    snprintf(path, sizeof path, "%s/oss-model.tmp", tu_dir);
    rc |= gguf_write_file(w, path);
    gguf_writer_free(w);
    image m = {0};
    size_t n = 0;
    char *b = rc == AL_OK ? al_read_file(path, &n) : NULL;
    GgufFile *f = NULL;
    const GgufTensor *t = b && nan_scale && gguf_parse_buffer(path, (uint8_t *)b, n, &f) == AL_OK
                              ? gguf_tensor_find(f, "blk.0.ffn_down_exps.weight") : NULL;
    if (t) b[(const char *)gguf_tensor_data(f, t) - b + 3 * GG_MXFP4_BLOCK] = (char)255;   /* expert 0, row 3 */
    gguf_close(f);
    if (b) put(&m, b, n);
    free(b);
    unlink(path);
    return m;
}

/* The image of case `file` (b NULL: no such case). */
static image build(const char *file) {
    image m = {0};
    static const int32_t types_bad[NSPM] = {99, -7, 3, 1, 1, 1, 1}, types_short[3] = {1, 1, 1};
    static const int32_t ctl_empty[NBPE + 1] = {1, 1, 1, 1, 3, 3};
    static const char *const empties[NSPM] = {"", "", "", "", "", "", ""};
    static const char *const bpe_empty[NBPE + 1] = {"a", "b", "ab", "\xc4\xa0" "a", "<|endoftext|>", ""};
    static const char *const nul_tok[NSPM] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "x"};
    static const char *const bad_merge[] = {"ab"}, *const far_merge[] = {"x y"};
#define IS(s) (strcmp(file, s) == 0)
    if (IS("valid-llama-model.gguf")) return llama_model(1);
    if (IS("model-block-count-huge.gguf")) return llama_model(0x30000001);
    if (IS("model-gpt-oss-mxfp4.gguf")) return oss_model(false);
    if (IS("model-gpt-oss-mxfp4-nan-scale.gguf")) return oss_model(true);
    if (IS("valid-llama.gguf")) {
        spm_base(&m, true, true);
        kv_u32(&m, "tokenizer.ggml.bos_token_id", 1);
        kv_u32(&m, "tokenizer.ggml.eos_token_id", 2);
        kv_u32(&m, "tokenizer.ggml.unknown_token_id", 0);
    } else if (IS("valid-gpt2.gguf")) {
        bpe_base(&m, true);
        kv_str(&m, "tokenizer.ggml.pre", "gpt-2");
        kv_u32(&m, "tokenizer.ggml.eos_token_id", 4);
    } else if (IS("model-absent.gguf")) {
        kv_str(&m, "general.architecture", "llama");
        kv_strs(&m, "tokenizer.ggml.tokens", SPM, NSPM);
    } else if (IS("model-unknown.gguf")) {
        kv_str(&m, "tokenizer.ggml.model", "bert");
        kv_strs(&m, "tokenizer.ggml.tokens", SPM, NSPM);
    } else if (IS("model-newline.gguf")) {
        kv_str(&m, "tokenizer.ggml.model", "llama\n\x1b[31mred");
    } else if (IS("model-not-string.gguf")) {
        kv_u32(&m, "tokenizer.ggml.model", 1);
        kv_strs(&m, "tokenizer.ggml.tokens", SPM, NSPM);
    } else if (IS("tokens-absent.gguf")) {
        spm_base(&m, false, true);
    } else if (IS("tokens-not-array.gguf")) {
        spm_base(&m, false, true);
        kv_str(&m, "tokenizer.ggml.tokens", "a b ab");
    } else if (IS("tokens-i32.gguf")) {
        spm_base(&m, false, true);
        kv_i32s(&m, "tokenizer.ggml.tokens", types_bad, NSPM);
    } else if (IS("tokens-empty.gguf")) {
        spm_base(&m, false, false);
        kv_strs(&m, "tokenizer.ggml.tokens", SPM, 0);
        kv_f32s(&m, "tokenizer.ggml.scores", 0, 0.0f);
    } else if (IS("tokens-count-huge.gguf")) {
        spm_base(&m, false, false);
        arr(&m, "tokenizer.ggml.tokens", T_STR, (uint64_t)1 << 62);
        for (size_t i = 0; i < NSPM; i++) str(&m, SPM[i]);
    } else if (IS("tokens-empty-strings.gguf")) {
        spm_base(&m, false, true);
        kv_strs(&m, "tokenizer.ggml.tokens", empties, NSPM);
    } else if (IS("tokens-nul-byte.gguf")) {
        spm_base(&m, false, true);
        arr(&m, "tokenizer.ggml.tokens", T_STR, NSPM);
        for (size_t i = 0; i + 1 < NSPM; i++) str(&m, nul_tok[i]);
        strn(&m, "x\0y", 3);
    } else if (IS("tokens-control-empty.gguf")) {
        static const char *const ab[] = {"a b"};
        kv_str(&m, "tokenizer.ggml.model", "gpt2");
        kv_strs(&m, "tokenizer.ggml.tokens", bpe_empty, NBPE + 1);
        kv_strs(&m, "tokenizer.ggml.merges", ab, 1);
        kv_i32s(&m, "tokenizer.ggml.token_type", ctl_empty, NBPE + 1);
    } else if (IS("tokens-control-nul.gguf")) {
        static const int32_t ctl[NSPM] = {2, 3, 3, 1, 1, 3, 4};
        spm_base(&m, false, true);
        arr(&m, "tokenizer.ggml.tokens", T_STR, NSPM);
        for (size_t i = 0; i + 2 < NSPM; i++) str(&m, SPM[i]);
        strn(&m, "x\0y", 3);
        strn(&m, "\0ab", 3);
        kv_i32s(&m, "tokenizer.ggml.token_type", ctl, NSPM);
    } else if (IS("tokens-twice.gguf")) {
        spm_base(&m, true, true);
        kv_strs(&m, "tokenizer.ggml.tokens", SPM, NSPM);
    } else if (IS("scores-short.gguf")) {
        spm_base(&m, true, false);
        kv_f32s(&m, "tokenizer.ggml.scores", 3, 0.0f);
    } else if (IS("scores-i32.gguf")) {
        spm_base(&m, true, false);
        kv_i32s(&m, "tokenizer.ggml.scores", types_bad, NSPM);
    } else if (IS("scores-nan.gguf")) {
        spm_base(&m, true, false);
        kv_f32s(&m, "tokenizer.ggml.scores", NSPM, NAN);
    } else if (IS("scores-elt-type-bad.gguf")) {
        spm_base(&m, true, false);
        arr(&m, "tokenizer.ggml.scores", 99, NSPM);
    } else if (IS("token-type-short.gguf")) {
        spm_base(&m, true, true);
        kv_i32s(&m, "tokenizer.ggml.token_type", types_short, 3);
    } else if (IS("token-type-out-of-range.gguf")) {
        spm_base(&m, true, true);
        kv_i32s(&m, "tokenizer.ggml.token_type", types_bad, NSPM);
    } else if (IS("ids-out-of-range.gguf")) {
        spm_base(&m, true, true);
        kv_u32(&m, "tokenizer.ggml.bos_token_id", 99);
        kv_u32(&m, "tokenizer.ggml.eos_token_id", 0xffffffffu);
        kv_u32(&m, "tokenizer.ggml.unknown_token_id", 7);
    } else if (IS("ids-not-numbers.gguf")) {
        spm_base(&m, true, true);
        kv_str(&m, "tokenizer.ggml.bos_token_id", "1");
        kv_f32s(&m, "tokenizer.ggml.eos_token_id", 1, 2.0f);
    } else if (IS("merges-absent.gguf")) {
        bpe_base(&m, false);
    } else if (IS("merges-empty.gguf")) {
        bpe_base(&m, false);
        kv_strs(&m, "tokenizer.ggml.merges", bad_merge, 0);
    } else if (IS("merges-not-pair.gguf")) {
        bpe_base(&m, false);
        kv_strs(&m, "tokenizer.ggml.merges", bad_merge, 1);
    } else if (IS("merges-i32.gguf")) {
        bpe_base(&m, false);
        kv_i32s(&m, "tokenizer.ggml.merges", types_short, 3);
    } else if (IS("merges-unknown-pieces.gguf")) {
        bpe_base(&m, false);
        kv_strs(&m, "tokenizer.ggml.merges", far_merge, 1);
    } else if (IS("pre-unknown.gguf")) {
        bpe_base(&m, true);
        kv_str(&m, "tokenizer.ggml.pre", "deepseek-llm");
    } else if (IS("pre-newline.gguf")) {
        bpe_base(&m, true);
        kv_str(&m, "tokenizer.ggml.pre", "gpt-2\nerror: forged");
    } else {
        return m;
    }
#undef IS
    return finish(&m);
}

/* ================================================================ the corpus table */

typedef enum { OPENS, TOK_ERR } verdict;

typedef struct {
    const char *file, *what;
    verdict kind;
    const char *want;          /* TOK_ERR: what the message says (besides the file's name) */
} corpus_case;

static const corpus_case cases[] = {
    {"valid-llama.gguf", "SentencePiece pieces, scores, BOS / EOS / unk", OPENS, NULL},
    {"valid-llama-model.gguf", "a tiny llama model (BF16, 1 layer) with its tokenizer: read back by gguf_model_open", OPENS,
     NULL},
    {"model-block-count-huge.gguf", "that model with block_count 805306369 (gguf_model_open: refused, it looped)", OPENS,
     NULL},
    {"model-gpt-oss-mxfp4.gguf", "a tiny gpt-oss model, experts MXFP4 (ggml type 39): read back 4-bit by "
     "gguf_model_open", OPENS, NULL},
    {"model-gpt-oss-mxfp4-nan-scale.gguf", "that model with an E8M0 scale 255 (gguf_model_open: refused, naming the "
     "block)", OPENS, NULL},
    {"valid-gpt2.gguf", "byte-level BPE pieces, a merge, pre gpt-2", OPENS, NULL},
    {"model-absent.gguf", "no tokenizer.ggml.model", TOK_ERR, "no tokenizer in the file (no tokenizer.ggml.model)"},
    {"model-unknown.gguf", "tokenizer.ggml.model 'bert'", TOK_ERR, "tokenizer.ggml.model 'bert' is not one attnlab reads"},
    {"model-newline.gguf", "a model name with a newline and an escape code", TOK_ERR,
     "tokenizer.ggml.model 'llama\\x0a\\x1b[31mred' is not one attnlab reads"},
    {"model-not-string.gguf", "tokenizer.ggml.model a u32", TOK_ERR, "tokenizer.ggml.model is not a string"},
    {"tokens-absent.gguf", "no tokenizer.ggml.tokens", TOK_ERR, "tokenizer.ggml.tokens is absent"},
    {"tokens-not-array.gguf", "tokenizer.ggml.tokens a string", TOK_ERR,
     "tokenizer.ggml.tokens is not an array of the expected type and length"},
    {"tokens-i32.gguf", "tokenizer.ggml.tokens an array of i32", TOK_ERR,
     "tokenizer.ggml.tokens is not an array of the expected type and length"},
    {"tokens-empty.gguf", "no pieces", TOK_ERR, "tokenizer.ggml.tokens holds 0 pieces"},
    {"tokens-count-huge.gguf", "2^62 pieces claimed, 7 present", TOK_ERR, "tokenizer.ggml.tokens"},
    {"tokens-empty-strings.gguf", "every piece the empty string", OPENS, NULL},
    {"tokens-nul-byte.gguf", "a piece holding a NUL byte", OPENS, NULL},
    {"tokens-control-empty.gguf", "an empty CONTROL piece (gpt2)", OPENS, NULL},
    {"tokens-control-nul.gguf", "CONTROL / USER_DEFINED pieces with a NUL byte (one first)", OPENS, NULL},
    {"tokens-twice.gguf", "tokenizer.ggml.tokens twice", TOK_ERR, "GGUF key tokenizer.ggml.tokens appears twice"},
    {"scores-short.gguf", "3 scores for 7 pieces", TOK_ERR,
     "tokenizer.ggml.scores is not an array of the expected type and length"},
    {"scores-i32.gguf", "scores as i32", TOK_ERR, "tokenizer.ggml.scores is not an array of the expected type and length"},
    {"scores-nan.gguf", "every score NaN", OPENS, NULL},
    {"scores-elt-type-bad.gguf", "scores of element type 99", TOK_ERR, "array of unsupported element type 99"},
    {"token-type-short.gguf", "3 token types for 7 pieces", TOK_ERR,
     "tokenizer.ggml.token_type is not an array of the expected type and length"},
    {"token-type-out-of-range.gguf", "token types 99 and -7", OPENS, NULL},
    {"ids-out-of-range.gguf", "BOS 99, EOS 2^32-1, unk 7 of 7 pieces", OPENS, NULL},
    {"ids-not-numbers.gguf", "BOS a string, EOS an array", OPENS, NULL},
    {"merges-absent.gguf", "gpt2 without merges", TOK_ERR, "tokenizer.ggml.merges is absent"},
    {"merges-empty.gguf", "no merges: attnlab's placeholder vocabulary", TOK_ERR, "placeholder vocabulary"},
    {"merges-not-pair.gguf", "a merge 'ab'", TOK_ERR, "tokenizer.ggml.merges[0] is not \"a b\""},
    {"merges-i32.gguf", "merges as i32", TOK_ERR, "tokenizer.ggml.merges is not an array of the expected type"},
    {"merges-unknown-pieces.gguf", "a merge of pieces the vocabulary lacks", OPENS, NULL},
    {"pre-unknown.gguf", "pre-tokenizer deepseek-llm", TOK_ERR,
     "tokenizer.ggml.pre 'deepseek-llm' is not a pre-tokenizer attnlab implements"},
    {"pre-newline.gguf", "a pre-tokenizer name with a newline", TOK_ERR,
     "tokenizer.ggml.pre 'gpt-2\\x0aerror: forged' is not a pre-tokenizer"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static const char *tpath(const char *a) {
    static char buf[8192];
    snprintf(buf, sizeof buf, "%s/%s", tu_dir, a);
    return buf;
}

static bool write_image(const char *path, const image *im) {
    FILE *fp = fopen(path, "wb");
    bool ok = fp && fwrite(im->b, 1, im->n, fp) == im->n;
    if (fp) fclose(fp);
    return ok;
}

static bool same_file(const char *path, const image *im) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return false;
    uint8_t *b = malloc(im->n + 1);
    size_t n = fread(b, 1, im->n + 1, fp);
    fclose(fp);
    bool same = n == im->n && memcmp(b, im->b, n) == 0;
    free(b);
    return same;
}

/* tok_open of the file at path: the case's verdict, a one-line message naming the file and saying want. */
static void check_file(const corpus_case *c, const char *path, const char *where) {
    Tokenizer *t = NULL;
    al_err_clear();
    int rc = tok_open(path, &t);
    const char *msg = al_errmsg();
    if (c->kind == OPENS) {
        CHECK(rc == AL_OK && t, "%s (%s): %s", c->file, where, msg);
    } else {
        CHECK(rc != AL_OK && !t, "%s (%s): opened", c->file, where);
        CHECK(strstr(msg, c->want) != NULL, "%s (%s): [%s] does not say [%s]", c->file, where, msg, c->want);
        CHECK(strstr(msg, c->file) != NULL && !strchr(msg, '\n'), "%s (%s): [%s] is not one line naming the file",
              c->file, where, msg);
    }
    tok_free(t);
}

static void test_corpus(void) {
    const char *src = getenv("ATTNLAB_SRC");
    char cdir[4096] = "";
    if (src) snprintf(cdir, sizeof cdir, "%s/tests/corpus/gguf", src);
    mkdir(tpath("corpus"), 0755);
    for (size_t i = 0; i < N_CASES; i++) {
        const corpus_case *c = &cases[i];
        image im = build(c->file);
        CHECK(im.b != NULL, "%s: no builder", c->file);
        if (!im.b) continue;
        char p[8400];
        snprintf(p, sizeof p, "%s/%s", tpath("corpus"), c->file);
        CHECK(write_image(p, &im), "cannot write %s", p);
        check_file(c, p, "tmp");
        if (strcmp(c->file, "valid-llama-model.gguf") == 0) {     /* the tensors read back, BF16 kept */
            Store *s = NULL;
            char *json = NULL;
            const st_entry *e = NULL;
            const st_file *sf = NULL;
            CHECK_OK(gguf_model_open(p, &s, &json));
            CHECK(s && store_count(s) == 11, "%zu tensors read back", s ? store_count(s) : 0);
            CHECK(s && store_entry(s, "model.layers.0.self_attn.k_proj.weight", &e, &sf) == AL_OK && e->dtype == DT_BF16,
                  "k_proj not read back in BF16");
            store_free(s);
            free(json);
        }
        if (strncmp(c->file, "model-gpt-oss-mxfp4", 19) == 0) {  /* the experts read back 4-bit; a NaN scale refused */
            Store *s = NULL;
            char *json = NULL;
            size_t E = 0;
            dt_fp4 q = {0};
            int orc = gguf_model_open(p, &s, &json);
            if (strstr(c->file, "nan"))
                CHECK(orc != AL_OK && strstr(al_errmsg(), "blk.0.ffn_down_exps.weight: MXFP4 block [expert 0, row 3, "
                                                          "block 0] has the E8M0 scale 255"), "%s: [%s]", c->file, al_errmsg());
            else
                CHECK(orc == AL_OK && store_fp4_experts(s, "model.layers.0.mlp.experts.gate_up_proj", &E, &q) == AL_OK &&
                      q.enc == DT_FP4_MXFP4 && E == 2 && q.rows == 128, "%s: experts not MXFP4: %s", c->file, al_errmsg());
            store_free(s);
            free(json);
        }
        if (strcmp(c->file, "model-block-count-huge.gguf") == 0) {
            Store *s = NULL;
            char *json = NULL;
            CHECK_ERR(gguf_model_open(p, &s, &json), "llama.block_count 805306369: the file holds 11 tensors");
        }
        LLVMFuzzerTestOneInput(im.b, im.n);        /* aborts if a promise of the readers breaks */
        if (cdir[0]) {
            snprintf(p, sizeof p, "%s/%s", cdir, c->file);
            CHECK(same_file(p, &im), "%s differs from what the generator makes: run test_gguf_corpus --write-corpus %s",
                  p, cdir);
        }
        free(im.b);
    }
    DIR *d = cdir[0] ? opendir(cdir) : NULL;       /* every committed file is in the table */
    CHECK(!cdir[0] || d, "no folder %s", cdir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "README.md") == 0) continue;
        bool known = false;
        for (size_t i = 0; i < N_CASES && !known; i++) known = strcmp(cases[i].file, de->d_name) == 0;
        CHECK(known, "tests/corpus/gguf/%s is not in test_gguf_corpus.c's table", de->d_name);
    }
    if (d) closedir(d);
}

/* A deterministic small fuzz run in the normal suite: every case cut at every length, and each byte of
 * the two valid ones replaced by a few values, through the fuzz target's checks (ASan in the sanitizer
 * build). */
static void test_mutations(void) {
    static const uint8_t subst[] = {0x00, 0xff, 0x0a, 0x80};
    size_t runs = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        image im = build(cases[i].file);
        for (size_t len = 0; len < im.n; len++, runs++) {
            uint8_t *exact = malloc(len ? len : 1);     /* an allocation-sized copy: ASan sees overreads */
            memcpy(exact, im.b, len);
            LLVMFuzzerTestOneInput(exact, len);
            free(exact);
        }
        for (size_t k = 0; strncmp(cases[i].file, "valid-", 6) == 0 && k < im.n; k++)
            for (size_t v = 0; v < sizeof subst; v++, runs++) {
                uint8_t keep = im.b[k];
                im.b[k] = subst[v];
                LLVMFuzzerTestOneInput(im.b, im.n);
                im.b[k] = keep;
            }
        free(im.b);
    }
    CHECK(runs > 5000, "mutation runs: %zu", runs);
}

/* Writes every case into out_dir and prints the README table (for tests/corpus/gguf/). */
static int write_corpus(const char *out_dir) {
    mkdir(out_dir, 0755);
    printf("| file | what it is | tok_open | message contains |\n|---|---|---|---|\n");
    for (size_t i = 0; i < N_CASES; i++) {
        image im = build(cases[i].file);
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", out_dir, cases[i].file);
        CHECK(write_image(p, &im), "cannot write %s", p);
        free(im.b);
        printf("| `%s` | %s | %s | %s |\n", cases[i].file, cases[i].what, cases[i].kind == OPENS ? "opens" : "error",
               cases[i].want ? cases[i].want : "");
    }
    return check_fail_n ? 1 : 0;
}

int main(int argc, char **argv) {
    snprintf(tu_dir, sizeof tu_dir, "%s", test_tmpdir());
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]);
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    test_corpus();
    test_mutations();
    printf("%.1f s CPU\n", (double)clock() / CLOCKS_PER_SEC - t0);
    char dir[256];                                  /* the fuzz target's scratch file and folders */
    snprintf(dir, sizeof dir, "%s", fuzz_dir("gguf"));
    unlink(fuzz_file(dir, "model.gguf", NULL, 0));
    rmdir(dir);
    *strrchr(dir, '/') = 0;
    rmdir(dir);
    return check_done();
}
