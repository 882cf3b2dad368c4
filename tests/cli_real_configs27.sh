#!/bin/bash
# cli_real_configs27.sh -- issue 27's rows on the config.json files of real releases: each family's
# synthetic checkpoint (the real tensor names) under the release's own config.json, with only the
# dims (hidden, heads, layers, vocab, MLP and expert widths, and the per-layer lists sized to the
# layers) replaced by the checkpoint's, every other key as released: MiMo-7B-Base, EXAONE-4.0-32B
# (layer_types and "LLLG", window 4096, llama3 x16 from 8192), MiniMax-M2 (rotary_dim 64 of 128 ->
# 16 of 32 by the same factor, quantization_config left out: the weights are F32), Ministral-3-8B's
# text_config (rope_parameters, llama_4_scaling_beta). `load` and `info` say what each release is,
# and `ppl` runs.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-real-configs27
cd "$T" || exit 1
cli_ids 40 ids.txt

# real FILE: the release's config.json (as released) written to DIR/config.json with DIR's dims
real() {
    python3 - "$1" "$2" <<'PY'
import json, sys
d, real = sys.argv[1], json.loads(sys.argv[2])
s = json.load(open(d + '/config.json'))
for k in ('hidden_size', 'num_attention_heads', 'num_key_value_heads', 'num_hidden_layers', 'vocab_size',
          'intermediate_size', 'head_dim', 'num_local_experts', 'num_experts_per_tok', 'max_window_layers'):
    if k in real and k in s: real[k] = s[k]
L = s['num_hidden_layers']
if 'layer_types' in real: real['layer_types'] = real['layer_types'][:L]
if 'attn_type_list' in real: real['attn_type_list'] = real['attn_type_list'][:L]
if 'rotary_dim' in real: real['rotary_dim'] = real['rotary_dim'] * s['head_dim'] // 128
real.pop('quantization_config', None)
json.dump(real, open(d + '/config.json', 'w'), indent=2)
PY
}

lt=$(python3 -c "print(', '.join('\"%s\"' % ('full_attention' if (i + 1) % 4 == 0 else 'sliding_attention') for i in range(64)))")
at=$(python3 -c "print(', '.join(['1'] * 62))")
declare -A CFG
CFG[mimo]='{"architectures": ["MiMoForCausalLM"], "attention_bias": true, "attention_dropout": 0.0, "auto_map": {"AutoConfig": "configuration_mimo.MiMoConfig", "AutoModel": "modeling_mimo.MiMoModel", "AutoModelForCausalLM": "modeling_mimo.MiMoForCausalLM"}, "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 32768, "max_window_layers": 36, "model_type": "mimo", "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8, "num_nextn_predict_layers": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 640000, "sliding_window": 32768, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true, "use_sliding_window": false, "vocab_size": 151680}'
CFG[exaone4]='{"architectures": ["Exaone4ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 361, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 27392, "layer_types": ['"$lt"'], "max_position_embeddings": 131072, "model_type": "exaone4", "num_attention_heads": 40, "num_hidden_layers": 64, "num_key_value_heads": 8, "pad_token_id": 0, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 16.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}, "rope_theta": 1000000, "sliding_window": 4096, "sliding_window_pattern": "LLLG", "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.54.0.dev0", "use_cache": true, "vocab_size": 102400}'
CFG[minimax_m2]='{"architectures": ["MiniMaxM2ForCausalLM"], "attn_type_list": ['"$at"'], "auto_map": {"AutoConfig": "configuration_minimax_m2.MiniMaxM2Config", "AutoModelForCausalLM": "modeling_minimax_m2.MiniMaxM2ForCausalLM"}, "head_dim": 128, "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 1536, "max_position_embeddings": 196608, "model_type": "minimax_m2", "mtp_transformer_layers": 1, "num_attention_heads": 48, "num_experts_per_tok": 8, "num_hidden_layers": 62, "num_key_value_heads": 8, "num_local_experts": 256, "num_mtp_modules": 3, "qk_norm_type": "per_layer", "quantization_config": {"activation_scheme": "dynamic", "fmt": "float8_e4m3fn", "quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]}, "rms_norm_eps": 1e-06, "rope_theta": 5000000, "rotary_dim": 64, "scoring_func": "sigmoid", "shared_intermediate_size": 0, "tie_word_embeddings": false, "transformers_version": "4.46.1", "use_cache": true, "use_mtp": true, "use_qk_norm": true, "use_routing_bias": true, "vocab_size": 200064, "torch_dtype": "bfloat16"}'
CFG[ministral3]='{"architectures": ["Ministral3ForCausalLM"], "attention_dropout": 0.0, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 262144, "model_type": "ministral3", "num_attention_heads": 32, "num_hidden_layers": 34, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_parameters": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 16.0, "llama_4_scaling_beta": 0.1, "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 16384, "rope_theta": 1000000.0, "rope_type": "yarn", "type": "yarn"}, "sliding_window": null, "tie_word_embeddings": false, "use_cache": true, "vocab_size": 131072}'

for fam in mimo exaone4 minimax_m2 ministral3; do
    d=$T/$fam
    run -e "synth family $fam $d"
    ok "synth family $fam" test "$(rc)" = 0
    real "$d" "${CFG[$fam]}"
    ok "  $fam: the release's config.json written" grep -q '"model_type": "'$fam'"' "$d/config.json"
    run -e "load $d; info"
    ok "  $fam: load and info run" test "$(rc)" = 0
    cp out.txt "info_$fam.txt"
    has "$(cat out.txt)" "^family  *$fam$" || fail "$fam: family [$(cat out.txt)]"
    run -e "load $d; ppl ids ids.txt seqlen 40"
    ok "  $fam: ppl runs" test "$(rc)" = 0
done

i=$(cat info_mimo.txt)
has "$i" "^rope_theta  *640000$" || fail "mimo: theta [$i]"
has "$i" "^qkv_bias  *true$" || fail "mimo: q/k/v biases [$i]"
has "$i" "^sliding_window  *0$" || fail "mimo: no window (use_sliding_window false) [$i]"
has "$i" "^mtp_layers  *1 skipped" || fail "mimo: its MTP layer [$i]"

i=$(cat info_exaone4.txt)
has "$i" "^sliding_window  *4096$" || fail "exaone4: window 4096 [$i]"
has "$i" "^nope_layers  *3$" || fail "exaone4: layer 3 (full) without RoPE [$i]"
has "$i" "^rope_scaling  *llama3$" || fail "exaone4: llama3 [$i]"
has "$i" "^rope_scaling_factor  *16$" || fail "exaone4: x16 [$i]"
has "$i" "^qk_norm  *per head$" || fail "exaone4: q/k norms [$i]"

i=$(cat info_minimax_m2.txt)
has "$i" "^rotary_dims  *16$" || fail "minimax_m2: rotary_dim 64 of 128 -> 16 of 32 [$i]"
has "$i" "^qk_norm  *whole projection$" || fail "minimax_m2: q/k norm per layer [$i]"
has "$i" "^routed_experts  *8$" || fail "minimax_m2: experts [$i]"
has "$i" "^rope_theta  *5e+06$\|^rope_theta  *5000000$" || fail "minimax_m2: theta [$i]"

i=$(cat info_ministral3.txt)
has "$i" "^rope_theta  *1000000$" || fail "ministral3: theta from rope_parameters [$i]"
has "$i" "^rope_scaling  *yarn$" || fail "ministral3: YaRN from rope_parameters [$i]"
has "$i" "^rope_scaling_factor  *16$" || fail "ministral3: x16 [$i]"
has "$i" "^q_scaling  *1 + 0.1 ln(1 + floor(p / 16384))" || fail "ministral3: q scaling past 16384 [$i]"
has "$i" "^sliding_window  *0$" || fail "ministral3: no window [$i]"
cli_done
