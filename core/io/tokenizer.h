/* tokenizer.h -- text to token ids and back, for the tokenizers that sit beside checkpoints:
 *
 *   TOK_LLAMA2C    llama2.c tok*.bin / tokenizer.bin: int32 max_token_length, then per id a float32
 *                  score, an int32 length and the piece bytes (spaces as ' ', bytes as "<0xHH>").
 *                  Encoding is run.c's: BOS (id 1), a dummy-prefix space when the text is not
 *                  empty, one piece per UTF-8 code point (bytes + 3 when the code point has no
 *                  piece), then repeatedly the adjacent pair whose concatenation is a piece with the
 *                  best score is merged (leftmost on ties).
 *   TOK_BYTELEVEL  Hugging Face tokenizer.json, model BPE, byte-level (GPT-2, Llama-3, Qwen2): the
 *                  text is split by the pre-tokenizer's pattern (the GPT-2, Llama-3 and Qwen2
 *                  patterns are implemented exactly; another pattern is refused by name), each
 *                  piece's bytes are mapped to GPT-2's printable byte alphabet, and merges apply
 *                  by rank.
 *   TOK_SPM        Hugging Face tokenizer.json, model BPE, SentencePiece style (Llama-2, Mistral):
 *                  spaces become the metaspace U+2581, prepended at the start, merges by rank over
 *                  code points, bytes of unknown code points as <0xHH> (byte_fallback).
 *
 * Added tokens (tokenizer.json "added_tokens", e.g. <|endoftext|>) are matched in the text before
 * anything else and map to their ids. The BOS a tokenizer adds comes from run.c (llama2.c) or the
 * tokenizer.json post_processor (TemplateProcessing: the special tokens before $A).
 *
 * Letter / number / space classes of the pre-tokenizer patterns (\p{L}, \p{N}, \s) come from the
 * C.UTF-8 locale's iswalpha plus explicit tables for Unicode digits, number forms and white
 * space; rare scripts may differ from the Unicode database in the class of a few code points. */
#ifndef AL_TOKENIZER_H
#define AL_TOKENIZER_H

#include "al.h"

typedef enum { TOK_LLAMA2C, TOK_BYTELEVEL, TOK_SPM } tok_kind;

typedef struct Tokenizer Tokenizer;

/* Opens a tokenizer file: tokenizer.json (by name or by a leading '{'), else a llama2.c tok*.bin.
 * Errors name the file and what is wrong with it. Caller frees with tok_free. */
int tok_open(const char *path, Tokenizer **out);
void tok_free(Tokenizer *t);

/* The tokenizer of a checkpoint: a .gguf file's own (tokenizer.ggml.*) when it has one; for a folder,
 * FOLDER/tokenizer.json, then tokenizer.bin,
 * then the first tok*.bin; for a file (a llama2.c .bin, a .safetensors), the same in its folder.
 * *path_out (caller frees) or an error listing the places looked. */
int tok_find(const char *model_path, char **path_out);

tok_kind tok_type(const Tokenizer *t);
/* Read from a GGUF file's tokenizer.ggml.* keys (tok_open of a .gguf; tok_find of a .gguf model that
 * has them returns the file itself): "llama" as TOK_LLAMA2C (score merges, as llama.cpp's SentencePiece
 * tokenizer), "gpt2" as TOK_BYTELEVEL. */
bool tok_embedded(const Tokenizer *t);
/* tok_kind_name, or for an embedded one what the GGUF said ("GGUF llama: SentencePiece merged by score"). */
const char *tok_name(const Tokenizer *t);
const char *tok_kind_name(tok_kind k);       /* "llama2.c", "byte-level BPE", "sentencepiece BPE" */
const char *tok_path(const Tokenizer *t);
/* Number of ids (largest id + 1, added tokens included). */
size_t tok_vocab(const Tokenizer *t);
/* The BOS the tokenizer adds when encoding (-1: it adds none), and its end-of-text id (-1: none
 * known). llama2.c: 1 and 2. */
int tok_bos(const Tokenizer *t);
int tok_eos(const Tokenizer *t);
/* Id of an exact piece / added token (-1 when absent). */
int tok_piece_id(const Tokenizer *t, const char *piece);
/* The stored piece of an id (NULL when out of range); for display. */
const char *tok_piece(const Tokenizer *t, int id);
/* The piece's score (llama2.c files; NAN for tokenizer.json and ids out of range). */
float tok_score(const Tokenizer *t, int id);

/* Encodes len bytes of UTF-8 text. With add_special, the tokens the tokenizer adds (BOS) come
 * first. *ids is malloc'ed (caller frees), *n its length. */
int tok_encode(const Tokenizer *t, const char *text, size_t len, bool add_special, int **ids, size_t *n);
/* Decodes ids to text (a NUL-terminated malloc'ed string, caller frees). Special tokens the
 * tokenizer adds (BOS/EOS) are skipped when skip_special; the leading space a dummy prefix or a
 * metaspace produced is dropped (as llama2.c's run.c and the HF decoders do). Ids out of range
 * are an error naming them. */
int tok_decode(const Tokenizer *t, const int *ids, size_t n, bool skip_special, char **text);

#endif
