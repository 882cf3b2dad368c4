# lib_cli.sh -- helpers shared by the shell tests (sourced, never run; the name keeps it out of
# the tests/cli_*.sh glob). cli_setup DEFAULT_TMP makes a fresh scratch folder $T (from
# $ATTNLAB_TMP, else DEFAULT_TMP) with cache and home inside it; ok NAME CMD... records a check
# in $pass / $fail; has / hasnt TEXT PATTERN grep a string; png_size FILE prints "WxH" from the
# IHDR chunk; is_png FILE tests the signature; cli_done prints the tally and sets the status.

# cli_setup DEFAULT_TMP: $T fresh, ATTNLAB_CACHE / ATTNLAB_HOME inside it, counters zeroed.
cli_setup() {
    : "${ATTNLAB:?ATTNLAB must name the attnlab binary}"
    T=${ATTNLAB_TMP:-$1}
    rm -rf "$T"
    mkdir -p "$T"
    export ATTNLAB_CACHE="$T/cache" ATTNLAB_HOME="$T/home"
    pass=0
    fail=0
}

# ok NAME CONDITION...: records a check.
ok() {
    local name=$1
    shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $name" >&2; fi
}
has() { grep -q -- "$2" <<<"$1"; }
hasnt() { ! grep -q -- "$2" <<<"$1"; }

# png_size FILE: "WxH" from the IHDR chunk.
png_size() {
    local b
    b=($(od -An -tu1 -j16 -N8 "$1"))
    echo "$(((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]))x$(((b[4] << 24) | (b[5] << 16) | (b[6] << 8) | b[7]))"
}
is_png() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = "211PNG" ]; }

# cli_done: prints "N passed, N failed"; the status is 0 when none failed (use as the last line).
cli_done() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
