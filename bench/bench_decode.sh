#!/usr/bin/env bash
# bench_decode.sh -- decode speed (one token at a time through the KV cache) of attnlab's `generate`
# against a real llama.cpp on the same weights, and both against the floor, in one run (issue 32):
#   bench/bench_decode.sh [DIR] [N]
# DIR holds the synthetic TinyLlama-shaped 1.1B BF16 model of bench_forward (default
# ${ATTNLAB_CACHE:-/tmp/attnlab}/bench-llama-1b; written by `bench_forward --write-llama1b DIR` when
# absent; DIR-bf16.gguf beside it as bench_llamacpp.sh makes it). N tokens (default 64) after a
# 128-token prompt, greedy, two threads each, best of BENCH_REPS (default 3), back to back:
#   1. llama.cpp (node-llama-cpp, bench/llamacpp_decode.mjs) on the BF16 GGUF: its own per-token
#      "eval time" and the JS loop's wall;
#   2. attnlab's `generate PROMPT tokens N` in `set compute f32`, then `bf16`, in one session (the
#      synthetic model has no tokenizer: a llama2.c one of 32000 pieces -- byte-fallback pieces and
#      placeholders -- is written for it; the prompt is 127 letters, 128 tokens with BOS); the rate
#      is (generated - 1) / the seconds generate prints (the first token comes from the prompt's
#      logits, as on llama.cpp's side);
#   3. `bench_forward --decode DIR N`: the floor -- the weights a token reads (all but the
#      embeddings) read once from the mapping on the products' workers, GB/s and the tok/s it allows
#      -- and the same decode in-process with the products on the persistent pool and on threads
#      started per product (the code before the pool), its greedy tokens compared.
# Prints the load average before and after and the ratios (attnlab / llama.cpp, each / the floor).
# Issue 32's target: bf16 decode >= llama.cpp's. On a shared machine read the ratios, not the seconds.
set -u
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=${ATTNLAB_BUILD:-$SRC/build}
DIR=${ATTNLAB_CACHE:-/tmp/attnlab}/bench-llama-1b
N=64
for a in "$@"; do
    case $a in
    [0-9]*) N=$a ;;
    *) DIR=$a ;;
    esac
done
REPS=${BENCH_REPS:-3}
command -v node >/dev/null || { echo "node is not installed (scripts/install-deps.sh installs it)"; exit 77; }
command -v python3 >/dev/null || { echo "python3 is not installed"; exit 77; }
mkdir -p "$(dirname "$DIR")"
"$B/bench_forward" --write-llama1b "$DIR" || exit 1
[ -f "$DIR-bf16.gguf" ] || "$B/attnlab" -e "load $DIR; export $DIR-bf16.gguf dtype bf16" >/dev/null || exit 1
V=$(grep -oE '"vocab_size":[[:space:]]*[0-9]+' "$DIR/config.json" | grep -o '[0-9]*$')
[ -n "$V" ] || { echo "$DIR/config.json: no vocab_size"; exit 1; }
W=$(mktemp -d /tmp/attnlab-bench-decode-XXXXXX)
trap 'rm -rf "$W"' EXIT
python3 - "$V" "$W/tok.bin" <<'EOF' || exit 1
import struct, sys
V, path = int(sys.argv[1]), sys.argv[2]
p = [b"<unk>", b"<s>", b"</s>"] + [("<0x%02X>" % b).encode() for b in range(256)]
p += [("w%d " % i).encode() for i in range(len(p), V)]
with open(path, "wb") as f:
    f.write(struct.pack("<i", max(len(x) for x in p)))
    for x in p:
        f.write(struct.pack("<fi", 0.0, len(x)) + x)
EOF
load() { echo "$(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"; }
echo "load average at start: $(load)"
echo "model $DIR (TinyLlama shapes, BF16): decode of $N tokens after 128, greedy, 2 threads, best of $REPS"

node "$SRC/bench/llamacpp_decode.mjs" "$DIR-bf16.gguf" 128 "$N" "$REPS" 2 "$V" > "$W/ll.txt" 2> "$W/ll.err" \
    || { echo "llama.cpp failed: $(tail -3 "$W/ll.err")"; exit 1; }
sed 's/^/  llama.cpp BF16 GGUF: /' "$W/ll.txt"
LL=$(grep -oE 'ms/token [0-9.]+ tok/s' "$W/ll.txt" | grep -oE '[0-9.]+ tok' | grep -oE '[0-9.]+')
LLW=$(grep -oE 'wall [0-9.]+ s [0-9.]+ tok/s' "$W/ll.txt" | awk '{ print $4 }')
[ -n "$LL" ] || LL=$LLW

PROMPT=$(printf 'a%.0s' $(seq 127))
cmds="load $DIR; tokenizer $W/tok.bin"
for mode in f32 bf16; do
    cmds="$cmds; set compute $mode; generate \"$PROMPT\" tokens 8"
    for r in $(seq "$REPS"); do cmds="$cmds; generate \"$PROMPT\" tokens $N"; done
done
"$B/attnlab" -e "$cmds" > "$W/al.out" 2> "$W/al.err" || { echo "attnlab failed: $(tail -3 "$W/al.err")"; exit 1; }
# the stderr lines "P prompt tokens in S s (R tok/s), G generated in S s (R tok/s)": per mode a warm-up, then REPS
awk -v reps="$REPS" '/generated in/ {
        n++; blk = (n <= reps + 1) ? "f32" : "bf16"; if (n == 1 || n == reps + 2) next
        for (i = 1; i <= NF; i++) if ($i == "generated") { g = $(i - 1); s = $(i + 2) }
        if (g > 1 && (best[blk] == "" || (g - 1) / s > best[blk])) { best[blk] = (g - 1) / s; gen[blk] = g }
    } END { print best["f32"], best["bf16"], gen["f32"], gen["bf16"] }' "$W/al.err" > "$W/al"
read -r A32 A16 G32 G16 < "$W/al"
printf '  attnlab generate, f32  mode: %6.2f tok/s (%s generated)\n' "$A32" "$G32"
printf '  attnlab generate, bf16 mode: %6.2f tok/s (%s generated)\n' "$A16" "$G16"

"$B/bench_forward" --decode "$DIR" "$N" "$REPS" > "$W/fl.txt" 2>&1 || { echo "bench_forward --decode failed: $(tail -3 "$W/fl.txt")"; exit 1; }
grep -v '^load average' "$W/fl.txt" | sed 's/^/  /'
FLOOR=$(grep -oE -- '-> [0-9.]+ tok/s' "$W/fl.txt" | head -1 | grep -oE '[0-9.]+')
echo "load average at end: $(load)"

echo "ratios (tok/s over tok/s; llama.cpp by its own eval time, its wall rate in brackets):"
awk -v a32="$A32" -v a16="$A16" -v ll="$LL" -v llw="$LLW" -v fl="$FLOOR" 'BEGIN {
    printf "  attnlab bf16 / llama.cpp = %.2fx [%.2fx] (target >= 1x); attnlab f32 / llama.cpp = %.2fx [%.2fx]\n", a16 / ll, a16 / llw, a32 / ll, a32 / llw
    printf "  of the floor (%.1f tok/s: one read of the weights per token): attnlab bf16 %.2fx, f32 %.2fx, llama.cpp %.2fx\n", fl, a16 / fl, a32 / fl, ll / fl
}'
