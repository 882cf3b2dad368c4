#!/usr/bin/env bash
# cli_info_layers.sh -- `info`'s `attention` row: the layers grouped by what each one runs (sliding
# window or full attention, RoPE theta and scaling or none, Gated DeltaNet), from the same per-layer
# predicates the forward pass uses (cfg_layer_window / _theta / _rope_scaled / _rope), where the
# config's sliding_window and rope_scaling are one value for the whole model.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-info-layers shared-cache
cd "$T" || exit 1

# attn F: the `attention` row of `info` on family F's tiny checkpoint
attn() {
    "$B" -e "synth family $1 $1" >/dev/null 2>&1 || { echo "synth failed"; return; }
    "$B" -e "load $1; info" 2>&1 | sed -n 's/^attention  *//p'
}
# want F ROW
want() {
    local got
    got=$(attn "$1")
    [ "$got" = "$2" ] || fail "$1: info attention [$got], want [$2]"
}

want olmo3 "layers 0-2 sliding 8 (RoPE theta 500000); layer 3 full (yarn x8, theta 500000)"
want gpt_oss "layers 0, 2 sliding 8 (yarn x8, theta 150000); layers 1, 3 full (yarn x8, theta 150000)"
want exaone4 "layers 0-2 sliding 8 (llama3 x16, theta 1e+06); layer 3 full (no RoPE)"
want gemma3 "layers 0-4 sliding 8 (RoPE theta 10000); layer 5 full (linear x2, theta 1e+06)"
want gemma2 "layers 0, 2 sliding 8 (RoPE theta 10000); layers 1, 3 full (RoPE theta 10000)"
want qwen3_next "layers 0-2 Gated DeltaNet (linear attention); layer 3 full (RoPE theta 1e+07)"
want smollm3 "layers 0-2 full (RoPE theta 5e+06); layer 3 sliding 8 (no RoPE)"
want deepseek_v3 "layers 0-2 full (RoPE theta 10000)"

# JSON carries the same string
"$B" -e "set format json; load olmo3; info" 2>/dev/null | tr -d '\t ' | grep -qF '"attention":"layers0-2sliding8(RoPEtheta500000);layer3full(yarnx8,theta500000)"' \
    || fail "info JSON attention"
cli_done
