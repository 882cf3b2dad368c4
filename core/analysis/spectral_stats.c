/* spectral_stats.c -- the spectral health of one matrix from its singular values: stable rank,
 * entropy rank, participation ratio, spectral norm, WeightWatcher's power-law fit of the ESD and
 * the Marchenko-Pastur bulk edge (spectral_stats.h says what each follows). */
#include "spectral_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"
#include "sweep.h"

/* ================================================================ closed forms */

static double sum_sq(const double *sigma, size_t p) {
    double s = 0;
    for (size_t i = 0; i < p; i++) s += sigma[i] * sigma[i];
    return s;
}

static double max_of(const double *sigma, size_t p) {
    double m = 0;
    for (size_t i = 0; i < p; i++) if (sigma[i] > m) m = sigma[i];
    return m;
}

double sstats_stable_rank(const double *sigma, size_t p) {
    double top = max_of(sigma, p);
    return top > 0 ? sum_sq(sigma, p) / (top * top) : 0.0;
}

double sstats_entropy_rank(const double *sigma, size_t p) {
    double s = 0, h = 0;
    for (size_t i = 0; i < p; i++) s += sigma[i];
    if (!(s > 0)) return 0.0;
    for (size_t i = 0; i < p; i++) {
        double q = sigma[i] / s;
        if (q > 0) h -= q * log(q);
    }
    return exp(h);
}

double sstats_participation(const double *sigma, size_t p) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < p; i++) {
        double l = sigma[i] * sigma[i];
        s += l;
        s2 += l * l;
    }
    return s2 > 0 ? s * s / s2 : 0.0;
}

/* ================================================================ power law (WWFit) */

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The MLE exponent and KS distance of the sorted tail x[i..n-1] above xmin = x[i]; lx: ln x of the
 * sample, lsum: the sum of ln x over the tail. */
static void fit_at(const double *lx, size_t n, size_t i, double lsum, double *alpha, double *ks) {
    double k = (double)(n - i);
    *alpha = 1.0 + k / (lsum - k * lx[i]);
    *ks = 1.0;
    if (!(*alpha > 1.0) || !isfinite(*alpha) || lx[n - 1] - lx[i] < SSTATS_FLAT) return;   /* no law: a point mass */
    double d = 0, e1 = 1.0 - *alpha;
    for (size_t j = i; j < n; j++) {
        double e = fabs(1.0 - exp(e1 * (lx[j] - lx[i])) - (double)(j - i) / k);   /* model CDF - empirical */
        if (e > d) d = e;
    }
    *ks = d;
}

int sstats_powerlaw_fit(const double *x, size_t n, SStatsFit *fit) {
    *fit = (SStatsFit){ .n = n, .alpha = NAN, .xmin = NAN, .ks = NAN, .sigma = NAN };
    if (n < 2) return AL_OK;
    double *s = al_malloc3(n, 2, sizeof *s, "power-law sample"), *lx = s + n;
    if (!s) return AL_ERR;
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_dbl);
    double lsum = 0, best = INFINITY;
    for (size_t j = 0; j < n; j++) lsum += (lx[j] = log(s[j]));
    for (size_t i = 0; i + 1 < n; i++) {          /* every value but the largest is a candidate */
        double alpha, ks;
        if (i > 0) lsum -= lx[i - 1];
        fit_at(lx, n, i, lsum, &alpha, &ks);
        if (ks < best) {
            best = ks;
            fit->alpha = alpha;
            fit->xmin = s[i];
            fit->ks = ks;
            fit->n_tail = n - i;
            fit->sigma = (alpha - 1.0) / sqrt((double)(n - i));
        }
    }
    free(s);
    if (!(best < 1.0)) fit->alpha = fit->xmin = fit->ks = fit->sigma = NAN, fit->n_tail = 0;
    return AL_OK;
}

/* ================================================================ ESD and Marchenko-Pastur */

int sstats_esd(const double *sigma, size_t p, size_t m, size_t n, double **ev, size_t *ne) {
    double top = max_of(sigma, p), N = (double)(m > n ? m : n);
    *ne = 0;
    *ev = al_malloc3(p ? p : 1, 1, sizeof **ev, "eigenvalues");
    if (!*ev) return AL_ERR;
    for (size_t i = 0; i < p; i++)
        if (sigma[i] > 1e-6 * top) (*ev)[(*ne)++] = sigma[i] * sigma[i] / N;
    qsort(*ev, *ne, sizeof **ev, cmp_dbl);
    return AL_OK;
}

/* The edge of the bulk of ev: sigma^2 the mean of the eigenvalues at or below `cut` (all: INFINITY),
 * M their count; *above: the eigenvalues past the edge and its Tracy-Widom margin (of all M0). */
static void mp_pass(const double *ev, size_t M0, size_t N, double cut, double *q, double *mean, double *edge,
                    size_t *above, double *next_cut) {
    double sum = 0;
    size_t M = 0;
    for (size_t i = 0; i < M0; i++)
        if (ev[i] <= cut) sum += ev[i], M++;
    *mean = M ? sum / (double)M : 0.0;
    *q = M ? (double)N / (double)M : 0.0;
    *above = 0;
    *edge = 0.0;
    *next_cut = cut;
    if (!(*mean > 0)) return;
    double unit_edge = pow(1.0 + 1.0 / sqrt(*q), 2.0);   /* lambda_+ of the unit-mean ESD */
    double tw = pow(*q, -0.5) * pow(unit_edge, 2.0 / 3.0) * pow((double)M, -2.0 / 3.0);
    *edge = *mean * unit_edge;
    *next_cut = *mean * (unit_edge + sqrt(tw));
    for (size_t i = 0; i < M0; i++)
        if (ev[i] > *next_cut) (*above)++;
}

void sstats_mp(const double *ev, size_t M, size_t N, double *q, double *sigma2, double *edge, size_t *spikes) {
    double cut = INFINITY, next;
    size_t prev = (size_t)-1;
    *spikes = 0;
    /* the spikes leave the bulk whose mean sets the edge, until none more leave */
    for (size_t it = 0; it <= M && *spikes != prev; it++) {
        prev = *spikes;
        mp_pass(ev, M, N, cut, q, sigma2, edge, spikes, &next);
        cut = next;
    }
}

int sstats_compute(const double *sigma, size_t p, size_t m, size_t n, SStats *out) {
    *out = (SStats){ .m = m, .n = n, .p = p, .norm = max_of(sigma, p) };
    out->stable_rank = sstats_stable_rank(sigma, p);
    out->entropy_rank = sstats_entropy_rank(sigma, p);
    out->participation = sstats_participation(sigma, p);
    double *ev;
    size_t ne;
    if (sstats_esd(sigma, p, m, n, &ev, &ne)) return AL_ERR;
    int rc = AL_OK;
    if (ne >= SSTATS_MIN_EVALS) rc = sstats_powerlaw_fit(ev, ne, &out->fit);
    else out->fit = (SStatsFit){ .n = ne, .alpha = NAN, .xmin = NAN, .ks = NAN, .sigma = NAN };
    /* the MP law over the nonzero eigenvalues: a fused map's exact zeros past its inner dim (and
     * the dense SVD's of the formed product) are not a bulk */
    sstats_mp(ev, ne, m > n ? m : n, &out->mp_q, &out->mp_sigma2, &out->mp_edge, &out->mp_spikes);
    free(ev);
    return rc;
}

typedef struct {
    const Spectrum *const *sp;
    SStats *out;
} ManyJob;

static int many_task(size_t i, int worker, void *ud) {
    (void)worker;
    const ManyJob *j = ud;
    const Spectrum *sp = j->sp[i];
    if (!sp) { j->out[i] = (SStats){ .fit.alpha = NAN }; return AL_OK; }
    return sstats_compute(sp->sigma, sp->p, sp->m, sp->n, &j->out[i]);
}

int sstats_many(const Spectrum *const *sp, size_t n, SStats *out) {
    ManyJob j = { .sp = sp, .out = out };
    return n ? sweep_run(n, 0, many_task, &j) : AL_OK;
}

void sstats_log_hist(const double *x, size_t n, size_t nb, double *edges, double *dens) {
    double lo = INFINITY, hi = 0;
    for (size_t i = 0; i < n; i++) {
        if (x[i] > 0 && x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (!(hi > 0)) lo = hi = 1.0;
    double a = log10(lo), b = log10(hi);
    if (b - a < 1e-3) a -= 0.5, b += 0.5;   /* one value (within 0.2%): the bins span a decade around it */
    for (size_t k = 0; k <= nb; k++) edges[k] = pow(10.0, a + (b - a) * (double)k / (double)nb);
    for (size_t k = 0; k < nb; k++) dens[k] = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(x[i] > 0)) continue;
        double t = (log10(x[i]) - a) / (b - a) * (double)nb;
        size_t k = t < 0 ? 0 : (size_t)t;
        if (k >= nb) k = nb - 1;
        dens[k] += 1.0;
    }
    for (size_t k = 0; k < nb; k++) dens[k] /= (double)n * (edges[k + 1] - edges[k]);
}
