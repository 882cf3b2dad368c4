#!/bin/bash
# cli_mimo.sh -- the mimo family (MiMo-7B: Qwen2's model with multi-token-prediction layers) through
# `attnlab -e`: `synth family mimo` writes its tiny checkpoint; the same checkpoint with a MiMo MTP
# layer added under its real names (model.mtp_layers.0.*: a decoder layer's tensors plus
# token_layernorm, hidden_layernorm, input_proj, final_layernorm: the 16 of MiMo-7B) loads, gives the same
# perplexity (the causal LM never reads it), and lint lists those tensors as ones engines skip, not
# as tensors no loader can place.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-mimo
cd "$T" || exit 1
d=$T/mimo
cli_ids 40 ids.txt

run -e "synth family mimo $d"
ok "synth family mimo runs" test "$(rc)" = 0
ok "  config.json names mimo and one MTP layer" grep -Eq '"num_nextn_predict_layers":[[:space:]]*1' "$d/config.json"

run -e "load $d; info"
ok "info runs" test "$(rc)" = 0
info=$(cat out.txt)
has "$info" "^family  *mimo$" || fail "info: family [$info]"
has "$info" "^qkv_bias  *true$" || fail "info: Qwen2's q/k/v biases [$info]"
has "$info" "^rope_theta  *640000$" || fail "info: rope_theta [$info]"
has "$info" "^sliding_window  *0$" || fail "info: no window (use_sliding_window false) [$info]"
has "$info" "^mtp_layers  *1 skipped (model.mtp_layers.N.\*" || fail "info: the MTP layer skipped [$info]"

run -e "load $d; ranks vo"
# layer 1, KV head 0 (query heads 0 and 1): V 6, O 32, VO 6; layer 2: VO 4
for h in 0 1; do grep -Eq "^ +1 +$h +6 +32 +6$" out.txt || fail "layer 1 head $h not 6 / 32 / 6: [$(cat out.txt)]"; done
grep -Eq "^ +2 +3 +31 +31 +4$" out.txt || fail "layer 2 head 3 not 31 / 31 / 4: [$(cat out.txt)]"

run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl runs" test "$(rc)" = 0
base=$(awk '$1 == 39 {print $2}' out.txt)

# MiMo-7B's MTP layer under its real names, appended to the safetensors file
cp -r "$d" "$T/mtp"
python3 - "$d/model.safetensors" "$T/mtp/model.safetensors" <<'PY'
import json, struct, sys
blob = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', blob[:8])[0]
hdr, data = json.loads(blob[8:8 + n]), blob[8 + n:]
extra = {}
for name, v in list(hdr.items()):
    if name.startswith('model.layers.0.'):
        extra['model.mtp_layers.0.' + name[len('model.layers.0.'):]] = v
for k in ('token_layernorm', 'hidden_layernorm', 'final_layernorm'):
    extra['model.mtp_layers.0.%s.weight' % k] = hdr['model.norm.weight']
out = bytearray(data)
for name, v in extra.items():
    s, e = v['data_offsets']
    hdr[name] = {'dtype': v['dtype'], 'shape': v['shape'], 'data_offsets': [len(out), len(out) + e - s]}
    out += data[s:e]
D = hdr['model.norm.weight']['shape'][0]          # input_proj: [hidden ; embedding] -> hidden
hdr['model.mtp_layers.0.input_proj.weight'] = {'dtype': 'F32', 'shape': [D, 2 * D],
                                               'data_offsets': [len(out), len(out) + 8 * D * D]}
out += bytes(8 * D * D)
h = json.dumps(hdr).encode()
h += b' ' * (-len(h) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(h)) + h + bytes(out))
PY
ok "MTP layer added" test "$(python3 -c "import json,struct;b=open('$T/mtp/model.safetensors','rb').read();print(sum(k.startswith('model.mtp_layers.0.') for k in json.loads(b[8:8+struct.unpack('<Q',b[:8])[0]])))")" = 16

run -e "load $T/mtp; ppl ids ids.txt seqlen 40"
ok "ppl runs with the MTP layer present" test "$(rc)" = 0
mtp=$(awk '$1 == 39 {print $2}' out.txt)
ok "  the same NLL ($base, $mtp)" test -n "$base" -a "$base" = "$mtp"

run -e "lint $T/mtp"
ok "lint runs" test "$(rc)" = 0
grep -q "model.mtp_layers.0.final_layernorm.weight.*engines skip it" out.txt ||
    fail "lint: the MTP tensors not listed as skipped [$(cat out.txt)]"
grep -q "no tensors\? of" out.txt && fail "lint: MTP tensors called unplaceable [$(cat out.txt)]"
grep -Eq "^transformers +MiMoForCausalLM +loads$" out.txt || fail "lint: transformers verdict [$(cat out.txt)]"
grep -Eq "^vLLM +MiMoForCausalLM +loads( with --skip-tokenizer-init .*)?$" out.txt || fail "lint: vLLM verdict [$(cat out.txt)]"
grep -q "llama.cpp: model_type 'mimo' has no implementation" out.txt || fail "lint: llama.cpp has no MiMo [$(cat out.txt)]"
cli_done
