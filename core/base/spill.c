/* spill.c -- buffers moved into shared mappings of unlinked temporary files (spill.h). Owns the count
 * of the bytes mapped. */
#define _GNU_SOURCE
#include "spill.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

static _Atomic size_t mapped_bytes;       /* spill_mapped_bytes */

/* An unlinked file in dir on a file system whose pages the kernel writes back and drops: not tmpfs / ramfs, whose
 * files stay in memory (no gain over malloc); -1 when it cannot be made there. */
static int spill_open(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/attnlab-spill-XXXXXX", dir) >= (int)sizeof path) return -1;
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) return -1;
    unlink(path);
    struct statfs f;
    if (fstatfs(fd, &f) == 0 && (f.f_type == TMPFS_MAGIC || f.f_type == RAMFS_MAGIC)) { close(fd); return -1; }
    return fd;
}

/* An unlinked file under $TMPDIR (else /var/tmp, else /tmp); -1 when none can be made. */
static int spill_fd(void) {
    const char *env = getenv("TMPDIR");
    bool set = env && *env;
    int fd = spill_open(set ? env : "/var/tmp");
    if (fd < 0 && !set) fd = spill_open("/tmp");
    return fd;
}

/* Writes `bytes` of src to fd, zeros when src is NULL; false on a failed write (a full disk). */
static bool spill_write(int fd, const void *src, size_t bytes) {
    static const char zeros[1 << 16];
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done;
        if (!src && n > sizeof zeros) n = sizeof zeros;
        ssize_t w = write(fd, src ? (const char *)src + done : zeros, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        done += (size_t)w;
    }
    return true;
}

/* fd (closed here) mapped shared, `bytes` long, counted; NULL when mmap fails. */
static void *spill_map(int fd, size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    mapped_bytes += bytes;
    return p;
}

void *spill_copy(const void *src, size_t bytes) {
    if (bytes == 0) return NULL;
    int fd = spill_fd();
    if (fd < 0) return NULL;
    if (!spill_write(fd, src, bytes)) { close(fd); return NULL; }
    return spill_map(fd, bytes);
}

/* The file's blocks reserved (unwritten extents: nothing is written, they read as zeros), so that a store through
 * the mapping cannot meet a full disk (SIGBUS); where the file system cannot, the zeros written. */
static bool spill_reserve(int fd, size_t bytes) {
    int rc;
    do rc = fallocate(fd, 0, 0, (off_t)bytes); while (rc != 0 && errno == EINTR);
    if (rc == 0) return true;
    return (errno == EOPNOTSUPP || errno == ENOSYS) && spill_write(fd, NULL, bytes);
}

void *spill_zeroed(size_t bytes) {
    if (bytes == 0 || bytes > (size_t)INT64_MAX) return NULL;
    int fd = spill_fd();
    if (fd < 0) return NULL;
    if (!spill_reserve(fd, bytes)) { close(fd); return NULL; }
    return spill_map(fd, bytes);
}

void spill_free(void *p, size_t bytes) {
    if (!p) return;
    munmap(p, bytes);
    mapped_bytes -= bytes;
}

size_t spill_mapped_bytes(void) { return mapped_bytes; }
