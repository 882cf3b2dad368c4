/* farr_groups.c -- the group ranks `truncate` keeps on a GQA model, for `ranks` (farr_groups.h). */
#define _GNU_SOURCE
#include "farr_groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"

bool farr_groups_shared(const Model *m) {
    return !cfg_is_mla(&m->cfg) && m->cfg.n_kv_heads > 0 && m->cfg.n_kv_heads < m->cfg.n_heads;
}

void farr_groups_note(Out *out, const Model *m, farr_kind kind, double tau) {
    if (!farr_groups_shared(m)) return;
    const char *k = farr_kind_name(kind);
    out_printf(out, "(GQA: %d KV head%s, %d query head%s each; `truncate %s tau %g` ranks each KV head's group, its %d "
               "heads' fused maps stacked, not each head -- at least its heads' largest rank above: `ranks %s ... groups` "
               "gives the group ranks it keeps)\n", m->cfg.n_kv_heads, al_s(m->cfg.n_kv_heads), m->cfg.n_heads / m->cfg.n_kv_heads, al_s(m->cfg.n_heads / m->cfg.n_kv_heads), k, tau,
               m->cfg.n_heads / m->cfg.n_kv_heads, k);
}

/* "0-1" or "0, 4" of the query heads of layer tl's group g (as farr_plan_head maps them) into buf. */
static const char *group_heads(const ModelConfig *c, const FarrTruncLayer *tl, int g, char *buf, size_t cap) {
    size_t n = 0;
    int first = -1, last = -1;
    *buf = 0;
    for (int h = 0; h <= tl->n_heads; h++) {
        bool in = h < tl->n_heads && cfg_kv_group(c, h) == g;
        if (in && first >= 0 && h == last + 1) { last = h; continue; }
        if (first >= 0 && n < cap) n += (size_t)snprintf(buf + n, cap - n, "%s%d", n ? ", " : "", first);
        if (first >= 0 && first < last && n < cap) n += (size_t)snprintf(buf + n, cap - n, "-%d", last);
        first = in ? h : -1, last = h;
    }
    return buf;
}

int farr_groups_ranks(Model *m, farr_kind kind, double tau, int lo, int hi, const Args *a, Out *out) {
    FarrTruncOpts o = {.kind = kind, .tau = tau, .policy = FARR_POLICY_HEAD, .layer_lo = lo, .layer_hi = hi};
    FarrPlan *p;
    if (farr_truncate(m, &o, &p)) return AL_ERR;
    char col[24], heads[256];
    snprintf(col, sizeof col, "rank_%s", farr_kind_name(kind));
    Table *t = table_new(4, "layer", "kv_head", "query_heads", col);
    for (int L = p->lo; t && L <= p->hi; L++) {
        const FarrTruncLayer *tl = farr_plan_layer(p, L);
        for (int g = 0; tl && g < tl->n_kv; g++) {
            if (table_row(t)) { table_free(t); t = NULL; break; }
            table_int(t, L); table_int(t, g);
            table_str(t, group_heads(&m->cfg, tl, g, heads, sizeof heads));
            table_int(t, tl->groups[g]->rank_tau);
        }
    }
    farr_plan_free(p);
    if (!t) return AL_ERR;
    if (out_narrates(out))
        out_printf(out, "%s: %s ranks at tau %g of each KV head's group (its query heads' fused maps stacked): the ranks "
                   "`truncate %s tau %g` keeps (policy head)\n", m->name, farr_fused_name(kind), tau,
                   farr_kind_name(kind), tau);
    return out_table_to(out, args_str(a, "to"), t);
}
