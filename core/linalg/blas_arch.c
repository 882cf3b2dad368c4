/* blas_arch.c -- OpenBLAS's kernel family on a CPU newer than the library's table (blas_arch.h).
 * The library's symbols are looked up at run time (dlsym), so a BLAS without them -- not OpenBLAS,
 * or one built for a single target -- links and runs unchanged. */
#define _GNU_SOURCE
#include "blas_arch.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char note[160];

typedef const char *(*corename_fn)(void);
static corename_fn corename_lookup(void) { return (corename_fn)dlsym(RTLD_DEFAULT, "openblas_get_corename"); }

/* The newest of the library's kernel families the CPU's features cover, or NULL. */
static const char *family_for_cpu(void) {
#if !defined(__x86_64__) && !defined(__i386__)
    return NULL;                        /* the fallback this module repairs is x86's */
#else
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if (avx512 && __builtin_cpu_supports("avx512bf16")) return "Cooperlake";
    if (avx512) return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    return NULL;
#endif
}

/* The CPU's family and model as the kernel table reads them (cpuid leaf 1). */
static void cpu_model(unsigned *family, unsigned *model) {
    unsigned a = 0;
#if defined(__x86_64__) || defined(__i386__)
    unsigned b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
#endif
    *family = ((a >> 8) & 0xf) + ((a >> 20) & 0xff);
    *model = ((a >> 4) & 0xf) | ((a >> 12) & 0xf0);
}

/* Re-runs the library's family choice with OPENBLAS_CORETYPE = fam (its own parser and init),
 * the variable unset again afterwards; false (the old table kept) where it did not take. */
static bool switch_family(const char *fam, corename_fn corename) {
    void **table = dlsym(RTLD_DEFAULT, "gotoblas");
    void (*dyn_init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
    if (!table || !dyn_init) return false;
    void *old = *table;
    setenv("OPENBLAS_CORETYPE", fam, 1);
    *table = NULL;                      /* gotoblas_dynamic_init returns at once while it is set */
    dyn_init();
    unsetenv("OPENBLAS_CORETYPE");
    if (*table && !strcasecmp(corename(), fam)) return true;
    *table = old;
    return false;
}

static const char no_openblas[] = "BLAS kernels: not OpenBLAS's (no openblas_get_corename)";

const char *blas_arch_choose(void) {
    if (note[0]) return note;
    corename_fn corename = corename_lookup();
    if (!corename) return no_openblas;
    char was[32];
    snprintf(was, sizeof was, "%s", corename());
    const char *fam = family_for_cpu();
    bool fell_back = !strcasecmp(was, "Prescott") && !getenv("OPENBLAS_CORETYPE") && fam;
    if (!fell_back || !switch_family(fam, corename)) {
        snprintf(note, sizeof note, "OpenBLAS kernels %s", was);
        return note;
    }
    unsigned family, model;
    cpu_model(&family, &model);
    snprintf(note, sizeof note, "OpenBLAS kernels %s (the library's own choice on this CPU, family %u model %u: %s)",
             corename(), family, model, was);
    return note;
}

/* Before main: OpenBLAS's constructor has run (a shared library's come first), no BLAS call yet. */
__attribute__((constructor)) static void choose_at_start(void) { blas_arch_choose(); }
