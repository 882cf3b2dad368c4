/* test_forward_mla.c -- the DeepSeek-V3-layout forward pass on checkpoints written here:
 *  - a Llama model with one KV head (MQA) and the DeepSeek-layout model that is the same network
 *    (q_proj, qk_nope 0, kv latent = V, kv_b = identity per head, the shared RoPE key = K,
 *    qk_latent_layernorm false) give the same logits, with rope_interleave false (rotate_half)
 *    and true (RoPE rows permuted to interleaved pairs);
 *  - a q_lora + latent-RMSNorm model: prefill equals decoding, and the Q / K-NoPE / V hooks equal
 *    the latents times model.h's per-head views;
 *  - a mixture-of-experts layer is refused by name. */
#define _GNU_SOURCE
#include "check.h"
#include "forward.h"

#include <stdio.h>
#include <string.h>

enum { D = 32, H = 4, HD = 8, FF = 48, NV = 64, NL = 2 };

static unsigned long rng = 12345;
static float rnd(void) {
    rng = rng * 6364136223846793005ul + 1442695040888963407ul;
    return ((float)((rng >> 33) & 0xFFFFFF) / (float)0x1000000 - 0.5f) * 0.6f;
}

static float *rnd_mat(size_t n) {
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = rnd();
    return p;
}

static void put(st_writer *w, const char *name, size_t rows, size_t cols, const float *data) {
    size_t shape[2] = {rows, cols};
    int nd = cols ? 2 : 1;
    if (!cols) shape[0] = rows;
    CHECK_OK(st_writer_add(w, name, DT_F32, nd, shape, data, rows * (cols ? cols : 1) * sizeof(float)));
}

static void write_model(st_writer *w, const char *dir, const char *config) {
    mkdir(dir, 0755);
    char *p = al_asprintf("%s/model.safetensors", dir), *c = al_asprintf("%s/config.json", dir);
    CHECK_OK(st_writer_write(w, p));
    CHECK_OK(al_write_file_atomic(c, config, strlen(config)));
    free(p);
    free(c);
    st_writer_free(w);
}

/* The network's weights (shared by both layouts). */
typedef struct {
    float *emb, *lm, *fnorm;
    float *n1[NL], *n2[NL], *q[NL], *k[NL], *v[NL], *o[NL], *g[NL], *u[NL], *d[NL];
} Net;

static void net_new(Net *n) {
    n->emb = rnd_mat(NV * D);
    n->lm = rnd_mat(NV * D);
    n->fnorm = rnd_mat(D);
    for (int L = 0; L < NL; L++) {
        n->n1[L] = rnd_mat(D); n->n2[L] = rnd_mat(D);
        for (int i = 0; i < D; i++) { n->n1[L][i] += 1; n->n2[L][i] += 1; }
        n->q[L] = rnd_mat(H * HD * D); n->k[L] = rnd_mat(HD * D); n->v[L] = rnd_mat(HD * D);
        n->o[L] = rnd_mat(D * H * HD); n->g[L] = rnd_mat(FF * D); n->u[L] = rnd_mat(FF * D); n->d[L] = rnd_mat(D * FF);
    }
}

static void net_free(Net *n) {
    free(n->emb); free(n->lm); free(n->fnorm);
    for (int L = 0; L < NL; L++) {
        free(n->n1[L]); free(n->n2[L]); free(n->q[L]); free(n->k[L]); free(n->v[L]); free(n->o[L]);
        free(n->g[L]); free(n->u[L]); free(n->d[L]);
    }
}

static void put_common(st_writer *w, const Net *n, int L) {
    char name[128];
#define NAME(s) (snprintf(name, sizeof name, "model.layers.%d.%s", L, s), name)
    put(w, NAME("input_layernorm.weight"), D, 0, n->n1[L]);
    put(w, NAME("post_attention_layernorm.weight"), D, 0, n->n2[L]);
    put(w, NAME("self_attn.o_proj.weight"), D, H * HD, n->o[L]);
    put(w, NAME("mlp.gate_proj.weight"), FF, D, n->g[L]);
    put(w, NAME("mlp.up_proj.weight"), FF, D, n->u[L]);
    put(w, NAME("mlp.down_proj.weight"), D, FF, n->d[L]);
#undef NAME
}

static void write_llama(const Net *n, const char *dir) {
    st_writer *w = st_writer_new();
    put(w, "model.embed_tokens.weight", NV, D, n->emb);
    put(w, "lm_head.weight", NV, D, n->lm);
    put(w, "model.norm.weight", D, 0, n->fnorm);
    char name[128];
    for (int L = 0; L < NL; L++) {
        put_common(w, n, L);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj.weight", L);
        put(w, name, H * HD, D, n->q[L]);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_proj.weight", L);
        put(w, name, HD, D, n->k[L]);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.v_proj.weight", L);
        put(w, name, HD, D, n->v[L]);
    }
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\":\"llama\",\"hidden_size\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":1,"
             "\"head_dim\":%d,\"intermediate_size\":%d,\"vocab_size\":%d,\"num_hidden_layers\":%d,\"rms_norm_eps\":1e-5,"
             "\"rope_theta\":10000.0,\"max_position_embeddings\":128,\"tie_word_embeddings\":false,\"hidden_act\":\"silu\"}",
             D, H, HD, FF, NV, NL);
    write_model(w, dir, cfg);
}

/* Row r of a rotate_half head as the DeepSeek interleaved layout stores it: row 2j <- j,
 * row 2j+1 <- j + HD/2. */
static int interleave_src(int r) { return r % 2 == 0 ? r / 2 : r / 2 + HD / 2; }

static void write_mla(const Net *n, const char *dir, bool interleave) {
    st_writer *w = st_writer_new();
    put(w, "model.embed_tokens.weight", NV, D, n->emb);
    put(w, "lm_head.weight", NV, D, n->lm);
    put(w, "model.norm.weight", D, 0, n->fnorm);
    char name[128];
    float *q = malloc(H * HD * D * sizeof *q), *kva = malloc(2 * HD * D * sizeof *kva);
    float *kvb = calloc(H * HD * HD, sizeof *kvb);
    for (int h = 0; h < H; h++)
        for (int j = 0; j < HD; j++) kvb[(h * HD + j) * HD + j] = 1;         /* V of head h = the latent */
    for (int L = 0; L < NL; L++) {
        put_common(w, n, L);
        for (int h = 0; h < H; h++)
            for (int r = 0; r < HD; r++) {
                int src = interleave ? interleave_src(r) : r;
                memcpy(q + (h * HD + r) * D, n->q[L] + (h * HD + src) * D, D * sizeof *q);
            }
        memcpy(kva, n->v[L], HD * D * sizeof *kva);                          /* [c_kv = x W_V | k_pe = x W_K] */
        for (int r = 0; r < HD; r++)
            memcpy(kva + (HD + r) * D, n->k[L] + (interleave ? interleave_src(r) : r) * D, D * sizeof *kva);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj.weight", L);
        put(w, name, H * HD, D, q);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.kv_a_proj_with_mqa.weight", L);
        put(w, name, 2 * HD, D, kva);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.kv_b_proj.weight", L);
        put(w, name, H * HD, HD, kvb);
    }
    free(q); free(kva); free(kvb);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\":\"deepseek_v3\",\"hidden_size\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
             "\"q_lora_rank\":null,\"kv_lora_rank\":%d,\"qk_nope_head_dim\":0,\"qk_rope_head_dim\":%d,\"v_head_dim\":%d,"
             "\"intermediate_size\":%d,\"vocab_size\":%d,\"num_hidden_layers\":%d,\"rms_norm_eps\":1e-5,"
             "\"rope_theta\":10000.0,\"max_position_embeddings\":128,\"tie_word_embeddings\":false,"
             "\"qk_latent_layernorm\":false,\"rope_interleave\":%s,\"n_routed_experts\":null}",
             D, H, H, HD, HD, HD, FF, NV, NL, interleave ? "true" : "false");
    write_model(w, dir, cfg);
}

static float *logits_of(const char *dir, const int *ids, size_t T) {
    Model *m = NULL;
    Forward *f = NULL;
    float *z = NULL;
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (f) {
        z = malloc(T * NV * sizeof *z);
        CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, z));
    }
    fwd_free(f);
    model_free(m);
    return z;
}

static void test_equivalence(const char *tmp) {
    Net n;
    net_new(&n);
    char *dl = al_asprintf("%s/llama-mqa", tmp), *dh = al_asprintf("%s/mla-half", tmp), *di = al_asprintf("%s/mla-inter", tmp);
    write_llama(&n, dl);
    write_mla(&n, dh, false);
    write_mla(&n, di, true);
    int ids[20];
    for (int i = 0; i < 20; i++) ids[i] = (i * 37 + 5) % NV;
    float *a = logits_of(dl, ids, 20), *b = logits_of(dh, ids, 20), *c = logits_of(di, ids, 20);
    if (a && b && c) {
        double db = 0, dc = 0, sc = 0;
        for (size_t i = 0; i < 20 * NV; i++) {
            db = fmax(db, fabs(a[i] - b[i]));
            dc = fmax(dc, fabs(a[i] - c[i]));
            sc = fmax(sc, fabs(a[i]));
        }
        CHECK(sc > 0.1, "logits scale %g", sc);
        CHECK(db < 1e-4 * (1 + sc), "Llama MQA vs MLA (rotate_half): %g", db);
        CHECK(dc < 1e-4 * (1 + sc), "Llama MQA vs MLA (interleaved RoPE): %g", dc);
    }
    free(a); free(b); free(c);
    free(dl); free(dh); free(di);
    net_free(&n);
}

/* ---------------------------------------------------------------- q_lora + latent norms */

enum { QL = 16, KL = 12, NOPE = 4, ROPE = 4, DV = 6 };

static void write_lora(const char *dir, bool moe) {
    st_writer *w = st_writer_new();
    float *p;
    char name[160];
#define PUT(s, r, c) do { snprintf(name, sizeof name, "model.layers.%d.%s", L, s); p = rnd_mat((size_t)(r) * ((c) ? (c) : 1)); \
                          put(w, name, r, c, p); free(p); } while (0)
    p = rnd_mat(NV * D); put(w, "model.embed_tokens.weight", NV, D, p); free(p);
    p = rnd_mat(D); put(w, "model.norm.weight", D, 0, p); free(p);
    for (int L = 0; L < NL; L++) {
        PUT("input_layernorm.weight", D, 0);
        PUT("post_attention_layernorm.weight", D, 0);
        PUT("self_attn.q_a_proj.weight", QL, D);
        PUT("self_attn.q_a_layernorm.weight", QL, 0);
        PUT("self_attn.q_b_proj.weight", H * (NOPE + ROPE), QL);
        PUT("self_attn.kv_a_proj_with_mqa.weight", KL + ROPE, D);
        PUT("self_attn.kv_a_layernorm.weight", KL, 0);
        PUT("self_attn.kv_b_proj.weight", H * (NOPE + DV), KL);
        PUT("self_attn.o_proj.weight", D, H * DV);
        if (moe && L == 1) {
            PUT("mlp.experts.0.gate_proj.weight", FF, D);
            continue;
        }
        PUT("mlp.gate_proj.weight", FF, D);
        PUT("mlp.up_proj.weight", FF, D);
        PUT("mlp.down_proj.weight", D, FF);
    }
#undef PUT
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\":\"deepseek_v3\",\"hidden_size\":%d,\"num_attention_heads\":%d,\"q_lora_rank\":%d,"
             "\"kv_lora_rank\":%d,\"qk_nope_head_dim\":%d,\"qk_rope_head_dim\":%d,\"v_head_dim\":%d,"
             "\"intermediate_size\":%d,\"vocab_size\":%d,\"num_hidden_layers\":%d,\"rms_norm_eps\":1e-6,"
             "\"rope_theta\":10000.0,\"max_position_embeddings\":64,\"tie_word_embeddings\":true,"
             "\"n_routed_experts\":%d,\"first_k_dense_replace\":1,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4.0,"
             "\"original_max_position_embeddings\":16,\"beta_fast\":32,\"beta_slow\":1,\"mscale\":1.0,\"mscale_all_dim\":1.0}}",
             D, H, QL, KL, NOPE, ROPE, DV, FF, NV, NL, moe ? 4 : 0);
    write_model(w, dir, cfg);
}

typedef struct {
    double *ql, *kvl, *q, *k, *v;
    size_t T;
} lgrab;

static void copy_act(double **dst, const FwdAct *a, size_t T) {
    size_t wd = a->heads * a->head_dim;
    if (!*dst) *dst = calloc(T * wd, sizeof **dst);
    for (size_t t = 0; t < a->T; t++)
        for (size_t j = 0; j < wd; j++) (*dst)[(a->t0 + t) * wd + j] = fwd_act_row(a, t, 0)[j];
}

static int lgrab_fn(const FwdAct *a, void *ud) {
    lgrab *g = ud;
    if (a->layer != 1) return AL_OK;
    if (a->kind == FWD_Q_LATENT) copy_act(&g->ql, a, g->T);
    if (a->kind == FWD_KV_LATENT) copy_act(&g->kvl, a, g->T);
    if (a->kind == FWD_Q) copy_act(&g->q, a, g->T);
    if (a->kind == FWD_K) copy_act(&g->k, a, g->T);
    if (a->kind == FWD_V) copy_act(&g->v, a, g->T);
    return AL_OK;
}

/* max |in @ W - act| over rows and the head's columns [c0, c0 + W->cols) of width `stride`. */
static double view_err(const double *in, size_t din, const Mat *W, const double *act, size_t stride, size_t c0, size_t T) {
    double mx = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < W->cols; j++) {
            double s = 0;
            for (size_t i = 0; i < din; i++) s += in[t * din + i] * *mat_at(W, i, j);
            mx = fmax(mx, fabs(s - act[t * stride + c0 + j]));
        }
    return mx;
}

static void test_lora(const char *tmp) {
    char *dir = al_asprintf("%s/mla-lora", tmp);
    write_lora(dir, false);
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(dir, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    free(dir);
    if (!f) { model_free(m); return; }
    enum { T = 12 };
    int ids[T];
    for (int i = 0; i < T; i++) ids[i] = (i * 11 + 3) % NV;
    lgrab g = {.T = T};
    FwdHooks hk = {.mask = FWD_Q_LATENT | FWD_KV_LATENT | FWD_Q | FWD_K | FWD_V, .fn = lgrab_fn, .ud = &g, .chunk = 5};
    fwd_set_hooks(f, &hk);
    float *all = malloc(T * NV * sizeof *all), *one = malloc(NV * sizeof *one);
    CHECK_OK(fwd_run(f, ids, T, FWD_LOGITS_ALL, all));
    fwd_set_hooks(f, NULL);
    double maxd = 0, fin = 0;
    fwd_reset(f);
    for (int t = 0; t < T; t++) {
        CHECK_OK(fwd_run(f, ids + t, 1, FWD_LOGITS_LAST, one));
        for (int j = 0; j < NV; j++) { maxd = fmax(maxd, fabs(one[j] - all[t * NV + j])); fin += isfinite(one[j]) ? 0 : 1; }
    }
    CHECK(fin == 0 && maxd < 1e-4, "MLA prefill vs decode: %g (non-finite %g)", maxd, fin);
    if (g.ql && g.kvl && g.q && g.k && g.v) {
        double eq = 0, ek = 0, ev = 0;
        for (int h = 0; h < H; h++) {
            Mat *W = NULL;
            CHECK_OK(model_head(m, HK_Q, 1, h, PART_NOPE, &W));
            if (W) eq = fmax(eq, view_err(g.ql, QL, W, g.q, H * (NOPE + ROPE), (size_t)h * (NOPE + ROPE), T));
            mat_free(W);
            CHECK_OK(model_head(m, HK_K, 1, h, PART_NOPE, &W));
            if (W) ek = fmax(ek, view_err(g.kvl, KL, W, g.k, H * (NOPE + ROPE), (size_t)h * (NOPE + ROPE), T));
            mat_free(W);
            CHECK_OK(model_head(m, HK_V, 1, h, PART_ALL, &W));
            if (W) ev = fmax(ev, view_err(g.kvl, KL, W, g.v, H * DV, (size_t)h * DV, T));
            mat_free(W);
        }
        CHECK(eq < 1e-4 && ek < 1e-4 && ev < 1e-4, "MLA hooks vs head views: q %g k %g v %g", eq, ek, ev);
        /* The RoPE part of K (before RoPE) is the same in every head. */
        double shared = 0;
        for (int t = 0; t < T; t++)
            for (int h = 1; h < H; h++)
                for (int j = 0; j < ROPE; j++)
                    shared = fmax(shared, fabs(g.k[t * H * (NOPE + ROPE) + h * (NOPE + ROPE) + NOPE + j] -
                                               g.k[t * H * (NOPE + ROPE) + NOPE + j]));
        CHECK(shared == 0, "shared RoPE key differs across heads by %g", shared);
    } else
        CHECK(0, "MLA hooks did not deliver every kind");
    free(g.ql); free(g.kvl); free(g.q); free(g.k); free(g.v);
    free(all);
    free(one);
    fwd_free(f);
    model_free(m);

    char *dmoe = al_asprintf("%s/mla-moe", tmp);
    write_lora(dmoe, true);
    m = NULL;
    CHECK_OK(model_open(dmoe, &m));
    if (m) CHECK_ERR(fwd_new(m, NULL, &f), "layer 1 is a mixture-of-experts layer");
    model_free(m);
    free(dmoe);
}

/* Streaming (a zero-byte budget) gives the same logits as resident weights. */
static void test_streaming(const char *tmp) {
    char *dir = al_asprintf("%s/mla-lora", tmp);
    Model *m = NULL;
    Forward *a = NULL, *b = NULL;
    CHECK_OK(model_open(dir, &m));
    free(dir);
    FwdOptions tiny = {.mem_budget = 1};
    if (m) { CHECK_OK(fwd_new(m, NULL, &a)); CHECK_OK(fwd_new(m, &tiny, &b)); }
    if (a && b) {
        CHECK(!fwd_streaming(a) && fwd_streaming(b), "streaming flags");
        int ids[6] = {1, 2, 3, 4, 5, 6};
        float za[NV], zb[NV];
        CHECK_OK(fwd_run(a, ids, 6, FWD_LOGITS_LAST, za));
        CHECK_OK(fwd_run(b, ids, 6, FWD_LOGITS_LAST, zb));
        CHECK(memcmp(za, zb, sizeof za) == 0, "streamed logits differ");
    }
    fwd_free(a);
    fwd_free(b);
    model_free(m);
}

int main(void) {
    const char *tmp = test_tmpdir();
    test_equivalence(tmp);
    test_lora(tmp);
    test_streaming(tmp);
    return check_done();
}
