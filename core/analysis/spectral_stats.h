/* spectral_stats.h -- the spectral health of one matrix from its singular values (values the FaRR
 * sweep already computed: nothing here takes an SVD).
 *
 * For W (m x n) with singular values sigma_1 >= ... >= sigma_p:
 *   spectral norm        sigma_1
 *   stable rank          ||W||_F^2 / ||W||_2^2 = sum sigma^2 / sigma_1^2
 *   entropy rank         Roy & Vetterli (2007): exp(H(p)), p_i = sigma_i / sum sigma, H Shannon's (nats)
 *   participation ratio  (sum l)^2 / sum l^2 over the eigenvalues l = sigma^2
 * The empirical spectral density (ESD) is that of the eigenvalues of Wᵀ W / N, N = max(m, n),
 * lambda_i = sigma_i^2 / N (the Marchenko-Pastur convention; WeightWatcher fits sigma^2 itself,
 * which changes no exponent: the fit below is scale-free). Its power-law tail is fitted as
 * WeightWatcher fits it (CalculatedContent/WeightWatcher, weightwatcher/WW_powerlaw.py, WWFit, the
 * default `pl_package`): the eigenvalues sorted, every one but the largest a candidate xmin; for
 * each, the continuous MLE of the exponent over the n eigenvalues >= xmin,
 *   alpha = 1 + n / sum ln(lambda_i / xmin),
 * and the Kolmogorov-Smirnov distance D = max |(1 - (lambda / xmin)^(1 - alpha)) - i / n| between
 * the fitted and the empirical CDF of those eigenvalues; the candidate of the smallest D wins
 * (its sigma_alpha = (alpha - 1) / sqrt(n)); a candidate whose tail is one value (SSTATS_FLAT)
 * is skipped, where WeightWatcher would report an alpha near 1e8. WeightWatcher skips a layer
 * with fewer than 10 eigenvalues (MIN_EVALS, layer_supported) and drops eigenvalues at or below EVALS_THRESH (1e-5 of
 * sigma^2, absolute); here a spectrum with fewer than SSTATS_MIN_EVALS nonzero eigenvalues gets no
 * fit (alpha NaN) and "nonzero" is relative, sigma_i > 1e-6 sigma_1 (the Gram route resolves
 * values to ~1e-8 sigma_1; a fused map's values past its inner dim are exact zeros).
 * The Marchenko-Pastur bulk edge of the shape (WeightWatcher RMT_Util.calc_lambda_plus):
 *   lambda_+ = sigma_mp^2 (1 + sqrt(1 / Q))^2,  Q = N / M,  M = the number of nonzero eigenvalues;
 sigma_mp^2 is the mean eigenvalue of the bulk, the MP law's mean (WeightWatcher's mp_fit rescales
 * the ESD to the unit mean of all eigenvalues before refining sigma by a kernel-density fit, which is
 * not done here); an eigenvalue is a spike when it exceeds lambda_+ by more than WeightWatcher's
 * Tracy-Widom margin sqrt(Q^(-1/2) lambda_+^(2/3) M^(-2/3)) (at the unit-mean scale), and the
 * spikes leave the bulk (its mean, M and Q taken again without them) until no more leave -- the
 * spike-by-spike refit WeightWatcher's RMT_Util keeps commented out (fit_mp_findspikes); a few
 * strong spikes would otherwise lift the edge far above the bulk. M counts
 * the nonzero eigenvalues (as the fit does): a fused map's exact zeros past its inner dim k are
 * no bulk, and its M is then at most k, not the smaller side of its shape. */
#ifndef AL_SPECTRAL_STATS_H
#define AL_SPECTRAL_STATS_H

#include <stddef.h>

#include "spectra.h"

/* Fewer nonzero eigenvalues than this: no power-law fit (WeightWatcher's DEFAULT_MIN_EVALS). */
#define SSTATS_MIN_EVALS 10

/* A candidate tail whose values lie within this ratio in ln (all equal to 1e-6: a point mass, as a
 * planted rank's equal singular values make) is no power law and is skipped; WeightWatcher's MLE
 * gives such a tail an alpha of 1e8. */
#define SSTATS_FLAT 1e-6

/* A power-law fit of a sample's tail. */
typedef struct {
    size_t n;            /* sample values fitted (all of them, the candidates' pool) */
    double alpha;        /* exponent of the density p(x) ~ x^-alpha above xmin; NaN: not fitted */
    double xmin;         /* the chosen lower bound (a sample value) */
    double ks;           /* KS distance at xmin */
    double sigma;        /* (alpha - 1) / sqrt(n_tail): the MLE's standard error */
    size_t n_tail;       /* values >= xmin */
} SStatsFit;

/* The health of one matrix. */
typedef struct {
    size_t m, n, p;      /* shape and number of singular values */
    double norm;         /* spectral norm sigma_1 */
    double stable_rank;
    double entropy_rank;
    double participation;
    SStatsFit fit;       /* of the ESD's nonzero eigenvalues (lambda = sigma^2 / N) */
    double mp_q;         /* Q = N / M, M the bulk's eigenvalues */
    double mp_sigma2;    /* the bulk's variance: its mean eigenvalue */
    double mp_edge;      /* lambda_+, ESD units */
    size_t mp_spikes;    /* eigenvalues above the edge (with the Tracy-Widom margin) */
} SStats;

/* The closed-form statistics of sigma (p values, any order, >= 0); 0 for a zero map. */
double sstats_stable_rank(const double *sigma, size_t p);
double sstats_entropy_rank(const double *sigma, size_t p);
double sstats_participation(const double *sigma, size_t p);

/* WWFit over the n values x (> 0, any order; not modified). n < 2 or no candidate with
 * alpha > 1: alpha NaN (AL_OK). AL_ERR only when memory runs out. */
int sstats_powerlaw_fit(const double *x, size_t n, SStatsFit *fit);
/* The ESD of an m x n map with singular values sigma (p, descending): its nonzero eigenvalues
 * sigma_i^2 / max(m, n) in ascending order into *ev (the caller frees), their count in *ne. */
int sstats_esd(const double *sigma, size_t p, size_t m, size_t n, double **ev, size_t *ne);
/* Every statistic above of an m x n map with singular values sigma (p, descending). */
int sstats_compute(const double *sigma, size_t p, size_t m, size_t n, SStats *out);
/* sstats_compute of n spectra (NULL ones give zeroed stats) on all cores (sweep_run): a rank
 * sweep's statistics at the sweep's pace. AL_INTERRUPTED on Ctrl-C. */
int sstats_many(const Spectrum *const *sp, size_t n, SStats *out);
/* The Marchenko-Pastur edge and spikes of the M eigenvalues ev (any order) of an N x M shape; *q and
 * *sigma2 are those of the final bulk. */
void sstats_mp(const double *ev, size_t M, size_t N, double *q, double *sigma2, double *edge, size_t *spikes);

/* A density histogram of the n values x (> 0) in nb bins equally wide in log10 between the
 * smallest and the largest value (a decade around them when they are within 0.2%): edges (nb + 1)
 * and dens (nb, count / (n * bin width)). */
void sstats_log_hist(const double *x, size_t n, size_t nb, double *edges, double *dens);

#endif
