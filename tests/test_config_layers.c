/* test_config_layers.c -- config.json's layer count is capped at CFG_MAX_LAYERS (core/model/config.c's
 * cfg_validate): a huge num_hidden_layers (2^31 - 1, 10^9, one past the cap; GPT-2's n_layer; a text
 * tower's) is refused naming the key, the count and the limit, and fast -- the describe step's per-layer
 * loops ran over every layer before (seconds of CPU for 2^31 - 1, found by fuzz_config's promise of at
 * most CFG_MAX_LAYERS layers); the cap itself still parses. tests/corpus/fuzz-findings/
 * config-huge-layer-count.json is the same case as a file (cli_hostile loads it). Times are CPU seconds. */
#include "check.h"
#include "config.h"

#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);   /* CPU time: the machine's load does not count */
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Parses {body} with the layer key set to n; the error (or "" when it parsed) into msg. */
static int parse_layers(const char *fmt, long long n, char *msg, size_t cap, double *secs) {
    char json[1024];
    snprintf(json, sizeof json, fmt, n);
    ModelConfig c;
    double t0 = now();
    int rc = model_config_parse(json, "t/config.json", &c);
    *secs = now() - t0;
    snprintf(msg, cap, "%s", rc == AL_OK ? "" : al_errmsg());
    if (rc == AL_OK && c.n_layers != n) return AL_ERR;
    return rc;
}

#define LLAMA "{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": %lld}"
#define GPT2 "{\"model_type\": \"gpt2\", \"n_embd\": 64, \"n_head\": 4, \"n_layer\": %lld}"
#define GEMMA3 "{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": 64, \"num_attention_heads\": 4, " \
               "\"num_hidden_layers\": %lld, \"head_dim\": 16, \"sliding_window_pattern\": 6}}"

int main(void) {
    char msg[512], want[160];
    double secs;
    static const long long huge[] = {2147483647LL, 1000000000LL, CFG_MAX_LAYERS + 1};
    for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
        snprintf(want, sizeof want, "t/config.json: num_hidden_layers %lld: attnlab reads at most %d layers", huge[i],
                 CFG_MAX_LAYERS);
        CHECK(parse_layers(LLAMA, huge[i], msg, sizeof msg, &secs) == AL_ERR && strstr(msg, want),
              "llama %lld layers: [%s]", huge[i], msg);
        CHECK(secs < 0.05, "llama %lld layers refused in %.3f s", huge[i], secs);
    }
    CHECK(parse_layers(GPT2, 2147483647LL, msg, sizeof msg, &secs) == AL_ERR &&
              strstr(msg, "n_layer 2147483647: attnlab reads at most 512 layers"), "gpt2: [%s]", msg);
    CHECK(secs < 0.05, "gpt2 refused in %.3f s", secs);
    CHECK(parse_layers(GEMMA3, 1000000000LL, msg, sizeof msg, &secs) == AL_ERR &&
              strstr(msg, "num_hidden_layers 1000000000: attnlab reads at most 512 layers"), "gemma3 tower: [%s]", msg);
    CHECK(secs < 0.05, "gemma3 tower refused in %.3f s", secs);
    CHECK_OK(parse_layers(LLAMA, CFG_MAX_LAYERS, msg, sizeof msg, &secs));
    CHECK_OK(parse_layers(GEMMA3, CFG_MAX_LAYERS, msg, sizeof msg, &secs));
    return check_done();
}
