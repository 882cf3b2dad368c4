/* tensor_internal.h -- switches of core/base/tensor.c that only tests and benchmarks use (not part of
 * the API the shell builds on). */
#ifndef AL_TENSOR_INTERNAL_H
#define AL_TENSOR_INTERNAL_H

#include <stdbool.h>

/* Which E4M3 row decoder runs: false forces the table, true restores the default (AVX2 + F16C
 * where the CPU has it). Returns whether the AVX2 decoder is now in use. Not for use while other
 * threads decode. */
bool dt_e4m3_simd(bool on);

#endif
