/* symeig.c -- eigenvalues only, in double, of small symmetric matrices: power-of-two scaling, a
 * fused Householder tridiagonalization (AVX-512 or portable vector C, chosen at run time) and the
 * tridiagonal stage. See symeig.h for the algorithm and the error bound. */
#define _GNU_SOURCE
#include "symeig.h"
#include "symeig_internal.h"

#include "al.h"

#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef double v8d __attribute__((vector_size(64)));
#define V(p) (*(v8d *)(p))
#define AI static inline __attribute__((always_inline))
#define TGT_512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))
#define RB 4                       /* row blocks of 8 held in registers by the fused pass */
#define HOUSE_TINY 0x1p-800        /* squared norm below which a reflector is skipped */

static bool force_portable;

void symeig_force_portable(bool on) { force_portable = on; }

static bool cpu_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

bool symeig_uses_avx512(void) { return !force_portable && cpu_avx512(); }

double symeig_bound(size_t n, double fro) { return SYMEIG_C * (double)n * 0x1p-53 * fro; }

/* Per-call scratch: the matrix in full storage and the reduction's vectors. */
typedef struct {
    size_t n, ld;                  /* ld = n rounded up to 8 */
    double *W;                     /* (ld, n) column-major, rows n..ld-1 zero */
    double *v, *w, *y, *vn;        /* (ld) each: reflector, update vector, W v, next reflector */
    double *d, *e;                 /* (n), (n): T's diagonal and subdiagonal */
    double *mem;
} Work;

/* ================================================================ the reduction (both paths) */

AI double hsum(const v8d *p) {
    v8d a = *p;
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* The reflector of column c (rows c+1..n-1) into vn (zero outside them, vn[c+1] = 1): I - tau vn
 * vnᵀ maps the column to beta e_{c+1}. */
AI void house(const double *col, size_t c, size_t ld, double *vn, double *tau, double *beta) {
    size_t r0 = (c + 1) & ~(size_t)7;
    memset(vn, 0, (r0 + 8) * sizeof(double));
    for (size_t r = c + 2; r < r0 + 8 && r < ld; r++) vn[r] = col[r];
    for (size_t r = r0 + 8; r < ld; r += 8) V(vn + r) = V(col + r);
    v8d acc = {0};
    for (size_t r = r0; r < ld; r += 8) acc += V(vn + r) * V(vn + r);
    double ss = hsum(&acc), alpha = col[c + 1];
    if (ss < HOUSE_TINY) {
        memset(vn + r0, 0, (ld - r0) * sizeof(double));
        *tau = 0;
        *beta = alpha;
        return;
    }
    double b = -copysign(sqrt(alpha * alpha + ss), alpha), sc = 1 / (alpha - b);
    for (size_t r = r0; r < ld; r += 8) V(vn + r) *= sc;
    vn[c + 1] = 1;
    *tau = (b - alpha) / b;
    *beta = b;
}

/* Columns j0..n-1, rows r..r+8*nbk-1: W -= v wᵀ + w vᵀ, and y = (updated W) vn over them. */
AI void fused_tile(double *W, size_t ld, size_t n, size_t r, size_t j0, const double *v, const double *w,
                   const double *vn, double *y, int nbk) {
    v8d vr[RB], wr[RB], acc[RB];
    for (int b = 0; b < nbk; b++) {
        vr[b] = V(v + r + 8 * b);
        wr[b] = V(w + r + 8 * b);
        acc[b] = (v8d){0};
    }
    for (size_t j = j0; j < n; j++) {
        double *col = W + j * ld + r, sw = w[j], sv = v[j], sn = vn[j];
        for (int b = 0; b < nbk; b++) {
            v8d a = V(col + 8 * b) - vr[b] * sw - wr[b] * sv;
            V(col + 8 * b) = a;
            acc[b] += a * sn;
        }
    }
    for (int b = 0; b < nbk; b++) V(y + r + 8 * b) = acc[b];
}

/* W (s->n, full storage, scaled) to T = (d, e). Step c applies the previous reflector's
 * two-sided update to column c, takes d[c] and column c's reflector, and then in one pass over
 * the trailing columns applies the same update and forms W vn for the next step. */
AI void tridiag_body(Work *s) {
    size_t n = s->n, ld = s->ld;
    double *W = s->W, *v = s->v, *w = s->w, *y = s->y, *vn = s->vn, tau = 0;
    memset(v, 0, ld * sizeof(double));
    memset(y, 0, ld * sizeof(double));
    for (size_t c = 0; c < n; c++) {
        size_t R = c & ~(size_t)7;
        v8d acc = {0};
        for (size_t r = R; r < ld; r += 8) {
            V(w + r) = tau * V(y + r);
            acc += V(w + r) * V(v + r);
        }
        double alpha = -0.5 * tau * hsum(&acc);
        for (size_t r = R; r < ld; r += 8) V(w + r) += alpha * V(v + r);
        for (size_t r = R; r < c; r++) w[r] = 0;
        double *col = W + c * ld;
        for (size_t r = R; r < ld; r += 8) V(col + r) -= V(v + r) * w[c] + V(w + r) * v[c];
        s->d[c] = col[c];
        double tn = 0;
        if (c + 2 < n) {
            house(col, c, ld, vn, &tn, &s->e[c]);
        } else {
            memset(vn, 0, ld * sizeof(double));
            if (c + 1 < n) s->e[c] = col[c + 1];
        }
        size_t R1 = (c + 1) & ~(size_t)7, r = R1;
        for (; r + 8 * RB <= ld; r += 8 * RB) fused_tile(W, ld, n, r, c + 1, v, w, vn, y, RB);
        for (; r < ld; r += 8) fused_tile(W, ld, n, r, c + 1, v, w, vn, y, 1);
        double *t = v;
        v = vn;
        vn = t;
        tau = tn;
    }
}

static void tridiag_portable(Work *s) { tridiag_body(s); }
TGT_512 static void tridiag_avx512(Work *s) { tridiag_body(s); }

/* ================================================================ driver */

static int work_new(size_t n, Work *s) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->ld = (n + 7) & ~(size_t)7;
    size_t cnt = s->ld * n + 4 * s->ld + 2 * n + 8, bytes;
    if (!al_mul_ok(cnt, sizeof(double), &bytes, "symeig scratch")) return AL_ERR;
    bytes = (bytes + 63) & ~(size_t)63;
    s->mem = aligned_alloc(64, bytes);
    if (!s->mem) return al_err("out of memory for the eigen-solver's scratch (%zu bytes, n = %zu)", bytes, n);
    s->W = s->mem;
    s->v = s->W + s->ld * n;
    s->w = s->v + s->ld;
    s->y = s->w + s->ld;
    s->vn = s->y + s->ld;
    s->d = s->vn + s->ld;
    s->e = s->d + n;
    return AL_OK;
}

/* A's lower triangle, checked finite and scaled by 2^-ex (max|a| in [1/2, 1)), into s->W in full
 * storage; *ex = the exponent; *zero when A is zero (then W is not written). */
static int load(Work *s, const double *A, size_t idx, int *ex, bool *zero) {
    size_t n = s->n, ld = s->ld;
    double mx = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) {
            double a = fabs(A[i + j * n]);
            if (!(a <= DBL_MAX))
                return al_err("symmetric matrix %zu has a NaN or infinite entry at (%zu, %zu); check its source", idx, i, j);
            mx = a > mx ? a : mx;
        }
    *zero = mx == 0;
    if (*zero) return AL_OK;
    frexp(mx, ex);
    for (size_t j = 0; j < n; j++) {
        double *col = s->W + j * ld;
        for (size_t i = j; i < n; i++) col[i] = s->W[j + i * ld] = ldexp(A[i + j * n], -*ex);
        for (size_t i = n; i < ld; i++) col[i] = 0;
    }
    return AL_OK;
}

/* T's eigenvalues into w, descending, times 2^ex. */
static int tri_values(Work *s, int ex, double *w) {
    size_t n = s->n;
    lapack_int info = LAPACKE_dsterf_work((lapack_int)n, s->d, s->e);
    if (info != 0) return al_err("the tridiagonal eigenvalue iteration (dsterf) did not converge (info %d)", (int)info);
    for (size_t i = 0; i < n; i++) w[i] = ldexp(s->d[n - 1 - i], ex);
    return AL_OK;
}

int symeig_values(size_t nb, size_t n, const double *const *A, double *const *w) {
    if (n == 0 || nb == 0) return AL_OK;
    Work s;
    if (work_new(n, &s) != AL_OK) return AL_ERR;
    void (*tridiag)(Work *) = symeig_uses_avx512() ? tridiag_avx512 : tridiag_portable;
    int rc = AL_OK;
    for (size_t i = 0; i < nb && rc == AL_OK; i++) {
        int ex = 0;
        bool zero = false;
        rc = load(&s, A[i], i, &ex, &zero);
        if (rc != AL_OK) break;
        if (zero) {
            memset(w[i], 0, n * sizeof(double));
            continue;
        }
        tridiag(&s);
        rc = tri_values(&s, ex, w[i]);
    }
    free(s.mem);
    return rc;
}
