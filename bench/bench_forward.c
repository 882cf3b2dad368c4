/* bench_forward.c -- forward-pass speed: tokens/s of prefill and of decoding on stories260K
 * ($ATTNLAB_MODELS) and on a synthetic ~1.1B-parameter Llama-shaped checkpoint (TinyLlama's
 * shapes: hidden 2048, 22 layers, 32 heads, 4 KV heads, head_dim 64, MLP 5632, vocab 32000,
 * untied; BF16 shards, one per layer, written on first use), with a per-stage breakdown taken
 * through the activation hooks (their timestamps split each layer into QKV projections, RoPE,
 * attention, output projection and norm + MLP). For the 1.1B model, in one run (issue 18):
 *   - the time before the first window (model_open + fwd_new + the first 16-token run, minus a
 *     warm 16-token run) against reading the weight files once from a warm page cache;
 *   - prefill tok/s in compute f32 and bf16 (core/linalg/matmul.h); where the CPU has AMX, bf16 on the
 *     AMX tiles and on the vdpbf16ps token lanes, interleaved (wall and CPU, matmul_amx.h);
 *   - the GEMM floor: OpenBLAS sgemm (all threads) on float32 copies of one layer's weights and the
 *     LM head, for T tokens, as tok/s of the whole model.
 *
 *   bench_forward [DIR]     DIR for the synthetic model (default $ATTNLAB_CACHE/bench-llama-1b,
 *                           else /tmp/attnlab-bench-llama-1b); `-` skips it.
 *   bench_forward --llama8b [DIR]
 *                           writes a Llama-3-8B-shaped BF16 model (32 layers, hidden 4096, 32 heads,
 *                           8 KV heads, MLP 14336, vocab 128256: 16 GB) into DIR (default a fresh
 *                           folder under /tmp), whose layers 2..31 have zero o_proj and down_proj
 *                           (they compute, and add exactly 0; from layer 4 on all their projections
 *                           are zero, which is quick to write), then in fresh processes runs `ppl`
 *                           (fwd_ppl, 2 windows of 64 tokens) and `calibrate` (calib_run, 2 x 64)
 *                           on it and on the same files read as 2 layers (config num_hidden_layers
 *                           2): the perplexities must be identical; prints each process's peak
 *                           RSS (VmHWM) and removes DIR.
 *   bench_forward --kernels [REPS]
 *                           the products alone against the machine's peak, in core cycles, one
 *                           thread: bare vdpbf16ps and vfmadd231ps loops (cycles per instruction,
 *                           FLOP/cycle), then each product of the 1.1B model (q/o, k/v, gate/up,
 *                           down, LM head) at T = 128 and 512 in f32 mode, bf16 mode (on the AMX
 *                           tiles where the CPU has them: then also a bare tdpbf16ps loop), bf16 mode
 *                           on the vdpbf16ps token lanes, and on the 4 x 6 dot-product tiles
 *                           (FLOP/cycle and % of the bare loop).
 *   bench_forward --stages DIR [REPS]
 *                           the 1.1B model in DIR (bench_forward --write-llama1b) on one thread: prefill
 *                           at T = 128 and 512 in both modes (and bf16 on the 4 x 6 dot tiles),
 *                           each stage's share and FLOP per core
 *                           cycle (thread CPU time x the measured clock), the whole as FLOP/cycle.
 *   bench_forward --write-shape scaled|8b|70b DIR [LAYERS]
 *                           writes bench/bench_pipeline.sh's Llama-shaped BF16 model, every layer random:
 *                           scaled (hidden 2048, 16 heads, 8 KV heads, head_dim 128, MLP 5632, vocab 32000,
 *                           8 layers: 1.1 GB), 8b (Llama-3-8B's, 32 layers), 70b (Llama-3-70B's: hidden 8192,
 *                           64 heads, 8 KV heads, MLP 28672, 10 layers); LAYERS overrides the count.
 *   bench_forward --write-llama1b DIR
 *                           only writes the synthetic 1.1B model into DIR (if it has no config.json
 *                           yet), for bench/bench_llamacpp.sh.
 *   bench_forward --decode DIR [N] [REPS]
 *                           decode against its floor, in one run (issue 32; bench/bench_decode.sh):
 *                           the floor -- every weight a one-token decode reads (all tensors but the
 *                           embeddings, of which it reads one row) read once from the page cache
 *                           where the forward pass reads them (the mapping), on the products'
 *                           workers (pool.h), AVX-512 loads summed, best of REPS: GB/s and the
 *                           tok/s that one read per token allows --; then greedy decoding of N
 *                           tokens (default 64) after a 128-token prompt, each token one fwd_run of
 *                           one token through the KV cache as `generate` runs it, in f32 and bf16
 *                           mode, with BF16 weights on the one-token kernels and on the 4 x 6 /
 *                           1 x 6 tiles (mm_matvec(false), the code before them), the four
 *                           interleaved, best of REPS (default 3): tok/s, ratio to the floor,
 *                           kernels / tiles, and whether the greedy tokens agree. On an MoE model (routed
 *                           experts stored as ".experts." tensors: gpt-oss's) the floor counts top_k of the
 *                           n_experts experts' bytes per token, and the pairs compared are the experts' x @ W
 *                           read in place against each expert widened whole before one sgemm (mm_xw_in_place(false),
 *                           the code before; bench/bench_moe_decode.sh). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cblas.h>
#include <math.h>
#include <unistd.h>

#include "calib.h"
#include "forward.h"
#include "matmul_amx.h"
#include "matmul_internal.h"
#include "model.h"
#include "pool.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ================================================================ stage profile through hooks */

enum { ST_QKV, ST_ROPE, ST_ATTN, ST_OPROJ, ST_MLP, ST_N };
static const char *stage_name[ST_N] = {"QKV proj", "RoPE", "attention", "o_proj", "norm+MLP"};

typedef struct {
    double t_last, acc[ST_N];
    int last_kind;
} Prof;

static double (*prof_clock)(void) = now_s;   /* --stages: the thread's CPU time */

/* Attributes the time since the previous hook to the stage that ends at this hook. */
static int prof_hook(const FwdAct *a, void *ud) {
    Prof *p = ud;
    double t = prof_clock();
    int st = -1;
    switch (a->kind) {
    case FWD_ATTN_IN: st = a->layer > 0 ? ST_MLP : -1; break;
    case FWD_Q: st = ST_QKV; break;
    case FWD_Q_ROPE: st = ST_ROPE; break;
    case FWD_ATTN_OUT: st = ST_ATTN; break;
    case FWD_ATTN_PROJ: st = ST_OPROJ; break;
    default: break;
    }
    if (st >= 0 && p->t_last > 0) p->acc[st] += t - p->t_last;
    p->t_last = t;
    return AL_OK;
}

/* Runs T tokens as a fresh sequence; returns seconds. */
static double time_prefill(Forward *f, const int *ids, size_t T, float *z, Prof *p) {
    fwd_reset(f);
    if (p) {
        p->t_last = 0;
        FwdHooks h = {.mask = FWD_ATTN_IN | FWD_Q | FWD_Q_ROPE | FWD_ATTN_OUT | FWD_ATTN_PROJ, .fn = prof_hook, .ud = p};
        fwd_set_hooks(f, &h);
    }
    double t0 = prof_clock();
    if (fwd_run(f, ids, T, FWD_LOGITS_LAST, z) != AL_OK) { fprintf(stderr, "prefill: %s\n", al_errmsg()); exit(1); }
    double dt = prof_clock() - t0;
    fwd_set_hooks(f, NULL);
    return dt;
}

/* Greedy decoding of n tokens after the cache's current content; returns seconds. */
static double time_decode(Forward *f, float *z, size_t n) {
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        size_t best = 0;
        for (size_t j = 1; j < fwd_vocab(f); j++)
            if (z[j] > z[best]) best = j;
        int tok = (int)best;
        if (fwd_run(f, &tok, 1, FWD_LOGITS_LAST, z) != AL_OK) { fprintf(stderr, "decode: %s\n", al_errmsg()); exit(1); }
    }
    return now_s() - t0;
}

/* Seconds to read every *.safetensors file of dir once (read(2), 8 MB at a time). */
static double read_files_s(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls '%s'/*.safetensors", dir);
    FILE *ls = popen(cmd, "r");
    if (!ls) return -1;
    char path[4200];
    size_t cap = (size_t)8 << 20;
    char *buf = malloc(cap);
    double t0 = now_s();
    while (fgets(path, sizeof path, ls)) {
        path[strcspn(path, "\n")] = 0;
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        while (fread(buf, 1, cap, f) == cap) {}
        fclose(f);
    }
    double dt = now_s() - t0;
    pclose(ls);
    free(buf);
    return dt;
}

/* Prefill of each T in mode c (best of reps), with the stage breakdown of the last. */
static void prefill_rows(Forward *f, const int *ids, const size_t *Ts, size_t nT, float *z, mm_compute c, int reps,
                         double *tps) {
    fwd_set_compute(f, c);
    time_prefill(f, ids, 16, z, NULL);                                  /* warm-up of this mode */
    for (size_t i = 0; i < nT; i++) {
        Prof p = {0};
        double dt = 1e30;
        for (int r = 0; r < reps; r++) {
            Prof q = {0};
            double d = time_prefill(f, ids, Ts[i], z, &q);
            if (d < dt) { dt = d; p = q; }
        }
        double tot = 0;
        for (int s = 0; s < ST_N; s++) tot += p.acc[s];
        tps[i] = (double)Ts[i] / dt;
        printf("  %-4s prefill T=%-5zu %8.3f s  %9.1f tok/s   [", mm_compute_name(c), Ts[i], dt, tps[i]);
        for (int s = 0; s < ST_N; s++) printf("%s%s %.0f%%", s ? ", " : "", stage_name[s], 100 * p.acc[s] / dt);
        printf(", rest %.0f%%]\n", 100 * (dt - tot) / dt);
    }
}

static double floor_tps(size_t T);
static double cpu_s(void);

/* bf16 prefill on the AMX tiles and on the vdpbf16ps token lanes (matmul_amx_allow(false): the route
 * before them, and a CPU without AMX), interleaved reps times: each one's best wall time with that
 * run's CPU time, and the ratios. */
static void amx_rows(Forward *f, const int *ids, const size_t *Ts, size_t nT, float *z, int reps) {
    fwd_set_compute(f, MM_BF16);
    for (size_t i = 0; i < nT; i++) {
        double w[2] = {1e30, 1e30}, c[2] = {0, 0};
        for (int r = 0; r < reps; r++)
            for (int a = 1; a >= 0; a--) {
                matmul_amx_allow(a);
                double c0 = cpu_s(), d = time_prefill(f, ids, Ts[i], z, NULL), dc = cpu_s() - c0;
                if (d < w[a]) { w[a] = d; c[a] = dc; }
            }
        matmul_amx_allow(true);
        printf("  bf16 prefill T=%-5zu AMX tiles %.3f s (CPU %.3f s) %.1f tok/s; vdpbf16ps lanes %.3f s (CPU %.3f s) "
               "%.1f tok/s -> AMX %.2fx faster (wall), %.2fx (CPU)\n", Ts[i], w[1], c[1], (double)Ts[i] / w[1], w[0], c[0],
               (double)Ts[i] / w[0], w[0] / w[1], c[0] / c[1]);
    }
}

static void bench_model(const char *label, const char *path, const size_t *Ts, size_t nT, size_t ndec, bool big) {
    Model *m = NULL;
    Forward *f = NULL;
    double t0 = now_s();
    if (model_open(path, &m) != AL_OK || fwd_new(m, NULL, &f) != AL_OK) {
        fprintf(stderr, "%s: %s\n", label, al_errmsg());
        model_free(m);
        return;
    }
    double t_open = now_s() - t0;
    size_t V = fwd_vocab(f), Tmax = 16;
    for (size_t i = 0; i < nT; i++) Tmax = Ts[i] > Tmax ? Ts[i] : Tmax;
    int *ids = malloc(Tmax * sizeof *ids);
    float *z = malloc(V * sizeof *z);
    for (size_t i = 0; i < Tmax; i++) ids[i] = (int)((i * 2654435761u) % (V - 3)) + 3;
    double t_first = time_prefill(f, ids, 16, z, NULL), t_warm = time_prefill(f, ids, 16, z, NULL);
    double before = t_open + t_first - t_warm;
    printf("%s: open + fwd_new %.3f s (%s), first 16-token run %.3f s, warm %.3f s\n", label, t_open,
           fwd_streaming(f) ? "streamed" : "weights mapped", t_first, t_warm);
    if (big) {
        double rd = read_files_s(path);
        printf("  before the first window: %.3f s; reading the weight files once (warm page cache): %.3f s -> %.1fx "
               "(target <= 10x)\n", before, rd, before / rd);
    }
    double t32[8] = {0}, t16[8] = {0};
    prefill_rows(f, ids, Ts, nT, z, MM_F32, big ? 2 : 3, t32);
    prefill_rows(f, ids, Ts, nT, z, MM_BF16, big ? 2 : 3, t16);
    if (matmul_amx_ok()) amx_rows(f, ids, Ts, nT, z, big ? 2 : 3);
    for (size_t i = 0; big && i < nT; i++) {
        double fl = floor_tps(Ts[i]);
        printf("  T=%zu: bf16 / f32 = %.2fx; GEMM floor (OpenBLAS sgemm, float32 copies of the same shapes): %.1f tok/s -> "
               "f32 at %.2fx, bf16 at %.2fx of it\n", Ts[i], t16[i] / t32[i], fl, t32[i] / fl, t16[i] / fl);
    }
    for (int c = 0; c < 2; c++) {
        fwd_set_compute(f, c ? MM_BF16 : MM_F32);
        time_prefill(f, ids, Ts[0], z, NULL);
        double dd = time_decode(f, z, ndec);
        printf("  %-4s decode %zu tokens after %zu: %.3f s  %.1f tok/s\n", c ? "bf16" : "f32", ndec, Ts[0], dd,
               (double)ndec / dd);
    }
    free(ids);
    free(z);
    fwd_free(f);
    model_free(m);
}

/* ================================================================ synthetic Llama checkpoints */

typedef struct {
    int D, L, H, G, HD, FF, V;
    int zero_from;           /* layers from this one on get zero o_proj and down_proj (they add 0) */
} Shape;

static const Shape llama1b = {2048, 22, 32, 4, 64, 5632, 32000, 1 << 30};
static const Shape llama8b = {4096, 32, 32, 8, 128, 14336, 128256, 2};
/* bench_pipeline.sh's shapes (every layer random: its PCAs see real spectra) */
static const Shape pipe_scaled = {2048, 8, 16, 8, 128, 5632, 32000, 1 << 30};
static const Shape pipe_8b = {4096, 32, 32, 8, 128, 14336, 128256, 1 << 30};
static const Shape pipe_70b = {8192, 10, 64, 8, 128, 28672, 128256, 1 << 30};

static unsigned long long rng = 88172645463325252ull;
static float rnd(float scale) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return ((float)(rng >> 40) / 16777216.f - 0.5f) * 2.f * scale;
}

static int add(st_writer *w, const char *name, size_t r, size_t c, float scale, float offset) {
    Mat *m = mat_new(r, c);
    if (!m) return AL_ERR;
    if (scale != 0 || offset != 0)
        for (size_t i = 0; i < r * c; i++) m->data[i] = offset + rnd(scale);
    int rc = st_writer_add_mat(w, name, DT_BF16, m);
    mat_free(m);
    return rc;
}

static int write_config(const char *dir, const Shape *S, int layers) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": %d, "
             "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
             "\"intermediate_size\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 2048, \"rms_norm_eps\": 1e-5, "
             "\"rope_theta\": 10000.0, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}\n",
             S->D, layers, S->H, S->G, S->HD, S->FF, S->V);
    char *cp = al_asprintf("%s/config.json", dir);
    int rc = al_write_file_atomic(cp, cfg, strlen(cfg));
    free(cp);
    return rc;
}

/* Writes the model (one shard per layer, plus one for the embeddings and head) and its index. */
static int write_llama(const char *dir, const Shape *S) {
    mkdir(dir, 0755);
    char *ip = al_asprintf("%s/model.safetensors.index.json", dir);
    FILE *idx = fopen(ip, "w");
    free(ip);
    if (!idx) return al_err("%s: cannot write the index", dir);
    fprintf(idx, "{\"metadata\": {}, \"weight_map\": {");
    bool first = true;
    int rc = AL_OK;
    size_t D = (size_t)S->D, qd = (size_t)(S->H * S->HD), kd = (size_t)(S->G * S->HD), FF = (size_t)S->FF;
    for (int L = -1; rc == AL_OK && L < S->L; L++) {
        st_writer *w = st_writer_new();
        char file[64], name[128];
        float z = L >= S->zero_from ? 0.f : 1.f, p = L >= S->zero_from + 2 ? 0.f : 1.f;
        snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", L + 2, S->L + 1);
        char *path = al_asprintf("%s/%s", dir, file);
        struct stat sb;
        bool have = path && stat(path, &sb) == 0;          /* a shard of an interrupted run is kept */
        struct { const char *s; size_t r, c; float scale, off; } t[] = {
            {"input_layernorm.weight", 1, D, 0.05f, 1}, {"post_attention_layernorm.weight", 1, D, 0.05f, 1},
            {"self_attn.q_proj.weight", qd, D, 0.03f * p, 0}, {"self_attn.k_proj.weight", kd, D, 0.03f * p, 0},
            {"self_attn.v_proj.weight", kd, D, 0.03f * p, 0}, {"self_attn.o_proj.weight", D, qd, 0.03f * z, 0},
            {"mlp.gate_proj.weight", FF, D, 0.03f * p, 0}, {"mlp.up_proj.weight", FF, D, 0.03f * p, 0},
            {"mlp.down_proj.weight", D, FF, 0.02f * z, 0}};
        struct { const char *s; size_t r, c; float scale, off; } g[] = {
            {"model.embed_tokens.weight", (size_t)S->V, D, 0.05f, 0}, {"lm_head.weight", (size_t)S->V, D, 0.03f, 0},
            {"model.norm.weight", 1, D, 0.05f, 1}};
        size_t n = L < 0 ? 3 : 9;
        for (size_t i = 0; rc == AL_OK && i < n; i++) {
            if (L < 0) snprintf(name, sizeof name, "%s", g[i].s);
            else snprintf(name, sizeof name, "model.layers.%d.%s", L, t[i].s);
            if (!have)
                rc = L < 0 ? add(w, name, g[i].r, g[i].c, g[i].scale, g[i].off) : add(w, name, t[i].r, t[i].c, t[i].scale, t[i].off);
            fprintf(idx, "%s\"%s\": \"%s\"", first ? "" : ", ", name, file);
            first = false;
        }
        if (rc == AL_OK && !have) rc = path ? st_writer_write(w, path) : AL_ERR;
        free(path);
        st_writer_free(w);
        fprintf(stderr, "\rwriting %s: shard %d of %d", dir, L + 2, S->L + 1);
    }
    fprintf(stderr, "\n");
    fprintf(idx, "}}\n");
    fclose(idx);
    return rc == AL_OK ? write_config(dir, S, S->L) : rc;
}

/* ================================================================ the GEMM floor */

/* tok/s of the 1.1B model's products alone for T tokens: OpenBLAS sgemm (all its threads) on float32
 * matrices of one layer's shapes, times the layers, plus the LM head for the last row. */
static double floor_tps(size_t T) {
    const Shape *S = &llama1b;
    size_t D = (size_t)S->D, qd = (size_t)(S->H * S->HD), kd = (size_t)(S->G * S->HD), FF = (size_t)S->FF;
    size_t sh[][2] = {{qd, D}, {kd, D}, {kd, D}, {D, qd}, {FF, D}, {FF, D}, {D, FF}};
    float *x = malloc(T * FF * sizeof(float)), *y = malloc(T * FF * sizeof(float));
    float *w = malloc(FF * D * sizeof(float));
    for (size_t i = 0; i < T * FF; i++) x[i] = rnd(1);
    for (size_t i = 0; i < FF * D; i++) w[i] = rnd(0.03f);
    double best = 1e30;
    for (int r = 0; r < 2; r++) {
        double t0 = now_s();
        for (size_t i = 0; i < sizeof sh / sizeof *sh; i++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)sh[i][0], (int)sh[i][1], 1.f, x, (int)sh[i][1], w,
                        (int)sh[i][1], 0.f, y, (int)sh[i][0]);
        double dt = now_s() - t0;
        best = dt < best ? dt : best;
    }
    float *head = malloc((size_t)S->V * D * sizeof(float));
    for (size_t i = 0; i < (size_t)S->V * D; i++) head[i] = rnd(0.03f);
    double t0 = now_s();
    cblas_sgemv(CblasRowMajor, CblasNoTrans, S->V, (int)D, 1.f, head, (int)D, x, 1, 0.f, y, 1);
    double th = now_s() - t0;
    free(head);
    free(x); free(y); free(w);
    return (double)T / (best * S->L + th);
}

/* ================================================================ kernels against the machine's peak (--kernels) */

/* The machine shares its cores with other jobs: wall time is noise. These figures are core cycles,
 * from the thread's CPU time and the core clock measured just before and after (a chain of
 * dependent adds, one cycle each; the best of 3 runs), single thread, the fewest of `reps` runs. */

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Core cycles per second now. */
static double clock_hz(void) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        unsigned long long x = 0, n = 2000000;
        double t0 = cpu_now();
        for (unsigned long long i = 0; i < n; i += 8)
            __asm__ volatile("add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\t"
                             "add $1,%0\n\tadd $1,%0\n\tadd $1,%0\n\tadd $1,%0" : "+r"(x));
        double t = (cpu_now() - t0) / (double)n;
        best = t < best ? t : best;
    }
    return 1 / best;
}

typedef void (*kern_fn)(void *ud);

/* Core cycles of fn(ud): the fewest of reps runs. */
static double cycles_of(kern_fn fn, void *ud, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double h0 = clock_hz(), t0 = cpu_now();
        fn(ud);
        double t = cpu_now() - t0, h1 = clock_hz(), c = t * (h0 > h1 ? h0 : h1);
        best = c < best ? c : best;
    }
    return best;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BARE_N 4000000L
/* BARE_N rounds of NA independent vdpbf16ps (NA accumulators) / vfmadd231ps on zmm registers. */
#define BARE_LOOP(name, tgt, NA, type, op)                                                          \
    __attribute__((target(tgt))) static void name(void *ud) {                                             \
        __m512 a[NA];                                                                                      \
        type x = (type)_mm512_set1_epi16(0x3f80), y = (type)_mm512_set1_epi16(0x3c00);                    \
        for (int i = 0; i < NA; i++) a[i] = _mm512_setzero_ps();                                           \
        for (long k = 0; k < BARE_N; k++) {                                                                \
            _Pragma("GCC unroll 24") for (int i = 0; i < NA; i++) a[i] = op;                               \
            __asm__ volatile("" : "+v"(x));                                                                \
        }                                                                                                  \
        float s = 0;                                                                                       \
        for (int i = 0; i < NA; i++) s += _mm512_reduce_add_ps(a[i]);                                      \
        *(float *)ud = s;                                                                                  \
    }
BARE_LOOP(dp_lat, "avx512bf16,avx512f,avx512bw", 1, __m512bh, _mm512_dpbf16_ps(a[i], x, y))
BARE_LOOP(dp_tp, "avx512bf16,avx512f,avx512bw", 24, __m512bh, _mm512_dpbf16_ps(a[i], x, y))
BARE_LOOP(fma_tp, "avx512f", 24, __m512, _mm512_fmadd_ps(a[i], x, y))

/* BARE_N / 16 rounds of 4 independent tdpbf16ps (accumulator tiles 0-3, operands 4-7: 16 x 16 x 32
 * multiply-adds each); the tiles configured and released here. */
__attribute__((target("amx-tile,amx-bf16"))) static void amx_tp(void *ud) {
    static const struct __attribute__((packed)) { uint8_t palette, start_row, zero[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg =
        {.palette = 1, .colsb = {64, 64, 64, 64, 64, 64, 64, 64}, .rows = {16, 16, 16, 16, 16, 16, 16, 16}};
    _tile_loadconfig(&cfg);   /* constant: GCC may drop stores to a local config before it */
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3); _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);
    for (long k = 0; k < BARE_N / 16; k++) {
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    }
    _tile_release();
    *(float *)ud = 0;
}
#endif

typedef struct {
    MmWork *wk;
    WMat W;
    const float *x;
    float *y;
    size_t T;
    mm_compute c;
} prod_job;

static void prod_run(void *ud) {
    prod_job *j = ud;
    if (mm_xwt(j->wk, &j->W, j->x, j->W.cols, j->T, j->y, j->W.rows, j->c) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); exit(1); }
}

/* The bare vdpbf16ps / FMA loops (the peak), then each product of the 1.1B model's shapes for T = 128
 * and 512 in f32 mode, bf16 mode, and bf16 mode on the 4 x 6 dot-product tiles. */
static int bench_kernels(int reps) {
    double peak_bf = 0, peak_f = 0, peak_amx = 0;
    printf("core clock now %.2f GHz (dependent adds); single thread, cycles = CPU time x that clock, fewest of %d runs\n",
           clock_hz() / 1e9, reps);
#if defined(__x86_64__) && defined(__GNUC__)
    if (mm_have_bf16()) {
        float s;
        double c1 = cycles_of(dp_lat, &s, reps) / BARE_N, c24 = cycles_of(dp_tp, &s, reps) / (24.0 * BARE_N);
        peak_bf = 64 / c24;
        printf("bare vdpbf16ps zmm: 1 accumulator %.2f cycles each (latency); 24 accumulators %.3f cycles each -> %.1f "
               "FLOP/cycle (32 BF16 pairs = 64 FLOP each)\n", c1, c24, peak_bf);
    }
    {
        float s;
        double c24 = cycles_of(fma_tp, &s, reps) / (24.0 * BARE_N);
        peak_f = 32 / c24;
        printf("bare vfmadd231ps zmm: 24 accumulators %.3f cycles each -> %.1f FLOP/cycle\n", c24, peak_f);
    }
    if (matmul_amx_ok()) {
        float s;
        double c4 = cycles_of(amx_tp, &s, reps) / (4.0 * (BARE_N / 16));
        peak_amx = 16384 / c4;
        printf("bare tdpbf16ps: 4 accumulator tiles %.2f cycles each -> %.1f FLOP/cycle (16 x 16 x 32 pairs = 16384 FLOP "
               "each)\n", c4, peak_amx);
    }
#endif
    const Shape *S = &llama1b;
    size_t D = (size_t)S->D, qd = (size_t)(S->H * S->HD), kd = (size_t)(S->G * S->HD), FF = (size_t)S->FF;
    struct { const char *name; size_t n, k; } sh[] = {
        {"q_proj / o_proj", qd, D}, {"k_proj / v_proj", kd, D}, {"gate / up", FF, D}, {"down", D, FF}, {"LM head", (size_t)S->V, D}};
    size_t Ts[] = {128, 512};
    MmWork *wk = mm_work_new(1);
    bool amx = matmul_amx_ok();
    printf("%-16s %-11s %4s  %-22s %-22s %-22s %-22s\n", "product", "(N x K)", "T", "f32 mode",
           amx ? "bf16 mode (AMX)" : "bf16 mode (no AMX)", "bf16, vdpbf16ps lanes", "bf16, 4x6 dot tiles");
    for (size_t s = 0; s < sizeof sh / sizeof *sh; s++) {
        size_t N = sh[s].n, K = sh[s].k;
        uint16_t *w = malloc(N * K * sizeof *w);
        for (size_t i = 0; i < N * K; i++) w[i] = dt_f32_to_bf16(rnd(0.03f));
        for (size_t ti = 0; ti < 2; ti++) {
            size_t T = Ts[ti];
            float *x = malloc(T * K * sizeof *x), *y = malloc(T * N * sizeof *y);
            for (size_t i = 0; i < T * K; i++) x[i] = rnd(1);
            prod_job j = {.wk = wk, .W = {.dt = DT_BF16, .data = w, .rows = N, .cols = K}, .x = x, .y = y, .T = T};
            double fl = 2.0 * (double)T * (double)N * (double)K, r[4];
            for (int v = 0; v < 4; v++) {            /* f32; bf16 as it runs; AMX off; token lanes off too */
                j.c = v ? MM_BF16 : MM_F32;
                matmul_amx_allow(v < 2 && amx);
                mm_token_lanes(v != 3);
                prod_run(&j);
                r[v] = fl / cycles_of(prod_run, &j, reps);
            }
            matmul_amx_allow(true);
            mm_token_lanes(true);
            char nk[32];
            snprintf(nk, sizeof nk, "%zux%zu", N, K);
            double pk1 = amx ? peak_amx : peak_bf;
            printf("%-16s %-11s %4zu  %5.1f FLOP/c (%3.0f%%)    %6.1f FLOP/c (%3.0f%%)   %5.1f FLOP/c (%3.0f%%)    "
                   "%5.1f FLOP/c (%3.0f%%)   bf16 / lanes %.2fx\n", sh[s].name, nk, T, r[0],
                   peak_f > 0 ? 100 * r[0] / peak_f : 0, r[1], pk1 > 0 ? 100 * r[1] / pk1 : 0, r[2],
                   peak_bf > 0 ? 100 * r[2] / peak_bf : 0, r[3], peak_bf > 0 ? 100 * r[3] / peak_bf : 0, r[1] / r[2]);
            free(x);
            free(y);
        }
        free(w);
    }
    printf("(percentages: of the bare loops' FLOP/cycle above -- vfmadd231ps for f32 mode, tdpbf16ps for bf16 on AMX, "
           "vdpbf16ps for the rest)\n");
    mm_work_free(wk);
    return 0;
}

/* --stages: the 1.1B model's prefill on one thread, each stage as FLOP per core cycle (thread CPU
 * time x the clock measured before and after; the fewest cycles of reps runs, per stage that run's
 * split). FLOPs per layer: QKV 2 T D (Hd + 2 Gd), attention 4 H hd T(T+1)/2 (causal QK^T and PV),
 * o_proj 2 T D Hd, MLP 6 T D FF; rest: embeddings, the last layer's MLP, final norm, LM head of the
 * last token. */
static int bench_stages(const char *dir, int reps) {
    setenv("ATTNLAB_THREADS", "1", 1);
    openblas_set_num_threads(1);
    prof_clock = cpu_now;
    Model *m = NULL;
    Forward *f = NULL;
    if (model_open(dir, &m) != AL_OK || fwd_new(m, NULL, &f) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
    const Shape *S = &llama1b;
    double D = S->D, Hd = S->H * S->HD, Gd = S->G * S->HD, FF = S->FF, L = S->L;
    size_t Ts[] = {128, 512};
    int *ids = malloc(512 * sizeof *ids);
    float *z = malloc(fwd_vocab(f) * sizeof *z);
    for (size_t i = 0; i < 512; i++) ids[i] = (int)((i * 2654435761u) % (fwd_vocab(f) - 3)) + 3;
    printf("llama-1.1B (%s), prefill on one thread, FLOP per core cycle by stage (fewest cycles of %d runs):\n", dir, reps);
    for (int c = 0; c < 3; c++) {                   /* f32, bf16, bf16 on the 4 x 6 dot tiles */
        fwd_set_compute(f, c ? MM_BF16 : MM_F32);
        mm_token_lanes(c != 2);
        time_prefill(f, ids, 16, z, NULL);
        for (size_t i = 0; i < 2; i++) {
            double T = (double)Ts[i], best = 1e30, hz = 0;
            Prof p = {0};
            for (int r = 0; r < reps; r++) {
                Prof q = {0};
                double h0 = clock_hz(), d = time_prefill(f, ids, Ts[i], z, &q), h1 = clock_hz(), h = h0 > h1 ? h0 : h1;
                if (d * h < best * hz || r == 0) { best = d; hz = h; p = q; }
            }
            double fl[ST_N] = {L * 2 * T * D * (Hd + 2 * Gd), 0, L * 4 * S->H * S->HD * T * (T + 1) / 2, L * 2 * T * D * Hd,
                               (L - 1) * 6 * T * D * FF};
            double tot = 0, flt = 0;
            printf("  %-9s T=%-4.0f %6.2f Gcycles  %6.1f tok/s at %.2f GHz:", c == 2 ? "bf16 dot" : mm_compute_name(c ? MM_BF16 : MM_F32), T,
                   best * hz / 1e9, T / best, hz / 1e9);
            for (int s = 0; s < ST_N; s++) {
                tot += p.acc[s];
                flt += fl[s];
                if (s == ST_ROPE) printf(" %s %.0f%%;", stage_name[s], 100 * p.acc[s] / best);
                else printf(" %s %.0f%% %.1f FLOP/c;", stage_name[s], 100 * p.acc[s] / best, fl[s] / (p.acc[s] * hz));
            }
            double rest = 6 * T * D * FF + 2 * D * S->V;
            printf(" rest %.0f%% %.1f FLOP/c; all %.1f FLOP/c\n", 100 * (best - tot) / best, rest / ((best - tot) * hz),
                   (flt + rest) / (best * hz));
        }
    }
    mm_token_lanes(true);
    printf("  (bf16 dot: bf16 mode on the 4 x 6 dot-product tiles, the kernel before the token-lane tiles)\n");
    free(ids);
    free(z);
    fwd_free(f);
    model_free(m);
    return 0;
}

/* ================================================================ the 8B model: memory */

static long vm_hwm_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long hwm = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) hwm = atol(line + 6);
    if (f) fclose(f);
    return hwm;
}

/* Child: `ppl` or `calibrate` (2 windows / sequences of 64 tokens) on dir; prints the result and VmHWM. */
static int child(const char *what, const char *dir) {
    Model *m = NULL;
    Forward *f = NULL;
    double t0 = now_s();
    if (model_open(dir, &m) != AL_OK || fwd_new(m, NULL, &f) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
    size_t n = 128, V = fwd_vocab(f);
    int *ids = malloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++) ids[i] = (int)((i * 2654435761u) % (V - 3)) + 3;
    int rc;
    if (!strcmp(what, "ppl")) {
        FwdPpl p;
        rc = fwd_ppl(f, ids, n, 64, &p);
        printf("%.17g ", exp(p.nll));
    } else {
        CalibShape sh;
        CalibStats *st = NULL;
        rc = calib_shape_of(m, &sh);
        if (rc == AL_OK) rc = calib_new(&sh, true, &st);
        if (rc == AL_OK) rc = calib_run(st, f, ids, 2, 64);
        printf("- ");
        calib_free(st);
    }
    printf("%ld %.1f %s\n", vm_hwm_kb(), now_s() - t0, fwd_streaming(f) ? "streamed" : "mapped");
    if (rc != AL_OK) fprintf(stderr, "%s\n", al_errmsg());
    free(ids);
    fwd_free(f);
    model_free(m);
    return rc != AL_OK;
}

/* Writes the model S into dir unless dir has a config.json already (then reuses it); what is written
 * is said as "wrote WHAT in N s". 0 on success. The one "write unless there" of every writer below. */
static int write_unless_there(const char *dir, const Shape *S, const char *what) {
    struct stat sb;
    char *cfg = al_asprintf("%s/config.json", dir);
    bool have = cfg && stat(cfg, &sb) == 0;
    free(cfg);
    if (have) return 0;
    double t0 = now_s();
    if (write_llama(dir, S) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
    printf("wrote %s in %.1f s\n", what, now_s() - t0);
    return 0;
}

/* Runs this program in child mode; prints its line. */
static void run_child(const char *what, const char *dir, const char *label) {
    char self[4096], cmd[8400], line[512] = "";
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) return;
    self[sl] = 0;
    snprintf(cmd, sizeof cmd, "'%s' --child %s '%s'", self, what, dir);
    FILE *p = popen(cmd, "r");
    if (p && fgets(line, sizeof line, p)) {
        char res[64];
        long kb = 0;
        double sec = 0;
        char mode[32] = "";
        if (sscanf(line, "%63s %ld %lf %31s", res, &kb, &sec, mode) == 4)
            printf("  %-10s %-28s %s%s  peak RSS (VmHWM) %.2f GB  (%.1f s, %s)\n", what, label, strcmp(res, "-") ? "ppl " : "",
                   strcmp(res, "-") ? res : "", (double)kb / 1048576.0, sec, mode);
        else printf("  %s %s: %s", what, label, line);
    }
    if (p) pclose(p);
}

static int bench_8b(const char *given) {
    char tmpl[] = "/tmp/attnlab-bench-8b-XXXXXX";
    char *dir = given ? al_strdup(given) : NULL;
    if (!dir) {
        if (!mkdtemp(tmpl)) { perror("mkdtemp"); return 1; }
        dir = al_asprintf("%s/llama8b", tmpl);
    }
    if (write_unless_there(dir, &llama8b, "a Llama-3-8B-shaped BF16 checkpoint (layers 2-31 add zero)")) return 1;
    /* the same files as a 2-layer model: a folder of links and a config of 2 layers */
    char *two = al_asprintf("%s-2layers", dir), *cmd = al_asprintf("mkdir -p '%s' && ln -sf '%s'/*.safetensors '%s'/model.safetensors.index.json '%s'/",
                                                                  two, dir, dir, two);
    if (system(cmd) != 0 || write_config(two, &llama8b, 2) != AL_OK) { fprintf(stderr, "cannot make %s\n", two); return 1; }
    printf("Llama-3-8B shape, BF16 (%s), 2 windows of 64 tokens; layers 2-31 compute and add 0, so ppl must equal the "
           "2-layer model's:\n", dir);
    run_child("ppl", dir, "32 layers (16 GB)");
    run_child("ppl", two, "2 layers, same files");
    run_child("calibrate", dir, "32 layers (16 GB)");
    free(cmd);
    if (!given) {
        cmd = al_asprintf("rm -rf '%s'", tmpl);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpl);
        free(cmd);
    } else {
        cmd = al_asprintf("rm -rf '%s'", two);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", two);
        free(cmd);
    }
    free(two);
    free(dir);
    return 0;
}

/* Writes the synthetic 1.1B model into dir unless it is there (its config.json); 0 on success. */
static int write_1b(const char *dir) { return write_unless_there(dir, &llama1b, "the synthetic Llama-1.1B (BF16)"); }

/* ================================================================ decode against its floor */

typedef struct {
    const uint8_t **p;       /* chunks of the weights' mapped bytes */
    size_t *n;
    uint64_t sums[64];
} ReadJob;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx512f"))) static uint64_t sum_bytes(const uint8_t *p, size_t n) {
    __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a = _mm512_add_epi64(a, _mm512_loadu_si512((const void *)(p + i)));
        b = _mm512_add_epi64(b, _mm512_loadu_si512((const void *)(p + i + 64)));
    }
    uint64_t s = (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(a, b));
    for (; i < n; i++) s += p[i];
    return s;
}
#else
static uint64_t sum_bytes(const uint8_t *p, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i += 8) s += p[i];
    return s;
}
#endif

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int read_unit(size_t i, int worker, void *ud) {
    ReadJob *j = ud;
    j->sums[worker] += sum_bytes(j->p[i], j->n[i]);
    return AL_OK;
}

/* The floor: seconds (best of reps) to read every tensor of m but the embeddings once, from the
 * mapping, in 4 MB chunks on the pool; *bytes their size. */
static double read_weights_s(Model *m, int reps, size_t *bytes, double *cpu) {
    const Store *st = m->store;
    size_t cap = 0, nc = 0;
    ReadJob j = {0};
    *bytes = 0;
    for (size_t t = 0; t < store_count(st); t++) {
        const char *name = store_name_at(st, t);
        const st_entry *e;
        const st_file *f;
        if (strstr(name, "embed_tokens") || store_entry(st, name, &e, &f) != AL_OK) continue;
        const uint8_t *d = st_data(f, e);
        for (size_t o = 0; o < e->end - e->begin; o += (size_t)4 << 20) {
            if (nc == cap) {
                cap = cap ? 2 * cap : 1024;
                j.p = realloc(j.p, cap * sizeof *j.p);
                j.n = realloc(j.n, cap * sizeof *j.n);
            }
            j.p[nc] = d + o;
            j.n[nc++] = e->end - e->begin - o < ((size_t)4 << 20) ? e->end - e->begin - o : (size_t)4 << 20;
        }
        *bytes += e->end - e->begin;
    }
    double best = 1e30;
    *cpu = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s(), c0 = cpu_s();
        if (pool_run(nc, al_threads(), read_unit, &j) != AL_OK) break;
        double dt = now_s() - t0, dc = cpu_s() - c0;
        best = dt < best ? dt : best;
        *cpu = dc < *cpu ? dc : *cpu;
    }
    free(j.p);
    free(j.n);
    return best;
}

/* Greedy decode of n tokens after the prompt ids (P of them): wall seconds, the process's CPU seconds
 * into *cpu; the tokens into out. */
static double decode_run(Forward *f, const int *ids, size_t P, size_t n, float *z, int *out, double *cpu) {
    fwd_reset(f);
    if (fwd_run(f, ids, P, FWD_LOGITS_LAST, z) != AL_OK) { fprintf(stderr, "prefill: %s\n", al_errmsg()); exit(1); }
    double t0 = now_s(), c0 = cpu_s();
    for (size_t i = 0; i < n; i++) {
        size_t best = 0;
        for (size_t k = 1; k < fwd_vocab(f); k++)
            if (z[k] > z[best]) best = k;
        out[i] = (int)best;
        if (fwd_run(f, &out[i], 1, FWD_LOGITS_LAST, z) != AL_OK) { fprintf(stderr, "decode: %s\n", al_errmsg()); exit(1); }
    }
    *cpu = cpu_s() - c0;
    return now_s() - t0;
}

static void print_load(const char *when) {
    char buf[128] = "?";
    FILE *la = fopen("/proc/loadavg", "r");
    if (la && fgets(buf, sizeof buf, la)) buf[strcspn(buf, "\n")] = 0;
    if (la) fclose(la);
    printf("load average %s: %s (%ld CPUs)\n", when, buf, sysconf(_SC_NPROCESSORS_ONLN));
}

/* Bytes of m's routed experts (tensors named ".experts.": gpt-oss's stacked weights and biases) among all. */
static size_t expert_bytes(const Model *m) {
    size_t b = 0;
    for (size_t t = 0; t < store_count(m->store); t++) {
        const st_entry *e;
        const st_file *f;
        const char *name = store_name_at(m->store, t);
        if (strstr(name, ".experts.") && store_entry(m->store, name, &e, &f) == AL_OK) b += e->end - e->begin;
    }
    return b;
}

/* One decode configuration: the compute mode, and the kernels before (old) or now. Dense models compare the
 * one-token kernels with the tiles before them (mm_matvec); MoE models the experts' x @ W read in place with each
 * expert widened whole before its sgemm (mm_xw_in_place). */
static void decode_config(Forward *f, int c, bool moe) {
    fwd_set_compute(f, c < 2 ? MM_F32 : MM_BF16);
    if (moe) mm_xw_in_place(c % 2 == 0);
    else mm_matvec(c % 2 == 0);
}

static int bench_decode(const char *dir, size_t n, int reps) {
    Model *m = NULL;
    Forward *f = NULL;
    if (model_open(dir, &m) != AL_OK || fwd_new(m, NULL, &f) != AL_OK) { fprintf(stderr, "%s: %s\n", dir, al_errmsg()); return 1; }
    enum { P = 128 };
    size_t V = fwd_vocab(f), bytes = 0, E = (size_t)m->cfg.moe.n_experts, k = (size_t)m->cfg.moe.top_k;
    bool moe = E > 0 && k > 0 && expert_bytes(m) > 0;
    int ids[P], *tok = malloc(4 * n * sizeof *tok);
    float *z = malloc(V * sizeof *z);
    for (size_t i = 0; i < P; i++) ids[i] = (int)((i * 2654435761u) % (V - 3)) + 3;
    print_load("at start");
    double rc = 0, rd = read_weights_s(m, reps + 2, &bytes, &rc);
    size_t ex = moe ? expert_bytes(m) : 0, active = bytes - ex + ex / E * k;   /* a token reads k of E experts */
    double floor = (double)bytes / rd / (double)active, fcpu = rc * (double)active / (double)bytes;
    printf("%s: %d threads; read bandwidth: %.3f GB (all but the embeddings) read once from the mapping in %.4f s "
           "wall, %.4f CPU s (%.1f GB/s, best of %d)\n", dir, al_threads(), (double)bytes / 1e9, rd, rc,
           (double)bytes / rd / 1e9, reps + 2);
    if (moe)
        printf("  the floor: %.3f GB per token (all but the embeddings and %zu of %zu experts: %.3f GB of them) -> "
               "%.1f tok/s\n", (double)active / 1e9, E - k, E, (double)ex / 1e9, floor);
    else printf("  the floor: every weight once per token -> %.1f tok/s\n", floor);
    double best[4] = {1e30, 1e30, 1e30, 1e30}, bcpu[4] = {1e30, 1e30, 1e30, 1e30}, cpu;
    static const char *dense[4] = {"f32  one-token kernels", "f32  tiles (before)", "bf16 one-token kernels",
                                   "bf16 tiles (before)"};
    static const char *moes[4] = {"f32  experts in place", "f32  experts widened", "bf16 experts in place",
                                  "bf16 experts widened"};
    const char *const *what = moe ? moes : dense;
    for (int c = 0; c < 4; c++) {                                     /* warm-up of each */
        decode_config(f, c, moe);
        decode_run(f, ids, P, 4, z, tok + (size_t)c * n, &cpu);
    }
    for (int r = 0; r < reps; r++)
        for (int c = 0; c < 4; c++) {
            decode_config(f, c, moe);
            double d = decode_run(f, ids, P, n, z, tok + (size_t)c * n, &cpu);
            best[c] = d < best[c] ? d : best[c];
            bcpu[c] = cpu < bcpu[c] ? cpu : bcpu[c];
        }
    mm_matvec(true);
    mm_xw_in_place(true);
    for (int c = 0; c < 4; c++)
        printf("  decode %-25s %zu tokens after %d: %.3f s  %6.2f tok/s  (%.2fx the floor)  CPU %.3f s/token (%.2fx the "
               "floor's)\n", what[c], n, P, best[c], (double)n / best[c], (double)n / best[c] / floor, bcpu[c] / (double)n,
               bcpu[c] / (double)n / fcpu);
    for (int c = 0; c < 4; c += 2)
        printf("  %s: %s: speed %.2fx, CPU %.2fx; greedy tokens %s\n", c ? "bf16" : "f32 ",
               moe ? "experts in place / widened" : "one-token kernels / tiles", best[c + 1] / best[c], bcpu[c] / bcpu[c + 1],
               memcmp(tok + (size_t)c * n, tok + (size_t)(c + 1) * n, n * sizeof *tok) ? "DIFFER" : "identical");
    print_load("at end");
    free(tok);
    free(z);
    fwd_free(f);
    model_free(m);
    return 0;
}

/* --write-shape scaled|8b|70b DIR [LAYERS]: bench_pipeline.sh's model (unless DIR has a config.json). */
static int write_shape(const char *name, const char *dir, int layers) {
    Shape S = !strcmp(name, "8b") ? pipe_8b : !strcmp(name, "70b") ? pipe_70b : pipe_scaled;
    if (strcmp(name, "8b") && strcmp(name, "70b") && strcmp(name, "scaled")) {
        fprintf(stderr, "--write-shape: scaled, 8b or 70b, not '%s'\n", name);
        return 1;
    }
    if (layers > 0) S.L = layers;
    char what[160];
    snprintf(what, sizeof what, "a %s-shaped Llama (BF16, %d layers, hidden %d, %d heads, %d KV heads, MLP %d)", name, S.L,
             S.D, S.H, S.G, S.FF);
    return write_unless_there(dir, &S, what);
}

int main(int argc, char **argv) {
    if (argc > 3 && !strcmp(argv[1], "--write-shape")) return write_shape(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 0);
    if (argc > 3 && !strcmp(argv[1], "--child")) return child(argv[2], argv[3]);
    if (argc > 1 && !strcmp(argv[1], "--llama8b")) return bench_8b(argc > 2 ? argv[2] : NULL);
    if (argc > 2 && !strcmp(argv[1], "--write-llama1b")) return write_1b(argv[2]);
    if (argc > 2 && !strcmp(argv[1], "--decode"))
        return bench_decode(argv[2], argc > 3 ? (size_t)atoi(argv[3]) : 64, argc > 4 ? atoi(argv[4]) : 3);
    if (argc > 1 && !strcmp(argv[1], "--kernels")) return bench_kernels(argc > 2 ? atoi(argv[2]) : 7);
    if (argc > 2 && !strcmp(argv[1], "--stages")) return bench_stages(argv[2], argc > 3 ? atoi(argv[3]) : 3);
    const char *models = getenv("ATTNLAB_MODELS");
    char *stories = al_asprintf("%s/stories260K/stories260K.bin", models ? models : "tests/models");
    struct stat sb;
    printf("vdpbf16ps: %s\n", mm_have_bf16() ? "yes" : "no (bf16 mode takes the portable route)");
    if (stat(stories, &sb) == 0) {
        size_t Ts[] = {256, 512};
        bench_model("stories260K", stories, Ts, 2, 256, false);
    } else
        printf("stories260K: not found at %s (set ATTNLAB_MODELS)\n", stories);
    free(stories);
    if (argc > 1 && strcmp(argv[1], "-") == 0) return 0;
    const char *cache = getenv("ATTNLAB_CACHE");
    char *dir = argc > 1 ? al_strdup(argv[1]) : al_asprintf("%s/bench-llama-1b", cache ? cache : "/tmp/attnlab");
    if (!cache && argc <= 1) mkdir("/tmp/attnlab", 0755);
    if (write_1b(dir) != 0) return 1;
    size_t Ts[] = {128, 512};
    bench_model("llama-1.1B (synthetic, TinyLlama shapes)", dir, Ts, 2, 16, true);
    free(dir);
    return 0;
}
