#!/usr/bin/env bash
# cli_blas_arch.sh -- attnlab runs OpenBLAS's own AVX-512 / AVX2 kernels on a CPU the library's
# table does not know (core/linalg/blas_arch.c: Debian's OpenBLAS 0.3.21 falls back to its SSE3
# "Prescott" kernels on Emerald Rapids, family 6 model 207): --version names the kernels; on a CPU
# with AVX2 they are not Prescott's; a user's OPENBLAS_CORETYPE is kept; and the rank tables (VO and
# QK, demo-r1 and demo-llama) are the same line for line on the chosen kernels and on Prescott's.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-blas-arch shared-cache

run --version
kern=$(sed -n 2p out.txt)
[ "$(rc)" = 0 ] && has "$kern" '^OpenBLAS kernels \|^BLAS kernels: ' || fail "--version names no BLAS kernels: [$(cat out.txt)]"
if grep -qw avx2 /proc/cpuinfo && has "$kern" '^OpenBLAS'; then
    hasnt "$kern" '^OpenBLAS kernels Prescott' || fail "Prescott's SSE3 kernels on a CPU with AVX2: [$kern]"
fi
OPENBLAS_CORETYPE=Haswell run --version
[ "$(sed -n 2p out.txt)" = "OpenBLAS kernels Haswell" ] || has "$kern" '^BLAS kernels: ' ||
    fail "OPENBLAS_CORETYPE=Haswell not kept: [$(cat out.txt)]"

for m in demo-r1 demo-llama; do
    q=qk
    [ $m = demo-llama ] && q="qk offset 16"
    c="load $m; ranks vo all; ranks $q all; ranks vo all tau 0.9"
    "$B" -e "$c" >chosen.txt 2>&1
    OPENBLAS_CORETYPE=Prescott "$B" -e "$c" >prescott.txt 2>&1
    grep -q '^error' chosen.txt && fail "$m: [$(grep -m1 '^error' chosen.txt)]"
    cmp -s chosen.txt prescott.txt || fail "$m: ranks differ between the kernels: $(diff chosen.txt prescott.txt | head -5)"
done
cli_done
