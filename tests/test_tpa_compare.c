/* test_tpa_compare.c -- every KV-cache reduction at one budget (core/methods/budget_compare.h): budgets never
 * exceeded, exact rows at the model's own cache (TransMLA too on a one-KV-head layer), planted
 * structure each method must find exactly at its planted budget (FaRR V / K dims with biases,
 * identical KV heads for mean-pooling, head rank for TPA form a), the reasons of the methods that
 * cannot meet a budget, monotone errors along the budget, agreement of the TPA rows with a direct
 * conversion, windows and soft-caps on both sides (exact at the full cache), and the whole-model
 * driver on the synthetic Llama (MLA refused). */
#define TU_SEED_CTR0 5000
#include "testutil.h"
#include "budget_compare.h"
#include "synth.h"
#include "tpa.h"
#include "transmla.h"

static AttnLayer *rand_layer(int H, int G, int d, int dv, int Dm, bool rope, bool bias) {
    AttnLayer *L = attn_layer_new(ATTN_GQA);
    L->hidden = Dm; L->n_heads = H; L->n_kv_heads = G; L->head_dim = d; L->v_dim = dv;
    L->rope = ROPE_HALF;
    L->rope_dim = rope ? d : 0;
    L->inv_freq = rope ? attn_rope_freqs(d, 10000.0) : NULL;
    L->scale = 1 / sqrt((double)d);
    double s = 1 / sqrt((double)Dm);
    L->W_Q = randm(Dm, H * d, 2 * s); L->W_K = randm(Dm, G * d, 2 * s); L->W_V = randm(Dm, G * dv, s);
    L->W_O = randm(H * dv, Dm, s);
    if (bias) { L->b_Q = randv(H * d, 0.3); L->b_K = randv(G * d, 0.3); L->b_V = randv(G * dv, 0.3); L->b_O = randv(Dm, 0.1); }
    return L;
}

/* Inputs shared by the tests: evaluation and fit tokens. */
typedef struct {
    Mat *X, *Xf;
    int pos[48], posf[160];
} Inputs;

static void inputs_init(Inputs *in, int hidden) {
    in->X = attn_random_input(48, hidden, 11);
    in->Xf = attn_random_input(160, hidden, 12);
    for (int t = 0; t < 48; t++) in->pos[t] = t;
    for (int t = 0; t < 160; t++) in->posf[t] = t;
}

static void inputs_free(Inputs *in) {
    mat_free(in->X);
    mat_free(in->Xf);
}

static int run(const AttnLayer *L, size_t B, const Inputs *in, BudgetRow *rows) {
    return budget_layer(L, B, in->X, in->pos, in->Xf, in->posf, NULL, rows);
}

/* Budgets are respected, and the model's own cache gives exact rows. */
static void test_budgets(void) {
    AttnLayer *L = rand_layer(8, 4, 16, 16, 48, true, true);
    Inputs in;
    inputs_init(&in, 48);
    BudgetRow rows[BUDGET_NMETHODS];
    size_t full = attn_layer_kv_values(L);
    size_t budgets[] = {8, 20, 40, 64, 80, 100, 127, 128, 500};
    for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++) {
        CHECK_OK(run(L, budgets[i], &in, rows));
        for (int k = 0; k < BUDGET_NMETHODS; k++) {
            const BudgetRow *r = &rows[k];
            CHECK(r->method == (budget_method)k, "row order");
            if (!r->ok) {
                CHECK(!strncmp(r->setting, "n/a: ", 5) && isnan(r->out_err), "%s at %zu: a reason and no error",
                      budget_method_name(r->method), budgets[i]);
                continue;
            }
            CHECK(r->kv_values <= budgets[i] && r->kv_values <= full, "%s at %zu caches %zu",
                  budget_method_name(r->method), budgets[i], r->kv_values);
            if (budgets[i] >= full && r->method != BUDGET_TRANSMLA)
                CHECK(r->out_err < 1e-5 && r->kv_values == full, "%s exact at the full cache: %.3g",
                      budget_method_name(r->method), r->out_err);
        }
    }
    /* What cannot be met, and why. */
    CHECK_OK(run(L, 40, &in, rows));
    CHECK(!rows[BUDGET_FARR].ok && strstr(rows[BUDGET_FARR].setting, "keys under RoPE stay whole (64 values)"),
          "FaRR below the keys: %s", rows[BUDGET_FARR].setting);
    CHECK(rows[BUDGET_TPA_A].ok && rows[BUDGET_TPA_A].kv_values == 32, "TPA a: 1 + 1 ranks of 16 = 32 <= 40");
    CHECK(rows[BUDGET_MEANPOOL].ok && rows[BUDGET_MEANPOOL].kv_values == 32 && strstr(rows[BUDGET_MEANPOOL].setting, "1 KV head"),
          "mean-pool to one head: %s", rows[BUDGET_MEANPOOL].setting);
    CHECK_OK(run(L, 20, &in, rows));
    CHECK(!rows[BUDGET_MEANPOOL].ok && strstr(rows[BUDGET_MEANPOOL].setting, "one KV head needs 32"), "mean-pool n/a: %s",
          rows[BUDGET_MEANPOOL].setting);
    CHECK(!rows[BUDGET_TPA_A].ok && rows[BUDGET_TPA_B].ok && rows[BUDGET_TPA_B].kv_values == 20, "form b fits 20 (R 3 + 2)");
    CHECK(rows[BUDGET_KQSVD].ok && rows[BUDGET_KQSVD].kv_values == 20 && rows[BUDGET_TRANSMLA].ok, "KQ-SVD and TransMLA fit 20");
    /* At 80: FaRR keeps the 64 key values, r_v = 4 per group. */
    CHECK_OK(run(L, 80, &in, rows));
    CHECK(rows[BUDGET_FARR].ok && rows[BUDGET_FARR].kv_values == 80 && strstr(rows[BUDGET_FARR].setting, "r_v 4"), "FaRR r_v 4: %s",
          rows[BUDGET_FARR].setting);

    /* The TPA row is the conversion at the ranks it names. */
    CHECK_OK(run(L, 64, &in, rows));
    TpaLayer *t = NULL;
    CHECK_OK(tpa_layer_convert(L, TPA_FORM_B, 8, 8, NULL, &t));
    AttnOut *a = NULL, *b = NULL;
    CHECK_OK(attn_eval(L, in.X, in.pos, true, &a));
    if (t) CHECK_OK(tpa_eval(t, in.X, in.pos, true, &b));
    double se = NAN, oe = NAN;
    if (a && b) attn_rel_err(a, b, &se, &oe);
    CHECK(!strcmp(rows[BUDGET_TPA_B].setting, "R_K 8, R_V 8") && fabs(oe - rows[BUDGET_TPA_B].out_err) < 1e-12,
          "TPA b row = direct conversion: %s %.6g vs %.6g", rows[BUDGET_TPA_B].setting, rows[BUDGET_TPA_B].out_err, oe);
    attn_out_free(a);
    attn_out_free(b);
    tpa_layer_free(t);

    /* With an input second moment, the TPA row is the weighted conversion on those inputs. */
    {
        double *S = calloc(48 * 48, sizeof(double));
        for (int i = 0; i < 48; i++) S[i * 48 + i] = i < 6 ? 30.0 : 0.05;
        Mat *Xs = tpa_random_input(48, 48, 77, S);
        CHECK(Xs != NULL, "Gaussian inputs with a second moment");
        CHECK_OK(budget_layer(L, 64, Xs, in.pos, in.Xf, in.posf, S, rows));
        TpaLayer *tw = NULL;
        AttnOut *aw = NULL, *bw = NULL;
        CHECK_OK(tpa_layer_convert(L, TPA_FORM_A, 2, 2, S, &tw));
        CHECK_OK(attn_eval(L, Xs, in.pos, true, &aw));
        if (tw) CHECK_OK(tpa_eval(tw, Xs, in.pos, true, &bw));
        double sw = NAN, ow = NAN;
        if (aw && bw) attn_rel_err(aw, bw, &sw, &ow);
        CHECK(!strcmp(rows[BUDGET_TPA_A].setting, "R_K 2, R_V 2") && fabs(ow - rows[BUDGET_TPA_A].out_err) < 1e-12,
              "weighted TPA a row = direct weighted conversion: %.6g vs %.6g", rows[BUDGET_TPA_A].out_err, ow);
        /* The sample second moment of the drawn tokens follows S (loose: 48 tokens). */
        double big = 0, small = 0;
        for (int t = 0; t < 48; t++) {
            big += Xs->data[t * 48 + 0] * Xs->data[t * 48 + 0];
            small += Xs->data[t * 48 + 40] * Xs->data[t * 48 + 40];
        }
        CHECK(big / 48 > 10 && small / 48 < 0.2, "drawn second moments %.3g %.3g", big / 48, small / 48);
        attn_out_free(aw);
        attn_out_free(bw);
        tpa_layer_free(tw);
        mat_free(Xs);
        free(S);
    }

    /* Monotone in the budget for the nested fits. */
    size_t mono[] = {80, 96, 112, 128};
    double prev[BUDGET_NMETHODS];
    for (int k = 0; k < BUDGET_NMETHODS; k++) prev[k] = INFINITY;
    for (size_t i = 0; i < 4; i++) {
        CHECK_OK(run(L, mono[i], &in, rows));
        budget_method ms[] = {BUDGET_FARR, BUDGET_TPA_A, BUDGET_TPA_B, BUDGET_KQSVD};
        for (int j = 0; j < 4; j++) {
            const BudgetRow *r = &rows[ms[j]];
            CHECK(r->ok && r->out_err <= prev[ms[j]] + 1e-9, "%s at %zu: %.5g after %.5g", budget_method_name(ms[j]), mono[i],
                  r->out_err, prev[ms[j]]);
            prev[ms[j]] = r->out_err;
        }
    }
    inputs_free(&in);
    attn_layer_free(L);
}

/* One KV head, RoPE: TransMLA at the full cache keeps every RoPE dim and every direction: exact. */
static void test_transmla_exact(void) {
    AttnLayer *L = rand_layer(4, 1, 16, 16, 32, true, false);
    Inputs in;
    inputs_init(&in, 32);
    BudgetRow rows[BUDGET_NMETHODS];
    CHECK_OK(run(L, 32, &in, rows));
    CHECK(rows[BUDGET_TRANSMLA].ok && rows[BUDGET_TRANSMLA].out_err < 1e-5 && strstr(rows[BUDGET_TRANSMLA].setting, "FreqFold 1"),
          "TransMLA exact with one KV head: %.3g (%s)", rows[BUDGET_TRANSMLA].out_err, rows[BUDGET_TRANSMLA].setting);
    CHECK_OK(run(L, 24, &in, rows));
    CHECK(rows[BUDGET_TRANSMLA].ok && rows[BUDGET_TRANSMLA].out_err > 1e-4 && rows[BUDGET_TRANSMLA].kv_values == 24,
          "TransMLA below the cache: %.3g", rows[BUDGET_TRANSMLA].out_err);
    inputs_free(&in);
    attn_layer_free(L);
}

/* A sliding window and a soft-cap apply to every method as to the reference: at the full cache
 * every row is exact, TransMLA's too (one KV head), although the window changes the layer's output. */
static void test_window(void) {
    AttnLayer *L = rand_layer(4, 1, 16, 16, 32, true, false);
    Inputs in;
    inputs_init(&in, 32);
    BudgetRow rows[BUDGET_NMETHODS];
    AttnOut *full = NULL, *win = NULL;
    CHECK_OK(attn_eval(L, in.X, in.pos, true, &full));
    for (int soft = 0; soft < 2; soft++) {
        L->window = 5;
        L->softcap = soft ? 2.0 : 0.0;
        if (!win) {
            double se, oe;
            CHECK_OK(attn_eval(L, in.X, in.pos, true, &win));
            attn_rel_err(full, win, &se, &oe);
            CHECK(oe > 0.05, "the window must change the layer's output (%.3g) for this test to mean anything", oe);
        }
        CHECK_OK(run(L, 32, &in, rows));
        for (int k = 0; k < BUDGET_NMETHODS; k++)
            CHECK(rows[k].ok && rows[k].out_err < 1e-5 && rows[k].score_err < 1e-5,
                  "window 5%s: %s exact at the full cache: out %.3g, score %.3g (%s)", soft ? ", soft-cap 2" : "",
                  budget_method_name((budget_method)k), rows[k].out_err, rows[k].score_err, rows[k].setting);
        CHECK_OK(run(L, 24, &in, rows));
        CHECK(rows[BUDGET_TRANSMLA].ok && rows[BUDGET_TRANSMLA].out_err > 1e-4, "TransMLA below the cache: %.3g",
              rows[BUDGET_TRANSMLA].out_err);
    }
    attn_out_free(full);
    attn_out_free(win);
    inputs_free(&in);
    attn_layer_free(L);
}

/* TransMLA's FreqFold is chosen on the fit tokens and its error measured on the evaluation tokens:
 * the row's M has the lowest fit-token error of every M, and its error is that M's on X. */
static void test_transmla_selection(void) {
    AttnLayer *L = rand_layer(4, 2, 16, 16, 32, true, false);
    Inputs in;
    inputs_init(&in, 32);
    BudgetRow rows[BUDGET_NMETHODS];
    size_t B = 40;
    CHECK_OK(run(L, B, &in, rows));
    const BudgetRow *t = &rows[BUDGET_TRANSMLA];
    int R0 = 0, D0 = 0, M0 = 0;
    CHECK(t->ok && sscanf(t->setting, "R %d + D %d (FreqFold %d)", &R0, &D0, &M0) == 3, "TransMLA row: %s", t->setting);
    AttnOut *ref = NULL, *refF = NULL;
    CHECK_OK(attn_eval(L, in.X, in.pos, true, &ref));
    CHECK_OK(attn_eval(L, in.Xf, in.posf, true, &refF));
    double best_fit = INFINITY, chosen_fit = NAN, chosen_x = NAN;
    int nM = 0;
    for (int M = 1; M <= 8; M *= 2, nM++) {    /* d/2 = 8: M = 1, 2, 4, 8 */
        TmlaOpts o = tmla_opts_default();
        o.rope_dim = 16 / M;
        o.kv_rank = (int)B - o.rope_dim;
        o.freqfold = M;
        o.compare_balance = false;
        o.eval_tokens = 4;
        AttnLayer *mla = NULL;
        TmlaLayerReport rep;
        AttnOut *a = NULL, *b = NULL;
        double se, ef, ex;
        CHECK_OK(tmla_convert_layer(L, &o, NULL, &mla, &rep));
        CHECK_OK(attn_eval(mla, in.Xf, in.posf, true, &a));
        CHECK_OK(attn_eval(mla, in.X, in.pos, true, &b));
        attn_rel_err(refF, a, &se, &ef);
        attn_rel_err(ref, b, &se, &ex);
        if (ef < best_fit) best_fit = ef;
        if (M == M0) { chosen_fit = ef; chosen_x = ex; }
        attn_out_free(a);
        attn_out_free(b);
        attn_layer_free(mla);
    }
    CHECK(nM == 4 && chosen_fit == best_fit, "FreqFold %d: fit-token error %.6g, the best %.6g", M0, chosen_fit, best_fit);
    CHECK_NEAR(t->out_err, chosen_x, 1e-9 + 1e-6 * chosen_x);
    CHECK(D0 == 16 / M0 && R0 + D0 == (int)B && t->kv_values == B, "R %d + D %d at B %zu", R0, D0, B);
    attn_out_free(ref);
    attn_out_free(refF);
    inputs_free(&in);
    attn_layer_free(L);
}

/* Planted structure found exactly at the planted budget. */
static void test_planted(void) {
    int H = 4, G = 2, d = 12, Dm = 40;
    size_t nc = (size_t)G * d;
    Inputs in;
    inputs_init(&in, Dm);
    BudgetRow rows[BUDGET_NMETHODS];

    /* No RoPE, biases: each group's W_K and W_V of rank 3; with the bias row rank 4. FaRR at
     * r_k = r_v = 4 (budget G (4 + 4) = 16) is exact, and r 3 is not. */
    AttnLayer *L = rand_layer(H, G, d, d, Dm, false, true);
    for (int g = 0; g < G; g++) {
        Mat *A = randm((size_t)Dm, 3, 0.5), *Bk = randm((size_t)d, 3, 0.5), *Bv = randm((size_t)d, 3, 0.5);
        for (int i = 0; i < Dm; i++)
            for (int e = 0; e < d; e++) {
                double k = 0, v = 0;
                for (int r = 0; r < 3; r++) {
                    k += A->data[i * 3 + r] * Bk->data[e * 3 + r];
                    v += A->data[i * 3 + r] * Bv->data[e * 3 + r];
                }
                L->W_K->data[(size_t)i * nc + (size_t)g * d + e] = (float)k;
                L->W_V->data[(size_t)i * nc + (size_t)g * d + e] = (float)v;
            }
        mat_free(A); mat_free(Bk); mat_free(Bv);
    }
    CHECK_OK(run(L, 16, &in, rows));
    CHECK(rows[BUDGET_FARR].ok && !strcmp(rows[BUDGET_FARR].setting, "r_k 4, r_v 4") && rows[BUDGET_FARR].out_err < 1e-5 &&
              rows[BUDGET_FARR].score_err < 1e-5, "FaRR finds rank 3 + bias: %s %.3g %.3g", rows[BUDGET_FARR].setting,
          rows[BUDGET_FARR].out_err, rows[BUDGET_FARR].score_err);
    CHECK(!rows[BUDGET_TRANSMLA].ok && strstr(rows[BUDGET_TRANSMLA].setting, "no RoPE"), "TransMLA without RoPE: %s",
          rows[BUDGET_TRANSMLA].setting);
    CHECK_OK(run(L, 12, &in, rows));
    CHECK(rows[BUDGET_FARR].ok && !strcmp(rows[BUDGET_FARR].setting, "r_k 3, r_v 3") && rows[BUDGET_FARR].out_err > 1e-4,
          "FaRR below the planted rank: %s %.3g", rows[BUDGET_FARR].setting, rows[BUDGET_FARR].out_err);
    attn_layer_free(L);

    /* Identical KV heads: mean-pooling to one head is exact; KV heads 2 apart in the head space:
     * TPA form a at R = 1 (one head direction) exact too. */
    L = rand_layer(H, G, d, d, Dm, true, true);
    for (int i = 0; i < Dm; i++) {
        memcpy(L->W_K->data + (size_t)i * nc + d, L->W_K->data + (size_t)i * nc, (size_t)d * sizeof(float));
        memcpy(L->W_V->data + (size_t)i * nc + d, L->W_V->data + (size_t)i * nc, (size_t)d * sizeof(float));
    }
    memcpy(L->b_K + d, L->b_K, (size_t)d * sizeof(float));
    memcpy(L->b_V + d, L->b_V, (size_t)d * sizeof(float));
    CHECK_OK(run(L, 24, &in, rows));
    CHECK(rows[BUDGET_MEANPOOL].ok && rows[BUDGET_MEANPOOL].kv_values == 24 && rows[BUDGET_MEANPOOL].out_err < 1e-5,
          "mean-pool of identical heads: %.3g", rows[BUDGET_MEANPOOL].out_err);
    CHECK(rows[BUDGET_TPA_A].ok && rows[BUDGET_TPA_A].kv_values == 24 && rows[BUDGET_TPA_A].out_err < 1e-5,
          "TPA a at R 1 on identical heads: %.3g", rows[BUDGET_TPA_A].out_err);
    /* TransMLA merges identical KV heads exactly at R + D = 24, with the biases (their NoPE keys
     * carry no energy: balancing must leave them alone) and without. */
    CHECK(rows[BUDGET_TRANSMLA].ok && rows[BUDGET_TRANSMLA].out_err < 1e-5,
          "TransMLA with biases merges identical KV heads exactly at R + D = 24: %.3g (%s)",
          rows[BUDGET_TRANSMLA].out_err, rows[BUDGET_TRANSMLA].setting);
    free(L->b_Q); free(L->b_K); free(L->b_V); free(L->b_O);
    L->b_Q = L->b_K = L->b_V = L->b_O = NULL;
    CHECK_OK(run(L, 24, &in, rows));
    CHECK(rows[BUDGET_TRANSMLA].ok && rows[BUDGET_TRANSMLA].out_err < 1e-5,
          "TransMLA merges identical KV heads exactly at R + D = 24: %.3g (%s)", rows[BUDGET_TRANSMLA].out_err,
          rows[BUDGET_TRANSMLA].setting);
    attn_layer_free(L);
    inputs_free(&in);
}

static void test_model(const char *tmp) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/demo-llama", tmp);
    SynthOptions so = {.kind = SYNTH_DEMO_LLAMA, .dtype = DT_BF16, .shards = 1, .seed = 3};
    CHECK_OK(synth_write(&so, dir));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    if (m) {
        BudgetOpts o = budget_opts_default();
        o.budget = 96;
        o.layer_lo = 1;
        o.layer_hi = 2;
        o.tokens = 24;
        o.fit_tokens = 96;
        BudgetResult *r = NULL;
        CHECK_OK(budget_compare(m, &o, &r));
        if (r) {
            CHECK(r->n_rows == 2 * BUDGET_NMETHODS && r->kv_model == 128 && r->budget == 96, "rows %d", r->n_rows);
            CHECK(r->rows[0].layer == 1 && r->rows[BUDGET_NMETHODS].layer == 2, "layers");
            /* Layer 1 plants V[0] of rank 6: FaRR with r_v 16 loses nothing of group 0's values. */
            CHECK(r->rows[0].ok && !strcmp(r->rows[0].setting, "r_v 16 (keys whole under RoPE)"), "FaRR: %s",
                  r->rows[0].setting);
            budget_result_free(r);
        }
        o.budget = 0;
        CHECK_ERR(budget_compare(m, &o, &r), "kv-budget must be at least 1");
        model_free(m);
    }
    snprintf(dir, sizeof dir, "%s/demo-r1", tmp);
    SynthOptions sr = {.kind = SYNTH_DEMO_R1, .dtype = DT_BF16, .shards = 1, .seed = 3};
    CHECK_OK(synth_write(&sr, dir));
    if (model_open(dir, &m) == AL_OK) {
        BudgetOpts o = budget_opts_default();
        o.budget = 64;
        BudgetResult *r = NULL;
        CHECK_ERR(budget_compare(m, &o, &r), "is MLA");
        model_free(m);
    }
}

int main(void) {
    const char *tmp = test_tmpdir();
    test_budgets();
    test_transmla_exact();
    test_window();
    test_planted();
    test_transmla_selection();
    test_model(tmp);
    return check_done();
}
