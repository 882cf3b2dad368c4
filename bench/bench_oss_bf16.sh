#!/usr/bin/env bash
# bench_oss_bf16.sh -- gpt-oss's fused BF16 experts in the forward pass: `ppl` on a gpt_oss checkpoint whose
# experts are BF16 (written by tests/test_oss_bf16_experts: hidden H, E experts of width F, L layers, top-2), old
# binary against new, interleaved, in compute f32 and bf16: peak RSS (VmHWM, /usr/bin/time -v), wall, user + sys
# CPU, and the NLL line of each (the same digits expected: the experts' products are the same sgemm on the same
# values). Not a timed test: it prints ratios within one run, and the load average.
#   bench/bench_oss_bf16.sh --old BIN [--new BIN] [--hidden 1024] [--ffn 1024] [--experts 32] [--layers 4]
#                           [--seqlen 128] [--windows 4] [--reps 2]
set -euo pipefail
cd "$(dirname "$0")/.."
old="" new=build/attnlab H=1024 F=1024 E=32 L=4 seqlen=128 windows=4 reps=2
while [ $# -gt 0 ]; do
    case $1 in
        --old) old=$2; shift 2 ;;
        --new) new=$2; shift 2 ;;
        --hidden) H=$2; shift 2 ;;
        --ffn) F=$2; shift 2 ;;
        --experts) E=$2; shift 2 ;;
        --layers) L=$2; shift 2 ;;
        --seqlen) seqlen=$2; shift 2 ;;
        --windows) windows=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        *) echo "usage: $0 --old BIN [--new BIN] [--hidden H] [--ffn F] [--experts E] [--layers L] [--seqlen T] [--windows W] [--reps N]" >&2; exit 2 ;;
    esac
done
[ -x "$old" ] || { echo "$0: --old BIN (the binary before the change) is required" >&2; exit 2; }
tmp=$(mktemp -d /tmp/attnlab-oss-bf16.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
build/tests/test_oss_bf16_experts write "$tmp/oss" "$H" "$F" "$E" "$L"
for i in $(seq 1 $((seqlen * windows))); do echo $(((i * 37 + 11) % 256)); done | tr '\n' ' ' > "$tmp/ids.txt"
cat "$tmp/oss/model.safetensors" > /dev/null          # warm page cache for both
experts=$(( 3 * H * F * E * L * 2 / 1048576 ))
echo "gpt_oss hidden $H, $E experts of $F, $L layers: $(du -m "$tmp/oss/model.safetensors" | cut -f1) MB on disk ($experts MB of BF16 experts); ppl seqlen $seqlen x $windows windows"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# one BIN MODE: "peakMB wall cpu nll" of `ppl` in compute MODE.
one() {
    rm -f "$tmp/p.csv"
    /usr/bin/time -v "$1" -e "set compute $2; load $tmp/oss; ppl ids $tmp/ids.txt seqlen $seqlen to $tmp/p.csv" >"$tmp/out" 2>"$tmp/time" ||
        { cat "$tmp/time" >&2; exit 1; }
    awk '/Maximum resident set size/ { m = $NF / 1024 } /Elapsed \(wall/ { n = split($NF, a, ":"); w = a[n] + (n > 1 ? 60 * a[n-1] : 0) }
         /User time/ { u = $NF } /System time/ { s = $NF } END { printf "%d %.2f %.2f", m, w, u + s }' "$tmp/time"
    printf ' %s\n' "$(tail -1 "$tmp/p.csv")"
}
printf '%-5s %-4s %3s %9s %8s %8s  %s\n' mode bin rep "peak MB" "wall s" "cpu s" "tokens,nll,ppl"
for mode in f32 bf16; do
    for r in $(seq 1 "$reps"); do
        for b in old new; do
            bin=$old; [ $b = new ] && bin=$new
            read -r pk w c nll <<<"$(one "$bin" $mode)"
            printf '%-5s %-4s %3d %9d %8.2f %8.2f  %s\n' $mode $b "$r" "$pk" "$w" "$c" "$nll"
            eval "pk_${mode}_$b=$pk c_${mode}_${b}=\${c_${mode}_${b}:-0}+$c nll_${mode}_$b=$nll"
        done
    done
    eval "po=\$pk_${mode}_old pn=\$pk_${mode}_new co=\$(echo \$c_${mode}_old | bc) cn=\$(echo \$c_${mode}_new | bc) \
          lo=\$nll_${mode}_old ln=\$nll_${mode}_new"
    echo "compute $mode: peak new/old $(echo "scale=2; $pn / $po" | bc) ($pn vs $po MB), CPU new/old $(echo "scale=2; $cn / $co" | bc), ppl $([ "$lo" = "$ln" ] && echo same || echo "DIFFERS: $lo vs $ln")"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
