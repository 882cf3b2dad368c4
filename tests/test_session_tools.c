/* test_session_tools.c -- the session's tools over commands/ alone (no Readline, no Lua): an
 * interrupted `ranks ... all` keeps the layers it finished and says how many (issue 15 item 17);
 * settings and parameters as columns of CSV output (item 15); the stack of transformations with
 * `transforms` and `undo` (item 14); tab completion offers file names only in file parameters
 * (item 9). Lines run as at the prompt (test_shell_util.h). */
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

/* ================================================================ item 9: completion */

/* A word that fills positional p (its first choice, else a number). */
static const char *filler(const Param *p) { return p->choices && p->choices[0] ? p->choices[0] : "0"; }

/* Completes every parameter slot of c (after prefix): file names exactly where a file goes. */
static void check_slots(Session *s, const Command *c, const char *prefix) {
    char line[512];
    size_t n = (size_t)snprintf(line, sizeof line, "%s%s ", prefix, c->name);
    for (const Command *sc = c->sub; sc && sc->name; sc++) check_slots(s, sc, line);
    if (c->sub) return;
    for (const Param *p = c->pos; p && p->name; p++) {
        if (p->flags & PF_REST) break;
        StrList l = {0};
        CHECK_OK(cmd_complete(s, line, n, n, &l));
        bool want = p->type == ARG_PATH || p->comp == COMP_LOADABLE;
        CHECK(l.files == want, "'%s' + %s: files %d", line, p->name, l.files);
        strlist_free(&l);
        n += (size_t)snprintf(line + n, sizeof line - n, "%s ", filler(p));
    }
    for (const Param *p = c->kw; p && p->name; p++) {
        if (p->type == ARG_FLAG) continue;
        char kl[600];
        size_t k = (size_t)snprintf(kl, sizeof kl, "%s%s ", line, p->name);
        StrList l = {0};
        CHECK_OK(cmd_complete(s, kl, k, k, &l));
        CHECK(l.files == (p->type == ARG_PATH), "'%s': files %d", kl, l.files);
        strlist_free(&l);
    }
}

static void test_completion(Session *s) {
    const Command *c;
    for (size_t i = 0; (c = cmd_at(i, NULL)); i++) check_slots(s, c, "");
    /* one list reused as the prompt does (repl.c): a file slot first must not leak into the next */
    StrList l = {0};
    CHECK_OK(cmd_complete(s, "set plot.dir ", 13, 13, &l));
    CHECK(l.files, "set plot.dir offers folders");
    strlist_free(&l);
    const char *none[] = { "set ", "set tau ", "use ", "spectrum ", "spectrum vo layer 0 head ", NULL };
    for (size_t i = 0; none[i]; i++) {
        size_t n = strlen(none[i]);
        CHECK_OK(cmd_complete(s, none[i], n, n, &l));
        CHECK(!l.files, "'%s' offers file names", none[i]);
        strlist_free(&l);
    }
}

int main(void) {
    test_tmpdir();
    Session *s = session_new();
    CHECK(s != NULL, "session_new: %s", al_errmsg());
    if (!s) return check_done();
    static Capture cap;
    test_interrupted_sweep(s, &cap);
    test_completion(s);
    session_free(s);
    return check_done();
}
