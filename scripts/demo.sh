#!/usr/bin/env bash
# The main job on the demo model: installs the dependencies, builds, then on demo-r1 (a small
# DeepSeek-V3-layout FP8 checkpoint made on first use) computes the VO and QK rank tables,
# draws the model-wide VO grid and one layer's plot, truncates with FaRR and exports the result.
# Everything lands in out/ (or the folder given as $1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
dir=${1:-out}
mkdir -p "$dir"
build/attnlab -e "load demo-r1; info; \
  ranks vo all to $dir/demo-r1-vo-ranks.csv; ranks qk all to $dir/demo-r1-qk-ranks.csv; \
  plot vo-ranks all to $dir/demo-r1-vo-grid.png; plot vo-ranks layer 1 to $dir/demo-r1-vo-layer1.png; \
  truncate vo tau 0.999 policy layer-max; export $dir/demo-r1-farr force"
echo
echo "demo: wrote $dir/demo-r1-vo-ranks.csv, $dir/demo-r1-qk-ranks.csv, $dir/demo-r1-vo-grid.png,"
echo "      $dir/demo-r1-vo-layer1.png and the truncated checkpoint $dir/demo-r1-farr/"
