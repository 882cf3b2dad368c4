#!/usr/bin/env bash
# cli_calib_text_kw.sh -- calibrate takes the input forms ppl and check take: `calibrate text FILE` (was
# refused: "give FILE (text) or `ids FILE`") is `calibrate FILE`, the same statistics; a third word names
# the three forms. FAILS on 3e93937 (text refused).
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K-hf
cli_setup /tmp/attnlab-cli-calib-text-kw shared-cache
cd "$T" || exit 1
cp "${ATTNLAB_SRC:-$(dirname "$0")/..}/examples/tinystory.txt" story.txt || exit 1
L="load $M/stories260K-hf as s"
a=$(e "$L; calibrate story.txt samples 2 seqlen 64; calib save a.calib" 2>&1)
b=$(e "$L; calibrate text story.txt samples 2 seqlen 64; calib save b.calib" 2>&1)
ok "calibrate text FILE runs: $b" [ -s b.calib ]
# byte for byte but the header's 'created' time (to the second: two runs a second apart differ there)
same_calib() { python3 - "$1" "$2" <<'EOF'
import json, struct, sys
def parts(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.get('__metadata__', {}).pop('created', None)
    return h, b[8 + n:]
sys.exit(0 if parts(sys.argv[1]) == parts(sys.argv[2]) else 1)
EOF
}
ok "calibrate text FILE = calibrate FILE: the same statistics, byte for byte (but the time)" same_calib a.calib b.calib
nt() { grep -v ' tok/s)$' | sed 's/[ab]\.calib/X.calib/g'; }
ok "the same lines printed (but the timing)" [ "$(nt <<<"$a")" = "$(nt <<<"$b")" ]
out=$(e "$L; calibrate words story.txt" 2>&1)
ok "a third word names the forms: $out" has "$out" "calibrate: give FILE or \`text FILE\` (text), or \`ids FILE\` (token ids), not 'words' followed by 'story.txt'"
cli_done
