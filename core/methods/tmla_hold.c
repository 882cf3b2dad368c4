/* tmla_hold.c -- a converted layer's matrices held as stored (tmla_hold.h): W_O borrowed from the source's
 * o_proj, the rewritten matrices in BF16 in compute bf16, moved into spill mappings (page cache, not anonymous). */
#include "tmla_hold.h"

#include <stdlib.h>
#include <string.h>

/* W_O as a view of m's o_proj of `layer` when it holds the same values; else left as it is. */
static int borrow_o(Model *m, int layer, AttnLayer *L) {
    char name[192];
    WMat w = {0};
    if (!L->W_O || !cfg_role_name(&m->cfg, ROLE_O, layer, -1, "weight", name, sizeof name) || !store_has(m->store, name))
        return AL_OK;
    if (wmat_view(m->store, name, false, &w)) { al_err_clear(); return AL_OK; }
    return attn_layer_hold_same(L, AH_O, &w);
}

int tmla_hold_layer(Model *m, int layer, AttnLayer *L, bool bf16) {
    if (L->kind != ATTN_MLA) return AL_OK;
    int rc = borrow_o(m, layer, L);
    if (rc == AL_OK && bf16) rc = attn_layer_hold_bf16(L, L->q_rank ? AH_QB : AH_Q);
    if (rc == AL_OK && bf16) rc = attn_layer_hold_bf16(L, AH_KVB);
    if (rc == AL_OK && bf16) attn_layer_spill_held(L, L->q_rank ? AH_QB : AH_Q);   /* out of anonymous memory */
    if (rc == AL_OK && bf16) attn_layer_spill_held(L, AH_KVB);
    return rc;
}

bool tmla_held_bf16(AttnLayer *const *layers, int n) {
    static const attn_held rewritten[] = {AH_Q, AH_QB, AH_KVB};
    for (int l = 0; l < n; l++)
        for (size_t i = 0; layers[l] && i < sizeof rewritten / sizeof *rewritten; i++)
            if (layers[l]->held[rewritten[i]] && layers[l]->held[rewritten[i]]->w.dt == DT_BF16) return true;
    return false;
}

bool tmla_hold_bf16_default(const Model *m, mm_compute c) {
    dt_type s = m->cfg.dtype;
    return c == MM_BF16 && s != DT_F32 && s != DT_F16;
}
