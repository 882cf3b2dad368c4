// llamacpp_logits.mjs -- runs a GGUF in a real llama.cpp (the npm package node-llama-cpp, CPU build)
// and prints, as JSON, the raw next-token logits after every prompt token:
//   node llamacpp_logits.mjs MODEL.gguf "id id id ..."  ->  {"llama_cpp": "...", "n_vocab": V, "logits": [[V floats] x T]}
//   node llamacpp_logits.mjs MODEL.gguf --text "TEXT" N  ->  {"tokens": [llama.cpp's ids of TEXT, BOS
//       first], "greedy": "TEXT continued greedily for N tokens, detokenized by llama.cpp"}
// With a third argument REF.json ({"logits": [[...]]}, e.g. from `test_gguf logits`), it prints one
// line instead: "llama.cpp REPO@RELEASE max_abs_diff D max_abs_logit M argmax_agree K/T mode logits|logprobs".
// node-llama-cpp before raw logits in controlledEvaluate (3.14.2: `generateNext.logits` unknown, the
// output empty) gives probabilities instead: at temperature 1 with topK 0 every token's softmax
// probability; then both sides are compared as log-probabilities (logit - logsumexp, tokens whose
// reference log-probability is above -60; mode logprobs).
// node-llama-cpp is found under $ATTNLAB_NODE_PREFIX (default ~/.local/share/attnlab/node, where
// scripts/install-deps.sh installs it). Exit status 77 when it is not installed.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const prefix = process.env.ATTNLAB_NODE_PREFIX || path.join(os.homedir(), ".local/share/attnlab/node");
const entry = path.join(prefix, "node_modules/node-llama-cpp/dist/index.js");
if (!fs.existsSync(entry)) {
    console.error(`node-llama-cpp is not installed under ${prefix} (scripts/install-deps.sh installs it)`);
    process.exit(77);
}
const [modelPath, idText] = process.argv.slice(2);
const textMode = idText === "--text";
const tokens = textMode ? [] : idText.trim().split(/\s+/).map(Number);
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: 2 });
// llama.cpp's log lines reach node asynchronously: on a failed load wait for them (the loader's
// reason, e.g. "missing tensor ..."), then fail
const model = await llama.loadModel({ modelPath, gpuLayers: 0 }).catch(async (e) => {
    await new Promise((r) => setTimeout(r, 200));
    console.error(String(e));
    process.exit(1);
});
// an F32 KV cache (llama.cpp defaults to F16, which alone costs ~1e-3 in the logits) and no flash attention
const newContext = () => model.createContext({ contextSize: Math.max(64, tokens.length + 8), batchSize: 64,
    flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" });
const PROBS = { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } };
// Every row of ids' next-token scores: raw logits, or log-probabilities on an older node-llama-cpp.
async function evaluate(ids, last) {
    let context = await newContext();
    let res = await context.getSequence().controlledEvaluate(ids.map((t, i) => (!last || i === ids.length - 1
        ? [t, { generateNext: { logits: true } }] : t)));
    let mode = "logits";
    if (!res.some((r) => r?.next?.logits)) {
        await context.dispose();
        context = await newContext();
        res = await context.getSequence().controlledEvaluate(ids.map((t, i) => (!last || i === ids.length - 1
            ? [t, { generateNext: PROBS }] : t)));
        mode = "logprobs";
    }
    const rows = res.filter((r) => r?.next).map((r) => {
        const m = mode === "logits" ? r.next.logits : r.next.probabilities;
        const row = new Array(m ? m.size : 0);
        if (m) for (const [tok, v] of m) row[tok] = mode === "logits" ? v : Math.log(v);
        return row;
    });
    await context.dispose();
    return { rows, mode };
}
const argmax = (r) => r.reduce((b, v, i) => (v > r[b] ? i : b), 0);
if (textMode) {
    const [text, n] = process.argv.slice(4);
    const ids = [...model.tokenize(text, true)];
    if (model.tokens.shouldPrependBosToken && model.tokens.bos != null && ids[0] !== model.tokens.bos) ids.unshift(model.tokens.bos);
    const out = [];
    for (let k = 0; k < Number(n); k++) {      // greedy, each step from the start (tiny models, few tokens)
        const { rows } = await evaluate([...ids, ...out], true);
        out.push(argmax(rows[rows.length - 1]));
    }
    process.stdout.write(JSON.stringify({ tokens: ids, greedy: model.detokenize([...ids, ...out]) }) + "\n");
    process.exit(0);
}
const { rows: logits, mode } = await evaluate(tokens, false);
const release = llama.llamaCppRelease ?? {};
const version = `${release.repo ?? "llama.cpp"}@${release.release ?? "?"}`;
const refPath = process.argv[4];
const logSoftmax = (r) => {
    const m = Math.max(...r);
    const z = Math.log(r.reduce((s, v) => s + Math.exp(v - m), 0)) + m;
    return r.map((v) => v - z);
};
if (refPath) {
    const ref = JSON.parse(fs.readFileSync(refPath, "utf8")).logits;
    let diff = 0, big = 0, agree = 0;
    for (let t = 0; t < tokens.length; t++) {
        if (!ref[t] || !logits[t] || ref[t].length !== logits[t].length) { diff = Infinity; break; }
        const a = mode === "logits" ? ref[t] : logSoftmax(ref[t]);
        for (let v = 0; v < a.length; v++) {
            if (mode === "logprobs" && a[v] < -60) continue;
            diff = Math.max(diff, Math.abs(a[v] - logits[t][v]));
            big = Math.max(big, Math.abs(a[v]));
        }
        agree += argmax(ref[t]) === argmax(logits[t]);
    }
    process.stdout.write(`llama.cpp ${version} max_abs_diff ${diff} max_abs_logit ${big} argmax_agree ${agree}/${tokens.length} mode ${mode}\n`);
} else {
    process.stdout.write(JSON.stringify({ llama_cpp: version, mode, n_vocab: logits[0]?.length ?? 0, logits }));
}
await model.dispose();
await llama.dispose();
