/* gguf.h -- the GGUF v3 file format (llama.cpp's single-file models): a writer of metadata,
 * tensor infos and aligned tensor data, and a validated mmap reader. Knows nothing of model
 * families (core/export/gguf_convert.h maps attnlab models to and from llama.cpp's names).
 *
 * Layout (little-endian): "GGUF", u32 version (3; 2 is read too), u64 tensor count, u64 KV
 * count; the KVs (string key, u32 value type, value; strings are u64 length + bytes; arrays
 * u32 element type + u64 count + elements); the tensor infos (string name, u32 ndim, ndim x u64
 * ne with ne[0] the contiguous dimension -- a row-major (rows, cols) matrix is ne = {cols,
 * rows} --, u32 ggml type, u64 offset into the data section); padding to the alignment
 * (general.alignment, default 32); the data section, each tensor at an aligned offset.
 *
 * Tensor types: F32, F16, BF16 and Q8_0 (ggml's blocks of 32 along ne[0]: an fp16 scale
 * d = max|x| / 127 and 32 int8 q = round(x / d); x = q d) and MXFP4 (type 39, gpt-oss's experts:
 * per 32 an E8M0 byte and 16 bytes of E2M1 nibbles, see gguf.c). The reader refuses other types by
 * number. Every read is bounds-checked: a truncated or malformed file is an error naming the
 * file, the field and its offset. */
#ifndef AL_GGUF_H
#define AL_GGUF_H

#include "tensor.h"

#define GGUF_VERSION 3
#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MAX_DIMS 4
#define GG_QK8_0 32               /* values per Q8_0 block */
#define GG_Q8_0_BLOCK 34          /* bytes per Q8_0 block: fp16 scale + 32 int8 */

typedef enum {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5, GGUF_F32 = 6,
    GGUF_BOOL = 7, GGUF_STR = 8, GGUF_ARR = 9, GGUF_U64 = 10, GGUF_I64 = 11, GGUF_F64 = 12, GGUF_NTYPES
} gguf_vtype;

typedef enum { GG_F32 = 0, GG_F16 = 1, GG_Q8_0 = 8, GG_BF16 = 30, GG_MXFP4 = 39 } gg_type;
#define GG_MXFP4_BLOCK 17         /* bytes per MXFP4 block of 32: E8M0 scale + 16 bytes of nibbles */

/* "F32", "F16", "Q8_0", "BF16" (NULL for others). */
const char *gg_type_name(gg_type t);
/* Parses "f32" / "f16" / "bf16" / "q8_0" (any case); AL_ERR naming the accepted words. */
int gg_type_parse(const char *s, gg_type *out);
/* Bytes of n values of type t along ne[0] (Q8_0: n must be a multiple of 32, else 0). */
size_t gg_row_bytes(gg_type t, size_t n);
/* Converts n floats (n a multiple of 32 for Q8_0) to type t / back. */
void gg_from_f32(gg_type t, const float *x, size_t n, void *dst);
void gg_to_f32(gg_type t, const void *src, size_t n, float *dst);
/* One ggml MXFP4 block (GG_MXFP4_BLOCK bytes: E8M0 byte e, then value j < 16 in the low nibble of byte
 * 1 + j and value j + 16 in its high nibble; each value kvalues_mxfp4 -- E2M1 doubled -- times 2^(e - 128))
 * as Hugging Face's MXFP4 (tensor.h: its E8M0 scale byte, 2^(s - 127) times the E2M1 code, and 16 bytes of
 * which byte k holds value 2k in the low nibble, 2k + 1 in the high one): the same 32 values, bit for bit
 * (the codes are E2M1's, sign bit 3, in both). */
void gg_mxfp4_to_hf(const uint8_t *blk, uint8_t *scale, uint8_t *codes);
/* The inverse: Hugging Face's scale byte and 16 bytes of codes as one ggml MXFP4 block, bit for bit. */
void gg_mxfp4_from_hf(uint8_t scale, const uint8_t *codes, uint8_t *blk);

/* ================================================================ writer */

typedef struct GgufWriter GgufWriter;

GgufWriter *gguf_writer_new(void);
void gguf_writer_free(GgufWriter *w);
/* Metadata, in the order set (a key set twice is an error naming it). Strings are copied. */
int gguf_set_u32(GgufWriter *w, const char *key, uint32_t v);
int gguf_set_i32(GgufWriter *w, const char *key, int32_t v);
int gguf_set_u64(GgufWriter *w, const char *key, uint64_t v);
int gguf_set_f32(GgufWriter *w, const char *key, float v);
int gguf_set_bool(GgufWriter *w, const char *key, bool v);
int gguf_set_str(GgufWriter *w, const char *key, const char *v);
/* A numeric array: n elements of type elt (GGUF_U8 .. GGUF_F64 except STR/ARR), copied. */
int gguf_set_arr(GgufWriter *w, const char *key, gguf_vtype elt, const void *data, size_t n);
/* An array of n strings (s[i] of len[i] bytes; len NULL: NUL-terminated), copied. */
int gguf_set_arr_str(GgufWriter *w, const char *key, const char *const *s, const size_t *len, size_t n);
/* Keys set so far. */
size_t gguf_writer_kv_count(const GgufWriter *w);

/* Fills dst with the tensor's numel float32 values (row-major, ne[0] fastest) when the file is
 * written; ud is the one given to gguf_add_tensor, which the writer owns (free()d after). */
typedef int (*gguf_fill_fn)(void *ud, float *dst, size_t numel);
/* Adds a tensor of ndim dims ne[0..ndim) stored as type (converted from float32 at write
 * time, one tensor in memory at a time). Q8_0 needs ne[0] % 32 == 0 (error otherwise). */
int gguf_add_tensor(GgufWriter *w, const char *name, gg_type type, int ndim, const uint64_t *ne, gguf_fill_fn fill,
                    void *ud);
/* Fills dst with the tensor's nbytes already in its ggml type (a tensor copied as stored: gpt-oss's MXFP4
 * experts repacked block by block, gg_mxfp4_from_hf); ud as gguf_fill_fn's. */
typedef int (*gguf_fill_raw_fn)(void *ud, uint8_t *dst, size_t nbytes);
int gguf_add_tensor_raw(GgufWriter *w, const char *name, gg_type type, int ndim, const uint64_t *ne, gguf_fill_raw_fn raw,
                        void *ud);
/* The same with the values given (owned by the writer: free()d once written, or on failure). */
int gguf_add_tensor_f32(GgufWriter *w, const char *name, gg_type type, int ndim, const uint64_t *ne, float *owned);
size_t gguf_writer_tensor_count(const GgufWriter *w);
/* Bytes of the data section so far (alignment padding included). */
size_t gguf_writer_data_bytes(const GgufWriter *w);
/* Writes the whole file to fd (where names it in messages). Polls al_interrupted per tensor. */
int gguf_write_fd(GgufWriter *w, int fd, const char *where);
/* Writes path through an unpredictable temporary sibling (O_EXCL) renamed into place when
 * complete and fsync'ed: path is never seen half-written; nothing is left on failure. An existing
 * path is replaced (the caller decides whether it may be). */
int gguf_write_file(GgufWriter *w, const char *path);

/* ================================================================ reader */

typedef struct {
    char *key;
    gguf_vtype type;
    gguf_vtype arr_type;      /* arrays: the element type */
    uint64_t n;               /* arrays: element count */
    union { uint64_t u; int64_t i; double f; } v;  /* integer / bool (u, i) and float (f) scalars */
    char *str;                /* string scalar (NUL-terminated copy; may hold NULs: see len) */
    size_t len;
    const uint8_t *arr;       /* numeric arrays: the raw elements in the mapping */
    const uint8_t **sarr;     /* string arrays: each element's u64 length prefix in the mapping */
} GgufKV;

typedef struct {
    char *name;
    gg_type type;
    int ndim;
    uint64_t ne[GGUF_MAX_DIMS];   /* ne[i] = 1 beyond ndim */
    uint64_t offset;              /* in the data section */
    size_t nbytes;
    size_t numel;
} GgufTensor;

typedef struct GgufFile GgufFile;

/* Maps and validates path (see the top of this file). */
int gguf_open(const char *path, GgufFile **out);
/* The same over an in-memory image (buf must outlive the result); for tests. */
int gguf_parse_buffer(const char *where, const uint8_t *buf, size_t size, GgufFile **out);
void gguf_close(GgufFile *f);
const char *gguf_path(const GgufFile *f);
uint32_t gguf_version(const GgufFile *f);
size_t gguf_alignment(const GgufFile *f);

size_t gguf_kv_count(const GgufFile *f);
const GgufKV *gguf_kv_at(const GgufFile *f, size_t i);
const GgufKV *gguf_kv_find(const GgufFile *f, const char *key);
/* A scalar as an integer (any integer or bool type) / a number (integers and floats); AL_ERR
 * naming the key when absent or of another type. */
int gguf_get_int(const GgufFile *f, const char *key, int64_t *out);
int gguf_get_num(const GgufFile *f, const char *key, double *out);
/* A string scalar, or NULL when absent or not a string. */
const char *gguf_get_str(const GgufFile *f, const char *key);
/* Element i of an array: a string (pointer into the mapping, not NUL-terminated) / a number. */
void gguf_arr_str(const GgufKV *kv, size_t i, const char **s, size_t *len);
double gguf_arr_num(const GgufKV *kv, size_t i);

size_t gguf_tensor_count(const GgufFile *f);
const GgufTensor *gguf_tensor_at(const GgufFile *f, size_t i);
const GgufTensor *gguf_tensor_find(const GgufFile *f, const char *name);
/* The tensor's bytes in the mapping. */
const void *gguf_tensor_data(const GgufFile *f, const GgufTensor *t);
/* The tensor as numel float32 values (dequantized). */
void gguf_tensor_f32(const GgufFile *f, const GgufTensor *t, float *dst);

#endif
