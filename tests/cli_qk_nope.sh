#!/usr/bin/env bash
# cli_qk_nope.sh -- `truncate qk` on the layers of a RoPE model that apply no RoPE (SmolLM3's
# no_rope_layers): there W_Q W_K^T is the map the model computes, so a QK plan of those layers alone
# truncates exactly as on GPT-2. It was refused by the model-wide RoPE check, whose own message said
# "layer 3 has no RoPE and fuses exactly" (found by helper qkv, s8). A range that includes a rotating
# layer stays refused, with that message.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-qk-nope
e "synth family smollm3 $T/sm3" > /dev/null
grep -q '"no_rope_layers"' "$T/sm3/config.json" || fail "synth smollm3 wrote no no_rope_layers"

out=$(e "load $T/sm3; ranks qk layer 3 tau 0.999999; truncate qk rank 2 layers 3; export $T/x format dense;
         load $T/x as x; ranks qk layer 3 tau 0.999999")
ok "truncate qk on the NoPE layer 3: a plan, not a refusal [$(grep -m1 'error\|truncated QK' <<<"$out")]" \
    has "$out" "^truncated QK of layer 3 (rank 2"
ok "the source's layer 3 fuses at rank 8 per head" test "$(grep -c '^    3     [0-3]      32       8        8$' <<<"$out")" = 4
ok "the exported layer 3 fuses at rank 2 per head (W_Q and W_K rewritten)" \
    test "$(grep -c '^    3     [0-3]       2       2        2$' <<<"$out")" = 4
ok "only layer 3's q/k rewritten" has "$out" "^re-encoded 2 changed tensors (self_attn.k_proj.weight, self_attn.q_proj.weight; layer 3)"

out=$(e "load $T/sm3; truncate qk rank 2 layers 2-3")
ok "a range with a rotating layer stays refused, naming the NoPE layer" \
    has "$out" "^error: QK fusion refused: .*layer 3 has no RoPE (no_rope_layers)"
seq 1 40 | tr '\n' ' ' > "$T/ids.txt"
out=$(e "load $T/sm3; ppl ids $T/ids.txt; truncate qk rank 2 layers 3; ppl ids $T/ids.txt")
ok "ppl runs the working copy: 1 of 4 layers transformed" has "$out" "FaRR working copy.*1 of 4 layers run as transformed"
ok "ppl of the working copy differs from the source's [$(grep -E '^ +39 ' <<<"$out" | tr -s ' ' | tr '\n' '|')]" \
    test "$(grep -cE '^ +39 +[0-9.]+ +[0-9.]+$' <<<"$out")" = 2 -a "$(grep -E '^ +39 ' <<<"$out" | sort -u | wc -l)" = 2
cli_done
