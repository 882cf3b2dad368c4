#!/bin/bash
# cli_qwen3_next.sh -- Qwen3-Next (issue 27) through `attnlab -e` on its synthetic checkpoint (3 Gated
# DeltaNet layers, then one gated attention layer): `info` names the attention layers, the linear
# layers' dims and the output gate; `kv-cache` and `truncate` count the one layer with a KV cache;
# `ranks vo layer 0` refuses a linear layer by name and recovers the planted ranks of layer 3 (KV head 0:
# V and VO rank 6); kvsvd says why not, compare runs (its rows the gate stops say so); `ppl` runs the recurrence; `lint` expects the
# linear layers' tensors and finds a missing one (a renamed dt_bias: missing, and unknown).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-qwen3-next
cd "$T" || exit 1
d=$T/qn
run -e "synth family qwen3_next $d"
ok "synth family qwen3_next" test "$(rc)" = 0

out=$(e "load $d; info")
ok "info: attention layers" has "$out" "attention_layers  *3 (1 of 4; the other 3 are Gated DeltaNet linear attention"
ok "info: linear dims" has "$out" "linear_attention  *2 key heads x 16, 4 value heads x 16, conv kernel 4"
ok "info: the gate" has "$out" "attn_output_gate  *yes: q_proj per head \[query | gate\]"
ok "info: the gate's V-O map" has "$out" "W_V diag(sigmoid(x W_gate)) W_O"
ok "info: params of the one attention layer (q_proj 2 x 128 rows)" has "$out" "attn_params_total  *32768"
ok "info: KV bytes of one layer" has "$out" "kv_bytes_per_token  *512$"
ok "info: kvsvd refused" has "$out" "kvsvd  *no: .*no keys or KV cache"
ok "  naming its one attention layer (only layer 3 has, not 'only layers 3 have')" has "$out" "no keys or KV cache (only layer 3 has): kvsvd"
ok "info: compare runs (the gate: the rows of the methods it does not pass say so; cli_compare_na.sh)" has "$out" "^compare  *yes"

out=$(e "load $d; kv-cache")
ok "kv-cache: one layer" has "$out" "512 bytes per token in 1 layer"

out=$(e "load $d; ranks vo layer 0")
ok "ranks vo of a linear layer refused by name" has "$out" "layer 0 of this qwen3_next model is a Gated DeltaNet"
ok "... naming the attention layers" has "$out" "its softmax-attention layers are 3"
run -e "load $d; ranks vo layer 3"
ok "ranks vo layer 3 runs" test "$(rc)" = 0
ok "layer 3 head 0: V 6, O 32, VO 6 (planted)" grep -Eq "^ +3 +0 +6 +32 +6$" out.txt
ok "layer 3 head 2: flat 32" grep -Eq "^ +3 +2 +32 +32 +32$" out.txt

out=$(e "load $d; truncate vo layers 3-3 tau 0.99")
# KV head 0's V keeps 6 of 32 dims: 64 K + 6 + 32 V = 102 values of 128, in the 1 layer with a cache
ok "truncate: the mean over the 1 layer with a cache" has "$out" "mean over the 1 layer): 128 -> 102 values (79.7%); whole model 512 -> 408"

cli_ids 40 ids.txt
run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl runs" test "$(rc)" = 0
ok "ppl finite and plausible for vocab 256" awk '$1 == 39 { ok = ($2 > 1 && $2 < 20 && $3 > 1) } END { exit !ok }' out.txt
# the truncation's export (v_proj / o_proj of layer 3 rewritten, the rest copied) loads and runs; the session
# runs it too (the one-layer evaluator applies the output gate: cli_gemma4_eval checks the two equal)
out=$(e "load $d; truncate vo layers 3-3 tau 0.99; export $T/tr; ppl ids ids.txt seqlen 40")
ok "truncate's export written" has "$out" "2 rewritten"
ok "ppl of the truncation runs in the session" hasnt "$out" "^error"
ok "truncate says the session measures the working copy" has "$out" "\`ppl\`, \`generate\` and \`check\` measure it"
run -e "load $d; check $T/tr"
ok "check of the export: runs to the end (it stopped with an error after PASS)" test "$(rc)" = 0
ok "  its fused maps pass" grep -q "^PASS: the export's fused maps are the plan's" out.txt
ok "  the per-layer table of layer 3" grep -Eq "^ +3 +[0-9.e-]+ +[0-9.e-]+$" out.txt
run -e "load $T/tr; ppl ids ids.txt seqlen 40"
p1=$(awk '$1 == 39 {print $3}' out.txt)
run -e "load $d; ppl ids ids.txt seqlen 40"
p0=$(awk '$1 == 39 {print $3}' out.txt)
ok "the export's ppl within 3% of the model's (tau 0.99; $p1, $p0)" awk -v a="$p1" -v b="$p0" 'BEGIN { exit !(a > 0 && b > 0 && a / b < 1.03 && b / a < 1.03 && a != b) }'

out=$(e "lint $d")
ok "lint: transformers loads every tensor" has "$out" "transformers  Qwen3NextForCausalLM  loads"
ok "lint: vLLM loads it" has "$out" "vLLM          Qwen3NextForCausalLM  loads"
python3 - "$d" "$T/broken" <<'PY' || fail "could not drop a tensor"
import json, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
raw = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
hdr["model.layers.1.linear_attn.dt_bias_x"] = hdr.pop("model.layers.1.linear_attn.dt_bias")   # renamed: missing
h = json.dumps(hdr).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(os.path.join(dst, "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
open(os.path.join(dst, "config.json"), "w").write(open(os.path.join(src, "config.json")).read())
PY
out=$(e "lint $T/broken")
ok "lint: a missing linear-attention tensor is found" has "$out" "missing model.layers.1.linear_attn.dt_bias"
out=$(e "load $T/broken")
ok "load: a missing linear-attention tensor is an error" has "$out" "model.layers.1.linear_attn.dt_bias"
# Qwen3.5 (its text tower: split linear projections, rope_parameters) and Qwen3.5-MoE
for fam in qwen3_5 qwen3_5_moe; do
    run -e "synth family $fam $T/$fam"
    ok "synth family $fam" test "$(rc)" = 0
    ok "$fam: the split projections under model.language_model." grep -q "model.language_model.layers.0.linear_attn.in_proj_qkv.weight" "$T/$fam/model.safetensors"
    run -e "load $T/$fam; ranks vo layer 3"
    ok "$fam: layer 3 head 0: V 6, O 32, VO 6" grep -Eq "^ +3 +0 +6 +32 +6$" out.txt
    run -e "load $T/$fam; ppl ids ids.txt seqlen 40"
    ok "$fam: ppl plausible" awk '$1 == 39 { ok = ($2 > 1 && $2 < 20 && $3 > 1) } END { exit !ok }' out.txt
done
out=$(e "load $T/qwen3_5; info")
ok "qwen3_5: info names the tower and rope_parameters' theta" has "$out" "rope_theta  *10000000"
ok "qwen3_5: the MTP layers are not read" has "$out" "MTP layers (mtp.\*) are not read"
# Qwen3.5 / 3.6 MoE checkpoints keep each layer's experts fused (mlp.experts.gate_up_proj [E, 2I, D] with
# rows [gate ; up] per expert, mlp.experts.down_proj [E, D, I]): the recipe writes them so, ppl ran above
python3 - "$T/qwen3_5_moe/model.safetensors" <<'PY' || fail "qwen3_5_moe: the fused experts are not [4, 128, 64] and [4, 64, 64]"
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); h = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
p = "model.language_model.layers.0.mlp.experts."
assert h[p + "gate_up_proj"]["shape"] == [4, 128, 64] and h[p + "down_proj"]["shape"] == [4, 64, 64], h.get(p + "gate_up_proj")
assert not any(".experts.0." in k for k in h)
PY
out=$(e "lint $T/qwen3_5_moe")
ok "qwen3_5_moe: lint expects the fused experts (transformers loads)" has "$out" "transformers  Qwen3_5MoeForConditionalGeneration  loads"
cli_done
