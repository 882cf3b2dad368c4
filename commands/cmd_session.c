/* cmd_session.c -- the session as a whole: `transforms` (the stack of transformations), `undo`
 * (pop the newest of the current model), and `save session FILE` (a command file that `run FILE`
 * replays: settings, models, each model's calibration as it stands (ws_calib_replay_line), the
 * other state commands, and the commands of every transformation). The state commands are noted by
 * the dispatch observer (session_observe, installed by commands_init) from the list in methods.c. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_session.h"
#include "methods.h"
#include "registry.h"
#include "session.h"
#include "workspace.h"
#include "ws_calib.h"
#include "xform.h"

/* ================================================================ state commands, per model */

typedef struct Note {
    Model *m;
    char *path;                /* "calibrate", "calib load" */
    char *line;                /* the command as typed (args_line) */
    struct Note *next;         /* newer */
} Note;
typedef struct { Note *head; } Notes;

static void note_free(Note *n) { free(n->path); free(n->line); free(n); }
static void notes_closed(void *st, Model *m) {
    for (Note **p = &((Notes *)st)->head; *p;) {
        Note *n = *p;
        if (!m || n->m == m) { *p = n->next; note_free(n); }
        else p = &n->next;
    }
}
static void *notes_create(void) { return al_calloc(1, sizeof(Notes), "the session's notes"); }
static void notes_destroy(void *st) { if (st) notes_closed(st, NULL); free(st); }
static const WsSlot notes_slot = {"session notes", notes_create, notes_destroy, notes_closed};

/* The dispatch observer: keeps the latest line of each state command per model, in order. */
void session_observe(Session *s, const Args *a) {
    bool state = false;
    for (size_t i = 0; methods_state_commands[i]; i++) state |= !strcmp(methods_state_commands[i], a->path);
    void *p;
    if (!state || !s->cur || ws_state(s, &notes_slot, &p)) return;
    Notes *l = p;
    Note *n = al_calloc(1, sizeof *n, "a note");
    if (!n || !(n->path = al_strdup(a->path)) || !(n->line = args_line(a))) { if (n) note_free(n); return; }
    n->m = s->cur;
    Note **q = &l->head;
    while (*q) {
        if ((*q)->m == n->m && !strcmp((*q)->path, n->path)) { Note *o = *q; *q = o->next; note_free(o); }
        else q = &(*q)->next;
    }
    *q = n;
}

/* ================================================================ transforms, undo */

static const char TRANSFORMS_HELP[] =
    "The session's transformations (truncate, convert mla, convert tpa, kvsvd learn), oldest\n"
    "first: the model, the kind, the command that made it, what it is, and how many older ones\n"
    "of its kind it replaced (`undo` brings them back one by one). `export` and `check` act on\n"
    "the newest of the current model. From Lua: one table per transformation keyed by column\n"
    "(an empty list when there is none).";

static int cmd_transforms(Session *s, const Args *a, Out *out) {
    const Xform *v[256];
    size_t n = 0;
    for (const Xform *x = xform_list(s); x && n < 256; x = x->next) v[n++] = x;
    Table *t = table_new(6, "index", "model", "kind", "command", "what", "replaced");
    for (size_t i = 0; t && i < n; i++) {
        const Xform *x = v[n - 1 - i];
        char what[512];
        size_t under = 0;
        for (const Xform *y = x->replaced; y; y = y->replaced) under++;
        xform_describe(x, what, sizeof what);
        if (table_row(t)) { table_free(t); return AL_ERR; }
        table_int(t, (long long)i + 1);
        table_str(t, x->src->name);
        table_str(t, x->kind->name);
        table_str(t, x->cmd ? x->cmd : "");
        table_str(t, what);
        table_int(t, (long long)under);
    }
    if (!t) return AL_ERR;
    if (n || args_given(a, "to")) return out_table_to(out, args_str(a, "to"), t);
    out_printf(out, "no transformations (truncate, convert mla|tpa, kvsvd learn make them)\n");
    out_table(out, t);          /* Lua: an empty list */
    out->written = true;
    return AL_OK;
}

static const char UNDO_HELP[] =
    "Removes the newest transformation of the current model; the one it replaced (the previous\n"
    "`truncate`, `convert mla`, ... of the same kind) stands again, and `export` writes that.\n"
    "Kinds whose state is shared (the FaRR working copy, learned KQ-SVD projections) are rebuilt\n"
    "by re-running the older commands (a FaRR undo recomputes the spectra it needs).";

static int cmd_undo(Session *s, const Args *a, Out *out) {
    (void)a;
    char what[512];
    if (xform_undo(s, s->cur, what, sizeof what)) return AL_ERR;
    const Xform *x = xform_newest(s, s->cur, NULL);
    char now[512] = "nothing";
    if (x) xform_describe(x, now, sizeof now);
    out_printf(out, "undone: %s; newest of %s now: %s\n", what, s->cur->name, now);
    return AL_OK;
}

/* ================================================================ save session */

static const char SAVE_HELP[] =
    "save session FILE writes a command file that `run FILE` (or `attnlab FILE`) replays into\n"
    "the same state: every setting, each loaded model (`load PATH as NAME`), the commands of its\n"
    "transformations (each stack oldest first, so `undo` works after the replay too) with its\n"
    "calibration where it was made among them (a `calibrate` of exactly the windows it holds, or\n"
    "`calib load`), and `use` of the current model. Relative paths in those commands are as typed: replay\n"
    "from the same folder.";

/* Appends a line to the growing text. */
static int text_add(char **buf, size_t *n, size_t *cap, const char *line) {
    size_t l = strlen(line);
    if (al_reserve(buf, cap, *n + l + 2, 1, "the session file")) return AL_ERR;
    memcpy(*buf + *n, line, l);
    (*buf)[*n + l] = '\n';
    *n += l + 1;
    (*buf)[*n] = 0;
    return AL_OK;
}

/* v as one word of a command line: quoted when it holds a space, a quote, ';' or '#', or is empty. */
static char *word(const char *v) {
    return al_asprintf(!*v || strpbrk(v, " \t;\"'#") ? "\"%s\"" : "%s", v);
}

/* The commands that rebuild m: load, state commands, transformations (oldest first). */
static int save_model(Session *s, Model *m, char **buf, size_t *n, size_t *cap) {
    char *wp = word(m->path), *wn = word(m->name);
    char *q = wp && wn ? al_asprintf("load %s as %s", wp, wn) : NULL;
    free(wp);
    free(wn);
    int rc = q ? text_add(buf, n, cap, q) : AL_ERR;
    free(q);
    const Xform *v[256];
    size_t nx = 0;
    for (const Xform *x = xform_list(s); x && nx < 256; x = x->next)
        if (x->src == m) v[nx++] = x;
    unsigned long after;                    /* the calibration as it is, before the */
    char *cal = ws_calib_replay_line(s, m, &after);      /* transformations made after it */
    size_t at = 0;                          /* v[at - 1] and older were made before it */
    while (at < nx && v[nx - 1 - at]->serial <= after) at++;
    if (cal && !rc && !at) rc = text_add(buf, n, cap, cal);
    Notes *l = ws_peek(s, &notes_slot);
    for (const Note *k = l ? l->head : NULL; !rc && k; k = k->next)
        if (k->m == m && strncmp(k->path, "calib", 5) != 0) rc = text_add(buf, n, cap, k->line);
    for (size_t i = nx; !rc && i-- > 0;) {
        const char *c;
        for (size_t j = 0; !rc && (c = xform_stack_cmd(v[i], j)); j++)
            if (*c) rc = text_add(buf, n, cap, c);
        if (cal && !rc && nx - i == at) rc = text_add(buf, n, cap, cal);
    }
    free(cal);
    return rc;
}

static int cmd_save_session(Session *s, const Args *a, Out *out) {
    const char *file = args_str(a, "file");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = text_add(&buf, &n, &cap, "# an attnlab session: `run FILE` or `attnlab FILE` replays it");
    const Setting *st;
    for (size_t i = 0; !rc && (st = session_setting_at(i)); i++) {
        char *v = session_get(s, st->name), *w = v ? word(v) : NULL;
        char *line = w ? al_asprintf("set %s %s", st->name, w) : NULL;
        rc = line ? text_add(&buf, &n, &cap, line) : AL_ERR;
        free(v);
        free(w);
        free(line);
    }
    for (size_t i = 0; !rc && i < s->nmodels; i++) rc = save_model(s, s->models[i], &buf, &n, &cap);
    if (!rc && s->cur) {
        char *w = word(s->cur->name), *u = w ? al_asprintf("use %s", w) : NULL;
        free(w);
        rc = u ? text_add(&buf, &n, &cap, u) : AL_ERR;
        free(u);
    }
    if (!rc) rc = out_write_file(out, file, buf, n);
    free(buf);
    if (rc) return al_err_ctx("save session %s", file);
    out_printf(out, "wrote %s (%zu model%s; replay it with run %s)\n", file, s->nmodels, al_s(s->nmodels), file);
    return AL_OK;
}

/* ================================================================ the table */

static const Param to_kw[] = { PARAM_TO, {0} };
static const Param file_pos[] = {
    { .name = "file", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE", .help = "the command file to write" },
    {0}
};
static const Command save_subs[] = {
    { .name = "session", .summary = "write the session as a command file that `run FILE` replays", .help = SAVE_HELP,
      .returns = "nothing",
      .pos = file_pos, .fn = cmd_save_session },
    {0}
};

static const Command session_cmds[] = {
    { .name = "transforms", .summary = "list the session's transformations (a stack per kind; undo pops)",
      .help = TRANSFORMS_HELP, .kw = to_kw, .fn = cmd_transforms },
    { .name = "undo", .summary = "remove the newest transformation of the current model", .help = UNDO_HELP,
      .fn = cmd_undo, .flags = CMD_MODEL },
    { .name = "save", .summary = "save the session: save session FILE", .help = SAVE_HELP, .sub = save_subs },
    {0}
};

/* Same title as the base group: `help` lists these with the session commands. */
const CommandGroup cmd_group_session = { .title = "Models and session", .cmds = session_cmds };
