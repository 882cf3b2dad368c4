#!/usr/bin/env bash
# cli_attend.sh -- what a head does on real text, through `attnlab -e` and a Lua notebook:
#   tokenize ... strings: the strings after BOS concatenate back to the text (llama2.c's dummy prefix,
#     GPT-2's byte-level BPE with a two-byte character, a SentencePiece tokenizer.json's metaspace and
#     byte fallback), the ids column equals plain tokenize's;
#   attend: `matrix to FILE.csv` rows sum to 1, keys after the query are 0, the top key of each row is
#     its largest weight; gpt-oss's sink row sums < 1 with the sink line; a linear-attention layer is
#     refused naming the attention layers; `compare` after `truncate vo` leaves layer 0's pattern (its
#     QK untouched) and changes a later layer's;
#   ablate: the perplexity with a head removed equals the perplexity of a checkpoint whose o_proj
#     columns of that head are zeroed (written here in Python) to 1e-6, for one head and for two
#     heads `together`; the intact line equals plain ppl;
#   plot attention: the SVG's labels are `tokenize strings`' strings, once along each axis in order ('#'
#     kept); gpt-oss's figure says what the sink takes; a linear layer is refused with no file; compare
#     writes a PNG; plot head-importance's largest rise is `ablate layer all`'s largest delta.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K-hf
cli_setup /tmp/attnlab-cli-attend shared-cache
cd "$T" || exit 1
HF="$M/stories260K-hf"
SRC="${ATTNLAB_SRC:-$(dirname "$0")/..}"
cp "$SRC/examples/tinystory.txt" story.txt

# ---------------------------------------------------------------- tokenize strings
cat >rt.lua <<'LUA'
attn.load(arg[1])
local text = arg[2]
local rows = attn.tokenize(text, {strings = true, raw = true})
local ids = attn.tokenize(text)
local parts = {}
for i, r in ipairs(rows) do
  assert(r.id == ids[i], "id " .. i .. ": " .. tostring(r.id) .. " vs " .. tostring(ids[i]))
  if not (i == 1 and r.string == "<s>") then parts[#parts + 1] = r.string end
end
local s = table.concat(parts)
print(s == text and "ROUNDTRIP OK" or ("ROUNDTRIP BAD [" .. s .. "]"))
LUA
TEXT="Once upon a time, there was a café.
New line: \"quoted\"."
for model in "$HF" "$M/gpt2-tiny-random"; do
    run rt.lua "$model" "$TEXT"
    grep -q "ROUNDTRIP OK" out.txt || fail "tokenize strings round trip on $model: [$(cat out.txt)] $(cat err.txt)"
done
# a SentencePiece-style tokenizer.json (test_tokenizer.c's: Prepend + Replace, byte fallback, <s> template)
python3 - <<'PY'
import json
M = '\u2581'
vocab = {'<unk>': 0, '<s>': 1, '</s>': 2}
vocab.update({'<0x%02X>' % b: 3 + b for b in range(256)})
for i, p in enumerate([M, 'h', 'e', 'l', 'o', 'w', 'r', 'd', M + 'h', M + 'he', 'll', 'llo', M + 'hello', M + 'w', 'or',
                       M + 'wor', 'ld', M + 'world', M + M]):
    vocab[p] = 259 + i
merges = [M + ' h', M + 'h e', 'l l', 'll o', M + 'he llo', M + ' w', 'o r', M + 'w or', 'l d', M + 'wor ld', M + ' ' + M]
sp = lambda i, c: {'id': i, 'content': c, 'special': True}
json.dump({'added_tokens': [sp(0, '<unk>'), sp(1, '<s>'), sp(2, '</s>')],
           'normalizer': {'type': 'Sequence', 'normalizers': [{'type': 'Prepend', 'prepend': M},
                          {'type': 'Replace', 'pattern': {'String': ' '}, 'content': M}]},
           'pre_tokenizer': None,
           'post_processor': {'type': 'TemplateProcessing', 'single': [{'SpecialToken': {'id': '<s>', 'type_id': 0}},
                              {'Sequence': {'id': 'A', 'type_id': 0}}],
                              'special_tokens': {'<s>': {'id': '<s>', 'ids': [1], 'tokens': ['<s>']}}},
           'model': {'type': 'BPE', 'byte_fallback': True, 'unk_token': '<unk>', 'vocab': vocab, 'merges': merges}},
          open('spm.json', 'w'), ensure_ascii=False)
PY
cat >rt_spm.lua <<'LUA'
attn.load(arg[1])
attn.tokenizer("spm.json")
for _, text in ipairs({"hello world", "hello  world", "hello \u{2603} world"}) do
  local parts = {}
  for i, r in ipairs(attn.tokenize(text, {strings = true, raw = true})) do
    if i > 1 then parts[#parts + 1] = r.string end
  end
  print(table.concat(parts) == text and "SPM OK" or ("SPM BAD [" .. table.concat(parts, "|") .. "]"))
end
LUA
run rt_spm.lua "$HF"
[ "$(grep -c "SPM OK" out.txt)" = 3 ] || fail "tokenize strings round trip, SentencePiece: [$(cat out.txt)] $(cat err.txt)"
run -e "load $HF; tokenize \"Once upon a time\" strings"
grep -qE "^ +2 +407 +upon" out.txt || fail "tokenize strings table: [$(cat out.txt)]"
grep -qE "^ +0 +1 +<s>" out.txt || fail "tokenize strings BOS row: [$(cat out.txt)]"

# ---------------------------------------------------------------- attend
run -e "load $HF; attend file story.txt layer 2 head 5 max-tokens 150 matrix to m.csv; attend \"Once upon a time, there was a cat\" layer 1 head 2 top 3; attend \"Once upon a time\" layer 1 head 2"
[ "$(rc)" = 0 ] || fail "attend: rc $(rc): $(cat err.txt)"
python3 - m.csv <<'PY' || fail "attend matrix: $(cat py.txt)"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, body = rows[0], rows[1:]
T = len(body)
assert T == 150 and len(head) == T + 2, (T, len(head))
for i, r in enumerate(body):
    w = [float(x) for x in r[2:]]
    assert abs(sum(w) - 1) < 1e-5, (i, sum(w))
    assert all(x == 0 for x in w[i + 1:]), i
print("ok")
PY
grep -qE "^ +4 +time +3 ' a' 0\.9" out.txt || fail "attend top keys: [$(cat out.txt)]"
grep -qE "^pos +token +0:<s> +1:Once +2: upon +3: a +4: time$" out.txt || fail "attend's short-text matrix: [$(cat out.txt)]"

# gpt-oss: the sink takes weight (ids: the synthetic checkpoint has no tokenizer); a hybrid's linear layer
echo "1 5 9 14 3 77 5 9 100 4 12 5" >ids.txt
run -e "synth family gpt_oss oss; synth family qwen3_next q3n"
run -e "load oss; attend ids ids.txt layer 1 head 2 matrix to s.csv"
grep -q "sink: the head's sink logit takes" out.txt || fail "no sink line: [$(cat out.txt)] $(cat err.txt)"
grep -q "oss layer 1 head 2 on 12 tokens (KV head 1 of 2" out.txt || fail "gpt-oss headline: [$(cat out.txt)]"
run -e "synth family gemma4_text g4; load g4; attend ids ids.txt layer 4 head 3 top 1"
grep -q "g4 layer 4 head 3 on 12 tokens (KV head 1 of 2; keys of layer 2; sliding window of 8 tokens)" out.txt ||
    fail "Gemma 4 KV-shared headline: [$(cat out.txt)] $(cat err.txt)"
python3 -c "
import csv
b = list(csv.reader(open('s.csv')))[1:]
s = [sum(float(x) for x in r[2:]) for r in b]
assert all(v < 1 - 1e-4 for v in s), s
" || fail "gpt-oss rows should sum below 1"
run -e "load q3n; attend ids ids.txt layer 0 head 1"
[ "$(rc)" = 1 ] && grep -q "Gated DeltaNet linear attention: it has no softmax attention heads (attention layers: 3)" err.txt ||
    fail "linear layer: rc $(rc) [$(cat err.txt)]"
run -e "load q3n; attend ids ids.txt layer 3 head 1"
[ "$(rc)" = 0 ] || fail "q3n attention layer: $(cat err.txt)"

# compare: truncate vo keeps layer 0's scores (tv 0) and changes layer 3's inputs (tv > 0)
run -e "load $HF; truncate vo rank 2; attend file story.txt layer 0 head 1 max-tokens 150 compare to c0.csv; attend file story.txt layer 3 head 1 max-tokens 150 compare to c3.csv"
[ "$(rc)" = 0 ] || fail "attend compare: rc $(rc): $(cat err.txt)"
grep -q "attend of stories260K-hf with truncate vo rank 2" out.txt || fail "compare headline: [$(cat out.txt)]"
python3 - <<'PY' || fail "compare tv"
import csv
def tv(p): return [float(r['tv']) for r in csv.DictReader(open(p))]
a, b = tv('c0.csv'), tv('c3.csv')
assert max(a) < 1e-4, max(a)
assert max(b) > 1e-2, max(b)
PY

# ---------------------------------------------------------------- ablate = zeroed o_proj columns
cat >zero_head.py <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
import st_tensors as st
src, dst, layer, heads, hd = sys.argv[2], sys.argv[3], int(sys.argv[4]), [int(h) for h in sys.argv[5].split(',')], int(sys.argv[6])
t = st.tensors(src)
name = 'model.layers.%d.self_attn.o_proj.weight' % layer
dt, shape, data = t[name]
assert dt == 'F32', dt
rows, cols = shape
b = bytearray(data)
for r in range(rows):
    for h in heads:
        a = (r * cols + h * hd) * 4
        b[a:a + hd * 4] = bytes(hd * 4)
t[name] = (dt, shape, bytes(b))
st.copy_other_files(src, dst)
st.write_tensors(os.path.join(dst, 'model.safetensors'), list(t.items()))
PY
python3 zero_head.py "$SRC/tests" "$HF" z23 2 3 8 && python3 zero_head.py "$SRC/tests" "$HF" z10 1 0,6 8 ||
    fail "could not write the zeroed checkpoints"
run -e "load $HF; ablate story.txt layer 2 head 3 seqlen 64 to a1.csv; ablate story.txt layer 1 heads 0,6 together seqlen 64 to a2.csv; ppl story.txt seqlen 64 to p0.csv; load z23; ppl story.txt seqlen 64 to p1.csv; load z10; ppl story.txt seqlen 64 to p2.csv"
[ "$(rc)" = 0 ] || fail "ablate: rc $(rc): $(cat err.txt)"
grep -q "stories260K-hf: ppl .* intact" out.txt || fail "intact line: [$(cat out.txt)]"
python3 - <<'PY' || fail "ablate against zeroed o_proj columns"
import csv, re
def one(p, col='ppl'): return float(list(csv.DictReader(open(p)))[0][col])
a1, a2, p0, p1, p2 = one('a1.csv'), one('a2.csv'), one('p0.csv'), one('p1.csv'), one('p2.csv')
d1 = one('a1.csv', 'delta')
assert abs(a1 - p1) <= 1e-6 * p1, (a1, p1)
assert abs(a2 - p2) <= 1e-6 * p2, (a2, p2)
assert abs(d1 - (p1 - p0)) <= 1e-6 * p0, (d1, p1 - p0)
assert abs(a1 - p0) > 1e-4 and abs(a2 - p0) > 1e-4, (a1, a2, p0)
r = list(csv.DictReader(open('a2.csv')))
assert len(r) == 1 and r[0]['heads'] == '0,6', r
PY
run -e "load $HF; ablate story.txt layer all seqlen 64 max-tokens 200 to all.csv"
[ "$(rc)" = 0 ] && [ "$(tail -n +2 all.csv | wc -l)" = 40 ] || fail "ablate layer all: rc $(rc), $(wc -l <all.csv) lines $(cat err.txt)"
# a Mamba-2 hybrid: layer all ablates its attention layers' heads only; a Mamba layer named is refused
seq 3 60 | tr '\n' ' ' >ids58.txt
run -e "synth family nemotron_h nh; load nh; ablate ids ids58.txt layer all seqlen 16 to nh.csv"
[ "$(rc)" = 0 ] && [ "$(cut -d, -f1 nh.csv | tail -n +2 | sort -u | tr '\n' ' ')" = "1 4 " ] ||
    fail "ablate on nemotron_h: rc $(rc) layers [$(cut -d, -f1 nh.csv | sort -u | tr '\n' ' ')] $(cat err.txt)"
run -e "load nh; ablate ids ids58.txt layer 2 head 0"
[ "$(rc)" = 1 ] && grep -q "layer 2 of nh is Mamba-2 .* no softmax attention heads (attention layers: 1, 4)" err.txt ||
    fail "ablate of a Mamba layer: rc $(rc) [$(cat err.txt)]"
run -e "load $HF; ablate story.txt layer 1 head 3 together"
[ "$(rc)" = 1 ] && grep -q "together" err.txt || fail "together with head: rc $(rc) [$(cat err.txt)]"

# ---------------------------------------------------------------- plot attention, plot head-importance
run -e "load $HF; tokenize \"Once upon a time, #1 there\" strings to tok.csv; plot attention \"Once upon a time, #1 there\" layer 1 head 2 to a.svg; truncate vo rank 2; plot attention file story.txt max-tokens 40 layer 3 head 1 compare to c.png"
[ "$(rc)" = 0 ] || fail "plot attention: rc $(rc): $(cat err.txt)"
is_svg a.svg && is_png c.png || fail "plot attention files"
python3 - <<'PY' || fail "plot attention: token labels"
import csv, html, re
toks = [r['string'] for r in csv.DictReader(open('tok.csv'))]
s = open('a.svg').read()
texts = [html.unescape(re.sub(r'<[^>]+>', '', t)) for t in re.findall(r'<text[^>]*>(.*?)</text>', s, re.S)]
labels = [t for t in texts if t in toks]
want = [t for t in toks for _ in range(2)]       # each token once along each axis, in order
assert labels == want, (labels, want)
PY
run -e "load oss; plot attention ids ids.txt layer 1 head 2 to o.svg; load q3n; plot attention ids ids.txt layer 0 head 1 to q.svg"
grep -q "sink" o.svg || python3 -c "
import html,re,sys
s=open('o.svg').read()
t=' '.join(html.unescape(re.sub(r'<[^>]+>','',x)) for x in re.findall(r'<text[^>]*>(.*?)</text>', s, re.S))
sys.exit(0 if 'the sink takes' in t else 1)" || fail "gpt-oss figure: no sink subtitle"
[ "$(rc)" = 1 ] && grep -q "no softmax attention heads" err.txt && [ ! -e q.svg ] || fail "plot attention on a linear layer: rc $(rc)"
run -e "load $HF; ablate story.txt layer all seqlen 64 max-tokens 300 to all3.csv; ranks vo all tau 0.9 to r.csv; plot head-importance story.txt seqlen 64 max-tokens 300 tau 0.9 to imp.png; plot head-importance story.txt layer 2 seqlen 64 max-tokens 300 to imp2.svg"
[ "$(rc)" = 0 ] && is_png imp.png && is_svg imp2.svg || fail "plot head-importance: rc $(rc): $(cat err.txt)"
python3 - <<'PY' || fail "head-importance's largest rise is not ablate's"
import csv, re
rows = list(csv.DictReader(open('all3.csv')))
best = max(rows, key=lambda r: float(r['delta']))
line = [l for l in open('out.txt') if 'largest rise' in l][0]
m = re.search(r'layer (\d+) head (\d+) \(\+([0-9.e-]+)\)', line)
assert m and m.group(1) == best['layer'] and m.group(2) == best['heads'], (line, best)
assert abs(float(m.group(3)) - float(best['delta'])) <= 1e-3 * abs(float(best['delta'])), (line, best)
rk = [r for r in csv.DictReader(open('r.csv')) if r['layer'] == best['layer'] and r['head'] == best['heads']][0]
assert line.rstrip().endswith('VO rank (tau 0.9) ' + rk['rank_vo']), (line, rk)
PY
run -e "load $HF; plot head-importance story.txt layer 1 seqlen 64 max-tokens 200 rank qk to q.png"
[ "$(rc)" = 0 ] && grep -q "no QK ranks beside the deltas: QK fusion refused" err.txt && grep -q "largest rise without one head: layer 1 head [0-9]* (+[0-9.e-]*)$" out.txt ||
    fail "head-importance rank qk without offset: rc $(rc) [$(cat out.txt)] [$(cat err.txt)]"

# the example notebook: three figures, the round trip
run "$SRC/examples/attention.lua" "$HF" nb story.txt
[ "$(rc)" = 0 ] && grep -q "strings round-trip: true" out.txt && grep -q "^3 figures in nb" out.txt || fail "examples/attention.lua: rc $(rc) [$(cat out.txt)] $(cat err.txt)"
for f in attention attention-compare head-importance; do is_png "nb/$f.png" || fail "nb/$f.png"; done

cli_done
