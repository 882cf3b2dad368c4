/* fuzz_util.h -- what the file-based fuzz targets share: a private scratch folder, writing an
 * input into a file there, the one-line message check, and the standalone replay main().
 * Each target defines LLVMFuzzerTestOneInput; with -DFUZZ_STANDALONE, FUZZ_MAIN gives a main()
 * that runs the files named on the command line. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include "al.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Aborts with a note: libFuzzer records the input as a crash. */
static inline void fuzz_fail(const char *target, const char *what) {
    fprintf(stderr, "%s: invariant broken: %s\n", target, what);
    abort();
}

/* A scratch folder of this process (made once): /tmp/attnlab-fuzz-<pid>/sub. */
static inline const char *fuzz_dir(const char *sub) {
    static char dir[256];
    snprintf(dir, sizeof dir, "/tmp/attnlab-fuzz-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%s", sub);
    mkdir(dir, 0700);
    return dir;
}

/* Writes data into dir/name; the path (static). */
static inline const char *fuzz_file(const char *dir, const char *name, const uint8_t *data, size_t size) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || (size && fwrite(data, 1, size, fp) != size)) fuzz_fail("fuzz", "cannot write the scratch file");
    fclose(fp);
    return path;
}

/* An error must say something, on one line, naming `name` (or being out of memory). */
static inline void fuzz_check_msg(const char *target, const char *name) {
    const char *msg = al_errmsg();
    if (!msg[0] || strchr(msg, '\n')) {
        fprintf(stderr, "%s: message: [%s]\n", target, msg);
        fuzz_fail(target, "the error message is empty or not one line");
    }
    if (!strstr(msg, name) && !strstr(msg, "out of memory")) fuzz_fail(target, "the message does not name the file");
}

#ifdef FUZZ_STANDALONE
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Replays files (a corpus, a crash) without libFuzzer: fuzz_xxx FILE... */
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        FILE *fp = fopen(argv[i], "rb");
        if (!fp) { perror(argv[i]); return 1; }
        fseek(fp, 0, SEEK_END);
        long n = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
        size_t got = fread(b, 1, n > 0 ? (size_t)n : 0, fp);
        fclose(fp);
        LLVMFuzzerTestOneInput(b, got);
        free(b);
    }
    printf("%d inputs ran\n", argc - 1);
    return 0;
}
#endif

#endif
