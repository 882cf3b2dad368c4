/* test_ckpt_mat_t.c -- ckpt_add_mat_t (core/io/ckpt_write.h), the TransMLA export's new attention
 * matrices: written transposed and converted in cache tiles with no float copy (issue 32: the
 * export at its floor). The bytes must be dt_from_f32 of mat_transpose, bit for bit, in F32, F16
 * and BF16, for shapes that are not multiples of the tile (1, 31, 33, 70 rows / columns), for
 * NaN (quieted as dt_f32_to_bf16 does), infinities, values that round to infinity, ties to even,
 * and a one-column matrix (1-D); the lazy tensors' shared scratch buffer must not leak one tensor's
 * bytes into the next (a large one, then a small one, then one of another dtype). */
#include "check.h"
#include "ckpt_write.h"
#include "safetensors.h"

#include <math.h>
#include <stdint.h>

/* Values that exercise the rounding: specials, ties, and a random spread of magnitudes. */
static void fill_values(Mat *m, uint64_t seed) {
    static const uint32_t special[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7f800000u, 0xff800000u, 0x7f7fffffu,
                                       0x3f808000u, 0x3f818000u, 0x3f808001u, 0x80000000u, 0x00000001u, 0x38000000u};
    for (size_t i = 0; i < m->rows * m->cols; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t u = (uint32_t)(seed >> 32);
        float f;
        if (i % 7 == 3) u = special[(i / 7) % (sizeof special / sizeof *special)];
        else { f = ldexpf((float)((double)(u >> 8) / (1 << 24) - 0.5), (int)(u % 40) - 20); memcpy(&u, &f, 4); }
        memcpy(&m->data[i], &u, 4);
    }
}

/* Whether tensor name of file f holds dt_from_f32(dt, mat_transpose(m)). */
static bool bytes_as_old(const st_file *f, const char *name, const Mat *m, dt_type dt) {
    const st_entry *e = st_find(f, name);
    Mat *t = mat_transpose(m);
    size_t n = m->rows * m->cols, nb = n * dt_size(dt);
    uint8_t *want = malloc(nb ? nb : 1);
    bool ok = e && t && want && e->dtype == dt && e->end - e->begin == nb && dt_from_f32(dt, t->data, n, want) == AL_OK &&
              memcmp(st_data(f, e), want, nb) == 0;
    if (ok && m->cols == 1) ok = e->ndim == 1 && e->shape[0] == m->rows;
    if (ok && m->cols > 1) ok = e->ndim == 2 && e->shape[0] == m->cols && e->shape[1] == m->rows;
    free(want);
    mat_free(t);
    return ok;
}

int main(void) {
    const char *tmp = test_tmpdir();
    static const size_t shapes[][2] = {{70, 33}, {1, 31}, {31, 1}, {64, 64}, {33, 70}, {5, 3}, {200, 130}};
    static const dt_type dts[] = {DT_BF16, DT_F16, DT_F32};
    enum { NS = sizeof shapes / sizeof *shapes };
    Mat *m[NS];
    for (size_t i = 0; i < NS; i++) {
        m[i] = mat_new(shapes[i][0], shapes[i][1]);
        fill_values(m[i], 11 + i);
    }
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        char *dir = al_asprintf("%s/mat_t_%zu", tmp, d), *file = al_asprintf("%s/model.safetensors", dir);
        CkptWriter *w;
        CkptOpts o = {0};
        CHECK_OK(ckpt_begin(dir, &o, &w));
        for (size_t i = 0; i < NS; i++) {
            char name[32];
            snprintf(name, sizeof name, "t%zu", i);
            CHECK_OK(ckpt_add_mat_t(w, name, i == NS - 1 ? DT_F32 : dts[d], m[i]));   /* the last: another dtype */
        }
        CHECK_ERR(ckpt_add_mat_t(w, "q", DT_F8_E4M3, m[0]), "cannot write a computed tensor");
        CHECK_OK(ckpt_commit(w, NULL));
        st_file *f = NULL;
        CHECK_OK(st_open(file, &f));
        for (size_t i = 0; f && i < NS; i++) {
            char name[32];
            snprintf(name, sizeof name, "t%zu", i);
            dt_type dt = i == NS - 1 ? DT_F32 : dts[d];
            CHECK(bytes_as_old(f, name, m[i], dt), "%s: %zu x %zu in %s: not dt_from_f32 of the transpose", name,
                  shapes[i][0], shapes[i][1], dt_name(dt));
        }
        st_close(f);
        free(dir);
        free(file);
    }
    for (size_t i = 0; i < NS; i++) mat_free(m[i]);
    return check_done();
}
