/* symeig_internal.h -- core/linalg/symeig.c's path switches, for tests and benchmarks only. */
#ifndef AL_SYMEIG_INTERNAL_H
#define AL_SYMEIG_INTERNAL_H

#include <stdbool.h>

/* true: symeig_values takes the portable C path even where the CPU has AVX-512 (process-wide). */
void symeig_force_portable(bool on);
/* Whether symeig_values would take the AVX-512 path now. */
bool symeig_uses_avx512(void);
/* symeig_values_f32_ws reduces a group of at least cnt matrices 16 at a time in float lanes, a
 * smaller one matrix by matrix (process-wide; 0: the default, 1: always lanes, 17: never). */
void symeig_f32_lanes_from(int cnt);
/* true: symeig_values_f32_ws solves its T's by the QR in double lanes (two chains of 8, tolerance
 * 2^-53 g: the path before the float QR) instead of the float lanes (process-wide). */
void symeig_f32_qr_double(bool on);

#endif
