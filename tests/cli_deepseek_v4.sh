#!/bin/bash
# cli_deepseek_v4.sh -- DeepSeek-V4 (model_type deepseek_v4): the config.json of deepseek-ai/DeepSeek-V4-Flash,
# every key as released, is read and described -- each layer's attention kind from compress_ratios (0: the
# sliding window only, 4: CSA with the indexer's top-k, 128: HCA), the one KV head of 512, the grouped
# low-rank output, hyper-connections, the hash-routed layers -- and `load` is refused naming what is not
# built (core/model/dsv4.c). Malformed V4 keys are refused naming the field. Before the row, the model_type
# was unknown.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-deepseek-v4
cd "$T" || exit 1

# v4 DIR [PYTHON]: DeepSeek-V4-Flash's config.json into DIR/config.json, PYTHON then applied to the dict c
v4() {
    mkdir -p "$1"
    python3 - "$1" "${2:-}" <<'PY'
import json, sys
c = {"architectures": ["DeepseekV4ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
     "bos_token_id": 0, "eos_token_id": 1, "expert_dtype": "fp4", "hc_eps": 1e-6, "hc_mult": 4,
     "hc_sinkhorn_iters": 20, "head_dim": 512, "hidden_act": "silu", "hidden_size": 4096, "index_head_dim": 128,
     "index_n_heads": 64, "index_topk": 512, "initializer_range": 0.02, "max_position_embeddings": 1048576,
     "model_type": "deepseek_v4", "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
     "norm_topk_prob": True, "num_attention_heads": 64, "num_experts_per_tok": 6, "num_hidden_layers": 43,
     "num_hash_layers": 3, "num_key_value_heads": 1, "num_nextn_predict_layers": 1, "o_groups": 8,
     "o_lora_rank": 1024, "q_lora_rank": 1024, "qk_rope_head_dim": 64,
     "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                             "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
     "rms_norm_eps": 1e-6, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16,
                                            "original_max_position_embeddings": 65536, "type": "yarn"},
     "rope_theta": 10000, "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus", "sliding_window": 128,
     "swiglu_limit": 10.0, "tie_word_embeddings": False, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
     "transformers_version": "4.57.1", "use_cache": True, "vocab_size": 129280, "compress_rope_theta": 160000,
     "compress_ratios": [0, 0] + [4, 128] * 20 + [4, 0]}
exec(sys.argv[2])
json.dump(c, open(sys.argv[1] + '/config.json', 'w'), indent=2)
PY
}

v4 flash
run -e "load flash"
ok "load of DeepSeek-V4-Flash refused" test "$(rc)" = 1
m=$(cat err.txt)
has "$m" "deepseek_v4 (DeepSeek-V4): 43 layers (+1 MTP)" || fail "layers and the MTP entry [$m]"
has "$m" "64 heads of 512 over 1 KV head (key = value, RoPE on its last 64, a sink per head)" || fail "heads [$m]"
has "$m" "q_lora 1024, output 8 groups x o_lora 1024" || fail "grouped low-rank output [$m]"
has "$m" "window 128 only: 2 layers (0, 1)" || fail "window layers [$m]"
has "$m" "CSA (window + 4:1 compressed KV, indexer top-512 of 64 x 128): 21 (2-42 every 2)" || fail "CSA layers [$m]"
has "$m" "HCA (window + 128:1 compressed): 20 (3-41 every 2)" || fail "HCA layers [$m]"
has "$m" "hyper-connections x4, 3 hash-routed layers" || fail "hc / hash [$m]"
has "$m" "Not built: its layer (attn.wq_a / wkv / wo_a / wo_b, compressor, indexer), hyper-connections (hc_\*): load refused" \
    || fail "what is not built [$m]"
hasnt "$m" "not a family attnlab knows" || fail "deepseek_v4 unknown [$m]"

# another layout of layers: the HCA ratios listed, the window layers listed
v4 mixed 'c["num_hidden_layers"] = 5; c["compress_ratios"] = [0, 4, 8, 0, 128]; c["num_nextn_predict_layers"] = 0'
run -e "load mixed"
m=$(cat err.txt)
has "$m" "5 layers (+0 MTP)" || fail "mixed: layers [$m]"
has "$m" "window 128 only: 2 layers (0, 3)" || fail "mixed: window [$m]"
has "$m" "CSA (window + 4:1 compressed KV, indexer top-512 of 64 x 128): 1 (1)" || fail "mixed: CSA [$m]"
has "$m" "HCA (window + 8, 128:1 compressed): 2 (2, 4)" || fail "mixed: HCA [$m]"

# malformed keys, each named
v4 short 'c["compress_ratios"] = c["compress_ratios"][:40]'
run -e "load short"
has "$(cat err.txt)" "compress_ratios must list one ratio per layer (num_hidden_layers 43" || fail "short list [$(cat err.txt)]"
v4 neg 'c["compress_ratios"][7] = -4'
run -e "load neg"
has "$(cat err.txt)" "compress_ratios\[7\] must be a whole number >= 0" || fail "negative ratio [$(cat err.txt)]"
v4 groups 'c["o_groups"] = 6'
run -e "load groups"
has "$(cat err.txt)" "o_groups (6) must divide num_attention_heads (64)" || fail "o_groups [$(cat err.txt)]"
v4 nolora 'del c["o_lora_rank"]; c["q_lora_rank"] = 1.5'
run -e "load nolora"
has "$(cat err.txt)" "deepseek_v4: q_lora_rank, o_lora_rank: each must be a whole number" || fail "lora keys [$(cat err.txt)]"

run -e "help load"
has "$(cat out.txt)" "^  deepseek_v4 " || fail "help load lists deepseek_v4 [$(cat out.txt)]"
cli_done
