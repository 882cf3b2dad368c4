#!/bin/bash
# cli_help_synth.sh -- `help load` does not promise a `synth family` checkpoint of every family: it
# says which have one (`help synth family` lists the recipes) and where Llama and GPT-2's are; every
# family `synth family` offers is a family `help load` lists, and one it lists without a recipe
# (llama) is refused by `synth family`, naming every recipe (the arguments section and the refusal
# held 256 bytes of the choices: the last ones were cut).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-help-synth
cd "$T" || exit 1

run -e "help load"
load=$(cat out.txt)
ok "help load: of each family that has a recipe" has "$(tr '\n' ' ' <<<"$load")" "of each family that has a recipe (\`help synth family\` lists them"
ok "  not: of each family" hasnt "$(tr '\n' ' ' <<<"$load")" "checkpoint of each family with planted ranks"
run -e "help synth family"
recipes=$(sed -n 's/^usage: synth family \([^ ]*\) DIR.*/\1/p' out.txt | tr '|' ' ')
ok "recipes listed" test -n "$recipes"
for f in $recipes; do
    ok "  recipe $f is a family of help load" grep -Eq "^  $f +" <<<"$load"
done
ok "help synth family: where the hybrids plant (nemotron_h 1 and 4, kimi_linear 3 and 7)" has "$(tr '\n' ' ' <<<"$(cat out.txt)")" "nemotron_h layers 1 and 4, granitemoehybrid 1 and 3, kimi_linear (MLA; Kimi Delta Attention on 0-2, 4-6) 3 and 7"
ok "help synth family: 3-8 layers (kimi_linear has 8), MLA rows plant QK" has "$(tr '\n' ' ' <<<"$(cat out.txt)")" "3-8 layers.*the MLA rows (qk_nope 32: deepseek_v3, kimi_k25, kimi_linear"
args=$(sed -n 's/^  name  \([^ ]*\)$/\1/p' out.txt | tr '|' ' ')
ok "the arguments section lists every recipe of the usage line (not cut at 256 bytes)" test "$args" = "$recipes"
run -e "synth family llama $T/l"
ok "no llama recipe: refused" test "$(rc)" = 1
ok "  the refusal lists every recipe, the last one too" grep -q "name must be one of .*|kimi_linear|deepseek_v4|kimi_k3|glm4_moe|gpt_oss, got 'llama'" err.txt
cli_done
