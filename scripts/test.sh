#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the whole test suite with ctest.
# Ends with a line "N passed, N failed" (counted in ctest tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
log=$(mktemp)
status=0
ctest --test-dir build --no-tests=error --output-on-failure -j"$(nproc)" 2>&1 | tee "$log" || status=$?
summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
rm -f "$log"
if [ -z "$summary" ]; then
  echo "0 passed, 1 failed"
  exit 1
fi
failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$summary")
total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$summary")
echo "$((total - failed)) passed, ${failed} failed"
exit "$status"
