#!/usr/bin/env bash
# cli_export_attnlab2.sh -- issue 30 section 2, `export DIR format attnlab` of `convert mla ... qk-norm keep` (the q/k
# norm kept on keys and values rebuilt by least squares from fold's cache, tmla_qkn.h): the folder holds the source's
# q_proj / q_norm / k_norm / o_proj, the cache's kv_a_proj_with_mqa (n = r + D rows) and the rebuild kv_b_proj
# (G d + G dv rows); `load DIR` runs it with the two-stage K / V path (forward.c: z = x W_KVA, [K | V] = z W_KVB, then
# k_norm and RoPE) and the reader forms the same layer (attn_eval.c). On the synthetic qwen3 (per-head norms) and
# olmo2 (norms over the projection) at kv-rank 24 and full, and on stories260K made a Qwen3 with trained-looking
# gains at kv-rank 32: the reload's perplexity equals the session's to 1e-6 (and is not fold's), `check DIR`
# reproduces the report (out_err within 1e-5 of it in every layer), `lint DIR` says every engine refuses it and what
# reading it as DeepSeek-V3 lacks. Before, the export was refused ("qk-norm keep rebuilds each token's keys").
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-export-attnlab2 shared-cache
cd "$T" || exit 1

seq 1 40 | awk '{printf "%d ", ($1*37)%250+1}' >x40.ids
# check_within DIR N: `check DIR` reproduces the report within 1e-5 in all N layers
check_within() {
    run -e "check $1"
    local w
    w=$(grep -o "out_err within [0-9.e+-]* of it in all $2 layers" out.txt | awk '{print $3}')
    [ -n "$w" ] && awk -v w="$w" 'BEGIN { exit !(w < 1e-5) }'
}

export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
python3 "$ATTNLAB_SRC/tests/qwen3_norms.py" "$ATTNLAB_MODELS/stories260K-hf" "$T/q3g" gains >/dev/null || fail "qwen3_norms gains"
"$B" -e "synth family qwen3 $T/qwen3" >/dev/null 2>&1 || fail "synth family qwen3"
"$B" -e "synth family olmo2 $T/olmo2" >/dev/null 2>&1 || fail "synth family olmo2"
story=$ATTNLAB_SRC/examples/tinystory.txt
for case in qwen3:24:3 qwen3:full:3 olmo2:24:3 q3g:32:5; do
    IFS=: read -r f rank nl <<<"$case"
    d=$T/$f-keep-$rank
    P="ppl ids x40.ids"
    [ "$f" = q3g ] && P="ppl $story"         # the real model on its held-out text
    ps=$(ppl_of "load $T/$f; convert mla kv-rank $rank qk-norm keep ppl off; $P; export $d format attnlab")
    case $ps in ERR:*) fail "$f kv-rank $rank: keep + export format attnlab: $ps"; continue ;; esac
    ok "$f kv-rank $rank: the config says qk-norm keep" grep -q '"attnlab_qk_norm":[[:space:]]*"keep"' "$d/config.json"
    pl=$(ppl_of "load $d; $P")
    case $pl in ERR:*) fail "$f kv-rank $rank: load + ppl of the keep export: $pl" ;;
        *) near "$pl" "$ps" 1e-6 || fail "$f kv-rank $rank: the reload's ppl $pl, the session's $ps" ;; esac
    if [ "$rank" = full ]; then              # exact at full rank: the source's ppl
        p0=$(ppl_of "load $T/$f; $P")
        near "$pl" "$p0" 1e-6 || fail "$f full: the keep export's ppl $pl is not the source's $p0"
    else                                     # not fold's model under another name
        pf=$(ppl_of "load $T/$f; convert mla kv-rank $rank qk-norm fold ppl off; $P")
        near "$pl" "$pf" 1e-4 && fail "$f kv-rank $rank: the keep export's ppl $pl is fold's $pf"
    fi
    check_within "$d" "$nl" || fail "$f kv-rank $rank: check DIR does not reproduce the report [$(cat out.txt err.txt)]"
    run -e "lint $d"
    for t in transformers vLLM SGLang llama.cpp; do
        grep -q "^$t .*will not load" out.txt || fail "$f kv-rank $rank: lint's $t verdict [$(grep "^$t" out.txt)]"
    done
    ok "$f kv-rank $rank: lint names the kept q/k norm and the rebuild" \
        grep -q "lacks what the source keeps (.*q/k norm.*has no kv_lora_rank here (qk-norm keep" out.txt
    run -e "load $d; ranks vo"
    ok "$f kv-rank $rank: per-head views refused naming the rebuild" grep -q "no k_proj / v_proj to view per head" err.txt
done

# Qwen3.5 (a multimodal checkpoint: its text tower under text_config and model.language_model., a vision tower under
# model.visual., linear-attention layers 0-2, gated full attention with per-head (1 + w) q/k norms on layer 3):
# qk-norm keep exports the text tower -- the gated q_proj written back as the source's [query | gate] per head, the
# linear layers and the vision tower copied bit for bit (`check DIR`: every non-attention tensor identical; the
# manifest says so) --; the reload's ppl is the session's (1e-6), the source's at full rank; fold's MLA layers with
# the gate are refused naming what is missing. Before, format attnlab refused qwen3_5 (not a text-only checkpoint).
"$B" -e "synth family qwen3_5 $T/q35" >/dev/null 2>&1 || fail "synth family qwen3_5"
p0=$(ppl_of "load $T/q35; ppl ids x40.ids")
for rank in 16 full; do
    d=$T/q35-keep-$rank
    ps=$(ppl_of "load $T/q35; convert mla kv-rank $rank qk-norm keep ppl off; ppl ids x40.ids; export $d format attnlab")
    case $ps in ERR:*) fail "qwen3_5 kv-rank $rank: keep + export format attnlab: $ps"; continue ;; esac
    pl=$(ppl_of "load $d; ppl ids x40.ids")
    case $pl in ERR:*) fail "qwen3_5 kv-rank $rank: load + ppl: $pl" ;;
        *) near "$pl" "$ps" 1e-6 || fail "qwen3_5 kv-rank $rank: the reload's ppl $pl, the session's $ps" ;; esac
    if [ $rank = full ]; then near "$pl" "$p0" 1e-6 || fail "qwen3_5 full: ppl $pl, the source's $p0"
    else near "$pl" "$p0" 1e-4 && fail "qwen3_5 kv-rank 16 keeps the source's ppl $p0: the test cannot tell"; fi
    check_within "$d" 4 || fail "qwen3_5 kv-rank $rank: check DIR [$(cat out.txt err.txt)]"
    ok "qwen3_5 kv-rank $rank: every non-attention tensor identical" grep -q "non-attention tensors: all [0-9]* identical" out.txt
    ok "  the manifest says what of the checkpoint is copied" grep -q '"tower":.*vision tower.*copied bit for bit' "$d/attnlab_manifest.json"
    python3 - "$T/q35" "$d" <<'PY' || fail "qwen3_5 kv-rank $rank: the vision tower's tensors are not the source's bytes"
import json, struct, sys
def tensors(d):
    f = open(d + "/model.safetensors", "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); b = f.read()
    return {k: (v["dtype"], v["shape"], b[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
vis = [k for k in a if k.startswith("model.visual.")]
sys.exit(0 if vis and all(a[k] == b.get(k) for k in vis) and "model.language_model.layers.3.self_attn.k_proj.weight" not in b else 1)
PY
    run -e "lint $d"
    ok "qwen3_5 kv-rank $rank: lint, vLLM will not load it" grep -q "^vLLM .*will not load" out.txt
done
run -e "load $T/q35; convert mla kv-rank 16 qk-norm fold ppl off; export $T/q35-fold format attnlab"
ok "qwen3_5 fold: refused naming keep and the gate" grep -q "text tower only with qk-norm keep.*with an output gate" err.txt

# The one-shot strategies (mla_strategy.h) on stories260K-hf with activation statistics: care-alloc's per-layer kv
# ranks (written padded to the largest, attnlab_kv_ranks) and MHA2MLA's selected RoPE pairs (each layer's frequencies
# in self_attn.rope_inv_freq, attnlab_layer_rope): the reload's perplexity equals the session's to 1e-6, `check DIR`
# reproduces the report, the reader cuts each layer back to its rank. Before, `format attnlab` refused both ("other
# dims than the conversion's", "RoPE dims are not the model's RoPE").
M="$ATTNLAB_MODELS/stories260K-hf"
CAL="calib $ATTNLAB_SRC/examples/tinystory.txt seqlen 64 samples 32"
for s in care-alloc mha2mla-2norm mha2mla-high-split; do
    d=$T/st-$s
    ps=$(ppl_of "load $M; convert mla kv-rank 16 strategy $s $CAL ppl off; ppl ids x40.ids; export $d format attnlab")
    case $ps in ERR:*) fail "$s: convert + export format attnlab: $ps"; continue ;; esac
    pl=$(ppl_of "load $d; ppl ids x40.ids")
    case $pl in ERR:*) fail "$s: load + ppl of the export: $pl" ;;
        *) near "$pl" "$ps" 1e-6 || fail "$s: the reload's ppl $pl, the session's $ps" ;; esac
    check_within "$d" 5 || fail "$s: check DIR does not reproduce the report [$(cat out.txt err.txt)]"
    run -e "lint $d"
    ok "$s: lint says no engine loads it" grep -q "^vLLM .*will not load" out.txt
    case $s in
    care-alloc)
        r=$(python3 -c "import json,sys; c=json.load(open('$d/config.json')); print(c['kv_lora_rank'], sum(c['attnlab_kv_ranks']), len(set(c['attnlab_kv_ranks'])))")
        set -- $r
        [ "${2:-0}" = 80 ] && [ "${3:-0}" -gt 1 ] && [ "${1:-0}" -gt 16 ] ||
            fail "care-alloc: kv_lora_rank / sum / distinct ranks '$r' (want the largest, 5 x 16, several)"
        # the reader cuts each layer to its rank: the per-layer table of `check DIR` ... and `info` still loads
        run -e "load $d; info"
        ok "care-alloc: info on the reload" test "$(rc)" = 0 ;;
    *)
        ok "$s: per-layer RoPE frequencies" grep -q '"attnlab_layer_rope":[[:space:]]*true' "$d/config.json"
        ok "$s: lint says a DeepSeek-V3 reading ignores them" grep -q "its layers' own are in self_attn.rope_inv_freq" out.txt
        python3 - "$d" <<'PY' || fail "$s: self_attn.rope_inv_freq is not F64 in every layer"
import json, struct, sys
f = open(sys.argv[1] + "/model.safetensors", "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
fr = [k for k in h if k.endswith("self_attn.rope_inv_freq")]
sys.exit(0 if len(fr) == 5 and all(h[k]["dtype"] == "F64" for k in fr) else 1)
PY
        ;;
    esac
done
cli_done
