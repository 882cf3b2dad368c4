#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the whole test suite with ctest; then builds again
# with AddressSanitizer + UBSan + LeakSanitizer (build-asan, -DATTNLAB_SANITIZE=ON) and runs the
# core unit tests there (ctest label "core": the tests that exercise core/ alone).
# Ends with a line "N passed, N failed" counting the ctest tests of both runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh

passed=0
failed_all=0
status=0
# run_ctest BUILD_DIR [ctest args...]: runs ctest there, adds its counts to passed / failed_all.
run_ctest() {
  local dir=$1 log summary failed total rc=0
  shift
  log=$(mktemp)
  ctest --test-dir "$dir" --no-tests=error --output-on-failure -j"$(nproc)" "$@" 2>&1 | tee "$log" || rc=$?
  summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  rm -f "$log"
  if [ -z "$summary" ]; then
    failed_all=$((failed_all + 1))
    status=1
    return
  fi
  failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$summary")
  total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$summary")
  passed=$((passed + total - failed))
  failed_all=$((failed_all + failed))
  [ "$rc" -eq 0 ] || status=$rc
}

run_ctest build
echo "== sanitizer build (ASan + UBSan + LeakSanitizer): core tests"
if cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTNLAB_SANITIZE=ON >/dev/null &&
   cmake --build build-asan -j"$(nproc)"; then
  run_ctest build-asan -L core
else
  echo "sanitizer build failed"
  failed_all=$((failed_all + 1))
  status=1
fi
echo "${passed} passed, ${failed_all} failed"
exit "$status"
