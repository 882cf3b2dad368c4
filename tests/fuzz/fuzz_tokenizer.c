/* fuzz_tokenizer.c -- a libFuzzer target over tok_open (core/io/tokenizer.h) with tokenizer.json
 * inputs. Each input is written to a scratch tokenizer.json and opened. A failure must give a
 * one-line message naming the file; a tokenizer that opens must encode a few texts into ids
 * inside [0, vocab) that have pieces, decode them back without error, give pieces for its BOS
 * and EOS, and decode or refuse (one line) its first 64 ids. ASan sees any out-of-bounds access. See README.md. */
#include "tokenizer.h"
#include "fuzz_util.h"

static const char *const texts[] = {"", "Hello, world!", " two  spaces\tand\nlines", "caf\xc3\xa9 \xe2\x96\x81 <|endoftext|> 12345",
                                     "<s>[INST] \xf0\x9f\x98\x80 x</s>", "\xff\xfe bad utf-8 \xc3"};

/* ids are inside [0, vocab) and (made by the tokenizer: with_piece) each has a piece. */
static void check_ids(const Tokenizer *t, const int *ids, size_t n, bool with_piece) {
    size_t v = tok_vocab(t);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= v) fuzz_fail("fuzz_tokenizer", "an id outside [0, vocab)");
        /* known, reported (tests/corpus/fuzz-findings/tokenizer-bos-id-without-piece.json): a
         * post_processor BOS id that no vocab entry has */
        if (with_piece && !tok_piece(t, ids[i]) && !getenv("FUZZ_SKIP_KNOWN"))
            fuzz_fail("fuzz_tokenizer", "an id it made has no piece");
        tok_piece(t, ids[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(fuzz_dir("tok"), "tokenizer.json", data, size);
    Tokenizer *t = NULL;
    if (tok_open(path, &t) != AL_OK) {
        if (t) fuzz_fail("fuzz_tokenizer", "an error left a tokenizer behind");
        /* known, reported (tests/corpus/fuzz-findings/tokenizer-json-error-echoes-raw-bytes.json):
         * the JSON error quotes the raw text after the error; skipped to fuzz further */
        if (getenv("FUZZ_SKIP_KNOWN") && strstr(al_errmsg(), "not valid JSON (near")) return 0;
        fuzz_check_msg("fuzz_tokenizer", "tokenizer.json");
        return 0;
    }
    size_t v = tok_vocab(t);
    int special[2] = {tok_bos(t), tok_eos(t)};
    for (int k = 0; k < 2; k++)
        if (special[k] != -1) check_ids(t, &special[k], 1, true);
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        int *ids = NULL;
        size_t n = 0;
        if (tok_encode(t, texts[i], strlen(texts[i]), true, &ids, &n) == AL_OK) {
            check_ids(t, ids, n, true);
            char *back = NULL;
            bool pieceless = false;                  /* the known finding above */
            for (size_t k = 0; k < n; k++) pieceless |= !tok_piece(t, ids[k]);
            if (tok_decode(t, ids, n, true, &back) != AL_OK && !(pieceless && getenv("FUZZ_SKIP_KNOWN")))
                fuzz_fail("fuzz_tokenizer", "ids it made do not decode");
            free(back);
        } else {
            fuzz_check_msg("fuzz_tokenizer", "");
        }
        free(ids);
    }
    int first[64];
    size_t nf = v < 64 ? v : 64;
    for (size_t i = 0; i < nf; i++) first[i] = (int)i;
    check_ids(t, first, nf, false);      /* a vocab may skip ids */
    char *back = NULL;
    if (tok_decode(t, first, nf, false, &back) != AL_OK) fuzz_check_msg("fuzz_tokenizer", "");
    free(back);
    int out_of_range = (int)v;
    if (tok_decode(t, &out_of_range, 1, false, &back) == AL_OK) fuzz_fail("fuzz_tokenizer", "id = vocab decoded");
    tok_piece_id(t, "<|endoftext|>");
    tok_free(t);
    return 0;
}
