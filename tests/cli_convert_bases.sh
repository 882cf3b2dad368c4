#!/usr/bin/env bash
# cli_convert_bases.sh -- issue 30 section 1: conversions of Gemma 3 (per-layer RoPE bases: the sliding layers turn
# at rope_local_base_freq without rope_scaling, the full ones at rope_theta with linear x2; sliding windows; per-head
# q/k norms) and of Nemotron-H (attention without RoPE between Mamba-2 layers). Both were refused by convert mla
# before ("per-layer RoPE bases are not computed by attnlab yet", "RoRoPE needs rotary keys").
# - gemma3_text and gemma3 (its text tower): `convert mla kv-rank full qk-norm keep` keeps the source's ppl to 1e-6
#   and `check` agrees with the report; the same with rope_local_base_freq 1e6 (another source ppl, which the
#   conversion keeps too: the conversion turns each layer at its own base);
# - qk-norm fold and drop run on it (approximations: their ppl is not the source's);
# - the stock export refuses, naming the per-layer RoPE base; `export DIR format attnlab` (fold) loads back with the
#   session's ppl to 1e-6; with the exported rope_local_base_freq changed the reload's ppl moves (the reader uses it);
# - nemotron_h: `convert mla kv-rank full` (RoPE dims 0: the whole key in the latent) on its attention layers keeps
#   the source's ppl to 1e-6, check's errors < 1e-5; kv-rank 16 moves it; with activation statistics (ids FILE)
#   `convert mla-table kv-ranks full` keeps it in the transmla and care rows (out_err < 1e-5, ppl to the printed digits).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-convert-bases shared-cache
cd "$T" || exit 1

seq 1 40 | awk '{printf "%d ", ($1*37)%250+1}' >x40.ids

"$B" -e "synth family gemma3_text g3; synth family gemma3 g3m; synth family nemotron_h nh" >/dev/null 2>&1 \
    || fail "synth families"
# g3l: g3 with its sliding layers at the full layers' base
cp -r g3 g3l && sed -i 's/"rope_local_base_freq":[[:space:]]*10000/"rope_local_base_freq": 1000000/' g3l/config.json
grep -q '"rope_local_base_freq": 1000000' g3l/config.json || fail "g3l: rope_local_base_freq not rewritten"

for m in g3 g3m g3l; do
    p0=$(ppl_of "load $m; ppl ids x40.ids")
    p1=$(ppl_of "load $m; convert mla kv-rank full qk-norm keep ppl off; ppl ids x40.ids")
    case "$p0$p1" in *ERR*) fail "$m: ppl [$p0] [$p1]"; continue ;; esac
    near "$p1" "$p0" 1e-6 || fail "$m: convert mla kv-rank full qk-norm keep changes ppl $p0 -> $p1"
    eval "src_$m=$p0"
    run -e "load $m; convert mla kv-rank full qk-norm keep ppl off; check"
    ok "$m: check of the keep conversion agrees with its report" grep -q "out_err within 0 of it in all 6 layers" out.txt
    e=$(max_err 3)
    awk -v e="$e" 'BEGIN { exit !(e < 1e-5) }' || fail "$m: keep at full rank: check's out_err $e"
done
# the two bases give two models: a conversion that turned the sliding layers at rope_theta would give g3l's ppl on g3
near "${src_g3:-0}" "${src_g3l:-1}" 1e-4 && fail "g3 and g3l have the same ppl (${src_g3:-} / ${src_g3l:-}): the local base is not seen"

for q in fold drop; do
    p=$(ppl_of "load g3; convert mla kv-rank full qk-norm $q ppl off; ppl ids x40.ids")
    case $p in ERR:*) fail "g3: qk-norm $q: $p" ;;
        *) near "$p" "${src_g3:-0}" 1e-4 && fail "g3: qk-norm $q at full rank keeps ppl $p: it approximates the norm" ;; esac
done

run -e "load g3; convert mla kv-rank full qk-norm fold ppl off; export g3-ds"
ok "g3: the stock export is refused" test "$(rc)" = 1
ok "  naming the per-layer RoPE base" grep -q "per-layer RoPE base (DeepSeek-V3 has one rope_theta for every layer" err.txt
p_s=$(ppl_of "load g3; convert mla kv-rank 24 qk-norm fold ppl off; export g3-al format attnlab; ppl ids x40.ids")
p_r=$(ppl_of "load g3-al; ppl ids x40.ids")
case "$p_s$p_r" in *ERR*) fail "g3: format attnlab [$p_s] [$p_r]" ;;
    *) near "$p_r" "$p_s" 1e-6 || fail "g3: format attnlab reload ppl $p_r, the session's $p_s" ;; esac
cp -r g3-al g3-al2 && sed -i 's/"rope_local_base_freq":[[:space:]]*10000/"rope_local_base_freq": 1000000/' g3-al2/config.json
p_x=$(ppl_of "load g3-al2; ppl ids x40.ids")
case $p_x in ERR:*) fail "g3-al2: $p_x" ;;
    *) near "$p_x" "$p_s" 1e-4 && fail "g3-al2: the reader ignores rope_local_base_freq (ppl $p_x)" ;; esac
run -e "check g3-al"
ok "g3: check DIR of the attnlab export runs" test "$(rc)" = 0

n0=$(ppl_of "load nh; ppl ids x40.ids")
n1=$(ppl_of "load nh; convert mla kv-rank full ppl off; ppl ids x40.ids")
n2=$(ppl_of "load nh; convert mla kv-rank 16 ppl off; ppl ids x40.ids")
case "$n0$n1$n2" in *ERR*) fail "nemotron_h: ppl [$n0] [$n1] [$n2]" ;;
    *) near "$n1" "$n0" 1e-6 || fail "nemotron_h: convert mla kv-rank full changes ppl $n0 -> $n1"
       near "$n2" "$n0" 1e-4 && fail "nemotron_h: kv-rank 16 keeps ppl $n2" ;; esac
run -e "load nh; convert mla kv-rank full ppl off; check"
ok "nemotron_h: converted its attention layers only, with no RoPE part" grep -q "^converted layers 1, 4 of nh to MLA: .*RoPE dims 0" out.txt
ok "  check agrees with the report" grep -q "out_err within 0 of it in all 2 layers" out.txt
e=$(max_err 3)
awk -v e="$e" 'BEGIN { exit !(e < 1e-5) }' || fail "nemotron_h: full rank: check's out_err $e"
# with activation statistics (the Mamba-2 / MLP layers see no attention input: calib_input_arrays leaves them out)
seq 1 300 | awk '{printf "%d ", ($1*53)%250+1}' >c300.ids
run -e "load nh; set format csv; convert mla-table kv-ranks full strategies transmla,care ids c300.ids seqlen 50"
ok "nemotron_h: convert mla-table with activation statistics runs" test "$(rc)" = 0
base=$(sed -n 's/^perplexity on .*: original \([0-9.e+-]*\) (log.*/\1/p' out.txt err.txt | head -1)
n=0
for p in $(awk -F, '($2 == "transmla" || $2 == "care") && $11 < 1e-5 { print $NF }' out.txt); do
    [ -n "$base" ] && near "$p" "$base" 1e-5 && n=$((n + 1))     # base printed to 6 digits
done
[ "$n" = 2 ] || fail "nemotron_h: mla-table at full rank: $n of 2 rows keep ppl [$base] [$(cat out.txt)]"
cli_done
