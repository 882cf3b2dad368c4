#!/bin/bash
# cli_hostile.sh -- damaged or hostile files met through the shell (issue 14, items 5, 6, 11, 12,
# 13): a config.json with a repeated key loads with the warning shown; one with a number given as
# a string, bytes after the JSON, an escape code in model_type, a FIFO or a /dev/zero symlink is
# refused with one clear line (no hang, no escape code on the terminal); `calib load` of a
# safetensors file that is not a calibration file quotes that file's format; a tokenizer.json
# with a negative added-token id is refused; refs/main pointing out of snapshots/ is refused.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-hostile

"$ATTNLAB" -e "synth demo-llama $T/m dtype f32 seed 3" >/dev/null 2>&1
ok "demo-llama written" test -f "$T/m/config.json"
cp "$T/m/config.json" "$T/config.orig"
# config.json with one key changed by python (the rest stays valid)
edit() { python3 - "$T/config.orig" "$T/m/config.json" "$1" <<'PY'
import json, sys
src, dst, how = sys.argv[1:4]
text = open(src).read().rstrip()
c = json.loads(text)
if how == "dup":      text = text[:-1] + ', "rope_theta": 123456.0}'
elif how == "string": c["rope_theta"] = "10000"; text = json.dumps(c)
elif how == "zero":   c["rope_theta"] = 0; text = json.dumps(c)
elif how == "trail":  text = text + "\n{}"
elif how == "esc":    c["model_type"] = "ll\x1b[31mama"; text = json.dumps(c)
open(dst, "w").write(text)
PY
}

if command -v python3 >/dev/null; then
    edit dup
    out=$(timeout 60 "$ATTNLAB" -e "load $T/m; info" 2>&1)
    ok "repeated key: loads" test $? -eq 0
    ok "repeated key: warned" has "$out" 'key "rope_theta" appears 2 times; attnlab uses the last'
    ok "repeated key: the last is used" has "$out" "123456"
    edit string
    out=$(timeout 60 "$ATTNLAB" -e "load $T/m" 2>&1)
    ok "string number: refused" test $? -ne 0
    ok "string number: says so" has "$out" "rope_theta (a string, not a number: write it without quotes)"
    edit zero
    out=$(timeout 60 "$ATTNLAB" -e "load $T/m" 2>&1)
    ok "rope_theta 0: refused" has "$out" "rope_theta = 0 (must be > 0)"
    edit trail
    out=$(timeout 60 "$ATTNLAB" -e "load $T/m" 2>&1)
    ok "trailing bytes: refused" has "$out" "bytes after the JSON object"
    edit esc
    out=$(timeout 60 "$ATTNLAB" -e "load $T/m" 2>&1)
    ok "escape code: shown escaped" has "$out" 'll\\x1b\[31mama'
    ok "escape code: never printed raw" test "$(printf '%s' "$out" | tr -d -c '\033' | wc -c)" -eq 0
fi

rm -f "$T/m/config.json"
mkfifo "$T/m/config.json"
out=$(timeout 60 "$ATTNLAB" -e "load $T/m" 2>&1)
st=$?
ok "FIFO config: no hang" test $st -ne 124
ok "FIFO config: refused" has "$out" "not a regular file (a FIFO)"
rm -f "$T/m/config.json"
ln -s /dev/zero "$T/m/config.json"
out=$(timeout 60 "$ATTNLAB" -e "load $T/m" 2>&1)
ok "/dev/zero config: refused" has "$out" "not a regular file (a character device)"
rm -f "$T/m/config.json"
truncate -s 20M "$T/m/config.json"
out=$(timeout 60 "$ATTNLAB" -e "load $T/m" 2>&1)
ok "oversized config: refused with the cap" has "$out" "larger than the 16 MiB attnlab reads for a config file"
rm -f "$T/m/config.json"
cp "$T/config.orig" "$T/m/config.json"

# calib load of a safetensors file that is not a calibration file (the model's own weights)
shard=$(ls "$T/m"/*.safetensors | head -1)
out=$(timeout 60 "$ATTNLAB" -e "load $T/m; calib load $shard" 2>&1)
ok "calib load: refused" has "$out" "not a calibration file (metadata format is"
ok "calib load: the message is one clean line" test "$(printf '%s' "$out" | tr -d -c '\001-\010\016-\037' | wc -c)" -eq 0

# tokenizer.json with a negative added-token id (was an out-of-bounds write)
cat >"$T/m/tokenizer.json" <<'EOF'
{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"},
 "added_tokens": [{"id": -100000, "content": "<x>", "special": true}]}
EOF
out=$(timeout 60 "$ATTNLAB" -e "load $T/m; tokenize \"ab\"" 2>&1)
ok "negative added-token id: refused" has "$out" "added token '<x>' has id -100000, which is not a token id"
rm -f "$T/m/tokenizer.json"

# refs/main pointing out of snapshots/
hub="$T/hub/models--org--name"
mkdir -p "$hub/snapshots/abc" "$hub/refs"
echo '{}' >"$hub/snapshots/abc/config.json"
echo '{}' >"$T/config.json"
printf '../../..' >"$hub/refs/main"
out=$(HF_HUB_CACHE="$T/hub" timeout 60 "$ATTNLAB" -e "load org/name" 2>&1)
ok "refs/main ../../..: refused" has "$out" "refs/main holds '../../..', not a revision name"

# the fuzz targets' findings in the config and tokenizer readers (tests/corpus/fuzz-findings): each
# is refused with a message on one clean line (no raw control characters reach the terminal)
FF="$ATTNLAB_SRC/tests/corpus/fuzz-findings"
clean() { test "$(printf '%s' "$1" | tr -d -c '\001-\010\013-\037' | wc -c)" -eq 0; }
for f in config-huge-moe-numbers config-json-error-echoes-raw-bytes config-model-type-control-chars config-huge-layer-count; do
    mkdir -p "$T/ff/$f"
    cp "$FF/$f.json" "$T/ff/$f/config.json"
    out=$(timeout 60 "$ATTNLAB" -e "load $T/ff/$f" 2>&1); rc=$?
    ok "fuzz finding $f: refused" [ "$rc" -eq 1 ]
    ok "fuzz finding $f: one clean line" clean "$out"
done
out=$(timeout 60 "$ATTNLAB" -e "load $T/ff/config-huge-moe-numbers" 2>&1)
ok "huge MoE counts: named" has "$out" "moe_layer_freq = 1e+40 (must be a count that fits an int)"
out=$(timeout 60 "$ATTNLAB" -e "load $T/ff/config-huge-layer-count" 2>&1)
ok "huge layer count: named" has "$out" "num_hidden_layers 2147483647: attnlab reads at most 512 layers"
for f in tokenizer-json-error-echoes-raw-bytes tokenizer-bos-id-without-piece; do
    out=$(timeout 60 "$ATTNLAB" -e "load $T/m; tokenizer $FF/$f.json" 2>&1); rc=$?
    ok "fuzz finding $f: refused" [ "$rc" -eq 1 ]
    ok "fuzz finding $f: one clean line" clean "$(printf '%s' "$out" | tail -n 1)"
done
out=$(timeout 60 "$ATTNLAB" -e "load $T/m; tokenizer $FF/tokenizer-bos-id-without-piece.json" 2>&1)
ok "post_processor id without a piece: named" has "$out" "adds token id 1, which has no piece"

# a FIFO where a checkpoint's weights should be: refused at once, never a blocking open
mkfifo "$T/fifo.bin"
mkdir -p "$T/fifo-model"
cp "$T/m/config.json" "$T/fifo-model/config.json"
mkfifo "$T/fifo-model/model.safetensors"
out=$(timeout 20 "$ATTNLAB" -e "load $T/fifo.bin" 2>&1); rc=$?
ok "llama2.c .bin FIFO: refused, no hang" [ "$rc" -eq 1 ]
ok "llama2.c .bin FIFO: said" has "$out" "not a regular file"
out=$(timeout 20 "$ATTNLAB" -e "load $T/fifo-model" 2>&1); rc=$?
ok "model.safetensors FIFO: refused, no hang" [ "$rc" -eq 1 ]
ok "model.safetensors FIFO: said" has "$out" "not a regular file"

# quantization configs and scales (issue 28): refused with one clear line naming the tensor or the key,
# no crash, no hang (a regex glibc's regcomp would take gigabytes on)
if command -v python3 >/dev/null; then
    mkdir -p "$T/q"
    python3 - "$T/m/config.json" "$T/q" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1]))
def w(name, q):
    os.makedirs(os.path.join(sys.argv[2], name), exist_ok=True)
    d = dict(c, quantization_config=q)
    json.dump(d, open(os.path.join(sys.argv[2], name, 'config.json'), 'w'))
w('regex', {'quant_method': 'compressed-tensors', 'ignore': ['re:a' + '+' * 400]})
w('ctrl', {'quant_method': 'compressed-tensors', 'config_groups': {'g\x1b[31m': 3}})
w('scheme', {'quant_method': 'modelopt', 'quant_algo': 'NVFP4'})
PY
    for d in regex ctrl scheme; do cp "$T/m/model.safetensors" "$T/q/$d/"; done
    out=$(timeout 60 "$ATTNLAB" -e "load $T/q/regex" 2>&1); rc=$?
    ok "ignore regex of 400 '+': refused at once" [ "$rc" -eq 1 ]
    ok "... naming the entry" has "$out" "quantization_config.ignore entry 're:a+++.*' is not a regular expression"
    out=$(timeout 60 "$ATTNLAB" -e "load $T/q/ctrl" 2>&1)
    ok "a group name with an escape code: one printable line" has "$out" "config_groups.g?\[31m should be an object"
    ok "... never printed raw" test "$(printf '%s' "$out" | tr -d -c '\033' | wc -c)" -eq 0
fi
if [ -f "${ATTNLAB_MODELS:-}/stories260K-hf/config.json" ] && command -v python3 >/dev/null; then
    python3 "$ATTNLAB_SRC/tests/fp8blk_quant.py" "$ATTNLAB_MODELS/stories260K-hf" "$T/e8" e8m0 e8m0-255
    out=$(timeout 60 "$ATTNLAB" -e "load $T/e8; ranks qk offset 4" 2>&1)
    ok "an E8M0 block scale 0xFF: refused naming the tensor and block" has "$out" \
        "'model.layers.0.self_attn.k_proj.weight_scale_inv' block \[0, 0\] is nan (E8M0 code 0xff)"
    python3 "$ATTNLAB_SRC/tests/fp8blk_quant.py" "$ATTNLAB_MODELS/stories260K-hf" "$T/sch" bf16
    python3 -c "import json,sys; p=sys.argv[1]+'/config.json'; c=json.load(open(p)); c['quantization_config']={'quant_method':'mxfp4'}; c['quantization_config']['modules_to_not_convert']=['model.layers.0.mlp']; json.dump(c,open(p,'w'))" "$T/sch"
    out=$(timeout 60 "$ATTNLAB" -e "load $T/sch" 2>&1)
    ok "a config naming another scheme than the tensors': refused naming the module and key" has "$out" \
        "'model.layers.0.mlp.down_proj' is stored as FP8 with block scales (weight_scale_inv) but quantization_config.modules_to_not_convert entry 'model.layers.0.mlp' lists it as not quantized"
fi
cli_done
