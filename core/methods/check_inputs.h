/* check_inputs.h -- the inputs a conversion's report drew, recorded so that `check` (of the
 * conversion in the session, or of its export folder later, in another session) draws the same
 * ones and prints the same numbers: the seed rule, the tokens per layer, and the statistics the
 * Gaussian tokens were shaped with (per layer the second moment E[x xᵀ] and, for TransMLA, the
 * mean E[x]) with a digest that says which calibration they are.
 *
 * An export records them in its manifest as "check_inputs":
 *   {"seed": S, "seed_rule": "same"|"plus_layer", "tokens": T, "layers": L, "hidden": D, "statistics": "none"|
 *    "second_moment"|"second_moment_and_mean", "digest": "<16 hex>", "digest_kind": "fnv1a64-words8"|"fnv1a64-bytes"
 *    (absent: bytes, every export before the key), "calibration": "...",
 *    "file": "check_inputs.safetensors" | null, "file_note": "..."}
 * and, when the statistics take at most CI_MAX_BYTES, the statistics themselves in
 * check_inputs.safetensors (F64: layers.L.sigma (hidden, hidden), layers.L.mu (hidden)), so a
 * later `check DIR` needs no calibration. A larger set stays out of the folder: the check then
 * uses the session's calibration of the source when its digest matches, and otherwise says so
 * and draws unit-variance tokens. */
#ifndef AL_CHECK_INPUTS_H
#define AL_CHECK_INPUTS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "ckpt_write.h"

#define CI_FILE "check_inputs.safetensors"
#define CI_MAX_BYTES ci_max_bytes()
/* 64 MiB, or $ATTNLAB_CI_MAX_BYTES (tests take a large model's routes on a small one). */
size_t ci_max_bytes(void);

/* How a digest was formed: FNV-1a 64 over 8 interleaved chains of 64-bit words (what attnlab
 * writes), or byte-wise FNV-1a 64 (exports written before "digest_kind"; still read and checked). */
typedef enum { CI_DIGEST_WORDS = 0, CI_DIGEST_BYTES = 1 } ci_digest_kind;

typedef struct {
    uint64_t seed;            /* the seed of layer 0's draw */
    bool plus_layer;          /* layer l draws with seed + l (TPA); false: every layer with seed (TransMLA) */
    size_t tokens;            /* tokens per layer */
    bool stats;               /* the conversion drew with statistics (sigma may still be NULL: not at hand) */
    int n_layers, hidden;
    double **sigma;           /* NULL, or n_layers entries: E[x xᵀ] (hidden, hidden) or NULL (unit variance) */
    double **mu;              /* NULL, or n_layers entries: E[x] (hidden) or NULL (zero mean) */
    uint64_t digest;          /* of the statistics (ci_digest); 0 without */
    ci_digest_kind digest_kind; /* how digest was formed (zero: CI_DIGEST_WORDS, ci_digest's) */
    char calib[256];          /* where the statistics came from ("256 tokens of tinystory.txt"), or "" */
    bool from_file;           /* sigma / mu were read from an export folder's CI_FILE */
} CheckInputs;

/* The digest of per-layer statistics (each present layer's index, then its values as CI_DIGEST_WORDS
 * says); 0 when sigma is NULL. */
uint64_t ci_digest(int n_layers, int hidden, const double *const *sigma, const double *const *mu);
/* The same formed as `kind` says (an export's recorded digest is compared in its own kind). */
uint64_t ci_digest_kind_of(ci_digest_kind kind, int n_layers, int hidden, const double *const *sigma,
                           const double *const *mu);
/* ci_digest_layer formed as `kind` says. */
uint64_t ci_digest_layer_kind(ci_digest_kind kind, uint64_t h, int l, int hidden, const double *sigma,
                              const double *mu);
/* ci_digest one layer at a time: h the previous layer's value (0 before the first layer with a
 * sigma), l the layer; the last call's value is ci_digest's (nothing forms every layer at once). */
uint64_t ci_digest_layer(uint64_t h, int l, int hidden, const double *sigma, const double *mu);
/* The seed layer l draws with. */
uint64_t ci_layer_seed(const CheckInputs *ci, int l);
/* True when ci's statistics are at hand and fit CI_MAX_BYTES (ci_write puts them in CI_FILE). */
bool ci_fits(const CheckInputs *ci);
/* Adds "check_inputs" to manifest and, when ci->sigma is there and fits CI_MAX_BYTES, writes
 * CI_FILE through w (the arrays are borrowed until the call returns). */
int ci_write(CkptWriter *w, cJSON *manifest, const CheckInputs *ci);
/* Reads manifest's "check_inputs" (*found false and ci zeroed when there is none: an export of an
 * older attnlab) and the statistics from dir/CI_FILE when the manifest names it (owned: ci_free). */
int ci_read(const char *dir, const cJSON *manifest, CheckInputs *ci, bool *found);
/* The same from the manifest file dir/manifest. */
int ci_read_dir(const char *dir, const char *manifest, CheckInputs *ci, bool *found);
/* A copy of ci into out with arrays of its own (ci_free): the statistics only when they fit
 * CI_MAX_BYTES (else the digest alone; mu NULL when no layer has one). */
int ci_copy(const CheckInputs *ci, CheckInputs *out);
/* Frees the statistics ci_read loaded or ci_copy copied (not the struct). */
void ci_free(CheckInputs *ci);

#endif
