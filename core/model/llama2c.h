/* llama2c.h -- llama2.c `.bin` checkpoints (Karpathy's run.c format): the header becomes a
 * ModelConfig (Llama family, RoPE on interleaved pairs) and the weights a Store of F32 views into
 * the mapping, named as in a Hugging Face Llama checkpoint. model_open calls it for `*.bin`. */
#ifndef AL_LLAMA2C_H
#define AL_LLAMA2C_H

#include "config.h"
#include "store.h"

/* Opens path: *store owns the mapping, *cfg is filled. Errors name the file and the bad field. */
int llama2c_open(const char *path, Store **store, ModelConfig *cfg);

#endif
