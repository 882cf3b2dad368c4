#!/bin/bash
# cli_synth.sh -- the `synth` command from the command line and from Lua: writes each demo
# model where asked, the result loads, the same seed gives the same bytes, a folder in the way
# or an FP8 Llama or a bad dtype fail with exit status 1 and a message that says why, and
# `load demo-...` creates the cached demo on first use.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-synth

# ---- each demo written where asked, loads, reports its architecture
out=$("$ATTNLAB" -e "synth demo-llama $T/ll dtype f32 seed 3; load $T/ll; info" 2>&1)
ok "synth demo-llama + load exits 0" test $? -eq 0
ok "llama config.json" test -f "$T/ll/config.json"
ok "llama single file" test -f "$T/ll/model.safetensors"
ok "llama info: 2 KV heads" has "$out" "kv_heads  *2"
ok "llama info: F32" has "$out" "dtype  *F32"
ok "synth says what it wrote" has "$out" "wrote demo-llama (F32, 1 shard, seed 3)"

out=$("$ATTNLAB" -e "synth demo-r1 $T/r1; load $T/r1; info" 2>&1)
ok "synth demo-r1 exits 0" test $? -eq 0
ok "demo-r1 sharded 3 ways" test -f "$T/r1/model-00003-of-00003.safetensors"
ok "demo-r1 index" test -f "$T/r1/model.safetensors.index.json"
ok "demo-r1 info: FP8" has "$out" "F8_E4M3"
ok "demo-r1 info: kv_lora 96" has "$out" "kv_lora_rank  *96"

out=$("$ATTNLAB" -e "synth demo-gpt2 $T/g1 shards 2 seed 9; synth demo-gpt2 $T/g2 shards 2 seed 9" 2>&1)
ok "synth demo-gpt2 twice exits 0" test $? -eq 0
ok "same seed, same bytes (shard 1)" cmp -s "$T/g1/model-00001-of-00002.safetensors" "$T/g2/model-00001-of-00002.safetensors"
ok "same seed, same bytes (shard 2)" cmp -s "$T/g1/model-00002-of-00002.safetensors" "$T/g2/model-00002-of-00002.safetensors"
ok "same seed, same index" cmp -s "$T/g1/model.safetensors.index.json" "$T/g2/model.safetensors.index.json"

out=$("$ATTNLAB" -e "synth demo-gpt2 $T/slash/ seed 1" 2>&1)
ok "a folder given with a trailing slash" test -f "$T/slash/config.json"
ok "no temporary folder left inside it" test -z "$(ls -A "$T/slash" | grep tmp)"

# ---- from Lua: the result is the folder, which attn.load takes
out=$("$ATTNLAB" -e "lua local d = attn.synth('demo-gpt2', '$T/lua', {dtype = 'bf16'}); attn.load(d); print('LOADED ' .. d)" 2>&1)
ok "Lua attn.synth exits 0" test $? -eq 0
ok "Lua gets the folder back" has "$out" "LOADED $T/lua"

# ---- errors: exit status 1 and a message naming the problem
out=$("$ATTNLAB" -e "synth demo-gpt2 $T/ll" 2>&1)
ok "folder in the way fails" test $? -eq 1
ok "folder in the way is named" has "$out" "$T/ll already exists and is not empty"
out=$("$ATTNLAB" -e "synth demo-llama $T/x dtype fp8" 2>&1)
ok "FP8 llama fails" test $? -eq 1
ok "FP8 llama says why" has "$out" "only written for the DeepSeek layout"
ok "nothing left behind" test ! -e "$T/x"
out=$("$ATTNLAB" -e "synth demo-r1 $T/y dtype fp16" 2>&1)
ok "bad dtype fails" test $? -eq 1
ok "bad dtype lists the choices" has "$out" "f32|bf16|fp8"
out=$("$ATTNLAB" -e "synth demo-r1" 2>&1)
ok "missing folder fails" test $? -eq 1
ok "missing folder says so" has "$out" "missing dir"
out=$("$ATTNLAB" -e "synth ds-r1-shape $T/ds layers 0" 2>&1)
ok "ds-r1-shape layers 0 fails" test $? -eq 1

# ---- load demo-... writes into the cache on first use, then reuses it
out=$("$ATTNLAB" -e "load demo-gpt2-bf16; info" 2>&1)
ok "load demo-gpt2-bf16 exits 0" test $? -eq 0
ok "cached demo written" test -f "$T/cache/demo-gpt2-bf16-v1/config.json"
ok "cached demo is BF16" has "$out" "BF16"
before=$(stat -c %Y "$T/cache/demo-gpt2-bf16/model.safetensors")
out=$("$ATTNLAB" -e "load demo-gpt2-bf16" 2>&1)
ok "second load exits 0" test $? -eq 0
ok "second load reuses the cache" test "$before" = "$(stat -c %Y "$T/cache/demo-gpt2-bf16/model.safetensors")"

cli_done
