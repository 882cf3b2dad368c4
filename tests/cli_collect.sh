#!/usr/bin/env bash
# cli_collect.sh -- scripts/attnlab_collect.py's statistics against attnlab's own `calibrate`:
# the collector (its hooks, float64 sums and its safetensors writer, PyTorch only) runs on a
# Llama, a Qwen3 (per-head q/k norms before RoPE) and a DeepSeek-V3 (MLA, interleaved RoPE) decoder written in plain torch with the
# transformers module layout (tests/collect_fake_hf.py), over the same token windows attnlab
# calibrates on; every tensor of the two files agrees to 1e-4 of its largest entry, a file of the
# other split does not, `calib load` reads the PyTorch file and `calib info` shows its
# provenance, and a save / load keeps it. Skipped (exit 77) without python3-torch (Debian's
# python3-torch; scripts/install-deps.sh installs it).
set -u
PY=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import torch" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with torch (apt install python3-torch)"; exit 77; }
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-collect
TESTS="$(cd "$(dirname "$0")" && pwd)"
FAKE="$TESTS/collect_fake_hf.py"
cd "$T" || exit 1

"$PY" -c "import random; random.seed(3); print(' '.join(str(random.randrange(256)) for _ in range(700)))" >ids.txt
run -e "synth demo-llama llama dtype f32; synth family qwen3 q3 dtype f32; synth demo-r1 r1 dtype f32 shards 1"
[ "$(rc)" = 0 ] || fail "synth: $(cat err.txt)"

for m in llama q3 r1; do
  "$PY" "$FAKE" collect $m ids.txt 32 6 train $m.torch.safetensors >py.txt 2>&1 || fail "$m: collector: [$(cat py.txt)]"
  run -e "load $m; calibrate ids ids.txt samples 6 seqlen 32 inputs on; calib save $m.al.safetensors"
  [ "$(rc)" = 0 ] || fail "$m: calibrate: $(cat err.txt)"
  "$PY" "$FAKE" compare $m.al.safetensors $m.torch.safetensors >cmp.txt 2>&1 ||
    fail "$m: PyTorch statistics differ from attnlab's: [$(cat cmp.txt)]"
  grep -q "largest error" cmp.txt || fail "$m: compare printed no error: [$(cat cmp.txt)]"
done

# The command line parses without transformers (imported only to run a model).
"$PY" "$TESTS/../scripts/attnlab_collect.py" --help >py.txt 2>&1 || fail "collector --help: [$(cat py.txt)]"
grep -q -- "--device-map" py.txt || fail "collector --help lists no --device-map: [$(cat py.txt)]"

# The comparison can fail: the validation split's statistics are not the training split's.
"$PY" "$FAKE" collect q3 ids.txt 32 6 valid q3.valid.safetensors >py.txt 2>&1 || fail "collector, valid split: [$(cat py.txt)]"
"$PY" "$FAKE" compare q3.al.safetensors q3.valid.safetensors >cmp.txt 2>&1 && fail "a different split compared equal: [$(cat cmp.txt)]"

# attnlab reads the PyTorch file and names where it came from; save / load keeps the provenance.
run -e "load q3; calib load q3.torch.safetensors; calib info; calib save q3.again.safetensors; calib load q3.again.safetensors; calib info to info.csv"
[ "$(rc)" = 0 ] || fail "calib load of the PyTorch file: $(cat err.txt)"
grep -q "loaded the calibration in q3.torch.safetensors (6 sequences, 192 tokens, from ids.txt)" out.txt ||
  fail "load narration: [$(cat out.txt)]"
[ "$(grep -c "provenance: collected by attnlab_collect.py 1 on 20" out.txt)" -ge 2 ] || fail "provenance lines: [$(cat out.txt)]"
grep -q "(torch .*, float32)" out.txt || fail "provenance details: [$(cat out.txt)]"
[ "$(sed -n 2p info.csv | cut -d, -f1-3)" = "0,192,6" ] || fail "counts after save / load: [$(cat info.csv)]"
# attnlab's own file says it came from attnlab.
run -e "load q3; calib load q3.al.safetensors; calib info"
grep -q "provenance: collected by attnlab calibrate on 20" out.txt || fail "own provenance: [$(cat out.txt)]"
# A file of the wrong model is refused with the shapes named.
run -e "load llama; calib load q3.torch.safetensors"
[ "$(rc)" != 0 ] && grep -q "do not fit model" err.txt || fail "wrong model accepted: rc $(rc) [$(cat err.txt)]"
cli_done
