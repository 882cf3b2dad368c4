#!/usr/bin/env bash
# cli_nr2_lint_verdict.sh -- (nur's review, trust) `lint` of a folder without tokenizer files said "loads" for vLLM
# and SGLang and, in a warning, that they start only with --skip-tokenizer-init: two answers. Now one verdict:
# "loads with --skip-tokenizer-init (or --tokenizer naming the source)"; transformers (the weights load) keeps
# "loads". stories260K-hf holds a llama2.c tok512.bin only. FAILS on 3e93937 ("loads").
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K-hf
cli_setup /tmp/attnlab-cli-nr2-lint-verdict shared-cache
cd "$T" || exit 1
out=$(e "lint $M/stories260K-hf")
V="loads with --skip-tokenizer-init (or --tokenizer naming the source)"
ok "vLLM: one verdict: $(grep '^vLLM' <<<"$out")" has "$out" "^vLLM  *LlamaForCausalLM  *$V"
ok "SGLang: one verdict" has "$out" "^SGLang  *LlamaForCausalLM  *$V"
ok "transformers: loads" has "$out" "^transformers  *LlamaForCausalLM  *loads *$"
e "lint $M/stories260K-hf to l.csv" >/dev/null
ok "the table's value says it too" grep -q "^vLLM,LlamaForCausalLM,$V" l.csv
cli_done
