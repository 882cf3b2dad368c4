#!/usr/bin/env bash
# cli_gguf_tokenizer.sh -- `load X.gguf` reads the tokenizer the file embeds (tokenizer.ggml.*, as
# llama.cpp reads them; tokenizer.h): "llama" (stories260K's llama2.c vocabulary as SentencePiece
# pieces with scores) and "gpt2" (gpt2-tiny-random's byte-level BPE with merges and pre). `ppl`,
# `tokenize` and `generate` use it without `tokenizer FILE` (the old code looked only beside the file
# and stopped: "no tokenizer beside ..."); the ids and perplexity are the source's exactly; `info` and
# `tokenizer` say it is embedded; a GGUF re-export of the GGUF copies the keys (the old one wrote a
# placeholder vocabulary); attnlab's placeholder vocabulary (a model with no tokenizer) is refused by
# name, and `info` says so.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gguf-tokenizer
cli_need_model stories260K/stories260K.bin
TXT="$ATTNLAB_SRC/examples/tinystory.txt"
mkdir -p "$T/a" "$T/b"
pplv() { awk '/^tokens  *nll  *ppl$/ { getline; getline; print $3 }' | tail -1; }
say="Once upon a time, there was a cat named Tim. It's 2026!"

out=$(e "load $M/stories260K/stories260K.bin; ppl $TXT; tokenize \"$say\"; export $T/a/s.gguf dtype f32")
p0=$(pplv <<<"$out")
ids0=$(grep -E '^[0-9]+( [0-9]+)+$' <<<"$out")
out=$(e "load $T/a/s.gguf; info; tokenizer; ppl $TXT; tokenize \"$say\"")
ok "llama: ppl runs on the reloaded GGUF with no tokenizer FILE [$(grep -m1 error <<<"$out")]" test -n "$(pplv <<<"$out")"
ok "llama: its perplexity is the source's ($(pplv <<<"$out") vs $p0)" test "$(pplv <<<"$out")" = "$p0"
ok "llama: the same ids [$(grep -E '^[0-9]+( [0-9]+)+$' <<<"$out")]" test "$(grep -E '^[0-9]+( [0-9]+)+$' <<<"$out")" = "$ids0"
ok "llama: info names the embedded tokenizer" has "$out" \
    "^tokenizer  *embedded (tokenizer.ggml.\*): GGUF llama: SentencePiece merged by score, 512 ids, BOS 1, EOS 2; ppl, generate and tokenize use it$"
ok "llama: the tokenizer command says so" has "$out" "^tokenizer of s.gguf: .*/a/s.gguf (embedded: tokenizer.ggml.\*), GGUF llama"
out=$(e "load $T/a/s.gguf; generate 'Once' tokens 4 seed 1")
ok "llama: generate runs [$(head -c 200 <<<"$out")]" hasnt "$out" "^error"

out=$(e "load $M/gpt2-tiny-random; ppl $TXT; tokenize \"$say\"; export $T/a/g.gguf dtype f32")
p0=$(pplv <<<"$out")
ids0=$(grep -E '^[0-9]+( [0-9]+)+$' <<<"$out")
out=$(e "load $T/a/g.gguf; info; ppl $TXT; tokenize \"$say\"")
ok "gpt2: its perplexity is the source's ($(pplv <<<"$out") vs $p0)" test "$(pplv <<<"$out")" = "$p0"
ok "gpt2: the same ids [$(grep -E '^[0-9]+( [0-9]+)+$' <<<"$out")]" test "$(grep -E '^[0-9]+( [0-9]+)+$' <<<"$out")" = "$ids0"
ok "gpt2: no BOS added (add_bos_token false), EOS 50256" has "$out" "^tokenizer  *embedded.*GGUF gpt2: byte-level BPE, 50257 ids, BOS -1, EOS 50256"

out=$(e "load $T/a/g.gguf; export $T/b/g2.gguf dtype f32; load $T/b/g2.gguf; ppl $TXT")
ok "gpt2: a GGUF re-export keeps the tokenizer" has "$out" "tokenizer gpt2$"
ok "gpt2: and its perplexity ($(pplv <<<"$out") vs $p0)" test "$(pplv <<<"$out")" = "$p0"

e "synth family qwen3 $T/syn" >/dev/null
out=$(e "load $T/syn; export $T/b/syn.gguf dtype f32; load $T/b/syn.gguf; info; ppl $TXT")
ok "placeholder vocabulary written" has "$out" "tokenizer synthetic"
ok "info: the placeholder is not read, by name" has "$out" "^tokenizer  *none read: .*tokenizer.ggml.merges is empty: a placeholder vocabulary"
ok "ppl refuses it, naming it" has "$out" "^error: .*placeholder vocabulary"
# hostile tokenizer keys (a GGUF of keys only, read by `tokenizer FILE`): an error naming the key
mk() { python3 - "$@" <<'PY'
import struct, sys
def s(x): b = x.encode(); return struct.pack('<Q', len(b)) + b
def kv_str(k, v): return s(k) + struct.pack('<I', 8) + s(v)
def kv_arr_str(k, vs): return s(k) + struct.pack('<II', 9, 8) + struct.pack('<Q', len(vs)) + b''.join(s(v) for v in vs)
def kv_arr(k, t, fmt, vs): return s(k) + struct.pack('<II', 9, t) + struct.pack('<Q', len(vs)) + b''.join(struct.pack(fmt, v) for v in vs)
def kv_u32(k, v): return s(k) + struct.pack('<I', 4) + struct.pack('<I', v)
case = sys.argv[2]
toks = ['<unk>', '<s>', '</s>', 'a', 'b', 'ab', '\u2581a']
kvs = [kv_str('general.architecture', 'llama'), kv_str('tokenizer.ggml.model', 'gpt2' if case.startswith('bpe') else 'llama'),
       kv_arr_str('tokenizer.ggml.tokens', toks)]
if case == 'short-scores': kvs.append(kv_arr('tokenizer.ggml.scores', 6, '<f', [0.0] * 3))
elif case == 'bos-out': kvs += [kv_arr('tokenizer.ggml.scores', 6, '<f', [0.0] * 7), kv_u32('tokenizer.ggml.bos_token_id', 99)]
elif case == 'bpe-badmerge': kvs += [kv_arr_str('tokenizer.ggml.merges', ['ab'])]
elif case == 'bpe-pre': kvs += [kv_arr_str('tokenizer.ggml.merges', ['a b']), kv_str('tokenizer.ggml.pre', 'deepseek-llm')]
elif case == 'unk': kvs += [kv_arr('tokenizer.ggml.scores', 6, '<f', [0.0] * 7), kv_u32('tokenizer.ggml.unknown_token_id', 0)]
elif case == 'types-bad': kvs += [kv_arr('tokenizer.ggml.scores', 6, '<f', [0.0] * 7), kv_arr('tokenizer.ggml.token_type', 5, '<i', [99, -7, 3, 1, 1, 1, 1])]
open(sys.argv[1], 'wb').write(b'GGUF' + struct.pack('<IQQ', 3, 0, len(kvs)) + b''.join(kvs))
PY
}
for c in short-scores bpe-badmerge bpe-pre unk; do mk "$T/$c.gguf" $c; done
t="load $M/stories260K/stories260K.bin; tokenizer"
ok "scores of the wrong length: named" has "$(e "$t $T/short-scores.gguf")" \
    "^error: .*short-scores.gguf: tokenizer.ggml.scores is not an array of the expected type and length$"
ok "a merge that is not 'a b': named" has "$(e "$t $T/bpe-badmerge.gguf")" "^error: .*tokenizer.ggml.merges\[0\] is not \"a b\"$"
ok "a pre-tokenizer attnlab does not implement: named" has "$(e "$t $T/bpe-pre.gguf")" \
    "^error: .*tokenizer.ggml.pre 'deepseek-llm' is not a pre-tokenizer attnlab implements"
ok "unknown_token_id stands for a character with no piece (no llama2.c byte + 3 guess)" \
    test "$(e "$t $T/unk.gguf; tokenize \"ab a\"" | tail -1)" = "5 0 3"
cli_done
