/* complete.c -- completion candidates from the command table: commands, sub-commands, keywords
 * not yet used, enum choices, model names, demo names and aliases, layer and head numbers of the
 * current model, settings and their values (from the settings table); where file names fit it
 * says so (StrList.files) and the front end adds them (repl/repl.c holds the Readline glue). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "resolve.h"
#include "session.h"
#include "synth.h"

/* ================================================================ candidate lists */

void strlist_free(StrList *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
    l->files = false;          /* kept, it made every completion after a file slot offer files */
}

int strlist_add(StrList *l, const char *s) {
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s)) return AL_OK;
    if (al_reserve(&l->v, &l->cap, l->n + 1, sizeof *l->v, "the completions")) return AL_ERR;
    if (!(l->v[l->n] = strdup(s))) return al_err("out of memory completing");
    l->n++;
    return AL_OK;
}

/* Adds s when it starts with the partial word. */
static void offer(StrList *l, const char *word, const char *s) {
    if (!strncmp(s, word, strlen(word))) strlist_add(l, s);
}

static void offer_numbers(StrList *l, const char *word, long n) {
    char buf[32];
    for (long i = 0; i < n && i < 4096; i++) { snprintf(buf, sizeof buf, "%ld", i); offer(l, word, buf); }
}

/* Candidates for a value of parameter p; prev_pos is the previous positional's text (help SUB). */
static void offer_param(Session *s, const Param *p, const char *word, const char *prev_pos, StrList *l) {
    switch (p->comp) {
    case COMP_UNSET: case COMP_NONE: break;
    case COMP_CHOICES:
        for (size_t i = 0; p->choices && p->choices[i]; i++) offer(l, word, p->choices[i]);
        break;
    case COMP_MODELS:
        for (size_t i = 0; s && i < s->nmodels; i++) offer(l, word, s->models[i]->name);
        if (p->metavar && strstr(p->metavar, "all")) offer(l, word, "all");
        break;
    case COMP_LOADABLE: {
        const char *alias, *target;
        char demo[32];
        for (size_t i = 0; synth_demo_at(i, demo, sizeof demo); i++) offer(l, word, demo);
        for (size_t i = 0; resolve_alias_at(i, &alias, &target); i++) offer(l, word, alias);
        l->files = true;
        break;
    }
    case COMP_LAYERS: case COMP_HEADS:
        if ((p->flags & PF_ALL) || p->type == ARG_RANGE) offer(l, word, "all");
        if (s && s->cur) offer_numbers(l, word, p->comp == COMP_LAYERS ? s->cur->cfg.n_layers : s->cur->cfg.n_heads);
        break;
    case COMP_FILES:
        l->files = true;
        break;
    case COMP_COMMANDS: {
        const Command *c = prev_pos && *prev_pos ? cmd_find(prev_pos) : NULL;
        if (prev_pos && *prev_pos) {
            for (const Command *sc = c ? c->sub : NULL; sc && sc->name; sc++) offer(l, word, sc->name);
        } else {
            for (size_t i = 0; (c = cmd_at(i, NULL)); i++) offer(l, word, c->name);
        }
        break;
    }
    case COMP_SETTINGS: {
        const Setting *st;
        for (size_t i = 0; (st = session_setting_at(i)); i++) offer(l, word, st->name);
        break;
    }
    }
}

/* Values for `set KEY VALUE`, from the settings table: the choices of a word setting, the
 * example and the default of a number, file names for a folder. */
static void offer_setting_value(const char *key, const char *word, StrList *l) {
    const Setting *st;
    for (size_t i = 0; (st = session_setting_at(i)); i++) {
        if (strcmp(st->name, key)) continue;
        for (size_t k = 0; st->choices && st->choices[k]; k++) offer(l, word, st->choices[k]);
        if (st->type == SET_NUMBER) { offer(l, word, st->example); offer(l, word, st->def); }
        if (st->type == SET_FOLDER) l->files = true;
    }
}

/* The word being completed, line[start, point), into word (cap bytes; an opening quote dropped). */
static void complete_word(const char *line, size_t start, size_t point, char *word, size_t cap) {
    size_t wl = point > start ? point - start : 0;
    if (wl >= cap) wl = cap - 1;
    memcpy(word, line + start, wl);
    word[wl] = 0;
    if (word[0] == '"' || word[0] == '\'') memmove(word, word + 1, strlen(word));
}

/* The words before `start`, in its last ';' segment, into *t; *open: inside an open quote
 * (nothing to complete). */
static int last_segment(const char *line, size_t start, Tokens *t, bool *open) {
    *open = false;
    char *head = strndup(line, start);
    if (!head) return al_err("out of memory completing");
    ParseErr e;
    size_t pos = 0, n = strlen(head), next;
    for (;;) {
        tokens_free(t);
        if (cmd_tokenize(head, pos, &next, t, &e)) { free(head); *open = true; return AL_OK; }
        if (next >= n) break;
        pos = next;
    }
    free(head);
    return AL_OK;
}

/* The command t names, through its sub-command words, with *ti the first argument token; NULL
 * when there is none to complete the arguments of (command or sub-command names offered where
 * one is being typed). */
static const Command *complete_command(const Tokens *t, const char *word, size_t *ti, StrList *out) {
    if (t->n == 0) {
        const Command *c;
        for (size_t i = 0; (c = cmd_at(i, NULL)); i++) offer(out, word, c->name);
        return NULL;
    }
    const Command *c = cmd_find(t->tok[0].text);
    if (!c || !strcmp(t->tok[0].text, "=")) return NULL;
    for (*ti = 1; c->sub; (*ti)++) {
        if (*ti >= t->n) {
            for (const Command *sc = c->sub; sc->name; sc++) offer(out, word, sc->name);
            return NULL;
        }
        if (!(c = cmd_find_sub(c, t->tok[*ti].text))) return NULL;
    }
    return c;
}

/* The arguments typed so far: keywords used, positionals filled, a keyword awaiting its value. */
typedef struct {
    bool used[ARGS_MAX];          /* by keyword index */
    size_t npos;                  /* positionals given */
    const char *prev_pos, *first_pos;
    const Param *awaiting;        /* the keyword whose value is being typed, or NULL */
} ArgWalk;

static void walk_args(const Command *c, const Tokens *t, size_t ti, ArgWalk *w) {
    *w = (ArgWalk){0};
    for (; ti < t->n; ti++) {
        const Param *kp = NULL;
        for (const Param *p = c->kw; p && p->name && !t->tok[ti].quoted; p++)
            if (!strcmp(p->name, t->tok[ti].text)) { kp = p; break; }
        if (kp) {
            w->used[kp - c->kw] = true;
            if (kp->type == ARG_FLAG) continue;
            if (ti + 1 >= t->n) { w->awaiting = kp; break; }
            ti++;
            continue;
        }
        w->prev_pos = t->tok[ti].text;
        if (!w->first_pos) w->first_pos = w->prev_pos;
        w->npos++;
    }
}

/* After the arguments w of c: the awaited keyword's values, else the next positional's values and
 * the keywords not used yet. */
static void offer_next(Session *s, const Command *c, const ArgWalk *w, const char *word, StrList *out) {
    if (w->awaiting) {
        offer_param(s, w->awaiting, word, NULL, out);
        return;
    }
    size_t np = 0;
    while (c->pos && c->pos[np].name) np++;
    if (w->npos < np) {
        const Param *p = &c->pos[w->npos];
        if (p->flags & PF_REST) return;
        if (!strcmp(c->name, "set") && w->npos == 1 && w->first_pos) offer_setting_value(w->first_pos, word, out);
        else offer_param(s, p, word, w->prev_pos, out);
    }
    for (const Param *p = c->kw; p && p->name; p++)
        if (!w->used[p - c->kw]) offer(out, word, p->name);
}

int cmd_complete(Session *s, const char *line, size_t start, size_t point, StrList *out) {
    char word[256];
    out->files = false;
    complete_word(line, start, point, word, sizeof word);
    Tokens t = {0};
    bool open;
    if (last_segment(line, start, &t, &open)) return AL_ERR;
    if (open) return AL_OK;
    size_t ti = 0;
    const Command *c = complete_command(&t, word, &ti, out);
    if (c) {
        ArgWalk w;
        walk_args(c, &t, ti, &w);
        offer_next(s, c, &w, word, out);
    }
    tokens_free(&t);
    return AL_OK;
}
