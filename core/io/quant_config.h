/* quant_config.h -- a checkpoint's quantization config, read once into one struct, and each
 * stored module's expected encoding checked against the tensors found.
 *
 * Where it lies (the first found wins; `where` records which):
 *  - config.json "quantization_config" with "quant_method" (transformers' quantizers):
 *    "fp8" (FineGrainedFP8: DeepSeek-V3 / R1 / V3.2, Qwen3-*-FP8, MiniMax-M2): "weight_block_size"
 *    [128, 128], "fmt" ("e4m3", "float8_e4m3fn"), "scale_fmt" ("ue8m0": DeepSeek-V3.2's scales are
 *    powers of two), "activation_scheme" ("dynamic" / "static"), "modules_to_not_convert" (also
 *    vLLM's "ignored_layers"); "mxfp4" (gpt-oss): "modules_to_not_convert"; "modelopt" (ModelOpt
 *    written into config.json): "quant_algo" (NVFP4, FP8), "group_size", "exclude_modules" or
 *    "ignore"; "compressed-tensors": "format", "config_groups" {name: {"targets": [...], "weights":
 *    {"num_bits", "type" int|float, "strategy" tensor|channel|group|block, "group_size",
 *    "block_structure", "symmetric"}}}, "ignore".
 *  - config.json "quantization_config" with "quant_algo" and no "quant_method" (ModelOpt's bare form).
 *  - hf_quant_config.json's "quantization" {"quant_algo", "group_size", "exclude_modules"} (ModelOpt's
 *    unified checkpoint; vLLM and SGLang detect ModelOpt by this file).
 * Lists of modules left unquantized ("ignore", "modules_to_not_convert", "exclude_modules",
 * "ignored_layers"): an entry "re:P" is a regular expression matched at the start of the module name
 * (compressed-tensors' re.match; Python's \d \w \s read as classes), an entry with * ? [ a glob over
 * the module or a dotted prefix of it (ModelOpt, gpt-oss's "model.layers.*.self_attn"), else the
 * module's name, a dotted prefix of it, or a part of it (transformers' `key in name`).
 * A module's encoding as stored is read from the names beside its weight (store.h); the expected
 * one from the config: fp8 -> FP8 block scales for every "*_proj" module (transformers' default
 * leaves lm_head out), mxfp4 -> MXFP4 for experts only (transformers' Mxfp4 quantizer replaces the
 * experts alone), modelopt NVFP4 / FP8 and compressed-tensors' groups -> their scheme for every
 * "*_proj" module and lm_head, unless listed. */
#ifndef AL_QUANT_CONFIG_H
#define AL_QUANT_CONFIG_H

#include "store.h"

struct cJSON;

typedef enum {
    QENC_NONE,          /* not quantized (F32 / BF16 / F16) */
    QENC_FP8_BLOCK,     /* F8_E4M3 "<w>" + "<w>_scale_inv" block grid (DeepSeek, fp8 method) */
    QENC_FP8_SCALE,     /* F8_E4M3 "<w>" + "<w>_scale" per tensor / channel (compressed-tensors, ModelOpt FP8) */
    QENC_INT4,          /* compressed-tensors pack-quantized "<w>_packed" I32 */
    QENC_MXFP4,         /* "<w>_blocks" + "<w>_scales" */
    QENC_NVFP4,         /* ModelOpt "<w>" U8 + "<w>_scale" + "<w>_scale_2" */
    QENC_NVFP4_CT,      /* compressed-tensors "<w>_packed" U8 + "<w>_scale" + "<w>_global_scale" */
    QENC_FP8_NOSCALE,   /* found only: F8_E4M3 with no scale beside it */
    QENC_UNKNOWN,       /* a scheme attnlab does not read (int8, gptq, awq, ...) */
    QENC_COUNT
} quant_enc;

const char *quant_enc_name(quant_enc e);

typedef struct {
    char name[48];             /* "group_0" */
    char **targets;            /* "Linear", names, "re:" regexes */
    size_t ntargets;
    quant_enc enc;
    int num_bits, group_size;
    bool is_float, symmetric;
    char strategy[16];
    void **target_re;          /* each "re:" target compiled once (regex_t *), NULL for the others */
} QuantGroup;

typedef struct {
    bool present;
    char where[160];           /* what decided: "config.json quantization_config.quant_method \"fp8\"" */
    char method[40];           /* quant_method ("fp8", "mxfp4", "modelopt", "compressed-tensors"), or "modelopt" */
    char algo[40];             /* ModelOpt's quant_algo */
    char format[40];           /* compressed-tensors' format */
    quant_enc enc;             /* the scheme of the non-compressed-tensors methods */
    int block[2];              /* fp8's weight_block_size (0 0: none given) */
    char fmt[32], scale_fmt[16], activation_scheme[16];
    char ignore_key[32];       /* the key its list came from */
    char **ignore;             /* modules left unquantized */
    size_t nignore;
    void **ignore_re;          /* each "re:" entry compiled once (regex_t *), NULL for the others */
    QuantGroup *groups;        /* compressed-tensors' config_groups */
    size_t ngroups;
} QuantConfig;

/* Reads the quantization config of the checkpoint whose config.json is `tree` (may be NULL) in folder
 * `dir` (may be NULL: hf_quant_config.json not looked for). No config: q->present false, AL_OK. A
 * config attnlab cannot follow (a list that is not strings, a regex that does not compile, a
 * weight_block_size other than [128, 128], fmt e5m2) is an error naming the key. */
int quant_config_read(const struct cJSON *tree, const char *dir, QuantConfig *q);
void quant_config_free(QuantConfig *q);

/* The list entry that leaves module `mod` unquantized, or NULL. */
const char *quant_ignored(const QuantConfig *q, const char *mod);
/* Whether list entry `pat` names module `mod` (the rules above). */
bool quant_entry_names(const char *pat, const char *mod);
/* The lists of a quantization_config object q (cJSON) that a module an export writes unquantized must
 * join, as transformers, vLLM, compressed-tensors and ModelOpt read them: modules_to_not_convert
 * (created when absent or not a list: *created then true) unless the source lists its own as ignore /
 * exclude_modules, and each of ignored_layers / ignore / exclude_modules the source has non-empty.
 * Into lists (4 at most); their count. */
struct cJSON;
int quant_config_plain_lists(struct cJSON *q, struct cJSON **lists, bool *created);
/* The encoding q expects for module `mod` (weight name minus ".weight", or an expert tensor's name);
 * *why (may be NULL) the config key that decided, into a static or q-owned string. QENC_UNKNOWN
 * also means "no expectation" for a module the config does not speak of. */
quant_enc quant_expected(const QuantConfig *q, const char *mod, char *why, size_t cap);
/* The encoding module `mod` is stored in, from the names beside it in s. */
quant_enc quant_found(const Store *s, const char *mod);

/* Checks every stored weight of s against q: a module stored in another quantized scheme than the
 * config's, a module the config lists as unquantized that is stored quantized or carries scales,
 * F8_E4M3 codes whose scales are missing, and (scale_fmt ue8m0) a block scale that is not a power of
 * two. The error names the tensor and the config key. A projection stored unquantized where the
 * config expects a scheme is read as it lies (not an error here). A streamed model's ue8m0 scales are
 * not read at load. */
int quant_check_store(const QuantConfig *q, const Store *s);
/* The projections of s stored unquantized (no scales, not listed) where q expects a scheme: how many,
 * the first one's module into first and its expected encoding into *exp (lint: engines that follow
 * the config build it quantized and find no scales). */
size_t quant_unquantized(const QuantConfig *q, const Store *s, char *first, size_t cap, quant_enc *exp);
/* One line for `info`: "compressed-tensors pack-quantized: int4 group 32 (config.json
 * quantization_config.config_groups.group_0), ignore 4 entries". */
void quant_describe(const QuantConfig *q, char *buf, size_t cap);

#endif
