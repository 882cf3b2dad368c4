/* test_mem_util.h -- shared by the memory tests (issue 32): /proc/self/status fields, whether sizes are measured
 * in this build, and a byte-for-byte file comparison (the numbers must not change when memory does). */
#ifndef TEST_MEM_UTIL_H
#define TEST_MEM_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SANITIZE_ADDRESS__        /* ASan's quarantine and shadow keep freed heap resident: measured in normal builds */
#define MEASURED false
#else
#define MEASURED true
#endif

/* A field of /proc/self/status in kB (-1 when unreadable). */
static inline long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') v = strtol(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}

/* True when files a and b hold the same bytes. */
static inline bool same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    for (int x = 0, y = 0; same && (x != EOF || y != EOF);) same = (x = fgetc(fa)) == (y = fgetc(fb));
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

#endif
