/* fuzz_tok.h -- the promises a tokenizer that opened must keep, checked by fuzz_tokenizer (tokenizer.json)
 * and fuzz_gguf (a GGUF's tokenizer.ggml.* keys): a few texts encode into ids inside [0, vocab) that have
 * pieces and decode back without error, BOS and EOS have pieces, its first 64 ids decode or are refused on
 * one line, id = vocab is refused. A broken promise aborts (fuzz_fail). */
#ifndef FUZZ_TOK_H
#define FUZZ_TOK_H

#include "tokenizer.h"
#include "fuzz_util.h"

static const char *const fuzz_texts[] = {"", "Hello, world!", " two  spaces\tand\nlines",
                                         "caf\xc3\xa9 \xe2\x96\x81 <|endoftext|> 12345",
                                         "<s>[INST] \xf0\x9f\x98\x80 x</s>", "\xff\xfe bad utf-8 \xc3"};

/* ids are inside [0, vocab) and (made by the tokenizer: with_piece) each has a piece. */
static void fuzz_tok_ids(const char *target, const Tokenizer *t, const int *ids, size_t n, bool with_piece) {
    size_t v = tok_vocab(t);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= v) fuzz_fail(target, "an id outside [0, vocab)");
        /* known, reported (tests/corpus/fuzz-findings/tokenizer-bos-id-without-piece.json): a
         * post_processor BOS id that no vocab entry has */
        if (with_piece && !tok_piece(t, ids[i]) && !getenv("FUZZ_SKIP_KNOWN"))
            fuzz_fail(target, "an id it made has no piece");
        tok_piece(t, ids[i]);
    }
}

/* Checks an opened tokenizer's promises (above). */
static void fuzz_tok_check(const char *target, const Tokenizer *t) {
    size_t v = tok_vocab(t);
    int special[2] = {tok_bos(t), tok_eos(t)};
    for (int k = 0; k < 2; k++)
        if (special[k] != -1) fuzz_tok_ids(target, t, &special[k], 1, true);
    for (size_t i = 0; i < sizeof fuzz_texts / sizeof *fuzz_texts; i++) {
        int *ids = NULL;
        size_t n = 0;
        if (tok_encode(t, fuzz_texts[i], strlen(fuzz_texts[i]), true, &ids, &n) == AL_OK) {
            fuzz_tok_ids(target, t, ids, n, true);
            char *back = NULL;
            bool pieceless = false;                  /* the known finding above */
            for (size_t k = 0; k < n; k++) pieceless |= !tok_piece(t, ids[k]);
            if (tok_decode(t, ids, n, true, &back) != AL_OK && !(pieceless && getenv("FUZZ_SKIP_KNOWN")))
                fuzz_fail(target, "ids it made do not decode");
            free(back);
        } else {
            fuzz_check_msg(target, "");
        }
        free(ids);
    }
    int first[64];
    size_t nf = v < 64 ? v : 64;
    for (size_t i = 0; i < nf; i++) first[i] = (int)i;
    fuzz_tok_ids(target, t, first, nf, false);      /* a vocab may skip ids */
    char *back = NULL;
    if (tok_decode(t, first, nf, false, &back) != AL_OK) fuzz_check_msg(target, "");
    free(back);
    int out_of_range = (int)v;
    if (tok_decode(t, &out_of_range, 1, false, &back) == AL_OK) fuzz_fail(target, "id = vocab decoded");
    tok_piece_id(t, "<|endoftext|>");
}

#endif
