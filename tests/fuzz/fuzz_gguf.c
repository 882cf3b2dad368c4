/* fuzz_gguf.c -- a libFuzzer target over what reads a downloaded .gguf: gguf_parse_buffer (core/io/gguf.h),
 * tok_open of the file (its tokenizer.ggml.* keys: core/io/tokenizer.c) and gguf_model_open (the tensors
 * read back as an HF-layout store: core/model/gguf_arch.h). Each input is a whole GGUF image, parsed from
 * memory and written to a scratch model.gguf. A failure must give a one-line message naming the file; a
 * tokenizer that opens keeps fuzz_tok.h's promises; a store read back has its tensors and a config.json.
 * Seeds: tests/corpus/gguf/ (tests/test_gguf_corpus.c builds them and runs this target over them and their
 * mutations in the normal suite). ASan sees any out-of-bounds access. See README.md. */
#include "fuzz_tok.h"
#include "gguf.h"
#include "gguf_arch.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    GgufFile *f = NULL;
    al_err_clear();
    if (gguf_parse_buffer("buffer.gguf", data, size, &f) != AL_OK) fuzz_check_msg("fuzz_gguf", "buffer.gguf");
    gguf_close(f);
    const char *path = fuzz_file(fuzz_dir("gguf"), "model.gguf", data, size);
    Tokenizer *t = NULL;
    al_err_clear();
    if (tok_open(path, &t) != AL_OK) {
        if (t) fuzz_fail("fuzz_gguf", "an error left a tokenizer behind");
        fuzz_check_msg("fuzz_gguf", "model.gguf");
    } else {
        fuzz_tok_check("fuzz_gguf", t);
        tok_free(t);
    }
    Store *s = NULL;
    char *json = NULL;
    al_err_clear();
    if (gguf_model_open(path, &s, &json) != AL_OK) {
        if (s || json) fuzz_fail("fuzz_gguf", "an error left a store behind");
        fuzz_check_msg("fuzz_gguf", "model.gguf");
    } else {
        if (!json || !json[0]) fuzz_fail("fuzz_gguf", "a store without a config.json");
        store_free(s);
        free(json);
    }
    return 0;
}
