/* fuzz_tokenizer.c -- a libFuzzer target over tok_open (core/io/tokenizer.h) with tokenizer.json
 * inputs. Each input is written to a scratch tokenizer.json and opened. A failure must give a
 * one-line message naming the file; a tokenizer that opens must encode a few texts into ids
 * inside [0, vocab) that have pieces, decode them back without error, give pieces for its BOS
 * and EOS, and decode or refuse (one line) its first 64 ids (fuzz_tok.h). ASan sees any out-of-bounds access. See README.md. */
#include "fuzz_tok.h"

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
    fuzz_tok_check("fuzz_tokenizer", t);
    tok_free(t);
    return 0;
}
