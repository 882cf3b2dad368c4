#!/usr/bin/env bash
# cli_convert_trust.sh -- trust (helper bfp): one question, one answer for the conversions cli_bf16_hold.sh does not cover.
# In compute bf16 the session runs a conversion as its BF16 DeepSeek-V3 export reads back whatever made it
# (mla_run_for): a strategy's (CARE) and one made in compute f32 give convert's after, `ppl`, `check`, `check DIR` and
# the reloaded export's `ppl` one number. A conversion no DeepSeek-V3 export holds (gpt-oss's sinks: `format attnlab`
# only) keeps float32 layers, as that export writes them. Qwen2's biases: rounded as the BF16 export writes them (q-rank:
# one number bit for bit); without a query latent the q_proj bias, which no DeepSeek-V3 engine builds, is said, and
# `check` / `check DIR` both give the engines' number. Old binary: 390.329 / 390.226 / 390.061 (CARE), 380.963 / 381.001 /
# 381.187 (made in f32), 368.913 / 368.725 (gpt-oss), 368.969 / 368.982 (q-rank), check 363.45 / check DIR 381.087.
# The numbers pinned here are bf16 mode's on the vdpbf16ps token lanes (ATTNLAB_AMX=0), the same on every AVX-512
# BF16 CPU: the AMX tiles (matmul_amx.h) sum the same products in another order and bf16 mode's roundings carry it
# on (CARE 390.253, f32-made 381.143 there, each again one number); cli_bf16_hold / cli_check_session check the
# one-number rule on the AMX tiles.
export ATTNLAB_AMX=0
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-convert-trust shared-cache
cd "$T" || exit 1
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
cut -d' ' -f257-300 ids.txt > valid.txt
CAL="calibrate ids ids.txt samples 4 seqlen 32"
PPL="ppl ids valid.txt seqlen 32"
same3() { [ "$#" = 3 ] && [ "$1" = "$2" ] && [ "$2" = "$3" ]; }           # after, check, check DIR
engines() { [ "$#" = 3 ] && [ "$2" = "$3" ] && [ "$1" != "$2" ]; }       # check = check DIR, not the session's
afters() { grep "^perplexity on 42 tokens, held out" out.txt | grep -o "[0-9.][0-9.]* after" | cut -d' ' -f1 | tr '\n' ' '; }

# ---- a strategy (CARE) in compute bf16: its BF16 export's layers, as TransMLA's own
run -e "load demo-llama-bf16 as d; set compute bf16; $CAL; convert mla kv-rank 16 strategy care; $PPL to p.csv; check; export e; check e; load e as x; $PPL to x.csv"
[ "$(rc)" = 0 ] || fail "rc $(rc) [$(cat err.txt)]"
ok "care: convert's after, check, check DIR: one number ($(afters))" [ "$(afters)" = "390.061 390.061 390.061 " ]
ok "care: ppl of the session is the reloaded BF16 export's, bit for bit" cmp -s p.csv x.csv

# ---- the strategies table (convert mla-table ... strategies) runs its rows as ppl runs each conversion
run -e "load demo-llama-bf16 as d; set compute bf16; $CAL; convert mla-table kv-ranks 16 strategies care,transmla ids ids.txt samples 4 seqlen 32"
[ "$(rc)" = 0 ] || fail "rc $(rc) [$(cat err.txt)]"
ok "mla-table in bf16: care's row is convert's 390.061 (was 390.329)" grep -qE "^ +16 +care .* 390\.061$" out.txt
ok "  transmla's row is convert mla's 380.794 (cli_bf16_hold; was 380.671)" grep -qE "^ +16 +transmla .* 380\.794$" out.txt

# ---- made in compute f32, measured in compute bf16: the BF16 export's number there too
run -e "load demo-llama-bf16 as d; $CAL; convert mla kv-rank 16 ppl off; export e2; set compute bf16; $PPL to p2.csv; check; check e2; load e2 as x; $PPL to x2.csv"
[ "$(rc)" = 0 ] || fail "rc $(rc) [$(cat err.txt)]"
ok "f32-made, bf16-measured: check, check DIR: one number ($(afters))" [ "$(afters)" = "381.187 381.187 " ]
ok "  ppl of the session is the reloaded BF16 export's, bit for bit" cmp -s p2.csv x2.csv
ok "  5.94329097" grep -q "^42,5.94329097,381.187343" p2.csv
ok "  ppl says so under its headline" grep -q "^made in compute f32: run as its BF16 export reads back" out.txt

# ---- made in compute bf16, checked in compute f32: which mode's numbers these are, said
run -e "load demo-llama-bf16 as d; set compute bf16; $CAL; convert mla kv-rank 16 ppl off; set compute f32; check; $PPL"
ok "bf16-made, f32-checked: check says the layers are the BF16 export's" \
   grep -q "the conversion was made in compute bf16: its layers are its BF16 export's" out.txt
ok "  and ppl under its headline" grep -q "^made in compute bf16: its layers are its BF16 export's" out.txt

# ---- qk-norm keep in compute bf16 (float32 layers; its attnlab export runs BF16 products): said
run -e "synth family qwen3 $T/q3 dtype bf16"
run -e "load $T/q3 as q; set compute bf16; $CAL; convert mla kv-rank 16 qk-norm keep ppl off"
ok "qk-norm keep in bf16: says why its attnlab export's number differs" grep -q "^note: qk-norm keep in compute bf16" out.txt

# ---- gpt-oss (sinks: no DeepSeek-V3 form): float32 layers, as its `format attnlab` export (F32) writes them
run -e "synth family gpt_oss $T/oss dtype bf16"
run -e "load $T/oss as o; set compute bf16; $CAL; convert mla kv-rank 16; export eo format attnlab; check eo"
[ "$(rc)" = 0 ] || fail "rc $(rc) [$(cat err.txt)]"
set -- $(afters)
ok "gpt-oss: the session's after and check DIR of its attnlab export within 1e-4 ($1 / $2; were 5e-4 apart)" \
   near "${1:-0}" "${2:-1}" 1e-4
ok "  no BF16 values widened (the layers are float32)" sh -c '! grep -q "values widened" out.txt'
ok "  its dtype line names format attnlab's default, not 'the source's dtype' (BF16)" \
   grep -q "^attention tensors written in float32 (format attnlab's default" out.txt

# ---- Qwen2's q/k/v biases (a Llama folder given biases: tests/qwen2_bias.py)
if python3 -c 1 2>/dev/null; then
    run -e "synth demo-llama $T/lb dtype bf16"
    python3 "$ATTNLAB_SRC/tests/qwen2_bias.py" "$T/lb" "$T/q2" || fail "qwen2_bias.py"
    run -e "load $T/q2 as q; set compute bf16; $CAL; convert mla kv-rank 16 q-rank 64; $PPL to pq.csv; check; export eq; check eq; load eq as x; $PPL to xq.csv"
    [ "$(rc)" = 0 ] || fail "rc $(rc) [$(cat err.txt)]"
    set -- $(afters)
    ok "qwen2 q-rank: convert's after, check, check DIR: one number ($*)" same3 "$@"
    ok "  ppl of the session is the reloaded BF16 export's (biases in BF16), bit for bit" cmp -s pq.csv xq.csv
    ok "  no q_proj bias note (q_a_proj.bias carries it)" sh -c '! grep -q "^note: q_proj bias" out.txt'
    run -e "load $T/q2 as q; set compute bf16; $CAL; convert mla kv-rank 16; $PPL to pn.csv; check; export en; check en; load en as x; $PPL to xn.csv"
    [ "$(rc)" = 0 ] || fail "rc $(rc) [$(cat err.txt)]"
    set -- $(afters)
    ok "qwen2 no q latent: check and check DIR give the engines' number, without the q_proj bias ($*)" engines "$@"
    ok "  the session keeps the bias: its ppl is attnlab's reading of the export, bit for bit" cmp -s pn.csv xn.csv
    ok "  said by convert and export" [ "$(grep -c "^note: q_proj bias: the session's perplexity" out.txt)" = 2 ]
else
    echo "SKIP: the Qwen2 cases (no python3)"
fi
cli_done
