/* cmd_lm.h -- the language-model state of a session (tokenizer and forward pass per loaded model),
 * shared with other command groups (calibration) so they tokenize and run text the same way as
 * `generate`, `ppl` and `tokenize`. Both objects are owned by the session (freed when the model
 * closes or the session ends); callers must not free them. */
#ifndef AL_CMD_LM_H
#define AL_CMD_LM_H

#include "forward.h"
#include "session.h"
#include "tokenizer.h"

/* The tokenizer of model m: the one set with `tokenizer FILE`, else the one found beside the
 * checkpoint (tok_find), opened on first use. */
int lm_tokenizer(Session *s, Model *m, Tokenizer **out);
/* The forward pass of model m (fwd_new on first use, then reused; hooks cleared). */
int lm_forward(Session *s, Model *m, Forward **out);
/* Reads whitespace-separated token ids from a file (caller frees *ids). */
int lm_read_ids(const char *path, int **ids, size_t *n);

#endif
