#!/usr/bin/env bash
# cli_hf_load.sh -- what transformers 5.17 refused or computed otherwise when it loaded attnlab's folders on
# a GPU machine (scripts/hf_check.py, bench/README "Helper dvc (s12)"), checked without transformers:
#  - config.json writes a whole number under a member transformers declares float as "N.0" (its strict
#    config classes refused `final_logit_softcapping: 10` (gemma2/3/4), `router_aux_loss_coef: 0`
#    (granitemoehybrid) and `routed_scaling_factor: 1` (every `convert mla` export); the values read back
#    the same;
#  - phi3 / kimi_linear recipes name a pad_token_id inside their 256 ids (transformers' defaults, 32000 and
#    163839, made its embedding refuse them);
#  - Qwen3.5-MoE renormalises its top-k routing weights whatever its config says (transformers'
#    Qwen3_5MoeTopKRouter reads no norm_topk_prob; attnlab's forward pass did not renormalise: logits 0.77
#    of their largest apart): the recipe's perplexity is that of the same folder with norm_topk_prob true.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-hf-load shared-cache
IDS="1 5 9 23 7 100 3 44 12 9 8 77 66 55 4 3 2 1 0 99 17 18 19 20"
FLOAT_KEYS='attention_dropout|attn_logit_softcapping|final_logit_softcapping|router_aux_loss_coef|routed_scaling_factor|rope_theta|swiglu_limit|partial_rotary_factor'

# ints_under_float_keys FILE: the members of FILE transformers declares float that are written as integers
ints_under_float_keys() { grep -E "\"($FLOAT_KEYS)\":[[:space:]]*-?[0-9]+[,}[:space:]]*$" "$1" | grep -v '\.'; }

for f in gemma2 gemma3 gemma4_text granitemoehybrid gpt_oss; do
    run -e "synth family $f $f"
    [ "$(rc)" = 0 ] || { fail "synth $f: [$(cat err.txt)]"; continue; }
    bad=$(ints_under_float_keys $f/config.json)
    [ -z "$bad" ] && pass=$((pass + 1)) || fail "$f config.json: integers under float members: [$bad]"
done
grep -qE '"final_logit_softcapping":[[:space:]]*10\.0' gemma2/config.json && pass=$((pass + 1)) \
    || fail "gemma2: final_logit_softcapping not 10.0 [$(grep softcapping gemma2/config.json)]"
run -e "load gemma2; info"
grep -q "10" out.txt && [ "$(rc)" = 0 ] && pass=$((pass + 1)) || fail "gemma2 with 10.0 does not load: [$(cat err.txt)]"

run -e "load $ATTNLAB_SRC/tests/models/stories260K-hf; convert mla kv-rank 8; export mla_st"
[ "$(rc)" = 0 ] || fail "convert mla export: [$(cat err.txt)]"
grep -qE '"routed_scaling_factor":[[:space:]]*1\.0,' mla_st/config.json && pass=$((pass + 1)) \
    || fail "mla export: routed_scaling_factor [$(grep routed_scaling mla_st/config.json)]"
bad=$(ints_under_float_keys mla_st/config.json)
[ -z "$bad" ] && pass=$((pass + 1)) || fail "mla export config.json: integers under float members: [$bad]"

for f in phi3 kimi_linear; do
    run -e "synth family $f $f"
    pad=$(tr -d ' \t\n' < $f/config.json | grep -o '"pad_token_id":[0-9]*' | cut -d: -f2)
    [ -n "$pad" ] && [ "$pad" -lt 256 ] && pass=$((pass + 1)) || fail "$f: pad_token_id [$pad] not inside the 256 ids"
done

run -e "synth family qwen3_5_moe q35"
cp -r q35 q35n && python3 -c 'import json, sys; p = sys.argv[1]; c = json.load(open(p)); c["text_config"]["norm_topk_prob"] = True; json.dump(c, open(p, "w"))' q35n/config.json
echo "$IDS" > ids.txt
a=$(ppl_of "load q35; ppl ids ids.txt seqlen 24") b=$(ppl_of "load q35n; ppl ids ids.txt seqlen 24")
case $a in ERR*) fail "qwen3_5_moe ppl: $a" ;; *) [ "$a" = "$b" ] && pass=$((pass + 1)) \
    || fail "qwen3_5_moe: ppl $a, $b with norm_topk_prob true (its router renormalises always)" ;; esac
cli_done
