/* engines.c -- the stock engines' DeepSeek-V3 semantics table (see engines.h for the sources of
 * each row). Owns nothing: static rows. */
#include "engines.h"

#include <stddef.h>

static const Engine ROWS[ENG_N] = {
    {"transformers", "out_err_transformers", 1e-6, true, false, true, true,
     "modeling_deepseek_v3.py: DeepseekV3RMSNorm(..., eps=1e-6) default for q_a_layernorm / kv_a_layernorm"},
    {"vLLM", "out_err_vllm", 0, false, false, false, false,
     "vllm/model_executor/models/deepseek_v2.py: RMSNorm(kv_lora_rank, eps=config.rms_norm_eps), bias=False"},
    {"SGLang", "out_err_sglang", 0, false, false, false, false,
     "sglang/srt/models/deepseek_v2.py: RMSNorm(kv_lora_rank, eps=config.rms_norm_eps), bias=False"},
};

const Engine *engine_row(int i) { return i >= 0 && i < ENG_N ? &ROWS[i] : NULL; }

double engine_latent_eps(const Engine *e, double rms_eps) { return e->latent_eps > 0 ? e->latent_eps : rms_eps; }

double engine_common_eps(void) {
    for (int i = 0; i < ENG_N; i++)
        if (ROWS[i].latent_eps > 0) return ROWS[i].latent_eps;
    return 0;
}
