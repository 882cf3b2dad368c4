#!/bin/bash
# cli_gemma4.sh -- Gemma 4 (issue 27) through `attnlab -e` on its synthetic checkpoint (gemma4_text: 6 layers
# [s, s, s, f, s, f], attention_k_eq_v on the full layers, the last 2 layers KV-shared, proportional RoPE on the full
# layers): `info` says what each layer type has, which layers share whose K / V and what k_eq_v ties; `kv-cache`
# counts the 4 layers with a cache of their own; `ranks vo` recovers the planted ranks and gives the KV-shared layer
# 4 layer 2's W_V (rank 31) with its own W_O; `truncate` refuses k_eq_v and KV-shared layers by name; `ppl` runs
# (per-layer embeddings, the KV-shared layers' double-wide MLPs; on the multimodal recipe, 26B-A4B's MoE block);
# `lint` expects no v_proj on k_eq_v layers and no k/v on KV-shared ones, and layer_scalar. The multimodal gemma4
# opens its text tower. The config.json of google/gemma-4-31B-it, -E2B-it and -26B-A4B-it (every key as released,
# the dims shrunk: tests/gemma4_tiny.py) over tiny weights with their real tensor names (vision tower included): load,
# info (per-type head dims, KV sharing, per-layer embeddings, the MoE block), ranks vo, ppl, lint.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gemma4
cd "$T" || exit 1
d=$T/g4
run -e "synth family gemma4_text $d"
ok "synth family gemma4_text" test "$(rc)" = 0

out=$(e "load $d; info")
ok "info: family" has "$out" "model_type  *gemma4_text"
ok "info: proportional RoPE on the full layers" has "$out" "full: head_dim 64, 1 KV head, RoPE theta 1e+06 proportional 0.25: pairs (j, j + 32) for j < 8 turn at theta^(-2j/64), the other 24 pairs"
ok "info: sliding layers' RoPE" has "$out" "sliding: head_dim 32, 2 KV heads, RoPE theta 10000 (rotate_half over the head)"
ok "info: KV-shared layers and their sources" has "$out" "kv_shared_layers  *4 <- 2, 5 <- 3 (no k_proj / v_proj"
ok "info: k_eq_v ties V-O and Q-K" has "$out" "V-O and Q-K are tied to one projection (W_K W_O and W_Q W_K^T)"
ok "info: scale 1" has "$out" "softmax_scale  *1$"
ok "info: per-layer embeddings" has "$out" "per_layer_embeddings  *16 per layer (embed_tokens_per_layer of 256 tokens"
ok "info: KV bytes of the 4 layers with their own cache" has "$out" "kv_bytes_per_token  *2048$"
ok "info: kvsvd refused (per-type head dims)" has "$out" "kvsvd  *no: .*the full-attention layers have their own head dims (global_head_dim 64, 1 KV head)"
ok "info: export formats: truncate; tpa named once (no export note for a conversion that does not run)" has "$out" "export formats  *yes: truncate (not: mla, tpa, kvsvd, see their own lines)$"
ok "info: ppl available, calibrate refused" has "$out" "ppl/calibrate  *yes: ppl and generate; calibrate refused"
out=$(e "load $d; calibrate ids /dev/null")
ok "calibrate refused with the reason" has "$out" "cannot calibrate: its full-attention layers have their own head dims"

out=$(e "load $d; kv-cache")
ok "kv-cache: 4 layers" has "$out" "2048 bytes per token in 4 layers"

run -e "load $d; ranks vo"
ok "ranks vo runs over every layer" test "$(rc)" = 0
ok "layer 1 head 0: V 6, O 32, VO 6 (planted)" grep -Eq "^ +1 +0 +6 +32 +6$" out.txt
ok "layer 2 head 0: fused-low 4" grep -Eq "^ +2 +0 +31 +31 +4$" out.txt
ok "layer 4 (KV-shared with 2): layer 2's W_V, rank 31" grep -Eq "^ +4 +0 +31 +32 +[0-9]+$" out.txt
ok "layer 3 (full, head_dim 64): ranks out of 64" awk '$1 == 3 && $2 == 0 { ok = ($3 > 32 && $3 <= 64 && $4 > 32) } END { exit !ok }' out.txt
ok "the summary: of 64 (the full layers' head_dim; not layer 0's 32)" grep -q "^g4: VO effective ranks at tau 0.999, layers 0-5: fused 4-[0-9]* (mean [0-9.]*) of 64, 24 heads$" out.txt

out=$(e "load $d; truncate vo rank 4")
ok "truncate refuses the k_eq_v layer 3" has "$out" "layer 3 of gemma4_text takes V from k_proj (attention_k_eq_v)"
out=$(e "load $d; truncate vo rank 4 layers 4-4")
ok "truncate refuses the KV-shared layer 4" has "$out" "layer 4 of gemma4_text reads an earlier layer's K / V"

cli_ids 40 ids.txt
run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl runs" test "$(rc)" = 0
ok "ppl finite and plausible for vocab 256" awk '$1 == 39 { ok = ($2 > 1 && $2 < 20 && $3 > 1) } END { exit !ok }' out.txt
# the session runs a truncation of v_norm layers (cli_gemma4_eval: equal to its export's reload)
p0=$(awk '$1 == 39 {print $3}' out.txt)
out=$(e "load $d; truncate vo rank 8 layers 0-2; ppl ids ids.txt seqlen 40")
ok "truncate: the KV cache of the 4 layers with their own (not the KV-shared 4-5), as kv-cache" has "$out" "mean over the 4 layers): 128 -> 92 values (71.9%); whole model 2048 -> 1472 bytes per token"
ok "truncate of layer 2 notes that KV-shared layer 4 reads its cut V" has "$out" "^note: the KV-shared layers reading a truncated layer's values -- 4 (V of layer 2) -- change with it"
ok "help truncate says what Gemma 4 refuses and where its ppl runs" has "$(e "help truncate" | tr '\n' ' ')" "On Gemma 4 it refuses the k_eq_v and KV-shared layers .* notes the KV-shared layers that read a truncated layer's V (they read its cut cache in the session too); \`ppl\` there .* runs in the session, as on its export"
ok "truncate says the session measures the working copy" has "$out" "^working copy updated (the loaded model is unchanged): \`ppl\`, \`generate\` and \`check\` measure it"
ok "  none for layers 0-1" hasnt "$(e "load $d; truncate vo rank 8 layers 0-1")" "KV-shared layers reading"
ok "ppl of the truncation runs in the session" hasnt "$out" "^error"
run -e "load $d; truncate vo rank 8 layers 0-2; export $T/g4tr; load $T/g4tr; ppl ids ids.txt seqlen 40"
p1=$(awk '$1 == 39 {print $3}' out.txt)
ok "... and the export's ppl runs, not the source's ($p1, $p0)" awk -v a="$p1" -v b="$p0" 'BEGIN { exit !(a > 1 && b > 1 && a != b) }'
run -e "load $d; check $T/g4tr"
ok "check of the export compares its truncated layers 0-2 in the session" grep -Eq "^ +2 +[0-9.e-]+ +[0-9.e-]+$" out.txt
ok "  rc 0 and PASS" test "$(rc)" = 0 -a -n "$(grep "^PASS: the export's fused maps" out.txt)"
run -e "load $T/g4tr; ranks vo layer 4"
ok "  the export's KV-shared layer 4 has layer 2's cut V (VO rank 8, was 26-27), as the note says" grep -Eq "^ +4 +0 +8 +32 +8$" out.txt

out=$(e "lint $d")
ok "lint: transformers loads every tensor" has "$out" "transformers  Gemma4ForCausalLM  loads"
ok "lint: vLLM loads it" has "$out" "vLLM          Gemma4ForCausalLM  loads"
hasnt "$out" "layer_scalar" || fail "lint calls layer_scalar unknown: $out"
hasnt "$out" "missing" || fail "lint expects tensors Gemma 4 does not have: $out"

run -e "synth family gemma4 $T/mm"
ok "synth family gemma4 (multimodal)" test "$(rc)" = 0
out=$(e "load $T/mm; info")
ok "gemma4: its text tower" has "$out" "vision and audio towers (vision_tower, embed_vision, audio_tower, embed_audio) are not read"
ok "gemma4 (26B-A4B's recipe): the MoE block" has "$out" "moe_block  *4 experts, top 2 of 32 wide beside each dense MLP"
out=$(e "lint $T/mm")
ok "gemma4: lint expects the MoE block's tensors" has "$out" "transformers  Gemma4ForConditionalGeneration  loads"
run -e "load $T/mm; ppl ids ids.txt seqlen 40"
ok "gemma4: ppl runs on the tower" test "$(rc)" = 0
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
for r in 31B E2B 26B-A4B; do
    python3 "$ATTNLAB_SRC/tests/gemma4_tiny.py" "$T/real$r" "$r" || fail "could not write the gemma-4-$r-it folder"
done
out=$(e "load $T/real31B; info")
ok "gemma-4-31B-it's config: loads as gemma4" has "$out" "model_type  *gemma4$"
ok "... sliding and full layers with their own head dims and KV heads" has "$out" "sliding: head_dim 16, 4 KV heads, RoPE theta 10000 (rotate_half over the head); full: head_dim 32, 1 KV head, RoPE theta 1e+06 proportional 0.25: pairs (j, j + 16) for j < 4"
ok "... window 1024 on layers 0-4" has "$out" "0, 1, 2, 3, 4 (window 1024); full: 5"
ok "... k_eq_v" has "$out" "attention_k_eq_v  *full layers: no v_proj"
ok "... no KV-shared layers" hasnt "$out" "kv_shared_layers"
# The folder's weights are stored F32 under the config's "dtype": "bfloat16". vLLM (dtype "auto": the config's
# torch_dtype / dtype; kv_cache_dtype "auto": that dtype) and transformers (dtype="auto") cache BF16, so info
# counts 2 bytes a value, as truncate and kv-cache do (cli_gemma4_eval: 1408 bytes; this pinned F32's 2816).
ok "... KV bytes: (5 x 4 x 32 + 1 x 1 x 64) BF16 values (config dtype bfloat16; weights stored F32)" has "$out" "kv_bytes_per_token  *1408$"
ok "... and says why" has "$out" "kv_cache_dtype_from  *config torch_dtype bfloat16; weights stored F32$"
# q 64 x 64 + k 64 x 64 + v 64 x 64 + o 64 x 64 on 5 sliding layers; q 64 x 128, k 64 x 32, o 128 x 64 on the k_eq_v one
ok "... attention parameters per layer type: 5 x 16384 + 18432" has "$out" "attn_params_total  *100352$"
run -e "load $T/real31B; ranks vo layer 5"
ok "ranks vo on the full layer (head_dim 32, V = K)" grep -Eq "^ +5 +0 +32 +32 +[0-9]+$" out.txt
out=$(e "load $T/realE2B; info")
ok "gemma-4-E2B-it's config: full layers head_dim 32, 1 KV head (k_eq_v false: no KV override)" has "$out" "full: head_dim 32, 1 KV head"
ok "... layers 6-9 share 5's (sliding) and 4's (full) K / V" has "$out" "kv_shared_layers  *6 <- 5, 7 <- 5, 8 <- 5, 9 <- 4"
ok "... per-layer embeddings" has "$out" "per_layer_embeddings  *8 per layer"
ok "... KV bytes of layers 0-5: (5 x 1 x 32 + 1 x 1 x 64) x 2 (BF16, as above)" has "$out" "kv_bytes_per_token  *448$"
run -e "load $T/realE2B; ranks vo layer 9"
ok "ranks vo on the KV-shared full layer 9 (layer 4's W_V, head_dim 32)" grep -Eq "^ +9 +0 +32 +32 +[0-9]+$" out.txt
out=$(e "load $T/real26B-A4B; info")
ok "gemma-4-26B-A4B-it's config: the MoE block" has "$out" "moe_block  *4 experts, top 2 of 16 wide"
for r in 31B E2B 26B-A4B; do
    run -e "load $T/real$r; ppl ids ids.txt seqlen 40"
    ok "ppl runs on gemma-4-$r-it's layout" test "$(rc)" = 0
    ok "  ppl finite" awk '$1 == 39 { ok = ($2 > 1 && $2 < 20) } END { exit !ok }' out.txt
    out=$(e "lint $T/real$r")
    ok "  lint: transformers loads every tensor of gemma-4-$r-it's layout" has "$out" "transformers  Gemma4ForConditionalGeneration  loads"
done
cli_done
