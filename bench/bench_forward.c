/* bench_forward.c -- forward-pass speed: tokens/s of prefill and of decoding on stories260K
 * ($ATTNLAB_MODELS) and on a synthetic ~1.1B-parameter Llama-shaped checkpoint (TinyLlama's
 * shapes: hidden 2048, 22 layers, 32 heads, 4 KV heads, head_dim 64, MLP 5632, vocab 32000,
 * untied; BF16 shards, one per layer, written on first use), with a per-stage breakdown taken
 * through the activation hooks (their timestamps split each layer into QKV projections, RoPE,
 * attention, output projection and norm + MLP).
 *
 *   bench_forward [DIR]     DIR for the synthetic model (default $ATTNLAB_CACHE/bench-llama-1b,
 *                           else /tmp/attnlab-bench-llama-1b); `-` skips it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "forward.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ================================================================ stage profile through hooks */

enum { ST_QKV, ST_ROPE, ST_ATTN, ST_OPROJ, ST_MLP, ST_N };
static const char *stage_name[ST_N] = {"QKV proj", "RoPE", "attention", "o_proj", "norm+MLP"};

typedef struct {
    double t_last, acc[ST_N];
    int last_kind;
} Prof;

/* Attributes the time since the previous hook to the stage that ends at this hook. */
static int prof_hook(const FwdAct *a, void *ud) {
    Prof *p = ud;
    double t = now_s();
    int st = -1;
    switch (a->kind) {
    case FWD_ATTN_IN: st = a->layer > 0 ? ST_MLP : -1; break;
    case FWD_Q: st = ST_QKV; break;
    case FWD_Q_ROPE: st = ST_ROPE; break;
    case FWD_ATTN_OUT: st = ST_ATTN; break;
    case FWD_ATTN_PROJ: st = ST_OPROJ; break;
    default: break;
    }
    if (st >= 0 && p->t_last > 0) p->acc[st] += t - p->t_last;
    p->t_last = t;
    return AL_OK;
}

/* Runs T tokens as a fresh sequence; returns seconds. */
static double time_prefill(Forward *f, const int *ids, size_t T, float *z, Prof *p) {
    fwd_reset(f);
    if (p) {
        p->t_last = 0;
        FwdHooks h = {.mask = FWD_ATTN_IN | FWD_Q | FWD_Q_ROPE | FWD_ATTN_OUT | FWD_ATTN_PROJ, .fn = prof_hook, .ud = p};
        fwd_set_hooks(f, &h);
    }
    double t0 = now_s();
    if (fwd_run(f, ids, T, FWD_LOGITS_LAST, z) != AL_OK) { fprintf(stderr, "prefill: %s\n", al_errmsg()); exit(1); }
    double dt = now_s() - t0;
    fwd_set_hooks(f, NULL);
    return dt;
}

/* Greedy decoding of n tokens after the cache's current content; returns seconds. */
static double time_decode(Forward *f, float *z, size_t n) {
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        size_t best = 0;
        for (size_t j = 1; j < fwd_vocab(f); j++)
            if (z[j] > z[best]) best = j;
        int tok = (int)best;
        if (fwd_run(f, &tok, 1, FWD_LOGITS_LAST, z) != AL_OK) { fprintf(stderr, "decode: %s\n", al_errmsg()); exit(1); }
    }
    return now_s() - t0;
}

static void bench_model(const char *label, const char *path, const size_t *Ts, size_t nT, size_t ndec) {
    Model *m = NULL;
    Forward *f = NULL;
    double t0 = now_s();
    if (model_open(path, &m) != AL_OK || fwd_new(m, NULL, &f) != AL_OK) {
        fprintf(stderr, "%s: %s\n", label, al_errmsg());
        model_free(m);
        return;
    }
    printf("%s: loaded in %.2f s (%s)\n", label, now_s() - t0, fwd_streaming(f) ? "streamed" : "resident float32");
    size_t V = fwd_vocab(f), Tmax = 0;
    for (size_t i = 0; i < nT; i++) Tmax = Ts[i] > Tmax ? Ts[i] : Tmax;
    int *ids = malloc(Tmax * sizeof *ids);
    float *z = malloc(V * sizeof *z);
    for (size_t i = 0; i < Tmax; i++) ids[i] = (int)((i * 2654435761u) % (V - 3)) + 3;
    time_prefill(f, ids, Ts[0] < 16 ? Ts[0] : 16, z, NULL);           /* warm-up */
    for (size_t i = 0; i < nT; i++) {
        Prof p = {0};
        double dt = time_prefill(f, ids, Ts[i], z, &p);
        double tot = 0;
        for (int s = 0; s < ST_N; s++) tot += p.acc[s];
        printf("  prefill T=%-5zu %8.3f s  %9.1f tok/s   [", Ts[i], dt, (double)Ts[i] / dt);
        for (int s = 0; s < ST_N; s++) printf("%s%s %.0f%%", s ? ", " : "", stage_name[s], 100 * p.acc[s] / dt);
        printf(", rest (last MLP, final norm, LM head) %.0f%%]\n", 100 * (dt - tot) / dt);
    }
    time_prefill(f, ids, Ts[0], z, NULL);
    double dd = time_decode(f, z, ndec);
    printf("  decode %zu tokens after %zu: %.3f s  %.1f tok/s\n", ndec, Ts[0], dd, (double)ndec / dd);
    free(ids);
    free(z);
    fwd_free(f);
    model_free(m);
}

/* ================================================================ the synthetic 1.1B model */

enum { BD = 2048, BL = 22, BH = 32, BG = 4, BHD = 64, BFF = 5632, BV = 32000 };

static unsigned long long rng = 88172645463325252ull;
static float rnd(float scale) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return ((float)(rng >> 40) / 16777216.f - 0.5f) * 2.f * scale;
}

static int add(st_writer *w, const char *name, size_t r, size_t c, float scale, float offset) {
    Mat *m = mat_new(r, c);
    if (!m) return AL_ERR;
    for (size_t i = 0; i < r * c; i++) m->data[i] = offset + rnd(scale);
    int rc = st_writer_add_mat(w, name, DT_BF16, m);
    mat_free(m);
    return rc;
}

/* Writes the model (one shard per layer, plus one for the embeddings and head) and its index. */
static int write_llama1b(const char *dir) {
    mkdir(dir, 0755);
    char *ip = al_asprintf("%s/model.safetensors.index.json", dir);
    FILE *idx = fopen(ip, "w");
    free(ip);
    if (!idx) return al_err("%s: cannot write the index", dir);
    fprintf(idx, "{\"metadata\": {}, \"weight_map\": {");
    bool first = true;
    int rc = AL_OK;
    for (int L = -1; rc == AL_OK && L < BL; L++) {
        st_writer *w = st_writer_new();
        char file[64], name[128];
        snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", L + 2, BL + 1);
        struct { const char *s; size_t r, c; float scale, off; } t[] = {
            {"input_layernorm.weight", 1, BD, 0.05f, 1}, {"post_attention_layernorm.weight", 1, BD, 0.05f, 1},
            {"self_attn.q_proj.weight", BH * BHD, BD, 0.03f, 0}, {"self_attn.k_proj.weight", BG * BHD, BD, 0.03f, 0},
            {"self_attn.v_proj.weight", BG * BHD, BD, 0.03f, 0}, {"self_attn.o_proj.weight", BD, BH * BHD, 0.03f, 0},
            {"mlp.gate_proj.weight", BFF, BD, 0.03f, 0}, {"mlp.up_proj.weight", BFF, BD, 0.03f, 0},
            {"mlp.down_proj.weight", BD, BFF, 0.02f, 0}};
        struct { const char *s; size_t r, c; float scale, off; } g[] = {
            {"model.embed_tokens.weight", BV, BD, 0.05f, 0}, {"lm_head.weight", BV, BD, 0.03f, 0},
            {"model.norm.weight", 1, BD, 0.05f, 1}};
        size_t n = L < 0 ? 3 : 9;
        for (size_t i = 0; rc == AL_OK && i < n; i++) {
            if (L < 0) snprintf(name, sizeof name, "%s", g[i].s);
            else snprintf(name, sizeof name, "model.layers.%d.%s", L, t[i].s);
            rc = L < 0 ? add(w, name, g[i].r, g[i].c, g[i].scale, g[i].off) : add(w, name, t[i].r, t[i].c, t[i].scale, t[i].off);
            fprintf(idx, "%s\"%s\": \"%s\"", first ? "" : ", ", name, file);
            first = false;
        }
        char *path = al_asprintf("%s/%s", dir, file);
        if (rc == AL_OK) rc = path ? st_writer_write(w, path) : AL_ERR;
        free(path);
        st_writer_free(w);
        fprintf(stderr, "\rwriting %s: shard %d of %d", dir, L + 2, BL + 1);
    }
    fprintf(stderr, "\n");
    fprintf(idx, "}}\n");
    fclose(idx);
    if (rc != AL_OK) return rc;
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": %d, "
             "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
             "\"intermediate_size\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 2048, \"rms_norm_eps\": 1e-5, "
             "\"rope_theta\": 10000.0, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}\n",
             BD, BL, BH, BG, BHD, BFF, BV);
    char *cp = al_asprintf("%s/config.json", dir);
    rc = al_write_file_atomic(cp, cfg, strlen(cfg));
    free(cp);
    return rc;
}

int main(int argc, char **argv) {
    const char *models = getenv("ATTNLAB_MODELS");
    char *stories = al_asprintf("%s/stories260K/stories260K.bin", models ? models : "../shared/models");
    struct stat sb;
    if (stat(stories, &sb) == 0) {
        size_t Ts[] = {256, 512};
        bench_model("stories260K", stories, Ts, 2, 256);
    } else
        printf("stories260K: not found at %s (set ATTNLAB_MODELS)\n", stories);
    free(stories);
    if (argc > 1 && strcmp(argv[1], "-") == 0) return 0;
    const char *cache = getenv("ATTNLAB_CACHE");
    char *dir = argc > 1 ? al_strdup(argv[1]) : al_asprintf("%s/bench-llama-1b", cache ? cache : "/tmp/attnlab");
    if (!cache && argc <= 1) mkdir("/tmp/attnlab", 0755);
    char *cfg = al_asprintf("%s/config.json", dir);
    if (stat(cfg, &sb) != 0) {
        double t0 = now_s();
        if (write_llama1b(dir) != AL_OK) { fprintf(stderr, "%s\n", al_errmsg()); return 1; }
        printf("wrote the synthetic Llama-1.1B (BF16) in %.1f s\n", now_s() - t0);
    }
    free(cfg);
    size_t Ts[] = {128, 512};
    bench_model("llama-1.1B (synthetic, TinyLlama shapes)", dir, Ts, 2, 16);
    free(dir);
    return 0;
}
