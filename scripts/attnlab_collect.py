#!/usr/bin/env python3
"""attnlab_collect.py -- calibration statistics from PyTorch, for models no CPU can run.

Runs a text through a Hugging Face transformers model (one GPU, several with device_map="auto",
or several processes with torchrun, whose sums are all-reduced) and writes exactly the statistics
attnlab's `calibrate` keeps, in the file format `calib load` reads (core/analysis/calib.h):

  per layer l and KV head g, float64 sums over every token seen
    layers.<l>.gram_k (G, d, d)    K^T K of the keys AFTER RoPE (and after any q/k norm)
    layers.<l>.gram_q (G, d, d)    sum over the query heads h of g's group of Q_h^T Q_h (after RoPE)
    layers.<l>.gram_v (G, dv, dv)  V^T V
    layers.<l>.gram_x (D, D)       X^T X of the attention input (the normed x of x @ W_Q)  [--inputs on]
    layers.<l>.sum_x  (D)          sum of x                                                [--inputs on]
  counts (L, 2) int64              tokens and sequences per layer
  metadata  format "attnlab-calib", version 2, n_layers, n_heads, n_kv_heads, d_qk, d_v, hidden,
            has_x, seqlen, keys "after RoPE", model, source, split, and the provenance: collector,
            created, torch, transformers, dtype, devices, world_size.

MLA models (DeepSeek-V3 / R1, Kimi-K2 layout) have one "KV head" per query head: each head's key is
[k_nope | k_rope] with the shared RoPE part repeated, its RoPE dims in the checkpoint's interleaved
order (as attnlab keeps them). Text windows are attnlab's: the text is tokenized once with BOS
first, cut into W whole windows of L tokens; the last max(1, W // 10) windows (none when W < 2) are
the validation split, the rest the training split; each window is a fresh sequence.

Families: every transformers attention that calls its module's `apply_rotary_pos_emb` (Llama,
Mistral, Qwen2/3, Gemma 2/3, OLMo 2, Phi-3, GPT-NeoX, Mixtral, Qwen3-MoE) and DeepSeek-V3 MLA.
Sliding windows, soft-caps and scaling do not enter these statistics (they act on the scores).

  python3 attnlab_collect.py MODEL --text wiki.train.txt --samples 128 --seqlen 256 --out calib.safetensors
  torchrun --nproc-per-node 8 attnlab_collect.py MODEL --ids c4.ids --seqlen 2048 --out c4.safetensors
  attnlab> load MODEL; calib load calib.safetensors; calib info

The statistics code below needs only torch (the test suite drives it with a model written in
plain torch); transformers is imported by main() alone.
"""

import argparse
import datetime
import json
import os
import struct
import sys

import torch

FORMAT = "attnlab-calib"
VERSION = 2
COLLECTOR = "attnlab_collect.py 1"


# ================================================================ text windows (core/analysis/calib.c)

def windows(ntok, seqlen, split, nmax=0):
    """(first window, count) of a split, as attnlab's calib_windows."""
    if seqlen <= 0:
        raise ValueError("seqlen must be at least 1")
    w = ntok // seqlen
    if w == 0:
        raise ValueError(f"the text has {ntok} tokens, fewer than one window of seqlen {seqlen}")
    nvalid = 0 if w < 2 else max(1, w // 10)
    lo, n = (0, w - nvalid) if split == "train" else (w - nvalid, nvalid)
    if n == 0:
        raise ValueError(f"the text has {ntok} tokens: {w} window(s) of {seqlen}, too few for a {split} split")
    return lo, (min(n, nmax) if nmax else n)


# ================================================================ safetensors, without the package

_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.int64: "I64", torch.bfloat16: "BF16",
           torch.float16: "F16"}
_RDTYPES = {v: k for k, v in _DTYPES.items()}


def write_safetensors(path, tensors, metadata):
    """Writes {name: tensor} with string metadata; atomically (a temporary file renamed)."""
    header, blobs, off = {"__metadata__": {k: str(v) for k, v in metadata.items()}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        raw = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hdr = json.dumps(header, separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for b in blobs:
            f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_safetensors(path):
    """({name: tensor}, metadata) of a safetensors file (F64/F32/BF16/F16/I64)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        dt = _RDTYPES[e["dtype"]]
        buf = bytearray(data[a:b])
        t = torch.frombuffer(buf, dtype=dt) if b > a else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"])
    return out, meta


# ================================================================ the sums

class Stats:
    """Float64 sums per layer, kept on the device of the layer that feeds them."""

    def __init__(self, n_layers, with_x):
        self.n_layers, self.with_x = n_layers, with_x
        self.gk, self.gq, self.gv, self.gx, self.sx = {}, {}, {}, {}, {}
        self.tokens = [0] * n_layers
        self.seqs = [0] * n_layers
        self.shape = None                      # (H, G, d, dv, D) from the first layer seen

    @staticmethod
    def _acc(table, layer, add):
        table[layer] = add if layer not in table else table[layer] + add

    def add(self, layer, x, q, k, v):
        """x (B, T, D) attention input, q (B, H, T, d) and k (B, G, T, d) after RoPE, v (B, T, G, dv)."""
        B, H, T, d = q.shape
        G, dv, D = k.shape[1], v.shape[-1], x.shape[-1]
        if H % G:
            raise ValueError(f"layer {layer}: {H} query heads do not group over {G} KV heads")
        shape = (H, G, d, dv, D)
        if self.shape is None:
            self.shape = shape
        elif self.shape != shape:
            raise ValueError(f"layer {layer}: heads/dims {shape} differ from the first layer's {self.shape}")
        q64 = q.to(torch.float64).reshape(B, G, H // G, T, d).transpose(0, 1).reshape(G, -1, d)
        k64 = k.to(torch.float64).transpose(0, 1).reshape(G, -1, d)
        v64 = v.to(torch.float64).reshape(-1, G, dv).transpose(0, 1)
        self._acc(self.gq, layer, q64.transpose(1, 2) @ q64)
        self._acc(self.gk, layer, k64.transpose(1, 2) @ k64)
        self._acc(self.gv, layer, v64.transpose(1, 2) @ v64)
        if self.with_x:
            x64 = x.to(torch.float64).reshape(-1, D)
            self._acc(self.gx, layer, x64.T @ x64)
            self._acc(self.sx, layer, x64.sum(0))
        self.tokens[layer] += B * T
        self.seqs[layer] += B

    def all_reduce(self):
        """Sums over torch.distributed ranks (every rank must have seen every layer)."""
        import torch.distributed as dist
        for table in (self.gk, self.gq, self.gv, self.gx, self.sx):
            for t in table.values():
                dist.all_reduce(t)
        dev = next(iter(self.gk.values())).device
        counts = torch.tensor(self.tokens + self.seqs, dtype=torch.int64, device=dev)
        dist.all_reduce(counts)
        c = counts.tolist()
        self.tokens, self.seqs = c[:self.n_layers], c[self.n_layers:]

    def save(self, path, seqlen, meta):
        missing = [l for l in range(self.n_layers) if l not in self.gk]
        if missing:
            raise ValueError(f"no activations were seen for layers {missing[:8]}: is every layer an attention layer?")
        H, G, d, dv, D = self.shape
        tensors = {"counts": torch.tensor([[t, s] for t, s in zip(self.tokens, self.seqs)], dtype=torch.int64)}
        for l in range(self.n_layers):
            tensors[f"layers.{l}.gram_k"] = self.gk[l]
            tensors[f"layers.{l}.gram_q"] = self.gq[l]
            tensors[f"layers.{l}.gram_v"] = self.gv[l]
            if self.with_x:
                tensors[f"layers.{l}.gram_x"] = self.gx[l]
                tensors[f"layers.{l}.sum_x"] = self.sx[l]
        md = {"format": FORMAT, "version": VERSION, "n_layers": self.n_layers, "n_heads": H, "n_kv_heads": G,
              "d_qk": d, "d_v": dv, "hidden": D, "has_x": int(self.with_x), "seqlen": seqlen, "keys": "after RoPE",
              "collector": COLLECTOR, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "torch": torch.__version__}
        md.update({k: v for k, v in meta.items() if v is not None})
        write_safetensors(path, tensors, md)


# ================================================================ hooks on the attention modules

def _interleave(t):
    """Halves layout [x_0..x_{r/2-1} | y_0..] back to the checkpoint's interleaved pairs (x_0, y_0, ...)."""
    *lead, r = t.shape
    return t.reshape(*lead, 2, r // 2).transpose(-1, -2).reshape(*lead, r)


class Collector:
    """Hooks every attention module of `model` (those with a layer_idx), feeding Stats.

    Generic attention: the module's apply_rotary_pos_emb (looked up in the module's Python module and
    wrapped for the run) gives q and k after norms and RoPE; the value projection's output gives v; the
    attention input x is the input of its first projection. MLA (kv_a_proj_with_mqa): q_pass from
    q_b_proj / q_proj, k_pass and v from kv_b_proj, the rotary parts from the RoPE call."""

    def __init__(self, model, stats):
        self.stats, self.handles, self.patched, self.cur, self.depth = stats, [], {}, None, 0
        self.attn = sorted(((m.layer_idx, m) for m in model.modules()
                            if hasattr(m, "layer_idx") and type(m).__name__.endswith("Attention")), key=lambda p: p[0])
        if not self.attn:
            raise ValueError("no attention modules with a layer_idx found: this collector reads transformers models")
        for idx, m in self.attn:
            self._hook(m, idx)

    def _hook(self, m, idx):
        self.handles.append(m.register_forward_pre_hook(self._pre))
        self.handles.append(m.register_forward_hook(self._post))
        self.handles.append(self._input_projection(m).register_forward_pre_hook(self._input))
        mla = hasattr(m, "kv_a_proj_with_mqa")
        if mla:
            qproj = m.q_b_proj if getattr(m, "q_b_proj", None) is not None else m.q_proj
            self.handles.append(qproj.register_forward_hook(self._save("q_pass")))
            self.handles.append(m.kv_b_proj.register_forward_hook(self._save("kv_b")))
        else:
            vmod, how = self._value_source(m)
            self.handles.append(vmod.register_forward_hook(self._save(how)))
        pymod = sys.modules[type(m).__module__]
        for fname in ("apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave"):
            fn = getattr(pymod, fname, None)
            if fn is not None and (pymod, fname) not in self.patched:
                self.patched[(pymod, fname)] = fn
                setattr(pymod, fname, self._rope_wrapper(fn, fname.endswith("interleave")))

    @staticmethod
    def _input_projection(m):
        """The first projection of the attention input x (its input is x, the normed hidden state)."""
        for name in ("q_a_proj", "q_proj", "qkv_proj", "query_key_value", "Wqkv"):
            if getattr(m, name, None) is not None:
                return getattr(m, name)
        raise ValueError(f"{type(m).__name__}: no q_proj / q_a_proj / qkv_proj / query_key_value to read its input from")

    @staticmethod
    def _value_source(m):
        for name, how in (("v_proj", "v"), ("qkv_proj", "qkv"), ("query_key_value", "neox"), ("Wqkv", "qkv")):
            if getattr(m, name, None) is not None:
                return getattr(m, name), how
        raise ValueError(f"{type(m).__name__}: no v_proj / qkv_proj / query_key_value to read values from")

    def _save(self, key):
        def hook(_mod, _inp, out):
            if self.cur is not None:
                self.cur[key] = out
        return hook

    def _pre(self, m, _args):
        self.cur = {}

    def _input(self, _mod, args):
        if self.cur is not None and "x" not in self.cur:
            self.cur["x"] = args[0]

    def _rope_wrapper(self, fn, interleaved):
        def wrapped(q, k, *a, **kw):
            self.depth += 1                    # one RoPE function may call the other: keep the outer one
            try:
                qe, ke = fn(q, k, *a, **kw)
            finally:
                self.depth -= 1
            if self.cur is not None and self.depth == 0 and "q" not in self.cur:
                self.cur["q"], self.cur["k"], self.cur["interleaved"] = qe, ke, interleaved
            return qe, ke
        return wrapped

    def _post(self, m, _args, _out):
        c, self.cur = self.cur, None
        if c is None or "q" not in c or "x" not in c:
            raise RuntimeError(f"{type(m).__name__} layer {m.layer_idx}: no RoPE call was seen (a family without RoPE, "
                               "or one that does not call its module's apply_rotary_pos_emb): not supported")
        x, q, k = c["x"], c["q"], c["k"]
        B, T = x.shape[0], x.shape[1]
        if hasattr(m, "kv_a_proj_with_mqa"):
            q, k, v = self._mla(m, c, B, T)
        else:
            v = self._values(m, c, B, T, k.shape[1])
        self.stats.add(m.layer_idx, x, q, k, v)

    @staticmethod
    def _values(m, c, B, T, G):
        H, d = c["q"].shape[1], c["q"].shape[-1]
        if "v" in c:
            return c["v"].reshape(B, T, G, -1)
        if "qkv" in c:        # Phi-3: columns [Q | K | V]
            return c["qkv"][..., (H + G) * d:].reshape(B, T, G, -1)
        return c["neox"].reshape(B, T, H, 3, d)[:, :, :, 2]   # GPT-NeoX: head by head [q; k; v]

    @staticmethod
    def _mla(m, c, B, T):
        H, nope, dv = m.num_heads, m.qk_nope_head_dim, m.v_head_dim
        q_rot, k_rot = c["q"], c["k"]                            # (B, H, T, r), (B, 1, T, r)
        if c["interleaved"]:
            q_rot, k_rot = _interleave(q_rot), _interleave(k_rot)
        q_pass = c["q_pass"].reshape(B, T, H, -1)[..., :nope].transpose(1, 2)
        kvb = c["kv_b"].reshape(B, T, H, nope + dv)
        k_pass, v = kvb[..., :nope].transpose(1, 2), kvb[..., nope:]
        q = torch.cat([q_pass, q_rot.to(q_pass.dtype)], dim=-1)
        k = torch.cat([k_pass, k_rot.to(k_pass.dtype).expand(B, H, T, -1)], dim=-1)
        return q, k, v

    def close(self):
        for h in self.handles:
            h.remove()
        for (pymod, fname), fn in self.patched.items():
            setattr(pymod, fname, fn)
        self.handles, self.patched = [], {}


def run(model, token_windows, stats, batch=1, device=None, progress=None):
    """Runs every window (a list of token-id lists of one length) through model, collecting into stats.
    Calls the base model (model.model when there is one) so no logits are computed."""
    col = Collector(model, stats)
    body = getattr(model, "model", model)
    try:
        with torch.no_grad():
            for i in range(0, len(token_windows), batch):
                ids = torch.tensor(token_windows[i:i + batch], dtype=torch.long, device=device)
                body(input_ids=ids, use_cache=False)
                if progress:
                    progress(min(i + batch, len(token_windows)), len(token_windows))
    finally:
        col.close()
    return stats


# ================================================================ command line

def read_ids(path):
    with open(path) as f:
        return [int(t) for t in f.read().split()]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Calibration statistics for attnlab's `calib load` (see the top of this file).")
    ap.add_argument("model", help="a transformers checkpoint folder (or hub name, if your machine has the hub)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="a text file, tokenized with the model's tokenizer, BOS first")
    src.add_argument("--ids", help="a file of whitespace-separated token ids (used as they are)")
    ap.add_argument("--samples", type=int, default=128, help="most windows to run (default 128)")
    ap.add_argument("--seqlen", type=int, default=256, help="tokens per window (default 256)")
    ap.add_argument("--split", choices=["train", "valid"], default="train")
    ap.add_argument("--inputs", choices=["auto", "on", "off"], default="auto",
                    help="keep the attention input's second moment and mean (auto: hidden <= 2048)")
    ap.add_argument("--dtype", default="bfloat16", help="torch dtype to run in (default bfloat16)")
    ap.add_argument("--batch", type=int, default=1, help="windows per forward call")
    ap.add_argument("--device-map", default="auto", help='transformers device_map (default "auto"; under torchrun each '
                    'rank uses its own GPU)')
    ap.add_argument("--out", required=True, help="the statistics file to write (safetensors)")
    args = ap.parse_args(argv)

    import transformers
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dtype = getattr(torch, args.dtype)
    dmap = ({"": torch.cuda.current_device()} if world > 1 and torch.cuda.is_available()
            else None if world > 1 else args.device_map)
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype, device_map=dmap)
    model.eval()
    cfg = model.config
    if args.ids:
        ids, source = read_ids(args.ids), args.ids
    else:
        tok = transformers.AutoTokenizer.from_pretrained(args.model)
        with open(args.text, encoding="utf-8") as f:
            ids = tok(f.read(), add_special_tokens=False)["input_ids"]
        if tok.bos_token_id is not None:
            ids = [tok.bos_token_id] + ids
        source = args.text
    lo, n = windows(len(ids), args.seqlen, args.split, args.samples)
    wins = [ids[(lo + i) * args.seqlen:(lo + i + 1) * args.seqlen] for i in range(n)][rank::world]
    hidden = cfg.hidden_size
    with_x = args.inputs == "on" or (args.inputs == "auto" and hidden <= 2048)
    stats = Stats(cfg.num_hidden_layers, with_x)
    dev = next(model.parameters()).device
    prog = (lambda i, t: print(f"\rsequence {i}/{t}", end="", file=sys.stderr, flush=True)) if rank == 0 else None
    run(model, wins, stats, batch=args.batch, device=dev, progress=prog)
    if rank == 0:
        print(file=sys.stderr)
    if world > 1:
        stats.all_reduce()
    if rank == 0:
        devices = sorted({str(p.device) for p in model.parameters()})
        stats.save(args.out, args.seqlen, {"model": os.path.basename(os.path.normpath(args.model)), "source": source,
                                           "split": args.split, "transformers": transformers.__version__,
                                           "dtype": args.dtype, "devices": ",".join(devices), "world_size": world})
        print(f"wrote {args.out}: {stats.n_layers} layers, {stats.tokens[0]} tokens in {stats.seqs[0]} sequences "
              f"({args.split} split of {source}); in attnlab: load MODEL; calib load {args.out}")


if __name__ == "__main__":
    main()
