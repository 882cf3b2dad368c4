/* test_attn_eval.c -- the one-layer attention evaluator against a plain double-precision
 * reference written from the formulas (GQA with rotate_half and interleaved RoPE, Qwen2-style
 * biases; partial rotary, Q/K norms per head and over the projection (1 + w too), soft-cap, sliding
 * window; MLA with a query latent, latent RMSNorm, biases and DeepSeek's de-interleaved RoPE), and
 * on the real stories260K in both layouts (HF rotate_half vs llama2.c interleaved: same outputs). */
#include "check.h"
#include "attn_eval.h"

static uint64_t rs = 12345;
static double nrand(void) {
    Mat *x = attn_random_input(1, 1, rs++);
    double v = x->data[0];
    mat_free(x);
    return v;
}

static Mat *randm(size_t r, size_t c, double sc) {
    Mat *m = mat_new(r, c);
    for (size_t i = 0; i < r * c; i++) m->data[i] = (float)(sc * nrand());
    return m;
}

static float *randv(size_t n, double sc) {
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = (float)(sc * nrand());
    return v;
}

/* ---------------------------------------------------------------- reference */

static double dot_col(const Mat *X, size_t t, const Mat *W, size_t col, const float *b) {
    double s = b ? b[col] : 0;
    for (size_t k = 0; k < X->cols; k++) s += (double)X->data[t * X->cols + k] * W->data[k * W->cols + col];
    return s;
}

/* Rotates pairs (a_j, b_j) of v (dim values) by pos * inv_freq[j]. */
static void ref_rope(double *v, int dim, bool interleaved, const double *f, int pos) {
    for (int j = 0; j < dim / 2; j++) {
        int a = interleaved ? 2 * j : j, b = interleaved ? 2 * j + 1 : j + dim / 2;
        double c = cos(pos * f[j]), s = sin(pos * f[j]), x = v[a], y = v[b];
        v[a] = x * c - y * s;
        v[b] = y * c + x * s;
    }
}

/* Attention of per-head q (T, H, dq), k (T, H, dq), v (T, H, dv) -> outputs through W_O, and the
 * logits (H, T, T). */
static Mat *ref_attend(const AttnLayer *L, size_t T, size_t H, size_t dq, size_t dv, const double *q, const double *k,
                       const double *v, float *logits) {
    double *o = calloc(T * H * dv, sizeof(double)), *p = malloc(T * sizeof(double));
    for (size_t h = 0; h < H; h++)
        for (size_t i = 0; i < T; i++) {
            double mx = -1e300, sum = 0;
            size_t j0 = L->window && i >= L->window ? i - L->window + 1 : 0;     /* keys i - j < window */
            for (size_t j = j0; j <= i; j++) {
                double s = 0;
                for (size_t e = 0; e < dq; e++) s += q[(i * H + h) * dq + e] * k[(j * H + h) * dq + e];
                p[j] = s * L->scale;
                logits[h * T * T + i * T + j] = (float)p[j];
                if (L->softcap > 0) p[j] = L->softcap * tanh(p[j] / L->softcap);
                if (p[j] > mx) mx = p[j];
            }
            for (size_t j = j0; j <= i; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
            for (size_t j = j0; j <= i; j++)
                for (size_t e = 0; e < dv; e++) o[(i * H + h) * dv + e] += p[j] / sum * v[(j * H + h) * dv + e];
        }
    Mat *Y = mat_new(T, (size_t)L->hidden);
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < (size_t)L->hidden; c++) {
            double s = L->b_O ? L->b_O[c] : 0;
            for (size_t e = 0; e < H * dv; e++) s += o[t * H * dv + e] * L->W_O->data[e * L->hidden + c];
            Y->data[t * L->hidden + c] = (float)s;
        }
    free(o);
    free(p);
    return Y;
}

static void ref_rms_d(double *x, size_t n, const double *w, double eps) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1 / sqrt(ss / n + eps);
    for (size_t i = 0; i < n; i++) x[i] *= r * w[i];
}

static Mat *ref_gqa(const AttnLayer *L, const Mat *X, const int *pos, float *logits) {
    size_t T = X->rows, H = L->n_heads, G = L->n_kv_heads, d = L->head_dim, dv = L->v_dim;
    double *q = malloc(T * H * d * sizeof(double)), *k = malloc(T * H * d * sizeof(double));
    double *v = malloc(T * H * dv * sizeof(double));
    for (size_t t = 0; t < T; t++)
        for (size_t h = 0; h < H; h++) {
            size_t g = h / (H / G);
            for (size_t e = 0; e < d; e++) {
                q[(t * H + h) * d + e] = dot_col(X, t, L->W_Q, h * d + e, L->b_Q);
                k[(t * H + h) * d + e] = dot_col(X, t, L->W_K, g * d + e, L->b_K);
            }
            for (size_t e = 0; e < dv; e++) v[(t * H + h) * dv + e] = dot_col(X, t, L->W_V, g * dv + e, L->b_V);
        }
    /* Q/K norms: per head, or over the whole projection (the K projection has G heads) */
    for (size_t t = 0; t < T && L->qk_norm != QKN_NONE; t++) {
        double qa[512], ka[512], wq[512], wk[512];
        size_t nq = L->qk_norm == QKN_PROJ ? H : 1, nk = L->qk_norm == QKN_PROJ ? G : 1;
        for (size_t part = 0; part < H / nq; part++) {
            for (size_t e = 0; e < nq * d; e++) qa[e] = q[(t * H + part * nq) * d + e];
            for (size_t e = 0; e < nq * d; e++) wq[e] = L->norm_1p ? 1.0 + L->q_norm[e] : L->q_norm[e];
            ref_rms_d(qa, nq * d, wq, L->norm_eps);
            for (size_t e = 0; e < nq * d; e++) q[(t * H + part * nq) * d + e] = qa[e];
        }
        for (size_t g = 0; g < G / nk; g++) {          /* the distinct keys: those of query heads h = g' H / G */
            for (size_t e = 0; e < nk * d; e++) ka[e] = dot_col(X, t, L->W_K, g * nk * d + e, L->b_K);
            for (size_t e = 0; e < nk * d; e++) wk[e] = L->norm_1p ? 1.0 + L->k_norm[e] : L->k_norm[e];
            ref_rms_d(ka, nk * d, wk, L->norm_eps);
            for (size_t h = 0; h < H; h++) {
                size_t kv = h / (H / G);
                if (kv / nk != g) continue;
                for (size_t e = 0; e < d; e++) k[(t * H + h) * d + e] = ka[(kv % nk) * d + e];
            }
        }
    }
    for (size_t t = 0; t < T && L->rope_dim > 0; t++)
        for (size_t h = 0; h < H; h++) {        /* partial rotary: the first rope_dim dims of each head */
            ref_rope(q + (t * H + h) * d, L->rope_dim, L->rope == ROPE_INTERLEAVED, L->inv_freq, pos[t]);
            ref_rope(k + (t * H + h) * d, L->rope_dim, L->rope == ROPE_INTERLEAVED, L->inv_freq, pos[t]);
        }
    Mat *Y = ref_attend(L, T, H, d, dv, q, k, v, logits);
    free(q); free(k); free(v);
    return Y;
}

static void ref_rms(double *x, size_t n, const float *w, double eps) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1 / sqrt(ss / n + eps);
    for (size_t i = 0; i < n; i++) x[i] *= r * w[i];
}

/* MLA from the formulas: RoPE applied directly on the stored interleaved pairs (2j, 2j + 1). */
static Mat *ref_mla(const AttnLayer *L, const Mat *X, const int *pos, float *logits) {
    size_t T = X->rows, H = L->n_heads, dn = L->qk_nope, dr = L->rope_dim, dv = L->v_dim, r = L->kv_rank;
    size_t dq = dn + dr, ql = L->q_rank;
    double *q = malloc(T * H * dq * sizeof(double)), *k = malloc(T * H * dq * sizeof(double));
    double *v = malloc(T * H * dv * sizeof(double)), *cq = malloc((ql + 1) * sizeof(double));
    double *kva = malloc((r + dr) * sizeof(double));
    for (size_t t = 0; t < T; t++) {
        for (size_t a = 0; a < ql; a++) cq[a] = dot_col(X, t, L->W_QA, a, L->b_QA);
        if (ql && L->qa_norm) ref_rms(cq, ql, L->qa_norm, L->norm_eps);
        for (size_t a = 0; a < r + dr; a++) kva[a] = dot_col(X, t, L->W_KVA, a, L->b_KVA);
        if (L->kva_norm) ref_rms(kva, r, L->kva_norm, L->norm_eps);
        ref_rope(kva + r, (int)dr, true, L->inv_freq, pos[t]);
        for (size_t h = 0; h < H; h++) {
            for (size_t e = 0; e < dq; e++) {
                double s = L->b_Q ? L->b_Q[h * dq + e] : 0;
                if (ql) for (size_t a = 0; a < ql; a++) s += cq[a] * L->W_QB->data[a * H * dq + h * dq + e];
                else s = dot_col(X, t, L->W_Q, h * dq + e, L->b_Q);
                q[(t * H + h) * dq + e] = s;
            }
            ref_rope(q + (t * H + h) * dq + dn, (int)dr, true, L->inv_freq, pos[t]);
            for (size_t e = 0; e < dn + dv; e++) {
                double s = 0;
                for (size_t a = 0; a < r; a++) s += kva[a] * L->W_KVB->data[a * H * (dn + dv) + h * (dn + dv) + e];
                if (e < dn) k[(t * H + h) * dq + e] = s;
                else v[(t * H + h) * dv + e - dn] = s;
            }
            for (size_t e = 0; e < dr; e++) k[(t * H + h) * dq + dn + e] = kva[r + e];
        }
    }
    Mat *Y = ref_attend(L, T, H, dq, dv, q, k, v, logits);
    free(q); free(k); free(v); free(cq); free(kva);
    return Y;
}

/* ---------------------------------------------------------------- comparisons */

static double rel(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]); den += (double)b[i] * b[i]; }
    return sqrt(num / den);
}

static void check_against_ref(const AttnLayer *L, const char *what) {
    size_t T = 11;
    int pos[11];
    for (size_t t = 0; t < T; t++) pos[t] = (int)(3 + 7 * t);
    Mat *X = attn_random_input(T, L->hidden, 99);
    float *logits = calloc((size_t)L->n_heads * T * T, sizeof(float));
    Mat *Y = L->kind == ATTN_GQA ? ref_gqa(L, X, pos, logits) : ref_mla(L, X, pos, logits);
    AttnOut *o = NULL;
    CHECK_OK(attn_eval(L, X, pos, true, &o));
    if (o) {
        double es = rel(o->scores, logits, (size_t)L->n_heads * T * T), eo = rel(o->out->data, Y->data, T * L->hidden);
        CHECK(es < 1e-5, "%s: scores differ from the reference by %.3g relative", what, es);
        CHECK(eo < 1e-5, "%s: outputs differ from the reference by %.3g relative", what, eo);
        double se, oe;
        attn_rel_err(o, o, &se, &oe);
        CHECK(se == 0 && oe == 0, "%s: self error %g %g", what, se, oe);
    }
    attn_out_free(o);
    mat_free(X);
    mat_free(Y);
    free(logits);
}

static AttnLayer *rand_gqa(int H, int G, int d, int hidden, rope_layout lay, bool bias) {
    AttnLayer *L = attn_layer_new(ATTN_GQA);
    L->hidden = hidden; L->n_heads = H; L->n_kv_heads = G; L->head_dim = d; L->v_dim = d;
    L->rope = lay; L->rope_dim = d; L->inv_freq = attn_rope_freqs(d, 10000.0);
    L->scale = 1 / sqrt((double)d);
    L->W_Q = randm(hidden, H * d, 0.3); L->W_K = randm(hidden, G * d, 0.3); L->W_V = randm(hidden, G * d, 0.3);
    L->W_O = randm(H * d, hidden, 0.3);
    if (bias) { L->b_Q = randv(H * d, 0.5); L->b_K = randv(G * d, 0.5); L->b_V = randv(G * d, 0.5); }
    return L;
}

static AttnLayer *rand_mla(int H, int dn, int dr, int dv, int r, int ql, int hidden, bool norm, bool bias) {
    AttnLayer *L = attn_layer_new(ATTN_MLA);
    L->hidden = hidden; L->n_heads = H; L->qk_nope = dn; L->rope_dim = dr; L->v_dim = dv; L->kv_rank = r; L->q_rank = ql;
    L->inv_freq = attn_rope_freqs(dr, 10000.0);
    L->scale = 1 / sqrt((double)(dn + dr));
    if (ql) {
        L->W_QA = randm(hidden, ql, 0.3); L->W_QB = randm(ql, H * (dn + dr), 0.3);
        if (norm) L->qa_norm = randv(ql, 1.0);
        if (bias) L->b_QA = randv(ql, 0.5);
    } else {
        L->W_Q = randm(hidden, H * (dn + dr), 0.3);
        if (bias) L->b_Q = randv(H * (dn + dr), 0.5);
    }
    L->W_KVA = randm(hidden, r + dr, 0.3); L->W_KVB = randm(r, H * (dn + dv), 0.3); L->W_O = randm(H * dv, hidden, 0.3);
    if (norm) L->kva_norm = randv(r, 1.0);
    if (bias) { L->b_KVA = randv(r + dr, 0.5); L->b_O = randv(hidden, 0.5); }
    return L;
}

/* ---------------------------------------------------------------- real model */

static void test_stories(void) {
    const char *dir = getenv("ATTNLAB_MODELS");
    char hf[4096], bin[4096];
    snprintf(hf, sizeof hf, "%s/stories260K-hf", dir ? dir : "");
    snprintf(bin, sizeof bin, "%s/stories260K/stories260K.bin", dir ? dir : "");
    struct stat sb;
    if (!dir || stat(hf, &sb) || stat(bin, &sb)) { printf("stories260K not found: real-model checks skipped\n"); return; }
    Model *a = NULL, *b = NULL;
    CHECK_OK(model_open(hf, &a));
    CHECK_OK(model_open(bin, &b));
    if (!a || !b) { model_free(a); model_free(b); return; }
    size_t T = 24;
    int pos[24];
    for (size_t t = 0; t < T; t++) pos[t] = (int)(5 * t);
    Mat *X = attn_random_input(T, a->cfg.hidden, 7);
    for (int l = 0; l < a->cfg.n_layers; l++) {
        AttnLayer *La = NULL, *Lb = NULL;
        CHECK_OK(attn_layer_load(a, l, &La));
        CHECK_OK(attn_layer_load(b, l, &Lb));
        if (!La || !Lb) { attn_layer_free(La); attn_layer_free(Lb); continue; }
        CHECK(La->rope == ROPE_HALF && Lb->rope == ROPE_INTERLEAVED, "layouts %d %d", La->rope, Lb->rope);
        CHECK(La->n_kv_heads == 4 && La->n_heads == 8, "stories260K has 8 heads, 4 KV heads");
        if (l == 0) check_against_ref(La, "stories260K-hf layer 0");
        if (l == 0) check_against_ref(Lb, "stories260K.bin layer 0");
        AttnOut *oa = NULL, *ob = NULL;
        CHECK_OK(attn_eval(La, X, pos, true, &oa));
        CHECK_OK(attn_eval(Lb, X, pos, true, &ob));
        if (oa && ob) {
            double se, oe;
            attn_rel_err(oa, ob, &se, &oe);
            CHECK(se < 1e-5 && oe < 1e-5, "layer %d: HF (rotate_half) and llama2.c (interleaved) differ: scores %.3g "
                  "outputs %.3g", l, se, oe);
        }
        attn_out_free(oa);
        attn_out_free(ob);
        attn_layer_free(La);
        attn_layer_free(Lb);
    }
    mat_free(X);
    model_free(a);
    model_free(b);
}

/* The relative error is NaN when an input holds NaN (or the reference Inf): never 0 (issue 14). */
static void test_rel_err_nan(void) {
    float a[3] = {1, 2, 3}, b[3] = {1, 2, 3}, z[3] = {0, 0, 0};
    CHECK(vec_rel_err(a, b, 3) == 0, "equal vectors: 0");
    CHECK(vec_rel_err(z, z, 3) == 0, "both zero: 0");
    CHECK(isinf(vec_rel_err(z, a, 3)), "zero reference: Inf");
    a[1] = NAN;
    CHECK(isnan(vec_rel_err(a, b, 3)), "NaN in the reference: NaN, got %g", vec_rel_err(a, b, 3));
    CHECK(isnan(vec_rel_err(b, a, 3)), "NaN in the other: NaN, got %g", vec_rel_err(b, a, 3));
    a[1] = INFINITY;
    CHECK(isnan(vec_rel_err(a, b, 3)), "Inf in the reference: NaN, got %g", vec_rel_err(a, b, 3));
    CHECK(isnan(vec_rel_err(a, a, 3)), "Inf in both: NaN, got %g", vec_rel_err(a, a, 3));
}

int main(void) {
    AttnLayer *L;
    test_rel_err_nan();
    L = rand_gqa(4, 2, 8, 16, ROPE_HALF, false); check_against_ref(L, "GQA rotate_half"); attn_layer_free(L);
    L = rand_gqa(6, 3, 8, 12, ROPE_INTERLEAVED, false); check_against_ref(L, "GQA interleaved"); attn_layer_free(L);
    L = rand_gqa(4, 1, 6, 10, ROPE_HALF, true); check_against_ref(L, "MQA + Qwen2 biases"); attn_layer_free(L);
    L = rand_gqa(3, 3, 4, 12, ROPE_NONE, true); L->rope_dim = 0; check_against_ref(L, "MHA without RoPE");
    attn_layer_free(L);
    /* the families of issue 12: partial rotary (GPT-NeoX, Phi-3), Q/K norms per head (Qwen3; Gemma 3
     * with 1 + w) and over the whole projection (OLMo 2), soft-capped scores and a sliding window (Gemma 2) */
    L = rand_gqa(4, 4, 8, 16, ROPE_HALF, true); L->rope_dim = 2; free(L->inv_freq); L->inv_freq = attn_rope_freqs(2, 10000.0);
    check_against_ref(L, "partial rotary (2 of 8 dims)"); attn_layer_free(L);
    static const struct { qk_norm_kind k; bool one_p; const char *what; } norms[] = {
        {QKN_HEAD, false, "per-head Q/K norm"}, {QKN_HEAD, true, "per-head Q/K norm (1 + w)"},
        {QKN_PROJ, false, "whole-projection Q/K norm"}};
    for (size_t i = 0; i < 3; i++) {
        L = rand_gqa(4, 2, 6, 12, ROPE_HALF, i == 2);
        L->qk_norm = norms[i].k; L->norm_1p = norms[i].one_p; L->norm_eps = 1e-6;
        L->q_norm = randv(norms[i].k == QKN_PROJ ? 24 : 6, 0.7); L->k_norm = randv(norms[i].k == QKN_PROJ ? 12 : 6, 0.7);
        check_against_ref(L, norms[i].what);
        AttnLayer *C2 = attn_layer_copy(L);
        CHECK(C2 && attn_layer_params(C2) == attn_layer_params(L), "copy keeps the norm weights");
        if (C2) check_against_ref(C2, "copied Q/K-norm layer");
        attn_layer_free(C2);
        attn_layer_free(L);
    }
    L = rand_gqa(4, 2, 8, 16, ROPE_HALF, false); L->softcap = 0.5; L->window = 4;
    for (size_t i = 0; i < (size_t)(16 * 8); i++) L->W_Q->data[i] *= 4;      /* logits past the cap */
    check_against_ref(L, "soft-cap 0.5 and a window of 4 tokens"); attn_layer_free(L);
    L = rand_mla(4, 6, 4, 5, 7, 0, 16, false, false); check_against_ref(L, "MLA plain q_proj"); attn_layer_free(L);
    L = rand_mla(3, 4, 6, 4, 5, 9, 14, true, true); check_against_ref(L, "MLA q latent + norms + biases");
    AttnLayer *C = attn_layer_copy(L);
    CHECK(C && attn_layer_params(C) == attn_layer_params(L), "copy keeps the parameters");
    if (C) check_against_ref(C, "copied MLA layer");
    CHECK(attn_layer_kv_values(L) == 5 + 6, "MLA caches r + rope = %zu", attn_layer_kv_values(L));
    attn_layer_free(C);
    /* A wrong shape is reported with the field's name. */
    Mat *bad = L->W_KVB; L->W_KVB = mat_new(3, 3);
    AttnOut *o = NULL;
    Mat *X = attn_random_input(2, L->hidden, 1);
    int pos[2] = {0, 1};
    CHECK_ERR(attn_eval(L, X, pos, false, &o), "W_KVB");
    mat_free(L->W_KVB); L->W_KVB = bad;
    mat_free(X);
    attn_layer_free(L);
    test_stories();
    return check_done();
}
