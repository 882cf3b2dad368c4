/* fp8ct.c -- per-tensor / per-channel FP8 re-encoding of a rewritten weight (see fp8ct.h). Owns
 * nothing. */
#include "fp8ct.h"

#include <math.h>
#include <string.h>

float fp8ct_scale(float old, double amax, dt_type sdt) {
    double s = old > 0 && isfinite(old) ? old : amax > 0 ? amax / 448.0 : 1.0;
    const double top = 448.0 * (1 + 1e-6);     /* a decoded 448 x s rounds to float: within it */
    if (amax > 0 && isfinite(amax)) {
        while (amax > top * s) s *= 2;
        while (amax <= 0.5 * 448.0 * s) s *= 0.5;
    }
    float f = (float)s, back = f;
    uint8_t buf[4];
    if (dt_from_f32(sdt, &f, 1, buf) == AL_OK && dt_to_f32(sdt, buf, 1, &back) == AL_OK && back > 0 && isfinite(back))
        return back;
    al_err_clear();
    return f;
}

void fp8ct_encode_row(const float *w, size_t n, float s, const float *wold, const uint8_t *old, float s_old,
                      uint8_t *q, double acc[2]) {
    bool keep = wold && old && s == s_old;
    for (size_t j = 0; j < n; j++) {
        q[j] = keep && memcmp(&w[j], &wold[j], sizeof *w) == 0 ? old[j] : dt_f32_to_e4m3(w[j] / s);
        double d = (double)(dt_e4m3_to_f32(q[j]) * s) - w[j];
        acc[0] += d * d;
        acc[1] += (double)w[j] * w[j];
    }
}
