/* quant_fused.c -- vLLM's fused linear layers by name (quant_fused.h: the facts and their sources). */
#include "quant_fused.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *fused;
    const char *shards[QUANT_FUSED_MAX + 1];   /* NULL-terminated */
} FusedGroup;

static const FusedGroup GROUPS[] = {
    {"qkv_proj", {"q_proj", "k_proj", "v_proj", NULL}},
    {"gate_up_proj", {"gate_proj", "up_proj", NULL}},
    {"fused_qkv_a_proj", {"q_a_proj", "kv_a_proj_with_mqa", NULL}},
};

int quant_fused_shards(const char *mod, char shards[][256], const char **fused) {
    const char *dot = strrchr(mod, '.');
    const char *last = dot ? dot + 1 : mod;
    size_t base = (size_t)(last - mod);
    if (strstr(mod, ".experts.")) return 0;            /* FusedMoE: not a linear shard */
    for (size_t g = 0; g < sizeof GROUPS / sizeof *GROUPS; g++) {
        int hit = 0, n = 0;
        for (int i = 0; GROUPS[g].shards[i]; i++) hit |= strcmp(last, GROUPS[g].shards[i]) == 0;
        if (!hit) continue;
        for (; GROUPS[g].shards[n]; n++)
            if ((size_t)snprintf(shards[n], 256, "%.*s%s", (int)base, mod, GROUPS[g].shards[n]) >= 256) return 0;
        if (fused) *fused = GROUPS[g].fused;
        return n;
    }
    return 0;
}

int quant_kv_scale(const char *name) {
    static const struct { const char *suf; int side; } KV[] = {
        {".k_scale", 'k'}, {".v_scale", 'v'}, {".kv_scale", 'b'}, {".q_scale", 'q'},
        {".k_proj.output_scale", 'k'}, {".v_proj.output_scale", 'v'}, {".q_proj.output_scale", 'q'}};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof KV / sizeof *KV; i++) {
        size_t k = strlen(KV[i].suf);
        if (n > k && strcmp(name + n - k, KV[i].suf) == 0) return KV[i].side;
    }
    return 0;
}
