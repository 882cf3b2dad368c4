/* fuzz_safetensors.c -- a libFuzzer target over st_parse_buffer (core/io/safetensors.h).
 *
 * Each input is a whole safetensors image. A parse either fails with a message (which must be
 * one non-empty line) or succeeds; on success every entry is checked against the promises the
 * reader makes (offsets inside the data section, size = numel x dtype size, the entries tile
 * the data section exactly -- no overlap, no hole, nothing after the last --, names findable),
 * and every entry's bytes are touched and, for float types, converted, so ASan sees any read the validation let through. See README.md for the build.
 * Built without libFuzzer (-DFUZZ_STANDALONE) it runs the files named on its command line. */
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Aborts with a note: the fuzzer records the input as a crash. */
static void fail(const char *what) {
    fprintf(stderr, "fuzz_safetensors: invariant broken: %s\n", what);
    abort();
}

/* Touches and converts an entry's bytes (at most 4096 elements of it). */
static void touch(const st_file *f, const st_entry *e) {
    const uint8_t *p = st_data(f, e);
    size_t n = e->end - e->begin;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i += 61) sink ^= p[i];
    if (n) sink ^= p[n - 1];
    (void)sink;
    if (dt_is_float(e->dtype)) {
        size_t k = st_numel(e) < 4096 ? st_numel(e) : 4096;
        static float buf[4096];
        if (dt_to_f32(e->dtype, p, k, buf) != AL_OK) fail("dt_to_f32 refused a float dtype");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file *f = NULL;
    if (st_parse_buffer("fuzz.safetensors", data, size, &f) != AL_OK) {
        const char *msg = al_errmsg();
        if (f) fail("an error left a file behind");
        if (!msg[0] || strchr(msg, '\n')) fail("the error message is empty or not one line");
        if (!strstr(msg, "fuzz.safetensors") && !strstr(msg, "out of memory")) fail("the message does not name the file");
        return 0;
    }
    size_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | data[i];
    size_t data_size = size - 8 - hlen, reach = 0, at = 0;
    const st_entry *prev = NULL;
    for (size_t i = 0; i < st_count(f); i++) {
        const st_entry *e = st_entry_at(f, i);
        if (e->end < e->begin || e->end > data_size) fail("offsets outside the data section");
        if (st_numel(e) * dt_size(e->dtype) != e->end - e->begin) fail("size != numel x dtype size");
        if (e->ndim < 0 || e->ndim > ST_MAX_DIMS) fail("ndim out of range");
        if (prev && e->begin < prev->begin) fail("entries not sorted by offset");
        if (e->end > e->begin && e->begin < reach) fail("two tensors overlap");
        if (e->end > e->begin && e->end > reach) reach = e->end;
        if (e->begin != at) fail("the entries do not tile the data section (a hole or an empty tensor inside one)");
        at = e->end;
        if (st_find(f, e->name) != e) fail("st_find does not return the entry");
        touch(f, e);
        prev = e;
    }
    if (at != data_size) fail("bytes after the last tensor");
    st_meta(f, "format");
    st_close(f);
    return 0;
}

#ifdef FUZZ_STANDALONE
#include "fuzz_util.h"      /* main(): runs the files named on the command line */
#endif
