/* test_held_spill.c -- issue 32's 4 GB on the 8B shape (m4g): a bf16-mode conversion's rewritten matrices (W_Q,
 * W_KVB in BF16, 67 + 8 MB per 8B layer) held in spill mappings (attn_layer_spill_held: page cache, not anonymous
 * memory), with the same numbers. On a BF16 Llama of hidden 1024 (2 layers), converted twice in compute bf16 -- with a
 * spill file and with $TMPDIR not a folder (no file: in memory, as before):
 *   - the spilled conversion's W_Q / W_KVB are spill mappings, the other's malloc'd; attn_layer_bytes the same;
 *   - the BF16 exports are the same bytes, and check's NLL (the run layers borrowing the held matrices) the same bits;
 *   - moving the in-memory conversion's matrices afterwards drops RssAnon by their bytes (normal builds; M_MMAP_THRESHOLD
 *     fixed so that the freed buffers go back to the kernel) and leaves check's NLL as it was. */
#include "test_transmla_util.h"
#include "test_mem_util.h"
#include "mla_export.h"
#include "tmla_hold.h"

#include <malloc.h>

static TmlaResult *convert(Model *m) {
    TmlaOpts o = tmla_opts_default();
    o.kv_rank = 64;
    o.hold_bf16 = true;
    TmlaResult *r = NULL;
    CHECK_OK(tmla_convert(m, &o, &r));
    if (r) CHECK_OK(mla_run_layers(r));
    return r;
}

static double check_nll(TmlaResult *r, Model *m) {
    int ids[40];
    for (int t = 0; t < 40; t++) ids[t] = (t * 7 + 3) % m->cfg.vocab;
    MlaCheckIn in = {.tokens = 24, .seed = 5, .ids = ids, .n = 40, .seqlen = 20, .compute = MM_BF16};
    MlaCheck *c = NULL;
    CHECK_OK(mla_check_stock(r, &in, &c));
    double v = c ? c->nll_export : NAN;
    mla_check_free(c);
    return v;
}

/* Bytes of r's held W_Q and W_KVB; *spilled: how many of them are spill mappings. */
static size_t held(const TmlaResult *r, int *spilled) {
    size_t b = 0;
    *spilled = 0;
    for (int l = 0; l < r->n_layers; l++)
        for (attn_held i = AH_Q; i < AH_N; i++)
            if ((i == AH_Q || i == AH_KVB) && r->layers[l]->held[i]) {
                b += wmat_bytes(&r->layers[l]->held[i]->w);
                *spilled += r->layers[l]->held[i]->spill != 0;
            }
    return b;
}

/* The BF16 exports of a and b under test_tmpdir() are the same bytes. */
static bool same_exports(const TmlaResult *a, const TmlaResult *b) {
    MlaExportOpts eo = {.dtype = DT_BF16};
    char *ea = al_asprintf("%s/ea", test_tmpdir()), *eb = al_asprintf("%s/eb", test_tmpdir());
    char *fa = al_asprintf("%s/model.safetensors", ea), *fb = al_asprintf("%s/model.safetensors", eb);
    bool same = mla_export(a, ea, &eo) == AL_OK && mla_export(b, eb, &eo) == AL_OK && same_file(fa, fb);
    free(ea); free(eb); free(fa); free(fb);
    return same;
}

int main(void) {
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    char *src = al_asprintf("%s/src", test_tmpdir());
    TuModel spec = {.model_type = "llama", .layers = 2, .hidden = 1024, .heads = 8, .kv_heads = 2, .head_dim = 128,
                    .inter = 64, .vocab = 64, .dtype = DT_BF16};
    Model *m = NULL;
    CHECK_OK(tu_write_model(src, &spec));
    CHECK_OK(model_open(src, &m));
    free(src);
    TmlaResult *a = m ? convert(m) : NULL;
    setenv("TMPDIR", "/dev/null", 1);                   /* no spill file: held in memory */
    TmlaResult *b = m ? convert(m) : NULL;
    unsetenv("TMPDIR");
    if (!a || !b) return check_done();
    int sa, sb;
    size_t bytes = held(a, &sa);
    CHECK(held(b, &sb) == bytes && sa == 4 && sb == 0, "spilled %d (want 4) and %d (want 0) of 4 matrices", sa, sb);
    CHECK(attn_layer_bytes(a->layers[0]) == attn_layer_bytes(b->layers[0]), "attn_layer_bytes %zu / %zu",
          attn_layer_bytes(a->layers[0]), attn_layer_bytes(b->layers[0]));
    CHECK(same_exports(a, b), "the BF16 exports of the spilled and the in-memory conversion differ");
    double na = check_nll(a, m), nb = check_nll(b, m);
    CHECK(na == nb && isfinite(na), "check's NLL %.17g spilled, %.17g in memory", na, nb);
    long r0 = status_kb("RssAnon");
    for (int l = 0; l < b->n_layers; l++) {
        attn_layer_spill_held(b->layers[l], AH_Q);
        attn_layer_spill_held(b->layers[l], AH_KVB);
    }
    long r1 = status_kb("RssAnon");
    printf("held W_Q + W_KVB: %zu bytes; moving the in-memory ones: RssAnon %ld -> %ld kB; NLL %.12g\n", bytes, r0, r1, na);
    CHECK(!MEASURED || (r0 > 0 && r0 - r1 > (long)(0.9 * bytes / 1024)), "RssAnon fell %ld kB for %zu kB held", r0 - r1,
          bytes / 1024);
    CHECK(held(b, &sb) == bytes && sb == 4 && check_nll(b, m) == nb, "moved: the same NLL");
    tmla_result_free(a);
    tmla_result_free(b);
    model_free(m);
    return check_done();
}
