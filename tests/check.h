/* check.h -- the tiny test harness every tests/test_*.c uses.
 *
 * CHECK(cond, fmt, ...) records a failure with file:line and continues; CHECK_OK(call) expects
 * AL_OK and prints al_errmsg() otherwise; CHECK_NEAR(a, b, tol). test_tmpdir() is a fresh
 * scratch folder from $ATTNLAB_TMP. check_done() prints "N passed, N failed" for the checks
 * and returns the exit status (0 when none failed). check_skip(why) exits 77 (ctest: skipped). */
#ifndef AL_CHECK_H
#define AL_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "al.h"

static int check_pass_n, check_fail_n;

#define CHECK(cond, ...) do { \
    if (cond) check_pass_n++; \
    else { check_fail_n++; fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond); \
           fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

#define CHECK_OK(call) do { int rc_ = (call); \
    if (rc_ == AL_OK) check_pass_n++; \
    else { check_fail_n++; fprintf(stderr, "%s:%d: FAILED: %s returned %d: %s\n", \
           __FILE__, __LINE__, #call, rc_, al_errmsg()); } } while (0)

/* Expects an error whose message contains `needle`. */
#define CHECK_ERR(call, needle) do { int rc_ = (call); \
    if (rc_ != AL_OK && strstr(al_errmsg(), (needle))) check_pass_n++; \
    else { check_fail_n++; fprintf(stderr, "%s:%d: FAILED: %s: want error with '%s', got %d: %s\n", \
           __FILE__, __LINE__, #call, (needle), rc_, rc_ ? al_errmsg() : "(ok)"); } } while (0)

#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); \
    CHECK(fabs(a_ - b_) <= (tol), "%s = %.9g, %s = %.9g, tol %.3g", #a, a_, #b, b_, (double)(tol)); } while (0)

static inline const char *test_tmpdir(void) {
    const char *d = getenv("ATTNLAB_TMP");
    static char buf[4096];
    if (!d) d = "/tmp/attnlab-test";
    snprintf(buf, sizeof buf, "rm -rf '%s' && mkdir -p '%s'", d, d);
    if (system(buf) != 0) { fprintf(stderr, "cannot make %s\n", d); exit(1); }
    return d;
}

static inline void check_skip(const char *why) {
    printf("SKIP: %s\n", why);
    exit(77);
}

static inline int check_done(void) {
    printf("%d passed, %d failed\n", check_pass_n, check_fail_n);
    return check_fail_n ? 1 : 0;
}

#endif
