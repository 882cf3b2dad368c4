#!/usr/bin/env bash
# cli_export_stats.sh -- issue 32 (the export at its floor): `export` after `convert mla` forms the
# session's attention-input statistics (every layer's E[x xᵀ] at once, and their digest) only when
# they fit the export folder (CI_MAX_BYTES). Over it -- every 8B-shaped model: 32 x 4096² doubles,
# 4.3 GB and a minute formed just to be dropped -- only the digest the conversion kept is recorded,
# and the line says why ("over the size kept in the folder", where it used to say "the session has
# no calibration", which was untrue). ATTNLAB_CI_MAX_BYTES puts stories260K (5 x 64² doubles) over
# the limit. `check DIR` in the session still finds the statistics by their digest: its table is the
# one of the export that keeps them in its folder, and the exported weights are the same bytes.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-export-stats
cd "$T" || exit 1
M="$ATTNLAB_MODELS/stories260K-hf" TXT="$ATTNLAB_SRC/examples/tinystory.txt"
P="load $M as m; calibrate $TXT samples 4 seqlen 64 inputs on; convert mla kv-rank 16 stats act ppl off"

# ---- the default limit: the statistics fit, in the folder
run -e "$P; export kept; check kept to kept.csv"
[ "$(rc)" = 0 ] || fail "export (statistics kept): rc $(rc) [$(cat err.txt)]"
ok "fits: the statistics in the folder" test -f kept/check_inputs.safetensors
ok "  and the line says so" grep -q "^check inputs recorded: 64 tokens, seed 20250601, the calibration's statistics (256 tokens of .*tinystory.txt) in check_inputs.safetensors" out.txt

# ---- over the limit: the digest alone, the statistics not formed
ATTNLAB_CI_MAX_BYTES=1000 run -e "$P; export over; check over to over.csv"
[ "$(rc)" = 0 ] || fail "export (over the limit): rc $(rc) [$(cat err.txt)]"
ok "over: no statistics file" test ! -e over/check_inputs.safetensors
ok "  the line: over the size kept in the folder" grep -q "^check inputs recorded: 64 tokens, seed 20250601 and the digest of the calibration's statistics, not the statistics (over the size kept in the folder)" out.txt
ok "  not 'the session has no calibration'" hasnt "$(cat out.txt)" "the session has no calibration"
ok "  the manifest: file null, the digest" grep -q '"file":[[:space:]]*null' over/attnlab_manifest.json
dk=$(grep -o '"digest":[[:space:]]*"[0-9a-f]*"' kept/attnlab_manifest.json)
ok "  the same digest as the kept export's ($dk)" grep -q "$dk" over/attnlab_manifest.json
ok "  check takes the session's statistics by that digest" grep -q "from the session's calibration of the source" out.txt
ok "  check's table: the kept export's" cmp -s kept.csv over.csv
ok "  the weights: the same bytes" cmp -s kept/model.safetensors over/model.safetensors
ok "  the table has the 5 layers" test "$(wc -l < over.csv)" = 6

# ---- at the limit (ws_check_take_for_export, the one rule convert tpa's export takes too): 5 x (64² + 64) x 8 bytes
ATTNLAB_CI_MAX_BYTES=166400 run -e "$P; export at"
ok "at 166400 bytes (5 x (64² + 64) x 8): the statistics in the folder" test -f at/check_inputs.safetensors
ATTNLAB_CI_MAX_BYTES=166399 run -e "$P; export under"
ok "at 166399: the digest alone, over the size" grep -q "not the statistics (over the size kept in the folder)" out.txt
ok "  no file" test ! -e under/check_inputs.safetensors
# ---- exports written before "digest_kind" (their digest byte-wise FNV-1a, no key): still checked
# as they were. Made here from `kept`: the digest recomputed byte-wise by this script, the key removed.
cat > olddigest.py <<'PY'
import json, struct, sys
d = sys.argv[1]
raw = open(d + "/check_inputs.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
def t(name):
    e = hdr.get(name)
    return None if e is None else raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
h = 14695981039346656037
def fnv(h, b):
    for x in b:
        h = ((h ^ x) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h
man = json.load(open(d + "/attnlab_manifest.json"))
ci = man["check_inputs"]
for l in range(ci["layers"]):
    s = t("layers.%d.sigma" % l)
    if s is None: continue
    h = fnv(h, struct.pack("<i", l)); h = fnv(h, s)
    m = t("layers.%d.mu" % l)
    if m is not None: h = fnv(h, m)
print("%016x" % h)
for path in sys.argv[2:]:
    m = json.load(open(path + "/attnlab_manifest.json"))
    m["check_inputs"].pop("digest_kind", None)
    m["check_inputs"]["digest"] = "%016x" % h
    json.dump(m, open(path + "/attnlab_manifest.json", "w"), indent=1)
PY
ok "the manifest names its digest's kind" grep -q '"digest_kind":[[:space:]]*"fnv1a64-words8"' kept/attnlab_manifest.json
cp -r kept oldkept && cp -r over oldover
python3 olddigest.py kept oldkept oldover > oldhex.txt 2> py.err
ok "an old-style digest made ($(cat oldhex.txt))" test -s oldhex.txt
run -e "check oldkept to oldkept.csv"
ok "an older export keeping its statistics: checked from its folder" grep -q "digest $(cat oldhex.txt), from the export folder" out.txt
ok "  no digest complaint" hasnt "$(cat out.txt err.txt)" "does not hold the statistics"
ok "  its table: the kept export's" cmp -s kept.csv oldkept.csv
ATTNLAB_CI_MAX_BYTES=1000 run -e "$P; check oldover to oldover.csv"
ok "an older export with the digest alone: the session's statistics found by it" grep -q "from the session's calibration of the source" out.txt
ok "  its table: the kept export's" cmp -s kept.csv oldover.csv
cli_done
