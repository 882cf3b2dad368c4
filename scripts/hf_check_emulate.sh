#!/usr/bin/env bash
# hf_check_emulate.sh SYNTH_ATTNLAB TEST_GGUF OUT_DIR -- s12's three transformers disagreements (bench/README "Helper
# dvc (s12)") reproduced without transformers: each family's recipe (written by SYNTH_ATTNLAB, BF16, as
# hf_check_bundle.sh writes it) read by attnlab (TEST_GGUF logits: the release's reading) against the same folder
# rewritten so that attnlab computes what transformers 5.17 read there:
#   qwen3_vl_moe  square experts (I = D; the recipe's own before s13, else tests/qwen3vl_experts.py square) against
#                 each down_proj block transposed in place: transformers 5's check_dims keeps a square block as its
#                 [D, I] (tests/qwen3vl_experts.py transpose-down);
#   glm_moe_dsa   interleaved MLA and indexer RoPE against rope_interleave / indexer_rope_interleave false (the
#                 rotate_half that s12's attnlab read; transformers 5.17 interleaves);
#   minimax_m2    rotary_dim 16 of 32 against rotary_dim removed (every dim rotated: MiniMaxM2Config reads no
#                 rotary_dim).
# rel = max |z_a - z_b| / max |z of s12's attnlab side|, argmax = the share of tokens whose top token agrees, over
# hf_check_bundle.sh's 24 ids. With SYNTH_ATTNLAB built at b66d155 (s12's recipes) the rows are s12's table's.
set -u
[ $# -eq 3 ] || { echo "usage: $0 SYNTH_ATTNLAB TEST_GGUF OUT_DIR" >&2; exit 2; }
A=$(realpath "$1") TG=$(realpath "$2") OUT=$3
EXP=$(cd "$(dirname "$0")/../tests" && pwd)/qwen3vl_experts.py
IDS="1 5 9 23 7 100 3 44 12 9 8 77 66 55 4 3 2 1 0 99 17 18 19 20"
mkdir -p "$OUT" && cd "$OUT" || exit 1

# config_set DIR PYTHON: DIR/config.json (c; its text tower t) edited in place
config_set() { python3 -c 'import json, sys; p = sys.argv[1] + "/config.json"; c = json.load(open(p)); t = c.get("text_config", c); exec(sys.argv[2]); json.dump(c, open(p, "w"), indent=1)' "$1" "$2"; }

# row WHAT A B NORM: logits of folders A and B compared; NORM (a or b) names s12's attnlab side
row() {
    "$TG" logits "$2" "$IDS" > "$2.json" && "$TG" logits "$3" "$IDS" > "$3.json" || { echo "$1: logits refused"; return; }
    python3 - "$1" "$2.json" "$3.json" "$4" <<'EOF'
import json, sys
a, b = (json.load(open(p))["logits"] for p in sys.argv[2:4])
d = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
s = max(abs(x) for r in (a if sys.argv[4] == "a" else b) for x in r)
top = lambda r: max(range(len(r)), key=r.__getitem__)
print("%-66s rel %.3f  argmax %.2f" % (sys.argv[1], d / s, sum(top(x) == top(y) for x, y in zip(a, b)) / len(a)))
EOF
}

"$A" -e "synth family qwen3_vl_moe q3 dtype bf16" > /dev/null || exit 1
if python3 -c 'import json, sys; t = json.load(open("q3/config.json"))["text_config"]; sys.exit(t["moe_intermediate_size"] == t["hidden_size"])'; then
    python3 "$EXP" q3 q3_sq square && rm -rf q3 && mv q3_sq q3
fi
python3 "$EXP" q3 q3_t transpose-down
row "qwen3_vl_moe, square experts: down_proj read untransposed" q3 q3_t a

"$A" -e "synth family glm_moe_dsa glm dtype bf16" > /dev/null || exit 1
cp -r glm glm_h && config_set glm_h 'c["rope_interleave"] = False; c["indexer_rope_interleave"] = False'
row "glm_moe_dsa: interleaved against rotate_half (MLA and indexer)" glm glm_h b
cp -r glm glm_i && config_set glm_i 'c["indexer_rope_interleave"] = False'
row "glm_moe_dsa: interleaved against rotate_half (the indexer alone)" glm glm_i b

"$A" -e "synth family minimax_m2 mm dtype bf16" > /dev/null || exit 1
cp -r mm mm_all && config_set mm_all 'del c["rotary_dim"]'
row "minimax_m2: rotary_dim 16 of 32 against every dim rotated" mm mm_all a
