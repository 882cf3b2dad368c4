// llamacpp_prefill.mjs -- prompt-processing (prefill) speed of a real llama.cpp (the npm package
// node-llama-cpp, its prebuilt CPU build, found as tests/llamacpp_logits.mjs finds it) on a GGUF:
//   node bench/llamacpp_prefill.mjs MODEL.gguf T[,T...] [REPS] [THREADS] [VOCAB]
// For each T: REPS times (default 3), a fresh sequence (KV cache cleared) evaluates T token ids
// (the same ids as bench/bench_llamacpp.sh gives attnlab: (i * 2654435761) mod (V - 3) + 3) in one
// batch, asking for the logits of the last token only, as a prefill does. Timed, best of REPS:
//   wall -- the JS call seq.controlledEvaluate() of the T tokens, around llama_decode;
//   llama -- llama.cpp's own "prompt eval time" (llama_perf_context, via context.printTimings()).
// One line per T:  "REPO@REL (cpu zen4, flash attention on) T=128 threads 2 wall 1.234 s 103.7 tok/s llama 1.230 s 104.0 tok/s"
// The context: contextSize max(T) + 16, batchSize max(T) (one batch, one ubatch), `threads` THREADS
// (default 2), llama.cpp's defaults otherwise (F16 KV cache, flash attention `auto`, which it
// turns on for the CPU). An evaluation of max(T) tokens first pages the weights in. The line
// names the CPU backend ggml loaded (e.g. zen4). Exit status 77 when node-llama-cpp is not installed.
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
const [modelPath, tList] = process.argv.slice(2);
const reps = Number(process.argv[4] ?? 3), threads = Number(process.argv[5] ?? 2);
const Ts = tList.split(",").map(Number);
const Tmax = Math.max(...Ts);

// llama.cpp's own timing arrives as log lines (info level): keep the prompt-eval one, the CPU
// backend ggml picked and whether flash attention is on; LLAMACPP_LOG=1 prints every line to stderr
let promptMs = null, backend = "?", flash = "off";
const logger = (level, message) => {
    if (process.env.LLAMACPP_LOG) process.stderr.write(`[${level}] ${message}\n`);
    const b = /loaded CPU backend from .*libggml-cpu-([A-Za-z0-9_]+)\.so/.exec(message);
    if (b) backend = b[1];
    if (/Flash Attention enabled/.test(message)) flash = "on";
    const m = /prompt eval time\s*=\s*([0-9.]+)\s*ms\s*\/\s*([0-9]+)\s*tokens/.exec(message);
    if (m) promptMs = { ms: Number(m[1]), n: Number(m[2]) };
};
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.debug, logger, maxThreads: threads });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({ contextSize: Tmax + 16, batchSize: Tmax, threads, performanceTracking: true });
const seq = context.getSequence();
const nVocab = Number(process.argv[6] ?? model.fileInfo?.metadata?.tokenizer?.ggml?.tokens?.length ?? 0);
if (!(nVocab > 3)) { console.error(`${modelPath}: cannot tell the vocabulary size; give it as the 5th argument`); process.exit(1); }
const ids = (T) => Array.from({ length: T }, (_, i) => Number((BigInt(i) * 2654435761n) % BigInt(nVocab - 3)) + 3);

async function prefill(T) {
    await seq.clearHistory();
    await context.printTimings();              // resets llama.cpp's counters
    promptMs = null;
    const tok = ids(T);
    const input = tok.map((t, i) => (i === T - 1 ? [t, { generateNext: { logits: true } }] : t));
    const t0 = process.hrtime.bigint();
    await seq.controlledEvaluate(input);
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    await context.printTimings();
    return { wall, llama: promptMs && promptMs.n === T ? promptMs.ms / 1000 : NaN };
}

await prefill(Tmax);                           // pages the weights in, sizes the buffers
const release = llama.llamaCppRelease ?? {};
const version = `${release.repo ?? "llama.cpp"}@${release.release ?? "?"}`;
for (const T of Ts) {
    let wall = Infinity, ll = Infinity;
    for (let r = 0; r < reps; r++) {
        const x = await prefill(T);
        wall = Math.min(wall, x.wall);
        if (!Number.isNaN(x.llama)) ll = Math.min(ll, x.llama);
    }
    const llText = Number.isFinite(ll) ? `llama ${ll.toFixed(3)} s ${(T / ll).toFixed(1)} tok/s` : "llama - (no prompt eval line)";
    process.stdout.write(`${version} (cpu ${backend}, flash attention ${flash}) T=${T} threads ${threads} wall ${wall.toFixed(3)} s ${(T / wall).toFixed(1)} tok/s ${llText}\n`);
}
await context.dispose();
await model.dispose();
await llama.dispose();
