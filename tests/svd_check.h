/* svd_check.h -- what a test needs to hold a fused spectrum against a dense LAPACK SVD of the product it
 * formed by hand (test_dsv4, test_kimik3): a stored tensor as doubles, the singular values of a row-major
 * matrix, and the distance of two spectra. static inline: a test uses what it needs. */
#ifndef TEST_SVD_CHECK_H
#define TEST_SVD_CHECK_H

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>

#include "al.h"
#include "model.h"

/* Stored tensor `name` of m (dequantized, 2-D) as a malloc'd row-major rows x cols array of doubles;
 * NULL when it cannot be read. */
static inline double *stored_d(const Model *m, const char *name, size_t *rows, size_t *cols) {
    Mat *t = NULL;
    if (store_read(m->store, name, &t) != AL_OK) return NULL;
    double *d = malloc(t->rows * t->cols * sizeof *d);
    for (size_t i = 0; d && i < t->rows * t->cols; i++) d[i] = t->data[i];
    *rows = t->rows;
    *cols = t->cols;
    mat_free(t);
    return d;
}

/* Singular values (descending) of the row-major m x n matrix A (overwritten) into s (min(m, n)). */
static inline int svd_values(double *A, size_t m, size_t n, double *s) {
    double *u = malloc(m * m * sizeof *u), *vt = malloc(n * n * sizeof *vt);
    lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', (lapack_int)m, (lapack_int)n, A, (lapack_int)n, s, u,
                                     (lapack_int)m, vt, (lapack_int)n);
    free(u);
    free(vt);
    return info == 0 ? AL_OK : AL_ERR;
}

/* The largest difference of two spectra of p values relative to the first's largest. */
static inline double spectrum_diff(const double *a, const double *b, size_t p) {
    double d = 0;
    for (size_t i = 0; i < p; i++) d = fmax(d, fabs(a[i] - b[i]));
    return d / a[0];
}

#endif
