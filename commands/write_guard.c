/* write_guard.c -- refusing writes into a loaded model's folder (see write_guard.h). */
#define _GNU_SOURCE
#include "write_guard.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* out = a sep b; empty when it does not fit. */
static void join(char out[PATH_MAX], const char *a, const char *sep, const char *b) {
    if (snprintf(out, PATH_MAX, "%s%s%s", a, sep, b) >= PATH_MAX) out[0] = 0;
}

/* The path as it will be written: its folder resolved, then the file name; when the folder does
 * not exist yet, its nearest existing ancestor resolved with a trailing '/' (the rest is made
 * inside it). Empty when nothing resolves. */
static void resolve_target(const char *path, char out[PATH_MAX]) {
    char res[PATH_MAX];
    out[0] = 0;
    char *p = al_strdup(path);
    if (!p) return;
    char *slash = strrchr(p, '/');
    if (!slash) {
        if (realpath(".", res)) join(out, res, "/", p);
        free(p);
        return;
    }
    const char *base = slash + 1;
    *slash = 0;                                         /* p: the folder ("" for "/name") */
    bool exact = true;
    while (!realpath(*p ? p : "/", res)) {
        exact = false;
        char *up = strrchr(p, '/');
        if (!up) { if (!realpath(".", res)) { free(p); return; } break; }
        *up = 0;
    }
    if (exact) join(out, res, strcmp(res, "/") ? "/" : "", base);
    else join(out, res, "/", "");
    free(p);
}

/* True when a is b, or (b a folder) inside b. */
static bool path_in(const char *a, const char *b, bool folder) {
    size_t n = strlen(b);
    if (strncmp(a, b, n)) return false;
    return a[n] == 0 || (folder && (a[n] == '/' || (n && b[n - 1] == '/')));
}

int write_guard_check(const void *session, const char *path) {
    const Session *s = session;
    if (!s || !path || !*path) return AL_OK;
    char dst[PATH_MAX], real_dst[PATH_MAX];
    resolve_target(path, dst);
    bool have_real = realpath(path, real_dst) != NULL;     /* an existing file, links followed */
    for (size_t i = 0; i < s->nmodels; i++) {
        const Model *m = s->models[i];
        char src[PATH_MAX];
        struct stat sb;
        if (!m->path || !realpath(m->path, src) || stat(src, &sb) != 0) continue;
        bool folder = S_ISDIR(sb.st_mode);      /* a single-file model (llama2.c): only that file */
        if ((dst[0] && path_in(dst, src, folder)) || (have_real && path_in(real_dst, src, folder)))
            return al_err("refusing to write %s: it is %s the loaded model %s (%s); attnlab never writes into a "
                          "checkpoint it reads -- give a path elsewhere", path, folder ? "inside the folder of" :
                          "the file of", m->name ? m->name : "?", src);
    }
    return AL_OK;
}
