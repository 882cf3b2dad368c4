/* test_lmc_layer_major.c -- issue 32: calibration runs layer-major (fwd_run_hooked_layers): each layer over every
 * window of a group, then the next layer, so each layer's weights are read once per group and each layer's G_X
 * (a spill mapping) is dirtied only while its layer runs.
 *
 * On stories260K-hf (5 layers, hidden 64, GQA 8 / 4) and a written llama of hidden 1024 (3 layers, F32):
 * 1. every hook call of the layer-major run is a call of the window-major run (kind, layer, sequence number,
 *    positions, rows, the bits of the rows), in window-major's order stably sorted by (group, layer);
 * 2. calib_run takes the route (fwd_layer_major_groups 1) and its Grams, sums and counts are the bits of the
 *    window-major run's; one window per group (4 groups): the same bits again;
 * 3. through calib_run, at each progress report (after layer l of the group) layers 0..l have all the windows'
 *    tokens and layers l+1.. none: one layer's Grams are written between other layers' (window-major: every
 *    layer after each window);
 * 4. a residual-stream hook (fwd_set_resid) keeps the window-major route (groups 0), with the same Grams. */
#include "check.h"
#include "test_transmla_util.h"
#include "calib.h"
#include "forward.h"
#include "model.h"
#include "synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NSEQ = 4, MAXEV = 4096 };

/* ------------------------------------------------------------------ hook-order probe */

typedef struct {
    unsigned kind;
    int layer;
    size_t seq, pos0, t0, T;
    unsigned long long sum;           /* FNV-1a over the rows' bytes */
} Ev;

typedef struct { Ev ev[MAXEV]; size_t n; } Evs;

static int record(const FwdAct *a, void *ud) {
    Evs *e = ud;
    if (e->n == MAXEV) return al_err("too many hook calls");
    unsigned long long h = 1469598103934665603ull;
    for (size_t t = 0; t < a->T; t++) {
        const unsigned char *p = (const unsigned char *)(a->x + t * a->ld);
        for (size_t i = 0; i < a->heads * a->head_dim * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    }
    e->ev[e->n++] = (Ev){a->kind, a->layer, a->seq, a->pos0, a->t0, a->T, h};
    return AL_OK;
}

static bool same_ev(const Ev *a, const Ev *b) {
    return a->kind == b->kind && a->layer == b->layer && a->seq == b->seq && a->pos0 == b->pos0 && a->t0 == b->t0 &&
           a->T == b->T && a->sum == b->sum;
}

/* Window-major events w stably reordered by (group of per windows, layer) equal the layer-major events l. */
static bool reordered(const Evs *w, const Evs *l, size_t seq0, size_t per, int NL) {
    if (w->n != l->n) return false;
    size_t k = 0, ngroups = (NSEQ + per - 1) / per;
    for (size_t g = 0; g < ngroups; g++)
        for (int L = 0; L < NL; L++)
            for (size_t i = 0; i < w->n; i++) {
                const Ev *e = &w->ev[i];
                if (e->layer != L || (e->seq - seq0 - 1) / per != g) continue;
                if (k >= l->n || !same_ev(e, &l->ev[k])) return false;
                k++;
            }
    return k == l->n;
}

static void probe(Forward *f, const int *ids, size_t T, int NL, size_t group_bytes, size_t per, const char *what) {
    static Evs w, l;
    w.n = l.n = 0;
    FwdHooks hw = {.mask = FWD_ACT_ALL, .fn = record, .ud = &w, .chunk = 1024, .whole_seqs = true};
    FwdHooks hl = hw;
    hl.ud = &l;
    fwd_reset(f);
    CHECK_OK(fwd_run_hooked(f, &hw, ids, NSEQ, T));
    size_t seq0 = w.n ? w.ev[0].seq - 1 : 0;
    CHECK_OK(fwd_run_hooked_layers(f, &hl, ids, NSEQ, T, group_bytes));
    size_t seq1 = l.n ? l.ev[0].seq - 1 : 0;
    CHECK(fwd_layer_major_groups(f) == (NSEQ + per - 1) / per, "%s: %zu groups", what, fwd_layer_major_groups(f));
    CHECK(w.n > (size_t)NL * NSEQ && w.n == l.n, "%s: %zu hook calls window-major, %zu layer-major", what, w.n, l.n);
    for (size_t i = 0; i < l.n; i++) l.ev[i].seq -= seq1 - seq0;     /* the sequence numbers run on between runs */
    CHECK(seq1 - seq0 == NSEQ + 1, "%s: the run counts %zu sequences", what, seq1 - seq0);
    CHECK(reordered(&w, &l, seq0, per, NL), "%s: the hooks' calls are window-major's, layer by layer", what);
}

/* ------------------------------------------------------------------ Grams */

static bool same_stats(const CalibStats *a, const CalibStats *b) {
    const CalibShape *sh = &a->sh;
    size_t D = (size_t)sh->hidden, NL = (size_t)sh->n_layers;
    double *ga = malloc(D * D * sizeof(double)), *gb = malloc(D * D * sizeof(double));
    bool same = ga && gb && !memcmp(a->sx, b->sx, NL * D * sizeof(double)) &&
                !memcmp(a->tokens, b->tokens, NL * sizeof(size_t)) && !memcmp(a->seqs, b->seqs, NL * sizeof(size_t));
    for (int l = 0; same && l < sh->n_layers; l++)
        for (calib_which w = CALIB_K; same && w <= CALIB_X; w++) {
            size_t n = w == CALIB_X ? D : w == CALIB_V ? (size_t)sh->d_v : (size_t)sh->d_qk;
            for (int g = 0; same && g < (w == CALIB_X ? 1 : sh->n_kv_heads); g++)
                same = calib_gram(a, w, l, g, ga) == AL_OK && calib_gram(b, w, l, g, gb) == AL_OK &&
                       !memcmp(ga, gb, n * n * sizeof(double));
        }
    free(ga); free(gb);
    return same;
}

typedef struct { CalibStats *st; size_t seqlen; } Ctx;

static int calib_hook(const FwdAct *a, void *ud) {          /* calib_run's hook */
    Ctx *c = ud;
    int rc = calib_add_act(c->st, a);
    if (rc == AL_OK && a->kind == FWD_ATTN_IN && a->pos0 + a->T == c->seqlen) calib_seq_done(c->st, a->layer);
    return rc;
}

/* Statistics of NSEQ windows: layer-major with group_bytes (or window-major when group_bytes is SIZE_MAX). */
static CalibStats *stats(Forward *f, const Model *m, const int *ids, size_t T, size_t group_bytes) {
    CalibShape sh;
    CalibStats *st = NULL;
    if (calib_shape_of(m, &sh) != AL_OK || calib_new(&sh, true, &st) != AL_OK) return NULL;
    Ctx c = {st, T};
    FwdHooks h = {.mask = calib_hook_mask(st), .fn = calib_hook, .ud = &c, .chunk = 1024, .whole_seqs = true};
    int rc = group_bytes == SIZE_MAX ? fwd_run_hooked(f, &h, ids, NSEQ, T)
                                     : fwd_run_hooked_layers(f, &h, ids, NSEQ, T, group_bytes);
    if (rc != AL_OK) { calib_free(st); return NULL; }
    return st;
}

/* ------------------------------------------------------------------ progress: one layer at a time */

typedef struct { const CalibStats *st; int NL; size_t want, reports, bad, written; } Prog;
static Prog prog;

/* True when layer l's G_X in st->gx (the mapping) is all zeros. */
static bool gx_zero(const CalibStats *st, int l) {
    size_t n = (size_t)st->sh.hidden * (st->sh.hidden + 1) / 2;
    for (size_t i = 0; i < n; i++)
        if (st->gx[(size_t)l * n + i] != 0) return false;
    return true;
}

/* After layer done-1 of the one group: layers 0..done-1 have every window's tokens, the rest none; where G_X is a
 * mapping, the layer just run has not been written into it (held), the layer before it has, once. */
static void on_progress(const char *label, size_t done, size_t total, void *ud) {
    (void)ud;
    if (!label || !prog.st) return;
    prog.reports++;
    if (total != (size_t)prog.NL || done == 0 || done > total) { prog.bad++; return; }
    for (int l = 0; l < prog.NL; l++)
        if (prog.st->tokens[l] != ((size_t)l < done ? prog.want : 0)) prog.bad++;
    if (!calib_spilled(prog.st)) return;
    if (!gx_zero(prog.st, (int)done - 1)) prog.written++;          /* written while its windows ran */
    if (done >= 2 && gx_zero(prog.st, (int)done - 2)) prog.bad++;   /* not written back when the next began */
}

static void through_calib_run(Forward *f, const Model *m, const int *ids, size_t T, const CalibStats *wm,
                              const char *what) {
    CalibShape sh;
    CalibStats *st = NULL;
    CHECK_OK(calib_shape_of(m, &sh));
    CHECK_OK(calib_new(&sh, true, &st));
    prog = (Prog){st, sh.n_layers, NSEQ * T, 0, 0, 0};
    al_set_progress(on_progress, NULL);
    if (st) CHECK_OK(calib_run(st, f, ids, NSEQ, T));
    al_set_progress(NULL, NULL);
    CHECK(fwd_layer_major_groups(f) == 1, "%s: calib_run ran layer-major (%zu groups)", what,
          fwd_layer_major_groups(f));
    CHECK(prog.reports == (size_t)sh.n_layers && prog.bad == 0,
          "%s: %zu progress reports, %zu with a layer's tokens not those of layer-major order", what, prog.reports,
          prog.bad);
    CHECK(st && wm && same_stats(st, wm), "%s: calib_run's Grams are the window-major run's bits", what);
    if (st && calib_spilled(st)) {
        CHECK(prog.written == 0, "%s: %zu layers' G_X written into the mapping while their windows ran", what,
              prog.written);
        CHECK(st->gx_hold_flushes == (size_t)sh.n_layers, "%s: each layer's G_X written back once (%zu)", what,
              st->gx_hold_flushes);
    } else
        printf("%s: G_X not spilled (no file under $TMPDIR): the mapping checks skipped\n", what);
    prog.st = NULL;
    calib_free(st);
}

static int resid_pass(int layer, float *x, size_t T, void *ud) {
    (void)layer; (void)x; (void)T; (void)ud;
    return AL_OK;
}

static void model_case(const char *path, size_t T, const char *what) {
    Model *m = NULL;
    Forward *f = NULL;
    CHECK_OK(model_open(path, &m));
    if (m) CHECK_OK(fwd_new(m, NULL, &f));
    if (!f) { model_free(m); return; }
    int NL = m->cfg.n_layers, V = (int)fwd_vocab(f);
    int *ids = malloc(NSEQ * T * sizeof(int));
    for (size_t i = 0; i < NSEQ * T; i++) ids[i] = 1 + (int)((i * 37 + i / 7) % (size_t)(V - 1));
    CHECK(fwd_layer_major_refusal(f) == NULL, "%s: layer-major allowed", what);
    probe(f, ids, T, NL, 0, NSEQ, what);
    probe(f, ids, T, NL, 1, 1, what);                                  /* one window a group */
    probe(f, ids, T, NL, 3 * T * m->cfg.hidden * sizeof(float), 3, what);   /* groups of 3 and 1 */
    CalibStats *wm = stats(f, m, ids, T, SIZE_MAX), *lm = stats(f, m, ids, T, 0), *l1 = stats(f, m, ids, T, 1);
    CHECK(wm && lm && same_stats(wm, lm), "%s: layer-major Grams are window-major's bits", what);
    CHECK(wm && l1 && same_stats(wm, l1), "%s: one window a group, the same bits", what);
    CHECK(wm && wm->tokens[NL - 1] == NSEQ * T && wm->seqs[0] == NSEQ, "%s: counts", what);
    through_calib_run(f, m, ids, T, wm, what);
    fwd_set_resid(f, 0, resid_pass, NULL);
    CHECK(fwd_layer_major_refusal(f) != NULL, "%s: a residual hook refuses layer-major", what);
    CalibStats *rs = stats(f, m, ids, T, 0);
    CHECK(fwd_layer_major_groups(f) == 0 && rs && wm && same_stats(rs, wm),
          "%s: with a residual hook, window-major (%zu groups), the same Grams", what, fwd_layer_major_groups(f));
    fwd_set_resid(f, 0, NULL, NULL);
    calib_free(wm); calib_free(lm); calib_free(l1); calib_free(rs);
    free(ids);
    fwd_free(f);
    model_free(m);
}

/* ------------------------------------------------------------------ every family */

/* Each synthetic family (F32): layer-major where fwd_layer_major_refusal allows (linear-attention, Mamba-2 and KDA
 * states zeroed per window), the hook calls of window-major; where refused, window-major (groups 0). */
static void families(const char *tmp) {
    int ran = 0, refused = 0;
    for (int i = 0; synth_family_names[i]; i++) {
        const char *fam = synth_family_names[i];
        char *dir = al_asprintf("%s/%s", tmp, fam);
        Model *m = NULL;
        Forward *f = NULL;
        CHECK_OK(synth_family_write(fam, DT_F32, SYNTH_DEFAULT_SEED, dir));
        if (model_open(dir, &m) == AL_OK && fwd_new(m, NULL, &f) == AL_OK) {
            enum { T = 12 };
            int ids[NSEQ * T];
            for (size_t k = 0; k < NSEQ * T; k++) ids[k] = (int)((k * 37 + 5) % fwd_vocab(f));
            const char *why = fwd_layer_major_refusal(f);
            if (why) {
                static Evs w;
                w.n = 0;
                FwdHooks h = {.mask = FWD_ACT_ALL, .fn = record, .ud = &w, .chunk = 1024, .whole_seqs = true};
                CHECK_OK(fwd_run_hooked_layers(f, &h, ids, NSEQ, T, 0));
                CHECK(fwd_layer_major_groups(f) == 0, "%s (%s): window-major", fam, why);
                printf("%s: window-major (%s)\n", fam, why);
                refused++;
            } else {
                probe(f, ids, T, m->cfg.n_layers, 0, NSEQ, fam);
                probe(f, ids, T, m->cfg.n_layers, 1, 1, fam);
                ran++;
            }
        }
        else printf("%s: not run (%s)\n", fam, al_errmsg());
        al_err_clear();
        fwd_free(f);
        model_free(m);
        free(dir);
    }
    printf("families: %d layer-major, %d window-major\n", ran, refused);
    CHECK(ran > 10 && refused > 0, "families: %d layer-major, %d refused", ran, refused);
}

int main(void) {
    const char *models = getenv("ATTNLAB_MODELS");
    char *hf = al_asprintf("%s/stories260K-hf", models ? models : "tests/models");
    model_case(hf, 48, "stories260K-hf");
    free(hf);
    const char *tmp = test_tmpdir();
    char *dir = al_asprintf("%s/h1024", tmp);
    TuModel tm = {.model_type = "llama", .layers = 3, .hidden = 1024, .heads = 16, .kv_heads = 2, .head_dim = 64,
                  .inter = 128, .vocab = 64, .dtype = DT_F32};
    CHECK_OK(tu_write_model(dir, &tm));
    model_case(dir, 40, "hidden 1024");
    free(dir);
    families(tmp);
    return check_done();
}
