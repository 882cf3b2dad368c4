/* test_shell_util.h -- shared by the shell tests: Capture collects everything a command prints
 * (truncated at the buffer, always NUL-terminated) and run() executes one line with its output
 * captured. */
#ifndef TEST_SHELL_UTIL_H
#define TEST_SHELL_UTIL_H

#include <string.h>

#include "cmd_shell.h"
#include "exec.h"
#include "session.h"

/* Everything printed, in one buffer. */
typedef struct { char buf[1 << 16]; size_t n; } Capture;

/* Out sink appending s[0..n) to the Capture at ud. */
static inline void capture(void *ud, out_stream st, const char *s, size_t n) {
    (void)st;
    Capture *c = ud;
    if (c->n + n >= sizeof c->buf) n = sizeof c->buf - 1 - c->n;
    memcpy(c->buf + c->n, s, n);
    c->n += n;
    c->buf[c->n] = 0;
}

/* Runs one line in session s with its output in cap (cleared first); returns the status. The
 * front end's commands (run, lua, echo, ...) are added to the table first. */
static inline int run(Session *s, Capture *cap, const char *line) {
    if (shell_register()) return AL_ERR;
    Out o;
    out_init(&o);
    o.sink = capture;
    o.sink_ud = cap;
    cap->n = 0;
    cap->buf[0] = 0;
    return shell_exec_line(s, line, &(LineSrc){ 0 }, &o);
}

#endif
