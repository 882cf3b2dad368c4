/* bench_digest.c -- the digest of a conversion's statistics (core/methods/check_inputs.h), the one
 * every export's manifest records: per layer of hidden D (E[x xᵀ], D x D doubles, and E[x]) the
 * word-wise FNV-1a attnlab writes against the byte-wise one every export before "digest_kind"
 * recorded, on the same data in one run, one thread (not a test).
 *
 *   bench_digest [D ...]      (defaults 4096 8192: the 8B and 70B shapes)
 *
 * Prints thread CPU seconds per layer (best of 3), GB/s, the ratio, and what each costs over 32
 * layers at 4096 and 80 at 8192. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "al.h"
#include "check_inputs.h"

static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best of 3 thread CPU seconds of one layer's digest in `kind`; *h: its value. */
static double time_kind(ci_digest_kind kind, int D, const double *S, const double *mu, uint64_t *h) {
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t = cpu();
        *h = ci_digest_layer_kind(kind, 0, 0, D, S, mu);
        t = cpu() - t;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv) {
    int dims[8] = {4096, 8192}, nd = 2;
    if (argc > 1) nd = 0;
    for (int i = 1; i < argc && nd < 8; i++) dims[nd++] = atoi(argv[i]);
    double load[3] = {0};
    if (getloadavg(load, 3) < 0) load[0] = -1;
    printf("bench_digest: one layer's statistics digest, thread CPU s (best of 3); load average %.2f\n", load[0]);
    printf("%6s  %10s  %10s  %8s  %8s  %7s  %s\n", "D", "bytes (s)", "words (s)", "bytes GB/s", "words GB/s", "ratio",
           "a model (layers: bytes s -> words s)");
    for (int i = 0; i < nd; i++) {
        int D = dims[i];
        size_t n = (size_t)D * (size_t)D;
        double *S = malloc(n * sizeof *S), *mu = malloc((size_t)D * sizeof *mu);
        if (!S || !mu || D < 1) { fprintf(stderr, "bench_digest: no memory for D %d\n", D); return 1; }
        for (size_t k = 0; k < n; k++) S[k] = (double)(k % 977) * 1e-3 + 1.0 / (double)(k + 1);
        for (int k = 0; k < D; k++) mu[k] = 1e-2 * k;
        uint64_t hb, hw;
        double tb = time_kind(CI_DIGEST_BYTES, D, S, mu, &hb), tw = time_kind(CI_DIGEST_WORDS, D, S, mu, &hw);
        double gb = (double)(n + (size_t)D) * 8 / 1e9;
        int layers = D >= 8192 ? 80 : 32;
        printf("%6d  %10.4f  %10.4f  %10.2f  %10.2f  %7.3f  %d: %.1f -> %.2f\n", D, tb, tw, gb / tb, gb / tw, tw / tb,
               layers, tb * layers, tw * layers);
        if (hb == hw) printf("   (the two kinds gave one value: unexpected)\n");
        free(S);
        free(mu);
    }
    return 0;
}
