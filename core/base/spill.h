/* spill.h -- memory the kernel may write back and drop: a copy of a buffer in a shared mapping of an
 * unlinked file under $TMPDIR (else /var/tmp, else /tmp; never on tmpfs / ramfs, whose files stay in
 * memory). Its pages are the page cache's, not the process's anonymous memory: once written back (one
 * write of the bytes) they are dropped under memory pressure and read back on the next touch, and stores
 * through the mapping go to the file. For what must stay available for the whole session but is not worth
 * anonymous memory: the calibration's attention-input Grams, a conversion's held BF16 matrices.
 *
 * No file (no writable folder off tmpfs, a full disk, no mmap): spill_copy returns NULL with no error set,
 * and the caller keeps its malloc'd buffer -- the same bytes, in anonymous memory (spill_zeroed: the caller
 * callocs). The bytes are written once, when copied (spill_zeroed: none); the kernel writes the pages back again
 * only when stores through the mapping dirty them. */
#ifndef AL_SPILL_H
#define AL_SPILL_H

#include <stddef.h>

/* A shared mapping (bytes, readable and writable) holding a copy of src, or NULL (no error set). */
void *spill_copy(const void *src, size_t bytes);
/* A shared mapping of `bytes` zero bytes (readable and writable), or NULL (no error set): the file's blocks are
 * reserved (fallocate; nothing written) so that stores through it cannot find the disk full. For statistics
 * accumulated in place (the calibration's G_X): the pages the stores dirty are written back by the kernel. */
void *spill_zeroed(size_t bytes);
/* Unmaps a spill_copy / spill_zeroed mapping of `bytes` (NULL: nothing). */
void spill_free(void *p, size_t bytes);
/* Bytes this process holds in spill_copy / spill_zeroed mappings now. */
size_t spill_mapped_bytes(void);

#endif
