#!/usr/bin/env bash
# cli_convert_lanes.sh -- issue 32 (cvp): `convert mla` converts two layers at a time on two cores (tmla_lanes.h), one
# on one; its line says how many; the report, `check` (whose calibration digest the lanes feed in layer order) and the
# export are the same bytes either way, and the export's are the old one-layer-at-a-time code's (recorded from it,
# 3e93937, with ATTNLAB_THREADS 1 and 2 and OPENBLAS_NUM_THREADS 1 and 2: one hash).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-convert-lanes shared-cache
cd "$T" || exit 1
awk 'BEGIN { s = 7; for (i = 0; i < 600; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
P="load demo-llama-bf16 as d; set compute bf16; calibrate ids ids.txt samples 4 seqlen 64 inputs on; convert mla kv-rank 32 stats act"
# (the pinned rows and hashes are bf16 mode's on the vdpbf16ps token lanes, ATTNLAB_AMX=0, as the old code ran; the
#  AMX tiles sum the calibration's products in another order: there the two lanes' text and bytes agree, below)
for t in 1 2; do
    ATTNLAB_AMX=0 ATTNLAB_THREADS=$t run -e "$P; check; export e$t"
    [ "$(rc)" = 0 ] || fail "threads $t: rc $(rc) [$(cat err.txt)]"
    grep -v "^conversion:\|tok/s)$\|e$t" out.txt > r$t.txt
    grep "^conversion:" out.txt > c$t.txt
done
ok "one core: one layer at a time" grep -q "reports, 1 layer at a time$" c1.txt
ok "two cores: two layers at a time" grep -q "reports, 2 layers at a time$" c2.txt
ok "the report and check: the same text" cmp -s r1.txt r2.txt
ok "  with check's rows" grep -q "^    3   0.591921   0.48965" r2.txt
for t in 1 2; do
    ok "threads $t: the old code's export" [ "$(sha256sum < e$t/model.safetensors | cut -c1-64)" = 5e4d9505819892475431b11477fc68dbda2614e2ba72fc5c0e55265b30d7b3d7 ]
    ok "threads $t: the old code's check inputs (the digest)" [ "$(sha256sum < e$t/check_inputs.safetensors | cut -c1-64)" = 46ce38b0c13209ce5dea291cbe62d85de5d65466282a853330eb3a9be2895422 ]
done
if grep -q amx_bf16 /proc/cpuinfo 2>/dev/null; then
    for t in 1 2; do
        ATTNLAB_THREADS=$t run -e "$P; check; export amx$t"
        [ "$(rc)" = 0 ] || fail "AMX, threads $t: rc $(rc) [$(cat err.txt)]"
        grep -v "^conversion:\|tok/s)$\|amx$t" out.txt > ra$t.txt
    done
    ok "on the AMX tiles: the report and check, one core and two: the same text" cmp -s ra1.txt ra2.txt
    ok "  and the same export" cmp -s amx1/model.safetensors amx2/model.safetensors
fi
cli_done
