/* xform.c -- the session's transformations (xform.h): a list, newest first, kept in the
 * workspace; replaced per kind and source, dropped with their source model. */
#include "xform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workspace.h"

typedef struct {
    Xform *head;
} XformList;

static void xf_free(Xform *x) {
    if (x->kind->free) x->kind->free(x->data);
    free(x);
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
    for (Xform **q = &l->head; *q;) {
        Xform *o = *q;
        if (o->kind == k && o->src == src) { *q = o->next; xf_free(o); }
        else q = &o->next;
    }
    *x = (Xform){.kind = k, .src = src, .data = data, .next = l->head};
    l->head = x;
    return AL_OK;
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
