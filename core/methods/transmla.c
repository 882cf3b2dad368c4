/* transmla.c -- the TransMLA pipeline (seed 003, sections 4.1-4.3, App. B-D): merge, RoRoPE with
 * FreqFold, RoPE removal, KV balancing, joint low rank, softmax-scale folding, the query latent;
 * materializing the MLA layer at any stage; the whole-model driver with its error report; and
 * the data of the key-norm and RoPE-energy figures. Every PCA reads a covariance given to it.
 * All matrices here are row-major doubles unless they are Mat (float). */
#define _GNU_SOURCE
#include "transmla.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyses.h"
#include "calib.h"
#include "layersel.h"
#include "seeds.h"
#include "tmla_hold.h"
#include "tmla_lanes.h"
#include "tmla_qkn.h"

/* ================================================================ small helpers */

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double *dalloc(size_t r, size_t c, const char *what) {
    size_t n;
    if (!al_mul_ok(r ? r : 1, c ? c : 1, &n, what)) return NULL;
    return al_calloc(n, sizeof(double), what);
}

/* Eigen-decomposition of the symmetric n x n matrix A (overwritten by the eigenvectors as columns,
 * descending eigenvalues in w). Each vector's largest entry is made positive (deterministic).
 * LAPACK gets A's upper triangle in column-major order -- what LAPACKE's row-major route passes it,
 * so the same numbers come back -- without that route's two transpositions and the column swaps
 * after it: each eigenvector comes back contiguous and is written once into its column. */
static int sym_eig_desc(double *A, size_t n, double *w, const char *what) {
    if (n == 0) return AL_OK;
    double *V = dalloc(n, n, "eigenvectors");
    if (!V) return AL_ERR;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++) V[j * n + i] = A[i * n + j];
    lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)n, V, (lapack_int)n, w);
    if (info != 0) {
        free(V);
        return al_err("LAPACKE_dsyevd failed (info %d) on the %zu x %zu %s", (int)info, n, n, what);
    }
    for (size_t c = 0; c < n; c++) {                     /* column c: the (c+1)-th largest eigenvalue's */
        const double *v = V + (n - 1 - c) * n;
        size_t imax = 0;
        for (size_t i = 1; i < n; i++)
            if (fabs(v[i]) > fabs(v[imax])) imax = i;
        double sg = v[imax] < 0 ? -1 : 1;
        for (size_t i = 0; i < n; i++) A[i * n + c] = sg * v[i];
    }
    for (size_t j = 0; j < n / 2; j++) { double t = w[j]; w[j] = w[n - 1 - j]; w[n - 1 - j] = t; }
    free(V);
    return AL_OK;
}

int tmla_eig_desc(double *A, size_t n, double *w, const char *what) { return sym_eig_desc(A, n, w, what); }

/* Second moment of the features f = x W + b (W: (m, n) double, b: (n) or NULL) for inputs with
 * E[x xᵀ] = Sigma (m x m, NULL: identity) and E[x] = mu (m, NULL: zero):
 * C = Wᵀ Sigma W + (Wᵀ mu) bᵀ + b (Wᵀ mu)ᵀ + b bᵀ, (n x n), caller frees. */
static int feature_cov(const double *W, size_t m, size_t n, const double *b, const double *Sigma, const double *mu,
                       double **out) {
    *out = NULL;
    double *C = dalloc(n, n, "a covariance matrix");
    if (!C) return AL_ERR;
    if (!Sigma) {
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)n, (int)m, 1.0, W, (int)n, 0.0, C, (int)n);
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++) C[j * n + i] = C[i * n + j];
    } else {
        double *A = dalloc(m, n, "a covariance product");
        if (!A) { free(C); return AL_ERR; }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)m, 1.0, Sigma, (int)m, W, (int)n, 0.0,
                    A, (int)n);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)m, 1.0, W, (int)n, A, (int)n, 0.0, C,
                    (int)n);
        free(A);
    }
    if (b) cblas_dger(CblasRowMajor, (int)n, (int)n, 1.0, b, 1, b, 1, C, (int)n);
    if (b && mu) {
        double *Wm = dalloc(n, 1, "a mean feature");
        if (!Wm) { free(C); return AL_ERR; }
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)m, (int)n, 1.0, W, (int)n, mu, 1, 0.0, Wm, 1);
        cblas_dger(CblasRowMajor, (int)n, (int)n, 1.0, Wm, 1, b, 1, C, (int)n);
        cblas_dger(CblasRowMajor, (int)n, (int)n, 1.0, b, 1, Wm, 1, C, (int)n);
        free(Wm);
    }
    *out = C;
    return AL_OK;
}

/* Index of the real / imaginary dim of RoPE frequency l inside a head whose first rd dims rotate. */
static size_t re_dim(rope_layout r, size_t l, size_t rd) { (void)rd; return r == ROPE_INTERLEAVED ? 2 * l : l; }
static size_t im_dim(rope_layout r, size_t l, size_t rd) { return r == ROPE_INTERLEAVED ? 2 * l + 1 : l + rd / 2; }

/* The dims map of the merged key (transmla.h): G rd rotary coordinates (g d + e, e < rd), the
 * source's NoPE coordinates (e >= rd) after them in U's columns. */
static size_t n_rot(const TmlaLayer *T) { return (size_t)T->G * (size_t)T->rd; }

/* U's columns G rd.. : the source's NoPE coordinates g d + e (e >= rd), unchanged, in order. */
static void nope_columns(const TmlaLayer *T, double *U) {
    size_t d = (size_t)T->d, rd = (size_t)T->rd, n = (size_t)T->G * d, j = n_rot(T);
    for (size_t g = 0; g < (size_t)T->G; g++)
        for (size_t e = rd; e < d; e++) U[(g * d + e) * n + j++] = 1;
}

/* Trace of C_K (G d square) over the rotary coordinates. */
static double rot_trace(const TmlaLayer *T, const double *C_K) {
    size_t d = (size_t)T->d, n = (size_t)T->G * d;
    double t = 0;
    for (size_t g = 0; g < (size_t)T->G; g++)
        for (size_t e = 0; e < (size_t)T->rd; e++) t += C_K[(g * d + e) * n + g * d + e];
    return t;
}

/* ================================================================ step 1: merge */

void tmla_layer_free(TmlaLayer *T) {
    if (!T) return;
    if (!T->src_borrowed) attn_layer_free(T->src);
    free(T->U);
    free(T->pair_freq);
    free(T->key_energy);
    free(T->group_eig);
    free(T->R_KV);
    free(T);
}

/* tmla_merge; borrow: T->src is gqa itself (never written; the caller keeps gqa alive and frees it),
 * not a copy -- a whole source layer in float less while one layer converts. */
static int merge_layer(const AttnLayer *gqa, bool borrow, TmlaLayer **out) {
    *out = NULL;
    if (gqa->kind != ATTN_GQA) return al_err("TransMLA merge: the layer is already MLA");
    bool nope = gqa->rope_dim == 0 && gqa->rope == ROPE_NONE;    /* a model without RoPE (Nemotron-H): D = 0 */
    if (!nope && (gqa->rope_dim == 0 || gqa->rope == ROPE_NONE || !gqa->inv_freq))
        return al_err("TransMLA merge: the layer has no RoPE (RoRoPE needs rotary keys; without RoPE a plain "
                      "low-rank KV factorization applies)");
    if (attn_layer_validate(gqa)) return AL_ERR;
    TmlaLayer *T = al_calloc(1, sizeof *T, "a TransMLA layer");
    if (!T) return AL_ERR;
    T->H = gqa->n_heads; T->G = gqa->n_kv_heads; T->d = gqa->head_dim; T->dv = gqa->v_dim; T->hidden = gqa->hidden;
    T->rd = gqa->rope_dim;
    size_t n = (size_t)T->G * (size_t)T->d, d = (size_t)T->d, rd = (size_t)T->rd;
    T->src_borrowed = borrow;
    T->src = borrow ? (AttnLayer *)gqa : attn_layer_copy(gqa);
    T->U = dalloc(n, n, "the merged key basis");
    T->pair_freq = dalloc(n_rot(T) / 2, 1, "pair frequencies");
    if (!T->src || !T->U || !T->pair_freq) { tmla_layer_free(T); return AL_ERR; }
    for (size_t g = 0; g < (size_t)T->G; g++)
        for (size_t l = 0; l < rd / 2; l++) {
            size_t p = g * (rd / 2) + l;
            T->U[(g * d + re_dim(gqa->rope, l, rd)) * n + 2 * p] = 1;
            T->U[(g * d + im_dim(gqa->rope, l, rd)) * n + 2 * p + 1] = 1;
            T->pair_freq[p] = gqa->inv_freq[l];
        }
    nope_columns(T, T->U);
    T->D = (int)n_rot(T);
    T->alpha = 1;
    T->n_J = (int)(n - n_rot(T)) + T->G * T->dv;
    T->R = T->n_J;
    T->joint_energy = 1;
    T->q_mult = 1;
    T->scale = gqa->scale;
    *out = T;
    return AL_OK;
}

int tmla_kv_cov_from_weights(const AttnLayer *gqa, const double *Sigma, double **C_kv) {
    return tmla_kv_cov_stats(gqa, Sigma, NULL, C_kv);
}

int tmla_kv_cov_stats(const AttnLayer *gqa, const double *Sigma, const double *mu, double **C_kv) {
    *C_kv = NULL;
    size_t m = (size_t)gqa->hidden, nk = gqa->W_K->cols, nv = gqa->W_V->cols, n = nk + nv;
    double *W = dalloc(m, n, "the key/value weights"), *b = NULL;
    if (!W) return AL_ERR;
    for (size_t i = 0; i < m; i++) {
        vec_f2d(gqa->W_K->data + i * nk, nk, W + i * n);
        vec_f2d(gqa->W_V->data + i * nv, nv, W + i * n + nk);
    }
    if ((gqa->b_K || gqa->b_V) && (b = dalloc(n, 1, "key/value biases")))
        for (size_t j = 0; j < n; j++)
            b[j] = j < nk ? (gqa->b_K ? gqa->b_K[j] : 0) : (gqa->b_V ? gqa->b_V[j - nk] : 0);
    int rc = (gqa->b_K || gqa->b_V) && !b ? AL_ERR : feature_cov(W, m, n, b, Sigma, mu, C_kv);
    free(W);
    free(b);
    return rc;
}

double *tmla_key_cov(const TmlaLayer *T, const double *C_kv) {
    size_t nk = (size_t)T->G * T->d, n = nk + (size_t)T->G * T->dv;
    double *C = dalloc(nk, nk, "the key covariance");
    if (C)
        for (size_t i = 0; i < nk; i++) memcpy(C + i * nk, C_kv + i * n, nk * sizeof(double));
    return C;
}

/* ================================================================ steps 2-3: RoRoPE, FreqFold, removal */

/* Resets the joint basis (after the rotation or the RoPE split changed its coordinates). */
static void reset_joint(TmlaLayer *T) {
    free(T->R_KV);
    T->R_KV = NULL;
    T->n_J = (T->G * T->d - T->D) + T->G * T->dv;
    T->R = T->n_J;
    T->joint_energy = 1;
}

int tmla_rorope(TmlaLayer *T, int M, const double *C_K) {
    size_t d = (size_t)T->d, rd = (size_t)T->rd, d2 = rd / 2, G = (size_t)T->G, n = G * d, nr = n_rot(T);
    if (M < 1 || d2 % (size_t)M)
        return al_err("freqfold %d: M must divide the %zu RoPE frequencies of a head (%s %zu)", M, d2,
                      rd < d ? "rotary dims" : "head dim", rd);
    size_t ng = d2 / (size_t)M, k = (size_t)M * G;
    rope_layout lay = T->src->rope;
    double *U = dalloc(n, n, "the RoRoPE basis"), *freq = dalloc(nr / 2, 1, "pair frequencies");
    double *energy = dalloc(n, 1, "key energies"), *eig = dalloc(ng, k, "group eigenvalues");
    double *Cs = dalloc(k, k, "a frequency group's covariance"), *w = dalloc(k, 1, "eigenvalues");
    size_t *ire = al_calloc(k, sizeof(size_t), "indices"), *iim = al_calloc(k, sizeof(size_t), "indices");
    int rc = U && freq && energy && eig && Cs && w && ire && iim ? AL_OK : AL_ERR;
    if (rc == AL_OK) nope_columns(T, U);
    for (size_t j = nr; rc == AL_OK && j < n; j++)            /* the source's NoPE coordinates: not rotated */
        for (size_t i = 0; i < n; i++)
            if (U[i * n + j] != 0) energy[j] = C_K[i * n + i];
    for (size_t m = 0; rc == AL_OK && m < ng; m++) {
        for (size_t f = 0; f < (size_t)M; f++)
            for (size_t g = 0; g < G; g++) {
                size_t l = m * (size_t)M + f;
                ire[f * G + g] = g * d + re_dim(lay, l, rd);
                iim[f * G + g] = g * d + im_dim(lay, l, rd);
            }
        /* One rotation for the real and the imaginary dims: PCA of C_re + C_im (App. B, eq. 32). */
        for (size_t i = 0; i < k; i++)
            for (size_t j = 0; j < k; j++) Cs[i * k + j] = C_K[ire[i] * n + ire[j]] + C_K[iim[i] * n + iim[j]];
        if ((rc = sym_eig_desc(Cs, k, w, "RoRoPE frequency-group covariance")) != AL_OK) break;
        for (size_t c = 0; c < k; c++) {
            size_t p = c * ng + m;
            double er = 0, ei = 0;
            for (size_t i = 0; i < k; i++) {
                U[ire[i] * n + 2 * p] = Cs[i * k + c];
                U[iim[i] * n + 2 * p + 1] = Cs[i * k + c];
                for (size_t j = 0; j < k; j++) {
                    er += Cs[i * k + c] * C_K[ire[i] * n + ire[j]] * Cs[j * k + c];
                    ei += Cs[i * k + c] * C_K[iim[i] * n + iim[j]] * Cs[j * k + c];
                }
            }
            energy[2 * p] = er;
            energy[2 * p + 1] = ei;
            freq[p] = T->src->inv_freq[m * (size_t)M];       /* the group turns at its first frequency */
            eig[m * k + c] = w[c] > 0 ? w[c] : 0;
        }
    }
    free(Cs); free(w); free(ire); free(iim);
    if (rc) { free(U); free(freq); free(energy); free(eig); return rc; }
    free(T->U); free(T->pair_freq); free(T->key_energy); free(T->group_eig);
    T->U = U; T->pair_freq = freq; T->key_energy = energy; T->group_eig = eig;
    T->key_total = rot_trace(T, C_K);
    T->M = M;
    T->D = (int)nr;
    reset_joint(T);
    return AL_OK;
}

int tmla_remove_rope(TmlaLayer *T, int D, double *kept) {
    int n = (int)n_rot(T);
    if ((D < 2 || D > n || D % 2) && !(D == 0 && n == 0))      /* n 0: a layer without RoPE keeps none */
        return al_err("rope-dim %d: the RoPE dims kept must be even and between 2 and %d (KV heads x %s)", D, n,
                      T->rd < T->d ? "rotary dims" : "head dim");
    T->D = D;
    reset_joint(T);
    if (kept) {
        double e = 0;
        if (T->key_energy)
            for (int i = 0; i < D; i++) e += T->key_energy[i];
        *kept = !T->key_energy ? NAN : T->key_total > 0 ? e / T->key_total : 1;
    }
    return AL_OK;
}

/* Moves the rotated pairs of T into the order perm (perm[q] = old pair now at q): U columns,
 * frequencies and key energies. */
static int permute_pairs(TmlaLayer *T, const size_t *perm) {
    size_t n = (size_t)T->G * (size_t)T->d, np = n_rot(T) / 2;
    double *U = dalloc(n, n, "the RoPE basis"), *freq = dalloc(np, 1, "pair frequencies");
    double *en = T->key_energy ? dalloc(n, 1, "key energies") : NULL;
    if (!U || !freq || (T->key_energy && !en)) { free(U); free(freq); free(en); return AL_ERR; }
    memcpy(U, T->U, n * n * sizeof(double));                 /* the NoPE columns stay */
    if (en) memcpy(en, T->key_energy, n * sizeof(double));
    for (size_t q = 0; q < np; q++) {
        size_t p = perm[q];
        for (size_t i = 0; i < n; i++) {
            U[i * n + 2 * q] = T->U[i * n + 2 * p];
            U[i * n + 2 * q + 1] = T->U[i * n + 2 * p + 1];
        }
        freq[q] = T->pair_freq[p];
        if (en) { en[2 * q] = T->key_energy[2 * p]; en[2 * q + 1] = T->key_energy[2 * p + 1]; }
    }
    free(T->U); free(T->pair_freq); free(T->key_energy);
    T->U = U; T->pair_freq = freq; T->key_energy = en;
    T->D = (int)(2 * np);
    reset_joint(T);
    return AL_OK;
}

int tmla_sort_pairs(TmlaLayer *T) {
    if (!T->key_energy) return al_err("TransMLA: sorting the RoPE pairs needs their key energies (run RoRoPE first)");
    size_t np = n_rot(T) / 2;
    size_t *perm = al_calloc(np, sizeof *perm, "a pair order");
    if (!perm) return AL_ERR;
    for (size_t q = 0; q < np; q++) perm[q] = q;
    for (size_t q = 1; q < np; q++) {             /* insertion sort: stable, descending energy */
        size_t p = perm[q], j = q;
        double e = T->key_energy[2 * p] + T->key_energy[2 * p + 1];
        while (j > 0 && T->key_energy[2 * perm[j - 1]] + T->key_energy[2 * perm[j - 1] + 1] < e) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = p;
    }
    int rc = permute_pairs(T, perm);
    free(perm);
    return rc;
}

int tmla_select_pairs(TmlaLayer *T, const size_t *pairs, size_t n_sel, const double *C_K) {
    size_t d = (size_t)T->d, rd = (size_t)T->rd, n = (size_t)T->G * d, np = n_rot(T) / 2;
    rope_layout lay = T->src->rope;
    bool *used = al_calloc(np ? np : 1, sizeof *used, "pair flags");
    size_t *perm = al_calloc(np ? np : 1, sizeof *perm, "a pair order");
    int rc = used && perm ? AL_OK : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < n_sel; i++) {
        if (pairs[i] >= np || used[pairs[i]])
            rc = al_err("TransMLA: RoPE pair %zu is out of range (0-%zu) or listed twice", pairs[i], np - 1);
        else { used[pairs[i]] = true; perm[i] = pairs[i]; }
    }
    for (size_t p = 0, q = n_sel; rc == AL_OK && p < np; p++)
        if (!used[p]) perm[q++] = p;
    if (rc == AL_OK) {              /* back to the merge's identity basis, with the energies of C_K */
        memset(T->U, 0, n * n * sizeof(double));
        free(T->key_energy);
        free(T->group_eig);
        T->group_eig = NULL;
        if (!(T->key_energy = dalloc(n, 1, "key energies"))) rc = AL_ERR;
        T->key_total = rot_trace(T, C_K);
        if (rc == AL_OK) nope_columns(T, T->U);
        for (size_t j = 2 * np; rc == AL_OK && j < n; j++)
            for (size_t i = 0; i < n; i++)
                if (T->U[i * n + j] != 0) T->key_energy[j] = C_K[i * n + i];
        for (size_t g = 0; rc == AL_OK && g < (size_t)T->G; g++)
            for (size_t l = 0; l < rd / 2; l++) {
                size_t p = g * (rd / 2) + l, a = g * d + re_dim(lay, l, rd), b = g * d + im_dim(lay, l, rd);
                T->U[a * n + 2 * p] = 1;
                T->U[b * n + 2 * p + 1] = 1;
                T->pair_freq[p] = T->src->inv_freq[l];
                T->key_energy[2 * p] = C_K[a * n + a];
                T->key_energy[2 * p + 1] = C_K[b * n + b];
            }
        T->M = 1;
    }
    if (rc == AL_OK) rc = permute_pairs(T, perm);
    free(used);
    free(perm);
    return rc;
}

double tmla_kept_energy(const TmlaLayer *T, const double *C_K) {
    size_t n = (size_t)T->G * (size_t)T->d, D = (size_t)T->D;
    double tot = rot_trace(T, C_K), kept = 0;
    double *A = dalloc(n, D, "a covariance product");
    if (!A) return NAN;
    /* A = C_K U[:, :D]; kept = Σ_j U[:, j] · A[:, j]. */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)D, (int)n, 1.0, C_K, (int)n, T->U, (int)n, 0.0,
                A, (int)D);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < D; j++) kept += T->U[i * n + j] * A[i * D + j];
    free(A);
    return tot > 0 ? kept / tot : 1;
}

/* Diagonal of the second moment of f = x W + b (see feature_cov) without forming it: (n). */
static int feature_diag(const Mat *Wm, const float *b, const double *Sigma, const double *mu, double *out) {
    size_t m = Wm->rows, n = Wm->cols;
    MatD *Wd = matd_from_mat(Wm);
    const double *W = Wd ? Wd->data : NULL;
    double *A = Sigma ? dalloc(m, n, "a covariance product") : NULL;
    if (!W || (Sigma && !A)) { matd_free(Wd); free(A); return AL_ERR; }
    if (Sigma)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)m, 1.0, Sigma, (int)m, W, (int)n, 0.0,
                    A, (int)n);
    for (size_t j = 0; j < n; j++) {
        double s = 0, wm = 0;
        for (size_t i = 0; i < m; i++) {
            s += W[i * n + j] * (A ? A[i * n + j] : W[i * n + j]);
            if (mu) wm += W[i * n + j] * mu[i];
        }
        if (b) s += 2 * b[j] * wm + (double)b[j] * b[j];
        out[j] = s;
    }
    matd_free(Wd);
    free(A);
    return AL_OK;
}

int tmla_mha2mla_pairs(const AttnLayer *gqa, const double *Sigma, const double *mu, int r, size_t *pairs) {
    size_t H = (size_t)gqa->n_heads, G = (size_t)gqa->n_kv_heads, d = (size_t)gqa->head_dim;
    size_t rd = (size_t)gqa->rope_dim, d2 = rd / 2;
    if (gqa->kind != ATTN_GQA || !gqa->inv_freq || rd == 0)
        return al_err("MHA2MLA pair selection: the layer must be GQA with RoPE");
    if (r < 1 || (size_t)r > d2) return al_err("MHA2MLA pair selection: keep 1-%zu frequencies per head, not %d", d2, r);
    double *eq = dalloc(H, d, "query energies"), *ek = dalloc(G, d, "key energies"), *score = dalloc(d2, 1, "scores");
    int rc = eq && ek && score ? AL_OK : AL_ERR;
    if (rc == AL_OK) rc = feature_diag(gqa->W_Q, gqa->b_Q, Sigma, mu, eq);
    if (rc == AL_OK) rc = feature_diag(gqa->W_K, gqa->b_K, Sigma, mu, ek);
    size_t grp = H / G;
    for (size_t g = 0; rc == AL_OK && g < G; g++) {
        /* score of frequency l: (Σ over the group's query heads of RMS |q_l|) x RMS |k_l| */
        for (size_t l = 0; l < d2; l++) {
            size_t a = re_dim(gqa->rope, l, rd), b = im_dim(gqa->rope, l, rd);
            double qn = 0;
            for (size_t h = g * grp; h < (g + 1) * grp; h++) qn += sqrt(fmax(0, eq[h * d + a] + eq[h * d + b]));
            score[l] = qn * sqrt(fmax(0, ek[g * d + a] + ek[g * d + b]));
        }
        for (size_t i = 0; i < (size_t)r; i++) {     /* the r best, then listed by frequency */
            size_t best = d2;
            for (size_t l = 0; l < d2; l++)
                if (score[l] >= 0 && (best == d2 || score[l] > score[best])) best = l;
            score[best] = -1;
        }
        for (size_t l = 0, i = 0; l < d2; l++)
            if (score[l] == -1) pairs[g * (size_t)r + i++] = g * d2 + l;
    }
    free(eq); free(ek); free(score);
    return rc;
}

/* ================================================================ step 4: balanced joint low rank */

int tmla_joint_cov(const TmlaLayer *T, const double *C_kv, double **C_J) {
    *C_J = NULL;
    size_t nk = (size_t)T->G * T->d, nv = (size_t)T->G * T->dv, n = nk + nv, D = (size_t)T->D;
    size_t nK = nk - D, nJ = nK + nv;
    /* The features are [k U[:, D:] ; v]: C_J = [[Unᵀ C_KK Un, Unᵀ C_KV], [C_VK Un, C_VV]]. */
    double *Un = dalloc(nk, nK, "the NoPE key basis"), *A = dalloc(nk, nK, "a covariance product");
    double *C = dalloc(nJ, nJ, "the joint covariance");
    if (!Un || !A || !C) { free(Un); free(A); free(C); return AL_ERR; }
    for (size_t i = 0; i < nk; i++) memcpy(Un + i * nK, T->U + i * nk + D, nK * sizeof(double));
    if (nK) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nk, (int)nK, (int)nk, 1.0, C_kv, (int)n, Un, (int)nK,
                    0.0, A, (int)nK);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nK, (int)nK, (int)nk, 1.0, Un, (int)nK, A, (int)nK, 0.0,
                    C, (int)nJ);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nK, (int)nv, (int)nk, 1.0, Un, (int)nK, C_kv + nk,
                    (int)n, 0.0, C + nK, (int)nJ);
        for (size_t i = 0; i < nK; i++)
            for (size_t a = 0; a < nv; a++) C[(nK + a) * nJ + i] = C[i * nJ + nK + a];
    }
    for (size_t a = 0; a < nv; a++) memcpy(C + (nK + a) * nJ + nK, C_kv + (nk + a) * n + nk, nv * sizeof(double));
    free(Un);
    free(A);
    *C_J = C;
    return AL_OK;
}

int tmla_balance(TmlaLayer *T, bool on, const double *C_J) {
    size_t nK = (size_t)(T->G * T->d - T->D), nJ = (size_t)T->n_J;
    double trK = 0, trV = 0;
    for (size_t i = 0; i < nJ; i++) *(i < nK ? &trK : &trV) += C_J[i * nJ + i];
    /* NoPE keys at rounding level of the key energy (identical KV heads: the rotated copies are
     * zero) carry nothing to balance: dividing them by alpha ~ 1e-17 would drown the values. */
    double key_ref = T->key_total > 0 ? T->key_total : trK;
    bool nope_energy = nK > 0 && trK > 1e-12 * key_ref;
    T->alpha = on && nope_energy && trV > 0 ? sqrt(trK / trV) : 1.0;
    return AL_OK;
}

int tmla_joint_lowrank(TmlaLayer *T, int R, const double *C_J) {
    size_t nK = (size_t)(T->G * T->d - T->D), nJ = (size_t)T->n_J;
    if (R == TMLA_FULL) R = (int)nJ;
    if (R < 1 || (size_t)R > nJ)
        return al_err("kv-rank %d: the joint basis of NoPE keys and values has %zu direction%s (%zu NoPE key + %zu "
                      "value dims); give 1-%zu or full", R, nJ, al_s(nJ), nK, nJ - nK, nJ);
    double *Cb = dalloc(nJ, nJ, "the balanced joint covariance"), *w = dalloc(nJ, 1, "eigenvalues");
    if (!Cb || !w) { free(Cb); free(w); return AL_ERR; }
    for (size_t i = 0; i < nJ; i++)
        for (size_t j = 0; j < nJ; j++)
            Cb[i * nJ + j] = C_J[i * nJ + j] * (i < nK ? 1 / T->alpha : 1) * (j < nK ? 1 / T->alpha : 1);
    int rc = sym_eig_desc(Cb, nJ, w, "joint NoPE key / value covariance");
    double *RKV = rc ? NULL : dalloc(nJ, (size_t)R, "the joint basis");
    if (!rc && !RKV) rc = AL_ERR;
    if (!rc) {
        double kept = 0, tot = 0;
        for (size_t j = 0; j < nJ; j++) {
            double v = w[j] > 0 ? w[j] : 0;
            tot += v;
            if (j < (size_t)R) kept += v;
        }
        for (size_t i = 0; i < nJ; i++) memcpy(RKV + i * (size_t)R, Cb + i * nJ, (size_t)R * sizeof(double));
        free(T->R_KV);
        T->R_KV = RKV;
        T->R = R;
        T->joint_energy = tot > 0 ? kept / tot : 1;
    }
    free(Cb);
    free(w);
    return rc;
}

/* ================================================================ step 5 and the build */

/* Per-head NoPE dims of the built layer: the original head dim while some key dims lost RoPE. */
static int built_nope(const TmlaLayer *T) { return T->D < T->G * T->d ? T->d : 0; }

int tmla_fold_scale(TmlaLayer *T) {
    double s = 1.0 / sqrt((double)(built_nope(T) + T->D));
    T->q_mult = T->src->scale / s;
    T->scale = s;
    return AL_OK;
}

/* Head h's query bias of the built layer into b (dq): [q_mult b_h ; q_mult b_h U_g[:, :D]]. */
static void query_bias(const TmlaLayer *T, size_t h, size_t dn, const double *Ug, double *b) {
    const float *bq = T->src->b_Q + h * (size_t)T->d;
    size_t d = (size_t)T->d, n = (size_t)T->G * d, D = (size_t)T->D;
    for (size_t e = 0; e < dn; e++) b[e] = T->q_mult * bq[e];
    for (size_t j = 0; j < D; j++) {
        double s = 0;
        for (size_t e = 0; e < d; e++) s += bq[e] * Ug[e * n + j];
        b[dn + j] = T->q_mult * s;
    }
}

/* Fills the query of the built layer: per head [q_mult q_h ; q_mult q_h U_g[:, :D]], one head at a
 * time through (hidden, d + D) doubles of scratch (not double copies of the whole source and built
 * query: 1.6 GB on a 70B-shaped layer); the same products (dgemm of the head's columns) and roundings. */
static int build_query(const TmlaLayer *T, AttnLayer *L, size_t dn) {
    const AttnLayer *S = T->src;
    size_t m = (size_t)T->hidden, H = (size_t)T->H, d = (size_t)T->d, n = (size_t)T->G * d, D = (size_t)T->D;
    size_t dq = dn + D, grp = H / (size_t)T->G, ldq = H * dq;
    double *Wh = dalloc(m, d, "a query head"), *Wr = dalloc(m, D ? D : 1, "a rotated query head");
    double *b = S->b_Q ? dalloc(H * dq, 1, "the converted query bias") : NULL;
    Mat *Q = mat_new(m, ldq);
    int rc = Wh && Wr && Q && (b || !S->b_Q) ? AL_OK : AL_ERR;
    for (size_t h = 0; rc == AL_OK && h < H; h++) {
        const double *Ug = T->U + (h / grp) * d * n;                  /* rows of KV head g(h): (d, n) */
        for (size_t i = 0; i < m; i++) vec_f2d(S->W_Q->data + i * H * d + h * d, d, Wh + i * d);
        for (size_t i = 0; i < m; i++)
            for (size_t e = 0; e < dn; e++) Q->data[i * ldq + h * dq + e] = (float)(T->q_mult * Wh[i * d + e]);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)D, (int)d, T->q_mult, Wh, (int)d, Ug, (int)n,
                    0.0, Wr, (int)D);
        for (size_t i = 0; i < m; i++) vec_d2f(Wr + i * D, D, Q->data + i * ldq + h * dq + dn);
        if (b) query_bias(T, h, dn, Ug, b + h * dq);
    }
    if (rc == AL_OK) L->W_Q = Q, Q = NULL;
    if (rc == AL_OK && b && !(L->b_Q = al_malloc3(H * dq, 1, sizeof(float), "a bias"))) rc = AL_ERR;
    if (rc == AL_OK && b) vec_d2f(b, H * dq, L->b_Q);
    mat_free(Q); free(Wh); free(Wr); free(b);
    return rc;
}

/* Fills W_KVA (+ bias) and W_KVB of the built layer from the rotation and the joint basis. */
static int build_kv(const TmlaLayer *T, AttnLayer *L, size_t dn, const double *RKV, size_t R) {
    const AttnLayer *S = T->src;
    size_t m = (size_t)T->hidden, H = (size_t)T->H, G = (size_t)T->G, d = (size_t)T->d, dv = (size_t)T->dv;
    size_t nk = G * d, nv = G * dv, D = (size_t)T->D, nK = nk - D, nJ = nK + nv, grp = H / G;
    MatD *Wkd = matd_from_mat(S->W_K);
    const double *Wk = Wkd ? Wkd->data : NULL;
    double *WJ = dalloc(m, nJ, "the joint features"), *A = dalloc(m, R + D, "the KV latent map");
    double *B = dalloc(R, H * (dn + dv), "the KV up-projection");
    bool bias = S->b_K || S->b_V;
    double *bK = bias ? dalloc(nk, 1, "bias") : NULL, *bJ = bias ? dalloc(nJ, 1, "bias") : NULL;
    double *bA = bias ? dalloc(R + D, 1, "bias") : NULL;
    int rc = Wk && WJ && A && B && (!bias || (bK && bJ && bA)) ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        /* RoPE key columns: W_K U[:, :D]; NoPE key features: W_K U[:, D:] / alpha; then the values. */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)D, (int)nk, 1.0, Wk, (int)nk, T->U, (int)nk,
                    0.0, A + R, (int)(R + D));
        if (nK)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)nK, (int)nk, 1.0 / T->alpha, Wk, (int)nk,
                        T->U + D, (int)nk, 0.0, WJ, (int)nJ);
        for (size_t i = 0; i < m; i++) vec_f2d(S->W_V->data + i * nv, nv, WJ + i * nJ + nK);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)R, (int)nJ, 1.0, WJ, (int)nJ, RKV, (int)R, 0.0,
                    A, (int)(R + D));
        if (bias) {
            for (size_t i = 0; i < nk; i++) bK[i] = S->b_K ? S->b_K[i] : 0;
            for (size_t j = 0; j < D; j++) bA[R + j] = cblas_ddot((int)nk, bK, 1, T->U + j, (int)nk);
            for (size_t j = 0; j < nK; j++) bJ[j] = cblas_ddot((int)nk, bK, 1, T->U + D + j, (int)nk) / T->alpha;
            for (size_t a = 0; a < nv; a++) bJ[nK + a] = S->b_V ? S->b_V[a] : 0;
            for (size_t r = 0; r < R; r++) bA[r] = cblas_ddot((int)nJ, bJ, 1, RKV + r, (int)R);
        }
        /* Up-projection per head: k_nope_h = c (alpha R_KV[:nK]ᵀ U_g[:, D:]ᵀ), v_h = c R_KV[nK + g dv ..]ᵀ. */
        size_t ldb = H * (dn + dv);
        for (size_t h = 0; h < H; h++) {
            size_t g = h / grp;
            if (dn && nK)
                cblas_dgemm(CblasRowMajor, CblasTrans, CblasTrans, (int)R, (int)d, (int)nK, T->alpha, RKV, (int)R,
                            T->U + g * d * nk + D, (int)nk, 0.0, B + h * (dn + dv), (int)ldb);
            for (size_t r = 0; r < R; r++)
                for (size_t a = 0; a < dv; a++) B[r * ldb + h * (dn + dv) + dn + a] = RKV[(nK + g * dv + a) * R + r];
        }
        if (!(L->W_KVA = mat_from_matd(&(MatD){m, R + D, A})) || !(L->W_KVB = mat_from_matd(&(MatD){R, ldb, B})))
            rc = AL_ERR;
        if (rc == AL_OK && bias && !(L->b_KVA = al_malloc3(R + D, 1, sizeof(float), "a bias"))) rc = AL_ERR;
        if (rc == AL_OK && bias) vec_d2f(bA, R + D, L->b_KVA);
    }
    matd_free(Wkd); free(WJ); free(A); free(B); free(bK); free(bJ); free(bA);
    return rc;
}

int tmla_build(const TmlaLayer *T, AttnLayer **mla) {
    *mla = NULL;
    size_t nJ = (size_t)T->n_J, R = T->R_KV ? (size_t)T->R : nJ, dn = (size_t)built_nope(T);
    const AttnLayer *S = T->src;
    double *ident = NULL;
    const double *RKV = T->R_KV;
    if (!RKV) {
        if (!(ident = dalloc(nJ, nJ, "an identity basis"))) return AL_ERR;
        for (size_t i = 0; i < nJ; i++) ident[i * nJ + i] = 1;
        RKV = ident;
    }
    AttnLayer *L = attn_layer_new(ATTN_MLA);
    int rc = L ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        L->hidden = T->hidden; L->n_heads = T->H; L->v_dim = T->dv; L->scale = T->scale; L->norm_eps = S->norm_eps;
        L->rope = ROPE_INTERLEAVED; L->rope_dim = T->D; L->qk_nope = (int)dn; L->kv_rank = (int)R;
        L->inv_freq = dalloc((size_t)T->D / 2, 1, "RoPE frequencies");
        if (!L->inv_freq) rc = AL_ERR;
        else memcpy(L->inv_freq, T->pair_freq, (size_t)T->D / 2 * sizeof(double));
    }
    if (rc == AL_OK) rc = build_query(T, L, dn);
    if (rc == AL_OK) rc = build_kv(T, L, dn, RKV, R);
    if (rc == AL_OK && !(L->W_O = mat_copy(S->W_O))) rc = AL_ERR;
    if (rc == AL_OK && S->b_O) {
        if (!(L->b_O = al_malloc3((size_t)T->hidden, 1, sizeof(float), "a bias"))) rc = AL_ERR;
        else memcpy(L->b_O, S->b_O, (size_t)T->hidden * sizeof(float));
    }
    if (rc == AL_OK) { L->window = S->window; L->softcap = S->softcap; }   /* the source's mask and cap */
    if (rc == AL_OK && S->W_G && !(L->W_G = mat_copy(S->W_G))) rc = AL_ERR;  /* Qwen3.5's output gate stays */
    if (rc == AL_OK && S->b_G) {
        if (!(L->b_G = al_malloc3(S->W_G->cols, 1, sizeof(float), "the gate's bias"))) rc = AL_ERR;
        else memcpy(L->b_G, S->b_G, S->W_G->cols * sizeof(float));
    }
    if (rc == AL_OK && S->sinks) {                                          /* gpt-oss's sinks stay */
        if (!(L->sinks = al_malloc3((size_t)T->H, 1, sizeof(float), "attention sinks"))) rc = AL_ERR;
        else memcpy(L->sinks, S->sinks, (size_t)T->H * sizeof(float));
    }
    if (rc == AL_OK) rc = attn_layer_validate(L);
    free(ident);
    if (rc) { attn_layer_free(L); return AL_ERR; }
    *mla = L;
    return AL_OK;
}

/* ================================================================ the query latent */

int tmla_q_cov_from_weights(const AttnLayer *mla, const double *Sigma, double **C_q) {
    return tmla_q_cov_stats(mla, Sigma, NULL, C_q);
}

int tmla_q_cov_stats(const AttnLayer *mla, const double *Sigma, const double *mu, double **C_q) {
    *C_q = NULL;
    if (mla->kind != ATTN_MLA || !mla->W_Q) return al_err("q-rank: the layer has no plain query projection to factor");
    size_t n = mla->W_Q->cols;
    MatD *W = matd_from_mat(mla->W_Q);
    double *b = mla->b_Q ? dalloc(n, 1, "bias") : NULL;
    int rc = W && (b || !mla->b_Q) ? AL_OK : AL_ERR;
    if (rc == AL_OK && b) vec_f2d(mla->b_Q, n, b);
    if (rc == AL_OK) rc = feature_cov(W->data, mla->W_Q->rows, n, b, Sigma, mu, C_q);
    matd_free(W);
    free(b);
    return rc;
}

int tmla_q_lowrank(AttnLayer *mla, int Rq, const double *C_q) {
    if (mla->kind != ATTN_MLA || !mla->W_Q) return al_err("q-rank: the layer has no plain query projection to factor");
    size_t m = mla->W_Q->rows, n = mla->W_Q->cols;
    if (Rq < 1 || (size_t)Rq > n) return al_err("q-rank %d: give 1-%zu (heads x (nope + rope))", Rq, n);
    size_t R = (size_t)Rq;
    MatD *W = matd_from_mat(mla->W_Q);
    double *P = dalloc(n, n, "the query basis"), *w = dalloc(n, 1, "eigenvalues");
    double *A = dalloc(m, R, "the query down-projection"), *B = dalloc(R, n, "the query up-projection");
    int rc = P && w && W && A && B ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        memcpy(P, C_q, n * n * sizeof(double));
        rc = sym_eig_desc(P, n, w, "query covariance");
    }
    if (rc == AL_OK) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)R, (int)n, 1.0, W->data, (int)n, P, (int)n, 0.0, A,
                    (int)R);
        for (size_t r = 0; r < R; r++)
            for (size_t j = 0; j < n; j++) B[r * n + j] = P[j * n + r];
        Mat *QA = mat_from_matd(&(MatD){m, R, A}), *QB = mat_from_matd(&(MatD){R, n, B});
        float *bA = mla->b_Q ? al_malloc3(R, 1, sizeof(float), "a bias") : NULL;
        if (!QA || !QB || (mla->b_Q && !bA)) { mat_free(QA); mat_free(QB); free(bA); rc = AL_ERR; }
        else {
            for (size_t r = 0; bA && r < R; r++) {
                double s = 0;
                for (size_t j = 0; j < n; j++) s += mla->b_Q[j] * P[j * n + r];
                bA[r] = (float)s;
            }
            mat_free(mla->W_Q); free(mla->b_Q);
            mla->W_Q = NULL; mla->b_Q = NULL;
            mla->W_QA = QA; mla->W_QB = QB; mla->b_QA = bA; mla->q_rank = Rq;
        }
    }
    free(P); free(w); matd_free(W); free(A); free(B);
    return rc;
}

/* ================================================================ the driver */

TmlaOpts tmla_opts_default(void) {
    return (TmlaOpts){.kv_rank = TMLA_FULL, .balance = true, .compare_balance = true, .eval_tokens = 64,
                      .seed = AL_SEED_TMLA_EVAL, .layer_lo = 0, .layer_hi = -1};
}

/* Refuses families the conversion does not cover, with the reason. */
static int convertible(const Model *m) {
    return analysis_check(m, AN_CONVERT_MLA);
}

int tmla_resolve_opts(const Model *m, TmlaOpts *o) {
    if (convertible(m)) return AL_ERR;
    const ModelConfig *c = &m->cfg;
    /* rd: the rotary dims of a head (d unless partial rotary, where the other d - rd join the latent) */
    int d = cfg_d_qk(c), rd = c->qk_rope_dim, d2 = rd / 2, G = c->n_kv_heads;
    const char *unit = rd < d ? "rotary dims" : "head dim";
    int M = o->freqfold, D = o->rope_dim;
    if (M < 0 || D < 0) return al_err("rope-dim and freqfold must be positive");
    if (M == 0 && D == 0) M = TMLA_DEFAULT_FREQFOLD;
    if (M == 0) {
        if (D > rd || rd % D || d2 % (rd / D))
            return al_err("rope-dim %d: the RoPE dims kept must be %s / M with M dividing %d (%s %d): try %d, %d or %d",
                          D, unit, d2, unit, rd, rd, rd / 2, d2 % 4 == 0 ? rd / 4 : rd / 2);
        M = rd / D;
    }
    if (d2 % M)
        return al_err("freqfold %d: M must divide the %d RoPE frequencies of a head (%s %d)", M, d2, unit, rd);
    if (D == 0) D = rd / M;
    if (D != rd / M)
        return al_err("rope-dim %d with freqfold %d: FreqFold M keeps %s / M = %d RoPE dims (one standard RoPE "
                      "of dim D = %s/M carries every M-th frequency); give one of the two", D, M, unit, rd / M,
                      rd < d ? "rd" : "d");
    int nJ = (G * d - D) + G * c->v_dim;
    if (o->kv_rank != TMLA_FULL && (o->kv_rank < 1 || o->kv_rank > nJ))
        return al_err("kv-rank %d: this model's joint NoPE key / value basis has %d direction%s ((%d x %d - %d) + %d x "
                      "%d); give 1-%d or full", o->kv_rank, nJ, al_s(nJ), G, d, D, G, c->v_dim, nJ);
    int dq = (D < G * d ? d : 0) + D;
    if (o->q_rank < 0 || o->q_rank > c->n_heads * dq)
        return al_err("q-rank %d: give 1-%d (heads x (nope + rope)), or leave it out for a plain q_proj", o->q_rank,
                      c->n_heads * dq);
    if (o->layer_hi < 0) o->layer_hi = c->n_layers - 1;
    if (o->layer_lo < 0 || o->layer_lo > o->layer_hi || o->layer_hi >= c->n_layers)
        return al_err("layers %d-%d out of range: this model has layers 0-%d", o->layer_lo, o->layer_hi, c->n_layers - 1);
    /* a hybrid's linear-attention layers have no KV cache: its attention layers only */
    if (layersel_range(c, "convert mla", &o->layer_lo, &o->layer_hi, NULL, 0)) return AL_ERR;
    if (c->qk_norm != QKN_NONE && o->qk_norm == TMLA_QKN_NONE)
        return al_err("convert mla: the attention has %s, which no MLA latent caches exactly: give qk-norm fold "
                      "(gains and the calibrated 1/RMS folded into W_Q / W_K) or qk-norm drop (the naive baseline), or "
                      "qk-norm keep (the norm kept on keys rebuilt from the cache; the session only)",
                      c->qk_norm == QKN_PROJ ? "Q/K RMSNorm over the whole projection (OLMo 2, MiniMax-M2)"
                                             : "per-head Q/K RMSNorm (Qwen3, Gemma 3)");
    if (o->eval_tokens == 0) o->eval_tokens = 64;
    o->freqfold = M;
    o->rope_dim = D;
    return AL_OK;
}

/* Shapes standard normal rows X (T, n) into Gaussian rows with second moment Sigma and mean mu:
 * X <- Z Lᵀ + mu with L Lᵀ = Sigma - mu muᵀ (Cholesky; a tiny ridge when it is singular). */
static int shape_inputs(Mat *X, const double *Sigma, const double *mu, int first) {
    size_t n = X->cols, T = X->rows;
    double *L = dalloc(n, n, "an input covariance factor"), *A = dalloc(n, n, "an input covariance factor");
    double *Z = dalloc(T, n, "the report's inputs"), tr = 0;
    int rc = L && A && Z ? AL_OK : AL_ERR;
    for (size_t i = 0; rc == AL_OK && i < n; i++)
        for (size_t j = 0; j < n; j++) L[i * n + j] = Sigma[i * n + j] - (mu ? mu[i] * mu[j] : 0);
    for (size_t i = 0; rc == AL_OK && i < n; i++) tr += L[i * n + i];
    lapack_int info = 1;
    /* LAPACK gets L's lower triangle in column-major order (LAPACKE's row-major route without its two
     * transpositions per attempt: the same numbers); the factor is turned back once, into L. */
    for (int k = first; rc == AL_OK && k < 8 && info != 0; k++) {
        double ridge = k ? tr / (double)n * pow(10.0, -12 + k) : 0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j <= i; j++) A[j * n + i] = L[i * n + j];
        for (size_t i = 0; i < n; i++) A[i * n + i] += ridge;
        info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, A, (lapack_int)n);
    }
    if (rc == AL_OK && info != 0)
        rc = al_err("LAPACKE_dpotrf failed (info %d) on the %zu x %zu input covariance", (int)info, n, n);
    for (size_t i = 0; rc == AL_OK && i < n; i++)
        for (size_t j = 0; j <= i; j++) L[i * n + j] = A[j * n + i];
    if (rc == AL_OK) {
        vec_f2d(X->data, T * n, Z);
        cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)T, (int)n, 1.0, L, (int)n, Z,
                    (int)n);
        for (size_t t = 0; t < T; t++)
            for (size_t j = 0; j < n; j++) X->data[t * n + j] = (float)(Z[t * n + j] + (mu ? mu[j] : 0));
    }
    free(L); free(A); free(Z);
    return rc;
}

int tmla_merge(const AttnLayer *gqa, TmlaLayer **out) { return merge_layer(gqa, false, out); }

/* The first Cholesky attempt of shape_inputs worth making when Sigma and mu are o->calib's: formed
 * from at most N token rows per layer, Sigma - mu muᵀ has rank below N, so with N + 16 <= hidden it is
 * singular and the attempt without a ridge fails (after ~7/8 of a Cholesky's work when N = hidden / 2,
 * 1.2 s CPU per 8B layer): start at the first ridge, where that failure led -- the same inputs. */
static int first_ridge(const TmlaOpts *o, int hidden) {
    const CalibStats *st = o->calib;
    size_t most = 0;
    for (int l = 0; st && st->tokens && l < st->sh.n_layers; l++) most = st->tokens[l] > most ? st->tokens[l] : most;
    return most > 0 && most + 16 <= (size_t)hidden ? 1 : 0;
}

/* The report's inputs: T standard normal rows, or Gaussian with second moment Sigma and mean mu
 * (caller frees). */
static Mat *report_inputs(const TmlaOpts *o, int hidden, const double *Sigma, const double *mu) {
    Mat *X = attn_random_input(o->eval_tokens, hidden, o->seed);
    if (X && Sigma && shape_inputs(X, Sigma, mu, first_ridge(o, hidden))) { mat_free(X); return NULL; }
    return X;
}

Mat *tmla_eval_inputs(size_t T, int hidden, uint64_t seed, const double *Sigma, const double *mu) {
    TmlaOpts o = {.eval_tokens = T, .seed = seed};
    return report_inputs(&o, hidden, Sigma, mu);
}

/* Errors of mla against gqa on the report's inputs X (positions 0..T-1); *src: gqa's outputs there, evaluated on the
 * first call and kept for the next (both balances measure against the same source outputs). */
static int measure(const AttnLayer *gqa, const AttnLayer *mla, const Mat *X, AttnOut **src, double *se, double *oe) {
    size_t T = X->rows;
    int *pos = al_malloc3(T, 1, sizeof(int), "positions");
    AttnOut *b = NULL;
    int rc = pos ? AL_OK : AL_ERR;
    for (size_t t = 0; pos && t < T; t++) pos[t] = (int)t;
    if (rc == AL_OK && !*src) rc = attn_eval(gqa, X, pos, true, src);
    if (rc == AL_OK) rc = attn_eval(mla, X, pos, true, &b);
    if (rc == AL_OK) attn_rel_err(*src, b, se, oe);
    attn_out_free(b); free(pos);
    return rc;
}

/* Steps 4-5 and the build for one balance setting; q latent when asked. */
static int finish(TmlaLayer *T, const TmlaOpts *o, bool balance, const double *C_J, const double *Sigma,
                  const double *mu, AttnLayer **mla) {
    double *C_q = NULL;
    int rc = tmla_balance(T, balance, C_J);
    if (rc == AL_OK) rc = tmla_joint_lowrank(T, o->kv_rank, C_J);
    if (rc == AL_OK) rc = tmla_fold_scale(T);
    if (rc == AL_OK) rc = tmla_build(T, mla);
    if (rc == AL_OK && o->q_rank > 0) {
        rc = tmla_q_cov_stats(*mla, Sigma, mu, &C_q);
        if (rc == AL_OK) rc = tmla_q_lowrank(*mla, o->q_rank, C_q);
        free(C_q);
        if (rc) { attn_layer_free(*mla); *mla = NULL; }
    }
    return rc;
}

int tmla_convert_layer(const AttnLayer *gqa, const TmlaOpts *o, const double *Sigma, AttnLayer **mla,
                       TmlaLayerReport *rep) {
    return tmla_convert_layer_stats(gqa, o, Sigma, NULL, mla, rep);
}

int tmla_convert_layer_stats(const AttnLayer *gqa, const TmlaOpts *o, const double *Sigma, const double *mu,
                             AttnLayer **mla, TmlaLayerReport *rep) {
    *mla = NULL;
    TmlaLayer *T = NULL;
    double *C_kv = NULL, *C_K = NULL, *C_J = NULL;
    AttnLayer *alt = NULL;
    Mat *X = NULL;
    AttnOut *src = NULL;                          /* gqa's outputs on X */
    int rc = merge_layer(gqa, true, &T);
    if (rc == AL_OK) rc = tmla_kv_cov_stats(gqa, Sigma, mu, &C_kv);
    if (rc == AL_OK && !(C_K = tmla_key_cov(T, C_kv))) rc = AL_ERR;
    if (rc == AL_OK) rc = tmla_rorope(T, o->freqfold, C_K);
    if (rc == AL_OK) rc = tmla_remove_rope(T, o->rope_dim, &rep->rope_energy);
    if (rc == AL_OK) rc = tmla_joint_cov(T, C_kv, &C_J);
    if (rc == AL_OK && !(X = report_inputs(o, gqa->hidden, Sigma, mu))) rc = AL_ERR;
    rep->joint_energy_alt = rep->score_err_alt = rep->out_err_alt = NAN;
    if (rc == AL_OK && o->compare_balance) {      /* the other balance first, freed before the kept one is built */
        rc = finish(T, o, !o->balance, C_J, Sigma, mu, &alt);
        if (rc == AL_OK) {
            rep->joint_energy_alt = T->joint_energy;
            rc = measure(gqa, alt, X, &src, &rep->score_err_alt, &rep->out_err_alt);
        }
        attn_layer_free(alt);
        alt = NULL;
    }
    if (rc == AL_OK) rc = finish(T, o, o->balance, C_J, Sigma, mu, mla);   /* each finish starts afresh from C_J */
    if (rc == AL_OK) {
        rep->alpha = T->alpha;
        rep->joint_energy = T->joint_energy;
        rc = measure(gqa, *mla, X, &src, &rep->score_err, &rep->out_err);
    }
    attn_layer_free(alt);
    attn_out_free(src);
    tmla_layer_free(T);
    mat_free(X);
    free(C_kv); free(C_K); free(C_J);
    if (rc) { attn_layer_free(*mla); *mla = NULL; }
    return rc;
}

void tmla_result_free(TmlaResult *r) {
    if (!r) return;
    for (int l = 0; r->run && l < r->n_layers; l++) attn_layer_free(r->run[l]);   /* they borrow from layers[] */
    free(r->run);
    for (int l = 0; r->run_bf16 && l < r->n_layers; l++) attn_layer_free(r->run_bf16[l]);
    free(r->run_bf16);
    for (int l = 0; r->layers && l < r->n_layers; l++) attn_layer_free(r->layers[l]);
    free(r->layers);
    free(r->rep);
    free(r->src_path);
    ci_free(&r->check_in);
    free(r);
}

/* qk-norm keep: *L (fold's MLA conversion of gqa) replaced by gqa with its keys and values rebuilt from *L's cache
 * (tmla_qkn.h). */
static int keep_layer(const AttnLayer *gqa, const double *Sigma, const double *mu, AttnLayer **L) {
    AttnLayer *k = NULL;
    int rc = tmla_qkn_keep(gqa, *L, Sigma, mu, &k);
    if (rc == AL_OK) { attn_layer_free(*L); *L = k; }
    return rc;
}

/* The other balance setting of a plain layer's conversion, measured against the source gqa on X. */
static int qkn_other_balance(const AttnLayer *gqa, const AttnLayer *plain, const TmlaOpts *o, const double *Sigma,
                             const double *mu, const Mat *X, TmlaLayerReport *rep) {
    TmlaOpts alt_o = *o;
    alt_o.balance = !o->balance;
    alt_o.compare_balance = false;
    TmlaLayerReport alt_rep;
    AttnLayer *alt = NULL;
    int rc = tmla_convert_layer_stats(plain, &alt_o, Sigma, mu, &alt, &alt_rep);
    if (rc == AL_OK && o->qk_norm == TMLA_QKN_KEEP) rc = keep_layer(gqa, Sigma, mu, &alt);
    if (rc == AL_OK) rc = tmla_qkn_measure(gqa, alt, X, &rep->score_err_alt, &rep->out_err_alt);
    if (rc == AL_OK) rep->joint_energy_alt = alt_rep.joint_energy;
    attn_layer_free(alt);
    return rc;
}

/* Layer l's attention-input second moment and mean (NULL when the calibration keeps none) from
 * st, owned by the caller: what calib_input_arrays forms for every layer at once. */
static int layer_moments(const CalibStats *st, int l, double **sigma, double **mu) {
    size_t n = (size_t)st->sh.hidden;
    *mu = NULL;
    if (!(*sigma = dalloc(n, n, "an attention-input second moment"))) return AL_ERR;
    int rc = calib_second_moment(st, l, *sigma);
    if (rc == AL_OK && st->sx && !(*mu = dalloc(n, 1, "an attention-input mean"))) rc = AL_ERR;
    if (rc == AL_OK && st->sx) rc = calib_mean(st, l, *mu);
    if (rc) { free(*sigma); free(*mu); *sigma = *mu = NULL; }
    return rc;
}

/* One layer of tmla_convert: a source with Q/K RMSNorm is converted as its plain layer (tmla_qkn.h:
 * fold or drop), its errors (and the other balance setting's) measured against the source with the
 * norm. */
static int qkn_convert_layer(const AttnLayer *gqa, const TmlaOpts *o, int l, AttnLayer **mla, TmlaLayerReport *rep) {
    const double *Sigma = o->sigma ? o->sigma[l] : NULL, *mu = o->sigma && o->mu ? o->mu[l] : NULL;
    double *own_s = NULL, *own_m = NULL;          /* o->calib's moments of this layer alone */
    int rc = !o->sigma && o->calib ? layer_moments(o->calib, l, &own_s, &own_m) : AL_OK;
    if (rc == AL_OK && own_s && o->moments_seen) rc = o->moments_seen(o->moments_ctx, l, own_s, own_m);
    if (own_s) { Sigma = own_s; mu = own_m; }
    AttnLayer *plain = NULL;
    TmlaOpts one = *o;
    if (rc == AL_OK) rc = tmla_qkn_plain(gqa, (tmla_qkn_mode)o->qk_norm, Sigma, mu, &plain);
    if (plain) one.compare_balance = false;             /* measured below against the source */
    if (rc == AL_OK) rc = tmla_convert_layer_stats(plain ? plain : gqa, &one, Sigma, mu, mla, rep);
    if (rc == AL_OK && plain && o->qk_norm == TMLA_QKN_KEEP) rc = keep_layer(gqa, Sigma, mu, mla);
    rep->qkn_score_err = rep->qkn_out_err = NAN;
    if (rc == AL_OK && plain) {
        Mat *X = report_inputs(o, gqa->hidden, Sigma, mu);
        rc = X ? tmla_qkn_measure(gqa, *mla, X, &rep->score_err, &rep->out_err) : AL_ERR;
        if (rc == AL_OK) rc = tmla_qkn_measure(gqa, plain, X, &rep->qkn_score_err, &rep->qkn_out_err);
        if (rc == AL_OK && o->compare_balance) rc = qkn_other_balance(gqa, plain, o, Sigma, mu, X, rep);
        mat_free(X);
    }
    attn_layer_free(plain);
    free(own_s);
    free(own_m);
    return rc;
}

/* RoPE frequencies 0 on a NoPE layer (transmla.h): exact at full rank, the dims that lose RoPE never turned. */
int tmla_nope_as_rope(const ModelConfig *c, AttnLayer *gqa) {
    if (gqa->rope != ROPE_NONE || c->rope == ROPE_NONE || c->qk_rope_dim <= 0) return AL_OK;
    free(gqa->inv_freq);
    gqa->rope = c->rope;
    gqa->rope_dim = c->qk_rope_dim;
    gqa->inv_freq = dalloc((size_t)c->qk_rope_dim / 2, 1, "RoPE frequencies");   /* zeroed */
    return gqa->inv_freq ? AL_OK : AL_ERR;
}

/* Whether o converts every layer of c, each with RoPE: else no DeepSeek-V3 export holds the conversion (a range of
 * layers, a hybrid's, NoPE layers), so its layers are not held in BF16 (tmla_hold.h): the session runs the float32
 * layers `export DIR format attnlab` writes by default, one number with `check DIR` of that export. */
static bool converts_all(const ModelConfig *c, const TmlaOpts *o) {
    if (o->layer_lo != 0 || o->layer_hi != c->n_layers - 1) return false;
    for (int l = 0; l < c->n_layers; l++)
        if (!layersel_attn(c, l) || !cfg_layer_rope(c, l)) return false;
    return true;
}

/* The layers of one tmla_convert on lanes (tmla_lanes.h): each unit reads, converts and holds one layer into its own
 * slots of r; the attention parameters are summed afterwards in layer order. */
typedef struct {
    Model *m;
    const TmlaOpts *o;
    TmlaResult *r;
    const int *layer;         /* (units) the layers converted, in order */
    size_t *before, *after;   /* (n_layers) attention parameters of each converted layer */
} ConvJob;

/* o->moments_seen of unit k, in unit order (tmla_lanes_turn_begin): the digest sees the layers as one lane does. */
typedef struct { TmlaLanes *ln; size_t k; const TmlaOpts *o; } SeenTurn;

static int seen_in_turn(void *ctx, int l, const double *sigma, const double *mu) {
    SeenTurn *t = ctx;
    int rc = tmla_lanes_turn_begin(t->ln, t->k);
    if (rc == AL_OK) rc = t->o->moments_seen(t->o->moments_ctx, l, sigma, mu);
    tmla_lanes_turn_end(t->ln, t->k);
    return rc;
}

static int convert_unit(TmlaLanes *ln, size_t k, void *ud) {
    ConvJob *j = ud;
    int l = j->layer[k];
    TmlaOpts one = *j->o;
    SeenTurn turn = {ln, k, j->o};
    if (ln && one.moments_seen) { one.moments_seen = seen_in_turn; one.moments_ctx = &turn; }
    AttnLayer *gqa = NULL;
    j->r->rep[l].layer = l;
    int rc = attn_layer_load(j->m, l, &gqa);      /* the model's layer cache is for several lanes (model.h) */
    if (rc == AL_OK) rc = tmla_nope_as_rope(&j->m->cfg, gqa);
    if (rc == AL_OK) rc = qkn_convert_layer(gqa, &one, l, &j->r->layers[l], &j->r->rep[l]);
    if (rc == AL_OK) rc = tmla_hold_layer(j->m, l, j->r->layers[l], one.hold_bf16);   /* W_O borrowed; BF16 */
    if (rc == AL_OK) {
        AttnLayer *L = j->r->layers[l];
        j->before[l] = attn_layer_params(gqa);
        j->after[l] = L->kind == ATTN_GQA && one.qk_norm == TMLA_QKN_KEEP ? tmla_qkn_keep_params(L, j->r->kv_after)
                                                                         : attn_layer_params(L);
    } else if (rc == AL_ERR)
        al_err_ctx("convert mla: layer %d", l);
    attn_layer_free(gqa);
    return rc;
}

/* Converts the selected layers into r (r's dims set), timing them. */
static int convert_layers(Model *m, const TmlaOpts *o, TmlaResult *r) {
    const ModelConfig *c = &m->cfg;
    size_t k = 0;
    ConvJob j = {.m = m, .o = o, .r = r};
    int *layer = al_calloc((size_t)c->n_layers, sizeof *layer, "the layers to convert");
    j.before = al_calloc((size_t)c->n_layers, sizeof *j.before, "attention parameters");
    j.after = al_calloc((size_t)c->n_layers, sizeof *j.after, "attention parameters");
    int rc = layer && j.before && j.after ? AL_OK : AL_ERR;
    for (int l = o->layer_lo; rc == AL_OK && l <= o->layer_hi; l = layersel_next(c, l + 1, o->layer_hi))
        layer[k++] = l;
    j.layer = layer;
    r->lanes = tmla_lanes_count(k, o->lanes);
    double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    if (rc == AL_OK) rc = tmla_lanes_run(k, o->lanes, convert_unit, &j, "layer");
    r->solve_s = clock_s(CLOCK_MONOTONIC) - t0;
    r->solve_cpu_s = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    for (size_t i = 0; rc == AL_OK && i < k; i++) {
        r->params_before += j.before[layer[i]];
        r->params_after += j.after[layer[i]];
    }
    free(layer); free(j.before); free(j.after);
    return rc;
}

int tmla_convert(Model *m, const TmlaOpts *opts, TmlaResult **out) {
    *out = NULL;
    TmlaOpts o = *opts;
    if (tmla_resolve_opts(m, &o)) return AL_ERR;
    const ModelConfig *c = &m->cfg;
    o.hold_bf16 = o.hold_bf16 && converts_all(c, &o);
    TmlaResult *r = al_calloc(1, sizeof *r, "a conversion");
    if (!r) return AL_ERR;
    r->src = m;
    r->src_path = al_strdup(m->path);
    r->opts = o;
    r->opts.sigma = NULL;
    r->opts.mu = NULL;
    r->opts.calib = NULL;
    r->opts.moments_seen = NULL;
    r->opts.moments_ctx = NULL;
    for (int l = o.layer_lo; o.sigma && l <= o.layer_hi; l++) r->activation_stats |= o.sigma[l] != NULL;
    r->activation_stats |= !o.sigma && o.calib;
    r->n_layers = c->n_layers;
    r->layers = al_calloc((size_t)c->n_layers, sizeof *r->layers, "converted layers");
    r->rep = al_calloc((size_t)c->n_layers, sizeof *r->rep, "conversion reports");
    if (!r->src_path || !r->layers || !r->rep) { tmla_result_free(r); return AL_ERR; }
    int nK = c->n_kv_heads * cfg_d_qk(c) - o.rope_dim;
    r->head_dim = cfg_d_qk(c);
    r->v_dim = c->v_dim;
    r->rope_dim = o.rope_dim;
    r->qk_nope = nK > 0 ? cfg_d_qk(c) : 0;
    r->kv_rank = o.kv_rank == TMLA_FULL ? nK + c->n_kv_heads * c->v_dim : o.kv_rank;
    r->q_rank = o.q_rank;
    r->kv_before = cfg_kv_values(c);
    r->kv_after = (size_t)r->kv_rank + (size_t)r->rope_dim;
    int rc = convert_layers(m, &o, r);
    if (rc) { tmla_result_free(r); return rc; }
    *out = r;
    return AL_OK;
}

/* ================================================================ figures' data */

void tmla_key_norms_free(TmlaKeyNorms *k) {
    if (!k) return;
    free(k->orig_re); free(k->orig_im); free(k->rot_re); free(k->rot_im); free(k->fold_re); free(k->fold_im);
    free(k);
}

/* The merged layer of m's layer L and its key covariance. */
static int figure_setup(Model *m, int layer, const double *Sigma, const double *mu, TmlaLayer **T, double **C_K) {
    *T = NULL;
    *C_K = NULL;
    AttnLayer *gqa = NULL;
    double *C_kv = NULL;
    int rc = convertible(m);
    if (rc == AL_OK && m->cfg.qk_norm != QKN_NONE)          /* the keys are not x W_K there */
        rc = al_err("%s: the keys pass through Q/K RMSNorm (%s): the TransMLA figures read the linear keys x W_K; "
                    "`convert mla qk-norm fold|drop` converts it", m->name ? m->name : m->path, qk_norm_name(m->cfg.qk_norm));
    if (rc == AL_OK) rc = attn_layer_load(m, layer, &gqa);
    if (rc == AL_OK) rc = tmla_merge(gqa, T);
    if (rc == AL_OK) rc = tmla_kv_cov_stats(gqa, Sigma, mu, &C_kv);
    if (rc == AL_OK && !(*C_K = tmla_key_cov(*T, C_kv))) rc = AL_ERR;
    attn_layer_free(gqa);
    free(C_kv);
    if (rc) { tmla_layer_free(*T); *T = NULL; free(*C_K); *C_K = NULL; }
    return rc;
}

int tmla_key_norms(Model *m, int layer, int freqfold, const double *Sigma, TmlaKeyNorms **out) {
    return tmla_key_norms_stats(m, layer, freqfold, Sigma, NULL, out);
}

int tmla_key_norms_stats(Model *m, int layer, int freqfold, const double *Sigma, const double *mu, TmlaKeyNorms **out) {
    *out = NULL;
    TmlaLayer *T;
    double *C;
    if (figure_setup(m, layer, Sigma, mu, &T, &C)) return AL_ERR;
    size_t d = (size_t)T->d, rd = (size_t)T->rd, n = (size_t)T->G * d, np = n_rot(T) / 2;
    TmlaKeyNorms *k = al_calloc(1, sizeof *k, "key norms");
    int rc = k ? AL_OK : AL_ERR;
    if (rc == AL_OK) {
        k->n_pairs = np; k->pairs_per_head = rd / 2; k->M = freqfold;
        double **arr[] = {&k->orig_re, &k->orig_im, &k->rot_re, &k->rot_im, &k->fold_re, &k->fold_im};
        for (size_t i = 0; i < 6; i++)
            if (!(*arr[i] = dalloc(np, 1, "key norms"))) rc = AL_ERR;
    }
    for (size_t p = 0; rc == AL_OK && p < np; p++) {          /* the merge is a permutation: read C's diagonal */
        size_t g = p / (rd / 2), l = p % (rd / 2), a = g * d + re_dim(T->src->rope, l, rd);
        size_t b = g * d + im_dim(T->src->rope, l, rd);
        k->orig_re[p] = sqrt(fmax(0, C[a * n + a]));
        k->orig_im[p] = sqrt(fmax(0, C[b * n + b]));
    }
    if (rc == AL_OK) rc = tmla_rorope(T, 1, C);
    for (size_t p = 0; rc == AL_OK && p < np; p++) {
        k->rot_re[p] = sqrt(fmax(0, T->key_energy[2 * p]));
        k->rot_im[p] = sqrt(fmax(0, T->key_energy[2 * p + 1]));
    }
    if (rc == AL_OK) rc = tmla_rorope(T, freqfold, C);
    for (size_t p = 0; rc == AL_OK && p < np; p++) {
        k->fold_re[p] = sqrt(fmax(0, T->key_energy[2 * p]));
        k->fold_im[p] = sqrt(fmax(0, T->key_energy[2 * p + 1]));
    }
    tmla_layer_free(T);
    free(C);
    if (rc) { tmla_key_norms_free(k); return AL_ERR; }
    *out = k;
    return AL_OK;
}

void tmla_rope_energy_free(TmlaRopeEnergy *e) {
    if (!e) return;
    for (size_t i = 0; i < e->n_curves; i++) { free(e->curves[i].dims); free(e->curves[i].energy); }
    free(e->curves);
    free(e);
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int tmla_rope_energy(Model *m, int layer, const int *Ms, size_t nM, const double *Sigma, TmlaRopeEnergy **out) {
    return tmla_rope_energy_stats(m, layer, Ms, nM, Sigma, NULL, out);
}

int tmla_rope_energy_stats(Model *m, int layer, const int *Ms, size_t nM, const double *Sigma, const double *mu,
                           TmlaRopeEnergy **out) {
    *out = NULL;
    TmlaLayer *T;
    double *C;
    if (figure_setup(m, layer, Sigma, mu, &T, &C)) return AL_ERR;
    size_t d = (size_t)T->d, rd = (size_t)T->rd, G = (size_t)T->G, n = G * d;
    TmlaRopeEnergy *e = al_calloc(1, sizeof *e, "RoPE energy curves");
    int rc = e && (e->curves = al_calloc(nM + 1, sizeof *e->curves, "curves")) ? AL_OK : AL_ERR;
    double tot = rot_trace(T, C);
    for (size_t c = 0; rc == AL_OK && c < nM; c++) {
        int M = Ms[c];
        if ((rc = tmla_rorope(T, M, C)) != AL_OK) break;
        size_t k = (size_t)M * G, ng = rd / 2 / (size_t)M;
        TmlaRopeCurve *cv = &e->curves[e->n_curves++];
        cv->M = M;
        cv->n = k;
        if (!(cv->dims = dalloc(k, 1, "curve")) || !(cv->energy = dalloc(k, 1, "curve"))) { rc = AL_ERR; break; }
        double acc = 0;
        for (size_t j = 0; j < k; j++) {           /* j + 1 components of every group: (j + 1) d / M dims */
            for (size_t g = 0; g < ng; g++) acc += T->group_eig[g * k + j];
            cv->dims[j] = (double)((j + 1) * rd / (size_t)M);
            cv->energy[j] = tot > 0 ? acc / tot : 1;
        }
    }
    if (rc == AL_OK) {             /* baseline without rotation: per frequency, the k strongest heads' pairs */
        size_t nf = rd / 2;
        double *pe = dalloc(G, nf, "pair energies");
        TmlaRopeCurve *cv = &e->curves[e->n_curves++];
        cv->M = 0;
        cv->n = G;
        if (!pe || !(cv->dims = dalloc(G, 1, "curve")) || !(cv->energy = dalloc(G, 1, "curve"))) rc = AL_ERR;
        for (size_t l = 0; rc == AL_OK && l < nf; l++) {
            for (size_t g = 0; g < G; g++) {
                size_t a = g * d + re_dim(T->src->rope, l, rd), b = g * d + im_dim(T->src->rope, l, rd);
                pe[l * G + g] = C[a * n + a] + C[b * n + b];
            }
            qsort(pe + l * G, G, sizeof *pe, cmp_desc);
        }
        double acc = 0;
        for (size_t k = 0; rc == AL_OK && k < G; k++) {
            for (size_t l = 0; l < nf; l++) acc += pe[l * G + k];
            cv->dims[k] = (double)((k + 1) * rd);
            cv->energy[k] = tot > 0 ? acc / tot : 1;
        }
        free(pe);
    }
    tmla_layer_free(T);
    free(C);
    if (rc) { tmla_rope_energy_free(e); return AL_ERR; }
    *out = e;
    return AL_OK;
}
