/* test_commands.c -- commands/ on its own, linked without Readline and Lua (attn_commands only):
 * the table without the front end's commands and a front-end group added under a shared
 * heading, the settings table (defaults, set/get, the listing, value completion), the Out quiet
 * levels, and the check on reading an argument a command does not declare (aborts in builds
 * with ATTNLAB_ARG_CHECKS, reads zero otherwise). */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "commands.h"
#include "registry.h"
#include "session.h"

typedef struct { char buf[1 << 14]; size_t n, nerr; } Capture;

static void capture(void *ud, out_stream st, const char *s, size_t n) {
    Capture *c = ud;
    if (st == OUT_STDERR) c->nerr += n;
    if (c->n + n >= sizeof c->buf) n = sizeof c->buf - 1 - c->n;
    memcpy(c->buf + c->n, s, n);
    c->n += n;
    c->buf[c->n] = 0;
}

/* Parses and runs one command with its text in cap; the result is printed like the prompt does. */
static int run(Session *s, Capture *cap, const char *line) {
    Args a;
    ParseErr e;
    Out o;
    out_init(&o);
    o.sink = capture;
    o.sink_ud = cap;
    cap->n = cap->nerr = 0;
    cap->buf[0] = 0;
    int rc = cmd_parse(s, line, &a, &e);
    if (rc == AL_OK) {
        rc = cmd_dispatch(s, &a, &o);
        if (rc == AL_OK) out_emit_result(&o);
        args_free(&a);
    }
    out_free(&o);
    return rc;
}

static int t_fn(Session *s, const Args *a, Out *out) { (void)s; (void)a; (void)out; return AL_OK; }

static const Command front_cmds[] = {
    { .name = "tfront", .summary = "a front-end command", .help = "h", .fn = t_fn },
    {0}
};
static const CommandGroup front_group = { .title = "Models and session", .cmds = front_cmds };
static const Command dup_cmds[] = {
    { .name = "load", .summary = "s", .help = "h", .fn = t_fn },
    {0}
};
static const CommandGroup dup_group = { .title = "Dup", .cmds = dup_cmds };

/* The table of commands/ alone; a front-end group joins the heading it shares. */
static void test_table(Session *s) {
    const Command *c;
    size_t n = 0;
    for (size_t i = 0; (c = cmd_at(i, NULL)); i++, n++) CHECK_OK(cmd_validate(c, NULL));
    CHECK(n >= 10 && cmd_find("set") && cmd_find("help"), "commands/ table: %zu commands", n);
    CHECK(!cmd_find("lua") && !cmd_find("run") && !cmd_find("quit") && !cmd_find("history"),
          "the front end's commands are not part of commands/");
    CHECK_OK(cmd_register_group(&front_group));
    CHECK_OK(cmd_register_group(&front_group));   /* twice: a no-op */
    CHECK_ERR(cmd_register_group(&dup_group), "'load' is already a command");
    const CommandGroup *g;
    size_t ilast = 0, ifront = 0;    /* the last command of commands/ under the heading */
    for (size_t i = 0; (c = cmd_at(i, &g)); i++) {
        if (!strcmp(g->title, "Models and session") && g != &front_group) ilast = i;
        if (!strcmp(c->name, "tfront")) { ifront = i; CHECK(g == &front_group, "group of tfront"); }
    }
    CHECK(ilast >= 6 && ifront == ilast + 1, "added group right after its heading's commands: last %zu, tfront %zu",
          ilast, ifront);
    Capture *cap = calloc(1, sizeof *cap);
    CHECK_OK(run(s, cap, "help"));
    const char *h = strstr(cap->buf, "Models and session\n");
    CHECK(h && !strstr(h + 1, "Models and session"), "one heading for both groups:\n%s", cap->buf);
    CHECK(strstr(cap->buf, "  set ") && strstr(cap->buf, "  tfront "), "help lists both");
    free(cap);
}

/* Defaults, set/get, the listing and completion all come from the settings table. */
static void test_settings(Session *s) {
    const Setting *st;
    size_t n = 0;
    for (size_t i = 0; (st = session_setting_at(i)); i++, n++) {
        char *v = session_get(s, st->name);
        CHECK(v && !strcmp(v, st->def), "default of %s: %s, table says %s", st->name, v ? v : "?", st->def);
        free(v);
        CHECK(st->help && *st->help, "%s has help", st->name);
    }
    CHECK(n == 8, "eight settings, got %zu", n);
    CHECK(s->tau == 0.999 && s->fmt == FMT_TABLE && s->prec == 6 && s->plot_w == 1200 && s->plot_h == 800,
          "defaults in the fields");
    CHECK_ERR(session_set(s, "precision", "18"), "set precision: '18' is not an integer 1-17");
    CHECK_ERR(session_set(s, "tau", "0"), "set tau: '0' is not a number in (0, 1] (e.g. set tau 0.99)");
    CHECK_ERR(session_set(s, "plot.size", "8x8"), "is not WxH in pixels, width 200-10000 and height 150-10000 (what "
              "figures can be drawn at; e.g. set plot.size 1200x800)");
    CHECK_ERR(session_set(s, "plot.size", "16x16"), "width 200-10000");      /* every plot failed after it */
    CHECK_ERR(session_set(s, "plot.size", "200x149"), "height 150-10000");
    CHECK_OK(session_set(s, "plot.size", "200x150"));
    CHECK_OK(session_set(s, "plot.size", "1200x800"));
    CHECK_ERR(session_set(s, "plot.size", "10001x800"), "width 200-10000");
    CHECK_ERR(session_set(s, "plot.dir", ""), "set plot.dir: give a folder (e.g. set plot.dir figures)");
    CHECK_ERR(session_set(s, "nope", "1"), "unknown setting 'nope' (settings: tau, format, precision, plot.size, plot.dir, plot.format, csv.params, compute)");
    CHECK_OK(session_set(s, "plot.format", "svg"));
    char *v = session_get(s, "plot.format");
    CHECK(v && !strcmp(v, "svg"), "plot.format: %s", v ? v : "?");
    free(v);
    CHECK_OK(session_set(s, "plot.format", "png"));

    Capture *cap = calloc(1, sizeof *cap);
    CHECK_OK(run(s, cap, "set format csv"));
    CHECK(!strcmp(cap->buf, "format = csv\n"), "set format: [%s]", cap->buf);
    CHECK_OK(run(s, cap, "set"));
    CHECK(strstr(cap->buf, "setting,value,help\n"
                           "tau,0.999,\"energy threshold of effective ranks, 0 < tau <= 1 (default 0.999)\"\n"
                           "format,csv,how results print: table | csv | json (default table)\n"),
          "listing: [%s]", cap->buf);
    CHECK(strstr(cap->buf, "plot.size,1200x800,figure size WxH in pixels (default 1200x800)\n"), "plot.size row");
    CHECK_OK(run(s, cap, "set format table"));
    free(cap);

    StrList l = {0};
    CHECK_OK(cmd_complete(s, "set tau ", 8, 8, &l));
    CHECK(l.n == 2 && !strcmp(l.v[0], "0.99") && !strcmp(l.v[1], "0.999"), "tau values: %zu", l.n);
    strlist_free(&l);
    CHECK_OK(cmd_complete(s, "set plot.format s", 16, 17, &l));
    CHECK(l.n == 1 && !strcmp(l.v[0], "svg") && !l.files, "plot.format values: %zu", l.n);
    strlist_free(&l);
    CHECK_OK(cmd_complete(s, "set plot.dir ", 13, 13, &l));
    CHECK(l.files && l.n == 0, "plot.dir: file names");
    strlist_free(&l);
    CHECK_OK(cmd_complete(s, "set plot.", 4, 9, &l));
    CHECK(l.n == 3, "setting names: %zu", l.n);
    strlist_free(&l);
}

/* OUT_QUIET turns narration off (handlers ask out_narrates); OUT_SILENT drops stdout text. */
static void test_quiet(void) {
    Capture cap = {0};
    Out o;
    out_init(&o);
    o.sink = capture;
    o.sink_ud = &cap;
    CHECK(out_narrates(&o), "loud by default");
    o.quiet = OUT_QUIET;
    CHECK(!out_narrates(&o), "quiet: no narration");
    out_printf(&o, "said\n");
    CHECK(!strcmp(cap.buf, "said\n"), "quiet still writes: [%s]", cap.buf);
    o.quiet = OUT_SILENT;
    out_printf(&o, "dropped\n");
    out_eprintf(&o, "warning: kept\n");
    CHECK(!strcmp(cap.buf, "said\nwarning: kept\n"), "silent: [%s]", cap.buf);
    out_reset(&o);
    CHECK(o.quiet == OUT_SILENT, "out_reset keeps the level");
    out_free(&o);
}

/* A handler reading an argument its command does not declare. */
static void test_undeclared_arg(void) {
    Args a;
    ParseErr e;
    if (cmd_parse(NULL, "help load", &a, &e)) { CHECK(0, "parse: %s", e.msg); return; }
    CHECK(!strcmp(args_str(&a, "command"), "load"), "declared name reads");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        long v = args_int(&a, "comand");     /* the misspelling the check exists for */
        _exit(v == 0 ? 0 : 3);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork");
#ifdef ATTNLAB_ARG_CHECKS
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "undeclared name aborts (status %d)", st);
#else
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "undeclared name reads zero (status %d)", st);
#endif
    args_free(&a);
}

int main(void) {
    Session *s = session_new();
    CHECK(s != NULL, "session_new: %s", al_errmsg());
    if (!s) return check_done();
    CHECK(!cmd_find("load") && !cmd_at(0, NULL), "the registry names no group before commands_init");
    CHECK_OK(commands_init());
    CHECK_OK(commands_init());   /* twice: a no-op */
    test_table(s);
    test_settings(s);
    test_quiet();
    test_undeclared_arg();
    session_free(s);
    return check_done();
}
