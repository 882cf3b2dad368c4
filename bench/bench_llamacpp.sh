#!/usr/bin/env bash
# bench_llamacpp.sh -- prefill (prompt processing) speed of attnlab against a real llama.cpp on the
# same weights, in one run (issue 18, part 2):
#   bench/bench_llamacpp.sh [DIR] [--no-f32]
# DIR holds the synthetic TinyLlama-shaped 1.1B BF16 model of bench_forward (default
# ${ATTNLAB_CACHE:-/tmp/attnlab}/bench-llama-1b; written by `bench_forward --write-llama1b DIR` when
# absent). `attnlab -e "load DIR; export ... dtype bf16|f32"` writes the same weights as GGUF beside
# DIR (DIR-bf16.gguf, DIR-f32.gguf, kept for later runs). Back to back, at T = 128 and 512 tokens,
# two threads each, best of 3 after a warm-up (BENCH_TS and BENCH_REPS change the T list and the count):
#   1. llama.cpp (node-llama-cpp, bench/llamacpp_prefill.mjs) on the BF16 GGUF: a fresh sequence
#      evaluates the T ids, logits of the last token; its own "prompt eval time" and the call's wall;
#   2. attnlab's `ppl ids FILE seqlen T max-tokens T` (one window of T tokens: the forward pass of
#      ppl, logits of every token, the time ppl prints) in `set compute f32`, then `bf16`;
#   3. llama.cpp on the F32 GGUF (skipped with --no-f32).
# The same token ids on both sides ((i * 2654435761) mod (V - 3) + 3). Prints the load average
# before and after, each tok/s, and the ratios attnlab / llama.cpp (llama.cpp's own prompt eval
# time; the issue's targets: bf16 >= 2x llama.cpp BF16, f32 >= 1x).
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=${ATTNLAB_BUILD:-$SRC/build}
DIR=${ATTNLAB_CACHE:-/tmp/attnlab}/bench-llama-1b
F32=1
for a in "$@"; do
    case $a in
    --no-f32) F32=0 ;;
    *) DIR=$a ;;
    esac
done
TS=${BENCH_TS:-128 512} REPS=${BENCH_REPS:-3}
JS=$SRC/bench/llamacpp_prefill.mjs
command -v node >/dev/null || { echo "node is not installed (scripts/install-deps.sh installs it)"; exit 77; }
mkdir -p "$(dirname "$DIR")"
"$B/bench_forward" --write-llama1b "$DIR" || exit 1
for dt in bf16 f32; do
    [ "$dt" = f32 ] && [ "$F32" = 0 ] && continue
    [ -f "$DIR-$dt.gguf" ] || "$B/attnlab" -e "load $DIR; export $DIR-$dt.gguf dtype $dt" >/dev/null || exit 1
done
V=$(grep -oE '"vocab_size":[[:space:]]*[0-9]+' "$DIR/config.json" | grep -o '[0-9]*$')
[ -n "$V" ] || { echo "$DIR/config.json: no vocab_size"; exit 1; }
W=$(mktemp -d /tmp/attnlab-bench-llamacpp-XXXXXX)
trap 'rm -rf "$W"' EXIT
for T in 16 $TS; do
    awk -v T="$T" -v V="$V" 'BEGIN { for (i = 0; i < T; i++) printf "%d%s", (i * 2654435761) % (V - 3) + 3, i + 1 < T ? " " : "\n" }' > "$W/ids$T"
done
load() { echo "$(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"; }
echo "load average at start: $(load)"
echo "model $DIR (TinyLlama shapes, BF16), T = ${TS// /, }, 2 threads, best of $REPS"

# llama.cpp on one GGUF: "T tok/s(llama.cpp's prompt eval) tok/s(wall)" per line, into $W/ll_$1
llamacpp() {
    node "$JS" "$DIR-$1.gguf" "${TS// /,}" "$REPS" 2 "$V" > "$W/node_$1.txt" 2> "$W/node_$1.err" \
        || { echo "llama.cpp on $1 failed: $(tail -3 "$W/node_$1.err")"; return 1; }
    sed "s/^/  llama.cpp $1 GGUF: /" "$W/node_$1.txt"
    sed -E 's/.* T=([0-9]+) .* wall [0-9.]+ s ([0-9.]+) tok\/s llama [0-9.]+ s ([0-9.]+) tok\/s/\1 \3 \2/' "$W/node_$1.txt" > "$W/ll_$1"
}
llamacpp bf16 || exit 1

# attnlab: one session, per mode a 16-token warm-up, then REPS windows of each T; "T tok/s" (best)
cmds="load $DIR"
for mode in f32 bf16; do
    cmds="$cmds; set compute $mode; ppl ids $W/ids16 seqlen 16"
    for T in $TS; do for r in $(seq "$REPS"); do cmds="$cmds; ppl ids $W/ids$T seqlen $T"; done; done
done
"$B/attnlab" -e "$cmds" > "$W/al.out" 2> "$W/al.err" || { echo "attnlab failed: $(tail -3 "$W/al.err")"; exit 1; }
for mode in f32 bf16; do
    # the stderr lines "1 windows of up to T tokens, T-1 predicted, S s (R tok/s)", f32 block first
    awk -v mode="$mode" '/windows of up to/ {
            n++; T = $6; gsub(/[(]/, "", $0); k = split($0, w, " "); tps = w[k - 1]
            blk = (n <= NB) ? "f32" : "bf16"
            if (blk == mode && T != 16 && tps + 0 > best[T] + 0) best[T] = tps }
        END { for (T in best) print T, best[T] }' NB=$((1 + 2 * REPS)) "$W/al.err" | sort -n > "$W/al_$mode"
    while read -r T tps; do printf '  attnlab %-4s ppl path:  T=%-4s %8.1f tok/s\n' "$mode" "$T" "$tps"; done < "$W/al_$mode"
done
[ "$F32" = 1 ] && { llamacpp f32 || F32=0; }
echo "load average at end: $(load)"

echo "ratios (attnlab tok/s / llama.cpp tok/s, llama.cpp's own prompt eval time; its wall time in brackets):"
for T in $TS; do
    l16=$(awk -v T="$T" '$1 == T { print $2, $3 }' "$W/ll_bf16")
    a32=$(awk -v T="$T" '$1 == T { print $2 }' "$W/al_f32"); a16=$(awk -v T="$T" '$1 == T { print $2 }' "$W/al_bf16")
    l32=""; [ "$F32" = 1 ] && l32=$(awk -v T="$T" '$1 == T { print $2, $3 }' "$W/ll_f32")
    awk -v T="$T" -v l="$l16" -v l32="$l32" -v a32="$a32" -v a16="$a16" 'BEGIN {
        split(l, b, " "); split(l32, f, " ")
        printf "  T=%s: bf16 mode / llama.cpp BF16 = %.2fx [%.2fx] (target >= 2x); f32 mode / llama.cpp BF16 = %.2fx [%.2fx] (target >= 1x)\n",
            T, a16 / b[1], a16 / b[2], a32 / b[1], a32 / b[2]
        if (l32 != "") printf "        f32 mode / llama.cpp F32 = %.2fx [%.2fx]; bf16 mode / llama.cpp F32 = %.2fx\n", a32 / f[1], a32 / f[2], a16 / f[1] }'
done
