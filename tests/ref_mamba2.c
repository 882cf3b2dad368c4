/* ref_mamba2.c -- the float64 reference of the Mamba-2 hybrids (see ref_mamba2.h). From the modeling files:
 *   NemotronHBlock       h += mixer(norm(h)), NemotronHRMSNorm w x (eps layer_norm_epsilon); mixers by
 *                        hybrid_override_pattern: M NemotronHMamba2Mixer, * NemotronHAttention (no RoPE, scale
 *                        head_dim^-1/2), - NemotronHMLP down(relu(up x)^2); backbone.norm_f, lm_head.
 *   GraniteMoeHybrid     h = h + rm * mixer(input_layernorm(h)) (mamba or self_attn, scale attention_multiplier),
 *                        h = h + rm * (moe(x) + shared_mlp(x)), x = post_attention_layernorm(h); embeddings x
 *                        embedding_multiplier, logits / logits_scaling, tied embeddings; the MoE: router.layer
 *                        logits, top-k, softmax over the k, experts input_linear [E, 2I, D] chunked [gate | up],
 *                        silu(gate) up, output_linear [E, D, I]; shared_mlp the same with one expert.
 *   Mamba-2 (torch_forward) in_proj -> [gate (I) | x B C (I + 2 G N) | dt (H)]; x B C <- silu(conv1d(x B C) + b)
 *                        (depthwise, causal: padding K - 1, cut to the sequence); dt <- softplus(dt + dt_bias),
 *                        clamped below by time_step_min (Nemotron-H) / time_step_limit[0] (Granite, 0);
 *                        A = -exp(A_log); B, C of head h from group h / (H / G); y = SSD(x, dt, A, B, C) + D x;
 *                        the gated norm y silu(gate), RMS per group of I / n_groups (Zamba2RMSNormGated, Nemotron-H)
 *                        or over all of I (BambaRMSNormGated, Granite), times w; out_proj. */
#define _GNU_SOURCE
#include "ref_mamba2.h"
#include "al.h"
#include "safetensors.h"
#include "tensor.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REFM_MAX_LAYERS 64

struct RefMamba {
    st_file *st;
    bool nemotron;
    int L, D, V, H, G, hd, F, E, topk, FS;        /* layers, hidden, vocab, heads, KV heads, head dim, MLP / expert
                                                     widths, experts, top-k, Granite's shared MLP width */
    int mh, mp, mg, mn, mk;                       /* Mamba-2: heads, head dim, groups, state, conv kernel */
    bool conv_bias, tied;
    double eps, dt_min, scale, embed_mult, resid_mult, logits_div;
    int EF;                                       /* Nemotron-H's moe_intermediate_size */
    double route_scale;                           /* its routed_scaling_factor */
    bool norm_topk;
    char kind[REFM_MAX_LAYERS];                   /* 'M' Mamba-2, '*' attention, '-' MLP block */
    const char *prefix;
    unsigned ablate;
};

static double jnum(const cJSON *o, const char *k, double d) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(j) ? j->valuedouble : d;
}

static int parse_nemotron(RefMamba *m, const cJSON *r) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "hybrid_override_pattern");
    if (!cJSON_IsString(p) || (int)strlen(p->valuestring) != m->L) return al_err("ref: hybrid_override_pattern");
    for (int L = 0; L < m->L; L++) {
        m->kind[L] = p->valuestring[L];
        if (!strchr("M*-E", m->kind[L])) return al_err("ref: block '%c' not covered", m->kind[L]);
    }
    m->hd = (int)jnum(r, "head_dim", jnum(r, "attention_head_dim", m->D / m->H));
    m->E = (int)jnum(r, "n_routed_experts", 0), m->topk = (int)jnum(r, "num_experts_per_tok", 0);
    m->EF = (int)jnum(r, "moe_intermediate_size", 0), m->FS = (int)jnum(r, "moe_shared_expert_intermediate_size", 0);
    m->route_scale = jnum(r, "routed_scaling_factor", 1.0);
    m->norm_topk = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "norm_topk_prob"));
    if (jnum(r, "n_group", 1) != 1) return al_err("ref: grouped routing (n_group > 1) not covered");
    m->mh = (int)jnum(r, "mamba_num_heads", 128), m->mp = (int)jnum(r, "mamba_head_dim", 64);
    m->mg = (int)jnum(r, "n_groups", 8), m->mn = (int)jnum(r, "ssm_state_size", 128), m->mk = (int)jnum(r, "conv_kernel", 4);
    m->conv_bias = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "use_conv_bias"));
    m->eps = jnum(r, "layer_norm_epsilon", 1e-5);
    m->dt_min = jnum(r, "time_step_min", 0.001);
    m->scale = 1 / sqrt((double)m->hd);
    m->embed_mult = m->resid_mult = m->logits_div = 1;
    m->tied = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "tie_word_embeddings"));
    m->prefix = "backbone.";
    return AL_OK;
}

static int parse_granite(RefMamba *m, const cJSON *r) {
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(r, "layer_types"), *pe;
    for (int L = 0; L < m->L; L++) {
        const cJSON *e = cJSON_GetArrayItem(lt, L);
        m->kind[L] = cJSON_IsString(e) && !strcmp(e->valuestring, "mamba") ? 'M' : '*';
    }
    pe = cJSON_GetObjectItemCaseSensitive(r, "position_embedding_type");
    if (!cJSON_IsString(pe) || strcmp(pe->valuestring, "nope")) return al_err("ref: RoPE attention not covered");
    m->hd = m->D / m->H;
    m->mh = (int)jnum(r, "mamba_n_heads", 128), m->mp = (int)jnum(r, "mamba_d_head", 64);
    m->mg = (int)jnum(r, "mamba_n_groups", 1), m->mn = (int)jnum(r, "mamba_d_state", 256), m->mk = (int)jnum(r, "mamba_d_conv", 4);
    m->conv_bias = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "mamba_conv_bias"));
    m->eps = jnum(r, "rms_norm_eps", 1e-6);
    m->dt_min = 0;
    m->scale = jnum(r, "attention_multiplier", 1.0);
    m->embed_mult = jnum(r, "embedding_multiplier", 1.0);
    m->resid_mult = jnum(r, "residual_multiplier", 1.0);
    m->logits_div = jnum(r, "logits_scaling", 1.0);
    m->E = (int)jnum(r, "num_local_experts", 0), m->topk = (int)jnum(r, "num_experts_per_tok", 0);
    m->FS = (int)jnum(r, "shared_intermediate_size", 1024);
    m->tied = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "tie_word_embeddings"));
    m->prefix = "model.";
    return AL_OK;
}

int refm_open(const char *dir, RefMamba **out) {
    *out = NULL;
    char *cp = al_asprintf("%s/config.json", dir), *sp = al_asprintf("%s/model.safetensors", dir);
    size_t n = 0;
    char *text = cp ? al_read_file(cp, &n) : NULL;
    cJSON *r = text ? cJSON_Parse(text) : NULL;
    RefMamba *m = calloc(1, sizeof *m);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(r, "model_type");
    int rc = r && m && cJSON_IsString(mt) ? AL_OK : al_err("ref: cannot read %s", cp ? cp : dir);
    if (rc == AL_OK) {
        m->nemotron = !strcmp(mt->valuestring, "nemotron_h");
        m->L = (int)jnum(r, "num_hidden_layers", 0), m->D = (int)jnum(r, "hidden_size", 0);
        m->V = (int)jnum(r, "vocab_size", 0), m->H = (int)jnum(r, "num_attention_heads", 0);
        m->G = (int)jnum(r, "num_key_value_heads", m->H), m->F = (int)jnum(r, "intermediate_size", 0);
        if (m->L > REFM_MAX_LAYERS) rc = al_err("ref: too many layers");
        else if (m->nemotron) rc = parse_nemotron(m, r);
        else if (!strcmp(mt->valuestring, "granitemoehybrid")) rc = parse_granite(m, r);
        else rc = al_err("ref: model_type %s not covered", mt->valuestring);
    }
    if (rc == AL_OK) rc = st_open(sp, &m->st);
    cJSON_Delete(r);
    free(text);
    free(cp);
    free(sp);
    if (rc != AL_OK) { refm_free(m); return rc; }
    *out = m;
    return AL_OK;
}

void refm_free(RefMamba *m) {
    if (!m) return;
    if (m->st) st_close(m->st);
    free(m);
}

size_t refm_vocab(const RefMamba *m) { return (size_t)m->V; }
void refm_ablate(RefMamba *m, unsigned what) { m->ablate = what; }

/* Tensor "<prefix>layers.L.<what>" (L < 0: "<what>" as given) of n values, as doubles (caller frees). */
static double *tget(const RefMamba *m, int L, const char *what, size_t n) {
    char name[224];
    if (L >= 0) snprintf(name, sizeof name, "%slayers.%d.%s", m->prefix, L, what);
    else snprintf(name, sizeof name, "%s", what);
    const st_entry *e = st_find(m->st, name);
    if (!e || st_numel(e) != n) { al_err("ref: tensor %s %s", name, e ? "has the wrong size" : "missing"); return NULL; }
    float *f = malloc(n * sizeof *f);
    double *d = malloc(n * sizeof *d);
    if (!f || !d || dt_to_f32(e->dtype, st_data(m->st, e), n, f)) { free(f); free(d); al_err("ref: reading %s", name); return NULL; }
    for (size_t i = 0; i < n; i++) d[i] = f[i];
    free(f);
    return d;
}

/* y (T x out) = x (T x in) W^T, W (out x in). */
static void lin(const double *x, size_t T, size_t in, const double *W, size_t out, double *y) {
    for (size_t t = 0; t < T; t++)
        for (size_t o = 0; o < out; o++) {
            double s = 0;
            for (size_t i = 0; i < in; i++) s += x[t * in + i] * W[o * in + i];
            y[t * out + o] = s;
        }
}

static int lin_t(const RefMamba *m, int L, const char *what, const double *x, size_t T, size_t in, size_t out, double *y) {
    double *W = tget(m, L, what, in * out);
    if (W) lin(x, T, in, W, out, y);
    free(W);
    return W ? AL_OK : AL_ERR;
}

/* RMSNorm of x (T x n) with weight w into y. */
static void rms(const double *x, size_t T, size_t n, const double *w, double eps, double *y) {
    for (size_t t = 0; t < T; t++) {
        double ss = 0;
        for (size_t i = 0; i < n; i++) ss += x[t * n + i] * x[t * n + i];
        double inv = 1 / sqrt(ss / (double)n + eps);
        for (size_t i = 0; i < n; i++) y[t * n + i] = w[i] * x[t * n + i] * inv;
    }
}

static int norm_t(const RefMamba *m, int L, const char *what, const double *x, size_t T, double *y) {
    double *w = tget(m, L, what, (size_t)m->D);
    if (w) rms(x, T, (size_t)m->D, w, m->eps, y);
    free(w);
    return w ? AL_OK : AL_ERR;
}

static double silu(double x) { return x / (1 + exp(-x)); }
static double softplus(double x) { return x > 20 ? x : log1p(exp(x)); }

/* The causal depthwise conv1d + bias + SiLU of xbc (T x C) in place (w: C x K). */
static void conv_silu(const RefMamba *m, double *xbc, size_t T, size_t C, const double *w, const double *b) {
    size_t K = (size_t)m->mk;
    double *o = malloc(T * C * sizeof *o);
    for (size_t t = 0; t < T; t++)
        for (size_t c = 0; c < C; c++) {
            double s = b ? b[c] : 0;
            for (size_t k = 0; k < K; k++) {
                long src = (long)t - (long)(K - 1) + (long)k;    /* padding K - 1 on the left, cut to T */
                if (src < 0 || ((m->ablate & REFM_NO_CONV_PAST) && src != (long)t)) continue;
                s += w[c * K + k] * xbc[(size_t)src * C + c];
            }
            o[t * C + c] = silu(s);
        }
    memcpy(xbc, o, T * C * sizeof *o);
    free(o);
}

/* The SSD of head h in its quadratic form: y (T x P, stride ld) from x (stride ldx), B / C of its group (stride
 * ldbc), dt (T), A. */
static void ssd_head(const RefMamba *m, const double *x, size_t ldx, const double *B, const double *C, size_t ldbc,
                     const double *dt, double A, double Dh, size_t T, double *y, size_t ld) {
    size_t P = (size_t)m->mp, N = (size_t)m->mn;
    for (size_t t = 0; t < T; t++)
        for (size_t p = 0; p < P; p++) {
            double acc = 0, seg = 0;                    /* seg: sum_{s < r <= t} dt_r A, built from s = t down */
            for (size_t s = t + 1; s-- > 0;) {
                if (s < t) seg += dt[s + 1] * A;
                if ((m->ablate & REFM_NO_STATE) && s != t) break;
                double cb = 0;
                for (size_t n = 0; n < N; n++) cb += C[t * ldbc + n] * B[s * ldbc + n];
                acc += cb * exp(seg) * dt[s] * x[s * ldx + p];
            }
            y[t * ld + p] = acc + ((m->ablate & REFM_NO_D) ? 0 : Dh) * x[t * ldx + p];
        }
}

/* The gated norm of y (T x I) with gate z (stride ldz) in place: y silu(z), RMS per group, times w. */
static void gated_norm(const RefMamba *m, double *y, const double *z, size_t ldz, size_t T, const double *w) {
    size_t I = (size_t)m->mh * (size_t)m->mp;
    size_t groups = m->nemotron && !(m->ablate & REFM_ONE_NORM_GROUP) ? (size_t)m->mg : 1, gs = I / groups;
    for (size_t t = 0; t < T; t++) {
        double *r = y + t * I;
        for (size_t i = 0; i < I; i++) r[i] *= silu(z[t * ldz + i]);
        for (size_t g = 0; g < groups; g++) {
            double ss = 0;
            for (size_t i = g * gs; i < (g + 1) * gs; i++) ss += r[i] * r[i];
            double inv = 1 / sqrt(ss / (double)gs + m->eps);
            for (size_t i = g * gs; i < (g + 1) * gs; i++) r[i] = w[i] * r[i] * inv;
        }
    }
}

/* The Mamba-2 mixer of layer L (tensors "<sub>.*") on x (T x D) into out (T x D). */
static int mamba(const RefMamba *m, int L, const char *sub, const double *x, size_t T, double *out) {
    size_t H = (size_t)m->mh, P = (size_t)m->mp, G = (size_t)m->mg, N = (size_t)m->mn, I = H * P, C = I + 2 * G * N;
    size_t W = I + C + H, D = (size_t)m->D, per = H / G;
    char n[7][96];
    const char *parts[7] = {"in_proj.weight", "conv1d.weight", "conv1d.bias", "A_log", "D", "dt_bias", "norm.weight"};
    for (int i = 0; i < 7; i++) snprintf(n[i], sizeof n[i], "%s.%s", sub, parts[i]);
    double *p = malloc(T * W * sizeof *p), *y = calloc(T * I, sizeof *y), *dt = malloc(T * sizeof *dt);
    double *cw = tget(m, L, n[1], C * (size_t)m->mk), *cb = m->conv_bias ? tget(m, L, n[2], C) : NULL;
    double *alog = tget(m, L, n[3], H), *Dv = tget(m, L, n[4], H), *dtb = tget(m, L, n[5], H), *nw = tget(m, L, n[6], I);
    int rc = p && y && dt && cw && (cb || !m->conv_bias) && alog && Dv && dtb && nw ? AL_OK : AL_ERR;
    if (rc == AL_OK) rc = lin_t(m, L, n[0], x, T, D, W, p);
    double *xbc = rc == AL_OK ? malloc(T * C * sizeof *xbc) : NULL;
    if (rc == AL_OK && !xbc) rc = AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++) memcpy(xbc + t * C, p + t * W + I, C * sizeof *xbc);
    if (rc == AL_OK) conv_silu(m, xbc, T, C, cw, cb);
    for (size_t h = 0; rc == AL_OK && h < H; h++) {
        for (size_t t = 0; t < T; t++) dt[t] = fmax(softplus(p[t * W + I + C + h] + dtb[h]), m->dt_min);
        size_t g = h / per;
        ssd_head(m, xbc + h * P, C, xbc + I + g * N, xbc + I + G * N + g * N, C, dt, -exp(alog[h]), Dv[h], T, y + h * P, I);
    }
    if (rc == AL_OK) gated_norm(m, y, p, W, T, nw);
    char on[96];
    snprintf(on, sizeof on, "%s.out_proj.weight", sub);
    if (rc == AL_OK) rc = lin_t(m, L, on, y, T, I, D, out);
    free(p); free(y); free(dt); free(cw); free(cb); free(alog); free(Dv); free(dtb); free(nw); free(xbc);
    return rc;
}

/* Causal GQA attention without RoPE of layer L ("<sub>.{q,k,v,o}_proj") on x into out. */
static int attention(const RefMamba *m, int L, const char *sub, const double *x, size_t T, double *out) {
    size_t D = (size_t)m->D, H = (size_t)m->H, G = (size_t)m->G, hd = (size_t)m->hd, rep = H / G;
    double *q = malloc(T * H * hd * sizeof *q), *k = malloc(T * G * hd * sizeof *k), *v = malloc(T * G * hd * sizeof *v);
    double *a = calloc(T * H * hd, sizeof *a), *s = malloc(T * sizeof *s);
    char n[4][96];
    const char *w[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    for (int i = 0; i < 4; i++) snprintf(n[i], sizeof n[i], "%s.%s.weight", sub, w[i]);
    int rc = q && k && v && a && s ? AL_OK : AL_ERR;
    if (rc == AL_OK) rc = lin_t(m, L, n[0], x, T, D, H * hd, q);
    if (rc == AL_OK) rc = lin_t(m, L, n[1], x, T, D, G * hd, k);
    if (rc == AL_OK) rc = lin_t(m, L, n[2], x, T, D, G * hd, v);
    for (size_t h = 0; rc == AL_OK && h < H; h++)
        for (size_t t = 0; t < T; t++) {
            size_t g = h / rep;
            double mx = -INFINITY, z = 0;
            for (size_t j = 0; j <= t; j++) {
                double d = 0;
                for (size_t i = 0; i < hd; i++) d += q[(t * H + h) * hd + i] * k[(j * G + g) * hd + i];
                s[j] = d * m->scale;
                mx = fmax(mx, s[j]);
            }
            for (size_t j = 0; j <= t; j++) z += (s[j] = exp(s[j] - mx));
            for (size_t j = 0; j <= t; j++)
                for (size_t i = 0; i < hd; i++) a[(t * H + h) * hd + i] += s[j] / z * v[(j * G + g) * hd + i];
        }
    if (rc == AL_OK) rc = lin_t(m, L, n[3], a, T, H * hd, D, out);
    free(q); free(k); free(v); free(a); free(s);
    return rc;
}

/* An MLP "<up>" (2F rows [gate ; up] when gated, else F) and "<down>" on x into out (accumulated with weight c). */
static int mlp(const RefMamba *m, int L, const char *up, const char *down, bool gated, size_t F, const double *x,
               size_t T, double c, double *out) {
    size_t D = (size_t)m->D, U = gated ? 2 * F : F;
    double *h = malloc(T * U * sizeof *h), *a = calloc(T * F, sizeof *a), *o = malloc(T * D * sizeof *o);
    int rc = h && a && o ? lin_t(m, L, up, x, T, D, U, h) : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t j = 0; j < F; j++) {
            double g = h[t * U + j];
            a[t * F + j] = gated ? silu(g) * h[t * U + F + j] : (g > 0 ? g * g : 0);   /* SwiGLU / relu2 */
        }
    if (rc == AL_OK) rc = lin_t(m, L, down, a, T, F, D, o);
    for (size_t i = 0; rc == AL_OK && i < T * D; i++) out[i] += c * o[i];
    free(h); free(a); free(o);
    return rc;
}

/* Granite's MoE (top-k of the router logits, softmax over the k) plus the shared MLP on x into out (zeroed first). */
static int granite_ffn(const RefMamba *m, int L, const double *x, size_t T, double *out) {
    size_t D = (size_t)m->D, E = (size_t)m->E, F = (size_t)m->F, k = (size_t)m->topk;
    memset(out, 0, T * D * sizeof *out);
    int rc = mlp(m, L, "shared_mlp.input_linear.weight", "shared_mlp.output_linear.weight", true, (size_t)m->FS, x, T,
                 1.0, out);
    if (rc != AL_OK || E == 0) return rc;
    double *z = malloc(T * E * sizeof *z), *gu = tget(m, L, "block_sparse_moe.input_linear.weight", E * 2 * F * D);
    double *dn = tget(m, L, "block_sparse_moe.output_linear.weight", E * D * F), *h = malloc(2 * F * sizeof *h);
    double *a = malloc(F * sizeof *a);
    rc = z && gu && dn && h && a ? lin_t(m, L, "block_sparse_moe.router.layer.weight", x, T, D, E, z) : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++) {
        int pick[64];
        double lg[64], mx = -INFINITY, sum = 0;
        bool used[256] = {false};
        for (size_t r = 0; r < k && r < 64; r++) {
            int best = -1;
            for (size_t e = 0; e < E; e++)
                if (!used[e] && (best < 0 || z[t * E + e] > z[t * E + (size_t)best])) best = (int)e;
            used[best] = true, pick[r] = best, lg[r] = z[t * E + (size_t)best], mx = fmax(mx, lg[r]);
        }
        for (size_t r = 0; r < k; r++) sum += (lg[r] = exp(lg[r] - mx));
        for (size_t r = 0; r < k; r++) {
            const double *W1 = gu + (size_t)pick[r] * 2 * F * D, *W2 = dn + (size_t)pick[r] * D * F;
            lin(x + t * D, 1, D, W1, 2 * F, h);
            for (size_t j = 0; j < F; j++) a[j] = silu(h[j]) * h[F + j];
            for (size_t o = 0; o < D; o++) {
                double s = 0;
                for (size_t j = 0; j < F; j++) s += W2[o * F + j] * a[j];
                out[t * D + o] += lg[r] / sum * s;
            }
        }
    }
    free(z); free(gu); free(dn); free(h); free(a);
    return rc;
}

/* Nemotron-H's MoE block (NemotronHMoE): sigmoid router scores, the top-k of score + e_score_correction_bias,
 * weights the plain scores renormalised (+1e-20) when norm_topk_prob, x routed_scaling_factor; experts
 * down(relu(up x)^2); plus the shared expert on the same input. Into out (zeroed first). */
static int nemotron_moe(const RefMamba *m, int L, const double *x, size_t T, double *out) {
    size_t D = (size_t)m->D, E = (size_t)m->E, k = (size_t)m->topk, F = (size_t)m->EF;
    memset(out, 0, T * D * sizeof *out);
    int rc = mlp(m, L, "mixer.shared_experts.up_proj.weight", "mixer.shared_experts.down_proj.weight", false,
                 (size_t)m->FS, x, T, 1.0, out);
    double *z = malloc(T * E * sizeof *z), *bias = tget(m, L, "mixer.gate.e_score_correction_bias", E);
    if (rc == AL_OK) rc = z && bias ? lin_t(m, L, "mixer.gate.weight", x, T, D, E, z) : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++) {
        double s[256], sel[256], wsum = 0;
        int pick[64];
        for (size_t e = 0; e < E; e++) {
            s[e] = 1 / (1 + exp(-z[t * E + e]));
            sel[e] = s[e] + ((m->ablate & REFM_NO_ROUTE_BIAS) ? 0 : bias[e]);
        }
        for (size_t r = 0; r < k; r++) {
            int best = -1;
            for (size_t e = 0; e < E; e++)
                if (sel[e] > -INFINITY && (best < 0 || sel[e] > sel[best])) best = (int)e;
            pick[r] = best, sel[best] = -INFINITY, wsum += s[best];
        }
        for (size_t r = 0; rc == AL_OK && r < k; r++) {
            char up[96], dn[96];
            snprintf(up, sizeof up, "mixer.experts.%d.up_proj.weight", pick[r]);
            snprintf(dn, sizeof dn, "mixer.experts.%d.down_proj.weight", pick[r]);
            double wt = s[pick[r]] / (m->norm_topk ? wsum + 1e-20 : 1) * m->route_scale;
            rc = mlp(m, L, up, dn, false, F, x + t * D, 1, wt, out + t * D);
        }
    }
    free(z);
    free(bias);
    return rc;
}

/* h (T x D) += rm * mixer of layer L; Granite then h += rm * (MoE + shared MLP) of the post-attention norm. */
static int layer(const RefMamba *m, int L, double *h, size_t T, double *xn, double *o) {
    size_t D = (size_t)m->D, n = T * D;
    double rm = (m->ablate & REFM_NO_RESIDUAL_MULT) ? 1 : m->resid_mult;
    int rc = norm_t(m, L, m->nemotron ? "norm.weight" : "input_layernorm.weight", h, T, xn);
    const char *sub = m->nemotron ? "mixer" : m->kind[L] == 'M' ? "mamba" : "self_attn";
    if (rc == AL_OK && m->kind[L] == 'M') rc = mamba(m, L, sub, xn, T, o);
    else if (rc == AL_OK && m->kind[L] == '*') rc = attention(m, L, sub, xn, T, o);
    else if (rc == AL_OK && m->kind[L] == 'E') rc = nemotron_moe(m, L, xn, T, o);
    else if (rc == AL_OK) {
        memset(o, 0, n * sizeof *o);
        rc = mlp(m, L, "mixer.up_proj.weight", "mixer.down_proj.weight", false, (size_t)m->F, xn, T, 1.0, o);
    }
    for (size_t i = 0; rc == AL_OK && i < n; i++) h[i] += rm * o[i];
    if (rc != AL_OK || m->nemotron) return rc;
    rc = norm_t(m, L, "post_attention_layernorm.weight", h, T, xn);
    if (rc == AL_OK) rc = granite_ffn(m, L, xn, T, o);
    for (size_t i = 0; rc == AL_OK && i < n; i++) h[i] += rm * o[i];
    return rc;
}

int refm_logits(RefMamba *m, const int *tokens, size_t T, double *logits) {
    size_t D = (size_t)m->D, V = (size_t)m->V;
    char en[96], fn[96];
    snprintf(en, sizeof en, "%s%s", m->prefix, m->nemotron ? "embeddings.weight" : "embed_tokens.weight");
    snprintf(fn, sizeof fn, "%s%s", m->prefix, m->nemotron ? "norm_f.weight" : "norm.weight");
    double *E = tget(m, -1, en, V * D), *h = malloc(T * D * sizeof *h), *xn = malloc(T * D * sizeof *xn);
    double *o = malloc(T * D * sizeof *o), *fw = tget(m, -1, fn, D);
    double *W = m->tied ? E : tget(m, -1, "lm_head.weight", V * D);
    int rc = E && h && xn && o && fw && W ? AL_OK : AL_ERR;
    for (size_t t = 0; rc == AL_OK && t < T; t++)
        for (size_t j = 0; j < D; j++) h[t * D + j] = E[(size_t)tokens[t] * D + j] * m->embed_mult;
    for (int L = 0; rc == AL_OK && L < m->L; L++) rc = layer(m, L, h, T, xn, o);
    if (rc == AL_OK) {
        rms(h, T, D, fw, m->eps, xn);
        lin(xn, T, D, W, V, logits);
        for (size_t i = 0; i < T * V; i++) logits[i] /= m->logits_div;
    }
    if (W != E) free(W);
    free(E); free(h); free(xn); free(o); free(fw);
    return rc;
}

int refm_mean_nll(RefMamba *m, const int *tokens, size_t T, double *nll) {
    size_t V = (size_t)m->V;
    double *z = malloc(T * V * sizeof *z);
    int rc = z ? refm_logits(m, tokens, T, z) : AL_ERR;
    double s = 0;
    for (size_t t = 0; rc == AL_OK && t + 1 < T; t++) {
        double mx = -INFINITY, sum = 0;
        for (size_t v = 0; v < V; v++) mx = fmax(mx, z[t * V + v]);
        for (size_t v = 0; v < V; v++) sum += exp(z[t * V + v] - mx);
        s += mx + log(sum) - z[t * V + (size_t)tokens[t + 1]];
    }
    *nll = T > 1 ? s / (double)(T - 1) : 0;
    free(z);
    return rc;
}
