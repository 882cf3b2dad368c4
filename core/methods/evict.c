/* evict.c -- the token-eviction policies of evict.h as key masks: StreamingLLM (positions alone), H2O (a cache
 * evolving with the attention it gets) and SnapKV (the observation window's votes on each prefix), from one
 * layer's queries and keys after RoPE (forward.h FwdEvict). Owns nothing past a call. */
#include "evict.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"

static const char *const EVICT_NAMES[EVICT_NKINDS] = {"streaming-llm", "h2o", "snapkv"};

const char *evict_name(evict_kind k) { return k >= 0 && k < EVICT_NKINDS ? EVICT_NAMES[k] : "?"; }

EvictPolicy evict_policy(evict_kind kind, size_t capacity) {
    return (EvictPolicy){.kind = kind, .capacity = capacity, .sinks = 4, .recent = capacity / 2, .obs_window = 64,
                         .kernel = 5, .layer = -1};
}

double evict_reads(size_t T, size_t C, size_t w) {
    double n = 0;
    for (size_t p = 0; p < T; p++) {
        size_t k = p + 1 < C ? p + 1 : C;
        n += (double)(w && w < k ? w : k);
    }
    return n;
}

double evict_read_frac(size_t T, size_t C) { return T ? evict_reads(T, C, 0) / evict_reads(T, T, 0) : 1.0; }

/* Keys read over the layers of windows w (NULL: one layer without) under cache C. */
static double reads_layers(size_t T, size_t C, const size_t *w, int nl) {
    double n = 0;
    for (int l = 0; l < nl; l++) n += evict_reads(T, C, w ? w[l] : 0);
    return n;
}

double evict_read_frac_layers(size_t T, size_t C, const size_t *w, int nl) {
    double all = reads_layers(T, T, w, nl);
    return all > 0 ? reads_layers(T, C, w, nl) / all : 1.0;
}

size_t evict_capacity_layers(size_t T, double frac, const size_t *w, int nl) {
    if (frac >= 1.0 || T < 1) return T < 1 ? 1 : T;
    double all = reads_layers(T, T, w, nl);
    size_t C = 1;
    while (C < T && reads_layers(T, C + 1, w, nl) <= frac * all + 1e-9) C++;
    return C;
}

size_t evict_capacity(size_t T, double frac) { return evict_capacity_layers(T, frac, NULL, 1); }

/* ================================================================ helpers */

/* The first key row t sees under the model's window. */
static size_t first_key(const FwdEvict *e, size_t t) { return e->window && t + 1 > e->window ? t + 1 - e->window : 0; }

/* Row t of KV head g's mask. */
static unsigned char *keep_row(const FwdEvict *e, size_t g, size_t t) { return e->keep + (g * e->T + t) * e->nkeys; }

/* The scaled, soft-capped logits of KV head g's query heads: Lg (grp, T, T), row t over keys 0..t. */
static void group_logits(const FwdEvict *e, size_t g, float *Lg) {
    size_t T = e->T, grp = e->H / e->G, d = e->d;
    for (size_t i = 0; i < grp; i++) {
        float *S = Lg + i * T * T;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)T, (int)d, (float)e->scale,
                    e->q + (g * grp + i) * d, (int)e->ldq, e->K + g * d, (int)e->ldk, 0.f, S, (int)T);
        for (size_t t = 0; e->softcap > 0 && t < T; t++)
            for (size_t k = 0; k <= t; k++) S[t * T + k] = (float)(e->softcap * tanh(S[t * T + k] / e->softcap));
    }
}

/* Softmax of row s over the keys in [lo, hi] with inc[k] (inc NULL: all) into w (double), others 0. */
static void softmax_subset(const float *s, const unsigned char *inc, size_t lo, size_t hi, double *w) {
    double mx = -INFINITY, sum = 0;
    for (size_t k = lo; k <= hi; k++)
        if (!inc || inc[k]) mx = s[k] > mx ? s[k] : mx;
    for (size_t k = 0; k <= hi; k++) {
        w[k] = k >= lo && (!inc || inc[k]) ? exp((double)s[k] - mx) : 0.0;
        sum += w[k];
    }
    for (size_t k = 0; k <= hi; k++) w[k] /= sum;
}

/* ================================================================ the policies */

static void streaming(const EvictPolicy *p, const FwdEvict *e) {
    size_t C = p->capacity, s = p->sinks;
    if (s > C - 1) s = C - 1;
    for (size_t g = 0; g < e->G; g++)
        for (size_t t = C; t < e->T; t++) {                 /* rows t < C see all t + 1 <= C keys */
            unsigned char *r = keep_row(e, g, t);
            for (size_t k = s; k + (C - s) <= t; k++) r[k] = 0;   /* keep k < s and k > t - (C - s) */
        }
}

/* H2O on KV head g: the cache grows by the query's own key, the query attends, the accumulated scores grow,
 * and a full cache (C keys) drops its lowest-scored key outside the recent window. */
static void h2o_group(const EvictPolicy *p, const FwdEvict *e, size_t g, const float *Lg, double *acc,
                      unsigned char *inc, double *w) {
    size_t T = e->T, grp = e->H / e->G, C = p->capacity, r = p->recent, n = 0;
    if (r > C - 1) r = C - 1;
    memset(acc, 0, T * sizeof *acc);
    memset(inc, 0, T);
    for (size_t t = 0; t < T; t++) {
        inc[t] = 1;
        n++;
        memcpy(keep_row(e, g, t), inc, t + 1);
        for (size_t i = 0; i < grp; i++) {
            softmax_subset(Lg + i * T * T + t * T, inc, first_key(e, t), t, w);
            for (size_t k = 0; k <= t; k++) acc[k] += w[k];
        }
        if (n < C) continue;
        size_t u = T;                                       /* the lowest score outside the recent window */
        for (size_t k = 0; k + r <= t; k++)
            if (inc[k] && (u == T || acc[k] < acc[u])) u = k;
        if (u == T)
            for (u = 0; !inc[u]; u++) {}
        inc[u] = 0;
        n--;
    }
}

typedef struct { double s; size_t k; } voted;

/* Highest vote first; ties: the earlier key. */
static int cmp_voted(const void *a, const void *b) {
    const voted *x = a, *y = b;
    return x->s > y->s ? -1 : x->s < y->s ? 1 : (x->k > y->k) - (x->k < y->k);
}

/* SnapKV on KV head g for every prefix 0..t longer than C: P (grp, T, T) the model's attention rows,
 * col (T) the window's column sums (summed afresh: equal weights give equal votes), v (T) votes. */
static void snapkv_group(const EvictPolicy *p, const FwdEvict *e, size_t g, const double *P, double *col, voted *v) {
    size_t T = e->T, grp = e->H / e->G, C = p->capacity, kern = p->kernel ? p->kernel : 1, wn = p->obs_window;
    if (wn > C / 2) wn = C / 2;
    if (wn < 1) wn = 1;
    for (size_t t = C; t < T; t++) {                        /* prefixes longer than C */
        size_t nk = t + 1 - wn, half = kern / 2;            /* keys scored: 0 .. nk - 1 */
        memset(col, 0, nk * sizeof *col);
        for (size_t i = 0; i < grp; i++)                    /* the window is rows t - wn + 1 .. t */
            for (size_t u = nk; u <= t; u++)
                for (size_t k = 0; k < nk; k++) col[k] += P[i * T * T + u * T + k];
        for (size_t k = 0; k < nk; k++) {
            double s = 0;
            for (size_t j = k >= half ? k - half : 0; j <= k + half && j < nk; j++) s += col[j];
            v[k] = (voted){s / ((double)kern * (double)wn * (double)grp), k};
        }
        qsort(v, nk, sizeof *v, cmp_voted);
        unsigned char *r = keep_row(e, g, t);
        memset(r, 0, nk);
        for (size_t j = 0; j < C - wn; j++) r[v[j].k] = 1;
    }
}

/* The model's attention rows of KV head g's query heads from their logits. */
static void group_attention(const FwdEvict *e, const float *Lg, double *P, size_t grp) {
    size_t T = e->T;
    for (size_t i = 0; i < grp; i++)
        for (size_t t = 0; t < T; t++) softmax_subset(Lg + i * T * T + t * T, NULL, first_key(e, t), t, P + i * T * T + t * T);
}

int evict_mask(const EvictPolicy *p, const FwdEvict *e) {
    if (p->layer >= 0 && e->layer != p->layer) return AL_OK;
    if (p->capacity < 1) return al_err("token eviction: a cache of %zu token%s (at least 1)", p->capacity, al_s(p->capacity));
    if (e->pos0 != 0)
        return al_err("token eviction runs on whole sequences from position 0 (perplexity windows), not on a call "
                      "at position %zu", e->pos0);
    if (p->kind == EVICT_STREAMING) { streaming(p, e); return AL_OK; }
    size_t T = e->T, grp = e->H / e->G;
    float *Lg = al_malloc3(grp * T, T, sizeof(float), "eviction scores");
    double *a = al_malloc3(T, 1, sizeof(double), "eviction scores"), *w = al_malloc3(T, 1, sizeof(double), "weights");
    unsigned char *inc = al_malloc3(T, 1, 1, "the evicted cache");
    double *P = p->kind == EVICT_SNAPKV ? al_malloc3(grp * T, T, sizeof(double), "attention rows") : NULL;
    voted *v = p->kind == EVICT_SNAPKV ? al_malloc3(T, 1, sizeof(voted), "votes") : NULL;
    int rc = Lg && a && w && inc && (p->kind != EVICT_SNAPKV || (P && v)) ? AL_OK : AL_ERR;
    for (size_t g = 0; rc == AL_OK && g < e->G; g++) {
        group_logits(e, g, Lg);
        if (p->kind == EVICT_H2O) h2o_group(p, e, g, Lg, a, inc, w);
        else {
            group_attention(e, Lg, P, grp);
            snapkv_group(p, e, g, P, a, v);
        }
    }
    free(Lg); free(a); free(w); free(inc); free(P); free(v);
    return rc;
}

int evict_fwd(const FwdEvict *e, void *ud) { return evict_mask(ud, e); }
