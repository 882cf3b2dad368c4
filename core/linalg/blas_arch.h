/* blas_arch.h -- OpenBLAS's kernel family on a CPU newer than the library's table.
 *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels by the CPU's family / model when it is loaded; a model
 * it does not know falls back to "Prescott" (SSE3 kernels, no AVX): Debian's 0.3.21 does so on
 * Emerald Rapids (family 6, model 207), so every dgemm / dtrmm / dpotrf / ssyrk / ssyevd of the
 * process runs at a third of the speed the same library reaches with its own AVX-512 kernels.
 * blas_arch_choose() picks, once, the newest family of the library's that the CPU's features
 * cover (Cooperlake: AVX-512 BF16; SkylakeX: AVX-512; Haswell: AVX2) through OpenBLAS's own
 * OPENBLAS_CORETYPE: a constructor of every program linked with attn_core (the library's link
 * options pull this object in) executes the program again with the variable set, before main and
 * before anything is read or printed, and the new process removes it from its environment. It
 * changes nothing where the library chose a family itself, where OPENBLAS_CORETYPE is set
 * (OPENBLAS_CORETYPE=Prescott gives the library's fallback back), or where the library is not a
 * DYNAMIC_ARCH OpenBLAS. So attnlab, its tests and its benches run the same kernels. Results
 * differ from the Prescott kernels' in the last bits, as between any two BLAS builds. */
#ifndef AL_BLAS_ARCH_H
#define AL_BLAS_ARCH_H

/* What the process's BLAS runs, one line, e.g. "OpenBLAS kernels Cooperlake (the library's own
 * choice on this CPU, family 6 model 207: Prescott)" or "OpenBLAS kernels SkylakeX". Static
 * storage; never NULL. */
const char *blas_arch_choose(void);

#endif
