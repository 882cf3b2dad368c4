#!/usr/bin/env bash
# cli_layers.sh -- the layer rules (tests/check_layers.lua) hold on this tree: no include or call
# cycles between files, core/'s folders base < io < linalg < model < analysis < methods < export <
# lint, then plots/ < commands/ < repl/, no command group includes another group's header, core/
# never prints or exits, config.json parsed once (core/model/config.c), core/'s exported functions
# carry their module's prefix (compare's cmp_* was the qsort comparators' prefix), no function takes more
# than 13 parameters (group_proj took 16). First the checker is shown to catch each kind of
# violation on a small planted tree.
set -u
. "$ATTNLAB_SRC/tests/lib_cli.sh"
cli_setup /tmp/attnlab-cli-layers
CHECK="$ATTNLAB_SRC/tests/check_layers.lua"
BUILD=$(dirname "$ATTNLAB")

# ---- planted tree: core/base/a <-> core/base/b call cycle, core/base -> core/model (up a core
# folder), commands/ -> repl/, group x includes group y, core/ calls printf. Objects built with cc
# into the CMake layout the checker reads.
P="$T/planted"
mkdir -p "$P/core/base" "$P/core/model" "$P/commands" "$P/repl"
printf 'int b(void);\nint a(void) { return b(); }\n' >"$P/core/base/a.c"
printf 'int a(void);\nint b(void) { return a() + 1; }\n' >"$P/core/base/b.c"
printf '#include <stdio.h>\nvoid loud(int n) { printf("x %%d", n); }\n' >"$P/core/base/loud.c"
printf 'int m(void) { return 3; }\n' >"$P/core/model/m.c"
printf 'int cmp_rows(void) { return 4; }\nint mc_two(void) { return 5; }\n' >"$P/core/model/mcmp.c"
printf 'static int many(int a, int b, int c, int d, int e, int f, int g, int h, int i, int j, int k, int l,\n                int m, int n) { return a + n; }\nint mc_many(void) { return many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14); }\n' >>"$P/core/model/mcmp.c"
printf 'int m(void);\nint up(void) { return m(); }\n' >"$P/core/base/up.c"
printf 'int r(void);\n' >"$P/repl/shell.h"
printf 'int r(void) { return 1; }\n' >"$P/repl/shell.c"
printf 'void *cJSON_Parse(const char *);\nstruct M { char *config_json; };\nvoid *again(struct M *m) { return cJSON_Parse(m->config_json); }\n' >"$P/commands/reparse.c"
printf '#include "shell.h"\nint x(void) { return r(); }\n' >"$P/commands/cmd_x.c"
printf 'int y(void);\n' >"$P/commands/cmd_y.h"
printf '#include "cmd_y.h"\nint y2(void) { return y(); }\n' >"$P/commands/cmd_x_more.c"
printf '#include "cmd_y.h"\nint y(void) { return 2; }\n' >"$P/commands/cmd_y.c"
for f in "$P"/*/*.c "$P"/core/*/*.c; do
    d=${f#"$P/"}; d=$(dirname "$d")
    mkdir -p "$P/build/CMakeFiles/lib.dir/$d"
    cc -c -I"$P/repl" -I"$P/commands" -o "$P/build/CMakeFiles/lib.dir/$d/$(basename "$f").o" "$f"
done
out=$(lua5.4 "$CHECK" "$P" "$P/build" 2>&1); rc=$?
ok "planted tree fails" [ "$rc" -ne 0 ]
ok "planted call cycle" has "$out" "cycle between core/base/a, core/base/b"
ok "planted core/base -> core/model" has "$out" "core/base/up calls m (core/model/m): core/base/ may not use core/model/"
ok "planted commands -> repl" has "$out" "commands/cmd_x .* (repl/shell): commands/ may not use repl/"
ok "planted group include" has "$out" "commands/cmd_x_more.c includes the y command group's header cmd_y.h"
ok "planted printf" has "$out" "core/base/loud calls printf"
ok "planted config re-parse" has "$out" "commands/reparse.c parses config.json text again"
ok "planted function outside its prefix's module" has "$out" "core/model/mcmp defines cmp_rows: a function's prefix names"
ok "a word that begins the module's name is its prefix" hasnt "$out" "defines mc_two"
ok "planted 14 parameters" has "$out" "core/model/mcmp.c: many takes 14 parameters (at most 13)"

# ---- this tree
out=$(lua5.4 "$CHECK" "$ATTNLAB_SRC" "$BUILD" 2>&1); rc=$?
echo "$out" | tail -n 40
ok "attnlab's layers hold" [ "$rc" -eq 0 ]
ok "objects were read" hasnt "$out" "no object files"
cli_done
