#!/bin/bash
# cli_role_names.sh -- every C file (but core/model/family.c) asks for a role, never spells a tensor
# name (tests/check_role_names.lua against core/model/family.c's layout tables) and never test a
# family by its enum. First the checker is shown to catch a planted file and to pass prose.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-role-names
SRC=$(cd "$(dirname "$0")/.." && pwd)
CHECK="$SRC/tests/check_role_names.lua"
FAMILY="$SRC/core/model/family.c"
# every C file of core/, commands/, plots/ and repl/ but the family table itself: a file added later is
# checked without being listed
ROLE_FILES=$(cd "$SRC" && ls core/*/*.c commands/*.c plots/*.c repl/*.c | grep -vx core/model/family.c)

# ---- planted: four spelled names, one family test; prose and comments that are not names
cat >"$T/planted.c" <<'EOF'
/* comments may say "self_attn.q_proj.weight" */
static const char *a = "model.layers.%d.self_attn.kv_b_proj.weight";
static const char *b = "lm_head";
static const char *c = "model.norm.weight";
static const char *d = "transformer.h.%d.attn.c_attn.bias";
static const char *p = "q_proj.bias is written because the query has no latent; a latent norm: eps";
static const char *q = "norm";
int f(const ModelConfig *m) { return m->family == FAM_GPT2; }
EOF
out=$(lua5.4 "$CHECK" "$FAMILY" "$T/planted.c" 2>&1); rc=$?
echo "$out"
ok "planted file fails" [ "$rc" -ne 0 ]
ok "planted: 5 findings" has "$out" "role names: 5 findings"
ok "planted kv_b_proj" has "$out" "planted.c:2: .* spells role name self_attn.kv_b_proj"
ok "planted lm_head" has "$out" "planted.c:3: .* spells role name lm_head"
ok "planted model.norm" has "$out" "planted.c:4: .* spells role name norm"
ok "planted c_attn" has "$out" "planted.c:5: .* spells role name attn.c_attn"
ok "planted family test" has "$out" "planted.c:8: tests a family by its enum"
ok "prose is not a name" hasnt "$out" "planted.c:[167]:"
ok "the tables were read" has "$out" "(\([3-9][0-9]\|[1-9][0-9][0-9]\) names\|([1-9][0-9][0-9] names"

# ---- this tree
out=$(cd "$SRC" && lua5.4 "$CHECK" "$FAMILY" $ROLE_FILES 2>&1); rc=$?
echo "$out"
ok "the tree spells no role name" [ "$rc" -eq 0 ]
ok "the tree: 0 findings" has "$out" "role names: 0 findings"
ok "the tree: every file read" has "$out" "names, $(wc -w <<<"$ROLE_FILES") files)"
cli_done
