/* test_models_real.c -- the real checkpoints in tests/models load and report the
 * architecture their README gives; the llama2.c .bin and its HF conversion agree head by head. */
#include "check.h"
#include "model.h"

static const char *models_dir(void) {
    const char *d = getenv("ATTNLAB_MODELS");
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/stories260K/stories260K.bin", d ? d : "tests/models");
    FILE *fp = fopen(buf, "rb");
    if (!fp) check_skip("tests/models is not here (ATTNLAB_MODELS); the real-model tests need it");
    fclose(fp);
    return d ? d : "tests/models";
}

/* stories260K: dim 64, hidden 172, 5 layers, 8 heads, 4 KV heads, vocab 512, seq 512. */
static void check_stories_cfg(const ModelConfig *c) {
    CHECK(c->hidden == 64 && c->intermediate == 172 && c->n_layers == 5, "dims %d %d %d", c->hidden, c->intermediate, c->n_layers);
    CHECK(c->n_heads == 8 && c->n_kv_heads == 4 && c->vocab == 512, "heads %d kv %d vocab %d", c->n_heads, c->n_kv_heads, c->vocab);
    CHECK(c->qk_rope_dim == 8 && c->qk_nope_dim == 0 && c->v_dim == 8, "head dims");
}

/* The HF export permutes each Q/K head from interleaved pairs (2j, 2j+1) to rotate_half (j, j+d/2):
 * hf column j = bin column 2j and hf column j + d/2 = bin column 2j + 1 (row-vector views). */
static void check_bin_vs_hf(Model *bin, Model *hf) {
    for (int L = 0; L < 5; L++)
        for (int k = 0; k < 4; k++) {
            head_kind kind = (head_kind)k;
            int nh = (kind == HK_K || kind == HK_V) ? 4 : 8;
            for (int h = 0; h < nh; h++) {
                Mat *a = NULL, *b = NULL;
                CHECK_OK(model_head(bin, kind, L, h, PART_ALL, &a));
                CHECK_OK(model_head(hf, kind, L, h, PART_ALL, &b));
                if (!a || !b) { mat_free(a); mat_free(b); return; }
                CHECK(a->rows == b->rows && a->cols == b->cols, "shape");
                size_t d = a->cols, bad = 0;
                for (size_t i = 0; i < a->rows; i++)
                    for (size_t j = 0; j < d; j++) {
                        size_t jb = (kind == HK_Q || kind == HK_K) ? (j < d / 2 ? 2 * j : 2 * (j - d / 2) + 1) : j;
                        bad += *mat_at(a, i, jb) != *mat_at(b, i, j);
                    }
                CHECK(bad == 0, "layer %d kind %d head %d: %zu elements differ", L, k, h, bad);
                mat_free(a);
                mat_free(b);
            }
        }
}

int main(void) {
    const char *dir = models_dir();
    char path[4096];
    Model *bin = NULL, *hf = NULL, *g = NULL;
    snprintf(path, sizeof path, "%s/stories260K/stories260K.bin", dir);
    CHECK_OK(model_open(path, &bin));
    snprintf(path, sizeof path, "%s/stories260K-hf", dir);
    CHECK_OK(model_open(path, &hf));
    if (bin) { check_stories_cfg(&bin->cfg); CHECK(bin->cfg.rope == ROPE_INTERLEAVED, "llama2.c rope layout"); }
    if (hf) { check_stories_cfg(&hf->cfg); CHECK(hf->cfg.rope == ROPE_HALF && hf->cfg.tie_embeddings, "hf rope/tie"); }
    if (bin && hf) check_bin_vs_hf(bin, hf);

    snprintf(path, sizeof path, "%s/gpt2-tiny-random", dir);
    CHECK_OK(model_open(path, &g));
    if (g) {
        CHECK(g->cfg.family == FAM_GPT2 && g->cfg.hidden == 16 && g->cfg.n_layers == 1 && g->cfg.n_heads == 1, "gpt2 cfg");
        Mat *q = NULL, *full = NULL;
        CHECK_OK(model_head(g, HK_Q, 0, 0, PART_ALL, &q));
        CHECK_OK(store_read(g->store, "transformer.h.0.attn.c_attn.weight", &full));
        if (q && full) CHECK(q->rows == 16 && q->cols == 16 && *mat_at(q, 3, 5) == *mat_at(full, 3, 5), "gpt2 Q = c_attn[:, :16]");
        Mat *v = NULL;
        CHECK_OK(model_head(g, HK_V, 0, 0, PART_ALL, &v));
        if (v && full) CHECK(*mat_at(v, 2, 7) == *mat_at(full, 2, 32 + 7), "gpt2 V = c_attn[:, 32:48]");
        mat_free(q); mat_free(v); mat_free(full);
    }
    model_free(bin);
    model_free(hf);
    model_free(g);
    return check_done();
}
