#!/usr/bin/env bash
# bench_moe_decode.sh -- decode (one token at a time through the KV cache, as `generate` runs it) of a gpt-oss-shaped
# model whose fused experts are BF16 ([E, D, 2F] gate_up, [E, F, D] down, used as x @ W; written by
# tests/test_oss_bf16_experts: hidden H, E experts of width F, L layers, top-2, 4 heads of 32), in one process:
# `bench_forward --decode DIR N REPS` -- the read bandwidth of the weights from the mapping, the floor (the bytes a
# token reads: attention, router, norms, head and 2 of the E experts, at that bandwidth), then greedy decoding with
# the experts read in place and widened whole before one sgemm (the code before), interleaved, in compute f32 and
# bf16: tok/s, CPU per token, each against the floor, and whether the greedy tokens agree. The experts should not
# fit in L3 (the defaults: 1.6 GB). Not a timed test: ratios within one run, and the load average.
#   bench/bench_moe_decode.sh [--hidden 2048] [--ffn 2048] [--experts 16] [--layers 4] [--tokens 32] [--reps 3]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${ATTNLAB_BUILD:-build}
H=2048 F=2048 E=16 L=4 N=32 reps=3
while [ $# -gt 0 ]; do
    case $1 in
        --hidden) H=$2; shift 2 ;;
        --ffn) F=$2; shift 2 ;;
        --experts) E=$2; shift 2 ;;
        --layers) L=$2; shift 2 ;;
        --tokens) N=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        *) echo "usage: $0 [--hidden H] [--ffn F] [--experts E] [--layers L] [--tokens N] [--reps R]" >&2; exit 2 ;;
    esac
done
tmp=$(mktemp -d /tmp/attnlab-moe-decode.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$B/tests/test_oss_bf16_experts" write "$tmp/oss" "$H" "$F" "$E" "$L"
cat "$tmp/oss/model.safetensors" > /dev/null          # warm page cache
echo "gpt_oss hidden $H, $E experts of $F (top-2), $L layers: $(du -m "$tmp/oss/model.safetensors" | cut -f1) MB" \
     "($(( 3 * H * F * E * L * 2 / 1048576 )) MB of BF16 experts)"
"$B/bench_forward" --decode "$tmp/oss" "$N" "$reps"
