/* test_shell_util.h -- shared by the shell tests: Capture collects everything a command prints
 * (truncated at the buffer, always NUL-terminated) and run() executes one line with its output
 * captured. */
#ifndef TEST_SHELL_UTIL_H
#define TEST_SHELL_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "cmd_shell.h"
#include "commands.h"
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

/* A session with the shipped stories260K-hf loaded as m and calibrated on examples/tinystory.txt (4 windows of
 * 64 tokens, attention inputs on), in a fresh scratch folder; the text's path in tp (cap bytes). NULL (a failed
 * check, not a skip: they ship) where the model, the text or a step is missing; free with session_free. */
static inline Session *shell_stories_calibrated(Capture *c, char *tp, size_t cap) {
    const char *models = getenv("ATTNLAB_MODELS"), *src = getenv("ATTNLAB_SRC");
    char mp[4200], line[9000];
    struct stat sb;
    snprintf(mp, sizeof mp, "%s/stories260K-hf", models ? models : "");
    snprintf(tp, cap, "%s/examples/tinystory.txt", src ? src : "");
    CHECK(models && src && !stat(mp, &sb) && !stat(tp, &sb), "%s and %s", mp, tp);
    test_tmpdir();
    CHECK_OK(commands_init());
    Session *s = session_new();
    CHECK(s != NULL, "session");
    snprintf(line, sizeof line, "load %s as m", mp);
    int rc = s ? run(s, c, line) : AL_ERR;
    snprintf(line, sizeof line, "calibrate %s samples 4 seqlen 64 inputs on", tp);
    if (rc == AL_OK) rc = run(s, c, line);
    CHECK(rc == AL_OK, "stories260K-hf loaded and calibrated: %s", c->buf);
    if (rc && s) { session_free(s); s = NULL; }
    return s;
}

#endif
