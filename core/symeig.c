/* symeig.c -- eigenvalues only, in double, of small symmetric matrices: power-of-two scaling, a
 * fused Householder tridiagonalization (AVX-512 or portable vector C, chosen at run time) and the
 * tridiagonal stage. See symeig.h for the algorithm and the error bound. */
#define _GNU_SOURCE
#include "symeig.h"
#include "symeig_internal.h"

#include "al.h"

#include <float.h>
#include <immintrin.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef double v8d __attribute__((vector_size(64)));
#define V(p) (*(v8d *)(p))
#define AI static inline __attribute__((always_inline))
#define TGT_512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))
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
    double *a, *b;                 /* (n, LANES): a group's diagonals and subdiagonals by lane */
    bool avx;                      /* the AVX-512 path */
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

/* Columns j0..n-1, rows r..r+31 (UPD4) or r..r+7 (UPD1): W -= v wᵀ + w vᵀ, and y = (updated W) vn
 * over them. Written out so that v, w and the sums stay in registers. */
#define UPD(q, vq, wq, yq) do { \
        v8d a_ = V(col + (q)) - (vq) * sw - (wq) * sv; \
        V(col + (q)) = a_; \
        yq += a_ * sn; \
    } while (0)

AI void fused_tile4(double *W, size_t ld, size_t n, size_t r, size_t j0, const double *v, const double *w,
                    const double *vn, double *y) {
    v8d v0 = V(v + r), v1 = V(v + r + 8), v2 = V(v + r + 16), v3 = V(v + r + 24);
    v8d w0 = V(w + r), w1 = V(w + r + 8), w2 = V(w + r + 16), w3 = V(w + r + 24);
    v8d y0 = {0}, y1 = {0}, y2 = {0}, y3 = {0};
    for (size_t j = j0; j < n; j++) {
        double *col = W + j * ld + r, sw = w[j], sv = v[j], sn = vn[j];
        UPD(0, v0, w0, y0);
        UPD(8, v1, w1, y1);
        UPD(16, v2, w2, y2);
        UPD(24, v3, w3, y3);
    }
    V(y + r) = y0;
    V(y + r + 8) = y1;
    V(y + r + 16) = y2;
    V(y + r + 24) = y3;
}

AI void fused_tile1(double *W, size_t ld, size_t n, size_t r, size_t j0, const double *v, const double *w,
                    const double *vn, double *y) {
    v8d v0 = V(v + r), w0 = V(w + r), y0 = {0};
    for (size_t j = j0; j < n; j++) {
        double *col = W + j * ld + r, sw = w[j], sv = v[j], sn = vn[j];
        UPD(0, v0, w0, y0);
    }
    V(y + r) = y0;
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
        for (; r + 32 <= ld; r += 32) fused_tile4(W, ld, n, r, c + 1, v, w, vn, y);
        for (; r < ld; r += 8) fused_tile1(W, ld, n, r, c + 1, v, w, vn, y);
        double *t = v;
        v = vn;
        vn = t;
        tau = tn;
    }
}

static void tridiag_portable(Work *s) { tridiag_body(s); }
TGT_512 static void tridiag_avx512(Work *s) { tridiag_body(s); }

/* ================================================================ the tridiagonal stage, 8 at once */

/* Implicit symmetric QR with Wilkinson shifts (Golub and Van Loan, Alg. 8.3.2) on up to 8
 * tridiagonal matrices at once, one per vector lane: a[i*8 + L], b[i*8 + L] are lane L's
 * diagonal and subdiagonal (b[(n-1)*8 + L] = 0). Each lane sweeps its own window [l, m] (an
 * unreduced block at the bottom of what is left); the sweep runs over the union of the windows
 * with the rotation of a lane outside its window set to the identity (exactly: c = 1, s = 0), so
 * there are no branches per step. An off-diagonal at or below tol[L] (u times a bound on ||T||) is
 * set to zero: at the bottom it deflates a[m], in the window it splits it. */
typedef long v8l __attribute__((vector_size(64)));   /* lane masks (-1 or 0) and indices */
#define LANES 8
#define LANES_MIN 2     /* matrices from which a group's T's are solved in lanes */
#define SWEEPS_MAX 40   /* per eigenvalue, over the whole group: far above the ~2 seen */

#define SEL(m, x, y) ((v8d)(((m) & (v8l)(x)) | (~(m) & (v8l)(y))))
#define BCL(x) ((v8l){0} + (long)(x))
#define BCD(x) ((v8d){0} + (double)(x))

/* Lane L's next window: deflates the bottom (m down while b[m-1] is negligible), then l: the
 * sweep's record `hint` (the last split it saw in the window) or, when the window is used up, a
 * scan up from m. m = -1 when the lane is done. */
static void lane_window(double *b, int L, double tol, long *l, long *m, long hint) {
    long mm = *m, ll = *l;
    while (mm > 0 && fabs(b[(mm - 1) * LANES + L]) <= tol) b[(--mm) * LANES + L] = 0;
    if (mm <= 0) {
        *m = -1;
        return;
    }
    if (ll >= 0 && ll < mm) {
        if (hint >= ll && hint < mm - 1) ll = hint + 1;
    } else {
        ll = mm - 1;
        while (ll > 0 && fabs(b[(ll - 1) * LANES + L]) > tol) ll--;
    }
    *l = ll;
    *m = mm;
}

/* The Wilkinson shift of the trailing 2 x 2 of [l, m]. */
static double wilkinson(const double *a, const double *b, int L, long m) {
    double am = a[m * LANES + L], d = 0.5 * (a[(m - 1) * LANES + L] - am), e = b[(m - 1) * LANES + L];
    return am - e * e / (d + copysign(sqrt(d * d + e * e), d));
}

/* One sweep over rows lo..hi-1 of every lane; returns each lane's last small off-diagonal in hint. */
AI void sweep(double *a, double *b, const long *l, const long *m, const double *mu_, const double *tol_, long lo, long hi,
              long *hint, void (*vsqrt)(v8d *)) {
    v8l lv, mv;
    v8d mu, tol;
    memcpy(&lv, l, sizeof lv);
    memcpy(&mv, m, sizeof mv);
    memcpy(&mu, mu_, sizeof mu);
    memcpy(&tol, tol_, sizeof tol);
    v8d x = BCD(0), z = BCD(0);
    v8l h = BCL(-1);
    for (long i = lo; i < hi; i++) {
        v8l iv = BCL(i), act = (iv >= lv) & (iv < mv), st = iv == lv, inner = act & (iv + 1 < mv);
        double *pa = a + i * LANES, *pb = b + i * LANES;
        v8d ai = V(pa), ai1 = V(pa + LANES), bi = V(pb), bi1 = V(pb + LANES);
        x = SEL(st, ai - mu, x);
        z = SEL(st, bi, z);
        v8d r2 = x * x + z * z;
        v8l ok = act & (r2 > 0);
        v8d r = r2;
        vsqrt(&r);
        v8d inv = 1 / SEL(ok, r, BCD(1));
        v8d c = SEL(ok, x * inv, BCD(1)), s = SEL(ok, z * inv, BCD(0));
        if (i > 0) {
            v8l mid = act & ~st;
            V(pb - LANES) = SEL(mid, r, V(pb - LANES));
            h = (v8l)SEL(mid & (r <= tol), (v8d)(iv - 1), (v8d)h);
        }
        v8d cc = c * c, ss = s * s, cs = c * s, cs2 = 2 * cs * bi;
        V(pa) = cc * ai + cs2 + ss * ai1;
        V(pa + LANES) = ss * ai + cc * ai1 - cs2;
        x = cs * (ai1 - ai) + (cc - ss) * bi;
        V(pb) = x;
        z = s * bi1;
        V(pb + LANES) = SEL(inner, c * bi1, bi1);
    }
    memcpy(hint, &h, sizeof h);
}

static void vsqrt_portable(v8d *x) {
    for (int k = 0; k < LANES; k++) (*x)[k] = sqrt((*x)[k]);
}
TGT_512 static void vsqrt_512(v8d *x) { *x = (v8d)_mm512_sqrt_pd((__m512d)*x); }

/* The eigenvalues of the T's of the lanes set in `on` (the others idle) into a, in place; tol per lane. */
AI int lanes_body(size_t n, double *a, double *b, const double *tol, unsigned on, void (*vsqrt)(v8d *)) {
    long l[LANES], m[LANES], hint[LANES];
    double mu[LANES];
    for (int L = 0; L < LANES; L++) {
        l[L] = hint[L] = -1;
        m[L] = on >> L & 1 ? (long)n - 1 : -1;
    }
    for (size_t sweeps = 0;; sweeps++) {
        long lo = (long)n, hi = -1;
        for (int L = 0; L < LANES; L++) {
            mu[L] = 0;
            if (m[L] >= 0) lane_window(b, L, tol[L], &l[L], &m[L], hint[L]);
            if (m[L] < 0) continue;
            mu[L] = wilkinson(a, b, L, m[L]);
            lo = l[L] < lo ? l[L] : lo;
            hi = m[L] > hi ? m[L] : hi;
        }
        if (hi < 0) return AL_OK;
        if (sweeps > SWEEPS_MAX * n)
            return al_err("the tridiagonal QR iteration did not converge in %zu sweeps (n = %zu); report this matrix",
                          sweeps, n);
        sweep(a, b, l, m, mu, tol, lo, hi, hint, vsqrt);
    }
}

static int lanes_portable(size_t n, double *a, double *b, const double *tol, unsigned on) {
    return lanes_body(n, a, b, tol, on, vsqrt_portable);
}
TGT_512 static int lanes_avx512(size_t n, double *a, double *b, const double *tol, unsigned on) {
    return lanes_body(n, a, b, tol, on, vsqrt_512);
}

/* ================================================================ driver */

static int work_new(size_t n, Work *s) {
    memset(s, 0, sizeof *s);
    s->n = n;
    s->ld = (n + 7) & ~(size_t)7;
    size_t cnt = s->ld * n + 4 * s->ld + 2 * n + 2 * LANES * n + 8, bytes;
    if (!al_mul_ok(cnt, sizeof(double), &bytes, "symeig scratch")) return AL_ERR;
    bytes = (bytes + 63) & ~(size_t)63;
    s->mem = aligned_alloc(64, bytes);
    if (!s->mem) return al_err("out of memory for the eigen-solver's scratch (%zu bytes, n = %zu)", bytes, n);
    s->W = s->mem;
    s->v = s->W + s->ld * n;
    s->w = s->v + s->ld;
    s->y = s->w + s->ld;
    s->vn = s->y + s->ld;
    s->a = s->vn + s->ld;          /* 64-byte aligned like the vectors: LANES * n doubles */
    s->b = s->a + LANES * n;
    s->d = s->b + LANES * n;
    s->e = s->d + n;
    s->avx = symeig_uses_avx512();
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

/* T's eigenvalues into w, descending, times 2^ex (one matrix: dsterf). */
static int tri_values(Work *s, int ex, double *w) {
    size_t n = s->n;
    lapack_int info = LAPACKE_dsterf_work((lapack_int)n, s->d, s->e);
    if (info != 0) return al_err("the tridiagonal eigenvalue iteration (dsterf) did not converge (info %d)", (int)info);
    for (size_t i = 0; i < n; i++) w[i] = ldexp(s->d[n - 1 - i], ex);
    return AL_OK;
}

static int desc(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a < b) - (a > b);
}

/* Matrices A[0..cnt-1] (numbered from idx in messages): each reduced to T, then all T's at once. */
static int group_values(Work *s, const double *const *A, double *const *w, size_t idx, int cnt) {
    size_t n = s->n;
    int ex[LANES];
    unsigned on = 0;
    double tol[LANES] = {0};
    memset(s->a, 0, LANES * n * sizeof(double));
    memset(s->b, 0, LANES * n * sizeof(double));
    for (int L = 0; L < cnt; L++) {
        bool zero = false;
        if (load(s, A[L], idx + (size_t)L, &ex[L], &zero) != AL_OK) return AL_ERR;
        if (zero) {
            memset(w[L], 0, n * sizeof(double));
            continue;
        }
        (s->avx ? tridiag_avx512 : tridiag_portable)(s);
        double g = 0;
        for (size_t i = 0; i < n; i++) {
            double r = fabs(s->d[i]) + (i + 1 < n ? fabs(s->e[i]) : 0) + (i ? fabs(s->e[i - 1]) : 0);
            g = r > g ? r : g;
            s->a[i * LANES + L] = s->d[i];
            if (i + 1 < n) s->b[i * LANES + L] = s->e[i];
        }
        tol[L] = 0x1p-53 * g;
        on |= 1u << L;
    }
    if ((s->avx ? lanes_avx512 : lanes_portable)(n, s->a, s->b, tol, on) != AL_OK) return AL_ERR;
    for (int L = 0; L < cnt; L++) {
        if (!(on >> L & 1)) continue;
        for (size_t i = 0; i < n; i++) w[L][i] = s->a[i * LANES + L];
        qsort(w[L], n, sizeof(double), desc);
        for (size_t i = 0; i < n; i++) w[L][i] = ldexp(w[L][i], ex[L]);
    }
    return AL_OK;
}

/* One matrix: reduced to T, T's eigenvalues by dsterf. */
static int one_values(Work *s, const double *A, double *w, size_t idx) {
    int ex = 0;
    bool zero = false;
    if (load(s, A, idx, &ex, &zero) != AL_OK) return AL_ERR;
    if (zero) {
        memset(w, 0, s->n * sizeof(double));
        return AL_OK;
    }
    (s->avx ? tridiag_avx512 : tridiag_portable)(s);
    return tri_values(s, ex, w);
}

int symeig_values(size_t nb, size_t n, const double *const *A, double *const *w) {
    if (n == 0 || nb == 0) return AL_OK;
    Work s;
    if (work_new(n, &s) != AL_OK) return AL_ERR;
    int rc = AL_OK;
    for (size_t g = 0; g < nb && rc == AL_OK; g += LANES) {
        int cnt = nb - g < LANES ? (int)(nb - g) : LANES;
        if (cnt >= LANES_MIN) {
            rc = group_values(&s, A + g, w + g, g, cnt);
        } else {
            for (int L = 0; L < cnt && rc == AL_OK; L++) rc = one_values(&s, A[g + L], w[g + L], g + (size_t)L);
        }
    }
    free(s.mem);
    return rc;
}
