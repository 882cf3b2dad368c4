/* store.h -- a checkpoint's tensors by name, over one safetensors file or a sharded set
 * (model.safetensors.index.json), read lazily and converted to float32 on access.
 *
 * FP8 (F8_E4M3) weights are dequantized with their DeepSeek block scales: for a weight named
 * "X.weight" of shape (R, C), "X.weight_scale_inv" is F32 of shape (ceil(R/128), ceil(C/128))
 * and W[i][j] = fp8[i][j] * scale[i/128][j/128]; the edge blocks are partial (tensor.h's
 * dt_fp8_dequant, DT_FP8_BLOCK).
 * FP4 weights (tensor.h's rules and names): MXFP4 "<name>_blocks" / "<name>_scales" answer to the
 * name "<name>" (store_has, store_shape2: the logical (R, C); store_entry: the blocks' entry); an
 * NVFP4 "<name>" (U8, with "<name>_scale" and "<name>_scale_2") has its logical shape too, and
 * compressed-tensors' "<name>_packed" (U8, with "<name>_scale" and "<name>_global_scale") answers
 * to "<name>" as MXFP4's blocks do. Every read decodes them (store_fp4). */
#ifndef AL_STORE_H
#define AL_STORE_H

#include "safetensors.h"

typedef struct Store Store;

/* Opens a folder (model.safetensors, or model.safetensors.index.json and its shards, or the
 * single *.safetensors in it) or a single .safetensors file. */
int store_open(const char *path, Store **out);
/* Wraps one st_file built elsewhere (llama2.c .bin) as a store; takes ownership of f. */
int store_from_file(st_file *f, const char *dir, Store **out);
void store_free(Store *s);
size_t store_count(const Store *s);
const char *store_name_at(const Store *s, size_t i);        /* sorted by name */
bool store_has(const Store *s, const char *name);
/* The entry and its file; error naming the tensor (and the shards searched) when missing. */
int store_entry(const Store *s, const char *name, const st_entry **e, const st_file **f);
/* Lends tensor `name` (its own entry, not an FP4 alias) a copy of its bytes held elsewhere: a
 * sweep's buffer, read from the file past the page cache (gram_ahead.h). store_bytes answers with
 * it until it is lent NULL; the lender keeps it alive and unchanged until then, and lends and takes
 * it back only while no other thread reads the tensor. */
void store_lend(const Store *s, const char *name, const void *bytes);
/* The bytes of entry e (of file f) of tensor `name`: the lent copy, else the mapping (st_data). */
const void *store_bytes(const Store *s, const char *name, const st_entry *e, const st_file *f);
/* Shape as a 2-D matrix (1-D tensors are 1 x n); error if ndim > 2. */
int store_shape2(const Store *s, const char *name, size_t *rows, size_t *cols);
/* The whole tensor as float32 (dequantized). Warns (al_warn) when it holds NaN/Inf. */
int store_read(const Store *s, const char *name, Mat **out);
/* Rows [r0, r0+nr) of a 2-D tensor as float32 (nr x cols), dequantized. */
int store_read_rows(const Store *s, const char *name, size_t r0, size_t nr, Mat **out);
/* The block rows [r0, r0+nr) x cols [c0, c0+nc) as float32 (nr x nc), dequantized (FP8 with its
 * block scales): the same values store_read gives there, without a copy of the whole tensor. */
int store_read_block(const Store *s, const char *name, size_t r0, size_t nr, size_t c0, size_t nc, Mat **out);
/* The block scales of FP8 weight `name` of shape (R, C): "<name>_scale_inv", checked to be F32, BF16
 * or F8_E8M0 (tensor.h's publishers) of shape (ceil(R/128), ceil(C/128)), every value finite (checked
 * once per tensor); *scale is F32: into the mapping (possibly unaligned: read it with memcpy), or the
 * store's widened copy of a BF16 / E8M0 grid; *scols is its column count. The error names the tensor
 * and what is wrong (a NaN scale: its block). */
int store_fp8_scale(const Store *s, const char *name, size_t R, size_t C, const void **scale, size_t *scols);
/* compressed-tensors' strategy "block" (FP8_BLOCK: "<name>_scale" of the grid's shape (ceil(R/128),
 * ceil(C/128)), no "_scale_inv") is read by store_fp8_scale as that grid.
 * compressed-tensors FP8 (tensor.h, dt_fp8_dequant_rows): when `name` (R rows) is F8_E4M3 with a
 * "<name>_scale" (not a block grid) and no "<name>_scale_inv", *rscale is its scale as R floats (owned by the store,
 * built and checked once: shape [], [1], [R, 1] or [R], F32/BF16/F16, finite); else NULL. */
int store_fp8_rscale(const Store *s, const char *name, size_t R, const float **rscale);
/* The FP4 encoding of weight `name` (tensor.h): where its codes and scales lie, checked once per
 * tensor (dtypes, shapes, every block scale finite and the global one finite and positive);
 * q->enc is DT_FP4_NONE for a tensor stored otherwise. The error names the tensor and what is
 * wrong. */
int store_fp4(const Store *s, const char *name, dt_fp4 *q);
/* gpt-oss's stacked MXFP4 experts: "<name>_blocks" U8 [E, R, G, 16] and "<name>_scales" U8
 * [E, R, G] as one dt_fp4 of rows E R (expert e's rows [e R, (e + 1) R)) and cols G 32, checked as
 * store_fp4 checks; *E the experts. q->enc DT_FP4_NONE when name has no 4-D "_blocks". */
int store_fp4_experts(const Store *s, const char *name, size_t *E, dt_fp4 *q);
/* Number of shard files and the i-th path. */
size_t store_nfiles(const Store *s);
const char *store_file_at(const Store *s, size_t i);
/* Releases mapped pages of every tensor whose name starts with prefix. */
void store_release_prefix(const Store *s, const char *prefix);
/* A model streamed from the Hub (hub.h): the bytes held locally and the shards' total; false for
 * an ordinary checkpoint. A streamed store fetches a tensor's bytes when store_entry is asked for
 * its file (every reader of bytes asks), so shapes and names cost nothing. */
bool store_local_bytes(const Store *s, uint64_t *local, uint64_t *total);
/* Folder the store was opened from. */
const char *store_dir(const Store *s);

#endif
