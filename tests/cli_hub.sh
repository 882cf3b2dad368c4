#!/bin/bash
# cli_hub.sh -- models straight from the Hub, against tests/hub_server.py on 127.0.0.1 serving a
# synthetic MLA checkpoint (demo-r1's files, FP8, three shards): `load org/name` fetches config,
# index and shard headers; `ranks vo all` fetches only kv_b_proj and o_proj (+ their scales) --
# at most 1.3x their bytes plus headers, by the server's count -- and gives the local load's
# numbers; the HF cache holds only whole blobs (shards sha256-checked, a wrong sha256 refused);
# offline works from the cache; org/name@commit; gated (401) and missing (404) repos give clean
# errors and the token never reaches the redirect's other host; `info` says how much is local; the
# progress line; two processes on one cache; a dead endpoint (backoff, then an error); a server
# ignoring Range; Ctrl-C mid-transfer; injected 503s and cut connections retried and resumed.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-hub
command -v python3 >/dev/null && command -v curl >/dev/null || { echo "no python3 or curl: skipped"; exit 77; }

SRC=$("$ATTNLAB" -e "load demo-r1; info" 2>&1 | sed -n 's/^path  *//p')
[ -d "$SRC" ] || { echo "FAIL: demo-r1 has no folder [$SRC]"; exit 1; }
mkdir -p "$T/root/acme/r1" "$T/root/acme/gated"
cp "$SRC"/* "$T/root/acme/r1/"
cp "$SRC"/* "$T/root/acme/gated/"
mkdir -p "$T/root/acme/twin" && cp "$SRC"/* "$T/root/acme/twin/"      # + a second copy of the weights the index does not name
cp "$SRC/model-00001-of-00003.safetensors" "$T/root/acme/twin/consolidated.safetensors"
python3 "$ATTNLAB_SRC/tests/hub_server.py" --root "$T/root" --port-file "$T/port" --gated acme/gated \
    --token hf_secret_test_token >"$T/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null' EXIT
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")
export HF_ENDPOINT=http://127.0.0.1:$PORT HF_HUB_CACHE=$T/hf HF_HOME=$T/hfhome
unset HF_TOKEN HF_HUB_OFFLINE HF_TOKEN_PATH
stat_of() { curl -s "$HF_ENDPOINT/_stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
ctl() { curl -s "$HF_ENDPOINT/$1" >/dev/null; }
# the bytes of the tensors matching $1 (regex) and of every shard's header, and of the whole files
sizes() {
    python3 - "$T/root/acme/r1" "$1" <<'EOF'
import glob, json, os, re, struct, sys
d, pat = sys.argv[1], re.compile(sys.argv[2])
t = h = 0
for p in glob.glob(d + "/*.safetensors"):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hd = json.loads(f.read(n))
    h += 8 + n
    t += sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in hd.items() if k != "__metadata__" and pat.search(k))
w = sum(os.path.getsize(p) for p in glob.glob(d + "/*.json"))
print(t, h, w)
EOF
}

# ---- the local load: the reference numbers
"$ATTNLAB" -e "load $T/root/acme/r1; ranks vo all" 2>&1 | tail -n +2 >"$T/local.txt"
ok "local ranks vo" grep -q "VO effective ranks" "$T/local.txt"

# ---- (1)+(2) load org/name from the Hub; ranks vo all fetches only what it reads
out=$("$ATTNLAB" -e "load acme/r1; ranks vo all" 2>&1)
echo "$out" | tail -n +2 >"$T/remote.txt"
ok "streamed load: $(head -c 300 <<<"$out")" has "$out" "^loaded r1: deepseek, 6 layers"
ok "streamed ranks vo all equal the local load's" cmp -s "$T/local.txt" "$T/remote.txt"
read -r tb hb wb <<<"$(sizes '(kv_b_proj|o_proj)\.weight')"
served=$(stat_of store_bytes)
limit=$(python3 -c "print(int(1.3 * $tb) + $hb + $wb)")
echo "served $served bytes; kv_b_proj+o_proj $tb, headers $hb, whole files $wb, limit $limit"
ok "fetched at most 1.3x the tensors read plus headers ($served <= $limit)" test "$served" -le "$limit"
ok "fetched the tensors read ($served >= $tb + $hb)" test "$served" -ge $((tb + hb))
read -r all _ _ <<<"$(sizes '.')"
ok "fetched well under the whole model ($served < $all / 2)" test "$served" -lt $((all / 2))

# the HF cache: whole blobs named by their sha256, snapshot links to them, refs/main; no shard
# (config.json and the index are git files on the Hub: their blobs are named by the git blob sha1)
gitsha() { python3 -c "import hashlib,sys; b=open(sys.argv[1],'rb').read(); print(hashlib.sha1(b'blob %d\0' % len(b) + b).hexdigest())" "$1"; }
blobs=$(ls "$T/hf/models--acme--r1/blobs")
want=$(for f in config.json model.safetensors.index.json; do gitsha "$SRC/$f"; done | sort | tr '\n' ' ')
ok "HF blobs: config.json and the index, whole, named by their git sha1 [$(echo $blobs)]" test "$(echo $blobs) " = "$want"
commit=$(cat "$T/hf/models--acme--r1/refs/main")
ok "refs/main = the commit" test "$commit" = "$(python3 -c "import hashlib; print(hashlib.sha1(b'acme/r1').hexdigest())")"
ok "snapshot config.json links to its blob" cmp -s "$T/hf/models--acme--r1/snapshots/$commit/config.json" "$SRC/config.json"
ok "no shard in the HF cache" test -z "$(find "$T/hf" -name '*.safetensors')"

# a repo with a second copy of its weights outside the index (Mistral's consolidated.safetensors):
# only the shards the index names are streamed
out=$("$ATTNLAB" -e "load acme/twin; info" 2>&1)
ok "only the index's shards: $(grep hub_local <<<"$out")" has "$out" "^hub_local  *[0-9]* of $(cat "$SRC"/*.safetensors | wc -c) bytes"
ok "no consolidated.safetensors streamed" test -z "$(find "$ATTNLAB_CACHE/hub/models--acme--twin" -name 'consolidated*')"

# ---- offline: the cache answers; what it lacks is a clear error
api=$(stat_of api_requests)
out=$(HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/r1; ranks vo all" 2>&1)
ok "offline ranks vo all equal" cmp -s "$T/local.txt" <(echo "$out" | tail -n +2)
ok "offline asks nothing" test "$(stat_of api_requests)" = "$api"
out=$(HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/r1; ranks qk all" 2>&1)
ok "offline, bytes not held: $(head -c 300 <<<"$out")" has "$out" "not in attnlab's cache and HF_HUB_OFFLINE is set"
out=$(HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/r1@$commit; ranks vo all" 2>&1)
ok "offline, org/name@commit: $(head -c 200 <<<"$out")" cmp -s <(tail -n +2 "$T/local.txt") <(echo "$out" | tail -n +3)
out=$("$ATTNLAB" -e "load acme/r1@$commit; ranks vo all" 2>&1)
ok "online, org/name@commit" cmp -s <(tail -n +2 "$T/local.txt") <(echo "$out" | tail -n +3)
out=$(HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/other" 2>&1)
ok "offline, model not cached" has "$out" "HF_HUB_OFFLINE is set and neither"

# ---- gated and missing repos; the token goes to the endpoint only
out=$("$ATTNLAB" -e "load acme/gated" 2>&1)
ok "gated without a token: $(head -c 300 <<<"$out")" has "$out" "HTTP 401 .*gated or private.*set HF_TOKEN"
out=$(HF_TOKEN=hf_wrong_token "$ATTNLAB" -e "load acme/gated" 2>&1)
ok "gated, wrong token: no access" has "$out" "has no access to it"
ok "the token is never printed" hasnt "$out" "hf_wrong_token"
mkdir -p "$T/hfhome" && echo hf_secret_test_token >"$T/hfhome/token"
ctl _reset
out=$("$ATTNLAB" -e "load acme/gated; ranks vo all" 2>&1)
ok "gated with the token file: $(head -c 300 <<<"$out")" cmp -s <(tail -n +2 "$T/local.txt") <(echo "$out" | tail -n +3)
ok "the token never reaches the byte store's host" test "$(stat_of auth_on_store)" = 0 -a "$(stat_of store_requests)" -gt 0
rm "$T/hfhome/token"
out=$("$ATTNLAB" -e "load acme/nope" 2>&1)
ok "missing repo: $(head -c 300 <<<"$out")" has "$out" "model 'acme/nope' (revision main): not found on .*HTTP 404"
out=$("$ATTNLAB" -e "load acme/r1@v9" 2>&1)
ok "missing revision" has "$out" "model 'acme/r1' (revision v9): not found"

# ---- info says how much is local; the progress line on a terminal names the tensor, in bytes
out=$(HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/r1; info" 2>&1)
held=$((hb + tb))
ok "info: hub_local $(grep hub_local <<<"$out")" has "$out" "^hub_local  *$held of $(cat "$T"/root/acme/r1/*.safetensors | wc -c) bytes ([0-9.]*%); the rest is fetched"
command -v script >/dev/null || echo "no script(1): the progress line is not checked"
command -v script >/dev/null && out=$(ATTNLAB_CACHE=$T/cache3 HF_HUB_CACHE=$T/hf3 script -qec "$ATTNLAB -e 'load acme/r1; ranks vo all'" /dev/null 2>&1)
command -v script >/dev/null && ok "progress line: $(grep -ao 'fetching[^\r]*' <<<"$out" | head -1)" has "$out" "fetching model.layers.[0-9].self_attn.o_proj.weight: [0-9.]* [kM]\?B of [0-9.]* [kM]\?B  .*B/s for ranks vo all"

# ---- two processes fetching the same model into one cache
export ATTNLAB_CACHE=$T/cache4 HF_HUB_CACHE=$T/hf4
"$ATTNLAB" -e "load acme/r1; ranks vo all" >"$T/p1.txt" 2>&1 &
"$ATTNLAB" -e "load acme/r1; ranks vo all" >"$T/p2.txt" 2>&1
wait $!
ok "two processes at once: both right" cmp -s <(tail -n +2 "$T/p1.txt") <(tail -n +2 "$T/p2.txt")
ok "two processes at once: the numbers" cmp -s "$T/local.txt" <(tail -n +2 "$T/p2.txt")
out=$(HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/r1; ranks vo all" 2>&1)
ok "two processes at once: the cache they left" cmp -s "$T/local.txt" <(echo "$out" | tail -n +2)

# ---- a dead endpoint: retried, then a clear error
t0=$(date +%s%N)
out=$(ATTNLAB_CACHE=$T/cache5 HF_HUB_CACHE=$T/hf5 HF_ENDPOINT=http://127.0.0.1:1 timeout 60 "$ATTNLAB" -e "load acme/r1" 2>&1)
ms=$((($(date +%s%N) - t0) / 1000000))
ok "dead endpoint: $(head -c 300 <<<"$out")" has "$out" "the Hub: model 'acme/r1' (revision main): http://127.0.0.1:1: .*after 6 tries"
ok "dead endpoint: backoff 0.2 + 0.4 + 0.8 + 1.6 + 1.6 s between the tries (${ms} ms)" test "$ms" -ge 4500 -a "$ms" -lt 30000
# a server that ignores Range (200, the whole file) is refused, not written over the shard
ctl "_control?norange=1"
out=$(ATTNLAB_CACHE=$T/cache5 HF_HUB_CACHE=$T/hf5 "$ATTNLAB" -e "load acme/r1" 2>&1)
ok "Range ignored: $(head -c 300 <<<"$out")" has "$out" "sent more than the 8 bytes asked for"
# ... and on a tensor: no byte lands outside the range asked for (the held V/O bytes stay right)
ATTNLAB_CACHE=$T/cache5 HF_HUB_CACHE=$T/hf5 "$ATTNLAB" -e "load acme/r1; ranks vo all" >/dev/null 2>&1
ctl "_control?norange=2"
ATTNLAB_CACHE=$T/cache5 HF_HUB_CACHE=$T/hf5 "$ATTNLAB" -e "load acme/r1; ranks qk all" >/dev/null 2>&1
out=$(ATTNLAB_CACHE=$T/cache5 HF_HUB_CACHE=$T/hf5 HF_HUB_OFFLINE=1 "$ATTNLAB" -e "load acme/r1; ranks vo all" 2>&1)
ok "Range ignored on a tensor: the bytes held before are intact" cmp -s "$T/local.txt" <(echo "$out" | tail -n +2)

# ---- a shard fetched whole is verified and put into the HF layout (a GGUF export reads every tensor)
export ATTNLAB_CACHE=$T/cache6 HF_HUB_CACHE=$T/hf6
out=$("$ATTNLAB" -e "load acme/r1; ranks vo all; export $T/all.gguf; info" 2>&1)
ok "whole model read: $(grep hub_local <<<"$out")" has "$out" "^hub_local  *\([0-9]*\) of \1 bytes (100.0%)"
blobs=$(ls "$T/hf6/models--acme--r1/blobs")
bad=0
n=0
for f in "$SRC"/*.safetensors; do b=$(sha256sum "$f" | cut -c1-64); n=$((n + 1))
    cmp -s "$f" "$T/hf6/models--acme--r1/blobs/$b" || bad=1; done
ok "HF blobs: the $n shards whole under their sha256, config and index ($(wc -w <<<"$blobs"))" test "$bad" = 0 -a "$(wc -w <<<"$blobs")" = 5 -a $n = 3
out=$("$ATTNLAB" -e "load $T/hf6/models--acme--r1/snapshots/$commit; ranks vo all" 2>&1)
ok "the HF snapshot is a complete checkpoint: $(head -c 200 <<<"$out")" cmp -s <(tail -n +2 "$T/local.txt") <(echo "$out" | tail -n +3)

# a shard whose bytes do not match the sha256 the Hub gave never enters the HF cache
export ATTNLAB_CACHE=$T/cache7 HF_HUB_CACHE=$T/hf7
ctl "_control?badsha=3"
out=$("$ATTNLAB" -e "load acme/r1; export $T/all7.gguf" 2>&1)
ok "sha256 mismatch: $(grep -o 'model-0000[^ ]*: the bytes.*damaged' <<<"$out" | head -c 200)" has "$out" "the bytes fetched have sha256 .*the Hub says .*damaged"
ok "sha256 mismatch: no shard in the HF cache" test -z "$(ls "$T/hf7/models--acme--r1/blobs" | grep -v -e "$(gitsha "$SRC/config.json")" -e "$(gitsha "$SRC/model.safetensors.index.json")")"

# ---- Ctrl-C during transfers: stops them; the ranges recorded are complete and right; a rerun finishes
export ATTNLAB_CACHE=$T/cache8 HF_HUB_CACHE=$T/hf8
"$ATTNLAB" -e "load acme/r1" >/dev/null 2>&1
ctl "_control?slow=1000"
"$ATTNLAB" -e "load acme/r1; ranks vo all" >"$T/int.txt" 2>&1 &
pid=$!
sleep 1.5
kill -INT $pid
wait $pid
ctl "_control?slow=0"
ok "Ctrl-C: the transfer stops [$(tail -c 300 "$T/int.txt")]" grep -q "interrupted" "$T/int.txt"
check=$(python3 - "$T"/cache8/hub/models--acme--r1/snapshots/*/ "$SRC" <<'EOF2'
import glob, os, sys
snap, src = sys.argv[1], sys.argv[2]
held = bad = 0
for r in glob.glob(snap + "/*.ranges"):
    shard = os.path.basename(r)[:-7]
    a, b = open(os.path.join(snap, shard), "rb").read(), open(os.path.join(src, shard), "rb").read()
    for line in open(r):
        s, e = map(int, line.split())
        held += e - s
        bad += a[s:e] != b[s:e]
print(held, bad)
EOF2
)
read -r held bad <<<"$check"
ok "Ctrl-C: every range recorded holds the shard's bytes ($held bytes, $bad wrong)" test "$bad" = 0 -a "$held" -gt $hb -a "$held" -lt $((hb + tb))
out=$("$ATTNLAB" -e "load acme/r1; ranks vo all" 2>&1)
ok "Ctrl-C: the rerun fetches the rest and gives the numbers" cmp -s "$T/local.txt" <(echo "$out" | tail -n +2)

# ---- faults: two injected 503s and a cut connection, retried and resumed (a fresh cache)
export ATTNLAB_CACHE=$T/cache2 HF_HUB_CACHE=$T/hf2
ctl _reset
ctl "_control?fail=2&status=503"
ctl "_control?cut=3"
out=$("$ATTNLAB" -e "load acme/r1; ranks vo all" 2>&1)
ok "503s and cuts: the same numbers $(head -c 300 <<<"$out")" cmp -s "$T/local.txt" <(echo "$out" | tail -n +2)
ok "the 5 faults were all met ($(stat_of injected))" test "$(stat_of injected)" = 5
cli_done
