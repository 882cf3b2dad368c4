/* test_check_inputs.c -- the inputs a conversion's report drew, recorded and drawn again
 * (core/methods/check_inputs.h): the manifest record and check_inputs.safetensors round-trip bit for bit
 * with their digest, a damaged file or a missing one is said, and TPA's check on the recorded
 * inputs (seed + layer, the calibration's second moment) gives its report's errors exactly --
 * in the session and from the export folder. */
#include "al.h"
#include "check.h"
#include "testutil.h"
#include "check_inputs.h"
#include "synth.h"
#include "tpa.h"

#include <math.h>
#include <unistd.h>

/* Per-layer SPD second moments (D x D): diag(1 + 0.1 l + 0.01 i) + a rank-one term. */
static double **make_sigma(int L, int D) {
    double **s = calloc((size_t)L, sizeof *s);
    for (int l = 0; l < L; l++) {
        s[l] = calloc((size_t)D * (size_t)D, sizeof(double));
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++)
                s[l][i * D + j] = (i == j ? 1 + 0.1 * l + 0.01 * i : 0) + 0.05 * sin(i + l) * sin(j + l);
    }
    return s;
}

static void free_sigma(double **s, int L) {
    for (int l = 0; s && l < L; l++) free(s[l]);
    free(s);
}

/* ci written as an export writes it: dir/m.json's "check_inputs" (and CI_FILE when it fits); *kind: the
 * manifest's digest_kind ("" without). */
static void write_record(const char *dir, const CheckInputs *ci, char *kind, size_t cap) {
    CkptWriter *w = NULL;
    CHECK_OK(ckpt_begin(dir, &(CkptOpts){0}, &w));
    cJSON *man = cJSON_CreateObject();
    if (w) CHECK_OK(ci_write(w, man, ci));
    const cJSON *dk = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(man, "check_inputs"), "digest_kind");
    if (kind) snprintf(kind, cap, "%s", cJSON_IsString(dk) ? dk->valuestring : "");
    if (w) CHECK_OK(ckpt_write_json(w, "m.json", man));
    if (w) CHECK_OK(ckpt_commit(w, NULL));
    cJSON_Delete(man);
}

/* The record round-trips; a damaged file and a record without the statistics are said. */
static void test_record(const char *tmp) {
    int L = 3, D = 8;
    double **sg = make_sigma(L, D);
    CheckInputs ci = {.seed = 1234567, .plus_layer = true, .tokens = 24, .stats = true, .n_layers = L, .hidden = D,
                      .sigma = sg};
    ci.digest = ci_digest(L, D, (const double *const *)sg, NULL);
    snprintf(ci.calib, sizeof ci.calib, "96 tokens of t.txt");
    CHECK(ci.digest != 0 && ci_fits(&ci), "digest %llx", (unsigned long long)ci.digest);
    sg[1][3] += 1e-12;
    CHECK(ci_digest(L, D, (const double *const *)sg, NULL) != ci.digest, "the digest sees one changed value");
    sg[1][3] -= 1e-12;
    char dir[4200], bad[4300];
    snprintf(dir, sizeof dir, "%s/record", tmp);
    write_record(dir, &ci, NULL, 0);
    CheckInputs back;
    bool found = false;
    CHECK_OK(ci_read_dir(dir, "m.json", &back, &found));
    CHECK(found && back.seed == ci.seed && back.plus_layer && back.tokens == 24 && back.stats && back.digest == ci.digest &&
          back.n_layers == L && back.hidden == D && back.from_file && !back.mu && !strcmp(back.calib, ci.calib),
          "record read back");
    for (int l = 0; back.sigma && l < L; l++)
        CHECK(!memcmp(back.sigma[l], sg[l], (size_t)D * D * sizeof(double)), "layer %d statistics bit for bit", l);
    CHECK(ci_layer_seed(&back, 2) == 1234569, "seed + layer");
    ci_free(&back);
    /* one byte of the statistics changed: the digest says so */
    snprintf(bad, sizeof bad, "%s/%s", dir, CI_FILE);
    FILE *f = fopen(bad, "r+b");
    if (f) { fseek(f, -20, SEEK_END); fputc(0x5a, f); fclose(f); }
    CHECK_ERR(ci_read_dir(dir, "m.json", &back, &found), "does not hold the statistics its manifest's digest names");
    /* statistics not at hand at export: the record keeps the digest, no file */
    snprintf(dir, sizeof dir, "%s/record2", tmp);
    ci.sigma = NULL;
    write_record(dir, &ci, NULL, 0);
    CHECK_OK(ci_read_dir(dir, "m.json", &back, &found));
    CHECK(found && back.stats && !back.sigma && back.digest == ci.digest && !back.from_file, "digest without the file");
    snprintf(bad, sizeof bad, "%s/%s", dir, CI_FILE);
    CHECK(access(bad, F_OK) != 0, "no statistics file");
    ci_free(&back);
    /* a manifest of an older attnlab: nothing recorded, found false (check then says so) */
    cJSON *old = cJSON_CreateObject();
    found = true;
    CHECK_OK(ci_read(dir, old, &back, &found));
    CHECK(!found && !back.stats && !back.sigma, "no check_inputs: not found");
    cJSON_Delete(old);
    free_sigma(sg, L);
}

/* Byte-wise FNV-1a 64 written out here: the digest every export before "digest_kind" recorded. */
static uint64_t fnv_bytes_ref(int L, int D, double **sg) {
    uint64_t h = 14695981039346656037ULL;
    for (int l = 0; l < L; l++) {
        const unsigned char *b = (const unsigned char *)&l;
        for (size_t i = 0; i < sizeof l; i++) { h ^= b[i]; h *= 1099511628211ULL; }
        b = (const unsigned char *)sg[l];
        for (size_t i = 0; i < (size_t)D * D * sizeof(double); i++) { h ^= b[i]; h *= 1099511628211ULL; }
    }
    return h;
}

/* dir/m.json's check_inputs with digest_kind set to kind (NULL: removed) and digest to hex (NULL: kept). */
static void edit_manifest(const char *dir, const char *kind, const char *hex) {
    char path[4300];
    snprintf(path, sizeof path, "%s/m.json", dir);
    char *text = al_read_file_max(path, NULL, 1 << 20, "manifest");
    cJSON *root = text ? cJSON_Parse(text) : NULL, *o = cJSON_GetObjectItemCaseSensitive(root, "check_inputs");
    if (o) {
        cJSON_DeleteItemFromObjectCaseSensitive(o, "digest_kind");
        if (kind) cJSON_AddStringToObject(o, "digest_kind", kind);
        if (hex) cJSON_ReplaceItemInObjectCaseSensitive(o, "digest", cJSON_CreateString(hex));
    }
    char *out = root ? cJSON_Print(root) : NULL;
    FILE *f = out ? fopen(path, "w") : NULL;
    if (f) { fputs(out, f); fclose(f); }
    CHECK(f != NULL, "manifest %s rewritten", path);
    free(out);
    cJSON_Delete(root);
    free(text);
}

/* The digest's two kinds: attnlab writes the word-wise one and names it; an export written before the
 * key (its digest byte-wise, no digest_kind) still reads and checks its statistics; a kind named wrong
 * or unknown is said. */
static void test_digest_kinds(const char *tmp) {
    int L = 3, D = 7;                           /* 49 words a layer: a tail past the 8 chains */
    double **sg = make_sigma(L, D);
    uint64_t words = ci_digest(L, D, (const double *const *)sg, NULL);
    uint64_t bytes = ci_digest_kind_of(CI_DIGEST_BYTES, L, D, (const double *const *)sg, NULL);
    CHECK(bytes == fnv_bytes_ref(L, D, sg), "the byte-wise kind is the old digest: %llx", (unsigned long long)bytes);
    CHECK(words != bytes && words != 0, "two kinds, two values");
    double keep = sg[2][48];
    sg[2][48] = nextafter(keep, 2);             /* the last word, in the tail */
    CHECK(ci_digest(L, D, (const double *const *)sg, NULL) != words, "the tail's word changes the digest");
    sg[2][48] = keep;
    double a = sg[1][3], b = sg[1][4];          /* two words in neighbouring chains swapped */
    sg[1][3] = b, sg[1][4] = a;
    CHECK(ci_digest(L, D, (const double *const *)sg, NULL) != words, "a swap across chains changes the digest");
    sg[1][3] = a, sg[1][4] = b;
    uint64_t h = 0;
    for (int l = 0; l < L; l++) h = ci_digest_layer(h, l, D, sg[l], NULL);
    CHECK(h == words, "layer by layer is ci_digest");

    char dir[4200], hex[32];
    snprintf(dir, sizeof dir, "%s/kinds", tmp);
    CheckInputs ci = {.seed = 5, .tokens = 8, .stats = true, .n_layers = L, .hidden = D, .sigma = sg, .digest = words};
    char kind[64];
    write_record(dir, &ci, kind, sizeof kind);
    CHECK(!strcmp(kind, "fnv1a64-words8"), "the manifest names the kind: %s", kind);
    CheckInputs back;
    bool found = false;
    CHECK_OK(ci_read_dir(dir, "m.json", &back, &found));
    CHECK(found && back.from_file && back.digest_kind == CI_DIGEST_WORDS, "the word-wise record read back");
    ci_free(&back);
    /* an export from before the key: byte-wise digest, no digest_kind */
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)bytes);
    edit_manifest(dir, NULL, hex);
    CHECK_OK(ci_read_dir(dir, "m.json", &back, &found));
    CHECK(found && back.from_file && back.digest_kind == CI_DIGEST_BYTES && back.digest == bytes,
          "an older export's statistics check against its byte-wise digest");
    for (int l = 0; back.sigma && l < L; l++)
        CHECK(!memcmp(back.sigma[l], sg[l], (size_t)D * D * sizeof(double)), "layer %d bit for bit", l);
    ci_free(&back);
    edit_manifest(dir, "fnv1a64-words8", NULL);   /* a byte-wise value under the word-wise name */
    CHECK_ERR(ci_read_dir(dir, "m.json", &back, &found), "does not hold the statistics its manifest's digest names");
    edit_manifest(dir, "sha3-256", NULL);
    CHECK_ERR(ci_read_dir(dir, "m.json", &back, &found), "written by a newer attnlab");
    free_sigma(sg, L);
}

/* TPA fitted and reported under a second moment: the check on the recorded inputs is the report. */
static void test_tpa(const char *tmp) {
    char dir[4200], out[4200];
    snprintf(dir, sizeof dir, "%s/demo-llama", tmp);
    SynthOptions so = {.kind = SYNTH_DEMO_LLAMA, .dtype = DT_F32, .shards = 1, .seed = 7};
    CHECK_OK(synth_write(&so, dir));
    Model *m = NULL;
    CHECK_OK(model_open(dir, &m));
    if (!m) return;
    int L = m->cfg.n_layers, D = m->cfg.hidden;
    double **sg = make_sigma(L, D);
    TpaOpts o = tpa_opts_default();
    o.k_rank = o.v_rank = 1;
    o.eval_tokens = 24;
    o.seed = 11;
    o.sigma = (const double *const *)sg;
    TpaModel *t = NULL;
    CHECK_OK(tpa_convert(m, &o, &t));
    CheckInputs ci = {.seed = 11, .plus_layer = true, .tokens = 24, .stats = true, .n_layers = L, .hidden = D,
                      .sigma = sg, .digest = ci_digest(L, D, (const double *const *)sg, NULL)};
    TpaCheck *k = NULL;
    if (t) CHECK_OK(tpa_check_in(t, m, &(TpaCheckIn){.tokens = 24, .seed = 11, .plus_layer = true,
                                                     .sigma = (const double *const *)sg}, &k));
    for (int l = 0; k && l < L; l++)
        CHECK(k->out_err[l] == t->layers[l]->rep.out_err && k->score_err[l] == t->layers[l]->rep.score_err,
              "layer %d: check %.9g, report %.9g", l, k->out_err[l], t->layers[l]->rep.out_err);
    CHECK(k && k->nll_tokens == 0 && isnan(k->nll_source), "no text: no perplexity");
    tpa_check_free(k);
    k = NULL;
    /* the unit-variance draw of one seed (the old check) is not the report */
    if (t) CHECK_OK(tpa_check(t, m, 24, 11, &k));
    if (k) CHECK(fabs(k->out_err[1] - t->layers[1]->rep.out_err) > 1e-3, "unit variance differs: %.6g vs %.6g",
                 k->out_err[1], t->layers[1]->rep.out_err);
    tpa_check_free(k);
    k = NULL;
    /* the export records them; loaded back, the check on them is the report again */
    snprintf(out, sizeof out, "%s/tpa", tmp);
    if (t) CHECK_OK(tpa_export_opts(t, out, &(TpaExportOpts){.dtype = DT_F32, .check = &ci}));
    CheckInputs back;
    bool found = false;
    TpaModel *ld = NULL;
    CHECK_OK(ci_read_dir(out, TPA_MANIFEST, &back, &found));
    CHECK_OK(tpa_load(out, &ld));
    if (ld && found && back.sigma)
        CHECK_OK(tpa_check_in(ld, m, &(TpaCheckIn){.tokens = back.tokens, .seed = back.seed, .plus_layer = back.plus_layer,
                                                   .sigma = (const double *const *)back.sigma}, &k));
    for (int l = 0; k && l < L; l++)
        CHECK(k->out_err[l] == t->layers[l]->rep.out_err, "export layer %d: check %.9g, report %.9g", l, k->out_err[l],
              t->layers[l]->rep.out_err);
    CHECK(k != NULL, "the export's check ran");
    /* a text: perplexity before and after, the converted model worse than the source */
    int ids[48];
    for (int i = 0; i < 48; i++) ids[i] = (i * 5 + 1) % m->cfg.vocab;
    TpaCheck *p = NULL;
    if (t) CHECK_OK(tpa_check_in(t, m, &(TpaCheckIn){.tokens = 8, .seed = 1, .ids = ids, .n = 48, .seqlen = 24}, &p));
    CHECK(p && p->nll_tokens == 46 && isfinite(p->nll_source) && isfinite(p->nll_conv) && p->nll_conv != p->nll_source,
          "perplexity on the text: %zu tokens", p ? p->nll_tokens : 0);
    tpa_check_free(p);
    tpa_check_free(k);
    ci_free(&back);
    tpa_model_free(ld);
    tpa_model_free(t);
    free_sigma(sg, L);
    model_free(m);
}

int main(void) {
    const char *tmp = test_tmpdir();
    test_record(tmp);
    test_digest_kinds(tmp);
    test_tpa(tmp);
    return check_done();
}
