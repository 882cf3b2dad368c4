#!/usr/bin/env bash
# cli_export_dense.sh -- `export DIR format dense` after `truncate`: the source's family, config,
# tensor names, shapes and dtypes (no farr/ side files), loadable as the source's family;
# `check DIR` confirms the fused maps (per-head ranks of an MLA model: kept singular values equal
# the source's leading ones, nothing past the rank); a dense export of a GQA model loads and runs.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-export-dense shared-cache
cd "$T" || exit 1

# ---- MLA (one basis per head): truncate VO, export dense, check
"$B" -e "load demo-r1-f32 as r; truncate vo rank 4 policy model-max; export rd format dense; check rd; load rd as e; info" \
    >out.txt 2>err.txt || fail "dense export of demo-r1-f32: $(cat err.txt)"
grep -q "(format dense)" out.txt || fail "export narration: [$(cat out.txt)]"
[ -d rd/farr ] && fail "dense export has farr/ side files"
[ -s rd/config.json ] && [ -s rd/farr_manifest.json ] || fail "dense export files: [$(ls rd)]"
grep -q "PASS: the export's fused maps are the plan's" out.txt || fail "check of the dense export: [$(cat out.txt)]"
grep -q '"format":	"dense"' rd/farr_manifest.json || fail "manifest format"
grep -Eq "^model_type +deepseek_v3$" out.txt || fail "the export loads as the source's family: [$(cat out.txt)]"

# ---- GQA: dense export of a VO truncation (groups share a basis: rank checked) loads as llama
"$B" -e "load demo-llama as d; truncate vo rank 8; export ld format dense; check ld; load ld as e; info" \
    >out.txt 2>err.txt || fail "dense export of demo-llama: $(cat err.txt)"
grep -q "PASS" out.txt || fail "check of the GQA dense export: [$(cat out.txt)]"
[ -d ld/farr ] && fail "GQA dense export has farr/ side files"
grep -Eq "^model_type +llama$" out.txt || fail "GQA export loads as llama"

# ---- a truncated map is checked, not assumed: a factors export is no dense export
"$B" -e "load demo-r1-f32; truncate vo rank 4 policy model-max; export rf format factors" >/dev/null 2>err.txt \
    || fail "factors export: $(cat err.txt)"
[ -d rf/farr ] || fail "factors export keeps its side files"
cli_done
