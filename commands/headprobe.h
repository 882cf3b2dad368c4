/* headprobe.h -- what a head does on real text, for the commands that show it (`attend`, `ablate`,
 * `plot attention`, `plot head-importance`, `tokenize ... strings`): token strings beside ids, one
 * query head's attention pattern from the forward pass (core/model/forward.h: fwd_set_capture), as
 * the loaded model computes it or with the newest transformation's layers swapped in (xform.h), and
 * perplexities with heads ablated (fwd_mask_head: the head's slice of o_proj's input zeroed).
 * A service below the command groups (cmd_attend.c, cmd_plot_attend.c use it). */
#ifndef AL_HEADPROBE_H
#define AL_HEADPROBE_H

#include "forward.h"
#include "registry.h"
#include "session.h"
#include "tokenizer.h"
#include "xform.h"

/* Token i's text as it reads in the decoded sequence (decode(ids[..i]) minus decode(ids[..i-1]), with
 * the dummy-prefix space a tokenizer drops after BOS dropped too), so the strings concatenated are
 * the decoded text; special tokens as their pieces ("<s>"); t NULL: "#id". *out: n malloc'ed strings
 * (probe_strings_free). */
int probe_strings(const Tokenizer *t, const int *ids, size_t n, char ***out);
void probe_strings_free(char **s, size_t n);
/* A token string for a label: control characters and invalid UTF-8 as \n, \t, \xHH; at most cap bytes. */
void probe_label(const char *s, char *buf, size_t cap);

/* TEXT, or the contents of FILE when text is the word `file` (tokenize's rule), encoded with m's
 * tokenizer (BOS first) into *ids (caller frees); *tok the tokenizer (the workspace's). With text the
 * word `ids`: FILE's token ids as they are (*tok NULL when m has no tokenizer or it does not hold them:
 * probe_strings then gives "#id"). verb names the command in errors. */
int probe_encode(Session *s, Model *m, const char *text, const char *file, const char *verb, Tokenizer **tok,
                 int **ids, size_t *n);

/* Refuses a (layer, head) the pattern cannot be shown for, naming why: out of range, a linear-attention
 * or Mamba-2 layer (no softmax pattern). T: the text's tokens (every length is shown; DeepSeek-V3.2's
 * indexer rows past index_topk weigh its selected keys). */
int probe_check_head(const Model *m, int layer, int head, size_t T);

/* One head's pattern on ids[0..T): P (T, T), row i the weights of query i over keys 0..i (caller frees).
 * f runs as it stands (with x's layers when held); sink: the mean weight the head's sink takes per row
 * (0 without sinks). */
typedef struct {
    float *P;
    size_t T;
    double sink;
} ProbePattern;
int probe_pattern(Forward *f, const int *ids, size_t T, int layer, int head, ProbePattern *out);

/* The newest transformation of m that runs as attention layers (xform_measured's rule), NULL when none;
 * headline gets its description. */
const Xform *probe_xform(Session *s, Model *m, char *headline, size_t cap);
/* probe_pattern with that transformation's layers swapped into f (restored after). */
int probe_pattern_xform(Session *s, const Xform *x, Forward *f, const int *ids, size_t T, int layer, int head,
                        ProbePattern *out);

/* The ablation text: ppl's positional `what` (a text FILE, or the word text or ids) and `file`, `seqlen`,
 * `max-tokens`, read as ppl reads them; *L the window length. */
int probe_ppl_tokens(Session *s, Model *m, const Args *a, int **ids, size_t *n, size_t *L);

/* One ablation: perplexity of m with the heads (layer, heads[0..nh)) masked; nh 0: none (the base). */
int probe_ablate(Forward *f, const int *ids, size_t n, size_t L, int layer, const int *heads, size_t nh, FwdPpl *out);

/* The ablations of one text, each rerunning only the layers from the ablated one on: the residual stream at
 * that layer's input (the intact model's: an ablation changes nothing before its layer) is computed once per
 * layer and kept (forward.h: fwd_set_resid), moved on to a later layer by running the layers between. The
 * numbers are probe_ablate's bit for bit. Where a layer reads an earlier layer's cache (Gemma 4's KV-shared
 * layers) nothing is kept and each ablation is probe_ablate. f, ids borrowed (keep them alive). */
typedef struct ProbeAblation ProbeAblation;
int probe_ablation_new(Forward *f, const int *ids, size_t n, size_t L, ProbeAblation **out);
void probe_ablation_free(ProbeAblation *a);
/* The intact model's perplexity (probe_ablate with no heads), keeping the stream at layer's input. */
int probe_ablation_base(ProbeAblation *a, int layer, FwdPpl *out);
/* probe_ablate(f, ids, n, L, layer, heads, nh, out) from the kept stream (moved to layer first). */
int probe_ablation_run(ProbeAblation *a, int layer, const int *heads, size_t nh, FwdPpl *out);
/* Layers run so far (each window's run of a layer counts once): the cost, for tests and benchmarks. */
size_t probe_ablation_layers_run(const ProbeAblation *a);

/* Parses a head list "0,3,5", "2-4", or `all` into *heads (caller frees), checked against H. */
int probe_head_list(const char *s, int H, int **heads, size_t *n);

#endif
