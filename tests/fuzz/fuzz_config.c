/* fuzz_config.c -- a libFuzzer target over model_config_parse (core/model/config.h): each input is the
 * text of a config.json. A failure must give a one-line message naming the file; a config that
 * parses must describe a model the rest of attnlab can lay out (positive dims, KV heads that
 * divide the heads, layers within CFG_MAX_LAYERS). See README.md. */
#include "config.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);                   /* the parser takes NUL-terminated text */
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    ModelConfig c;
    memset(&c, 0, sizeof c);
    if (model_config_parse(text, "fuzz/config.json", &c) != AL_OK) {
        /* known, reported (tests/corpus/fuzz-findings/config-json-error-echoes-raw-bytes.json,
         * config-model-type-control-chars.json) */
        const char *m = al_errmsg();
        if (!(getenv("FUZZ_SKIP_KNOWN") && (strstr(m, "not valid JSON (near") || strstr(m, "model_type '"))))
            fuzz_check_msg("fuzz_config", "fuzz/config.json");
    } else {
        if (c.hidden <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.n_layers <= 0) fuzz_fail("fuzz_config", "a dim <= 0");
        if (c.n_heads % c.n_kv_heads != 0) fuzz_fail("fuzz_config", "KV heads do not divide the heads");
        if (c.n_layers > CFG_MAX_LAYERS) fuzz_fail("fuzz_config", "more layers than CFG_MAX_LAYERS");
        if (!memchr(c.model_type, 0, sizeof c.model_type)) fuzz_fail("fuzz_config", "model_type not terminated");
    }
    char w[1024];
    while (al_warn_pop(w, sizeof w))
        if (strchr(w, '\n')) fuzz_fail("fuzz_config", "a warning that is not one line");
    free(text);
    return 0;
}
