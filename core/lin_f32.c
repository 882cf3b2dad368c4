/* lin_f32.c -- the fast route's values-only eigen-solves in float (ssytrd + ssterf, spotrf /
 * spstrf, strmm) with their error bounds, and rank certification. See lin_f32.h. */
#define _GNU_SOURCE
#include "lin_f32.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LIN_F32_CEIG 4.0     /* eigen-solver backward error: LIN_F32_CEIG k u ||X||_F */

static double unit(void) { return ldexp(1.0, -24); }
static double gam(double n) { double u = unit(); return n * u / (1 - n * u); }

static int linf_fail(const char *routine, int info) {
    return al_err("LAPACK %s failed (info %d) on a float Gram matrix; check the weights for NaN/Inf", routine, info);
}

/* Eigenvalues (ascending) of the symmetric k x k float matrix A (column-major, lower triangle
 * used; destroyed): ssytrd + ssterf, what ssyevd does without vectors. */
static int eigvals_f(float *A, size_t k, float *w) {
    if (k == 0) return AL_OK;
    size_t lwork = 8 * k;
    float *work = al_malloc3(lwork + 2 * k, 1, sizeof(float), "eigen-solver workspace");
    if (!work) return AL_ERR;
    float *e = work + lwork, *tau = e + k;
    lapack_int info = LAPACKE_ssytrd_work(LAPACK_COL_MAJOR, 'L', (lapack_int)k, A, (lapack_int)k, w, e, tau, work,
                                          (lapack_int)lwork);
    if (info == 0) info = LAPACKE_ssterf_work((lapack_int)k, w, e);
    free(work);
    return info == 0 ? AL_OK : linf_fail("ssytrd/ssterf", (int)info);
}

static double fro_d(const double *A, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += A[i] * A[i];
    return sqrt(s);
}

/* p singular values from the ascending eigenvalues w (n of them) into s; returns the sum of the
 * magnitudes of the negative ones that were clamped to zero. */
static double take_sigma(const float *w, size_t n, Spectrum *s, size_t p) {
    double neg = 0;
    for (size_t i = 0; i < n; i++) if (w[i] < 0) neg -= w[i];
    for (size_t i = 0; i < p && i < n; i++) {
        double l = w[n - 1 - i];
        s->sigma[i] = l > 0 ? sqrt(l) : 0;
    }
    lin_spectrum_total(s);
    return neg;
}

void linf_side_free(LinFSide *s) {
    if (!s) return;
    lin_spectrum_free(s->s);
    free(s->L);
    free(s->piv);
    free(s);
}

/* Float Cholesky of Gf (k x k) into s (spotrf; spstrf at LAPACK's default tolerance when not
 * numerically positive definite), with s->lerr, s->lnorm2. gerr: G's own bound. */
static int side_cholesky_f(const float *Gf, size_t k, double gerr, LinFSide *s) {
    float *F = al_malloc3(k, k, sizeof(float), "a Cholesky factor");
    if (!F) return AL_ERR;
    memcpy(F, Gf, k * k * sizeof(float));
    lapack_int info = LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)k, F, (lapack_int)k);
    double trunc = 0;
    if (info < 0) { free(F); return linf_fail("spotrf", (int)info); }
    s->r = k;
    if (info > 0) {
        lapack_int *piv = al_malloc3(k, 1, sizeof(lapack_int), "Cholesky pivots");
        float *work = al_malloc3(2 * k, 1, sizeof(float), "Cholesky workspace");
        s->piv = al_malloc3(k, 1, sizeof(int), "Cholesky pivots");
        lapack_int rank = 0;
        if (piv && work && s->piv) {
            memcpy(F, Gf, k * k * sizeof(float));
            info = LAPACKE_spstrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)k, F, (lapack_int)k, piv, &rank, -1.0f, work);
        }
        int rc = !piv || !work || !s->piv ? AL_ERR : info < 0 ? linf_fail("spstrf", (int)info) : AL_OK;
        for (size_t i = 0; rc == AL_OK && i < k; i++) s->piv[i] = (int)piv[i] - 1;
        free(piv); free(work);
        if (rc != AL_OK) { free(F); return rc; }
        s->r = (size_t)rank;
        /* the Schur complement left out: k - r diagonal entries below spstrf's tolerance
         * (k eps max diag), positive semi-definite, so its Frobenius norm is below its trace */
        double dmax = 0;
        for (size_t i = 0; i < k; i++) dmax = fmax(dmax, Gf[i * k + i]);
        trunc = (double)(k - s->r) * (double)k * ldexp(1.0, -23) * dmax;
    }
    double l2 = 0;
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < k; i++) {
            if (i < j || j >= s->r) F[j * k + i] = 0;
            l2 += (double)F[j * k + i] * F[j * k + i];
        }
    s->L = F;
    s->lnorm2 = l2;
    /* G's error, its rounding to float, Cholesky's backward error gamma_{k+1} |L||Lᵀ|, truncation */
    s->lerr = gerr + unit() * s->fro + gam((double)k + 1) * l2 + trunc;
    return AL_OK;
}

int linf_side_new(const double *G, size_t k, size_t rows, double gerr, bool factor, LinFSide **out) {
    *out = NULL;
    for (size_t i = 0; i < k * k; i++)
        if (!isfinite(G[i])) return al_err("a Gram matrix holds NaN/Inf: the factor's weights are not finite");
    LinFSide *s = al_calloc(1, sizeof *s, "a Gram factor");
    if (!s) return AL_ERR;
    s->k = k;
    s->rows = rows;
    size_t ns = rows < k ? rows : k;
    s->s = lin_spectrum_new(rows, k, ns, false);
    float *Gf = al_malloc3(k ? k : 1, k ? k : 1, sizeof(float), "a float Gram");
    float *A = al_malloc3(k ? k : 1, k ? k : 1, sizeof(float), "an eigen-solve copy");
    float *w = al_malloc3(k ? k : 1, 1, sizeof(float), "eigenvalues");
    int rc = s->s && Gf && A && w ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        for (size_t i = 0; i < k * k; i++) Gf[i] = (float)G[i];
        memcpy(A, Gf, k * k * sizeof(float));
        s->fro = fro_d(G, k * k);
        rc = eigvals_f(A, k, w);
    }
    if (rc == AL_OK && k) {
        double neg = take_sigma(w, k, s->s, ns);
        double e = gerr + unit() * s->fro + LIN_F32_CEIG * (double)k * unit() * s->fro;
        s->eps = e + neg;
        s->norm = fmax(w[k - 1], 0) + s->eps;
        if (factor) rc = side_cholesky_f(Gf, k, gerr, s);
    }
    free(Gf); free(A); free(w);
    if (rc != AL_OK) { linf_side_free(s); return rc; }
    *out = s;
    return AL_OK;
}

/* M = Lᵀ Gp L (r x r, column-major) in float, Gp = Pᵀ Gb P. */
static int fused_core(const LinFSide *a, const double *Gb, float *M) {
    size_t k = a->k, r = a->r;
    float *Gp = al_malloc3(k, k, sizeof(float), "a fused core");
    if (!Gp) return AL_ERR;
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < k; i++) {
            size_t pi = a->piv ? (size_t)a->piv[i] : i, pj = a->piv ? (size_t)a->piv[j] : j;
            Gp[j * k + i] = (float)Gb[pi * k + pj];
        }
    if (!a->piv) {
        cblas_strmm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (int)k, (int)k, 1.0f, a->L,
                    (int)k, Gp, (int)k);
        cblas_strmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (int)k, (int)k, 1.0f, a->L, (int)k,
                    Gp, (int)k);
        memcpy(M, Gp, k * k * sizeof(float));
        free(Gp);
        return AL_OK;
    }
    float *W = al_malloc3(k, r, sizeof(float), "a fused core");
    if (!W) { free(Gp); return AL_ERR; }
    cblas_ssymm(CblasColMajor, CblasLeft, CblasLower, (int)k, (int)r, 1.0f, Gp, (int)k, a->L, (int)k, 0.0f, W, (int)k);
    cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)r, (int)r, (int)k, 1.0f, a->L, (int)k, W, (int)k, 0.0f, M,
                (int)r);
    free(W); free(Gp);
    return AL_OK;
}

int linf_fused(const LinFSide *a, const double *Gb, double gberr, double gbnorm, size_t m, size_t n, Spectrum **out,
               double *eps) {
    *out = NULL;
    size_t k = a->k, r = a->r, p = m < n ? m : n;
    if (k < p) p = k;
    *eps = 0;
    if (!a->L && k) return al_err("internal: the fused spectrum needs a factored side (linf_side_new with factor)");
    for (size_t i = 0; i < k * k; i++)
        if (!isfinite(Gb[i])) return al_err("a Gram matrix holds NaN/Inf: the factor's weights are not finite");
    Spectrum *s = lin_spectrum_new(m, n, p, false);
    if (!s) return AL_ERR;
    double gbfro = fro_d(Gb, k * k);
    double eb = gberr + unit() * gbfro;          /* Gb's error and its rounding to float */
    /* ||L||_2^2 = ||L Lᵀ||_2 <= ||G_A||_2 + lerr */
    double l2 = fmin(a->norm + a->lerr, a->lnorm2);
    double e = l2 * eb + gbnorm * a->lerr;
    if (r == 0 || p == 0) { *eps = e; *out = s; return AL_OK; }
    float *M = al_malloc3(k, k, sizeof(float), "a fused core");
    float *w = al_malloc3(r, 1, sizeof(float), "eigenvalues");
    int rc = M && w ? fused_core(a, Gb, M) : AL_ERR;
    double mfro = 0;
    for (size_t i = 0; rc == AL_OK && i < r * r; i++) mfro += (double)M[i] * M[i];
    mfro = sqrt(mfro);
    if (rc == AL_OK) rc = eigvals_f(M, r, w);
    if (rc == AL_OK) {
        double neg = take_sigma(w, r, s, p < r ? p : r);
        /* the two triangular products W = Gp L, M = Lᵀ W: |dW| <= gamma_k |Gp||L|, so
         * ||dM||_F <= gamma_k ||L||_F (||L||_2 ||Gp||_F + ||Gp||_2 ||L||_F) (+ second order) */
        double lf = sqrt(a->lnorm2);
        e += gam((double)k) * lf * (sqrt(l2) * gbfro + gbnorm * lf) * (1 + 1e-3) +
             LIN_F32_CEIG * (double)r * unit() * mfro + neg;
        *eps = e;
    }
    free(M); free(w);
    if (rc != AL_OK) { lin_spectrum_free(s); return rc; }
    *out = s;
    return AL_OK;
}

bool linf_rank_certain(const Spectrum *s, double eps, double tau) {
    if (!(eps > 0)) return true;
    size_t p = s->p;
    double T = 0;
    for (size_t i = 0; i < p; i++) T += s->sigma[i] * s->sigma[i];
    if (!(T > 0)) return false;              /* a zero spectrum with an error: maybe not zero */
    size_t r = lin_effective_rank(s->sigma, p, tau);
    /* f(q) = S_q - tau T moves by at most sqrt(q) eps + tau sqrt(p) eps; plus the double route's
     * own rounding (1e-10 T, far above it) */
    double slack = tau * sqrt((double)p) * eps + 1e-10 * T, S = 0;
    for (size_t i = 0; i + 1 < r; i++) S += s->sigma[i] * s->sigma[i];
    if (r > 1 && S - tau * T > -(sqrt((double)(r - 1)) * eps + slack)) return false;
    S += s->sigma[r - 1] * s->sigma[r - 1];
    return S - tau * T >= sqrt((double)r) * eps + slack;
}
