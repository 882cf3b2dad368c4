#!/usr/bin/env bash
# ab_pad_bytes.sh OLD NEW [DIR] -- the bytes core/linalg/pad.c writes, two builds side by side: FaRR exports (factors,
# dense, hf; GQA with and without biases, Conv1D, MLA, partial rotary, sliding windows, attention sinks), `compare
# kv-budget B ids` in compute bf16 (the farr / mean-pool rows run padded through budget_run.c) and truncate's ppl
# (farr.c's padded working copy), written by each build into DIR/old and DIR/new; prints one line per file that
# differs and "N files, M differ". No timing: a refactor's check that the padding kept every byte.
set -u
OLD=$(realpath "$1"); NEW=$(realpath "$2"); D=${3:-/tmp/ab-pad-bytes}
# write BIN OUT: every output of one build into OUT.
write() {
    local B=$1 O=$2 m
    rm -rf "$O"; mkdir -p "$O"; cd "$O" || exit 1
    export ATTNLAB_CACHE=$O/cache ATTNLAB_HOME=$O/home OPENBLAS_NUM_THREADS=1
    for i in $(seq 1 400); do echo $(((i * 37 + 11) % 256)); done | tr '\n' ' ' >ids.txt
    for m in gpt_neox gemma2 phi3 gpt_oss; do "$B" -e "synth family $m m_$m" >/dev/null 2>&1; done
    "$B" -e "synth demo-r1 m_r1 seed 7; synth demo-llama m_ll; synth demo-gpt2 m_g2" >/dev/null 2>&1
    for m in m_gpt_neox m_gemma2 m_phi3 m_gpt_oss m_ll m_g2; do
        "$B" -e "load $m; truncate vo rank 4 policy model-max; truncate qk rank 4 policy model-max; export x_${m}_f format factors; export x_${m}_d format dense"
        "$B" -e "load $m; truncate vo tau 0.9; export y_${m}_f format factors; export y_${m}_d format dense"
        "$B" -e "load $m; truncate vo rank 3 policy model-max; export z_${m}_h"
    done >log.txt 2>&1
    "$B" -e "load m_r1; truncate vo rank 8 policy model-max; truncate qk rank 8 policy model-max; export x_r1_hf format hf; export x_r1_f format factors" >>log.txt 2>&1
    "$B" -e "load m_r1; truncate vo tau 0.95; export y_r1_f format factors" >>log.txt 2>&1
    for m in m_ll m_gpt_neox m_gemma2; do
        "$B" -e "load $m; set compute bf16; set format csv; compare kv-budget 96 ids ids.txt seqlen 64" >cmp_$m.csv 2>&1
        "$B" -e "load $m; truncate vo rank 4; ppl ids ids.txt seqlen 64" 2>&1 | grep -v tok/s >ppl_$m.txt
    done
    find . -type f \( -path './x_*' -o -path './y_*' -o -path './z_*' -o -name 'cmp_*' -o -name 'ppl_*' \) ! -name '*manifest*' |
        sort | xargs sha256sum >"$O.sha"
}
(write "$OLD" "$D/old"); (write "$NEW" "$D/new")
diff "$D/old.sha" "$D/new.sha" | grep '^>' | sed 's/^> [0-9a-f]*  /differs: /'
echo "$(wc -l <"$D/new.sha") files ($(wc -l <"$D/old.sha") old), $(diff "$D/old.sha" "$D/new.sha" | grep -c '^>') differ"
