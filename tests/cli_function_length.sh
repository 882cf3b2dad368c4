#!/usr/bin/env bash
# cli_function_length.sh -- the long functions issue 26 cut at their phases stay cut: each one
# named below (the entry point and every phase) is at most 40 lines in its file, measured from
# the line that names it at column 0 to its closing "}" at column 0. First the measure is shown
# on a small planted file, so a function that grows back (or a name that no longer matches)
# fails instead of passing unmeasured.
set -u
. "$ATTNLAB_SRC/tests/lib_cli.sh"
cli_setup /tmp/attnlab-cli-function-length
MAX=40

# fn_lengths FILE...: "LINES NAME" for each function defined at column 0 (a signature with "(",
# no "=", its body opened by a "{" that ends a line and closed by a "}" at column 0).
fn_lengths() {
    awk 'FNR == 1 { pending = 0; infn = 0 }
         !infn && !pending && /^[A-Za-z_][^=;]*\(/ && !/^(typedef|struct|enum|union)[ {]/ {
             s = $0; sub(/\(.*/, "", s); n = split(s, w, /[ *]+/); name = w[n]; start = FNR; pending = 1 }
         pending && /;[ \t]*$/ && !/\{/ { pending = 0 }
         pending && /\{[ \t]*$/ { infn = 1; pending = 0 }
         infn && /^}/ { print FNR - start + 1, name; infn = 0 }' "$@"
}

# ---- planted: a 3-line function, a two-line signature, a prototype, a table, a 45-line one.
P="$T/planted.c"
{
    printf 'static int small(int x) {\n    return x;\n}\n'
    printf 'int proto(int);\n'
    printf 'static const int table[] = {\n    1, 2,\n};\n'
    printf 'static int two_lines(int a,\n                     int b) {\n    return a + b;\n}\n'
    printf 'int *big(void) {\n'
    for i in $(seq 1 43); do printf '    f(%d);\n' "$i"; done
    printf '}\n'
} >"$P"
got=$(fn_lengths "$P" | tr '\n' ';')
ok "the measure counts planted functions [$got]" [ "$got" = "3 small;4 two_lines;45 big;" ]

# ---- the functions cut at their phases (file: names)
check_file() {
    local file=$1
    shift
    local lens
    lens=$(fn_lengths "$ATTNLAB_SRC/$file")
    for name in "$@"; do
        local n
        n=$(awk -v f="$name" '$2 == f { print $1 }' <<<"$lens")
        ok "$file: $name is defined (measured: '${n}')" [ -n "$n" ]
        [ -n "$n" ] && ok "$file: $name is $n lines (at most $MAX)" [ "$n" -le "$MAX" ]
    done
}
check_file commands/registry.c cmd_parse_tokens parse_top parse_subs bind_params parse_keyword \
    parse_positional unexpected_arg parse_args parse_defaults convert convert_int convert_float convert_enum \
    convert_range
check_file core/methods/tpa.c tpa_load manifest_read manifest_dims manifest_rope manifest_meta load_layers set_totals \
    tpa_factorize tpa_factorize_check tpa_work_unfold tpa_work_gram tpa_ctx_form_a tpa_ctx_form_b load_layer \
    load_dense_qo load_inv_freq
check_file core/analysis/farr.c farr_group_analyse group_stack_svd group_new group_profiles group_rank_at \
    group_bias group_bias_qk group_bias_fold_o farr_truncate truncate_opts truncate_model_max \
    plan_new plan_totals
check_file commands/cmd_plot_compare.c cmd_plot_compare_budgets budgets_sweep budgets_reused budgets_curves \
    budgets_draw
check_file commands/cmd_convert.c cmd_convert_mla mla_args_opts mla_describe mla_ppl mla_report_table
check_file commands/cmd_tpa.c cmd_tpa_convert tpa_args_opts tpa_describe tpa_report_table
check_file commands/complete.c cmd_complete complete_word last_segment complete_command walk_args offer_next
check_file commands/cmd_plot_mla.c cmd_plot_rope_removal removal_freqfolds removal_curves removal_subtitle \
    removal_data removal_draw removal_run
check_file core/linalg/spectra.c spectra_product_svd product_core product_right_vectors
check_file core/methods/synth_family.c synth_family_write recipe_config recipe_describe attn_gqa attn_mla mlp_moe \
    fam_mlp fam_layer fam_tensors

cli_done
