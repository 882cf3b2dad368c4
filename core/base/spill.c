/* spill.c -- buffers moved into shared mappings of unlinked temporary files (spill.h). Owns the count
 * of the bytes mapped. */
#define _GNU_SOURCE
#include "spill.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdatomic.h>
#include <stdbool.h>
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

/* An unlinked file under $TMPDIR (else /var/tmp, else /tmp) holding src's bytes; -1 when it cannot be made. */
static int spill_file(const void *src, size_t bytes) {
    const char *env = getenv("TMPDIR");
    bool set = env && *env;
    int fd = spill_open(set ? env : "/var/tmp");
    if (fd < 0 && !set) fd = spill_open("/tmp");
    if (fd < 0) return -1;
    const char *p = src;
    for (size_t done = 0; done < bytes;) {
        ssize_t w = write(fd, p + done, bytes - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { close(fd); return -1; }
        done += (size_t)w;
    }
    return fd;
}

void *spill_copy(const void *src, size_t bytes) {
    if (bytes == 0) return NULL;
    int fd = spill_file(src, bytes);
    if (fd < 0) return NULL;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    mapped_bytes += bytes;
    return p;
}

void spill_free(void *p, size_t bytes) {
    if (!p) return;
    munmap(p, bytes);
    mapped_bytes -= bytes;
}

size_t spill_mapped_bytes(void) { return mapped_bytes; }
