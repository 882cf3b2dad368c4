/* test_synth.c -- the demo-model generator: every demo variant loads with model_open and has the
 * documented config; every planted head has exactly the documented effective ranks (checked with
 * a dense LAPACK SVD of the explicitly formed fused matrix, independent of the project's own rank
 * code); FP8 / BF16 dequantize within their precision of F32; the shard index is valid; the same
 * seed gives byte-identical files; bad requests fail with clear messages. */
#include "testutil.h"
#include "model.h"
#include "synth.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <lapacke.h>
#include <time.h>

/* ================================================================ dense reference ranks */

/* Singular values (descending, min(m, n) of them) of A (m x k) @ B^T (B: n x k), formed
 * explicitly in double; B == NULL: of A itself. Returns the count, 0 on failure. */
static size_t svals(const Mat *A, const Mat *B, double *s) {
    size_t m = A->rows, k = A->cols, n = B ? B->rows : k;
    double *a = malloc(m * k * sizeof(double)), *f = malloc(m * n * sizeof(double));
    double *b = B ? malloc(n * k * sizeof(double)) : NULL;
    for (size_t i = 0; i < m * k; i++) a[i] = A->data[i];
    if (B) {
        for (size_t i = 0; i < n * k; i++) b[i] = B->data[i];
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)k, 1.0, a, (int)k, b, (int)k, 0.0,
                    f, (int)n);
    } else
        memcpy(f, a, m * k * sizeof(double));
    size_t mn = m < n ? m : n;
    /* the row-major (m x n) array is the column-major (n x m) transpose: same singular values */
    lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', (lapack_int)n, (lapack_int)m, f, (lapack_int)n, s, NULL,
                                     1, NULL, 1);
    free(a);
    free(b);
    free(f);
    return info == 0 ? mn : 0;
}

/* Effective rank: smallest r with sum_{j<=r} s_j^2 >= tau * sum s^2. */
static int eff_rank(const double *s, size_t n, double tau) {
    double tot = 0, c = 0;
    for (size_t i = 0; i < n; i++) tot += s[i] * s[i];
    for (size_t i = 0; i < n; i++) {
        c += s[i] * s[i];
        if (c >= tau * tot) return (int)i + 1;
    }
    return (int)n;
}

/* ================================================================ expected structure */

/* What is planted in a pair (mirrors core/methods/synth.c's header and examples/README.md). */
typedef struct {
    char pat;   /* 'R' random, 'F' flat, 'B' bottleneck, 'L' only low when fused */
    int r;
} Plant;

/* Expected effective ranks at 0.999 and 0.99 of the low side (V or K), the other side (O or Q)
 * and the fused map; -1: not planted. */
typedef struct {
    int low[2], other[2], fused[2];
} Expect;

static Expect expect_of(Plant p, int d) {
    Expect e = {{-1, -1}, {-1, -1}, {-1, -1}};
    switch (p.pat) {
    case 'F': e = (Expect){{d, d}, {d, d}, {d, d}}; break;
    case 'B': e = (Expect){{p.r, p.r}, {d, d}, {p.r, p.r}}; break;
    case 'L':   /* r=4, beta 0.055: 31 / 19; r=3, beta 0.05: 31 / 20 */
        e = p.r == 4 ? (Expect){{31, 19}, {31, 19}, {4, 4}} : (Expect){{31, 20}, {31, 20}, {3, 3}};
        break;
    }
    return e;
}

static Plant r1_vo(int L, int h) {
    switch (L) {
    case 1: return h % 2 == 0 ? (Plant){'B', 6} : (Plant){'F', 0};
    case 2: return (Plant){'L', 4};
    case 3: return h % 2 == 0 ? (Plant){'B', 6} : (Plant){'L', 3};
    case 4: return (Plant){'F', 0};
    default: return (Plant){'R', 0};
    }
}

static Plant r1_qk(int L, int h) {
    switch (L) {
    case 1: return (Plant){'B', 8};
    case 2: return (Plant){'L', 4};
    case 3: return (Plant){'B', 2 * (h + 1)};
    case 4: return (Plant){'F', 0};
    default: return (Plant){'R', 0};
    }
}

static Plant llama_vo(int L, int g) {
    return L == 1 ? (g == 0 ? (Plant){'B', 6} : (Plant){'F', 0}) : L == 2 ? (Plant){'L', 4} : (Plant){'R', 0};
}

static Plant gpt2_vo(int L, int h) {
    return L == 1 ? (h % 2 == 0 ? (Plant){'B', 6} : (Plant){'F', 0}) : L == 2 ? (Plant){'L', 4} : (Plant){'R', 0};
}

static Plant gpt2_qk(int L) { return L == 1 ? (Plant){'B', 8} : L == 2 ? (Plant){'L', 4} : (Plant){'R', 0}; }

/* ================================================================ rank checks */

typedef struct {
    const char *what;     /* variant name for messages */
    bool fp8;             /* FP8: fused-low heads' individual 0.99 ranks are asserted within 2 */
    int n_exact;          /* ranks asserted exactly */
} RankCtx;

/* Checks one pair: low (V or K, m x d), other (O^T or Q, n x d); fused = low other^T. */
static void check_pair(RankCtx *cx, const char *pair, int L, int h, Plant p, const Mat *low, const Mat *oth) {
    int d = (int)low->cols;
    double sl[512], so[512], sf[512];
    size_t nl = svals(low, NULL, sl), no = svals(oth, NULL, so), nf = svals(low, oth, sf);
    CHECK(nl && no && nf, "%s L%d h%d %s: SVD failed", cx->what, L, h, pair);
    if (!nl || !no || !nf) return;
    Expect e = expect_of(p, d);
    static const double taus[2] = {0.999, 0.99};
    for (int t = 0; t < 2; t++) {
        int rl = eff_rank(sl, nl, taus[t]), ro = eff_rank(so, no, taus[t]), rf = eff_rank(sf, nf, taus[t]);
        if (p.pat == 'R') {
            /* random Gaussian: not planted; full rank at 0.999, within 3 of it at 0.99 */
            int lo = t == 0 ? d : d - 3;
            CHECK(rf >= lo && rl >= lo && ro >= lo, "%s L%d h%d %s random: ranks %d %d %d at tau %g", cx->what, L, h,
                  pair, rl, ro, rf, taus[t]);
            if (getenv("SYNTH_VERBOSE"))
                printf("  %s L%d h%d %s random ranks %d %d %d at %g\n", cx->what, L, h, pair, rl, ro, rf, taus[t]);
            continue;
        }
        bool indiv = !(cx->fp8 && p.pat == 'L' && t == 1);
        if (indiv) {
            CHECK(rl == e.low[t], "%s L%d h%d %s: low side rank %d at tau %g, planted %d", cx->what, L, h, pair, rl,
                  taus[t], e.low[t]);
            CHECK(ro == e.other[t], "%s L%d h%d %s: other side rank %d at tau %g, planted %d", cx->what, L, h, pair, ro,
                  taus[t], e.other[t]);
            cx->n_exact += 2;
        } else {
            /* FP8 noise (~7e-4 of each matrix's energy) moves the individual 0.99 ranks of
             * fused-low heads by a step (observed with seed 42: 18-19 for 19, 19-20 for 20) */
            CHECK(abs(rl - e.low[t]) <= 2 && abs(ro - e.other[t]) <= 2,
                  "%s L%d h%d %s: FP8 side ranks %d %d at tau %g, planted %d (+-2 allowed)", cx->what, L, h, pair, rl,
                  ro, taus[t], e.low[t]);
            if (getenv("SYNTH_VERBOSE"))
                printf("  %s L%d h%d %s fp8 side ranks %d %d at %g (planted %d)\n", cx->what, L, h, pair, rl, ro,
                       taus[t], e.low[t]);
        }
        CHECK(rf == e.fused[t], "%s L%d h%d %s: fused rank %d at tau %g, planted %d", cx->what, L, h, pair, rf, taus[t],
              e.fused[t]);
        cx->n_exact++;
    }
    if (p.pat == 'L') {
        /* only low when fused: the product's tail beyond r holds < 1e-4 of the energy, FP8 included */
        double tot = 0, tail = 0;
        for (size_t i = 0; i < nf; i++) { tot += sf[i] * sf[i]; if ((int)i >= p.r) tail += sf[i] * sf[i]; }
        CHECK(tail < 1e-4 * tot, "%s L%d h%d %s: fused tail energy %.2e of the total", cx->what, L,
              h, pair, tail / tot);
    }
    if (p.pat == 'B') {
        /* exact low rank: the tail is zero up to float rounding, in every dtype */
        CHECK(sl[p.r] <= 1e-5 * sl[0], "%s L%d h%d %s: bottleneck tail sigma_%d/sigma_1 = %g", cx->what, L, h, pair,
              p.r + 1, sl[p.r] / sl[0]);
        CHECK(sf[p.r] <= 1e-5 * sf[0], "%s L%d h%d %s: fused tail sigma_%d/sigma_1 = %g", cx->what, L, h, pair,
              p.r + 1, sf[p.r] / sf[0]);
    }
}

/* Views of one head: kind, layer, head, part -> Mat (checked). */
static Mat *view(Model *m, head_kind k, int L, int h, head_part part) {
    Mat *v = NULL;
    int rc = model_head(m, k, L, h, part, &v);
    CHECK(rc == AL_OK && v, "model_head(%d, L%d, h%d): %s", (int)k, L, h, al_errmsg());
    return rc == AL_OK ? v : NULL;
}

/* Checks every head of every layer of an opened demo model against the planted table. */
static void check_ranks(Model *m, synth_kind kind, RankCtx *cx) {
    const ModelConfig *c = &m->cfg;
    for (int L = 0; L < c->n_layers; L++)
        for (int h = 0; h < c->n_heads; h++) {
            int g = cfg_kv_group(c, h);
            Mat *V = view(m, HK_V, L, g, PART_ALL), *O = view(m, HK_O, L, h, PART_ALL);
            Mat *Ot = O ? mat_transpose(O) : NULL;
            Plant vo = kind == SYNTH_DEMO_R1 ? r1_vo(L, h) : kind == SYNTH_DEMO_LLAMA ? llama_vo(L, g) : gpt2_vo(L, h);
            if (V && Ot) check_pair(cx, "VO", L, h, vo, V, Ot);
            mat_free(V);
            mat_free(O);
            mat_free(Ot);
            if (kind == SYNTH_DEMO_LLAMA) continue;   /* full RoPE: QK is not fused */
            head_part part = kind == SYNTH_DEMO_R1 ? PART_NOPE : PART_ALL;
            Mat *K = view(m, HK_K, L, g, part), *Q = view(m, HK_Q, L, h, part);
            Plant qk = kind == SYNTH_DEMO_R1 ? r1_qk(L, h) : gpt2_qk(L);
            if (K && Q) check_pair(cx, "QK", L, h, qk, K, Q);
            mat_free(K);
            mat_free(Q);
        }
}

/* ================================================================ helpers */

/* Byte-compares file `name` in two folders. */
static bool same_file(const char *d1, const char *d2, const char *name) {
    char p1[4096], p2[4096];
    snprintf(p1, sizeof p1, "%s/%s", d1, name);
    snprintf(p2, sizeof p2, "%s/%s", d2, name);
    size_t n1 = 0, n2 = 0;
    char *a = slurp(p1, &n1), *b = slurp(p2, &n2);
    bool same = a && b && n1 == n2 && memcmp(a, b, n1) == 0;
    free(a);
    free(b);
    return same;
}

static bool exists(const char *dir, const char *name) {
    char p[4096];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &sb) == 0;
}

/* Writes a demo into base/name, opens it (the time is printed, not asserted: speed belongs in bench/). */
static Model *make(const char *base, const char *name, const SynthOptions *o) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", base, name);
    double t0 = now();
    int rc = synth_write(o, dir);
    double dt = now() - t0;
    CHECK(rc == AL_OK, "synth_write %s: %s", name, al_errmsg());
    printf("%-16s written in %.3f s\n", name, dt);
    Model *m = NULL;
    if (rc == AL_OK) CHECK_OK(model_open(dir, &m));
    return m;
}

/* ================================================================ tests */

/* Config values of each family as documented. */
static void check_config(const Model *m, synth_kind kind, dt_type dt) {
    const ModelConfig *c = &m->cfg;
    CHECK(c->dtype == dt, "dtype %s, want %s", dt_name(c->dtype), dt_name(dt));
    if (kind == SYNTH_DEMO_R1) {
        CHECK(c->family == FAM_DEEPSEEK, "family %s", model_family_name(c->family));
        CHECK(c->n_layers == 6 && c->n_heads == 8 && c->n_kv_heads == 8 && c->hidden == 320, "dims %d %d %d %d",
              c->n_layers, c->n_heads, c->n_kv_heads, c->hidden);
        CHECK(c->q_lora_rank == 192 && c->kv_lora_rank == 96, "lora %d %d", c->q_lora_rank, c->kv_lora_rank);
        CHECK(c->qk_nope_dim == 32 && c->qk_rope_dim == 16 && c->v_dim == 32, "head dims %d %d %d", c->qk_nope_dim,
              c->qk_rope_dim, c->v_dim);
        CHECK(c->vocab == 256 && c->intermediate == 576, "vocab %d inter %d", c->vocab, c->intermediate);
    } else if (kind == SYNTH_DEMO_LLAMA) {
        CHECK(c->family == FAM_LLAMA, "family %s", model_family_name(c->family));
        CHECK(c->n_layers == 4 && c->n_heads == 8 && c->n_kv_heads == 2 && c->hidden == 256, "dims %d %d %d %d",
              c->n_layers, c->n_heads, c->n_kv_heads, c->hidden);
        CHECK(c->qk_nope_dim == 0 && c->qk_rope_dim == 32 && c->v_dim == 32, "head dims %d %d %d", c->qk_nope_dim,
              c->qk_rope_dim, c->v_dim);
        CHECK(c->rope == ROPE_HALF, "rope %s", rope_layout_name(c->rope));
        CHECK(cfg_kv_group(c, 3) == 0 && cfg_kv_group(c, 4) == 1, "GQA groups of 4");
    } else {
        CHECK(c->family == FAM_GPT2, "family %s", model_family_name(c->family));
        CHECK(c->n_layers == 4 && c->n_heads == 8 && c->n_kv_heads == 8 && c->hidden == 256, "dims %d %d %d %d",
              c->n_layers, c->n_heads, c->n_kv_heads, c->hidden);
        CHECK(c->qk_nope_dim == 32 && c->qk_rope_dim == 0 && c->rope == ROPE_NONE, "head dims %d %d", c->qk_nope_dim,
              c->qk_rope_dim);
        CHECK(c->qkv_bias && c->o_bias && c->tie_embeddings, "gpt2 biases / tied embeddings");
    }
}

/* Every tensor of `low` dequantizes within its precision of the F32 variant `ref`:
 * BF16 |d| <= 2^-8 |w|; FP8 |d| <= 2^-4 |w| + one subnormal step of its block. */
static void check_precision(const Model *ref, const Model *low, const char *what) {
    size_t n = store_count(ref->store), checked = 0;
    CHECK(n > 0, "%s: empty store", what);
    for (size_t i = 0; i < n; i++) {
        const char *name = store_name_at(ref->store, i);
        Mat *a = NULL, *b = NULL;
        if (store_read(ref->store, name, &a) != AL_OK || store_read(low->store, name, &b) != AL_OK) {
            CHECK(0, "%s: reading %s: %s", what, name, al_errmsg());
            mat_free(a);
            continue;
        }
        const st_entry *e;
        const st_file *f;
        dt_type dt = store_entry(low->store, name, &e, &f) == AL_OK ? e->dtype : DT_INVALID;
        double amax = 0, worst = 0;
        for (size_t k = 0; k < a->rows * a->cols; k++) amax = fmax(amax, fabs(a->data[k]));
        for (size_t k = 0; k < a->rows * a->cols; k++) {
            double w = a->data[k], d = fabs((double)b->data[k] - w);
            /* FP8 block scale is a power of two >= amax/448; subnormal step = scale * 2^-9 */
            double tol = dt == DT_BF16 ? ldexp(fabs(w), -8) : ldexp(fabs(w), -4) + amax / 448.0 * 2 * ldexp(1, -9);
            if (dt == DT_F32) tol = 0;
            worst = fmax(worst, d - tol);
        }
        CHECK(worst <= 1e-12 * fmax(amax, 1e-30), "%s: %s (%s) off by %g beyond its precision", what, name, dt_name(dt),
              worst);
        checked++;
        mat_free(a);
        mat_free(b);
    }
    printf("%s: %zu tensors within precision of F32\n", what, checked);
}

/* The sharded index: every weight_map entry is in its file, every shard tensor is listed,
 * total_size is the sum of tensor bytes. */
static void check_index(const char *dir, int shards) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    char *js = slurp(path, NULL);
    CHECK(js != NULL, "no index at %s", path);
    if (!js) return;
    cJSON *root = cJSON_Parse(js);
    cJSON *map = cJSON_GetObjectItem(root, "weight_map");
    cJSON *tot = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "metadata"), "total_size");
    CHECK(cJSON_IsObject(map) && cJSON_IsNumber(tot), "index has weight_map and metadata.total_size");
    size_t listed = cJSON_GetArraySize(map), in_files = 0, bytes = 0;
    for (int s = 0; s < shards; s++) {
        char fname[64], fp[4096];
        snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", s + 1, shards);
        snprintf(fp, sizeof fp, "%s/%s", dir, fname);
        st_file *f = NULL;
        CHECK_OK(st_open(fp, &f));
        if (!f) continue;
        CHECK(st_count(f) > 0, "shard %s is empty", fname);
        for (size_t i = 0; i < st_count(f); i++) {
            const st_entry *e = st_entry_at(f, i);
            cJSON *where = cJSON_GetObjectItem(map, e->name);
            CHECK(cJSON_IsString(where) && strcmp(where->valuestring, fname) == 0, "%s listed in %s, found in %s",
                  e->name, cJSON_IsString(where) ? where->valuestring : "(nothing)", fname);
            bytes += e->end - e->begin;
            in_files++;
        }
        st_close(f);
    }
    CHECK(listed == in_files, "index lists %zu tensors, shards hold %zu", listed, in_files);
    CHECK(cJSON_IsNumber(tot) && (size_t)tot->valuedouble == bytes, "total_size %g, tensor bytes %zu",
          cJSON_IsNumber(tot) ? tot->valuedouble : -1.0, bytes);
    CHECK(!exists(dir, "model.safetensors"), "a sharded model has no model.safetensors");
    cJSON_Delete(root);
    free(js);
}

/* FP8 scale grids: ceil(R/128) x ceil(C/128) and edge blocks present in demo-r1. */
static void check_fp8_layout(const Model *m) {
    static const char *w[] = {"self_attn.q_a_proj.weight", "self_attn.q_b_proj.weight",
                              "self_attn.kv_a_proj_with_mqa.weight", "self_attn.kv_b_proj.weight",
                              "self_attn.o_proj.weight", "mlp.down_proj.weight"};
    int edges = 0;
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
        char name[128], sname[160];
        snprintf(name, sizeof name, "model.layers.2.%s", w[i]);
        snprintf(sname, sizeof sname, "%s_scale_inv", name);
        const st_entry *e, *s;
        const st_file *f;
        if (store_entry(m->store, name, &e, &f) != AL_OK || store_entry(m->store, sname, &s, &f) != AL_OK) {
            CHECK(0, "%s: %s", name, al_errmsg());
            continue;
        }
        CHECK(e->dtype == DT_F8_E4M3 && s->dtype == DT_F32, "%s: dtypes %s / %s", name, dt_name(e->dtype),
              dt_name(s->dtype));
        CHECK(s->shape[0] == (e->shape[0] + 127) / 128 && s->shape[1] == (e->shape[1] + 127) / 128,
              "%s: scale grid %zux%zu for %zux%zu", name, s->shape[0], s->shape[1], e->shape[0], e->shape[1]);
        edges += (e->shape[0] % 128 != 0) + (e->shape[1] % 128 != 0);
    }
    CHECK(edges >= 4, "demo-r1 exercises partial FP8 edge blocks (%d edges)", edges);
    const st_entry *e;
    const st_file *f;
    CHECK(store_entry(m->store, "model.layers.0.input_layernorm.weight", &e, &f) == AL_OK && e->dtype == DT_BF16 &&
              e->ndim == 1,
          "norms stay BF16 and 1-D in the FP8 variant");
    CHECK(!store_has(m->store, "model.layers.0.input_layernorm.weight_scale_inv"), "no scales for norms");
}

int main(void) {
    const char *tmp = test_tmpdir();
    char dir[4096];

    /* ---- names */
    SynthOptions o;
    CHECK(synth_demo_name("demo-r1", &o) && o.kind == SYNTH_DEMO_R1 && o.dtype == DT_F8_E4M3 && o.shards > 1,
          "demo-r1 is FP8 and sharded");
    CHECK(synth_demo_name("demo-r1-f32", &o) && o.dtype == DT_F32, "demo-r1-f32");
    CHECK(synth_demo_name("demo-r1-bf16", &o) && o.dtype == DT_BF16, "demo-r1-bf16");
    CHECK(synth_demo_name("demo-r1-fp8", &o) && o.dtype == DT_F8_E4M3, "demo-r1-fp8");
    CHECK(synth_demo_name("demo-llama", &o) && o.kind == SYNTH_DEMO_LLAMA && o.dtype == DT_BF16, "demo-llama is BF16");
    CHECK(synth_demo_name("demo-llama-f32", &o) && o.dtype == DT_F32, "demo-llama-f32");
    CHECK(synth_demo_name("demo-gpt2", &o) && o.kind == SYNTH_DEMO_GPT2 && o.dtype == DT_F32, "demo-gpt2 is F32");
    CHECK(synth_demo_name("demo-gpt2-bf16", &o) && o.dtype == DT_BF16, "demo-gpt2-bf16");
    CHECK(!synth_demo_name("demo-llama-fp8", &o), "no FP8 llama");
    CHECK(!synth_demo_name("demo-r2", &o) && !synth_demo_name("demo-r1-f16", &o) && !synth_demo_name("ds-r1", &o) &&
              !synth_demo_name("demo-r1x", &o) && !synth_demo_name("", &o),
          "non-demo names are refused");

    /* ---- every variant: written fast, loads, config right, planted ranks exact */
    static const char *variants[] = {"demo-r1-f32", "demo-r1-bf16", "demo-r1", "demo-llama", "demo-llama-f32",
                                     "demo-gpt2", "demo-gpt2-bf16"};
    Model *models[7] = {0};
    for (size_t i = 0; i < 7; i++) {
        CHECK(synth_demo_name(variants[i], &o), "%s", variants[i]);
        Model *m = models[i] = make(tmp, variants[i], &o);
        if (!m) continue;
        check_config(m, o.kind, o.dtype);
        RankCtx cx = {variants[i], o.dtype == DT_F8_E4M3, 0};
        check_ranks(m, o.kind, &cx);
        printf("%-16s %d planted ranks exact\n", variants[i], cx.n_exact);
    }

    /* ---- precision of the lower dtypes against F32 (same seed: same underlying values) */
    if (models[0] && models[1]) check_precision(models[0], models[1], "demo-r1-bf16");
    if (models[0] && models[2]) check_precision(models[0], models[2], "demo-r1 (fp8)");
    if (models[4] && models[3]) check_precision(models[4], models[3], "demo-llama (bf16)");
    if (models[5] && models[6]) check_precision(models[5], models[6], "demo-gpt2-bf16");
    if (models[2]) check_fp8_layout(models[2]);

    /* ---- shards and index */
    snprintf(dir, sizeof dir, "%s/demo-r1", tmp);
    check_index(dir, 3);
    CHECK(models[2] && store_nfiles(models[2]->store) == 3, "demo-r1 opens as 3 shards");
    snprintf(dir, sizeof dir, "%s/demo-llama", tmp);
    CHECK(exists(dir, "model.safetensors") && !exists(dir, "model.safetensors.index.json"), "single-file llama");
    for (size_t i = 0; i < 7; i++) model_free(models[i]);

    /* ---- a GQA model sharded 2 ways loads the same tensors */
    synth_demo_name("demo-llama", &o);
    o.shards = 2;
    snprintf(dir, sizeof dir, "%s/llama-2shards", tmp);
    CHECK_OK(synth_write(&o, dir));
    check_index(dir, 2);
    Model *m2 = NULL;
    CHECK_OK(model_open(dir, &m2));
    if (m2) {
        RankCtx cx = {"demo-llama 2 shards", false, 0};
        check_ranks(m2, SYNTH_DEMO_LLAMA, &cx);
        model_free(m2);
    }

    /* ---- determinism: same seed -> byte-identical files; another seed -> different bytes */
    synth_demo_name("demo-r1", &o);
    char d1[4096], d2[4096], d3[4096];
    snprintf(d1, sizeof d1, "%s/det1", tmp);
    snprintf(d2, sizeof d2, "%s/det2", tmp);
    snprintf(d3, sizeof d3, "%s/det3", tmp);
    CHECK_OK(synth_write(&o, d1));
    CHECK_OK(synth_write(&o, d2));
    o.seed = 7;
    CHECK_OK(synth_write(&o, d3));
    static const char *files[] = {"config.json", "model.safetensors.index.json", "model-00001-of-00003.safetensors",
                                  "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"};
    for (size_t i = 0; i < 5; i++) CHECK(same_file(d1, d2, files[i]), "%s differs between two runs with one seed", files[i]);
    CHECK(!same_file(d1, d3, "model-00002-of-00003.safetensors"), "another seed gives other weights");

    /* ---- bad requests */
    CHECK_ERR(synth_write(&o, d1), "not empty");
    snprintf(dir, sizeof dir, "%s/x", tmp);
    synth_demo_name("demo-llama", &o);
    o.dtype = DT_F8_E4M3;
    CHECK_ERR(synth_write(&o, dir), "only written for the DeepSeek layout");
    o.dtype = DT_F16;
    CHECK_ERR(synth_write(&o, dir), "not offered");
    synth_demo_name("demo-gpt2", &o);
    o.shards = 0;
    CHECK_ERR(synth_write(&o, dir), "shards");
    o.shards = 99;
    CHECK_ERR(synth_write(&o, dir), "shards");
    CHECK(!exists(tmp, "x"), "a failed write leaves nothing behind");
    char cfgpath[4200];
    snprintf(cfgpath, sizeof cfgpath, "%s/config.json", d1);
    synth_demo_name("demo-gpt2", &o);
    CHECK_ERR(synth_write(&o, cfgpath), "not a folder");
    /* an existing empty folder is fine */
    snprintf(dir, sizeof dir, "%s/empty", tmp);
    mkdir(dir, 0755);
    CHECK_OK(synth_write(&o, dir));
    CHECK(exists(dir, "config.json"), "written into an empty folder");
    return check_done();
}
