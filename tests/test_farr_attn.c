/* test_farr_attn.c -- the FaRR working copy as the forward pass runs it (farr_attn_layer, core/analysis/farr.h):
 * in the truncated layer every head's fused map of the folded dense weights is the plan's
 * truncated map -- the projection onto the kept shared basis U: VO  U Uᵀ W_V W_O, QK  W_Q W_Kᵀ U Uᵀ --
 * on GQA (demo-llama), GPT-2 with biases (demo-gpt2) and MLA (demo-r1, FP8); layers outside the
 * plan give NULL; at full rank the layer computes the source's attention outputs (biases moved as
 * the plan says). */
#include "testutil.h"
#include "farr.h"
#include "attn_eval.h"

static const char *tmp_root;

/* The fused map of query head h in L: VO W_V[g] W_O[h] (MLA: W_KVB's v columns), QK W_Q[h] W_K[g]ᵀ
 * over the part FaRR fuses (MLA and partial rotary: the NoPE columns). */
static Mat *fused(const AttnLayer *L, const ModelConfig *c, farr_kind k, int h) {
    bool mla = L->kind == ATTN_MLA;
    size_t g = (size_t)cfg_kv_group(c, h), dv = (size_t)c->v_dim, d = (size_t)cfg_d_qk(c);
    size_t kvrow = (size_t)(c->qk_nope_dim + c->v_dim), nope = (size_t)c->qk_nope_dim;
    Mat *A, *B;
    if (k == FARR_VO) {
        A = mla ? mat_slice(L->W_KVB, 0, L->W_KVB->rows, g * kvrow + nope, dv) : mat_slice(L->W_V, 0, L->W_V->rows, g * dv, dv);
        B = mat_slice(L->W_O, (size_t)h * dv, dv, 0, L->W_O->cols);
    } else {
        bool part = mla || (c->qk_nope_dim > 0 && c->qk_rope_dim > 0);
        size_t off = mla ? 0 : part ? (size_t)cfg_nope_col(c) : 0, w = part ? nope : d;
        const Mat *Wq = L->W_QB ? L->W_QB : L->W_Q, *Wk = mla ? L->W_KVB : L->W_K;
        A = mat_slice(Wq, 0, Wq->rows, (size_t)h * d + off, w);
        B = mat_slice_t(Wk, 0, Wk->rows, g * (mla ? kvrow : d) + off, w);
    }
    Mat *M = A && B ? mat_mul(A, B) : NULL;
    mat_free(A);
    mat_free(B);
    return M;
}

/* U Uᵀ for the group's kept basis U (m x r). */
static Mat *projector(const Mat *U) {
    Mat *Ut = mat_transpose(U);
    Mat *P = Ut ? mat_mul(U, Ut) : NULL;
    mat_free(Ut);
    return P;
}

/* Truncates `kind` of layer 1 of demo `name` at rank r and checks layer 1's folded maps, and that
 * layers 0 and 2 are left alone. */
static void check_fold(const char *name, farr_kind kind, int r) {
    Model *m = tu_open_synth(tmp_root, name, SYNTH_DEFAULT_SEED);
    if (!m) return;
    const ModelConfig *c = &m->cfg;
    FarrTruncOpts o = {.kind = kind, .by_rank = true, .rank = r, .policy = FARR_POLICY_HEAD, .layer_lo = 1, .layer_hi = 1};
    FarrPlan *p = NULL;
    AttnLayer *S = NULL, *W = NULL, *none = NULL;
    CHECK_OK(farr_truncate(m, &o, &p));
    CHECK_OK(attn_layer_load(m, 1, &S));
    CHECK_OK(farr_attn_layer(m, kind == FARR_VO ? p : NULL, kind == FARR_QK ? p : NULL, 1, &W));
    CHECK_OK(farr_attn_layer(m, kind == FARR_VO ? p : NULL, kind == FARR_QK ? p : NULL, 0, &none));
    CHECK(none == NULL, "%s: layer 0 is outside the plan but came back changed", name);
    double worst = 0, moved = 0;
    for (int h = 0; p && S && W && h < c->n_heads; h++) {
        int idx;
        const FarrGroup *g = farr_plan_head(p, c, 1, h, &idx);
        Mat *M = fused(S, c, kind, h), *M2 = fused(W, c, kind, h), *P = projector(g->shared);
        Mat *want = kind == FARR_VO ? mat_mul(P, M) : mat_mul(M, P);
        double e = vec_rel_err(want->data, M2->data, want->rows * want->cols);
        double ch = vec_rel_err(M->data, M2->data, M->rows * M->cols);
        worst = e > worst ? e : worst;
        moved = ch > moved ? ch : moved;
        mat_free(M); mat_free(M2); mat_free(P); mat_free(want);
    }
    CHECK(worst < 1e-4, "%s %s rank %d: folded fused maps differ from the plan's by %.3g", name, farr_kind_name(kind), r, worst);
    CHECK(moved > 1e-2, "%s %s rank %d: the folded maps are the source's (%.3g): the test cannot tell", name,
          farr_kind_name(kind), r, moved);
    attn_layer_free(S);
    attn_layer_free(W);
    farr_plan_free(p);
    model_free(m);
}

/* At full rank the folded layer computes the source's attention outputs (VO: b_V moved into the
 * output bias; QK: b_K' = 0 shifts each query's scores by a constant, which the softmax drops). */
static void check_full_rank(const char *name, farr_kind kind) {
    Model *m = tu_open_synth(tmp_root, name, SYNTH_DEFAULT_SEED);
    if (!m) return;
    int full = kind == FARR_VO ? m->cfg.v_dim : cfg_is_mla(&m->cfg) ? m->cfg.qk_nope_dim : cfg_d_qk(&m->cfg);
    FarrTruncOpts o = {.kind = kind, .by_rank = true, .rank = full, .policy = FARR_POLICY_HEAD, .layer_lo = 0, .layer_hi = 0};
    FarrPlan *p = NULL;
    AttnLayer *S = NULL, *W = NULL;
    AttnOut *y = NULL, *y2 = NULL;
    Mat *X = attn_random_input(24, m->cfg.hidden, 7);
    int pos[24];
    for (int i = 0; i < 24; i++) pos[i] = i;
    CHECK_OK(farr_truncate(m, &o, &p));
    CHECK_OK(attn_layer_load(m, 0, &S));
    CHECK_OK(farr_attn_layer(m, kind == FARR_VO ? p : NULL, kind == FARR_QK ? p : NULL, 0, &W));
    if (S && W) {
        CHECK_OK(attn_eval(S, X, pos, false, &y));
        CHECK_OK(attn_eval(W, X, pos, false, &y2));
        double se, oe;
        if (y && y2) {
            attn_rel_err(y, y2, &se, &oe);
            CHECK(oe < 1e-4, "%s %s full rank: output error %.3g", name, farr_kind_name(kind), oe);
        }
    }
    attn_out_free(y);
    attn_out_free(y2);
    mat_free(X);
    attn_layer_free(S);
    attn_layer_free(W);
    farr_plan_free(p);
    model_free(m);
}

int main(void) {
    tmp_root = test_tmpdir();
    check_fold("demo-llama", FARR_VO, 3);
    check_fold("demo-gpt2", FARR_VO, 3);
    check_fold("demo-gpt2", FARR_QK, 2);
    check_fold("demo-r1", FARR_VO, 4);
    check_fold("demo-r1", FARR_QK, 4);
    check_full_rank("demo-llama", FARR_VO);
    check_full_rank("demo-gpt2", FARR_VO);
    check_full_rank("demo-gpt2", FARR_QK);
    check_full_rank("demo-r1", FARR_VO);
    return check_done();
}
