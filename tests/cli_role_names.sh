#!/usr/bin/env bash
# cli_role_names.sh -- "code asks for a role, never spells a tensor name" (issue 26) holds in the
# files converted to tensor roles: none of them has a string literal naming a role's Hugging Face
# tensor in any layout of core/model/family.c (with or without the layer / model prefix, an expert
# number, ".weight" / ".bias"), nor a `family == FAM_...` test. The checker is first shown to catch
# planted spellings and to let other strings (an FP8 "weight_scale_inv" suffix) pass.
set -u
. "$ATTNLAB_SRC/tests/lib_cli.sh"
cli_setup /tmp/attnlab-cli-role-names
cd "$T" || exit 1

# Files that resolve every tensor name through roles (cfg_role_name, cfg_role, the layout tables).
CONVERTED="core/model/model.c core/model/attn_eval.c core/model/forward.c core/model/analyses.c core/model/llama2c.c"

# Every role name of every layout: N("..."), OPT("...") and {"...", bool, bool} in family.c's tables.
grep -oE '(N|OPT)\("[^"]+"\)|\{"[^"]+", (true|false), (true|false)\}' "$ATTNLAB_SRC/core/model/family.c" |
    sed -E 's/^(N|OPT)\("//; s/"\)$//; s/^\{"//; s/",.*$//' | sort -u >names.txt
[ "$(wc -l <names.txt)" -ge 40 ] || fail "family.c's layout tables gave $(wc -l <names.txt) role names: [$(cat names.txt)]"
grep -qx 'self_attn.kv_b_proj' names.txt || fail "no self_attn.kv_b_proj among the role names"
grep -qx 'block_sparse_moe.experts.%d.w1' names.txt || fail "no Mixtral expert name among the role names"

# One extended regex: a string literal that is a role name, maybe after a prefix ("model.layers.%d.",
# "transformer.h.0."), maybe with ".weight" / ".bias" after it; %d matches %d or a number.
re=$(sed -E 's/\./\\./g; s/%d/(%d|[0-9]+)/g' names.txt | paste -sd '|')
re="\"([A-Za-z0-9_.%]*\\.)?($re)(\\.(weight|bias))?\""

# spelled FILE: the lines of FILE that spell a role's name or test a family by its enum.
spelled() { grep -nE -e "$re" -e 'family *[!=]= *FAM_' "$1"; }

# ---- the checker on planted lines
cat >planted.c <<'EOF'
static const char *a = "self_attn.q_proj.weight";
static const char *b = "model.layers.%d.input_layernorm.weight";
static const char *c = "mlp.experts.0.gate_proj.weight";
static const char *d = "lm_head";
static int e(int family) { return family == FAM_GPT2; }
static const char *f = "weight_scale_inv", *g = "attn_norm", *h = "q_proj is missing";
EOF
spelled planted.c >hits.txt
[ "$(wc -l <hits.txt)" = 5 ] || fail "the checker found $(wc -l <hits.txt) of the 5 planted spellings: [$(cat hits.txt)]"
grep -q 'weight_scale_inv' hits.txt && fail "the checker took a non-role string for a tensor name: [$(cat hits.txt)]"

# ---- the converted files
for f in $CONVERTED; do
    [ -f "$ATTNLAB_SRC/$f" ] || { fail "$f is missing"; continue; }
    spelled "$ATTNLAB_SRC/$f" >hits.txt && fail "$f spells tensor names instead of asking for roles: [$(cat hits.txt)]"
done
pass=$((pass + 1))
cli_done
