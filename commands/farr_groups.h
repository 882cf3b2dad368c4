/* farr_groups.h -- what `truncate` ranks on a GQA model, said where `ranks` shows per-head ranks: the
 * stacked fused maps of each KV head's group of query heads (KQ-SVD Theorem 5), whose rank at tau keeps
 * tau of every head's energy and so is at least the largest of its heads' ranks. `ranks ... groups`
 * gives those group ranks (core farr_truncate's, policy head: the ranks `truncate ... tau T` keeps);
 * the note line under `ranks`' head table points there. */
#ifndef AL_FARR_GROUPS_H
#define AL_FARR_GROUPS_H

#include "farr.h"
#include "out.h"
#include "registry.h"

/* Whether m's layers share K / V heads among query heads (GQA / MQA; not MHA, not MLA). */
bool farr_groups_shared(const Model *m);
/* The line under `ranks`' table on such a model: truncate ranks the stacked group, and how to see its ranks. */
void farr_groups_note(Out *out, const Model *m, farr_kind kind, double tau);
/* `ranks ... groups`: one row per layer and KV head of layers lo..hi -- layer, kv_head, query_heads, rank_<pair>
 * (the group's rank at tau: what `truncate <pair> tau T` keeps with policy head) -- to the terminal or `to FILE`. */
int farr_groups_ranks(Model *m, farr_kind kind, double tau, int lo, int hi, const Args *a, Out *out);

#endif
