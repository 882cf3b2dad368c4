#!/usr/bin/env bash
# cli_llamacpp.sh -- GGUF exports run in a real llama.cpp: the npm package node-llama-cpp (its
# prebuilt CPU llama.cpp; scripts/install-deps.sh installs it under
# ${ATTNLAB_NODE_PREFIX:-~/.local/share/attnlab/node}). For stories260K (llama2.c, its tokenizer),
# demo-llama (a synthetic Llama GQA model: 8 heads, 2 KV heads), demo-gpt2 and a TransMLA
# conversion of demo-llama (deepseek2, MLA), a Qwen2 made from demo-llama with q/k/v biases,
# gpt2-tiny-random, synthetic qwen3, olmo2 and smollm3 (`synth family`), and demo-llama's FaRR truncation / TransMLA conversion exported straight to
# GGUF (dense / stock DeepSeek-V3 forms), demo-r1 (FP8 block-scaled, dequantized; also truncated), the next-token logits llama.cpp computes after every
# token of a prompt (tests/llamacpp_logits.mjs, F32 KV cache) are compared with attnlab's forward
# pass on the source checkpoint (`test_gguf logits`): f32 within 1e-4 with every argmax equal
# (GPT-2: 1e-2, llama.cpp's GELU is tabulated in F16);
# f16 / bf16 / q8_0 within their rounding (llama.cpp also rounds the activations to the weights'
# type); llama.cpp tokenizes text with the exported tokenizer metadata as attnlab does (stories260K's
# llama2.c vocabulary, GPT-2's byte-level BPE) and decodes the same greedy story. Without node (or node-llama-cpp) the test says why and is skipped (exit 77).
# Two llama.cpp builds (issue 25): the dense and the TransMLA (deepseek2) GGUFs also run in the
# oldest node-llama-cpp 3.x with deepseek2 MLA, 3.8.1 (llama.cpp b5415, under
# ${ATTNLAB_NODE_OLD_PREFIX:-~/.local/share/attnlab/node-3.8.1}; skipped with a message when absent):
# it requires deepseek2.expert_weights_scale / expert_shared_count / rope.scaling.yarn_log_multiplier
# (written as llama.cpp's converter writes them, also for a dense model) and builds a plain q_proj only for 27 layers, so the MLA
# export there has a query latent (q-rank); without one it must stop at the q_a_norm tensor, not at
# a missing key; and it requires output.weight for deepseek2 (a tied model's, stories260K-hf's MLA
# export with q-rank, gets its embeddings as output.weight). That build has no raw logits or F32 KV cache option: compared as log-probabilities
# (tests/llamacpp_logits.mjs) with its F16 KV cache, within 1e-2 and every argmax equal.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-llamacpp shared-cache
cd "$T" || exit 1
M=${ATTNLAB_MODELS:-$ATTNLAB_SRC/tests/models}
JS=$ATTNLAB_SRC/tests/llamacpp_logits.mjs
TG=$(dirname "$T")/test_gguf                 # the unit test's binary doubles as the logits helper
PREFIX=${ATTNLAB_NODE_PREFIX:-$HOME/.local/share/attnlab/node}
OLD=${ATTNLAB_NODE_OLD_PREFIX:-$HOME/.local/share/attnlab/node-3.8.1}

# deepseek2 metadata every llama.cpp build reads (checked without node: GGUF keys are plain strings)
run -e "synth demo-llama dk; load dk; convert mla kv-rank full; export dk.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "MLA GGUF: [$(cat err.txt)]"
for k in expert_weights_scale expert_shared_count expert_count expert_used_count expert_weights_norm \
         expert_gating_func expert_feed_forward_length leading_dense_block_count attention.q_lora_rank \
         rope.scaling.yarn_log_multiplier; do
    grep -qa "deepseek2\.$k" dk.gguf || fail "MLA GGUF lacks deepseek2.$k"
done
grep -qa "deepseek2.expert_group_count" dk.gguf && fail "MLA GGUF: expert_group_count without experts (llama.cpp asserts 0)"
grep -q "no query latent: llama.cpp b5415 .. b6845" out.txt || fail "the q-less MLA export line does not name the builds it fails in: [$(cat out.txt)]"

command -v node >/dev/null || { echo "SKIP: node is not installed (scripts/install-deps.sh installs nodejs and node-llama-cpp)"; exit 77; }
[ -f "$PREFIX/node_modules/node-llama-cpp/dist/index.js" ] \
    || { echo "SKIP: node-llama-cpp is not installed under $PREFIX (scripts/install-deps.sh installs it)"; exit 77; }
[ -x "$TG" ] || { echo "FAIL: no test_gguf binary at $TG"; exit 1; }

IDS="1 5 9 23 7 100 3 44 12 9 8 77 66 55 4 3"

# compare NAME SOURCE GGUF TOL [argmax]: llama.cpp on GGUF against attnlab on SOURCE (the build
# under $NLC, default the newest)
compare() {
    local name=$1 src=$2 gguf=$3 tol=$4 line
    "$TG" logits "$src" "$IDS" > "ref_$name.json" 2> err.txt || { fail "$name: attnlab logits: $(cat err.txt)"; return; }
    line=$(ATTNLAB_NODE_PREFIX=${NLC:-$PREFIX} node "$JS" "$gguf" "$IDS" "ref_$name.json" 2> "node_$name.txt")
    # node itself (V8) aborts now and then under node-llama-cpp 3.8.1 ("# Fatal error ... Check failed"):
    # not llama.cpp's answer, so once more
    if [ -z "$line" ] && grep -q "^# Fatal error" "node_$name.txt"; then
        echo "$name: node aborted (V8: $(grep -m1 'Check failed' "node_$name.txt")); running it again"
        line=$(ATTNLAB_NODE_PREFIX=${NLC:-$PREFIX} node "$JS" "$gguf" "$IDS" "ref_$name.json" 2> "node_$name.txt")
    fi
    echo "$name: $line"
    [ -n "$line" ] || { fail "$name: llama.cpp failed: $(tail -5 "node_$name.txt")"; return; }
    awk -v l="$line" -v t="$tol" -v am="${5:-}" 'BEGIN {
        n = split(l, w, " "); for (i = 1; i < n; i++) v[w[i]] = w[i + 1]
        split(v["argmax_agree"], a, "/")
        exit !(v["max_abs_diff"] + 0 <= t + 0 && (am == "" || a[1] == a[2])) }' \
        || fail "$name: beyond tolerance $tol${5:+ or argmax differs}: $line"
}

run -e "synth demo-llama dl; load dl; export dl.gguf dtype f32; export dl16.gguf dtype f16; export dlb.gguf dtype bf16; export dlq.gguf dtype q8_0"
[ "$(rc)" = 0 ] || fail "demo-llama exports: [$(cat err.txt)]"
compare demo-llama-f32 dl dl.gguf 1e-4 argmax
compare demo-llama-f16 dl dl16.gguf 2e-2
compare demo-llama-bf16 dl dlb.gguf 1e-1
compare demo-llama-q8_0 dl dlq.gguf 1e-1

"$TG" make-qwen2 dl qw 2> err.txt || fail "make-qwen2: $(cat err.txt)"
run -e "load qw; export qw.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "qwen2 export: [$(cat err.txt)]"
compare qwen2-f32 qw qw.gguf 1e-4 argmax

run -e "synth demo-gpt2 g2; load g2; export g2.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "demo-gpt2 export: [$(cat err.txt)]"
# ggml's CPU GELU reads an F16 table (GGML_GELU_FP16): ~2e-3 on demo-gpt2's logits even in F32
compare demo-gpt2-f32 g2 g2.gguf 1e-2 argmax

run -e "load dl; convert mla kv-rank full; export mla; load mla; export mla.gguf dtype f32; export mlab.gguf dtype bf16"
[ "$(rc)" = 0 ] || fail "MLA export: [$(cat err.txt)]"
compare transmla-f32 mla mla.gguf 1e-4 argmax
compare transmla-bf16 mla mlab.gguf 1e-1

# a query latent (q-rank): the MLA form every llama.cpp build with deepseek2 MLA runs
run -e "load dl; convert mla kv-rank full q-rank 256; export mq; load mq; export mq.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "MLA q-rank export: [$(cat err.txt)]"
compare transmla-qrank-f32 mq mq.gguf 1e-4 argmax
if [ -f "$OLD/node_modules/node-llama-cpp/dist/index.js" ]; then
    NLC=$OLD compare old-demo-llama-f32 dl dl.gguf 1e-2 argmax
    NLC=$OLD compare old-transmla-qrank-f32 mq mq.gguf 1e-2 argmax
    # a tied model (stories260K-hf): b5415's deepseek2 requires output.weight (no token_embd fallback)
    if [ -d "$M/stories260K-hf" ]; then
        run -e "load $M/stories260K-hf; convert mla kv-rank 16 q-rank 32; export sq dtype f32; export sq.gguf dtype f32"
        [ "$(rc)" = 0 ] || fail "stories260K-hf MLA q-rank export: [$(cat err.txt)]"
        grep -q "output.weight written from the tied embeddings" out.txt || fail "stories260K-hf: no tied output.weight: [$(cat out.txt)]"
        # its F16 KV cache on log-probabilities down to -30: 1.2e-2 measured
        NLC=$OLD compare old-stories260K-hf-mla-qrank-f32 sq sq.gguf 3e-2 argmax
        compare stories260K-hf-mla-qrank-f32 sq sq.gguf 1e-4 argmax
    fi
    # without a query latent that build builds q_proj only for 27 layers: it stops at the tensor, not a key
    ATTNLAB_NODE_PREFIX=$OLD node "$JS" mla.gguf "1 5 9" > node_old_mla.txt 2>&1 \
        && fail "old llama.cpp ran a q-less deepseek2 of 4 layers: update lint's warning and the README"
    grep -q "missing tensor 'blk.0.attn_q_a_norm.weight'" node_old_mla.txt && ! grep -q "key not found" node_old_mla.txt \
        || fail "old llama.cpp on the q-less MLA GGUF: [$(grep -v '^    at' node_old_mla.txt | head -3)]"
else
    echo "SKIP part: node-llama-cpp 3.8.1 is not installed under $OLD (scripts/install-deps.sh installs it)"
fi

# families of issue 12 (synthetic checkpoints): qwen3 (max |dlogit| 2.2e-6 measured), olmo2 (2.7e-6),
# phi3 without its sliding window (2.9e-6; named p3m: llama.cpp special-cases general.name "phi3"'s
# vocabulary). With the window (8) this llama.cpp lets a query see 9 keys where attnlab sees 8:
# equal up to 8 tokens, then apart (2.7 at 16 tokens) -- not compared here.
run -e "synth family phi3 p3m" && sed -i 's/"sliding_window":[[:space:]]*8/"sliding_window": null/' p3m/config.json
grep -q '"sliding_window": null' p3m/config.json || fail "p3m: no sliding_window to drop"
for f in qwen3 olmo2 p3m; do
    run -e "$( [ "$f" = p3m ] || echo "synth family $f $f; ")load $f; export $f.gguf dtype f32"
    [ "$(rc)" = 0 ] || fail "$f export: [$(cat err.txt)]"
    compare "$f-f32" "$f" "$f.gguf" 1e-4 argmax
done
# gpt_neox as gptneox (QKV reordered head by head, parallel residual, partial NEOX RoPE): ggml's
# F16-tabulated GELU again (HF's exact erf GELU besides)
run -e "synth family gpt_neox nx; load nx; export nx.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "gpt_neox export: [$(cat err.txt)]"
compare gpt_neox-f32 nx nx.gguf 1e-2 argmax
# gemma2 as g2m: without its window and with query_pre_attn_scalar = head_dim (32), as this
# llama.cpp scales queries by 1/sqrt(head_dim) (but for its 27B type)
run -e "synth family gemma2 g2m" && sed -i -e 's/"sliding_window":[[:space:]]*8/"sliding_window": null/' \
    -e 's/"query_pre_attn_scalar":[[:space:]]*24/"query_pre_attn_scalar": 32/' g2m/config.json
grep -q '"query_pre_attn_scalar": 32' g2m/config.json || fail "g2m: no query_pre_attn_scalar to change"
run -e "load g2m; export g2m.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "gemma2 export: [$(cat err.txt)]"
compare gemma2-f32 g2m g2m.gguf 1e-2 argmax
# gemma3_text as g3m, without its window
run -e "synth family gemma3_text g3m" && sed -i 's/"sliding_window":[[:space:]]*8/"sliding_window": null/' g3m/config.json
grep -q '"sliding_window": null' g3m/config.json || fail "g3m: no sliding_window to drop"
run -e "load g3m; export g3m.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "gemma3 export: [$(cat err.txt)]"
compare gemma3-f32 g3m g3m.gguf 1e-2 argmax

# smollm3 as s3m, without its window (llama.cpp's smollm3 has none): no RoPE on layer 3 in both
# (llama.cpp: every fourth layer, a constant; max |dlogit| 3.9e-6 measured, where RoPE on layer 3
# would move the logits by 0.19)
run -e "synth family smollm3 s3m" && sed -i 's/"use_sliding_window":[[:space:]]*true/"use_sliding_window": false/' s3m/config.json
grep -q '"use_sliding_window": false' s3m/config.json || fail "s3m: no use_sliding_window to turn off"
run -e "load s3m; export s3m.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "smollm3 export: [$(cat err.txt)]"
compare smollm3-f32 s3m s3m.gguf 1e-4 argmax

# transformations chained to GGUF (`export FILE.gguf` right after them): a FaRR truncation through
# its dense export, a lossy TransMLA conversion through its stock DeepSeek-V3 one; attnlab's
# reference is the same transformation exported as a folder (f32)
run -e "load dl; truncate vo rank 3; export trd format dense; export tr.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "truncate -> GGUF: [$(cat err.txt)]"
compare farr-dense-f32 trd tr.gguf 1e-4 argmax
run -e "load dl; convert mla kv-rank 48; export cm dtype f32; export cm.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "convert mla -> GGUF: [$(cat err.txt)]"
compare transmla-stock-f32 cm cm.gguf 1e-4 argmax
# an FP8 block-scaled checkpoint (demo-r1: F8_E4M3 + weight_scale_inv): its dequantized weights in
# the chosen dtype, no scale tensor; also after a truncation (through its dense export)
run -e "synth demo-r1 r1; load r1; export r1.gguf dtype f32; export r1b.gguf dtype bf16; truncate vo rank 3; export r1t format dense; export r1t.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "demo-r1 (FP8) -> GGUF: [$(cat err.txt)]"
compare demo-r1-fp8-f32 r1 r1.gguf 1e-4 argmax
compare demo-r1-fp8-bf16 r1 r1b.gguf 1e-1
compare demo-r1-fp8-truncate-f32 r1t r1t.gguf 1e-4 argmax
[ -f "$OLD/node_modules/node-llama-cpp/dist/index.js" ] && NLC=$OLD compare old-demo-r1-fp8-f32 r1 r1.gguf 1e-2 argmax

if [ -f "$M/stories260K/stories260K.bin" ]; then
    run -e "load $M/stories260K/stories260K.bin as st; export st.gguf dtype f32; export stq.gguf dtype q8_0"
    [ "$(rc)" = 0 ] || fail "stories260K export: [$(cat err.txt)]"
    compare stories260K-f32 "$M/stories260K/stories260K.bin" st.gguf 1e-4 argmax
    compare stories260K-q8_0 "$M/stories260K/stories260K.bin" stq.gguf 5e-1
    # the tokenizer metadata: llama.cpp encodes the text as attnlab does, and decodes the same story
    text="Once upon a time, Lily saw a big dog."
    run -e "load $M/stories260K/stories260K.bin; tokenize \"$text\"; generate \"$text\" tokens 20"
    ids=$(sed -n 2p out.txt | tr ' ' ','); story=$(sed -n 3p out.txt)
    node "$JS" st.gguf --text "$text" 20 > gen.json 2> node_gen.txt || fail "llama.cpp text mode: $(tail -3 node_gen.txt)"
    echo "stories260K in llama.cpp: $(cat gen.json)"
    grep -q "\"tokens\":\[$ids\]" gen.json || fail "stories260K tokens: attnlab [$ids], llama.cpp $(cat gen.json)"
    grep -qF "$story" gen.json || fail "stories260K greedy text: attnlab [$story], llama.cpp $(cat gen.json)"
else
    echo "stories260K not found under $M: its part is skipped"
fi

if [ -d "$M/gpt2-tiny-random" ]; then          # a byte-level BPE tokenizer.json with its merges
    text="Hello world, it's 2024!"
    run -e "load $M/gpt2-tiny-random; export g2t.gguf dtype f32; tokenize \"$text\""
    ids=$(tail -1 out.txt | tr ' ' ',')
    node "$JS" g2t.gguf --text "$text" 1 > gen2.json 2> node_gen2.txt || fail "gpt2 text mode: $(tail -3 node_gen2.txt)"
    grep -q "\"tokens\":\[$ids\]" gen2.json || fail "gpt2-tiny-random tokens: attnlab [$ids], llama.cpp $(cat gen2.json)"
    compare gpt2-tiny-random-f32 "$M/gpt2-tiny-random" g2t.gguf 1e-4 argmax
fi
cli_done
