#!/bin/bash
# cli_llama4.sh -- Llama 4 through `attnlab -e`: `synth family llama4_text` (Scout's text_config shrunk:
# chunk 8, floor_scale 4, 4 experts top-1 with a shared expert on every layer) and `synth family llama4` (Maverick's
# Llama4ForConditionalGeneration shrunk: MoE on every 2nd layer, no q/k norm, no rope_scaling; tensors under
# language_model.model., a vision tower attnlab leaves alone). `info` says what each layer does (chunks on the RoPE
# layers, the NoPE layer's temperature and exact QK, the L2 q/k norm, the MoE layers and the input-side router
# weight, the text tower); `ranks vo` / `ranks qk layer 3` find the planted ranks; `kv-cache` says what the chunked
# layers keep; a truncation's `ppl` in the session equals its export's; the experts split one Linear per expert
# (quantized releases' layout) give the same NLL; `ppl` gives the NLL test_families checks
# against the float64 reference, and the NLL changes with each feature switched off in config.json
# (attention_chunk_size null, attn_temperature_tuning false, use_qk_norm false, no NoPE layer). Then the release
# configs: Scout's text keys as a Llama4ForCausalLM fine-tune's config.json and Maverick's config.json, each with
# only the dims set to the synthetic checkpoint's, load with the right info.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-llama4
cd "$T" || exit 1
d=$T/l4
cli_ids 40 ids.txt

run -e "synth family llama4_text $d"
ok "synth family llama4_text runs" test "$(rc)" = 0
ok "  config.json: attention_chunk_size 8" grep -Eq '"attention_chunk_size":[[:space:]]*8,' "$d/config.json"

run -e "load $d; info"
ok "info runs" test "$(rc)" = 0
i=$(cat out.txt)
has "$i" "^family  *llama4$" || fail "info: family [$i]"
has "$i" "^rope_layout  *interleaved$" || fail "info: complex RoPE on adjacent pairs [$i]"
has "$i" "^nope_layers  *3$" || fail "info: layer 3 NoPE [$i]"
has "$i" "^chunked_attention  *layers 0, 1, 2 (RoPE) attend within chunks of 8 tokens" || fail "info: chunks [$i]"
has "$i" "^qk_l2_norm  *use_qk_norm" || fail "info: L2 q/k norm [$i]"
has "$i" "^attn_temperature  *q on NoPE layers 3 times 1 + 0.1 ln(1 + floor((p + 1) / 4))" || fail "info: temperature [$i]"
has "$i" "^nope_qk  *layers 3 rotate nothing: W_Q W_Kᵀ is the exact score map of the whole head" || fail "info: nope_qk [$i]"
has "$i" "^moe_layers  *MoE on layers 0, 1, 2, 3 (4 experts of 64, top-1: sigmoid(logit) scales the chosen expert's INPUT; a shared expert of 64" ||
    fail "info: MoE layers [$i]"
has "$i" "^ranks qk  *yes: layer 3 applies no RoPE and no q/k norm: W_Q W_Kᵀ is exact there" || fail "info: ranks qk [$i]"
has "$i" "^kvsvd  *no: .*chunked attention" || fail "info: kvsvd refused [$i]"
has "$i" "^compare  *no: .*chunked attention" || fail "info: compare refused [$i]"

run -e "load $d; ranks vo; ranks qk layer 3"
ok "ranks vo / ranks qk layer 3 run" test "$(rc)" = 0
for h in 0 1; do grep -Eq "^ +1 +$h +6 +32 +6$" out.txt || fail "layer 1 head $h not 6 / 32 / 6: [$(cat out.txt)]"; done
grep -Eq "^ +2 +3 +31 +31 +4$" out.txt || fail "layer 2 head 3 not 31 / 31 / 4: [$(cat out.txt)]"
for h in 0 3; do grep -Eq "^ +3 +$h +32 +8 +8$" out.txt || fail "QK layer 3 head $h not 32 / 8 / 8: [$(cat out.txt)]"; done

run -e "load $d; kv-cache"
ok "kv-cache runs" test "$(rc)" = 0
has "$(cat out.txt)" "3 of its 4 layers attend within chunks of 8 tokens: their cache holds at most the current chunk, 1024 values per layer" ||
    fail "kv-cache: the chunked layers' cache [$(cat out.txt)]"

nll() { awk '$1 == 39 { print $2 }' out.txt; }
run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl runs" test "$(rc)" = 0
awk '$1 == 39 { ok = ($2 > 5.99375 && $2 < 5.99385) } END { exit !ok }' out.txt || fail "ppl: NLL not 5.9938 [$(cat out.txt)]"
# each feature switched off in config.json: the NLL moves off 5.9938
for edit in 's/"attention_chunk_size":[[:space:]]*8,/"attention_chunk_size": null,/' \
            's/"attn_temperature_tuning":[[:space:]]*true/"attn_temperature_tuning": false/' \
            's/"use_qk_norm":[[:space:]]*true/"use_qk_norm": false/' \
            's/"no_rope_layers":[[:space:]]*\[1, 1, 1, 0\]/"no_rope_layers": [1, 1, 1, 1]/'; do
    rm -rf "$T/off"
    cp -r "$d" "$T/off"
    sed -i -E "$edit" "$T/off/config.json"
    cmp -s "$d/config.json" "$T/off/config.json" && fail "the edit $edit changed nothing"
    run -e "load $T/off; ppl ids ids.txt seqlen 40"
    ok "  ppl with $edit runs" test "$(rc)" = 0
    awk '$1 == 39 { ok = ($2 > 5.99375 && $2 < 5.99385) } END { exit ok }' out.txt ||
        fail "switched off ($edit): the NLL did not change [$(cat out.txt)]"
done

# a truncation runs its layers through the evaluator (chunks, L2 norm, temperature): the same NLL as its export
run -e "load $d; truncate vo tau 0.99; ppl ids ids.txt seqlen 40; export $T/tr"
ok "truncate, ppl, export run" test "$(rc)" = 0
a=$(nll)
run -e "load $T/tr; ppl ids ids.txt seqlen 40"
ok "the truncation's export: ppl runs" test "$(rc)" = 0
b=$(nll)
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(a != "" && d < 2e-5 && d > -2e-5 && (a < 5.99 || a > 6.0)) }' ||
    fail "truncation: session NLL $a, its export's $b (equal, and off the model's 5.9938)"

# the experts one Linear per expert (feed_forward.experts.E.{gate,up,down}_proj: transformers'
# SequentialLlama4TextExperts, as quantized releases store them): found by their names, the same NLL
python3 - "$(dirname "$0")" "$d" "$T/split" <<'PY'
import array, os, re, sys
sys.path.insert(0, sys.argv[1])
import st_tensors as st
src, dst = sys.argv[2], sys.argv[3]
st.copy_other_files(src, dst)
cfg = open(os.path.join(src, 'config.json')).read()
E, I = [int(re.search(r'"%s":\s*(\d+)' % k, cfg).group(1)) for k in ('num_local_experts', 'intermediate_size')]
items = []
for name, (dt, shape, data) in st.tensors(src).items():
    if not name.endswith(('experts.gate_up_proj', 'experts.down_proj')):
        items.append((name, (dt, shape, data)))
        continue
    v, base = array.array('f', data), name.rsplit('.', 1)[0]
    _, a, b = shape                                       # gate_up [E, D, 2I], down [E, I, D]: x @ W
    for e in range(E):
        blk = v[e * a * b:(e + 1) * a * b]
        t = lambda c0, n: array.array('f', [blk[r * b + c0 + c] for c in range(n) for r in range(a)]).tobytes()
        if name.endswith('gate_up_proj'):
            items.append(('%s.%d.gate_proj.weight' % (base, e), (dt, [I, a], t(0, I))))
            items.append(('%s.%d.up_proj.weight' % (base, e), (dt, [I, a], t(I, I))))
        else:
            items.append(('%s.%d.down_proj.weight' % (base, e), (dt, [b, a], t(0, b))))
st.write_tensors(os.path.join(dst, 'model.safetensors'), items)
PY
ok "the experts split per Linear" test -f "$T/split/model.safetensors"
run -e "load $T/split; ppl ids ids.txt seqlen 40"
ok "  split experts: ppl runs" test "$(rc)" = 0
awk '$1 == 39 { ok = ($2 > 5.99375 && $2 < 5.99385) } END { exit !ok }' out.txt || fail "split experts: NLL not 5.9938 [$(cat out.txt)]"
run -e "lint $T/split"
has "$(cat out.txt)" "feed_forward" && fail "lint: the split experts are not placed [$(cat out.txt)]"

# the multimodal Llama4ForConditionalGeneration (Maverick's layout): MoE on layers 1 and 3, the tower's names
m=$T/l4mm
run -e "synth family llama4 $m"
ok "synth family llama4 runs" test "$(rc)" = 0
run -e "load $m; info; ppl ids ids.txt seqlen 40"
ok "llama4: info and ppl run" test "$(rc)" = 0
i=$(cat out.txt)
has "$i" "^model_type  *llama4$" || fail "llama4: model_type [$i]"
has "$i" "^multimodal  *text tower of a multimodal checkpoint (text_config, tensors under language_model.model.); vision tower not loaded" ||
    fail "llama4: the tower [$i]"
has "$i" "^moe_layers  *MoE on layers 1, 3 .*dense (128) on 0, 2$" || fail "llama4: MoE every 2nd layer [$i]"
hasnt "$i" "^qk_l2_norm" || fail "llama4: use_qk_norm false [$i]"
awk '$1 == 39 { ok = ($2 > 6.1348 && $2 < 6.1350) } END { exit !ok }' out.txt || fail "llama4: NLL not 6.1349 [$i]"
run -e "lint $m"
has "$(cat out.txt)" "vision_model\|feed_forward" && fail "lint names the vision tower or the feed_forward tensors [$(cat out.txt)]"

# the releases' config.json files with the dims set to the synthetic checkpoints'
real() {
    python3 - "$1" "$2" <<'PY'
import json, sys
d, real = sys.argv[1], json.loads(sys.argv[2])
s = json.load(open(d + '/config.json'))
st, rt = s.get('text_config', s), real.get('text_config', real)
for k in ('hidden_size', 'num_attention_heads', 'num_key_value_heads', 'num_hidden_layers', 'vocab_size',
          'intermediate_size', 'intermediate_size_mlp', 'head_dim', 'num_local_experts'):
    rt[k] = st[k]
L = st['num_hidden_layers']
if 'no_rope_layers' in rt: rt['no_rope_layers'] = rt['no_rope_layers'][:L]
if 'moe_layers' in rt: rt['moe_layers'] = [i for i in rt['moe_layers'] if i < L]
json.dump(real, open(d + '/config.json', 'w'), indent=2)
PY
}
scout_text='"attention_bias": false, "attention_chunk_size": 8192, "attention_dropout": 0.0, "attn_scale": 0.1, "attn_temperature_tuning": 4, "bos_token_id": 200000, "cache_implementation": "hybrid", "eos_token_id": [200001, 200007, 200008], "floor_scale": 8192, "for_llm_compressor": false, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02, "interleave_moe_layer_step": 1, "intermediate_size": 8192, "intermediate_size_mlp": 16384, "max_position_embeddings": 262144, "model_type": "llama4_text", "moe_layers": ['$(seq -s ', ' 0 47)'], "no_rope_layers": ['$(for i in $(seq 1 12); do printf '1, 1, 1, 0%s' "$([ $i -lt 12 ] && echo ', ')"; done)'], "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 16, "output_router_logits": false, "pad_token_id": 200018, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 500000.0, "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0, "torch_dtype": "bfloat16", "use_cache": true, "use_qk_norm": true, "vocab_size": 202048'
real "$d" '{"architectures": ["Llama4ForCausalLM"], '"$scout_text"', "tie_word_embeddings": false, "transformers_version": "4.51.3"}'
run -e "load $d; info; ppl ids ids.txt seqlen 40"
ok "Scout's keys (Llama4ForCausalLM): info and ppl run" test "$(rc)" = 0
i=$(cat out.txt)
has "$i" "^chunked_attention  *layers 0, 1, 2 (RoPE) attend within chunks of 8192 tokens" || fail "Scout: chunks of 8192 [$i]"
has "$i" "^attn_temperature  *q on NoPE layers 3 times 1 + 0.1 ln(1 + floor((p + 1) / 8192))" || fail "Scout: temperature [$i]"
has "$i" "^rope_scaling_factor  *16$" || fail "Scout: llama3 x16 (low = high = 1) [$i]"
has "$i" "^ppl/calibrate  *yes" || fail "Scout: ppl available [$i]"
maverick='{"architectures": ["Llama4ForConditionalGeneration"], "boi_token_index": 200080, "eoi_token_index": 200081, "image_token_index": 200092, "model_type": "llama4", "text_config": {"attention_bias": false, "attention_chunk_size": 8192, "attention_dropout": 0.0, "bos_token_id": 200000, "eos_token_id": [200001, 200007, 200008], "for_llm_compressor": false, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02, "interleave_moe_layer_step": 2, "intermediate_size": 8192, "intermediate_size_mlp": 16384, "max_position_embeddings": 1048576, "model_type": "llama4_text", "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 128, "output_router_logits": false, "pad_token_id": 200018, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 500000.0, "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0, "torch_dtype": "bfloat16", "use_cache": true, "use_qk_norm": false, "vocab_size": 202048}, "torch_dtype": "bfloat16", "transformers_version": "4.51.0.dev0", "vision_config": {"attention_dropout": 0.0, "hidden_act": "gelu", "hidden_size": 1408, "image_size": 336, "initializer_range": 0.02, "intermediate_size": 5632, "model_type": "llama4_vision_model", "multi_modal_projector_bias": false, "norm_eps": 1e-05, "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 34, "patch_size": 14, "pixel_shuffle_ratio": 0.5, "projector_dropout": 0.0, "projector_input_dim": 4096, "projector_output_dim": 4096, "rope_theta": 10000, "vision_feature_layer": -1, "vision_feature_select_strategy": "default", "vision_output_dim": 4096}}'
real "$m" "$maverick"
run -e "load $m; info; ppl ids ids.txt seqlen 40"
ok "Maverick's config.json: info and ppl run" test "$(rc)" = 0
i=$(cat out.txt)
has "$i" "^moe_layers  *MoE on layers 1, 3 .*dense (128) on 0, 2$" || fail "Maverick: MoE every 2nd layer [$i]"
has "$i" "^nope_layers  *3$" || fail "Maverick: no_rope_layers absent -> layer 3 NoPE [$i]"
has "$i" "^attn_temperature  *q on NoPE layers 3 times 1 + 0.1 ln(1 + floor((p + 1) / 8192))" || fail "Maverick: default temperature [$i]"
hasnt "$i" "^qk_l2_norm" || fail "Maverick: no q/k norm [$i]"
has "$i" "^rope_scaling  *none$" || fail "Maverick: no rope_scaling [$i]"
cli_done
