/* synth.h -- writes small HF-layout checkpoints with planted, documented low-rank structure
 * (the demo models and the test data), and DeepSeek-R1-shaped checkpoints for benchmarks.
 *
 * Every generator is deterministic for a given seed and writes through the checkpoint writer
 * (core/io/ckpt_write.h: staged beside the folder, renamed into place when complete), config.json
 * included. See synth.c's header for the planted structure of
 * each demo model; tests assert those ranks exactly. */
#ifndef AL_SYNTH_H
#define AL_SYNTH_H

#include "tensor.h"

typedef enum { SYNTH_DEMO_R1, SYNTH_DEMO_LLAMA, SYNTH_DEMO_GPT2, SYNTH_DEMO_KVNORM } synth_kind;

/* The seed demo names use (and the `synth` command's default). */
#define SYNTH_DEFAULT_SEED 42UL
/* Generator version, written into config.json as "attnlab_synth": {"version": N}; it changes
 * whenever the same name and seed would give other weights (so cached demos can be renewed). */
#define SYNTH_VERSION 1

typedef struct {
    synth_kind kind;
    dt_type dtype;        /* F32, BF16 or F8_E4M3 (DeepSeek layout only) for attention weights */
    int shards;           /* 1: model.safetensors; >1: model-0000i-of-0000n + index.json */
    unsigned long seed;
} SynthOptions;

/* Writes the model into dir (created with its parents; must not exist or be empty). It is built
 * in a temporary sibling folder and renamed into place, so dir is never seen half-written. */
int synth_write(const SynthOptions *opt, const char *dir);
/* Parses "demo-r1" / "demo-llama" / "demo-gpt2" / "demo-kvnorm" (and variants like "demo-r1-bf16",
 * "demo-r1-f32") into options; false when name is not a demo name. */
bool synth_demo_name(const char *name, SynthOptions *opt);
/* The i-th name synth_demo_name accepts (each base, then its variants, in the demo table's
 * order) into buf; false past the last. */
bool synth_demo_at(size_t i, char *buf, size_t cap);
/* "demo-r1", "demo-llama", "demo-gpt2", "demo-kvnorm". */
const char *synth_kind_name(synth_kind k);

/* ---------------------------------------------------------------- one checkpoint per family
 * (core/methods/synth_family.c: the planted structure in its header; the recipes are rows of
 * core/model/family.c) */

/* The model_types of the family table's rows with a recipe, in table order; NULL-terminated
 * (filled before main). */
extern const char *synth_family_names[];
/* Writes family's tiny checkpoint (F32 or BF16, one model.safetensors, config.json) into dir
 * (created; must not exist or be empty). Deterministic for a seed. */
int synth_family_write(const char *family, dt_type dtype, unsigned long seed, const char *dir);
/* The planted effective ranks at tau (0.999 or 0.99) of query head h's VO pair (qk false: *ra V,
 * *rb O, *rf VO) or NoPE QK pair (qk true: *ra Q, *rb K, *rf QK) in layer L of family; false
 * where nothing is planted (random heads; QK of families whose QK is all RoPE). */
bool synth_family_planted(const char *family, bool qk, int layer, int head, double tau, int *ra, int *rb, int *rf);

/* A DeepSeek-R1-shaped checkpoint (R1's exact attention shapes, FP8 with 128x128 scales,
 * several layers per shard, an index), attention tensors only. */
int synth_ds_r1_shape(const char *dir, int layers, unsigned long seed);

#endif
