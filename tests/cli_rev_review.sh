#!/usr/bin/env bash
# cli_rev_review.sh -- (rev's review, s13) what a new user met, one check each:
#  - in a double-quoted argument a backslash was dropped whatever followed it: `tokenize "a\nb"` encoded "anb",
#    `generate "Q:\nA:"` ran on "Q:nA:", "d\qe" read as "dqe"; now \n and \t are a newline and a tab, \" and \\
#    a quote and a backslash, and any other backslash stays (commands/registry.c: quoted_escape);
#  - `check ... ids FILE` on a model whose weights hold a NaN said "perplexity: not measured ... (see the notes)"
#    with no notes, where `ppl` prints nan: it prints the nan now (README: errors on NaN weights are nan);
#  - `help export` listed the GGUF architectures of an older table (no smollm3, exaone4, mistral3, gpt-oss, and
#    "MoE models are refused" while gpt-oss's experts are written): every architecture `export F.gguf` writes
#    for a family recipe is named there now;
#  - scripts/seed000_grids.lua captioned the QK by-layer figure without the ranks it found (the VO one had them).
# FAILS on b66d155.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K-hf
cli_setup /tmp/attnlab-cli-rev-review shared-cache
cd "$T" || exit 1
S="load $M/stories260K-hf as s"

# --- backslashes in double quotes
ids() { e "$S; set format csv; tokenize $1" | tail -1; }
printf 'Once\nupon' > nl.txt
printf 'a\tb' > tab.txt
printf 'd\\qe "x"' > bs.txt
ok "\"Once\\nupon\" is the text with a newline ($(ids '"Once\nupon"') vs $(ids 'file nl.txt'))" \
    test "$(ids '"Once\nupon"')" = "$(ids 'file nl.txt')"
ok "\"a\\tb\" is the text with a tab" test "$(ids '"a\tb"')" = "$(ids 'file tab.txt')"
ok "\"d\\qe \\\"x\\\"\": the backslash before q stays, \\\" is a quote" test "$(ids '"d\qe \"x\""')" = "$(ids 'file bs.txt')"
ok "'Once\\nupon' in single quotes: no escape (backslash, n)" test "$(ids "'Once\\nupon'")" != "$(ids 'file nl.txt')"

# --- check's perplexity on NaN weights: nan, as ppl prints it
e "synth demo-llama nanm dtype f32" >/dev/null
python3 - <<'EOF'
import json, struct
p = 'nanm/model.safetensors'
b = bytearray(open(p, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
off = 8 + n + h['model.layers.1.self_attn.v_proj.weight']['data_offsets'][0]
b[off + 40:off + 44] = struct.pack('<f', float('nan'))
open(p, 'wb').write(b)
EOF
cli_ids 40 ids.txt
out=$(e "load nanm; ppl ids ids.txt; truncate vo rank 4 layers 2-3; check ids ids.txt")
ok "ppl of the NaN model prints nan" has "$out" "^    39  nan  nan"
ok "check prints nan before and after: $(grep '^perplexity' <<<"$out")" \
    has "$out" "^perplexity on 39 tokens, ids.txt (given: 40 tokens), windows of 40: nan before (source), nan after (the working copy, in the session): not finite"
ok "check does not point at notes it does not print" hasnt "$out" "see the notes"

# --- help export names every GGUF architecture export writes for a recipe
help=$(e "help export" | tr '\n' ' ')
fams=$(e "help synth family" | sed -n 's/^usage: synth family \([^ ]*\) DIR.*/\1/p' | tr '|' ' ')
[ -n "$fams" ] || fail "help synth family listed no families"
written=0
for f in $fams; do
    line=$(e "synth family $f fam_$f; load fam_$f; export g_$f.gguf" | grep -o "llama.cpp architecture [a-z0-9-]*" | head -1)
    [ -n "$line" ] || continue
    arch=${line##* }
    written=$((written + 1))
    ok "help export names $arch (export of $f writes it)" has "$help" "[ (]$arch[ ,)]"
    rm -rf "fam_$f" "g_$f.gguf"
done
ok "GGUF written for several recipes ($written)" test "$written" -ge 10
ok "help export no longer says every MoE model is refused" hasnt "$help" "MoE models are refused"

# --- ablate and plot head-importance take `text FILE` as ppl and check do (README: "the text options of ppl");
# they refused it ("give FILE (text) or `ids FILE`")
cp "$ATTNLAB_SRC/examples/tinystory.txt" story.txt
bare=$(e "$S; set format csv; ablate story.txt layer 1 head 3 max-tokens 200" | tail -1)
out=$(e "$S; set format csv; ablate text story.txt layer 1 head 3 max-tokens 200")
ok "ablate text FILE = ablate FILE ($bare)" test "$(tail -1 <<<"$out")" = "$bare"
out=$(e "$S; plot head-importance text story.txt layer 1 max-tokens 200 to imp.png")
ok "plot head-importance text FILE draws" is_png imp.png

# --- what `convert mla` exports: help convert mla and the README's Families table said Phi-3's fused MLP, MoE
# (and the README qwen3_moe) were refused, and qk-norm keep / the strategies had no export; they are written
h=$(e "help convert mla" | tr '\n' ' ')
out=$(e "synth family qwen3_moe q3m; load q3m; convert mla kv-rank 16 qk-norm fold; export q3m-mla")
ok "qwen3_moe's conversion exports" has "$out" "exported q3m as DeepSeek-V3 MLA to q3m-mla"
ok "README's Families table does not call qwen3_moe's export refused" \
    hasnt "$(grep '^| qwen3, qwen3_moe, olmo2 ' "$ATTNLAB_SRC/README.md")" "qwen3_moe / olmo2 refused"
ok "help convert mla does not call MoE or Phi-3's fused MLP unexportable" hasnt "$h" "Phi-3's fused MLP, MoE),"
ok "qk-norm keep and the rest: help convert mla names format attnlab" has "$h" "no stock export: \`export DIR format attnlab\` writes it"
ok "help convert mla: the strategies' export" has "$h" "\`export DIR format attnlab\` writes them"

# --- help truncate said SmolLM3's NoPE layers cannot truncate qk "for now"; they do (tests/cli_qk_nope.sh)
out=$(e "synth family smollm3 sm3; load sm3; truncate qk rank 4 layers 3")
ok "truncate qk on SmolLM3's NoPE layer 3 runs" has "$out" "truncated QK of layer 3 (rank 4"
ok "help truncate does not say it cannot" hasnt "$(e "help truncate")" "NoPE layers neither"

# --- seed000_grids.lua: the QK by-layer caption gives the ranks it found, as the VO one does
out=$("$B" "$ATTNLAB_SRC/scripts/seed000_grids.lua" figs 2>&1)
ok "the QK by-layer caption names the ranks" has "$out" "fused QK rank per layer: min / median / max (max = the uniform per-layer rank; fused QK [0-9]"
cli_done
