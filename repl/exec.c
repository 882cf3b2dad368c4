/* exec.c -- running command lines through the registry: split at ';', parse, dispatch, print the
 * result, report errors where they happened (caret at the prompt, echoed line with a caret for
 * `-e` and piped input, file:line:col: in scripts), and drain queued warnings. `= expr` and
 * `lua CODE` go to lua_shell.c, below this module. */
#define _GNU_SOURCE
#include "exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lua_shell.h"
#include "progress.h"
#include "registry.h"
#include "shell.h"

/* ================================================================ reporting */

/* Display width of line[0, col): UTF-8 continuation bytes take no column; a tab counts one
 * (the echoed line prints tabs as spaces). */
static size_t display_col(const char *line, size_t col) {
    size_t w = 0;
    for (size_t i = 0; i < col && line[i]; i++)
        if (((unsigned char)line[i] & 0xC0) != 0x80) w++;
    return w;
}

/* A parse error, pointing at its column. */
static void report_parse(Out *o, const LineSrc *src, const char *line, const ParseErr *e) {
    size_t w = display_col(line, e->col);
    if (src && src->file) {
        out_eprintf(o, "%s:%ld:%zu: %s\n", src->file, src->line, w + 1, e->msg);
        return;
    }
    if (src && src->prompt_w) {
        out_eprintf(o, "%*s^--- %s\n", (int)(src->prompt_w + w), "", e->msg);
        return;
    }
    /* echo the line (tabs as spaces, no newline) with the caret under it */
    char *echo = strdup(line);
    if (echo) {
        for (char *p = echo; *p; p++) if (*p == '\t' || *p == '\n' || *p == '\r') *p = ' ';
        out_eprintf(o, "  %s\n", echo);
        free(echo);
    }
    out_eprintf(o, "  %*s^--- %s\n", (int)w, "", e->msg);
}

/* A failure of a command that parsed (the message is in al_errmsg). */
static void report_error(Session *s, Out *o, const LineSrc *src) {
    ShellState *st = shell_state(s);
    if (st && st->err_reported) return;
    if (src && src->file) out_eprintf(o, "%s:%ld: %s\n", src->file, src->line, al_errmsg());
    else out_eprintf(o, "error: %s\n", al_errmsg());
}

/* An Out for one command that prints through the parent's sink, as quietly as the parent. */
static void child_out(Out *o, const Out *parent) {
    out_init(o);
    if (parent) { o->sink = parent->sink; o->sink_ud = parent->sink_ud; o->quiet = parent->quiet; }
}

/* ================================================================ running a line */

/* Runs one tokenized command (Lua or a registry command). */
static int exec_tokens(Session *s, const Tokens *t, const char *line, const LineSrc *src, Out *parent) {
    if (!strcmp(t->tok[0].text, "=") && !t->tok[0].quoted) {
        if (t->n < 2) {
            ParseErr e = { .col = t->tok[0].col + 1 };
            snprintf(e.msg, sizeof e.msg, "'=' wants a Lua expression after it (= 2^10)");
            al_err("%s", e.msg);
            report_parse(parent, src, line, &e);
            return AL_ERR;
        }
        int rc = shell_lua_exec(s, t->tok[1].text, true, parent);
        return rc;
    }
    Args a;
    ParseErr e;
    if (cmd_parse_tokens(s, t, line, &a, &e)) {
        args_free(&a);
        report_parse(parent, src, line, &e);
        return AL_ERR;
    }
    Out o;
    child_out(&o, parent);
    int rc = cmd_dispatch(s, &a, &o);
    shell_progress_end();
    if (rc == AL_OK || rc == AL_INTERRUPTED) out_emit_result(&o);   /* partial results too */
    if (rc == AL_ERR || rc == AL_INTERRUPTED) report_error(s, &o, src);
    out_free(&o);
    args_free(&a);
    return rc;
}

int shell_exec_line(Session *s, const char *line, const LineSrc *src, Out *parent) {
    size_t pos = 0, n = strlen(line);
    while (pos < n && (line[pos] == ' ' || line[pos] == '\t')) pos++;
    if (line[pos] == '#') return AL_OK;          /* a comment line */
    while (pos < n) {
        Tokens t = {0};
        ParseErr e;
        size_t next;
        if (cmd_tokenize(line, pos, &next, &t, &e)) {
            report_parse(parent, src, line, &e);
            return AL_ERR;
        }
        pos = next;
        if (t.n == 0) continue;
        ShellState *st = shell_state(s);
        if (!st) { tokens_free(&t); out_eprintf(parent, "error: %s\n", al_errmsg()); return AL_ERR; }
        st->err_reported = false;
        int rc = exec_tokens(s, &t, line, src, parent);
        tokens_free(&t);
        shell_drain_warnings(parent);
        if (rc != AL_OK) return rc;
        if (al_interrupted()) {       /* Ctrl-C between commands: the rest of the line is dropped */
            al_err("interrupted");
            out_eprintf(parent, "interrupted\n");
            return AL_INTERRUPTED;
        }
    }
    return AL_OK;
}

int shell_run_commands_file(Session *s, const char *path, Out *parent) {
    FILE *f = fopen(path, "r");
    if (!f) return al_err("run: cannot open '%s' (%m)", path);
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {     /* fopen opens a folder; reading it fails */
        fclose(f);
        return al_err("run: '%s' is a folder: give a file of commands or FILE.lua", path);
    }
    char *buf = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = AL_OK;
    while (getline(&buf, &cap, f) >= 0) {
        lineno++;
        size_t len = strlen(buf);
        while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) buf[--len] = 0;
        const char *p = buf;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || *p == '#') continue;
        LineSrc src = { .file = path, .line = lineno };
        rc = shell_exec_line(s, buf, &src, parent);
        if (rc != AL_OK) {
            if (rc == AL_ERR) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", al_errmsg());
                al_err("%s:%ld: %s", path, lineno, msg);
                ShellState *st = shell_state(s);
                if (st) st->err_reported = true;   /* printed above as file:line: */
            }
            break;
        }
    }
    if (rc == AL_OK && ferror(f)) rc = al_err("run: cannot read '%s' (%m)", path);
    free(buf);
    fclose(f);
    return rc;
}
