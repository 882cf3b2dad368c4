/* ckpt_write.h -- the one checkpoint writer: every export (FaRR, TransMLA, TPA, KQ-SVD) and every
 * synthetic model (demo models, ds-r1-shape) writes its folder through it.
 *
 * What it owns:
 *   destination   a new folder (or an existing empty one), never the source model's folder, a
 *                 folder inside it, or a folder holding it; `force` replaces an existing folder
 *                 as a whole. "" is refused.
 *   staging       everything is written into a private staging folder created beside the
 *                 destination (".<name>.staging-XXXXXX", mkdtemp) and renamed into place by
 *                 ckpt_commit only when complete; ckpt_abort (any failure, Ctrl-C) removes it, and
 *                 the parent folders the writer created. With force the old folder is renamed
 *                 aside (".old.XXXXXX" beside it), the new one renamed in, then the old one removed: an old index or shard
 *                 can never survive beside new ones. Files are created O_EXCL | O_NOFOLLOW.
 *   weights       tensors added by descriptor (name, dtype, shape, bytes) into the current shard;
 *                 borrowed bytes (e.g. straight from the source's mapping) are streamed from
 *                 there into the file after the header, never copied into a shard buffer;
 *                 computed tensors are owned buffers, or lazy (computed one at a time while
 *                 the shard is written). A file's writeback is started every 32 MB as it is
 *                 written (sync_file_range: the disk busy from the first piece, as dd's), and
 *                 each file is fsync'ed at its close, before the staging folder is renamed. Each
 *                 ckpt_shard_end closes a shard; the shards are named model.safetensors (one) or
 *                 model-0000i-of-0000N.safetensors with model.safetensors.index.json
 *                 (metadata.total_size = the sum of tensor bytes; weight_map sorted by name).
 *                 Every weight shard has {"format": "pt"} in __metadata__.
 *   other files   method files (safetensors of the method's own format at a relative path),
 *                 JSON documents (config.json, manifests) and the source's auxiliary files
 *                 (tokenizer, generation config, licence), streamed.
 *
 * Use: ckpt_begin; (ckpt_add* ... ckpt_shard_end)*; ckpt_write_json ...; ckpt_commit, or
 * ckpt_abort on any failure. Both free the writer. */
#ifndef AL_CKPT_WRITE_H
#define AL_CKPT_WRITE_H

#include <cjson/cJSON.h>

#include "tensor.h"

typedef struct CkptWriter CkptWriter;

typedef struct {
    const char *src;      /* the source model (its folder, or a file in it); NULL: none */
    bool force;           /* replace an existing non-empty destination as a whole */
    bool can_force;       /* the command offers `force` (the refusal says so) */
    bool always_index;    /* one shard too is named model-00001-of-00001 with an index */
} CkptOpts;

/* Checks the destination (see above) and creates the staging folder (and dir's missing parents). */
int ckpt_begin(const char *dir, const CkptOpts *o, CkptWriter **out);
/* Renames the finished folder into place (closing an open shard and writing the index first);
 * on failure everything staged is removed. *files (may be NULL): the files written. Frees w. */
int ckpt_commit(CkptWriter *w, size_t *files);
/* Removes the staging folder and the parents ckpt_begin created. Frees w; NULL is fine. */
void ckpt_abort(CkptWriter *w);

/* ---------------------------------------------------------------- tensors */

/* Adds a tensor to the current file (a weight shard unless ckpt_file_begin opened another).
 * nbytes must equal numel x dt_size. The bytes are borrowed: they must stay valid until the
 * file is closed (ckpt_shard_end / ckpt_file_end / ckpt_commit). */
int ckpt_add(CkptWriter *w, const char *name, dt_type dtype, int ndim, const size_t *shape, const void *data,
             size_t nbytes);
/* The same, taking ownership of buf (malloc'ed; freed once written, or on failure). */
int ckpt_add_owned(CkptWriter *w, const char *name, dt_type dtype, int ndim, const size_t *shape, void *buf,
                   size_t nbytes);
/* Computes a tensor's bytes when its file is written (dst holds nbytes); ud is the one given. */
typedef int (*ckpt_fill_fn)(void *ud, void *dst, size_t nbytes);
/* Adds a tensor whose bytes are computed only when its file is written, one at a time, so a
 * shard of computed tensors never sits in memory whole. The writer owns ud (free()d after). */
int ckpt_add_lazy(CkptWriter *w, const char *name, dt_type dtype, int ndim, const size_t *shape, size_t nbytes,
                  ckpt_fill_fn fill, void *ud);
/* A float matrix converted to dtype (F32, F16, BF16; F8_E4M3 adds "<name>_scale_inv" too, with
 * fresh 128x128 block scales), 2-D (rows, cols), or 1-D (cols) when ndim is 1. */
int ckpt_add_mat(CkptWriter *w, const char *name, dt_type dtype, const Mat *m, int ndim);
/* A float matrix m (rows, cols) written transposed, (cols, rows) -- HF's (out, in) of an (in, out)
 * matrix -- in dtype (F32, F16, BF16): dt_from_f32 of mat_transpose(m), computed when its file is
 * written, with no float copy; 1-D (rows) when m has one column. m is borrowed until then. */
int ckpt_add_mat_t(CkptWriter *w, const char *name, dt_type dtype, const Mat *m);
/* Bytes of tensor data added to weight shards so far (the index's total_size at the end). */
size_t ckpt_weight_bytes(const CkptWriter *w);

/* Closes the current weight shard (no-op when it holds nothing). Names are given at commit. */
int ckpt_shard_end(CkptWriter *w);

/* Opens a safetensors file of a method's own layout at relpath (e.g. "farr/factors.safetensors"),
 * metadata {"format": format} (NULL: "pt"); ckpt_add* then go there until ckpt_file_end. */
int ckpt_file_begin(CkptWriter *w, const char *relpath, const char *format);
/* Adds a string to the __metadata__ of the file being built (weight shard or method file). */
int ckpt_meta(CkptWriter *w, const char *key, const char *value);
int ckpt_file_end(CkptWriter *w);

/* ---------------------------------------------------------------- other files */

/* Writes doc (pretty-printed) as relpath; in a config.json a whole number under a member transformers declares
 * float (final_logit_softcapping, routed_scaling_factor, rope_theta, ...: FLOAT_KEYS in ckpt_write.c) as "N.0". */
int ckpt_write_json(CkptWriter *w, const char *relpath, const cJSON *doc);
/* Adds key: v to a manifest object, or null when v is not finite (NaN, inf). */
void ckpt_json_num(cJSON *o, const char *key, double v);
/* A record's double field and its key: a manifest record is a table of these, ended by {NULL}
 * (e.g. {"k_err", offsetof(TpaLayerReport, k_err)}), written by one loop. */
typedef struct {
    const char *key;
    size_t offset;          /* offsetof(record, field); the field is a double */
} CkptJsonField;
/* Adds each field of rec under its key (ckpt_json_num), in table order. */
void ckpt_json_fields(cJSON *o, const void *rec, const CkptJsonField *fields);
/* Appends, in order, the members of a JSON object written as text without its braces
 * ("\"a\": 1, \"b\": null"): constant key blocks kept as data. AL_ERR when the text is not JSON. */
int ckpt_json_merge(cJSON *o, const char *members);
/* The shape keys every Hugging Face config.json carries, each added (in this order) only where o
 * lacks it: hidden_size, intermediate_size, num_attention_heads, num_hidden_layers, vocab_size,
 * max_position_embeddings. */
typedef struct {
    double hidden, inter, heads, layers, vocab, max_pos;
} CkptHfShape;
void ckpt_json_hf_shape(cJSON *o, const CkptHfShape *s);
/* Writes len bytes as relpath. */
int ckpt_write_text(CkptWriter *w, const char *relpath, const char *text, size_t len);
/* Writes relpath by handing fn the new file's descriptor (ud and the path for messages); the
 * file is fsync'ed, and removed when fn fails. For single-file formats (GGUF). */
typedef int (*ckpt_stream_fn)(void *ud, int fd, const char *path);
int ckpt_write_stream(CkptWriter *w, const char *relpath, ckpt_stream_fn fn, void *ud);
/* Copies, streamed, the auxiliary files of the source folder (src_dir; a file's folder when it
 * is a file) that belong to a checkpoint: tokenizer.json, tokenizer_config.json,
 * special_tokens_map.json, generation_config.json, tokenizer.model, added_tokens.json, vocab.*,
 * merges.txt, tok*.bin and LICENSE / LICENCE files -- nothing else. Returns the count in *n. */
int ckpt_copy_aux(CkptWriter *w, const char *src_dir, size_t *n);
/* True when a file name is such an auxiliary file. */
bool ckpt_is_aux(const char *name);

#endif
