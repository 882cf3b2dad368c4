/* ref_forward.h -- an independent float64 reference forward pass for the tests, written from the
 * Hugging Face transformers modeling files (modeling_llama / mistral / qwen2 / qwen3 / qwen3_moe /
 * gemma2 / gemma3 / mixtral / phi3 / gpt_neox / olmo2 / olmo3 / deepseek_v3 / smollm3 / qwen3_next), not from
 * core/model/forward.c.
 *
 * It reads config.json itself (cJSON, the few keys each family uses, with the defaults of the
 * family's configuration class) and the tensors of one model.safetensors by their HF names
 * (core/io/safetensors.h, converted to double), and computes every position's logits of one
 * sequence in double, straight from the formulas: no cache, no batching, no shared code with
 * attnlab's pass. Only what the test checkpoints use is covered (rope_scaling none or linear, and
 * yarn for olmo3; one safetensors file); anything else is an error naming it. */
#ifndef AL_REF_FORWARD_H
#define AL_REF_FORWARD_H

#include <stdbool.h>
#include <stddef.h>

typedef struct RefModel RefModel;

/* Opens the model folder dir (config.json + model.safetensors). Caller frees with ref_free. */
int ref_open(const char *dir, RefModel **out);
void ref_free(RefModel *m);
size_t ref_vocab(const RefModel *m);
/* Logits of every position of tokens[0..T) (logits: T x vocab, row-major, caller-allocated). */
int ref_logits(RefModel *m, const int *tokens, size_t T, double *logits);
/* Switches features off (REF_ABLATE_*, 0: none), so that a test can show its checks see each:
 * Qwen3-Next's output gate, the Gated DeltaNet recurrence (the state reset at every token) and the
 * (1 + w) of its RMSNorms, the sigmoid gate of its shared expert. */
enum { REF_ABLATE_GATE = 1, REF_ABLATE_STATE = 2, REF_ABLATE_ONE_PLUS = 4, REF_ABLATE_SHARED_GATE = 8,
       /* Llama 4: chunked attention, the NoPE layers' temperature, the L2 q/k norm, the router weight on the
          expert's input (off: on its output instead) */
       REF_ABLATE_CHUNK = 16, REF_ABLATE_TEMP = 32, REF_ABLATE_QK_L2 = 64, REF_ABLATE_ROUTER_IN = 128 };
enum { REF_ABLATE_YARN = 1 << 8 };      /* MLA's YaRN (Kimi-K2.5): plain RoPE frequencies, no mscale^2 */
enum { REF_ABLATE_CHANNEL_DECAY = 1 << 9 };   /* KDA: each head's decay the mean of its channels' (Gated DeltaNet's) */
/* Gemma 4: V of k_eq_v layers after k_norm and RoPE; KV-shared layers reading the layer just before them (whatever
   its type); proportional RoPE read as "rotate the first factor x hd dims"; v_norm; layer_scalar; per-layer inputs;
   the MoE block beside the dense MLP */
enum { REF_ABLATE_K_EQ_V = 1 << 10, REF_ABLATE_KV_SHARE = 1 << 11, REF_ABLATE_PROPORTIONAL = 1 << 12,
       REF_ABLATE_V_NORM = 1 << 13, REF_ABLATE_LAYER_SCALAR = 1 << 14, REF_ABLATE_PLE = 1 << 15,
       REF_ABLATE_MOE_BLOCK = 1 << 16 };
void ref_ablate(RefModel *m, unsigned what);
/* Mean negative log-likelihood (nats) of tokens[1..T) given their prefixes, from ref_logits. */
int ref_mean_nll(RefModel *m, const int *tokens, size_t T, double *nll);
/* off: deepseek_v32 / glm_moe_dsa attend to every key, as if the indexer selected them all (the switch the
 * tests use to show the selection matters). */
void ref_no_indexer(RefModel *m, bool off);
/* off: the "shared" layers attend to every key instead of the last full layer's selection (IndexShare switched
 * off; they carry no indexer of their own, as GLM-5.2's release). */
void ref_no_index_share(RefModel *m, bool off);

/* From the next ref_logits on, the attention weights of query head h of layer L go to P (n, n): row i the
 * weights of query i over keys 0..i (after window / soft-cap; a sink's weight dropped), the rest 0; P NULL: none. */
void ref_capture(RefModel *m, int L, int h, double *P, size_t n);

/* What the reference read from config.json for layer L, for cross-checks with attnlab's
 * description (core/model/config.h). */
typedef struct {
    int window;                /* sliding window in tokens (0: full causal) */
    double theta, rope_factor; /* RoPE base and linear scaling factor of the layer */
    bool yarn;                 /* the layer rotates with rope_scaling yarn */
    double attn_factor;        /* YaRN's attention factor on its cos / sin (1: none) */
    double scale;              /* softmax scale */
    int rot;                   /* rotary dims per head */
    bool moe;                  /* mixture-of-experts MLP */
    double eps, embed_scale, attn_cap, final_cap;
    bool tied;
    bool rope;                 /* RoPE on q and k (false on SmolLM3's NoPE layers) */
} RefLayerInfo;
void ref_describe(const RefModel *m, int L, RefLayerInfo *out);

#endif
