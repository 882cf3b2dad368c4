#!/bin/bash
# cli_plot_paper.sh -- figures a paper can use (issue 25, section 7), read back from the SVGs the
# commands write (PLplot's svg driver keeps every label as text): `plot energy` draws 1 - energy
# on a log axis by default (`scale linear` the old 0..1 axis, its file name ending in -linear);
# `plot compare` / `plot compare-budgets` fit a log y axis to the data and label it at round
# values (0.3, 0.4, ... rather than 0.1-10); `plot ranks-by-layer ... models` gives each model its
# own marker (demo-gpt2 no longer hides under demo-llama) and takes `normalize` (y = rank / head
# dim); rank grids number heads from 0 like every other figure. stdin is /dev/null throughout.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-plot-paper shared-cache
cd "$T" || exit 1
unset DISPLAY
# svg_labels FILE: the text of every <tspan> in FILE, one a line, character references decoded.
svg_labels() {
    perl -CS -ne 'while (/<tspan[^>]*>([^<]*)/g) { my $t = $1; $t =~ s/&#x([0-9a-fA-F]+);/chr(hex $1)/ge; print "$t\n"; }' "$1"
}
# numbers FILE: the labels of FILE that are plain numbers, sorted, space-separated.
numbers() { svg_labels "$1" | grep -E '^-?[0-9]+(\.[0-9]+)?$' | sort -g | uniq | tr '\n' ' '; }
# has_label FILE TEXT: FILE has a label exactly TEXT.
has_label() { svg_labels "$1" | grep -qxF -- "$2"; }

# ---- energy: log(1 - energy) by default, linear on request; the ranks are still reported
out=$(e "load demo-r1; plot energy vo layer 1 head 0 to $T/e.svg; plot energy vo layer 1 head 0 scale linear to $T/el.svg; set plot.dir $T/auto; plot energy vo layer 1 head 0 scale linear; plot energy vo layer 1 head 0")
has "$out" "wrote $T/e.svg" && has "$out" "wrote $T/el.svg" || fail "energy figures: [$out]"
has "$out" "effective rank at tau = 0.999: 6 of 32" || fail "energy reports demo-r1 layer 1 head 0's planted rank 6: [$out]"
has_label e.svg "1 − cumulative energy (log scale)" || fail "default energy axis is not 1 - energy (log): [$(svg_labels e.svg | tail -5 | tr '\n' '|')]"
has_label e.svg "1 − energy (right axis)" || fail "default energy legend"
has_label el.svg "cumulative energy (fraction of Σ σ²)" || fail "scale linear keeps the energy axis 0..1"
has_label e.svg "r = 6 at τ = 0.99" && has_label e.svg "r = 6 at τ = 0.999" || fail "both tau ranks written"
has "$out" "wrote $T/auto/demo-r1-energy-vo-L1-H0-linear.png" && has "$out" "wrote $T/auto/demo-r1-energy-vo-L1-H0.png" \
    || fail "auto names tell the scales apart: [$(grep wrote <<<"$out")]"
out=$(e "load demo-r1; plot energy vo layer 1 head 0 scale lin")
has "$out" "scale must be one of log|linear, got 'lin'" || fail "a bad scale is refused naming the choices: [$out]"

# ---- compare figures: log y fitted to the data, labelled at round values inside it
out=$(e "load demo-llama; compare kv-budget 96 tokens 32; plot compare to $T/c.svg; plot compare-budgets tokens 16 to $T/b.svg")
has "$out" "wrote $T/c.svg" && has "$out" "wrote $T/b.svg" || fail "compare figures: [$out]"
nb=$(numbers b.svg)
# the budget sweep's mean errors lie in 0.25-0.94: labels 0.3 .. 0.9, nothing of a 0.1-10 axis
for v in 0.3 0.4 0.5 0.6 0.7 0.8; do grep -qw -- "$v" <<<"$nb" || fail "compare-budgets: no y label $v: [$nb]"; done
for v in 0.1 0.2 10; do grep -qw -- "$v" <<<"$nb" && fail "compare-budgets: y label $v outside the data: [$nb]"; done
nc=$(numbers c.svg)
# per-layer errors 0.006 .. 0.8 (FaRR is near exact in layer 2): decade labels 0.01, 0.1, 1 as numbers
for v in 0.01 0.1 1; do grep -qw -- "$v" <<<"$nc" || fail "compare: no y label $v: [$nc]"; done
grep -qw -- 10 <<<"$nc" && fail "compare: a 10 label above data that end near 0.8: [$nc]"

# ---- ranks by layer over models: a marker per model; normalize
out=$(e "load demo-r1; plot ranks-by-layer vo models demo-r1,demo-llama,demo-gpt2 to $T/m.svg")
has "$out" "wrote $T/m.svg" || fail "models figure: [$out]"
for g in ● ■ ▲; do has_label m.svg "$g" || fail "models figure: no $g marker"; done
out=$(e "load demo-r1; plot ranks-by-layer vo models demo-r1,$ATTNLAB_MODELS/stories260K-hf normalize to $T/n.svg; plot ranks-by-layer vo normalize to $T/n1.svg")
has "$out" "wrote $T/n.svg" && has "$out" "wrote $T/n1.svg" || fail "normalize: [$out]"
has_label n.svg "effective rank / head dim (τ = 0.999)" || fail "normalize: y label"
has_label n.svg "stories260K-hf (head dim 8)" && has_label n.svg "demo-r1 (head dim 32)" || fail "normalize: the legend names the head dims"
nn=$(numbers n.svg)
grep -qw 32 <<<"$nn" && fail "normalize: a rank label 32 on a 0..1 axis: [$nn]"
grep -qw 1 <<<"$nn" || grep -qw 1.0 <<<"$nn" || fail "normalize: no label 1: [$nn]"
n1=$(numbers n1.svg)
for v in 0.2 0.4 0.6 0.8; do grep -qw -- "$v" <<<"$n1" || fail "normalize, one model: no label $v: [$n1]"; done

# ---- rank grids: heads 0..7 on demo-r1 (8 heads), sorted or in head order
out=$(e "load demo-r1; plot vo-ranks all order head to $T/g.svg; plot qk-ranks layers 1-3 to $T/g2.svg")
has "$out" "wrote $T/g.svg" && has "$out" "wrote $T/g2.svg" || fail "grids: [$out]"
for f in g.svg g2.svg; do
    ng=$(numbers $f)
    grep -qw 7 <<<"$ng" || fail "$f: no head 7 label: [$ng]"
    grep -qw 8 <<<"$ng" && fail "$f: a head 8 label on 8 heads (0-7): [$ng]"
done
cli_done
