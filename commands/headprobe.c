/* headprobe.c -- what a head does on real text (headprobe.h): token strings, one head's attention
 * pattern from the forward pass's capture, ablation perplexities with the pass's head mask. */
#define _GNU_SOURCE
#include "headprobe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layersel.h"
#include "ws_lm.h"

/* ================================================================ token strings */

/* A special token's piece without the whitespace around it (llama2.c stores BOS as "\n<s>\n"). */
static char *special_piece(const Tokenizer *t, int id) {
    const char *p = tok_piece(t, id);
    if (!p) p = "";
    while (*p == ' ' || *p == '\n') p++;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\n')) n--;
    return strndup(p, n);
}

/* Token i's string: decode(ids[i-1..i]) minus decode(ids[i-1]) (the decoders' rules look one token back:
 * llama2.c drops the space after BOS; special tokens skipped so SentencePiece's first space goes too). */
static char *one_string(const Tokenizer *t, const int *ids, size_t i) {
    if (ids[i] == tok_bos(t) || ids[i] == tok_eos(t)) return special_piece(t, ids[i]);
    char *both = NULL, *prev = NULL, *r = NULL;
    size_t k = i ? i - 1 : i;
    if (tok_decode(t, ids + k, i - k + 1, true, &both) != AL_OK) return NULL;
    if (i && tok_decode(t, ids + k, 1, true, &prev) != AL_OK) { free(both); return NULL; }
    size_t lp = prev ? strlen(prev) : 0;
    if (lp <= strlen(both) && (!lp || !memcmp(both, prev, lp))) r = strdup(both + lp);
    else if (tok_decode(t, ids + i, 1, true, &r) != AL_OK) r = NULL;
    free(both);
    free(prev);
    return r;
}

int probe_strings(const Tokenizer *t, const int *ids, size_t n, char ***out) {
    char **s = al_calloc(n ? n : 1, sizeof *s, "token strings");
    if (!s) return AL_ERR;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] = t ? one_string(t, ids, i) : al_asprintf("#%d", ids[i]))) {
            probe_strings_free(s, i);
            return al_err_ctx("token %zu (id %d): its string", i, ids[i]);
        }
    *out = s;
    return AL_OK;
}

void probe_strings_free(char **s, size_t n) {
    for (size_t i = 0; s && i < n; i++) free(s[i]);
    free(s);
}

/* Length of the valid UTF-8 sequence at p (0: invalid). */
static size_t utf8_len(const unsigned char *p) {
    size_t n = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    for (size_t k = 1; k < n; k++)
        if ((p[k] & 0xC0) != 0x80) return 0;
    return n;
}

void probe_label(const char *s, char *buf, size_t cap) {
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p && k + 5 < cap) {
        size_t n = utf8_len(p);
        if (*p == '\n' || *p == '\t') { k += (size_t)snprintf(buf + k, cap - k, "\\%c", *p == '\n' ? 'n' : 't'); p++; }
        else if (n == 0 || *p < 0x20 || *p == 0x7f) k += (size_t)snprintf(buf + k, cap - k, "\\x%02X", *p++);
        else if (k + n < cap) { memcpy(buf + k, p, n); k += n; p += n; }
        else break;
    }
    buf[k] = 0;
}

/* ================================================================ text */

/* Token ids from FILE (`ids FILE`), with the model's tokenizer for their strings when it has one (*tok NULL
 * else: the strings are the ids). */
static int encode_ids(Session *s, Model *m, const char *file, Tokenizer **tok, int **ids, size_t *n) {
    if (lm_tokenizer(s, m, tok) != AL_OK) {
        al_err_clear();
        *tok = NULL;
    }
    if (lm_read_ids(file, ids, n) != AL_OK) return AL_ERR;
    for (size_t i = 0; *tok && i < *n; i++)
        if ((size_t)(*ids)[i] >= tok_vocab(*tok)) *tok = NULL;
    return AL_OK;
}

int probe_encode(Session *s, Model *m, const char *text, const char *file, const char *verb, Tokenizer **tok,
                 int **ids, size_t *n) {
    char *owned = NULL;
    size_t len;
    if (file && *file && !strcmp(text, "ids")) {
        int rc = encode_ids(s, m, file, tok, ids, n);
        if (rc == AL_OK && *n < 2) { free(*ids); *ids = NULL; rc = al_err("%s: %s holds %zu id%s; at least 2", verb, file, *n, al_s(*n)); }
        return rc;
    }
    if (lm_tokenizer(s, m, tok) != AL_OK) return AL_ERR;
    if (file && *file) {
        if (strcmp(text, "file") != 0)
            return al_err("%s: give TEXT (one quoted string), `file FILE` or `ids FILE`, not '%s' followed by '%s'", verb,
                          text, file);
        if (!(owned = al_read_file(file, &len))) return AL_ERR;
        text = owned;
    } else if (al_check_regular(text, "a file") == AL_OK)   /* tokenize's rule: a file is `file FILE` */
        return al_err("%s: '%s' is a file: `%s file %s` reads its contents (TEXT is encoded as typed)", verb, text, verb,
                      text);
    else {
        al_err_clear();
        len = strlen(text);
    }
    int rc = tok_encode(*tok, text, len, true, ids, n);
    free(owned);
    if (rc == AL_OK && *n < 2) {
        free(*ids);
        *ids = NULL;
        return al_err("%s: the text encodes to %zu token%s; a pattern needs at least 2", verb, *n, al_s(*n));
    }
    return rc;
}

/* ================================================================ patterns */

int probe_check_head(const Model *m, int layer, int head, size_t T) {
    const ModelConfig *c = &m->cfg;
    if (layer < 0 || layer >= c->n_layers) return al_err("layer %d is out of range 0-%d", layer, c->n_layers - 1);
    if (head < 0 || head >= c->n_heads) return al_err("head %d is out of range 0-%d", head, c->n_heads - 1);
    if (!layersel_attn(c, layer)) {
        char buf[256];
        return al_err("layer %d of %s is %s: it has no softmax attention heads (attention layers: %s)", layer, m->name,
                      layersel_other_kind(c), layersel_text(c, 0, c->n_layers - 1, buf, sizeof buf));
    }
    (void)T;
    return AL_OK;
}

int probe_pattern(Forward *f, const int *ids, size_t T, int layer, int head, ProbePattern *out) {
    *out = (ProbePattern){0};
    if (T > fwd_max_ctx(f))
        return al_err("the text has %zu token%s; the model's context is %zu (`max-tokens N` takes the first N)", T, al_s(T),
                      fwd_max_ctx(f));
    float *P = al_malloc3(T, T, sizeof *P, "the attention pattern");
    if (!P) return AL_ERR;
    FwdCapture cap = {.layer = layer, .head = head, .P = P, .cap_rows = T};
    fwd_set_capture(f, &cap);
    fwd_reset(f);
    int rc = fwd_run(f, ids, T, FWD_LOGITS_NONE, NULL);
    fwd_set_capture(f, NULL);
    fwd_reset(f);
    if (rc == AL_OK && cap.rows != T) rc = al_err("layer %d head %d: %zu of %zu rows captured", layer, head, cap.rows, T);
    if (rc != AL_OK) { free(P); return rc; }
    double lost = 0;
    for (size_t i = 0; i < T; i++) {
        double sum = 0;
        for (size_t j = 0; j <= i; j++) sum += P[i * T + j];
        lost += 1 - sum;
    }
    *out = (ProbePattern){.P = P, .T = T, .sink = fwd_attn_sinks(f, layer) ? lost / (double)T : 0};
    return AL_OK;
}

const Xform *probe_xform(Session *s, Model *m, char *headline, size_t cap) {
    return xform_measured(s, m, false, false, "attend", headline, cap);
}

int probe_pattern_xform(Session *s, const Xform *x, Forward *f, const int *ids, size_t T, int layer, int head,
                        ProbePattern *out) {
    XformAttn held;
    int rc = xform_attn_set(s, x, f, &held);
    if (rc != AL_OK) return rc;
    rc = probe_pattern(f, ids, T, layer, head, out);
    xform_attn_clear(f, &held);
    return rc;
}

/* ================================================================ ablation */

int probe_ppl_tokens(Session *s, Model *m, const Args *a, int **ids, size_t *n, size_t *L) {
    const char *what = args_str(a, "what"), *file = args_str(a, "file");
    *ids = NULL;
    *n = 0;
    bool as_text = file && *file && !strcmp(what, "text");   /* ppl's and check's `text FILE` */
    if (file && *file && !as_text && strcmp(what, "ids") != 0)
        return al_err("give FILE or `text FILE` (a text), or `ids FILE` (token ids), not '%s' followed by '%s'", what,
                      file);
    int rc = lm_text_ids(s, m, as_text ? file : what, as_text ? NULL : file, ids, n);
    if (rc != AL_OK) return rc;
    long ctx = m->cfg.max_pos > 0 ? m->cfg.max_pos : 512;    /* ppl's default: min(512, the context) */
    *L = (size_t)(args_given(a, "seqlen") ? args_int(a, "seqlen") : ctx < 512 ? ctx : 512);
    if (args_given(a, "max-tokens") && (size_t)args_int(a, "max-tokens") < *n) *n = (size_t)args_int(a, "max-tokens");
    if (*n < 2) { free(*ids); *ids = NULL; return al_err("the text has %zu token%s; at least 2 are needed", *n, al_s(*n)); }
    return AL_OK;
}

int probe_ablate(Forward *f, const int *ids, size_t n, size_t L, int layer, const int *heads, size_t nh, FwdPpl *out) {
    fwd_clear_head_mask(f);
    int rc = AL_OK;
    for (size_t i = 0; i < nh && rc == AL_OK; i++) rc = fwd_mask_head(f, layer, heads[i], true);
    if (rc == AL_OK) rc = fwd_ppl(f, ids, n, L, out);
    fwd_clear_head_mask(f);
    return rc;
}

/* ================================================================ ablations over a kept prefix */

struct ProbeAblation {
    Forward *f;
    const int *ids;
    size_t n, L, D, rows;       /* rows: the windows' tokens (a last window of one token is not run) */
    bool keep;                  /* no layer reads an earlier layer's cache: the stream can be kept */
    int layer;                  /* the layer whose input x holds (-1: none yet) */
    float *x, *next;            /* (rows, D) the stream at a layer's input, the windows' rows in order */
    int play, rec;              /* the hook: x replayed at layer play, recorded into next at layer rec (-1: no) */
    bool stop;                  /* ... the pass ends once rec is recorded */
    size_t off_play, off_rec;   /* ... rows done */
    size_t layers_run;
};

/* fwd_set_resid's hook: replays x, records next (then ends the pass when told to), counts the layers run. */
static int ablation_hook(int layer, float *x, size_t T, void *ud) {
    ProbeAblation *a = ud;
    size_t b = T * a->D * sizeof *x;
    a->layers_run++;
    if (layer == a->play) { memcpy(x, a->x + a->off_play * a->D, b); a->off_play += T; }
    if (layer != a->rec) return AL_OK;
    memcpy(a->next + a->off_rec * a->D, x, b);
    a->off_rec += T;
    return a->stop ? FWD_STOP : AL_OK;
}

int probe_ablation_new(Forward *f, const int *ids, size_t n, size_t L, ProbeAblation **out) {
    const ModelConfig *c = &fwd_model(f)->cfg;
    ProbeAblation *a = al_calloc(1, sizeof *a, "an ablation");
    if (!a) return AL_ERR;
    *a = (ProbeAblation){.f = f, .ids = ids, .n = n, .L = L, .D = (size_t)c->hidden, .keep = true, .layer = -1,
                         .play = -1, .rec = -1};
    a->rows = L >= 2 && n % L == 1 ? n - 1 : n;
    for (int l = 0; l < c->n_layers; l++) a->keep &= cfg_kv_source(c, l) == l;
    if (a->keep && (!(a->x = al_malloc3(a->rows, a->D, sizeof(float), "the residual stream")) ||
                    !(a->next = al_malloc3(a->rows, a->D, sizeof(float), "the residual stream")))) {
        probe_ablation_free(a);
        return AL_ERR;
    }
    *out = a;
    return AL_OK;
}

void probe_ablation_free(ProbeAblation *a) {
    if (!a) return;
    free(a->x);
    free(a->next);
    free(a);
}

size_t probe_ablation_layers_run(const ProbeAblation *a) { return a->layers_run; }

/* Runs the hook as set (play, rec) from layer `from` over the windows: by fwd_ppl (masks as set) when out, else
 * each window up to rec's input. next then holds the stream at rec, which becomes the kept layer. */
static int ablation_pass(ProbeAblation *a, int from, FwdPpl *out) {
    a->off_play = a->off_rec = 0;
    a->stop = !out;
    fwd_set_resid(a->f, from, ablation_hook, a);
    int rc = AL_OK;
    if (out) rc = fwd_ppl(a->f, a->ids, a->n, a->L, out);
    for (size_t s = 0; !out && rc == AL_OK && s + 1 < a->n; s += a->L) {
        size_t len = a->n - s < a->L ? a->n - s : a->L;
        fwd_reset(a->f);
        if ((rc = fwd_run(a->f, a->ids + s, len, FWD_LOGITS_NONE, NULL)) == FWD_STOP) rc = AL_OK;
    }
    fwd_set_resid(a->f, 0, NULL, NULL);
    if (rc == AL_OK && a->rec >= 0) {
        float *t = a->x;
        a->x = a->next;
        a->next = t;
        a->layer = a->rec;
    }
    return rc;
}

int probe_ablation_base(ProbeAblation *a, int layer, FwdPpl *out) {
    if (!a->keep) return probe_ablate(a->f, a->ids, a->n, a->L, 0, NULL, 0, out);
    fwd_clear_head_mask(a->f);
    a->play = -1;
    a->rec = layer >= 0 && layer < fwd_model(a->f)->cfg.n_layers ? layer : -1;
    return ablation_pass(a, 0, out);
}

int probe_ablation_run(ProbeAblation *a, int layer, const int *heads, size_t nh, FwdPpl *out) {
    if (!a->keep) return probe_ablate(a->f, a->ids, a->n, a->L, layer, heads, nh, out);
    fwd_clear_head_mask(a->f);
    int rc = AL_OK;
    if (a->layer != layer) {                       /* the intact stream at layer's input, from the kept one */
        a->play = a->layer < layer ? a->layer : -1;
        a->rec = layer;
        rc = ablation_pass(a, a->play >= 0 ? a->play : 0, NULL);
    }
    for (size_t i = 0; i < nh && rc == AL_OK; i++) rc = fwd_mask_head(a->f, layer, heads[i], true);
    a->play = layer;
    a->rec = -1;
    if (rc == AL_OK) rc = ablation_pass(a, layer, out);
    fwd_clear_head_mask(a->f);
    return rc;
}

int probe_head_list(const char *s, int H, int **heads, size_t *n) {
    int *v = al_malloc3((size_t)H, 1, sizeof *v, "the head list");
    if (!v) return AL_ERR;
    size_t k = 0;
    if (!strcmp(s, "all"))
        for (int h = 0; h < H; h++) v[k++] = h;
    for (const char *p = s; strcmp(s, "all") && *p;) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p) { free(v); return al_err("heads '%s': give head numbers (0,3,5), a range (2-4) or all", s); }
        if (*end == '-') { p = end + 1; b = strtol(p, &end, 10); if (end == p) b = -1; }
        if (a < 0 || b < a || b >= H) { free(v); return al_err("heads '%s': heads are 0-%d", s, H - 1); }
        for (long h = a; h <= b; h++) {
            for (size_t i = 0; i < k; i++)
                if (v[i] == (int)h) { free(v); return al_err("heads '%s': head %ld is listed twice", s, h); }
            v[k++] = (int)h;
        }
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') { free(v); return al_err("heads '%s': unexpected '%c'", s, *end); }
    }
    if (!k) { free(v); return al_err("heads '%s': give head numbers (0,3,5), a range (2-4) or all", s); }
    *heads = v;
    *n = k;
    return AL_OK;
}
