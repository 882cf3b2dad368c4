/* fuzz_quant_config.c -- a libFuzzer target over quant_config_read (core/io/quant_config.h): each
 * input is the text of a config.json. A failure must give a one-line message naming quantization_config
 * (or hf_quant_config.json); a config that reads must answer quant_expected for module names of every
 * shape (its ignore entries as regexes, globs and names) and describe itself in a terminated line.
 * Build by hand (README.md's command, with quant_config.c store.c hub.c safetensors.c tensor.c al.c and
 * -lcurl). */
#include "fuzz_util.h"
#include "quant_config.h"

#include <cjson/cJSON.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cJSON *tree = cJSON_ParseWithLength((const char *)data, size);
    if (!tree) return 0;
    QuantConfig q;
    if (quant_config_read(tree, NULL, &q) != AL_OK) {
        const char *m = al_errmsg();
        if (!m[0] || strchr(m, '\n')) fuzz_fail("fuzz_quant_config", "the error message is empty or not one line");
        if (!strstr(m, "quantization_config")) fuzz_fail("fuzz_quant_config", "the message does not name the key");
    } else {
        static const char *const mods[] = {"", "lm_head", "model.layers.0.self_attn.q_proj", "model.layers.12.mlp.experts.3.up_proj",
                                           "a.b.c.d.e.f.g.h", "re:", "*", "model.layers.*.self_attn"};
        char why[200], d[400];
        for (size_t i = 0; i < sizeof mods / sizeof *mods; i++) {
            quant_enc e = quant_expected(&q, mods[i], why, sizeof why);
            if (e < 0 || e >= QENC_COUNT || !memchr(why, 0, sizeof why)) fuzz_fail("fuzz_quant_config", "a bad answer");
        }
        quant_describe(&q, d, sizeof d);
        if (!memchr(d, 0, sizeof d)) fuzz_fail("fuzz_quant_config", "description not terminated");
        quant_config_free(&q);
    }
    cJSON_Delete(tree);
    return 0;
}
