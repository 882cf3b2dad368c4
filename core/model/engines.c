/* engines.c -- the stock engines' DeepSeek-V3 semantics table (see engines.h for the sources of
 * each row). Owns nothing: static rows. */
#include "engines.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const Engine ROWS[ENG_N] = {
    {"transformers", "out_err_transformers", 1e-6, true, false, true, true,
     "modeling_deepseek_v3.py: DeepseekV3RMSNorm(..., eps=1e-6) default for q_a_layernorm / kv_a_layernorm", false, false},
    {"vLLM", "out_err_vllm", 0, false, false, false, false,
     "vllm/model_executor/models/deepseek_v2.py: RMSNorm(kv_lora_rank, eps=config.rms_norm_eps), bias=False", true, true},
    {"SGLang", "out_err_sglang", 0, false, false, false, false,
     "sglang/srt/models/deepseek_v2.py: RMSNorm(kv_lora_rank, eps=config.rms_norm_eps), bias=False", true, true},
};

const Engine *engine_row(int i) { return i >= 0 && i < ENG_N ? &ROWS[i] : NULL; }

double engine_latent_eps(const Engine *e, double rms_eps) { return e->latent_eps > 0 ? e->latent_eps : rms_eps; }

double engine_common_eps(void) {
    for (int i = 0; i < ENG_N; i++)
        if (ROWS[i].latent_eps > 0) return ROWS[i].latent_eps;
    return 0;
}

unsigned engine_latent_eps_off(double rms_eps, double built) {
    unsigned t = 0;
    for (int i = 0; i < ENG_N; i++)
        if (!(fabs(engine_latent_eps(&ROWS[i], rms_eps) - built) <= 1e-9 * fabs(built))) t |= 1u << i;
    return t;
}

/* Appends the names of the engines of off using eps (" and " before the last), and their count. */
static int names_with_eps(unsigned off, double rms_eps, double eps, char *buf, size_t cap) {
    int n = 0, k = 0;
    for (int i = 0; i < ENG_N; i++) n += (off >> i & 1) && engine_latent_eps(&ROWS[i], rms_eps) == eps;
    for (int i = 0; i < ENG_N; i++)
        if ((off >> i & 1) && engine_latent_eps(&ROWS[i], rms_eps) == eps)
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", k++ ? (k == n ? " and " : ", ") : "", ROWS[i].name);
    return n;
}

const char *engine_eps_phrase(unsigned off, double rms_eps, char *buf, size_t cap) {
    unsigned done = 0;
    buf[0] = 0;
    for (int i = 0; i < ENG_N; i++) {
        if (!(off >> i & 1) || (done >> i & 1)) continue;
        double eps = engine_latent_eps(&ROWS[i], rms_eps);
        for (int j = i; j < ENG_N; j++)
            if (engine_latent_eps(&ROWS[j], rms_eps) == eps) done |= 1u << j;
        bool first = buf[0] == 0;
        if (!first) snprintf(buf + strlen(buf), cap - strlen(buf), ", ");
        int n = names_with_eps(off, rms_eps, eps, buf, cap);
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s with %g", first ? (n > 1 ? " normalise the latents" : " normalises the latents") : "", eps);
    }
    return buf;
}
