#!/usr/bin/env bash
# cli_ppl_pair.sh -- issue 32: the perplexity before and after a transformation in one pass over the weights
# (xform_ppl_pair and TPA's check, by fwd_ppl_pair: each layer runs the source's stream and the transformed one,
# so each layer's weights are read once for both). The printed before / after lines are the two-pass route's
# (recorded from it, main 774d046), on models of several families: `truncate vo` then `check` (held-out windows
# of a calibrated session, and `ids FILE`), `convert tpa` (its report and `check`), on Llama (GQA), Qwen3 (QK
# norms), DeepSeek-V3 (MLA), SmolLM3 (NoPE layers), the hybrids nemotron_h and granitemoehybrid, and Gemma 4
# (KV-shared layers: the pair's fallback, the two passes one after the other). `check`'s after is `ppl`'s number
# and its before `ppl source`'s. `check` after `convert mla` (mla_export.c's check_nll, the session's stock layers
# swapped into the source) likewise, f32 and bf16 modes (main f67e5e9's two-pass lines).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-ppl-pair shared-cache
cd "$T" || exit 1
awk 'BEGIN { s = 7; for (i = 0; i < 600; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
awk 'BEGIN { s = 11; for (i = 0; i < 1100; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > more.txt
for fam in qwen3 smollm3 nemotron_h granitemoehybrid gemma4_text; do "$B" -e "synth family $fam $fam" > /dev/null 2>&1; done
"$B" -e "synth demo-r1 r1" > /dev/null 2>&1
CAL="calibrate ids ids.txt samples 4 seqlen 32"

# the perplexity lines of a session, each with the model's name before it, into got.txt
lines() {
    run -e "load $1 as s; $2"
    [ "$(rc)" = 0 ] || fail "$1: rc $(rc) [$(cat err.txt)]"
    grep "^perplexity on" out.txt | sed "s|^|$1: |" >> got.txt
}
: > got.txt
lines demo-llama "$CAL; truncate vo tau 0.99; check; check ids more.txt; convert tpa kv-rank 1; check; check ids more.txt"
lines qwen3 "$CAL; truncate vo tau 0.99; check; check ids more.txt"
lines r1 "$CAL; truncate vo tau 0.99; check; check ids more.txt"
for m in smollm3 nemotron_h granitemoehybrid; do
    lines $m "truncate vo tau 0.99; check ids more.txt; convert tpa kv-rank 1 ppl off; check ids more.txt"
done
lines gemma4_text "truncate vo tau 0.99 layers 0-2; check ids more.txt"
lines demo-llama "$CAL; convert mla kv-rank 16; check; check ids more.txt"
lines demo-llama-bf16 "set compute bf16; $CAL; convert mla kv-rank 16; check; check ids more.txt"
H="held out (the validation split of ids.txt, tokens 544-599), windows of 32"
M="more.txt (given: 1100 tokens), windows of 512"
cat > want.txt <<EOF2
demo-llama: perplexity on 54 tokens, $H: 453.673 before (source), 453.524 after (the working copy, in the session) (-0.03%; log 6.11738 -> 6.11705)
demo-llama: perplexity on 1097 tokens, $M: 394.3 before (source), 394.357 after (the working copy, in the session) (+0.01%; log 5.97711 -> 5.97726)
demo-llama: perplexity on 54 tokens, $H: 453.673 before (source), 457.787 after (the converted layers swapped in memory, run by the forward pass) (+0.91%; log 6.11738 -> 6.12640)
demo-llama: perplexity on 54 tokens, $H: 453.673 before (source), 457.787 after (the TPA layers swapped in) (+0.91%; log 6.11738 -> 6.12640)
demo-llama: perplexity on 1097 tokens, $M: 394.3 before (source), 395.949 after (the TPA layers swapped in) (+0.42%; log 5.97711 -> 5.98129)
qwen3: perplexity on 54 tokens, $H: 355.946 before (source), 348.733 after (the working copy, in the session) (-2.03%; log 5.87478 -> 5.85431)
qwen3: perplexity on 1097 tokens, $M: 411.353 before (source), 410.459 after (the working copy, in the session) (-0.22%; log 6.01945 -> 6.01728)
r1: perplexity on 54 tokens, $H: 457.787 before (source), 463.148 after (the working copy, in the session) (+1.17%; log 6.12640 -> 6.13805)
r1: perplexity on 1097 tokens, $M: 414.405 before (source), 413.265 after (the working copy, in the session) (-0.28%; log 6.02684 -> 6.02409)
smollm3: perplexity on 1097 tokens, $M: 441.75 before (source), 440.639 after (the working copy, in the session) (-0.25%; log 6.09074 -> 6.08822)
smollm3: perplexity on 1097 tokens, $M: 441.75 before (source), 428.915 after (the TPA layers swapped in) (-2.91%; log 6.09074 -> 6.06126)
nemotron_h: perplexity on 1097 tokens, $M: 434.597 before (source), 434.557 after (the working copy, in the session) (-0.01%; log 6.07442 -> 6.07433)
nemotron_h: perplexity on 1097 tokens, $M: 434.597 before (source), 436.886 after (the TPA layers swapped in) (+0.53%; log 6.07442 -> 6.07967)
granitemoehybrid: perplexity on 1097 tokens, $M: 262.925 before (source), 262.927 after (the working copy, in the session) (+0.00%; log 5.57187 -> 5.57188)
granitemoehybrid: perplexity on 1097 tokens, $M: 262.925 before (source), 262.873 after (the TPA layers swapped in) (-0.02%; log 5.57187 -> 5.57167)
gemma4_text: perplexity on 1097 tokens, $M: 411.486 before (source), 409.942 after (the working copy, in the session) (-0.38%; log 6.01978 -> 6.01602)
demo-llama: perplexity on 54 tokens, $H: 453.673 before, 473.707 after (+4.42%; log 6.11738 -> 6.16059), after = the converted layers in memory at its DeepSeek-V3 export's norm eps, run by the forward pass (as \`ppl\` runs it; nothing written)
demo-llama: perplexity on 54 tokens, $H: 453.673 before (source), 473.707 after (the export, as stock engines run it) (+4.42%; log 6.11738 -> 6.16059)
demo-llama: perplexity on 1097 tokens, $M: 394.3 before (source), 385.337 after (the export, as stock engines run it) (-2.27%; log 5.97711 -> 5.95412)
demo-llama-bf16: perplexity on 54 tokens, $H: 453.704 before, 473.793 after (+4.43%; log 6.11745 -> 6.16077), after = the converted layers in memory at its DeepSeek-V3 export's norm eps, run by the forward pass (as \`ppl\` runs it; nothing written)
demo-llama-bf16: perplexity on 54 tokens, $H: 453.704 before (source), 473.793 after (the export, as stock engines run it) (+4.43%; log 6.11745 -> 6.16077)
demo-llama-bf16: perplexity on 1097 tokens, $M: 394.292 before (source), 385.296 after (the export, as stock engines run it) (-2.28%; log 5.97709 -> 5.95401)
EOF2
ok "the two-pass route's lines" cmp -s got.txt want.txt
diff want.txt got.txt >&2

# check's before and after are `ppl source` and `ppl` on the same text (their json, at the line's 6 digits)
six() { awk -v p="$1" 'BEGIN { printf "%.6g", p }'; }
for m in demo-llama gemma4_text; do
    L=""
    [ $m = gemma4_text ] && L="layers 0-2"
    b=$(ppl_of "load $m as s; truncate vo tau 0.99 $L; ppl source ids more.txt")
    a=$(ppl_of "load $m as s; truncate vo tau 0.99 $L; ppl ids more.txt")
    ok "$m: check's before is ppl source's ($b)" grep -q "^$m: .*$M: $(six "$b") before" got.txt
    ok "$m: check's after is ppl's ($a)" grep -q "^$m: .*$M: [0-9.]* before (source), $(six "$a") after (the working copy" got.txt
done
cli_done
