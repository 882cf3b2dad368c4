/* test_workspace.c -- the session's workspace and transformations: a slot is created once and
 * released through the one hook (model close, session end); `truncate`, `convert mla`, `convert
 * tpa` and `kvsvd learn` leave transformations newest first (projections only while their
 * calibration stands), a newer one of the same kind and model replaces the older, `export` /
 * `check` / `kv-cache` work through them per model, and closing the model drops them. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "registry.h"
#include "session.h"
#include "shell.h"
#include "test_shell_util.h"
#include "workspace.h"
#include "xform.h"

static int created, destroyed, closed;
static const Model *closed_model;

static void *slot_create(void) { created++; return calloc(1, 8); }
static void slot_destroy(void *st) { destroyed++; free(st); }
static void slot_closed(void *st, Model *m) { (void)st; closed++; closed_model = m; }
static const WsSlot test_slot = {"test", slot_create, slot_destroy, slot_closed};

static size_t count_xforms(Session *s) {
    size_t n = 0;
    for (const Xform *x = xform_list(s); x; x = x->next) n++;
    return n;
}

static void test_slots(Session *s) {
    void *p = NULL, *q = NULL;
    CHECK(ws_peek(s, &test_slot) == NULL, "no state before first use");
    CHECK_OK(ws_state(s, &test_slot, &p));
    CHECK_OK(ws_state(s, &test_slot, &q));
    CHECK(p && p == q && created == 1, "created once (%d)", created);
    CHECK(ws_peek(s, &test_slot) == p, "peek finds it");
}

static void test_xforms(Session *s, Capture *c) {
    CHECK(run(s, c, "export out-none") == AL_ERR && strstr(al_errmsg(), "nothing to export for a"), "%s", al_errmsg());
    CHECK(run(s, c, "check") == AL_ERR && strstr(al_errmsg(), "nothing to check"), "%s", al_errmsg());
    CHECK_OK(run(s, c, "convert tpa kv-rank 1"));
    CHECK_OK(run(s, c, "convert mla kv-rank 48 rope-dim 16"));
    const Xform *x = xform_list(s);
    char d[256];
    CHECK(x && !strcmp(x->kind->name, "convert mla") && x->next && !strcmp(x->next->kind->name, "convert tpa"),
          "newest first");
    xform_describe(x, d, sizeof d);
    CHECK(strstr(d, "convert mla of a: kv_lora_rank 48"), "describe: %s", d);
    CHECK_OK(run(s, c, "check"));                          /* the newest: TransMLA */
    CHECK(strstr(c->buf, "the session's conversion (its DeepSeek-V3 export, in memory)"), "check mla: %s", c->buf);   /* nothing written */
    CHECK_OK(run(s, c, "convert tpa kv-rank 2"));          /* replaces the older TPA, becomes newest */
    CHECK(count_xforms(s) == 2 && !strcmp(xform_list(s)->kind->name, "convert tpa"), "replaced, %zu", count_xforms(s));
    xform_describe(xform_list(s), d, sizeof d);
    CHECK(strstr(d, "R_K 2"), "the newer TPA: %s", d);
    CHECK_OK(run(s, c, "check"));
    CHECK(strstr(c->buf, "(form a, R_K 2, R_V 2)"), "check tpa: %s", c->buf);
    CHECK_OK(run(s, c, "kv-cache"));                       /* one row each, oldest first */
    const char *rm = strstr(c->buf, "convert mla (MLA R 48"), *rt = strstr(c->buf, "convert tpa (form a R_K 2");
    CHECK(rm && rt && rm < rt, "kv-cache rows: %s", c->buf);
    /* another model: its own list, nothing of a's */
    CHECK_OK(run(s, c, "load demo-llama as b"));
    CHECK(run(s, c, "export out-none") == AL_ERR && strstr(al_errmsg(), "nothing to export for b"), "%s", al_errmsg());
    CHECK_OK(run(s, c, "kv-cache"));
    CHECK(strstr(c->buf, "no conversion of b"), "kv-cache of b: %s", c->buf);
    CHECK_OK(run(s, c, "truncate vo rank 2"));
    x = xform_newest(s, session_find(s, "b"), NULL);
    CHECK(x && !strcmp(x->kind->name, "truncate") && count_xforms(s) == 3, "truncate of b");
    CHECK_OK(run(s, c, "check"));                          /* the working copy is checked, named */
    CHECK(strstr(c->buf, "check of b with truncate vo rank 2 (FaRR working copy)"), "check truncate: %s", c->buf);
    /* KQ-SVD projections stand until the calibration they came from is replaced */
    char path[4096], line[4200];
    snprintf(path, sizeof path, "%s/ids.txt", test_tmpdir());
    FILE *f = fopen(path, "w");
    int vocab = session_find(s, "b")->cfg.vocab;
    for (int i = 0; f && i < 64; i++) fprintf(f, "%d ", 1 + (i * 7) % (vocab - 1));
    if (f) fclose(f);
    snprintf(line, sizeof line, "calibrate ids %s seqlen 8 samples 4", path);
    CHECK_OK(run(s, c, line));
    CHECK_OK(run(s, c, "kvsvd learn kqsvd rank 1"));
    x = xform_newest(s, session_find(s, "b"), NULL);
    CHECK(x && !strcmp(x->kind->name, "kvsvd learn"), "kvsvd learn is the newest");
    CHECK_OK(run(s, c, line));                                /* a new calibration drops the projections */
    x = xform_newest(s, session_find(s, "b"), NULL);
    CHECK(x && !strcmp(x->kind->name, "truncate") && count_xforms(s) == 3, "kvsvd learn dropped, %zu", count_xforms(s));
}

int main(void) {
    test_tmpdir();
    Session *s = session_new();
    Capture *c = calloc(1, sizeof *c);
    CHECK(s && c, "session");
    if (!s || !c) return check_done();
    CHECK_OK(run(s, c, "load demo-llama as a"));
    test_slots(s);
    test_xforms(s, c);
    Model *a = session_find(s, "a");
    CHECK_OK(session_close(s, "a"));
    CHECK(closed >= 1 && closed_model == a, "slot told of the closed model");
    CHECK(count_xforms(s) == 1 && !strcmp(xform_list(s)->kind->name, "truncate"), "a's transformations dropped");
    session_free(s);
    free(c);
    CHECK(destroyed == 1, "state released once (%d)", destroyed);
    return check_done();
}
