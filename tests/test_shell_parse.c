/* test_shell_parse.c -- the tokenizer, the parser (good lines and each kind of bad line with its
 * caret column), usage lines, dispatch checks, the output layer, and completion, over a test
 * group that has every kind of parameter. */
#include <string.h>

#include "check.h"
#include "cmd_shell.h"
#include "exec.h"
#include "lua_shell.h"
#include "registry.h"
#include "out.h"
#include "session.h"
#include "shell.h"

/* ================================================================ a test group */

static const char *const KINDS[] = { "vo", "qk", NULL };
static const char *const POLICIES[] = { "layer-max", "head", NULL };
static int calls;
static char last_call[256];   /* "path kind layer force" of the last call */

/* The test commands share one handler: it reads only the names its command declares (reading
 * others aborts in builds with ATTNLAB_ARG_CHECKS). */
static bool declared(const Args *a, const char *name) { return cmd_find_kw(a->cmd, name) != NULL; }

static int t_fn(Session *s, const Args *a, Out *out) {
    (void)s;
    calls++;
    const char *kind = declared(a, "kind") ? args_str(a, "kind") : NULL;
    const char *layer = declared(a, "layer") ? args_str(a, "layer") : NULL;
    bool force = declared(a, "force") && args_flag(a, "force");
    snprintf(last_call, sizeof last_call, "%s %s %s %s", a->path, kind ? kind : "-", layer ? layer : "-",
             force ? "force" : "-");
    if (declared(a, "layers") && args_given(a, "layers")) {      /* a table result: one row per layer of the range */
        Table *t = table_new(3, "layer", "name", "ok");
        for (long l = args_int(a, "layers"); l <= args_val(a, "layers")->hi; l++) {
            table_row(t); table_int(t, l); table_str(t, "x"); table_bool(t, l % 2 == 0);
        }
        return out_table_to(out, declared(a, "to") ? args_str(a, "to") : NULL, t);
    }
    if (declared(a, "tau") && args_given(a, "tau")) {
        double v[3] = { 1.5, 2, args_float(a, "tau") };
        return out_array(out, v, 3);
    }
    out_number(out, 42);
    return AL_OK;
}

static const Param tst_pos[] = {
    { .name = "kind", .type = ARG_ENUM, .choices = KINDS, .comp = COMP_CHOICES, .help = "pair" },
    {0}
};
static const Param tst_kw[] = {
    { .name = "layer", .type = ARG_INT, .flags = PF_ALL, .def = "all", .comp = COMP_LAYERS, .help = "layer" },
    { .name = "tau", .type = ARG_FLOAT, .min = 0, .max = 1, .comp = COMP_NONE, .help = "threshold" },
    { .name = "share", .type = ARG_FLOAT, .min = 0, .max = 1, .flags = PF_OPEN_MIN, .comp = COMP_NONE, .help = "(0, 1]" },
    { .name = "policy", .type = ARG_ENUM, .choices = POLICIES, .def = "layer-max", .comp = COMP_CHOICES, .help = "p" },
    { .name = "layers", .type = ARG_RANGE, .comp = COMP_LAYERS, .help = "range" },
    { .name = "force", .type = ARG_FLAG, .comp = COMP_NONE, .help = "flag" },
    PARAM_TO,
    {0}
};
static const Param path_pos[] = {
    { .name = "file", .type = ARG_PATH, .comp = COMP_FILES, .help = "file" },
    { .name = "n", .type = ARG_INT, .def = "3", .comp = COMP_NONE, .help = "count" },
    {0}
};
static const Param say_pos[] = {
    { .name = "text", .type = ARG_STRING, .flags = PF_REST, .comp = COMP_NONE, .help = "text" },
    {0}
};
static const Param spec_kw[] = {
    { .name = "head", .type = ARG_INT, .def = "0", .comp = COMP_HEADS, .help = "head" },
    {0}
};
static const Command tplot_sub[] = {
    { .name = "spectrum", .summary = "s", .help = "h", .pos = tst_pos, .kw = spec_kw, .fn = t_fn },
    { .name = "vo-ranks", .summary = "s", .help = "h", .kw = tst_kw, .fn = t_fn },
    {0}
};
static const Command test_cmds[] = {
    { .name = "tst", .summary = "s", .help = "h", .pos = tst_pos, .kw = tst_kw, .fn = t_fn },
    { .name = "tpath", .summary = "s", .help = "h", .pos = path_pos, .fn = t_fn },
    { .name = "tsay", .summary = "s", .help = "h", .pos = say_pos, .fn = t_fn },
    { .name = "tplot", .summary = "s", .help = "h", .sub = tplot_sub },
    { .name = "tneed", .summary = "s", .help = "h", .fn = t_fn, .flags = CMD_MODEL },
    {0}
};
static const CommandGroup test_group = { .title = "Test", .cmds = test_cmds };

/* ================================================================ helpers */

/* Parses a line that must fail; checks the message and the caret column. */
static void bad(Session *s, const char *line, const char *needle, size_t col) {
    Args a;
    ParseErr e;
    int rc = cmd_parse(s, line, &a, &e);
    CHECK(rc == AL_ERR, "'%s' parsed but should not", line);
    if (rc != AL_ERR) { args_free(&a); return; }
    CHECK(strstr(e.msg, needle) != NULL, "'%s': message '%s' lacks '%s'", line, e.msg, needle);
    CHECK(e.col == col, "'%s': caret at %zu, want %zu (%s)", line, e.col, col, e.msg);
    CHECK(!strcmp(al_errmsg(), e.msg), "al_errmsg differs: %s", al_errmsg());
}

static bool good(Session *s, const char *line, Args *a) {
    ParseErr e;
    int rc = cmd_parse(s, line, a, &e);
    CHECK(rc == AL_OK, "'%s' failed: %s (col %zu)", line, e.msg, e.col);
    return rc == AL_OK;
}

/* True when the completion list holds s. */
static bool has(const StrList *l, const char *s) {
    for (size_t i = 0; i < l->n; i++) if (!strcmp(l->v[i], s)) return true;
    return false;
}

static void complete(Session *s, const char *line, StrList *l) {
    strlist_free(l);
    size_t n = strlen(line), start = n;
    while (start > 0 && line[start - 1] != ' ' && line[start - 1] != ';') start--;
    CHECK_OK(cmd_complete(s, line, start, n, l));
}

typedef struct { char buf[8192]; size_t n; } Capture;
static void capture(void *ud, out_stream st, const char *str, size_t n) {
    (void)st;
    Capture *c = ud;
    if (c->n + n >= sizeof c->buf) n = sizeof c->buf - 1 - c->n;
    memcpy(c->buf + c->n, str, n);
    c->n += n;
    c->buf[c->n] = 0;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* ================================================================ tests */

static void test_tokenize(void) {
    Tokens t = {0};
    ParseErr e;
    size_t next;
    const char *line = "tst vo ;; tpath \"a b\" 'c;d' x\"y z\"w ; = 1; 2";
    CHECK_OK(cmd_tokenize(line, 0, &next, &t, &e));
    CHECK(t.n == 2 && !strcmp(t.tok[1].text, "vo") && t.tok[1].col == 4, "first command");
    CHECK(line[next] == ';', "next at the empty command (%zu)", next);
    tokens_free(&t);
    CHECK_OK(cmd_tokenize(line, next, &next, &t, &e));
    CHECK(t.n == 0, "empty command between ;;");
    CHECK_OK(cmd_tokenize(line, next, &next, &t, &e));
    CHECK(t.n == 4, "tpath tokens: %zu", t.n);
    if (t.n == 4) {
        CHECK(!strcmp(t.tok[1].text, "a b") && t.tok[1].quoted && t.tok[1].col == 16 && t.tok[1].len == 5, "quoted");
        CHECK(!strcmp(t.tok[2].text, "c;d"), "';' inside quotes: %s", t.tok[2].text);
        CHECK(!strcmp(t.tok[3].text, "xy zw"), "joined pieces: %s", t.tok[3].text);
    }
    tokens_free(&t);
    CHECK_OK(cmd_tokenize(line, next, &next, &t, &e));
    CHECK(t.n == 2 && !strcmp(t.tok[0].text, "=") && !strcmp(t.tok[1].text, "1; 2"), "'=' takes the line");
    CHECK(next == strlen(line), "= consumed all");
    tokens_free(&t);

    CHECK_OK(cmd_tokenize("lua x = 1; print(x) ; y", 0, &next, &t, &e));
    CHECK(t.n == 2 && !strcmp(t.tok[1].text, "x = 1; print(x) ; y"), "lua takes the whole line: %s", t.n > 1 ? t.tok[1].text : "");
    tokens_free(&t);
    CHECK_OK(cmd_tokenize("tsay hello  world 'a;b'; tst vo", 0, &next, &t, &e));
    CHECK(t.n == 2 && !strcmp(t.tok[1].text, "hello  world 'a;b'"), "PF_REST stops at ';': %s", t.n > 1 ? t.tok[1].text : "");
    CHECK(next == 24, "next after PF_REST: %zu", next);
    tokens_free(&t);
    CHECK_OK(cmd_tokenize("tpath \"a \\\"q\\\" b\"", 0, &next, &t, &e));
    CHECK(t.n == 2 && !strcmp(t.tok[1].text, "a \"q\" b"), "escaped quotes: %s", t.n > 1 ? t.tok[1].text : "");
    tokens_free(&t);
    CHECK(cmd_tokenize("tpath 'abc", 0, &next, &t, &e) == AL_ERR && e.col == 6, "unterminated quote at %zu", e.col);
    /* in "...", \n and \t are a newline and a tab, \\ a backslash; before anything else the backslash
     * stays (it was dropped: "a\nb" read as "anb", "d\qe" as "dqe"); in '...' nothing is an escape */
    CHECK_OK(cmd_tokenize("tpath \"a\\nb\\tc\\\\d\\qe\" 'x\\ny'", 0, &next, &t, &e));
    CHECK(t.n == 3 && !strcmp(t.tok[1].text, "a\nb\tc\\d\\qe"), "escapes in double quotes: '%s'", t.n > 1 ? t.tok[1].text : "");
    CHECK(t.n == 3 && !strcmp(t.tok[2].text, "x\\ny"), "none in single quotes: '%s'", t.n > 2 ? t.tok[2].text : "");
    tokens_free(&t);
}

static void test_good(Session *s) {
    Args a;
    if (good(s, "tpath \"a\\nb \\\"q\\\"\\\\\"", &a)) {   /* args_line (save session, replot) writes the escapes back */
        char *l = args_line(&a);
        CHECK(!strcmp(args_str(&a, "file"), "a\nb \"q\"\\"), "the word: '%s'", args_str(&a, "file"));
        CHECK(l && !strcmp(l, "tpath \"a\\nb \\\"q\\\"\\\\\""), "args_line: %s", l ? l : "(null)");
        free(l);
        args_free(&a);
    }
    if (good(s, "tst vo", &a)) {
        CHECK(a.cmd == &test_cmds[0] && args_enum(&a, "kind") == 0 && !strcmp(args_str(&a, "kind"), "vo"), "kind");
        CHECK(args_all(&a, "layer") && !args_given(&a, "layer") && args_has(&a, "layer"), "layer default all");
        CHECK(args_enum(&a, "policy") == 0 && !args_given(&a, "policy"), "policy default");
        CHECK(!args_has(&a, "tau") && !args_flag(&a, "force") && !args_has(&a, "to"), "absent keywords");
        args_free(&a);
    }
    if (good(s, "tst qk layer 3 tau 0.5 force layers 2-4 policy head to out.csv", &a)) {
        CHECK(args_enum(&a, "kind") == 1, "qk");
        CHECK(args_int(&a, "layer") == 3 && args_given(&a, "layer") && !args_all(&a, "layer"), "layer 3");
        CHECK_NEAR(args_float(&a, "tau"), 0.5, 0);
        CHECK(args_flag(&a, "force"), "force");
        long lo, hi;
        CHECK_OK(args_range(&a, "layers", 10, &lo, &hi));
        CHECK(lo == 2 && hi == 4, "range %ld-%ld", lo, hi);
        CHECK_ERR(args_range(&a, "layers", 4, &lo, &hi), "out of range");
        CHECK(args_enum(&a, "policy") == 1 && !strcmp(args_str(&a, "to"), "out.csv"), "policy, to");
        CHECK(args_val(&a, "tau")->col == 19, "column of tau's value: %zu", args_val(&a, "tau")->col);
        args_free(&a);
    }
    if (good(s, "tst 'vo' layers all", &a)) {
        long lo, hi;
        CHECK_OK(args_range(&a, "layers", 6, &lo, &hi));
        CHECK(lo == 0 && hi == 5, "all -> 0-5");
        args_free(&a);
    }
    if (good(s, "tst vo layers 7", &a)) {
        CHECK(args_int(&a, "layers") == 7 && args_val(&a, "layers")->hi == 7, "single number range");
        args_free(&a);
    }
    if (good(s, "tpath \"my dir/f x.csv\"", &a)) {
        CHECK(!strcmp(args_str(&a, "file"), "my dir/f x.csv") && args_int(&a, "n") == 3 && !args_given(&a, "n"), "path");
        args_free(&a);
    }
    if (good(s, "tpath 'layer' 7", &a)) {   /* a quoted word is never a keyword */
        CHECK(!strcmp(args_str(&a, "file"), "layer") && args_int(&a, "n") == 7, "quoted positional");
        args_free(&a);
    }
    if (good(s, "tplot spectrum qk head 2", &a)) {
        CHECK(a.cmd == &tplot_sub[0] && a.top == &test_cmds[3] && !strcmp(a.path, "tplot spectrum"), "sub-command");
        CHECK(args_int(&a, "head") == 2 && args_enum(&a, "kind") == 1, "sub args");
        args_free(&a);
    }
    if (good(s, "tplot vo-ranks layer all", &a)) {
        CHECK(a.cmd == &tplot_sub[1] && args_all(&a, "layer"), "vo-ranks");
        args_free(&a);
    }
    if (good(s, "tsay  hello   world ", &a)) {
        CHECK(!strcmp(args_str(&a, "text"), "hello   world"), "rest: '%s'", args_str(&a, "text"));
        args_free(&a);
    }
    if (good(s, "tst vo tau -0", &a)) args_free(&a);
}

static void test_bad(Session *s) {
    bad(s, "tst vo lyer 8", "unknown keyword 'lyer' (did you mean 'layer'?)", 7);
    bad(s, "tsx vo", "unknown command 'tsx' (did you mean 'tst'?)", 0);
    bad(s, "  frobnicate", "unknown command 'frobnicate'; type help", 2);
    bad(s, "tst xx", "kind must be one of vo|qk, got 'xx'", 4);
    bad(s, "tst vq", "(did you mean 'vo'?)", 4);
    bad(s, "tst", "missing kind (vo|qk); usage: tst vo|qk [layer N|all]", 4);
    bad(s, "tst vo layer", "keyword 'layer' needs a value: layer N|all", 13);
    bad(s, "tst vo layer x", "layer wants an integer or all, got 'x'", 13);
    bad(s, "tst vo tau 2", "tau 2 is out of range", 11);
    bad(s, "tst vo share 0", "share 0 is out of range: valid values are (0, 1]", 13);   /* PF_OPEN_MIN */
    bad(s, "tst vo tau 1e999", "tau wants a number", 11);
    bad(s, "tst vo layers 5-2", "layers wants a range A-B", 14);
    bad(s, "tst vo policy heads", "policy must be one of layer-max|head, got 'heads' (did you mean 'head'?)", 14);
    bad(s, "tst vo layer 1 layer 2", "keyword 'layer' given twice", 15);
    bad(s, "tst vo extra", "unexpected argument 'extra' (keywords of tst: layer, tau, share, policy, layers, force, to)", 7);
    bad(s, "tpath a 3 4", "unexpected argument '4'; usage: tpath FILE [N]", 10);
    bad(s, "tst vo 'open", "unterminated single quote", 7);
    bad(s, "tplot", "'tplot' needs a sub-command: spectrum|vo-ranks", 6);
    bad(s, "tplot spectrm vo", "unknown sub-command 'spectrm' of tplot (did you mean 'spectrum'?)", 6);
    bad(s, "tplot spectrum", "missing kind", 15);
    bad(s, "tst vo; tst qk", "one command expected", 6);
    bad(s, "'tst' vo", "unknown command", 0);

    /* bounds against the current model: 4 layers, 6 heads */
    Model m = { .name = "fake" };
    m.cfg.n_layers = 4;
    m.cfg.n_heads = 6;
    s->cur = &m;
    bad(s, "tst vo layer 4", "layer 4 is out of range: fake has 4 layers (0-3)", 13);
    bad(s, "tst vo layers 2-9", "fake has 4 layers", 14);
    bad(s, "tplot spectrum vo head 6", "fake has 6 heads (0-5)", 23);
    Args a;
    if (good(s, "tst vo layer 3 layers 0-3", &a)) args_free(&a);
    s->cur = NULL;
}

static void test_usage_dispatch(Session *s) {
    char *u = cmd_usage(&test_cmds[0], NULL);
    CHECK(u && !strcmp(u, "tst vo|qk [layer N|all] [tau X] [share X] [policy layer-max|head] [layers A-B|all] [force] [to FILE]"),
          "usage: %s", u ? u : "(null)");
    free(u);
    u = cmd_usage(&test_cmds[3], NULL);
    CHECK(u && !strcmp(u, "tplot spectrum|vo-ranks ..."), "usage: %s", u ? u : "(null)");
    free(u);
    u = cmd_usage(&tplot_sub[0], "tplot");
    CHECK(u && !strcmp(u, "tplot spectrum vo|qk [head N]"), "usage: %s", u ? u : "(null)");
    free(u);
    CHECK(out_edit_distance("lyer", "layer") == 1 && out_edit_distance("", "abc") == 3, "edit distance");

    Args a;
    Out o;
    out_init(&o);
    if (good(s, "tneed", &a)) {
        CHECK_ERR(cmd_dispatch(s, &a, &o), "tneed needs a model: load one first");
        args_free(&a);
    }
    calls = 0;
    if (good(s, "tst vo", &a)) {
        CHECK_OK(cmd_dispatch(s, &a, &o));
        CHECK(calls == 1 && o.kind == RES_NUMBER && o.num == 42, "handler ran");
        al_interrupt_flag = 1;
        CHECK_ERR(cmd_dispatch(s, &a, &o), "interrupted");
        al_interrupt_flag = 0;
        CHECK(calls == 1, "no call when interrupted");
        args_free(&a);
    }
    out_free(&o);

    /* a line runs its commands in order and stops at the first failure */
    Capture cap = {0};
    Out po;
    out_init(&po);
    po.sink = capture;
    po.sink_ud = &cap;
    calls = 0;
    CHECK(shell_exec_line(s, "tst vo; tst xx; tst qk", &(LineSrc){ 0 }, &po) == AL_ERR && calls == 1, "stop at first (%d)", calls);
    CHECK(strstr(cap.buf, "42\n  tst vo; tst xx; tst qk\n              ^--- kind must be one of vo|qk") != NULL,
          "echo + caret: [%s]", cap.buf);
    cap.n = 0;
    CHECK(shell_exec_line(s, "tst vo lyer 1", &(LineSrc){ .prompt_w = 9 }, &po) == AL_ERR, "prompt error");
    CHECK(!strcmp(cap.buf, "                ^--- unknown keyword 'lyer' (did you mean 'layer'?)\n"), "caret under prompt: [%s]", cap.buf);
    cap.n = 0;
    CHECK(shell_exec_line(s, "tst vo layer q", &(LineSrc){ .file = "f.txt", .line = 7 }, &po) == AL_ERR, "file error");
    CHECK(!strncmp(cap.buf, "f.txt:7:14: layer wants an integer", 34), "file:line:col: [%s]", cap.buf);
    cap.n = 0;
    CHECK(shell_exec_line(s, "tneed", &(LineSrc){ 0 }, &po) == AL_ERR, "handler error");
    CHECK(!strncmp(cap.buf, "error: tneed needs a model", 26), "handler error: [%s]", cap.buf);
    cap.n = 0;
    al_warn("weights of %s hold NaN", "x");
    CHECK_OK(shell_exec_line(s, "  ; tst qk ;", &(LineSrc){ 0 }, &po));
    CHECK(!strcmp(cap.buf, "42\nwarning: weights of x hold NaN\n"), "result + warning: [%s]", cap.buf);
    /* The warning limit holds (issue 14): an identical warning shows once with its count, and past
       64 distinct ones a single line counts the rest. */
    cap.n = 0;
    for (int i = 0; i < 80; i++) al_warn("weights of %s hold NaN", "y");
    for (int i = 0; i < 100; i++) al_warn("tensor t%d holds NaN", i);
    CHECK_OK(shell_exec_line(s, "tst qk", &(LineSrc){ 0 }, &po));
    size_t nw = 0;
    for (const char *p = cap.buf; (p = strstr(p, "warning: ")); p++) nw++;
    CHECK(nw == 65, "64 warnings + the count, got %zu: [%.300s]", nw, cap.buf);
    CHECK(strstr(cap.buf, "warning: weights of y hold NaN (80 times)\n") != NULL, "repeats counted: [%.200s]", cap.buf);
    CHECK(strstr(cap.buf, "warning: 37 more warnings not shown (at most 64 are kept)\n") != NULL, "the rest counted");
    CHECK(strstr(cap.buf, "t62 holds") && !strstr(cap.buf, "t63 holds"), "the first 63 tensors kept");
    out_free(&po);
}

static void test_output(void) {
    Table *t = table_new(3, "layer", "name", "x");
    CHECK(t != NULL, "table_new");
    table_row(t); table_int(t, 8); table_str(t, "a,b"); table_num(t, 0.25);
    table_row(t); table_int(t, 10); table_str(t, "q\"x"); table_null(t);
    table_row(t); table_int(t, 9); table_bool(t, true); table_num(t, 1.0 / 3);
    char *s = table_render(t, FMT_TABLE, 4);
    CHECK(s && !strcmp(s, "layer  name  x\n-----  ----  ------\n    8  a,b     0.25\n   10  q\"x        -\n    9  true  0.3333\n"),
          "aligned:\n%s", s);
    free(s);
    s = table_render(t, FMT_CSV, 4);
    CHECK(s && !strcmp(s, "layer,name,x\n8,\"a,b\",0.25\n10,\"q\"\"x\",\n9,true,0.333333333\n"), "csv:\n%s", s);
    free(s);
    s = table_render(t, FMT_JSON, 4);
    CHECK(s && !strcmp(s, "[\n {\"layer\": 8, \"name\": \"a,b\", \"x\": 0.25},\n {\"layer\": 10, \"name\": \"q\\\"x\", \"x\": null},\n"
                          " {\"layer\": 9, \"name\": true, \"x\": 0.33333333333333331}\n]\n"), "json:\n%s", s);
    free(s);

    const char *dir = test_tmpdir();
    char path[4200];
    Args a;
    ParseErr e;
    CHECK_OK(cmd_register_group(&test_group));
    Out o;
    out_init(&o);
    Capture cap = {0};
    o.sink = capture;
    o.sink_ud = &cap;
    snprintf(path, sizeof path, "tst vo to '%s/r.csv'", dir);
    if (cmd_parse(NULL, path, &a, &e) == AL_OK) {
        CHECK_OK(out_table_to(&o, args_str(&a, "to"), t));
        t = NULL;
        CHECK(o.written && o.kind == RES_TABLE, "written flag");
        snprintf(path, sizeof path, "%s/r.csv", dir);
        char *text = slurp(path);
        CHECK(text && !strncmp(text, "layer,name,x\n8,", 15), "csv file: %s", text ? text : "(none)");
        CHECK(strstr(cap.buf, "wrote 3 rows to ") != NULL, "said so: %s", cap.buf);
        args_free(&a);
    } else CHECK(0, "parse: %s", e.msg);
    snprintf(path, sizeof path, "tst vo to '%s/r.txt'", dir);
    if (cmd_parse(NULL, path, &a, &e) == AL_OK) {
        Table *t2 = table_new(1, "a");
        CHECK_ERR(out_table_to(&o, args_str(&a, "to"), t2), "is not .csv or .json");
        args_free(&a);
    }
    table_free(t);
    out_free(&o);
}

static void test_complete(Session *s) {
    StrList l = {0};
    complete(s, "", &l);
    CHECK(has(&l, "tst") && has(&l, "help") && has(&l, "load") && has(&l, "tplot"), "all commands");
    complete(s, "ts", &l);
    CHECK(l.n == 2 && has(&l, "tst") && has(&l, "tsay"), "prefix ts: %zu", l.n);
    complete(s, "tst ", &l);
    CHECK(has(&l, "vo") && has(&l, "qk") && has(&l, "layer") && has(&l, "force") && !has(&l, "tst"), "enum + keywords");
    complete(s, "tst vo la", &l);
    CHECK(l.n == 2 && has(&l, "layer") && has(&l, "layers"), "keyword prefix");
    complete(s, "tst vo layer 2 ", &l);
    CHECK(!has(&l, "layer") && has(&l, "layers") && has(&l, "tau"), "used keyword dropped");
    complete(s, "tst vo policy ", &l);
    CHECK(l.n == 2 && has(&l, "layer-max") && has(&l, "head"), "keyword enum value");
    complete(s, "tst vo to ", &l);
    CHECK(l.files && l.n == 0, "files for to");
    complete(s, "tplot ", &l);
    CHECK(l.n == 2 && has(&l, "spectrum") && has(&l, "vo-ranks"), "sub-commands");
    complete(s, "tplot vo-ranks layer ", &l);
    CHECK(has(&l, "all") && !has(&l, "0"), "no model: only all");
    Model m = { .name = "fake" };
    m.cfg.n_layers = 4;
    m.cfg.n_heads = 6;
    s->cur = &m;
    complete(s, "tplot vo-ranks layer ", &l);
    CHECK(l.n == 5 && has(&l, "all") && has(&l, "0") && has(&l, "3") && !has(&l, "4"), "layers of the model: %zu", l.n);
    complete(s, "tplot spectrum vo head ", &l);
    CHECK(l.n == 6 && has(&l, "5"), "heads: %zu", l.n);
    s->cur = NULL;
    complete(s, "help ", &l);
    CHECK(has(&l, "tst") && has(&l, "load"), "help commands");
    complete(s, "help tplot ", &l);
    CHECK(l.n == 2 && has(&l, "spectrum"), "help sub-commands");
    complete(s, "set ", &l);
    CHECK(has(&l, "tau") && has(&l, "plot.size") && has(&l, "format"), "settings");
    complete(s, "set format ", &l);
    CHECK(l.n == 3 && has(&l, "json"), "format values");
    complete(s, "load demo-", &l);
    CHECK(has(&l, "demo-r1") && has(&l, "demo-llama") && l.files, "demo names + files");
    complete(s, "echo x; tst q", &l);
    CHECK(l.n == 1 && has(&l, "qk"), "after ';'");
    complete(s, "lua at", &l);
    CHECK(l.n == 0, "nothing inside Lua");
    strlist_free(&l);
}

/* Lua: typed functions from the table (positional args, then a keyword table with flags),
 * sub-commands as the first argument, results as Lua values, parse errors as Lua errors. */
static void test_lua(Session *s) {
    Capture cap = {0};
    Out o;
    out_init(&o);
    o.sink = capture;
    o.sink_ud = &cap;
    const char *code =
        "local r = attn.tst('qk', {layer = 3, force = true})\n"
        "assert(r == 42 and math.type(r) == 'integer', 'number result')\n"
        "local rows = attn.tst('vo', {layers = '2-4'})\n"
        "assert(#rows == 3 and rows[1].layer == 2 and rows[3].layer == 4 and rows[2].name == 'x', 'rows')\n"
        "assert(rows[1].ok == true and rows[2].ok == false, 'bools')\n"
        "local a = attn.tst('vo', {tau = 0.5})\n"
        "assert(#a == 3 and a[1] == 1.5 and a[3] == 0.5, 'array')\n"
        "assert(attn.tplot('spectrum', 'qk', {head = 2}) == 42)\n"
        "assert(attn.run('tst vo; tst qk layer 1') == 42)\n"
        "local ok, e = pcall(attn.tst, 'xx')\n"
        "assert(not ok and e:find(\"attn.tst: kind must be one of vo|qk, got 'xx'\", 1, true), e)\n"
        "ok, e = pcall(attn.tst, 'vo', {lyer = 1})\n"
        "assert(not ok and e:find(\"did you mean 'layer'\", 1, true), e)\n"
        "ok, e = pcall(attn.tplot, 'spectrm')\n"
        "assert(not ok and e:find('unknown sub-command', 1, true), e)\n"
        "ok, e = pcall(attn.run, 'tst vo lyer 2')\n"
        "assert(not ok and e:find('column 8', 1, true), e)\n"
        "ok, e = pcall(attn.tst, nil)\n"
        "assert(not ok and e:find('bad argument #1', 1, true), e)\n"
        "ok, e = pcall(attn.tneed)\n"
        "assert(not ok and e:find('needs a model', 1, true), e)\n"
        "print('lua ok')";
    CHECK_OK(shell_lua_exec(s, code, false, &o));
    CHECK(strstr(cap.buf, "lua ok\n") != NULL, "lua output: %s", cap.buf);
    CHECK(!strcmp(last_call, "tst qk 1 -"), "last call: %s", last_call);
    CHECK_OK(shell_lua_exec(s, "attn.tst('qk', {layer = 2, force = true})", false, &o));
    CHECK(!strcmp(last_call, "tst qk 2 force"), "keyword table + flag: %s", last_call);
    CHECK_OK(shell_lua_exec(s, "attn.tplot('vo-ranks', {layer = 'all'})", false, &o));
    CHECK(!strcmp(last_call, "tplot vo-ranks - all -"), "sub-command from Lua: %s", last_call);
    cap.n = 0;
    CHECK(shell_lua_exec(s, "error('boom')", false, &o) == AL_ERR && shell_state(s)->err_reported, "error");
    CHECK(strstr(cap.buf, "boom") && strstr(cap.buf, "stack traceback"), "traceback: %s", cap.buf);
    CHECK(strstr(al_errmsg(), "boom") != NULL, "al_errmsg: %s", al_errmsg());
    cap.n = 0;
    CHECK_OK(shell_lua_exec(s, "{1, 'a', {k = true}}, nil", true, &o));
    CHECK(!strcmp(cap.buf, "{1, \"a\", {k=true}}\tnil\n"), "= value printing: [%s]", cap.buf);
    out_free(&o);
}

int main(void) {
    CHECK_OK(shell_register());
    CHECK_OK(cmd_register_group(&test_group));
    for (size_t i = 0; test_cmds[i].name; i++) CHECK_OK(cmd_validate(&test_cmds[i], NULL));
    Session *s = session_new();
    test_tokenize();
    test_good(s);
    test_bad(s);
    test_usage_dispatch(s);
    test_output();
    test_complete(s);
    test_lua(s);
    session_free(s);
    return check_done();
}
