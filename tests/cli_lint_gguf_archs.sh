#!/bin/bash
# cli_lint_gguf_archs.sh -- `lint F.gguf` of an architecture llama.cpp knows but attnlab maps no
# tensors for names the architectures attnlab maps from the one table (core/model/gguf_arch.c), the
# same list `load F.gguf` gives: an OLMo 2 GGUF renamed to olmoe (same length, every key with it);
# an architecture a family row names is one llama.cpp knows.
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

# an architecture a family row names (glm4_moe's glm4moe, which convert_hf_to_gguf.py writes) is one
# llama.cpp knows: a GPT-NeoX GGUF renamed gptneox -> glm4moe (same length)
run -e "synth family gpt_neox $T/n; load $T/n; export $T/n.gguf"
ok "gptneox GGUF written" test "$(rc)" = 0
LC_ALL=C sed 's/gptneox/glm4moe/g' "$T/n.gguf" >"$T/g.gguf"
run -e "lint $T/g.gguf"
ok "glm4moe: not 'no llama.cpp architecture'" hasnt "$(cat out.txt)" "is no llama.cpp architecture"
ok "  its tensors not checked (no mapping)" has "$(cat out.txt)" "the tensors of llama.cpp's glm4moe are not checked"
cli_done
