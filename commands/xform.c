/* xform.c -- the session's transformations (xform.h): a list, newest first, kept in the
 * workspace; replaced per kind and source (the replaced one kept underneath for `undo`), dropped
 * with their source model; undo, re-running a kind's stack where its state lives elsewhere; the
 * transformed model run by the forward pass (xform_attn_set) and its held-out perplexities. */
#include "xform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workspace.h"

typedef struct {
    Xform *head;
} XformList;

/* Frees x and the stack it replaced. */
static void xf_free(Xform *x) {
    while (x) {
        Xform *under = x->replaced;
        if (x->kind->free) x->kind->free(x->data);
        free(x->cmd);
        free(x);
        x = under;
    }
}

/* Unlinks and frees every transformation of m (all when m is NULL). */
static void xf_closed(void *st, Model *m) {
    for (Xform **p = &((XformList *)st)->head; *p;) {
        Xform *x = *p;
        if (!m || x->src == m) { *p = x->next; xf_free(x); }
        else p = &x->next;
    }
}

static void *xf_create(void) { return al_calloc(1, sizeof(XformList), "the transformation list"); }
static void xf_destroy(void *st) {
    if (st) xf_closed(st, NULL);
    free(st);
}
static const WsSlot xf_slot = {"transformations", xf_create, xf_destroy, xf_closed};

/* The list with the transformations that no longer stand removed (NULL when none was made). */
static XformList *xf_pruned(Session *s) {
    XformList *l = ws_peek(s, &xf_slot);
    for (Xform **p = l ? &l->head : NULL; p && *p;) {
        Xform *x = *p;
        if (x->kind->alive && !x->kind->alive(s, x)) { *p = x->next; xf_free(x); }
        else p = &x->next;
    }
    return l;
}

int xform_add(Session *s, const XformKind *k, Model *src, void *data) {
    void *p;
    Xform *x = NULL;
    if (ws_state(s, &xf_slot, &p) || !(x = al_calloc(1, sizeof *x, "a transformation"))) {
        if (k->free) k->free(data);
        return AL_ERR;
    }
    XformList *l = p;
    Xform *under = NULL;
    for (Xform **q = &l->head; *q;) {
        Xform *o = *q;
        if (o->kind == k && o->src == src) { *q = o->next; o->next = NULL; under = o; }
        else q = &o->next;
    }
    const Args *a = cmd_running();
    static unsigned long serial;
    *x = (Xform){.kind = k, .src = src, .data = data, .cmd = a ? args_line(a) : NULL, .replaced = under,
                 .next = l->head, .serial = ++serial};
    l->head = x;
    return AL_OK;
}

const char *xform_stack_cmd(const Xform *x, size_t i) {
    size_t n = 0;
    for (const Xform *y = x; y; y = y->replaced) n++;
    if (i >= n) return NULL;
    for (size_t k = n - 1 - i; k > 0; k--) x = x->replaced;
    return x->cmd ? x->cmd : "";
}

/* Re-runs the command lines of stack (oldest first, its own last) quietly on the current model:
 * the kind's state is rebuilt and the entries come back, each replacing the one before. */
static int xf_replay(Session *s, char **cmds, size_t n) {
    for (size_t i = 0; i < n; i++) {
        Args a;
        ParseErr e;
        Out o;
        out_init(&o);
        o.quiet = OUT_SILENT;
        int rc = cmd_parse(s, cmds[i], &a, &e);
        if (rc == AL_OK) rc = cmd_dispatch(s, &a, &o);
        else al_err("%s", e.msg);
        args_free(&a);
        out_free(&o);
        if (rc != AL_OK) return al_err_ctx("undo: re-running '%s'", cmds[i]);
    }
    return AL_OK;
}

int xform_undo(Session *s, Model *m, char *what, size_t cap) {
    XformList *l = xf_pruned(s);
    Xform **q = l ? &l->head : NULL;
    while (q && *q && (*q)->src != m) q = &(*q)->next;
    if (!q || !*q) return al_err("undo: %s has no transformation to undo (transforms lists them)", m->name);
    Xform *x = *q, *under = x->replaced;
    xform_describe(x, what, cap);
    *q = x->next;
    x->replaced = NULL;
    if (!x->kind->replays || !under) {           /* the older one owns its state: it stands again */
        if (x->kind->reset && !under) x->kind->reset(s, m);
        if (under) { under->next = l->head; l->head = under; }
        xf_free(x);
        return AL_OK;
    }
    /* the kind's state lives outside the entries: rebuild it from the older commands */
    size_t n = 0;
    for (const Xform *y = under; y; y = y->replaced) n++;
    char **cmds = al_calloc(n, sizeof *cmds, "the commands to re-run");
    bool ok = cmds != NULL;
    for (size_t i = 0; ok && i < n; i++) ok = (cmds[i] = al_strdup(xform_stack_cmd(under, i))) != NULL;
    const XformKind *k = x->kind;
    xf_free(x);
    xf_free(under);
    if (k->reset) k->reset(s, m);
    Model *cur = s->cur;
    s->cur = m;
    int rc = ok ? xf_replay(s, cmds, n) : AL_ERR;
    s->cur = cur;
    for (size_t i = 0; cmds && i < n; i++) free(cmds[i]);
    free(cmds);
    return rc;
}

const Xform *xform_newest(Session *s, const Model *m, const XformKind *k) {
    XformList *l = xf_pruned(s);
    for (const Xform *x = l ? l->head : NULL; x; x = x->next)
        if ((!m || x->src == m) && (!k || x->kind == k)) return x;
    return NULL;
}

const Xform *xform_list(Session *s) {
    XformList *l = xf_pruned(s);
    return l ? l->head : NULL;
}

void xform_describe(const Xform *x, char *buf, size_t cap) {
    if (x->kind->describe) x->kind->describe(x, buf, cap);
    else snprintf(buf, cap, "%s of %s", x->kind->name, x->src->name);
}

size_t xform_kv_bytes(const XformKvCtx *c, size_t after, size_t conv) {
    return (after * conv + c->before * (c->layers - conv)) * c->bytes;
}

int xform_export_dtype(const Args *a, dt_type def, dt_type *dt) {
    const char *v = args_given(a, "dtype") ? args_str(a, "dtype") : NULL;
    *dt = def;
    if (!v || !*v) return AL_OK;
    *dt = !strcmp(v, "f32") ? DT_F32 : !strcmp(v, "f16") ? DT_F16 : !strcmp(v, "bf16") ? DT_BF16 : DT_INVALID;
    return *dt == DT_INVALID ? al_err("export: dtype '%s': give f32, f16 or bf16", v) : AL_OK;
}

/* ================================================================ the transformed model, run */

void xform_attn_clear(Forward *f, XformAttn *held) {
    if (f) fwd_clear_attn(f);
    if (f && held->eps_set) fwd_set_norm_eps(f, 0);
    for (int l = 0; held->layers && l < held->n; l++)
        if (held->owned[l]) attn_layer_free((AttnLayer *)held->layers[l]);
    free(held->layers);
    free(held->owned);
    *held = (XformAttn){0};
}

/* x's layers (kind->attn_layer) into held, set nowhere yet; on failure nothing is held. */
static int xf_attn_build(Session *s, const Xform *x, XformAttn *held) {
    *held = (XformAttn){0};
    if (!x->kind->attn_layer)
        return al_err("%s defines no attention to run: %s", x->kind->name, x->kind->no_attn ? x->kind->no_attn : "?");
    int n = x->src->cfg.n_layers, rc = AL_OK;
    held->layers = al_calloc((size_t)n, sizeof *held->layers, "the transformed layers");
    held->owned = held->layers ? al_calloc((size_t)n, sizeof *held->owned, "the transformed layers") : NULL;
    if (!held->owned) { xform_attn_clear(NULL, held); return AL_ERR; }
    held->n = n;
    for (int l = 0; rc == AL_OK && l < n; l++) {
        rc = x->kind->attn_layer(s, x, l, &held->layers[l], &held->owned[l]);
        held->changed += rc == AL_OK && held->layers[l];
        if (rc == AL_OK && al_interrupted()) rc = AL_INTERRUPTED;
    }
    if (rc != AL_OK) xform_attn_clear(NULL, held);
    return rc;
}

/* The eps every norm of x's model runs at (kind->norm_eps), 0: the source's. */
static double xf_norm_eps(const Xform *x) { return x->kind->norm_eps ? x->kind->norm_eps(x) : 0; }

int xform_attn_set(Session *s, const Xform *x, Forward *f, XformAttn *held) {
    int rc = xf_attn_build(s, x, held);
    for (int l = 0; rc == AL_OK && l < held->n; l++)
        if (held->layers[l]) rc = fwd_set_attn(f, l, held->layers[l]);
    double eps = rc == AL_OK ? xf_norm_eps(x) : 0;
    if (eps > 0) {                     /* the model as its export computes it */
        fwd_set_norm_eps(f, eps);
        held->eps_set = true;
    }
    if (rc != AL_OK) xform_attn_clear(f, held);
    return rc;
}

/* Whether command line a is superseded by b: both begin with the same n words (n > 0). */
static bool superseded(const char *a, const char *b, int n) {
    if (n <= 0) return false;
    for (int w = 0; w < n; w++) {
        while (*a == ' ') a++;
        while (*b == ' ') b++;
        size_t la = strcspn(a, " "), lb = strcspn(b, " ");
        if (!la || la != lb || strncmp(a, b, la)) return false;
        a += la;
        b += lb;
    }
    return true;
}

/* The command lines that made x, for headlines: its own, or for a kind whose state is the replay of
 * its stack (replays: the FaRR working copy holds the latest VO and QK truncations) the stack's,
 * oldest first, joined with "; " (in buf, cap bytes). */
static const char *xform_made_by(const Xform *x, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    if (!x->kind->replays) return x->cmd && *x->cmd ? x->cmd : x->kind->name;
    for (size_t i = 0; xform_stack_cmd(x, i) && k + 1 < cap; i++) {   /* the state is the stack's replay */
        const char *c = xform_stack_cmd(x, i);
        bool later = false;                /* a later command of the stack replaced what this one made */
        for (size_t j = i + 1; xform_stack_cmd(x, j) && !later; j++)
            later = superseded(c, xform_stack_cmd(x, j), x->kind->supersede_words);
        if (later) continue;
        int w = snprintf(buf + k, cap - k, "%s%s", k ? "; " : "", c);
        k += w > 0 ? (size_t)w : 0;
    }
    return buf[0] ? buf : x->kind->name;
}

/* Whether x can be measured by the verb: run in the forward pass, or (check) checked. */
static bool measurable(const Xform *x, bool check) { return check ? x->kind->check != NULL : x->kind->attn_layer != NULL; }

const Xform *xform_measured(Session *s, Model *m, bool source, bool check, const char *verb, char *headline,
                            size_t cap) {
    char made[512], passed[512] = "";
    const Xform *x = NULL;
    for (const Xform *y = source ? NULL : xform_list(s); y && !x; y = y->next) {
        if (y->src != m) continue;
        if (measurable(y, check)) { x = y; break; }
        size_t k = strlen(passed);      /* newer ones it cannot measure: named, never measured silently */
        snprintf(passed + k, sizeof passed - k, "%s%s (%s)", k ? "; " : "", y->cmd && *y->cmd ? y->cmd : y->kind->name,
                 y->kind->no_attn ? y->kind->no_attn : "nothing to run");
    }
    size_t k = 0;
    if (x)
        k = (size_t)snprintf(headline, cap, "%s of %s with %s (%s%s)", verb, m->name, xform_made_by(x, made, sizeof made),
                             x->kind->attn_what ? x->kind->attn_what : x->kind->name,
                             check ? "" : "; `source` measures the loaded model");
    else
        k = (size_t)snprintf(headline, cap, "%s of %s (the loaded model%s)", verb, m->name,
                             source ? ", as asked with `source`" : passed[0] ? "" : "; it has no transformation");
    const char *mn = x && !check && x->kind->mode_note ? x->kind->mode_note(s, x) : NULL;
    if (mn && k < cap) k += (size_t)snprintf(headline + k, cap - k, "\n%s", mn);
    if (passed[0] && k < cap)
        snprintf(headline + k, cap - k, "\nnewer, not %s here: %s", check ? "checkable" : "run", passed);
    return x;
}

/* One pass over the weights for both (fwd_ppl_pair: each layer runs the source's stream, then the one with x's
 * layers swapped in and its norm eps), the numbers of fwd_ppl before and after xform_attn_set bit for bit. Every
 * kind that runs as attention layers fits the pair's streams: what a kind changes is its layers (attn_layer) and
 * the norms' eps (norm_eps), all a stream carries. Where the pass cannot run layer-major (KV-shared layers,
 * per-layer inputs, ...: fwd_layer_major_refusal), fwd_ppl_pair runs the two passes one after the other. */
int xform_ppl_pair(Session *s, const Xform *x, Forward *f, const int *ids, size_t n, size_t L, FwdPpl *before,
                   FwdPpl *after) {
    XformAttn held;
    fwd_clear_attn(f);
    int rc = xf_attn_build(s, x, &held);
    if (rc == AL_OK) rc = fwd_ppl_pair(f, held.layers, xf_norm_eps(x), ids, n, L, before, after);
    xform_attn_clear(NULL, &held);
    return rc;
}
