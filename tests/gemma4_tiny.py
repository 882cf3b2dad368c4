"""gemma4_tiny.py DIR RELEASE -- a tiny checkpoint of a Gemma 4 release for tests/cli_gemma4.sh: the release's
config.json (Gemma4ForConditionalGeneration, every key as released) with only the dims shrunk (hidden, heads, KV heads
of both layer types, head dims, layers -- the release's layer-type pattern kept --, vocab, MLP / expert widths,
per-layer-input width, num_kv_shared_layers in proportion), and random F32 weights under the release's tensor names
(model.language_model.*, a vision tower beside it): what each layer has follows transformers' modeling_gemma4 (no
k_proj / v_proj / k_norm on KV-shared layers, no v_proj on attention_k_eq_v full layers, double-wide MLPs on the
KV-shared layers with use_double_wide_mlp, per-layer-input tensors, the MoE block). RELEASE: 31B, E2B or 26B-A4B."""
import json
import os
import random
import struct
import sys

from st_tensors import write_tensors

ROPE = {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
        "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}
COMMON = {"attention_bias": False, "attention_dropout": 0.0, "final_logit_softcapping": 30.0,
          "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 262144, "model_type": "gemma4_text",
          "rms_norm_eps": 1e-06, "rope_parameters": ROPE, "tie_word_embeddings": True, "use_cache": True,
          "vocab_size": 256, "vocab_size_per_layer_input": 256}
# the releases' text_config keys (google/gemma-4-31B-it, -E2B-it, -26B-A4B-it), dims shrunk
RELEASES = {
    "31B": dict(COMMON, attention_k_eq_v=True, enable_moe_block=False, expert_intermediate_size=None, global_head_dim=32,
                head_dim=16, hidden_size=64, hidden_size_per_layer_input=0, intermediate_size=128, num_attention_heads=4,
                num_experts=None, num_global_key_value_heads=1, num_hidden_layers=6, num_key_value_heads=4,
                num_kv_shared_layers=0, sliding_window=1024, top_k_experts=None, use_bidirectional_attention="vision",
                use_double_wide_mlp=False, every=6),
    "E2B": dict(COMMON, attention_k_eq_v=False, enable_moe_block=False, global_head_dim=32, head_dim=16, hidden_size=64,
                hidden_size_per_layer_input=8, intermediate_size=64, num_attention_heads=4, num_experts=None,
                num_global_key_value_heads=None, num_hidden_layers=10, num_key_value_heads=1, num_kv_shared_layers=4,
                sliding_window=512, top_k_experts=None, use_bidirectional_attention=None, use_double_wide_mlp=True,
                every=5),
    "26B-A4B": dict(COMMON, attention_k_eq_v=True, enable_moe_block=True, global_head_dim=32, head_dim=16, hidden_size=64,
                    hidden_size_per_layer_input=0, intermediate_size=64, moe_intermediate_size=16, num_attention_heads=4,
                    num_experts=4, num_global_key_value_heads=1, num_hidden_layers=6, num_key_value_heads=2,
                    num_kv_shared_layers=0, sliding_window=1024, top_k_experts=2, use_bidirectional_attention="vision",
                    use_double_wide_mlp=False, every=6),
}


def main(d, release):
    t = dict(RELEASES[release])
    every = t.pop("every")
    L = t["num_hidden_layers"]
    t["layer_types"] = ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(L)]
    os.makedirs(d, exist_ok=True)
    cfg = {"architectures": ["Gemma4ForConditionalGeneration"], "audio_config": None, "boi_token_id": 255999,
           "dtype": "bfloat16", "eoi_token_id": 258882, "image_token_id": 258880, "initializer_range": 0.02,
           "model_type": "gemma4", "text_config": t, "tie_word_embeddings": True, "transformers_version": "5.5.0",
           "video_token_id": 258884, "vision_config": {"model_type": "gemma4_vision", "hidden_size": 16}}
    json.dump(cfg, open(d + "/config.json", "w"), indent=2)
    D, H, V = t["hidden_size"], t["num_attention_heads"], t["vocab_size"]
    P, F, types = t["hidden_size_per_layer_input"], t["intermediate_size"], t["layer_types"]
    first_shared = L - t["num_kv_shared_layers"]
    rnd, items = random.Random(7), []

    def w(name, shape, center=0.0, sd=None):
        n = 1
        for s in shape:
            n *= s
        sd = sd if sd is not None else 1 / shape[-1] ** 0.5
        items.append((name, ("F32", list(shape), struct.pack("<%df" % n, *(center + sd * rnd.gauss(0, 1) for _ in range(n))))))

    p = "model.language_model."
    w(p + "embed_tokens.weight", [V, D], sd=1 / D ** 0.5)
    if P:
        w(p + "embed_tokens_per_layer.weight", [V, L * P], sd=1 / P ** 0.5)
        w(p + "per_layer_model_projection.weight", [L * P, D])
        w(p + "per_layer_projection_norm.weight", [P], 1.0, 0.1)
    for l in range(L):
        q, full = p + "layers.%d." % l, types[l] == "full_attention"
        hd = t["global_head_dim"] if full else t["head_dim"]
        kv = t["num_global_key_value_heads"] if full and t["attention_k_eq_v"] else t["num_key_value_heads"]
        shared = t["num_kv_shared_layers"] > 0 and l >= first_shared
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
            w(q + n + ".weight", [D], 1.0, 0.1)
        w(q + "layer_scalar", [1], 0.8, 0.05)
        w(q + "self_attn.q_proj.weight", [H * hd, D])
        w(q + "self_attn.q_norm.weight", [hd], 1.0, 0.1)
        if not shared:
            w(q + "self_attn.k_proj.weight", [kv * hd, D])
            w(q + "self_attn.k_norm.weight", [hd], 1.0, 0.1)
            if not (full and t["attention_k_eq_v"]):
                w(q + "self_attn.v_proj.weight", [kv * hd, D])
        w(q + "self_attn.o_proj.weight", [D, H * hd])
        f = F * (2 if shared and t["use_double_wide_mlp"] else 1)
        w(q + "mlp.gate_proj.weight", [f, D])
        w(q + "mlp.up_proj.weight", [f, D])
        w(q + "mlp.down_proj.weight", [D, f])
        if P:
            w(q + "per_layer_input_gate.weight", [P, D])
            w(q + "per_layer_projection.weight", [D, P])
            w(q + "post_per_layer_input_norm.weight", [D], 1.0, 0.1)
        if t["enable_moe_block"]:
            E, I = t["num_experts"], t["moe_intermediate_size"]
            w(q + "router.proj.weight", [E, D], sd=1.0)
            w(q + "router.scale", [D], 1.0, 0.1)
            w(q + "router.per_expert_scale", [E], 1.0, 0.1)
            w(q + "experts.gate_up_proj", [E, 2 * I, D])
            w(q + "experts.down_proj", [E, D, I])
            for n in ("post_feedforward_layernorm_1", "post_feedforward_layernorm_2", "pre_feedforward_layernorm_2"):
                w(q + n + ".weight", [D], 1.0, 0.1)
    w(p + "norm.weight", [D], 1.0, 0.1)
    w("model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight", [16, 16])
    w("model.embed_vision.embedding_projection.weight", [D, 16])
    write_tensors(d + "/model.safetensors", items)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
