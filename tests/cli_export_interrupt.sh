#!/usr/bin/env bash
# cli_export_interrupt.sh -- Ctrl-C (SIGINT) at random points of an export, for every export kind
# (FaRR, TransMLA, TPA, KQ-SVD), into a new folder and with `force` over an earlier export. After
# each interrupted run the destination is exactly one of: absent (a new folder), the old folder
# byte for byte (force), or the new export complete (byte for byte the export of an uninterrupted
# run) -- never a mix -- and no staging or set-aside folder is left beside it.
# Bounded: 4 kinds x 2 modes x 4 runs, each killed within the time one uninterrupted run takes.
set -u
source "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-export-interrupt
cd "$T" || exit 1
M="${ATTNLAB_MODELS:-}"
RUNS=${ATTNLAB_INTERRUPT_RUNS:-4}

# digest DIR: one line per file (relative name and sha256), or "absent".
digest() {
    if [ -e "$1" ]; then (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); else echo absent; fi
}
# now_ms: wall clock in milliseconds.
now_ms() { date +%s%3N; }

# kind NAME OLD_CMDS NEW_CMDS [OLD_EXPORT_ARGS]: OLD_CMDS / NEW_CMDS are command lines ending
# just before `export`.
kind() {
    local name=$1 old=$2 new=$3 ref="ref_$1" dst="dst_$1" t0 dur
    "$B" -e "$old; export old_$name ${4:-}" >/dev/null 2>&1
    ok "$name: the earlier export is written" test -d "old_$name"
    t0=$(now_ms)
    "$B" -e "$new; export $ref" >/dev/null 2>&1
    dur=$(($(now_ms) - t0))
    ok "$name: the new export is written" test -d "$ref"
    local want_old want_new
    want_old=$(digest "old_$name")
    want_new=$(digest "$ref")
    ok "$name: the two exports differ" test "$want_old" != "$want_new"
    for mode in new force; do
        local bad=0 kinds_seen=""
        for ((i = 0; i < RUNS; i++)); do
            rm -rf "$dst"
            if [ "$mode" = force ]; then cp -a "old_$name" "$dst"; fi
            "$B" -e "$new; export $dst $([ "$mode" = force ] && echo force)" >/dev/null 2>&1 &
            local pid=$!
            # a random point of the run's later two thirds (the export is its end), in ms
            local ms=$((dur / 3 + RANDOM % (dur * 5 / 6 + 20)))
            sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
            kill -INT "$pid" 2>/dev/null
            wait "$pid"
            local got
            got=$(digest "$dst")
            if [ "$got" = "$want_new" ]; then kinds_seen+=" new"
            elif [ "$mode" = force ] && [ "$got" = "$want_old" ]; then kinds_seen+=" old"
            elif [ "$mode" = new ] && [ "$got" = absent ]; then kinds_seen+=" absent"
            else
                bad=$((bad + 1))
                echo "MIXED ($name, $mode, killed after ${ms} ms): $(ls -A "$dst" 2>&1 | tr '\n' ' ')" >&2
            fi
            if ls -A "$T" | grep -q -e staging -e '\.old\.'; then
                bad=$((bad + 1))
                echo "LEFT ($name, $mode, killed after ${ms} ms): $(ls -A "$T" | grep -e staging -e '\.old\.' | tr '\n' ' ')" >&2
                rm -rf "$T"/.*staging* "$T"/.*.old.*
            fi
        done
        echo "$name $mode (one run ${dur} ms):$kinds_seen"
        ok "$name, $mode: every interrupted export is absent, old or new, whole; nothing left beside it" test "$bad" -eq 0
    done
}

kind farr "load demo-r1; truncate vo rank 4 policy model-max" \
          "load demo-r1; truncate vo rank 16 policy model-max"
kind tmla "load demo-llama; convert mla kv-rank 48" "load demo-llama; convert mla kv-rank 32" "shard-mb 1"
kind tpa "load demo-llama; convert tpa kv-rank 1" "load demo-llama; convert tpa kv-rank 2"
if [ -n "$M" ] && [ -f "$M/stories260K/stories260K.bin" ]; then
    printf 'Once upon a time there was a little girl named Lily. She loved to play in the park.\n%.0s' {1..20} >story.txt
    BIN="$M/stories260K/stories260K.bin"
    kind kqsvd "load $BIN; calibrate story.txt seqlen 32; kvsvd learn all rank 3" \
               "load $BIN; calibrate story.txt seqlen 32; kvsvd learn ksvd rank 2"
    # force replaces the method files too: no file of the earlier methods is left
    ok "kqsvd: force leaves exactly the new method files" \
        test "$(ls ref_kqsvd | tr '\n' ' ')" = "kvsvd-ksvd.safetensors kvsvd_manifest.json "
    rm -rf kf && cp -a old_kqsvd kf
    "$B" -e "load $BIN; calibrate story.txt seqlen 32; kvsvd learn ksvd rank 2; export kf force" >/dev/null 2>&1
    ok "kqsvd: export force over three methods leaves one" \
        test "$(ls kf | tr '\n' ' ')" = "kvsvd-ksvd.safetensors kvsvd_manifest.json "
else
    echo "note: \$ATTNLAB_MODELS/stories260K absent: KQ-SVD part skipped"
fi
cli_done
