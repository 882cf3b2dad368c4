#!/usr/bin/env bash
# cli_pipeline.sh -- issue 32's pipeline (calibrate, convert mla stats act, export) keeps its results
# while it stops writing a scratch export: convert mla's perplexity after runs the converted layers
# in memory at the export's norm eps (it used to export the model in float32 to $TMPDIR and read it
# back), equal to the number the export route printed (recorded) and to `ppl` of the reloaded f32
# export; with $TMPDIR unusable it is still measured; the exported bytes are those of before.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-pipeline shared-cache
cd "$T" || exit 1
# |a - b| <= tol * |b|
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
cut -d' ' -f257-300 ids.txt > valid.txt
CONV="convert mla kv-rank 48 rope-dim 16 ids ids.txt samples 4 seqlen 32"

# ---- the perplexity after: in memory, the export route's numbers (recorded from it: 5.75765 -> 6.10081)
run -e "load demo-llama as d; $CONV; ppl ids valid.txt seqlen 32 to p.csv; export e32 dtype f32; export e"
[ "$(rc)" = 0 ] || fail "pipeline: rc $(rc) [$(cat err.txt)]"
line=$(grep "^perplexity on 42 tokens, held out" out.txt)
ok "after: the export's norm eps, in memory" has "$line" "after = the converted layers in memory at its DeepSeek-V3 export's norm eps"
ok "before / after as the export route printed them" has "$line" "316.602 before, 446.22 after (+40.94%; log 5.75765 -> 6.10081)"
after=$(echo "$line" | sed -E 's/.*log [0-9.]+ -> ([0-9.]+)\).*/\1/')
ok "ppl of the conversion is convert's after" near "$(sed -n 2p p.csv | cut -d, -f2)" "$after" 2e-6
run -e "load e32 as x; ppl ids valid.txt seqlen 32 to x.csv"
ok "the reloaded f32 export's ppl is the after" near "$(sed -n 2p x.csv | cut -d, -f2)" "$after" 2e-6

# ---- nothing written to $TMPDIR: an unusable one does not stop the perplexity (the old route failed)
TMPDIR="$T/nowhere" run -e "load demo-llama as d; $CONV"
ok "no scratch export: measured with TMPDIR unusable" grep -q "^perplexity on 42 tokens, held out.*log 5.75765 -> 6.10081" out.txt
ok "  and no warning" hasnt "$(cat err.txt)" "perplexity not measured"

# ---- the exported bytes are those of before this change (hashes recorded from the route before it, d3b3959, on the build machine)
ok "export's weights unchanged" [ "$(sha256sum < e/model.safetensors | cut -c1-64)" = be122b9bbc6d09906f65d3b34878282c13767aa967fe5a960f77b01ebac7dc69 ]
ok "export's check inputs unchanged" [ "$(sha256sum < e/check_inputs.safetensors | cut -c1-64)" = cad818c5be3cb4a94011f2d4a12269fdf430f308cf8a4bda9d09eaebf4dad234 ]
ok "export's config unchanged" [ "$(sha256sum < e/config.json | cut -c1-64)" = 20b4dc926029d81e0c20a0840a7724eff74e1fd27010578513eeff5afea7f6fa ]   # dvc, s12: rope_theta 10000.0, attention_dropout 0.0, routed_scaling_factor 1.0 (N.0 for transformers 5), nothing else
cli_done
