#!/bin/bash
# cli_gemma4.sh -- Gemma 4 (issue 27) through `attnlab -e` on its synthetic checkpoint (gemma4_text: 6 layers
# [s, s, s, f, s, f], attention_k_eq_v on the full layers, the last 2 layers KV-shared, proportional RoPE on the full
# layers): `info` says what each layer type has, which layers share whose K / V and what k_eq_v ties; `kv-cache`
# counts the 4 layers with a cache of their own; `ranks vo` recovers the planted ranks and gives the KV-shared layer
# 4 layer 2's W_V (rank 31) with its own W_O; `truncate` refuses k_eq_v and KV-shared layers by name; `ppl` runs
# (per-layer embeddings, the KV-shared layers' double-wide MLPs; on the multimodal recipe, 26B-A4B's MoE block);
# `lint` expects no v_proj on k_eq_v layers and no k/v on KV-shared ones, and layer_scalar. The multimodal gemma4
# opens its text tower. google/gemma-4-31B-it's config.json (every key as released; the dims -- hidden, heads, KV
# heads of both types, head dims, layers with the release's 5 : 1 layer_types, vocab, MLP -- shrunk) over tiny
# weights with its real tensor names (vision tower included): load, info, ranks vo and ppl.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-gemma4
cd "$T" || exit 1
d=$T/g4
run -e "synth family gemma4_text $d"
ok "synth family gemma4_text" test "$(rc)" = 0

out=$(e "load $d; info")
ok "info: family" has "$out" "model_type  *gemma4_text"
ok "info: proportional RoPE on the full layers" has "$out" "full: head_dim 64, 1 KV heads, RoPE theta 1e+06 proportional 0.25: pairs (j, j + 32) for j < 8 turn at theta^(-2j/64), the other 24 pairs"
ok "info: sliding layers' RoPE" has "$out" "sliding: head_dim 32, 2 KV heads, RoPE theta 10000 (rotate_half over the head)"
ok "info: KV-shared layers and their sources" has "$out" "kv_shared_layers  *4 <- 2, 5 <- 3 (no k_proj / v_proj"
ok "info: k_eq_v ties V-O and Q-K" has "$out" "V-O and Q-K are tied to one projection (W_K W_O and W_Q W_K^T)"
ok "info: scale 1" has "$out" "softmax_scale  *1$"
ok "info: per-layer embeddings" has "$out" "per_layer_embeddings  *16 per layer (embed_tokens_per_layer of 256 tokens"
ok "info: KV bytes of the 4 layers with their own cache" has "$out" "kv_bytes_per_token  *2048$"
ok "info: kvsvd refused (per-type head dims)" has "$out" "kvsvd  *no: .*the full-attention layers have their own head dims (global_head_dim 64, 1 KV heads)"
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
ok "gemma4 (26B-A4B's recipe): the MoE block" has "$out" "moe_block  *4 experts, top 2 of 32 wide beside each dense MLP"
out=$(e "lint $T/mm")
ok "gemma4: lint expects the MoE block's tensors" has "$out" "transformers  Gemma4ForConditionalGeneration  loads"
run -e "load $T/mm; ppl ids ids.txt seqlen 40"
ok "gemma4: ppl runs on the tower" test "$(rc)" = 0
export PYTHONPATH="$ATTNLAB_SRC/tests${PYTHONPATH:+:$PYTHONPATH}"
python3 - "$T/real31b" <<'PY' || fail "could not write the gemma-4-31B-it folder"
import json, os, random, struct, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
D, H, KV, GKV, HD, GHD, L, V, F = 64, 4, 4, 1, 16, 32, 6, 256, 128
types = ["sliding_attention"] * 5 + ["full_attention"]
cfg = {"architectures": ["Gemma4ForConditionalGeneration"], "audio_config": None, "boi_token_id": 255999,
       "dtype": "bfloat16", "eoi_token_id": 258882, "image_token_id": 258880, "initializer_range": 0.02,
       "model_type": "gemma4", "text_config": {"attention_bias": False, "attention_dropout": 0.0,
       "attention_k_eq_v": True, "enable_moe_block": False, "expert_intermediate_size": None,
       "final_logit_softcapping": 30.0, "global_head_dim": GHD, "head_dim": HD, "hidden_activation": "gelu_pytorch_tanh",
       "hidden_size": D, "hidden_size_per_layer_input": 0, "intermediate_size": F, "layer_types": types,
       "max_position_embeddings": 262144, "model_type": "gemma4_text", "num_attention_heads": H, "num_experts": None,
       "num_global_key_value_heads": GKV, "num_hidden_layers": L, "num_key_value_heads": KV, "num_kv_shared_layers": 0,
       "rms_norm_eps": 1e-06, "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
       "rope_type": "proportional"}, "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
       "sliding_window": 1024, "tie_word_embeddings": True, "top_k_experts": None, "use_bidirectional_attention": "vision",
       "use_cache": True, "use_double_wide_mlp": False, "vocab_size": V, "vocab_size_per_layer_input": V},
       "tie_word_embeddings": True, "transformers_version": "5.5.0.dev0", "video_token_id": 258884,
       "vision_config": {"model_type": "gemma4_vision", "hidden_size": 16}}
json.dump(cfg, open(d + "/config.json", "w"), indent=2)
rnd = random.Random(7)
items = []
def t(name, *shape, center=0.0, sd=None):
    n = 1
    for s in shape: n *= s
    sd = sd if sd is not None else 1 / (shape[-1] ** 0.5)
    vals = [center + sd * rnd.gauss(0, 1) for _ in range(n)]
    items.append((name, ("F32", list(shape), struct.pack("<%df" % n, *vals))))
p = "model.language_model."
t(p + "embed_tokens.weight", V, D, sd=1 / D ** 0.5)
for l in range(L):
    q, full = p + "layers.%d." % l, types[l] == "full_attention"
    hd, kv = (GHD, GKV) if full else (HD, KV)
    for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
        t(q + n + ".weight", D, center=1.0, sd=0.1)
    t(q + "layer_scalar", 1, center=0.8, sd=0.05)
    t(q + "self_attn.q_proj.weight", H * hd, D)
    t(q + "self_attn.k_proj.weight", kv * hd, D)
    if not full: t(q + "self_attn.v_proj.weight", kv * hd, D)
    t(q + "self_attn.o_proj.weight", D, H * hd)
    t(q + "self_attn.q_norm.weight", hd, center=1.0, sd=0.1)
    t(q + "self_attn.k_norm.weight", hd, center=1.0, sd=0.1)
    t(q + "mlp.gate_proj.weight", F, D); t(q + "mlp.up_proj.weight", F, D); t(q + "mlp.down_proj.weight", D, F)
t(p + "norm.weight", D, center=1.0, sd=0.1)
t("model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight", 16, 16)
t("model.embed_vision.embedding_projection.weight", D, 16)
import st_tensors
st_tensors.write_tensors(d + "/model.safetensors", items)
PY
out=$(e "load $T/real31b; info")
ok "gemma-4-31B-it's config: loads as gemma4" has "$out" "model_type  *gemma4$"
ok "... sliding and full layers with their own head dims and KV heads" has "$out" "sliding: head_dim 16, 4 KV heads, RoPE theta 10000 (rotate_half over the head); full: head_dim 32, 1 KV heads, RoPE theta 1e+06 proportional 0.25: pairs (j, j + 16) for j < 4"
ok "... window 1024 on layers 0-4" has "$out" "0, 1, 2, 3, 4 (window 1024); full: 5"
ok "... k_eq_v" has "$out" "attention_k_eq_v  *full layers: no v_proj"
ok "... no KV-shared layers" hasnt "$out" "kv_shared_layers"
ok "... KV bytes: (5 x 4 x 32 + 1 x 1 x 64) F32 values (the weights are F32)" has "$out" "kv_bytes_per_token  *2816$"
run -e "load $T/real31b; ranks vo layer 5"
ok "ranks vo on the full layer (head_dim 32, V = K)" grep -Eq "^ +5 +0 +32 +32 +[0-9]+$" out.txt
run -e "load $T/real31b; ppl ids ids.txt seqlen 40"
ok "ppl runs on gemma-4-31B-it's layout" test "$(rc)" = 0
ok "ppl finite" awk '$1 == 39 { ok = ($2 > 1 && $2 < 20) } END { exit !ok }' out.txt
cli_done
