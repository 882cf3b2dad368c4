# lib_cli.sh -- helpers shared by every tests/cli_*.sh (sourced, never run; the name keeps it out
# of the tests/cli_*.sh glob). Source it first: . "$(dirname "$0")/lib_cli.sh"
#   cli_setup DEFAULT_TMP [shared-cache]  fresh scratch folder $T (from $ATTNLAB_TMP, else
#                        DEFAULT_TMP), $B = the attnlab binary, counters zeroed; cache and home
#                        inside $T, or with shared-cache those of the environment (ctest's
#                        shared cache: demo models written once)
#   ok NAME CMD...       records a check in $pass / $fail
#   fail MESSAGE         records a failed check: [ cond ] || fail "what, with [$(cat out.txt)]"
#   run ARGS...          runs attnlab: stdout in out.txt, stderr in err.txt, status in rc.txt;
#   rc                   prints that status
#   ppl_of CMDS          the last ppl the commands print (json), or "ERR: " and the error
#   near A B TOL         |A - B| <= TOL |B|;  max_err COL: the largest of column COL of check's rows
#   has / hasnt TEXT PATTERN   grep a string
#   png_size FILE        "WxH" from the IHDR chunk ("none" if too short); is_png / is_svg /
#                        is_pdf FILE test a file's signature
#   ppl_of CMDS          the last ppl the commands print (run with `set format json`), or ERR: the error
#   near A B TOL         true when |A - B| <= TOL |B|
#   cli_need_model PATH...  $M = $ATTNLAB_MODELS; skips the test (exit 77) unless each $M/PATH exists
#   cli_ids N FILE       N token ids, (i 37 + 11) mod 256 for i = 1..N, on one line into FILE
#   svg_texts FILE       the text elements of a PLplot SVG, one a line in drawing order (entities decoded)
#   cli_done             prints the tally and sets the status (use as the last line)

# cli_setup DEFAULT_TMP [shared-cache]
cli_setup() {
    : "${ATTNLAB:?ATTNLAB must name the attnlab binary}"
    B=$ATTNLAB
    T=${ATTNLAB_TMP:-$1}
    rm -rf "$T"
    mkdir -p "$T"
    cd "$T" || exit 1   # run's out.txt / err.txt / rc.txt are the test's own (ctest runs every script in one folder)
    [ "${2:-}" = shared-cache ] || export ATTNLAB_CACHE="$T/cache" ATTNLAB_HOME="$T/home"
    pass=0
    fail=0
}

# cli_need_model PATH...: $M := $ATTNLAB_MODELS; the test is skipped (exit 77) unless every $M/PATH exists (a model
# folder, or a file in it).
cli_need_model() {
    M="${ATTNLAB_MODELS:-}"
    local p
    for p in "$@"; do
        [ -n "$M" ] && [ -e "$M/$p" ] || { echo "SKIP: \$ATTNLAB_MODELS/$p absent"; exit 77; }
    done
}

# cli_ids N FILE: token ids 1..N as (i * 37 + 11) % 256, space-separated on one line, into FILE.
cli_ids() {
    local i
    for i in $(seq 1 "$1"); do echo $(((i * 37 + 11) % 256)); done | tr '\n' ' ' >"$2"
}

# ok NAME CONDITION...: records a check.
ok() {
    local name=$1
    shift
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $name" >&2; fi
}
# fail MESSAGE: records a failed check (the variable $fail counts them).
fail() { echo "FAIL: $*"; fail=$((fail + 1)); }
has() { grep -q -- "$2" <<<"$1"; }
hasnt() { ! grep -q -- "$2" <<<"$1"; }

# run ARGS...: attnlab with ARGS; stdout, stderr and the status in out.txt, err.txt, rc.txt.
run() { "$B" "$@" >out.txt 2>err.txt; echo $? >rc.txt; }
# e CMDS: attnlab -e CMDS, stdout and stderr together (no stdin)
e() { "$ATTNLAB" -e "$1" </dev/null 2>&1; }
rc() { cat rc.txt; }
# ppl_of CMDS: the last ppl the commands print (json), or ERR: the error (o.txt / e.txt keep the run).
ppl_of() {
    "$B" -e "set format json; $1" >o.txt 2>e.txt
    local p
    p=$(grep -o '"ppl": [0-9.e+-]*' o.txt | tail -1 | sed 's/"ppl": //')
    if [ -n "$p" ] && ! grep -q '^error' e.txt; then echo "$p"; else echo "ERR: $(grep -m1 '^error' e.txt)"; fi
}
# near A B TOL: |A - B| <= TOL |B|
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; if (b < 0) b = -b; exit !(d <= t * b) }'; }
# max_err COL: the largest value in column COL of check's per-layer rows in out.txt (after "check of")
max_err() { sed -n '/^check of/,$p' out.txt |
    awk -v c="$1" '$1 ~ /^[0-9]+$/ && NF >= c { if ($c + 0 > m) m = $c + 0 } END { printf "%g", m + 0 }'; }

# png_size FILE: "WxH" from the IHDR chunk (bytes 16..23, big-endian width and height).
png_size() {
    local b
    b=($(od -An -tu1 -j16 -N8 "$1"))
    [ "${#b[@]}" = 8 ] || { echo "none"; return; }
    echo "$(((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]))x$(((b[4] << 24) | (b[5] << 16) | (b[6] << 8) | b[7]))"
}
is_png() { [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; }
is_svg() { [ -s "$1" ] && head -c 400 "$1" | grep -q "<svg"; }
is_pdf() { [ -s "$1" ] && [ "$(head -c 5 "$1")" = "%PDF-" ] && tail -c 16 "$1" | grep -q "%%EOF"; }

# cli_done: prints "N passed, N failed" (or "all passed" / "N failed" when only fail was used);
# the status is 0 when none failed.
cli_done() {
    if [ "$pass" -gt 0 ]; then echo "$pass passed, $fail failed"
    elif [ "$fail" -eq 0 ]; then echo "all passed"
    else echo "$fail failed"; fi
    [ "$fail" -eq 0 ]
}

# svg_texts FILE: the text elements of a PLplot SVG (its svg driver writes text as <text>, each
# character an entity), one a line in the order drawn, entities decoded.
svg_texts() {
    python3 -c 'import html, re, sys
for m in re.finditer(r"<text.*?</text>", open(sys.argv[1]).read(), re.S):
    print(html.unescape(re.sub(r"<[^>]+>", "", m.group(0))).strip())' "$1"
}
