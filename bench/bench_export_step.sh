#!/bin/bash
# bench_export_step.sh OLD_BIN NEW_BIN MODEL OUTDIR [ROUNDS] -- issue 32's last step alone, two builds
# interleaved: per round and build ONE process runs
#     load MODEL; set compute bf16; calibrate ids FILE samples S seqlen L inputs on;
#     convert mla kv-rank 512 stats act ppl off; export OUTDIR/x1; export OUTDIR/x2
# (BENCH_EXPORTS=1: the first alone, for a model whose two exports do not fit the disk; BENCH_SAMPLES /
# BENCH_SEQLEN: 1 x 128 unless set; the export does not depend on them; BENCH_KV_RANK: 512), sampled from
# /proc every 0.1 s (utime + stime, RssAnon), its output lines stamped (stdbuf -oL). Each export's window
# runs from the line printed before it to its "exported ... to DIR" line; its wall and CPU seconds are
# those of the window, its anonymous peak the samples' in it. Then dd writes the export's bytes (fsync):
# the floor, in the same minute. The exported model.safetensors / shards of both builds must hash the
# same (said at the end). ROUNDS (default 2) alternate old, new, old, new, ... The exports are deleted.
B_OLD=$1 B_NEW=$2 M=$3 O=$4 R=${5:-2}
[ $# -ge 4 ] || { echo "usage: $0 OLD_BIN NEW_BIN MODEL OUTDIR [ROUNDS]" >&2; exit 2; }
S=${BENCH_SAMPLES:-1} L=${BENCH_SEQLEN:-128} NX=${BENCH_EXPORTS:-2}
EX="export $O/x1"; [ "$NX" = 1 ] || EX="$EX; export $O/x2"
mkdir -p "$O"
V=$(grep -o '"vocab_size":[[:space:]]*[0-9]*' "$M/config.json" | grep -o '[0-9]*$')
awk -v n=$(((S + 1) * L + 16)) -v V="$V" 'BEGIN { s = 7; for (i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % V } print "" }' > "$O/ids.txt"
HZ=$(getconf CLK_TCK)
echo "load average at start: $(cat /proc/loadavg) ($(nproc) CPUs); $M: $(du -sb "$M" | awk '{printf "%.2f GB", $1/1e9}'); ATTNLAB_THREADS=${ATTNLAB_THREADS:-all}"
cat "$M"/*.safetensors > /dev/null
one() {   # one TAG BIN: the process, its samples and stamped lines, then the two exports' rows
    local tag=$1 b=$2 t0 pid
    rm -rf "$O/x1" "$O/x2"
    t0=$(date +%s.%N)
    ( stdbuf -oL "$b" -e "load $M as m; set compute bf16; calibrate ids $O/ids.txt samples $S seqlen $L inputs on; convert mla kv-rank ${BENCH_KV_RANK:-512} stats act ppl off; $EX" 2>&1 |
      while IFS= read -r l; do printf '%.3f %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$l"; done ) > "$O/$tag.out" &
    sleep 0.2; pid=$(pgrep -n -f "$(basename "$b") -e load $M as m")
    : > "$O/$tag.samples"
    while kill -0 "$pid" 2>/dev/null; do
        local st an
        st=$(cut -d' ' -f14,15 /proc/$pid/stat 2>/dev/null); an=$(awk '/RssAnon/ {print $2}' /proc/$pid/status 2>/dev/null)
        [ -n "$st" ] && [ -n "$an" ] && echo "$(echo "$(date +%s.%N) - $t0" | bc) ${st% *} ${st#* } $an" >> "$O/$tag.samples"
        sleep 0.1
    done
    wait
    local eb; eb=$(du -sb "$O/x1" | cut -f1)
    local d0 d1; d0=$(date +%s.%N); dd if=/dev/zero of="$O/dd" bs=16M count=$(((eb + 16777215) / 16777216)) conv=fsync status=none; d1=$(date +%s.%N); rm -f "$O/dd"
    local fw; fw=$(echo "$d1 - $d0" | bc)
    for k in $(seq 1 "$NX"); do
        local a b
        b=$(grep -m1 "exported .* to $O/x$k:" "$O/$tag.out" | awk '{print $1}')
        a=$(awk -v b="$b" '$1 < b { a = $1 } END { print a }' "$O/$tag.out")
        awk -v a="$a" -v b="$b" -v hz="$HZ" -v tag="$tag" -v k="$k" -v fw="$fw" -v eb="$eb" '
            { if ($1 <= a) { c0 = $2 + $3 } if ($1 <= b + 0.1) { c1 = $2 + $3 } if ($1 >= a && $1 <= b + 0.1 && $4 > pk) pk = $4 }
            END { printf "%-4s export %d: wall %6.2f s, CPU %6.2f s, anon peak %5d MB; dd of its %.2f GB %6.2f s: wall / dd %.2f\n",
                  tag, k, b - a, (c1 - c0) / hz, pk / 1024, eb / 1e9, fw, (b - a) / fw }' "$O/$tag.samples"
    done
    rm -f "$O/$tag.sha"; [ -d "$O/x1" ] && (cd "$O/x1" && sha256sum *.safetensors | sha256sum | cut -c1-16) > "$O/$tag.sha"
}
for r in $(seq 1 "$R"); do one old "$B_OLD"; one new "$B_NEW"; done
so=$(cat "$O/old.sha" 2>/dev/null) sn=$(cat "$O/new.sha" 2>/dev/null)
echo "exported bytes: old ${so:-none}, new ${sn:-none} ($([ -n "$so" ] && [ "$so" = "$sn" ] && echo same || echo "DIFFERENT or missing: see $O/old.out, $O/new.out"))"
echo "load average at end: $(cat /proc/loadavg)"
rm -rf "$O/x1" "$O/x2"
