#!/bin/bash
# cli_lint_gguf_archs.sh -- `lint F.gguf` of an architecture llama.cpp knows but attnlab maps no
# tensors for names the architectures attnlab maps from the one table (core/model/gguf_arch.c), the
# same list `load F.gguf` gives: an OLMo 2 GGUF renamed to olmoe (same length, every key with it).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-lint-gguf-archs
cd "$T" || exit 1

run -e "synth family olmo2 $T/o; load $T/o; export $T/o.gguf"
ok "olmo2 GGUF written" test "$(rc)" = 0
LC_ALL=C sed 's/olmo2/olmoe/g' "$T/o.gguf" >"$T/e.gguf"
run -e "lint $T/e.gguf"
lint=$(grep -o "attnlab maps [^)]*" out.txt | sed 's/attnlab maps //')
run -e "load $T/e.gguf"
ok "load refuses olmoe" test "$(rc)" = 1
load=$(grep -o "attnlab reads .*" err.txt | sed 's/attnlab reads //')
ok "lint names the mapped architectures" test -n "$lint"
ok "  the list load gives [$lint] [$load]" test "$lint" = "$load"
ok "  olmo2 among them" has "$lint" "olmo2"
cli_done
