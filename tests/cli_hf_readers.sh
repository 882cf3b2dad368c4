#!/usr/bin/env bash
# cli_hf_readers.sh -- the three families where attnlab and transformers 5.17 computed different models on s12's GPU
# run (bench/README "Helper dvc (s12)"), settled from the readers' sources (bench/README "Helper hfx (s13)"), and
# kimi_linear's engines; checked without transformers:
#  - qwen3_vl_moe: the release stores gate_up_proj [E, D, 2I] and down_proj [E, I, D] used as x @ W (transformers
#    4.57, vLLM, llama.cpp's converter); transformers 5 transposes at load only where the stored shape is not its
#    own, so the recipe's old square experts (I = D = 64) were read untransposed there. The recipe's experts are
#    now 48 wide: a down_proj stored transposed is refused by its shape, halves swapped change the model, and lint
#    names a square expert tensor as transformers' misreading;
#  - glm_moe_dsa: GLM-5 rotates MLA's and the indexer's RoPE dims in interleaved pairs (its config.json's
#    rope_interleave / indexer_rope_interleave, vLLM, SGLang, llama.cpp, transformers since PR #46372); the recipe
#    writes both keys, the indexer's layout is read from the key, the "shared" layer carries no indexer weights;
#  - minimax_m2: rotary_dim (the release's key) and a partial_rotary_factor beside it must agree (else refused,
#    naming both); lint says transformers 5.17 reads no rotary_dim;
#  - kimi_linear: transformers 5 has KimiLinearForCausalLM: lint's verdict for it is "loads".
set -u
. "$(dirname "$0")/lib_cli.sh"
PY=$(cd "$(dirname "$0")" && pwd)/qwen3vl_experts.py
cli_setup /tmp/attnlab-cli-hf-readers shared-cache
cli_ids 40 ids.txt
nll() { awk '$1 == 39 {print $2}' out.txt; }
# config_set DIR PYTHON: edits DIR/config.json (c: the parsed object) in place
config_set() { python3 -c 'import json, sys; p = sys.argv[1] + "/config.json"; c = json.load(open(p)); exec(sys.argv[2]); json.dump(c, open(p, "w"), indent=1)' "$1" "$2"; }

# ---------------------------------------------------------------- qwen3_vl_moe
run -e "synth family qwen3_vl_moe q3"
ok "synth family qwen3_vl_moe runs" test "$(rc)" = 0
ok "  moe_intermediate_size 48, hidden_size 64 (no expert tensor square)" python3 -c 'import json, sys
t = json.load(open("q3/config.json"))["text_config"]
sys.exit(not (t["moe_intermediate_size"] == 48 and t["hidden_size"] == 64))'
run -e "load q3; ppl ids ids.txt seqlen 40"
ok "ppl of the recipe runs" test "$(rc)" = 0
base=$(nll)
python3 "$PY" q3 q3_dn transpose-down
run -e "load q3_dn; ppl ids ids.txt seqlen 40"
ok "down_proj stored transposed ([E, D, I]) is refused" test "$(rc)" = 1
ok "  by its shape" grep -Eq "down_proj.*(\[4, 64, 48\]|should have shape \[4, 48, 64\]|is not \[4, 48, 64\])" err.txt
python3 "$PY" q3 q3_sw swap-halves
run -e "load q3_sw; ppl ids ids.txt seqlen 40"
ok "gate / up halves swapped load" test "$(rc)" = 0
[ "$(nll)" != "$base" ] && pass=$((pass + 1)) || fail "gate / up halves swapped: the same NLL $base (the halves are not told apart)"
run -e "lint q3"
hasnt "$(cat out.txt)" "square" && pass=$((pass + 1)) || fail "lint of the recipe names a square expert: [$(cat out.txt)]"
python3 "$PY" q3 q3_sq square
run -e "load q3_sq; ppl ids ids.txt seqlen 40"
ok "square experts (I = D) load" test "$(rc)" = 0
run -e "lint q3_sq"
ok "lint of square experts names transformers' misreading" grep -q \
    "makes model.language_model.layers.0.mlp.experts.down_proj (and its like on every MoE layer) square: transformers 5" out.txt
ok "  transformers' verdict: a different model" grep -Eq "^transformers .*loads, but computes a different model" out.txt

# ---------------------------------------------------------------- glm_moe_dsa
run -e "synth family glm_moe_dsa glm"
ok "synth family glm_moe_dsa runs" test "$(rc)" = 0
ok "  config.json: rope_interleave true" grep -Eq '"rope_interleave":[[:space:]]*true' glm/config.json
ok "  config.json: indexer_rope_interleave true" grep -Eq '"indexer_rope_interleave":[[:space:]]*true' glm/config.json
ok "  the shared layer 1 carries no indexer weights" bash -c "! grep -aq 'model.layers.1.self_attn.indexer' glm/model.safetensors"
ok "  layers 0 and 2 do" grep -aq 'model.layers.2.self_attn.indexer.wq_b' glm/model.safetensors
has "$(e "load glm; info")" "^rope_layout  *interleaved$" || fail "glm_moe_dsa: MLA RoPE interleaved"
run -e "load glm; ppl ids ids.txt seqlen 40"
ok "ppl past index_topk runs" test "$(rc)" = 0
ok "  with the selection" grep -q "positions 8.. attend to the indexer's 8 selected keys" err.txt
g=$(nll)
cp -r glm glm_half && config_set glm_half 'c["indexer_rope_interleave"] = False'
run -e "load glm_half; ppl ids ids.txt seqlen 40"
ok "indexer_rope_interleave false loads" test "$(rc)" = 0
[ -n "$g" ] && [ "$(nll)" != "$g" ] && pass=$((pass + 1)) \
    || fail "indexer_rope_interleave false: the same NLL $g (the indexer's RoPE layout is not read)"
cp -r glm glm_mla_half && config_set glm_mla_half 'c["rope_interleave"] = False'
has "$(e "load glm_mla_half; info")" "^rope_layout  *rotate_half$" || fail "glm_moe_dsa: rope_interleave false read"
run -e "lint glm"
ok "lint of GLM-5: transformers' first GlmMoeDsa rotated by rotate_half" grep -q "transformers before PR #46372" out.txt

# ---------------------------------------------------------------- minimax_m2
run -e "synth family minimax_m2 mm"
ok "synth family minimax_m2 runs" test "$(rc)" = 0
run -e "load mm; ppl ids ids.txt seqlen 40"
m=$(nll)
cp -r mm mm_same && config_set mm_same 'c["partial_rotary_factor"] = c["rotary_dim"] / c["head_dim"]'
run -e "load mm_same; ppl ids ids.txt seqlen 40"
ok "rotary_dim with an agreeing partial_rotary_factor loads" test "$(rc)" = 0
ok "  the same model (NLL $m)" test "$(nll)" = "$m"
cp -r mm mm_diff && config_set mm_diff 'c["partial_rotary_factor"] = 0.25'
run -e "load mm_diff"
ok "rotary_dim 16 and partial_rotary_factor 0.25 (8 dims) are refused" test "$(rc)" = 1
ok "  naming both" grep -q "rotary_dim = 16 and partial_rotary_factor = 0.25 name different rotary dims (16 and 8 of head_dim 32" err.txt
cp -r mm mm_rp && config_set mm_rp 'c["rope_parameters"] = {"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 1.0}'
run -e "load mm_rp"
ok "rotary_dim 16 and rope_parameters.partial_rotary_factor 1.0 are refused" test "$(rc)" = 1
run -e "lint mm"
ok "lint of the release's form: transformers 5.17 reads no rotary_dim" grep -q \
    "rotary_dim 16 without partial_rotary_factor: transformers 5.17's MiniMaxM2Config reads no rotary_dim and rotates all 32 dims" out.txt
run -e "lint mm_same"
hasnt "$(cat out.txt)" "without partial_rotary_factor" && pass=$((pass + 1)) || fail "lint with the factor: [$(cat out.txt)]"

# ---------------------------------------------------------------- kimi_linear
run -e "synth family kimi_linear kl"
run -e "lint kl"
ok "lint of kimi_linear: transformers loads it (KimiLinearForCausalLM)" grep -Eq "^transformers +KimiLinearForCausalLM +loads *$" out.txt
cli_done
