#!/usr/bin/env bash
# bench_calib_write.sh -- issue 32: what `calibrate ... inputs on` writes, builds interleaved on the same models:
#     load; set compute bf16; calibrate ids ... samples S seqlen L inputs on
# on synthetic 8B-shaped BF16 models of 1 and 2 layers (bench_forward --write-shape 8b, written once), each run's
# write_bytes read at its exit (the child's rusage: ru_oublock x 512, which Linux derives from write_bytes, so the
# last write-back of the spill mapping is counted; sampling /proc/PID/io misses what the process writes in its last
# 0.1 s), its wall and CPU seconds, its minor page faults (a streamed model's weights mapped in again: one pass
# per window window-major, per group layer-major). G_X is 64 MiB a layer at this width: 1 / 2 layers write 64 / 128.
#
#   bench/bench_calib_write.sh [-r ROUNDS] [-s SAMPLES] [-l SEQLEN] NAME@BUILD[@K=V] ...
# (K=V: an environment setting of that variant's runs, e.g. ATTNLAB_FWD_MEM=1: weights released after each layer)
# The models (2.3 / 2.8 GB) go under $TMPDIR (else /tmp) and are removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
R=1 S=8 L=512
while getopts r:s:l: o; do case $o in r) R=$OPTARG ;; s) S=$OPTARG ;; l) L=$OPTARG ;; *) exit 2 ;; esac; done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-r ROUNDS] [-s SAMPLES] [-l SEQLEN] NAME@BUILD[@K=V] ..." >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-cw-XXXXXX")
trap 'rm -rf "$W"' EXIT
export ATTNLAB_CACHE=${ATTNLAB_CACHE:-$W/cache}
for n in 1 2; do build/bench_forward --write-shape 8b "$W/m$n" $n >/dev/null 2>&1; done
awk -v n=$(((S + 1) * L + 16)) 'BEGIN { s = 7; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 32000 } print "" }' > "$W/ids.txt"
echo "load average at start: $(cat /proc/loadavg) ($(nproc) CPUs); 8B width, $S x $L calibration tokens"
printf "%-5s %-8s %-6s %11s %8s %7s %10s\n" round variant layers written_MB wall_s cpu_s minflt_k
for r in $(seq 1 "$R"); do
    for n in 1 2; do
        for spec in "$@"; do
            IFS=@ read -r tag b e <<<"$spec"
            case $b in /*) ;; *) b=$PWD/$b ;; esac
            env ${e:+"$e"} python3 - "$b/attnlab" "load $W/m$n as m; set compute bf16; calibrate ids $W/ids.txt samples $S seqlen $L inputs on" "$r" "$tag" "$n" <<'PY'
import resource, subprocess, sys, time
t = time.time()
p = subprocess.run([sys.argv[1], "-e", sys.argv[2]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
w = time.time() - t
u = resource.getrusage(resource.RUSAGE_CHILDREN)
if p.returncode: sys.exit("failed: " + p.stderr.decode()[-400:])
print("%-5s %-8s %-6s %11.1f %8.1f %7.1f %10.0f" % (sys.argv[3], sys.argv[4], sys.argv[5], u.ru_oublock * 512 / 2**20,
                                                     w, u.ru_utime + u.ru_stime, u.ru_minflt / 1000))
PY
        done
    done
done
echo "load average at end: $(cat /proc/loadavg)"
