/* progress.c -- the terminal progress line: core's progress reports (al_set_progress) drawn on
 * stderr when it is a terminal, at most 10 times a second, cleared when the work ends. */
#define _GNU_SOURCE
#include "progress.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "al.h"
#include "registry.h"

typedef struct {
    const char *label;
    size_t total;
    struct timespec t0, last;
    bool drawn;
} Progress;

static Progress prog;

static double secs(struct timespec a, struct timespec b) {
    return (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
}

/* Bytes as "1.2 MB" (decimal units, as transfer tools print them). */
static void human_bytes(double b, char *buf, size_t cap) {
    const char *u[] = {"B", "kB", "MB", "GB", "TB"};
    int k = 0;
    while (b >= 1000 && k < 4) { b /= 1000; k++; }
    snprintf(buf, cap, k ? "%.1f %s" : "%.0f %s", b, u[k]);
}

/* A transfer's line (core's labels "fetching ..." count bytes), with the command it serves:
 * "fetching X: 1.2 MB of 7.9 MB  34.0 MB/s for ranks vo all". */
static void draw_bytes(const char *l, size_t done, size_t total, double rate) {
    char d[32], t[32], r[32];
    human_bytes((double)done, d, sizeof d);
    human_bytes((double)total, t, sizeof t);
    human_bytes(rate, r, sizeof r);
    const Args *a = cmd_running();                 /* what the bytes are for */
    char *line = a ? args_line(a) : NULL;
    if (a && !line) al_err_clear();
    fprintf(stderr, "\r%s: %s of %s  %s/s%s%s\033[K", l, d, t, r, line ? " for " : "", line ? line : "");
    free(line);
}

/* Draws "layer i/N  x.x layers/s  ~Ns left" on stderr (a terminal only), at most 10 times a
 * second, and clears it when done == total. */
static void progress_draw(const char *label, size_t done, size_t total, void *ud) {
    (void)ud;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (done == 0 || total != prog.total || label != prog.label) {
        prog.label = label;
        prog.total = total;
        prog.t0 = now;
        prog.last.tv_sec = 0;
    }
    if (done >= total) {
        if (prog.drawn) { fputs("\r\033[K", stderr); fflush(stderr); }
        prog.drawn = false;
        prog.total = 0;
        return;
    }
    if (prog.drawn && secs(prog.last, now) < 0.1) return;
    prog.last = now;
    double el = secs(prog.t0, now), rate = el > 0 && done ? (double)done / el : 0;
    const char *l = label ? label : "step";
    if (!strncmp(l, "fetching ", 9)) draw_bytes(l, done, total, rate);
    else if (rate > 0) {
        const char *unit = strrchr(l, ' ');      /* "windows 1-4 of 16, layer": the rate is in layers/s */
        fprintf(stderr, "\r%s %zu/%zu  %.1f %ss/s  ~%.0fs left\033[K", l, done, total, rate, unit ? unit + 1 : l,
                (double)(total - done) / rate);
    }
    else
        fprintf(stderr, "\r%s %zu/%zu\033[K", l, done, total);
    fflush(stderr);
    prog.drawn = true;
}

void shell_progress_end(void) {
    if (prog.drawn) { fputs("\r\033[K", stderr); fflush(stderr); }
    prog.drawn = false;
    prog.total = 0;
}

void shell_progress_install(void) {
    if (isatty(STDERR_FILENO)) al_set_progress(progress_draw, NULL);
}
