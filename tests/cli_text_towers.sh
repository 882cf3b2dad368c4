#!/bin/bash
# cli_text_towers.sh -- the text towers of multimodal checkpoints (gemma3, qwen3_vl, qwen3_vl_moe, mistral3): `load`
# opens the language model of a config.json with text_config and tensors under language_model.model.,
# and the same folder saved as transformers 4.52+ saves it (model.language_model.) gives the same
# perplexity; `info` says the vision tower is not loaded (and Qwen3-VL's M-RoPE is plain RoPE on text);
# `lint` does not call the vision tensors unplaced; the GGUF export leaves them out and computes the
# same model; the MLA export refuses a tower.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-text-towers
cd "$T" || exit 1
seq 0 3 240 | tr '\n' ' ' >ids.txt
nll() { awk '$1 ~ /^[0-9]+$/ && NF == 3 {print $2}' out.txt | tail -1; }

run -e "synth family gemma3 $T/g; load $T/g; info; ppl ids ids.txt"
ok "gemma3 (Gemma3ForConditionalGeneration) loads" test "$(rc)" = 0
out=$(cat out.txt)
ok "  info: the text tower, vision tower not loaded" has "$out" "text tower of a multimodal checkpoint (text_config, tensors under language_model.model.); vision tower not loaded"
ok "  the checkpoint holds vision tensors" grep -q "multi_modal_projector.mm_input_projection_weight" "$T/g/model.safetensors"
p1=$(nll)
ok "  perplexity ($p1)" test -n "$p1"

# the same checkpoint as transformers 4.52+ saves it: model.language_model. (same length: offsets hold)
mkdir -p "$T/g2" && cp "$T/g/config.json" "$T/g2/"
LC_ALL=C sed 's/language_model\.model\./model.language_model./g' "$T/g/model.safetensors" >"$T/g2/model.safetensors"
run -e "load $T/g2; info; ppl ids ids.txt"
ok "model.language_model. names load" test "$(rc)" = 0
ok "  info names that prefix" has "$(cat out.txt)" "tensors under model.language_model.)"
ok "  the same perplexity ($(nll) = $p1)" test "$(nll)" = "$p1"

run -e "lint $T/g"
out=$(cat out.txt)
ok "lint: the vision tensors are not unplaced" hasnt "$out" "no tensor"
ok "  nor named at all" hasnt "$out" "vision_tower"

run -e "load $T/g; export $T/g.gguf; load $T/g.gguf; ppl ids ids.txt"
ok "GGUF of the text tower written and loaded" test "$(rc)" = 0
ok "  the same perplexity ($(nll) = $p1)" test "$(nll)" = "$p1"

run -e "synth family qwen3_vl $T/q; load $T/q; info"
ok "qwen3_vl loads" test "$(rc)" = 0
ok "  info: M-RoPE on text positions is RoPE" has "$(cat out.txt)" "M-RoPE (mrope_section) on text-only positions (t = h = w) is ordinary RoPE"
ok "  tensors under model.language_model." has "$(cat out.txt)" "tensors under model.language_model.)"

run -e "synth family qwen3_vl_moe $T/qm; load $T/qm; info; ppl ids ids.txt"
ok "qwen3_vl_moe loads and runs" test "$(rc)" = 0
out=$(cat out.txt)
ok "  info: the text tower, 4 routed experts, 2 per token" has "$out" "routed_experts                 4"
ok "  M-RoPE stated" has "$out" "M-RoPE (mrope_section) on text-only positions (t = h = w) is ordinary RoPE"
ok "  perplexity ($(nll))" test -n "$(nll)"
run -e "lint $T/qm"
out=$(cat out.txt)
ok "  lint: transformers loads the fused [E, D, 2I] experts" has "$out" "transformers  Qwen3VLMoeForConditionalGeneration  loads"
ok "  no shape finding on them" hasnt "$out" "gate_up_proj"

run -e "synth family mistral3 $T/m; load $T/m; convert mla kv-rank 16; export $T/mla"
ok "mistral3: the MLA export refuses a tower" test "$(rc)" = 1
ok "  saying why" has "$(cat err.txt)" "multimodal tower (DeepSeek-V3 has a text-only layout"
ok "  nothing written" test ! -e "$T/mla"
cli_done
