#!/usr/bin/env bash
# cli_gguf_2026.sh -- GGUF rows of issue 27's dense families: ministral3 (llama.cpp's mistral3: Llama's
# tensors, YaRN's mscale_all_dim and the q scaling as its keys), mimo (qwen2, its MTP layers left
# out), the text towers of gemma3 / qwen3_vl / mistral3 (gemma3, qwen3, llama), gpt_oss (llama.cpp's
# gpt-oss: sinks, router bias, the fused experts split and transposed), exaone4 (llama.cpp's exaone4: OLMo 2's
# post-norms with per-head q/k norms, head_dim, the window and attention.sliding_window_pattern, the
# global layers without RoPE, llama3 RoPE as rope_freqs) and olmo3 (llama.cpp's olmo2 with the window
# and its per-layer pattern; YaRN on the full layers). Each synthetic checkpoint (`synth family`) is
# exported in F32 and read back by attnlab: logits bit for bit equal to the source's, NLL to 1e-5,
# the window, the sliding layers and the NoPE layers as the source has them. Where node-llama-cpp is
# installed (scripts/install-deps.sh; that part is skipped with a message otherwise), llama.cpp runs
# the files and its logits are compared with attnlab's on the source (tests/llamacpp_logits.mjs):
# exaone4 without a window (EXAONE-4.0-1.2B's form: llama.cpp runs the window and the NoPE layers only
# for 64 layers, which the export line says) and with 64 layers (window, NoPE layers, llama3 RoPE), olmo3 with its window and YaRN's default attention
# factor (llama.cpp reads no other: with the recipe's 1.25 its logits are off, as the export says).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gguf-2026 shared-cache
cd "$T" || exit 1
TG=$(dirname "$T")/test_gguf
JS=$ATTNLAB_SRC/tests/llamacpp_logits.mjs
PREFIX=${ATTNLAB_NODE_PREFIX:-$HOME/.local/share/attnlab/node}
IDS="1 5 9 23 7 100 3 44 12 9 8 77 66 55 4 3"
echo "$IDS 2 1 0 99 17 18 19 20" > ids.txt

nll() {
    run -e "load $1; ppl ids ids.txt seqlen 24"
    [ "$(rc)" = 0 ] || { echo "nan"; echo "ppl $1 failed: $(cat err.txt)" >&2; return; }
    awk '$1 ~ /^[0-9]+$/ && NF == 3 { print $2 }' out.txt | tail -1
}
close() {
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { num = "^-?[0-9.]+(e-?[0-9]+)?$"; if (a !~ num || b !~ num) exit 1
        d = a - b; if (d < 0) d = -d; exit !(d <= t) }'
}
# info_of MODEL KEY: the value column of KEY in `info`
info_of() { run -e "load $1; info"; awk -v k="$2" '$1 == k { $1 = ""; sub(/^ +/, ""); print; exit }' out.txt; }

# roundtrip NAME ARCH [KEYS]: NAME exported as NAME.gguf (F32) in llama.cpp's ARCH and read back;
# KEYS of `info` the same on both (default: family, window, NoPE layers)
roundtrip() {
    local f=$1 arch=$2 keys=${3:-family sliding_window nope_layers}
    run -e "load $f; export $f.gguf dtype f32"
    [ "$(rc)" = 0 ] && grep -q "llama.cpp architecture $arch, F32" out.txt || { fail "$f export: [$(cat out.txt err.txt)]"; return; }
    cp out.txt "export_$f.txt"
    "$TG" logits "$f" "$IDS" > "ref_$f.json" && "$TG" logits "$f.gguf" "$IDS" > "gg_$f.json" || fail "$f logits"
    cmp -s "ref_$f.json" "gg_$f.json" || fail "$f: logits of the GGUF differ from the source's"
    close "$(nll "$f")" "$(nll "$f.gguf")" 1e-5 || fail "$f nll: $(nll "$f") vs $(nll "$f.gguf")"
    for k in $keys; do
        [ "$(info_of "$f" $k)" = "$(info_of "$f.gguf" $k)" ] \
            || fail "$f GGUF $k: [$(info_of "$f.gguf" $k)] vs the source's [$(info_of "$f" $k)]"
    done
}

# EXAONE 4.0 (32B's form: 3 sliding layers : 1 global without RoPE, llama3 RoPE)
run -e "synth family exaone4 ex"
roundtrip ex exaone4
[ "$(info_of ex nope_layers)" = 3 ] || fail "exaone4 source: NoPE layer [$(info_of ex nope_layers)]"
for k in attention.sliding_window_pattern attention.sliding_window attention.key_length attention.q_norm; do
    [ "$k" = attention.q_norm ] && { grep -qa "blk.0.attn_q_norm.weight" ex.gguf || fail "exaone4: no attn_q_norm"; continue; }
    grep -qa "exaone4\.$k" ex.gguf || fail "exaone4 GGUF lacks exaone4.$k"
done
grep -qa "rope_freqs.weight" ex.gguf || fail "exaone4: llama3 RoPE without rope_freqs.weight"
grep -q "llama.cpp's exaone4 reads the window and the global layers without RoPE only for 64 layers" export_ex.txt \
    || fail "exaone4 export line does not say what llama.cpp runs: [$(cat export_ex.txt)]"
# EXAONE 4.0-1.2B's form: no window, every layer with RoPE; no pattern written
cp -r ex exf && sed -i -e 's/"sliding_window":[[:space:]]*[0-9]*/"sliding_window": null/' exf/config.json
roundtrip exf exaone4
[ -z "$(info_of exf nope_layers)" ] || [ "$(info_of exf nope_layers)" = none ] || fail "exaone4 1.2B form: NoPE [$(info_of exf nope_layers)]"
grep -qa "exaone4.attention.sliding_window_pattern" exf.gguf && fail "exaone4 without a window: a pattern written"
grep -q "only for 64 layers" export_exf.txt && fail "exaone4 without a window: the 64-layer line"

# EXAONE-4.0-32B's 64 layers (the recipe's 4 repeated 16 times), where llama.cpp's exaone4 slides and
# skips RoPE as the file says: no line about it
python3 - ex ex64 <<'PY' || fail "exaone4 64 layers"
import json, os, re, sys
sys.path.insert(0, os.path.join(os.environ['ATTNLAB_SRC'], 'tests'))
from st_tensors import tensors, write_tensors, copy_other_files
src, dst = sys.argv[1:3]
copy_other_files(src, dst)
items = []
for name, v in sorted(tensors(src).items()):
    m = re.match(r'model\.layers\.(\d+)\.(.*)', name)
    items += [('model.layers.%d.%s' % (L, m.group(2)), v) for L in range(int(m.group(1)), 64, 4)] if m else [(name, v)]
write_tensors(os.path.join(dst, 'model.safetensors'), items)
c = json.load(open(os.path.join(dst, 'config.json')))
c['num_hidden_layers'], c['layer_types'] = 64, c['layer_types'] * 16
json.dump(c, open(os.path.join(dst, 'config.json'), 'w'), indent=1)
PY
run -e "load ex64; export ex64.gguf dtype f32"
[ "$(rc)" = 0 ] && ! grep -q "only for 64 layers" out.txt || fail "exaone4 64 layers export: [$(cat out.txt err.txt)]"
"$TG" logits ex64 "$IDS" > ref_ex64.json || fail "exaone4 64 layers: logits"

# OLMo 3 as olmo2 with the window and the pattern; the recipe's YaRN attention_factor 1.25, which
# llama.cpp does not read (the export line says so), and Olmo-3's own, the default 0.1 ln 8 + 1
run -e "synth family olmo3 o3"
roundtrip o3 olmo2
grep -qa "olmo2.attention.sliding_window_pattern" o3.gguf || fail "olmo3 GGUF lacks olmo2.attention.sliding_window_pattern"
grep -q "llama.cpp reads no YaRN attention_factor (1.25, written as yarn_attn_factor): it scales by 0.1 ln(factor) + 1 = 1.20794" \
    export_o3.txt || fail "olmo3 export line does not name the attention_factor llama.cpp ignores: [$(cat export_o3.txt)]"
cp -r o3 o3d && sed -i 's/"attention_factor":[[:space:]]*1.25,//' o3d/config.json
roundtrip o3d olmo2
grep -q "attention_factor" export_o3d.txt && fail "olmo3 with YaRN's default factor: [$(cat export_o3d.txt)]"

# Ministral 3 as llama.cpp's mistral3 (q / k permuted as Llama's; YaRN x64 from an original context of
# 8 with mscale_all_dim as yarn_log_multiplier, llama_4_scaling_beta as attention.temperature_scale:
# the 16 ids reach positions where q is scaled); a window is refused (llama.cpp's mistral3 has none)
run -e "synth family ministral3 m3"
roundtrip m3 mistral3
for k in attention.temperature_scale rope.scaling.yarn_log_multiplier rope.scaling.original_context_length; do
    grep -qa "mistral3\.$k" m3.gguf || fail "ministral3 GGUF lacks mistral3.$k"
done
cp -r m3 m3w && sed -i 's/"sliding_window":[[:space:]]*null/"sliding_window": 8/' m3w/config.json
run -e "load m3w; export m3w.gguf"
[ "$(rc)" = 1 ] && grep -q "llama.cpp's mistral3 has none" err.txt || fail "ministral3 with a window: [$(cat out.txt err.txt)]"
cp -r m3 m3nb && sed -i 's/"llama_4_scaling_beta":[[:space:]]*0.1/"llama_4_scaling_beta": 0/' m3nb/config.json
"$TG" logits m3nb "$IDS" > ref_m3nb.json || fail "ministral3 without the q scaling: logits"

# MiMo as qwen2 with its multi-token-prediction layer (model.mtp_layers.0.*, MiMo-7B's 16 tensors)
# left out and counted; the text towers of gemma3, qwen3_vl and mistral3 as gemma3, qwen3, llama
run -e "synth family mimo mi"
cp -r mi mimtp
python3 - mi/model.safetensors mimtp/model.safetensors <<'PY'
import json, struct, sys
blob = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', blob[:8])[0]
hdr, data = json.loads(blob[8:8 + n]), bytearray(blob[8 + n:])
extra = {'model.mtp_layers.0.' + k[len('model.layers.0.'):]: v for k, v in hdr.items() if k.startswith('model.layers.0.')}
for k in ('token_layernorm', 'hidden_layernorm', 'final_layernorm', 'input_proj'):
    extra['model.mtp_layers.0.%s.weight' % k] = hdr['model.norm.weight']   # shapes do not matter here
size = len(data)
for name, v in extra.items():
    s, e = v['data_offsets']
    hdr[name] = dict(v, data_offsets=[len(data), len(data) + e - s])
    data += blob[8 + n + s:8 + n + e]
h = json.dumps(hdr).encode()
h += b' ' * (-len(h) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(h)) + h + bytes(data))
PY
roundtrip mimtp qwen2 "sliding_window nope_layers"      # read back as qwen2
grep -q "16 tensors of the multi-token-prediction layers left out" export_mimtp.txt \
    || fail "mimo: the MTP tensors not left out: [$(cat export_mimtp.txt)]"
for fa in gemma3:gemma3 qwen3_vl:qwen3 mistral3:llama; do
    run -e "synth family ${fa%%:*} t_${fa%%:*}"
    roundtrip "t_${fa%%:*}" "${fa#*:}" "sliding_window nope_layers"   # read back as the text model
done

# gpt-oss as llama.cpp's gpt-oss: sinks, q/k/v/o biases, the router with its bias, the fused experts
# (gate_up_proj [E, D, 2I] x @ W with gate / up in interleaved columns) split into ffn_gate_exps /
# ffn_up_exps and down_proj transposed per expert, with their biases; the window and its layers.
# Read back by attnlab (the experts joined again); llama.cpp rounds YaRN's correction range, which
# gpt-oss's truncate false does not (the export line says so): compared with truncate true
run -e "synth family gpt_oss go"
roundtrip go gpt-oss "family sliding_window"
for k in expert_count expert_used_count expert_feed_forward_length attention.sliding_window_pattern; do
    grep -qa "gpt-oss\.$k" go.gguf || fail "gpt-oss GGUF lacks gpt-oss.$k"
done
for k in attn_sinks.weight ffn_gate_inp.bias ffn_gate_exps.weight ffn_up_exps.bias ffn_down_exps.weight ffn_down_exps.bias; do
    grep -qa "blk.3.$k" go.gguf || fail "gpt-oss GGUF lacks blk.3.$k"
done
grep -q "YaRN with truncate false (gpt-oss's): llama.cpp rounds the correction range" export_go.txt \
    || fail "gpt-oss export line does not say llama.cpp ignores truncate false: [$(cat export_go.txt)]"
cp -r go got && sed -i 's/"truncate":[[:space:]]*false/"truncate": true/' got/config.json
roundtrip got gpt-oss "family sliding_window"
grep -q "truncate false" export_got.txt && fail "gpt-oss with truncate true: [$(cat export_got.txt)]"

# gpt-oss's experts in MXFP4 as released (tests/gptoss_mxfp4.py: _blocks / _scales of each expert's
# W, the release's quantization_config) written dequantized: the GGUF is the one of the F32 twin
# (the decoded values in the x @ W layout), logits bit for bit
python3 "$ATTNLAB_SRC/tests/gptoss_mxfp4.py" go gmx mxfp4 && python3 "$ATTNLAB_SRC/tests/gptoss_mxfp4.py" go gf32 f32 \
    || fail "gptoss_mxfp4.py"
run -e "load gmx; export gmx.gguf dtype f32; load gf32; export gf32.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "gpt-oss MXFP4 export: [$(cat out.txt err.txt)]"
"$TG" logits gmx.gguf "$IDS" > gg_gmx.json && "$TG" logits gf32.gguf "$IDS" > gg_gf32.json \
    && "$TG" logits gf32 "$IDS" > ref_gf32.json || fail "gpt-oss MXFP4 logits"
cmp -s gg_gmx.json gg_gf32.json || fail "gpt-oss: the MXFP4 experts' GGUF differs from the F32 twin's"
cmp -s ref_gf32.json gg_gf32.json || fail "gpt-oss: the F32 twin's GGUF differs from the twin"
# in a BF16 file the MXFP4 experts stay GGUF MXFP4 (type 39, as the converter keeps them): exact (the
# same values as the BF16 file of the F32 twin, whose experts are exact in BF16), and smaller. Read back,
# they stay MXFP4 and multiply in matmul.c's MXFP4 kernels, the twin's in its BF16 ones: the logits to
# 1e-5 of the largest (tests/cli_gguf_mxfp4.sh: bit for bit those of the HF MXFP4 source)
run -e "load gmx; export gmxb.gguf dtype bf16; load gf32; export gf32b.gguf dtype bf16"
[ "$(rc)" = 0 ] || fail "gpt-oss MXFP4 BF16 export: [$(cat out.txt err.txt)]"
"$TG" logits gmxb.gguf "$IDS" > gg_gmxb.json && "$TG" logits gf32b.gguf "$IDS" > gg_gf32b.json || fail "gpt-oss BF16 logits"
python3 -c "import json, sys
a, b = (json.load(open(f))['logits'] for f in sys.argv[1:3])
d = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb)) if len(a) == len(b) else 1e9
sys.exit(d > 1e-5 * max(abs(y) for rb in b for y in rb))" gg_gmxb.json gg_gf32b.json \
    || fail "gpt-oss: the GGUF MXFP4 experts are not the F32 twin's values"
[ "$(stat -c %s gmxb.gguf)" -lt "$(( $(stat -c %s gf32b.gguf) * 6 / 10 ))" ] \
    || fail "gpt-oss: the BF16 file's experts are not 4-bit ($(stat -c %s gmxb.gguf) vs $(stat -c %s gf32b.gguf) bytes)"
python3 "$ATTNLAB_SRC/tests/gptoss_mxfp4.py" got gmxt mxfp4 || fail "gptoss_mxfp4.py (truncate true)"
run -e "load gmxt; export gmxt.gguf dtype bf16"
[ "$(rc)" = 0 ] || fail "gpt-oss MXFP4 (truncate true) export: [$(cat out.txt err.txt)]"
"$TG" logits gmxt "$IDS" > ref_gmxt.json || fail "gpt-oss MXFP4 source logits"

# lint of each file: llama.cpp's row knows every tensor
for f in ex exf o3 m3 go; do
    run -e "lint $f.gguf"
    [ "$(rc)" = 0 ] && grep -q "0 errors" out.txt && grep -Eq "^llama.cpp +(exaone4|olmo2|mistral3|gpt-oss) \(GGUF\) +loads" out.txt \
        || fail "lint $f.gguf: [$(cat out.txt err.txt)]"
done

# llama.cpp itself
if ! command -v node >/dev/null || [ ! -f "$PREFIX/node_modules/node-llama-cpp/dist/index.js" ]; then
    echo "SKIP (llama.cpp part): node or node-llama-cpp is not installed under $PREFIX (scripts/install-deps.sh)"
else
    compare() {
        local name=$1 src=$2 gguf=$3 tol=$4 line
        line=$(ATTNLAB_NODE_PREFIX=$PREFIX node "$JS" "$gguf" "$IDS" "ref_$src.json" 2> "node_$name.txt")
        echo "$name: $line"
        [ -n "$line" ] || { fail "$name: llama.cpp failed: $(tail -5 "node_$name.txt")"; return; }
        awk -v l="$line" -v t="$tol" 'BEGIN { n = split(l, w, " "); for (i = 1; i < n; i++) v[w[i]] = w[i + 1]
            split(v["argmax_agree"], a, "/"); exit !(v["max_abs_diff"] + 0 <= t + 0 && a[1] == a[2]) }' \
            || fail "$name: beyond tolerance $tol or argmax differs: $line"
    }
    compare exaone4-nowindow-f32 exf exf.gguf 1e-4
    compare exaone4-64-layers-f32 ex64 ex64.gguf 1e-4
    compare olmo3-f32 o3d o3d.gguf 1e-4
    compare ministral3-f32 m3 m3.gguf 1e-4
    compare mimo-mtp-f32 mimtp mimtp.gguf 1e-4
    compare gpt-oss-f32 got got.gguf 1e-4
    compare gpt-oss-mxfp4-experts-bf16 gmxt gmxt.gguf 1e-1     # BF16 attention; ggml's MXFP4 products
    line=$(ATTNLAB_NODE_PREFIX=$PREFIX node "$JS" go.gguf "$IDS" ref_go.json 2> node_go.txt)
    echo "gpt-oss-truncate-false: $line"
    awk -v l="$line" 'BEGIN { n = split(l, w, " "); for (i = 1; i < n; i++) v[w[i]] = w[i + 1]
        exit !(v["max_abs_diff"] + 0 > 1e-3) }' || fail "gpt-oss with truncate false: llama.cpp agrees? [$line]"
    compare qwen3_vl-f32 t_qwen3_vl t_qwen3_vl.gguf 1e-4
    compare mistral3-f32 t_mistral3 t_mistral3.gguf 1e-4
    compare gemma3-f32 t_gemma3 t_gemma3.gguf 1e-2      # ggml's GELU table, as cli_llamacpp's gemma3
    # llama.cpp scales q as the file's temperature_scale says: attnlab without the scaling is far off
    line=$(ATTNLAB_NODE_PREFIX=$PREFIX node "$JS" m3.gguf "$IDS" ref_m3nb.json 2> node_m3nb.txt)
    echo "ministral3 against attnlab without llama_4_scaling_beta: $line"
    awk -v l="$line" 'BEGIN { n = split(l, w, " "); for (i = 1; i < n; i++) v[w[i]] = w[i + 1]
        exit !(v["max_abs_diff"] + 0 > 1e-3) }' || fail "ministral3: the q scaling changes nothing? [$line]"
    # the recipe's attention_factor 1.25: llama.cpp's logits are off, as the export line says
    line=$(ATTNLAB_NODE_PREFIX=$PREFIX node "$JS" o3.gguf "$IDS" ref_o3.json 2> node_o3.txt)
    echo "olmo3-attention-factor-1.25: $line"
    awk -v l="$line" 'BEGIN { n = split(l, w, " "); for (i = 1; i < n; i++) v[w[i]] = w[i + 1]
        exit !(v["max_abs_diff"] + 0 > 1e-3) }' || fail "olmo3 with attention_factor 1.25: llama.cpp agrees? [$line]"
fi
cli_done
