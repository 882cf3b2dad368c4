#!/bin/bash
# cli_json_writers.sh -- the JSON writers that one shared piece of code now serves keep every byte:
# the DeepSeek-V3 config.json of demo-r1 (bf16, f32, fp8) and of ds-r1-shape (one writer,
# synth.c's ds_config, with ds-r1-shape's hub-only keys) hash as they did when each had its own
# writer, and the FaRR manifest's count keys (export.c's add_counts) stand under the same names, in
# the same order, with the same numbers, in the truncation and in each of its layers. The hashes
# change only with SYNTH_VERSION or a deliberate change to a config: update them together.
# (dvc, s12: the config.json hashes moved with one deliberate change: whole numbers under members transformers
# declares float written N.0 -- attention_dropout 0.0, rope_theta 10000.0, routed_scaling_factor 1.0 -- and nothing else)
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-json-writers

sha() { sha256sum "$1" | cut -d' ' -f1; }

out=$(e "synth demo-r1 $T/bf dtype bf16; synth demo-r1 $T/f32 dtype f32; synth demo-r1 $T/fp8 dtype fp8; \
synth ds-r1-shape $T/ds layers 1")
ok "synth demo-r1 x3 + ds-r1-shape exit 0" test $? -eq 0
ok "demo-r1 bf16 config.json bytes" test "$(sha "$T/bf/config.json")" = \
    b89471280ca28e6c2c300f994993cc04afa3432b7ae45be63d5785a228801bce
ok "demo-r1 f32 config.json bytes" test "$(sha "$T/f32/config.json")" = \
    e34dbbab92fccab8fcaa93b2b6e470c15daff95bdd58017d339af1fa8ef5d791
ok "demo-r1 fp8 config.json bytes" test "$(sha "$T/fp8/config.json")" = \
    a82cf7c8c965b42fef1877e6de4241ca7862d238a91e2cccbe94e2fe85d5193c
ok "ds-r1-shape config.json bytes" test "$(sha "$T/ds/config.json")" = \
    c3122632f5dad88a9203256fbca63da3103c762269b4a0b0f78296420662163a
rm -rf "$T/ds"

# ---- FaRR manifest: the count keys at both levels
out=$(e "load demo-llama; truncate vo tau 0.9; export $T/farr")
ok "truncate + export exit 0" test $? -eq 0
got=$(python3 - "$T/farr/farr_manifest.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["truncations"][0]
L = t["per_layer"][0]
print(",".join(t), "|", ",".join(L))
print(t["params_before"], t["params_after"], t["kv_values_before"], t["kv_values_after"],
      sum(l["params_after"] for l in t["per_layer"]), sum(l["kv_values_after"] for l in t["per_layer"]))
print(L["params_before"], L["params_after"], L["kv_values_before"], L["kv_values_after"])
print(round(t["energy_min"], 6), round(t["energy_mean"], 6), round(t["rel_error_max"], 6))
print(round(L["energy_min"], 6), round(L["energy_mean"], 6), round(L["rel_error_max"], 6))
EOF
)
keys="kind,criterion,tau,policy,layers,fused_columns,params_before,params_after,kv_values_before,\
kv_values_after,energy_min,energy_mean,rel_error_max,rel_error_mean,per_layer | layer,ranks,params_before,\
params_after,kv_values_before,kv_values_after,energy_min,energy_mean,rel_error_max,rel_errors"
ok "manifest keys and their order [$(sed -n 1p <<<"$got")]" test "$(sed -n 1p <<<"$got")" = "$keys"
ok "truncation counts = sum of its layers [$(sed -n 2p <<<"$got")]" test "$(sed -n 2p <<<"$got")" = \
    "327680 190720 256 149 190720 149"
ok "layer 0 counts [$(sed -n 3p <<<"$got")]" test "$(sed -n 3p <<<"$got")" = "81920 69120 64 54"
ok "truncation energies and error [$(sed -n 4p <<<"$got")]" test "$(sed -n 4p <<<"$got")" = \
    "0.903031 0.944832 0.311399"
ok "layer 0 energies and error [$(sed -n 5p <<<"$got")]" test "$(sed -n 5p <<<"$got")" = \
    "0.918272 0.921142 0.285882"

# ---- the per-layer records written from field tables (ckpt_json_fields), the DeepSeek-V3 config
# of a TransMLA export (shared HF shape keys, the every-MLP-dense block merged from text) and the
# synthetic families' config.json (shared shape keys, the recipe's members merged): the bytes of
# each (manifests with the scratch folder's path replaced) as they were when each key was a line
# of code, and the key order of each record
R=$(cd "$T" && pwd -P) M=$(cd "${ATTNLAB_MODELS:-$(dirname "$0")/models}" && pwd -P)
shan() { sed -e "s|$R|@T@|g" -e "s|$M|@M@|g" "$1" | sha256sum | cut -d' ' -f1; }
out=$(e "synth family qwen3 $T/fq dtype f32; synth family gpt_neox $T/fn; load demo-llama; \
convert mla kv-rank 16; export $T/mla; convert tpa kv-rank 2; export $T/tpa")
ok "synth family x2, convert mla + tpa and export exit 0" test $? -eq 0
ok "synth family qwen3 config.json bytes" test "$(sha "$T/fq/config.json")" = \
    ffe77b37b49d60b3c2400155c35962fbfc3da363b2a7fcb3609598ddf7f25b2b
ok "synth family gpt_neox config.json bytes" test "$(sha "$T/fn/config.json")" = \
    cd43693ec75e3f5abc70f533c30b2f8275b15a84719f805fbaacab25cbe98665
ok "TransMLA config.json bytes" test "$(sha "$T/mla/config.json")" = \
    26c301558ee3c28b42c9dfa01214a996ec169641006abf0ac3551bc4a764e20f
# (cvp, s11: the conversion's BLAS at one thread per layer, two layers at a time: its full-precision joint_energy is the
# old build's at OPENBLAS_NUM_THREADS=1; the old 2f91e026... was its two-thread OpenBLAS's last bits)
ok "TransMLA manifest bytes" test "$(shan "$T/mla/attnlab_manifest.json")" = \
    123439ca63d27d5eeec5258ca1097e2da3605da567eee0773f53ef70c869aa1c
ok "TPA manifest bytes" test "$(shan "$T/tpa/tpa_manifest.json")" = \
    6792e13a5dedb0fa0bc8b8d3c0b6365cc087f06c82e179e0a341adc9b6b657cf
printf 'Once upon a time there was a little cat. The cat liked to play in the sun with a ball.\n%.0s' \
    1 2 3 4 5 6 7 8 >"$T/story.txt"
out=$(cd "$T" && e "load $M/stories260K/stories260K.bin; calibrate story.txt seqlen 32; kvsvd learn all rank 3; \
kvsvd eval; export kq; check kq")
ok "kvsvd learn + eval + export + check exit 0" test $? -eq 0
ok "KQ-SVD manifest bytes" test "$(shan "$T/kq/kvsvd_manifest.json")" = \
    01a71d29540c53ca16cbcf5baecfe26d5be2651a56e0c941dc6cd36aa7060492
ok "check reads the recorded errors back, all 15 rows [$(grep -o 'within.*rows' <<<"$out")]" \
    has "$out" "out_err within [0-9.e-]* of them in 15 layer-method rows\$"
got=$(python3 - "$T" <<'EOF'
import json, sys
d = sys.argv[1]
print(",".join(json.load(open(d + "/mla/attnlab_manifest.json"))["layers"][0]))
print(",".join(json.load(open(d + "/tpa/tpa_manifest.json"))["layers"][0]))
print(",".join(json.load(open(d + "/kq/kvsvd_manifest.json"))["methods"][0]["layers"][0]))
EOF
)
ok "TransMLA layer keys [$(sed -n 1p <<<"$got")]" test "$(sed -n 1p <<<"$got")" = "layer,alpha,rope_energy,\
joint_energy,score_rel_err,output_rel_err,joint_energy_other_balance,score_rel_err_other_balance,\
output_rel_err_other_balance,kv_norm_k,kv_norm_rel_err_bound"
ok "TPA layer keys [$(sed -n 2p <<<"$got")]" test "$(sed -n 2p <<<"$got")" = \
    "layer,k_energy,v_energy,k_err,v_err,score_err,out_err,sliding_window,attn_softcap"
ok "KQ-SVD layer keys [$(sed -n 3p <<<"$got")]" test "$(sed -n 3p <<<"$got")" = \
    "layer,rank_k,rank_v,cal_k_err,cal_q_err,cal_v_err,cal_kq_err,cal_vo_err,k_err,q_err,v_err,kq_err,out_err"

cli_done
