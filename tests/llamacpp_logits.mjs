// llamacpp_logits.mjs -- runs a GGUF in a real llama.cpp (the npm package node-llama-cpp, CPU build)
// and prints, as JSON, the raw next-token logits after every prompt token:
//   node llamacpp_logits.mjs MODEL.gguf "id id id ..."  ->  {"llama_cpp": "...", "n_vocab": V, "logits": [[V floats] x T]}
//   node llamacpp_logits.mjs MODEL.gguf --text "TEXT" N  ->  {"tokens": [llama.cpp's ids of TEXT, BOS
//       first], "greedy": "TEXT continued greedily for N tokens, detokenized by llama.cpp"}
// With a third argument REF.json ({"logits": [[...]]}, e.g. from `test_gguf logits`), it prints one
// line instead: "llama.cpp REPO@RELEASE max_abs_diff D max_abs_logit M argmax_agree K/T".
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
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
// an F32 KV cache (llama.cpp defaults to F16, which alone costs ~1e-3 in the logits) and no flash attention
const context = await model.createContext({ contextSize: Math.max(64, tokens.length + 8), batchSize: 64,
    flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" });
const seq = context.getSequence();
if (textMode) {
    const [text, n] = process.argv.slice(4);
    const ids = [...model.tokenize(text, true)];
    if (model.tokens.shouldPrependBosToken && model.tokens.bos != null && ids[0] !== model.tokens.bos) ids.unshift(model.tokens.bos);
    const out = [];
    let input = ids.map((t, i) => (i === ids.length - 1 ? [t, { generateNext: { logits: true } }] : t));
    for (let k = 0; k < Number(n); k++) {
        const res = await seq.controlledEvaluate(input);
        let best = -1, bv = -Infinity;
        for (const [tok, v] of res[res.length - 1].next.logits) if (v > bv) { bv = v; best = tok; }
        out.push(best);
        input = [[best, { generateNext: { logits: true } }]];
    }
    process.stdout.write(JSON.stringify({ tokens: ids, greedy: model.detokenize([...ids, ...out]) }) + "\n");
    process.exit(0);
}
const nVocab = 0;
const input = tokens.map((t) => [t, { generateNext: { logits: true } }]);
const res = await seq.controlledEvaluate(input);
const logits = res.map((r) => {
    const m = r?.next?.logits;
    const row = new Array(m ? m.size : 0);
    if (m) for (const [tok, v] of m) row[tok] = v;
    return row;
});
const release = llama.llamaCppRelease ?? {};
const version = `${release.repo ?? "llama.cpp"}@${release.release ?? "?"}`;
const refPath = process.argv[4];
if (refPath) {
    const ref = JSON.parse(fs.readFileSync(refPath, "utf8")).logits;
    let diff = 0, big = 0, agree = 0;
    const argmax = (r) => r.reduce((b, v, i) => (v > r[b] ? i : b), 0);
    for (let t = 0; t < tokens.length; t++) {
        if (!ref[t] || ref[t].length !== logits[t].length) { diff = Infinity; break; }
        for (let v = 0; v < ref[t].length; v++) {
            diff = Math.max(diff, Math.abs(ref[t][v] - logits[t][v]));
            big = Math.max(big, Math.abs(ref[t][v]));
        }
        agree += argmax(ref[t]) === argmax(logits[t]);
    }
    process.stdout.write(`llama.cpp ${version} max_abs_diff ${diff} max_abs_logit ${big} argmax_agree ${agree}/${tokens.length}\n`);
} else {
    process.stdout.write(JSON.stringify({ llama_cpp: version, n_vocab: logits[0]?.length ?? nVocab, logits }));
}
await context.dispose();
await model.dispose();
await llama.dispose();
