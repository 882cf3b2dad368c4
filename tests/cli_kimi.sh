#!/bin/bash
# cli_kimi.sh -- Moonshot's Kimi families of issue 27. kimi_k25 (Kimi-K2.5): the text tower of a multimodal
# checkpoint, DeepSeek-V3's MLA and MoE under text_config, tensors under language_model.model. (head
# language_model.lm_head, as its remote code's KimiK25ForConditionalGeneration names them); info says the vision
# tower is not loaded and how the INT4 experts are read; the MLA analyses and ppl run; YaRN from rope_parameters
# changes the model (and scales the softmax by mscale^2). kimi_linear (Kimi-Linear): Kimi Delta Attention layers
# 3 : 1 MLA layers without RoPE; info names both, the MLA analyses run on the MLA layers (a KDA layer is refused
# naming Kimi Delta Attention), ppl runs the KDA recurrence (test_families checks it against the reference).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-kimi
cd "$T" || exit 1
seq 0 3 240 | tr '\n' ' ' >ids.txt
nll() { awk '$1 ~ /^[0-9]+$/ && NF == 3 {print $2}' out.txt | tail -1; }

run -e "synth family kimi_k25 $T/k; load $T/k; info; ranks vo; ranks qk; spectrum vo layer 1 head 0; ppl ids ids.txt"
ok "kimi_k25 (KimiK25ForConditionalGeneration) loads and runs" test "$(rc)" = 0
out=$(cat out.txt)
ok "  info: the text tower, vision tower not loaded" has "$out" "text tower of a multimodal checkpoint (text_config, tensors under language_model.model.); vision tower not loaded"
ok "  info: the INT4 experts" has "$out" "routed experts released in compressed-tensors INT4 (group 32), read as they lie"
ok "  info: YaRN x64" has "$out" "rope_scaling_factor            64"
ok "  info: softmax scale mscale^2 / sqrt(48) = 0.289359" has "$out" "softmax_scale                  0.289359"
ok "  info: 8 routed experts" has "$out" "routed_experts                 8"
ok "  the checkpoint holds the vision tower and projector" grep -q "mm_projector.proj.0.weight" "$T/k/model.safetensors"
ok "  ranks vo: layer 1 head 0 bottleneck 6" grep -Eq '^ +1 +0 +6 +32 +6$' out.txt
ok "  ranks qk: layer 1 on the NoPE dims, rank 8" grep -Eq '^ +1 +0 +32 +8 +8$' out.txt
p1=$(nll)
ok "  perplexity ($p1)" test -n "$p1"

# YaRN matters: the same checkpoint with rope_parameters' rope_type default computes another model
sed 's/"yarn"/"default"/g' "$T/k/config.json" >"$T/k3.json"
mkdir -p "$T/k3" && cp "$T/k3.json" "$T/k3/config.json" && ln -s "$T/k/model.safetensors" "$T/k3/model.safetensors"
run -e "load $T/k3; ppl ids ids.txt"
ok "without YaRN the perplexity differs ($(nll) != $p1)" test "$(nll)" != "$p1"

# the routed experts as released: compressed-tensors pack-quantized INT4 (tests/int4ct_quant.py, experts only),
# read as they lie, to the perplexity of the decoded F32 twin
INT4CT_ONLY=.experts. python3 "$ATTNLAB_SRC/tests/int4ct_quant.py" "$T/k" "$T/k4"
INT4CT_ONLY=.experts. python3 "$ATTNLAB_SRC/tests/int4ct_quant.py" "$T/k" "$T/k4f" f32
run -e "load $T/k4; info; ppl ids ids.txt"
ok "INT4 experts load and run" test "$(rc)" = 0
ok "  info: experts INT4, attention F32" has "$(cat out.txt)" "attention F32, mlp F32, experts INT4"
q4=$(nll)
ok "  the words hold the experts" grep -q "mlp.experts.3.down_proj.weight_packed" "$T/k4/model.safetensors"
run -e "load $T/k4f; ppl ids ids.txt"
ok "  the perplexity of the decoded twin ($q4 = $(nll))" test -n "$q4" -a "$q4" = "$(nll)"

run -e "lint $T/k"
out=$(cat out.txt)
ok "lint: vLLM and SGLang load it" has "$out" "vLLM          KimiK25ForConditionalGeneration  loads"
ok "  the vision tensors are not unplaced" hasnt "$out" "vision_tower"
ok "  nor the projector" hasnt "$out" "mm_projector"

out=$(e "load $T/k; kv-cache")
ok "kimi_k25 kv-cache: suggests truncate only (convert mla / tpa do not take an MLA model)" has "$out" "^(no conversion of k in this session: \`truncate vo|qk ...\` adds its row)$"
run -e "synth family kimi_linear $T/kl; load $T/kl; info; ranks vo layer 3; ranks vo layer 7; ranks qk layer 3"
ok "kimi_linear (KimiLinearForCausalLM) loads" test "$(rc)" = 0
out=$(cat out.txt)
ok "  info: the MLA layers and the KDA layers" has "$out" "3, 7 (2 of 8; the other 6 are Kimi Delta Attention linear attention"
ok "  info: 4 KDA heads of 32, conv 4" has "$out" "4 key heads x 32, 4 value heads x 32, conv kernel 4"
ok "  info: no RoPE on MLA (mla_use_nope)" has "$out" "rope_layout                    none"
ok "  info: ppl runs" has "$out" "ppl/calibrate                  yes"
ok "  info: kvsvd refused (KDA layers have no keys)" has "$out" "the Kimi Delta Attention layers have no keys or KV cache (only layers 3, 7 have)"
ok "  info: QK on the latent's columns, no RoPE" has "$out" "the 32 columns of each head keyed from the kv latent, dims 0-31, exactly (no RoPE"
ok "  ranks vo: MLA layer 3 head 0 bottleneck 6" grep -Eq '^ +3 +0 +6 +32 +6$' out.txt
ok "  ranks vo: MLA layer 7 fused-low 4" grep -Eq '^ +7 +0 +31 +31 +4$' out.txt
ok "  ranks qk: MLA layer 3 rank 8" grep -Eq '^ +3 +0 +32 +8 +8$' out.txt
ok "  the checkpoint holds KDA's tensors" grep -q "model.layers.0.self_attn.f_b_proj.weight" "$T/kl/model.safetensors"
run -e "load $T/kl; ranks vo layer 2"
ok "ranks on a KDA layer refused" test "$(rc)" = 1
ok "  naming Kimi Delta Attention" has "$(cat err.txt)" "layer 2 of this kimi_linear model is a Kimi Delta Attention linear-attention layer"
run -e "load $T/kl; ppl ids ids.txt; ppl ids ids.txt"
ok "ppl runs the KDA layers" test "$(rc)" = 0
p2=$(awk '$1 ~ /^[0-9]+$/ && NF == 3 {print $2}' out.txt)
ok "  twice the same: the KDA state starts at zero each time ($(echo $p2))" test "$(echo "$p2" | sort -u | wc -l)" = 1
# the MLA layers' evaluator (truncate, ppl of the working copy) applies no RoPE either: a lossless truncation keeps
# the perplexity; a lossy one's export, loaded, gives the session's
run -e "load $T/kl; truncate vo layers 3-3 tau 0.9999; ppl ids ids.txt; truncate vo layers 7-7 tau 0.99; ppl ids ids.txt; export $T/klx; load $T/klx; ppl ids ids.txt"
ok "truncate + export of kimi_linear" test "$(rc)" = 0
set -- $(awk '$1 ~ /^[0-9]+$/ && NF == 3 {print $2}' out.txt)
ok "  a lossless truncation of MLA layer 3 keeps the perplexity ($1 = ${p2%%$'\n'*})" test "$1" = "${p2%%$'\n'*}"
ok "  the export of layer 7's gives the session's ($2 = $3)" test -n "$3" -a "$2" = "$3"

run -e "lint $T/kl"
out=$(cat out.txt)
ok "lint: vLLM loads it" has "$out" "vLLM          KimiLinearForCausalLM  loads"
ok "  every KDA tensor placed, A_log as (1, 1, H, 1)" hasnt "$out" "self_attn"
# an A_log stored flat ([H], as Qwen3-Next's) is not KimiDeltaAttention's parameter: lint names it
mkdir -p "$T/kla" && cp "$T/kl/config.json" "$T/kla/"
PYTHONPATH="$ATTNLAB_SRC/tests" python3 -c "
import sys; from st_tensors import tensors, write_tensors
t = tensors(sys.argv[1]); n = 'model.layers.0.self_attn.A_log'; dt, sh, data = t[n]; t[n] = (dt, [sh[2]], data)
write_tensors(sys.argv[2] + '/model.safetensors', sorted(t.items()))" "$T/kl" "$T/kla"
run -e "lint $T/kla"
ok "lint: a flat A_log is a shape error" grep -qF "model.layers.0.self_attn.A_log is [4]; config.json says [1, 1, 4, 1]" out.txt
cli_done
