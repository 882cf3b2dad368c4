/* test_hostile.c -- files a user downloads that are damaged or built to hurt (issue 14, items 5,
 * 6, 11, 12, 13): each gets a clear one-line error (or a warning), never a crash, a silent
 * default, a hang or unbounded memory.
 *
 * 1. tokenizer.json: negative / fractional added_tokens ids, post_processor ids outside the
 *    vocabulary.
 * 2. calib load on a safetensors file that is not a calibration file (the message quotes the
 *    file's format after the file is closed: it must be the file's, not freed memory).
 * 3. config.json: rope_theta <= 0 / infinite / a string, negative epsilons, numbers given as
 *    strings in nested objects, bytes after the JSON, repeated keys (the last wins, with a
 *    warning), control characters in names that are echoed.
 * 4. Reads: a FIFO, a symlink to /dev/zero, a folder, files past the per-kind caps (sparse, so
 *    nothing is written), an interrupted read, the alias file as a FIFO.
 * 5. The HF cache's refs/main: only a plain revision name is joined to snapshots/.
 * Every case that could block runs under alarm(): a hang fails the test instead of stalling it. */
#define _GNU_SOURCE
#include "testutil.h"
#include "calib.h"
#include "config.h"
#include "model.h"
#include "resolve.h"
#include "safetensors.h"
#include "tokenizer.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

static void write_text(const char *rel, const char *text) {
    FILE *fp = fopen(tpath(rel, NULL), "wb");
    CHECK(fp != NULL, "cannot write %s", rel);
    if (fp) { fputs(text, fp); fclose(fp); }
}

/* A sparse file of `bytes` (no disk used). */
static void sparse(const char *rel, off_t bytes) {
    int fd = open(tpath(rel, NULL), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, bytes) == 0, "cannot make sparse %s", rel);
    if (fd >= 0) close(fd);
}

/* Drains queued warnings; true when one contains needle. */
static bool warned(const char *needle) {
    char buf[1024];
    bool seen = false;
    while (al_warn_pop(buf, sizeof buf)) seen = seen || strstr(buf, needle) != NULL;
    return seen;
}

/* No control character (a newline or escape code) in the current message. */
static bool msg_printable(void) {
    for (const char *p = al_errmsg(); *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) return false;
    return true;
}

/* ================================================================ 1. tokenizer.json */

#define TOK_HEAD "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"<s>\": 2}, \"merges\": []}, " \
                 "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, "

static int open_tok(const char *text) {
    write_text("tokenizer.json", text);
    Tokenizer *t = NULL;
    int rc = tok_open(tpath("tokenizer.json", NULL), &t);
    tok_free(t);
    return rc;
}

static void test_tokenizer(void) {
    CHECK_OK(open_tok(TOK_HEAD "\"added_tokens\": [{\"id\": 3, \"content\": \"<x>\", \"special\": true}]}"));
    CHECK_ERR(open_tok(TOK_HEAD "\"added_tokens\": [{\"id\": -5, \"content\": \"<x>\", \"special\": true}]}"),
              "added token '<x>' has id -5, which is not a token id");
    CHECK_ERR(open_tok(TOK_HEAD "\"added_tokens\": [{\"id\": -2147483648, \"content\": \"<y>\"}]}"), "is not a token id");
    CHECK_ERR(open_tok(TOK_HEAD "\"added_tokens\": [{\"id\": 2.5, \"content\": \"<z>\"}]}"), "has id 2.5");
    CHECK_ERR(open_tok("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0.5}, \"merges\": []}}"),
              "vocab entry 'b' has no valid id");
    CHECK_ERR(open_tok("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"\\u001b[2J\": -1}, \"merges\": []}}"),
              "vocab entry '\\x1b[2J' has no valid id");
    CHECK(msg_printable(), "piece escaped: %s", al_errmsg());
    CHECK_ERR(open_tok("{\"model\": \x1b[2J\n}"), "not valid JSON (near '");
    CHECK(msg_printable(), "JSON error escaped: %s", al_errmsg());
    CHECK_ERR(open_tok("{\"model\": {\"type\": \"Uni\x07gram\"}}"), "model type 'Uni\\x07gram' is not supported");
    CHECK_ERR(open_tok(TOK_HEAD "\"added_tokens\": [{\"id\": 1e300, \"content\": \"<z>\"}]}"), "has id 1e+300, which is not a token id");
    CHECK_ERR(open_tok(TOK_HEAD "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
                       "{\"id\": \"<s>\"}}, {\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\": {\"ids\": [99]}}}}"),
              "the post_processor adds token id 99, outside the vocabulary (ids 0-2)");
    CHECK_ERR(open_tok(TOK_HEAD "\"post_processor\": {\"type\": \"RobertaProcessing\", \"cls\": [\"<s>\", -1], "
                       "\"sep\": [\"</s>\", 2]}}"),
              "the post_processor adds token id -1");
    CHECK_OK(open_tok(TOK_HEAD "\"post_processor\": {\"type\": \"RobertaProcessing\", \"cls\": [\"<s>\", 2], "
                      "\"sep\": [\"</s>\", 2]}}"));
}

/* ================================================================ 2. calib load */

static void test_calib_not_calibration(void) {
    static const char *fmt = "not-a-calibration-format-but-a-long-enough-string-to-be-noticed";
    float x[4] = {1, 2, 3, 4};
    size_t sh[1] = {4};
    st_writer *w = st_writer_new();
    st_writer_meta(w, "format", fmt);
    st_writer_add(w, "w", DT_F32, 1, sh, x, sizeof x);
    CHECK_OK(st_writer_write(w, tpath("other.safetensors", NULL)));
    st_writer_free(w);
    CalibStats *st = NULL;
    char want[256];
    snprintf(want, sizeof want, "metadata format is '%s', want", fmt);
    CHECK_ERR(calib_load(tpath("other.safetensors", NULL), &st), want);
    CHECK(st == NULL, "no stats from a refused file");
    unlink(tpath("calib.fifo", NULL));
    CHECK(mkfifo(tpath("calib.fifo", NULL), 0644) == 0, "mkfifo");
    alarm(20);
    CHECK_ERR(calib_load(tpath("calib.fifo", NULL), &st), "not a regular file (a FIFO)");
    alarm(0);
}

/* ================================================================ 3. config.json */

#define LLAMA "\"model_type\": \"llama\", \"hidden_size\": 32, \"num_attention_heads\": 4, \"num_hidden_layers\": 2"

static int cfg(const char *json, ModelConfig *c) { return model_config_parse(json, "t/config.json", c); }

static void test_config_values(void) {
    ModelConfig c;
    CHECK_OK(cfg("{" LLAMA ", \"rope_theta\": 500000, \"rms_norm_eps\": 0}", &c));
    CHECK(c.rope_theta == 500000 && c.norm_eps == 0, "theta %g eps %g", c.rope_theta, c.norm_eps);
    CHECK_OK(cfg("{" LLAMA ", \"rope_theta\": null}", &c));           /* null: the default, as HF reads it */
    CHECK(c.rope_theta == 10000, "null theta -> 10000, got %g", c.rope_theta);
    CHECK_ERR(cfg("{" LLAMA ", \"rope_theta\": 0}", &c), "t/config.json: rope_theta = 0 (must be > 0): fix this field");
    CHECK_ERR(cfg("{" LLAMA ", \"rope_theta\": -10000}", &c), "rope_theta = -10000 (must be > 0)");
    CHECK_ERR(cfg("{" LLAMA ", \"rope_theta\": 1e999}", &c), "rope_theta = inf (must be finite)");
    CHECK_ERR(cfg("{" LLAMA ", \"rope_theta\": \"10000\"}", &c), "rope_theta (a string, not a number: write it without quotes)");
    CHECK_ERR(cfg("{" LLAMA ", \"rope_theta\": true}", &c), "rope_theta (not a number)");
    CHECK_ERR(cfg("{" LLAMA ", \"rms_norm_eps\": -1e-6}", &c), "rms_norm_eps = -1e-06 (must be >= 0)");
    CHECK_ERR(cfg("{" LLAMA ", \"rms_norm_eps\": \"1e-6\", \"rope_theta\": 0}", &c), "fix these fields");
    CHECK_ERR(cfg("{\"model_type\": \"gpt2\", \"n_embd\": 32, \"n_head\": 4, \"n_layer\": 2, \"layer_norm_epsilon\": -1}", &c),
              "layer_norm_epsilon = -1 (must be >= 0)");
    CHECK_ERR(cfg("{" LLAMA ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": \"2\"}}", &c),
              "rope_scaling.factor (a string, not a number");
    CHECK_ERR(cfg("{" LLAMA ", \"rope_scaling\": {\"rope_type\": \"longrope\", \"short_factor\": [1, \"x\"]}}", &c),
              "short_factor (an element is not a finite number)");
    CHECK_ERR(cfg("{" LLAMA ", \"sliding_window\": 1e300}", &c), "sliding_window = 1e+300 (must be a count");
    CHECK_ERR(cfg("{" LLAMA ", \"num_experts_per_tok\": \"8\"}", &c), "num_experts_per_tok (a string");
}

static void test_config_syntax(void) {
    ModelConfig c;
    CHECK_OK(cfg("{" LLAMA "}\n \n", &c));                                    /* trailing whitespace is fine */
    CHECK_ERR(cfg("{" LLAMA "} {\"rope_theta\": 1}", &c), "t/config.json: bytes after the JSON object (at byte");
    CHECK_ERR(cfg("{" LLAMA "}x", &c), "'x'");
    while (al_warn_pop((char[8]){0}, 8)) {}
    CHECK_OK(cfg("{\"rope_theta\": 1, " LLAMA ", \"rope_theta\": 500000, \"rope_theta\": 250000}", &c));
    CHECK(c.rope_theta == 250000, "repeated key: the last wins (got %g)", c.rope_theta);
    CHECK(warned("key \"rope_theta\" appears 3 times; attnlab uses the last"), "a warning names the repeated key");
    CHECK_OK(cfg("{" LLAMA ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 8, \"factor\": 2}}", &c));
    CHECK(c.rope_spec.scaling.factor == 2, "nested repeated key: the last wins (got %g)", c.rope_spec.scaling.factor);
    CHECK(warned("key \"factor\" appears 2 times"), "nested repeat warned");
    CHECK_OK(cfg("{\"model_type\": \"gpt2\", " LLAMA "}", &c));               /* the last model_type */
    CHECK(c.family == FAM_LLAMA, "family from the last model_type");
    CHECK(warned("\"model_type\" appears 2 times"), "model_type repeat warned");
    CHECK(!warned(""), "nothing else queued");
}

static void test_config_names(void) {
    ModelConfig c;
    CHECK_ERR(cfg("{\"model_type\": \"ll\\u001b[31mama\\n\", \"hidden_size\": 32}", &c), "model_type 'll\\x1b[31mama\\x0a'");
    CHECK(msg_printable(), "no control character reaches the message: %s", al_errmsg());
    CHECK_ERR(cfg("{\"architectures\": [\"Evil\\r\\u0007\"]}", &c), "'Evil\\x0d\\x07'");
    CHECK(msg_printable(), "architectures escaped too");
    CHECK_ERR(cfg("{\"model_type\": \"not json", &c), "not valid JSON");
    CHECK_OK(cfg("{" LLAMA ", \"hidden_act\": \"si\\u001blu\", \"torch_dtype\": \"bf\\n16\", "
                 "\"rope_scaling\": {\"rope_type\": \"odd\\u001b\"}}", &c));
    CHECK(strcmp(c.activation, "si\\x1blu") == 0, "activation escaped: %s", c.activation);
    CHECK(strcmp(c.torch_dtype, "bf\\x0a16") == 0, "dtype escaped: %s", c.torch_dtype);
    CHECK(strcmp(c.rope_spec.scaling.type, "odd\\x1b") == 0, "scaling type escaped: %s", c.rope_spec.scaling.type);
    CHECK_OK(cfg("{" LLAMA ", \"torch_dtype\": \"float8_e4m3fn\"}", &c));
    CHECK(strcmp(c.torch_dtype, "float8_e4m3fn") == 0, "a printable name is kept whole: %s", c.torch_dtype);
}

/* ================================================================ 4. reads */

static void test_reads(void) {
    alarm(30);                                     /* a FIFO that blocks fails the test, not the suite */
    unlink(tpath("fifo", NULL));
    CHECK(mkfifo(tpath("fifo", NULL), 0644) == 0, "mkfifo");
    unlink(tpath("zero", NULL));
    CHECK(symlink("/dev/zero", tpath("zero", NULL)) == 0, "symlink");
    CHECK(al_read_file_max(tpath("fifo", NULL), NULL, AL_CAP_CONFIG, "config") == NULL, "FIFO refused");
    CHECK(strstr(al_errmsg(), "not a regular file (a FIFO): attnlab reads a config file only from a regular file"),
          "%s", al_errmsg());
    CHECK(al_read_file_max(tpath("zero", NULL), NULL, AL_CAP_TOKENIZER, "tokenizer") == NULL, "/dev/zero refused");
    CHECK(strstr(al_errmsg(), "not a regular file (a character device)"), "%s", al_errmsg());
    CHECK(al_read_file(tpath("zero", NULL), NULL) == NULL, "/dev/zero refused as text too");
    CHECK(strstr(al_errmsg(), "character device"), "%s", al_errmsg());
    CHECK(al_read_file_max(tu_dir, NULL, AL_CAP_CONFIG, "config") == NULL && strstr(al_errmsg(), "is a folder"), "%s", al_errmsg());
    char *fifo_text = al_read_file(tpath("fifo", NULL), NULL);     /* text may come from a pipe: no writer, empty */
    CHECK(fifo_text && !*fifo_text, "a FIFO without a writer reads as empty text: %s", fifo_text ? "" : al_errmsg());
    free(fifo_text);
    Tokenizer *t = NULL;
    CHECK_ERR(tok_open(tpath("zero", NULL), &t), "not a regular file");
    CHECK_ERR(tok_open(tpath("fifo", NULL), &t), "not a regular file (a FIFO)");
    sparse("big-tokenizer.json", (off_t)300 << 20);
    CHECK_ERR(tok_open(tpath("big-tokenizer.json", NULL), &t), "300.0 MiB, larger than the 256 MiB attnlab reads for a tokenizer file");
    /* a model folder whose config.json is each of these */
    mkdir(tpath("m", NULL), 0755);
    Model *m = NULL;
    const char *kinds[][2] = {{"fifo", "(a FIFO)"}, {"zero", "(a character device)"}, {"big", "larger than the 16 MiB"}};
    sparse("big", (off_t)17 << 20);
    for (int i = 0; i < 3; i++) {
        unlink(tpath("m/config.json", NULL));
        char target[4400];
        snprintf(target, sizeof target, "%s", tpath(kinds[i][0], NULL));
        CHECK(symlink(target, tpath("m/config.json", NULL)) == 0, "symlink config");
        CHECK_ERR(model_open(tpath("m", NULL), &m), kinds[i][1]);
        model_free(m);
        m = NULL;
    }
    unlink(tpath("m/config.json", NULL));
    FILE *fp = fopen(tpath("m/config.json", NULL), "wb");
    if (fp) { fwrite("{\"model_type\": \"llama\"}\0{\"x\": 1}", 1, 33, fp); fclose(fp); }
    CHECK_ERR(model_open(tpath("m", NULL), &m), "config.json: a NUL byte at byte 23: not a JSON text file");
    write_text("small.json", "{}");
    al_interrupt_flag = 1;
    CHECK(al_read_file_max(tpath("small.json", NULL), NULL, AL_CAP_CONFIG, "config") == NULL &&
          strstr(al_errmsg(), "reading interrupted (Ctrl-C)"), "Ctrl-C stops a read: %s", al_errmsg());
    al_interrupt_flag = 0;
    size_t len = 0;
    char *ok = al_read_file_max(tpath("small.json", NULL), &len, AL_CAP_CONFIG, "config");
    CHECK(ok && len == 2 && strcmp(ok, "{}") == 0, "a small file reads");
    free(ok);
    alarm(0);
}

/* The alias file as a FIFO: skipped with a warning, no hang (first alias lookup of the process). */
static void test_alias_fifo(void) {
    mkdir(tpath("home", NULL), 0755);
    CHECK(mkfifo(tpath("home/aliases", NULL), 0644) == 0, "mkfifo aliases");
    setenv("ATTNLAB_HOME", tpath("home", NULL), 1);
    alarm(20);
    CHECK(resolve_alias("no-such-alias") == NULL, "no alias");
    CHECK(strcmp(resolve_alias("gpt2"), "openai-community/gpt2") == 0, "built-ins still work");
    alarm(0);
    CHECK(warned("aliases: not a regular file (a FIFO)"), "the refused alias file is reported");
}

/* ================================================================ 5. refs/main */

static void test_refs_main(void) {
    setenv("HF_HUB_CACHE", tpath("hub", NULL), 1);
    CHECK_OK(al_mkdirs(tpath("hub/models--org--name/snapshots/abc123", NULL)));
    CHECK_OK(al_mkdirs(tpath("hub/models--org--name/refs", NULL)));
    write_text("hub/models--org--name/snapshots/abc123/config.json", "{}");
    write_text("config.json", "{}");             /* what ../../.. from snapshots/ reaches */
    write_text("hub/models--org--name/refs/main", "abc123\n");
    char *p = NULL;
    CHECK_OK(resolve_model("org/name", &p));
    CHECK(p && strstr(p, "snapshots/abc123"), "the named revision: %s", p ? p : "");
    free(p);
    const char *bad[] = {"../../..", "..", "abc/../../..", "/etc", "a b", ".hidden", "x\x1b[2J"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_text("hub/models--org--name/refs/main", bad[i]);
        p = NULL;
        CHECK_ERR(resolve_model("org/name", &p), "not a revision name");
        CHECK(p == NULL && msg_printable(), "'%s' refused, printable message: %s", bad[i], al_errmsg());
        free(p);
    }
    unlink(tpath("hub/models--org--name/refs/main", NULL));
    CHECK(symlink("/dev/zero", tpath("hub/models--org--name/refs/main", NULL)) == 0, "symlink refs");
    alarm(20);
    CHECK_ERR(resolve_model("org/name", &p), "refs/main: not a regular file");
    alarm(0);
}

int main(void) {
    snprintf(tu_dir, sizeof tu_dir, "%s", test_tmpdir());
    signal(SIGALRM, SIG_DFL);                     /* a hang ends the test with SIGALRM */
    test_alias_fifo();
    test_tokenizer();
    test_calib_not_calibration();
    test_config_values();
    test_config_syntax();
    test_config_names();
    test_reads();
    test_refs_main();
    return check_done();
}
