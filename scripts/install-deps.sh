#!/usr/bin/env bash
# Installs attnlab's build dependencies from Debian 12 packages (skips apt when all are present).
# --no-install-recommends matters: PLplot's recommends replace the Lua 5.4 interpreter with 5.1.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libreadline-dev libplplot-dev plplot-driver-cairo
      libopenblas-dev liblapacke-dev liblua5.4-dev lua5.4 libcjson-dev)
have_all() {
  command -v cmake >/dev/null && command -v cc >/dev/null && command -v pkg-config >/dev/null || return 1
  pkg-config --exists lua5.4 plplot openblas lapacke libcjson readline || return 1
  ls /usr/lib/*/plplot*/drivers/cairo.so >/dev/null 2>&1 || return 1
}
if have_all; then
  echo "install-deps: all dependencies present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
have_all || { echo "install-deps: packages installed but a dependency is still missing" >&2; exit 1; }
echo "install-deps: done"
