#!/usr/bin/env python3
"""hf_check.py -- attnlab's logits against Hugging Face transformers' on the same folders.

Reads a manifest (scripts/hf_check_bundle.sh writes one) of items
  {name, folder, ids, logits (attnlab's: {"logits": [[V] x T]}), quant none|fp8|mxfp4,
   source (the item a conversion was made from, or null), out_err_transformers (check DIR's
   largest, or null), what, expect ("agree", "differs: why", or null)}
and for each loads the folder with AutoModelForCausalLM (eager attention, TF32 off), runs the ids
(AutoModelForImageTextToText where a multimodal config has no CausalLM class) and compares
transformers' logits with attnlab's:
  max_abs   max |z_hf - z_attnlab|,   rel  max_abs / max |z_attnlab|,   argmax  agreement over tokens
Variants: a plain item loads in float32 ("f32"); an FP8 / MXFP4 item once through transformers'
quantizer as it runs on the GPU ("quant": FineGrainedFP8's / Mxfp4's kernels, dtype as they pick)
and once dequantized to float32 ("deq": FineGrainedFP8Config / Mxfp4Config(dequantize=True)).
transformers' load report (missing / unexpected / mismatched keys: load bugs of attnlab's writers)
and its warnings are kept per item. For a conversion (source set) it also gives the conversion's
error as each side computes it (rel of the export's logits against the source's, transformers and
attnlab) and, per attention layer, transformers' relative output error of the export's attention
against the source's on the source's own hidden states (out_err_hf_tokens; check DIR's
out_err_transformers is on 64 random Gaussian tokens instead: the same kind of number, other inputs).
Each item runs in its own try/except: an exception is a result (its message, trimmed). Where the item says
what to expect, each row ends with "as expected" or "UNEXPECTED": agree means rel <= AGREE (float32 noise
of a BF16 folder widened), differs a larger rel or a refusal.

  python3 hf_check.py manifest.json res.json [--device cuda|cpu] [--only NAME,NAME] [--ignore-mismatched]

Writes res.json and res.txt (the table) beside it, and prints the table.
"""
import argparse
import io
import json
import logging
import os
import re
import sys
import time
import traceback
import warnings

TRIM = 400
AGREE = 1e-4


def trim(s, n=TRIM):
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[:n] + " ..."


# ================================================================ comparison

def compare(z_hf, z_al):
    """z_hf, z_al: (T, V) torch tensors (float32) -> max_abs, rel, argmax agreement."""
    d = (z_hf - z_al).abs().max().item()
    scale = z_al.abs().max().item()
    agree = (z_hf.argmax(-1) == z_al.argmax(-1)).float().mean().item()
    return {"max_abs": d, "rel": d / scale if scale > 0 else float("inf"), "argmax": agree}


def rel_diff(a, b):
    """max |a - b| / max |b| of two (T, V) tensors."""
    s = b.abs().max().item()
    return (a - b).abs().max().item() / s if s > 0 else float("inf")


def read_logits(torch, path):
    with open(path) as f:
        z = json.load(f)["logits"]
    return torch.tensor(z, dtype=torch.float32)


# ================================================================ loading (transformers)

class LogCapture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(trim(record.getMessage(), 300))


def quant_config(quant):
    """The dequantizing config for an FP8 / MXFP4 item."""
    import transformers
    if quant == "fp8":
        return transformers.FineGrainedFP8Config(dequantize=True)
    return transformers.Mxfp4Config(dequantize=True)


def load_model(torch, folder, quant, variant, device):
    """(model, loading_info) of folder. variant: f32 | quant | deq."""
    from transformers import AutoModelForCausalLM
    kw = {"attn_implementation": "eager", "output_loading_info": True}
    if variant == "quant":
        kw["device_map"] = device
    else:
        kw["dtype"] = torch.float32
        if variant == "deq":
            kw["quantization_config"] = quant_config(quant)
    load = retry_mismatched if MISMATCH_OK else (lambda auto, folder, kw: auto.from_pretrained(folder, **kw))
    try:
        model, info = load(AutoModelForCausalLM, folder, kw)
    except ValueError as e:   # a multimodal config with no CausalLM class: its image-text-to-text class
        if "Unrecognized configuration class" not in str(e):
            raise
        from transformers import AutoModelForImageTextToText
        model, info = load(AutoModelForImageTextToText, folder, kw)
    return finish_load(model, info, variant, device)


MISMATCH_OK = False   # set by --ignore-mismatched: multimodal folders whose vision towers are placeholders


def retry_mismatched(auto, folder, kw):
    """from_pretrained, and once more with ignore_mismatched_sizes where shapes mismatch (noted)."""
    try:
        return auto.from_pretrained(folder, **kw)
    except RuntimeError as e:
        if "ignore_mismatched_sizes" not in str(e):
            raise
        model, info = auto.from_pretrained(folder, ignore_mismatched_sizes=True, **kw)
        info = dict(info)
        info["error_msgs"] = list(info.get("error_msgs") or []) + ["loaded with ignore_mismatched_sizes=True"]
        return model, info


def finish_load(model, info, variant, device):
    if variant != "quant":
        model = model.to(device)
    return model.eval(), info


def loading_report(info):
    out = {}
    for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        v = info.get(k) if isinstance(info, dict) else None
        if v:
            out[k] = sorted(str(x) for x in v)[:12] + (["... %d in all" % len(v)] if len(v) > 12 else [])
    return out


# ================================================================ per-layer attention error

ATTN = re.compile(r"(?:^|\.)layers\.(\d+)\.(?:self_attn|attention|attn)$")


def attention_modules(model):
    return {int(m.group(1)): mod for name, mod in model.named_modules() if (m := ATTN.search(name))}


def first_tensor(x):
    return x[0] if isinstance(x, (tuple, list)) else x


def capture_attention(model, ids, feed=None):
    """Per layer index: (input hidden_states, output) of each attention module over one pass;
    feed (layer -> tensor) replaces each module's input hidden_states."""
    seen, hooks = {}, []
    for l, mod in attention_modules(model).items():
        def pre(m, args, kwargs, l=l):
            if "hidden_states" in kwargs:
                if feed is not None and l in feed:
                    kwargs["hidden_states"] = feed[l].to(kwargs["hidden_states"].dtype)
                seen[l] = [kwargs["hidden_states"].detach()]
            elif args:
                if feed is not None and l in feed:
                    args = (feed[l].to(args[0].dtype),) + tuple(args[1:])
                seen[l] = [args[0].detach()]
            return args, kwargs

        def post(m, args, kwargs, out, l=l):
            seen.setdefault(l, [None]).append(first_tensor(out).detach())
        hooks.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
        hooks.append(mod.register_forward_hook(post, with_kwargs=True))
    try:
        model(input_ids=ids)
    finally:
        for h in hooks:
            h.remove()
    return seen


def layer_errors(src_seen, exp_seen):
    errs = {}
    for l in sorted(src_seen):
        if l in exp_seen and len(src_seen[l]) > 1 and len(exp_seen[l]) > 1:
            y, y2 = src_seen[l][1].float(), exp_seen[l][1].float()
            errs[l] = ((y2 - y).norm() / y.norm()).item() if y.shape == y2.shape else None
    return errs


# ================================================================ one item

def run_variant(torch, item, variant, device, loader):
    res = {"variant": variant}
    cap = LogCapture()
    tlog = logging.getLogger("transformers")
    tlog.addHandler(cap)
    t0 = time.time()
    try:
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            model, info = loader(torch, item["folder"], item.get("quant", "none"), variant, device)
            ids = torch.tensor([item["ids"]], device=device)
            with torch.no_grad():
                z = model(input_ids=ids).logits[0].float().cpu()
        res["load_report"] = loading_report(info)
        res["dtype"] = str(next(model.parameters()).dtype)
        res["class"] = type(model).__name__
        res["warnings"] = sorted(set(trim(w.message, 300) for w in ws))[:8]
        z_al = read_logits(torch, item["logits"])
        if z.shape != z_al.shape:
            raise ValueError("logits shape %s, attnlab's %s" % (tuple(z.shape), tuple(z_al.shape)))
        res.update(compare(z, z_al))
        res["_model"], res["_z"] = model, z
    except Exception as e:  # an exception is a result
        res["error"] = trim("%s: %s" % (type(e).__name__, e))
        res["trace"] = trim(traceback.format_exc().splitlines()[-3:], 600)
    finally:
        tlog.removeHandler(cap)
    res["log"] = sorted(set(cap.lines))[:10]
    res["seconds"] = round(time.time() - t0, 2)
    return res


def conversion_errors(torch, item, res, src_res, device):
    """The export's error against its source, in transformers and in attnlab."""
    z_al, z_src_al = read_logits(torch, item["logits"]), read_logits(torch, src_res["_logits_path"])
    res["conv_rel_attnlab"] = rel_diff(z_al, z_src_al)
    res["conv_rel_hf"] = rel_diff(res["_z"], src_res["_z"])
    try:
        ids = torch.tensor([item["ids"]], device=device)
        with torch.no_grad():
            src_seen = capture_attention(src_res["_model"], ids)
            feed = {l: v[0] for l, v in src_seen.items()}
            exp_seen = capture_attention(res["_model"], ids, feed)
        errs = layer_errors(src_seen, exp_seen)
        res["out_err_hf_tokens"] = [errs[l] for l in sorted(errs)]
    except Exception as e:
        res["out_err_hf_tokens_error"] = trim("%s: %s" % (type(e).__name__, e), 200)


def variants(item):
    return ["f32"] if item.get("quant", "none") == "none" else ["quant", "deq"]


def check_all(torch, items, device, loader=load_model):
    """Runs every item; returns the results (JSON-ready)."""
    done, results = {}, []
    for item in items:
        for v in variants(item):
            res = run_variant(torch, item, v, device, loader)
            res.update(name=item["name"], what=item.get("what", ""), folder=item["folder"],
                       out_err_transformers=item.get("out_err_transformers"), expect=item.get("expect"))
            res["_logits_path"] = item["logits"]
            src = done.get((item.get("source"), "f32" if v == "f32" else v)) or done.get((item.get("source"), "f32"))
            if item.get("source") and src and "_z" in res and "_z" in src:
                conversion_errors(torch, item, res, src, device)
            done[(item["name"], v)] = res
            results.append(res)
            print(row(res), flush=True)
    for r in results:   # free the models, keep the JSON
        for k in [k for k in r if k.startswith("_")]:
            del r[k]
    return results


# ================================================================ the report

HEAD = "%-24s %-5s %10s %10s %6s %9s %9s %9s  %s" % (
    "item", "var", "max_abs", "rel", "argmax", "conv_hf", "conv_al", "chk_oet", "notes")


def fmt(x, f="%10.3g"):
    return f % x if isinstance(x, (int, float)) and x is not None else (" " * (int(f[1:].split(".")[0]) - 1) + "-")


def expectation(r):
    """'as expected' / 'UNEXPECTED (expected ...)' for an item that says what to expect, else None."""
    want = r.get("expect")
    if not want or r.get("variant") != "f32":
        return None
    agreed = "error" not in r and r.get("rel") is not None and r["rel"] <= AGREE
    return "as expected" if agreed == (want == "agree") else "UNEXPECTED (expected %s)" % want


def row(r):
    notes = []
    e = expectation(r)
    if e:
        notes.append(e)
    if "error" in r:
        notes.append("ERROR " + r["error"])
    for k, v in r.get("load_report", {}).items():
        notes.append("%s: %s" % (k, ", ".join(v)[:200]))
    if r.get("out_err_hf_tokens"):
        notes.append("out_err_hf_tokens " + " ".join("%.3g" % e if e is not None else "-" for e in r["out_err_hf_tokens"]))
    return "%-24s %-5s %s %s %6s %s %s %s  %s" % (
        r["name"][:24], r["variant"], fmt(r.get("max_abs")), fmt(r.get("rel")),
        fmt(r.get("argmax"), "%6.2f"), fmt(r.get("conv_rel_hf"), "%9.3g"), fmt(r.get("conv_rel_attnlab"), "%9.3g"),
        fmt(r.get("out_err_transformers"), "%9.3g"), "; ".join(notes))


def versions(torch):
    v = {"python": sys.version.split()[0], "torch": torch.__version__}
    for mod in ("transformers", "safetensors", "accelerate", "numpy", "triton", "kernels"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception:
            v[mod] = None
    v["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return v


def report(results, vers):
    out = io.StringIO()
    out.write("hf_check: %s\n" % ", ".join("%s %s" % kv for kv in vers.items()))
    out.write("max_abs / rel / argmax: transformers' logits against attnlab's on the same folder; conv_hf / conv_al: "
              "a conversion's logits against its source's, in transformers / in attnlab (rel); chk_oet: check DIR's "
              "largest out_err_transformers\n")
    out.write(HEAD + "\n")
    for r in results:
        out.write(row(r) + "\n")
    return out.getvalue()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("manifest")
    ap.add_argument("out")
    ap.add_argument("--device", default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--ignore-mismatched", action="store_true",
                    help="retry a multimodal folder with ignore_mismatched_sizes (synth's vision towers are placeholders)")
    a = ap.parse_args(argv)
    global MISMATCH_OK
    MISMATCH_OK = a.ignore_mismatched
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    base = os.path.dirname(os.path.abspath(a.manifest))
    with open(a.manifest) as f:
        items = json.load(f)["items"]
    for it in items:
        it["folder"], it["logits"] = os.path.join(base, it["folder"]), os.path.join(base, it["logits"])
    only = set(filter(None, a.only.split(",")))
    items = [it for it in items if not only or it["name"] in only]
    vers = versions(torch)
    print(HEAD, flush=True)
    results = check_all(torch, items, device)
    with open(a.out, "w") as f:
        json.dump({"versions": vers, "results": results}, f, indent=1)
    text = report(results, vers)
    with open(os.path.splitext(a.out)[0] + ".txt", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
