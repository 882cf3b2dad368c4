#!/bin/bash
# bench_ppl_pair_io.sh OLD NEW MODEL IDS [CGROUP] -- issue 32: bytes read from the file system by the perplexity
# before and after of `truncate vo tau 0.99; check ids IDS` and `convert tpa kv-rank 4 ppl off; check ids IDS`
# (bf16 mode), OLD and NEW builds interleaved (old, new, new, old; ONCE=1: old, new), each run with MODEL's pages
# dropped first (posix_fadvise DONTNEED) and /usr/bin/time's %I (512-byte blocks), wall, CPU, load average.
# CGROUP: a cgroup v1 memory folder whose memory.limit_in_bytes is below MODEL's bytes: the runs go there, so the
# page cache cannot hold the model beside the process (what a model larger than the machine's RAM does here).
# WHAT="trunc tpa" (default) picks the commands. Model: bench_forward --write-shape 8b DIR 4 (3.6 GB).
[ $# -ge 4 ] || { echo "usage: $0 OLD NEW MODEL IDS [CGROUP]" >&2; exit 2; }
OLD=$1 NEW=$2 M=$3 I=$4 CG=${5:-}
drop() { python3 -c "
import os,glob
for p in glob.glob('$M/*.safetensors'):
    fd=os.open(p,os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED); os.close(fd)"; }
run1() {   # run1 LABEL BIN CMDS
    drop
    /usr/bin/time -f "$1: wall %e s, user %U s, sys %S s, fs inputs %I blocks, maxrss %M KB" "$2" -e "$3" > "$1.out" 2> "$1.err"
    echo "$(uptime | sed 's/.*load/load/') | $(tail -1 "$1.err")"
    grep "^perplexity on" "$1.out" | cut -c1-200
}
TR="load $M as m; set compute bf16; truncate vo tau 0.99"
TP="load $M as m; set compute bf16; convert tpa kv-rank 4 ppl off"
[ -n "$CG" ] && echo $$ > "$CG/cgroup.procs" && echo "in $CG: limit $(cat "$CG/memory.limit_in_bytes") bytes"
for what in ${WHAT:-trunc tpa}; do
  [ "$what" = trunc ] && C="$TR" || C="$TP"
  run1 "old-$what" "$OLD" "$C; check ids $I"
  run1 "new-$what" "$NEW" "$C; check ids $I"
  [ -n "${ONCE:-}" ] && continue
  run1 "new-$what" "$NEW" "$C; check ids $I"
  run1 "old-$what" "$OLD" "$C; check ids $I"
done
