/* ws_lm.h -- the language-model service of the session's workspace: the tokenizer and forward
 * pass of each loaded model, shared by every group that tokenizes or runs text (`generate`, `ppl`,
 * `tokenize`, calibration, TransMLA perplexities) so they all do it the same way. Both objects are
 * owned by the workspace (freed when the model closes or the session ends); callers must not free
 * them. */
#ifndef AL_WS_LM_H
#define AL_WS_LM_H

#include "forward.h"
#include "session.h"
#include "tokenizer.h"

/* The tokenizer of model m: the one set with lm_set_tokenizer (`tokenizer FILE`), else the one
 * found beside the checkpoint (tok_find), opened on first use. */
int lm_tokenizer(Session *s, Model *m, Tokenizer **out);
/* Makes t (taken over on success) m's tokenizer from now on, freeing the previous one. */
int lm_set_tokenizer(Session *s, Model *m, Tokenizer *t);
/* The forward pass of model m (fwd_new on first use, then reused; hooks cleared). */
int lm_forward(Session *s, Model *m, Forward **out);
/* Reads whitespace-separated token ids from a file (caller frees *ids). */
int lm_read_ids(const char *path, int **ids, size_t *n);
/* A text's tokens (caller frees *ids): ids_file given (non-empty): its ids as they are (lm_read_ids); else the
 * contents of text_file encoded with m's tokenizer (BOS first). */
int lm_text_ids(Session *s, Model *m, const char *text_file, const char *ids_file, int **ids, size_t *n);

#endif
