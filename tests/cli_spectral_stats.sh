#!/usr/bin/env bash
# cli_spectral_stats.sh -- spectral health through `attnlab -e` on demo-gpt2 (F32, no RoPE: both
# pairs fuse): `ranks vo metrics` gives per head and matrix the stable rank of the fused map equal
# to one computed here from the explicitly formed product of `fused a` @ `fused b` (stable_rank.awk:
# ||W||_F^2 of W formed, sigma_1 by power iteration), the planted fused-low layer 2 reads rank 4
# with 4 eigenvalues above the MP edge, `spectrum ... stats` and Lua give the same row, `plot esd`
# writes a PNG and prints the fit of that row, `summary` (and the terminal past 64 rows) gives one
# row per layer and matrix, and the misuses are errors.
set -u
. "$(dirname "$0")/lib_cli.sh"
AWK_SR=$(cd "$(dirname "$0")" && pwd)/stable_rank.awk
cli_setup /tmp/attnlab-cli-spectral-stats shared-cache
cd "$T" || exit 1
unset DISPLAY
# col FILE MATRIX LAYER HEAD NAME: column NAME of the metrics CSV row (layer, head, matrix)
col() {
    awk -F, -v m="$2" -v l="$3" -v h="$4" -v c="$5" 'NR == 1 { for (i = 1; i <= NF; i++) ix[$i] = i; next }
        $(ix["layer"]) == l && $(ix["head"]) == h && $(ix["matrix"]) == m { print $(ix[c]) }' "$1"
}
# near A B REL: A and B numbers, |A - B| <= REL |B|
near() {
    awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { num = "^-?[0-9.]+(e[-+]?[0-9]+)?$"; if (a !~ num || b !~ num) exit 1
        d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b; exit !(d <= r * s) }'
}

# ---- the fused map's stable rank against the formed product
r=$(e "load demo-gpt2; ranks vo layer 0 metrics to $T/m.csv; ranks vo layer 2 metrics to $T/m2.csv; fuse vo layer 0 head 3; fused a to $T/a.csv; fused b to $T/b.csv")
[ -s m.csv ] && [ -s a.csv ] && [ -s b.csv ] || fail "metrics / factors not written [$r]"
[ "$(head -1 m.csv)" = "layer,head,matrix,rank,stable_rank,entropy_rank,participation,norm,alpha,alpha_sigma,xmin,ks,tail,mp_edge,spikes" ] \
    || fail "metrics header [$(head -1 m.csv)]"
[ "$(grep -c ',V,' m.csv) $(grep -c ',O,' m.csv) $(grep -c ',VO,' m.csv)" = "8 8 8" ] || fail "8 heads x V, O, VO rows [$(wc -l <m.csv)]"
read -r sr s1 < <(awk -f "$AWK_SR" a.csv b.csv)
ok "stable rank of the formed product" near "$(col m.csv VO 0 3 stable_rank)" "$sr" 1e-6
ok "norm = sigma_1 of the formed product" near "$(col m.csv VO 0 3 norm)" "$s1" 1e-6
[ "$(col m.csv VO 0 3 rank)" = 32 ] || fail "VO L0 H3 rank at 0.999: $(col m.csv VO 0 3 rank)"

# ---- the planted fused-low layer 2: VO rank 4 over a floor at 0.3% of sigma_1
ok "planted rank 4: stable rank 4" near "$(col m2.csv VO 2 5 stable_rank)" 4 1e-3
ok "planted rank 4: participation 4" near "$(col m2.csv VO 2 5 participation)" 4 1e-3
[ "$(col m2.csv VO 2 5 spikes)" = 4 ] || fail "planted rank 4: $(col m2.csv VO 2 5 spikes) above the MP edge"
[ "$(col m2.csv VO 2 5 rank)" = 4 ] || fail "planted rank 4: rank $(col m2.csv VO 2 5 rank)"

# ---- spectrum ... stats and Lua give the same row
r=$(e "load demo-gpt2; spectrum o layer 0 head 3 stats to $T/s.csv")
ok "spectrum stats = metrics row (stable rank)" near "$(col s.csv O 0 3 stable_rank)" "$(col m.csv O 0 3 stable_rank)" 1e-9
ok "spectrum stats = metrics row (alpha)" near "$(col s.csv O 0 3 alpha)" "$(col m.csv O 0 3 alpha)" 1e-9
cat >m.lua <<'LUA'
attn.load("demo-gpt2")
local rows = attn.ranks("vo", {layer = 0, metrics = true})
print(#rows, rows[12].matrix, rows[12].head, string.format("%.9g", rows[12].stable_rank))
LUA
r=$("$B" m.lua 2>&1 </dev/null)
read -r n mat head lsr <<<"$(tail -1 <<<"$r")"
[ "$n $mat $head" = "24 VO 3" ] || fail "Lua: 24 rows, row 12 VO of head 3 [$r]"
ok "Lua row 12 = the CSV's" near "${lsr:-}" "$(col m.csv VO 0 3 stable_rank)" 1e-8

# ---- QK fuses on GPT-2: Q, K, QK rows
r=$(e "set format csv; load demo-gpt2; ranks qk layer 1 metrics" 2>/dev/null)
[ "$(grep -c '^1,[0-9],QK,' <<<"$r") $(grep -c '^1,[0-9],Q,' <<<"$r") $(grep -c '^1,[0-9],K,' <<<"$r")" = "8 8 8" ] \
    || fail "qk metrics rows [$r]"

# ---- plot esd: a PNG, the fit of the metrics row
r=$(e "load demo-gpt2; plot esd o layer 0 head 3 to $T/esd.png; plot esd vo layer 1 head 0 to $T/esd1.svg")
is_png esd.png || fail "esd.png is not a PNG [$r]"
is_svg esd1.svg || fail "esd1.svg is not an SVG [$r]"
a=$(col m.csv O 0 3 alpha)
grep -q "^W_O: alpha $(printf '%.3g' "$a") (tail of $(col m.csv O 0 3 tail) from xmin" <<<"$r" || fail "plot esd's fit is the metrics row's (alpha $a) [$r]"
grep -q "^fused W_V W_O: no power-law fit (6 eigenvalues; it needs 10); MP edge" <<<"$r" || fail "planted rank 6: no fit [$r]"

# ---- misuses
r=$(e "load demo-gpt2; ranks vo metrics order rank")
grep -q "metrics. rows are in head order; drop .order rank" <<<"$r" || fail "metrics + order rank [$r]"

# ---- summary: one row per layer and matrix (the terminal's view past 64 rows; the result keeps every row)
r=$(e "set format csv; load demo-gpt2; ranks vo all metrics summary" 2>/dev/null)
[ "$(grep -c '^[0-3],\(V\|O\|VO\),8,' <<<"$r")" = 12 ] || fail "summary: 12 rows of 8 heads [$r]"
grep -q '^2,VO,8,4,4\.000[0-9]*,' <<<"$r" || fail "summary: layer 2 VO median rank 4, stable rank 4 [$r]"
awk -F, '$1 == 1 && $2 == "VO" && $4 == 19 && $5 > 18.999 && $5 < 19.001 && $9 == "" && $10 == 0 { f = 1 } END { exit !f }' <<<"$r" \
    || fail "summary: planted equal values, no alpha [$r]"
r=$(e "load demo-gpt2; ranks vo all metrics")
grep -q "^(96 rows: one row per layer and matrix shown" <<<"$r" || fail "terminal brief past 64 rows [$r]"
[ "$(grep -c '^ *[0-3]  *\(V\|O\|VO\)  ' <<<"$r")" = 12 ] || fail "terminal brief: 12 rows [$r]"
r=$(e "load demo-gpt2; plot esd vo layer 1")
grep -q "plot esd needs a layer and a head" <<<"$r" || fail "plot esd without a head [$r]"
cli_done
