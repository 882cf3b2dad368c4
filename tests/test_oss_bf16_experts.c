/* test_oss_bf16_experts.c -- gpt-oss's fused experts (experts.gate_up_proj [E, D, 2F], down_proj [E, F, D], used as
 * x @ W) stored in BF16 are multiplied where they lie in the mapping, each expert's block widened when it runs
 * (forward.c's lin_apply_io), never copied to float32 whole (fwd_new used to widen every layer's experts into owned
 * float32 copies: twice the stored bytes held, a layer's worth more while loading):
 *   1. the same logits, bit for bit, as a twin whose experts are stored in F32 (the same values; every other tensor
 *      the same BF16 bytes), in compute f32 and bf16 (the experts' x @ W is a float32 sgemm in both modes);
 *   2. fwd_new + one 24-token pass on a model with 100 MB of BF16 experts (hidden 512, 32 experts of 512, 2
 *      layers) peaks within the stored bytes + 40 MB of where it started (VmHWM reset after model_open): the float
 *      copies held 200 MB more (normal builds only: ASan keeps freed memory resident).
 * `test_oss_bf16_experts write DIR HIDDEN FFN EXPERTS LAYERS` writes such a model and exits
 * (bench/bench_oss_bf16.sh measures `ppl` on a larger one). */
#define _GNU_SOURCE
#include "check.h"
#include "test_mem_util.h"
#include "forward.h"
#include "model.h"
#include "safetensors.h"

#include <stdint.h>
#include <unistd.h>

#define T 24

typedef struct { size_t D, F, E, L; dt_type experts; } OssShape;

/* n uniform values in [-s, s) rounded to BF16 (seeded xorshift), as uint16. */
static uint16_t *bf16_values(size_t n, float s, uint64_t *seed) {
    uint16_t *v = malloc(n * sizeof *v);
    for (size_t i = 0; v && i < n; i++) {
        *seed ^= *seed << 13; *seed ^= *seed >> 7; *seed ^= *seed << 17;
        v[i] = dt_f32_to_bf16(s * (float)((double)(*seed >> 11) / 9007199254740992.0 * 2 - 1));
    }
    return v;
}

/* Adds tensor name (shape sh, nd dims) of random BF16 values of scale s, stored as dt (BF16, or F32 widened). */
static int add_random(st_writer *w, const char *name, dt_type dt, int nd, const size_t *sh, float s, uint64_t *seed) {
    size_t n = 1;
    for (int i = 0; i < nd; i++) n *= sh[i];
    uint16_t *v = bf16_values(n, s, seed);
    float *f = v && dt == DT_F32 ? malloc(n * sizeof *f) : NULL;
    for (size_t i = 0; f && i < n; i++) f[i] = dt_bf16_to_f32(v[i]);
    int rc = v && (dt != DT_F32 || f) ? st_writer_add(w, name, dt, nd, sh, f ? (void *)f : (void *)v,
                                                      n * (f ? sizeof *f : sizeof *v))
                                      : al_err("out of memory");
    free(v);
    free(f);
    return rc;
}

/* A gpt_oss checkpoint in dir: 4 heads of 32 on 2 KV heads, vocab 256, top-2 of s->E experts, all BF16 but the
 * experts' weights (s->experts); the same seed gives the same values whatever that dtype. */
static int write_oss(const char *dir, const OssShape *s) {
    static const char *const attn[][2] = {{"q_proj", "128"}, {"k_proj", "64"}, {"v_proj", "64"}};
    const size_t D = s->D, F = s->F, E = s->E, V = 256;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    float sd = 1.f / sqrtf((float)D);
    st_writer *w = st_writer_new();
    char n[160], *cfg = NULL, *path = al_asprintf("%s/model.safetensors", dir), *cp = al_asprintf("%s/config.json", dir);
    int rc = w && path && cp && (mkdir(dir, 0755) == 0 || access(dir, F_OK) == 0) ? AL_OK : al_err("cannot make %s", dir);
    if (rc == AL_OK) rc = add_random(w, "model.embed_tokens.weight", DT_BF16, 2, (size_t[]){V, D}, 1.f, &seed);
    if (rc == AL_OK) rc = add_random(w, "lm_head.weight", DT_BF16, 2, (size_t[]){V, D}, sd, &seed);
    if (rc == AL_OK) rc = add_random(w, "model.norm.weight", DT_BF16, 1, (size_t[]){D}, 1.f, &seed);
    for (size_t L = 0; rc == AL_OK && L < s->L; L++) {
#define P(what) (snprintf(n, sizeof n, "model.layers.%zu.%s", L, what), n)
        rc = add_random(w, P("input_layernorm.weight"), DT_BF16, 1, (size_t[]){D}, 1.f, &seed);
        if (rc == AL_OK) rc = add_random(w, P("post_attention_layernorm.weight"), DT_BF16, 1, (size_t[]){D}, 1.f, &seed);
        for (int i = 0; rc == AL_OK && i < 3; i++) {
            char t[64];
            size_t rows = (size_t)atoi(attn[i][1]);
            snprintf(t, sizeof t, "self_attn.%s.weight", attn[i][0]);
            rc = add_random(w, P(t), DT_BF16, 2, (size_t[]){rows, D}, sd, &seed);
            snprintf(t, sizeof t, "self_attn.%s.bias", attn[i][0]);
            if (rc == AL_OK) rc = add_random(w, P(t), DT_BF16, 1, (size_t[]){rows}, 0.1f, &seed);
        }
        if (rc == AL_OK) rc = add_random(w, P("self_attn.o_proj.weight"), DT_BF16, 2, (size_t[]){D, 128}, 0.09f, &seed);
        if (rc == AL_OK) rc = add_random(w, P("self_attn.o_proj.bias"), DT_BF16, 1, (size_t[]){D}, 0.1f, &seed);
        if (rc == AL_OK) rc = add_random(w, P("self_attn.sinks"), DT_BF16, 1, (size_t[]){4}, 1.f, &seed);
        if (rc == AL_OK) rc = add_random(w, P("mlp.router.weight"), DT_BF16, 2, (size_t[]){E, D}, sd, &seed);
        if (rc == AL_OK) rc = add_random(w, P("mlp.router.bias"), DT_BF16, 1, (size_t[]){E}, 0.1f, &seed);
        if (rc == AL_OK) rc = add_random(w, P("mlp.experts.gate_up_proj"), s->experts, 3, (size_t[]){E, D, 2 * F}, sd, &seed);
        if (rc == AL_OK) rc = add_random(w, P("mlp.experts.gate_up_proj_bias"), DT_BF16, 2, (size_t[]){E, 2 * F}, 0.1f, &seed);
        if (rc == AL_OK)
            rc = add_random(w, P("mlp.experts.down_proj"), s->experts, 3, (size_t[]){E, F, D}, 1.f / sqrtf((float)F), &seed);
        if (rc == AL_OK) rc = add_random(w, P("mlp.experts.down_proj_bias"), DT_BF16, 2, (size_t[]){E, D}, 0.1f, &seed);
#undef P
    }
    if (rc == AL_OK) rc = st_writer_write(w, path);
    if (rc == AL_OK) {
        char types[4096] = "";
        for (size_t L = 0; L < s->L && L < 64; L++) {
            strcat(types, L % 2 ? "\"full_attention\"" : "\"sliding_attention\"");
            if (L + 1 < s->L) strcat(types, ", ");
        }
        cfg = al_asprintf("{\"architectures\": [\"GptOssForCausalLM\"], \"model_type\": \"gpt_oss\", \"hidden_size\": %zu, "
                          "\"intermediate_size\": %zu, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                          "\"head_dim\": 32, \"num_hidden_layers\": %zu, \"vocab_size\": 256, \"max_position_embeddings\": 512, "
                          "\"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"attention_bias\": true, "
                          "\"experts_per_token\": 2, \"num_experts_per_tok\": 2, \"num_local_experts\": %zu, "
                          "\"hidden_act\": \"silu\", \"layer_types\": [%s], \"rms_norm_eps\": 1e-05, \"rope_theta\": 150000, "
                          "\"sliding_window\": 8, \"swiglu_limit\": 7.0}\n", D, F, s->L, E, types);
        rc = cfg ? al_write_file_atomic(cp, cfg, strlen(cfg)) : AL_ERR;
    }
    st_writer_free(w);
    free(cfg); free(path); free(cp);
    return rc;
}

/* The logits (T, V) of the model in dir in compute mode c (caller frees), or NULL. */
static float *logits_of(const char *dir, mm_compute c, size_t *V) {
    Model *m = NULL;
    Forward *f = NULL;
    float *z = NULL;
    FwdOptions o = {.compute = c};
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, &o, &f));
    int ids[T];
    for (int i = 0; f && i < T; i++) ids[i] = (i * 37 + 11) % 256;
    if (f && (z = malloc(T * 256 * sizeof *z))) CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, z));
    if (f) *V = fwd_vocab(f);
    fwd_free(f);
    model_free(m);
    return z;
}

/* 1. BF16 experts against the F32 twin: the same bits in both compute modes. */
static void same_logits(const char *tmp) {
    char *a = al_asprintf("%s/bf16", tmp), *b = al_asprintf("%s/f32", tmp);
    OssShape s = {.D = 128, .F = 64, .E = 8, .L = 2, .experts = DT_BF16};
    CHECK_OK(write_oss(a, &s));
    s.experts = DT_F32;
    CHECK_OK(write_oss(b, &s));
    for (int c = 0; c < 2; c++) {
        mm_compute mode = c ? MM_BF16 : MM_F32;
        size_t V = 0, W = 0;
        float *za = logits_of(a, mode, &V), *zb = logits_of(b, mode, &W);
        size_t diff = 0;
        for (size_t i = 0; za && zb && i < T * V; i++) diff += memcmp(&za[i], &zb[i], sizeof *za) != 0;
        CHECK(za && zb && V == 256 && W == 256 && diff == 0, "compute %s: %zu of %zu logits differ from the F32 twin's",
              mm_compute_name(mode), diff, (size_t)T * V);
        printf("compute %s: logits of the BF16 experts %s the F32 twin's\n", mm_compute_name(mode), diff ? "differ from" : "equal");
        free(za);
        free(zb);
    }
    free(a);
    free(b);
}

/* Resets VmHWM to the current RSS; false where the kernel does not allow it. */
static bool reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* 2. The peak of fwd_new + one pass follows the stored bytes, not a float copy of every expert. */
static void peak(const char *tmp) {
    char *dir = al_asprintf("%s/big", tmp), *sp = al_asprintf("%s/big/model.safetensors", tmp);
    OssShape s = {.D = 512, .F = 512, .E = 32, .L = 2, .experts = DT_BF16};
    CHECK_OK(write_oss(dir, &s));
    struct stat st;
    CHECK(stat(sp, &st) == 0, "stat %s", sp);
    double experts = 3.0 * s.D * s.F * s.E * s.L * 2 / 1048576;     /* MB of BF16 experts */
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(dir, &m));
    bool reset = reset_peak();
    long rss0 = status_kb("VmRSS");
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    int ids[T];
    for (int i = 0; i < T; i++) ids[i] = (i * 37 + 11) % 256;
    float *z = malloc(256 * sizeof *z);
    if (f) CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_LAST, z));
    long grown = status_kb("VmHWM") - rss0;
    printf("fwd_new + %d tokens: peak +%ld kB (file %lld kB, BF16 experts %.0f MB; a float32 copy of them %.0f MB)\n", T,
           grown, (long long)st.st_size / 1024, experts, 2 * experts);
    if (reset && MEASURED)
        CHECK(grown < st.st_size / 1024 + 40 * 1024, "peak +%ld kB: the stored %lld kB + 40 MB at most (BF16 experts "
              "widened whole: + %.0f MB)", grown, (long long)st.st_size / 1024, 2 * experts);
    else printf("  not measured here (%s)\n", reset ? "a sanitizer build" : "VmHWM cannot be reset");
    free(z);
    fwd_free(f);
    model_free(m);
    al_remove_tree(dir);                                /* 100 MB: not left in the build folder */
    free(dir);
    free(sp);
}

int main(int argc, char **argv) {
    if (argc == 7 && !strcmp(argv[1], "write")) {
        OssShape s = {.D = strtoul(argv[3], NULL, 10), .F = strtoul(argv[4], NULL, 10), .E = strtoul(argv[5], NULL, 10),
                      .L = strtoul(argv[6], NULL, 10), .experts = DT_BF16};
        if (write_oss(argv[2], &s) == AL_OK) return 0;
        fprintf(stderr, "%s\n", al_errmsg());
        return 1;
    }
    const char *tmp = test_tmpdir();
    same_logits(tmp);
    peak(tmp);
    return check_done();
}
