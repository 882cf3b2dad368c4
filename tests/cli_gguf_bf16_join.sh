#!/usr/bin/env bash
# cli_gguf_bf16_join.sh -- a BF16 GGUF's joined tensors read back in BF16 (gguf_arch.c: back_dtype):
# kv_b_proj of a deepseek2 GGUF (llama.cpp's attn_k_b transposed per head + attn_v_b) and gpt-oss's
# experts (ffn_gate_exps / ffn_up_exps interleaved, each expert transposed) are pure re-layouts, exact in
# BF16; the old reader widened them to F32. A BF16 source (demo-llama-bf16 converted to MLA; `synth family
# gpt_oss dtype bf16`) is written as GGUF bf16, loaded, truncated on layer 0 and exported dense; the same
# from the HF source: every tensor both store in BF16 is byte for byte the source's export (the old reader:
# kv_b_proj and the experts F32, and layer 0's untouched tensors zeros past their first page -- the store's
# page release zeroed the anonymous buffer), the 1-D ones llama.cpp stores in F32 equal in value. info's
# weights row is the source's; the gguf_tensors row counts what is kept; a Gemma GGUF whose plus-one norms
# are BF16 says they are read widened (the old row said "BF16 kept" for them; the
# rewrite truncates 1 + w to BF16: not the F32 file's values).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gguf-bf16-join shared-cache
cd "$T" || exit 1
mkdir -p g
echo "1 5 9 23 7 100 3 44 12 9 8 77 66 55 4 3 2 1 0 99 17 18 19 20 21 22 23 24 25 26 27 28 29 30" > ids.txt

run -e "load demo-llama-bf16; convert mla kv-rank 16; export mla; load mla; export g/mla.gguf dtype bf16; \
synth family gpt_oss oss dtype bf16; load oss; export g/oss.gguf dtype bf16; \
synth family gemma2 gem dtype bf16; load gem; export g/gem.gguf dtype bf16"
ok "sources and GGUFs written (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0

# cmp_export A B: A's and B's tensors -- "same N" (N tensors byte for byte; the rest F32 in B, where llama.cpp
# stores 1-D tensors and biases in F32, of values that round to A's BF16) or what differs
cat > cmp.py <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[3])
from st_tensors import tensors
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
def bf16(x):
    u = struct.unpack('<%dI' % (len(x) // 4), x)
    return b''.join(struct.pack('<H', (v + 0x7fff + ((v >> 16) & 1)) >> 16) for v in u)
bad, same = [], 0
if set(a) != set(b): bad.append('names differ: %s' % sorted(set(a) ^ set(b))[:3])
for n in sorted(set(a) & set(b)):
    (da, sa, xa), (db, sb, xb) = a[n], b[n]
    if (da, sa, xa) == (db, sb, xb): same += 1
    elif not (da == 'BF16' and db == 'F32' and sa == sb and bf16(xb) == xa): bad.append('%s %s %s' % (n, da, db))
print('same %d' % same if not bad else 'differ %d: %s' % (len(bad), ' '.join(bad[:4])))
PY
cmp_export() { python3 cmp.py "$1" "$2" "$ATTNLAB_SRC/tests"; }
# row NAME MODEL: info's row NAME
row() { "$ATTNLAB" -e "load $2; info" 2>&1 </dev/null | awk -v k="$1" '$1 == k { $1 = ""; print; exit }'; }

for m in mla oss; do
    run -e "load $m; truncate vo rank 8 layers 0-0; export ${m}_src format dense; \
load g/$m.gguf; truncate vo rank 8 layers 0-0; export ${m}_gg format dense"
    ok "$m: both exports ran (rc $(rc)) [$(head -c 300 err.txt)]" test "$(rc)" = 0
    r=$(cmp_export ${m}_src ${m}_gg)
    ok "$m: the GGUF's export is the source's byte for byte [$r]" has "$r" "^same"
    a=$(row weights $m) b=$(row weights g/$m.gguf)
    ok "$m: info weights is the source's [$a] [$b]" test -n "$a" -a "$a" = "$b"
done
r=$(cmp_export mla_src mla_gg)
ok "mla: 30 of 43 byte for byte (kv_b_proj, layer 0's untouched ones; 13 norms F32) [$r]" test "$r" = "same 30"
r=$(cmp_export oss_src oss_gg)
ok "oss: 30 of 71 byte for byte (the experts among them; 41 norms, biases, sinks F32) [$r]" test "$r" = "same 30"
ok "mla: kv_b_proj kept [$(row gguf_tensors g/mla.gguf)]" test "$(row gguf_tensors g/mla.gguf)" = " 34 BF16 kept, 13 F32"
ok "oss: experts kept [$(row gguf_tensors g/oss.gguf)]" test "$(row gguf_tensors g/oss.gguf)" = " 34 BF16 kept, 45 F32"

# ppl MODEL MODE: the perplexity (json, all digits) of MODEL in compute MODE
ppl() { ppl_of "set compute $2; load $1; ppl ids ids.txt seqlen 32"; }
for m in mla oss; do
    for mode in f32 bf16; do
        a=$(ppl $m $mode) b=$(ppl g/$m.gguf $mode)
        ok "$m: ppl compute $mode the source's bit for bit [$a] [$b]" test "${a#ERR}" = "$a" -a "$a" = "$b"
    done
done

# Gemma's norms stored as BF16 (llama.cpp's converter writes 1-D tensors F32; another converter may not):
# the gem GGUF rewritten with its F32 norms as BF16 (their values are BF16's: exact)
python3 - g/gem.gguf g/gemb.gguf <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
at = 0
def take(fmt):
    global at
    v = struct.unpack_from('<' + fmt, d, at); at += struct.calcsize('<' + fmt); return v[0] if len(v) == 1 else v
def skip_str(): n = take('Q'); global at; at += n
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip_val(t):
    global at
    if t == 8: skip_str()
    elif t == 9:
        et, n = take('I'), take('Q')
        for _ in range(n): skip_val(et)
    else: at += SIZES[t]
assert d[:4] == b'GGUF'; at = 4
ver, nt, nkv = take('I'), take('Q'), take('Q')
for _ in range(nkv): skip_str(); skip_val(take('I'))
kv_end = at
infos = []
for _ in range(nt):
    n = take('Q'); name = d[at:at + n].decode(); at += n
    nd = take('I'); ne = [take('Q') for _ in range(nd)]; ty = take('I'); off = take('Q')
    infos.append([name, ne, ty, off])
data0 = (at + 31) // 32 * 32
def nbytes(ne, ty):
    k = 1
    for x in ne: k *= x
    return k * {0: 4, 1: 2, 30: 2}[ty]
blobs = []
for name, ne, ty, off in infos:
    x = d[data0 + off:data0 + off + nbytes(ne, ty)]
    if ty == 0 and name.endswith('norm.weight'):
        x = b''.join(x[i + 2:i + 4] for i in range(0, len(x), 4)); ty = 30
    blobs.append((name, ne, ty, x))
head = bytearray(d[:kv_end]); off = 0; data = bytearray()
for name, ne, ty, x in blobs:
    b = name.encode(); head += struct.pack('<Q', len(b)) + b + struct.pack('<I', len(ne))
    head += b''.join(struct.pack('<Q', v) for v in ne) + struct.pack('<IQ', ty, len(data))
    data += x + b'\0' * (-len(x) % 32)
head += b'\0' * (-len(head) % 32)
open(sys.argv[2], 'wb').write(bytes(head) + bytes(data))
PY
ok "gemma: F32 norms: no widening said [$(row gguf_tensors g/gem.gguf)]" test "$(row gguf_tensors g/gem.gguf)" = " 29 BF16 kept, 17 F32"
ok "gemma: BF16 norms read widened, said [$(row gguf_tensors g/gemb.gguf)]" \
    test "$(row gguf_tensors g/gemb.gguf)" = " 29 BF16 kept, 17 BF16 read widened to F32 (norms stored plus one)"
ok "gemma: ppl runs on the BF16 norms [$(ppl g/gemb.gguf f32)]" has "$(ppl g/gemb.gguf f32)" "^[0-9]"
cli_done
