#!/usr/bin/env bash
# cli_write_folders.sh -- the folder rule of every command that writes (core/base/al.h al_mkdirs_here): a missing
# folder of the path is created inside the working directory only; elsewhere (an absolute path, or .. out of it) it
# must exist, and the error names the first missing folder and says to create it. Before (ux, s14) `to
# /nonexistent/x.csv` created /nonexistent, and so did figures and `export FILE.gguf`.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-write-folders shared-cache
mkdir work && cd work || exit 1
X=$T/nx                                   # outside the working directory ($T/work), missing
L="load demo-llama"
for w in "ranks vo layer 0 to $X/a/r.csv" "info to $X/a/i.json" "plot vo-ranks layer 0 to $X/a/p.png" \
         "export $X/a/m.gguf" "synth demo-llama $X/a/m" "save session $X/a/s.txt" "history to $X/a/h.txt"; do
    out=$(e "$L; $w")
    ok "$w: an error" has "$out" "^error: \(.*: \)\?folder $X does not exist"
    ok "$w: it says what to do" has "$out" "mkdir -p $X/a"
    ok "$w: nothing created" test ! -e "$X"
done
out=$(e "$L; ranks vo layer 0 to ../up/r.csv")
ok "../up/r.csv: an error naming ../up" has "$out" "^error: folder ../up does not exist"
ok "../up/r.csv: nothing created" test ! -e "$T/up"
out=$(e "$L; ranks vo layer 0 to out/deep/r.csv; plot vo-ranks layer 0 to figs/p.png; info to $T/work/abs/i.json")
ok "inside the working directory the folders are made" test -s out/deep/r.csv -a -s figs/p.png -a -s abs/i.json
mkdir -p "$T/there"
out=$(e "$L; ranks vo layer 0 to $T/there/r.csv")
ok "an existing folder elsewhere is written" test -s "$T/there/r.csv"
cli_done
