#!/bin/bash
# cli_kimi_k3.sh -- Kimi-K3 (model_type kimi_k3): moonshotai/Kimi-K3's config.json (every semantic key as released;
# PretrainedConfig's generation defaults left out) is accepted (load then looks for its tensors) and its text tower
# read as Kimi-Linear's -- Kimi Delta Attention and MLA layers (1-based lists), the full-rank output gates, attention
# residuals, SiTU, the latent experts described (core/model/kimik3.c). `synth family kimi_k3` writes that config
# shrunk (its tensors under language_model.model., a vision tower beside them): `load` and `info` describe it, `ranks
# vo|qk` / `spectrum` / `fuse` recover the planted ranks of its MLA layers (3 and 7; the KDA layers left out), and
# what runs the layers (ppl, generate, calibrate, kvsvd, convert, compare) is refused naming what is not built.
# Malformed lists are refused by name. Before, the load was refused whatever the folder held.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-kimi-k3
cd "$T" || exit 1

# k3 DIR [PYTHON]: Kimi-K3's config.json into DIR/config.json, PYTHON then applied to the dict c (t: text_config)
k3() {
    mkdir -p "$1"
    python3 - "$1" "${2:-}" <<'PY'
import json, sys
full = [4 * i for i in range(1, 24)] + [93]
kda = [i for i in range(1, 92) if i % 4]
q = {"config_groups": {"group_0": {"format": "mxfp4-pack-quantized", "input_activations": None,
     "output_activations": None, "targets": ["Linear"], "weights": {"actorder": None, "block_structure": None,
     "dynamic": False, "group_size": 32, "num_bits": 4, "observer": "minmax", "observer_kwargs": {},
     "scale_dtype": "torch.uint8", "strategy": "group", "symmetric": True, "type": "float", "zp_dtype": None}}},
     "format": "mxfp4-pack-quantized", "global_compression_ratio": None,
     "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
                "re:.*lm_head.*", "re:.*vision_tower.*", "re:.*mm_projector.*"],
     "kv_cache_scheme": None, "quant_method": "compressed-tensors", "quantization_status": "compressed"}
t = {"activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0, "architectures": ["KimiLinearForCausalLM"],
     "attn_res_block_size": 12, "auto_map": {"AutoConfig": "configuration_kimi_k3.KimiLinearConfig",
     "AutoModel": "modeling_kimi_linear.KimiLinearModel", "AutoModelForCausalLM": "modeling_kimi_linear.KimiLinearForCausalLM"},
     "bos_token_id": 163584, "dtype": "bfloat16", "eos_token_id": 163586, "first_k_dense_replace": 1,
     "hidden_act": "situ", "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 33792,
     "kv_lora_rank": 512, "latent_moe_use_norm": True,
     "linear_attn_config": {"full_attn_layers": full, "gate_lower_bound": -5.0, "head_dim": 128, "kda_layers": kda,
                            "num_heads": 96, "short_conv_kernel_size": 4, "use_full_rank_gate": True},
     "max_position_embeddings": 1048576, "mla_use_nope": True, "mla_use_output_gate": True, "model_type": "kimi_linear",
     "moe_intermediate_size": 3072, "moe_layer_freq": 1, "moe_renormalize": True, "moe_router_activation_func": "sigmoid",
     "num_attention_heads": 96, "num_expert_group": 1, "num_experts": 896, "num_experts_per_token": 16,
     "num_hidden_layers": 93, "num_key_value_heads": 96, "num_nextn_predict_layers": 0, "num_shared_experts": 2,
     "pad_token_id": 163839, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
     "quantization_config": q, "rms_norm_eps": 1e-05, "routed_expert_hidden_size": 3584, "routed_scaling_factor": 1.0,
     "tie_word_embeddings": False, "topk_group": 1, "topk_method": "noaux_tc", "transformers_version": "4.56.2",
     "use_cache": True, "use_grouped_topk": True, "v_head_dim": 128, "vocab_size": 163840}
c = {"architectures": ["KimiK3ForConditionalGeneration"], "auto_map": {"AutoConfig": "configuration_kimi_k3.KimiK3Config",
     "AutoModel": "modeling_kimi_k3.KimiK3ForConditionalGeneration",
     "AutoModelForCausalLM": "modeling_kimi_k3.KimiK3ForConditionalGeneration"},
     "bos_token_id": 163584, "dtype": "bfloat16", "eos_token_id": 163586, "ignore_index": -100,
     "image_placeholder": "<|kimi_image_placeholder|>", "media_placeholder_token_id": 163605, "model_type": "kimi_k3",
     "pad_token_id": 163839, "text_config": t, "tie_word_embeddings": False,
     "vision_config": {"_attn_implementation": "flash_attention_2", "activation_func": "gelu_pytorch_tanh",
     "attn_bias": False, "init_pos_emb_height": 64, "init_pos_emb_time": 4, "init_pos_emb_width": 64,
     "linear_bias": False, "merge_kernel_size": [2, 2], "merge_type": "sd2_tpool", "mlp_type": "mlp2",
     "mm_hidden_size": 1024, "mm_projector_type": "patchmergerv2", "norm_type": "rmsnorm", "patch_embed_proj_bias": False,
     "patch_size": 14, "pos_emb_interpolation_mode": "bilinear", "pos_emb_type": "divided_fixed",
     "projector_hidden_act": "gelu", "projector_ln_eps": 1e-05, "qkv_hidden_size": 1536, "text_hidden_size": 7168,
     "vt_hidden_size": 1024, "vt_intermediate_size": 4096, "vt_num_attention_heads": 12, "vt_num_hidden_layers": 27}}
exec(sys.argv[2])
json.dump(c, open(sys.argv[1] + '/config.json', 'w'), indent=2)
PY
}

k3 k3
run -e "load k3"
m=$(cat err.txt)
has "$m" "no model.safetensors" || fail "the Kimi-K3 config is accepted, its tensors looked for [$m]"

# the synthetic checkpoint: the config above shrunk, Kimi-Linear's tensor names under language_model.model.
run -e "synth family kimi_k3 s"
ok "synth family kimi_k3" test "$(rc)" = 0
has "$(python3 -c 'import json; print(json.load(open("s/model.safetensors.index.json"))["weight_map"].keys())' 2>/dev/null ||
       python3 -c 'import json,struct; f=open("s/model.safetensors","rb"); n=struct.unpack("<Q",f.read(8))[0]; print(list(json.loads(f.read(n)).keys()))')" \
    "language_model.model.layers.3.self_attn.kv_b_proj.weight.*vision_tower.patch_embed.proj.weight\|vision_tower.patch_embed.proj.weight.*language_model.model.layers.3.self_attn.kv_b_proj.weight" \
    || fail "the tensors under language_model.model., a vision tower beside them"
run -e "load s; info"
ok "load of the synthetic Kimi-K3" test "$(rc)" = 0
m=$(cat out.txt)
has "$m" "^model_type  *kimi_k3" || fail "model_type [$m]"
has "$m" "^kimi_k3  *8 layers: MLA of 4 heads without RoPE on 2 (3, 7), Kimi Delta Attention (4 heads of 32) on 6 (the others); output gates: KDA full-rank (g_proj), MLA yes; attention residuals in blocks of 4; activation situ (beta 4, linear beta 25); 8 experts top-2 in a latent of 64, 2 shared" \
    || fail "info: kimik3's description [$m]"
has "$m" "^q_lora_rank  *64" || fail "q_lora_rank [$m]"
has "$m" "^rope_layout  *none" || fail "no RoPE [$m]"
has "$m" "^attention_layers  *3, 7 (2 of 8" || fail "the MLA layers [$m]"
has "$m" "^multimodal  *text tower of a multimodal checkpoint (text_config, tensors under language_model.model.); vision tower not loaded" \
    || fail "the vision tower ignored, said so [$m]"
has "$m" "^kimi_k3_read  *.*present, not analysed: the output gate self_attn.g_proj on 8 layers" || fail "g_proj on every layer [$m]"
has "$m" "^ranks vo  *yes: .*Kimi-K3's full-rank output gate (self_attn.g_proj, not read) makes head h's V-O map W_V diag(sigmoid(x W_g)) W_O" \
    || fail "ranks vo's note: the gate [$m]"
has "$m" "^ppl/calibrate  *no: .*needs Kimi-K3's layers, which attnlab does not build: the attention residuals" || fail "ppl refused in info [$m]"
has "$m" "^kvsvd  *no: .*needs Kimi-K3's layers" || fail "kvsvd refused in info (generate and kvsvd need a tokenizer / calibration first) [$m]"

# use_full_rank_gate: a KDA layer's gate is one g_proj (no g_a / g_b); without it the load is refused naming it
python3 - s s2 <<'PY'
import json, os, shutil, struct, sys
src, dst = sys.argv[1], sys.argv[2]
shutil.copytree(src, dst)
f = open(src + "/model.safetensors", "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n)); data = f.read()
assert "language_model.model.layers.2.self_attn.g_a_proj.weight" not in h
gone = "language_model.model.layers.2.self_attn.g_proj.weight"
out, off, hdr = b"", 0, {}
for k, v in h.items():
    if k == "__metadata__": hdr[k] = v; continue
    if k == gone: continue
    b = data[v["data_offsets"][0]:v["data_offsets"][1]]
    hdr[k] = dict(v, data_offsets=[off, off + len(b)]); out += b; off += len(b)
j = json.dumps(hdr).encode(); j += b" " * (-len(j) % 8)
open(dst + "/model.safetensors", "wb").write(struct.pack("<Q", len(j)) + j + out)
PY
run -e "load s2"
has "$(cat err.txt)" "language_model.model.layers.2.self_attn.g_proj.weight" || fail "a KDA layer without its g_proj [$(cat err.txt)]"

# the planted ranks of the MLA layers (layer 3 = the recipe's first attention layer: V rank 6 in head 0, QK 8; layer 7
# fused rank 4), the spectra exact
run -e "load s; ranks vo tau 0.999"
m=$(cat out.txt)
has "$m" "^ *3  *0  *6  *32  *6$" || fail "layer 3 head 0: V rank 6 [$m]"
for h in 0 1 2 3; do has "$m" "^ *7  *$h  *31  *31  *4$" || fail "layer 7 head $h: fused rank 4 [$m]"; done
[ "$(grep -c '^ *[0-9]  *[0-9] ' <<<"$m")" = 8 ] || fail "8 heads of the 2 MLA layers, the KDA layers left out [$m]"
has "$(cat out.txt err.txt)" "layers 0-2, 4-6 are Kimi Delta Attention linear attention" || fail "KDA layers named [$(cat err.txt)]"
run -e "load s; ranks qk tau 0.999"
m=$(cat out.txt)
for h in 0 1 2 3; do has "$m" "^ *3  *$h  *32  *8  *8$" || fail "layer 3 head $h: QK rank 8 [$m]"; done
run -e "load s; spectrum vo layer 3 head 0"
m=$(cat out.txt)
has "$m" "effective rank 6 at tau 0.99" || fail "spectrum: rank 6 [$m]"
has "$m" "^ *6  *2.82843 " || fail "sigma_6 of the planted rank [$m]"
has "$m" "^ *7  *0 " || fail "sigma_7 zero [$m]"
run -e "load s; fuse vo layer 7 head 1"
has "$(cat out.txt)" "64 x 128 map = (64 x 32) @ (32 x 128)" || fail "fuse: V from the kv latent (64 x 32) @ O [$(cat out.txt)]"
has "$(cat out.txt)" "V 31, O 31, VO 4" || fail "fuse: ranks [$(cat out.txt)]"
run -e "load s; fuse vo layer 2 head 1"
has "$(cat err.txt)" "layer 2 of this kimi_k3 model is a Kimi Delta Attention linear-attention layer" || fail "a KDA layer alone [$(cat err.txt)]"
run -e "load s; plot vo-ranks to k3.png"
ok "plot vo-ranks" is_png k3.png

# truncate vo on the MLA layers, exported (factors) and loaded back: the truncated ranks, the rest of the tower as it was
run -e "load s; truncate vo tau 0.9; export t; load t; ranks vo tau 0.999; info"
m=$(cat out.txt)
has "$m" "^ *3  *1  *29  *29  *29$" || fail "truncated layer 3 head 1: rank 29 [$m]"
has "$m" "^ *3  *0  *6  *6  *6$" || fail "truncated layer 3 head 0: rank 6 [$m]"
has "$m" "^kimi_k3_read  *.*self_attn.g_proj on 8 layers" || fail "the export keeps the gates [$m]"
has "$(python3 -c 'import json,struct; f=open("t/model.safetensors","rb"); n=struct.unpack("<Q",f.read(8))[0]; print(" ".join(json.loads(f.read(n))))')" \
    "vision_tower.patch_embed.proj.weight" || fail "the export keeps the vision tower's tensors"

# what runs the layers: refused naming what is not built
echo "1 2 3 4 5 6 7 8" >x.ids
for c in "ppl ids x.ids" "calibrate ids x.ids" "convert mla kv-rank 8" \
         "compare kv-budget 16"; do
    run -e "load s; $c"
    m=$(cat err.txt)
    [ "$(rc)" = 1 ] && has "$m" "needs Kimi-K3's layers, which attnlab does not build: the attention residuals" &&
        has "$m" "the SiTU activation, the latent experts" && has "$m" "full-rank output gates" \
        || fail "$c refused naming what is not built [$m]"
done

# a plan of 8 layers: the MLA layers listed (0-based), the KDA layers the others
k3 plan 't["num_hidden_layers"] = 8; t["linear_attn_config"]["kda_layers"] = [1, 2, 3, 5, 6, 7]; t["linear_attn_config"]["full_attn_layers"] = [4, 8]'
run -e "load plan"
has "$(cat err.txt)" "no model.safetensors" || fail "plan accepted [$(cat err.txt)]"

# malformed, each named
k3 twice 't["linear_attn_config"]["full_attn_layers"][0] = 1'
run -e "load twice"
has "$(cat err.txt)" "linear_attn_config.full_attn_layers names layer 1: layers are 1 to 93, each listed once" \
    || fail "a layer listed twice [$(cat err.txt)]"
k3 past 't["linear_attn_config"]["kda_layers"][-1] = 94'
run -e "load past"
has "$(cat err.txt)" "linear_attn_config.kda_layers names layer 94" || fail "a layer past the last [$(cat err.txt)]"
k3 notext 'del c["text_config"]'
run -e "load notext"
has "$(cat err.txt)" "kimi_k3 keeps its language model under \"text_config\" (model_type kimi_linear), which is missing" \
    || fail "no text_config [$(cat err.txt)]"
k3 gap 't["linear_attn_config"]["kda_layers"].remove(2)'
run -e "load gap"
has "$(cat err.txt)" "lists layer 2 in neither kda_layers nor full_attn_layers" || fail "a layer in neither list [$(cat err.txt)]"
k3 badres 't["attn_res_block_size"] = -12'
run -e "load badres"
has "$(cat err.txt)" "kimi_k3's text_config: attn_res_block_size: each must be a whole number >= 0" || fail "res block [$(cat err.txt)]"

run -e "help load"
has "$(cat out.txt)" "^  kimi_k3 " || fail "help load lists kimi_k3 [$(cat out.txt)]"
cli_done
