#!/usr/bin/env bash
# cli_calib.sh -- `calibrate`, `calib info|save|load`, `kvsvd learn|eval`, `export` (after `kvsvd
# learn`) and the two KQ-SVD figures through `attnlab -e` on the real stories260K checkpoint
# (skipped, exit 77, when $ATTNLAB_MODELS lacks it): the eval CSV header is exact with one row per
# layer and method, KQ-SVD's calibration error on K Qᵀ is never above the others', K-SVD and
# KQ-SVD are flat in beta, statistics survive save / load, the export writes (kv_heads, d, R)
# tensors and a manifest, and errors name what is missing.
set -u
. "$(dirname "$0")/lib_cli.sh"
cli_need_model stories260K/stories260K.bin
cli_setup /tmp/attnlab-cli-calib shared-cache
cd "$T" || exit 1
BIN="$M/stories260K/stories260K.bin"

cat >story.txt <<'EOF'
Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high. Lily asked her mom to help her. Her mom said, "Let's get the ball together!" They went to the tree and tried to reach the ball. Lily was sad, but her mom had an idea. She said, "Let's use a stick to get the ball down." They found a long stick and poked the ball. The ball fell down and Lily was happy. She said, "Thank you, mom!" They played with the ball all day long.
Once upon a time, there was a little boy named Tim. Tim had a big dog named Max. Max was a good dog. He liked to run and play with Tim. One day, Tim and Max went to the park. They saw a big tree with a lot of apples. Tim wanted to eat an apple, but they were too high. Max saw the apples too. He jumped up and down, trying to get an apple. Tim laughed and said, "Max, you are so funny!" Then, a kind old man came to the park. He saw Tim and Max trying to get the apples. The man said, "Let me help you." He reached up and picked two apples. He gave one to Tim and one to Max. Tim and Max were very happy. They said, "Thank you!" to the kind man. They ate their apples and played in the park all day.
EOF

# Calibrate, learn all three methods, evaluate, plot, export, save.
run -e "load $BIN; calibrate story.txt seqlen 32 to stats.csv; kvsvd learn all rank 3 to learn.csv; kvsvd eval to eval.csv; plot kvsvd-errors to fig1.png; plot kvsvd-errors what kq log to fig1kq.svg; plot kvsvd-unbalance betas 1,3,10,100 samples 1 to fig2.png; export proj; calib save stats.safetensors"
[ "$(rc)" = 0 ] || fail "pipeline: rc $(rc): $(cat err.txt)"
grep -q "calibrating stories260K on 15 train windows of 32 tokens" out.txt || fail "calibrate narration: [$(head -3 out.txt)]"
[ "$(head -1 stats.csv)" = "layer,tokens,sequences,rms_k,rms_q,rms_v" ] || fail "stats CSV: [$(head -1 stats.csv)]"
[ "$(sed -n 2p stats.csv | cut -d, -f1-3)" = "0,480,15" ] || fail "stats counts: [$(sed -n 2p stats.csv)]"
[ "$(head -1 eval.csv)" = "layer,method,rank_k,rank_v,k_err,q_err,v_err,kq_err,out_err" ] || fail "eval CSV header: [$(head -1 eval.csv)]"
[ "$(tail -n +2 eval.csv | wc -l)" = 15 ] || fail "eval rows: want 5 layers x 3 methods: [$(cat eval.csv)]"
awk -F, 'NR > 1 && ($3 != 3 || $4 != 3) { exit 1 }' eval.csv || fail "rank columns: [$(cat eval.csv)]"
awk -F, 'NR > 1 { for (i = 5; i <= 9; i++) if (!($i >= 0 && $i < 2)) exit 1 }' eval.csv || fail "error values: [$(cat eval.csv)]"
# On the calibration set KQ-SVD's kq_err (column 8 of learn.csv) is never above K-SVD's or Eigen's.
awk -F, 'NR > 1 { e[$1, $2] = $8; L[$1] = 1 } END { for (l in L) if (e[l, "kqsvd"] > e[l, "ksvd"] * (1 + 1e-9) || e[l, "kqsvd"] > e[l, "eigen"] * (1 + 1e-9)) exit 1 }' learn.csv ||
  fail "KQ-SVD above another method on the calibration set: [$(cat learn.csv)]"
grep -q "warning" err.txt && fail "unexpected warning: [$(cat err.txt)]"
for f in fig1.png fig2.png; do
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "$f is not a PNG"
  [ "$(stat -c %s "$f")" -gt 5000 ] || fail "$f looks blank"
done
grep -q "<svg" fig1kq.svg || fail "fig1kq.svg is not SVG"
# Theorem 4: the printed table has K-SVD and KQ-SVD constant across beta.
awk '$1 ~ /^[0-9.]+$/ && NF == 4 { n++; if (n == 1) { k = $2; q = $4 } else if ($2 != k || $4 != q) bad = 1 } END { exit !(n == 4 && !bad) }' out.txt ||
  fail "unbalance table: [$(grep -A5 beta out.txt)]"
for f in kvsvd-ksvd.safetensors kvsvd-eigen.safetensors kvsvd-kqsvd.safetensors kvsvd_manifest.json; do
  [ -s "proj/$f" ] || fail "export: proj/$f missing"
done
grep -Eq '"rank_k":[[:space:]]*3' proj/kvsvd_manifest.json && grep -q '"out_err"' proj/kvsvd_manifest.json || fail "manifest: [$(head -40 proj/kvsvd_manifest.json)]"
# The tensor header: layers.0.proj_k of shape [4, 8, 3] (4 KV heads, head dim 8, rank 3).
head -c 4000 proj/kvsvd-kqsvd.safetensors | grep -aq '"layers.0.proj_k":{"dtype":"F32","shape":\[4,8,3\]' ||
  fail "proj_k shape: [$(head -c 300 proj/kvsvd-kqsvd.safetensors)]"

# Statistics survive save / load: the same learn table in a fresh session; eval then needs the text.
run -e "load $BIN; calib load stats.safetensors; kvsvd learn all rank 3 to learn2.csv; calib info"
[ "$(rc)" = 0 ] || fail "load: rc $(rc): $(cat err.txt)"
cmp -s learn.csv learn2.csv || fail "learn after load differs: [$(diff learn.csv learn2.csv)]"
run -e "load $BIN; calib load stats.safetensors; kvsvd learn kqsvd eps 0.1; kvsvd eval"
[ "$(rc)" = 1 ] && grep -q "give \`text FILE\` or \`ids FILE\`" err.txt || fail "eval without text: rc $(rc) [$(cat err.txt)]"
run -e "load $BIN; tokenize file story.txt to story.ids; calib load stats.safetensors; kvsvd learn kqsvd eps 0.1; kvsvd eval ids story.ids split train samples 2 to e2.csv"
[ "$(rc)" = 0 ] && [ "$(tail -n +2 e2.csv | wc -l)" = 5 ] || fail "eval with ids: rc $(rc) [$(cat err.txt)] [$(cat e2.csv 2>/dev/null)]"

# Export refuses a non-empty folder without force.
run -e "load $BIN; calibrate story.txt seqlen 32; kvsvd learn ksvd rank 2; export proj"
[ "$(rc)" = 1 ] && grep -q "not empty" err.txt || fail "export into non-empty: rc $(rc) [$(cat err.txt)]"

# Errors name what is missing.
run -e "load $BIN; kvsvd learn all eps 0.1"
[ "$(rc)" = 1 ] && grep -q "run \`calibrate FILE\`" err.txt || fail "learn before calibrate: rc $(rc) [$(cat err.txt)]"
run -e "load $BIN; calibrate story.txt seqlen 32; kvsvd eval"
[ "$(rc)" = 1 ] && grep -q "nothing learned yet" err.txt || fail "eval before learn: rc $(rc) [$(cat err.txt)]"
run -e "load $BIN; calibrate story.txt seqlen 32; plot kvsvd-errors to x.png"
[ "$(rc)" = 1 ] && grep -q "no evaluation yet" err.txt || fail "plot before eval: rc $(rc) [$(cat err.txt)]"
run -e "load $BIN; calibrate story.txt seqlen 100000"
[ "$(rc)" = 1 ] && grep -q "longer than the model's context" err.txt || fail "long seqlen: rc $(rc) [$(cat err.txt)]"
run -e "load $BIN; calibrate story.txt seqlen 400 split valid"
[ "$(rc)" = 1 ] && grep -q "too few for a validation split" err.txt || fail "short text: rc $(rc) [$(cat err.txt)]"
run -e "load $BIN; kvsvd learn all rank 2 eps 0.1"
[ "$(rc)" = 1 ] || fail "rank and eps together: rc $(rc)"
run -e "load $BIN; calib load story.txt"
[ "$(rc)" = 1 ] && grep -q "story.txt" err.txt || fail "load a non-safetensors: rc $(rc) [$(cat err.txt)]"
if [ -d "$M/gpt2-tiny-random" ]; then
  run -e "load $M/gpt2-tiny-random; calib load stats.safetensors"
  [ "$(rc)" = 1 ] && grep -q "do not fit model" err.txt || fail "stats of another model: rc $(rc) [$(cat err.txt)]"
fi

cli_done
