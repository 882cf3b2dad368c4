#!/usr/bin/env bash
# cli_check_session.sh -- issue 32: `check` with no folder after `convert mla` writes no scratch export.
# It used to export the conversion in float32 to /tmp/attnlab-check-XXXXXX (twice a BF16 model's bytes)
# and read it back; now the stock DeepSeek-V3 layers are built in memory as `export` builds them and
# checked there. Its numbers are the scratch route's (recorded from it, main abbcb3b): every per-layer
# error column, the perplexity in f32 mode, the notes (MoE routing); in bf16 mode those of the BF16
# export's `check DIR`; nothing is created on disk (strace, where it runs).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-check-session shared-cache
cd "$T" || exit 1
awk 'BEGIN { s = 7; for (i = 0; i < 300; i++) { s = (s * 1103515245 + 12345) % 2147483648; printf "%d ", int(s / 65536) % 256 } print "" }' > ids.txt
CONV="convert mla kv-rank 48 rope-dim 16 ids ids.txt samples 4 seqlen 32 ppl off"

# ---- demo-llama, f32: the scratch route's table and perplexity
run -e "load demo-llama as d; $CONV; check to llama.csv"
[ "$(rc)" = 0 ] || fail "check: rc $(rc) [$(cat err.txt)]"
cat > want.csv <<'EOF'
layer,score_err,out_err,out_err_transformers,out_err_vllm,out_err_sglang,out_err_attnlab
0,0.845952806,0.608113179,0.608113179,0.608113179,0.608113179,0.608113179
1,0.727192476,0.449252529,0.449252529,0.449252529,0.449252529,0.449252529
2,0.757455064,0.404739318,0.404739318,0.404739318,0.404739318,0.404739318
3,0.715124514,0.344860706,0.344860706,0.344860706,0.344860706,0.344860706
EOF
ok "per-layer errors: the scratch export's, every engine column" cmp -s llama.csv want.csv
ok "perplexity: the scratch export's" grep -q "316.602 before (source), 446.22 after (the export, as stock engines run it) (+40.94%; log 5.75765 -> 6.10081)" out.txt
ok "says it wrote nothing" grep -q "^evaluated as its float32 DeepSeek-V3 export reads back, built in memory (no export written" out.txt
ok "  not the scratch folder" hasnt "$(cat out.txt)" "scratch folder"
ok "the eps note" grep -q "^rms_norm_eps: the export's 1e-06 is not the source's 1e-05" out.txt

# ---- a softmax top-k MoE source with Q/K norms folded: its table and the routing note
"$B" -e "synth family qwen3_moe q3m" > /dev/null 2>&1
run -e "load q3m; convert mla kv-rank 16 qk-norm fold ids ids.txt samples 4 seqlen 32 ppl off; check to q3m.csv"
cat > want.csv <<'EOF'
layer,score_err,out_err,out_err_transformers,out_err_vllm,out_err_sglang,out_err_attnlab
0,0.613380606,0.717072698,0.717072698,0.717072698,0.717072698,0.717072698
1,0.59291697,0.585996342,0.585996342,0.585996342,0.585996342,0.585996342
2,0.587155459,0.459414254,0.459414254,0.459414254,0.459414254,0.459414254
EOF
ok "qwen3_moe: the scratch export's table" cmp -s q3m.csv want.csv
ok "qwen3_moe: its perplexity" grep -q "394.057 before (source), 329.814 after" out.txt
ok "qwen3_moe: the routing note" grep -q "^MoE routing: transformers scores the DeepSeek-V3 router with a sigmoid" out.txt

# ---- bf16 mode on this BF16 source: the conversion is held in BF16 as its BF16 export stores it (tmla_hold.h), so
#      check's table and perplexity are `check DIR`'s of the BF16 export, bit for bit (they ran the layers in float32
#      before, 445.783 +- 2e-4, 1e-4 from that export; tests/cli_bf16_hold.sh)
# (pinned on the vdpbf16ps token lanes, ATTNLAB_AMX=0: the AMX tiles sum in another order, and the roundings of
#  bf16 mode's activations carry that on; the tables' agreement is checked on them too, below)
ATTNLAB_AMX=0 run -e "set compute bf16; load demo-llama as d; $CONV; check to b.csv; export eb; check eb to eb.csv"
ok "bf16: the BF16 export's table" cmp -s b.csv eb.csv
ok "bf16: layer 3's errors as that export's" grep -q "^3,0.715287612,0.345302213,0.345302213" b.csv
ok "bf16: says BF16" grep -q "^evaluated as its BF16 DeepSeek-V3 export reads back, built in memory" out.txt
ok "bf16: the perplexity of that export (445.653), once in memory and once read back" \
   [ "$(grep -c "316.234 before (source), 445.653 after (the export" out.txt)" = 2 ]
if grep -q amx_bf16 /proc/cpuinfo 2>/dev/null; then
  rm -rf eb b.csv eb.csv
  run -e "set compute bf16; load demo-llama as d; $CONV; check to b.csv; export eb; check eb to eb.csv"
  ok "bf16 on the AMX tiles: the BF16 export's table" cmp -s b.csv eb.csv
fi

# ---- nothing created on disk by check (the old route made a folder and wrote three files)
if strace -f -o /dev/null true 2>/dev/null; then
    created() { strace -f -qq -e trace=mkdir,mkdirat,openat,creat -o st.txt "$B" -e "$1" > /dev/null 2>&1
                grep -E 'mkdir|O_CREAT|creat\(' st.txt | grep -cv ENOENT; }
    a=$(created "load demo-llama as d; $CONV")
    b=$(created "load demo-llama as d; $CONV; check")
    ok "check creates no file or folder ($a without it, $b with)" [ "$a" = "$b" ]
else
    echo "strace cannot run here: the file count is not checked"
fi
cli_done
