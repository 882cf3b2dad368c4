/* symeig.c -- eigenvalues only, in double, of small symmetric matrices: power-of-two scaling, a
 * fused Householder tridiagonalization (AVX-512 or portable vector C, chosen at run time; in
 * double, or in float for symeig_values_f32_ws -- one body, symeig_tri.inc, for both; in float
 * also 16 matrices at once, one per lane, symeig_lanes.inc), and the tridiagonal stage (implicit QR on
 * 16 matrices at once in vector lanes, symeig_qr.inc: in double, two chains of 8, or for
 * symeig_values_f32_ws in float, one chain of 16; dsterf for a lone matrix).
 * See symeig.h for the algorithm and the error bound. */
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
#define AI static inline __attribute__((always_inline))
#define TGT_512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma")))

static bool force_portable;
static int lanes_from;       /* 0: F32_LANES_FROM */
static bool f32_qr_double;   /* symeig_values_f32_ws's QR in double lanes (the path before the float QR) */

void symeig_force_portable(bool on) { force_portable = on; }
void symeig_f32_lanes_from(int cnt) { lanes_from = cnt; }
void symeig_f32_qr_double(bool on) { f32_qr_double = on; }

static bool cpu_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

bool symeig_uses_avx512(void) { return !force_portable && cpu_avx512(); }

double symeig_bound(size_t n, double fro) { return SYMEIG_C * (double)n * 0x1p-53 * fro; }

/* The reduction's working set in one precision: the matrix in full storage and its vectors. */
#define TRI_STRUCT(R, name)                                                                          \
    typedef struct {                                                                                 \
        size_t n, ld;            /* ld = n rounded up to the vector width */                          \
        R *W;                    /* (ld, n) column-major, rows n..ld-1 zero */                        \
        R *v, *w, *y, *vn;       /* (ld) each: reflector, update vector, W v, next reflector */       \
        R *d, *e;                /* (n), (n): T's diagonal and subdiagonal */                         \
    } name
TRI_STRUCT(double, Tri_d);
TRI_STRUCT(float, Tri_f);

typedef float v16f __attribute__((vector_size(64)));
typedef int v16si __attribute__((vector_size(64)));

/* The float reduction of 16 matrices at once, one per lane (symeig_lanes.inc). */
typedef struct {
    size_t n;
    v16f *P;                 /* (n (n + 1) / 2): lower triangles packed by columns, lane k matrix k */
    v16f *v, *w, *y, *vn;    /* (n) each: reflector, update vector, A v, next reflector */
    v16f *d, *e;             /* (n) each: the T's by lane */
} Lanes;

/* Per-call scratch: the double reduction's (t), for symeig_values_f32_ws the float one's, one
 * matrix at a time (tf) or 16 in lanes (z). */
typedef struct {
    size_t n;
    Tri_d t;
    Tri_f tf;
    Lanes z;
    double *a, *b;                 /* (n, LANES): a group's diagonals and subdiagonals by lane */
    bool avx;                      /* the AVX-512 path */
    bool f32;                      /* reduce in float */
} Work;

/* ================================================================ the reduction (both paths, both precisions) */

#define TINY_d 0x1p-800            /* squared norm below which a reflector is skipped */
#define TINY_f 0x1p-100f
#define copysign_d copysign
#define copysign_f copysignf
#define sqrt_d sqrt
#define sqrt_f sqrtf

#define R double
#define VR v8d
#define VW 8
#define FN(x) x##_d
#include "symeig_tri.inc"
#undef R
#undef VR
#undef VW
#undef FN
#define R float
#define VR v16f
#define VW 16
#define FN(x) x##_f
#include "symeig_tri.inc"
#undef R
#undef VR
#undef VW
#undef FN

/* ================================================================ the float reduction in lanes */

#define VSEL(m, a, b) ((v16f)(((m) & (v16si)(a)) | (~(m) & (v16si)(b))))   /* per lane: m ? a : b */

/* Where column j of an n x n lower triangle packed by columns starts. */
AI size_t col_off(size_t n, size_t j) { return j * n - j * (j - 1) / 2; }

AI void lsqrt_portable(v16f *x) {
    for (int k = 0; k < 16; k++) (*x)[k] = sqrtf((*x)[k]);
}
TGT_512 AI void lsqrt_avx512(v16f *x) { *x = (v16f)_mm512_sqrt_ps((__m512)*x); }

#define LB 8                       /* columns a pass of the lanes' fused update takes at once */
#define LN(x) x##_lanes_portable
#define LSQRT lsqrt_portable
#define LTGT
#include "symeig_lanes.inc"
#undef LN
#undef LSQRT
#undef LTGT
#define LN(x) x##_lanes_avx512
#define LSQRT lsqrt_avx512
#define LTGT TGT_512
#include "symeig_lanes.inc"
#undef LN
#undef LSQRT
#undef LTGT

static void tridiag_lanes_portable(Lanes *z) { tridiag_body_lanes_portable(z); }
TGT_512 static void tridiag_lanes_avx512(Lanes *z) { tridiag_body_lanes_avx512(z); }

/* ================================================================ the tridiagonal stage, 16 at once */

#define LANES 16                /* two vectors of 8 doubles, or one of 16 floats */
#define LANE_OF(k) (((k) & 1) * 8 + (k) / 2)   /* matrix k of a group alternates between the two chains */
#define LANES_MIN 2     /* matrices from which a group's T's are solved in lanes */
#define SWEEPS_MAX 40   /* per eigenvalue, over the whole group: far above the ~2 seen */
#define F32_LANES_FROM 9   /* matrices from which a group's float reductions run in lanes (measured) */

/* The QR stage's scalar functions and per-precision steps, by symeig_qr.inc's QN names (x_d, x_f). */
#define fabs_d fabs
#define fabs_f fabsf
#define TINY2_d 0.0                /* the squared rotation length at or below which it is the identity */
#define TINY2_f 0x1p-100f
#define NEXT_X_d (cs * (ai1 - ai) + (cc - ss) * bi)    /* the next step's x and z */
#define NEXT_Z_d (sn * bi1)
#define NEXT_X_f (r2 > TINY2_f ? (xk * zk * (ai1 - ai) + (xk * xk - zk * zk) * bi) / r2 : bi)
#define NEXT_Z_f (zk * bi1 * inv)

#define QT double
#define QN(x) x##_d
#include "symeig_qr.inc"
#undef QT
#undef QN
#define QT float
#define QN(x) x##_f
#include "symeig_qr.inc"
#undef QT
#undef QN

/* The same with AVX-512, 8 lanes per vector: lanes outside their window get c = 1, s = 0 (an
 * exact identity) through masks, so there is no branch per lane. */
typedef struct {
    __m512i l, m, h;
    __m512d mu, tol, x, z;
} Chain;

TGT_512 AI void chain_init(Chain *q, const long *l, const long *m, const double *mu, const double *tol) {
    q->l = _mm512_loadu_si512(l);
    q->m = _mm512_loadu_si512(m);
    q->mu = _mm512_loadu_pd(mu);
    q->tol = _mm512_loadu_pd(tol);
    q->x = q->z = _mm512_setzero_pd();
    q->h = _mm512_set1_epi64(-1);
}

TGT_512 AI void step512(Chain *q, double *pa, double *pb, long i) {
    __m512i iv = _mm512_set1_epi64(i);
    __mmask8 act = _mm512_cmpge_epi64_mask(iv, q->l) & _mm512_cmplt_epi64_mask(iv, q->m);
    __mmask8 st = _mm512_cmpeq_epi64_mask(iv, q->l);
    __mmask8 inner = act & _mm512_cmplt_epi64_mask(_mm512_set1_epi64(i + 1), q->m);
    __m512d one = _mm512_set1_pd(1), ai = _mm512_load_pd(pa), ai1 = _mm512_load_pd(pa + LANES);
    __m512d bi = _mm512_load_pd(pb), bi1 = _mm512_load_pd(pb + LANES);
    __m512d x = _mm512_mask_blend_pd(st, q->x, ai - q->mu), z = _mm512_mask_blend_pd(st, q->z, bi);
    __m512d r2 = x * x + z * z, r = _mm512_sqrt_pd(r2);
    __mmask8 ok = act & _mm512_cmp_pd_mask(r2, _mm512_setzero_pd(), _CMP_GT_OQ);
    __m512d inv = one / _mm512_mask_blend_pd(ok, one, r);
    __m512d c = _mm512_mask_mul_pd(one, ok, x, inv), s = _mm512_maskz_mul_pd(ok, z, inv);
    __mmask8 mid = act & ~st;
    _mm512_mask_store_pd(pb - LANES, mid, r);
    q->h = _mm512_mask_mov_epi64(q->h, mid & _mm512_cmp_pd_mask(r, q->tol, _CMP_LE_OQ), _mm512_set1_epi64(i - 1));
    __m512d cc = c * c, ss = s * s, cs = c * s, cs2 = 2 * cs * bi;
    _mm512_store_pd(pa, cc * ai + cs2 + ss * ai1);
    _mm512_store_pd(pa + LANES, ss * ai + cc * ai1 - cs2);
    q->x = cs * (ai1 - ai) + (cc - ss) * bi;
    _mm512_store_pd(pb, q->x);
    q->z = s * bi1;
    _mm512_mask_store_pd(pb + LANES, inner, c * bi1);
}

/* Two independent chains of 8 lanes interleaved (the second only when a lane of it is on). */
TGT_512 static void sweep_avx512(double *a, double *b, const long *l, const long *m, const double *mu,
                                 const double *tol, long lo, long hi, long *hint) {
    Chain q0, q1;
    chain_init(&q0, l, m, mu, tol);
    chain_init(&q1, l + 8, m + 8, mu + 8, tol + 8);
    bool two = false;
    for (int k = 8; k < LANES; k++) two |= m[k] >= 0;
    for (long i = lo; i < hi; i++) {
        double *pa = a + i * LANES, *pb = b + i * LANES;
        step512(&q0, pa, pb, i);
        if (two) step512(&q1, pa + 8, pb + 8, i);
    }
    _mm512_storeu_si512(hint, q0.h);
    _mm512_storeu_si512(hint + 8, q1.h);
}

/* The float QR of symeig_values_f32_ws: one chain of 16 float lanes (lane L is row i's float L),
 * the step of step512 with 1 / r from vrsqrt14ps and 1 / r^2 from vrcp14ps, one Newton step each
 * (relative error below 2^-22, so c^2 + s^2 = 1 to a few float roundings: each rotation's error stays
 * O(u) of its rows), r = r^2 (1 / r). The chain to the next step is shortened: x' = cs (a_{i+1} - a_i)
 * + (c^2 - s^2) b_i is formed from x, z and 1 / r^2, z' = s b_{i+1} as z b_{i+1} (1 / r), and the
 * row's a_i, b_i come from the step before in registers (its store of b_i is masked, and a load
 * behind a masked store is not forwarded). A rotation whose r^2 is at or below QTINY2 (|x|, |z| <
 * 2^-50, far below tol) is the identity with r = 0, as on the portable path. */
typedef struct {
    __m512i l, m, h;
    __m512 mu, tol, x, z;
    __m512 a, b;     /* row i's a_i and b_i as the step before left them (not reloaded: its store of b_i is masked) */
} Chain16;

TGT_512 AI __m512i lanes_epi32(const long *p) {
    __m256i lo = _mm512_cvtepi64_epi32(_mm512_loadu_si512(p)), hi = _mm512_cvtepi64_epi32(_mm512_loadu_si512(p + 8));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

TGT_512 AI void step16(Chain16 *q, float *pa, float *pb, int i) {
    __m512i iv = _mm512_set1_epi32(i);
    __mmask16 act = _mm512_cmpge_epi32_mask(iv, q->l) & _mm512_cmplt_epi32_mask(iv, q->m);
    __mmask16 st = _mm512_cmpeq_epi32_mask(iv, q->l);
    __mmask16 inner = act & _mm512_cmplt_epi32_mask(_mm512_set1_epi32(i + 1), q->m);
    __m512 one = _mm512_set1_ps(1), ai = q->a, ai1 = _mm512_load_ps(pa + LANES);
    __m512 bi = q->b, bi1 = _mm512_load_ps(pb + LANES);
    __m512 x = _mm512_mask_blend_ps(st, q->x, ai - q->mu), z = _mm512_mask_blend_ps(st, q->z, bi);
    __m512 r2 = x * x + z * z;
    __mmask16 ok = act & _mm512_cmp_ps_mask(r2, _mm512_set1_ps(0x1p-100f), _CMP_GT_OQ);
    __m512 y = _mm512_rsqrt14_ps(r2), h = _mm512_set1_ps(0.5f) * r2 * y, q2 = _mm512_rcp14_ps(r2);
    y = y * _mm512_fnmadd_ps(h, y, _mm512_set1_ps(1.5f));     /* 1 / r */
    q2 = _mm512_fmadd_ps(q2, _mm512_fnmadd_ps(r2, q2, one), q2);   /* 1 / r2 */
    __m512 inv = _mm512_maskz_mov_ps(ok, y), inv2 = _mm512_maskz_mov_ps(ok, q2);
    __m512 c = _mm512_mask_mul_ps(one, ok, x, inv), s = z * inv;
    __m512 r = r2 * inv;
    __mmask16 mid = act & ~st;
    _mm512_mask_store_ps(pb - LANES, mid, r);
    q->h = _mm512_mask_mov_epi32(q->h, mid & _mm512_cmp_ps_mask(r, q->tol, _CMP_LE_OQ), _mm512_set1_epi32(i - 1));
    __m512 cc = c * c, ss = s * s, cs = c * s, cs2 = 2 * cs * bi;
    _mm512_store_ps(pa, cc * ai + cs2 + ss * ai1);
    q->a = ss * ai + cc * ai1 - cs2;
    _mm512_store_ps(pa + LANES, q->a);
    /* x' = cs (a_{i+1} - a_i) + (c^2 - s^2) b_i = (xz (a_{i+1} - a_i) + (x^2 - z^2) b_i) / r2, z' = s b_{i+1}:
     * from x and z by 1 / r2 and 1 / r, not through c and s (a shorter chain to the next step) */
    __m512 xn = (x * z * (ai1 - ai) + (x * x - z * z) * bi) * inv2;
    q->x = _mm512_mask_blend_ps(ok, bi, xn);
    _mm512_store_ps(pb, q->x);
    q->z = z * bi1 * inv;
    q->b = _mm512_mask_mul_ps(bi1, inner, c, bi1);
    _mm512_mask_store_ps(pb + LANES, inner, q->b);
}

TGT_512 static void sweep16_avx512(float *a, float *b, const long *l, const long *m, const float *mu, const float *tol,
                                   long lo, long hi, long *hint) {
    Chain16 q = {.l = lanes_epi32(l), .m = lanes_epi32(m), .h = _mm512_set1_epi32(-1)};
    q.mu = _mm512_loadu_ps(mu);
    q.tol = _mm512_loadu_ps(tol);
    q.x = q.z = _mm512_setzero_ps();
    q.a = _mm512_load_ps(a + lo * LANES);
    q.b = _mm512_load_ps(b + lo * LANES);
    for (long i = lo; i < hi; i++) step16(&q, a + i * LANES, b + i * LANES, (int)i);
    _mm512_storeu_si512(hint, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(q.h)));
    _mm512_storeu_si512(hint + 8, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(q.h, 1)));
}

/* The lanes' T's (s->a, s->b: floats widened exactly) solved by the float QR: narrowed (exactly)
 * into z->d, z->e as rows of 16 floats, tolerance 2^-24 g per lane, the values widened back. */
static int lanes_values_f32(Work *s, const double *tol, unsigned on) {
    size_t n = s->n;
    float *a = (float *)s->z.d, *b = (float *)s->z.e, tf[LANES];
    for (size_t i = 0; i < LANES * n; i++) {
        a[i] = (float)s->a[i];
        b[i] = (float)s->b[i];
    }
    for (int L = 0; L < LANES; L++) tf[L] = (float)(tol[L] * 0x1p29);    /* 2^-53 g to 2^-24 g */
    if (lanes_values_f(n, a, b, tf, on, s->avx ? sweep16_avx512 : sweep_portable_f) != AL_OK) return AL_ERR;
    for (size_t i = 0; i < LANES * n; i++) s->a[i] = a[i];
    return AL_OK;
}

/* ================================================================ driver */

/* The scratch of n x n solves, in doubles: the double reduction's, the QR lanes', the float
 * reduction's one at a time and in lanes (16 floats, 8 doubles, an element). */
static size_t work_count(size_t n) {
    size_t ld = (n + 7) & ~(size_t)7, lf = (n + 15) & ~(size_t)15;
    return ld * n + 4 * ld + 2 * n + 2 * LANES * n + 8 + (lf * n + 4 * lf + 2 * n) / 2 + 16 +
           8 * (n * (n + 1) / 2 + 6 * n) + 8;
}

/* Lays out s over mem (work_count(n) doubles, 64-byte aligned). */
static void work_layout(size_t n, double *mem, bool f32, Work *s) {
    memset(s, 0, sizeof *s);
    s->n = s->t.n = s->tf.n = n;
    s->f32 = f32;
    Tri_d *t = &s->t;
    t->ld = (n + 7) & ~(size_t)7;
    t->W = mem;
    t->v = t->W + t->ld * n;
    t->w = t->v + t->ld;
    t->y = t->w + t->ld;
    t->vn = t->y + t->ld;
    s->a = t->vn + t->ld;          /* 64-byte aligned like the vectors: LANES * n doubles */
    s->b = s->a + LANES * n;
    t->d = s->b + LANES * n;
    t->e = t->d + n;
    Tri_f *f = &s->tf;             /* after the 8 spare doubles, 64-byte aligned again */
    f->ld = (n + 15) & ~(size_t)15;
    f->W = (float *)(mem + ((size_t)(t->e + n - mem) + 7 + 8) / 8 * 8);
    f->v = f->W + f->ld * n;
    f->w = f->v + f->ld;
    f->y = f->w + f->ld;
    f->vn = f->y + f->ld;
    f->d = f->vn + f->ld;
    f->e = f->d + n;
    Lanes *z = &s->z;              /* 64-byte aligned after the float reduction's */
    z->n = n;
    size_t off = (size_t)((char *)(f->e + n) - (char *)mem);
    z->P = (v16f *)((char *)mem + ((off + 63) & ~(size_t)63));
    z->v = z->P + n * (n + 1) / 2;
    z->w = z->v + n;
    z->y = z->w + n;
    z->vn = z->y + n;
    z->d = z->vn + n;
    z->e = z->d + n;
    s->avx = symeig_uses_avx512();
    if (f32) memset(f->W, 0, f->ld * n * sizeof(float));     /* rows n..ld-1 stay zero */
    else memset(t->W, 0, t->ld * n * sizeof(double));
}

/* The loaded (scaled, full storage) matrix in s->t.W (s->tf.W, rounded to float, for the float
 * reduction) to T in s->t.d, s->t.e: T widened (exactly) to double after a float reduction. */
static void reduce(Work *s) {
    if (!s->f32) {
        (s->avx ? tridiag_avx512_d : tridiag_portable_d)(&s->t);
        return;
    }
    size_t n = s->n;
    (s->avx ? tridiag_avx512_f : tridiag_portable_f)(&s->tf);
    for (size_t i = 0; i < n; i++) {
        s->t.d[i] = s->tf.d[i];
        s->t.e[i] = i + 1 < n ? s->tf.e[i] : 0;
    }
}

struct SymeigWork {
    size_t n;                /* the largest n it holds scratch for */
    double *mem;
};

SymeigWork *symeig_work_new(size_t n) {
    size_t bytes;
    if (!al_mul_ok(work_count(n ? n : 1), sizeof(double), &bytes, "symeig scratch")) return NULL;
    bytes = (bytes + 63) & ~(size_t)63;
    SymeigWork *ws = al_calloc(1, sizeof *ws, "the eigen-solver's scratch");
    if (ws && !(ws->mem = aligned_alloc(64, bytes))) {
        free(ws);
        al_err("out of memory for the eigen-solver's scratch (%zu bytes, n = %zu)", bytes, n);
        return NULL;
    }
    if (ws) ws->n = n ? n : 1;
    return ws;
}

void symeig_work_free(SymeigWork *ws) {
    if (ws) free(ws->mem);
    free(ws);
}

/* max |a_ij| over A's lower triangle, or NaN when an entry is NaN or infinite (the sum of
 * a_ij * 0 is NaN exactly then). */
static double scan_portable(const double *A, size_t n) {
    double mx = 0, nan = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) {
            double a = fabs(A[i + j * n]);
            mx = a > mx ? a : mx;
            nan += a * 0;
        }
    return mx + nan;
}

TGT_512 static double scan_avx512(const double *A, size_t n) {
    __m512d mx = _mm512_setzero_pd(), nan = mx;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i += 8) {
            __mmask8 k = n - i >= 8 ? 0xff : (__mmask8)((1u << (n - i)) - 1);
            __m512d a = _mm512_abs_pd(_mm512_maskz_loadu_pd(k, A + i + j * n));
            mx = _mm512_max_pd(mx, a);
            nan = _mm512_fmadd_pd(a, _mm512_setzero_pd(), nan);
        }
    return _mm512_reduce_max_pd(mx) + _mm512_reduce_add_pd(nan);
}

/* The float reduction's load: A's lower triangle times f (or ldexp by far when far != 0), rounded
 * to float, into t->W in full storage (mirrored in 16 x 16 tiles) -- the double W skipped. */
static void store_f32(Tri_f *t, const double *A, double f, int far) {
    size_t n = t->n, ld = t->ld;
    for (size_t j = 0; j < n; j++) {
        float *col = t->W + j * ld;
        const double *a = A + j * n;
        if (far)
            for (size_t i = j; i < n; i++) col[i] = (float)ldexp(a[i], far);
        else
            for (size_t i = j; i < n; i++) col[i] = (float)(a[i] * f);
    }
    for (size_t jb = 0; jb < n; jb += 16)
        for (size_t ib = jb; ib < n; ib += 16)
            for (size_t j = jb; j < jb + 16 && j < n; j++)
                for (size_t i = ib > j ? ib : j + 1; i < ib + 16 && i < n; i++) t->W[j + i * ld] = t->W[i + j * ld];
}

/* A's lower triangle checked finite (else an error naming matrix idx and the entry) and its
 * scale: max|a_ij| 2^-ex in [1/2, 1); *zero when A is zero (then *ex is not set). */
static int scale_of(const Work *s, const double *A, size_t idx, int *ex, bool *zero) {
    size_t n = s->n;
    double mx = (s->avx ? scan_avx512 : scan_portable)(A, n);
    if (isnan(mx)) {
        for (size_t j = 0; j < n; j++)
            for (size_t i = j; i < n; i++)
                if (!isfinite(A[i + j * n]))
                    return al_err("symmetric matrix %zu has a NaN or infinite entry at (%zu, %zu); check its source", idx,
                                  i, j);
    }
    *zero = mx == 0;
    if (!*zero) frexp(mx, ex);
    return AL_OK;
}

/* A's lower triangle, checked finite and scaled by 2^-ex (max|a| in [1/2, 1)), into s->t.W (or
 * s->tf.W) in full storage (the upper triangle mirrored in 8 x 8 tiles); *ex = the exponent; *zero when A is zero
 * (then W is not written). */
static int load(Work *s, const double *A, size_t idx, int *ex, bool *zero) {
    size_t n = s->n, ld = s->t.ld;
    if (scale_of(s, A, idx, ex, zero) != AL_OK) return AL_ERR;
    if (*zero) return AL_OK;
    double f = ldexp(1.0, -*ex);   /* exact; a power of two past the range only for |ex| > 1000 */
    bool far = *ex < -1000 || *ex > 1000;
    if (s->f32) {
        store_f32(&s->tf, A, f, far ? -*ex : 0);
        return AL_OK;
    }
    for (size_t j = 0; j < n; j++) {
        double *col = s->t.W + j * ld;
        const double *a = A + j * n;
        if (far)
            for (size_t i = j; i < n; i++) col[i] = ldexp(a[i], -*ex);
        else
            for (size_t i = j; i < n; i++) col[i] = a[i] * f;
    }
    for (size_t jb = 0; jb < n; jb += 8)
        for (size_t ib = jb; ib < n; ib += 8)
            for (size_t j = jb; j < jb + 8 && j < n; j++)
                for (size_t i = ib > j ? ib : j + 1; i < ib + 8 && i < n; i++) s->t.W[j + i * ld] = s->t.W[i + j * ld];
    return AL_OK;
}

/* The lanes' load: matrix k's lower triangle times g1[k] g2[k] (2^-ex in two exact steps; 0 for a
 * zero matrix or a lane past the group, whose p[k] is another matrix), rounded to float, into lane
 * k of z->P. The AVX-512 copy gathers element (i, j) of the 16 matrices by their addresses. */
static void interleave_portable(Lanes *z, const double *const *p, const double *g1, const double *g2) {
    size_t n = z->n;
    v16f *P = z->P;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) {
            v16f x;
            for (int k = 0; k < LANES; k++) x[k] = (float)(p[k][i + j * n] * g1[k] * g2[k]);
            *P++ = x;
        }
}

TGT_512 static void interleave_avx512(Lanes *z, const double *const *p, const double *g1, const double *g2) {
    size_t n = z->n;
    __m512i a0 = _mm512_loadu_si512(p), a1 = _mm512_loadu_si512(p + 8);    /* the addresses */
    __m512d s0 = _mm512_loadu_pd(g1), s1 = _mm512_loadu_pd(g1 + 8), t0 = _mm512_loadu_pd(g2), t1 = _mm512_loadu_pd(g2 + 8);
    float *P = (float *)z->P;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++, P += 16) {
            __m512i off = _mm512_set1_epi64((long long)((i + j * n) * sizeof(double)));
            __m512d x0 = _mm512_i64gather_pd(_mm512_add_epi64(a0, off), NULL, 1);
            __m512d x1 = _mm512_i64gather_pd(_mm512_add_epi64(a1, off), NULL, 1);
            _mm256_store_ps(P, _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_mul_pd(x0, s0), t0)));
            _mm256_store_ps(P + 8, _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_mul_pd(x1, s1), t1)));
        }
}

/* z's T of lane k into s->t.d, s->t.e, widened exactly to double (e[n-1] = 0). */
static void lane_tri(Work *s, int k) {
    size_t n = s->n;
    for (size_t i = 0; i < n; i++) {
        s->t.d[i] = s->z.d[i][k];
        s->t.e[i] = i + 1 < n ? s->z.e[i][k] : 0;
    }
}

/* x[0..cnt-1] *= 2^ex (a product by an exact power of two, or ldexp where that is out of range). */
static void scale2(double *x, size_t cnt, int ex) {
    double f = ldexp(1.0, ex);
    for (size_t i = 0; i < cnt; i++) x[i] = ex < -1000 || ex > 1000 ? ldexp(x[i], ex) : x[i] * f;
}

static int desc(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a < b) - (a > b);
}

/* T in s->t.d, s->t.e into lane L of the QR stage (s->a, s->b), with its tolerance tol[L]. */
static void put_tri(Work *s, int L, double *tol, unsigned *on) {
    size_t n = s->n;
    const double *d = s->t.d, *e = s->t.e;
    double g = 0;
    for (size_t i = 0; i < n; i++) {
        double r = fabs(d[i]) + (i + 1 < n ? fabs(e[i]) : 0) + (i ? fabs(e[i - 1]) : 0);
        g = r > g ? r : g;
        s->a[i * LANES + L] = d[i];
        if (i + 1 < n) s->b[i * LANES + L] = e[i];
    }
    tol[L] = 0x1p-53 * g;
    *on |= 1u << L;
}

/* The float reduction of A[0..cnt-1] in lanes: each checked and scaled, all 16 interleaved and
 * reduced at once, their T's put in the QR lanes. */
static int tri_lanes(Work *s, const double *const *A, size_t idx, int cnt, int *ex, double *tol, unsigned *on) {
    double f1[LANES], f2[LANES];
    bool zero[LANES];
    for (int k = 0; k < cnt; k++) {
        int e = 0;
        if (scale_of(s, A[k], idx + (size_t)k, &e, &zero[k]) != AL_OK) return AL_ERR;
        ex[LANE_OF(k)] = e;
        f1[k] = zero[k] ? 0 : ldexp(1.0, -e / 2);      /* exact, and each in range for any e */
        f2[k] = zero[k] ? 1 : ldexp(1.0, -e - (-e / 2));
    }
    const double *p[LANES];
    double g1[LANES], g2[LANES];
    for (int k = 0; k < LANES; k++) {
        p[k] = A[k < cnt ? k : 0];
        g1[k] = k < cnt ? f1[k] : 0;
        g2[k] = k < cnt ? f2[k] : 1;
    }
    (s->avx ? interleave_avx512 : interleave_portable)(&s->z, p, g1, g2);
    (s->avx ? tridiag_lanes_avx512 : tridiag_lanes_portable)(&s->z);
    for (int k = 0; k < cnt; k++) {
        if (zero[k]) continue;
        lane_tri(s, k);
        put_tri(s, LANE_OF(k), tol, on);
    }
    return AL_OK;
}

/* Matrices A[0..cnt-1] (numbered from idx in messages) to their T's in the QR lanes (matrix k in
 * lane LANE_OF(k); a zero matrix's lane stays off), their exponents and tolerances. */
static int group_tri(Work *s, const double *const *A, size_t idx, int cnt, int *ex, double *tol, unsigned *on) {
    size_t n = s->n;
    memset(s->a, 0, LANES * n * sizeof(double));
    memset(s->b, 0, LANES * n * sizeof(double));
    if (s->f32 && cnt >= (lanes_from ? lanes_from : F32_LANES_FROM)) return tri_lanes(s, A, idx, cnt, ex, tol, on);
    for (int k = 0; k < cnt; k++) {
        int L = LANE_OF(k);
        bool zero = false;
        if (load(s, A[k], idx + (size_t)k, &ex[L], &zero) != AL_OK) return AL_ERR;
        if (zero) continue;
        reduce(s);
        put_tri(s, L, tol, on);
    }
    return AL_OK;
}

/* Lane L's T (one matrix) by dsterf, its values back into the lane. */
static int lane_dsterf(Work *s, int L) {
    size_t n = s->n;
    for (size_t i = 0; i < n; i++) {
        s->t.d[i] = s->a[i * LANES + L];
        s->t.e[i] = s->b[i * LANES + L];
    }
    lapack_int info = LAPACKE_dsterf_work((lapack_int)n, s->t.d, s->t.e);
    if (info != 0) return al_err("the tridiagonal eigenvalue iteration (dsterf) did not converge (info %d)", (int)info);
    for (size_t i = 0; i < n; i++) s->a[i * LANES + L] = s->t.d[i];
    return AL_OK;
}

/* Matrices A[0..cnt-1] (numbered from idx in messages): each reduced to T, then all T's at once
 * in the QR lanes (a group of one: dsterf). */
static int group_values(Work *s, const double *const *A, double *const *w, size_t idx, int cnt) {
    size_t n = s->n;
    int ex[LANES] = {0};
    unsigned on = 0;
    double tol[LANES] = {0};
    if (group_tri(s, A, idx, cnt, ex, tol, &on) != AL_OK) return AL_ERR;
    if (cnt >= LANES_MIN) {
        int rc = s->f32 && !f32_qr_double ? lanes_values_f32(s, tol, on)
                        : lanes_values_d(n, s->a, s->b, tol, on, s->avx ? sweep_avx512 : sweep_portable_d);
        if (rc != AL_OK) return AL_ERR;
    } else if (on & 1) {
        if (lane_dsterf(s, 0) != AL_OK) return AL_ERR;
    }
    for (int k = 0; k < cnt; k++) {
        int L = LANE_OF(k);
        if (!(on >> L & 1)) {
            memset(w[k], 0, n * sizeof(double));
            continue;
        }
        for (size_t i = 0; i < n; i++) w[k][i] = s->a[i * LANES + L];
        qsort(w[k], n, sizeof(double), desc);
        scale2(w[k], n, ex[L]);
    }
    return AL_OK;
}

static int values_ws(SymeigWork *ws, size_t nb, size_t n, const double *const *A, double *const *w, bool f32) {
    if (n == 0 || nb == 0) return AL_OK;
    if (n > ws->n) return al_err("internal: eigen-solver scratch for n = %zu used for n = %zu", ws->n, n);
    Work s;
    work_layout(n, ws->mem, f32, &s);
    int rc = AL_OK;
    for (size_t g = 0; g < nb && rc == AL_OK; g += LANES) {
        int cnt = nb - g < LANES ? (int)(nb - g) : LANES;
        if (cnt >= LANES_MIN) {
            rc = group_values(&s, A + g, w + g, g, cnt);
        } else {
            for (int k = 0; k < cnt && rc == AL_OK; k++) rc = group_values(&s, A + g + k, w + g + k, g + (size_t)k, 1);
        }
    }
    return rc;
}

int symeig_values_ws(SymeigWork *ws, size_t nb, size_t n, const double *const *A, double *const *w) {
    return values_ws(ws, nb, n, A, w, false);
}

int symeig_values_f32_ws(SymeigWork *ws, size_t nb, size_t n, const double *const *A, double *const *w) {
    return values_ws(ws, nb, n, A, w, true);
}

double symeig_bound_f32(size_t n, double fro) { return SYMEIG_C * (double)(n + 1) * 0x1p-24 * fro; }

int symeig_values(size_t nb, size_t n, const double *const *A, double *const *w) {
    if (n == 0 || nb == 0) return AL_OK;
    SymeigWork *ws = symeig_work_new(n);
    int rc = ws ? symeig_values_ws(ws, nb, n, A, w) : AL_ERR;
    symeig_work_free(ws);
    return rc;
}
