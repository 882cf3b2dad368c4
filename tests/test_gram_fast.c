/* test_gram_fast.c -- the fast route of the rank sweep (issue 18): the BF16 Gram kernel (and its
 * float fallback) against a double Gram of the same values within the float accumulation bound;
 * the FP8 block-scale path against double Grams of the dequantized values; gram_compute_fast
 * against gram_compute with its computed bound; and fast-route ranks, once certified, identical
 * to the double route's on every demo family (planted), other seeds, an R1-shaped layer and the
 * small real checkpoints, at several tau, on both kernel paths -- with the share of heads the
 * bound sends back to double small enough to matter; the AMX tiles (test_amx) against the same
 * bound and against the vdpbf16ps kernel, and their float accumulator (test_amx_acc) against its
 * own; the read-ahead into the page cache (test_prefetch) and past it, lent to the store
 * (test_direct). */
#define _GNU_SOURCE
#include "farr_internal.h"
#include "testutil.h"
#include "farr.h"
#include "gram.h"
#include "gram_ahead.h"
#include "gram_bf16.h"
#include "synth.h"

#include <cblas.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *tmp_root;

static Model *open_synth(const char *name, unsigned long seed) { return tu_open_synth(tmp_root, name, seed); }

/* ---------------------------------------------------------------- the kernel */

/* How kernel_case adds its chunks: one at a time into the double G, or through the AMX chunks'
 * float accumulator (gbf_chunk_bf16_acc, flushed every GBF_FLUSH chunks); and its data: normal
 * values (some 100x the rest), or graded, each chunk 2^12 or 2^24 larger or smaller than the one
 * before (the float accumulator adds small chunks to large sums). */
typedef enum { KC_CHUNKS, KC_ACC } kc_add;

/* B (n x k) of BF16 values (some exactly representable spread), packed for both paths over
 * chunks of GBF_CHUNK rows, with and without scales, against a double Gram of the same values:
 * every entry within gamma sum_t |b_ti||b_tj| (times the scales); gamma gbf_gamma_acc(k) through
 * the accumulator. Returns the largest error over the bound's gamma sum. */
static double kernel_case_in(size_t n, size_t k, bool scaled, gbf_path path, kc_add add, bool graded) {
    size_t ld = gbf_ld(k);
    uint16_t *B = malloc(n * k * sizeof(uint16_t));
    float *s = malloc(k * sizeof(float));
    double *G = calloc(k * k, sizeof(double)), *D = calloc(k * k, sizeof(double)), *A = calloc(k * k, sizeof(double));
    static const double grade[4] = {1, 0x1p12, 0x1p-12, 0x1p24};
    for (size_t i = 0; i < n * k; i++)
        B[i] = dt_f32_to_bf16((float)(nrand() * (i % 7 == 0 ? 100 : 1) * (graded ? grade[i / k / GBF_CHUNK % 4] : 1)));
    for (size_t i = 0; i < k; i++) s[i] = scaled ? (float)(0.5 + urand()) : 1.0f;
    void *pack = calloc(GBF_CHUNK * ld, sizeof(float));
    GbfWork *w = add == KC_ACC ? gbf_work_new() : NULL;
    GbfAcc *acc = add == KC_ACC ? gbf_acc_new(k) : NULL;
    for (size_t c = 0; c < n; c += GBF_CHUNK) {
        size_t len = n - c < GBF_CHUNK ? n - c : GBF_CHUNK;
        memset(pack, 0, GBF_CHUNK * ld * sizeof(float));
        for (size_t t = 0; t < len; t++)
            for (size_t i = 0; i < k; i++) {
                uint16_t b = B[(c + t) * k + i];
                if (path == GBF_BF16) ((uint16_t *)pack)[((t >> 1) * ld + i) * 2 + (t & 1)] = b;
                else ((float *)pack)[t * ld + i] = dt_bf16_to_f32(b);
            }
        if (add == KC_ACC) gbf_chunk_bf16_acc(w, acc, pack, NULL, (len + 1) / 2, k, scaled ? s : NULL, G);
        else if (path == GBF_BF16) gbf_chunk_bf16(pack, (len + 1) / 2, k, scaled ? s : NULL, G);
        else gbf_chunk_f32(pack, len, k, scaled ? s : NULL, G);
    }
    gbf_acc_flush(acc, G);
    for (size_t t = 0; t < n; t++)
        for (size_t i = 0; i < k; i++)
            for (size_t j = i; j < k; j++) {
                double x = (double)dt_bf16_to_f32(B[t * k + i]) * s[i], y = (double)dt_bf16_to_f32(B[t * k + j]) * s[j];
                D[i * k + j] += x * y;
                A[i * k + j] += fabs(x * y);
            }
    int bad = 0;
    double worst = 0, gam = add == KC_ACC ? gbf_gamma_acc(k) : gbf_gamma(path);
    for (size_t i = 0; i < k; i++)
        for (size_t j = i; j < k; j++) {
            double e = fabs(G[i * k + j] - D[i * k + j]);
            bad += !(e <= gam * A[i * k + j] * (1 + 1e-9) + 1e-300);
            if (A[i * k + j] > 0) worst = fmax(worst, e / A[i * k + j]);
        }
    CHECK(bad == 0, "%s kernel%s n %zu k %zu%s%s: %d entries outside gamma %.2e (worst %.2e)",
          path == GBF_BF16 ? "BF16" : "float", add == KC_ACC ? " (float accumulator)" : "", n, k,
          scaled ? " scaled" : "", graded ? " graded" : "", bad, gam, worst);
    CHECK(worst > 0 || n * k < 1000, "the kernel did something");
    free(B); free(s); free(G); free(D); free(A); free(pack);
    gbf_work_free(w);
    gbf_acc_free(acc);
    return worst;
}

static void kernel_case(size_t n, size_t k, bool scaled, gbf_path path) {
    kernel_case_in(n, k, scaled, path, KC_CHUNKS, false);
}

/* Two BF16 pairs equal, half by half (any NaN matching any NaN). */
static bool same_bf16x2(uint32_t a, uint32_t b) {
    for (int h = 0; h < 2; h++) {
        uint16_t x = (uint16_t)(a >> 16 * h), y = (uint16_t)(b >> 16 * h);
        if (x != y && !(isnan(dt_bf16_to_f32(x)) && isnan(dt_bf16_to_f32(y)))) return false;
    }
    return true;
}

/* The vectorized packing against the scalar layout, every E4M3 code and BF16 values, odd and
 * even shapes: pairs of a column Gram's rows, and a row Gram's chunk transposed. */
static void test_packing(void) {
    static const size_t shapes[][2] = {{1, 1}, {5, 3}, {16, 32}, {33, 17}, {128, 128}, {100, 127}, {192, 64}};
    const uint16_t *tb = gbf_e4m3_bf16();
    int bad = 0;
    for (int fp8 = 0; fp8 < 2; fp8++)
        for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
            size_t k = shapes[c][0], n = shapes[c][1], ld = gbf_ld(k), es = fp8 ? 1 : 2, stride = n + 3;
            uint8_t *src = malloc(k * stride * es + 64);
            uint32_t *P = malloc(((n + 1) / 2) * ld * sizeof(uint32_t)), *row = malloc(ld * sizeof(uint32_t));
            for (size_t i = 0; i < k * stride * es; i++) src[i] = (uint8_t)(urand() * 256);
            /* the value of stored element (i, t) as BF16 bits */
#define VAL(i, t) (fp8 ? tb[src[(i) * stride + (t)]] : (uint16_t)(src[((i) * stride + (t)) * 2] | src[((i) * stride + (t)) * 2 + 1] << 8))
            gbf_pack_rows(src, stride * es, k, n, fp8, P);
            for (size_t t = 0; t < (n + 1) / 2; t++)
                for (size_t i = 0; i < ld; i++) {
                    uint32_t want = i >= k ? 0 : VAL(i, 2 * t) | (2 * t + 1 < n ? (uint32_t)VAL(i, 2 * t + 1) << 16 : 0);
                    bad += !same_bf16x2(P[t * ld + i], want);
                }
            /* rows 0 and 1 of the same data as pairs over n values (k := n) */
            size_t ldn = gbf_ld(n);
            uint32_t *pr = realloc(row, ldn * sizeof(uint32_t));
            if (pr) row = pr;
            gbf_pack_pairs(src, k > 1 ? src + stride * es : NULL, n, fp8, row);
            for (size_t i = 0; pr && i < ldn; i++) {
                uint32_t want = i >= n ? 0 : VAL(0, i) | (k > 1 ? (uint32_t)VAL(1, i) << 16 : 0);
                bad += !same_bf16x2(row[i], want);
            }
#undef VAL
            free(src); free(P); free(row);
        }
    CHECK(bad == 0, "vectorized BF16 packing: %d words differ from the scalar layout", bad);
}

static void test_kernel(void) {
    static const size_t shapes[][2] = {{1, 1}, {7, 5}, {128, 32}, {129, 33}, {300, 64}, {1000, 128}, {257, 192}};
    int paths = gbf_cpu_bf16() ? 2 : 1;
    if (paths == 1) printf("note: this CPU has no AVX-512 BF16; only the float path runs\n");
    for (int p = 0; p < paths; p++)
        for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
            for (int sc = 0; sc < 2; sc++) kernel_case(shapes[c][0], shapes[c][1], sc, p ? GBF_BF16 : GBF_FLOAT);
    const uint16_t *tb = gbf_e4m3_bf16();
    int bad = 0;
    for (int c = 0; c < 256; c++) {
        float v = dt_e4m3_to_f32((uint8_t)c);
        bad += isnan(v) ? !isnan(dt_bf16_to_f32(tb[c])) : dt_bf16_to_f32(tb[c]) != v;
    }
    CHECK(bad == 0, "E4M3 codes as BF16: %d differ", bad);
    if (paths == 2) test_packing();
}

/* The AMX tiles (tdpbf16ps): taken on a CPU that has them; within the bound on every shape, with
 * and without scales, on both sides of the vdpbf16ps kernel it replaces (and that kernel, with AMX
 * off, still within it); chunks wider than AMX's 256 columns (k 300) and odd pair counts included;
 * the two kernels' Grams of one chunk within twice the bound of each other. */
static void test_amx(void) {
    if (!gbf_amx_cpu()) { printf("note: no AMX-BF16 tiles on this CPU (or not granted); the AMX path is not run\n"); return; }
    CHECK(gbf_amx_now(), "the CPU has AMX-BF16 but gbf_chunk_bf16 does not use it");
    static const size_t shapes[][2] = {{7, 5}, {128, 128}, {129, 33}, {77, 100}, {300, 64}, {257, 192}, {256, 256}, {130, 300}};
    for (int on = 0; on < 2; on++) {
        gbf_amx_allow(on);
        for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
            for (int sc = 0; sc < 2; sc++) kernel_case(shapes[c][0], shapes[c][1], sc, GBF_BF16);
    }
    size_t k = 128, ld = gbf_ld(k), np = 64;
    uint32_t *P = calloc(np * ld, sizeof *P);
    double *G[2] = {calloc(k * k, sizeof(double)), calloc(k * k, sizeof(double))}, *A = calloc(k * k, sizeof(double));
    for (size_t t = 0; t < np; t++)
        for (size_t i = 0; i < k; i++)
            P[t * ld + i] = dt_f32_to_bf16((float)nrand()) | (uint32_t)dt_f32_to_bf16((float)nrand()) << 16;
    for (int on = 0; on < 2; on++) { gbf_amx_allow(on); gbf_chunk_bf16(P, np, k, NULL, G[on]); }
    for (size_t t = 0; t < np; t++)
        for (size_t i = 0; i < k; i++)
            for (size_t j = i; j < k; j++)
                for (int h = 0; h < 2; h++)
                    A[i * k + j] += fabs((double)dt_bf16_to_f32((uint16_t)(P[t * ld + i] >> 16 * h)) *
                                         dt_bf16_to_f32((uint16_t)(P[t * ld + j] >> 16 * h)));
    int bad = 0, differ = 0;
    for (size_t i = 0; i < k; i++)
        for (size_t j = i; j < k; j++) {
            double e = fabs(G[1][i * k + j] - G[0][i * k + j]);
            bad += !(e <= 2 * gbf_gamma(GBF_BF16) * A[i * k + j] * (1 + 1e-9));
            differ += e > 0;
        }
    CHECK(bad == 0, "AMX and vdpbf16ps Grams of one chunk: %d entries further apart than twice the bound", bad);
    printf("AMX vs vdpbf16ps on a 128-row chunk, k 128: %d of %zu entries differ in the last bits\n", differ, k * (k + 1) / 2);
    gbf_amx_allow(true);
    free(P); free(G[0]); free(G[1]); free(A);
}

/* G (k x k) of nc chunks of np pair rows at P (each np x gbf_ld(k)) with scales s, through acc
 * (NULL: gbf_chunk_bf16_ws, the double epilogue). */
static void acc_gram(GbfWork *w, GbfAcc *acc, const uint32_t *P, size_t nc, size_t np, size_t k, const float *s,
                     double *G) {
    memset(G, 0, k * k * sizeof(double));
    for (size_t c = 0; c < nc; c++) {
        const uint32_t *Pc = P + c * np * gbf_ld(k);
        if (acc) gbf_chunk_bf16_acc(w, acc, Pc, NULL, np, k, s, G);
        else gbf_chunk_bf16_ws(w, Pc, NULL, np, k, s, G);
    }
    gbf_acc_flush(acc, G);
}

/* The AMX chunks' float accumulator (gbf_chunk_bf16_acc): 1 to 21 chunks (flushes at GBF_FLUSH,
 * 2 GBF_FLUSH and the end; odd pair counts; k 300, past AMX's 256, on the double epilogue), with
 * and without scales, normal and graded data: every entry within gbf_gamma_acc(k). Then on 19
 * chunks: the float sums in use (the Gram differs from the double epilogue's in the last bits), a
 * flushed accumulator zero again (a second Gram through it the same bits), and a scale outside
 * [2^-40, 2^40] sending the chunks to the double epilogue (its bits). */
static void test_amx_acc(void) {
    if (!gbf_amx_cpu()) { printf("note: no AMX-BF16 tiles here; the float accumulator is not run\n"); return; }
    static const size_t shapes[][2] = {{7, 5}, {128, 128}, {1025, 33}, {2597, 128}, {2100, 192}, {1100, 256}, {300, 300}};
    double worst = 0;
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
        for (int sc = 0; sc < 2; sc++)
            for (int gr = 0; gr < 2; gr++)
                worst = fmax(worst, kernel_case_in(shapes[c][0], shapes[c][1], sc, GBF_BF16, KC_ACC, gr));
    printf("float accumulator: worst entry error %.3g of its gamma sum (gbf_gamma_acc(128) %.3g, gbf_gamma %.3g)\n",
           worst, gbf_gamma_acc(128), gbf_gamma(GBF_BF16));
    size_t k = 128, ld = gbf_ld(k), np = 64, nc = 19;
    uint32_t *P = calloc(nc * np * ld, sizeof *P);
    float s[128];
    double *G[4];
    for (int i = 0; i < 4; i++) G[i] = calloc(k * k, sizeof(double));
    for (size_t t = 0; t < nc * np; t++)
        for (size_t i = 0; i < k; i++)
            P[t * ld + i] = dt_f32_to_bf16((float)nrand()) | (uint32_t)dt_f32_to_bf16((float)nrand()) << 16;
    for (size_t i = 0; i < k; i++) s[i] = (float)(0.5 + urand());
    GbfWork *w = gbf_work_new();
    GbfAcc *acc = gbf_acc_new(k);
    acc_gram(w, NULL, P, nc, np, k, s, G[0]);
    acc_gram(w, acc, P, nc, np, k, s, G[1]);
    acc_gram(w, acc, P, nc, np, k, s, G[2]);
    int differ = 0, again = 0, out = 0;
    for (size_t i = 0; i < k; i++)
        for (size_t j = i; j < k; j++) {
            differ += G[0][i * k + j] != G[1][i * k + j];
            again += G[1][i * k + j] != G[2][i * k + j];
        }
    s[5] = 0x1p50f;
    acc_gram(w, NULL, P, nc, np, k, s, G[0]);
    acc_gram(w, acc, P, nc, np, k, s, G[3]);
    for (size_t i = 0; i < k; i++)
        for (size_t j = i; j < k; j++) out += memcmp(&G[0][i * k + j], &G[3][i * k + j], sizeof(double)) != 0;
    CHECK(differ > 0, "the float accumulator: 19 chunks' Gram equal to the double epilogue's to the bit (not in use?)");
    CHECK(again == 0, "the float accumulator: a second Gram through it differs in %d entries (not zero after a flush)", again);
    CHECK(out == 0, "a scale of 2^50: %d entries differ from the double epilogue's (the float path taken)", out);
    printf("float accumulator vs double epilogue, 19 chunks, k 128: %d of %zu entries differ in the last bits\n", differ,
           k * (k + 1) / 2);
    gbf_work_free(w);
    gbf_acc_free(acc);
    free(P);
    for (int i = 0; i < 4; i++) free(G[i]);
}

/* ---------------------------------------------------------------- Grams from checkpoints */

/* gram_compute_fast against gram_compute (dequantized values in double) on every head view of
 * layer 1: ||difference||_F within the computed bound, and the bound a small fraction of trace. */
static void test_grams(const char *demo, gbf_path path) {
    Model *m = open_synth(demo, SYNTH_DEFAULT_SEED);
    if (!m) return;
    gbf_force(path);
    GramScratch *scr = gram_scratch_new();
    int views = 0, bad = 0, loose = 0;
    for (int kind = HK_Q; kind <= HK_O; kind++)
        for (int part = 0; part < 3; part++)
            for (int h = 0; h < m->cfg.n_heads; h += 3) {
                GramView v;
                if (gram_view(m, (head_kind)kind, 1, h, (head_part)part, &v) != AL_OK) continue;
                size_t k = gram_view_k(&v);
                double *G = malloc(k * k * sizeof(double)), *F = malloc(k * k * sizeof(double)), err = -1;
                CHECK_OK(gram_compute(m->store, &v, scr, G));
                CHECK_OK(gram_compute_fast(m->store, &v, scr, F, &err));
                double d = 0, tr = 0;
                for (size_t i = 0; i < k * k; i++) d += (F[i] - G[i]) * (F[i] - G[i]);
                for (size_t i = 0; i < k; i++) tr += G[i * k + i];
                bad += !(sqrt(d) <= err);
                loose += !(err <= 1e-4 * tr);
                views++;
                free(G); free(F);
                gram_view_clear(&v);
            }
    CHECK(views > 5, "%s: %d views", demo, views);
    CHECK(bad == 0, "%s (%s path): %d of %d fast Grams outside their bound", demo, path == GBF_BF16 ? "BF16" : "float",
          bad, views);
    CHECK(loose == 0, "%s: %d bounds above 1e-4 trace", demo, loose);
    gram_scratch_free(scr);
    gbf_force(GBF_AUTO);
    model_free(m);
}

/* gram_compute_fast_many against gram_compute_fast one view at a time, to the bit (Grams and
 * bounds): batches of 1..GRAM_MANY adjacent heads of each kind in layer 1 (o_proj's heads share
 * one packing pass), and a batch that mixes kinds (taken one at a time). */
static void test_many(const char *demo, gbf_path path) {
    Model *m = open_synth(demo, SYNTH_DEFAULT_SEED);
    if (!m) return;
    gbf_force(path);
    GramScratch *scr = gram_scratch_new();
    int batches = 0, shared = 0, differ = 0;
    for (int kind = HK_Q; kind <= HK_O + 1; kind++)
        for (size_t nv = 1; nv <= GRAM_MANY; nv++) {
            GramView v[GRAM_MANY];
            double *G[GRAM_MANY], *F[GRAM_MANY], e[GRAM_MANY], f[GRAM_MANY];
            size_t got = 0;
            bool cols = true;
            for (; got < nv; got++) {
                /* kind HK_O + 1: alternating O and Q heads (no shared pass) */
                head_kind hk = kind <= HK_O ? (head_kind)kind : got % 2 ? HK_Q : HK_O;
                if (gram_view(m, hk, 1, (int)got, PART_ALL, &v[got]) != AL_OK) break;
                size_t k = gram_view_k(&v[got]);
                G[got] = malloc(k * k * sizeof(double));
                F[got] = malloc(k * k * sizeof(double));
                cols = cols && !v[got].row_gram && strcmp(v[got].tensor, v[0].tensor) == 0;
            }
            if (got == nv) {
                size_t passes = gram_many_passes();
                CHECK_OK(gram_compute_fast_many(m->store, v, nv, scr, G, e, NULL));
                /* adjacent o_proj heads on the BF16 path share one pass; the rest go one at a time */
                bool together = path == GBF_BF16 && nv > 1 && cols;
                CHECK(gram_many_passes() == passes + together, "%s: batch of %zu (%s) %s", demo, nv,
                      cols ? "adjacent column Grams" : "mixed", together ? "not packed together" : "packed together");
                for (size_t i = 0; i < nv; i++) {
                    size_t k = gram_view_k(&v[i]);
                    CHECK_OK(gram_compute_fast(m->store, &v[i], scr, F[i], &f[i]));
                    differ += memcmp(G[i], F[i], k * k * sizeof(double)) != 0 || e[i] != f[i];
                }
                batches++;
                shared += nv > 1 && cols;
            }
            for (size_t i = 0; i < got; i++) { free(G[i]); free(F[i]); gram_view_clear(&v[i]); }
        }
    CHECK(batches >= 8, "%s: %d batches", demo, batches);
    CHECK(shared >= 3, "%s: only %d batches of adjacent column Grams (o_proj heads)", demo, shared);
    /* views cut by hand out of o_proj: rows from an odd start, odd counts across the 128-row
     * chunks (and FP8 scale blocks), k off the 16 / 32 tile widths, in different scale columns */
    static const size_t cuts[][3] = {{0, 1, 5}, {3, 61, 20}, {1, 127, 17}, {127, 129, 24}, {5, 200, 33}};
    GramView o;
    int cut = 0;
    if (gram_view(m, HK_O, 1, 0, PART_ALL, &o) == AL_OK) {
        for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
            GramView v[3];
            double *G[3], *F[3], e[3], f[3];
            size_t r0 = cuts[c][0], nr = cuts[c][1], k = cuts[c][2], passes = gram_many_passes();
            if (r0 + nr > o.r0 + o.nr || 3 * k + 1 > (size_t)m->cfg.n_heads * o.nc) continue;
            cut++;
            for (size_t i = 0; i < 3; i++) {
                v[i] = o;
                v[i].r0 = r0; v[i].nr = nr; v[i].c0 = 1 + i * k; v[i].nc = k;
                G[i] = malloc(k * k * sizeof(double)); F[i] = malloc(k * k * sizeof(double));
            }
            CHECK_OK(gram_compute_fast_many(m->store, v, 3, scr, G, e, NULL));
            if (path == GBF_BF16)
                CHECK(gram_many_passes() == passes + 1, "%s: rows %zu+%zu, k %zu: not one shared pass", demo, r0, nr, k);
            for (size_t i = 0; i < 3; i++) {
                CHECK_OK(gram_compute_fast(m->store, &v[i], scr, F[i], &f[i]));
                CHECK(memcmp(G[i], F[i], k * k * sizeof(double)) == 0 && e[i] == f[i],
                      "%s: rows %zu+%zu, k %zu, view %zu: shared pass differs from one at a time", demo, r0, nr, k, i);
                free(G[i]); free(F[i]);
            }
        }
        gram_view_clear(&o);
    }
    CHECK(cut >= 4, "%s: only %d hand-cut batches fit o_proj", demo, cut);
    CHECK(differ == 0, "%s (%s path): %d Grams or bounds of gram_compute_fast_many differ from one at a time", demo,
          path == GBF_BF16 ? "BF16" : "float", differ);
    gram_scratch_free(scr);
    gbf_force(GBF_AUTO);
    model_free(m);
}

/* ---------------------------------------------------------------- ranks */

static const double taus[] = {0.5, 0.8, 0.9, 0.95, 0.99, 0.995, 0.999};
#define NTAU (sizeof taus / sizeof *taus)
static size_t open_count[3];   /* ranks the bound left open: a, b, fused */

/* One layer through both routes: after certification at each tau the fast route's ranks equal the
 * double route's, head by head, on FARR_ROUTE_FAST and on FARR_ROUTE_RANKS (its solves in float).
 * Adds the heads checked and redone. */
static void compare_layer(Model *m, farr_kind kind, int layer, int offset, const char *what, size_t *heads,
                          size_t *redone) {
    FarrLayer *d = NULL;
    CHECK_OK(farr_layer_compute_route(m, kind, layer, offset, FARR_ROUTE_STREAM, &d));
    for (size_t t = 0; d && t < 2 * NTAU; t++) {
        FarrLayer *f = NULL;
        farr_route route = t % 2 ? FARR_ROUTE_RANKS : FARR_ROUTE_FAST;
        CHECK_OK(farr_layer_compute_route(m, kind, layer, offset, route, &f));
        if (!f) break;
        CHECK(f->eps != NULL, "%s: the fast route keeps bounds", what);
        for (int h = 0; f->eps && h < f->n_heads; h++) {
            const Spectrum *sp[3] = {f->a[h], f->b[h], f->fused[h]};
            for (int j = 0; j < 3; j++) open_count[j] += !spectra_rank_certain(sp[j], f->eps[3 * h + j], taus[t / 2]);
        }
        CHECK_OK(farr_layer_certify(m, f, taus[t / 2], redone));
        int diff = 0;
        for (int h = 0; h < d->n_heads; h++) {
            int a1, b1, f1, a2, b2, f2;
            farr_layer_ranks(d, h, taus[t / 2], &a1, &b1, &f1);
            farr_layer_ranks(f, h, taus[t / 2], &a2, &b2, &f2);
            diff += a1 != a2 || b1 != b2 || f1 != f2;
        }
        *heads += (size_t)d->n_heads;
        CHECK(diff == 0, "%s tau %g: %d heads' ranks differ between the %s and double routes", what, taus[t / 2], diff,
              t % 2 ? "float-solve" : "fast");
        farr_layer_free(f);
    }
    farr_layer_free(d);
}

static void model_ranks(Model *m, const char *name, size_t *heads, size_t *redone) {
    bool rope = m->cfg.rope != ROPE_NONE && m->cfg.qk_rope_dim > 0 && m->cfg.qk_nope_dim == 0;
    for (int L = 0; L < m->cfg.n_layers; L++) {
        char what[160];
        snprintf(what, sizeof what, "%s VO layer %d", name, L);
        compare_layer(m, FARR_VO, L, FARR_NO_OFFSET, what, heads, redone);
        if (m->cfg.qk_norm != QKN_NONE) continue;
        snprintf(what, sizeof what, "%s QK layer %d", name, L);
        compare_layer(m, FARR_QK, L, rope ? 5 : FARR_NO_OFFSET, what, heads, redone);
    }
}

static void test_ranks(gbf_path path) {
    gbf_force(path);
    static const char *demos[] = {"demo-r1", "demo-r1-bf16", "demo-r1-f32", "demo-llama", "demo-gpt2"};
    static const unsigned long seeds[] = {SYNTH_DEFAULT_SEED, 3, 101};
    size_t heads = 0, redone = 0;
    for (size_t d = 0; d < sizeof demos / sizeof *demos; d++)
        for (size_t s = 0; s < (path == GBF_BF16 ? 3u : 1u); s++) {
            Model *m = open_synth(demos[d], seeds[s]);
            if (!m) continue;
            char name[64];
            snprintf(name, sizeof name, "%s seed %lu", demos[d], seeds[s]);
            model_ranks(m, name, &heads, &redone);
            model_free(m);
        }
    printf("%s path: %zu of %zu head ranks redone in double (%.1f%%; open: a %zu, b %zu, fused %zu)\n",
           path == GBF_BF16 ? "BF16" : "float", redone, heads, heads ? 100.0 * (double)redone / (double)heads : 0,
           open_count[0], open_count[1], open_count[2]);
    memset(open_count, 0, sizeof open_count);
    CHECK(heads > 0 && redone * 8 < heads, "the bound sends %zu of %zu heads back to double", redone, heads);
    gbf_force(GBF_AUTO);
}

/* The small real checkpoints (trained, decaying spectra), when present. */
static void test_real_models(void) {
    const char *models = getenv("ATTNLAB_MODELS");
    if (!models) { printf("note: ATTNLAB_MODELS unset; real checkpoints skipped\n"); return; }
    static const char *paths[] = {"stories260K-hf", "gpt2-tiny-random"};
    size_t heads = 0, redone = 0;
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        char *path = al_asprintf("%s/%s", models, paths[i]);
        Model *m = NULL;
        if (model_open(path, &m) == AL_OK) model_ranks(m, paths[i], &heads, &redone);
        else printf("note: %s not loadable (%s); skipped\n", path, al_errmsg());
        model_free(m);
        free(path);
    }
    printf("real checkpoints: %zu of %zu head ranks redone in double\n", redone, heads);
}

/* One DeepSeek-R1-shaped layer (FP8 at R1's shapes, planted low-rank V heads). */
static void test_r1_shape(void) {
    char *dir = al_asprintf("%s/ds-r1-shape", tmp_root);
    Model *m = NULL;
    if (synth_ds_r1_shape(dir, 1, 1) != AL_OK) CHECK(0, "synth ds-r1-shape: %s", al_errmsg());
    else CHECK_OK(model_open(dir, &m));
    free(dir);
    if (!m) return;
    size_t heads = 0, redone = 0;
    double t0 = now();
    compare_layer(m, FARR_VO, 0, FARR_NO_OFFSET, "R1-shaped VO", &heads, &redone);
    compare_layer(m, FARR_QK, 0, FARR_NO_OFFSET, "R1-shaped QK", &heads, &redone);
    printf("R1-shaped layer: %zu of %zu head ranks redone in double (%.1f s)\n", redone, heads, now() - t0);
    /* flat random spectra at k = 128: cumulative energies 1/128 apart, where only the Grams'
     * worst-case float accumulation bound leaves some ranks open (bench/README.md) */
    CHECK(redone * 8 < heads, "R1 shape: the bound sends %zu of %zu heads back to double", redone, heads);
    model_free(m);
}

/* ---------------------------------------------------------------- reading ahead */

/* Pages of [p, p + n) in the page cache, of all of them. */
static size_t resident(const void *p, size_t n, size_t *all) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)p - (uintptr_t)p % pg;
    size_t len = (uintptr_t)p + n - a, np = (len + pg - 1) / pg, in = 0;
    unsigned char *v = malloc(np);
    if (v && mincore((void *)a, len, v) == 0)
        for (size_t i = 0; i < np; i++) in += v[i] & 1;
    free(v);
    *all = np;
    return in;
}

/* gram_prefetch_start reads the pair's tensors of a layer into the page cache (the checkpoint's
 * pages dropped first; checked where they can be dropped and MADV_POPULATE_READ exists -- before
 * Linux 5.14 the fallback reads asynchronously); a layer without views reads nothing. */
static void drop_cache(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *p = al_asprintf("%s/%s", dir, e->d_name);
        int fd = p && e->d_name[0] != '.' ? open(p, O_RDONLY) : -1;
        if (fd >= 0) { posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); close(fd); }
        free(p);
    }
    if (d) closedir(d);
}

/* demo-r1 written with seed into tmp_root/sub (*dir: its path, the caller's) and opened; NULL on failure. */
static Model *r1_written(const char *sub, unsigned long seed, char **dir) {
    SynthOptions opt;
    Model *m = NULL;
    *dir = al_asprintf("%s/%s", tmp_root, sub);
    CHECK(synth_demo_name("demo-r1", &opt), "demo-r1 is a demo");
    opt.seed = seed;
    if (synth_write(&opt, *dir) != AL_OK) CHECK(0, "synth demo-r1: %s", al_errmsg());
    else CHECK_OK(model_open(*dir, &m));
    return m;
}

static void test_prefetch(void) {
    char *dir;
    Model *m = r1_written("ahead", 3, &dir);
    if (!m) { free(dir); return; }
    GramView vo;
    CHECK_OK(gram_view(m, HK_O, 1, 0, PART_ALL, &vo));
    const st_entry *e;
    const st_file *sf;
    CHECK_OK(store_entry(m->store, vo.tensor, &e, &sf));
    const uint8_t *p = st_data(sf, e);
    size_t n = e->end - e->begin, all = 0;
    drop_cache(dir);
    size_t before = resident(p, n, &all);
    GramAhead *g = gram_prefetch_start(m, 1, HK_V, HK_O, NULL);
    CHECK(g != NULL, "no read-ahead for layer 1 of demo-r1");
    gram_prefetch_end(g, false);
    size_t after = resident(p, n, &all);
    void *probe = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bool populate = probe != MAP_FAILED && madvise(probe, 4096, MADV_POPULATE_READ) == 0;
    if (probe != MAP_FAILED) munmap(probe, 4096);
    if (!populate) printf("note: no MADV_POPULATE_READ (Linux < 5.14): read-ahead residency not checked\n");
    else if (before == all) printf("note: the page cache of %s could not be dropped (tmpfs?): read-ahead not checked\n", dir);
    else CHECK(after == all, "o_proj of layer 1: %zu of %zu pages in the page cache after reading ahead (%zu before)", after,
          all, before);
    CHECK(gram_prefetch_start(m, m->cfg.n_layers + 3, HK_V, HK_O, NULL) == NULL, "read-ahead of a layer that is not there");
    gram_view_clear(&vo);
    model_free(m);
    free(dir);
}

/* gram_ahead's reads past the page cache: O_DIRECT into a sweep's own buffer, lent to the store
 * (store_bytes answers with the copy, byte for byte the file's, from a tensor offset that is not a
 * multiple of the page), then taken back; the Grams from the copy equal those from the mapping bit
 * for bit; a stopped read lends nothing; and a whole sweep read so (VO and QK) gives the spectra of
 * one read through the page cache, every value. Skipped where the file system refuses O_DIRECT. */
static bool direct_ok(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

static int gram_all_heads(Model *m, int layer, double *G, size_t kk) {
    GramScratch *scr = gram_scratch_new();
    int rc = scr ? AL_OK : AL_ERR;
    for (int h = 0; rc == AL_OK && h < m->cfg.n_heads; h++) {
        GramView v;
        double err;
        if ((rc = gram_view(m, HK_O, layer, h, PART_ALL, &v)) != AL_OK) break;
        rc = gram_view_k(&v) * gram_view_k(&v) == kk ? gram_compute_fast(m->store, &v, scr, G + (size_t)h * kk, &err) : AL_ERR;
        gram_view_clear(&v);
    }
    gram_scratch_free(scr);
    return rc;
}

static int sweep_spectra(Model *m, gram_direct how, double *out, size_t n) {
    FarrState *st = farr_state_new();
    size_t at = 0;
    gram_direct_set(how);
    for (int k = 0; k < 2 && st; k++) {
        FarrQuery q = { .m = m, .kind = (farr_kind)k, .lo = 0, .hi = m->cfg.n_layers - 1, .offset = FARR_NO_OFFSET };
        CHECK_OK(farr_state_sweep(st, &q));
        for (int L = 0; L < m->cfg.n_layers; L++) {
            const FarrLayer *l = farr_state_get_layer(st, m, (farr_kind)k, L, FARR_NO_OFFSET);
            for (int h = 0; l && h < l->n_heads; h++)
                for (size_t i = 0; i < l->fused[h]->p && at + 2 <= n; i++) {
                    out[at++] = l->fused[h]->sigma[i];
                    out[at++] = l->a[h]->sigma[i];
                }
        }
    }
    gram_direct_set(GRAM_DIRECT_AUTO);
    farr_state_free(st);
    return (int)at;
}

static void test_direct(void) {
    char *dir;
    Model *m = r1_written("direct", 4, &dir);
    GramView vo = {0};
    const st_entry *e;
    const st_file *sf = NULL;
    if (m) CHECK_OK(gram_view(m, HK_O, 1, 0, PART_ALL, &vo));
    if (m) CHECK_OK(store_entry(m->store, vo.tensor, &e, &sf));
    if (!sf || !direct_ok(st_path(sf))) {
        if (sf) printf("note: %s refuses O_DIRECT (tmpfs?): reads past the page cache not checked\n", dir);
        gram_view_clear(&vo);
        model_free(m);
        free(dir);
        return;
    }
    size_t n = e->end - e->begin, kk = (size_t)gram_view_k(&vo) * gram_view_k(&vo), H = (size_t)m->cfg.n_heads;
    bool ok;
    CHECK(st_file_offset(sf, e, &ok) % 4096 != 0 && ok, "layer 1's o_proj lies at a file offset off the page (%zu)",
          st_file_offset(sf, e, &ok));
    double *G0 = calloc(H * kk, sizeof *G0), *G1 = calloc(H * kk, sizeof *G1);
    CHECK_OK(gram_all_heads(m, 1, G0, kk));
    GramSlots *slots = gram_slots_new(GRAM_DIRECT_ALWAYS);
    size_t lent = gram_direct_reads();
    GramAhead *g = gram_prefetch_start(m, 1, HK_V, HK_O, slots);
    CHECK(g != NULL, "a read of layer 1");
    gram_prefetch_wait(g);
    const uint8_t *copy = store_bytes(m->store, vo.tensor, e, sf);
    CHECK(gram_direct_reads() == lent + 2, "V's and O's tensors lent (%zu)", gram_direct_reads() - lent);
    CHECK(copy != st_data(sf, e) && memcmp(copy, st_data(sf, e), n) == 0, "the lent o_proj is the file's bytes");
    CHECK_OK(gram_all_heads(m, 1, G1, kk));
    CHECK(memcmp(G0, G1, H * kk * sizeof *G0) == 0, "the Grams from the lent copy equal the mapping's bit for bit");
    gram_prefetch_end(g, false);
    CHECK(store_bytes(m->store, vo.tensor, e, sf) == st_data(sf, e), "the loan taken back at the end");
    lent = gram_direct_reads();
    g = gram_prefetch_start(m, 1, HK_V, HK_O, slots);
    gram_prefetch_end(g, true);
    CHECK(gram_direct_reads() == lent && store_bytes(m->store, vo.tensor, e, sf) == st_data(sf, e),
          "a read ended unwaited lends nothing");
    gram_slots_free(slots);
    size_t cap = 1 << 20;
    double *a = calloc(cap, sizeof *a), *b = calloc(cap, sizeof *b);
    lent = gram_direct_reads();
    int na = sweep_spectra(m, GRAM_DIRECT_ALWAYS, a, cap);
    size_t took = gram_direct_reads() - lent;
    int nb = sweep_spectra(m, GRAM_DIRECT_NEVER, b, cap);
    CHECK(took >= 2 * (size_t)m->cfg.n_layers, "the sweep read past the page cache (%zu tensors lent)", took);
    CHECK(na > 0 && na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0,
          "the sweep's spectra read past the page cache equal those read through it (%d and %d values)", na, nb);
    free(a); free(b); free(G0); free(G1);
    gram_view_clear(&vo);
    model_free(m);
    free(dir);
}

/* ---------------------------------------------------------------- the session */

/* A sweep takes the fast route by default (where it pays); the rank table at tau is the double
 * route's; asking for a layer's spectra (to show them) makes it the double route's, bit for bit;
 * forcing the double route. */
static void test_state(void) {
    Model *m = open_synth("demo-llama", 5);
    if (!m) return;
    int N = m->cfg.n_layers, H = m->cfg.n_heads;
    FarrState *st = farr_state_new();
    FarrQuery q = { .m = m, .kind = FARR_VO, .lo = 0, .hi = N - 1, .offset = FARR_NO_OFFSET };
    CHECK_OK(farr_state_sweep(st, &q));
    const FarrLayer *c0 = farr_state_get_layer(st, m, FARR_VO, 0, FARR_NO_OFFSET);
    /* the default: the fast route where the BF16 kernel runs (demo-llama is BF16) */
    CHECK(c0 && (c0->eps != NULL) == gram_fast_pays(), "the sweep took the fast route where it pays");
    for (size_t t = 0; t < NTAU; t++) {
        FarrRankRow *rows = NULL;
        size_t n = 0;
        CHECK_OK(farr_state_rank_table(st, &q, taus[t], &rows, &n));
        int diff = 0;
        for (int L = 0; L < N && rows; L++) {
            FarrLayer *d = NULL;
            CHECK_OK(farr_layer_compute(m, FARR_VO, L, FARR_NO_OFFSET, &d));
            for (int h = 0; d && h < H; h++) {
                int ra, rb, rf;
                farr_layer_ranks(d, h, taus[t], &ra, &rb, &rf);
                const FarrRankRow *r = &rows[(size_t)L * (size_t)H + (size_t)h];
                diff += r->rank_a != ra || r->rank_b != rb || r->rank_fused != rf;
            }
            farr_layer_free(d);
        }
        CHECK(diff == 0, "tau %g: %d rank rows differ from the double route", taus[t], diff);
        free(rows);
    }
    const FarrLayer *l = NULL;
    CHECK_OK(farr_state_layer(st, m, FARR_VO, 1, FARR_NO_OFFSET, &l));
    FarrLayer *d = NULL;
    CHECK_OK(farr_layer_compute(m, FARR_VO, 1, FARR_NO_OFFSET, &d));
    if (l && d) {
        CHECK(l->eps == NULL, "a layer asked for its spectra is exact");
        int diff = 0;
        for (int h = 0; h < H; h++)
            for (size_t i = 0; i < d->fused[h]->p; i++)
                diff += l->fused[h]->sigma[i] != d->fused[h]->sigma[i] || l->a[h]->sigma[i] != d->a[h]->sigma[i];
        CHECK(diff == 0, "exact spectra equal the double route's bit for bit (%d differ)", diff);
    }
    farr_layer_free(d);
    farr_state_drop_model(st, m);
    farr_force_double(true);
    q.hi = 0;
    CHECK_OK(farr_state_sweep(st, &q));
    c0 = farr_state_get_layer(st, m, FARR_VO, 0, FARR_NO_OFFSET);
    CHECK(c0 && !c0->eps, "forced: the sweep took the double route");
    farr_force_double(false);
    farr_state_free(st);
    model_free(m);
}

/* spectra_rank_certain: exact spectra are always certain; a bound as large as the gaps is not; and
 * never certain where some spectrum within eps (l2 over the squared values) has another rank. */
static void test_certain(void) {
    Spectrum *s = spectrum_new(4, 4, 4, false);
    if (!s) return;
    double v[4] = {4, 2, 1, 1};    /* energies 16, 4, 1, 1 of 22: cum 0.727, 0.909, 0.955, 1 */
    memcpy(s->sigma, v, sizeof v);
    spectrum_total(s);
    CHECK(spectra_rank_certain(s, 0, 0.9), "exact");
    CHECK(spectra_rank_certain(s, 1e-6, 0.9), "a small bound: rank 2 at 0.9 is certain");
    CHECK(!spectra_rank_certain(s, 1.0, 0.9), "a bound of 1 on energies of 22: 0.909 vs 0.9 is open");
    CHECK(!spectra_rank_certain(s, 1e-6, 1.0), "tau 1 with any error is open");
    memset(s->sigma, 0, sizeof v);
    CHECK(!spectra_rank_certain(s, 1e-6, 0.9), "a zero spectrum with an error is open");
    spectrum_free(s);
    /* random flat and decaying spectra, eps near the gaps, perturbations of l2 norm eps aimed at
     * the rank (all the weight on f(r) or f(r-1)) and random ones: a certain rank never moves */
    size_t p = 64, wrong = 0, certain = 0;
    Spectrum *a = spectrum_new(p, p, p, false), *b = spectrum_new(p, p, p, false);
    double lam[64], d[64];
    for (int trial = 0; trial < 4000; trial++) {
        double decay = trial % 2 ? 0 : 0.1 * urand(), tau = (double[]){0.5, 0.9, 0.99, 0.999}[trial % 4];
        for (size_t i = 0; i < p; i++) lam[i] = (0.5 + urand()) * exp(-decay * (double)i);
        for (size_t i = 1; i < p; i++)      /* descending */
            for (size_t t = i; t > 0 && lam[t] > lam[t - 1]; t--) { double x = lam[t]; lam[t] = lam[t - 1]; lam[t - 1] = x; }
        for (size_t i = 0; i < p; i++) a->sigma[i] = sqrt(lam[i]);
        spectrum_total(a);
        double eps = a->total * pow(10, -1 - 4 * urand());
        if (!spectra_rank_certain(a, eps, tau)) continue;
        certain++;
        size_t r = spectra_effective_rank(a->sigma, p, tau);
        for (int kind = 0; kind < 3; kind++) {
            /* kind 0: push f(r) down (top r values down, the rest up, in the certificate's
             * weights); 1: push f(r-1) up; 2: random direction */
            double n2 = 0;
            for (size_t i = 0; i < p; i++) {
                size_t q = kind == 1 ? r - 1 : r;
                d[i] = kind == 2 ? nrand() : (i < q ? -(1 - tau) : tau) * (kind == 1 ? -1 : 1);
                n2 += d[i] * d[i];
            }
            for (size_t i = 0; i < p; i++) lam[i] = fmax(0, a->sigma[i] * a->sigma[i] + eps * d[i] / sqrt(n2));
            for (size_t i = 1; i < p; i++)
                for (size_t t = i; t > 0 && lam[t] > lam[t - 1]; t--) { double x = lam[t]; lam[t] = lam[t - 1]; lam[t - 1] = x; }
            for (size_t i = 0; i < p; i++) b->sigma[i] = sqrt(lam[i]);
            wrong += spectra_effective_rank(b->sigma, p, tau) != r;
        }
    }
    CHECK(certain > 100 && wrong == 0, "spectra_rank_certain: %zu certain, %zu ranks moved within eps", certain, wrong);
    spectrum_free(a);
    spectrum_free(b);
}

int main(void) {
    tmp_root = test_tmpdir();
    test_kernel();
    test_amx();
    test_amx_acc();
    test_certain();
    for (int p = 0; p < 2; p++) {
        gbf_path path = p ? GBF_BF16 : GBF_FLOAT;
        if (path == GBF_BF16 && !gbf_cpu_bf16()) break;
        test_grams("demo-r1", path);
        test_grams("demo-r1-bf16", path);
        test_grams("demo-llama", path);
        test_grams("demo-gpt2", path);
        test_many("demo-r1", path);
        test_many("demo-llama", path);
        test_ranks(path);
    }
    if (gbf_amx_cpu()) {     /* the vdpbf16ps kernel that AMX replaces, still right */
        gbf_amx_allow(false);
        test_grams("demo-r1", GBF_BF16);
        test_many("demo-r1", GBF_BF16);
        gbf_amx_allow(true);
    }
    test_state();
    test_prefetch();
    test_direct();
    test_real_models();
    test_r1_shape();
    return check_done();
}
