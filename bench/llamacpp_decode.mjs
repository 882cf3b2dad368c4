// llamacpp_decode.mjs -- decode (token generation) speed of a real llama.cpp (the npm package
// node-llama-cpp, its prebuilt CPU build, found as bench/llamacpp_prefill.mjs finds it) on a GGUF:
//   node bench/llamacpp_decode.mjs MODEL.gguf P N [REPS] [THREADS] [VOCAB]
// Per rep (default 3): a fresh sequence (KV cache cleared) evaluates P prompt ids (the ids of
// bench/bench_llamacpp.sh: (i * 2654435761) mod (V - 3) + 3), then generates N tokens greedily
// (temperature 0), one llama_decode of one token each through the KV cache, as attnlab's
// `generate` decodes. Timed, best of REPS:
//   wall -- the JS loop over the N generated tokens (the first one comes from the prompt's logits,
//           so N - 1 decodes), sampling included;
//   llama -- llama.cpp's own "eval time" (llama_perf_context: the one-token decodes alone).
// One line:  "REPO@REL (cpu zen4) decode N=64 after P=128 threads 2 wall 3.1 s 20.3 tok/s llama 3.0 s 20.8 tok/s"
// The context: contextSize P + N + 16, `threads` THREADS (default 2), llama.cpp's defaults otherwise
// (F16 KV cache, flash attention auto). One unmeasured round first pages the weights in. Exit
// status 77 when node-llama-cpp is not installed.
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
const [modelPath, pArg, nArg] = process.argv.slice(2);
const P = Number(pArg ?? 128), N = Number(nArg ?? 64);
const reps = Number(process.argv[5] ?? 3), threads = Number(process.argv[6] ?? 2);

let evalMs = null, backend = "?";
const logger = (level, message) => {
    if (process.env.LLAMACPP_LOG) process.stderr.write(`[${level}] ${message}\n`);
    const b = /loaded CPU backend from .*libggml-cpu-([A-Za-z0-9_]+)\.so/.exec(message);
    if (b) backend = b[1];
    const m = /(^|[^t] )eval time\s*=\s*([0-9.]+)\s*ms\s*\/\s*([0-9]+)\s*(runs|tokens)/.exec(message);
    if (m && !/prompt eval/.test(message)) evalMs = { ms: Number(m[2]), n: Number(m[3]) };
};
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.debug, logger, maxThreads: threads });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({ contextSize: P + N + 16, batchSize: P, threads, performanceTracking: true });
const seq = context.getSequence();
const nVocab = Number(process.argv[7] ?? model.fileInfo?.metadata?.tokenizer?.ggml?.tokens?.length ?? 0);
if (!(nVocab > 3)) { console.error(`${modelPath}: cannot tell the vocabulary size; give it as the 6th argument`); process.exit(1); }
const ids = Array.from({ length: P }, (_, i) => Number((BigInt(i) * 2654435761n) % BigInt(nVocab - 3)) + 3);

async function decode() {
    await seq.clearHistory();
    await context.printTimings();              // resets llama.cpp's counters
    evalMs = null;
    let n = 0, t0 = 0n;
    for await (const tok of seq.evaluate(ids, { temperature: 0 })) {
        void tok;
        if (n === 0) t0 = process.hrtime.bigint();   // the first token: the prompt's logits
        if (++n >= N) break;
    }
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    await context.printTimings();
    return { wall, llama: evalMs && evalMs.n > 0 ? evalMs.ms / 1000 / evalMs.n : NaN };
}

await decode();                                 // pages the weights in
const release = llama.llamaCppRelease ?? {};
const version = `${release.repo ?? "llama.cpp"}@${release.release ?? "?"}`;
let wall = Infinity, per = Infinity;
for (let r = 0; r < reps; r++) {
    const x = await decode();
    wall = Math.min(wall, x.wall);
    if (!Number.isNaN(x.llama)) per = Math.min(per, x.llama);
}
const llText = Number.isFinite(per) ? `llama ${(per * 1000).toFixed(2)} ms/token ${(1 / per).toFixed(1)} tok/s` : "llama - (no eval line)";
process.stdout.write(`${version} (cpu ${backend}) decode N=${N} after P=${P} threads ${threads} wall ${wall.toFixed(3)} s ${((N - 1) / wall).toFixed(1)} tok/s ${llText}\n`);
await context.dispose();
await model.dispose();
await llama.dispose();
