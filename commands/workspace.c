/* workspace.c -- the session's workspace (workspace.h): a list of (slot, state) pairs behind
 * Session.ws, one session hook that releases them, and the FaRR state slot. */
#include "workspace.h"

#include <stdlib.h>

#define WS_MAX_SLOTS 16

typedef struct Workspace {
    const WsSlot *slot[WS_MAX_SLOTS];
    void *st[WS_MAX_SLOTS];
    size_t n;
} Workspace;

/* States go in the reverse order of their creation. */
static void ws_on_free(Session *s) {
    Workspace *w = s->ws;
    for (size_t i = w ? w->n : 0; i-- > 0;)
        if (w->slot[i]->destroy) w->slot[i]->destroy(w->st[i]);
    free(w);
    s->ws = NULL;
}

static void ws_on_model_close(Session *s, Model *m) {
    Workspace *w = s->ws;
    for (size_t i = w ? w->n : 0; i-- > 0;)
        if (w->slot[i]->model_closed) w->slot[i]->model_closed(w->st[i], m);
}

static const SessionHook ws_hook = {.name = "workspace", .on_free = ws_on_free, .on_model_close = ws_on_model_close};

void *ws_peek(const Session *s, const WsSlot *k) {
    const Workspace *w = s->ws;
    for (size_t i = 0; w && i < w->n; i++)
        if (w->slot[i] == k) return w->st[i];
    return NULL;
}

int ws_state(Session *s, const WsSlot *k, void **out) {
    *out = ws_peek(s, k);
    if (*out) return AL_OK;
    if (!s->ws) {
        if (!(s->ws = al_calloc(1, sizeof *s->ws, "the session's workspace"))) return AL_ERR;
        if (session_hook_add(s, &ws_hook)) { free(s->ws); s->ws = NULL; return AL_ERR; }
    }
    Workspace *w = s->ws;
    if (w->n == WS_MAX_SLOTS)
        return al_err("the workspace holds at most %d kind%s of state (raise WS_MAX_SLOTS for '%s')", WS_MAX_SLOTS, al_s(WS_MAX_SLOTS),
                      k->name);
    void *st = k->create();
    if (!st) return al_err_ctx("creating the session's %s state", k->name);
    w->slot[w->n] = k;
    w->st[w->n++] = st;
    *out = st;
    return AL_OK;
}

/* ================================================================ FaRR */

static void *farr_create(void) { return farr_state_new(); }
static void farr_destroy(void *st) { farr_state_free(st); }
static void farr_closed(void *st, Model *m) { farr_state_drop_model(st, m); }
static const WsSlot farr_slot = {"FaRR", farr_create, farr_destroy, farr_closed};

int ws_farr(Session *s, FarrState **out) {
    void *p;
    *out = NULL;
    if (ws_state(s, &farr_slot, &p)) return AL_ERR;
    *out = p;
    return AL_OK;
}
