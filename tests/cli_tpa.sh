#!/usr/bin/env bash
# cli_tpa.sh -- the TPA commands through `attnlab -e`: kv-cache (Table 1 rows for demo-llama, the
# exact CSV header, one scheme, overridden ranks, the rows of the model as loaded and of its
# conversions), convert tpa (missing / impossible ranks, MLA refused, the exact rank reproducing the
# model, a lower rank with its cache and report CSV), export into a new folder (refused into a
# non-empty one or without a conversion), check of the session and of the export (exact: PASS), the
# removed duplicate names, and Lua access to the results.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-tpa shared-cache
cd "$T" || exit 1

# ---- Table 1 for demo-llama (hidden 256, 8 heads, 2 KV heads, head dim 32, bf16: 2 bytes)
run -e "load demo-llama; kv-cache to kv.csv"
[ "$(rc)" = 0 ] || fail "kv-cache: rc $(rc) [$(cat err.txt)]"
[ "$(head -1 kv.csv)" = "scheme,kv_values_per_token,kv_bytes_per_token,attn_params" ] || fail "kv.csv header: [$(head -1 kv.csv)]"
grep -qx "MHA,512,1024,262144" kv.csv || fail "MHA row: [$(cat kv.csv)]"
grep -qx "MQA,64,128,147456" kv.csv || fail "MQA row"
grep -qx "GQA,128,256,163840" kv.csv || fail "GQA row"
grep -qx "TPA,160,320,167936" kv.csv || fail "TPA row"
grep -qx "TPA-nonctx-A,128,256,147536" kv.csv || fail "nonctx-A row"
grep -qx "TPA-nonctx-B,32,64,86336" kv.csv || fail "nonctx-B row"
grep -qx "demo-llama as loaded (GQA; 1024 bytes per token in 4 layers),128,256,163840" kv.csv || fail "loaded row"
[ "$(wc -l < kv.csv)" = 10 ] || fail "kv.csv rows: 8 schemes + as loaded [$(cat kv.csv)]"
grep -q "no conversion of demo-llama in this session" out.txt || fail "no-conversion note: [$(cat out.txt)]"
run -e "load demo-llama; kv-cache family tpa-kvonly rk 1 rv 3 bytes 4"
[ "$(rc)" = 0 ] && grep -Eq "^TPA-KVonly +160 +640 +172032$" out.txt && [ "$(grep -c '^TPA' out.txt)" = 1 ] \
    || fail "one scheme with ranks: [$(cat out.txt)] [$(cat err.txt)]"
run -e "load demo-llama; kv-cache groups 3"
[ "$(rc)" = 1 ] && grep -q "groups 3 must divide the 8 query heads" err.txt || fail "bad groups: [$(cat err.txt)]"

# ---- convert tpa errors
run -e "load demo-llama; convert tpa"
[ "$(rc)" = 1 ] && grep -q "convert tpa needs a rank: kv-rank R" err.txt || fail "missing rank: [$(cat err.txt)]"
run -e "load demo-llama; convert tpa kv-rank 3"
[ "$(rc)" = 1 ] && grep -q "k-rank 3: demo-llama has 2 KV heads" err.txt || fail "rank above G: [$(cat err.txt)]"
run -e "load demo-llama; convert tpa kv-rank 33 form b"
[ "$(rc)" = 1 ] && grep -q "k-rank 33: demo-llama has 32 head dims" err.txt || fail "rank above d: [$(cat err.txt)]"
run -e "load demo-llama; convert tpa kv-rank 1 k-rank 1"
[ "$(rc)" = 1 ] && grep -q "not both" err.txt || fail "kv-rank with k-rank: [$(cat err.txt)]"
run -e "load demo-r1; convert tpa kv-rank 1"
[ "$(rc)" = 1 ] && grep -q "is MLA" err.txt || fail "MLA refused: [$(cat err.txt)]"
run -e "load demo-llama; export somewhere"
[ "$(rc)" = 1 ] && grep -q "nothing to export" err.txt && [ ! -e somewhere ] || fail "export without a conversion: [$(cat err.txt)]"
run -e "check"
[ "$(rc)" = 1 ] && grep -q "check: nothing to check" err.txt || fail "check without a conversion: [$(cat err.txt)]"
for old in tpa-convert tpa-export tpa-check kv-table export-kvsvd; do
    run -e "$old"
    [ "$(rc)" = 1 ] && grep -q "unknown command '$old'" err.txt || fail "$old still a command: [$(cat err.txt)]"
done

# ---- exact conversions check exact, in the session and exported
run -e "load demo-llama as d; convert tpa kv-rank 2 to a.csv; check; export ex-a; check ex-a"
[ "$(rc)" = 0 ] || fail "exact form a: rc $(rc) [$(cat err.txt)]"
grep -q "converted layers 0-3 of d to non-contextual TPA, form a: R_K 2, R_V 2 .*: exact" out.txt || fail "narration: [$(head -3 out.txt)]"
grep -q "KV cache per token per layer: 128 -> 128 values (100.0%)" out.txt || fail "exact cache"
[ "$(head -1 a.csv)" = "layer,k_energy,v_energy,k_err,v_err,score_err,out_err" ] || fail "a.csv header: [$(head -1 a.csv)]"
[ "$(wc -l < a.csv)" = 5 ] || fail "a.csv rows"
awk -F, 'NR > 1 && !($7 < 1e-5 && $6 < 1e-5) { bad = 1 } END { exit bad }' a.csv || fail "exact errors: [$(cat a.csv)]"
[ "$(grep -c 'claims to be exact: largest output error .* <= 1e-04: PASS' out.txt)" = 2 ] || fail "two PASS checks: [$(cat out.txt)]"
[ -s ex-a/tpa_manifest.json ] && [ -s ex-a/tpa_factors.safetensors ] || fail "export files"
grep -q '"format":	"attnlab-tpa"' ex-a/tpa_manifest.json || fail "manifest format"
run -e "load demo-llama as d; convert tpa kv-rank 32 form b; check"
[ "$(rc)" = 0 ] && grep -q "PASS" out.txt || fail "exact form b: [$(cat out.txt)] [$(cat err.txt)]"

# ---- the check fails where exactness is claimed and not met: the export against another model
run -e "synth demo-llama other seed 9; load other as o; check ex-a source o"
[ "$(rc)" = 1 ] && grep -q "check failed: layer 0's output error .* is above 1e-04" err.txt \
    && grep -q "claims to be exact: largest output error .* > 1e-04: FAIL" out.txt || fail "failing check: [$(cat out.txt)] [$(cat err.txt)]"

# ---- a lower rank: the cache shrinks, the report says what it cost
run -e "load demo-llama as d; convert tpa k-rank 8 v-rank 4 form b to b.csv; kv-cache; export ex-b; check ex-b source d"
[ "$(rc)" = 0 ] || fail "form b low rank: rc $(rc) [$(cat err.txt)]"
grep -q "KV cache per token per layer: 128 -> 24 values (18.8%) = (R_K + R_V) G" out.txt || fail "form b cache: [$(cat out.txt)]"
grep -Eq "^convert tpa \(form b R_K 8 R_V 4; 192 bytes per token in 4 layers; x0.1875\) +24 +48 +137600$" out.txt || fail "kv-cache conversion row: [$(cat out.txt)]"
grep -q "approximate conversion (no exactness claimed)" out.txt || fail "approximate check"
awk -F, 'NR > 1 && !($7 > 1e-3) { bad = 1 } END { exit bad }' b.csv || fail "approximate errors: [$(cat b.csv)]"
run -e "load demo-llama; convert tpa kv-rank 1; export ex-a"
[ "$(rc)" = 1 ] && grep -q "is not empty" err.txt || fail "export into a non-empty folder: [$(cat err.txt)]"
run -e "check nowhere"
[ "$(rc)" = 1 ] && grep -q "nowhere: no such folder" err.txt || fail "check of a missing folder: [$(cat err.txt)]"

# ---- every method at one budget
run -e "load demo-llama; compare kv-budget 96 layers 1-2 tokens 32 to cmp.csv"
[ "$(rc)" = 0 ] || fail "compare: rc $(rc) [$(cat err.txt)]"
[ "$(head -1 cmp.csv)" = "layer,method,kv_values,setting,score_err,out_err" ] || fail "cmp.csv header: [$(head -1 cmp.csv)]"
[ "$(wc -l < cmp.csv)" = 13 ] || fail "cmp.csv rows: $(wc -l < cmp.csv)"
for meth in farr transmla kqsvd tpa-a tpa-b mean-pool; do
    grep -q "^1,$meth," cmp.csv || fail "compare row $meth"
done
grep -q '^1,farr,96,"\?r_v 16 (keys whole under RoPE)' cmp.csv || fail "FaRR row: [$(grep farr cmp.csv)]"
grep -q "^1,mean-pool,64,1 KV head (of 2)," cmp.csv || fail "mean-pool row: [$(grep mean-pool cmp.csv)]"
grep -q "mean output error over the layers: farr" out.txt || fail "compare summary: [$(cat out.txt)]"
run -e "load demo-llama; compare"
[ "$(rc)" = 1 ] && grep -q "compare needs kv-budget B" err.txt || fail "compare without a budget: [$(cat err.txt)]"
run -e "load demo-r1; compare kv-budget 64"
[ "$(rc)" = 1 ] && grep -q "is MLA" err.txt || fail "compare on MLA: [$(cat err.txt)]"

# ---- the activation-weighted fit follows the session's calibration (needs a tokenizer: stories260K)
M="${ATTNLAB_MODELS:-}/stories260K-hf"
if [ -d "$M" ]; then
    awk 'BEGIN { srand(3); split("once upon a time there was a little girl named lily she liked to play with her ball", w);
                 for (i = 0; i < 2000; i++) printf "%s ", w[int(rand() * 18) + 1] }' > story.txt
    run -e "load $M as s; convert tpa kv-rank 2 fit calib"
    [ "$(rc)" = 1 ] && grep -q "has no calibration of s" err.txt || fail "fit calib without calibration: [$(cat err.txt)]"
    run -e "load $M as s; calibrate story.txt samples 4 seqlen 64 inputs on; convert tpa kv-rank 2 to w.csv; convert tpa kv-rank 2 fit weights to u.csv; compare kv-budget 32 layers 0-1 tokens 16"
    [ "$(rc)" = 0 ] || fail "calibrated convert tpa: rc $(rc) [$(cat err.txt)]"
    grep -q "fit: activation-weighted by the calibration's attention inputs (256 tokens per layer)" out.txt \
        && grep -q "fit: the weights' own" out.txt || fail "fit narration: [$(cat out.txt)]"
    grep -q "relative Frobenius errors on 64 random Gaussian tokens, seed 20250604 + layer (with the calibration's second moment)" out.txt || fail "weighted inputs"
    [ "$(wc -l < w.csv)" = 6 ] && [ "$(wc -l < u.csv)" = 6 ] || fail "calibrated CSVs"
    grep -q "relative Frobenius errors on 16 random Gaussian tokens, seed 20250607 (with the calibration's second moment per layer" out.txt \
        || fail "calibrated compare: [$(tail -20 out.txt)]"
fi

# ---- Lua gets the rows
run -e "load demo-llama; lua print(attn.convert('tpa', {['kv-rank'] = 1})[4].out_err > 0.01, attn.kv_cache({family = 'mha'})[1].kv_values_per_token)"
[ "$(rc)" = 0 ] && grep -Eq "^true\s+512$" out.txt || fail "Lua: [$(cat out.txt)] [$(cat err.txt)]"

# ---- lint names attnlab's own layout: no engine loads a TPA export
run -e "lint ex-b"
[ "$(rc)" = 0 ] && grep -q "an attnlab TPA export (tpa_manifest.json): attnlab's own layout" out.txt \
    && [ "$(grep -c ' will not load' out.txt)" = 4 ] || fail "lint ex-b: [$(cat out.txt) $(cat err.txt)]"

cli_done
