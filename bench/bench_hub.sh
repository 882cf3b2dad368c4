#!/usr/bin/env bash
# bench_hub.sh -- models from the Hub (issue 29) over the loopback stand-in tests/hub_server.py, on
# a DeepSeek-R1-shaped checkpoint (synth ds-r1-shape: R1's attention shapes, FP8, ~190 MB a layer):
#   1. the sweep `ranks vo all` streamed from the server into an empty cache, against the same
#      sweep on the local files (page cache warm): the ratio (aim: within 1.2x when the link is
#      faster than the compute; the read-ahead thread fetches layer i+1 while layer i computes);
#   2. fetch throughput: the bytes attnlab fetched (the server's count) over the time of the
#      streamed run less the local run's, against `curl` fetching the same byte ranges (the
#      shards' .ranges records) one after the other from the same server.
# Not a test: prints seconds, MB/s and ratios (the server is Python: its rate bounds both).
#   bench/bench_hub.sh [--layers N] [--attnlab BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
layers=2 bin=build/attnlab
while [ $# -gt 0 ]; do
    case $1 in
        --layers) layers=$2; shift 2 ;;
        --attnlab) bin=$2; shift 2 ;;
        *) echo "usage: $0 [--layers N] [--attnlab BIN]" >&2; exit 2 ;;
    esac
done
tmp=$(mktemp -d /tmp/attnlab-hub.XXXXXX)
server=""
trap '[ -n "$server" ] && kill $server; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/root/acme"
"$bin" -e "synth ds-r1-shape $tmp/root/acme/r1 layers $layers" >/dev/null
python3 tests/hub_server.py --root "$tmp/root" --port-file "$tmp/port" >/dev/null 2>&1 &
server=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
ep=http://127.0.0.1:$(cat "$tmp/port")
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc -l; }
export ATTNLAB_CACHE=$tmp/cache HF_HUB_CACHE=$tmp/hf HF_ENDPOINT=$ep
unset HF_HUB_OFFLINE HF_TOKEN
"$bin" -e "load $tmp/root/acme/r1; ranks vo all" >/dev/null     # page cache warm
local_s=$(secs "$bin" -e "load $tmp/root/acme/r1; ranks vo all")
curl -s "$ep/_reset" >/dev/null
stream_s=$(secs "$bin" -e "load acme/r1; ranks vo all")
bytes=$(curl -s "$ep/_stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['store_bytes'])")
snap=$(ls -d "$tmp"/cache/hub/models--acme--r1/snapshots/*)
commit=$(basename "$snap")
curl_s=$(secs bash -c "for r in $snap/*.ranges; do f=\$(basename \$r .ranges); while read -r b e; do
    curl -sL -r \$b-\$((e - 1)) -o /dev/null $ep/acme/r1/resolve/$commit/\$f; done <\$r; done")
mb=$(echo "$bytes / 1000000" | bc -l)
printf 'R1 shapes, %d layers; load %s\n' "$layers" "$(cut -d' ' -f1 /proc/loadavg)"
printf '%-44s %8.2f s\n' "ranks vo all, local files (warm)" "$local_s"
printf '%-44s %8.2f s   %.2fx local\n' "ranks vo all, streamed from 127.0.0.1" "$stream_s" "$(echo "$stream_s / $local_s" | bc -l)"
printf '%-44s %8.1f MB\n' "fetched (server count)" "$mb"
printf '%-44s %8.1f MB/s (streamed - local time)\n' "attnlab fetch rate" "$(echo "$mb / ($stream_s - $local_s + 0.001)" | bc -l)"
printf '%-44s %8.1f MB/s\n' "curl, the same ranges one by one" "$(echo "$mb / $curl_s" | bc -l)"
