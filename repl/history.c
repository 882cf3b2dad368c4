/* history.c -- the prompt's history: Readline's history list, read from and appended to the
 * history file of attnlab's home folder, listed by the `history` command. */
#define _GNU_SOURCE
#include "history.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <readline/history.h>

#include "registry.h"
#include "resolve.h"

#define HISTORY_MAX 2000

static char *history_path;
static int session_from = -1;     /* history_length when this session began */

void shell_history_open(void) {
    char *home = resolve_home_dir();
    if (!home) return;
    history_path = al_asprintf("%s/history", home);
    free(home);
    if (!history_path) return;
    stifle_history(HISTORY_MAX);
    read_history(history_path);
    session_from = history_length;
}

void shell_history_add(const char *line) {
    const char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) return;
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
    if (last && !strcmp(last->line, line)) return;
    add_history(line);
    if (!history_path) return;
    struct stat sb;
    if (stat(history_path, &sb) != 0) write_history(history_path);
    else append_history(1, history_path);
}

void shell_history_close(void) {
    if (history_path) history_truncate_file(history_path, HISTORY_MAX);
    free(history_path);
    history_path = NULL;
}

/* Appends line to text without its `history` commands (';'-separated segments whose first word
 * is history); a line that does not tokenize is kept as it is. */
static int add_replayable(char **text, size_t *tn, size_t *cap, const char *line) {
    size_t pos = 0, n = strlen(line), next, keep = 0;
    char *out = al_calloc(n + 2, 1, "a history line");
    if (!out) return AL_ERR;
    while (pos < n) {
        Tokens t = {0};
        ParseErr e;
        if (cmd_tokenize(line, pos, &next, &t, &e)) { snprintf(out, n + 1, "%s", line); keep = n; break; }
        bool hist = t.n && !t.tok[0].quoted && !strcmp(t.tok[0].text, "history");
        if (t.n && !hist) {
            size_t a = t.tok[0].col, b = next > pos && line[next - 1] == ';' ? next - 1 : next;
            while (b > a && (line[b - 1] == ' ' || line[b - 1] == '\t')) b--;
            keep += (size_t)snprintf(out + keep, n + 2 - keep, "%s%.*s", keep ? "; " : "", (int)(b - a), line + a);
        }
        tokens_free(&t);
        pos = next;
    }
    while (keep && (out[keep - 1] == ' ' || out[keep - 1] == '\t')) out[--keep] = 0;
    int rc = AL_OK;
    if (keep && !(rc = al_reserve(text, cap, *tn + keep + 2, 1, "the history file"))) {
        memcpy(*text + *tn, out, keep);
        (*text)[*tn + keep] = '\n';
        *tn += keep + 1;
    }
    free(out);
    return rc;
}

int shell_history_write(long n, const char *path, Out *out) {
    int len = history_length;
    long from = n > 0 && n < len ? len - n : n > 0 ? 0 : session_from > 0 ? session_from : 0;
    char *text = NULL;
    size_t tn = 0, cap = 0;
    for (long i = from; i < len; i++) {
        HIST_ENTRY *h = history_get(history_base + (int)i);
        if (h && add_replayable(&text, &tn, &cap, h->line)) { free(text); return AL_ERR; }
    }
    int rc = out_write_file(out, path, text ? text : "", tn);
    free(text);
    if (rc) return al_err_ctx("history to %s", path);
    out_printf(out, "wrote %s: the commands of %s (run %s replays them)\n", path,
               n > 0 ? "the last entries" : "this session", path);
    return AL_OK;
}

int shell_history_list(long n, Out *out) {
    int len = history_length;
    long from = n > 0 && n < len ? len - n : 0;
    for (long i = from; i < len; i++) {
        HIST_ENTRY *h = history_get(history_base + (int)i);
        if (h) out_printf(out, "%5ld  %s\n", i + history_base, h->line);
    }
    return AL_OK;
}
