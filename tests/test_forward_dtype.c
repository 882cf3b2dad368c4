/* test_forward_dtype.c -- the forward pass from stored BF16 / F16 / FP8 weights (core/linalg/matmul.c) on
 * a real trained checkpoint, stories260K-hf ($ATTNLAB_MODELS; skipped when absent): each dtype's
 * copy of its weights is written next to an F32 copy holding exactly the same values (what a
 * float32 copy of the model held: the route of the pass before issue 18).
 *  - f32 mode: logits of every position equal the F32 copy's to 1e-6 relative (only the order of
 *    the float32 sums differs), for BF16, F16 and FP8 E4M3 (128x128 block scales), with the
 *    AVX-512 kernels and with the portable ones forced;
 *  - bf16 mode: perplexity on a story within 0.5 % of f32 mode's, on vdpbf16ps and on the
 *    portable route; its logits differ from f32 mode's (the activations really are rounded);
 *  - the mode can change between runs of one pass (fwd_set_compute), and streaming (a tiny memory
 *    budget: each layer's pages released after use) gives the same logits. */
#include "check.h"
#include "forward.h"
#include "matmul_internal.h"
#include "tokenizer.h"

#include <stdint.h>

static const char STORY[] =
    "One morning, a small cat named Max woke up in the sun. He wanted to find a friend to play with. "
    "He walked to the garden and saw a bird on a big tree. \"Will you play with me?\" Max asked. "
    "The bird was scared and flew away. Max felt sad, but he did not give up. Then he met a kind frog "
    "by the pond. The frog said, \"I like to jump. Can you jump too?\" Max jumped high and the frog "
    "laughed. They jumped and ran all day until the sky was dark. Max went home happy, because now he "
    "had a new friend. His mom gave him warm milk, and he slept well that night. ";

static char src[4200], tokp[4200];

/* Copies stories260K-hf into dir with its 2-D weights stored in dt (F32: the values dt holds,
 * exactly, as float32 -- the reference), 1-D tensors as they are. */
static int write_copy(const char *dir, dt_type dt, bool as_f32) {
    Store *s = NULL;
    char p[4400];
    snprintf(p, sizeof p, "mkdir -p '%s' && cp '%s/config.json' '%s/'", dir, src, dir);
    if (system(p) != 0 || store_open(src, &s) != AL_OK) return AL_ERR;
    st_writer *w = st_writer_new();
    int rc = AL_OK;
    for (size_t i = 0; rc == AL_OK && i < store_count(s); i++) {
        const char *name = store_name_at(s, i);
        Mat *m = NULL;
        size_t R, C;
        rc = store_shape2(s, name, &R, &C);
        if (rc == AL_OK) rc = store_read(s, name, &m);
        if (rc == AL_OK && R > 1) {
            if (dt == DT_F8_E4M3) {
                size_t sr = dt_fp8_nblocks(R), sc = dt_fp8_nblocks(C);
                uint8_t *q = malloc(R * C);
                float *scl = malloc(sr * sc * sizeof(float));
                st_fp8_blocks(m, q, scl);             /* what st_writer_add_fp8 stores */
                if (as_f32) dt_fp8_dequant(q, C, scl, sc, 0, R, 0, C, m->data, C);
                free(q);
                free(scl);
                rc = as_f32 ? st_writer_add_mat(w, name, DT_F32, m) : st_writer_add_fp8(w, name, m);
            } else {
                void *b = malloc(R * C * dt_size(dt));
                dt_from_f32(dt, m->data, R * C, b);
                dt_to_f32(dt, b, R * C, m->data);
                free(b);
                rc = st_writer_add_mat(w, name, as_f32 ? DT_F32 : dt, m);
            }
        } else if (rc == AL_OK)
            rc = st_writer_add_mat(w, name, DT_F32, m);
        mat_free(m);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (rc == AL_OK) rc = st_writer_write(w, p);
    st_writer_free(w);
    store_free(s);
    return rc;
}

/* Logits (T, V) of ids[0..T) through dir's model in mode c (budget: FwdOptions.mem_budget). */
static float *logits_of(const char *dir, const int *ids, size_t T, mm_compute c, size_t budget) {
    Model *m = NULL;
    Forward *f = NULL;
    FwdOptions o = {.compute = c, .mem_budget = budget};
    float *z = NULL;
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, &o, &f));
    if (f) {
        z = malloc(T * fwd_vocab(f) * sizeof(float));
        CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, z));
        if (budget == 1) CHECK(fwd_streaming(f), "a 1-byte budget streams");
    }
    fwd_free(f);
    model_free(m);
    return z;
}

static double ppl_of(const char *dir, const int *ids, size_t n, mm_compute c) {
    Model *m = NULL;
    Forward *f = NULL;
    FwdPpl p = {.nll = NAN};
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (f) {
        fwd_set_compute(f, MM_F32);
        fwd_set_compute(f, c);
        CHECK(fwd_compute(f) == c, "fwd_compute");
        CHECK_OK(fwd_ppl(f, ids, n, 64, &p));
    }
    fwd_free(f);
    model_free(m);
    return exp(p.nll);
}

static void test_dtype(const char *tmp, dt_type dt, const int *ids, size_t n) {
    char a[4400], b[4400];
    snprintf(a, sizeof a, "%s/%s", tmp, dt_name(dt));
    snprintf(b, sizeof b, "%s/%s-as-f32", tmp, dt_name(dt));
    CHECK_OK(write_copy(a, dt, false));
    CHECK_OK(write_copy(b, dt, true));
    size_t T = n < 100 ? n : 100, V = 512;
    float *ref = logits_of(b, ids, T, MM_F32, 0);
    for (int simd = 1; simd >= 0; simd--) {
        mm_simd(simd);
        float *z = logits_of(a, ids, T, MM_F32, 0);
        double e = ref && z ? vec_rel_err(ref, z, T * V) : INFINITY;
        printf("%s f32 mode (simd %d): logits rel. error %.3g against the F32 copy of the same values\n", dt_name(dt), simd, e);
        CHECK(e < 1e-6, "%s f32 mode (simd %d): logits %.3g from the F32 copy's", dt_name(dt), simd, e);
        free(z);
    }
    mm_simd(true);
    float *zs = logits_of(a, ids, T, MM_F32, 1);
    double es = ref && zs ? vec_rel_err(ref, zs, T * V) : INFINITY;
    CHECK(es < 1e-6, "%s streamed: %.3g", dt_name(dt), es);
    free(zs);
    if (dt == DT_BF16) {
        double p32 = ppl_of(a, ids, n, MM_F32), p16 = ppl_of(a, ids, n, MM_BF16);
        mm_simd(false);
        double p16p = ppl_of(a, ids, n, MM_BF16);
        mm_simd(true);
        printf("BF16 weights: ppl f32 mode %.6f, bf16 mode %.6f (%+.3f %%), portable bf16 %.6f\n", p32, p16,
               100 * (p16 / p32 - 1), p16p);
        CHECK(fabs(p16 / p32 - 1) < 0.005, "bf16 mode perplexity %.6f within 0.5 %% of f32 mode's %.6f", p16, p32);
        CHECK(fabs(p16p / p32 - 1) < 0.005, "portable bf16 perplexity %.6f within 0.5 %% of %.6f", p16p, p32);
        /* not closer: a last-bit difference of a sum flips a BF16 rounding downstream, so the two
           routes differ by the size of BF16 rounding itself (3e-4 here), not of float32 sums */
        CHECK(fabs(p16p / p16 - 1) < 2e-3, "portable and vdpbf16ps bf16 agree: %.6f %.6f", p16p, p16);
        float *zb = logits_of(a, ids, T, MM_BF16, 0);
        double eb = ref && zb ? vec_rel_err(ref, zb, T * V) : 0;
        CHECK(eb > 1e-6 && eb < 0.05, "bf16 mode's logits differ from f32 mode's (activations rounded): %.3g", eb);
        free(zb);
    }
    free(ref);
}

int main(void) {
    const char *dir = getenv("ATTNLAB_MODELS");
    struct stat sb;
    snprintf(src, sizeof src, "%s/stories260K-hf", dir ? dir : "");
    snprintf(tokp, sizeof tokp, "%s/stories260K/tok512.bin", dir ? dir : "");
    if (!dir || stat(src, &sb) || stat(tokp, &sb)) check_skip("ATTNLAB_MODELS/stories260K-hf (and tok512.bin) not found");
    Tokenizer *tk = NULL;
    int *ids = NULL;
    size_t n = 0;
    CHECK_OK(tok_open(tokp, &tk));
    if (tk) CHECK_OK(tok_encode(tk, STORY, strlen(STORY), true, &ids, &n));
    tok_free(tk);
    const char *tmp = test_tmpdir();
    if (n > 100) {
        test_dtype(tmp, DT_BF16, ids, n);
        test_dtype(tmp, DT_F16, ids, n);
        test_dtype(tmp, DT_F8_E4M3, ids, n);
    } else
        CHECK(false, "the story has %zu tokens", n);
    free(ids);
    return check_done();
}
