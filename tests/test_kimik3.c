/* test_kimik3.c -- Kimi-K3 (core/model/kimik3.c, its row in family.c): on `synth family kimi_k3` (the release config
 * shrunk, the text tower under language_model.model.), the MLA layers' per-head maps against the products formed by
 * hand from the stored tensors: W_V[h] = kv_b_proj's value rows of head h (transposed), W_O[h] = o_proj's columns of
 * head h (transposed), W_Q[h] = q_b_proj's NoPE rows of head h, W_K[h] = kv_b_proj's key rows of head h; the fused
 * VO and QK singular values (farr_fuse) equal a dense LAPACK SVD of those products, and not that of a product whose
 * kv_b_proj's [k_nope | v] halves are swapped. The KDA layers have no heads; the forward pass is refused naming what is not built. */
#include "check.h"
#include "config.h"
#include "farr.h"
#include "forward.h"
#include "model.h"
#include "synth.h"
#include "svd_check.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Stored tensor of role r in layer L as doubles (rows x cols); NULL on failure. */
static double *role_d(Model *m, tensor_role r, int L, size_t *rows, size_t *cols) {
    char name[192];
    return cfg_role_name(&m->cfg, r, L, -1, "weight", name, sizeof name) ? stored_d(m, name, rows, cols) : NULL;
}

typedef struct {
    Model *m;
    int L;
    size_t D, kvl, ql, np, rd, vd, H;
    double *kvb, *qb, *o;     /* kv_b (H (np + vd), kvl), q_b (H (np + rd), ql), o_proj (D, H vd) */
} Layer;

/* W_V[h] W_O[h] formed by hand (kvl x D): kv_b's value rows of head h (after its np key rows), transposed, times
 * o_proj's columns of head h, transposed; swap reads the key rows as the values (kv_b's [k_nope | v] halves
 * swapped, the mistake the test must see). */
static double *vo_by_hand(const Layer *l, size_t h, bool swap) {
    double *P = calloc(l->kvl * l->D, sizeof *P);
    size_t off = swap ? 0 : l->np;
    for (size_t x = 0; x < l->kvl; x++)
        for (size_t a = 0; a < l->vd; a++) {
            double v = l->kvb[(h * (l->np + l->vd) + off + a) * l->kvl + x];
            for (size_t d = 0; d < l->D; d++) P[x * l->D + d] += v * l->o[d * l->H * l->vd + h * l->vd + a];
        }
    return P;
}

/* W_Q[h] W_K[h]ᵀ over the NoPE dims formed by hand (ql x kvl); swap reads kv_b's value rows as the keys. */
static double *qk_by_hand(const Layer *l, size_t h, bool swap) {
    double *P = calloc(l->ql * l->kvl, sizeof *P);
    size_t off = swap ? l->np : 0;
    for (size_t i = 0; i < l->ql; i++)
        for (size_t k = 0; k < l->np; k++) {
            double q = l->qb[(h * (l->np + l->rd) + k) * l->ql + i];
            for (size_t x = 0; x < l->kvl; x++)
                P[i * l->kvl + x] += q * l->kvb[(h * (l->np + l->vd) + off + k) * l->kvl + x];
        }
    return P;
}

/* One head's fused spectrum against the dense SVD of its product, and against the product with kv_b's halves swapped
 * (which must differ: the test sees which rows are read). */
static void check_head(const Layer *l, farr_kind kind, size_t h) {
    FarrFused *f = NULL;
    CHECK_OK(farr_fuse(l->m, kind, l->L, (int)h, FARR_NO_OFFSET, &f));
    if (!f) return;
    bool vo = kind == FARR_VO;
    size_t rows = vo ? l->kvl : l->ql, cols = vo ? l->D : l->kvl, p = f->s->p;
    double *good = vo ? vo_by_hand(l, h, false) : qk_by_hand(l, h, false);
    double *bad = vo ? vo_by_hand(l, h, true) : qk_by_hand(l, h, true);
    double sg[256], sb[256];
    CHECK(p <= 256 && p <= (rows < cols ? rows : cols), "layer %d head %zu: %zu singular values", l->L, h, p);
    CHECK_OK(svd_values(good, rows, cols, sg));
    CHECK_OK(svd_values(bad, rows, cols, sb));
    double d = spectrum_diff(sg, f->s->sigma, p);
    CHECK(d <= 1e-5, "layer %d head %zu %s: fused sigma vs the dense SVD of the product: rel %.2g", l->L, h,
          farr_kind_name(kind), d);
    CHECK(spectrum_diff(sb, f->s->sigma, p) > 1e-3, "layer %d head %zu %s: kv_b's halves swapped give the same spectrum "
          "(the test cannot see which rows are read)", l->L, h, farr_kind_name(kind));
    free(good); free(bad);
    farr_fused_free(f);
}

static void synth_maps(void) {
    char *dir = al_asprintf("%s/kimik3", test_tmpdir());
    CHECK_OK(synth_family_write("kimi_k3", DT_F32, 42, dir));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    if (!m) { free(dir); return; }
    const ModelConfig *c = &m->cfg;
    CHECK(cfg_is_mla(c) && c->n_heads == 4 && c->q_lora_rank == 64 && c->kv_lora_rank == 64 && c->qk_nope_dim == 32 &&
          c->v_dim == 32 && c->rope == ROPE_NONE && c->lin.n_linear == 6 && !cfg_layer_linear(c, 3) &&
          !cfg_layer_linear(c, 7) && cfg_layer_linear(c, 0), "recipe: MLA of 4 heads on layers 3, 7, KDA on the others");
    for (int L = 3; L <= 7; L += 4) {
        Layer l = {.m = m, .L = L, .D = (size_t)c->hidden, .kvl = (size_t)c->kv_lora_rank, .ql = (size_t)c->q_lora_rank,
                   .np = (size_t)c->qk_nope_dim, .rd = (size_t)c->qk_rope_dim, .vd = (size_t)c->v_dim,
                   .H = (size_t)c->n_heads};
        size_t r, k;
        l.kvb = role_d(m, ROLE_KV_B, L, &r, &k);
        CHECK(l.kvb && r == l.H * (l.np + l.vd) && k == l.kvl, "kv_b_proj is [%zu, %zu]", r, k);
        l.qb = role_d(m, ROLE_Q_B, L, &r, &k);
        CHECK(l.qb && r == l.H * (l.np + l.rd) && k == l.ql, "q_b_proj is [%zu, %zu]", r, k);
        l.o = role_d(m, ROLE_O, L, &r, &k);
        if (l.kvb && l.qb && l.o)
            for (size_t h = 0; h < l.H; h++) {
                check_head(&l, FARR_VO, h);
                check_head(&l, FARR_QK, h);
            }
        free(l.kvb); free(l.qb); free(l.o);
    }
    FarrFused *f = NULL;
    CHECK_ERR(farr_fuse(m, FARR_VO, 2, 0, FARR_NO_OFFSET, &f), "Kimi Delta Attention");
    Forward *fw = NULL;
    CHECK(fwd_new(m, NULL, &fw) != AL_OK, "the forward pass of kimi_k3 ran");
    CHECK(strstr(al_errmsg(), "attention residuals") && strstr(al_errmsg(), "latent experts"), "refusal: %s", al_errmsg());
    fwd_free(fw);
    model_free(m);
    free(dir);
}

int main(void) {
    synth_maps();
    return check_done();
}
