/* family_models.h -- one check run on the synthetic checkpoint of each family of a list (`synth family`, F32, the
 * default seed, written under the test's folder) and then on tests/models/stories260K-hf ($ATTNLAB_MODELS):
 * test_attend's and test_ablation's sweep; tu_tokens, the token ids (below V, from an LCG) the forward-pass tests
 * run (test_attend, test_ablation, test_families, test_mamba2). */
#ifndef TEST_FAMILY_MODELS_H
#define TEST_FAMILY_MODELS_H

#include "check.h"
#include "synth.h"

#include <stdlib.h>

static inline void tu_tokens(int *ids, size_t n, size_t V, unsigned seed) {
    unsigned s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        ids[i] = (int)((s >> 8) % V);
    }
}

static inline void tu_each_model(const char *const *fams, size_t n, void (*check)(const char *name, const char *dir)) {
    const char *tmp = test_tmpdir();
    for (size_t i = 0; i < n; i++) {
        char *dir = al_asprintf("%s/%s", tmp, fams[i]);
        CHECK_OK(synth_family_write(fams[i], DT_F32, SYNTH_DEFAULT_SEED, dir));
        check(fams[i], dir);
        free(dir);
    }
    const char *models = getenv("ATTNLAB_MODELS");
    char *real = al_asprintf("%s/stories260K-hf", models ? models : "tests/models");
    check("stories260K", real);
    free(real);
}

#endif
