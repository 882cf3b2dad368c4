/* test_families.c -- every family of issue 12 on its synthetic checkpoint (core/synth_family.c)
 * against the independent float64 reference of tests/ref_forward.c:
 *   (0) the description attnlab parses from config.json (windows per layer, RoPE base and scaling
 *       per layer, softmax scale, rotary dims, MoE layers, eps, embedding scale, soft-caps, tied
 *       embeddings) equals what the reference read on its own;
 *   (a) model_open loads it and the planted VO (and NoPE QK) ranks come back exactly at tau 0.999
 *       and 0.99 (farr_layer_compute: the per-head views of core/model.c);
 *   (b) attnlab's forward pass (fwd_run, FWD_LOGITS_ALL) equals the reference's logits to 1e-4
 *       relative (max |diff| / max |ref|) over 24 tokens -- 3 sliding windows of 8 -- and
 *       fwd_ppl equals the reference's mean NLL to 1e-4 relative over 40 tokens.
 * Baselines that validate the reference itself against attnlab's existing pass: demo-llama
 * (F32) for the Llama path, demo-r1 (F32, dense MLP) for the MLA attention, and demo-llama
 * relabelled Mistral with sliding_window 8 (mistral-w8) for the window.
 *
 * Each family prints one line per check (ok / FAIL with the numbers / PENDING with attnlab's
 * refusal). A refusal of model_open, the rank sweep or fwd_new (a family attnlab does not cover
 * yet) is PENDING, not a failure, unless FAMILIES_STRICT is 1 (or $ATTNLAB_FAMILIES_STRICT=1);
 * wrong numbers always fail. Set FAMILIES_STRICT to 1 once the forward pass and the per-head
 * views cover every family. */
#define _GNU_SOURCE
#include "check.h"
#include "config.h"
#include "farr.h"
#include "forward.h"
#include "ref_forward.h"
#include "synth.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAMILIES_STRICT 0
#define T_LOGITS 24
#define T_PPL 40
#define REL_TOL 1e-4

static bool strict(void) {
    const char *e = getenv("ATTNLAB_FAMILIES_STRICT");
    return e ? atoi(e) != 0 : FAMILIES_STRICT;
}

static int pending_n;

/* A refusal by attnlab: a failure in strict mode, else a PENDING line. */
static void refused(const char *fam, const char *what) {
    if (strict()) {
        CHECK(false, "%s: %s refused: %s", fam, what, al_errmsg());
    } else {
        pending_n++;
        printf("  %-12s %-8s PENDING (attnlab refuses: %s)\n", fam, what, al_errmsg());
    }
}

/* Deterministic token ids in [0, V). */
static void tokens(int *ids, size_t n, size_t V, unsigned seed) {
    unsigned s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        ids[i] = (int)((s >> 8) % V);
    }
}

/* (a) planted ranks of kind (VO, or QK where planted) in every layer and head. */
static void check_ranks(Model *m, const char *fam, farr_kind kind) {
    const ModelConfig *c = &m->cfg;
    int exact = 0, bad = 0, planted = 0;
    for (int L = 0; L < c->n_layers; L++)
        for (int h = 0; h < c->n_heads; h++) planted += synth_family_planted(fam, kind == FARR_QK, L, h, 0.999, NULL, NULL, NULL);
    if (!planted) return;
    for (int L = 0; L < c->n_layers; L++) {
        bool any = false;
        for (int h = 0; h < c->n_heads; h++) any |= synth_family_planted(fam, kind == FARR_QK, L, h, 0.999, NULL, NULL, NULL);
        if (!any) continue;
        FarrLayer *fl = NULL;
        if (farr_layer_compute(m, kind, L, FARR_NO_OFFSET, &fl) != AL_OK) {
            char what[32];
            snprintf(what, sizeof what, "ranks %s", farr_kind_name(kind));
            refused(fam, what);
            return;
        }
        static const double taus[2] = {0.999, 0.99};
        for (int h = 0; h < c->n_heads; h++)
            for (int t = 0; t < 2; t++) {
                int ea, eb, ef, ra, rb, rf;
                if (!synth_family_planted(fam, kind == FARR_QK, L, h, taus[t], &ea, &eb, &ef)) continue;
                farr_layer_ranks(fl, h, taus[t], &ra, &rb, &rf);
                bool ok = ra == ea && rb == eb && rf == ef;
                CHECK(ok, "%s %s L%d h%d tau %g: ranks %d %d %d, planted %d %d %d", fam, farr_kind_name(kind), L, h,
                      taus[t], ra, rb, rf, ea, eb, ef);
                if (ok) exact++; else bad++;
            }
        farr_layer_free(fl);
    }
    printf("  %-12s ranks %s %s: %d planted ranks exact, %d wrong\n", fam, farr_kind_name(kind), bad ? "FAIL" : "ok",
           exact, bad);
}

/* The description attnlab parses from config.json (model_config_parse: runs even where loading is
 * refused) against what the reference read, layer by layer. */
static void check_description(const char *fam, const char *dir) {
    RefModel *r = NULL;
    char *p = al_asprintf("%s/config.json", dir);
    size_t n = 0;
    char *text = p ? al_read_file(p, &n) : NULL;
    ModelConfig c;
    int rc = text ? model_config_parse(text, p, &c) : AL_ERR;
    CHECK(rc == AL_OK, "%s: config.json: %s", fam, al_errmsg());
    if (rc == AL_OK) CHECK_OK(ref_open(dir, &r));
    int bad = 0;
    for (int L = 0; r && L < c.n_layers; L++) {
        RefLayerInfo o;
        ref_describe(r, L, &o);
        const RopeScaling *rs = &c.rope_spec.scaling;
        double factor = cfg_layer_rope_scaled(&c, L) && rs->kind == RS_LINEAR ? rs->factor : 1.0;
        bool ok = (int)cfg_layer_window(&c, L) == o.window && cfg_layer_theta(&c, L) == o.theta &&
                  factor == o.rope_factor && fabs(cfg_attn_scale(&c, L) - o.scale) <= 1e-12 * o.scale &&
                  c.qk_rope_dim == o.rot && cfg_moe_layer(&c, L) == o.moe && c.norm_eps == o.eps &&
                  fabs(c.embed_scale - o.embed_scale) <= 1e-6 * o.embed_scale && c.attn_softcap == o.attn_cap &&
                  c.final_softcap == o.final_cap && c.tie_embeddings == o.tied;
        CHECK(ok, "%s layer %d: attnlab window %zu theta %g factor %g scale %g rotary %d moe %d eps %g embed x%g "
                  "caps %g %g tied %d; reference %d %g %g %g %d %d %g x%g %g %g %d", fam, L, cfg_layer_window(&c, L),
              cfg_layer_theta(&c, L), factor, cfg_attn_scale(&c, L), c.qk_rope_dim, cfg_moe_layer(&c, L), c.norm_eps,
              c.embed_scale, c.attn_softcap, c.final_softcap, c.tie_embeddings, o.window, o.theta, o.rope_factor,
              o.scale, o.rot, o.moe, o.eps, o.embed_scale, o.attn_cap, o.final_cap, o.tied);
        bad += !ok;
    }
    if (r) printf("  %-12s config %s: windows, RoPE bases / scaling, scale, rotary dims, MoE layers, eps, caps\n", fam,
                  bad ? "FAIL" : "ok");
    ref_free(r);
    free(text);
    free(p);
}

/* (b) logits and perplexity of attnlab's pass against the reference. */
static void check_forward(Model *m, const char *fam, const char *dir) {
    RefModel *r = NULL;
    CHECK_OK(ref_open(dir, &r));
    if (!r) return;
    Forward *f = NULL;
    if (fwd_new(m, NULL, &f) != AL_OK) {
        refused(fam, "forward");
        ref_free(r);
        return;
    }
    const size_t V = ref_vocab(r);
    CHECK(fwd_vocab(f) == V, "%s: vocab %zu, reference %zu", fam, fwd_vocab(f), V);
    int ids[T_PPL];
    tokens(ids, T_LOGITS, V, 7);
    float *z = malloc(T_LOGITS * V * sizeof *z);
    double *zr = malloc(T_LOGITS * V * sizeof *zr);
    CHECK_OK(ref_logits(r, ids, T_LOGITS, zr));
    fwd_reset(f);
    int rc = fwd_run(f, ids, T_LOGITS, FWD_LOGITS_ALL, z);
    CHECK(rc == AL_OK, "%s: fwd_run: %s", fam, al_errmsg());
    if (rc == AL_OK) {
        double dmax = 0, rmax = 0;
        size_t worst = 0, first_bad = T_LOGITS;
        for (size_t i = 0; i < T_LOGITS * V; i++) {
            double d = fabs((double)z[i] - zr[i]);
            if (d > dmax) { dmax = d; worst = i; }
            rmax = fmax(rmax, fabs(zr[i]));
        }
        for (size_t i = 0; i < T_LOGITS * V && first_bad == T_LOGITS; i++)
            if (fabs((double)z[i] - zr[i]) > REL_TOL * rmax) first_bad = i / V;
        bool ok = dmax <= REL_TOL * rmax;
        CHECK(ok, "%s: logits differ: max |diff| %.3g (rel %.3g) at position %zu token %zu (attnlab %.6g, reference "
                  "%.6g); first position off: %zu", fam, dmax, dmax / rmax, worst / V, worst % V, (double)z[worst],
              zr[worst], first_bad);
        printf("  %-12s logits %s: max |diff| %.3g of max |logit| %.3g (rel %.2g) over %d tokens\n", fam,
               ok ? "ok" : "FAIL", dmax, rmax, dmax / rmax, T_LOGITS);
    }
    tokens(ids, T_PPL, V, 11);
    double nref = 0;
    FwdPpl p = {0};
    CHECK_OK(ref_mean_nll(r, ids, T_PPL, &nref));
    rc = fwd_ppl(f, ids, T_PPL, T_PPL, &p);
    CHECK(rc == AL_OK, "%s: fwd_ppl: %s", fam, al_errmsg());
    if (rc == AL_OK) {
        bool ok = fabs(p.nll - nref) <= REL_TOL * fabs(nref) && p.tokens == T_PPL - 1;
        CHECK(ok, "%s: mean NLL %.9g over %zu tokens, reference %.9g", fam, p.nll, p.tokens, nref);
        printf("  %-12s ppl    %s: NLL %.7f, reference %.7f (ppl %.4f)\n", fam, ok ? "ok" : "FAIL", p.nll, nref,
               exp(nref));
    }
    free(z);
    free(zr);
    fwd_free(f);
    ref_free(r);
}

/* Rewrites dir/config.json of demo-llama as Mistral with a sliding window of 8 (the same weights):
 * the window semantics (key j seen from query i when i - j < window) against attnlab's. */
static int make_mistral(const char *dir) {
    char *p = al_asprintf("%s/config.json", dir);
    size_t n = 0;
    char *text = p ? al_read_file(p, &n) : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    char *out = NULL;
    if (root) {
        cJSON_ReplaceItemInObject(root, "model_type", cJSON_CreateString("mistral"));
        cJSON_AddNumberToObject(root, "sliding_window", 8);
        out = cJSON_Print(root);
    }
    FILE *f = out ? fopen(p, "w") : NULL;
    int rc = f && fputs(out, f) >= 0 ? AL_OK : al_err("cannot rewrite %s", p ? p : dir);
    if (f && fclose(f) != 0) rc = al_err("cannot write %s", p);
    cJSON_Delete(root);
    free(out);
    free(text);
    free(p);
    return rc;
}

/* One checkpoint already written in dir: load, ranks, forward. */
static void check_model(const char *fam, const char *dir, bool family) {
    Model *m = NULL;
    check_description(fam, dir);
    if (model_open(dir, &m) != AL_OK) {
        refused(fam, "load");
        return;
    }
    if (family) {
        check_ranks(m, fam, FARR_VO);
        check_ranks(m, fam, FARR_QK);
    }
    check_forward(m, fam, dir);
    model_free(m);
}

int main(void) {
    const char *tmp = test_tmpdir();
    /* baselines: the reference against attnlab's Llama and MLA paths */
    static const struct { const char *name; synth_kind kind; } base[] = {
        {"demo-llama", SYNTH_DEMO_LLAMA}, {"demo-r1", SYNTH_DEMO_R1}, {"mistral-w8", SYNTH_DEMO_LLAMA}};
    for (size_t i = 0; i < sizeof base / sizeof *base; i++) {
        char *dir = al_asprintf("%s/%s", tmp, base[i].name);
        SynthOptions o = {base[i].kind, DT_F32, 1, SYNTH_DEFAULT_SEED};
        CHECK_OK(synth_write(&o, dir));
        if (!strcmp(base[i].name, "mistral-w8")) CHECK_OK(make_mistral(dir));
        check_model(base[i].name, dir, false);
        free(dir);
    }
    for (int i = 0; synth_family_names[i]; i++) {
        const char *fam = synth_family_names[i];
        char *dir = al_asprintf("%s/%s", tmp, fam);
        CHECK_OK(synth_family_write(fam, DT_F32, SYNTH_DEFAULT_SEED, dir));
        check_model(fam, dir, true);
        free(dir);
    }
    printf("%d checks pending (refused by attnlab; strict mode %s)\n", pending_n, strict() ? "on" : "off");
    return check_done();
}
