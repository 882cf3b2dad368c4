#!/bin/bash
# cli_hybrid_sweeps.sh -- sweeps over a hybrid (issue 27) name its attention layers: on 8-layer
# qwen3_next and qwen3_5_moe checkpoints (synth family, stacked twice by tests/hybrid_stack.py: Gated
# DeltaNet layers 0-2 and 4-6, attention layers 3 and 7, layer 7's KV heads swapped so the two differ)
# every command over `all` or a layer range runs layers 3 and 7 only and says so in one line; naming a
# linear layer alone is an error naming the attention layers. Checked: ranks vo (table, CSV, JSON, Lua)
# equal to the single-layer runs; a range of linear layers; plot vo-ranks / ranks-by-layer (panel and
# axis labels are the real layer numbers, read from the SVG); diff ranks; spectrum / fuse of layer 7;
# truncate (rows of 3 and 7) and its export (every linear-layer tensor bit for bit, loads back with
# the kept rank, ppl runs); kv-cache and calibrate (rows of 3 and 7).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-hybrid-sweeps
cd "$T" || exit 1
HERE=$(cd "$(dirname "$0")" && pwd)
NOTE="layers 0-2, 4-6 are Gated DeltaNet linear attention: sweeping the 2 attention layers 3, 7"
cli_ids 40 ids.txt

ok "help ranks: a hybrid's all / ranges sweep the attention layers" has "$(e "help ranks" | tr '\n' ' ')" "On a hybrid .* \`all\` and ranges sweep the softmax-attention layers and say which they left out"
ok "help truncate: a hybrid's attention layers" has "$(e "help truncate" | tr '\n' ' ')" "On a hybrid it truncates the range's softmax-attention layers"
for fam in qwen3_next qwen3_5_moe; do
    run -e "synth family $fam $T/$fam-4"
    python3 "$HERE/hybrid_stack.py" "$T/$fam-4" "$T/$fam" || fail "$fam: hybrid_stack.py"
    d=$T/$fam

    out=$(e "load $d; info")
    ok "$fam: info: ranks vo sweeps the attention layers" has "$out" "ranks vo  *yes: on the softmax-attention layers (3, 7; \`all\` and ranges sweep those, a linear layer alone is an error)"

    # ---- ranks vo: the attention layers only, said in one line; rows equal the single-layer runs
    run -e "load $d; ranks vo to $T/$fam-all.csv; ranks vo layer 3 to $T/$fam-3.csv; ranks vo layer 7 to $T/$fam-7.csv"
    ok "$fam: ranks vo all runs" test "$(rc)" = 0
    ok "$fam: the note names the linear and the swept layers" grep -qx "$NOTE" out.txt
    ok "$fam: the note once (single layers say none)" test "$(grep -c "Gated DeltaNet" out.txt)" = 1
    ok "$fam: CSV rows of layers 3 and 7 only" test "$(cut -d, -f1 "$T/$fam-all.csv" | tail -n +2 | tr '\n' ' ')" = "3 3 3 3 7 7 7 7 "
    ok "$fam: rows equal layer 3's then layer 7's" test "$(tail -n +2 "$T/$fam-all.csv")" = "$(tail -n +2 "$T/$fam-3.csv"; tail -n +2 "$T/$fam-7.csv")"
    ok "$fam: layer 3 KV head 0 planted (V 6, VO 6)" grep -qx "3,0,6,32,6" "$T/$fam-all.csv"
    ok "$fam: layer 7 KV head 1 holds it (swapped)" grep -qx "7,2,6,32,6" "$T/$fam-all.csv"
    ok "$fam: layer 7 head 0 flat" grep -qx "7,0,32,32,32" "$T/$fam-all.csv"
    ok "$fam: the summary names layers 3, 7" grep -q "^$fam: VO effective ranks at tau 0.999, layers 3, 7: fused 6-32 (mean 19.0) of 32, 8 heads$" out.txt

    run -e "load $d; set format json; ranks vo"
    ok "$fam: JSON lists layers 3 and 7 only" test "$(grep -o '"layer": [0-9]*' out.txt | tr '\n' ' ')" = '"layer": 3 "layer": 3 "layer": 3 "layer": 3 "layer": 7 "layer": 7 "layer": 7 "layer": 7 '
    ok "$fam: JSON: the note on stderr" grep -qx "$NOTE" err.txt
    run -e 'load '"$d"'; lua local s = "" for _, r in ipairs(attn.ranks("vo")) do s = s .. r.layer .. ":" .. r.rank_vo .. " " end print("lua " .. s)'
    ok "$fam: Lua attn.ranks: the rows of 3 and 7" grep -qx "lua 3:6 3:6 3:32 3:32 7:32 7:32 7:6 7:6 " out.txt

    # ---- a linear layer named alone, a range of linear layers, a range with one attention layer
    out=$(e "load $d; ranks vo layer 0")
    ok "$fam: layer 0 alone refused by name" has "$out" "error: ranks: layer 0 of this $fam model is a Gated DeltaNet linear-attention layer"
    ok "$fam: ... naming the attention layers" has "$out" "its softmax-attention layers are 3, 7"
    out=$(e "load $d; ranks vo layers 4-6")
    ok "$fam: a range of linear layers refused" has "$out" "error: ranks: layers 4-6 of this $fam model are all Gated DeltaNet linear attention"
    run -e "load $d; ranks vo layers 2-5 to $T/$fam-25.csv"
    ok "$fam: layers 2-5: one attention layer, said" grep -qx "layers 2, 4-5 are Gated DeltaNet linear attention: sweeping the 1 attention layer 3" out.txt
    ok "$fam: layers 2-5: layer 3's rows" test "$(cat "$T/$fam-25.csv")" = "$(cat "$T/$fam-3.csv")"
    out=$(e "load $d; truncate vo rank 4 layers 1")
    ok "$fam: truncate of a linear layer refused" has "$out" "error: truncate: layer 1 of this $fam model is a Gated DeltaNet"

    for c in "spectrum vo layer 0 head 0" "fuse vo layer 5 head 1" "plot spectrum vo layer 6 head 0 to $T/x.png" "plot vo-ranks layer 4 to $T/x.png"; do
        out=$(e "load $d; $c")
        ok "$fam: $c: a clear error naming the attention layers" has "$out" "of this $fam model is a Gated DeltaNet linear-attention layer .*its softmax-attention layers are 3, 7"
    done

    # ---- plots: the real layer numbers
    run -e "load $d; plot vo-ranks to $T/$fam-grid.svg; plot ranks-by-layer vo to $T/$fam-bl.svg"
    ok "$fam: plots run" test "$(rc)" = 0
    ok "$fam: plots say the note" test "$(grep -cx "$NOTE" out.txt)" = 2
    ok "$fam: grid panels L3 and L7" test "$(svg_texts "$T/$fam-grid.svg" | grep -x 'L[0-9]*' | tr '\n' ' ')" = "L3 L7 "
    ok "$fam: ranks-by-layer x axis over the layers asked for, 0 to 7 (the linear ones shaded)" \
        test "$(svg_texts "$T/$fam-bl.svg" | grep -x '[0-9]' | head -8 | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 "

    # ---- diff ranks, spectrum and fuse of layer 7
    out=$(e "load $d; diff ranks vo $fam $fam")
    ok "$fam: diff ranks: the note" has "$out" "$NOTE"
    ok "$fam: diff ranks: 8 heads of layers 3 and 7" has "$out" "0 of 8 heads differ"
    out=$(e "load $d; spectrum vo layer 7 head 2; fuse vo layer 7 head 2")
    ok "$fam: spectrum of layer 7 head 2: rank 6 as in the table" has "$out" "effective rank 6 at tau 0.99, 6 at tau 0.999"
    ok "$fam: fuse of layer 7 head 2: V 6, O 32, VO 6" has "$out" "V 6, O 32, VO 6"

    # ---- truncate and its export: the linear layers untouched bit for bit, the export loads back
    run -e "load $d; truncate vo rank 4 to $T/$fam-tr.csv; export $T/$fam-ex format dense"
    ok "$fam: truncate + export run" test "$(rc)" = 0
    ok "$fam: truncate: the note" grep -qx "$NOTE" out.txt
    ok "$fam: truncate: rows of 3 and 7, then the total" test "$(cut -d, -f1,11 "$T/$fam-tr.csv" | tail -n +2 | tr '\n' ' ')" = "3,false 7,false ,true "
    ok "$fam: the KV cache mean over the 2 attention layers" grep -q "mean over the 2 layers): 128 -> 72 values" out.txt
    ok "$fam: export: 4 tensors rewritten" grep -q "4 rewritten" out.txt
    ok "$fam: truncate names layers 3, 7" grep -q "^truncated VO of layers 3, 7 (rank 4, policy head)" out.txt
    run -e "load $d; truncate vo rank 4 layers 3 to $T/$fam-tr3.csv; truncate vo rank 4 layers 7 to $T/$fam-tr7.csv; kv-cache"
    ok "$fam: truncate's rows equal layer 3's and layer 7's alone" test "$(sed -n 2,3p "$T/$fam-tr.csv")" = "$(sed -n 2p "$T/$fam-tr3.csv"; sed -n 2p "$T/$fam-tr7.csv")"
    ok "$fam: kv-cache's row of the truncation (layer 7 alone)" grep -q "^truncate (VO: V 4 dims per KV head in layer 7; K+V per token per layer 128 -> 100, mean over 2 layers" out.txt
    HERE="$HERE" python3 - "$d" "$T/$fam-ex" >check.txt <<'PY'
import os, re, sys
sys.path.insert(0, os.environ['HERE'])
import st_tensors
a, b = st_tensors.tensors(sys.argv[1]), st_tensors.tensors(sys.argv[2])
changed = sorted(k for k in a if a[k] != b.get(k))
linear = [k for k in a if 'linear_attn' in k]
print('names', sorted(a) == sorted(b))
print('linear', len(linear) > 0 and all(a[k] == b[k] for k in linear))
print('changed', ' '.join(re.sub(r'^.*layers\.', '', k) for k in changed))
PY
    ok "$fam: the export has the source's tensor names" grep -qx "names True" check.txt
    ok "$fam: every linear-attention tensor bit for bit" grep -qx "linear True" check.txt
    ok "$fam: only layers 3 and 7's v_proj / o_proj rewritten" grep -qx "changed 3.self_attn.o_proj.weight 3.self_attn.v_proj.weight 7.self_attn.o_proj.weight 7.self_attn.v_proj.weight" check.txt
    run -e "load $T/$fam-ex; ranks vo to $T/$fam-ex.csv; ppl ids ids.txt seqlen 40"
    ok "$fam: the export loads and runs" test "$(rc)" = 0
    ok "$fam: the export's VO ranks: 4 in layers 3 and 7" test "$(tail -n +2 "$T/$fam-ex.csv" | tr '\n' ' ')" = "3,0,4,4,4 3,1,4,4,4 3,2,4,4,4 3,3,4,4,4 7,0,4,4,4 7,1,4,4,4 7,2,4,4,4 7,3,4,4,4 "
    p1=$(awk '$1 == 39 {print $3}' out.txt)
    run -e "load $d; ppl ids ids.txt seqlen 40"
    p0=$(awk '$1 == 39 {print $3}' out.txt)
    ok "$fam: the export's ppl finite and not the source's ($p1, $p0)" awk -v a="$p1" -v b="$p0" 'BEGIN { exit !(a > 1 && b > 1 && a != b) }'

    run -e "load $d; truncate vo rank 4; export $T/$fam-fx format factors; check $T/$fam-fx"
    ok "$fam: factors export: layers 3 and 7's factors only" test "$(HERE="$HERE" python3 -c 'import os, sys
sys.path.insert(0, os.environ["HERE"])
import st_tensors
print(" ".join(sorted({k.split(".")[1] for k in st_tensors.tensors(sys.argv[1])})))' "$T/$fam-fx/farr")" = "3 7"
    ok "$fam: check: the export's fused maps are the plan's" grep -q "^PASS: the export's fused maps are the plan's" out.txt
    ok "$fam: check: 8 truncated heads" grep -q "8 truncated heads" out.txt
    ok "$fam: export: the re-encoded tensors' layers are 3, 7 (not a range 3-7)" grep -q "^re-encoded 4 changed tensors (self_attn.o_proj.weight, self_attn.v_proj.weight; layers 3, 7) F32 -> F32" out.txt

    # ---- kv-cache and calibrate: the attention layers
    out=$(e "load $d; kv-cache")
    ok "$fam: kv-cache: the note" has "$out" "layers 0-2, 4-6 are Gated DeltaNet linear attention: the KV cache is that of the 2 attention layers 3, 7"
    ok "$fam: kv-cache: 2 layers of 512 bytes" has "$out" "1024 bytes per token in 2 layers"
    run -e "load $d; calibrate ids ids.txt seqlen 20 to $T/$fam-cal.csv; calib info"
    ok "$fam: calibrate runs" test "$(rc)" = 0
    ok "$fam: calibrate: the note" grep -qx "layers 0-2, 4-6 are Gated DeltaNet linear attention: statistics of the 2 attention layers 3, 7" out.txt
    ok "$fam: calibrate CSV: rows of 3 and 7" test "$(cut -d, -f1 "$T/$fam-cal.csv" | tail -n +2 | tr '\n' ' ')" = "3 7 "
    ok "$fam: calib info: no row of a linear layer" test "$(grep -Ec '^ +[0-2456] +20 ' out.txt)" = 0
done
cli_done
