/* test_resolve.c -- from a name to a path: existing paths, the Hugging Face cache under HF_HOME /
 * HF_HUB_CACHE (models--org--name/snapshots/<rev>/ with refs/main, else the newest snapshot with
 * a config.json), built-in aliases, the user's alias file in $ATTNLAB_HOME/aliases overriding
 * them, and a not-found name whose message lists every place looked (no crash on huge names). */
#define _GNU_SOURCE
#include "check.h"
#include "resolve.h"
#include "safetensors.h"

#include <sys/time.h>

static char dir[2048];

static const char *tpath(const char *rel) {
    static char buf[8][4400];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, rel);
    return buf[k];
}

/* mkdir -p of <tmp>/rel */
static void mkdirs(const char *rel) {
    char buf[4400];
    snprintf(buf, sizeof buf, "%s/%s", dir, rel);
    for (char *p = buf + strlen(dir) + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(buf, 0755); *p = '/'; }
    mkdir(buf, 0755);
}

static void write_text(const char *rel, const char *text) {
    CHECK_OK(al_write_file_atomic(tpath(rel), text, strlen(text)));
}

/* Sets a file's modification time to `t` seconds after the epoch. */
static void set_mtime(const char *rel, long t) {
    struct timeval tv[2] = {{t, 0}, {t, 0}};
    CHECK(utimes(tpath(rel), tv) == 0, "utimes %s", rel);
}

/* A snapshot folder with a config.json, modified at time t. */
static void snapshot(const char *repo_dir, const char *rev, long t) {
    char rel[1024];
    snprintf(rel, sizeof rel, "hf/hub/%s/snapshots/%s", repo_dir, rev);
    mkdirs(rel);
    snprintf(rel, sizeof rel, "hf/hub/%s/snapshots/%s/config.json", repo_dir, rev);
    write_text(rel, "{\"model_type\": \"llama\"}");
    set_mtime(rel, t);
}

/* resolve_model(name) succeeds with tpath(want). */
static void expect_path(const char *name, const char *want_rel) {
    char *p = NULL;
    int rc = resolve_model(name, &p);
    CHECK(rc == AL_OK && p && strcmp(p, tpath(want_rel)) == 0, "resolve '%s' -> %s (rc %d: %s), want %s", name,
          p ? p : "(null)", rc, rc ? al_errmsg() : "", tpath(want_rel));
    free(p);
}

static void test_cache_dirs(void) {
    setenv("HF_HUB_CACHE", "/x/hubcache", 1);
    char *d = resolve_hf_cache_dir();
    CHECK(d && strcmp(d, "/x/hubcache") == 0, "HF_HUB_CACHE wins: %s", d);
    free(d);
    unsetenv("HF_HUB_CACHE");
    setenv("HF_HOME", "/y/hfhome", 1);
    d = resolve_hf_cache_dir();
    CHECK(d && strcmp(d, "/y/hfhome/hub") == 0, "HF_HOME/hub: %s", d);
    free(d);
    unsetenv("HF_HOME");
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", "/z/home", 1);
    d = resolve_hf_cache_dir();
    CHECK(d && strcmp(d, "/z/home/.cache/huggingface/hub") == 0, "~/.cache/huggingface/hub: %s", d);
    free(d);
    if (home) setenv("HOME", home, 1);
    free(home);
    /* attnlab's own folders come from the environment and are created */
    setenv("ATTNLAB_CACHE", tpath("acache/deep"), 1);
    d = resolve_cache_dir();
    struct stat sb;
    CHECK(d && strcmp(d, tpath("acache/deep")) == 0 && stat(d, &sb) == 0 && S_ISDIR(sb.st_mode), "cache dir %s", d);
    free(d);
    d = resolve_home_dir();
    CHECK(d && strcmp(d, tpath("home")) == 0 && stat(d, &sb) == 0, "home dir %s", d);
    free(d);
}

static void test_hf_cache(void) {
    setenv("HF_HOME", tpath("hf"), 1);
    unsetenv("HF_HUB_CACHE");
    /* refs/main names rev1 although rev2 is newer */
    snapshot("models--org--name", "rev1", 1000);
    snapshot("models--org--name", "rev2", 2000);
    mkdirs("hf/hub/models--org--name/refs");
    write_text("hf/hub/models--org--name/refs/main", "rev1\n");
    mkdirs("hf/hub/models--org--name/snapshots/rev3-noconfig");
    expect_path("org/name", "hf/hub/models--org--name/snapshots/rev1");
    /* without refs/main: the snapshot whose config.json is newest */
    snapshot("models--org--other", "old", 1000);
    snapshot("models--org--other", "new", 3000);
    snapshot("models--org--other", "mid", 2000);
    mkdirs("hf/hub/models--org--other/snapshots/newest-but-empty");
    expect_path("org/other", "hf/hub/models--org--other/snapshots/new");
    /* refs/main naming a snapshot that lacks config.json: fall back to the newest one */
    snapshot("models--org--third", "a", 1000);
    mkdirs("hf/hub/models--org--third/snapshots/b");
    mkdirs("hf/hub/models--org--third/refs");
    write_text("hf/hub/models--org--third/refs/main", "b");
    expect_path("org/third", "hf/hub/models--org--third/snapshots/a");
    /* HF_HUB_CACHE takes precedence over HF_HOME */
    mkdirs("hub2");
    setenv("HF_HUB_CACHE", tpath("hub2"), 1);
    char *p = NULL;
    CHECK_ERR(resolve_model("org/name", &p), tpath("hub2/models--org--name/snapshots"));
    CHECK(p == NULL, "no path on error");
    unsetenv("HF_HUB_CACHE");
    /* an existing path is used as is */
    expect_path(tpath("hf"), "hf");
}

static void test_aliases(void) {
    /* the user's file overrides a built-in alias and adds its own; comments and junk are skipped */
    CHECK(strcmp(resolve_alias("ds-r1"), "deepseek-ai/DeepSeek-R1") == 0, "built-in ds-r1");
    CHECK(strcmp(resolve_alias("ds-v3"), "my-org/my-v3") == 0, "user file overrides ds-v3: %s", resolve_alias("ds-v3"));
    CHECK(resolve_alias("tiny") && strcmp(resolve_alias("tiny"), "org/other") == 0, "user alias 'tiny'");
    CHECK(resolve_alias("commented") == NULL && resolve_alias("lonely") == NULL, "comments and one-word lines");
    CHECK(resolve_alias("no-such-alias") == NULL, "unknown alias");
    bool saw_user = false, saw_builtin = false;
    const char *a, *t;
    size_t n = 0;
    for (size_t i = 0; resolve_alias_at(i, &a, &t); i++, n++) {
        saw_user |= strcmp(a, "tiny") == 0 && strcmp(t, "org/other") == 0;
        saw_builtin |= strcmp(a, "gpt2") == 0 && strcmp(t, "openai-community/gpt2") == 0;
        if (i == 0) CHECK(strcmp(a, "ds-v3") == 0, "user aliases come first: %s", a);
    }
    CHECK(saw_user && saw_builtin && n > 10, "alias table (%zu entries)", n);
    CHECK(!resolve_alias_at(n, &a, &t) && !resolve_alias_at((size_t)-1, &a, &t), "past the end");

    snapshot("models--deepseek-ai--DeepSeek-R1", "abc123", 1000);
    expect_path("ds-r1", "hf/hub/models--deepseek-ai--DeepSeek-R1/snapshots/abc123");
    snapshot("models--my-org--my-v3", "r", 1000);
    snapshot("models--deepseek-ai--DeepSeek-V3", "r", 1000);
    expect_path("ds-v3", "hf/hub/models--my-org--my-v3/snapshots/r");
    expect_path("tiny", "hf/hub/models--org--other/snapshots/new");
}

static void test_not_found(void) {
    char *p = NULL;
    /* a bare name: path, aliases (built-in and the user's file) */
    CHECK_ERR(resolve_model("nosuch-model", &p), "model 'nosuch-model' not found");
    const char *msg = al_errmsg();
    CHECK(strstr(msg, "path 'nosuch-model'") != NULL, "lists the path: %s", msg);
    CHECK(strstr(msg, "alias") != NULL, "lists the alias table: %s", msg);
    CHECK(strstr(msg, tpath("home/aliases")) != NULL, "names the user alias file: %s", msg);
    CHECK(strchr(msg, '\n') == NULL, "one line");
    /* org/name: path and the cache folder looked in */
    CHECK_ERR(resolve_model("org/missing", &p), tpath("hf/hub/models--org--missing/snapshots"));
    CHECK(strstr(al_errmsg(), "path 'org/missing'") != NULL, "lists the path: %s", al_errmsg());
    /* an alias whose repo is not in the cache: the alias and the cache folder */
    CHECK_ERR(resolve_model("kimi-k2", &p), "alias 'kimi-k2' = moonshotai/Kimi-K2-Instruct");
    CHECK(strstr(al_errmsg(), tpath("hf/hub/models--moonshotai--Kimi-K2-Instruct/snapshots")) != NULL,
          "names the cache folder: %s", al_errmsg());
    CHECK_ERR(resolve_model("", &p), "no model name given");
    CHECK_ERR(resolve_model(NULL, &p), "no model name given");
    CHECK(p == NULL, "no path on error");
    /* huge names must not overflow anything (ASan checks this) */
    static char big[6000];
    memset(big, 'x', sizeof big - 1);
    CHECK_ERR(resolve_model(big, &p), "not found");
    big[2500] = '/';
    CHECK_ERR(resolve_model(big, &p), "not found");
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    /* the user's alias file must be in place before the first lookup (it is read once) */
    setenv("ATTNLAB_HOME", tpath("home"), 1);
    mkdirs("home");
    write_text("home/aliases", "# my aliases\nds-v3 my-org/my-v3\n\ntiny   org/other\n#commented org/x\nlonely\n");
    test_cache_dirs();
    test_hf_cache();
    test_aliases();
    test_not_found();
    return check_done();
}
