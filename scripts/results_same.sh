#!/usr/bin/env bash
# results_same.sh OLD_BIN NEW_BIN [WORKDIR] -- runs scripts/results_digest.sh with each binary
# (into WORKDIR/old and WORKDIR/new: paths of the same length, so the two batteries see the same
# strings; WORKDIR defaults to a fresh folder under ${TMPDIR:-/tmp}) and compares the digests:
# every case file, exports.sha256, figures.sha256, synth.sha256 and families.txt. Prints
# "identical: N cases, ..." and exits 0, or names each differing case (with the first lines of
# its diff) and each differing file and exits 1. A case, file or family that only NEW has (a
# family added since) is listed as added and is not a difference; one that NEW lost is.
# Either binary may be an existing digest folder instead (e.g. /work/digest-base), compared as
# it is (a digest made into a folder whose path has the same length as the other's).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OLD_BIN|OLD_DIGEST NEW_BIN|NEW_DIGEST [WORKDIR]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
wd=${3:-}
[ -d "$1" ] && [ -d "$2" ] || { [ -n "$wd" ] || wd=$(mktemp -d "${TMPDIR:-/tmp}/results_same.XXXXXX"); mkdir -p "$wd"; }
if [ -d "$1" ]; then old=$(cd "$1" && pwd)
else old=$wd/old; "$here/results_digest.sh" "$1" "$old" >/dev/null; fi
if [ -d "$2" ]; then new=$(cd "$2" && pwd)
else new=$wd/new; "$here/results_digest.sh" "$2" "$new" >/dev/null; fi

bad=0 added=0
note() { echo "$*"; }
# the cases
for f in "$old"/cases/*.txt; do
    n=$(basename "$f" .txt)
    if [ ! -f "$new/cases/$n.txt" ]; then note "MISSING case $n (only in OLD)"; bad=$((bad + 1))
    elif ! cmp -s "$f" "$new/cases/$n.txt"; then
        note "DIFFERS case $n:"
        diff "$f" "$new/cases/$n.txt" | head -12 | sed 's/^/    /' || true
        bad=$((bad + 1))
    fi
done
for f in "$new"/cases/*.txt; do
    [ -f "$old/cases/$(basename "$f")" ] || { note "added case $(basename "$f" .txt)"; added=$((added + 1)); }
done
# the hashed files and the family list: a line per file, keyed by path
for s in exports.sha256 figures.sha256 synth.sha256 families.txt; do
    while read -r l; do
        case $l in
            "<"*) note "DIFFERS $s: ${l#< }"; bad=$((bad + 1)) ;;
            ">"*) p=${l#> }; p=${p#*  }
                  if grep -qF "  $p" "$old/$s" 2>/dev/null && [ "$s" != families.txt ]; then :
                  else note "added $s: ${l#> }"; added=$((added + 1)); fi ;;
        esac
    done < <(diff "$old/$s" "$new/$s" | grep '^[<>]' || true)
done
nc=$(ls "$old/cases" | wc -l)
if [ "$bad" -eq 0 ]; then
    echo "identical: $nc cases, $(wc -l <"$old/exports.sha256") exported files, $(wc -l <"$old/figures.sha256") figures and tables, $(wc -l <"$old/synth.sha256") synthetic files ($added added in NEW; digests in $old and $new)"
    exit 0
fi
echo "DIFFERENT: $bad differences over $nc cases ($added added in NEW; digests in $old and $new)"
exit 1
