#!/usr/bin/env python3
"""collect_fake_hf.py -- drives scripts/attnlab_collect.py without transformers (tests/cli_collect.sh).

A Llama / Qwen3 / DeepSeek-V3 (MLA, dense MLP) decoder written in plain torch with the module names and call conventions of the
transformers modeling files (model.model.layers[i].self_attn with a layer_idx; q_proj / k_proj /
v_proj; Qwen3's per-head q_norm / k_norm before RoPE; DeepSeek-V3's latents, kv_b_proj and
interleaved RoPE on the rotary part; the attention calls its Python module's
apply_rotary_pos_emb; position_embeddings = (cos, sin) passed by keyword), loaded from an attnlab
`synth` checkpoint. The collector's hooks, sums and writer run on it exactly as they would on a
transformers model.

  collect_fake_hf.py collect MODEL_DIR IDS_FILE SEQLEN SAMPLES SPLIT OUT
  collect_fake_hf.py compare A.safetensors B.safetensors     (statistics equal to 1e-4 of each max)
"""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import attnlab_collect as ac  # noqa: E402


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def apply_rotary_pos_emb_interleave(q, k, cos, sin, unsqueeze_dim=1):
    """DeepSeek-V3: interleaved pairs de-interleaved into halves, then rotate_half (output in halves)."""
    def halves(t):
        *lead, d = t.shape
        return t.reshape(*lead, d // 2, 2).transpose(-1, -2).reshape(*lead, d)
    return apply_rotary_pos_emb(halves(q), halves(k), cos, sin, unsqueeze_dim)


class Config:
    def __init__(self, d):
        self.__dict__.update(d)
        self.head_dim = d.get("head_dim") or d["hidden_size"] // d["num_attention_heads"]


class RMSNorm(torch.nn.Module):
    def __init__(self, w, eps):
        super().__init__()
        self.weight, self.eps = torch.nn.Parameter(w, requires_grad=False), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def linear(w):
    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
    lin.weight = torch.nn.Parameter(w, requires_grad=False)
    return lin


class FakeAttention(torch.nn.Module):
    def __init__(self, cfg, t, p, layer_idx):
        super().__init__()
        self.layer_idx, self.cfg = layer_idx, cfg
        self.q_proj, self.k_proj = linear(t[p + "q_proj.weight"]), linear(t[p + "k_proj.weight"])
        self.v_proj, self.o_proj = linear(t[p + "v_proj.weight"]), linear(t[p + "o_proj.weight"])
        self.q_norm = RMSNorm(t[p + "q_norm.weight"], cfg.rms_norm_eps) if p + "q_norm.weight" in t else None
        self.k_norm = RMSNorm(t[p + "k_norm.weight"], cfg.rms_norm_eps) if p + "k_norm.weight" in t else None

    def forward(self, hidden_states, position_embeddings, attention_mask=None, **kwargs):
        B, T, _ = hidden_states.shape
        H, G, d = self.cfg.num_attention_heads, self.cfg.num_key_value_heads, self.cfg.head_dim
        q = self.q_proj(hidden_states).view(B, T, H, d)
        k = self.k_proj(hidden_states).view(B, T, G, d)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = self.v_proj(hidden_states).view(B, T, G, d).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k, v = k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(d)
        s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, H * d)
        return self.o_proj(o), None


class FakeMLAttention(torch.nn.Module):
    """DeepseekV3Attention's data flow: q through its latent, [c_kv | k_pe] from kv_a_proj_with_mqa,
    per-head [k_nope | v] from kv_b_proj, RoPE on the rotary parts only (interleaved)."""

    def __init__(self, cfg, t, p, layer_idx):
        super().__init__()
        self.layer_idx, self.cfg, self.num_heads = layer_idx, cfg, cfg.num_attention_heads
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = (cfg.qk_nope_head_dim, cfg.qk_rope_head_dim,
                                                                          cfg.v_head_dim)
        self.q_a_proj, self.q_b_proj = linear(t[p + "q_a_proj.weight"]), linear(t[p + "q_b_proj.weight"])
        self.q_a_layernorm = RMSNorm(t[p + "q_a_layernorm.weight"], cfg.rms_norm_eps)
        self.kv_a_proj_with_mqa, self.kv_b_proj = linear(t[p + "kv_a_proj_with_mqa.weight"]), linear(t[p + "kv_b_proj.weight"])
        self.kv_a_layernorm = RMSNorm(t[p + "kv_a_layernorm.weight"], cfg.rms_norm_eps)
        self.o_proj = linear(t[p + "o_proj.weight"])

    def forward(self, hidden_states, position_embeddings, attention_mask=None, **kwargs):
        B, T, _ = hidden_states.shape
        H, nope, r, dv = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states))).view(B, T, H, nope + r).transpose(1, 2)
        q_pass, q_rot = q[..., :nope], q[..., nope:]
        ckv = self.kv_a_proj_with_mqa(hidden_states)
        k_pass, k_rot = ckv[..., :-r], ckv[..., -r:]
        kv = self.kv_b_proj(self.kv_a_layernorm(k_pass)).view(B, T, H, nope + dv).transpose(1, 2)
        k_pass, v = kv[..., :nope], kv[..., nope:]
        cos, sin = position_embeddings
        q_rot, k_rot = apply_rotary_pos_emb_interleave(q_rot, k_rot.view(B, 1, T, r), cos, sin)
        q = torch.cat((q_pass, q_rot), dim=-1)
        k = torch.cat((k_pass, k_rot.expand(B, H, T, r)), dim=-1)
        s = q @ k.transpose(-1, -2) / math.sqrt(nope + r)
        s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, H * dv)
        return self.o_proj(o), None


class FakeLayer(torch.nn.Module):
    def __init__(self, cfg, t, i):
        super().__init__()
        p = f"model.layers.{i}."
        self.input_layernorm = RMSNorm(t[p + "input_layernorm.weight"], cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(t[p + "post_attention_layernorm.weight"], cfg.rms_norm_eps)
        attn = FakeMLAttention if cfg.model_type == "deepseek_v3" else FakeAttention
        self.self_attn = attn(cfg, t, p + "self_attn.", i)
        self.gate, self.up = linear(t[p + "mlp.gate_proj.weight"]), linear(t[p + "mlp.up_proj.weight"])
        self.down = linear(t[p + "mlp.down_proj.weight"])

    def forward(self, x, position_embeddings):
        a, _ = self.self_attn(hidden_states=self.input_layernorm(x), position_embeddings=position_embeddings)
        x = x + a
        h = self.post_attention_layernorm(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


class FakeBody(torch.nn.Module):
    def __init__(self, cfg, t):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = torch.nn.Embedding.from_pretrained(t["model.embed_tokens.weight"])
        self.layers = torch.nn.ModuleList(FakeLayer(cfg, t, i) for i in range(cfg.num_hidden_layers))

    def forward(self, input_ids, use_cache=False):
        T, d = input_ids.shape[1], getattr(self.cfg, "qk_rope_head_dim", self.cfg.head_dim)
        inv = 1.0 / (self.cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        f = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat((f, f), dim=-1)[None]
        pe = (emb.cos().float(), emb.sin().float())
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, pe)
        return x


class FakeForCausalLM(torch.nn.Module):
    def __init__(self, path):
        super().__init__()
        with open(os.path.join(path, "config.json")) as f:
            self.config = Config(json.load(f))
        t, _ = ac.read_safetensors(os.path.join(path, "model.safetensors"))
        self.model = FakeBody(self.config, {k: v.float() for k, v in t.items()})


def collect(model_dir, ids_file, seqlen, samples, split, out):
    model = FakeForCausalLM(model_dir)
    ids = ac.read_ids(ids_file)
    lo, n = ac.windows(len(ids), seqlen, split, samples)
    wins = [ids[(lo + i) * seqlen:(lo + i + 1) * seqlen] for i in range(n)]
    stats = ac.Stats(model.config.num_hidden_layers, True)
    ac.run(model, wins, stats, batch=2)
    assert apply_rotary_pos_emb is globals()["apply_rotary_pos_emb"], "the collector left its RoPE wrapper behind"
    stats.save(out, seqlen, {"model": os.path.basename(model_dir), "source": ids_file, "split": split,
                             "transformers": "none (tests/collect_fake_hf.py)", "dtype": "float32"})
    print(f"wrote {out}: {n} windows of {seqlen}")


def compare(a, b):
    ta, ma = ac.read_safetensors(a)
    tb, mb = ac.read_safetensors(b)
    bad = 0
    for key in ("format", "version", "n_layers", "n_heads", "n_kv_heads", "d_qk", "d_v", "hidden", "has_x", "seqlen"):
        if ma.get(key) != mb.get(key):
            print(f"metadata {key}: {ma.get(key)} vs {mb.get(key)}")
            bad += 1
    if sorted(ta) != sorted(tb):
        print(f"tensors differ: {sorted(set(ta) ^ set(tb))}")
        return 1
    worst = 0.0
    for name in sorted(ta):
        x, y = ta[name].double(), tb[name].double()
        scale = max(x.abs().max().item(), 1e-300)
        err = (x - y).abs().max().item() / scale
        worst = max(worst, err)
        if err > 1e-4:
            print(f"{name}: max error {err:.3g} of its largest entry")
            bad += 1
    print(f"compared {len(ta)} tensors: largest error {worst:.2e} of each tensor's largest entry"
          f"{'' if bad == 0 else f'; {bad} mismatches'}")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "collect":
        collect(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
