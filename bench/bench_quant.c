/* bench_quant.c -- FP4 weights against their BF16 twin (issue 28): speed and memory (not a test).
 *
 *   bench_quant [DIR] [--layers N] [--r1-layers N] [--reps N] [--wall]
 *               [--only products|llama|r1|rss] [--tokens T]
 *
 * Writes into DIR (default $ATTNLAB_CACHE/bench-quant, else /tmp/attnlab/bench-quant; kept for the
 * next run) four twins of two models whose weights are exactly representable in the three 4-bit
 * encodings: per row and block of 32 values an E2M1 code of magnitude <= 3 times 2^e, so the BF16
 * copy holds them exactly, MXFP4 stores e as its E8M0 scale, NVFP4 as an E4M3 block scale
 * 2^(e + 10) (both halves of the 32) times the per-tensor scale_2 2^-10, and compressed-tensors'
 * pack-quantized INT4 the integer 2 code (|.| <= 6, stored + 8) times its BF16 group scale 2^(e - 1):
 *   - llama1b-{bf16,mxfp4,nvfp4,int4}: TinyLlama's shapes (hidden 2048, 32 heads, 4 KV heads, MLP 5632,
 *     vocab 32000; N layers, default 22 = 1.1B); the projections quantized, embeddings, head and
 *     norms BF16 in all three (as the FP4 releases keep them);
 *   - r1-{bf16,mxfp4,nvfp4,int4}: DeepSeek-R1's attention shapes (synth_ds_r1_shape's checkpoint, its
 *     FP8 values re-quantized; N layers, default 1).
 * Then, in one run (each measurement interleaved over the twins, best of --reps; the process's CPU
 * time, all threads, unless --wall: the machine is shared, and other jobs stretch wall time):
 *   - each of layer 0's products (q, k, o, gate, down) alone, mm_xwt at T = 1, 4, 16, 63 and 128, in
 *     f32 and bf16 modes (the BF16 twin's in the same mode);
 *   - prefill of T = 128 tokens in f32 and bf16 modes (the last token's logits);
 *   - decoding: 16 one-token steps after a 16-token prompt, in both modes (the steps' CPU time);
 *   - the R1 sweep: farr_state_layer VO and QK of every layer, cold (a fresh FarrState);
 *   - `ppl` (2 windows of 64 tokens) in a fresh process per twin: its perplexity and peak RSS.
 * Every figure is printed as FP4 / BF16. The twins hold the same values, so their outputs must
 * agree: the logits and perplexities to float rounding (1e-5 / 1e-6 relative: only the order of
 * the sums differs), the fused ranks of every head exactly; the bench says so and exits 1 if not.
 * (bf16 mode rounds a BF16 weight's activations to BF16 but not an FP4 weight's -- cmd_lm says so
 * at `ppl` --, so bf16 mode's logits are printed, not compared.) */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "farr.h"
#include "forward.h"
#include "matmul.h"
#include "synth.h"

#define NTWIN 4
static const char *twin_name[NTWIN] = {"bf16", "mxfp4", "nvfp4", "int4"};
#define G_EXP (-10)          /* NVFP4's scale_2 = 2^G_EXP; block scales 2^(e - G_EXP) in E4M3's 2^-9 .. 2^8 */

static int bad;              /* outputs that disagree */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The process's CPU time (all threads): what the figures compare, the machine being shared (other
 * jobs stretch the wall time, not the CPU time spent on this work; --wall compares wall time). */
static bool wall;
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(wall ? CLOCK_MONOTONIC : CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static unsigned long long rng = 88172645463325252ull;
static float rnd(float scale) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return ((float)(rng >> 40) / 16777216.f - 0.5f) * 2.f * scale;
}

/* ================================================================ FP4-exact values */

static const float E2M1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};

/* The E2M1 code of magnitude <= 3 (codes 0-5: INT4 holds twice them) nearest x (ties to the smaller
 * magnitude). */
static uint8_t e2m1_code(float x) {
    float a = fabsf(x);
    uint8_t c = 0;
    for (uint8_t k = 1; k < 6; k++)
        if (fabsf(E2M1[k] - a) < fabsf(E2M1[c] - a)) c = k;
    return (uint8_t)(c | (x < 0 && c ? 8 : 0));
}

typedef struct {
    uint8_t *codes;          /* (R, C / 2), low nibble the even column */
    uint8_t *e8m0;           /* (R, C / 32) */
    uint8_t *e4m3;           /* (R, C / 16) */
    uint8_t *i4;             /* (R, C / 2): INT4's nibbles 2 code + 8, low the even column (I32 words LE) */
    uint16_t *bf;            /* (R, C / 32): INT4's BF16 group scales 2^(e - 1) */
} Fp4Q;

static void fp4q_free(Fp4Q *q) { free(q->codes); free(q->e8m0); free(q->e4m3); free(q->i4); free(q->bf); }

/* m (R, C; C a multiple of 32) rounded to code x 2^e per block of 32 (e from the block's largest
 * magnitude, within what both encodings hold); m's values become the rounded ones. */
static int quantize(Mat *m, Fp4Q *q) {
    size_t R = m->rows, C = m->cols;
    q->codes = calloc(R * C / 2, 1);
    q->e8m0 = malloc(R * C / 32);
    q->e4m3 = malloc(R * C / 16);
    q->i4 = calloc(R * C / 2, 1);
    q->bf = malloc(R * C / 32 * sizeof *q->bf);
    if (!q->codes || !q->e8m0 || !q->e4m3 || !q->i4 || !q->bf) return al_err("out of memory quantizing");
    for (size_t i = 0; i < R; i++)
        for (size_t b = 0; b < C / 32; b++) {
            float *x = m->data + i * C + b * 32, amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
            int e = amax > 0 ? (int)ceilf(log2f(amax / 3)) : G_EXP - 9;
            e = e < G_EXP - 9 ? G_EXP - 9 : e > G_EXP + 8 ? G_EXP + 8 : e;
            q->e8m0[i * (C / 32) + b] = (uint8_t)(e + 127);
            q->e4m3[i * (C / 16) + 2 * b] = q->e4m3[i * (C / 16) + 2 * b + 1] = dt_f32_to_e4m3(ldexpf(1, e - G_EXP));
            q->bf[i * (C / 32) + b] = dt_f32_to_bf16(ldexpf(1, e - 1));
            for (size_t j = 0; j < 32; j++) {
                uint8_t c = e2m1_code(ldexpf(x[j], -e));
                size_t col = b * 32 + j;
                int v = (int)(2 * E2M1[c & 7]) * (c & 8 ? -1 : 1);
                q->codes[(i * C + col) / 2] |= (uint8_t)(col & 1 ? c << 4 : c);
                q->i4[(i * C + col) / 2] |= (uint8_t)(col & 1 ? (v + 8) << 4 : v + 8);
                x[j] = ldexpf(c & 8 ? -E2M1[c & 7] : E2M1[c & 7], e);
            }
        }
    return AL_OK;
}

/* Weight `name` (values m, FP4-exact after quantize) into the three twins' writers. */
static int add_weight(st_writer *w[NTWIN], const char *name, Mat *m) {
    Fp4Q q = {0};
    size_t R = m->rows, C = m->cols, one = 1;
    float g = ldexpf(1, G_EXP);
    char n[300];
    int rc = quantize(m, &q);
    if (rc == AL_OK) rc = st_writer_add_mat(w[0], name, DT_BF16, m);
    size_t bs[3] = {R, C / 32, 16}, ss[2] = {R, C / 32}, ws[2] = {R, C / 2}, es[2] = {R, C / 16}, ps[2] = {R, C / 8},
           two = 2;
    int64_t shape[2] = {(int64_t)R, (int64_t)C};
    snprintf(n, sizeof n, "%s_blocks", name);
    if (rc == AL_OK) rc = st_writer_add(w[1], n, DT_U8, 3, bs, q.codes, R * C / 2);
    snprintf(n, sizeof n, "%s_scales", name);
    if (rc == AL_OK) rc = st_writer_add(w[1], n, DT_U8, 2, ss, q.e8m0, R * C / 32);
    if (rc == AL_OK) rc = st_writer_add(w[2], name, DT_U8, 2, ws, q.codes, R * C / 2);
    snprintf(n, sizeof n, "%s_scale", name);
    if (rc == AL_OK) rc = st_writer_add(w[2], n, DT_F8_E4M3, 2, es, q.e4m3, R * C / 16);
    snprintf(n, sizeof n, "%s_scale_2", name);
    if (rc == AL_OK) rc = st_writer_add(w[2], n, DT_F32, 1, &one, &g, 4);
    snprintf(n, sizeof n, "%s_packed", name);
    if (rc == AL_OK) rc = st_writer_add(w[3], n, DT_I32, 2, ps, q.i4, R * C / 2);
    snprintf(n, sizeof n, "%s_scale", name);
    if (rc == AL_OK) rc = st_writer_add(w[3], n, DT_BF16, 2, ss, q.bf, R * C / 32 * 2);
    snprintf(n, sizeof n, "%s_shape", name);
    if (rc == AL_OK) rc = st_writer_add(w[3], n, DT_I64, 1, &two, shape, sizeof shape);
    fp4q_free(&q);
    return rc;
}

/* A tensor kept in BF16 in every twin. */
static int add_plain(st_writer *w[NTWIN], const char *name, const Mat *m) {
    int rc = AL_OK;
    for (int t = 0; rc == AL_OK && t < NTWIN; t++) rc = st_writer_add_mat(w[t], name, DT_BF16, m);
    return rc;
}

/* ================================================================ writing the twins */

typedef struct {
    char *dir[NTWIN];
    FILE *idx[NTWIN];
    bool first;
} Twins;

static int twins_begin(Twins *T, const char *base, const char *model) {
    memset(T, 0, sizeof *T);
    T->first = true;
    for (int t = 0; t < NTWIN; t++) {
        T->dir[t] = al_asprintf("%s/%s-%s", base, model, twin_name[t]);
        mkdir(T->dir[t], 0755);
        char *ip = al_asprintf("%s/model.safetensors.index.json", T->dir[t]);
        T->idx[t] = fopen(ip, "w");
        free(ip);
        if (!T->idx[t]) return al_err("%s: cannot write the index", T->dir[t]);
        fprintf(T->idx[t], "{\"metadata\": {}, \"weight_map\": {");
    }
    return AL_OK;
}

/* Writes shard `file` of each twin from its writer, and the writers' names into the indexes. */
static int twins_shard(Twins *T, st_writer *w[NTWIN], const char *file, char **names, size_t n) {
    int rc = AL_OK;
    for (int t = 0; rc == AL_OK && t < NTWIN; t++) {
        char *p = al_asprintf("%s/%s", T->dir[t], file);
        rc = st_writer_write(w[t], p);
        free(p);
        bool first = T->first;
        for (size_t i = 0; i < n; i++, first = false) {
            const char *kinds[NTWIN][4] = {{""}, {"_blocks", "_scales"}, {"", "_scale", "_scale_2"},
                                           {"_packed", "_scale", "_shape"}};
            bool q = names[i][0] == '*';
            const char *nm = names[i] + q;
            for (int k = 0; k < 4 && kinds[t][k]; k++) {
                if (!q && k > 0) break;
                fprintf(T->idx[t], "%s\"%s%s\": \"%s\"", first && k == 0 ? "" : ", ", nm, q ? kinds[t][k] : "", file);
            }
        }
    }
    T->first = false;
    return rc;
}

/* cfg with the INT4 twin's quantization_config (compressed-tensors pack-quantized, groups of 32),
 * or NULL. */
static char *int4_config(const char *cfg) {
    cJSON *j = cJSON_Parse(cfg);
    if (!j) return NULL;
    cJSON *q = cJSON_Parse("{\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\", "
                           "\"ignore\": [\"lm_head\"], \"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], "
                           "\"weights\": {\"num_bits\": 4, \"type\": \"int\", \"symmetric\": true, "
                           "\"strategy\": \"group\", \"group_size\": 32}}}}");
    cJSON_AddItemToObject(j, "quantization_config", q);
    char *out = cJSON_Print(j);
    cJSON_Delete(j);
    return out;
}

/* Ends the indexes and writes each twin's config.json (cfg; the INT4 twin's with its quantization_config). */
static int twins_end(Twins *T, const char *cfg) {
    int rc = AL_OK;
    for (int t = 0; t < NTWIN; t++) {
        fprintf(T->idx[t], "}}\n");
        fclose(T->idx[t]);
        char *cp = al_asprintf("%s/config.json", T->dir[t]), *c4 = t == 3 ? int4_config(cfg) : NULL;
        if (rc == AL_OK && t == 3 && !c4) rc = al_err("cannot build the INT4 twin's config");
        if (rc == AL_OK) rc = al_write_file_atomic(cp, c4 ? c4 : cfg, strlen(c4 ? c4 : cfg));
        free(cp);
        free(c4);
    }
    return rc;
}

static void twins_free(Twins *T) { for (int t = 0; t < NTWIN; t++) free(T->dir[t]); }

static bool have_dir(const char *base, const char *model) {
    struct stat sb;
    char *p = al_asprintf("%s/%s-int4/config.json", base, model);
    bool h = stat(p, &sb) == 0;
    free(p);
    return h;
}

/* ---------------------------------------------------------------- the 1.1B Llama */

enum { D1 = 2048, H1 = 32, G1 = 4, HD1 = 64, FF1 = 5632, V1 = 32000 };

static Mat *rand_mat(size_t r, size_t c, float scale, float off) {
    Mat *m = mat_new(r, c);
    if (m)
        for (size_t i = 0; i < r * c; i++) m->data[i] = off + rnd(scale);
    return m;
}

static int write_llama(const char *base, int layers) {
    Twins T;
    if (twins_begin(&T, base, "llama1b") != AL_OK) return AL_ERR;
    int rc = AL_OK;
    for (int L = -1; rc == AL_OK && L < layers; L++) {
        st_writer *w[NTWIN] = {st_writer_new(), st_writer_new(), st_writer_new(), st_writer_new()};
        struct { const char *s; size_t r, c; float scale, off; bool q; } t[] = {
            {"input_layernorm.weight", 1, D1, 0.05f, 1, false}, {"post_attention_layernorm.weight", 1, D1, 0.05f, 1, false},
            {"self_attn.q_proj.weight", H1 * HD1, D1, 0.03f, 0, true}, {"self_attn.k_proj.weight", G1 * HD1, D1, 0.03f, 0, true},
            {"self_attn.v_proj.weight", G1 * HD1, D1, 0.03f, 0, true}, {"self_attn.o_proj.weight", D1, H1 * HD1, 0.03f, 0, true},
            {"mlp.gate_proj.weight", FF1, D1, 0.03f, 0, true}, {"mlp.up_proj.weight", FF1, D1, 0.03f, 0, true},
            {"mlp.down_proj.weight", D1, FF1, 0.02f, 0, true}},
          g[] = {{"model.embed_tokens.weight", V1, D1, 0.05f, 0, false}, {"lm_head.weight", V1, D1, 0.03f, 0, false},
                 {"model.norm.weight", 1, D1, 0.05f, 1, false}};
        size_t n = L < 0 ? 3 : 9;
        char *names[9] = {0}, file[64];
        for (size_t i = 0; rc == AL_OK && i < n; i++) {
            bool q = L < 0 ? g[i].q : t[i].q;
            names[i] = L < 0 ? al_asprintf("%s", g[i].s) : al_asprintf("%smodel.layers.%d.%s", q ? "*" : "", L, t[i].s);
            Mat *m = L < 0 ? rand_mat(g[i].r, g[i].c, g[i].scale, g[i].off) : rand_mat(t[i].r, t[i].c, t[i].scale, t[i].off);
            if (!m) rc = AL_ERR;
            else if (q) rc = add_weight(w, names[i] + 1, m);
            else rc = add_plain(w, names[i], m);
            mat_free(m);
        }
        snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", L + 2, layers + 1);
        if (rc == AL_OK) rc = twins_shard(&T, w, file, names, n);
        for (size_t i = 0; i < n; i++) free(names[i]);
        for (int k = 0; k < NTWIN; k++) st_writer_free(w[k]);
        fprintf(stderr, "\rwriting llama1b twins: shard %d of %d", L + 2, layers + 1);
    }
    fprintf(stderr, "\n");
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": %d, "
             "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
             "\"intermediate_size\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 2048, \"rms_norm_eps\": 1e-5, "
             "\"rope_theta\": 10000.0, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}\n",
             D1, layers, H1, G1, HD1, FF1, V1);
    if (rc == AL_OK) rc = twins_end(&T, cfg);
    twins_free(&T);
    return rc;
}

/* ---------------------------------------------------------------- R1's attention */

/* synth_ds_r1_shape's checkpoint, re-quantized: every 2-D weight FP4-exact, the rest BF16. */
static int write_r1(const char *base, int layers) {
    char *src = al_asprintf("%s/r1-fp8-src", base), *cmd = al_asprintf("rm -rf '%s'", src);
    int rc = system(cmd) == 0 ? synth_ds_r1_shape(src, layers, 1) : al_err("cannot clear %s", src);
    Store *s = NULL;
    Twins T;
    if (rc == AL_OK) rc = store_open(src, &s);
    if (rc == AL_OK) rc = twins_begin(&T, base, "r1");
    for (int L = 0; rc == AL_OK && L < layers; L++) {
        st_writer *w[NTWIN] = {st_writer_new(), st_writer_new(), st_writer_new(), st_writer_new()};
        char pre[64], file[64], *names[16] = {0};
        size_t n = 0;
        snprintf(pre, sizeof pre, "model.layers.%d.", L);
        for (size_t i = 0; rc == AL_OK && i < store_count(s); i++) {
            const char *nm = store_name_at(s, i);
            if (strncmp(nm, pre, strlen(pre)) || strstr(nm, "_scale_inv") || n == 16) continue;
            Mat *m = NULL;
            rc = store_read(s, nm, &m);
            bool q = rc == AL_OK && m->rows > 1 && m->cols % 32 == 0;
            names[n++] = al_asprintf("%s%s", q ? "*" : "", nm);
            if (rc == AL_OK) rc = q ? add_weight(w, nm, m) : add_plain(w, nm, m);
            mat_free(m);
        }
        snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", L + 1, layers);
        if (rc == AL_OK) rc = twins_shard(&T, w, file, names, n);
        for (size_t i = 0; i < n; i++) free(names[i]);
        for (int k = 0; k < NTWIN; k++) st_writer_free(w[k]);
        fprintf(stderr, "\rwriting r1 twins: layer %d of %d", L + 1, layers);
    }
    fprintf(stderr, "\n");
    char *cp = al_asprintf("%s/config.json", src), *text = NULL;
    size_t len = 0;
    if (rc == AL_OK && !(text = al_read_file(cp, &len))) rc = AL_ERR;
    cJSON *j = rc == AL_OK ? cJSON_Parse(text) : NULL;
    if (rc == AL_OK && !j) rc = al_err("%s: not JSON", cp);
    char *out = NULL;
    if (j) {
        cJSON_DeleteItemFromObject(j, "quantization_config");
        cJSON_ReplaceItemInObject(j, "torch_dtype", cJSON_CreateString("bfloat16"));
        out = cJSON_Print(j);
        cJSON_Delete(j);
    }
    if (rc == AL_OK) rc = twins_end(&T, out);
    if (rc == AL_OK) twins_free(&T);
    free(out); free(text); free(cp);
    store_free(s);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", src);
    free(cmd); free(src);
    return rc;
}

/* ================================================================ measuring */

static double rel_diff(const float *a, const float *b, size_t n) { return vec_rel_err(a, b, n); }

static void agree(const char *what, double rel, double tol) {
    bool ok = isfinite(rel) && rel <= tol;
    printf("    %s: relative difference %.2g (%s %.0g)\n", what, rel, ok ? "agree: <=" : "DISAGREE: >", tol);
    if (!ok) bad++;
}

/* "  mxfp4 0.0123 (0.85x)  nvfp4 ..." for the FP4 / INT4 twins' best times against the BF16 twin's. */
static void print_ratios(const double *best, int prec) {
    for (int t = 1; t < NTWIN; t++) printf("  %s %.*f (%.2fx)", twin_name[t], prec, best[t], best[t] / best[0]);
    printf("\n");
}

/* Layer 0's products alone: mm_xwt at T tokens in mode c (the BF16 twin's in the same mode), best of
 * reps, interleaved over the twins; in f32 mode the outputs compared (bf16 mode rounds only the BF16
 * twin's activations). */
static void bench_products(Model *m[NTWIN], size_t T, mm_compute c, int reps) {
    static const char *parts[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.o_proj", "mlp.gate_proj",
                                  "mlp.down_proj"};
    MmWork *wk = mm_work_new(0);
    printf("layer 0's products alone (mm_xwt, T = %zu, %s mode, %d threads, best of %d): %s milliseconds, 4-bit / BF16\n", T,
           mm_compute_name(c), mm_work_threads(wk), reps, wall ? "wall" : "CPU");
    for (size_t p = 0; p < sizeof parts / sizeof *parts; p++) {
        char name[128];
        snprintf(name, sizeof name, "model.layers.0.%s.weight", parts[p]);
        WMat w[NTWIN];
        double best[NTWIN] = {1e30, 1e30, 1e30, 1e30};
        float *x = NULL, *y[NTWIN] = {0};
        int rc = AL_OK;
        for (int t = 0; t < NTWIN && rc == AL_OK; t++) rc = wmat_view(m[t]->store, name, false, &w[t]);
        if (rc != AL_OK) { fprintf(stderr, "%s: %s\n", name, al_errmsg()); exit(1); }
        size_t K = w[0].cols, N = w[0].rows;
        x = malloc(T * K * sizeof *x);
        for (size_t i = 0; i < T * K; i++) x[i] = rnd(1);
        for (int t = 0; t < NTWIN; t++) y[t] = malloc(T * N * sizeof(float));
        for (int r = 0; r < reps + 1; r++)
            for (int t = 0; t < NTWIN; t++) {
                double t0 = cpu_s();
                mm_xwt(wk, &w[t], x, K, T, y[t], N, c);
                double d = cpu_s() - t0;
                if (r && d < best[t]) best[t] = d;          /* the first round warms up */
            }
        for (int t = 0; t < NTWIN; t++) best[t] *= 1e3;
        printf("  %-18s (%5zu x %5zu)  bf16 %.4f", parts[p], N, K, best[0]);
        print_ratios(best, 4);
        for (int t = 1; t < NTWIN && c == MM_F32; t++) {
            char what[96];
            snprintf(what, sizeof what, "%s %s vs bf16", parts[p], twin_name[t]);
            if (rel_diff(y[0], y[t], T * N) > 1e-5) agree(what, rel_diff(y[0], y[t], T * N), 1e-5);
        }
        for (int t = 0; t < NTWIN; t++) { wmat_free(&w[t]); free(y[t]); }
        free(x);
    }
    mm_work_free(wk);
}

/* The products at 1, 4, 16, 63 and 128 tokens (decode, few tokens, the register tiles' last, prefill)
 * in both modes. */
static size_t only_T;        /* --tokens T: the products at T tokens alone (0: all five) */
static void bench_all_products(Model *m[NTWIN], int reps) {
    static const size_t Ts[] = {1, 4, 16, 63, 128};
    for (int c = 0; c < 2; c++)
        for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++)
            if (!only_T || only_T == Ts[i]) bench_products(m, Ts[i], c ? MM_BF16 : MM_F32, reps);
    if (only_T && only_T != 1 && only_T != 4 && only_T != 16 && only_T != 63 && only_T != 128)
        for (int c = 0; c < 2; c++) bench_products(m, only_T, c ? MM_BF16 : MM_F32, reps);
}

/* Prefill of T tokens in mode c on each twin, best of reps, interleaved; logits of the last token. */
static void bench_prefill(Forward *f[NTWIN], const int *ids, size_t T, mm_compute c, int reps, float *z[NTWIN]) {
    double best[NTWIN] = {1e30, 1e30, 1e30, 1e30};
    for (int t = 0; t < NTWIN; t++) fwd_set_compute(f[t], c);
    for (int r = 0; r < reps + 1; r++)
        for (int t = 0; t < NTWIN; t++) {
            fwd_reset(f[t]);
            double t0 = cpu_s();
            if (fwd_run(f[t], ids, T, FWD_LOGITS_LAST, z[t]) != AL_OK) { fprintf(stderr, "prefill: %s\n", al_errmsg()); exit(1); }
            double d = cpu_s() - t0;
            if (r && d < best[t]) best[t] = d;
        }
    printf("  prefill T=%zu %-4s  bf16 %.3f %s s (%.1f tok/s)", T, mm_compute_name(c), best[0], wall ? "wall" : "CPU",
           (double)T / best[0]);
    print_ratios(best, 3);
}

/* Decoding in mode c on each twin: 16 one-token steps after a 16-token prompt, the steps timed,
 * best of reps, interleaved; the last step's logits into z. */
static void bench_decode(Forward *f[NTWIN], const int *ids, mm_compute c, int reps, float *z[NTWIN]) {
    enum { P = 16, S = 16 };
    double best[NTWIN] = {1e30, 1e30, 1e30, 1e30};
    for (int t = 0; t < NTWIN; t++) fwd_set_compute(f[t], c);
    for (int r = 0; r < reps + 1; r++)
        for (int t = 0; t < NTWIN; t++) {
            fwd_reset(f[t]);
            int rc = fwd_run(f[t], ids, P, FWD_LOGITS_LAST, z[t]);
            double t0 = cpu_s();
            for (int i = 0; i < S && rc == AL_OK; i++) rc = fwd_run(f[t], ids + P + i, 1, FWD_LOGITS_LAST, z[t]);
            double d = cpu_s() - t0;
            if (rc != AL_OK) { fprintf(stderr, "decode: %s\n", al_errmsg()); exit(1); }
            if (r && d < best[t]) best[t] = d;
        }
    printf("  decode %d tokens after %d, %-4s  bf16 %.3f %s s (%.1f tok/s)", S, P, mm_compute_name(c), best[0],
           wall ? "wall" : "CPU", S / best[0]);
    print_ratios(best, 3);
}

static int bench_llama(const char *base, size_t T, int reps) {
    Model *m[NTWIN] = {0};
    Forward *f[NTWIN] = {0};
    float *z[NTWIN], *z32[NTWIN];
    for (int t = 0; t < NTWIN; t++) {
        char *d = al_asprintf("%s/llama1b-%s", base, twin_name[t]);
        if (model_open(d, &m[t]) != AL_OK || fwd_new(m[t], NULL, &f[t]) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
        free(d);
        z[t] = malloc(fwd_vocab(f[t]) * sizeof(float));
        z32[t] = malloc(fwd_vocab(f[t]) * sizeof(float));
    }
    printf("llama1b twins (TinyLlama shapes, %d layers; projections FP4, embeddings / head / norms BF16):\n",
           m[0]->cfg.n_layers);
    bench_all_products(m, reps);
    int *ids = malloc(T * sizeof *ids);
    for (size_t i = 0; i < T; i++) ids[i] = (int)((i * 2654435761u) % (V1 - 3)) + 3;
    size_t V = fwd_vocab(f[0]);
    bench_prefill(f, ids, T, MM_F32, reps, z32);
    for (int t = 1; t < NTWIN; t++) {
        char what[64];
        snprintf(what, sizeof what, "f32 logits, %s vs bf16", twin_name[t]);
        agree(what, rel_diff(z32[0], z32[t], V), 1e-5);
    }
    bench_prefill(f, ids, T, MM_BF16, reps, z);
    for (int t = 1; t < NTWIN; t++)      /* the head (BF16) rounds its activations in both, the FP4 projections do not */
        printf("    bf16-mode logits, %s vs bf16: relative difference %.2g (not compared: only BF16 weights round "
               "their activations to BF16)\n", twin_name[t], rel_diff(z[0], z[t], V));
    bench_decode(f, ids, MM_F32, reps, z32);
    for (int t = 1; t < NTWIN; t++) {
        char what[64];
        snprintf(what, sizeof what, "decode's f32 logits, %s vs bf16", twin_name[t]);
        agree(what, rel_diff(z32[0], z32[t], V), 1e-5);
    }
    bench_decode(f, ids, MM_BF16, reps, z);
    for (int t = 0; t < NTWIN; t++) { fwd_free(f[t]); model_free(m[t]); free(z[t]); free(z32[t]); }
    free(ids);
    return 0;
}

/* The R1 sweep: VO and QK of every layer, cold, on each twin in turn (interleaved per layer). */
static int bench_r1(const char *base, int reps) {
    Model *m[NTWIN] = {0};
    for (int t = 0; t < NTWIN; t++) {
        char *d = al_asprintf("%s/r1-%s", base, twin_name[t]);
        if (model_open(d, &m[t]) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
        free(d);
    }
    int L = m[0]->cfg.n_layers, H = m[0]->cfg.n_heads, diffs = 0;
    printf("r1 twins (DeepSeek-R1 attention shapes, %d layers): the sweep (VO and QK of every layer, cold), best of %d, "
           "%s seconds\n", L, reps, wall ? "wall" : "CPU");
    for (int k = 0; k < 2; k++) {
        double best[NTWIN] = {1e30, 1e30, 1e30, 1e30};
        for (int r = 0; r < reps; r++)
            for (int t = 0; t < NTWIN; t++) {
                FarrState *st = farr_state_new();
                double t0 = cpu_s();
                for (int l = 0; l < L; l++) {
                    const FarrLayer *fl;
                    if (farr_state_layer(st, m[t], (farr_kind)k, l, FARR_NO_OFFSET, &fl) != AL_OK) {
                        fprintf(stderr, "%s\n", al_errmsg());
                        return 1;
                    }
                }
                double d = cpu_s() - t0;
                if (d < best[t]) best[t] = d;
                if (r == 0 && t > 0) {                     /* ranks against the BF16 twin's, every head */
                    FarrState *s0 = farr_state_new();
                    for (int l = 0; l < L; l++) {
                        const FarrLayer *a, *b;
                        farr_state_layer(s0, m[0], (farr_kind)k, l, FARR_NO_OFFSET, &a);
                        farr_state_layer(st, m[t], (farr_kind)k, l, FARR_NO_OFFSET, &b);
                        for (int h = 0; h < H; h++) {
                            int ra[3], rb[3];
                            farr_layer_ranks(a, h, 0.99, &ra[0], &ra[1], &ra[2]);
                            farr_layer_ranks(b, h, 0.99, &rb[0], &rb[1], &rb[2]);
                            diffs += ra[0] != rb[0] || ra[1] != rb[1] || ra[2] != rb[2];
                        }
                    }
                    farr_state_free(s0);
                }
                farr_state_free(st);
            }
        printf("  %s  bf16 %.3f s", farr_fused_name((farr_kind)k), best[0]);
        print_ratios(best, 3);
    }
    printf("    fused ranks at tau 0.99 (every head, both kinds, the 4-bit twins): %d differ from the BF16 twin's (%s)\n",
           diffs, diffs ? "DISAGREE" : "agree");
    bad += diffs > 0;
    for (int t = 0; t < NTWIN; t++) model_free(m[t]);
    return 0;
}

/* ---------------------------------------------------------------- ppl's memory, a process per twin */

static long vm_hwm_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long hwm = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) hwm = atol(line + 6);
    if (f) fclose(f);
    return hwm;
}

/* Child: fwd_ppl (2 windows of 64 tokens, f32 mode) on dir; prints "ppl VmHWM_kB seconds". */
static int child(const char *dir) {
    Model *m = NULL;
    Forward *f = NULL;
    double t0 = now_s();
    if (model_open(dir, &m) != AL_OK || fwd_new(m, NULL, &f) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
    int ids[128];
    for (size_t i = 0; i < 128; i++) ids[i] = (int)((i * 2654435761u) % (fwd_vocab(f) - 3)) + 3;
    FwdPpl p;
    int rc = fwd_ppl(f, ids, 128, 64, &p);
    printf("%.17g %ld %.2f\n", exp(p.nll), vm_hwm_kb(), now_s() - t0);
    fwd_free(f);
    model_free(m);
    return rc != AL_OK;
}

static void bench_rss(const char *base) {
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) return;
    self[sl] = 0;
    double ppl[NTWIN];
    long kb[NTWIN];
    printf("ppl (2 windows of 64 tokens, f32 mode), a fresh process per twin:\n");
    for (int t = 0; t < NTWIN; t++) {
        char *cmd = al_asprintf("'%s' --child '%s/llama1b-%s'", self, base, twin_name[t]), line[256] = "";
        FILE *p = popen(cmd, "r");
        double sec = 0;
        if (!p || !fgets(line, sizeof line, p) || sscanf(line, "%lf %ld %lf", &ppl[t], &kb[t], &sec) != 3) {
            printf("  %s: failed (%s)\n", twin_name[t], line);
            bad++;
            ppl[t] = NAN, kb[t] = 0;
        } else
            printf("  %-6s ppl %.10g  peak RSS (VmHWM) %.3f GB (%.2fx bf16's)  %.1f s\n", twin_name[t], ppl[t],
                   (double)kb[t] / 1048576.0, (double)kb[t] / (double)(kb[0] ? kb[0] : 1), sec);
        if (p) pclose(p);
        free(cmd);
    }
    for (int t = 1; t < NTWIN; t++) {
        char what[64];
        snprintf(what, sizeof what, "ppl, %s vs bf16", twin_name[t]);
        agree(what, fabs(ppl[t] / ppl[0] - 1), 1e-6);
        if (kb[t] > kb[0]) { printf("    %s's peak RSS exceeds the BF16 twin's\n", twin_name[t]); bad++; }
    }
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "--child")) return child(argv[2]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *cache = getenv("ATTNLAB_CACHE");
    char *base = al_asprintf("%s/bench-quant", cache ? cache : "/tmp/attnlab");
    int layers = 22, r1_layers = 1, reps = 3;
    const char *only = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--r1-layers") && i + 1 < argc) r1_layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--wall")) wall = true;
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) only_T = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_quant [DIR] [--layers N] [--r1-layers N] [--reps N] [--wall] "
                            "[--only products|llama|r1|rss] [--tokens T]\n");
            return 2;
        } else { free(base); base = al_strdup(argv[i]); }
    }
    mkdir(cache ? cache : "/tmp/attnlab", 0755);
    mkdir(base, 0755);
    double t0 = now_s();
    if (!have_dir(base, "llama1b") && write_llama(base, layers) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
    if (!have_dir(base, "r1") && write_r1(base, r1_layers) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
    if (now_s() - t0 > 1) printf("wrote the twins into %s in %.1f s\n", base, now_s() - t0);
    printf("vdpbf16ps: %s; load average at start: ", mm_have_bf16() ? "yes" : "no");
    fflush(stdout);
    if (system("cut -d' ' -f1-3 /proc/loadavg") != 0) printf("?\n");
    if (!strcmp(only, "products")) {
        Model *m[NTWIN] = {0};
        for (int t = 0; t < NTWIN; t++) {
            char *d = al_asprintf("%s/llama1b-%s", base, twin_name[t]);
            if (model_open(d, &m[t]) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
            free(d);
        }
        bench_all_products(m, reps);
        for (int t = 0; t < NTWIN; t++) model_free(m[t]);
    } else {
        if ((!*only || !strcmp(only, "llama")) && bench_llama(base, 128, reps) != 0) return 1;
        if ((!*only || !strcmp(only, "r1")) && bench_r1(base, reps) != 0) return 1;
        if (!*only || !strcmp(only, "rss")) bench_rss(base);
    }
    printf("load average at end: ");
    fflush(stdout);
    if (system("cut -d' ' -f1-3 /proc/loadavg") != 0) printf("?\n");
    printf("%s\n", bad ? "SOME OUTPUTS DISAGREE" : "all outputs agree");
    free(base);
    return bad ? 1 : 0;
}
