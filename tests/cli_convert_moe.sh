#!/bin/bash
# cli_convert_moe.sh -- `convert mla` exports whose MLPs a DeepSeek-V3 checkpoint holds after a
# rewrite. A Mixtral checkpoint is exported with its experts in
# DeepSeek-V3's MoE layout (mlp.gate, mlp.experts.E.{gate,up,down}_proj; scoring_func softmax,
# topk_method greedy, norm_topk_prob true, n_group 1, no shared experts: vLLM's and SGLang's
# DeepSeek MoE then routes as Mixtral does): the export reloads to the in-session conversion's
# perplexity, its experts are the source's bytes under the new names, and routers DeepSeek-V3 has
# no form for (GLM-4.5-Air's DeepSeek-V3 routing, which the export does not copy yet) are refused by
# name. Phi-3's fused gate_up_proj is split into gate_proj / up_proj, row for row, and reloads to the
# in-session perplexity too.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-convert-moe
cd "$T" || exit 1

cli_ids 64 ids.txt
nll() { awk 'NR > 1 && $1 ~ /^[0-9]+$/ { v = $2 } END { print v }' out.txt; }

run -e "synth family mixtral $T/mx"
ok "synth mixtral" test "$(rc)" = 0
# Mixtral-8x7B's real config has no window (sliding_window null)
sed -i -E 's/"sliding_window":[[:space:]]*[0-9]+/"sliding_window": null/' "$T/mx/config.json"

run -e "load $T/mx; convert mla kv-rank 24; ppl ids ids.txt seqlen 64"
ok "convert mla + ppl in the session" test "$(rc)" = 0
in_session=$(nll)
run -e "load $T/mx; ppl ids ids.txt seqlen 64 source"
source_nll=$(nll)

run -e "load $T/mx; convert mla kv-rank 24; export $T/mx-mla dtype f32"
ok "export of a Mixtral conversion written" test "$(rc)" = 0
[ "$(rc)" = 0 ] || fail "export refused: [$(cat err.txt)]"
cfg=$T/mx-mla/config.json
for kv in '"model_type":[[:space:]]*"deepseek_v3"' '"n_routed_experts":[[:space:]]*4' '"num_experts_per_tok":[[:space:]]*2' \
          '"scoring_func":[[:space:]]*"softmax"' '"topk_method":[[:space:]]*"greedy"' '"norm_topk_prob":[[:space:]]*true' \
          '"n_shared_experts":[[:space:]]*null' '"first_k_dense_replace":[[:space:]]*0' '"n_group":[[:space:]]*1' '"routed_scaling_factor":[[:space:]]*1'; do
    grep -Eq "$kv" "$cfg" || fail "config.json lacks $kv [$(tr -d '\n' < "$cfg")]"
done

python3 - "$T/mx" "$T/mx-mla" <<'PY' || fail "experts not copied bit for bit under DeepSeek-V3's names"
import json, struct, sys
def tensors(d):
    with open(d + "/model.safetensors", "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); base = 8 + n
        out = {}
        for k, v in h.items():
            if k == "__metadata__": continue
            f.seek(base + v["data_offsets"][0]); out[k] = f.read(v["data_offsets"][1] - v["data_offsets"][0])
        return out
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
ren = {"block_sparse_moe.gate.": "mlp.gate.", ".w1.": ".gate_proj.", ".w3.": ".up_proj.", ".w2.": ".down_proj."}
n = 0
for k, v in a.items():
    if "block_sparse_moe" not in k: continue
    t = k.replace("block_sparse_moe.", "mlp.") if ".experts." in k else k
    for x, y in ren.items(): t = t.replace(x, y)
    assert t in b and b[t] == v, (k, t)
    n += 1
assert not any("block_sparse_moe" in k for k in b)
assert n == 3 * (1 + 4 * 3), n
PY

run -e "load $T/mx-mla; ppl ids ids.txt seqlen 64"
ok "the export loads and runs" test "$(rc)" = 0
reload=$(nll)
awk -v a="$in_session" -v b="$reload" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-5 * a) }' ||
    fail "export's NLL $reload is not the in-session conversion's $in_session (1e-5)"
awk -v a="$source_nll" -v b="$reload" 'BEGIN { exit !(a != b) }' ||
    fail "the export's NLL equals the source's: the test cannot tell the conversion apart"

run -e "check $T/mx-mla"
ok "check: experts found under their new names" grep -q "non-attention tensors: all 48 identical" out.txt
ok "check: notes transformers' sigmoid router" grep -q "MoE routing: transformers scores the DeepSeek-V3 router with a sigmoid" out.txt

# lint: vLLM and SGLang load it as written; transformers' DeepseekV3 cannot (n_shared_experts null,
# and its router is a sigmoid whatever scoring_func says)
run -e "lint $T/mx-mla"
row() { grep -E "^$1 " out.txt; }
row vLLM | grep -q "loads\( with --skip-tokenizer-init .*\)\? *$" || fail "lint: vLLM does not load the MoE export [$(cat out.txt)]"
row SGLang | grep -q "loads\( with --skip-tokenizer-init .*\)\? *$" || fail "lint: SGLang does not load the MoE export [$(cat out.txt)]"
row transformers | grep -q "will not load" || fail "lint: transformers [$(cat out.txt)]"
ok "lint names the sigmoid router" grep -q "scoring_func 'softmax': transformers scores the DeepSeek-V3 router with a sigmoid" out.txt
ok "lint names n_shared_experts null" grep -q "n_shared_experts: null: transformers builds shared experts" out.txt

# the same checkpoint read with transformers' DeepseekV3 router (sigmoid: no scoring_func) is another model
sed -i -E 's/"scoring_func":[[:space:]]*"softmax"/"scoring_func": "sigmoid"/' "$cfg"
run -e "load $T/mx-mla; ppl ids ids.txt seqlen 64"
sig=$(nll)
awk -v a="$in_session" -v b="$sig" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d > 1e-4 * a) }' ||
    fail "sigmoid routing gives the same NLL ($sig vs $in_session): the routing check is vacuous"

# Phi-3: the fused gate_up_proj [2I, D] (rows [gate ; up]) split into DeepSeek-V3's gate_proj / up_proj
run -e "synth family phi3 $T/phi3"
sed -i -E 's/"sliding_window":[[:space:]]*[0-9]+/"sliding_window": null/; s/"partial_rotary_factor":[[:space:]]*[0-9.]+/"partial_rotary_factor": 1.0/' "$T/phi3/config.json"
run -e "load $T/phi3; convert mla kv-rank 32; ppl ids ids.txt seqlen 64"
phi_session=$(nll)
run -e "load $T/phi3; convert mla kv-rank 32; export $T/phi3-mla dtype f32"
ok "phi3 export written" test "$(rc)" = 0
[ "$(rc)" = 0 ] || fail "phi3 export refused: [$(cat err.txt)]"
python3 - "$T/phi3" "$T/phi3-mla" <<'PY' || fail "phi3: gate_up_proj not split row for row into gate_proj / up_proj"
import json, struct, sys
def tensors(d):
    with open(d + "/model.safetensors", "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); base = 8 + n
        out = {}
        for k, v in h.items():
            if k == "__metadata__": continue
            f.seek(base + v["data_offsets"][0]); out[k] = (v["shape"], f.read(v["data_offsets"][1] - v["data_offsets"][0]))
        return out
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
n = 0
for k, (shape, v) in a.items():
    if not k.endswith("mlp.gate_up_proj.weight"): continue
    g, u = b[k.replace("gate_up_proj", "gate_proj")], b[k.replace("gate_up_proj", "up_proj")]
    half = len(v) // 2
    assert g[0] == [shape[0] // 2, shape[1]] and u[0] == g[0], (g[0], shape)
    assert g[1] == v[:half] and u[1] == v[half:], k
    n += 1
assert n == 3 and not any("gate_up_proj" in k for k in b), n
PY
run -e "load $T/phi3-mla; ppl ids ids.txt seqlen 64"
phi_reload=$(nll)
awk -v a="$phi_session" -v b="$phi_reload" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-5 * a) }' ||
    fail "phi3: export's NLL $phi_reload is not the in-session conversion's $phi_session (1e-5)"
run -e "check $T/phi3-mla"
ok "phi3: check finds every other tensor the source's" grep -q "non-attention tensors: all [0-9]* identical" out.txt
run -e "lint $T/phi3-mla"
for eng in transformers vLLM SGLang; do
    row $eng | grep -q "loads\( with --skip-tokenizer-init .*\)\? *$" || fail "lint: $eng does not load the phi3 export [$(cat out.txt)]"
done

# a router DeepSeek-V3's softmax top-k cannot compute (GLM-4.5-Air's sigmoid, bias and groups) is refused by name
run -e "synth family glm4_moe $T/air"
sed -i -E 's/"use_qk_norm":[[:space:]]*true/"use_qk_norm": false/' "$T/air/config.json"
run -e "load $T/air; convert mla kv-rank 64; export $T/air-mla"
ok "glm4_moe export refused" test "$(rc)" = 1
ok "  naming its routing" grep -q "DeepSeek-V3's routing" err.txt
ok "  and wrote nothing" test ! -e "$T/air-mla"
cli_done
