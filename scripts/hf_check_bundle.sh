#!/usr/bin/env bash
# hf_check_bundle.sh BUILD_DIR OUT_DIR -- the bundle scripts/hf_check.py runs in transformers (on a
# machine with torch + transformers, a GPU for the FP8 / MXFP4 kernels): tiny checkpoints, what
# attnlab computes on them, and a manifest.json naming each item.
#
#   items, each a folder + attnlab's logits of IDS (BUILD_DIR/tests/test_gguf logits: float32
#   products, the forward pass `ppl` runs) + what it is:
#   - every `synth family` recipe with a forward pass (deepseek_v4 / kimi_k3 have none), stored BF16
#     (transformers widens to float32 exactly, as attnlab's f32 products do; F32 would not fit the
#     device tool's 64 MiB), and stories260K-hf (a trained Llama, F32);
#   - FaRR exports: `truncate vo tau T; export DIR` (factors, and format dense) of stories260K-hf
#     (T 0.9: at 0.99 its trained heads keep every rank), qwen3, gemma2 (T 0.99);
#   - TransMLA exports: `convert mla kv-rank R; export DIR` (DeepSeek-V3 folders) of stories260K-hf,
#     qwen3 (qk-norm fold), mixtral (MoE layout): each with `check DIR`'s largest
#     out_err_transformers and its source item (mixtral without its window: DeepSeek-V3 has none), so hf_check.py can compare the conversion's error
#     in transformers with the one check predicts;
#   - FP8: stories260K-hf's projections as fine-grained FP8 (tests/fp8blk_quant.py), its FaRR export
#     `dtype fp8` and its TransMLA export (BF16 attention beside the copied FP8 MLPs);
#   - MXFP4: the gpt_oss recipe's experts as gpt-oss releases them (tests/gptoss_mxfp4.py);
#   - the FP8 and MXFP4 items' decoded F32 twins (their attnlab logits against the quantized ones printed);
#   - the readers that differ from the release (bench/README "Helper hfx (s13)"): minimax_m2 with
#     partial_rotary_factor beside its rotary_dim (transformers 5.17 reads only the former), qwen3_vl_moe with square
#     experts (I = D: transformers 5 reads down_proj untransposed; tests/qwen3vl_experts.py square), glm_moe_dsa with
#     indexer_rope_interleave false (transformers reads the key only from PR #46842 on).
#   Each item says what hf_check.py should find: "agree" (float32 noise), "differs: why", or nothing (quantized).
# OUT_DIR/bundle.tar.xz packs it (about 31 MB): unpack it beside hf_check.py and run that there.
# Prints one line per item; an item attnlab cannot make is left out with a line saying why.
set -u
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR OUT_DIR" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || exit 2
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=$2
A=$BUILD/attnlab
TG=$BUILD/tests/test_gguf
IDS="1 5 9 23 7 100 3 44 12 9 8 77 66 55 4 3 2 1 0 99 17 18 19 20"
mkdir -p "$OUT" && cd "$OUT" || exit 1
: > items.tsv   # name, folder, quant, source item, out_err_transformers, what, expect

# item NAME FOLDER QUANT SOURCE OUT_ERR WHAT [EXPECT]: attnlab's logits of FOLDER, one manifest row (EXPECT: "agree" or
# "differs: why"; none for the quantized items, whose readers dequantize otherwise)
item() {
    if "$TG" logits "$2" "$IDS" > "logits/$1.json" 2> "logits/$1.err"; then
        rm -f "logits/$1.err"
    else
        echo "  $1: attnlab's forward pass refused it: $(head -c 200 "logits/$1.err")"
        rm -f "logits/$1.json"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "${7:-}" >> items.tsv
    echo "item $1 ($6)"
}

# session LOG COMMANDS: one attnlab session, its output kept in log/LOG.txt; fails when attnlab does
session() {
    "$A" -e "$2" > "log/$1.txt" 2>&1 || { echo "  $1 failed: $(tail -2 "log/$1.txt" | tr '\n' ' ')"; return 1; }
}

# out_err_transformers LOG: the largest of check DIR's out_err_transformers column in log/LOG.txt
out_err_transformers() {
    awk '{ for (i = 1; i <= NF; i++) if ($i == "out_err_transformers") c = i }
         c && $1 ~ /^[0-9]+$/ && NF >= c { if ($c + 0 > m) m = $c + 0 }
         END { if (c) printf "%.6g", m; else printf "" }' "log/$1.txt"
}

# twins A B: how far attnlab's logits of a quantized item are from those of its decoded F32 twin
twins() {
    python3 -c 'import json, sys
a, b = (json.load(open("logits/%s.json" % n))["logits"] for n in sys.argv[1:3])
d = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
print("  attnlab: %s against its F32 twin: max |logit diff| %.3g" % (sys.argv[1], d))' "$1" "$2"
}

mkdir -p fam logits log
FAMILIES=$("$A" -e "help synth family" | sed -n '1s/.*family \([a-z0-9_|]*\) DIR.*/\1/p' | tr '|' ' ')
for f in $FAMILIES; do
    case $f in deepseek_v4|kimi_k3) continue ;; esac
    case $f in
    minimax_m2) x="differs: transformers 5.17's MiniMaxM2Config reads no rotary_dim (rotates 32 dims, the release 16)" ;;
    mimo) x="differs: not in transformers (remote code)" ;;
    *) x=agree ;;
    esac
    session "synth_$f" "synth family $f fam/$f dtype bf16" && item "$f" "fam/$f" none "" "" "synth family $f (BF16)" "$x"
done
# config_set DIR PYTHON: DIR/config.json (c) edited in place
config_set() { python3 -c 'import json, sys; p = sys.argv[1] + "/config.json"; c = json.load(open(p)); exec(sys.argv[2]); json.dump(c, open(p, "w"), indent=1)' "$1" "$2"; }
# minimax_m2 with partial_rotary_factor beside rotary_dim (transformers' MiniMaxM2Config reads no rotary_dim)
cp -r fam/minimax_m2 minimax_m2_prf && config_set minimax_m2_prf 'c["partial_rotary_factor"] = c["rotary_dim"] / c["head_dim"]' \
    && item minimax_m2_prf minimax_m2_prf none "" "" "synth family minimax_m2 (BF16), partial_rotary_factor rotary_dim / head_dim added" agree
# qwen3_vl_moe with square experts (moe_intermediate_size = hidden_size, s12's recipe shape): transformers 5's
# Transpose(1, 2, check_dims=True) leaves the square down_proj [E, I, D] as its [E, D, I]
python3 "$SRC/tests/qwen3vl_experts.py" fam/qwen3_vl_moe qwen3_vl_moe_sq square \
    && item qwen3_vl_moe_sq qwen3_vl_moe_sq none "" "" "synth family qwen3_vl_moe (BF16), experts rewritten square (I = D = 64)" \
        "differs: transformers 5 keeps a square down_proj untransposed (s12: rel 0.646)"
# glm_moe_dsa with indexer_rope_interleave false: attnlab and vLLM read the key, transformers from PR #46842 on
cp -r fam/glm_moe_dsa glm_moe_dsa_ihalf && config_set glm_moe_dsa_ihalf 'c["indexer_rope_interleave"] = False' \
    && item glm_moe_dsa_ihalf glm_moe_dsa_ihalf none "" "" "synth family glm_moe_dsa (BF16), indexer_rope_interleave false" \
        "differs: unless transformers reads indexer_rope_interleave (PR #46842); its indexer interleaves whatever it says"
cp -r "$SRC/tests/models/stories260K-hf" st && rm -f st/tok512.bin st/LICENSE_llama2c_MIT
item stories260K st none "" "" "stories260K-hf (trained Llama, F32)" agree

# FaRR
for s in st:stories260K:0.9 fam/qwen3:qwen3:0.99 fam/gemma2:gemma2:0.99; do
    IFS=: read -r d n tau <<< "$s"
    session "farr_$n" "load $d; truncate vo tau $tau; export farr_$n; check farr_$n" \
        && item "farr_$n" "farr_$n" none "$n" "" "truncate vo tau $tau; export (FaRR factors) of $n" agree
done
session farr_dense_stories260K "load st; truncate vo tau 0.9; export farr_dense_st format dense" \
    && item farr_dense_stories260K farr_dense_st none stories260K "" "truncate vo tau 0.9; export format dense of stories260K" agree

# TransMLA
mla() {   # NAME FOLDER SOURCE_ITEM CONVERT_ARGS [EXPECT]
    session "mla_$1" "load $2; convert mla $4; export mla_$1; check mla_$1" \
        && item "mla_$1" "mla_$1" none "$3" "$(out_err_transformers "mla_$1")" "convert mla $4; export of $3" "${5:-agree}"
}
mla stories260K st stories260K "kv-rank 8"
mla qwen3 fam/qwen3 qwen3 "kv-rank 24 qk-norm fold"
# mixtral without its window (Mixtral-8x7B's form: DeepSeek-V3 has no sliding window)
cp -r fam/mixtral mixtral_nw && config_set mixtral_nw 'c["sliding_window"] = None' \
    && item mixtral_nw mixtral_nw none "" "" "synth family mixtral (BF16), sliding_window null" agree
mla mixtral mixtral_nw mixtral_nw "kv-rank 24" "differs: n_shared_experts null (README: transformers' DeepseekV3 cannot run the MoE layout)"

# FP8 (fine-grained, 128 x 128 blocks) and MXFP4
if python3 "$SRC/tests/fp8blk_quant.py" st st_fp8 f32 > log/fp8blk.txt 2>&1; then
    item stories260K_fp8 st_fp8 fp8 "" "" "stories260K-hf, projections fine-grained FP8 (tests/fp8blk_quant.py)"
    python3 "$SRC/tests/fp8blk_quant.py" st st_fp8_twin f32 twin > /dev/null \
        && item stories260K_fp8_twin st_fp8_twin none "" "" "the FP8 stories260K's decoded values in F32 (fp8blk_quant.py twin)" agree
    twins stories260K_fp8 stories260K_fp8_twin
    session farr_fp8 "load st_fp8; truncate vo tau 0.9; export farr_fp8 dtype fp8" \
        && item farr_fp8 farr_fp8 fp8 stories260K_fp8 "" "truncate vo tau 0.9; export dtype fp8 of the FP8 stories260K"
    session mla_fp8 "load st_fp8; convert mla kv-rank 8; export mla_fp8; check mla_fp8" \
        && item mla_fp8 mla_fp8 fp8 stories260K_fp8 "$(out_err_transformers mla_fp8)" "convert mla kv-rank 8; export of the FP8 stories260K"
else
    echo "  fp8blk_quant.py failed: $(tail -1 log/fp8blk.txt)"
fi
if python3 "$SRC/tests/gptoss_mxfp4.py" fam/gpt_oss gpt_oss_mx mxfp4 > log/mxfp4.txt 2>&1; then
    item gpt_oss_mxfp4 gpt_oss_mx mxfp4 "" "" "gpt_oss recipe, experts MXFP4 as released (tests/gptoss_mxfp4.py)"
    python3 "$SRC/tests/gptoss_mxfp4.py" fam/gpt_oss gpt_oss_mx_twin f32 > /dev/null \
        && item gpt_oss_mxfp4_twin gpt_oss_mx_twin none "" "" "the MXFP4 gpt_oss's decoded experts in F32 (gptoss_mxfp4.py f32)" agree
    twins gpt_oss_mxfp4 gpt_oss_mxfp4_twin
else
    echo "  gptoss_mxfp4.py failed: $(tail -1 log/mxfp4.txt)"
fi

python3 - "$IDS" <<'EOF'
import json, sys
ids = [int(x) for x in sys.argv[1].split()]
items = []
for line in open("items.tsv"):
    name, folder, quant, source, err, what, expect = line.rstrip("\n").split("\t")
    items.append({"name": name, "folder": folder, "ids": ids, "logits": "logits/%s.json" % name,
                  "quant": quant, "source": source or None,
                  "out_err_transformers": float(err) if err else None, "what": what, "expect": expect or None})
json.dump({"items": items}, open("manifest.json", "w"), indent=1)
print("manifest.json: %d items" % len(items))
EOF
tar cf - manifest.json items.tsv fam st st_fp8 st_fp8_twin gpt_oss_mx gpt_oss_mx_twin minimax_m2_prf qwen3_vl_moe_sq \
    glm_moe_dsa_ihalf mixtral_nw mla_* farr_* logits | xz -T2 -6 > bundle.tar.xz
du -h bundle.tar.xz | sed 's/^/bundle (xz; hf_check.py reads it unpacked): /'
