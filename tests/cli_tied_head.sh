#!/usr/bin/env bash
# cli_tied_head.sh -- tie_word_embeddings true with an lm_head.weight of its own that differs from the
# embeddings: transformers, vLLM and SGLang use the embeddings as the output head, and lint says so; the
# forward pass used lm_head, so `ppl` gave the untied model's number with lint calling it an error (rev, s13).
# Now the head is the embeddings: the folder's ppl equals that of the same folder with lm_head.weight renamed
# away (the same bytes under another name), and differs from the untied source's.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-tied-head
run -e "synth family olmo2 base"
ok "synth family olmo2 (untied, with an lm_head)" test "$(rc)" = 0
python3 - <<'PY'
import json, os, shutil, struct
for name, rename in (("tied", False), ("tied_nohead", True)):
    shutil.copytree("base", name)
    c = json.load(open(f"{name}/config.json")); c["tie_word_embeddings"] = True
    json.dump(c, open(f"{name}/config.json", "w"), indent=1)
    for f in os.listdir(name) if rename else []:
        if not f.endswith(".safetensors"): continue
        p = f"{name}/{f}"; b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
        i = b.find(b'"lm_head.weight"', 8, 8 + n)        # same length: the header stays valid
        if i >= 0: b[i:i + 16] = b'"lm_headXweight"'; open(p, "wb").write(b)
PY
cli_ids 32 ids.txt
p_base=$(ppl_of "load base; ppl ids ids.txt seqlen 16")
p_tied=$(ppl_of "load tied; ppl ids ids.txt seqlen 16")
p_nohead=$(ppl_of "load tied_nohead; ppl ids ids.txt seqlen 16")
ok "tied with its own lm_head: the embeddings' ppl [$p_tied] = [$p_nohead]" test "$p_tied" = "$p_nohead"
ok "  not the untied source's [$p_base]" test "$p_tied" != "$p_base"
run -e "lint tied"
ok "lint still reports the differing lm_head" grep -q "lm_head.weight differs from" out.txt
cli_done
