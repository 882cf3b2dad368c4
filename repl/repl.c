/* repl.c -- the program, the top of repl/: argument handling (-h, --version, -e, FILE.lua, FILE),
 * the Readline prompt (after a one-line banner: version and `help`) with history kept across
 * sessions (history.c) and completion from the table, piped input without Readline, and Ctrl-C
 * (stops a command or Lua code; clears the line at the idle prompt). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include <readline/readline.h>

#include "blas_arch.h"
#include "cmd_shell.h"
#include "exec.h"
#include "history.h"
#include "lua_shell.h"
#include "progress.h"
#include "repl.h"
#include "shell.h"

#define PROMPT "attnlab> "
#define PROMPT_MORE "   ...> "

/* `quit` ran, and the status it asked for. */
static bool wants_exit(const Session *s) { const ShellState *st = s->front; return st && st->want_exit; }
static int exit_code(const Session *s) { const ShellState *st = s->front; return st ? st->exit_code : 0; }

/* ================================================================ Ctrl-C */

static volatile sig_atomic_t sigint_at_prompt;
/* Self-pipe: the handler writes a byte so the prompt loop's select() wakes up even when the
 * signal arrived while Readline was processing a key (not blocked in select). */
static int sigint_pipe[2] = {-1, -1};

/* Sets the interrupt flag polled by long loops, stops running Lua, and tells the prompt loop. A
 * second Ctrl-C while the first is still pending in running Lua (a long C call such as a pattern
 * match never reaches the hook) ends the process, as lua.c does. */
static void on_sigint(int sig) {
    if (shell_lua_running() && al_interrupt_flag) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    al_interrupt_flag = 1;
    sigint_at_prompt = 1;
    if (shell_lua_running()) shell_lua_interrupt();
    if (sigint_pipe[1] >= 0) {
        int saved = errno;
        ssize_t w = write(sigint_pipe[1], "x", 1);
        (void)w;
        errno = saved;
    }
}

static void install_sigint(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;             /* no SA_RESTART: select() at the prompt returns EINTR */
    sigaction(SIGINT, &sa, NULL);
}

/* ================================================================ completion glue */

static Session *comp_session;
static StrList comp_list;

static char *comp_generator(const char *text, int state) {
    static size_t i;
    (void)text;
    if (!state) i = 0;
    return i < comp_list.n ? strdup(comp_list.v[i++]) : NULL;
}

/* Readline's entry: candidates from the table; file names where the table says so. */
static char **comp_entry(const char *text, int start, int end) {
    strlist_free(&comp_list);
    rl_attempted_completion_over = 1;
    if (cmd_complete(comp_session, rl_line_buffer, (size_t)start, (size_t)end, &comp_list)) return NULL;
    if (comp_list.files) {
        char *f;
        for (int st = 0; (f = rl_filename_completion_function(text, st)); st++) { strlist_add(&comp_list, f); free(f); }
        rl_filename_completion_desired = 1;
    }
    if (!comp_list.n) return NULL;
    return rl_completion_matches(text, comp_generator);
}

/* ================================================================ the prompt */

typedef struct {
    Session *s;
    Out *out;
    bool done;
    int status;
    char *pending;        /* an incomplete Lua line waiting for its continuation */
} Loop;

/* Joins a continuation line onto *pending (or starts it); returns the whole text, owned by
 * *pending. */
static char *join_pending(char **pending, const char *line) {
    char *j = *pending ? al_asprintf("%s\n%s", *pending, line) : al_strdup(line);
    if (!j) return NULL;
    free(*pending);
    *pending = j;
    return j;
}

static Loop *loop_cur;

/* Called by Readline with each complete line (NULL at end of input). */
static void on_line(char *line) {
    Loop *lp = loop_cur;
    if (!line) {
        fputc('\n', stdout);
        lp->done = true;
        rl_callback_handler_remove();
        return;
    }
    shell_history_add(line);
    al_interrupt_flag = 0;
    sigint_at_prompt = 0;
    char *text = join_pending(&lp->pending, line);
    free(line);
    if (!text) return;
    if (shell_lua_incomplete(lp->s, text)) {     /* more Lua to come: continuation prompt */
        rl_set_prompt(PROMPT_MORE);
        return;
    }
    rl_set_prompt(PROMPT);
    LineSrc src = { .prompt_w = strchr(text, '\n') ? 0 : strlen(PROMPT) };
    int rc = shell_exec_line(lp->s, text, &src, lp->out);
    free(lp->pending);
    lp->pending = NULL;
    fflush(stdout);
    al_interrupt_flag = 0;
    sigint_at_prompt = 0;
    if (rc == AL_EXIT || wants_exit(lp->s)) {
        lp->done = true;
        lp->status = exit_code(lp->s);
        rl_callback_handler_remove();
    }
}

/* Interactive: Readline's callback interface in a select() loop, so Ctrl-C at the idle prompt
 * only clears the line. */
static int run_interactive(Session *s, Out *out) {
    Loop lp = { .s = s, .out = out };
    loop_cur = &lp;
    comp_session = s;
    rl_readline_name = "attnlab";
    rl_catch_signals = 0;
    rl_attempted_completion_function = comp_entry;
    rl_basic_word_break_characters = " \t\n;";
    rl_completer_word_break_characters = " \t\n;";
    rl_completer_quote_characters = "\"'";
    shell_history_open();
    install_sigint();
    printf("attnlab %s -- type help for the commands, help CMD for one, quit to leave\n", ATTNLAB_VERSION);
    rl_callback_handler_install(PROMPT, on_line);
    if (sigint_pipe[0] < 0 && pipe2(sigint_pipe, O_NONBLOCK | O_CLOEXEC) != 0) sigint_pipe[0] = sigint_pipe[1] = -1;
    while (!lp.done) {
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(STDIN_FILENO, &fds);
        int maxfd = STDIN_FILENO;
        if (sigint_pipe[0] >= 0) {
            FD_SET(sigint_pipe[0], &fds);
            if (sigint_pipe[0] > maxfd) maxfd = sigint_pipe[0];
        }
        int r = select(maxfd + 1, &fds, NULL, NULL, NULL);
        if (r < 0 && errno != EINTR) break;
        if (sigint_pipe[0] >= 0 && r > 0 && FD_ISSET(sigint_pipe[0], &fds)) {
            char drain[64];
            while (read(sigint_pipe[0], drain, sizeof drain) > 0) {}
        }
        if (sigint_at_prompt) {         /* Ctrl-C at the idle prompt: drop the line */
            sigint_at_prompt = 0;
            al_interrupt_flag = 0;
            free(lp.pending);
            lp.pending = NULL;
            rl_set_prompt(PROMPT);
            rl_free_line_state();
            rl_crlf();
            rl_replace_line("", 0);
            rl_on_new_line();
            rl_redisplay();
            continue;
        }
        if (r > 0 && FD_ISSET(STDIN_FILENO, &fds)) rl_callback_read_char();
    }
    if (!lp.done) rl_callback_handler_remove();
    free(lp.pending);
    shell_history_close();
    strlist_free(&comp_list);
    return lp.status;
}

/* Piped input: lines from stdin, no Readline and no prompt; a failing command is reported and the
 * session goes on. The exit status is 1 when any command failed. */
static int run_piped(Session *s, Out *out) {
    char *buf = NULL;
    size_t cap = 0;
    long lineno = 0;
    bool failed = false;
    char *pending = NULL;
    install_sigint();
    while (getline(&buf, &cap, stdin) >= 0) {
        lineno++;
        size_t len = strlen(buf);
        while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) buf[--len] = 0;
        al_interrupt_flag = 0;
        char *text = join_pending(&pending, buf);
        if (!text) { failed = true; break; }
        if (shell_lua_incomplete(s, text)) continue;
        shell_history_add(text);          /* in memory: `history to FILE` */
        LineSrc src = { 0 };
        int rc = shell_exec_line(s, text, &src, out);
        free(pending);
        pending = NULL;
        fflush(stdout);
        if (rc == AL_EXIT || wants_exit(s)) break;
        if (rc != AL_OK) failed = true;
    }
    if (al_interrupt_flag && ferror(stdin)) {    /* Ctrl-C while waiting for input: as -e, a failure */
        out_eprintf(out, "interrupted: the rest of the input was not run\n");
        failed = true;
    }
    if (pending) {            /* input ended inside a Lua construct: run it for the error */
        if (shell_exec_line(s, pending, &(LineSrc){ 0 }, out) != AL_OK) failed = true;
        free(pending);
    }
    free(buf);
    if (wants_exit(s)) return exit_code(s) ? exit_code(s) : (failed ? 1 : 0);
    return failed ? 1 : 0;
}

/* ================================================================ main */

static void usage(FILE *f) {
    fprintf(f,
        "usage: attnlab [-e \"cmd; cmd ...\"]... [FILE.lua [args...] | FILE]\n"
        "\n"
        "An interactive shell for the low-rank structure of transformer attention.\n"
        "\n"
        "  attnlab                 the prompt (attnlab> ); type help. Piped input runs line by\n"
        "                          line without a prompt; exit status 1 if any command failed\n"
        "  attnlab -e \"cmds\"       run commands (';'-separated) and exit; stops at the first\n"
        "                          failing command with status 1 (its error on stderr)\n"
        "  attnlab FILE.lua [args] run a Lua notebook (module attn, global arg)\n"
        "  attnlab FILE            run a file of commands, one line each; stops at the first\n"
        "                          failure (FILE:LINE: message) with status 1\n"
        "  attnlab -h              this text\n"
        "  attnlab --version       the version\n"
        "\n"
        "Environment: ATTNLAB_HOME (history, aliases; default ~/.config/attnlab),\n"
        "ATTNLAB_CACHE (demo models; default ~/.cache/attnlab), HF_HUB_CACHE / HF_HOME,\n"
        "ATTNLAB_THREADS.\n");
}

int shell_main(int argc, char **argv) {
    Session *s = shell_register() == AL_OK ? session_new() : NULL;
    if (!s) { fprintf(stderr, "attnlab: %s\n", al_errmsg()); return 1; }
    Out out;
    out_init(&out);
    shell_progress_install();
    int status = 0, ncmds = 0;
    bool ran = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); session_free(s); return 0; }
        if (!strcmp(a, "--version") || !strcmp(a, "-V")) { printf("attnlab %s\n%s\n", ATTNLAB_VERSION, blas_arch_choose()); session_free(s); return 0; }
        if (!strcmp(a, "-e")) {
            if (i + 1 >= argc) { fprintf(stderr, "attnlab: -e needs commands: attnlab -e \"load demo-r1; info\"\n"); status = 2; break; }
            install_sigint();
            ran = true;
            ncmds++;
            shell_history_add(argv[i + 1]);          /* in memory: `history to FILE` */
            int rc = shell_exec_line(s, argv[++i], &(LineSrc){ 0 }, &out);
            fflush(stdout);
            if (rc == AL_EXIT || wants_exit(s)) { status = exit_code(s); break; }
            if (rc != AL_OK) {
                status = 1;
                break;
            }
            continue;
        }
        if (a[0] == '-' && a[1]) { fprintf(stderr, "attnlab: unknown option '%s'\n", a); usage(stderr); status = 2; break; }
        /* a script: FILE.lua [args...] or a command file */
        install_sigint();
        ran = true;
        size_t n = strlen(a);
        int rc = n > 4 && !strcmp(a + n - 4, ".lua") ? shell_lua_file(s, a, argc - i - 1, argv + i + 1, &out)
                                                    : shell_run_commands_file(s, a, &out);
        fflush(stdout);
        const ShellState *st = s->front;
        if (rc == AL_ERR && !(st && st->err_reported)) fprintf(stderr, "attnlab: %s\n", al_errmsg());
        status = rc == AL_OK || (rc == AL_EXIT && !exit_code(s)) ? 0 : 1;
        break;
    }
    (void)ncmds;
    if (!ran && status == 0) {
        s->interactive = isatty(STDIN_FILENO) != 0;
        status = s->interactive ? run_interactive(s, &out) : run_piped(s, &out);
    }
    fflush(stdout);
    session_free(s);
    out_free(&out);
    return status;
}
