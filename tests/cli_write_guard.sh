#!/usr/bin/env bash
# cli_write_guard.sh -- no command writes into a loaded model's folder (issue 14): `info to
# config.json` run inside the folder leaves the checkpoint's config as it was; tables (`to FILE`,
# also into a new subfolder), figures (`plot ... to`, and auto-named ones under plot.dir), a
# symlink pointing into the folder, `tokenize ... to` and `calib save` are refused with a message
# naming the model; writes outside the folder still work; `tokenize ... to ""` is refused instead
# of printing to stdout.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-write-guard
cd "$T" || exit 1

run -e "synth demo-llama m"
[ "$(rc)" = 0 ] || { fail "synth: [$(cat err.txt)]"; cli_done; exit; }
cp m/config.json config.orig
cd m || exit 1
run -e "load . as mine; info to config.json"
[ "$(rc)" = 1 ] && grep -q "refusing to write config.json: it is inside the folder of the loaded model mine" err.txt \
    || fail "info to config.json: rc $(rc) [$(cat err.txt)]"
cmp -s config.json ../config.orig || fail "config.json was overwritten"
run -e "load . as mine; ranks vo to sub/r.csv"
[ "$(rc)" = 1 ] && grep -q "refusing to write sub/r.csv: .* model mine" err.txt && [ ! -e sub ] \
    || fail "table into a new subfolder: rc $(rc) [$(cat err.txt)] $(ls)"
run -e "load . as mine; plot spectrum vo layer 0 head 0 to f.png"
[ "$(rc)" = 1 ] && grep -q "refusing to write f.png" err.txt && [ ! -e f.png ] || fail "figure: [$(cat err.txt)]"
run -e "load . as mine; set plot.dir .; plot spectrum vo layer 0 head 0"
[ "$(rc)" = 1 ] && grep -q "refusing to write ./.*png: .* model mine" err.txt || fail "auto-named figure: [$(cat err.txt)]"
[ "$(ls | grep -v -x -e out.txt -e err.txt -e rc.txt)" = "$(printf 'config.json\nmodel.safetensors')" ] \
    || fail "files appeared in the model folder: [$(ls)]"
cd .. || exit 1

# outside the folder is fine; a symlink into it is not; a model loaded second still counts
run -e "load m; ranks vo to r.csv; ranks vo to m/../r2.csv"
[ "$(rc)" = 0 ] && [ -s r.csv ] && [ -s r2.csv ] || fail "writes outside: rc $(rc) [$(cat err.txt)]"
ln -s m/config.json link.json
run -e "load m; info to link.json"
[ "$(rc)" = 1 ] && grep -q "refusing to write link.json" err.txt || fail "symlink into the folder: [$(cat err.txt)]"
cmp -s m/config.json config.orig || fail "config.json was overwritten through the link"
run -e "load demo-gpt2; load m as second; use demo-gpt2; ranks vo to m/x.csv"
[ "$(rc)" = 1 ] && grep -q "model second" err.txt && [ ! -e m/x.csv ] || fail "any loaded model: [$(cat err.txt)]"

# a figure `to ""` names no file: refused, not written under an automatic name
run -e "load demo-llama; plot vo-ranks layer 0 to \"\""
[ "$(rc)" = 1 ] && grep -q 'names no file' err.txt && ! ls ./*.png >/dev/null 2>&1 \
    || fail "plot to \"\": rc $(rc) [$(cat out.txt)] [$(cat err.txt)]"

# tokenize and calib save, on the real small checkpoint copied here (skipped when absent)
M="${ATTNLAB_MODELS:-}"
if [ -n "$M" ] && [ -d "$M/stories260K-hf" ]; then
    cp -r "$M/stories260K-hf" hf
    run -e "load hf; tokenize \"Once upon a time\" to hf/ids.txt"
    [ "$(rc)" = 1 ] && grep -q "refusing to write hf/ids.txt" err.txt && [ ! -e hf/ids.txt ] \
        || fail "tokenize into the folder: [$(cat err.txt)]"
    run -e "load hf; tokenize \"Once upon a time\" to \"\""
    [ "$(rc)" = 1 ] && ! grep -q "^1 " out.txt && grep -q "no file name given" err.txt \
        || fail "tokenize to \"\": rc $(rc) [$(cat out.txt)] [$(cat err.txt)]"
    run -e "load hf; tokenize \"Once upon a time\" to ids.txt"
    [ "$(rc)" = 0 ] && [ -s ids.txt ] || fail "tokenize outside: [$(cat err.txt)]"
    printf 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park.\n' >story.txt
    run -e "load hf; calibrate story.txt seqlen 8; calib save hf/stats.safetensors"
    [ "$(rc)" = 1 ] && grep -q "refusing to write hf/stats.safetensors" err.txt && [ ! -e hf/stats.safetensors ] \
        || fail "calib save into the folder: rc $(rc) [$(cat err.txt)]"
else
    echo "note: \$ATTNLAB_MODELS/stories260K-hf absent: tokenize and calib save not checked"
fi
cli_done
