/* test_export.c -- round trips of FaRR exports: attnlab loads what it exported, the exported fused
 * maps equal the truncated ones (hf: queries scaled by q_scale), every untouched tensor is
 * byte-identical (FP8 scales included), factors and manifest are written, and the refusals
 * (source folder, non-empty folder, hf on a config that cannot express the shapes). Format dense:
 * the factors format's weights without side files, its fused maps confirmed by farr_dense_check
 * (which fails on a manifest claiming lower ranks), and a dense Llama export runs the truncated
 * model built in memory from the plan. */
#include "check.h"
#include "export.h"
#include "forward.h"
#include "synth.h"

#include <cjson/cJSON.h>
#include <unistd.h>

static const char *tmp_root;

static char *demo(const char *name) {
    static int serial;
    SynthOptions opt;
    CHECK(synth_demo_name(name, &opt), "demo name %s", name);
    char *dir = al_asprintf("%s/src-%s-%d", tmp_root, name, serial++);
    CHECK_OK(synth_write(&opt, dir));
    return dir;
}

static Model *open_or_fail(const char *dir) {
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    return m;
}

/* The truncated map of query head h from the plan, dense (double): VO shared @ head, QK head @
 * sharedᵀ. */
static double *plan_map(const FarrPlan *p, const ModelConfig *c, int L, int h, size_t *m, size_t *n) {
    int idx;
    const FarrGroup *g = farr_plan_head(p, c, L, h, &idx);
    const Mat *S = g->shared, *H = g->head[idx];
    if (p->opts.kind == FARR_VO) {
        *m = S->rows; *n = H->cols;
        double *F = calloc(*m * *n, sizeof(double));
        for (size_t i = 0; i < *m; i++)
            for (size_t a = 0; a < S->cols; a++)
                for (size_t j = 0; j < *n; j++) F[i * *n + j] += (double)S->data[i * S->cols + a] * H->data[a * H->cols + j];
        return F;
    }
    *m = H->rows; *n = S->rows;
    double *F = calloc(*m * *n, sizeof(double));
    for (size_t i = 0; i < *m; i++)
        for (size_t j = 0; j < *n; j++) {
            double v = 0;
            for (size_t a = 0; a < H->cols; a++) v += (double)H->data[i * H->cols + a] * S->data[j * S->cols + a];
            F[i * *n + j] = v;
        }
    return F;
}

/* The fused map of query head h read back from a loaded model. */
static double *model_map(Model *m, farr_kind kind, int L, int h, size_t *rows, size_t *cols) {
    Mat *A = NULL, *B = NULL;
    spectra_op op;
    if (farr_head_factors(m, kind, L, h, FARR_NO_OFFSET, &A, &B, &op) != AL_OK) {
        CHECK(0, "factors of exported head: %s", al_errmsg());
        return NULL;
    }
    *rows = A->rows;
    *cols = op == SPECTRA_AB ? B->cols : B->rows;
    double *F = calloc(*rows * *cols, sizeof(double));
    for (size_t i = 0; i < *rows; i++)
        for (size_t a = 0; a < A->cols; a++)
            for (size_t j = 0; j < *cols; j++)
                F[i * *cols + j] += (double)A->data[i * A->cols + a] *
                                    (op == SPECTRA_AB ? B->data[a * B->cols + j] : B->data[j * B->cols + a]);
    mat_free(A); mat_free(B);
    return F;
}

/* Worst relative Frobenius difference over the plan's heads between exported and scale x plan. */
static double compare_maps(Model *exp, const FarrPlan *p, const ModelConfig *c, double scale) {
    double worst = 0;
    for (int L = p->lo; L <= p->hi; L++)
        for (int h = 0; h < c->n_heads; h++) {
            size_t m1, n1, m2 = 0, n2 = 0;
            double *F1 = plan_map(p, c, L, h, &m1, &n1), *F2 = model_map(exp, p->opts.kind, L, h, &m2, &n2);
            if (!F2 || m1 != m2 || n1 != n2) {
                CHECK(0, "layer %d head %d: exported map %zux%zu vs plan %zux%zu", L, h, m2, n2, m1, n1);
                free(F1); free(F2);
                return 1e9;
            }
            double d = 0, t = 0;
            for (size_t i = 0; i < m1 * n1; i++) { d += (F2[i] - scale * F1[i]) * (F2[i] - scale * F1[i]); t += F1[i] * F1[i] * scale * scale; }
            double e = t > 0 ? sqrt(d / t) : sqrt(d);
            if (e > worst) worst = e;
            free(F1); free(F2);
        }
    return worst;
}

/* Every tensor of src not matched by `rewritten` is byte-identical in dst (same dtype, shape,
 * bytes); returns how many were compared. Rewritten ones must exist in dst. */
static size_t check_untouched(Model *src, Model *dst, bool (*rewritten)(const char *name)) {
    size_t same = 0, n = store_count(src->store), dropped = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = store_name_at(src->store, i);
        const st_entry *e1, *e2;
        const st_file *f1, *f2;
        CHECK(name != NULL, "tensor %zu has a name", i);
        if (!name) continue;
        CHECK_OK(store_entry(src->store, name, &e1, &f1));
        if (store_entry(dst->store, name, &e2, &f2) != AL_OK) {
            /* the scales of an FP8 weight re-encoded in another dtype are dropped */
            char w[256];
            size_t k = strlen(name) > 10 ? strlen(name) - 10 : 0;
            snprintf(w, sizeof w, "%.*s", (int)k, name);
            bool gone = rewritten(name) && !strcmp(name + k, "_scale_inv") && store_entry(dst->store, w, &e2, &f2) == AL_OK &&
                        e2->dtype != DT_F8_E4M3;
            al_err_clear();
            CHECK(gone, "export lacks %s", name);
            dropped += gone;
            continue;
        }
        if (rewritten(name)) continue;
        bool eq = e1->dtype == e2->dtype && e1->ndim == e2->ndim && e1->end - e1->begin == e2->end - e2->begin &&
                  memcmp(e1->shape, e2->shape, sizeof e1->shape) == 0 &&
                  memcmp(st_data(f1, e1), st_data(f2, e2), e1->end - e1->begin) == 0;
        CHECK(eq, "untouched tensor %s is not byte-identical", name);
        same += eq;
    }
    CHECK(store_count(dst->store) + dropped == n, "export has %zu tensors, source %zu (%zu scales dropped)",
          store_count(dst->store), n, dropped);
    return same;
}

static bool mla_vo_qk(const char *name) {
    return strstr(name, "kv_b_proj") || strstr(name, "o_proj") || strstr(name, "q_b_proj");
}
static bool mla_vo_l123(const char *name) {
    bool layer = strstr(name, "layers.1.") || strstr(name, "layers.2.") || strstr(name, "layers.3.");
    return layer && (strstr(name, "kv_b_proj") || strstr(name, "o_proj"));
}
static bool llama_vo_l12(const char *name) {
    bool layer = strstr(name, "layers.1.") || strstr(name, "layers.2.");
    return layer && (strstr(name, "v_proj") || strstr(name, "o_proj"));
}
static bool gpt2_attn_l1(const char *name) { return strstr(name, "h.1.attn.") != NULL; }

static cJSON *read_manifest(const char *dir) {
    char *path = al_asprintf("%s/farr_manifest.json", dir);
    FILE *fp = fopen(path, "rb");
    free(path);
    if (!fp) { CHECK(0, "no manifest in %s", dir); return NULL; }
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    CHECK(j != NULL, "manifest is JSON");
    return j;
}

/* ---------------------------------------------------------------- DeepSeek layout, hf */

static void test_hf_f32(void) {
    char *src = demo("demo-r1-f32");
    Model *m = open_or_fail(src);
    if (!m) { free(src); return; }
    const ModelConfig *c = &m->cfg;
    FarrPlan *vo = NULL, *qk = NULL;
    FarrTruncOpts ov = { .kind = FARR_VO, .by_rank = true, .rank = 8, .policy = FARR_POLICY_MODEL_MAX, .layer_lo = 0, .layer_hi = -1 };
    FarrTruncOpts oq = { .kind = FARR_QK, .by_rank = true, .rank = 12, .policy = FARR_POLICY_MODEL_MAX, .layer_lo = 0, .layer_hi = -1 };
    CHECK_OK(farr_truncate(m, &ov, &vo));
    CHECK_OK(farr_truncate(m, &oq, &qk));
    CHECK(export_hf_refusal(m, vo, qk) == NULL, "hf fits a uniform all-layer truncation");
    char *dst = al_asprintf("%s/out-hf", tmp_root);
    ExportOpts eo = { .format = EXPORT_AUTO };
    ExportReport rep;
    CHECK_OK(farr_export(m, vo, qk, dst, &eo, &rep));
    CHECK(rep.format == EXPORT_HF, "auto picks hf for DeepSeek layout");
    double qs = sqrt((12.0 + c->qk_rope_dim) / (c->qk_nope_dim + c->qk_rope_dim));
    CHECK_NEAR(rep.q_scale, qs, 1e-12);
    Model *e = open_or_fail(dst);
    if (e) {
        CHECK(e->cfg.v_dim == 8 && e->cfg.qk_nope_dim == 12, "exported config v %d nope %d", e->cfg.v_dim, e->cfg.qk_nope_dim);
        CHECK(store_nfiles(e->store) == store_nfiles(m->store), "shards kept (%zu)", store_nfiles(e->store));
        double wv = compare_maps(e, vo, c, 1.0), wq = compare_maps(e, qk, c, qs);
        CHECK(wv < 1e-6, "exported VO maps equal the truncated ones (%.3g)", wv);
        CHECK(wq < 1e-6, "exported QK maps equal q_scale x the truncated ones (%.3g)", wq);
        /* The RoPE query columns are the source's, times q_scale. */
        Mat *r1 = NULL, *r2 = NULL;
        CHECK_OK(model_head(m, HK_Q, 2, 3, PART_ROPE, &r1));
        CHECK_OK(model_head(e, HK_Q, 2, 3, PART_ROPE, &r2));
        if (r1 && r2) {
            double d = 0;
            for (size_t i = 0; i < r1->rows * r1->cols; i++) d = fmax(d, fabs(r2->data[i] - qs * r1->data[i]));
            CHECK(d < 1e-6, "rope query rows scaled (%.3g)", d);
        }
        mat_free(r1); mat_free(r2);
        size_t same = check_untouched(m, e, mla_vo_qk);
        CHECK(same > 20, "%zu tensors copied bit for bit", same);
        printf("hf export: %zu tensors byte-identical, VO err %.3g, QK err %.3g\n", same, wv, wq);
        /* Ranks of the exported model: VO fused rank <= 8 everywhere. */
        FarrLayer *l = NULL;
        CHECK_OK(farr_layer_compute(e, FARR_VO, 1, FARR_NO_OFFSET, &l));
        if (l) for (int h = 0; h < l->n_heads; h++) CHECK(l->fused[h]->p == 8, "exported head dim 8");
        farr_layer_free(l);
        model_free(e);
    }
    cJSON *j = read_manifest(dst);
    if (j) {
        CHECK(strcmp(cJSON_GetObjectItem(j, "format")->valuestring, "hf") == 0, "manifest format");
        cJSON *tr = cJSON_GetObjectItem(j, "truncations");
        CHECK(cJSON_GetArraySize(tr) == 2, "two truncations in the manifest");
        cJSON *t0 = cJSON_GetArrayItem(tr, 0);
        CHECK((size_t)cJSON_GetObjectItem(t0, "params_after")->valuedouble == vo->params_after, "manifest params");
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(t0, "per_layer")) == c->n_layers, "per-layer entries");
        CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "config_changes"), "v_head_dim")->valueint == 8, "config change");
        cJSON_Delete(j);
    }
    /* Refusals: the source folder, a folder inside it, a non-empty folder without force. */
    CHECK_ERR(farr_export(m, vo, qk, src, &eo, NULL), "never writes into");
    char *inside = al_asprintf("%s/sub", src);
    CHECK_ERR(farr_export(m, vo, qk, inside, &eo, NULL), "inside");
    CHECK(access(inside, F_OK) != 0, "nothing created inside the source");
    CHECK_ERR(farr_export(m, vo, qk, dst, &eo, NULL), "not empty");
    eo.force = true;
    CHECK_OK(farr_export(m, vo, qk, dst, &eo, NULL));
    CHECK_ERR(farr_export(m, NULL, NULL, dst, &eo, NULL), "nothing to export");
    free(inside);
    farr_plan_free(vo); farr_plan_free(qk);
    model_free(m);
    free(src); free(dst);
}

/* ---------------------------------------------------------------- FP8, partial range: factors */

static void test_factors_fp8(void) {
    char *src = demo("demo-r1");
    Model *m = open_or_fail(src);
    if (!m) { free(src); return; }
    const ModelConfig *c = &m->cfg;
    CHECK(c->dtype == DT_F8_E4M3, "demo-r1 is FP8");
    FarrPlan *vo = NULL;
    FarrTruncOpts ov = { .kind = FARR_VO, .tau = 0.999, .policy = FARR_POLICY_HEAD, .layer_lo = 1, .layer_hi = 3 };
    CHECK_OK(farr_truncate(m, &ov, &vo));
    char *dst = al_asprintf("%s/out-fp8", tmp_root);
    ExportOpts eo = { .format = EXPORT_HF };
    CHECK_ERR(farr_export(m, vo, NULL, dst, &eo, NULL), "covers layers 1-3");
    CHECK(access(dst, F_OK) != 0, "a refused export writes nothing");
    eo.format = EXPORT_AUTO;
    ExportReport rep;
    CHECK_OK(farr_export(m, vo, NULL, dst, &eo, &rep));
    CHECK(rep.format == EXPORT_FACTORS, "auto falls back to factors");
    Model *e = open_or_fail(dst);
    if (e) {
        CHECK(e->cfg.dtype == DT_F8_E4M3 && e->cfg.v_dim == c->v_dim, "dtype and config kept");
        double w = compare_maps(e, vo, c, 1.0);
        CHECK(w < 0.01, "maps re-encoded in BF16 (the default for FP8) close to the truncated ones (%.3g)", w);
        printf("FP8 source, BF16 re-encoding: worst relative map error %.3g\n", w);
        size_t same = check_untouched(m, e, mla_vo_l123);
        CHECK(same > 30, "%zu tensors (FP8 scales included) copied bit for bit", same);
        /* Bottleneck heads of layer 1 keep their planted rank after the round trip. */
        FarrLayer *l = NULL;
        CHECK_OK(farr_layer_compute(e, FARR_VO, 1, FARR_NO_OFFSET, &l));
        if (l) for (int h = 0; h < l->n_heads; h += 2) {
            int rf;
            farr_layer_ranks(l, h, 0.999, NULL, NULL, &rf);
            CHECK(rf == 6, "layer 1 head %d exported fused rank %d", h, rf);
        }
        farr_layer_free(l);
        model_free(e);
    }
    /* The compact factors are the plan's, bit for bit. */
    char *fpath = al_asprintf("%s/farr/factors.safetensors", dst);
    st_file *f = NULL;
    CHECK_OK(st_open(fpath, &f));
    if (f) {
        int idx;
        const FarrGroup *g = farr_plan_head(vo, c, 3, 5, &idx);
        const st_entry *es = st_find(f, "layers.3.vo.shared.5"), *eh = st_find(f, "layers.3.vo.head.5");
        CHECK(es && eh, "factor tensors present");
        if (es && eh) {
            CHECK(es->shape[0] == g->shared->rows && es->shape[1] == g->shared->cols, "shared shape");
            CHECK(memcmp(st_data(f, es), g->shared->data, g->shared->rows * g->shared->cols * 4) == 0, "shared bytes");
            CHECK(memcmp(st_data(f, eh), g->head[idx]->data, g->head[idx]->rows * g->head[idx]->cols * 4) == 0, "head bytes");
        }
        st_close(f);
    }
    free(fpath);
    cJSON *j = read_manifest(dst);
    if (j) {
        CHECK(strcmp(cJSON_GetObjectItem(j, "format")->valuestring, "factors") == 0, "manifest format");
        cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "truncations"), 0);
        CHECK(cJSON_GetObjectItem(t0, "tau")->valuedouble == 0.999, "manifest tau");
        cJSON *l1 = cJSON_GetArrayItem(cJSON_GetObjectItem(t0, "per_layer"), 0);
        CHECK(cJSON_GetArrayItem(cJSON_GetObjectItem(l1, "ranks"), 0)->valueint == 6, "manifest per-layer ranks");
        cJSON_Delete(j);
    }
    farr_plan_free(vo);
    model_free(m);
    free(src); free(dst);
}

/* ---------------------------------------------------------------- GQA (Llama), BF16 */

static void test_llama(void) {
    char *src = demo("demo-llama");
    Model *m = open_or_fail(src);
    if (!m) { free(src); return; }
    FarrPlan *vo = NULL;
    FarrTruncOpts ov = { .kind = FARR_VO, .tau = 0.999, .policy = FARR_POLICY_HEAD, .layer_lo = 1, .layer_hi = 2 };
    CHECK_OK(farr_truncate(m, &ov, &vo));
    char *dst = al_asprintf("%s/out-llama", tmp_root);
    ExportOpts eo = { .format = EXPORT_HF };
    CHECK_ERR(farr_export(m, vo, NULL, dst, &eo, NULL), "one head_dim for Q, K and V");
    eo.format = EXPORT_FACTORS;
    CHECK_OK(farr_export(m, vo, NULL, dst, &eo, NULL));
    Model *e = open_or_fail(dst);
    if (e) {
        double w = compare_maps(e, vo, &m->cfg, 1.0);
        CHECK(w < 2e-2, "BF16 maps close to the truncated ones (%.3g)", w);
        check_untouched(m, e, llama_vo_l12);
        /* GQA: V rows of group 0 in layer 1 hold rank 6 now (zero-padded to 32). */
        FarrLayer *l = NULL;
        CHECK_OK(farr_layer_compute(e, FARR_VO, 1, FARR_NO_OFFSET, &l));
        if (l) {
            int ra, rf;
            farr_layer_ranks(l, 0, 0.999, &ra, NULL, &rf);
            CHECK(ra == 6 && rf == 6, "exported group 0: V rank %d fused %d", ra, rf);
        }
        farr_layer_free(l);
        model_free(e);
    }
    farr_plan_free(vo);
    model_free(m);
    free(src); free(dst);
}

/* ---------------------------------------------------------------- GPT-2 with biases */

/* Sum over heads of the value path (x W_V + b_V) W_O + b_O for one token x: what attention adds
 * to the residual when it attends to that token alone. */
static void value_path(Model *m, int L, const float *x, double *out) {
    const ModelConfig *c = &m->cfg;
    size_t D = (size_t)c->hidden;
    for (size_t i = 0; i < D; i++) out[i] = 0;
    char *bn = model_tensor_name(m, L, "attn.c_proj.bias");
    Mat *bo = NULL;
    CHECK_OK(store_read(m->store, bn, &bo));
    free(bn);
    for (size_t i = 0; bo && i < D; i++) out[i] = bo->data[i];
    mat_free(bo);
    for (int h = 0; h < c->n_heads; h++) {
        Mat *V, *O;
        float *b;
        size_t nb;
        CHECK_OK(model_head(m, HK_V, L, h, PART_ALL, &V));
        CHECK_OK(model_head(m, HK_O, L, h, PART_ALL, &O));
        CHECK_OK(model_head_bias(m, HK_V, L, h, &b, &nb));
        for (size_t a = 0; a < V->cols; a++) {
            double v = b ? b[a] : 0;
            for (size_t i = 0; i < D; i++) v += (double)x[i] * V->data[i * V->cols + a];
            for (size_t j = 0; j < D; j++) out[j] += v * O->data[a * D + j];
        }
        mat_free(V); mat_free(O); free(b);
    }
}

/* Score differences s(x, y1) - s(x, y2) of head h: what softmax sees. */
static double score_diff(Model *m, int L, int h, const float *x, const float *y1, const float *y2) {
    Mat *Q, *K;
    float *bq, *bk;
    size_t n;
    CHECK_OK(model_head(m, HK_Q, L, h, PART_ALL, &Q));
    CHECK_OK(model_head(m, HK_K, L, h, PART_ALL, &K));
    CHECK_OK(model_head_bias(m, HK_Q, L, h, &bq, &n));
    CHECK_OK(model_head_bias(m, HK_K, L, h, &bk, &n));
    size_t D = Q->rows, d = Q->cols;
    double s = 0;
    for (size_t a = 0; a < d; a++) {
        double q = bq[a], k1 = bk[a], k2 = bk[a];
        for (size_t i = 0; i < D; i++) {
            q += (double)x[i] * Q->data[i * d + a];
            k1 += (double)y1[i] * K->data[i * d + a];
            k2 += (double)y2[i] * K->data[i * d + a];
        }
        s += q * (k1 - k2);
    }
    mat_free(Q); mat_free(K); free(bq); free(bk);
    return s;
}

static void test_gpt2_bias(void) {
    char *src = demo("demo-gpt2");
    Model *m = open_or_fail(src);
    if (!m) { free(src); return; }
    const ModelConfig *c = &m->cfg;
    /* Full rank (32 = head dim): the exported model must compute the same value path and scores. */
    FarrPlan *vo = NULL, *qk = NULL;
    FarrTruncOpts ov = { .kind = FARR_VO, .by_rank = true, .rank = 32, .layer_lo = 1, .layer_hi = 1 };
    FarrTruncOpts oq = { .kind = FARR_QK, .by_rank = true, .rank = 32, .layer_lo = 1, .layer_hi = 1 };
    CHECK_OK(farr_truncate(m, &ov, &vo));
    CHECK_OK(farr_truncate(m, &oq, &qk));
    char *dst = al_asprintf("%s/out-gpt2", tmp_root);
    ExportOpts eo = { .format = EXPORT_AUTO };
    ExportReport rep;
    CHECK_OK(farr_export(m, vo, qk, dst, &eo, &rep));
    CHECK(rep.format == EXPORT_FACTORS, "gpt2 exports factors");
    Model *e = open_or_fail(dst);
    if (e) {
        size_t D = (size_t)c->hidden;
        float *x = calloc(D, sizeof(float)), *y1 = calloc(D, sizeof(float)), *y2 = calloc(D, sizeof(float));
        for (size_t i = 0; i < D; i++) { x[i] = (float)sin(1.0 + i); y1[i] = (float)cos(0.3 * i); y2[i] = (float)sin(0.7 * i + 2); }
        double *o1 = malloc(D * sizeof(double)), *o2 = malloc(D * sizeof(double)), n = 0, d = 0;
        value_path(m, 1, x, o1);
        value_path(e, 1, x, o2);
        for (size_t i = 0; i < D; i++) { d += (o1[i] - o2[i]) * (o1[i] - o2[i]); n += o1[i] * o1[i]; }
        CHECK(sqrt(d / n) < 1e-5, "full-rank export keeps the value path with biases (%.3g)", sqrt(d / n));
        for (int h = 0; h < c->n_heads; h++) {
            double s1 = score_diff(m, 1, h, x, y1, y2), s2 = score_diff(e, 1, h, x, y1, y2);
            CHECK(fabs(s1 - s2) < 1e-4 * (1 + fabs(s1)), "head %d score differences %.6g vs %.6g", h, s1, s2);
        }
        check_untouched(m, e, gpt2_attn_l1);
        free(x); free(y1); free(y2); free(o1); free(o2);
        model_free(e);
    }
    farr_plan_free(vo); farr_plan_free(qk);
    model_free(m);
    free(src); free(dst);
}

/* ---------------------------------------------------------------- dense */

static bool mla_vo(const char *name) { return strstr(name, "kv_b_proj") || strstr(name, "o_proj"); }

/* format dense: the factors format's weights without side files; the reloaded fused VO maps are
 * the plan's truncated maps (f32: to rounding), farr_dense_check confirms them from the folder
 * alone, untouched tensors are bit for bit, and the dense and factors exports run the same model. */
static void test_dense(void) {
    char *src = demo("demo-r1-f32");
    Model *m = open_or_fail(src);
    if (!m) { free(src); return; }
    FarrPlan *vo = NULL;
    FarrTruncOpts ov = { .kind = FARR_VO, .tau = 0.99, .policy = FARR_POLICY_HEAD, .layer_lo = 0, .layer_hi = m->cfg.n_layers - 1 };
    CHECK_OK(farr_truncate(m, &ov, &vo));
    char *dst = al_asprintf("%s/out-dense", tmp_root), *fac = al_asprintf("%s/out-dense-factors", tmp_root);
    char *side = al_asprintf("%s/farr", dst);
    ExportOpts eo = { .format = EXPORT_DENSE };
    ExportReport rep;
    CHECK_OK(farr_export(m, vo, NULL, dst, &eo, &rep));
    CHECK(rep.format == EXPORT_DENSE && rep.tensors_rewritten > 0, "dense export report");
    struct stat sb;
    CHECK(stat(side, &sb) != 0, "dense export has no farr/ side files");
    CHECK(farr_is_export(dst), "dense export recognized");
    eo.format = EXPORT_FACTORS;
    CHECK_OK(farr_export(m, vo, NULL, fac, &eo, NULL));
    CHECK(farr_is_export(fac), "a factors export is recognized too (check DIR takes every format)");
    Model *e = open_or_fail(dst), *f = open_or_fail(fac);
    if (e && f) {
        double w = compare_maps(e, vo, &m->cfg, 1.0);
        printf("dense f32: fused VO maps differ from the plan's by %.3g\n", w);
        CHECK(w < 1e-5, "F32 dense maps equal the truncated ones (%.3g)", w);
        check_untouched(m, e, mla_vo);
        FarrDenseCheck *c = NULL;
        CHECK_OK(farr_dense_check(dst, NULL, &c));     /* the source from the manifest */
        if (c) {
            printf("dense check: %zu heads, kept singular values %.3g, past the rank %.3g\n", c->heads, c->sv_err, c->tail);
            CHECK(c->heads == (size_t)(m->cfg.n_layers * m->cfg.n_heads) && c->sv_err < 1e-5 && c->tail < 1e-5,
                  "dense check: %zu heads, %.3g, %.3g", c->heads, c->sv_err, c->tail);
        }
        farr_dense_check_free(c);
        c = NULL;
        CHECK_OK(farr_dense_check(fac, m, &c));       /* a factors export holds the same weights */
        if (c) CHECK(c->sv_err < 1e-5 && c->tail < 1e-5, "factors export maps %.3g %.3g", c->sv_err, c->tail);
        farr_dense_check_free(c);
        c = NULL;
        /* the check can fail: a manifest claiming rank 1 everywhere sees the export's maps go past it */
        char *mp = al_asprintf("%s/farr_manifest.json", fac);
        cJSON *man = read_manifest(fac), *t, *l, *r;
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(man, "truncations"))
            cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(t, "per_layer"))
                cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(l, "ranks")) cJSON_SetNumberValue(r, 1);
        char *txt = cJSON_Print(man);
        if (txt) CHECK_OK(al_write_file_atomic(mp, txt, strlen(txt)));
        CHECK_OK(farr_dense_check(fac, m, &c));
        if (c) CHECK(c->tail > 1e-2, "rank-1 claims: the check sees %.3g past the rank", c->tail);
        farr_dense_check_free(c);
        free(txt); free(mp);
        cJSON_Delete(man);
        /* the same model as the factors export: identical weight bytes */
        size_t same = 0;
        for (size_t i = 0; i < store_count(e->store); i++) {
            const char *name = store_name_at(e->store, i);
            const st_entry *a, *b;
            const st_file *fa, *fb;
            same += store_entry(e->store, name, &a, &fa) == AL_OK && store_entry(f->store, name, &b, &fb) == AL_OK &&
                    a->end - a->begin == b->end - b->begin && !memcmp(st_data(fa, a), st_data(fb, b), a->end - a->begin);
        }
        CHECK(same == store_count(e->store) && same == store_count(m->store), "dense = factors weights: %zu of %zu", same,
              store_count(e->store));
    }
    model_free(e); model_free(f);
    farr_plan_free(vo);
    model_free(m);
    free(src); free(dst); free(fac); free(side);
}

/* The truncated layer L of m built in memory from the plan (independently of export.c): W_V's
 * group columns := [F_V 0], W_O's head rows := [F_O ; 0]. */
static AttnLayer *truncated_layer(Model *m, const FarrPlan *vo, int L) {
    AttnLayer *A = NULL;
    CHECK_OK(attn_layer_load(m, L, &A));
    const FarrTruncLayer *tl = farr_plan_layer(vo, L);
    if (!A || !tl) return A;
    size_t dv = (size_t)A->v_dim, D = (size_t)A->hidden;
    for (int g = 0; g < A->n_kv_heads; g++) {
        const Mat *F = tl->groups[g]->shared;           /* (hidden, r) */
        for (size_t i = 0; i < D; i++)
            for (size_t j = 0; j < dv; j++)
                A->W_V->data[i * A->W_V->cols + (size_t)g * dv + j] = j < F->cols ? F->data[i * F->cols + j] : 0.0f;
    }
    for (int h = 0; h < A->n_heads; h++) {
        int idx;
        const FarrGroup *g = farr_plan_head(vo, &m->cfg, L, h, &idx);
        const Mat *F = g->head[idx];                    /* (r, hidden) */
        for (size_t j = 0; j < dv; j++)
            for (size_t i = 0; i < D; i++)
                A->W_O->data[((size_t)h * dv + j) * D + i] = j < F->rows ? F->data[j * F->cols + i] : 0.0f;
    }
    return A;
}

/* Relative difference of two logit arrays. */
static double rel_diff(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]); den += (double)a[i] * a[i]; }
    return sqrt(num / den);
}

/* The dense export of a GQA model, loaded by attnlab's Llama loader, runs the truncated model:
 * its logits equal those of the source with the truncated layers built in memory from the plan. */
static void test_dense_forward(void) {
    char *src = demo("demo-llama-f32");
    Model *m = open_or_fail(src);
    if (!m) { free(src); return; }
    FarrPlan *vo = NULL;
    FarrTruncOpts ov = { .kind = FARR_VO, .tau = 0.99, .policy = FARR_POLICY_HEAD, .layer_lo = 1, .layer_hi = 2 };
    CHECK_OK(farr_truncate(m, &ov, &vo));
    char *dst = al_asprintf("%s/out-dense-llama", tmp_root);
    ExportOpts eo = { .format = EXPORT_DENSE };
    CHECK_OK(farr_export(m, vo, NULL, dst, &eo, NULL));
    Model *e = open_or_fail(dst);
    Forward *fs = NULL, *fe = NULL;
    AttnLayer *over[2] = {NULL, NULL};
    if (e && vo) {
        CHECK_OK(fwd_new(m, NULL, &fs));
        CHECK_OK(fwd_new(e, NULL, &fe));
    }
    if (fs && fe) {
        size_t T = 16, V = fwd_vocab(fs);
        int tok[16];
        for (size_t t = 0; t < T; t++) tok[t] = (int)((t * 11 + 5) % V);
        float *ls = malloc(T * V * sizeof(float)), *lt = malloc(T * V * sizeof(float)), *le = malloc(T * V * sizeof(float));
        CHECK_OK(fwd_run(fs, tok, T, FWD_LOGITS_ALL, ls));             /* the source, untruncated */
        for (int L = 1; L <= 2; L++) {
            over[L - 1] = truncated_layer(m, vo, L);
            if (over[L - 1]) CHECK_OK(fwd_set_attn(fs, L, over[L - 1]));
        }
        CHECK_OK(fwd_run(fs, tok, T, FWD_LOGITS_ALL, lt));             /* truncated in memory */
        CHECK_OK(fwd_run(fe, tok, T, FWD_LOGITS_ALL, le));             /* the dense export */
        double d_exp = rel_diff(lt, le, T * V), d_src = rel_diff(ls, le, T * V);
        printf("dense llama export: logits vs the truncated model %.3g, vs the untruncated source %.3g\n", d_exp, d_src);
        CHECK(d_exp < 1e-5, "the dense export runs the truncated model: %.3g", d_exp);
        CHECK(d_src > 1e-4, "and the truncation changes the model: %.3g", d_src);
        free(ls); free(lt); free(le);
    }
    fwd_free(fs); fwd_free(fe);
    attn_layer_free(over[0]); attn_layer_free(over[1]);
    model_free(e);
    farr_plan_free(vo);
    model_free(m);
    free(src); free(dst);
}

/* ---------------------------------------------------------------- FP8: what the cut does not touch */

static bool mla_l23(const char *name) {
    return (strstr(name, "layers.2.") || strstr(name, "layers.3.")) && mla_vo(name);
}

/* dt_fp8_reencode_rows on one 2x3 stripe of two blocks' width 2: an unchanged block keeps codes and
 * scale; a changed block keeps its scale and its unchanged codes while the new values fit, and
 * doubles the scale when they do not. */
static void test_fp8_reencode_rows(void) {
    enum { C = 130 };                       /* two column blocks: 128 + 2 */
    uint8_t old[2 * C], q[2 * C];
    float Wold[2 * C], W[2 * C], scale[2] = {0, 0}, old_scale[2] = {0.5f, 0.25f};
    for (int i = 0; i < 2 * C; i++) {
        old[i] = (uint8_t)(0x30 + i % 7);
        Wold[i] = dt_e4m3_to_f32(old[i]) * old_scale[(i % C) / 128];
        W[i] = Wold[i];
    }
    W[5] = 3.0f;                            /* block 0 changes (fits: 448 x 0.5) */
    CHECK(dt_fp8_reencode_rows(W, Wold, old, old_scale, 2, 0, 2, C, q, scale) == 1, "one block kept");
    CHECK(scale[0] == 0.5f && scale[1] == 0.25f, "scales kept (%g, %g)", scale[0], scale[1]);
    CHECK(memcmp(q + C, old + C, 128) == 0 && q[129] == old[129] && q[C + 129] == old[C + 129], "unchanged values keep their codes");
    CHECK(q[4] == old[4] && q[6] == old[6] && dt_e4m3_to_f32(q[5]) * scale[0] == 3.0f, "changed block: others' codes kept, 3.0 = 6 x 0.5");
    W[C + 128] = 1000.0f;                   /* block 1 needs 1000 / 448 > 0.25: scale x 2^4 */
    CHECK(dt_fp8_reencode_rows(W, Wold, old, old_scale, 2, 0, 2, C, q, scale) == 0, "no block kept");
    CHECK(scale[1] == 4.0f, "scale doubled until the new value fits (%g)", scale[1]);
    CHECK(fabsf(dt_e4m3_to_f32(q[C + 128]) * scale[1] - 1000.0f) <= 1000.0f / 16, "new value within E4M3 rounding");
}

/* The repro (layer-max at tau 0.999 on demo-r1 cuts layers 2-3 only): every other tensor is
 * the source's bit for bit (their scales too); the changed ones are BF16 without scales by default;
 * with dtype fp8 they stay FP8, and kv_b_proj's K rows and scales are the source's bytes. */
static void test_fp8_untouched(void) {
    char *src = demo("demo-r1");
    Model *m = open_or_fail(src);
    if (!m) { free(src); return; }
    FarrPlan *vo = NULL;
    FarrTruncOpts ov = { .kind = FARR_VO, .tau = 0.999, .policy = FARR_POLICY_LAYER_MAX, .layer_lo = 0, .layer_hi = -1 };
    CHECK_OK(farr_truncate(m, &ov, &vo));
    for (int d = 0; d < 2; d++) {
        char *dst = al_asprintf("%s/out-fp8-keep-%d", tmp_root, d);
        ExportOpts eo = { .format = EXPORT_DENSE, .dtype_set = d == 1, .dtype = DT_F8_E4M3 };
        ExportReport rep;
        CHECK_OK(farr_export(m, vo, NULL, dst, &eo, &rep));
        CHECK(rep.tensors_rewritten == 4 && rep.reenc_lo == 2 && rep.reenc_hi == 3, "layers 2-3 rewritten only (%zu)",
              rep.tensors_rewritten);
        CHECK(rep.reenc_to == (d ? DT_F8_E4M3 : DT_BF16), "re-encoded in %s", dt_name(rep.reenc_to));
        CHECK(rep.reenc_err > 0 && rep.reenc_err < (d ? 0.07 : 4e-3), "added error %.3g", rep.reenc_err);
        Model *e = open_or_fail(dst);
        if (e) {
            CHECK(check_untouched(m, e, mla_l23) >= 100, "untouched tensors bit for bit");
            const char *kv = "model.layers.2.self_attn.kv_b_proj.weight";
            const st_entry *e1, *e2;
            const st_file *f1, *f2;
            CHECK_OK(store_entry(m->store, kv, &e1, &f1));
            CHECK_OK(store_entry(e->store, kv, &e2, &f2));
            CHECK(e2->dtype == (d ? DT_F8_E4M3 : DT_BF16), "kv_b_proj dtype %s", dt_name(e2->dtype));
            if (d && e2->dtype == DT_F8_E4M3) {
                const uint8_t *a = st_data(f1, e1), *b = st_data(f2, e2);
                size_t C = e1->shape[1], kr = (size_t)m->cfg.qk_nope_dim, vr = (size_t)m->cfg.v_dim, same = 0;
                for (int h = 0; h < m->cfg.n_heads; h++)
                    same += memcmp(a + h * (kr + vr) * C, b + h * (kr + vr) * C, kr * C) == 0;
                CHECK(same == (size_t)m->cfg.n_heads, "K rows of kv_b_proj byte-identical in %zu of %d heads", same, m->cfg.n_heads);
                char *sn = al_asprintf("%s_scale_inv", kv);
                CHECK_OK(store_entry(m->store, sn, &e1, &f1));
                CHECK_OK(store_entry(e->store, sn, &e2, &f2));
                CHECK(memcmp(st_data(f1, e1), st_data(f2, e2), e1->end - e1->begin) == 0, "kv_b_proj's scales kept");
                free(sn);
            }
            model_free(e);
        }
        FarrDenseCheck *c = NULL;
        CHECK_OK(farr_dense_check(dst, m, &c));
        if (c) CHECK(c->sv_err < (d ? 2 * c->added_err : 1e-2) && c->tail < 1e-6, "check: %.3g, tail %.3g", c->sv_err, c->tail);
        farr_dense_check_free(c);
        free(dst);
    }
    farr_plan_free(vo);
    model_free(m);
    free(src);
}

int main(void) {
    tmp_root = test_tmpdir();
    test_fp8_reencode_rows();
    test_fp8_untouched();
    test_dense();
    test_dense_forward();
    test_hf_f32();
    test_factors_fp8();
    test_llama();
    test_gpt2_bias();
    return check_done();
}
