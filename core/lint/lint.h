/* lint.h -- checks a checkpoint folder against what the engines people deploy read, and says per
 * target whether it loads: Hugging Face transformers (the family's class), vLLM, SGLang, and
 * llama.cpp by way of its converter (convert_hf_to_gguf.py).
 *
 * Nothing is printed: lint_folder returns a report, a list of findings. Each finding has a
 * severity, the targets it concerns and a message saying what is wrong and what to do:
 *   error     the target will not load the folder, or (the target's bit in `loads`) loads it but
 *             computes a different model than the one the folder describes;
 *   warning   loads, but something is off (a total_size that does not add up, no tokenizer);
 *   advisory  worth knowing (kernel shapes, tensors engines skip).
 *
 * What is checked: config.json present and parsed (core/model/config.c); model_type and architectures
 * known to each target (the table in lint.c, from the engines' model registries); keys that change
 * semantics for attnlab but that stock loaders ignore (qk_latent_layernorm: false), DeepSeek keys
 * vLLM and SGLang read otherwise (rope_interleave: false, attention_bias, a rope_scaling other than
 * YaRN) and deepseek_v3 keys left to DeepSeek-V3's own defaults (q_lora_rank, first_k_dense_replace,
 * n_routed_experts, the routing keys); every tensor the family's loader expects, with the shape
 * config.json implies (hidden, heads, KV heads, head_dim, intermediate, vocab, the MLA ranks and
 * head dims, experts, FP8 block scales) -- for every family of the family table (core/model/family.c), the
 * names driven by ModelConfig's layouts (config.h: attention QKV_SPLIT / QKV_CAT / QKV_HEADS / MLA,
 * the block's norms, q/k norms, fused MLPs, the MoE layout's routers and experts); tensors no loader
 * places; a tied head that differs from the
 * embeddings; the index (every tensor in weight_map, every named shard present,
 * metadata.total_size = the sum of tensor bytes); each shard's header (validated by
 * core/io/safetensors.c) and its __metadata__ {"format": "pt"}; torch_dtype against the tensors'
 * dtypes, FP8 without a quantization_config; not-quantized lists that split a layer vLLM fuses
 * (quant_fused.h: q/k/v_proj, gate/up_proj); tokenizer files; FlashMLA's shapes for MLA
 * checkpoints; attnlab's own layouts (TPA, KQ-SVD) named as such.
 *
 * A folder that cannot be read at all is a finding too: lint_folder fails only when the path does
 * not exist or memory runs out. */
#ifndef AL_LINT_H
#define AL_LINT_H

#include <stdbool.h>
#include <stddef.h>
#include "family.h"

typedef enum { LINT_ERROR, LINT_WARNING, LINT_ADVISORY } lint_severity;

/* Targets, as bits of LintFinding.targets / .loads. */
enum { LT_HF = ENGINE_HF, LT_VLLM = ENGINE_VLLM, LT_SGLANG = ENGINE_SGLANG, LT_LLAMACPP = ENGINE_LLAMACPP };
#define LINT_NTARGETS 4
#define LT_ALL (LT_HF | LT_VLLM | LT_SGLANG | LT_LLAMACPP)

/* LINT_LOADS_FLAGS: loads, but the engine starts only with launch flags (no tokenizer in the folder: vLLM and
 * SGLang need --skip-tokenizer-init or --tokenizer naming the source), one verdict, not "loads" beside a warning. */
typedef enum { LINT_LOADS, LINT_DIFFERENT, LINT_FAILS, LINT_LOADS_FLAGS } lint_verdict;

typedef struct {
    lint_severity sev;
    unsigned targets;     /* LT_* bits of the targets it concerns */
    unsigned loads;       /* errors: of those targets, the ones that load the folder anyway and
                             compute a different model (the rest refuse it) */
    char *msg;            /* what is wrong and what to do (owned) */
    unsigned flags;       /* warnings: of its targets, those that start only with the launch flags it names */
} LintFinding;

typedef struct {
    char *path;           /* the folder (or file) linted */
    char model_type[64];  /* as config.json says ("" when none) */
    char arch[96];        /* architectures[0] ("" when none) */
    char hf_class[64];    /* the transformers class model_type maps to ("" when unknown) */
    char gguf_arch[32];   /* llama.cpp's GGUF architecture for it ("deepseek2"; "" when unknown) */
    size_t ntensors, nfiles;   /* weight tensors and safetensors files read */
    LintFinding *f;
    size_t n, cap;
} LintReport;

/* Lints a checkpoint folder, or a `.gguf` file (for llama.cpp: architecture, keys, vocabulary, tensors). Fails only when the
 * path does not exist or memory runs out; every problem of the folder is a finding. */
int lint_folder(const char *path, LintReport **out);
void lint_report_free(LintReport *r);

/* "transformers", "vLLM", "SGLang", "llama.cpp" for target index 0..LINT_NTARGETS-1. */
const char *lint_target_name(int i);
/* "error", "warning", "advisory". */
const char *lint_severity_name(lint_severity s);
/* A target's verdict (bit LT_*): fails when an error refuses it, different when an error loads
 * but changes the model, loads with flags when a warning says it starts only with launch flags, else loads. */
lint_verdict lint_verdict_of(const LintReport *r, unsigned target);
/* "loads", "loads, but computes a different model", "will not load", "loads with --skip-tokenizer-init ...". */
const char *lint_verdict_name(lint_verdict v);
/* Findings of a severity (counts). */
size_t lint_count(const LintReport *r, lint_severity s);

#endif
