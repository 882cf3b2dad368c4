#!/usr/bin/env bash
# cli_nur_complete_demo.sh -- (nur's review) the REPL's tab completion of `load` offers the demo names but
# not the -f32 / -bf16 / -fp8 variants README's Models section lists (commands/complete.c offer_param,
# COMP_LOADABLE: only demo-r1, demo-llama, demo-gpt2, demo-kvnorm): "load demo-r1-<Tab><Tab>" lists
# nothing and "load demo-llama<Tab>" completes to "demo-llama " at once. Drives the REPL under tmux
# (skipped without it). FAILS on cb14092.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-nur-complete shared-cache
command -v tmux >/dev/null || { echo "SKIP: no tmux"; exit 77; }
S=attnlab-nur-complete-$$
tmux new-session -d -s "$S" -x 200 -y 40 "$B" || { echo "SKIP: tmux cannot start"; exit 77; }
sleep 1
tab() { tmux send-keys -t "$S" C-u; tmux send-keys -t "$S" "$1" Tab; sleep 0.5; tmux send-keys -t "$S" Tab; sleep 0.5
        tmux capture-pane -t "$S" -p; tmux send-keys -t "$S" C-u; }
out=$(tab "load demo-r1-")
ok "load demo-r1-<Tab><Tab> offers demo-r1-f32" has "$out" "demo-r1-f32"
ok "  and demo-r1-bf16" has "$out" "demo-r1-bf16"
out=$(tab "load demo-gpt2-")
ok "load demo-gpt2-<Tab><Tab> offers demo-gpt2-bf16" has "$out" "demo-gpt2-bf16"
out=$(tab "set compute ")
ok "control: set compute <Tab><Tab> offers bf16 (completion works here)" has "$out" "bf16"
tmux send-keys -t "$S" C-u "quit" Enter; sleep 0.3; tmux kill-session -t "$S" 2>/dev/null
cli_done
