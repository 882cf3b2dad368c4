/* safetensors.h -- the safetensors file format: a mmap'ed reader that validates the header,
 * and an atomic writer.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
 * then the data section; offsets are relative to the data section. The reader checks every
 * entry: known dtype, shape x dtype size = end - begin, offsets inside the file, no overlaps. */
#ifndef AL_SAFETENSORS_H
#define AL_SAFETENSORS_H

#include "tensor.h"

#define ST_MAX_DIMS 8

typedef struct {
    char *name;
    dt_type dtype;
    int ndim;
    size_t shape[ST_MAX_DIMS];
    size_t begin, end;          /* byte offsets within the data section */
} st_entry;

typedef struct st_file st_file;

/* Maps and validates path. On failure *out is NULL and the message names the file and what is
 * wrong with it (truncated, header beyond the file, bad JSON, overlapping offsets, ...). */
int st_open(const char *path, st_file **out);
void st_close(st_file *f);
/* Parses an in-memory image without copying (buf must outlive the result): the fuzz target. */
int st_parse_buffer(const char *path, const uint8_t *buf, size_t size, st_file **out);
/* Wraps an already-mapped image with entries computed elsewhere (llama2.c checkpoints): offsets
 * are relative to data_off; with owns_map the mapping is munmap'ed by st_close. Entries are copied. */
st_file *st_wrap(const char *path, const uint8_t *map, size_t size, size_t data_off, const st_entry *entries,
                 size_t n, bool owns_map);
const char *st_path(const st_file *f);
size_t st_count(const st_file *f);
const st_entry *st_entry_at(const st_file *f, size_t i);   /* sorted by data offset */
const st_entry *st_find(const st_file *f, const char *name);
/* Pointer to the entry's bytes inside the mapping (valid until st_close). */
const void *st_data(const st_file *f, const st_entry *e);
/* The entry's bytes' offset in the file at st_path (0 with *ok false where the image is not that
 * file mapped: st_parse_buffer's and st_wrap's). */
size_t st_file_offset(const st_file *f, const st_entry *e, bool *ok);
/* Value of a string in "__metadata__", or NULL. */
const char *st_meta(const st_file *f, const char *key);
/* Number of "__metadata__" strings (0: none, or no "__metadata__"). */
size_t st_meta_count(const st_file *f);
/* Element count of an entry (product of its shape). */
size_t st_numel(const st_entry *e);
/* Tells the kernel the entry's pages are no longer needed (streaming sweeps). */
void st_release(const st_file *f, const st_entry *e);

/* ================================================================ writer */

typedef struct st_writer st_writer;

/* One tensor of a header being built. */
typedef struct {
    const char *name;
    dt_type dtype;
    int ndim;
    const size_t *shape;
    size_t nbytes;
} st_desc;

/* The JSON header of a file holding d[0..n) in that order (data offsets consecutive) and the
 * metadata strings mk[i] = mv[i], padded with spaces to a multiple of 8 bytes; *len its length.
 * Caller frees; NULL when out of memory. Used by st_writer and the checkpoint writer. */
char *st_header_build(const st_desc *d, size_t n, const char *const *mk, const char *const *mv, size_t nm,
                      size_t *len);

st_writer *st_writer_new(void);
void st_writer_free(st_writer *w);
/* Adds a tensor. The bytes are copied. nbytes must equal numel x dt_size. */
int st_writer_add(st_writer *w, const char *name, dt_type dtype, int ndim, const size_t *shape,
                  const void *data, size_t nbytes);
/* Adds a float matrix converted to dtype (F32, F16, BF16; for F8_E4M3 use st_writer_add_fp8). */
int st_writer_add_mat(st_writer *w, const char *name, dt_type dtype, const Mat *m);
/* Quantizes m to F8_E4M3 with 128x128 block scales (DeepSeek's convention: weight = fp8 x
 * scale_inv; scale grid ceil(rows/128) x ceil(cols/128), F32) and adds both tensors:
 * `name` and `<name minus ".weight">.weight_scale_inv`. */
int st_writer_add_fp8(st_writer *w, const char *name, const Mat *m);
/* The quantization st_writer_add_fp8 does: q (rows x cols bytes) and scale (ceil(rows/128) x
 * ceil(cols/128) floats), both caller-allocated. */
void st_fp8_blocks(const Mat *m, uint8_t *q, float *scale);
int st_writer_meta(st_writer *w, const char *key, const char *value);
/* Total bytes added so far (data section). */
size_t st_writer_bytes(const st_writer *w);
/* Writes to path via an unpredictable "path.tmp.XXXXXX" (O_EXCL) and rename(2); nothing is left
 * behind on failure. */
int st_writer_write(st_writer *w, const char *path);

#endif
