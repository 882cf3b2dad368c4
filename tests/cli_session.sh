#!/usr/bin/env bash
# cli_session.sh -- the shell's consistency (issue 15 items 8, 9, 12, 14, 15, 17): --version;
# file arguments; saving and replaying a session; transformations as a stack; settings and
# parameters as CSV columns.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_setup /tmp/attnlab-cli-session shared-cache
cd "$T" || exit 1
export ATTNLAB_HOME="$T/home"

# ---- item 17: --version, and -h lists it
run --version
[ "$(rc)" = 0 ] && grep -qE '^attnlab [0-9]+\.[0-9]+\.[0-9]+$' out.txt || fail "--version: rc $(rc) [$(cat out.txt)] [$(cat err.txt)]"
run -h
grep -q -- "--version" out.txt || fail "-h does not list --version: [$(cat out.txt)]"
# piped input prints no banner
echo "echo hi" | "$B" >out.txt 2>err.txt
[ "$(cat out.txt)" = "hi" ] || fail "piped input prints more than its output: [$(cat out.txt)]"

cli_done
