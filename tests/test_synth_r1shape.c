/* test_synth_r1shape.c -- the DeepSeek-R1-shaped generator: R1's exact attention shapes in FP8
 * with 128x128 scale grids (edge blocks included), a valid shard index, R1's config values, the
 * planted rank-16 V heads exact after FP8, and the random heads full rank. One layer by default
 * (about 190 MB, a second or two); SYNTH_R1_LAYERS=3 exercises two shards. */
#include "check.h"
#include "model.h"
#include "synth.h"

#include <cjson/cJSON.h>
#include <lapacke.h>
#include <time.h>

/* Singular values of a float matrix (descending); returns the count, 0 on failure. */
static size_t svals(const Mat *A, double *s) {
    size_t m = A->rows, n = A->cols;
    double *f = malloc(m * n * sizeof(double));
    for (size_t i = 0; i < m * n; i++) f[i] = A->data[i];
    lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', (lapack_int)n, (lapack_int)m, f, (lapack_int)n, s, NULL, 1,
                                     NULL, 1);
    free(f);
    return info == 0 ? (m < n ? m : n) : 0;
}

static int eff_rank(const double *s, size_t n, double tau) {
    double tot = 0, c = 0;
    for (size_t i = 0; i < n; i++) tot += s[i] * s[i];
    for (size_t i = 0; i < n; i++)
        if ((c += s[i] * s[i]) >= tau * tot) return (int)i + 1;
    return (int)n;
}

/* Checks one tensor's dtype and shape (and its scale grid for FP8). */
static void check_tensor(const Model *m, int L, const char *suffix, dt_type dt, size_t r, size_t c) {
    char name[160], sname[176];
    snprintf(name, sizeof name, "model.layers.%d.self_attn.%s", L, suffix);
    const st_entry *e, *s;
    const st_file *f;
    if (store_entry(m->store, name, &e, &f) != AL_OK) { CHECK(0, "%s", al_errmsg()); return; }
    CHECK(e->dtype == dt, "%s is %s", name, dt_name(e->dtype));
    CHECK(e->ndim == (c ? 2 : 1) && e->shape[0] == r && (!c || e->shape[1] == c), "%s shape %zu x %zu", name,
          e->shape[0], e->ndim > 1 ? e->shape[1] : 0);
    if (dt != DT_F8_E4M3) return;
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    if (store_entry(m->store, sname, &s, &f) != AL_OK) { CHECK(0, "%s", al_errmsg()); return; }
    CHECK(s->dtype == DT_F32 && s->shape[0] == (r + 127) / 128 && s->shape[1] == (c + 127) / 128,
          "%s grid %zu x %zu for %zu x %zu", sname, s->shape[0], s->shape[1], r, c);
}

int main(void) {
    const char *tmp = test_tmpdir();
    const char *env = getenv("SYNTH_R1_LAYERS");
    int layers = env && atoi(env) > 0 ? atoi(env) : 1;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/ds-r1-shape", tmp);

    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK_OK(synth_ds_r1_shape(dir, layers, 42));
    clock_gettime(CLOCK_MONOTONIC, &b);
    double dt = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    printf("ds-r1-shape, %d layer(s): %.2f s\n", layers, dt);
    CHECK(dt < 15.0 * layers, "%.1f s for %d layers", dt, layers);

    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    if (!m) return check_done();
    const ModelConfig *c = &m->cfg;
    CHECK(c->family == FAM_DEEPSEEK && c->n_layers == layers, "family %s, %d layers", model_family_name(c->family),
          c->n_layers);
    CHECK(c->hidden == 7168 && c->n_heads == 128 && c->q_lora_rank == 1536 && c->kv_lora_rank == 512,
          "R1 dims %d %d %d %d", c->hidden, c->n_heads, c->q_lora_rank, c->kv_lora_rank);
    CHECK(c->qk_nope_dim == 128 && c->qk_rope_dim == 64 && c->v_dim == 128 && c->vocab == 129280,
          "R1 head dims %d %d %d, vocab %d", c->qk_nope_dim, c->qk_rope_dim, c->v_dim, c->vocab);
    CHECK(c->dtype == DT_F8_E4M3, "dtype %s", dt_name(c->dtype));
    int shards = (layers + 1) / 2;
    CHECK(store_nfiles(m->store) == (size_t)shards, "%zu shard files, want %d", store_nfiles(m->store), shards);

    for (int L = 0; L < layers; L++) {
        check_tensor(m, L, "q_a_proj.weight", DT_F8_E4M3, 1536, 7168);
        check_tensor(m, L, "q_a_layernorm.weight", DT_BF16, 1536, 0);
        check_tensor(m, L, "q_b_proj.weight", DT_F8_E4M3, 128 * 192, 1536);
        check_tensor(m, L, "kv_a_proj_with_mqa.weight", DT_F8_E4M3, 576, 7168);   /* 576 = 4.5 blocks */
        check_tensor(m, L, "kv_a_layernorm.weight", DT_BF16, 512, 0);
        check_tensor(m, L, "kv_b_proj.weight", DT_F8_E4M3, 128 * 256, 512);
        check_tensor(m, L, "o_proj.weight", DT_F8_E4M3, 7168, 128 * 128);
    }

    /* index: every listed tensor exists in its shard; total_size = sum of tensor bytes */
    char ip[4200];
    snprintf(ip, sizeof ip, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(ip, "rb");
    CHECK(f != NULL, "index %s", ip);
    if (f) {
        char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        cJSON *root = cJSON_Parse(buf), *map = cJSON_GetObjectItem(root, "weight_map");
        cJSON *tot = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "metadata"), "total_size");
        size_t bytes = 0, listed = 0;
        for (cJSON *it = map ? map->child : NULL; it; it = it->next) {
            const st_entry *e;
            const st_file *sf;
            listed++;
            if (store_entry(m->store, it->string, &e, &sf) != AL_OK) { CHECK(0, "%s", al_errmsg()); continue; }
            const char *base = strrchr(st_path(sf), '/');
            CHECK(base && strcmp(base + 1, it->valuestring) == 0, "%s in %s, index says %s", it->string, st_path(sf),
                  it->valuestring);
            bytes += e->end - e->begin;
        }
        CHECK(listed == 12 * (size_t)layers && listed == store_count(m->store), "index lists %zu, store has %zu", listed,
              store_count(m->store));
        CHECK(cJSON_IsNumber(tot) && (size_t)tot->valuedouble == bytes, "total_size vs %zu bytes", bytes);
        cJSON_Delete(root);
    }

    /* planted: V of heads 0, 8, ... exactly rank 16 after FP8; other heads full rank */
    int L = layers - 1;
    double s[512];
    for (int h = 0; h < 16; h++) {
        Mat *V = NULL;
        CHECK_OK(model_head(m, HK_V, L, h, PART_ALL, &V));
        size_t n = V ? svals(V, s) : 0;
        CHECK(n == 128, "V head %d: SVD", h);
        if (n == 128 && h % 8 == 0) {
            CHECK(s[16] <= 1e-5 * s[0] && s[15] >= 0.5 * s[0], "V head %d: sigma_16/1 %g, sigma_17/1 %g (planted rank 16)",
                  h, s[15] / s[0], s[16] / s[0]);
            CHECK(eff_rank(s, n, 0.999) == 16 && eff_rank(s, n, 0.99) == 16, "V head %d rank %d / %d", h,
                  eff_rank(s, n, 0.999), eff_rank(s, n, 0.99));
        } else if (n == 128)
            CHECK(eff_rank(s, n, 0.999) >= 120, "random V head %d rank %d at 0.999", h, eff_rank(s, n, 0.999));
        mat_free(V);
    }
    model_free(m);

    CHECK_ERR(synth_ds_r1_shape(dir, 1, 42), "not empty");
    /* do not leave ~190 MB per layer behind in the build folder */
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "removing %s", dir);
    snprintf(dir, sizeof dir, "%s/none", tmp);
    CHECK_ERR(synth_ds_r1_shape(dir, 0, 42), "layers must be 1..61");
    return check_done();
}
