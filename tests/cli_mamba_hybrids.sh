#!/bin/bash
# cli_mamba_hybrids.sh -- the Mamba-2 hybrids of issue 27 through `attnlab -e` on their synthetic checkpoints:
# nemotron_h (blocks "M*EM*-": Mamba-2, attention, MoE, relu2 MLP; tensors under backbone.) and granitemoehybrid
# (mamba / attention alternating, experts + shared MLP, mup multipliers, NoPE attention). `info` names the
# attention layers, the block pattern, the Mamba-2 dims and the multipliers and says which analyses run;
# `ranks vo` recovers the planted ranks on the attention layers and refuses a Mamba-2 layer and an MLP block
# by name; `kv-cache` counts the attention layers and says the Mamba-2 state is constant; `ppl` runs the
# Mamba-2 layers (its numbers: test_mamba2), and the same on a copy with D zeroed moves it; `lint` finds every tensor (no error but the absent tokenizer) and misses a
# removed D. Then each family under a real release's config.json (NVIDIA-Nemotron-3-Nano-30B-A3B, granite-4.0-h-tiny)
# with only the dims set to the checkpoint's: loads, `info` says what the release is, ppl is the same.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-mamba-hybrids
cd "$T" || exit 1

n=$T/nemotron_h
g=$T/granite
run -e "synth family nemotron_h $n"
ok "synth family nemotron_h" test "$(rc)" = 0
run -e "synth family granitemoehybrid $g"
ok "synth family granitemoehybrid" test "$(rc)" = 0

out=$(e "load $n; info")
ok "nemotron_h info: attention layers" has "$out" "attention_layers  *1, 4 (2 of 6; the other 2 are Mamba-2 (SSM) layers.*; 2 MLP / MoE blocks without a mixer)"
ok "nemotron_h info: block pattern" has "$out" "block_pattern  *M\*EM\*- (M Mamba-2, \* attention, - MLP, E MoE"
ok "nemotron_h info: the MoE block" has "$out" "routed_experts  *4"
ok "nemotron_h info: Mamba-2 dims" has "$out" "mamba2  *8 heads x 16, n_groups 2, ssm_state_size 16, conv kernel 4 with bias; its state is constant"
ok "nemotron_h info: no RoPE" has "$out" "attention_rope  *none (NoPE): QK fusion is exact on the whole head"
ok "nemotron_h info: ranks vo on the attention layers" has "$out" "ranks vo  *yes: on the softmax-attention layers (1, 4"
ok "nemotron_h info: ppl runs" has "$out" "ppl/calibrate  *yes"
ok "nemotron_h info: kvsvd refused (no keys in the Mamba-2 layers)" has "$out" "kvsvd  *no: .*the Mamba-2 layers have no keys or KV cache"
ok "nemotron_h info: 2 layers' KV params" has "$out" "attn_params_total  *49152"
ok "nemotron_h info: export formats: truncate, not tpa (its export refuses the Mamba-2 / MLP layers)" has "$out" "export formats  *yes: truncate (not: kvsvd, see their own lines) (not: mla: .*no export holds the other layers) (not: tpa: its format holds every layer as TPA attention, and 4 of the 6 layers are Mamba-2"
out=$(e "load $n; convert tpa kv-rank 2; export $T/n-tpa")
ok "  ... as the TPA export says" has "$out" "error: TPA export: layer 0 of .* is Mamba-2 (SSM) or MLP / MoE blocks without attention: the TPA format holds every layer as TPA attention"

out=$(e "load $g; info")
ok "granite info: attention layers" has "$out" "attention_layers  *1, 3 (2 of 4; the other 2 are Mamba-2 (SSM) layers"
ok "granite info: multipliers" has "$out" "multipliers  *embeddings x 12, softmax scale 0.0078125 (attention_multiplier), block outputs x 0.22, logits / 6"
ok "granite info: Mamba-2 dims" has "$out" "mamba2  *8 heads x 32, n_groups 1, ssm_state_size 16"
ok "granite info: experts" has "$out" "routed_experts  *4"
ok "granite info: softmax scale" has "$out" "softmax_scale  *0.0078125"

for d in "$n 4" "$g 3"; do
    set -- $d
    run -e "load $1; ranks vo layer 1"
    ok "$1: ranks vo layer 1 runs" test "$(rc)" = 0
    ok "$1: layer 1 head 0: V 6, O 32, VO 6 (planted)" grep -Eq "^ +1 +0 +6 +32 +6$" out.txt
    ok "$1: layer 1 head 2: flat 32" grep -Eq "^ +1 +2 +32 +32 +32$" out.txt
    run -e "load $1; ranks vo layer $2"
    ok "$1: layer $2 (fused-low): VO 4" grep -Eq "^ +$2 +0 +31 +31 +4$" out.txt
    run -e "load $1; spectrum vo layer 1 head 0"
    ok "$1: spectrum runs on an attention layer" test "$(rc)" = 0
    run -e "load $1; ranks qk layer 1"
    ok "$1: ranks qk runs on an attention layer" test "$(rc)" = 0
done

out=$(e "load $n; ranks vo layer 0")
ok "nemotron_h: a Mamba-2 layer refused by name" has "$out" "layer 0 of this nemotron_h model is a Mamba-2 (SSM) layer"
ok "... naming the attention layers" has "$out" "its softmax-attention layers are 1, 4"
out=$(e "load $n; ranks vo layer 5")
ok "nemotron_h: an MLP block refused by name" has "$out" "layer 5 of this nemotron_h model is an MLP block (hybrid_override_pattern '-'"
out=$(e "load $n; ranks vo layer 2")
ok "nemotron_h: an MoE block refused by name" has "$out" "layer 2 of this nemotron_h model is an MoE block (hybrid_override_pattern 'E'"
out=$(e "load $g; spectrum vo layer 2 head 0")
ok "granite: a Mamba-2 layer refused by name" has "$out" "layer 2 of this granitemoehybrid model is a Mamba-2 (SSM) layer"

out=$(e "load $n; kv-cache")
ok "nemotron_h kv-cache: the attention layers only" has "$out" "1024 bytes per token in 2 layers; the Mamba-2 layers' state is constant per sequence"
out=$(e "load $g; kv-cache")
ok "granite kv-cache: the attention layers only" has "$out" "1024 bytes per token in 2 layers; the Mamba-2 layers' state is constant per sequence"

for id in 1 2 3 4 5 6 7 8; do echo $id; done | tr '\n' ' ' > ids.txt
for d in "$n" "$g"; do
    run -e "load $d; ppl ids ids.txt"
    ok "$d: ppl runs" test "$(rc)" = 0
    cp out.txt "ppl_$(basename $d).txt"
    run -e "lint $d"
    ok "$d: lint: no finding but the tokenizer" grep -Eq "tensors in 1 file: 1 error, 1 warning, 0 advisories" out.txt
    ok "$d: lint: the error is the tokenizer" grep -q "1. error    llama.cpp: no tokenizer files" out.txt
done

# a Mamba-2 layer without its D: lint names it missing (the rule of the layout)
python3 - "$n" "$T/nd" <<'PY'
import json, os, shutil, struct, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
shutil.copy(src + '/config.json', dst + '/config.json')
raw = open(src + '/model.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
h = json.loads(raw[8:8 + n])
data = raw[8 + n:]
h.pop('backbone.layers.3.mixer.D')
out, blob = {}, b''
for k, v in h.items():
    if k == '__metadata__': out[k] = v; continue
    a, b = v['data_offsets']
    out[k] = dict(v, data_offsets=[len(blob), len(blob) + b - a])
    blob += data[a:b]
hb = json.dumps(out).encode()
open(dst + '/model.safetensors', 'wb').write(struct.pack('<Q', len(hb)) + hb + blob)
PY
# the same with every D zeroed (Mamba-2's skip switched off in the weights): ppl moves
python3 - "$n" "$T/nz" <<'PY'
import json, os, shutil, struct, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
shutil.copy(src + '/config.json', dst + '/config.json')
raw = bytearray(open(src + '/model.safetensors', 'rb').read())
n = struct.unpack('<Q', raw[:8])[0]
h = json.loads(raw[8:8 + n])
for k, v in h.items():
    if k.endswith('.mixer.D'):
        a, b = v['data_offsets']
        raw[8 + n + a:8 + n + b] = bytes(b - a)
open(dst + '/model.safetensors', 'wb').write(raw)
PY
run -e "load $T/nz; ppl ids ids.txt"
ok "D zeroed: ppl runs" test "$(rc)" = 0
ok "D zeroed: ppl moves" test "$(tail -1 out.txt)" != "$(tail -1 ppl_nemotron_h.txt)"
# biased Mamba-2 projections (use_bias true): the forward pass refuses them by name
mkdir -p "$T/nb" && cp "$n/model.safetensors" "$T/nb/"
python3 -c "import json, sys; c = json.load(open(sys.argv[1])); c['use_bias'] = True; json.dump(c, open(sys.argv[2], 'w'))" \
    "$n/config.json" "$T/nb/config.json"
run -e "load $T/nb; ppl ids ids.txt"
ok "use_bias true: ppl refused naming the biases" grep -q "the Mamba-2 projections have biases" err.txt
run -e "lint $T/nd"
ok "lint: the removed D is missing" grep -q "backbone.layers.3.mixer.D" out.txt
run -e "load $T/nd"
ok "load: the removed D refused" grep -q "backbone.layers.3.mixer.D" err.txt

# real releases' config.json with the checkpoint's dims
real() {
    python3 - "$1" "$2" <<'PY'
import json, sys
d, real = sys.argv[1], json.loads(sys.argv[2])
s = json.load(open(d + '/config.json'))
for k in ('hidden_size', 'num_attention_heads', 'num_key_value_heads', 'num_hidden_layers', 'vocab_size',
          'intermediate_size', 'head_dim', 'hybrid_override_pattern', 'layer_types', 'mamba_num_heads',
          'mamba_head_dim', 'n_groups', 'ssm_state_size', 'mamba_n_heads', 'mamba_d_head', 'mamba_n_groups',
          'mamba_d_state', 'num_local_experts', 'num_experts_per_tok', 'shared_intermediate_size', 'n_routed_experts',
          'moe_intermediate_size', 'moe_shared_expert_intermediate_size'):
    if k in real and k in s: real[k] = s[k]
json.dump(real, open(d + '/config.json', 'w'), indent=2)
PY
}
NEMOTRON_3_NANO='{"architectures": ["NemotronHForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 1, "chunk_size": 128, "conv_kernel": 4, "eos_token_id": 2, "expand": 2, "head_dim": 128, "hidden_dropout": 0.0, "hidden_size": 2688, "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "initializer_range": 0.02, "intermediate_size": 1856, "layer_norm_epsilon": 1e-05, "mamba_head_dim": 64, "mamba_hidden_act": "silu", "mamba_num_heads": 64, "mamba_proj_bias": false, "mamba_ssm_cache_dtype": "float32", "max_position_embeddings": 262144, "mlp_bias": false, "mlp_hidden_act": "relu2", "model_type": "nemotron_h", "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712, "n_group": 1, "n_groups": 8, "n_routed_experts": 128, "n_shared_experts": 1, "norm_eps": 1e-05, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts_per_tok": 6, "num_hidden_layers": 52, "num_key_value_heads": 2, "num_logits_to_keep": 1, "pad_token_id": 0, "partial_rotary_factor": 1.0, "rescale_prenorm_residual": true, "residual_in_fp32": false, "rope_theta": 10000, "routed_scaling_factor": 2.5, "sliding_window": null, "ssm_state_size": 128, "tie_word_embeddings": false, "time_step_floor": 0.0001, "time_step_max": 0.1, "time_step_min": 0.001, "topk_group": 1, "torch_dtype": "bfloat16", "transformers_version": "4.55.4", "use_bias": false, "use_cache": true, "use_conv_bias": true, "use_mamba_kernels": true, "vocab_size": 131072}'
GRANITE_H_TINY='{"architectures": ["GraniteMoeHybridForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "attention_multiplier": 0.0078125, "embedding_multiplier": 12, "hidden_act": "silu", "hidden_size": 1536, "intermediate_size": 512, "layer_types": ["mamba", "attention"], "logits_scaling": 6, "mamba_chunk_size": 256, "mamba_conv_bias": true, "mamba_d_conv": 4, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_expand": 2, "mamba_n_groups": 1, "mamba_n_heads": 48, "mamba_proj_bias": false, "max_position_embeddings": 131072, "model_type": "granitemoehybrid", "normalization_function": "rmsnorm", "num_attention_heads": 12, "num_experts_per_tok": 6, "num_hidden_layers": 40, "num_key_value_heads": 4, "num_local_experts": 64, "position_embedding_type": "nope", "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000, "shared_intermediate_size": 1024, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 100352}'
real "$n" "$NEMOTRON_3_NANO"
real "$g" "$GRANITE_H_TINY"
out=$(e "load $n; info")
ok "Nemotron 3 Nano's config: loads" has "$out" "^family  *nemotron_h$"
ok "... its eps (layer_norm_epsilon), relu2, no RoPE" has "$out" "^activation  *relu2$"
ok "... the attention layers" has "$out" "attention_layers  *1, 4 (2 of 6"
ok "... untied" has "$out" "^tie_embeddings  *false$"
run -e "load $n; ppl ids ids.txt"
ok "... ppl as under the recipe's config" test "$(tail -1 out.txt)" = "$(tail -1 ppl_nemotron_h.txt)"
out=$(e "load $g; info")
ok "granite-4.0-h-tiny's config: loads" has "$out" "^family  *granitemoehybrid$"
ok "... its multipliers" has "$out" "multipliers  *embeddings x 12, softmax scale 0.0078125 (attention_multiplier), block outputs x 0.22, logits / 6"
ok "... NoPE" has "$out" "^rope_layout  *none$"
ok "... tied" has "$out" "^tie_embeddings  *true$"
run -e "load $g; ranks vo layer 1"
ok "granite under its release's config: planted VO 6" grep -Eq "^ +1 +0 +6 +32 +6$" out.txt

cli_done
