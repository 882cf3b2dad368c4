/* test_pool.c -- core/linalg/pool.c, the persistent workers of matmul's products: every unit runs
 * once per run over many runs on the same threads (their kernel thread ids do not change: no thread
 * is started per run); worker indices stay below the run's thread count when it shrinks after a
 * larger run, and the pool grows when one asks for more; the first error's message comes back; an
 * interrupt (the flag set before a run, or by a unit during one) stops the run, and the next run
 * after it is whole; a run from inside a unit, and runs from two threads at once, fall back to
 * sweep_run and stay correct; the OpenBLAS thread count is restored; pool_stop joins the workers
 * and a later run starts them again; matmul's products (mm_xwt) give the same bits on 1-4 workers,
 * before and after an interrupted product, in both modes; greedy decoding (generate's loop: one
 * fwd_run of one token per step through the KV cache) of a Llama checkpoint whose one-token products
 * reach the pool gives the same tokens and the same logits bit for bit on 1, 2 and 3 threads, on the
 * pool and with threads started per product (mm_pool(false): the dispatch before the pool), in both
 * modes, and the same tokens (logits to float rounding) on the one-token kernels and on the tiles
 * before them (mm_matvec(false)). */
#define _GNU_SOURCE
#include "check.h"
#include "forward.h"
#include "matmul.h"
#include "matmul_internal.h"
#include "model.h"
#include "pool.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NU 200

typedef struct {
    atomic_int hits[NU];
    atomic_int bad_worker;
    int nthreads;            /* workers must be below this */
    atomic_long tids[64];    /* kernel thread ids seen */
    atomic_int ntid;
    long interrupt_at;       /* unit that sets the interrupt flag (-1: none) */
    long fail_at;
} Job;

static void note_tid(Job *j) {
    long me = (long)syscall(SYS_gettid);
    int n = atomic_load(&j->ntid);
    for (int i = 0; i < n && i < 64; i++)
        if (atomic_load(&j->tids[i]) == me) return;
    int k = atomic_fetch_add(&j->ntid, 1);
    if (k < 64) atomic_store(&j->tids[k], me);
}

static int unit(size_t i, int worker, void *ud) {
    Job *j = ud;
    if (worker < 0 || worker >= j->nthreads) atomic_store(&j->bad_worker, 1);
    atomic_fetch_add(&j->hits[i], 1);
    note_tid(j);
    if ((long)i == j->interrupt_at) al_interrupt_flag = 1;
    if ((long)i == j->fail_at) return al_err("unit %zu failed on purpose", i);
    volatile double s = 0;               /* a little work, so the workers share the units */
    for (int k = 0; k < 2000; k++) s += k * 0.5;
    return AL_OK;
}

static void job_reset(Job *j, int nthreads) {
    for (int i = 0; i < NU; i++) atomic_store(&j->hits[i], 0);
    atomic_store(&j->bad_worker, 0);
    j->nthreads = nthreads;
    j->interrupt_at = j->fail_at = -1;
}

static int count_hits(Job *j, int *twice) {
    int n = 0;
    *twice = 0;
    for (int i = 0; i < NU; i++) {
        int h = atomic_load(&j->hits[i]);
        n += h > 0;
        *twice += h > 1;
    }
    return n;
}

/* Many runs on 2, then 4, then 2, then 3 threads: all units once, workers in range, threads kept. */
static void test_runs(void) {
    static Job j;
    static const int ts[] = {2, 4, 2, 3, 1};
    int blas = openblas_get_num_threads();
    atomic_store(&j.ntid, 0);
    for (size_t s = 0; s < sizeof ts / sizeof *ts; s++)
        for (int r = 0; r < 50; r++) {
            job_reset(&j, ts[s]);
            CHECK_OK(pool_run(NU, ts[s], unit, &j));
            int twice, n = count_hits(&j, &twice);
            if (n != NU || twice || atomic_load(&j.bad_worker))
                CHECK(0, "run %d on %d threads: %d of %d units ran, %d twice, worker out of range %d", r, ts[s], n, NU,
                      twice, atomic_load(&j.bad_worker));
        }
    CHECK(pool_workers() == 3, "the pool grew to 3 workers for the 4-thread runs and kept them (%d)", pool_workers());
    CHECK(atomic_load(&j.ntid) <= 4, "250 runs ran on at most 4 kernel threads (the caller + 3 kept workers): %d",
          atomic_load(&j.ntid));
    CHECK(openblas_get_num_threads() == blas, "BLAS thread count restored (%d vs %d)", openblas_get_num_threads(), blas);
}

static void test_errors_and_interrupts(void) {
    static Job j;
    job_reset(&j, 2);
    j.fail_at = 37;
    CHECK_ERR(pool_run(NU, 2, unit, &j), "unit 37 failed on purpose");
    job_reset(&j, 2);
    al_interrupt_flag = 1;
    CHECK(pool_run(NU, 2, unit, &j) == AL_INTERRUPTED, "an interrupt before the run stops it");
    int twice;
    CHECK(count_hits(&j, &twice) == 0, "no unit ran after the interrupt");
    al_interrupt_flag = 0;
    job_reset(&j, 2);
    j.interrupt_at = 20;
    CHECK(pool_run(NU, 2, unit, &j) == AL_INTERRUPTED, "a unit's interrupt stops the run");
    int ran = count_hits(&j, &twice);
    CHECK(ran < NU && ran > 20 - 1, "the interrupted run ran %d of %d units", ran, NU);
    al_interrupt_flag = 0;
    for (int t = 2; t <= 4; t++) {                 /* the pool survives it, at every thread count */
        job_reset(&j, t);
        CHECK_OK(pool_run(NU, t, unit, &j));
        CHECK(count_hits(&j, &twice) == NU && !twice, "after the interrupt, a %d-thread run runs every unit once", t);
    }
}

/* A unit that runs a pool of its own (the pool is busy: sweep_run). */
static int nested_unit(size_t i, int worker, void *ud) {
    (void)worker;
    Job *inner = ud;
    if (i == 0) return pool_run(NU, 2, unit, inner);
    return AL_OK;
}

static void *other_thread(void *p) {
    Job *j = p;
    int ok = 1;
    for (int r = 0; r < 30 && ok; r++) {
        job_reset(j, 2);
        int twice;
        ok = pool_run(NU, 2, unit, j) == AL_OK && count_hits(j, &twice) == NU && !twice;
    }
    return (void *)(intptr_t)ok;
}

static void test_nested_and_concurrent(void) {
    static Job inner, a, b;
    job_reset(&inner, 2);
    CHECK_OK(pool_run(4, 2, nested_unit, &inner));
    int twice;
    CHECK(count_hits(&inner, &twice) == NU && !twice, "a run inside a unit runs every unit once");
    pthread_t th;
    pthread_create(&th, NULL, other_thread, &a);
    void *r1 = other_thread(&b), *r2 = NULL;
    pthread_join(th, &r2);
    CHECK(r1 && r2, "runs from two threads at once: every unit once (%d, %d)", r1 != NULL, r2 != NULL);
}

static void test_stop(void) {
    static Job j;
    pool_stop();
    CHECK(pool_workers() == 0, "pool_stop joins the workers");
    job_reset(&j, 3);
    CHECK_OK(pool_run(NU, 3, unit, &j));
    int twice;
    CHECK(count_hits(&j, &twice) == NU && pool_workers() == 2, "a run after pool_stop starts the workers again (%d)",
          pool_workers());
}

/* mm_xwt's results do not depend on the number of workers (each output is one unit's, summed in one
 * order) nor on an interrupted product before, and products use the pool. */
static void test_matmul(void) {
    const size_t N = 1000, K = 1536;
    uint16_t *w = malloc(N * K * 2);
    float *x = malloc(17 * K * sizeof *x), *y0 = malloc(17 * N * sizeof *y0), *y = malloc(17 * N * sizeof *y);
    for (size_t i = 0; i < N * K; i++) w[i] = dt_f32_to_bf16((float)((int)(i * 2654435761u % 2001) - 1000) * 1e-4f);
    for (size_t i = 0; i < 17 * K; i++) x[i] = (float)((int)(i * 40503u % 2001) - 1000) * 1e-3f;
    WMat W = {.dt = DT_BF16, .data = w, .rows = N, .cols = K};
    static const size_t Ts[] = {1, 3, 17};
    for (int m = 0; m < 2; m++)
        for (size_t t = 0; t < 3; t++) {
            size_t T = Ts[t];
            MmWork *one = mm_work_new(1);
            CHECK_OK(mm_xwt(one, &W, x, K, T, y0, N, m ? MM_BF16 : MM_F32));
            mm_work_free(one);
            for (int nt = 2; nt <= 4; nt++) {
                MmWork *wk = mm_work_new(nt);
                al_interrupt_flag = 1;
                int rc = mm_xwt(wk, &W, x, K, T, y, N, m ? MM_BF16 : MM_F32);
                al_interrupt_flag = 0;
                CHECK(rc == AL_INTERRUPTED, "T %zu on %d workers: an interrupted product says so (%d)", T, nt, rc);
                bool same = true;
                for (int r = 0; r < 5; r++) {
                    memset(y, 0xff, T * N * sizeof *y);
                    CHECK_OK(mm_xwt(wk, &W, x, K, T, y, N, m ? MM_BF16 : MM_F32));
                    same &= memcmp(y, y0, T * N * sizeof *y) == 0;
                }
                CHECK(same, "%s mode, T %zu: %d workers give one worker's bits, 5 times after an interrupt",
                      m ? "bf16" : "f32", T, nt);
                mm_work_free(wk);
            }
        }
    CHECK(pool_workers() >= 3, "the products ran on the pool (%d workers)", pool_workers());
    free(w); free(x); free(y0); free(y);
}

/* ================================================================ greedy decoding */

/* A Llama checkpoint of 2 layers, hidden 512 (8 heads of 64, 2 KV heads), MLP 1024, vocab 1000, BF16:
 * its one-token products are 2^18 multiply-adds and more (the pool's threshold). */
static void write_llama(const char *dir) {
    static const struct { const char *name; size_t r, c; float scale, off; } t[] = {
        {"input_layernorm.weight", 1, 512, 0.05f, 1}, {"post_attention_layernorm.weight", 1, 512, 0.05f, 1},
        {"self_attn.q_proj.weight", 512, 512, 0.05f, 0}, {"self_attn.k_proj.weight", 128, 512, 0.05f, 0},
        {"self_attn.v_proj.weight", 128, 512, 0.05f, 0}, {"self_attn.o_proj.weight", 512, 512, 0.05f, 0},
        {"mlp.gate_proj.weight", 1024, 512, 0.05f, 0}, {"mlp.up_proj.weight", 1024, 512, 0.05f, 0},
        {"mlp.down_proj.weight", 512, 1024, 0.04f, 0}};
    static const struct { const char *name; size_t r, c; float scale, off; } g[] = {
        {"model.embed_tokens.weight", 1000, 512, 0.5f, 0}, {"lm_head.weight", 1000, 512, 0.1f, 0},
        {"model.norm.weight", 1, 512, 0.05f, 1}};
    st_writer *w = st_writer_new();
    unsigned long long r = 0x2545F4914F6CDD1Dull;
    char name[128];
    for (int L = -1; L < 2; L++)
        for (size_t i = 0; i < (L < 0 ? 3u : 9u); i++) {
            size_t rows = L < 0 ? g[i].r : t[i].r, cols = L < 0 ? g[i].c : t[i].c;
            float sc = L < 0 ? g[i].scale : t[i].scale, off = L < 0 ? g[i].off : t[i].off;
            if (L < 0) snprintf(name, sizeof name, "%s", g[i].name);
            else snprintf(name, sizeof name, "model.layers.%d.%s", L, t[i].name);
            Mat *m = mat_new(rows, cols);
            for (size_t k = 0; k < rows * cols; k++) {
                r ^= r << 13; r ^= r >> 7; r ^= r << 17;
                m->data[k] = off + sc * ((float)(r >> 40) / 8388608.f - 1.f);
            }
            CHECK_OK(st_writer_add_mat(w, name, DT_BF16, m));
            mat_free(m);
        }
    char *path = al_asprintf("%s/model.safetensors", dir);
    CHECK_OK(st_writer_write(w, path));
    free(path);
    st_writer_free(w);
    static const char cfg[] =
        "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 512, "
        "\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 64, "
        "\"intermediate_size\": 1024, \"vocab_size\": 1000, \"max_position_embeddings\": 256, "
        "\"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false}\n";
    path = al_asprintf("%s/config.json", dir);
    CHECK_OK(al_write_file_atomic(path, cfg, strlen(cfg)));
    free(path);
}

enum { DEC_P = 6, DEC_N = 24, DEC_V = 1000 };

/* generate's greedy loop on nthreads workers: the tokens, and every step's logits, into tok / z. */
static void decode(const char *dir, int nthreads, bool pool, mm_compute c, int *tok, float *z) {
    char nt[16];
    snprintf(nt, sizeof nt, "%d", nthreads);
    setenv("ATTNLAB_THREADS", nt, 1);
    mm_pool(pool);
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(dir, &m));
    CHECK_OK(fwd_new(m, NULL, &f));
    if (!f) { model_free(m); return; }
    fwd_set_compute(f, c);
    int ids[DEC_P] = {1, 17, 404, 999, 3, 256};
    CHECK_OK(fwd_run(f, ids, DEC_P, FWD_LOGITS_LAST, z));
    for (size_t i = 0; i < DEC_N; i++) {
        const float *zi = z + i * DEC_V;
        size_t best = 0;
        for (size_t k = 1; k < DEC_V; k++)
            if (zi[k] > zi[best]) best = k;
        tok[i] = (int)best;
        CHECK_OK(fwd_run(f, &tok[i], 1, FWD_LOGITS_LAST, z + (i + 1) * DEC_V));
    }
    fwd_free(f);
    model_free(m);
    mm_pool(true);
    unsetenv("ATTNLAB_THREADS");
}

static void test_decode(void) {
    char *dir = al_asprintf("%s/llama512", test_tmpdir());
    CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
    write_llama(dir);
    size_t zn = (DEC_N + 1) * DEC_V;
    int tok0[DEC_N], tok[DEC_N];
    float *z0 = malloc(zn * sizeof *z0), *z = malloc(zn * sizeof *z);
    for (int c = 0; c < 2; c++) {
        mm_compute mode = c ? MM_BF16 : MM_F32;
        decode(dir, 1, true, mode, tok0, z0);
        int distinct = 0;
        for (size_t i = 1; i < DEC_N; i++) distinct += tok0[i] != tok0[i - 1];
        CHECK(distinct > 3, "%s mode: the greedy tokens change (%d changes): a real decode", mm_compute_name(mode), distinct);
        static const struct { int threads; bool pool; } runs[] = {{2, true}, {3, true}, {2, false}, {2, true}};
        for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
            decode(dir, runs[r].threads, runs[r].pool, mode, tok, z);
            CHECK(memcmp(tok, tok0, sizeof tok) == 0 && memcmp(z, z0, zn * sizeof *z) == 0,
                  "%s mode, %d threads %s: the greedy tokens and every step's logits equal one thread's bit for bit",
                  mm_compute_name(mode), runs[r].threads, runs[r].pool ? "on the pool" : "started per product");
        }
    }
    for (int c = 0; c < 2; c++) {       /* the one-token kernels against the tiles they replaced */
        mm_compute mode = c ? MM_BF16 : MM_F32;
        decode(dir, 2, true, mode, tok0, z0);
        mm_matvec(false);
        decode(dir, 2, true, mode, tok, z);
        mm_matvec(true);
        CHECK(memcmp(tok, tok0, sizeof tok) == 0 && vec_rel_err(z0, z, zn) < 1e-5,
              "%s mode: the one-token kernels give the tiles' greedy tokens and their logits to float rounding (%.3g)",
              mm_compute_name(mode), vec_rel_err(z0, z, zn));
    }
    CHECK(pool_workers() >= 2, "the decode ran on the pool (%d workers)", pool_workers());
    free(z0);
    free(z);
    free(dir);
}

int main(void) {
    test_runs();
    test_errors_and_interrupts();
    test_nested_and_concurrent();
    test_stop();
    test_matmul();
    test_decode();
    return check_done();
}
