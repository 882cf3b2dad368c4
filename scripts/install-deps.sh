#!/usr/bin/env bash
# Installs attnlab's build dependencies from Debian 12 packages (skips apt when all are present).
# --no-install-recommends matters: PLplot's recommends replace the Lua 5.4 interpreter with 5.1.
# Then, for the test that runs GGUF exports in a real llama.cpp (tests/cli_llamacpp.sh), Debian's
# nodejs + npm and the npm package node-llama-cpp (prebuilt llama.cpp binaries for linux-x64),
# pinned, in two builds: the newest into $ATTNLAB_NODE_PREFIX (default ~/.local/share/attnlab/node)
# and the oldest 3.x whose llama.cpp has deepseek2 MLA (3.8.1, llama.cpp b5415; 3.7.0's b4980 has
# no MLA keys) into $ATTNLAB_NODE_OLD_PREFIX (default ~/.local/share/attnlab/node-3.8.1), both
# outside the repository; when an install fails (no network) the build still works and that
# test skips the missing build. Debian's
# python3-torch, likewise optional, for the test of scripts/attnlab_collect.py (tests/cli_collect.sh).
set -euo pipefail
NODE_LLAMA_CPP=node-llama-cpp@3.22.1     # ships llama.cpp release v0.5.0 (ggml-org/llama.cpp)
NODE_PREFIX=${ATTNLAB_NODE_PREFIX:-$HOME/.local/share/attnlab/node}
NODE_LLAMA_CPP_OLD=node-llama-cpp@3.8.1  # ships llama.cpp b5415: the oldest 3.x with deepseek2 MLA
NODE_OLD_PREFIX=${ATTNLAB_NODE_OLD_PREFIX:-$HOME/.local/share/attnlab/node-3.8.1}
pkgs=(build-essential cmake pkg-config libreadline-dev libplplot-dev plplot-driver-cairo
      libopenblas-dev liblapacke-dev liblua5.4-dev lua5.4 libcjson-dev libcurl4-openssl-dev)
have_all() {
  command -v cmake >/dev/null && command -v cc >/dev/null && command -v pkg-config >/dev/null || return 1
  pkg-config --exists lua5.4 plplot openblas lapacke libcjson readline libcurl || return 1
  ls /usr/lib/*/plplot*/drivers/cairo.so >/dev/null 2>&1 || return 1
}
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if have_all; then
  echo "install-deps: all build dependencies present"
else
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
  have_all || { echo "install-deps: packages installed but a dependency is still missing" >&2; exit 1; }
  echo "install-deps: build dependencies installed"
fi

# python3-torch (optional: only tests/cli_collect.sh, which runs scripts/attnlab_collect.py's
# statistics code, uses it; the collector itself runs wherever the user's PyTorch is)
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "install-deps: python3-torch present"
else
  { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends python3-torch; } \
    || echo "install-deps: could not install python3-torch: tests/cli_collect.sh will be skipped" >&2
fi

# node-llama-cpp (optional: only tests/cli_llamacpp.sh uses it), two builds
nlc_install() {   # PACKAGE PREFIX
  if [ -f "$2/node_modules/node-llama-cpp/dist/index.js" ]; then
    echo "install-deps: node-llama-cpp present in $2"
    return 0
  fi
  if ! command -v npm >/dev/null; then
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends nodejs npm; } \
      || echo "install-deps: could not install nodejs/npm: tests/cli_llamacpp.sh will be skipped" >&2
  fi
  if command -v npm >/dev/null && mkdir -p "$2" \
      && npm install --prefix "$2" --no-audit --no-fund "$1" >/dev/null; then
    echo "install-deps: $1 installed in $2"
  else
    echo "install-deps: $1 not installed: tests/cli_llamacpp.sh will skip that build" >&2
  fi
}
nlc_install "$NODE_LLAMA_CPP" "$NODE_PREFIX"
nlc_install "$NODE_LLAMA_CPP_OLD" "$NODE_OLD_PREFIX"
echo "install-deps: done"
