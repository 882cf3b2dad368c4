/* spectra.c -- singular spectra of single matrices and of fused products (Gram or QR route, never
 * the formed product) and effective ranks. Owns nothing global. See spectra.h for the contracts. */
#define _GNU_SOURCE
#include "spectra.h"

#include <cblas.h>
#include <lapacke.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ spectra */

Spectrum *spectrum_new(size_t m, size_t n, size_t p, bool vectors) {
    Spectrum *s = al_calloc(1, sizeof *s, "a spectrum");
    if (!s) return NULL;
    s->m = m; s->n = n; s->p = p;
    s->sigma = al_calloc(p ? p : 1, sizeof(double), "singular values");
    if (!s->sigma) { free(s); return NULL; }
    if (vectors) {
        size_t nu, nv;
        if (!al_mul_ok(m, p, &nu, "left singular vectors") ||
            !al_mul_ok(p, n, &nv, "right singular vectors")) { spectrum_free(s); return NULL; }
        s->U = al_calloc(nu ? nu : 1, sizeof(double), "left singular vectors");
        s->Vt = al_calloc(nv ? nv : 1, sizeof(double), "right singular vectors");
        if (!s->U || !s->Vt) { spectrum_free(s); return NULL; }
    }
    return s;
}

void spectrum_free(Spectrum *s) {
    if (!s) return;
    free(s->sigma);
    free(s->U);
    free(s->Vt);
    free(s);
}

Spectrum *spectrum_copy(const Spectrum *s) {
    Spectrum *c = spectrum_new(s->m, s->n, s->p, s->U != NULL);
    if (!c) return NULL;
    memcpy(c->sigma, s->sigma, s->p * sizeof(double));
    if (s->U) {
        memcpy(c->U, s->U, s->m * s->p * sizeof(double));
        memcpy(c->Vt, s->Vt, s->p * s->n * sizeof(double));
    }
    c->total = s->total;
    return c;
}

void spectrum_total(Spectrum *s) {
    double t = 0;
    for (size_t i = 0; i < s->p; i++) t += s->sigma[i] * s->sigma[i];
    s->total = t;
}

/* ================================================================ helpers */

static size_t min2(size_t a, size_t b) { return a < b ? a : b; }

static int lapack_fail(const char *routine, lapack_int info, const char *what) {
    if (info < 0)
        return al_err("LAPACK %s: illegal argument %d while computing %s (internal error)",
                      routine, (int)-info, what);
    return al_err("LAPACK %s did not converge (info %d) while computing %s; check the weights "
                  "for NaN/Inf", routine, (int)info, what);
}

/* Thin SVD of a row-major double matrix X (m x n), destroyed. Writes into s (p = min(m, n)
 * values; vectors when s->U is set). */
static int svd_inplace(double *X, size_t m, size_t n, Spectrum *s, const char *what) {
    size_t p = min2(m, n);
    if (p == 0) return AL_OK;
    lapack_int info;
    if (s->U) {
        info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', (lapack_int)m, (lapack_int)n, X,
                              (lapack_int)n, s->sigma, s->U, (lapack_int)p, s->Vt, (lapack_int)n);
    } else {
        info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', (lapack_int)m, (lapack_int)n, X,
                              (lapack_int)n, s->sigma, NULL, (lapack_int)p, NULL, (lapack_int)n);
    }
    if (info != 0) return lapack_fail("dgesdd", info, what);
    return AL_OK;
}

/* ================================================================ dense SVD */

/* Dense SVD of X (m x n, a work copy: destroyed). */
static int svd_work(MatD *X, unsigned flags, Spectrum **out) {
    *out = NULL;
    Spectrum *s = spectrum_new(X->rows, X->cols, min2(X->rows, X->cols), flags & SPECTRA_VECTORS);
    if (!s) return AL_ERR;
    int rc = svd_inplace(X->data, X->rows, X->cols, s, "a dense SVD");
    if (rc) { spectrum_free(s); return rc; }
    spectrum_total(s);
    *out = s;
    return AL_OK;
}

int spectra_svd_d(const double *W, size_t m, size_t n, unsigned flags, Spectrum **out) {
    *out = NULL;
    MatD *X = matd_new(m, n);
    if (!X) return al_err_ctx("an SVD work copy");
    memcpy(X->data, W, m * n * sizeof(double));
    int rc = svd_work(X, flags, out);
    matd_free(X);
    return rc;
}

int spectra_svd(const Mat *W, unsigned flags, Spectrum **out) {
    *out = NULL;
    MatD *X = matd_from_mat(W);
    if (!X) return al_err_ctx("an SVD work copy");
    int rc = svd_work(X, flags, out);
    matd_free(X);
    return rc;
}

/* ================================================================ Gram / QR factors */

/* The reduced factor of one side of a product: R (r x k), R is row-major, RᵀR ~= Gram.
 * For the Gram route R = diag(sqrt(lambda)) Zᵀ over the kept eigenpairs and, for vectors,
 * Winv = Z diag(1/sqrt(lambda)) (k x r) so that X Winv has orthonormal columns.
 * For the QR route R is the triangle of geqrf and Q (rows_x x r) is kept explicitly. */
typedef struct {
    size_t k, r;        /* inner dim, kept rank */
    double *R;          /* (r, k) */
    double *Winv;       /* (k, r) Gram route, vectors only */
    double *Q;          /* (rows, r) QR route, vectors only */
    double *sigma;      /* (min(rows, k)) singular values of the factor, descending */
    size_t nsigma;
} Side;

static void side_free(Side *s) {
    free(s->R); free(s->Winv); free(s->Q); free(s->sigma);
    memset(s, 0, sizeof *s);
}

/* Gram route for X (rows x k) given as row-major double, or Xᵀ when `xt` (then X is stored
 * (k x rows), and the side is its transpose). G = XᵀX (k x k) by dsyrk, eigen-solve by dsyevd,
 * eigenvalues below k*eps*lambda_max clamped to zero (rank-deficient factors). */
static int side_gram(const double *X, size_t rows, size_t k, bool xt, bool vectors, Side *s,
                     const char *what) {
    memset(s, 0, sizeof *s);
    s->k = k;
    double *G = al_malloc3(k, k, sizeof(double), "a Gram matrix");
    double *w = al_malloc3(k, 1, sizeof(double), "Gram eigenvalues");
    if (!G || !w) { free(G); free(w); return AL_ERR; }
    if (!xt)   /* X (rows x k): G = XᵀX */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)k, (int)rows, 1.0, X, (int)k,
                    0.0, G, (int)k);
    else       /* stored Xᵀ (k x rows): G = (Xᵀ)(Xᵀ)ᵀ */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)k, (int)rows, 1.0, X,
                    (int)rows, 0.0, G, (int)k);
    lapack_int info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)k, G, (lapack_int)k, w);
    if (info != 0) { free(G); free(w); return lapack_fail("dsyevd", info, what); }
    /* w ascending; eigenvector j is column j of G. */
    double lmax = k ? w[k - 1] : 0;
    double floor_ = (double)k * DBL_EPSILON * (lmax > 0 ? lmax : 0);
    size_t r = 0;
    for (size_t j = 0; j < k; j++) if (w[j] > floor_ && w[j] > 0) r++;
    if (r > rows) r = rows;      /* rank(XᵀX) <= rows: anything beyond is rounding */
    s->r = r;
    s->nsigma = min2(rows, k);
    s->sigma = al_calloc(s->nsigma ? s->nsigma : 1, sizeof(double), "factor singular values");
    s->R = al_malloc3(r ? r : 1, k, sizeof(double), "a reduced factor");
    if (vectors) s->Winv = al_malloc3(k, r ? r : 1, sizeof(double), "a factor basis");
    if (!s->sigma || !s->R || (vectors && !s->Winv)) { free(G); free(w); side_free(s); return AL_ERR; }
    for (size_t i = 0; i < s->nsigma; i++) {
        double l = w[k - 1 - i];
        s->sigma[i] = l > 0 ? sqrt(l) : 0;
    }
    /* Row t of R is eigenpair t in descending order: sqrt(lambda) zᵀ. */
    for (size_t t = 0; t < r; t++) {
        size_t j = k - 1 - t;
        double sl = sqrt(w[j]);
        for (size_t i = 0; i < k; i++) s->R[t * k + i] = sl * G[i * k + j];
        if (vectors)
            for (size_t i = 0; i < k; i++) s->Winv[i * r + t] = G[i * k + j] / sl;
    }
    free(G); free(w);
    return AL_OK;
}

/* QR route for the same X (rows x k) (or stored transposed when `xt`): geqrf gives R (r x k)
 * with r = min(rows, k); with vectors, orgqr gives Q (rows x r). The factor's own singular
 * values come from a small SVD of R. */
static int side_qr(const double *X, size_t rows, size_t k, bool xt, bool vectors, Side *s,
                   const char *what) {
    memset(s, 0, sizeof *s);
    s->k = k;
    size_t r = min2(rows, k);
    s->r = r;
    double *F = al_malloc3(rows, k, sizeof(double), "a QR work copy");
    double *tau = al_malloc3(r ? r : 1, 1, sizeof(double), "QR reflectors");
    if (!F || !tau) { free(F); free(tau); return AL_ERR; }
    /* F holds X (rows x k) in column-major order: for stored Xᵀ (k x rows, row-major) that is a
     * plain copy; for X row-major we transpose. */
    if (xt) memcpy(F, X, rows * k * sizeof(double));
    else for (size_t i = 0; i < rows; i++) for (size_t j = 0; j < k; j++) F[j * rows + i] = X[i * k + j];
    lapack_int info = LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)rows, (lapack_int)k, F,
                                     (lapack_int)rows, tau);
    if (info != 0) { free(F); free(tau); return lapack_fail("dgeqrf", info, what); }
    s->R = al_calloc(r ? r * k : 1, sizeof(double), "a reduced factor");
    s->nsigma = r;
    s->sigma = al_calloc(r ? r : 1, sizeof(double), "factor singular values");
    if (!s->R || !s->sigma) { free(F); free(tau); side_free(s); return AL_ERR; }
    for (size_t i = 0; i < r; i++) for (size_t j = i; j < k; j++) s->R[i * k + j] = F[j * rows + i];
    /* Singular values of the factor = those of R. */
    Spectrum tmp = { .m = r, .n = k, .p = r, .sigma = s->sigma };
    double *Rc = al_malloc3(r ? r : 1, k, sizeof(double), "an SVD work copy");
    if (!Rc) { free(F); free(tau); side_free(s); return AL_ERR; }
    memcpy(Rc, s->R, r * k * sizeof(double));
    int rc = svd_inplace(Rc, r, k, &tmp, what);
    free(Rc);
    if (rc) { free(F); free(tau); side_free(s); return rc; }
    if (vectors && r) {
        info = LAPACKE_dorgqr(LAPACK_COL_MAJOR, (lapack_int)rows, (lapack_int)r, (lapack_int)r, F,
                              (lapack_int)rows, tau);
        if (info != 0) { free(F); free(tau); side_free(s); return lapack_fail("dorgqr", info, what); }
        s->Q = al_malloc3(rows, r, sizeof(double), "a QR basis");
        if (!s->Q) { free(F); free(tau); side_free(s); return AL_ERR; }
        for (size_t i = 0; i < rows; i++) for (size_t j = 0; j < r; j++) s->Q[i * r + j] = F[j * rows + i];
    }
    free(F); free(tau);
    return AL_OK;
}

static Spectrum *side_spectrum(const Side *s, size_t rows) {
    Spectrum *sp = spectrum_new(rows, s->k, s->nsigma, false);
    if (!sp) return NULL;
    memcpy(sp->sigma, s->sigma, s->nsigma * sizeof(double));
    spectrum_total(sp);
    return sp;
}

int spectra_sigma_gram(const Mat *W, Spectrum **out) {
    *out = NULL;
    MatD *X = matd_from_mat(W);
    if (!X) return al_err_ctx("a Gram work copy");
    Side s;
    /* Gram of the smaller side: W (m x n) with n <= m -> WᵀW; else WWᵀ (W stored as Xᵀ). */
    int rc = W->cols <= W->rows ? side_gram(X->data, W->rows, W->cols, false, false, &s, "a spectrum")
                                : side_gram(X->data, W->cols, W->rows, true, false, &s, "a spectrum");
    matd_free(X);
    if (rc) return rc;
    Spectrum *sp = spectrum_new(W->rows, W->cols, s.nsigma, false);
    if (sp) {
        memcpy(sp->sigma, s.sigma, s.nsigma * sizeof(double));
        spectrum_total(sp);
    }
    side_free(&s);
    if (!sp) return AL_ERR;
    *out = sp;
    return AL_OK;
}

/* ================================================================ product SVD */

/* Left singular vectors of the product from the side factor: U = (basis of A) @ Uc. */
static int side_left_vectors(const Side *s, const double *X, size_t rows, const double *Uc,
                             size_t q, double *U, size_t p) {
    /* U (rows x p), first q columns filled. Gram: U = X (Winv Uc); QR: U = Q Uc. */
    double *Ufill = al_malloc3(rows, q ? q : 1, sizeof(double), "singular vectors");
    if (!Ufill) return AL_ERR;
    if (s->Q) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)q, (int)s->r, 1.0,
                    s->Q, (int)s->r, Uc, (int)q, 0.0, Ufill, (int)q);
    } else {
        double *M = al_malloc3(s->k, q ? q : 1, sizeof(double), "singular vectors");
        if (!M) { free(Ufill); return AL_ERR; }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s->k, (int)q, (int)s->r, 1.0,
                    s->Winv, (int)s->r, Uc, (int)q, 0.0, M, (int)q);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)q, (int)s->k, 1.0,
                    X, (int)s->k, M, (int)q, 0.0, Ufill, (int)q);
        free(M);
    }
    for (size_t i = 0; i < rows; i++) memcpy(U + i * p, Ufill + i * q, q * sizeof(double));
    free(Ufill);
    return AL_OK;
}

/* V of A op(B) (n x p, its first q columns; into s->Vt transposed): basis_B times Vc = Vctᵀ (rb x q).
 * By QR, or for SPECTRA_ABT, basis_B is fb's own; by Gram for SPECTRA_AB it is Bᵀ Winv, B stored
 * (k x n) (ab_gram). */
static int product_right_vectors(const Side *fb, const double *Bd, bool ab_gram, size_t n, size_t k,
                                 const double *Vct, size_t q, Spectrum *s) {
    size_t rb = fb->r, p = s->p;
    double *V = al_calloc((n * p) != 0 ? n * p : 1, sizeof(double), "singular vectors");
    double *Vc = V ? al_malloc3(rb, q, sizeof(double), "core singular vectors") : NULL;
    if (!Vc) { free(V); return AL_ERR; }
    for (size_t i = 0; i < q; i++) for (size_t j = 0; j < rb; j++) Vc[j * q + i] = Vct[i * rb + j];
    int vr = AL_ERR;
    if (ab_gram) {          /* V = Bᵀ (Winv Vc) */
        double *M = al_malloc3(k, q, sizeof(double), "singular vectors");
        double *Vf = M ? al_malloc3(n, q, sizeof(double), "singular vectors") : NULL;
        if (Vf) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)k, (int)q, (int)rb,
                        1.0, fb->Winv, (int)rb, Vc, (int)q, 0.0, M, (int)q);
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)q, (int)k,
                        1.0, Bd, (int)n, M, (int)q, 0.0, Vf, (int)q);
            for (size_t i = 0; i < n; i++) memcpy(V + i * p, Vf + i * q, q * sizeof(double));
            vr = AL_OK;
        }
        free(Vf);
        free(M);
    } else {
        vr = side_left_vectors(fb, Bd, n, Vc, q, V, p);
    }
    free(Vc);
    if (vr == AL_OK)
        for (size_t i = 0; i < n; i++) for (size_t j = 0; j < p; j++) s->Vt[j * n + i] = V[i * p + j];
    free(V);
    return vr;
}

/* The SVD of the core C = R_A R_Bᵀ (ra x rb; A op(B) = Q_A C Q_Bᵀ) into s->sigma and, when s has
 * vectors, s->U and s->Vt of A op(B). */
static int product_core(const Side *fa, const Side *fb, const double *Ad, const double *Bd, bool ab_gram,
                        size_t m, size_t n, size_t k, Spectrum *s) {
    size_t ra = fa->r, rb = fb->r, q = min2(ra, rb);
    bool vec = s->U != NULL;
    if (q == 0) return AL_OK;
    double *C = al_malloc3(ra, rb, sizeof(double), "the fused core"), *Uc = NULL, *Vct = NULL;
    int rc = C ? AL_OK : AL_ERR;
    if (rc == AL_OK)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)ra, (int)rb, (int)k, 1.0,
                    fa->R, (int)k, fb->R, (int)k, 0.0, C, (int)rb);
    Spectrum core = { .m = ra, .n = rb, .p = q, .sigma = s->sigma };
    if (rc == AL_OK && vec) {
        Uc = al_malloc3(ra, q, sizeof(double), "core singular vectors");
        Vct = al_malloc3(q, rb, sizeof(double), "core singular vectors");
        if (!Uc || !Vct) rc = AL_ERR;
        core.U = Uc; core.Vt = Vct;
    }
    if (rc == AL_OK) rc = svd_inplace(C, ra, rb, &core, "the core of a fused map");
    /* U = basis_A Uc (m x q); V = basis_B Vc (n x q) */
    if (rc == AL_OK && vec) rc = side_left_vectors(fa, Ad, m, Uc, q, s->U, s->p);
    if (rc == AL_OK && vec) rc = product_right_vectors(fb, Bd, ab_gram, n, k, Vct, q, s);
    free(C); free(Uc); free(Vct);
    return rc;
}

int spectra_product_svd(const Mat *A, const Mat *B, spectra_op op, unsigned flags,
                    Spectrum **ab, Spectrum **sa, Spectrum **sb) {
    *ab = NULL;
    if (sa) *sa = NULL;
    if (sb) *sb = NULL;
    size_t m = A->rows, k = A->cols;
    size_t kb = op == SPECTRA_AB ? B->rows : B->cols, n = op == SPECTRA_AB ? B->cols : B->rows;
    if (kb != k)
        return al_err("fused product: inner dimensions differ (A is %zux%zu, B%s is %zux%zu)",
                      A->rows, A->cols, op == SPECTRA_AB ? "" : "ᵀ", op == SPECTRA_AB ? B->rows : B->cols,
                      op == SPECTRA_AB ? B->cols : B->rows);
    bool vec = flags & SPECTRA_VECTORS, qr = flags & SPECTRA_QR;
    MatD *Am = matd_from_mat(A), *Bm = matd_from_mat(B);
    const double *Ad = Am ? Am->data : NULL, *Bd = Bm ? Bm->data : NULL;
    Side fa, fb;
    memset(&fa, 0, sizeof fa); memset(&fb, 0, sizeof fb);
    Spectrum *s = NULL;
    int rc = Ad && Bd ? AL_OK : AL_ERR;
    /* Side A: A (m x k). Side B: the n x k matrix op(B)ᵀ, i.e. Bᵀ for SPECTRA_AB (stored k x n,
     * transposed) and B itself for SPECTRA_ABT. */
    int (*factor)(const double *, size_t, size_t, bool, bool, Side *, const char *) = qr ? side_qr : side_gram;
    if (rc == AL_OK) rc = factor(Ad, m, k, false, vec, &fa, "the left factor of a fused map");
    if (rc == AL_OK) rc = factor(Bd, n, k, op == SPECTRA_AB, vec, &fb, "the right factor of a fused map");
    if (rc == AL_OK && !(s = spectrum_new(m, n, min2(min2(m, n), k), vec))) rc = AL_ERR;
    if (rc == AL_OK) rc = product_core(&fa, &fb, Ad, Bd, op == SPECTRA_AB && !qr, m, n, k, s);
    if (rc == AL_OK) spectrum_total(s);
    if (rc == AL_OK && sa && !(*sa = side_spectrum(&fa, m))) rc = AL_ERR;
    if (rc == AL_OK && sb && !(*sb = side_spectrum(&fb, n))) rc = AL_ERR;
    if (rc == AL_OK) { *ab = s; s = NULL; }
    if (rc) {
        if (sa) { spectrum_free(*sa); *sa = NULL; }
        if (sb) { spectrum_free(*sb); *sb = NULL; }
    }
    spectrum_free(s);
    side_free(&fa); side_free(&fb);
    matd_free(Am); matd_free(Bm);
    return rc;
}

int spectra_dense_product_svd(const Mat *A, const Mat *B, spectra_op op, unsigned flags, Spectrum **out) {
    *out = NULL;
    size_t m = A->rows, k = A->cols;
    size_t kb = op == SPECTRA_AB ? B->rows : B->cols, n = op == SPECTRA_AB ? B->cols : B->rows;
    if (kb != k) return al_err("dense product: inner dimensions differ (A is %zux%zu)", m, k);
    MatD *Ad = matd_from_mat(A), *Bd = matd_from_mat(B);
    double *F = al_malloc3(m, n, sizeof(double), "a formed product");
    int rc = AL_ERR;
    if (Ad && Bd && F) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, op == SPECTRA_AB ? CblasNoTrans : CblasTrans,
                    (int)m, (int)n, (int)k, 1.0, Ad->data, (int)k, Bd->data, op == SPECTRA_AB ? (int)n : (int)k,
                    0.0, F, (int)n);
        Spectrum *s = spectrum_new(m, n, min2(m, n), flags & SPECTRA_VECTORS);
        if (s) {
            rc = svd_inplace(F, m, n, s, "a dense product SVD");
            if (rc) spectrum_free(s);
            else { spectrum_total(s); *out = s; }
        }
    }
    matd_free(Ad); matd_free(Bd); free(F);
    return rc;
}

/* ================================================================ Gram route, values only */

int spectra_sym_eigvals(double *A, size_t k, double *w) {
    if (k == 0) return AL_OK;
    /* dsyevd without vectors is dsytrd + dsterf; called directly to skip its norm and scaling
     * passes. The workspace sets dsytrd's block size to 8 (k * nb): at k = 128 that is about 15%
     * faster than LAPACK's default 32, and 30% faster than the unblocked dsytd2 that the minimal
     * workspace forces (measured on these machines). Only matrices with entries of ordinary size
     * (Gram matrices of weights) come here; others are scaled first. */
    size_t lwork = 8 * k;
    double *work = al_malloc3(lwork + 2 * k, 1, sizeof(double), "eigen-solver workspace");
    if (!work) return AL_ERR;
    double *e = work + lwork, *tau = e + k;
    double amax = 0;
    for (size_t j = 0; j < k; j++)
        for (size_t i = j; i < k; i++) amax = fmax(amax, fabs(A[j * k + i]));
    double scale = (amax > 0 && (amax < 1e-150 || amax > 1e150)) ? 1.0 / amax : 1.0;
    if (scale != 1.0)
        for (size_t j = 0; j < k; j++)
            for (size_t i = j; i < k; i++) A[j * k + i] *= scale;
    lapack_int info = LAPACKE_dsytrd_work(LAPACK_COL_MAJOR, 'L', (lapack_int)k, A, (lapack_int)k, w, e, tau, work,
                                          (lapack_int)lwork);
    if (info != 0) { free(work); return lapack_fail("dsytrd", info, "the eigenvalues of a Gram matrix"); }
    info = LAPACKE_dsterf_work((lapack_int)k, w, e);
    free(work);
    if (info != 0) return lapack_fail("dsterf", info, "the eigenvalues of a Gram matrix");
    if (scale != 1.0) for (size_t i = 0; i < k; i++) w[i] /= scale;
    return AL_OK;
}

void spectra_gram_side_free(LinGramSide *s) {
    if (!s) return;
    spectrum_free(s->s);
    free(s->L);
    free(s->piv);
    free(s);
}

/* True when every entry of the k x k matrix is finite. */
static bool all_finite(const double *A, size_t n) {
    for (size_t i = 0; i < n; i++) if (!isfinite(A[i])) return false;
    return true;
}

/* Cholesky factor of G into s: G = L Lᵀ (dpotrf) when G is numerically positive definite, else
 * the pivoted Pᵀ G P = L Lᵀ of rank r (dpstrf, LAPACK's default tolerance k * eps * max diag).
 * L: k x r, column-major, zero above the diagonal. */
static int side_cholesky(const double *G, size_t k, LinGramSide *s) {
    double *F = al_malloc3(k, k, sizeof(double), "a Cholesky factor");
    if (!F) return AL_ERR;
    memcpy(F, G, k * k * sizeof(double));
    lapack_int info = LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)k, F, (lapack_int)k);
    if (info < 0) { free(F); return lapack_fail("dpotrf", info, "the Cholesky factor of a Gram matrix"); }
    if (info == 0) {
        s->r = k;
    } else {
        /* Not positive definite (a rank-deficient factor): pivot, and stop at the numerical rank. */
        lapack_int *piv = al_malloc3(k, 1, sizeof(lapack_int), "Cholesky pivots");
        double *work = al_malloc3(2 * k, 1, sizeof(double), "Cholesky workspace");
        s->piv = al_malloc3(k, 1, sizeof(int), "Cholesky pivots");
        lapack_int rank = 0;
        if (piv && work && s->piv) {
            memcpy(F, G, k * k * sizeof(double));
            info = LAPACKE_dpstrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)k, F, (lapack_int)k, piv, &rank, -1.0, work);
        }
        int rc = !piv || !work || !s->piv ? AL_ERR
                 : info < 0 ? lapack_fail("dpstrf", info, "the Cholesky factor of a Gram matrix") : AL_OK;
        if (rc == AL_OK)
            for (size_t i = 0; i < k; i++) s->piv[i] = (int)piv[i] - 1;
        free(piv); free(work);
        if (rc != AL_OK) { free(F); return rc; }
        s->r = (size_t)rank;
    }
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < j; i++) F[j * k + i] = 0;
    s->L = F;
    return AL_OK;
}

/* s->sigma (descending) from the ascending eigenvalues w[0..n): the largest min(p, n) of them,
 * clamped at zero, as singular values; the rest zero. */
void spectrum_set_eigs(Spectrum *s, const double *w, size_t n) {
    size_t q = min2(s->p, n);
    for (size_t i = 0; i < s->p; i++) {
        double l = i < q ? w[n - 1 - i] : 0;
        s->sigma[i] = l > 0 ? sqrt(l) : 0;
    }
    spectrum_total(s);
}

/* A factor record of G's shape with a zero spectrum (the values are filled in later). */
static LinGramSide *gram_side_alloc(const double *G, size_t k, size_t rows) {
    if (!all_finite(G, k * k)) {
        al_err("a Gram matrix holds NaN/Inf: the factor's weights are not finite");
        return NULL;
    }
    LinGramSide *s = al_calloc(1, sizeof *s, "a Gram factor");
    if (!s) return NULL;
    s->k = k;
    s->rows = rows;
    if (!(s->s = spectrum_new(rows, k, min2(rows, k), false))) { free(s); return NULL; }
    return s;
}

int spectra_gram_side_factor(const double *G, size_t k, size_t rows, LinGramSide **out) {
    *out = NULL;
    LinGramSide *s = gram_side_alloc(G, k, rows);
    if (!s) return AL_ERR;
    if (k && side_cholesky(G, k, s) != AL_OK) { spectra_gram_side_free(s); return AL_ERR; }
    *out = s;
    return AL_OK;
}

int spectra_gram_side_new(const double *G, size_t k, size_t rows, bool factor, LinGramSide **out) {
    *out = NULL;
    LinGramSide *s = gram_side_alloc(G, k, rows);
    if (!s) return AL_ERR;
    double *A = al_malloc3(k ? k : 1, k ? k : 1, sizeof(double), "an eigen-solve copy");
    double *w = al_malloc3(k ? k : 1, 1, sizeof(double), "eigenvalues");
    int rc = A && w ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        memcpy(A, G, k * k * sizeof(double));
        rc = spectra_sym_eigvals(A, k, w);
    }
    if (rc == AL_OK) {
        /* Ascending eigenvalues; the largest min(rows, k) are the squared singular values. */
        spectrum_set_eigs(s->s, w, k);
        if (factor && k) rc = side_cholesky(G, k, s);
    }
    free(A); free(w);
    if (rc != AL_OK) { spectra_gram_side_free(s); return rc; }
    *out = s;
    return AL_OK;
}

int spectra_gram_fused_core(const LinGramSide *a, const double *Gb, double *M) {
    size_t k = a->k, r = a->r;
    if (!a->L && k) return al_err("internal: the fused spectrum needs a factored side (spectra_gram_side_new with factor)");
    if (!all_finite(Gb, k * k))
        return al_err("a Gram matrix holds NaN/Inf: the factor's weights are not finite");
    if (r == 0) return AL_OK;                               /* a zero factor: a zero map */
    /* A op(B) has the singular values of R_A R_Bᵀ, where R_A = Lᵀ Pᵀ (R_Aᵀ R_A = G_A):
     * sigma^2 = eig(R_A Gb R_Aᵀ) = eig(Lᵀ Gp L), Gp = Pᵀ Gb P (Gb itself without pivoting). */
    if (!a->piv) {
        /* Full rank: M = Lᵀ Gb L in place by two triangular products. */
        memcpy(M, Gb, k * k * sizeof(double));
        cblas_dtrmm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (int)k, (int)k, 1.0, a->L,
                    (int)k, M, (int)k);
        cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (int)k, (int)k, 1.0, a->L, (int)k,
                    M, (int)k);
        return AL_OK;
    }
    /* Rank r <= k with pivots: W = Gp L (k x r), M = Lᵀ W (r x r). */
    double *Gp = al_malloc3(k, k, sizeof(double), "a fused core");
    double *W = al_malloc3(k, r, sizeof(double), "a fused core");
    int rc = Gp && W ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        for (size_t j = 0; j < k; j++)
            for (size_t i = 0; i < k; i++) Gp[j * k + i] = Gb[(size_t)a->piv[i] * k + (size_t)a->piv[j]];
        cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, (int)k, (int)r, 1.0, Gp, (int)k, a->L, (int)k, 0.0, W,
                    (int)k);
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)r, (int)r, (int)k, 1.0, a->L, (int)k, W, (int)k, 0.0,
                    M, (int)r);
    }
    free(Gp); free(W);
    return rc;
}

int spectra_gram_fused(const LinGramSide *a, const double *Gb, size_t m, size_t n, Spectrum **out) {
    *out = NULL;
    size_t k = a->k, r = a->r, p = min2(min2(m, n), k);
    Spectrum *s = spectrum_new(m, n, p, false);
    if (!s) return AL_ERR;
    double *M = al_malloc3(k ? k : 1, k ? k : 1, sizeof(double), "a fused core");
    double *w = al_malloc3(r ? r : 1, 1, sizeof(double), "eigenvalues");
    int rc = M && w ? spectra_gram_fused_core(a, Gb, M) : AL_ERR;
    if (rc == AL_OK && r && p) rc = spectra_sym_eigvals(M, r, w);
    if (rc == AL_OK && r && p) spectrum_set_eigs(s, w, r);
    free(M); free(w);
    if (rc != AL_OK) { spectrum_free(s); return rc; }
    *out = s;
    return AL_OK;
}

/* ================================================================ certain ranks */

bool spectra_rank_certain(const Spectrum *s, double eps, double tau) {
    if (!(eps > 0)) return true;
    size_t p = s->p;
    double T = 0;
    for (size_t i = 0; i < p; i++) T += s->sigma[i] * s->sigma[i];
    if (!(T > 0)) return false;              /* a zero spectrum with an error: maybe not zero */
    size_t r = spectra_effective_rank(s->sigma, p, tau);
    /* f(q) = S_q - tau T = (1 - tau) S_q - tau (T - S_q). The squared values move by d_i with
     * ||d||_2 <= eps (sorted order; clamping at zero is 1-Lipschitz), so by Cauchy-Schwarz f(q)
     * moves by at most eps sqrt((1 - tau)^2 q + tau^2 (p - q)). Plus the rounding of the rank's
     * own sums (1e-10 T, far above it). */
    double slack = 1e-10 * T, S = 0, a = (1 - tau) * (1 - tau), b = tau * tau;
    for (size_t i = 0; i + 1 < r; i++) S += s->sigma[i] * s->sigma[i];
    double q = (double)r - 1, P = (double)p;
    if (r > 1 && S - tau * T > -(eps * sqrt(a * q + b * (P - q)) + slack)) return false;
    S += s->sigma[r - 1] * s->sigma[r - 1];
    return S - tau * T >= eps * sqrt(a * (q + 1) + b * (P - q - 1)) + slack;
}

/* ================================================================ energy and rank */

size_t spectra_effective_rank(const double *sigma, size_t p, double tau) {
    double total = 0;
    for (size_t i = 0; i < p; i++) total += sigma[i] * sigma[i];
    if (!(total > 0)) return 0;
    double cum = 0;
    for (size_t i = 0; i < p; i++) {
        cum += sigma[i] * sigma[i];
        if (cum / total >= tau) return i + 1;
    }
    return p;
}

void spectra_cum_energy(const double *sigma, size_t p, double *out) {
    double total = 0;
    for (size_t i = 0; i < p; i++) total += sigma[i] * sigma[i];
    double cum = 0;
    for (size_t i = 0; i < p; i++) {
        cum += sigma[i] * sigma[i];
        out[i] = total > 0 ? cum / total : 0;
    }
}

double spectra_energy_kept(const double *sigma, size_t p, size_t r) {
    double total = 0, cum = 0;
    for (size_t i = 0; i < p; i++) {
        total += sigma[i] * sigma[i];
        if (i < r) cum += sigma[i] * sigma[i];
    }
    return total > 0 ? cum / total : 1.0;
}
