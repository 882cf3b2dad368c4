#!/bin/bash
# cli_gemma4_eval.sh -- a truncation of Gemma 4 and Qwen3.5 / Qwen3-Next runs in the session (issue 27): the one-layer
# evaluator applies Gemma 4's v_norm, k_eq_v (W_V = k_proj), the full layers' own head dims and Qwen3.5's output gate
# (q_proj per head [query | gate], sigmoid(gate) x attention before o_proj), and a truncated layer that KV-shared
# layers read fills its cache for them. So `truncate vo` + `ppl` in the session equal the dense export's reload;
# truncate's KV line and `kv-cache` count each layer type at its own dims (gemma-4-31B's config: 5 sliding layers of 4
# KV heads x 16, 1 full layer of 1 KV head x 32 (k_eq_v)); a one-layer range prints as "layer 3".
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gemma4-eval shared-cache
cd "$T" || exit 1
cli_ids 40 ids.txt

far() { ! near "$@"; }

# fam LAYERS TOL: the source's ppl, the full-rank identity, a cut in the session against its dense export's reload
fam() {
    local f=$1 lay=$2 tol=$3 d=$T/$1 p0 p1 p2 p3
    "$B" -e "synth family $f $d" >/dev/null 2>&1 || { fail "synth family $f"; return; }
    p0=$(ppl_of "load $d; ppl ids ids.txt seqlen 40")
    p1=$(ppl_of "load $d; truncate vo rank 32 $lay; ppl ids ids.txt seqlen 40")
    case $p1 in ERR:*) fail "$f: truncate vo rank 32 + ppl in the session: $p1"; return ;; esac
    ok "$f: full rank in the session keeps the source's ppl ($p1 vs $p0, 1e-6)" near "$p1" "$p0" 1e-6
    p2=$(ppl_of "load $d; truncate vo rank 4 $lay; ppl ids ids.txt seqlen 40; export $T/$f-cut format dense")
    p3=$(ppl_of "load $T/$f-cut; ppl ids ids.txt seqlen 40")
    ok "$f: the cut in the session ($p2) equals its dense export's reload ($p3, $tol)" near "$p2" "$p3" "$tol"
    ok "$f: ... and the cut moves ppl ($p0 -> $p3)" far "$p3" "$p0" 1e-5
}
fam gemma4_text "layers 0-2" 1e-5     # layer 2's cut V is what the KV-shared layer 4 reads
fam gemma4 "layers 0-2" 1e-5
fam qwen3_5 "" 1e-6
fam qwen3_5_moe "" 1e-6
fam qwen3_next "" 1e-6

# the KV-shared reader alone: layer 2 truncated, layer 4 reads its cut K / V from the override's cache
d=$T/gemma4_text
p2=$(ppl_of "load $d; truncate vo rank 4 layers 2-2; ppl ids ids.txt seqlen 40; export $T/g4-l2 format dense")
p3=$(ppl_of "load $T/g4-l2; ppl ids ids.txt seqlen 40")
ok "gemma4_text: layer 2 cut, layer 4 reading it: session $p2 = export $p3 (1e-6)" near "$p2" "$p3" 1e-6
out=$(e "load $d; truncate vo rank 4 layers 2-2")
ok "a one-layer range reads \"layer 2\" (not \"layers 2-2\")" has "$out" "^truncated VO of layer 2 (rank 4"
ok "  and the working copy is measured in the session" has "$out" "\`ppl\`, \`generate\` and \`check\` measure it"
out=$(e "load $T/qwen3_5; truncate vo rank 4")
ok "qwen3_5: its one attention layer reads \"layer 3\"" has "$out" "^truncated VO of layer 3 (rank 4"
out=$(e "load $d; truncate vo rank 4")
ok "truncate names the layers it takes on refusing layer 3" has "$out" "layer 3 of gemma4_text takes V from k_proj .*(\`layers 0-2\`, ...)"
out=$(e "load $d; check $T/gemma4_text-cut")
ok "check of a Gemma 4 cut compares its layers in the session" has "$out" "^PASS"
hasnt "$out" "no per-layer errors" || fail "check still skips the per-layer table: $out"

# Qwen3.5's convert mla keeps the gate on the converted attention in the session; its export refuses naming the gate
out=$(e "load $T/qwen3_5; convert mla kv-rank full qk-norm fold; ppl ids ids.txt seqlen 40")
ok "qwen3_5: convert mla + ppl run in the session" has "$out" "1 of 4 layers run as transformed"
# at full rank with the norm kept, the converted layer is the source's (gate included: without W_G it is not)
q0=$(ppl_of "load $T/qwen3_5; ppl ids ids.txt seqlen 40")
q1=$(ppl_of "load $T/qwen3_5; convert mla kv-rank 64 qk-norm keep; ppl ids ids.txt seqlen 40")
ok "qwen3_5: convert mla at full rank (qk-norm keep) keeps the gated source's ppl [$q0 / $q1]" near "$q1" "$q0" 1e-6
out=$(e "load $T/qwen3_5; convert mla kv-rank full qk-norm fold; export $T/q5mla")
ok "  its export refuses naming the gate" has "$out" "qwen3_5's output gate"

# gemma-4-31B's config (tests/gemma4_tiny.py): sliding layers 0-4 of 4 KV heads x (16 + 16), full layer 5 of 1 KV head x
# (32 + 32); 2 bytes per value (bfloat16 in the config)
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
python3 "$ATTNLAB_SRC/tests/gemma4_tiny.py" "$T/real31B" 31B || fail "could not write the gemma-4-31B-it folder"
out=$(e "load $T/real31B; kv-cache context 2000")
ok "kv-cache: 5 sliding layers keep 1024 tokens x 128 values" grep -Eq "^sliding window 1024 +0-4 +5 +1024 +128 +655360 +1310720$" <<<"$out"
ok "kv-cache: the full layer keeps 2000 tokens x 64 values" grep -Eq "^full attention +5 +1 +2000 +64 +128000 +256000$" <<<"$out"
out=$(e "load $T/real31B; truncate vo rank 4 layers 0-4")
# before: 5 x 128 + 64 = 704 values (1408 bytes); after: V 4 x 16 -> 4 x 4 on 5 layers: 704 - 5 x 48 = 464 (928 bytes)
ok "truncate's KV line: each layer type at its own dims (704 -> 464 values, 1408 -> 928 bytes)" has "$out" "mean over the 6 layers): 117.333 -> 77.3333 values (65.9%); whole model 1408 -> 928 bytes per token"
p2=$(ppl_of "load $T/real31B; truncate vo rank 4 layers 0-4; ppl ids ids.txt seqlen 40; export $T/r31-cut format dense")
p3=$(ppl_of "load $T/r31-cut; ppl ids ids.txt seqlen 40")
ok "gemma-4-31B's layout: the cut in the session ($p2) equals its export's reload ($p3)" near "$p2" "$p3" 1e-5
cli_done
