#!/usr/bin/env bash
# Configures and builds attnlab into build/ (warnings on; extra cmake args pass through).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j"$(nproc)"
