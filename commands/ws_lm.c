/* ws_lm.c -- the language-model service of the workspace (ws_lm.h): per loaded model its
 * tokenizer and forward pass, made on first use and dropped when the model closes. */
#define _GNU_SOURCE
#include "ws_lm.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "workspace.h"

/* ================================================================ state */

typedef struct LmEntry {
    Model *m;
    Tokenizer *tok;            /* NULL until first use */
    Forward *fwd;              /* NULL until first use */
    struct LmEntry *next;
} LmEntry;

/* The workspace slot: one entry per model used. */
typedef struct LmState {
    LmEntry *entries;
} LmState;

static void entry_free(LmEntry *e) {
    tok_free(e->tok);
    fwd_free(e->fwd);
    free(e);
}

/* Drops the entries of model m (every entry when m is NULL). */
static void lm_closed(void *st, Model *m) {
    for (LmEntry **p = &((LmState *)st)->entries; *p;) {
        LmEntry *e = *p;
        if (!m || e->m == m) { *p = e->next; entry_free(e); }
        else p = &e->next;
    }
}

static void *lm_create(void) { return al_calloc(1, sizeof(LmState), "language-model state"); }
static void lm_destroy(void *st) {
    lm_closed(st, NULL);
    free(st);
}
static const WsSlot lm_slot = {"language-model", lm_create, lm_destroy, lm_closed};

/* The entry of model m, created on first use. */
static LmEntry *lm_entry(Session *s, Model *m) {
    void *p;
    if (ws_state(s, &lm_slot, &p)) return NULL;
    LmState *st = p;
    for (LmEntry *e = st->entries; e; e = e->next)
        if (e->m == m) return e;
    LmEntry *e = al_calloc(1, sizeof *e, "language-model state");
    if (!e) return NULL;
    e->m = m;
    e->next = st->entries;
    st->entries = e;
    return e;
}

int lm_set_tokenizer(Session *s, Model *m, Tokenizer *t) {
    LmEntry *e = lm_entry(s, m);
    if (!e) return AL_ERR;
    tok_free(e->tok);
    e->tok = t;
    return AL_OK;
}

int lm_tokenizer(Session *s, Model *m, Tokenizer **out) {
    *out = NULL;
    LmEntry *e = lm_entry(s, m);
    if (!e) return AL_ERR;
    if (!e->tok) {
        char *path = NULL;
        if (tok_find(m->path, &path) != AL_OK) return AL_ERR;
        int rc = tok_open(path, &e->tok);
        free(path);
        if (rc != AL_OK) return rc;
    }
    *out = e->tok;
    return AL_OK;
}

int lm_forward(Session *s, Model *m, Forward **out) {
    *out = NULL;
    LmEntry *e = lm_entry(s, m);
    if (!e) return AL_ERR;
    if (!e->fwd && fwd_new(m, NULL, &e->fwd) != AL_OK) return AL_ERR;
    fwd_set_compute(e->fwd, mm_compute_parse(s->compute));
    fwd_set_hooks(e->fwd, NULL);
    fwd_clear_attn(e->fwd);
    *out = e->fwd;
    return AL_OK;
}

/* ================================================================ token ids */

/* The token at p (up to its separator; past 16 bytes cut with "...") for a message, control
 * characters escaped. */
static const char *lm_token_quote(const char *p, char *buf, size_t cap) {
    char tok[20];
    size_t i = 0;
    while (i < 16 && p[i] && !strchr(" \n\t\r,", p[i])) { tok[i] = p[i]; i++; }
    bool cut = p[i] && !strchr(" \n\t\r,", p[i]);
    snprintf(tok + i, sizeof tok - i, "%s", cut ? "..." : "");
    return al_printable(tok, buf, cap);
}

int lm_read_ids(const char *path, int **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    size_t len;
    char *text = al_read_file(path, &len);
    if (!text) return AL_ERR;
    size_t cap = 1024, k = 0;
    int *v = al_malloc3(cap, 1, sizeof *v, "token ids");
    int rc = v ? AL_OK : AL_ERR;
    for (char *p = text; rc == AL_OK;) {
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r' || *p == ',') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        bool whole = !*end || strchr(" \n\t\r,", *end);   /* "3x" is no id: not 3, then 'x' */
        if (end == p || !whole || errno || x < 0 || x > INT32_MAX) {
            char q[72];
            rc = al_err("%s: token %zu ('%s') is not a non-negative integer id", path, k + 1, lm_token_quote(p, q, sizeof q));
            break;
        }
        if ((rc = al_reserve(&v, &cap, k + 1, sizeof *v, "token ids"))) break;
        v[k++] = (int)x;
        p = end;
    }
    free(text);
    if (rc != AL_OK) { free(v); return rc; }
    *ids = v;
    *n = k;
    return AL_OK;
}

int lm_text_ids(Session *s, Model *m, const char *text_file, const char *ids_file, int **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    if (ids_file && *ids_file) return lm_read_ids(ids_file, ids, n);
    Tokenizer *t;
    size_t len;
    if (lm_tokenizer(s, m, &t) != AL_OK) return AL_ERR;
    char *text = al_read_file(text_file, &len);
    if (!text) return AL_ERR;
    int rc = tok_encode(t, text, len, true, ids, n);
    free(text);
    return rc;
}
