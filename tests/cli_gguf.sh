#!/usr/bin/env bash
# cli_gguf.sh -- `export ... format gguf` / `export FILE.gguf` and `load FILE.gguf` through
# `attnlab -e`: demo-llama (GQA, rotate_half permuted for llama.cpp), demo-gpt2, stories260K
# (llama2.c, with its tokenizer) and a TransMLA conversion of demo-llama exported and loaded
# (deepseek2, latents made linear under llama.cpp's latent norm) are written as GGUF, loaded back,
# and give their source's perplexity on the same ids (f32: equal to 1e-5; f16 / bf16 / q8_0 within
# their rounding); the folder form writes DIR/model.gguf; `truncate` and `convert mla` pending are
# written through their dense / stock exports (NLL of the folder export to 1e-5, no scratch left);
# refusals (an existing file without force, a TPA conversion pending, shard-mb, a GGUF inside the
# source folder) are errors.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gguf shared-cache
cd "$T" || exit 1
M=${ATTNLAB_MODELS:-$ATTNLAB_SRC/tests/models}

echo "1 5 9 23 7 100 3 44 12 9 8 77 66 55 4 3 2 1 0 99 17 18 19 20" > ids.txt

# nll MODEL: the mean NLL attnlab's `ppl ids` gives on ids.txt
nll() {
    run -e "load $1; ppl ids ids.txt seqlen 24"   # one window: every model here has context >= 24
    [ "$(rc)" = 0 ] || { echo "nan"; echo "ppl $1 failed: $(cat err.txt)" >&2; return; }
    awk '$1 ~ /^[0-9]+$/ && NF == 3 { print $2 }' out.txt | tail -1
}
# close A B TOL: |A - B| <= TOL, both numbers (a failed `ppl` gives nan, which never passes)
close() {
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { num = "^-?[0-9.]+(e-?[0-9]+)?$"; if (a !~ num || b !~ num) exit 1
        d = a - b; if (d < 0) d = -d; exit !(d <= t) }'
}

# demo-llama: every dtype
run -e "synth demo-llama dl; load dl; export dl.gguf dtype f32; export dl16.gguf dtype f16; export dlb.gguf dtype bf16; export dlq.gguf dtype q8_0; export ggdir format gguf"
[ "$(rc)" = 0 ] || fail "demo-llama exports: rc $(rc) [$(cat err.txt)]"
grep -q "exported dl as GGUF to dl.gguf: llama.cpp architecture llama, F32, 39 tensors" out.txt || fail "export narration: [$(head -3 out.txt)]"
grep -q "tokenizer synthetic" out.txt || fail "synthetic vocabulary: [$(head -3 out.txt)]"
[ -s ggdir/model.gguf ] || fail "folder form: no ggdir/model.gguf"
[ "$(head -c 4 dl.gguf)" = GGUF ] || fail "magic"
src=$(nll dl)
close "$src" "$(nll dl.gguf)" 1e-5 || fail "demo-llama f32 nll: $src vs $(nll dl.gguf)"
close "$src" "$(nll ggdir/model.gguf)" 1e-5 || fail "demo-llama folder nll"
close "$src" "$(nll dl16.gguf)" 1e-3 || fail "demo-llama f16 nll: $src vs $(nll dl16.gguf)"
close "$src" "$(nll dlb.gguf)" 1e-2 || fail "demo-llama bf16 nll: $src vs $(nll dlb.gguf)"
close "$src" "$(nll dlq.gguf)" 3e-2 || fail "demo-llama q8_0 nll: $src vs $(nll dlq.gguf)"
run -e "load dl.gguf; info"
grep -Eq "^family +llama" out.txt && grep -Eq "^kv_heads +2" out.txt || fail "info of the GGUF: [$(head -12 out.txt)]"

# refusals
run -e "load dl; export dl.gguf"
[ "$(rc)" = 1 ] && grep -q "dl.gguf exists: give \`force\` to replace it" err.txt || fail "existing file: [$(cat err.txt)]"
run -e "load dl; export dl.gguf force"
[ "$(rc)" = 0 ] || fail "force: [$(cat err.txt)]"
run -e "load dl; export dl/inside.gguf"
[ "$(rc)" = 1 ] && grep -q "inside the folder of dl" err.txt || fail "inside the source: [$(cat err.txt)]"
run -e "load dl; export x.gguf shard-mb 4"
[ "$(rc)" = 1 ] && grep -q "shard-mb is not taken by GGUF" err.txt || fail "shard-mb: [$(cat err.txt)]"
run -e "load dl; convert tpa kv-rank 2; export x.gguf"
[ "$(rc)" = 1 ] && grep -q "GGUF of a transformation" err.txt || fail "pending TPA: [$(cat err.txt)]"
ls -a | grep -q attnlab-gguf && fail "scratch folder left behind: $(ls -a)"
run -e "load dl; convert mla kv-rank 48; export xm dtype q8_0"
[ "$(rc)" = 1 ] && grep -q "give f32, f16 or bf16" err.txt || fail "q8_0 outside GGUF: [$(cat err.txt)]"
printf 'GGUF\003\000\000\000' > bad.gguf
run -e "load bad.gguf"
[ "$(rc)" = 1 ] && grep -q "truncated GGUF" err.txt || fail "truncated file: [$(cat err.txt)]"

# demo-gpt2
run -e "synth demo-gpt2 g2; load g2; export g2.gguf dtype f32"
[ "$(rc)" = 0 ] && grep -q "llama.cpp architecture gpt2" out.txt || fail "gpt2 export: [$(cat err.txt)]"
close "$(nll g2)" "$(nll g2.gguf)" 1e-5 || fail "demo-gpt2 nll: $(nll g2) vs $(nll g2.gguf)"

# a TransMLA conversion of demo-llama, exported, loaded, written as deepseek2
run -e "load dl; convert mla kv-rank full; export mla; load mla; export mla.gguf dtype f32"
[ "$(rc)" = 0 ] || fail "MLA export: rc $(rc) [$(cat err.txt)]"
grep -q "llama.cpp architecture deepseek2" out.txt || fail "MLA narration: [$(tail -3 out.txt)]"
close "$(nll mla)" "$(nll mla.gguf)" 1e-5 || fail "MLA nll: $(nll mla) vs $(nll mla.gguf)"
run -e "load mla.gguf; info"
grep -Eq "^family +deepseek" out.txt || fail "MLA GGUF family: [$(head -5 out.txt)]"

# transformations chained to GGUF: `truncate` through its dense FaRR export, `convert mla` through
# the stock DeepSeek-V3 one (scratch folders beside the file, removed); the GGUF loaded back gives
# the NLL of the same transformation exported as a folder and loaded
run -e "load dl; truncate vo rank 3; export tr.gguf dtype f32; export trdir format dense"
[ "$(rc)" = 0 ] || fail "truncate -> GGUF: rc $(rc) [$(cat err.txt)]"
grep -q "exported dl with its truncate (through its dense FaRR export) as GGUF to tr.gguf: llama.cpp architecture llama" out.txt \
    || fail "truncate -> GGUF narration: [$(head -3 out.txt)]"
close "$(nll trdir)" "$(nll tr.gguf)" 1e-5 || fail "truncate GGUF nll: $(nll trdir) vs $(nll tr.gguf)"
close "$(nll dl)" "$(nll tr.gguf)" 1e-3 && fail "truncate GGUF nll equals the source's: the truncation is missing"
run -e "synth demo-gpt2 g2t; load g2t; truncate qk rank 4; export sub/trq.gguf dtype f32; export trqdir format dense"
[ "$(rc)" = 0 ] || fail "truncate qk -> GGUF: rc $(rc) [$(cat err.txt)]"
close "$(nll trqdir)" "$(nll sub/trq.gguf)" 1e-5 || fail "truncate qk GGUF nll: $(nll trqdir) vs $(nll sub/trq.gguf)"
run -e "load dl; convert mla kv-rank 48; export cm.gguf dtype f32; export cmdir dtype f32"
[ "$(rc)" = 0 ] || fail "convert mla -> GGUF: rc $(rc) [$(cat err.txt)]"
grep -q "through its stock DeepSeek-V3 export) as GGUF to cm.gguf: llama.cpp architecture deepseek2" out.txt \
    || fail "convert mla -> GGUF narration: [$(head -3 out.txt)]"
close "$(nll cmdir)" "$(nll cm.gguf)" 1e-5 || fail "convert mla GGUF nll: $(nll cmdir) vs $(nll cm.gguf)"
run -e "load dl; convert mla kv-rank 48; export dl/cm.gguf"
[ "$(rc)" = 1 ] && grep -q "inside the folder of dl" err.txt || fail "chained GGUF inside the source: [$(cat err.txt)]"
run -e "load dl; truncate vo rank 3; export tr.gguf"
[ "$(rc)" = 1 ] && grep -q "tr.gguf exists: give \`force\`" err.txt || fail "chained GGUF over a file: [$(cat err.txt)]"
for d in . sub dl; do ls -a "$d" | grep -q attnlab-gguf && fail "scratch folder left in $d: $(ls -a "$d")"; done

# the families of issue 12 with a llama.cpp row: qwen3 (per-head q/k norms), olmo2 (post-norms,
# q/k norms over the projection), phi3 (fused qkv / gate_up, partial RoPE, sliding window 8),
# gpt_neox as gptneox (head-by-head QKV reordered to [Q ; K ; V], parallel residual, biases),
# gemma2 (sandwich norms stored as 1 + w, soft-caps, window 8 on even layers), gemma3_text as
# gemma3 (q/k norms 1 + w too, 5 local : 1 global, local RoPE base, linear scaling): F32 logits bit for bit equal after the round trip, NLL to 1e-5;
# qwen3_moe (experts) and families without a row are refused naming why
TG=$(dirname "$T")/test_gguf
IDS="1 5 9 23 7 100 3 44 12 9 8 77 66 55 4 3"
for fa in qwen3:qwen3 olmo2:olmo2 phi3:phi3 gpt_neox:gptneox gemma2:gemma2 gemma3_text:gemma3; do
    f=${fa%%:*} arch=${fa#*:}
    run -e "synth family $f $f; load $f; export $f.gguf dtype f32"
    [ "$(rc)" = 0 ] && grep -q "llama.cpp architecture $arch, F32" out.txt || fail "$f export: [$(cat out.txt err.txt)]"
    "$TG" logits "$f" "$IDS" > "ref_$f.json" && "$TG" logits "$f.gguf" "$IDS" > "gg_$f.json" || fail "$f logits"
    cmp -s "ref_$f.json" "gg_$f.json" || fail "$f: logits of the GGUF differ from the source's"
    close "$(nll "$f")" "$(nll "$f.gguf")" 1e-5 || fail "$f nll: $(nll "$f") vs $(nll "$f.gguf")"
    run -e "load $f.gguf; info"
    grep -Eq "^family +($f|$arch)( |$)" out.txt || fail "$f GGUF family: [$(head -5 out.txt)]"
done
run -e "synth family qwen3_moe q3m; load q3m; export q3m.gguf"
[ "$(rc)" = 1 ] && grep -q "mixture-of-experts layers are not converted to GGUF yet" err.txt || fail "qwen3_moe: [$(cat err.txt)]"
# smollm3 as llama.cpp's smollm3 (q / k permuted as llama's; no RoPE on every fourth layer by a
# constant, no key; no sliding window): without its window F32 logits bit for bit equal after the
# round trip, the NoPE layer read back; with the window, or NoPE layers llama.cpp would not skip, refused
run -e "synth family smollm3 s3; load s3; export s3.gguf"
[ "$(rc)" = 1 ] && grep -q "llama.cpp's smollm3 has no sliding window" err.txt || fail "smollm3 window: [$(cat err.txt)]"
cp -r s3 s3nw && sed -i 's/"use_sliding_window":[[:space:]]*true/"use_sliding_window": false/' s3nw/config.json
run -e "load s3nw; export s3nw.gguf dtype f32"
[ "$(rc)" = 0 ] && grep -q "llama.cpp architecture smollm3, F32" out.txt || fail "smollm3 export: [$(cat out.txt err.txt)]"
"$TG" logits s3nw "$IDS" > ref_s3.json && "$TG" logits s3nw.gguf "$IDS" > gg_s3.json || fail "smollm3 logits"
cmp -s ref_s3.json gg_s3.json || fail "smollm3: logits of the GGUF differ from the source's"
run -e "load s3nw.gguf; info"
grep -Eq "^nope_layers +3$" out.txt || fail "smollm3 GGUF: the NoPE layer 3 is lost: [$(cat out.txt)]"
cp -r s3nw s3x && sed -i 's/"no_rope_layers":[[:space:]]*\[1, 1, 1, 0\]/"no_rope_layers": [1, 0, 1, 1]/' s3x/config.json
run -e "load s3x; export s3x.gguf"
[ "$(rc)" = 1 ] && grep -q "these no_rope_layers have no GGUF form" err.txt || fail "smollm3 other NoPE layers: [$(cat err.txt)]"

# lint of a GGUF: an export has no errors; a tensor renamed and the vocabulary key damaged are
# errors for llama.cpp naming them; an unreadable file is one
run -e "lint qwen3.gguf"
[ "$(rc)" = 0 ] && grep -q "0 errors" out.txt || fail "lint of a good GGUF: [$(cat out.txt err.txt)]"
python3 -c "import sys; d = open('qwen3.gguf', 'rb').read(); open('bad3.gguf', 'wb').write(d.replace(b'blk.1.attn_k_norm.weight', b'blk.1.attn_k_nxrm.weight').replace(b'tokenizer.ggml.tokens', b'tokenizer.ggml.tokenz'))"
run -e "lint bad3.gguf"
grep -q "error    llama.cpp: no tensor blk.1.attn_k_norm.weight, which llama.cpp's qwen3 needs" out.txt \
    && grep -q "error    llama.cpp: no tokenizer.ggml.model / tokenizer.ggml.tokens" out.txt || fail "lint of a bad GGUF: [$(cat out.txt)]"
run -e "lint bad.gguf"
grep -q "error    llama.cpp: not a readable GGUF" out.txt || fail "lint of a truncated GGUF: [$(cat out.txt)]"

# stories260K (llama2.c, interleaved RoPE, its tokenizer)
if [ -f "$M/stories260K/stories260K.bin" ]; then
    run -e "load $M/stories260K/stories260K.bin as st; export st.gguf dtype f32"
    [ "$(rc)" = 0 ] && grep -q "tokenizer llama" out.txt || fail "stories export: [$(cat out.txt err.txt)]"
    close "$(nll "$M/stories260K/stories260K.bin")" "$(nll st.gguf)" 1e-5 || fail "stories nll"
else
    echo "stories260K not found under $M: its part is skipped"
fi
cli_done
