/* test_dsv4.c -- core/model/dsv4.c: DeepSeek-V4-Flash's compress_ratios read layer by layer (window / CSA / HCA,
 * the MTP entry past num_hidden_layers), the other V4 keys, the layer lists dsv4_layer_list writes (a range, a
 * range with a step, one with a last extra layer, a list cut with "..."); model_config_parse describing the
 * release's attention (head dims, the query latent, the grouped output, one KV head, parameters and KV values);
 * and on `synth family deepseek_v4`, the per-head maps (model.c's block_dsv4) against the products formed by hand
 * from the stored tensors: W_V = W_K = wkvᵀ diag(kv_norm), W_O[h] = (wo_a's block)ᵀ (wo_b's block)ᵀ, W_Q[h] =
 * wq_b's rows of the head; the fused VO and NoPE-QK singular values equal a dense LAPACK SVD of those products
 * (and not that of the products without kv_norm's weight, or with another group's block of wo_a). */
#include "check.h"
#include "config.h"
#include "dsv4.h"
#include "farr.h"
#include "forward.h"
#include "model.h"
#include "synth.h"
#include "svd_check.h"

#include <cjson/cJSON.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>

/* DeepSeek-V4-Flash's keys (the dims and lists as released). */
static const char *flash_json(void) {
    static char buf[4096];
    char ratios[512] = "0, 0";
    for (int i = 0; i < 20; i++) strcat(ratios, ", 4, 128");
    strcat(ratios, ", 4, 0");
    snprintf(buf, sizeof buf, "{\"model_type\": \"deepseek_v4\", \"architectures\": [\"DeepseekV4ForCausalLM\"], "
             "\"hidden_size\": 4096, \"num_hidden_layers\": 43, \"num_attention_heads\": 64, \"num_key_value_heads\": 1, "
             "\"head_dim\": 512, \"qk_rope_head_dim\": 64, \"q_lora_rank\": 1024, \"o_lora_rank\": 1024, \"o_groups\": 8, "
             "\"hc_mult\": 4, \"hc_sinkhorn_iters\": 20, \"num_hash_layers\": 3, \"sliding_window\": 128, "
             "\"index_n_heads\": 64, \"index_head_dim\": 128, \"index_topk\": 512, \"n_routed_experts\": 256, "
             "\"num_experts_per_tok\": 6, \"num_nextn_predict_layers\": 1, \"compress_ratios\": [%s]}", ratios);
    return buf;
}

static void flash_layers(void) {
    cJSON *root = cJSON_Parse(flash_json());
    Dsv4Spec s;
    CHECK_OK(dsv4_parse(root, "flash", &s));
    CHECK(s.layers == 43 && s.n_ratios == 44 && s.ratio[43] == 0, "layers %d, ratios %d", s.layers, s.n_ratios);
    CHECK(s.heads == 64 && s.kv_heads == 1 && s.head_dim == 512 && s.rope_dim == 64, "heads %d kv %d hd %d rope %d",
          s.heads, s.kv_heads, s.head_dim, s.rope_dim);
    CHECK(s.q_lora == 1024 && s.o_lora == 1024 && s.o_groups == 8 && s.hc_mult == 4 && s.hash_layers == 3,
          "q_lora %d o_lora %d groups %d hc %d hash %d", s.q_lora, s.o_lora, s.o_groups, s.hc_mult, s.hash_layers);
    CHECK(s.window == 128 && s.index_heads == 64 && s.index_head_dim == 128 && s.index_topk == 512, "indexer");
    int n[3] = {0};
    for (int L = 0; L < 43; L++) {
        const char *k = dsv4_layer_kind(&s, L);
        const char *want = L < 2 ? "window" : L % 2 ? "HCA" : "CSA";
        CHECK(!strcmp(k, want), "layer %d is %s, not %s", L, k, want);
        n[!strcmp(k, "window") ? 0 : !strcmp(k, "CSA") ? 1 : 2]++;
    }
    CHECK(n[0] == 2 && n[1] == 21 && n[2] == 20, "window %d CSA %d HCA %d", n[0], n[1], n[2]);
    char b[160];
    CHECK(dsv4_layers_of(&s, "CSA", b, sizeof b) == 21 && !strcmp(b, "2-42 every 2"), "CSA [%s]", b);
    CHECK(dsv4_layers_of(&s, "HCA", b, sizeof b) == 20 && !strcmp(b, "3-41 every 2"), "HCA [%s]", b);
    CHECK(dsv4_layers_of(&s, "window", b, sizeof b) == 2 && !strcmp(b, "0, 1"), "window [%s]", b);
    cJSON_Delete(root);
}

static void layer_lists(void) {
    char b[64];
    int run[] = {0, 1, 2, 3}, step[] = {3, 7, 11, 15}, tail[] = {3, 7, 11, 15, 16}, odd[] = {0, 5, 9, 20, 21, 40};
    dsv4_layer_list(run, 4, b, sizeof b);
    CHECK(!strcmp(b, "0-3"), "[%s]", b);
    dsv4_layer_list(step, 4, b, sizeof b);
    CHECK(!strcmp(b, "3-15 every 4"), "[%s]", b);
    dsv4_layer_list(tail, 5, b, sizeof b);
    CHECK(!strcmp(b, "3-15 every 4, 16"), "[%s]", b);
    dsv4_layer_list(odd, 6, b, sizeof b);
    CHECK(!strcmp(b, "0, 5, 9, 20, 21, 40"), "[%s]", b);
    dsv4_layer_list(odd, 6, b, 16);
    CHECK(!strcmp(b, "0, 5, 9, ..."), "cut [%s]", b);
    dsv4_layer_list(odd, 0, b, sizeof b);
    CHECK(!strcmp(b, ""), "none [%s]", b);
}

/* The release's attention as attnlab reads it (config.c's dsv4_dims; model.c's parameter and KV accounting). */
static void flash_described(void) {
    ModelConfig c;
    CHECK_OK(model_config_parse(flash_json(), "flash", &c));
    CHECK(c.n_heads == 64 && c.n_kv_heads == 1 && c.qk_nope_dim == 448 && c.qk_rope_dim == 64 && c.v_dim == 512,
          "heads %d / %d, dims %d + %d, v %d", c.n_heads, c.n_kv_heads, c.qk_nope_dim, c.qk_rope_dim, c.v_dim);
    CHECK(c.q_lora_rank == 1024 && c.o_lora_rank == 1024 && c.o_groups == 8 && c.kv_lora_rank == 0,
          "q_lora %d, o_lora %d x %d groups, kv_lora %d", c.q_lora_rank, c.o_lora_rank, c.o_groups, c.kv_lora_rank);
    CHECK(c.rope == ROPE_INTERLEAVED && !c.rope_first && c.attn_sinks && c.sliding_window == 128 && c.attn == QKV_DSV4,
          "rope %d first %d sinks %d window %d", (int)c.rope, c.rope_first, c.attn_sinks, c.sliding_window);
    /* wq_a + q_norm, wq_b, wkv + kv_norm, wo_a (8 x 1024, 64 x 512 / 8), wo_b, attn_sink */
    size_t want = 1024u * 4096 + 1024 + 64u * 512 * 1024 + 512u * 4096 + 512 + 8192u * 4096 + 4096u * 8192 + 64;
    CHECK(cfg_attn_params(&c) == want, "attention parameters %zu, want %zu", cfg_attn_params(&c), want);
    CHECK(cfg_kv_values(&c) == 512, "KV values per token %zu (one head, key = value)", cfg_kv_values(&c));
    cJSON *bad = cJSON_Parse(flash_json());
    cJSON_ReplaceItemInObject(bad, "num_key_value_heads", cJSON_CreateNumber(2));
    char *t = cJSON_PrintUnformatted(bad);
    CHECK_ERR(model_config_parse(t, "kv2", &c), "deepseek_v4 reads one KV head (num_key_value_heads 2)");
    free(t);
    cJSON_Delete(bad);
}

/* Stored tensor `name` of m as doubles (rows x cols); NULL on failure. */
typedef struct {
    Model *m;
    int L;
    size_t D, hd, np, ql, R, per;
    double *wkv, *w, *wqb, *woa, *wob;     /* (hd, D), (hd), (H hd, ql), (G R, per hd), (D, G R) */
} Layer;

static void layer_free(Layer *l) { free(l->wkv); free(l->w); free(l->wqb); free(l->woa); free(l->wob); }

static double *layer_tensor(Layer *l, const char *suffix, size_t *r, size_t *c) {
    char name[128];
    snprintf(name, sizeof name, "layers.%d.attn.%s", l->L, suffix);
    return stored_d(l->m, name, r, c);
}

/* W_V W_O of head h formed by hand (D x D): wkvᵀ diag(w) (D x hd) times (wo_a rows [g R, +R) x cols [j hd, +hd))ᵀ
 * (wo_b cols [g R, +R))ᵀ; with_norm false drops kv_norm's weight, group_off takes another group's block of wo_a (with
 * this group's wo_b columns: every head's own pair is planted alike, a mismatched pair is not). */
static double *vo_by_hand(const Layer *l, int h, bool with_norm, size_t group_off) {
    size_t D = l->D, hd = l->hd, R = l->R, per = l->per, G = (size_t)l->m->cfg.o_groups;
    size_t g = (size_t)h / per, ga = (g + group_off) % G, j = (size_t)h % per, wa = per * hd;
    double *O = calloc(hd * D, sizeof *O), *P = calloc(D * D, sizeof *P);
    for (size_t a = 0; a < hd; a++)            /* O[a][d] = sum_r wo_a[g R + r][j hd + a] wo_b[d][g R + r] */
        for (size_t d = 0; d < D; d++)
            for (size_t r = 0; r < R; r++) O[a * D + d] += l->woa[(ga * R + r) * wa + j * hd + a] * l->wob[d * G * R + g * R + r];
    for (size_t x = 0; x < D; x++)
        for (size_t a = 0; a < hd; a++) {
            double v = l->wkv[a * D + x] * (with_norm ? l->w[a] : 1.0);
            for (size_t d = 0; d < D; d++) P[x * D + d] += v * O[a * D + d];
        }
    free(O);
    return P;
}

/* W_Q W_Kᵀ of head h over the NoPE dims (ql x D): wq_b's rows [h hd, +np) transposed times (wkv's rows [0, np)
 * with kv_norm's weight)ᵀ. */
static double *qk_by_hand(const Layer *l, int h, bool with_norm) {
    size_t D = l->D, hd = l->hd, ql = l->ql;
    double *P = calloc(ql * D, sizeof *P);
    for (size_t i = 0; i < ql; i++)
        for (size_t k = 0; k < l->np; k++) {
            double q = l->wqb[((size_t)h * hd + k) * ql + i] * (with_norm ? l->w[k] : 1.0);
            for (size_t d = 0; d < D; d++) P[i * D + d] += q * l->wkv[k * D + d];
        }
    return P;
}

/* One head's fused spectrum (farr_fuse) against the dense SVD of the product by hand, and against the wrong
 * products (which must differ: the test sees kv_norm's weight and the group's block). */
static void check_head(Layer *l, farr_kind kind, int h) {
    FarrFused *f = NULL;
    CHECK_OK(farr_fuse(l->m, kind, l->L, h, FARR_NO_OFFSET, &f));
    if (!f) return;
    size_t rows = kind == FARR_VO ? l->D : l->ql, p = f->s->p;
    double *good = kind == FARR_VO ? vo_by_hand(l, h, true, 0) : qk_by_hand(l, h, true);
    double *plain = kind == FARR_VO ? vo_by_hand(l, h, false, 0) : qk_by_hand(l, h, false);
    double *other = kind == FARR_VO ? vo_by_hand(l, h, true, 1) : NULL;
    double sg[256], sp[256], so[256];
    CHECK_OK(svd_values(good, rows, l->D, sg));
    CHECK_OK(svd_values(plain, rows, l->D, sp));
    if (other) CHECK_OK(svd_values(other, rows, l->D, so));
    double d = spectrum_diff(sg, f->s->sigma, p);
    CHECK(d <= 1e-5, "layer %d head %d %s: fused sigma vs the dense SVD of the product: rel %.2g", l->L, h,
          farr_kind_name(kind), d);
    CHECK(spectrum_diff(sp, f->s->sigma, p) > 1e-3, "layer %d head %d %s: without kv_norm's weight the spectrum "
          "is the same (the test cannot see it)", l->L, h, farr_kind_name(kind));
    if (other)
        CHECK(spectrum_diff(so, f->s->sigma, p) > 1e-3, "layer %d head %d: another group's block of wo_a with this group's "
              "wo_b gives the same spectrum", l->L, h);
    free(good); free(plain); free(other);
    farr_fused_free(f);
}

/* The synthetic checkpoint's per-head maps: every head of layers 1 (bottleneck) and 2 (fused-low), VO and QK. */
static void synth_maps(void) {
    char *dir = al_asprintf("%s/dsv4", test_tmpdir());
    CHECK_OK(synth_family_write("deepseek_v4", DT_F32, 42, dir));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    if (!m) { free(dir); return; }
    const ModelConfig *c = &m->cfg;
    CHECK(c->n_heads == 4 && c->o_groups == 2 && c->o_lora_rank == 64 && cfg_d_qk(c) == 32 && c->qk_nope_dim == 24,
          "recipe dims: %d heads, %d groups x %d, head %d (NoPE %d)", c->n_heads, c->o_groups, c->o_lora_rank,
          cfg_d_qk(c), c->qk_nope_dim);
    for (int L = 1; L <= 2; L++) {
        Layer l = {.m = m, .L = L, .D = (size_t)c->hidden, .hd = (size_t)cfg_d_qk(c), .np = (size_t)c->qk_nope_dim,
                   .ql = (size_t)c->q_lora_rank, .R = (size_t)c->o_lora_rank, .per = (size_t)(c->n_heads / c->o_groups)};
        size_t r, k;
        l.wkv = layer_tensor(&l, "wkv.weight", &r, &k);
        l.w = layer_tensor(&l, "kv_norm.weight", &r, &k);
        l.wqb = layer_tensor(&l, "wq_b.weight", &r, &k);
        l.woa = layer_tensor(&l, "wo_a.weight", &r, &k);
        CHECK(l.woa && r == 128 && k == 64, "wo_a is [%zu, %zu], want [o_groups x o_lora, H hd / o_groups] = [128, 64]", r, k);
        l.wob = layer_tensor(&l, "wo_b.weight", &r, &k);
        if (l.wkv && l.w && l.wqb && l.woa && l.wob)
            for (int h = 0; h < c->n_heads; h++) {
                check_head(&l, FARR_VO, h);
                check_head(&l, FARR_QK, h);
            }
        layer_free(&l);
    }
    Forward *f = NULL;
    CHECK(fwd_new(m, NULL, &f) != AL_OK, "the forward pass of deepseek_v4 ran");
    CHECK(strstr(al_errmsg(), "compressed KV") && strstr(al_errmsg(), "hyper-connections"), "refusal: %s", al_errmsg());
    fwd_free(f);
    model_free(m);
    free(dir);
}

int main(void) {
    flash_layers();
    layer_lists();
    flash_described();
    synth_maps();
    return check_done();
}
