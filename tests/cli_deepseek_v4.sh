#!/bin/bash
# cli_deepseek_v4.sh -- DeepSeek-V4 (model_type deepseek_v4). The config.json of deepseek-ai/DeepSeek-V4-Flash, every
# key as released, is accepted (load then looks for its tensors); malformed V4 keys are refused naming the field.
# `synth family deepseek_v4` writes the Flash config shrunk (every semantic key kept) with the released tensor names
# (layers.L.attn.wq_a / q_norm / wq_b / wkv / kv_norm / wo_a / wo_b / attn_sink, compressor / indexer on the
# compressed layers, hc_attn_fn, ffn.*, embed / norm / head): `load` and `info` describe it (dsv4_describe's layer
# kinds from compress_ratios, the attention as read, the extra paths present and not analysed), `ranks vo|qk`
# recover the planted ranks (K = V: layer 1's V rank 6 is its key's NoPE rank), and every analysis that runs the
# layers is refused naming what is not built (compressed KV, hyper-connections, hash routing). Before, the load was
# refused whatever the folder held.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-deepseek-v4
cd "$T" || exit 1
# v4 DIR [PYTHON]: DeepSeek-V4-Flash's config.json into DIR/config.json, PYTHON then applied to the dict c
v4() {
    mkdir -p "$1"
    python3 - "$1" "${2:-}" <<'PY'
import json, sys
c = {"architectures": ["DeepseekV4ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
     "bos_token_id": 0, "eos_token_id": 1, "expert_dtype": "fp4", "hc_eps": 1e-6, "hc_mult": 4,
     "hc_sinkhorn_iters": 20, "head_dim": 512, "hidden_act": "silu", "hidden_size": 4096, "index_head_dim": 128,
     "index_n_heads": 64, "index_topk": 512, "initializer_range": 0.02, "max_position_embeddings": 1048576,
     "model_type": "deepseek_v4", "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
     "norm_topk_prob": True, "num_attention_heads": 64, "num_experts_per_tok": 6, "num_hidden_layers": 43,
     "num_hash_layers": 3, "num_key_value_heads": 1, "num_nextn_predict_layers": 1, "o_groups": 8,
     "o_lora_rank": 1024, "q_lora_rank": 1024, "qk_rope_head_dim": 64,
     "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                             "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
     "rms_norm_eps": 1e-6, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16,
                                            "original_max_position_embeddings": 65536, "type": "yarn"},
     "rope_theta": 10000, "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus", "sliding_window": 128,
     "swiglu_limit": 10.0, "tie_word_embeddings": False, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
     "transformers_version": "4.57.1", "use_cache": True, "vocab_size": 129280, "compress_rope_theta": 160000,
     "compress_ratios": [0, 0] + [4, 128] * 20 + [4, 0]}
exec(sys.argv[2])
json.dump(c, open(sys.argv[1] + '/config.json', 'w'), indent=2)
PY
}

v4 flash
run -e "load flash"
m=$(cat err.txt)
hasnt "$m" "load refused" || fail "DeepSeek-V4-Flash's config refused [$m]"
has "$m" "no model.safetensors" || fail "the Flash config is accepted, its tensors looked for [$m]"
hasnt "$m" "not a family attnlab knows" || fail "deepseek_v4 unknown [$m]"

# the recipe: the Flash config shrunk, the released tensor names
run -e "synth family deepseek_v4 v4s"
ok "synth family deepseek_v4" test "$(rc)" = 0
c=$(cat v4s/config.json)
for k in compress_ratios compress_rope_theta hc_mult hc_sinkhorn_iters hc_eps index_topk index_n_heads index_head_dim \
         o_groups o_lora_rank q_lora_rank qk_rope_head_dim num_hash_layers scoring_func swiglu_limit sliding_window \
         num_nextn_predict_layers expert_dtype topk_method routed_scaling_factor; do
    has "$c" "\"$k\"" || fail "the recipe keeps $k"
done
names=$(python3 -c "import json,struct,sys; f=open('v4s/model.safetensors','rb'); n=struct.unpack('<Q',f.read(8))[0]; print('\n'.join(sorted(json.loads(f.read(n)))))")
for t in embed.weight norm.weight head.weight layers.0.attn.wq_a.weight layers.0.attn.q_norm.weight layers.0.attn.wq_b.weight \
         layers.0.attn.wkv.weight layers.0.attn.kv_norm.weight layers.0.attn.wo_a.weight layers.0.attn.wo_b.weight \
         layers.0.attn.attn_sink layers.0.attn_norm.weight layers.0.ffn_norm.weight layers.0.hc_attn_fn \
         layers.1.attn.compressor.wkv.weight layers.1.attn.indexer.wq_b.weight layers.2.attn.compressor.wkv.weight \
         layers.0.ffn.gate.weight layers.0.ffn.gate.bias layers.0.ffn.experts.3.w1.weight layers.0.ffn.shared_experts.w2.weight; do
    grep -qx "$t" <<<"$names" || fail "tensor $t written"
done
grep -qx "layers.0.attn.compressor.wkv.weight" <<<"$names" && fail "layer 0 (window only) has no compressor"
grep -qx "layers.2.attn.indexer.wq_b.weight" <<<"$names" && fail "layer 2 (HCA) has no indexer"

run -e "load v4s; info"
ok "load of the DeepSeek-V4 recipe" test "$(rc)" = 0
m=$(cat out.txt)
has "$m" "deepseek_v4 .*4 layers (+1 MTP), 4 heads of 32 over 1 KV head (key = value, RoPE on its last 8, a sink per head)" \
    || fail "info: the description [$m]"
has "$m" "q_lora 64, output 2 groups x o_lora 64; window 8 only: 1 layer (0)" || fail "info: output groups, window [$m]"
has "$m" "CSA (window + 4:1 compressed KV, indexer top-8 of 2 x 16): 2 (1, 3); HCA (window + 128:1 compressed): 1 (2)" \
    || fail "info: CSA / HCA layers [$m]"
has "$m" "hyper-connections x4, 1 hash-routed layers" || fail "info: hc / hash [$m]"
has "$m" "ONE KV head wkv (kv_norm) that is both key and value (K = V" || fail "info: K = V [$m]"
has "$m" "compressor on 3 layers (attn.compressor.\*), indexer on 2 (attn.indexer.\*), hyper-connections on 4" \
    || fail "info: the extra paths present [$m]"
has "$m" "qk_nope_head_dim  *24" || fail "info: NoPE dims [$m]"
has "$m" "kv_values_per_token_per_layer  *32" || fail "info: one head of 32 cached, key = value [$m]"
has "$m" "^ranks qk  *yes: the 24 NoPE dims of each head" || fail "info: ranks qk's note [$m]"
has "$m" "^ppl/calibrate  *no: .*compressed KV.*hyper-connections.*hash routing" || fail "info: the forward pass refused [$m]"
has "$m" "^export formats  *no: none (not: truncate" || fail "info: no truncate export [$m]"

# planted ranks: layer 1 V rank 6 = its key's NoPE rank (QK 6, each query flat 24), layer 2 fused-low (VO 4)
run -e "load v4s; ranks vo layers 1-2 tau 0.99"
m=$(cat out.txt)
for h in 0 1 2 3; do
    has "$m" "^ *1  *$h  *6  *32  *6$" || fail "ranks vo layer 1 head $h [$m]"
    has "$m" "^ *2  *$h  *19  *19  *4$" || fail "ranks vo layer 2 head $h [$m]"
done
run -e "load v4s; ranks qk layer 1"
m=$(cat out.txt)
has "$m" "attention sinks: .*(DeepSeek-V4: K = V, W_O through wo_a / wo_b; truncate refused)" || fail "ranks: the sink's note [$m]"
for h in 0 1 2 3; do has "$m" "^ *1  *$h  *24  *6  *6$" || fail "ranks qk layer 1 head $h [$m]"; done
run -e "load v4s; fuse vo layer 2 head 3"
has "$(cat out.txt)" "128 x 128 map = (128 x 32) @ (32 x 128)" || fail "fuse: V (D x 32) @ O (32 x D) [$(cat out.txt)]"
run -e "load v4s; plot vo-ranks to v4.png"
ok "plot vo-ranks" is_png v4.png

# the cache at a context of 100 tokens: every layer's window of 8 (one head of 32: key = value), the CSA layers' 4:1
# entries and their indexer keys (16 each), the HCA layer's 128:1 (none yet)
run -e "load v4s; kv-cache context 100"
m=$(cat out.txt)
has "$m" "^sliding window 8  *0-3  *4  *8  *32  *1024 " || fail "kv-cache: the windows [$m]"
has "$m" "^compressed KV 4:1  *1, 3  *2  *25  *32  *1600 " || fail "kv-cache: CSA entries [$m]"
has "$m" "^lightning indexer keys 4:1  *1, 3  *2  *25  *16  *800 " || fail "kv-cache: CSA index keys [$m]"
has "$m" "^compressed KV 128:1  *2  *1  *0  *32  *0 " || fail "kv-cache: HCA entries [$m]"
has "$m" "^total KV cache  *4  *-  *-  *3424 " || fail "kv-cache: total [$m]"
run -e "load v4s; kv-cache context 1000"
has "$(cat out.txt)" "^compressed KV 128:1  *2  *1  *7  *32  *224 " || fail "kv-cache 1000: HCA entries [$(cat out.txt)]"

# the FP8 release's block scales sit beside each weight as "<stem>.scale" (E8M0), not "<name>_scale_inv": layer 1's wkv
# re-encoded so (one 128 x 128 block, a power-of-two scale) reads back with its planted rank
cp -r v4s f8
python3 - f8/model.safetensors layers.1.attn.wkv.weight <<'PY'
import bisect, json, math, struct, sys
def dec(c):                                    # FP8 E4M3: bias 7, 0x7f / 0xff NaN
    s, e, m = -1.0 if c & 0x80 else 1.0, (c >> 3) & 15, c & 7
    return None if (e == 15 and m == 7) else s * (m / 8.0) * 2.0 ** -6 if e == 0 else s * (1 + m / 8.0) * 2.0 ** (e - 7)
codes = sorted((dec(c), c) for c in range(256) if dec(c) is not None)
vals = [v for v, _ in codes]
def enc(x):
    i = bisect.bisect_left(vals, x)
    return codes[min((j for j in (i - 1, i) if 0 <= j < len(vals)), key=lambda j: abs(vals[j] - x))][1]
path, name = sys.argv[1], sys.argv[2]
raw = open(path, 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
meta = hdr.pop('__metadata__', None)
data = {k: (v['dtype'], v['shape'], raw[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]]) for k, v in hdr.items()}
w = struct.unpack('<%df' % (len(data[name][2]) // 4), data[name][2])
k = math.ceil(math.log2(max(abs(x) for x in w) / 448.0))
data[name] = ('F8_E4M3', data[name][1], bytes(enc(x / 2.0 ** k) for x in w))
data[name[:-len('.weight')] + '.scale'] = ('F8_E8M0', [1, 1], bytes([k + 127]))
out, h = b'', {}
for key in sorted(data):
    h[key] = {'dtype': data[key][0], 'shape': data[key][1], 'data_offsets': [len(out), len(out) + len(data[key][2])]}
    out += data[key][2]
if meta: h['__metadata__'] = meta
hj = json.dumps(h).encode(); hj += b' ' * (-len(hj) % 8)
open(path, 'wb').write(struct.pack('<Q', len(hj)) + hj + out)
PY
run -e "load f8; ranks vo layer 1 tau 0.99"
m=$(cat out.txt)
ok "FP8 wkv with its .scale: ranks vo" test "$(rc)" = 0
for h in 0 1 2 3; do has "$m" "^ *1  *$h  *6  *32  *6$" || fail "FP8 wkv: ranks vo layer 1 head $h [$m $(cat err.txt)]"; done
s32=$(e "load v4s; spectrum v layer 1 head 0" | awk '$1 == 1 {print $2}')
s8=$(e "load f8; spectrum v layer 1 head 0" | awk '$1 == 1 {print $2}')
awk -v a="$s8" -v b="$s32" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.03 * b) }' \
    || fail "FP8 wkv: sigma_1 of V $s8, F32 $s32 (3 %)"

# what runs the layers is refused, naming what is not built
printf '1 2 3 4 5 6 7 8 9 10\n' >ids.txt
for cmd in "ppl ids ids.txt" "truncate vo tau 0.99" "convert mla kv-rank 8" "convert tpa"; do
    run -e "load v4s; $cmd"
    ok "$cmd refused" test "$(rc)" = 1
done
run -e "load v4s; ppl ids ids.txt"
m=$(cat err.txt)
has "$m" "the forward pass (ppl, generate, calibrate) needs DeepSeek-V4's layers, which attnlab does not build: the compressed KV" \
    || fail "ppl: the refusal [$m]"
has "$m" "hyper-connections" && has "$m" "hash routing" || fail "ppl: hyper-connections and hash routing named [$m]"
run -e "load v4s; truncate vo tau 0.99"
has "$(cat err.txt)" "one KV projection is both W_V and W_K" || fail "truncate: why [$(cat err.txt)]"

# another plan of layers (the recipe's config edited): the HCA ratios listed, the window layers listed
python3 - <<'PY'
import json
c = json.load(open('v4s/config.json'))
c["compress_ratios"] = [0, 8, 4, 0, 128]
json.dump(c, open('v4s/config.json', 'w'))
PY
run -e "load v4s; info"
m=$(cat out.txt)
has "$m" "window 8 only: 2 layers (0, 3)" || fail "mixed: window [$m]"
has "$m" "CSA (window + 4:1 compressed KV, indexer top-8 of 2 x 16): 1 (2)" || fail "mixed: CSA [$m]"
has "$m" "HCA (window + 8:1 compressed): 1 (1)" || fail "mixed: HCA [$m]"

# malformed keys, each named
v4 short 'c["compress_ratios"] = c["compress_ratios"][:40]'
run -e "load short"
has "$(cat err.txt)" "compress_ratios must list one ratio per layer (num_hidden_layers 43" || fail "short list [$(cat err.txt)]"
v4 neg 'c["compress_ratios"][7] = -4'
run -e "load neg"
has "$(cat err.txt)" "compress_ratios\[7\] must be a whole number >= 0" || fail "negative ratio [$(cat err.txt)]"
v4 groups 'c["o_groups"] = 6'
run -e "load groups"
has "$(cat err.txt)" "o_groups (6) must divide num_attention_heads (64)" || fail "o_groups [$(cat err.txt)]"
v4 nolora 'del c["o_lora_rank"]; c["q_lora_rank"] = 1.5'
run -e "load nolora"
has "$(cat err.txt)" "deepseek_v4: q_lora_rank, o_lora_rank: each must be a whole number" || fail "lora keys [$(cat err.txt)]"

run -e "help load"
has "$(cat out.txt)" "^  deepseek_v4 " || fail "help load lists deepseek_v4 [$(cat out.txt)]"
cli_done
