#!/bin/bash
# cli_role_names.sh -- code asks for a tensor by role, never spells its name (issue 26): no string
# literal in the files converted to roles holds a Hugging Face tensor name of the layout tables
# (core/model/family.c: "self_attn.q_proj", "mlp.down_proj", "input_layernorm", "embed_tokens",
# "lm_head", "wte", ...), as a whole dotted name or its ".weight" / ".bias" form. Comments and
# prose that names a tensor without its full layout name (a message's "kv_a_layernorm") may stay.
# The table's own names are read from family.c, so a layout added there is checked too.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-role-names
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$T" || exit 1

# the files that name tensors through roles only (add a file here once it is converted)
FILES="core/lint/lint.c core/model/gguf_arch.c core/export/gguf_convert.c"

# spelled DIR FILE...: "FILE:LINE: "literal" spells NAME" for every layout-table name in a literal
spelled() {
    python3 - "$@" <<'PY'
import re, sys
src, files = sys.argv[1], sys.argv[2:]
fam = open(src + "/core/model/family.c").read()
tables = fam[:fam.index("the family table */")]           # the role -> name tables, before the rows
names = set(re.findall(r'(?:N|OPT)\("([^"]+)"\)|\{"([^"]+)", (?:true|false), (?:true|false)\}', tables))
names = {a or b for a, b in names} - {"norm"}              # "norm" (model.norm) is also an English word
names = {n.replace(".%d.", ".") for n in names}            # experts: "experts.%d.w1" -> "experts.w1"
if len(names) < 40: print("only %d names read from family.c" % len(names)); sys.exit(0)
lit = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
for f in files:
    code = re.sub(r'/\*.*?\*/', lambda m: "\n" * m.group(0).count("\n"), open(src + "/" + f).read(), flags=re.S)
    code = re.sub(r'//[^\n]*', '', code)
    for ln, line in enumerate(code.split("\n"), 1):
        for s in lit.findall(line):
            s = re.sub(r'\.\d+\.', '.', s.replace(".%d.", ".").replace(".%zu.", "."))
            for n in names:
                if re.search(r'(?<![A-Za-z0-9_])' + re.escape(n) + r'(?![A-Za-z0-9_])', s):
                    print("%s:%d: \"%s\" spells %s" % (f, ln, s, n))
PY
}

found=$(spelled "$SRC" $FILES)
ok "no tensor name spelled in $FILES" [ -z "$found" ]
[ -z "$found" ] || echo "$found" | head -20
# the check finds a spelled name (a test that cannot fail is a defect)
mkdir -p probe/core/model probe/core/lint
cp "$SRC/core/model/family.c" probe/core/model/
printf 'static const char *a = "%%s.mlp.down_proj.weight", *b = "lm_head.weight";\n' >probe/core/lint/lint.c
probe=$(spelled probe core/lint/lint.c)
has "$probe" 'spells mlp.down_proj' && has "$probe" 'spells lm_head' || fail "the probe's names not found: [$probe]"
cli_done
