#!/usr/bin/env bash
# cli_gguf_mxfp4.sh -- gpt-oss's MXFP4 experts in a GGUF kept 4-bit when read back (gguf_arch.c's
# back_mx_split; the old reader widened them to F32). A BF16 gpt-oss (`synth family gpt_oss dtype bf16`)
# with its experts in MXFP4 as released (tests/gptoss_mxfp4.py: _blocks / _scales, quantization_config)
# is exported as GGUF (BF16: the experts written as ggml's MXFP4, the line says so; F32: dequantized, the
# line says so) and loaded: info's gguf_tensors row counts the MXFP4 tensors kept, the weights and
# quantization rows are the HF source's; ppl equals the HF source's bit for bit in compute f32 and bf16
# (the old reader's F32 experts gave the F32 twin's number in bf16 mode: the MXFP4 kernels now run); a
# dense export of a truncation of the loaded GGUF copies the experts' blocks and scales byte for byte
# those of the HF source, with its quantization_config, and loads with experts MXFP4; a GGUF export of
# the loaded GGUF writes the expert tensors byte for byte as the first file holds them.
# tests/test_gguf_mxfp4.c has the byte patterns, the product and the resident memory.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gguf-mxfp4
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p g h
echo "1 5 9 23 7 100 3 44 12 9 8 77 66 55 4 3 2 1 0 99 17 18 19 20" > ids.txt
row() { awk -v k="$2" '$1 == k { $1 = ""; sub(/^ +/, ""); print; exit }' <<<"$1"; }

run -e "synth family gpt_oss ob dtype bf16"
python3 "$ATTNLAB_SRC/tests/gptoss_mxfp4.py" ob omx mxfp4 || fail "gptoss_mxfp4.py"
run -e "load omx; export g/omx.gguf dtype bf16; export g/omxf.gguf dtype f32"
ok "exports written (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0
ok "BF16 export: the experts written as ggml's MXFP4, said" has "$(cat out.txt)" \
    "^  12 MXFP4 expert tensors written as ggml's MXFP4 (type 39, each block repacked bit for bit, as llama.cpp's converter does)$"
ok "F32 export: the experts dequantized, said" has "$(cat out.txt)" "^  12 MXFP4 expert tensors dequantized to F32$"

src=$(e "load omx; info")
out=$(e "load g/omx.gguf; info")
ok "info: MXFP4 kept [$(row "$out" gguf_tensors)]" test "$(row "$out" gguf_tensors)" = "22 BF16 kept, 12 MXFP4 kept, 45 F32"
ok "info: the weights row is the source's [$(row "$out" weights)]" \
    test "$(row "$out" weights)" = "attention BF16, experts MXFP4, embeddings BF16" -a "$(row "$src" weights)" = "$(row "$out" weights)"
gq=$(row "$out" quantization)
ok "info: the quantization row is the source's, said to come from the GGUF's types [$gq]" \
    test -n "$(row "$src" quantization)" -a "$(row "$src" quantization | sed 's/config.json quantization_config/the GGUF'"'"'s ggml tensor types, read as quantization_config/')" = "$gq"
ok "info: not 'config.json' for a GGUF (attnlab built that config) [$gq]" has "$gq" "(the GGUF's ggml tensor types, read as quantization_config.quant_method)"
out=$(e "load g/omxf.gguf; info")
ok "info of the F32 export: experts F32 [$(row "$out" weights)]" test "$(row "$out" weights)" = "attention F32, experts F32, embeddings F32"

for c in f32 bf16; do
    a=$(ppl_of "load omx; set compute $c; ppl ids ids.txt seqlen 24")
    b=$(ppl_of "load g/omx.gguf; set compute $c; ppl ids ids.txt seqlen 24")
    ok "ppl in compute $c: the GGUF's is the HF MXFP4 source's bit for bit [$b vs $a]" test "$a" = "$b" -a "${a#ERR}" = "$a"
done

# the loaded GGUF written as GGUF again: its experts' tensors the first file's byte for byte
run -e "load g/omx.gguf; export h/omx2.gguf dtype bf16"
ok "GGUF of the loaded GGUF (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0
msg=$(python3 - g/omx.gguf h/omx2.gguf <<'PY'
import struct, sys
def tensors(path):
    b = open(path, 'rb').read()
    at = [24]
    def take(n): at[0] += n; return b[at[0] - n:at[0]]
    def u(fmt): return struct.unpack('<' + fmt, take(struct.calcsize(fmt)))[0]
    size = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    def skip(t):
        if t == 8: take(u('Q'))
        elif t == 9:
            et, n = u('I'), u('Q')
            for _ in range(n): skip(et)
        else: take(size[t])
    nt, nkv = struct.unpack('<QQ', b[8:24])
    for _ in range(nkv): take(u('Q')); skip(u('I'))
    info = []
    for _ in range(nt):
        name = take(u('Q')).decode(); nd = u('I'); ne = [u('Q') for _ in range(nd)]
        info.append((name, u('I'), ne, u('Q')))
    data = (at[0] + 31) // 32 * 32
    offs = sorted(o for _, _, _, o in info) + [len(b) - data]
    return {n: (t, ne, b[data + o:data + min(x for x in offs if x > o)]) for n, t, ne, o in info}
a, c = tensors(sys.argv[1]), tensors(sys.argv[2])
ex = [n for n in a if '_exps.weight' in n]
bad = ['%s differs' % n for n in ex if a[n][0] != 39 or c.get(n, (0,))[:2] != a[n][:2] or c[n][2][:len(a[n][2])] != a[n][2]]
print(' '.join(bad + ([] if len(ex) == 12 else ['%d expert tensors' % len(ex)])))
PY
)
ok "GGUF again: the 12 MXFP4 expert tensors byte for byte [$msg]" test -z "$msg"

run -e "load g/omx.gguf; truncate vo tau 0.9 layers 1; export ex format dense; load ex; info"
ok "dense export of the loaded GGUF (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0
msg=$(python3 - omx ex <<'PY'
import json, os, sys
from st_tensors import tensors
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
keys = [k for k in a if k.endswith('_blocks') or k.endswith('_scales')]
bad = ['%s differs' % k for k in keys if b.get(k) != a[k]]
bad += [] if len(keys) == 16 else ['%d blocks / scales in the source' % len(keys)]
qa, qb = (json.load(open(os.path.join(d, 'config.json'))).get('quantization_config') for d in sys.argv[1:3])
bad += [] if qa == qb else ['quantization_config %s' % qb]
print(' '.join(bad))
PY
)
ok "export: the experts' blocks and scales the HF source's byte for byte, its quantization_config [$msg]" test -z "$msg"
ok "export: loads with its experts MXFP4" has "$(cat out.txt)" "^weights  *attention BF16, experts MXFP4, embeddings BF16$"
cli_done
