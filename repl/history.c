/* history.c -- the prompt's history: Readline's history list, read from and appended to the
 * history file of attnlab's home folder, listed by the `history` command. */
#define _GNU_SOURCE
#include "history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <readline/history.h>

#include "resolve.h"

#define HISTORY_MAX 2000

static char *history_path;

void shell_history_open(void) {
    char *home = resolve_home_dir();
    if (!home) return;
    history_path = al_asprintf("%s/history", home);
    free(home);
    if (!history_path) return;
    stifle_history(HISTORY_MAX);
    read_history(history_path);
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

int shell_history_list(long n, Out *out) {
    int len = history_length;
    long from = n > 0 && n < len ? len - n : 0;
    for (long i = from; i < len; i++) {
        HIST_ENTRY *h = history_get(history_base + (int)i);
        if (h) out_printf(out, "%5ld  %s\n", i + history_base, h->line);
    }
    return AL_OK;
}
