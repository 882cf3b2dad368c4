/* gguf_arch.h -- the architecture table of attnlab's GGUF support: one row per llama.cpp
 * architecture (its name, the tensor map by role with the transform each tensor goes through, the
 * metadata writer, and the config.json reader used when a GGUF is read back), and the way back:
 * a GGUF opened as an HF-layout store + config.json (model_open calls gguf_model_open for *.gguf,
 * as it calls llama2c_open for *.bin). Names and keys follow llama.cpp's gguf-py constants and
 * convert_hf_to_gguf.py (conversion/llama.py, qwen.py, gpt2.py, deepseek.py, olmo.py, phi.py, exaone.py); see
 * core/export/gguf_convert.h for the conventions of each row. Tensors are named by role (family.h):
 * the HF side through the model's layouts, the llama.cpp side through one role -> name table (as
 * llama.cpp's LLM_TENSOR_NAMES). Adding a family whose architecture is here: its family row's
 * gguf_arch; a new architecture: a tensor map by role and a row in ARCHS (gguf_arch.c), with a kv
 * writer (or kv_llama's) and a config reader. */
#ifndef AL_GGUF_ARCH_H
#define AL_GGUF_ARCH_H

#include "config.h"
#include "gguf.h"
#include "store.h"

struct cJSON;

/* What a tensor goes through on its way to GGUF (undone when reading back). */
typedef enum {
    XF_COPY,        /* as stored (shape reversed into ne) */
    XF_PERM_Q,      /* HF rotate_half rows -> interleaved pairs, per query head (rope_half sources only) */
    XF_PERM_K,      /* the same per KV head */
    XF_T,           /* 2-D transpose (GPT-2 Conv1D (in, out) -> (out, in)) */
    XF_K_B,         /* kv_b_proj -> attn_k_b (H, kv_lora, nope) */
    XF_V_B,         /* kv_b_proj -> attn_v_b (H, v, kv_lora) */
    XF_LAT_KV,      /* kv_a_proj_with_mqa with its kv_lora latent rows scaled (no latent norm) */
    XF_LAT_Q,       /* q_a_proj scaled (no latent norm) */
    XF_PLUS1,       /* Gemma's RMSNorm weight w stored as 1 + w (llama.cpp multiplies by it) */
    XF_QKV_HEADS,   /* GPT-NeoX query_key_value rows (H, 3, hd) -> (3, H, hd): [Q ; K ; V] */
    XF_EXP_GATE,    /* gpt-oss experts.gate_up_proj [E, D, 2I] (x @ W) -> ffn_gate_exps (E, I, D): the even
                       columns, transposed per expert; its bias [E, 2I] -> (E, I) */
    XF_EXP_UP,      /* the same with the odd columns (ffn_up_exps) */
    XF_EXP_DOWN,    /* experts.down_proj [E, I, D] (x @ W) -> ffn_down_exps (E, D, I), transposed per expert */
} gguf_xf;

/* One tensor of an architecture, by role: its HF name is the model's name of the role
 * (cfg_role_name), its llama.cpp name the role's (gguf_role_name) unless gg names another. */
typedef struct {
    tensor_role role;
    const char *what;         /* "weight" / "bias" (NULL ends a list) */
    gguf_xf xf;
    bool opt;                 /* may be absent (biases, tied output) */
    const char *gg;           /* llama.cpp's name when not the role's (kv_b_proj: attn_k_b, attn_v_b); NULL */
} GgufMap;

typedef struct GgufArch GgufArch;
struct GgufArch {
    const char *arch;         /* general.architecture (FamilyRow.gguf_arch names it) */
    const char *model_type;   /* config.json model_type when read back */
    const GgufMap *glob, *layer;
    int (*kv)(GgufWriter *w, const ModelConfig *c, const struct cJSON *tree, const GgufArch *a);  /* its own keys */
    int (*cfg)(const GgufFile *f, const GgufArch *a, struct cJSON *c);  /* its config.json keys when read back */
};

/* The row of c's family: the architecture its family row names (NULL: none yet). */
const GgufArch *gguf_arch_row(const ModelConfig *c);
/* llama.cpp's name of a role without "blk.L." and the suffix ("attn_q", "ffn_norm"; NULL: none). */
const char *gguf_role_name(tensor_role r);
/* Whether llama.cpp b5415 (node-llama-cpp 3.8.1) requires output.weight of arch, with no fallback
 * to token_embd for tied embeddings (deepseek2, olmo2, gptneox; newer builds fall back for
 * deepseek2): a tied model's embeddings are then written as output.weight too. */
bool gguf_arch_output_required(const char *arch);
/* "<arch>.<k>" in a static buffer (valid until the next call). */
const char *gguf_arch_key(const GgufArch *a, const char *k);
/* llama.cpp's name of t: "blk.L.<name>.<what>" for a layer, "<name>.<what>" when layer < 0 (caller frees). */
char *gguf_layer_name(const GgufMap *t, int layer);
/* The Hugging Face name of t in a model described by c, in layer (ignored for model-level roles)
 * (caller frees; NULL with an error when c's layouts have no such role). */
char *gguf_hf_name(const ModelConfig *c, const GgufMap *t, int layer);
/* Rows of each of heads heads from rotate_half halves to interleaved pairs (llama.cpp's
 * LlamaModel.permute): new row h hd + 2i + j <- old row h hd + j hd/2 + i; inverse goes back.
 * src and dst are (rows, cols), distinct. */
void gguf_permute_rows(const float *src, float *dst, size_t heads, size_t rows, size_t cols, bool inverse);
/* GPT-NeoX's fused QKV rows head by head (H, 3, hd) to [Q ; K ; V] (3, H, hd) (llama.cpp's
 * GPTNeoXModel.modify_tensors); inverse goes back. src and dst are (rows, cols), distinct. */
void gguf_qkv_heads(const float *src, float *dst, size_t heads, size_t rows, size_t cols, bool inverse);
/* kv_b_proj (H (nope + v), kv_lora) to attn_k_b (H, kv_lora, nope) (k) or attn_v_b (H, v, kv_lora),
 * and back into kv_b_proj's rows. */
void gguf_kv_b_split(const ModelConfig *c, const float *kvb, float *dst, bool k);
void gguf_kv_b_join(const ModelConfig *c, const float *src, float *kvb, bool k);

/* Checks f's tensors against the row of its general.architecture (lint): every tensor the row needs
 * (per layer for <arch>.block_count layers) is present, token_embd.weight is (embedding_length,
 * vocab) and no tensor lies outside the row. *checked = false (AL_OK) when attnlab has no row for
 * the architecture. Errors name the first tensor wrong. */
int gguf_check_tensors(const GgufFile *f, bool *checked);

/* The architectures of the table as "llama, qwen2, ... and deepseek2" (what load and lint name). */
void gguf_arch_list(char *buf, size_t cap);
/* Reads a GGUF of a family of the table back as an HF-layout model: *store holds the tensors under
 * Hugging Face names (the transforms undone; F16 / BF16 in their dtype where the transform only moves
 * elements -- kv_b_proj joined from attn_k_b / attn_v_b and gpt-oss's experts too --, every other tensor
 * F32, dequantized), *config_json a config.json text of the family (caller frees). Errors name the file
 * and the tensor or key. */
int gguf_model_open(const char *path, Store **store, char **config_json);
/* What gguf_model_open keeps of the GGUF at path, per stored type, into buf: "24 BF16 kept, 1 F32",
 * "22 Q8_0 read widened to F32, 9 F32", "20 BF16 kept, 9 BF16 read widened to F32 (norms stored plus
 * one), 1 F32" (Gemma's norms: w = stored - 1 is arithmetic). Errors as gguf_model_open's. */
int gguf_stored_types(const char *path, char *buf, size_t cap);

#endif
