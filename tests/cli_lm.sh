#!/usr/bin/env bash
# cli_lm.sh -- `tokenizer`, `tokenize`, `generate` and `ppl` through `attnlab -e` on the real small
# checkpoints in $ATTNLAB_MODELS (skipped, exit 77, when absent): stories260K decodes greedily from
# BOS to its README's text, the .bin and -hf layouts agree, ppl writes the CSV header exactly
# `tokens,nll,ppl`, text and id input give the same perplexity, and errors name what is wrong.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K/stories260K.bin
cli_setup /tmp/attnlab-cli-lm shared-cache
cd "$T" || exit 1
BIN="$M/stories260K/stories260K.bin"
HF="$M/stories260K-hf"
WANT="Once upon a time, there was a little girl named Lily."

# Greedy from BOS (the README's reference decoding).
run -e "load $BIN; generate \"\" tokens 40"
[ "$(rc)" = 0 ] || fail "generate on .bin: rc $(rc): $(cat err.txt)"
grep -qF "$WANT" out.txt || fail "greedy .bin text: [$(cat out.txt)]"
grep -q "generated in" err.txt || fail "no timing line: [$(cat err.txt)]"
tail -n +2 out.txt >gen_bin.txt
run -e "load $HF; generate \"\" tokens 40"
[ "$(rc)" = 0 ] || fail "generate on -hf: rc $(rc): $(cat err.txt)"
tail -n +2 out.txt | cmp -s - gen_bin.txt || fail "-hf text differs from .bin: [$(cat out.txt)]"

# tokenize: BOS + run.c's encoding, to stdout and to a file; `tokenizer` shows the file in use.
run -e "load $BIN; tokenize \"Once upon a time\""
[ "$(tail -1 out.txt)" = "1 403 407 261 378" ] || fail "tokenize: [$(cat out.txt)] $(cat err.txt)"
run -e "load $HF; tokenizer"
grep -q "tok512.bin, llama2.c, 512 ids, BOS 1, EOS 2" out.txt || fail "tokenizer: [$(cat out.txt)]"

# ppl on text and on the same text's ids: same numbers; CSV header exact.
printf '%s She loved to play outside in the park. One day, she saw a big, red ball.\nLily was sad.\n' "$WANT" >story.txt
run -e "load $BIN; tokenize file story.txt to story.ids; ppl story.txt seqlen 16 to a.csv; ppl ids story.ids seqlen 16 to b.csv"
[ "$(rc)" = 0 ] || fail "ppl: rc $(rc): $(cat err.txt)"
[ "$(head -1 a.csv)" = "tokens,nll,ppl" ] || fail "CSV header: [$(head -1 a.csv)]"
cmp -s a.csv b.csv || fail "text and ids ppl differ: [$(cat a.csv)] [$(cat b.csv)]"
n=$(wc -w <story.ids)
windows=$(( (n + 15) / 16 ))
want_tokens=$(( n - windows ))
[ "$(cut -d, -f1 a.csv | tail -1)" = "$want_tokens" ] || fail "predicted tokens: [$(cat a.csv)], want $want_tokens of $n ids"
awk -F, 'NR == 2 { if (!($2 > 0 && $2 < 3 && $3 > 1 && $3 < 20)) exit 1 }' a.csv || fail "implausible ppl: [$(cat a.csv)]"
run -e "load $BIN; ppl ids story.ids seqlen 16 max-tokens 10"
grep -qE "^ +9 " out.txt || fail "max-tokens 10 should predict 9: [$(cat out.txt)]"

# GPT-2: its tokenizer.json and forward pass through the shell.
if [ -d "$M/gpt2-tiny-random" ]; then
  run -e "load $M/gpt2-tiny-random; tokenize \"Hello world\"; generate \"Hello world\" tokens 3"
  [ "$(rc)" = 0 ] || fail "gpt2: rc $(rc): $(cat err.txt)"
  [ "$(sed -n 2p out.txt)" = "15496 995" ] || fail "gpt2 tokenize: [$(cat out.txt)]"
fi

# Errors: bad ids, a window longer than the context, a missing tokenizer.
echo "1 2 99999" >bad.ids
run -e "load $BIN; ppl ids bad.ids seqlen 8"
[ "$(rc)" = 1 ] && grep -q "token id 99999" err.txt || fail "bad id: rc $(rc) [$(cat err.txt)]"
run -e "load $BIN; ppl ids story.ids seqlen 100000"
[ "$(rc)" = 1 ] && grep -q "longer than the model's context 512" err.txt || fail "long window: [$(cat err.txt)]"
run -e "load demo-llama; tokenize hello"
[ "$(rc)" = 1 ] && grep -q "no tokenizer beside" err.txt || fail "missing tokenizer: rc $(rc) [$(cat err.txt)]"
run -e "generate hi"
[ "$(rc)" = 1 ] || fail "generate without a model: rc $(rc)"

cli_done
