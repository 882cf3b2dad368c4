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
#include <strings.h>
#include <unistd.h>

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

static const char no_openblas[] = "BLAS kernels: not OpenBLAS's (no openblas_get_corename)";

/* Set in the environment of the re-executed process: the family the library chose itself. */
#define FELL_BACK_FROM "ATTNLAB_BLAS_FELL_BACK_FROM"

const char *blas_arch_choose(void) {
    if (note[0]) return note;
    corename_fn corename = corename_lookup();
    if (!corename) return no_openblas;
    snprintf(note, sizeof note, "OpenBLAS kernels %s", corename());
    return note;
}

/* Before main (glibc hands init_array functions argc / argv / envp): where the library fell back to
 * Prescott and the user set no OPENBLAS_CORETYPE, the program is executed again with
 * OPENBLAS_CORETYPE set to the CPU's family, so the library reads it when it loads, as it reads a
 * user's. Swapping the library's table in this process instead (its gotoblas pointer) raced with
 * the BLAS server thread the library starts when it loads: a segfault before main, once in a
 * loaded test run. Nothing has run or been printed when this runs; if exec fails, the program goes
 * on with the library's choice. The re-executed process removes both variables again, so programs
 * it starts see the user's environment. */
__attribute__((constructor)) static void choose_at_start(int argc, char **argv, char **envp) {
    (void)argc, (void)envp;
    corename_fn corename = corename_lookup();
    if (!corename) return;
    const char *was = getenv(FELL_BACK_FROM);
    if (was) {
        unsigned family, model;
        cpu_model(&family, &model);
        snprintf(note, sizeof note, "OpenBLAS kernels %s (the library's own choice on this CPU, family %u model %u: %s)",
                 corename(), family, model, was);
        unsetenv(FELL_BACK_FROM);
        unsetenv("OPENBLAS_CORETYPE");
        return;
    }
    const char *fam = family_for_cpu();
    if (!fam || getenv("OPENBLAS_CORETYPE") || strcasecmp(corename(), "Prescott") || !argv || !argv[0]) return;
    setenv("OPENBLAS_CORETYPE", fam, 1);
    setenv(FELL_BACK_FROM, corename(), 1);
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");      /* exec failed: the library's choice stays */
    unsetenv(FELL_BACK_FROM);
}
