/* test_gram_amx.c -- the AMX Gram chunk's layouts and scratch (gram_bf16.h): a row Gram's chunk
 * packed with its transpose in one pass (gbf_pack_rows_t) gives gbf_pack_rows' P and exactly Pᵀ;
 * a chunk given that transpose, or caller-held scratch, gives bit for bit the Gram of the plain
 * call; and the chunk runs on a thread with 32 KB of stack to spare (it used to keep ~84 KB of
 * tiles there). */
#include "testutil.h"
#include "gram_bf16.h"
#include "tensor.h"

#include <pthread.h>

/* src: k stored rows of n values (FP8 codes or BF16), stride n + 3 values. */
static uint8_t *random_rows(size_t k, size_t n, bool fp8, size_t *stride) {
    size_t es = fp8 ? 1 : 2;
    *stride = (n + 3) * es;
    uint8_t *src = malloc(k * *stride + 64);
    for (size_t i = 0; i < k * *stride; i++) src[i] = (uint8_t)(urand() * 256);
    if (!fp8)     /* finite BF16 values: no NaN pairs, so the Grams compare bit for bit */
        for (size_t i = 0; i < k * *stride; i += 2) src[i + 1] &= 0xbf;
    else
        for (size_t i = 0; i < k * *stride; i++) src[i] = (src[i] & 0x7f) == 0x7f ? 0x3c : src[i];
    return src;
}

/* One shape: P and PT from gbf_pack_rows_t against gbf_pack_rows and the transpose; then the
 * chunk's Gram from (P, PT), (P, NULL) with scratch, and gbf_chunk_bf16, compared bitwise. */
static void layout_case(size_t k, size_t n, bool fp8, bool scaled) {
    size_t stride, ld = gbf_ld(k), np = (n + 1) / 2, npad = gbf_npad(np);
    uint8_t *src = random_rows(k, n, fp8, &stride);
    uint32_t *P0 = calloc(npad * ld, sizeof *P0), *P = calloc(npad * ld, sizeof *P), *PT = malloc(ld * npad * 4);
    memset(PT, 0xa5, ld * npad * 4);
    gbf_pack_rows(src, stride, k, n, fp8, P0);
    gbf_pack_rows_t(src, stride, k, n, fp8, P, PT);
    int badp = 0, badt = 0;
    for (size_t t = 0; t < np; t++)
        for (size_t i = 0; i < ld; i++) badp += P[t * ld + i] != P0[t * ld + i];
    for (size_t i = 0; i < ld; i++)
        for (size_t t = 0; t < npad; t++) badt += PT[i * npad + t] != (t < np ? P0[t * ld + i] : 0);
    CHECK(badp == 0 && badt == 0, "k %zu n %zu %s: packing with the transpose: %d words of P, %d of Pᵀ differ", k, n,
          fp8 ? "fp8" : "bf16", badp, badt);
    float *s = malloc(k * sizeof *s);
    for (size_t i = 0; i < k; i++) s[i] = scaled ? (float)(0.25 + urand()) : 1.0f;
    double *G[3];
    for (int c = 0; c < 3; c++) G[c] = calloc(k * k, sizeof(double));
    GbfWork *w = gbf_work_new();
    gbf_chunk_bf16(P0, np, k, scaled ? s : NULL, G[0]);
    gbf_chunk_bf16_ws(w, P, PT, np, k, scaled ? s : NULL, G[1]);
    gbf_chunk_bf16_ws(w, P, NULL, np, k, scaled ? s : NULL, G[2]);
    int diff = 0;
    for (size_t i = 0; i < k; i++)
        for (size_t j = i; j < k; j++) diff += G[1][i * k + j] != G[0][i * k + j] || G[2][i * k + j] != G[0][i * k + j];
    double tr = 0;
    for (size_t i = 0; i < k; i++) tr += G[0][i * k + i];
    CHECK(diff == 0 && tr > 0, "k %zu n %zu %s%s: the chunk with Pᵀ given / with scratch: %d entries differ (trace %g)",
          k, n, fp8 ? "fp8" : "bf16", scaled ? " scaled" : "", diff, tr);
    gbf_work_free(w);
    for (int c = 0; c < 3; c++) free(G[c]);
    free(src); free(P0); free(P); free(PT); free(s);
}

static void test_layouts(void) {
    static const size_t shapes[][2] = {{128, 128}, {128, 127}, {5, 3}, {33, 17}, {100, 64}, {192, 100}, {256, 128},
                                       {300, 40}};
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++)
        for (int f = 0; f < 2; f++) layout_case(shapes[c][0], shapes[c][1], f, c % 2 == 0);
}

/* ---------------------------------------------------------------- a small stack */

typedef struct {
    const uint32_t *P;
    size_t np, k;
    double *G;
} StackJob;

static void *small_stack_run(void *ud) {
    StackJob *j = ud;
    gbf_chunk_bf16(j->P, j->np, j->k, NULL, j->G);
    return NULL;
}

static void *nothing(void *ud) { return ud; }

/* A thread with `size` bytes of stack running fn(ud) and joined; pthread_create's result. */
static int run_on_stack(size_t size, void *(*fn)(void *), void *ud) {
    pthread_attr_t a;
    pthread_t th;
    pthread_attr_init(&a);
    int rc = pthread_attr_setstacksize(&a, size);
    if (rc == 0) rc = pthread_create(&th, &a, fn, ud);
    if (rc == 0) pthread_join(th, NULL);
    pthread_attr_destroy(&a);
    return rc;
}

/* A 128 x 128 chunk on a thread with 32 KB of stack above the least a thread can start with (the
 * libraries' static TLS lives there too: OpenBLAS' is 60 KB) gives the main thread's Gram. */
static void test_small_stack(void) {
    size_t k = 128, ld = gbf_ld(k), np = 64, least = 16 << 10;
    while (least < (8u << 20) && run_on_stack(least, nothing, NULL) != 0) least += 8 << 10;
    uint32_t *P = malloc(np * ld * sizeof *P);
    for (size_t i = 0; i < np * ld; i++)
        P[i] = dt_f32_to_bf16((float)nrand()) | (uint32_t)dt_f32_to_bf16((float)nrand()) << 16;
    StackJob j = {P, np, k, calloc(k * k, sizeof(double))};
    double *G = calloc(k * k, sizeof(double));
    gbf_chunk_bf16(P, np, k, NULL, G);
    CHECK(run_on_stack(least + (32 << 10), small_stack_run, &j) == 0, "a thread with %zu KB of stack", (least >> 10) + 32);
    CHECK(memcmp(G, j.G, k * k * sizeof(double)) == 0, "the chunk on %zu + 32 KB of stack gives the same Gram (%s)",
          least >> 10, gbf_amx_now() ? "AMX tiles" : "vdpbf16ps tiles");
    free(P); free(G); free(j.G);
}

int main(void) {
    if (!gbf_cpu_bf16()) {
        printf("note: this CPU has no AVX-512 BF16; the BF16 chunk is not run\n");
        return check_done();
    }
    if (!gbf_amx_now()) printf("note: no AMX-BF16 tiles here; the vdpbf16ps tiles are checked\n");
    test_small_stack();
    test_layouts();
    return check_done();
}
