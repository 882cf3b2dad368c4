#!/bin/bash
# cli_gemma4.sh -- Gemma 4 (issue 27) through `attnlab -e` on its synthetic checkpoint (gemma4_text: 6 layers
# [s, s, s, f, s, f], attention_k_eq_v on the full layers, the last 2 layers KV-shared, proportional RoPE on the full
# layers): `info` says what each layer type has, which layers share whose K / V and what k_eq_v ties; `kv-cache`
# counts the 4 layers with a cache of their own; `ranks vo` recovers the planted ranks and gives the KV-shared layer
# 4 layer 2's W_V (rank 31) with its own W_O; `truncate` refuses k_eq_v and KV-shared layers by name; `ppl` runs;
# `lint` expects no v_proj on k_eq_v layers and no k/v on KV-shared ones, and layer_scalar. The multimodal gemma4
# opens its text tower.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gemma4
cd "$T" || exit 1
d=$T/g4
run -e "synth family gemma4_text $d"
ok "synth family gemma4_text" test "$(rc)" = 0

out=$(e "load $d; info")
ok "info: family" has "$out" "model_type  *gemma4_text"
ok "info: proportional RoPE on the full layers" has "$out" "proportional 0.25: pairs (j, j + 16) for j < 4 turn at theta^(-2j/32), the other 12 pairs"
ok "info: sliding layers' RoPE" has "$out" "sliding: head_dim 32, 2 KV heads, RoPE theta 10000 (rotate_half over the head)"
ok "info: KV-shared layers and their sources" has "$out" "kv_shared_layers  *4 <- 2, 5 <- 3 (no k_proj / v_proj"
ok "info: k_eq_v ties V-O and Q-K" has "$out" "V-O and Q-K are tied to one projection (W_K W_O and W_Q W_K^T)"
ok "info: scale 1" has "$out" "softmax_scale  *1$"
ok "info: KV bytes of the 4 layers with their own cache" has "$out" "kv_bytes_per_token  *2048$"
ok "info: kvsvd refused (KV-shared layers)" has "$out" "kvsvd  *no: .*layers 4-5 read an earlier layer's K / V"
ok "info: ppl available" has "$out" "ppl/calibrate  *yes"

out=$(e "load $d; kv-cache")
ok "kv-cache: 4 layers" has "$out" "2048 bytes per token in 4 layers"

run -e "load $d; ranks vo"
ok "ranks vo runs over every layer" test "$(rc)" = 0
ok "layer 1 head 0: V 6, O 32, VO 6 (planted)" grep -Eq "^ +1 +0 +6 +32 +6$" out.txt
ok "layer 2 head 0: fused-low 4" grep -Eq "^ +2 +0 +31 +31 +4$" out.txt
ok "layer 4 (KV-shared with 2): layer 2's W_V, rank 31" grep -Eq "^ +4 +0 +31 +32 +[0-9]+$" out.txt

out=$(e "load $d; truncate vo rank 4")
ok "truncate refuses the k_eq_v layer 3" has "$out" "layer 3 of gemma4_text takes V from k_proj (attention_k_eq_v)"
out=$(e "load $d; truncate vo rank 4 layers 4-4")
ok "truncate refuses the KV-shared layer 4" has "$out" "layer 4 of gemma4_text reads an earlier layer's K / V"

for i in $(seq 1 40); do echo $(((i * 37 + 11) % 256)); done | tr '\n' ' ' > ids.txt
run -e "load $d; ppl ids ids.txt seqlen 40"
ok "ppl runs" test "$(rc)" = 0
ok "ppl finite and plausible for vocab 256" awk '$1 == 39 { ok = ($2 > 1 && $2 < 20 && $3 > 1) } END { exit !ok }' out.txt

out=$(e "lint $d")
ok "lint: transformers loads every tensor" has "$out" "transformers  Gemma4ForCausalLM  loads"
ok "lint: vLLM loads it" has "$out" "vLLM          Gemma4ForCausalLM  loads"
hasnt "$out" "layer_scalar" || fail "lint calls layer_scalar unknown: $out"
hasnt "$out" "missing" || fail "lint expects tensors Gemma 4 does not have: $out"

run -e "synth family gemma4 $T/mm"
ok "synth family gemma4 (multimodal)" test "$(rc)" = 0
out=$(e "load $T/mm; info")
ok "gemma4: its text tower" has "$out" "vision and audio towers (vision_tower, embed_vision, audio_tower, embed_audio) are not read"
run -e "load $T/mm; ppl ids ids.txt seqlen 40"
ok "gemma4: ppl runs on the tower" test "$(rc)" = 0
cli_done
