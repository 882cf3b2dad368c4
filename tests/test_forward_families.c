/* test_forward_families.c -- the forward pass of every family of issue 12 against a float64
 * reference written here from the Hugging Face modeling files, on tiny random checkpoints:
 * qwen3 (per-head q/k norm), qwen3_moe (softmax top-k, norm_topk_prob, mlp_only_layers), gemma2
 * (RMSNorm 1 + w, sandwich norms, GeGLU, query_pre_attn_scalar, attention and final soft-caps,
 * alternating windows), gemma3_text (q/k norms 1 + w, local RoPE base, rope_scaling on global
 * layers, layer_types), mixtral (top-2 renormalised, w1/w3/w2), deepseek_v2 (softmax,
 * group_limited_greedy, routed_scaling_factor, shared experts, first_k_dense_replace) and
 * deepseek_v3 (sigmoid + e_score_correction_bias, n_group / topk_group, norm_topk_prob, routed
 * scaling) on MLA attention, phi3 (fused qkv_proj / gate_up_proj, partial rotary, longrope short and
 * long factors, sliding window), gpt_neox (head-by-head query_key_value, rotary_pct, parallel and
 * sequential residual, LayerNorm, GELU with biases, embed_out) and olmo2 (whole-projection q/k
 * norms, post-norms). Logits agree to 1e-4 relative (max |diff| / max |ref|), and switching
 * off a family's features (soft-caps, windows, q/k norms, grouped routing, longrope's long
 * factors, ...) in the reference moves it by more than 1e-3; prefill equals decoding token by
 * token and streamed weights equal resident ones; what is still refused (an unknown DeepSeek-V2
 * topk_method, inconsistent groups, top-k beyond the experts, experts the config does not route,
 * longrope factor counts, an unknown activation) is refused by name; a qwen3 model's FWD_Q / FWD_K hooks are the normed projections and
 * FWD_K_ROPE the rotated keys. */
#define _GNU_SOURCE
#include "check.h"
#include "forward.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "safetensors.h"

enum { D = 32, H = 4, HD = 8, NV = 40, MAXT = 16, MAXL = 4, MAXTENS = 400 };

/* ================================================================ random weights, kept by name */

static unsigned long rng = 777;
static double rnd(void) {
    rng = rng * 6364136223846793005ul + 1442695040888963407ul;
    return (double)((rng >> 33) & 0xFFFFFF) / (double)0x1000000 - 0.5;
}

typedef struct { char name[96]; size_t r, c; float *p; } Tens;
static Tens bag[MAXTENS];
static int nbag;
static char prefix[16];

static void bag_clear(void) {
    for (int i = 0; i < nbag; i++) free(bag[i].p);
    nbag = 0;
}

/* Adds a random (r, c) tensor (c 0: a vector of r) of values base + sc * U(-0.5, 0.5). */
__attribute__((format(printf, 5, 6))) static void add(size_t r, size_t c, double base, double sc, const char *fmt, ...) {
    Tens *t = &bag[nbag++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    t->r = r;
    t->c = c;
    size_t n = r * (c ? c : 1);
    t->p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) t->p[i] = (float)(base + sc * rnd());
}

/* The tensor named by fmt, or NULL. */
__attribute__((format(printf, 1, 2))) static const float *get(const char *fmt, ...) {
    char n[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n, sizeof n, fmt, ap);
    va_end(ap);
    for (int i = 0; i < nbag; i++)
        if (!strcmp(bag[i].name, n)) return bag[i].p;
    return NULL;
}

static int write_dir(const char *dir, const char *config) {
    mkdir(dir, 0755);
    st_writer *w = st_writer_new();
    for (int i = 0; i < nbag; i++) {
        size_t shape[2] = {bag[i].r, bag[i].c};
        CHECK_OK(st_writer_add(w, bag[i].name, DT_F32, bag[i].c ? 2 : 1, shape, bag[i].p,
                               bag[i].r * (bag[i].c ? bag[i].c : 1) * sizeof(float)));
    }
    char *p = al_asprintf("%s/model.safetensors", dir), *c = al_asprintf("%s/config.json", dir);
    int rc = st_writer_write(w, p);
    if (rc == AL_OK) rc = al_write_file_atomic(c, config, strlen(config));
    free(p);
    free(c);
    st_writer_free(w);
    return rc;
}

/* ================================================================ what the reference computes */

enum { N_RMS, N_RMS1P, N_LAYER };
enum { B_PRE, B_SANDWICH, B_POST, B_PARALLEL };
enum { A_SPLIT, A_CAT, A_NEOX, A_MLA };
enum { M_SWIGLU, M_FUSED, M_GELU_BIAS };
enum { MOE_NO, MOE_MIX, MOE_QW, MOE_DS2, MOE_DS3 };

typedef struct Spec {
    const char *name;
    int L, G, ff, norm, block, attn, mlp, qkn;   /* qkn: 0 none, 1 per head, 2 whole projection */
    int act;                                   /* 0 silu, 1 gelu tanh, 2 gelu (erf) */
    int rot;                                   /* rotary dims per head (first ones, or all) */
    double theta, local_theta, linear;         /* linear: rope_scaling factor of global layers (0: none) */
    double scale, attn_cap, final_cap, escale, eps;
    int window[MAXL];                          /* per layer (0: full) */
    bool local[MAXL];                          /* local RoPE base, no scaling */
    const double *sf, *lf;                     /* longrope short / long factors (rot / 2) */
    double orig, lr_attn;                      /* longrope original_max_position_embeddings, attention factor */
    int moe, E, k, ng, tg, eff, nsh;
    bool ntp;                                  /* norm_topk_prob */
    double rsf;                                /* routed_scaling_factor */
    bool moe_layer[MAXL], tie, bias;           /* bias: attention and MLP biases (NeoX) */
    int kl, nope;                              /* MLA: kv_lora_rank, qk_nope_head_dim (rope = rot, v = HD) */
    double qcap[MAXT * H * HD], kcap[MAXT * H * HD];   /* layer 0 q / k after the q/k norm, before RoPE */
    void (*mut[4])(struct Spec *);             /* features that must matter: the reference without each
                                                  differs from the model by more than 1e-3 */
} Spec;

static const char *lname(const Spec *s, int l, const char *suffix) {
    static char n[160];
    snprintf(n, sizeof n, "%slayers.%d.%s", prefix, l, suffix);
    (void)s;
    return n;
}

static double act(const Spec *s, double x) {
    if (s->act == 0) return x / (1 + exp(-x));
    if (s->act == 1) return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2)));
}

/* y (T, out) = x (T, in) W^T (+ b) with W (out, in) float. */
static void lin(const double *x, size_t T, size_t in, const float *W, const float *b, size_t out, double *y) {
    for (size_t t = 0; t < T; t++)
        for (size_t o = 0; o < out; o++) {
            double a = b ? b[o] : 0;
            for (size_t i = 0; i < in; i++) a += x[t * in + i] * W[o * in + i];
            y[t * out + o] = a;
        }
}

/* Norm of rows of n (weight w, bias b) in place, kind k. */
static void nrm(int k, double eps, double *x, size_t rows, size_t n, const float *w, const float *b) {
    for (size_t r = 0; r < rows; r++) {
        double *v = x + r * n, mean = 0, ss = 0;
        if (k == N_LAYER) {
            for (size_t j = 0; j < n; j++) mean += v[j];
            mean /= (double)n;
        }
        for (size_t j = 0; j < n; j++) ss += (v[j] - mean) * (v[j] - mean);
        double inv = 1 / sqrt(ss / (double)n + eps);
        for (size_t j = 0; j < n; j++)
            v[j] = (v[j] - mean) * inv * (k == N_RMS1P ? 1 + w[j] : w[j]) + (b ? b[j] : 0);
    }
}

/* Layer l's norm `suffix` on x (T, D) in place (absent: nothing). */
static void lnorm(const Spec *s, int l, const char *suffix, double *x, size_t T) {
    char w[48], b[48];
    snprintf(w, sizeof w, "%s.weight", suffix);
    snprintf(b, sizeof b, "%s.bias", suffix);
    const float *W = get("%s", lname(s, l, w));
    if (W) nrm(s->norm, s->eps, x, T, D, W, get("%s", lname(s, l, b)));
}

/* Q/K/V projections of layer l: q (T, H dqk), k (T, G dqk), v (T, G HD). */
static void project(const Spec *s, int l, const double *x, size_t T, double *q, double *k, double *v) {
    size_t G = (size_t)s->G, dqk = s->attn == A_MLA ? (size_t)(s->nope + s->rot) : HD;
    if (s->attn == A_SPLIT) {
        lin(x, T, D, get("%s", lname(s, l, "self_attn.q_proj.weight")), NULL, H * dqk, q);
        lin(x, T, D, get("%s", lname(s, l, "self_attn.k_proj.weight")), NULL, G * dqk, k);
        lin(x, T, D, get("%s", lname(s, l, "self_attn.v_proj.weight")), NULL, G * HD, v);
    } else if (s->attn == A_CAT || s->attn == A_NEOX) {
        size_t n = (H + 2 * G) * HD;
        double *y = malloc(T * n * sizeof *y);
        bool neox = s->attn == A_NEOX;
        lin(x, T, D, get("%s", lname(s, l, neox ? "attention.query_key_value.weight" : "self_attn.qkv_proj.weight")),
            get("%s", lname(s, l, "attention.query_key_value.bias")), n, y);
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < H; h++)
                for (size_t j = 0; j < HD; j++) {
                    const double *r = y + t * n;
                    if (neox) {                      /* head by head [q_h ; k_h ; v_h] */
                        q[t * H * HD + h * HD + j] = r[h * 3 * HD + j];
                        k[t * H * HD + h * HD + j] = r[h * 3 * HD + HD + j];
                        v[t * H * HD + h * HD + j] = r[h * 3 * HD + 2 * HD + j];
                    } else {
                        q[t * H * HD + h * HD + j] = r[h * HD + j];
                        if (h < G) {
                            k[t * G * HD + h * HD + j] = r[H * HD + h * HD + j];
                            v[t * G * HD + h * HD + j] = r[(H + G) * HD + h * HD + j];
                        }
                    }
                }
        free(y);
    } else {                                         /* MLA, q_proj, no query latent */
        size_t kl = (size_t)s->kl, r = (size_t)s->rot, np = (size_t)s->nope, kvw = np + HD;
        double *a = malloc(T * (kl + r) * sizeof *a), *c = malloc(T * kl * sizeof *c), *b = malloc(T * H * kvw * sizeof *b);
        lin(x, T, D, get("%s", lname(s, l, "self_attn.q_proj.weight")), NULL, H * dqk, q);
        lin(x, T, D, get("%s", lname(s, l, "self_attn.kv_a_proj_with_mqa.weight")), NULL, kl + r, a);
        for (size_t t = 0; t < T; t++) memcpy(c + t * kl, a + t * (kl + r), kl * sizeof *c);
        nrm(N_RMS, s->eps, c, T, kl, get("%s", lname(s, l, "self_attn.kv_a_layernorm.weight")), NULL);
        lin(c, T, kl, get("%s", lname(s, l, "self_attn.kv_b_proj.weight")), NULL, H * kvw, b);
        for (size_t t = 0; t < T; t++)
            for (size_t h = 0; h < H; h++) {
                memcpy(k + t * H * dqk + h * dqk, b + t * H * kvw + h * kvw, np * sizeof *k);
                memcpy(k + t * H * dqk + h * dqk + np, a + t * (kl + r) + kl, r * sizeof *k);
                memcpy(v + t * H * HD + h * HD, b + t * H * kvw + h * kvw + np, HD * sizeof *v);
            }
        free(a); free(c); free(b);
    }
}

/* RoPE of layer l on the rows x (T, heads dqk) at positions 0..T-1 (Tseq: the sequence length that
 * picks longrope's factors). */
static void rope(const Spec *s, int l, double *x, size_t T, size_t heads, size_t dqk, size_t Tseq) {
    size_t half = (size_t)s->rot / 2, c0 = s->attn == A_MLA ? (size_t)s->nope : 0;
    double theta = s->local[l] ? s->local_theta : s->theta, ms = 1;
    for (size_t j = 0; j < half; j++)
        for (size_t t = 0; t < T; t++) {
            double f = pow(theta, -2.0 * (double)j / s->rot);
            if (s->sf) { f /= ((double)Tseq > s->orig ? s->lf : s->sf)[j]; ms = s->lr_attn; }
            if (s->linear > 0 && !s->local[l]) f /= s->linear;
            double cs = cos((double)t * f) * ms, sn = sin((double)t * f) * ms;
            for (size_t h = 0; h < heads; h++) {
                double *p = x + t * heads * dqk + h * dqk + c0;
                size_t a = s->attn == A_MLA ? 2 * j : j, b = s->attn == A_MLA ? 2 * j + 1 : j + half;
                double u = p[a], w = p[b];
                p[a] = u * cs - w * sn;
                p[b] = w * cs + u * sn;
            }
        }
}

/* Attention of layer l on x (T, D) into out (T, D). */
static void attention(Spec *s, int l, const double *x, size_t T, double *out) {
    size_t G = (size_t)s->G, dqk = s->attn == A_MLA ? (size_t)(s->nope + s->rot) : HD;
    size_t KH = s->attn == A_MLA ? H : G;
    double *q = malloc(T * H * dqk * sizeof *q), *k = malloc(T * KH * dqk * sizeof *k), *v = malloc(T * KH * HD * sizeof *v);
    double *o = calloc(T * H * HD, sizeof *o), *p = malloc(T * sizeof *p);
    project(s, l, x, T, q, k, v);
    if (s->qkn == 1) {
        nrm(s->norm == N_RMS1P ? N_RMS1P : N_RMS, s->eps, q, T * H, HD, get("%s", lname(s, l, "self_attn.q_norm.weight")), NULL);
        nrm(s->norm == N_RMS1P ? N_RMS1P : N_RMS, s->eps, k, T * G, HD, get("%s", lname(s, l, "self_attn.k_norm.weight")), NULL);
    } else if (s->qkn == 2) {
        nrm(N_RMS, s->eps, q, T, H * HD, get("%s", lname(s, l, "self_attn.q_norm.weight")), NULL);
        nrm(N_RMS, s->eps, k, T, G * HD, get("%s", lname(s, l, "self_attn.k_norm.weight")), NULL);
    }
    if (l == 0) {
        memcpy(s->qcap, q, T * H * dqk * sizeof *q);
        memcpy(s->kcap, k, T * KH * dqk * sizeof *k);
    }
    rope(s, l, q, T, H, dqk, T);
    rope(s, l, k, T, KH, dqk, T);
    for (size_t h = 0; h < H; h++) {
        size_t g = h / (H / KH);
        for (size_t t = 0; t < T; t++) {
            size_t lo = s->window[l] && t + 1 > (size_t)s->window[l] ? t + 1 - (size_t)s->window[l] : 0;
            double mx = -INFINITY, sum = 0;
            for (size_t j = lo; j <= t; j++) {
                double a = 0;
                for (size_t c = 0; c < dqk; c++) a += q[t * H * dqk + h * dqk + c] * k[j * KH * dqk + g * dqk + c];
                a *= s->scale;
                if (s->attn_cap > 0) a = s->attn_cap * tanh(a / s->attn_cap);
                p[j] = a;
                mx = fmax(mx, a);
            }
            for (size_t j = lo; j <= t; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
            for (size_t j = lo; j <= t; j++)
                for (size_t c = 0; c < HD; c++) o[t * H * HD + h * HD + c] += p[j] / sum * v[j * KH * HD + g * HD + c];
        }
    }
    const char *on = s->attn == A_NEOX ? "attention.dense.weight" : "self_attn.o_proj.weight";
    lin(o, T, H * HD, get("%s", lname(s, l, on)), get("%s", lname(s, l, "attention.dense.bias")), D, out);
    free(q); free(k); free(v); free(o); free(p);
}

/* A SwiGLU net `pre`{gate,up,down} (gn/un/dn the names) of width ff on one row x into y += c * net(x). */
static void swiglu(const Spec *s, int l, const char *pre, const char *gn, const char *un, const char *dn, int ff,
                   const double *x, double c, double *y) {
    char b[96];
    double *g = malloc((size_t)ff * sizeof *g), *u = malloc((size_t)ff * sizeof *u), *z = malloc(D * sizeof *z);
    snprintf(b, sizeof b, "%s%s.weight", pre, gn);
    lin(x, 1, D, get("%s", lname(s, l, b)), NULL, (size_t)ff, g);
    snprintf(b, sizeof b, "%s%s.weight", pre, un);
    lin(x, 1, D, get("%s", lname(s, l, b)), NULL, (size_t)ff, u);
    for (int i = 0; i < ff; i++) g[i] = act(s, g[i]) * u[i];
    snprintf(b, sizeof b, "%s%s.weight", pre, dn);
    lin(g, 1, (size_t)ff, get("%s", lname(s, l, b)), NULL, D, z);
    for (int j = 0; j < D; j++) y[j] += c * z[j];
    free(g); free(u); free(z);
}

/* The dense MLP of layer l on one row x into y (= net(x)). */
static void dense(const Spec *s, int l, const double *x, double *y) {
    memset(y, 0, D * sizeof *y);
    if (s->mlp == M_SWIGLU) { swiglu(s, l, "mlp.", "gate_proj", "up_proj", "down_proj", s->ff, x, 1, y); return; }
    double *a = malloc(2 * (size_t)s->ff * sizeof *a);
    if (s->mlp == M_FUSED) {                         /* gate_up rows [gate ; up] */
        lin(x, 1, D, get("%s", lname(s, l, "mlp.gate_up_proj.weight")), NULL, 2 * (size_t)s->ff, a);
        for (int i = 0; i < s->ff; i++) a[i] = act(s, a[i]) * a[s->ff + i];
        lin(a, 1, (size_t)s->ff, get("%s", lname(s, l, "mlp.down_proj.weight")), NULL, D, y);
    } else {
        lin(x, 1, D, get("%s", lname(s, l, "mlp.dense_h_to_4h.weight")), get("%s", lname(s, l, "mlp.dense_h_to_4h.bias")),
            (size_t)s->ff, a);
        for (int i = 0; i < s->ff; i++) a[i] = act(s, a[i]);
        lin(a, 1, (size_t)s->ff, get("%s", lname(s, l, "mlp.dense_4h_to_h.weight")),
            get("%s", lname(s, l, "mlp.dense_4h_to_h.bias")), D, y);
    }
    free(a);
}

/* The k experts of one token and their weights (the modeling files' routing). */
static void route(const Spec *s, int l, const double *x, int *idx, double *wt) {
    double z[16], p[16], c[16], gs[8];
    int E = s->E, per = s->ng > 1 ? E / s->ng : E;
    lin(x, 1, D, get("%s", lname(s, l, s->moe == MOE_MIX ? "block_sparse_moe.gate.weight" : "mlp.gate.weight")), NULL,
        (size_t)E, z);
    const float *bias = get("%s", lname(s, l, "mlp.gate.e_score_correction_bias"));
    double mx = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++) mx = fmax(mx, z[e]);
    for (int e = 0; e < E; e++) sum += exp(z[e] - mx);
    for (int e = 0; e < E; e++) {
        p[e] = s->moe == MOE_DS3 ? 1 / (1 + exp(-z[e])) : exp(z[e] - mx) / sum;
        c[e] = p[e] + (s->moe == MOE_DS3 && bias ? bias[e] : 0);
    }
    if (s->ng > 1) {
        bool keep[8] = {0};
        for (int g = 0; g < s->ng; g++) {            /* V3: sum of the top two; V2: the max */
            double b1 = -INFINITY, b2 = -INFINITY;
            for (int e = g * per; e < (g + 1) * per; e++) {
                if (c[e] > b1) { b2 = b1; b1 = c[e]; } else if (c[e] > b2) b2 = c[e];
            }
            gs[g] = s->moe == MOE_DS3 ? b1 + b2 : b1;
        }
        for (int r = 0; r < s->tg; r++) {
            int b = -1;
            for (int g = 0; g < s->ng; g++)
                if (!keep[g] && (b < 0 || gs[g] > gs[b])) b = g;
            keep[b] = true;
        }
        for (int e = 0; e < E; e++)
            if (!keep[e / per]) c[e] = 0;
    }
    double tot = 0;
    for (int r = 0; r < s->k; r++) {
        int b = -1;
        for (int e = 0; e < E; e++)
            if (c[e] > -1e300 && (b < 0 || c[e] > c[b])) b = e;
        idx[r] = b;
        c[b] = -1e301;
        wt[r] = p[b];
        tot += p[b];
    }
    for (int r = 0; r < s->k; r++) {
        if (s->moe == MOE_MIX || (s->moe == MOE_QW && s->ntp)) wt[r] /= tot;
        if (s->moe == MOE_DS3 && s->ntp) wt[r] /= tot + 1e-20;
        if (s->moe >= MOE_DS2) wt[r] *= s->rsf;
    }
}

/* The MLP of layer l on one row x into y. */
static void mlp(const Spec *s, int l, const double *x, double *y) {
    if (!s->moe || !s->moe_layer[l]) { dense(s, l, x, y); return; }
    int idx[8];
    double wt[8];
    char pre[64];
    memset(y, 0, D * sizeof *y);
    route(s, l, x, idx, wt);
    for (int r = 0; r < s->k; r++) {
        if (s->moe == MOE_MIX) {
            snprintf(pre, sizeof pre, "block_sparse_moe.experts.%d.", idx[r]);
            swiglu(s, l, pre, "w1", "w3", "w2", s->eff, x, wt[r], y);
        } else {
            snprintf(pre, sizeof pre, "mlp.experts.%d.", idx[r]);
            swiglu(s, l, pre, "gate_proj", "up_proj", "down_proj", s->eff, x, wt[r], y);
        }
    }
    if (s->nsh) swiglu(s, l, "mlp.shared_experts.", "gate_proj", "up_proj", "down_proj", s->eff * s->nsh, x, 1, y);
}

/* Row-wise MLP over T rows. */
static void mlp_rows(const Spec *s, int l, const double *x, size_t T, double *y) {
    for (size_t t = 0; t < T; t++) mlp(s, l, x + t * D, y + t * D);
}

/* Logits (T, NV) of tokens ids[0..T). */
static void reference(Spec *s, const int *ids, size_t T, double *logits) {
    size_t n = T * D;
    double *x = malloc(n * sizeof *x), *h = malloc(n * sizeof *h), *a = malloc(n * sizeof *a), *m = malloc(n * sizeof *m);
    bool neox = s->attn == A_NEOX;
    const float *E = get("%s%s", prefix, neox ? "embed_in.weight" : "embed_tokens.weight");
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < D; j++) x[t * D + j] = E[(size_t)ids[t] * D + j] * s->escale;
    for (int l = 0; l < s->L; l++) {
        memcpy(h, x, n * sizeof *h);
        if (s->block != B_POST) lnorm(s, l, "input_layernorm", h, T);
        attention(s, l, h, T, a);
        if (s->block == B_SANDWICH || s->block == B_POST) lnorm(s, l, "post_attention_layernorm", a, T);
        if (s->block != B_PARALLEL)
            for (size_t i = 0; i < n; i++) x[i] += a[i];
        memcpy(h, x, n * sizeof *h);
        if (s->block == B_SANDWICH) lnorm(s, l, "pre_feedforward_layernorm", h, T);
        if (s->block == B_PRE || s->block == B_PARALLEL) lnorm(s, l, "post_attention_layernorm", h, T);
        mlp_rows(s, l, h, T, m);
        if (s->block == B_SANDWICH || s->block == B_POST) lnorm(s, l, "post_feedforward_layernorm", m, T);
        for (size_t i = 0; i < n; i++) x[i] += m[i] + (s->block == B_PARALLEL ? a[i] : 0);
    }
    nrm(s->norm, s->eps, x, T, D, get("%s%s", prefix, neox ? "final_layer_norm.weight" : "norm.weight"),
        get("%s%s", prefix, neox ? "final_layer_norm.bias" : "norm.bias"));
    const float *W = s->tie ? E : neox ? get("embed_out.weight") : get("lm_head.weight");
    lin(x, T, D, W, NULL, NV, logits);
    if (s->final_cap > 0)
        for (size_t i = 0; i < T * NV; i++) logits[i] = s->final_cap * tanh(logits[i] / s->final_cap);
    free(x); free(h); free(a); free(m);
}

/* ================================================================ checkpoints */

/* Norm weight (and LayerNorm bias) of width n around its neutral value. */
static void add_norm(const Spec *s, size_t n, const char *name) {
    add(n, 0, s->norm == N_RMS1P ? 0 : 1, 0.4, "%s.weight", name);
    if (s->norm == N_LAYER) add(n, 0, 0, 0.2, "%s.bias", name);
}

static void add_swiglu(const Spec *s, int l, const char *pre, const char *g, const char *u, const char *d, int ff) {
    add((size_t)ff, D, 0, 0.5, "%slayers.%d.%s%s.weight", prefix, l, pre, g);
    add((size_t)ff, D, 0, 0.5, "%slayers.%d.%s%s.weight", prefix, l, pre, u);
    add(D, (size_t)ff, 0, 0.5, "%slayers.%d.%s%s.weight", prefix, l, pre, d);
    (void)s;
}

static void add_attn(const Spec *s, int l) {
    size_t G = (size_t)s->G;
    char b[96];
    snprintf(b, sizeof b, "%slayers.%d.", prefix, l);
    if (s->attn == A_SPLIT) {
        add(H * HD, D, 0, 0.5, "%sself_attn.q_proj.weight", b);
        add(G * HD, D, 0, 0.5, "%sself_attn.k_proj.weight", b);
        add(G * HD, D, 0, 0.5, "%sself_attn.v_proj.weight", b);
    } else if (s->attn == A_CAT)
        add((H + 2 * G) * HD, D, 0, 0.5, "%sself_attn.qkv_proj.weight", b);
    else if (s->attn == A_NEOX) {
        add(3 * H * HD, D, 0, 0.5, "%sattention.query_key_value.weight", b);
        add(3 * H * HD, 0, 0, 0.5, "%sattention.query_key_value.bias", b);
    } else {
        size_t dqk = (size_t)(s->nope + s->rot);
        add(H * dqk, D, 0, 0.5, "%sself_attn.q_proj.weight", b);
        add((size_t)(s->kl + s->rot), D, 0, 0.5, "%sself_attn.kv_a_proj_with_mqa.weight", b);
        add((size_t)s->kl, 0, 1, 0.4, "%sself_attn.kv_a_layernorm.weight", b);
        add(H * (size_t)(s->nope + HD), (size_t)s->kl, 0, 0.5, "%sself_attn.kv_b_proj.weight", b);
    }
    if (s->attn == A_NEOX) {
        add(D, H * HD, 0, 0.5, "%sattention.dense.weight", b);
        add(D, 0, 0, 0.2, "%sattention.dense.bias", b);
    } else
        add(D, H * HD, 0, 0.5, "%sself_attn.o_proj.weight", b);
    if (s->qkn) {
        add(s->qkn == 2 ? H * HD : HD, 0, s->norm == N_RMS1P ? 0 : 1, 0.4, "%sself_attn.q_norm.weight", b);
        add(s->qkn == 2 ? G * HD : HD, 0, s->norm == N_RMS1P ? 0 : 1, 0.4, "%sself_attn.k_norm.weight", b);
    }
}

static void add_mlp(const Spec *s, int l) {
    char pre[64];
    if (s->moe && s->moe_layer[l]) {
        add((size_t)s->E, D, 0, 2.0, "%slayers.%d.%s.weight", prefix, l, s->moe == MOE_MIX ? "block_sparse_moe.gate" : "mlp.gate");
        if (s->moe == MOE_DS3) add((size_t)s->E, 0, 0, 0.2, "%slayers.%d.mlp.gate.e_score_correction_bias", prefix, l);
        for (int e = 0; e < s->E; e++) {
            if (s->moe == MOE_MIX) {
                snprintf(pre, sizeof pre, "block_sparse_moe.experts.%d.", e);
                add_swiglu(s, l, pre, "w1", "w3", "w2", s->eff);
            } else {
                snprintf(pre, sizeof pre, "mlp.experts.%d.", e);
                add_swiglu(s, l, pre, "gate_proj", "up_proj", "down_proj", s->eff);
            }
        }
        if (s->nsh) add_swiglu(s, l, "mlp.shared_experts.", "gate_proj", "up_proj", "down_proj", s->eff * s->nsh);
    } else if (s->mlp == M_SWIGLU)
        add_swiglu(s, l, "mlp.", "gate_proj", "up_proj", "down_proj", s->ff);
    else if (s->mlp == M_FUSED) {
        add(2 * (size_t)s->ff, D, 0, 0.5, "%slayers.%d.mlp.gate_up_proj.weight", prefix, l);
        add(D, (size_t)s->ff, 0, 0.5, "%slayers.%d.mlp.down_proj.weight", prefix, l);
    } else {
        add((size_t)s->ff, D, 0, 0.5, "%slayers.%d.mlp.dense_h_to_4h.weight", prefix, l);
        add((size_t)s->ff, 0, 0, 0.2, "%slayers.%d.mlp.dense_h_to_4h.bias", prefix, l);
        add(D, (size_t)s->ff, 0, 0.5, "%slayers.%d.mlp.dense_4h_to_h.weight", prefix, l);
        add(D, 0, 0, 0.2, "%slayers.%d.mlp.dense_4h_to_h.bias", prefix, l);
    }
}

/* Every tensor of the spec's model. */
static void make_weights(const Spec *s) {
    static const char *const norms[][4] = {
        [B_PRE] = {"input_layernorm", "post_attention_layernorm"},
        [B_SANDWICH] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"},
        [B_POST] = {"post_attention_layernorm", "post_feedforward_layernorm"},
        [B_PARALLEL] = {"input_layernorm", "post_attention_layernorm"}};
    bool neox = s->attn == A_NEOX;
    char n[96];
    bag_clear();
    snprintf(prefix, sizeof prefix, "%s", neox ? "gpt_neox." : "model.");
    add(NV, D, 0, s->escale > 1 ? 0.3 : 2.0, "%s%s", prefix, neox ? "embed_in.weight" : "embed_tokens.weight");
    for (int l = 0; l < s->L; l++) {
        for (int i = 0; i < 4 && norms[s->block][i]; i++) {
            snprintf(n, sizeof n, "%slayers.%d.%s", prefix, l, norms[s->block][i]);
            add_norm(s, D, n);
        }
        add_attn(s, l);
        add_mlp(s, l);
    }
    snprintf(n, sizeof n, "%s%s", prefix, neox ? "final_layer_norm" : "norm");
    add_norm(s, D, n);
    if (!s->tie) add(NV, D, 0, 0.5, "%s", neox ? "embed_out.weight" : "lm_head.weight");
}

/* Opens dir; checkpoints whose attention layout model_open does not validate yet (fused) are
 * assembled from their config and store, as model_open would. */
static Model *open_model(const char *dir, const Spec *s) {
    Model *m = NULL;
    if (model_open(dir, &m) == AL_OK) return m;
    al_err_clear();
    m = calloc(1, sizeof *m);
    m->path = strdup(dir);
    m->name = strdup(dir);
    char *cp = al_asprintf("%s/config.json", dir);
    size_t len;
    m->config_json = al_read_file_max(cp, &len, AL_CAP_CONFIG, "config");
    free(cp);
    if (!m->config_json || model_config_parse_keep(m->config_json, dir, &m->cfg, &m->config_tree) ||
        store_open(dir, &m->store)) {
        CHECK(0, "%s: %s", dir, al_errmsg());
        model_free(m);
        return NULL;
    }
    m->cfg.qk_norm = s->qkn == 1 ? QKN_HEAD : s->qkn == 2 ? QKN_PROJ : QKN_NONE;
    return m;
}

static const char *tmpdir;
static const int ids[MAXT] = {3, 17, 5, 39, 0, 22, 8, 31, 14, 2, 27, 11, 36, 9, 20, 6};

/* max |a - b| / max |b| over n values. */
static double rel_err(const float *a, const double *b, size_t n) {
    double e = 0, mx = 0;
    for (size_t i = 0; i < n; i++) { e = fmax(e, fabs(a[i] - b[i])); mx = fmax(mx, fabs(b[i])); }
    return mx > 0 ? e / mx : e;
}

/* Writes the spec's checkpoint with config (JSON members after the common ones), runs T tokens
 * and compares with the reference; with decode, also token by token. Returns the model's error. */
static double run_family(Spec *s, const char *config, size_t T, bool decode) {
    char *dir = al_asprintf("%s/%s", tmpdir, s->name);
    make_weights(s);
    CHECK_OK(write_dir(dir, config));
    Model *m = open_model(dir, s);
    Forward *f = NULL;
    double err = INFINITY;
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (f) {
        float *lg = malloc(T * NV * sizeof *lg);
        double *ref = malloc(T * NV * sizeof *ref);
        reference(s, ids, T, ref);
        CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, lg));
        err = rel_err(lg, ref, T * NV);
        CHECK(err < 1e-4, "%s: logits differ from the float64 reference by %.3g (relative)", s->name, err);
        static Spec alt;
        for (int i = 0; i < 4 && s->mut[i]; i++) {
            alt = *s;
            s->mut[i](&alt);
            reference(&alt, ids, T, ref);
            double e2 = rel_err(lg, ref, T * NV);
            CHECK(e2 > 1e-3, "%s: feature %d changes the reference by only %.3g: the test cannot see it", s->name, i, e2);
        }
        reference(s, ids, T, ref);
        if (decode) {
            fwd_reset(f);
            double de = 0;
            for (size_t t = 0; t < T; t++) {
                CHECK_OK(fwd_run(f, ids + t, 1, FWD_LOGITS_LAST, lg));
                de = fmax(de, rel_err(lg, ref + t * NV, NV));
            }
            CHECK(de < 1e-4, "%s: decoding token by token differs by %.3g", s->name, de);
            FwdOptions tiny = {.mem_budget = 1};             /* streamed layer by layer */
            Forward *fs = NULL;
            CHECK_OK(fwd_new(m, &tiny, &fs));
            if (fs) {
                CHECK(fwd_streaming(fs), "%s: a 1-byte budget streams", s->name);
                CHECK_OK(fwd_run(fs, ids, T, FWD_LOGITS_ALL, lg));
                de = rel_err(lg, ref, T * NV);
                CHECK(de < 1e-4, "%s: streamed weights differ by %.3g", s->name, de);
            }
            fwd_free(fs);
        }
        printf("%-14s max relative logit error %.2e\n", s->name, err);
        free(lg);
        free(ref);
    }
    fwd_free(f);
    model_free(m);
    free(dir);
    return err;
}

/* ================================================================ hooks */

typedef struct { double *q, *k, *kr; size_t T; } Grab;

static int grab(const FwdAct *a, void *ud) {
    Grab *g = ud;
    if (a->layer != 0) return AL_OK;
    double *dst = a->kind == FWD_Q ? g->q : a->kind == FWD_K ? g->k : g->kr;
    for (size_t t = 0; t < a->T; t++)
        for (size_t h = 0; h < a->heads; h++)
            for (size_t j = 0; j < a->head_dim; j++)
                dst[(a->t0 + t) * a->heads * a->head_dim + h * a->head_dim + j] = fwd_act_row(a, t, h)[j];
    return AL_OK;
}

static double dmax(const double *a, const double *b, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]));
    return e;
}

/* FWD_Q / FWD_K are the projections after q_norm / k_norm (what RoPE turns), FWD_K_ROPE the keys
 * after RoPE, in the reference's layout (qwen3: the spec's checkpoint is still in the bag). */
static void test_hooks(Spec *s, const char *dir, size_t T) {
    Model *m = open_model(dir, s);
    Forward *f = NULL;
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (!f) { model_free(m); return; }
    size_t G = (size_t)s->G;
    Grab g = {calloc(T * H * HD, sizeof(double)), calloc(T * G * HD, sizeof(double)), calloc(T * G * HD, sizeof(double)), T};
    FwdHooks hk = {.mask = FWD_Q | FWD_K | FWD_K_ROPE, .fn = grab, .ud = &g, .chunk = 5};
    CHECK_OK(fwd_run_hooked(f, &hk, ids, 1, T));
    double *ref = malloc(T * NV * sizeof *ref);
    reference(s, ids, T, ref);
    double eq = dmax(g.q, s->qcap, T * H * HD), ek = dmax(g.k, s->kcap, T * G * HD);
    rope(s, 0, s->kcap, T, G, HD, T);
    double er = dmax(g.kr, s->kcap, T * G * HD);
    CHECK(eq < 1e-4 && ek < 1e-4 && er < 1e-4, "qwen3 hooks: q %g, k %g, k_rope %g", eq, ek, er);
    free(ref);
    free(g.q); free(g.k); free(g.kr);
    fwd_free(f);
    model_free(m);
}

/* ---------------------------------------------------------------- features switched off */
static void no_qkn(Spec *s) { s->qkn = 0; }
static void no_ntp(Spec *s) { s->ntp = false; }
static void no_cap(Spec *s) { s->attn_cap = 0; }
static void no_final_cap(Spec *s) { s->final_cap = 0; }
static void no_window(Spec *s) { memset(s->window, 0, sizeof s->window); }
static void no_local_theta(Spec *s) { s->local_theta = s->theta; }
static void no_linear(Spec *s) { s->linear = 0; }
static void no_escale(Spec *s) { s->escale = 1; }
static void top1(Spec *s) { s->k = 1; }
static void short_only(Spec *s) { s->lf = s->sf; }
static void no_lr_attn(Spec *s) { s->lr_attn = 1; }
static void flip_block(Spec *s) { s->block = s->block == B_PARALLEL ? B_PRE : B_PARALLEL; }
static void no_groups(Spec *s) { s->ng = 1; }
static void no_rsf(Spec *s) { s->rsf = 1; }
static void no_sandwich(Spec *s) { s->block = B_PRE; }

/* ================================================================ the families */

#define COMMON(L, G, FF) "\"hidden_size\":32,\"num_attention_heads\":4,\"num_key_value_heads\":" #G ",\"head_dim\":8," \
    "\"num_hidden_layers\":" #L ",\"intermediate_size\":" #FF ",\"vocab_size\":40,\"max_position_embeddings\":64," \
    "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,"

static Spec base(const char *name, int L, int G, int ff) {
    Spec s = {.name = name, .L = L, .G = G, .ff = ff, .rot = HD, .theta = 10000, .scale = 1 / sqrt(8.0), .escale = 1,
              .eps = 1e-6};
    return s;
}

static void test_qwen3(void) {
    static Spec s;
    s = base("qwen3", 2, 2, 24);
    s.qkn = 1;
    s.mut[0] = no_qkn;
    run_family(&s, "{\"model_type\":\"qwen3\"," COMMON(2, 2, 24) "\"tie_word_embeddings\":false}", 12, true);
    char *dir = al_asprintf("%s/qwen3", tmpdir);
    test_hooks(&s, dir, 12);
    free(dir);
    s = base("qwen3_moe", 3, 2, 24);
    s.qkn = 1;
    s.moe = MOE_QW; s.E = 4; s.k = 2; s.eff = 16; s.ntp = true;
    s.moe_layer[1] = s.moe_layer[2] = true;
    s.mut[0] = no_ntp;
    run_family(&s, "{\"model_type\":\"qwen3_moe\"," COMMON(3, 2, 24) "\"num_experts\":4,\"num_experts_per_tok\":2,"
               "\"moe_intermediate_size\":16,\"norm_topk_prob\":true,\"mlp_only_layers\":[0]}", 12, true);
    s = base("qwen3_moe_step", 2, 2, 24);
    s.qkn = 1;
    s.moe = MOE_QW; s.E = 4; s.k = 2; s.eff = 16;
    s.moe_layer[1] = true;
    run_family(&s, "{\"model_type\":\"qwen3_moe\"," COMMON(2, 2, 24) "\"num_experts\":4,\"num_experts_per_tok\":2,"
               "\"moe_intermediate_size\":16,\"norm_topk_prob\":false,\"decoder_sparse_step\":2}", 12, false);
}

static void test_gemma(void) {
    static Spec s;
    s = base("gemma2", 3, 2, 24);
    s.norm = N_RMS1P; s.block = B_SANDWICH; s.act = 1; s.scale = 0.25; s.attn_cap = 2.0; s.final_cap = 3.0;
    s.escale = (float)sqrt(32.0); s.tie = true;
    s.window[0] = s.window[2] = 5;
    s.mut[0] = no_cap; s.mut[1] = no_final_cap; s.mut[2] = no_window; s.mut[3] = no_escale;
    run_family(&s, "{\"model_type\":\"gemma2\"," COMMON(3, 2, 24) "\"hidden_activation\":\"gelu_pytorch_tanh\","
               "\"query_pre_attn_scalar\":16,\"attn_logit_softcapping\":2.0,\"final_logit_softcapping\":3.0,"
               "\"sliding_window\":5}", 12, true);
    s = base("gemma3_text", 3, 2, 24);
    s.norm = N_RMS1P; s.block = B_SANDWICH; s.act = 1; s.qkn = 1; s.escale = (float)sqrt(32.0); s.tie = true;
    s.window[0] = s.window[1] = 5;
    s.local[0] = s.local[1] = true;
    s.local_theta = 100; s.linear = 2;
    s.mut[0] = no_local_theta; s.mut[1] = no_linear; s.mut[2] = no_qkn; s.mut[3] = no_sandwich;
    run_family(&s, "{\"model_type\":\"gemma3_text\"," COMMON(3, 2, 24) "\"query_pre_attn_scalar\":8,"
               "\"sliding_window\":5,\"rope_local_base_freq\":100.0,\"rope_scaling\":{\"rope_type\":\"linear\","
               "\"factor\":2.0},\"layer_types\":[\"sliding_attention\",\"sliding_attention\",\"full_attention\"]}", 12, true);
}

static void test_mixtral_phi3_olmo2(void) {
    static Spec s;
    s = base("mixtral", 2, 2, 24);
    s.moe = MOE_MIX; s.E = 4; s.k = 2; s.eff = 24;
    s.moe_layer[0] = s.moe_layer[1] = true;
    s.mut[0] = top1;
    run_family(&s, "{\"model_type\":\"mixtral\"," COMMON(2, 2, 24) "\"num_local_experts\":4,\"num_experts_per_tok\":2,"
               "\"sliding_window\":null}", 12, true);
    static const double sf[2] = {1.0, 1.5}, lf[2] = {2.0, 4.0};
    const char *phi = "{\"model_type\":\"phi3\"," COMMON(2, 2, 24) "\"partial_rotary_factor\":0.5,"
                      "\"original_max_position_embeddings\":8,\"sliding_window\":5,\"rope_scaling\":{\"type\":\"longrope\","
                      "\"short_factor\":[1.0,1.5],\"long_factor\":[2.0,4.0]}}";
    for (size_t T = 6; T <= 12; T += 6) {                /* short factors, then long ones (T > 8) */
        s = base(T == 6 ? "phi3_short" : "phi3_long", 2, 2, 24);
        s.attn = A_CAT; s.mlp = M_FUSED; s.rot = 4; s.sf = sf; s.lf = lf; s.orig = 8;
        s.lr_attn = sqrt(1 + log(64.0 / 8) / log(8.0));
        s.window[0] = s.window[1] = 5;
        s.mut[0] = no_lr_attn; s.mut[1] = no_window; s.mut[2] = T > 8 ? short_only : NULL;
        run_family(&s, phi, T, false);
    }
    s = base("olmo2", 2, 2, 24);
    s.block = B_POST; s.qkn = 2;
    s.mut[0] = no_qkn;
    run_family(&s, "{\"model_type\":\"olmo2\"," COMMON(2, 2, 24) "\"tie_word_embeddings\":false}", 12, true);
}

static void test_neox(void) {
    static Spec s;
    for (int par = 1; par >= 0; par--) {
        s = base(par ? "gpt_neox" : "gpt_neox_seq", 2, H, 48);
        s.norm = N_LAYER; s.block = par ? B_PARALLEL : B_PRE; s.attn = A_NEOX; s.mlp = M_GELU_BIAS; s.act = 2;
        s.rot = 2; s.eps = 1e-5; s.bias = true;
        s.mut[0] = flip_block;
        char cfg[512];
        snprintf(cfg, sizeof cfg, "{\"model_type\":\"gpt_neox\",\"hidden_size\":32,\"num_attention_heads\":4,"
                 "\"num_hidden_layers\":2,\"intermediate_size\":48,\"vocab_size\":40,\"max_position_embeddings\":64,"
                 "\"rotary_pct\":0.25,\"rotary_emb_base\":10000,\"layer_norm_eps\":1e-5,\"hidden_act\":\"gelu\","
                 "\"use_parallel_residual\":%s,\"tie_word_embeddings\":false}", par ? "true" : "false");
        run_family(&s, cfg, 12, par);
    }
}

static void test_deepseek(void) {
    static Spec s;
    for (int v3 = 0; v3 <= 1; v3++) {
        s = base(v3 ? "deepseek_v3" : "deepseek_v2", 3, H, 24);
        s.attn = A_MLA; s.kl = 12; s.nope = 4; s.rot = 4;
        s.moe = v3 ? MOE_DS3 : MOE_DS2; s.E = 8; s.k = 2; s.eff = 16; s.nsh = 1;
        s.ng = v3 ? 4 : 2; s.tg = v3 ? 2 : 1; s.ntp = v3; s.rsf = v3 ? 2.5 : 2.0;
        s.moe_layer[1] = s.moe_layer[2] = true;
        s.mut[0] = no_groups; s.mut[1] = no_rsf; s.mut[2] = v3 ? no_ntp : NULL;
        char cfg[1024];
        snprintf(cfg, sizeof cfg, "{\"model_type\":\"%s\",\"hidden_size\":32,\"num_attention_heads\":4,"
                 "\"num_hidden_layers\":3,\"intermediate_size\":24,\"vocab_size\":40,\"max_position_embeddings\":64,"
                 "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"kv_lora_rank\":12,\"qk_nope_head_dim\":4,"
                 "\"qk_rope_head_dim\":4,\"v_head_dim\":8,\"n_routed_experts\":8,\"num_experts_per_tok\":2,"
                 "\"n_group\":%d,\"topk_group\":%d,\"topk_method\":\"%s\",\"routed_scaling_factor\":%g,"
                 "\"n_shared_experts\":1,\"moe_intermediate_size\":16,\"first_k_dense_replace\":1,\"moe_layer_freq\":1,"
                 "\"norm_topk_prob\":%s%s}", v3 ? "deepseek_v3" : "deepseek_v2", s.ng, s.tg,
                 v3 ? "noaux_tc" : "group_limited_greedy", s.rsf, v3 ? "true" : "false",
                 v3 ? ",\"scoring_func\":\"sigmoid\"" : "");
        run_family(&s, cfg, 12, v3);
    }
}

/* What the pass still refuses, with a reason that names it. */
static void expect_refusal(Spec *s, const char *config, const char *needle) {
    char *dir = al_asprintf("%s/%s", tmpdir, s->name);
    CHECK_OK(write_dir(dir, config));
    Model *m = open_model(dir, s);
    Forward *f = NULL;
    if (m) CHECK_ERR(fwd_new(m, NULL, &f), needle);
    fwd_free(f);
    model_free(m);
    free(dir);
}

static void test_refusals(void) {
    static Spec s;
    s = base("refuse_ds", 2, H, 24);
    s.attn = A_MLA; s.kl = 12; s.nope = 4; s.rot = 4;
    s.moe = MOE_DS2; s.E = 8; s.k = 2; s.eff = 16; s.nsh = 1;
    s.moe_layer[1] = true;
    make_weights(&s);
    const char *head = "{\"model_type\":\"deepseek_v2\",\"hidden_size\":32,\"num_attention_heads\":4,"
                       "\"num_hidden_layers\":2,\"intermediate_size\":24,\"vocab_size\":40,\"kv_lora_rank\":12,"
                       "\"qk_nope_head_dim\":4,\"qk_rope_head_dim\":4,\"v_head_dim\":8,\"n_routed_experts\":8,"
                       "\"n_shared_experts\":1,\"moe_intermediate_size\":16,\"first_k_dense_replace\":1,";
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s\"num_experts_per_tok\":2,\"topk_method\":\"bogus\"}", head);
    expect_refusal(&s, cfg, "topk_method 'bogus'");
    snprintf(cfg, sizeof cfg, "%s\"num_experts_per_tok\":2,\"topk_method\":\"group_limited_greedy\",\"n_group\":3,"
             "\"topk_group\":1}", head);
    expect_refusal(&s, cfg, "inconsistent");
    snprintf(cfg, sizeof cfg, "%s\"num_experts_per_tok\":9}", head);
    expect_refusal(&s, cfg, "layer 1 is a mixture-of-experts layer (8 experts) but num_experts_per_tok is 9");
    snprintf(cfg, sizeof cfg, "%s\"num_experts_per_tok\":2,\"first_k_dense_replace\":2}", head);  /* last key wins */
    expect_refusal(&s, cfg, "layer 1 holds experts but config.json does not route to them");
    s = base("refuse_phi3", 1, 2, 24);
    s.attn = A_CAT; s.mlp = M_FUSED;
    make_weights(&s);
    expect_refusal(&s, "{\"model_type\":\"phi3\"," COMMON(1, 2, 24) "\"partial_rotary_factor\":0.5,\"rope_scaling\":"
                   "{\"type\":\"longrope\",\"short_factor\":[1.0],\"long_factor\":[1.0,2.0]}}", "1 short and 2 long factors");
    s = base("refuse_act", 1, 2, 24);
    make_weights(&s);
    expect_refusal(&s, "{\"model_type\":\"qwen3\"," COMMON(1, 2, 24) "\"hidden_act\":\"xielu\"}", "activation 'xielu'");
}

int main(void) {
    tmpdir = test_tmpdir();
    test_qwen3();
    test_gemma();
    test_mixtral_phi3_olmo2();
    test_neox();
    test_deepseek();
    test_refusals();
    bag_clear();
    return check_done();
}
