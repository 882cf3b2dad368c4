#!/bin/bash
# cli_json_writers.sh -- the JSON writers that one shared piece of code now serves keep every byte:
# the DeepSeek-V3 config.json of demo-r1 (bf16, f32, fp8) and of ds-r1-shape (one writer,
# synth.c's ds_config, with ds-r1-shape's hub-only keys) hash as they did when each had its own
# writer, and the FaRR manifest's count keys (export.c's add_counts) stand under the same names, in
# the same order, with the same numbers, in the truncation and in each of its layers. The hashes
# change only with SYNTH_VERSION or a deliberate change to a config: update them together.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-json-writers

sha() { sha256sum "$1" | cut -d' ' -f1; }

out=$(e "synth demo-r1 $T/bf dtype bf16; synth demo-r1 $T/f32 dtype f32; synth demo-r1 $T/fp8 dtype fp8; \
synth ds-r1-shape $T/ds layers 1")
ok "synth demo-r1 x3 + ds-r1-shape exit 0" test $? -eq 0
ok "demo-r1 bf16 config.json bytes" test "$(sha "$T/bf/config.json")" = \
    fe6496c7e11cd6c570788f1b0737198cdd2cb4e692cf10fe702e42bad9722c38
ok "demo-r1 f32 config.json bytes" test "$(sha "$T/f32/config.json")" = \
    e3dc6154ff8f2e19f35df1b1af717bdcc14f83d21834ba776759551b106dc38a
ok "demo-r1 fp8 config.json bytes" test "$(sha "$T/fp8/config.json")" = \
    d22eb349d7636215dbef8aba04f3ee1493854e4ceb2504a44884cfbfaa392860
ok "ds-r1-shape config.json bytes" test "$(sha "$T/ds/config.json")" = \
    14e7c8d6d70cfec47d39763a0609688edce06a7c13179f7ba3ce6e5715aa25ba
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

cli_done
