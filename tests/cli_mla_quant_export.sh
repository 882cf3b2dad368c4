#!/usr/bin/env bash
# cli_mla_quant_export.sh -- `convert mla; export DIR` of a quantized source (mla_quant.h): the export
# copies the untouched quantized tensors (MLP, experts) byte for byte with their scales and keeps the
# source's quantization_config in the source's form (compressed-tensors FP8 from tests/fp8ct_quant.py,
# fine-grained fp8 from tests/fp8blk_quant.py, ModelOpt NVFP4 from tests/fp4_quant.py with a
# hf_quant_config.json written beside it), with the rewritten attention projections (and copied plain
# linears: a router, an unquantized down_proj) in its list of unquantized modules. Before, the config
# lost the block and lint said "FP8 weights but no quantization_config" for every engine. Each export
# reloads to the in-session conversion's perplexity (1e-5), and lint's transformers / vLLM / SGLang
# rows load it (the only error left: llama.cpp's, for the tokenizer the test model lacks).
# A Mixtral with only its attention in FP8 exports as a plain checkpoint (no block: nothing quantized left).
# Then the synthetic Qwen3-MoE (q/k norms + softmax top-k experts) with `convert mla qk-norm fold`,
# exported in DeepSeek-V3's MoE layout end to end (moe_export.c with tmla_qkn.c), plain and with its
# projections (experts too) in compressed-tensors FP8, and its experts in MXFP4 (quant_method mxfp4).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-mla-quant-export
cd "$T" || exit 1
cli_need_model stories260K-hf/config.json
SRC="$M/stories260K-hf"
TXT="$ATTNLAB_SRC/examples/tinystory.txt"
Q="python3 $ATTNLAB_SRC/tests"

# the last ppl line's nll of out.txt (a "tokens nll ppl" row)
nll() { awk '$1 ~ /^[0-9]+$/ && NF == 3 { v = $2 } END { print v }' out.txt; }
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-5 * a) }'; }

# the non-attention tensors of $1 equal, byte for byte, those of $2 (names mapped Qwen/Llama -> DeepSeek:
# the same); prints how many, fails on a missing or different one
same_bytes() {
    python3 - "$1" "$2" <<'PY'
import json, struct, sys, glob
def tensors(d):
    out = {}
    for p in glob.glob(d + "/*.safetensors"):
        with open(p, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); base = 8 + n
            for k, v in h.items():
                if k == "__metadata__": continue
                f.seek(base + v["data_offsets"][0]); out[k] = (v["dtype"], f.read(v["data_offsets"][1] - v["data_offsets"][0]))
    return out
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
n = q = 0
for k, v in a.items():
    if ".self_attn." in k: continue
    assert k in b and b[k] == v, k
    n += 1
    q += v[0] in ("F8_E4M3", "U8")
assert q > 0, "no quantized tensor copied"
print(n, q)
PY
}

# ---- dense llama: compressed-tensors FP8, fine-grained fp8, ModelOpt NVFP4 (+ hf_quant_config.json)
$Q/fp8ct_quant.py "$SRC" "$T/ct" channel && $Q/fp8blk_quant.py "$SRC" "$T/blk" f32 && $Q/fp4_quant.py "$SRC" "$T/nv" nvfp4
echo '{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}}' \
    > "$T/nv/hf_quant_config.json"
for spec in "ct compressed-tensors ignore" "blk fp8 modules_to_not_convert" "nv modelopt ignore"; do
    set -- $spec
    d=$1 method=$2 list=$3
    run -e "load $T/$d; convert mla kv-rank 16; ppl $TXT; export $T/$d-mla dtype f32"
    ok "$d: converted and exported" test "$(rc)" = 0
    session=$(nll)
    python3 - "$T/$d/config.json" "$T/$d-mla/config.json" "$method" "$list" <<'PY' || fail "$d: quantization_config not kept"
import json, sys
src, ex, method, key = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
s, q = src["quantization_config"], ex.get("quantization_config")
assert q and q["quant_method"] == method, q
for k, v in s.items():                      # the source's form: every key kept, lists extended
    assert k in q, k
    if isinstance(v, list) and k == key: assert q[k][:len(v)] == v, (k, q[k])
    elif k != key: assert q[k] == v, (k, q[k], v)
names = q[key]
for l in range(5):
    for m in ("q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"):
        assert "model.layers.%d.self_attn.%s" % (l, m) in names, (l, m, names)
assert not any("mlp.gate_proj" in n or "mlp.up_proj" in n for n in names), names
PY
    msg=$(same_bytes "$T/$d" "$T/$d-mla" 2>&1)
    ok "$d: untouched tensors and scales byte for byte ($msg)" test $? = 0
    run -e "load $T/$d-mla; ppl $TXT"
    ok "$d: the export loads" test "$(rc)" = 0
    near "$session" "$(nll)" || fail "$d: export's nll $(nll) is not the session's $session (1e-5)"
    run -e "lint $T/$d-mla"
    for eng in transformers vLLM SGLang; do
        grep -E "^$eng " out.txt | grep -q " loads\( with --skip-tokenizer-init .*\)\? *$" || fail "$d: lint: $eng does not load it [$(cat out.txt)]"
    done
    ok "$d: lint's only error is llama.cpp's tokenizer" test "$(grep -c ' error ' out.txt)" = 1 -a \
        "$(grep -c ' error    llama.cpp: no tokenizer' out.txt)" = 1
    ok "$d: lint finds no quantization problem" sh -c "! grep -qi 'quantiz' out.txt"
done
python3 - "$T/nv-mla/hf_quant_config.json" <<'PY' || fail "nv: hf_quant_config.json lacks the new modules in exclude_modules"
import json, sys
q = json.load(open(sys.argv[1]))["quantization"]
assert q["quant_algo"] == "NVFP4" and q["exclude_modules"][0] == "lm_head", q
assert "model.layers.4.self_attn.kv_b_proj" in q["exclude_modules"], q
PY

# ---- Mixtral with only its attention in FP8 (fp8ct_quant.py quantizes "*_proj"; its experts are w1 / w2 /
# w3): the export rewrites every quantized module, so it is a plain checkpoint, without the block
cli_ids 64 ids.txt
run -e "synth family mixtral $T/mx"
sed -i -E 's/"sliding_window":[[:space:]]*[0-9]+/"sliding_window": null/' "$T/mx/config.json"
$Q/fp8ct_quant.py "$T/mx" "$T/mxct" channel
run -e "load $T/mxct; convert mla kv-rank 24; ppl ids ids.txt seqlen 64; export $T/mxct-mla dtype f32"
ok "mxct: exported" test "$(rc)" = 0
session=$(nll)
ok "mxct: no quantization_config (nothing quantized left)" sh -c "! grep -q quantization_config $T/mxct-mla/config.json"
ok "mxct: the source had one" grep -q quantization_config "$T/mxct/config.json"
run -e "load $T/mxct-mla; ppl ids ids.txt seqlen 64"
near "$session" "$(nll)" || fail "mxct: export's nll $(nll) is not the session's $session (1e-5)"
run -e "lint $T/mxct-mla"
ok "mxct: lint finds no quantization problem" sh -c "! grep -qi 'quantiz' out.txt"

# ---- Qwen3-MoE: q/k norms folded, softmax top-k experts in DeepSeek-V3's MoE layout
run -e "synth family qwen3_moe $T/q3"
ok "synth qwen3_moe" test "$(rc)" = 0
$Q/fp8ct_quant.py "$T/q3" "$T/q3ct" channel && $Q/fp4_quant.py "$T/q3" "$T/q3mx" mxfp4
run -e "load $T/q3; ppl ids ids.txt seqlen 64"
src_nll=$(nll)
for d in q3 q3ct q3mx; do
    run -e "load $T/$d; convert mla kv-rank 24 qk-norm fold; ppl ids ids.txt seqlen 64; export $T/$d-mla dtype f32"
    ok "$d: qk-norm fold exported" test "$(rc)" = 0
    [ "$(rc)" = 0 ] || fail "$d: export refused: [$(cat err.txt)]"
    session=$(nll)
    awk -v a="$src_nll" -v b="$session" 'BEGIN { exit !(a != b) }' || fail "$d: the conversion's nll is the source's"
    python3 - "$T/$d-mla/config.json" "$T/$d-mla/model.safetensors" "$d" <<'PY' || fail "$d: config / tensors not DeepSeek-V3's MoE"
import json, struct, sys
c = json.load(open(sys.argv[1]))
assert c["model_type"] == "deepseek_v3" and c["scoring_func"] == "softmax" and c["topk_method"] == "greedy", c
assert c["n_routed_experts"] > 0 and c["first_k_dense_replace"] == 0 and c["norm_topk_prob"] is True, c
q = c.get("quantization_config")
assert (q is not None) == (sys.argv[3] != "q3"), q
assert sys.argv[3] == "q3" or q["quant_method"] == {"q3ct": "compressed-tensors", "q3mx": "mxfp4"}[sys.argv[3]], q
assert sys.argv[3] == "q3" or "model.layers.2.self_attn.kv_b_proj" in q.get("ignore", q.get("modules_to_not_convert")), q
with open(sys.argv[2], "rb") as f:
    h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
assert not any("q_norm" in k or "k_norm" in k for k in h), "q/k norm tensors written"
assert any(k.startswith("model.layers.0.mlp.experts.0.gate_proj.weight") for k in h) and "model.layers.0.self_attn.kv_b_proj.weight" in h
PY
    if [ $d != q3 ]; then
        msg=$(same_bytes "$T/$d" "$T/$d-mla" 2>&1)
        ok "$d: experts and scales byte for byte ($msg)" test $? = 0
    fi
    run -e "load $T/$d-mla; ppl ids ids.txt seqlen 64"
    ok "$d: the export loads" test "$(rc)" = 0
    near "$session" "$(nll)" || fail "$d: export's nll $(nll) is not the session's $session (1e-5)"
    run -e "lint $T/$d-mla"
    for eng in vLLM SGLang; do
        grep -E "^$eng " out.txt | grep -q " loads\( with --skip-tokenizer-init .*\)\? *$" || fail "$d: lint: $eng does not load it [$(cat out.txt)]"
    done
    ok "$d: lint: transformers scores the router with a sigmoid" grep -q "^transformers .*will not load" out.txt
    ok "$d: lint finds no quantization problem" sh -c "! grep -qi 'quantiz' out.txt"
done
cli_done
