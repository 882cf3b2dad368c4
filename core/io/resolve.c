/* resolve.c -- model names to paths: existing paths, short aliases, the Hugging Face cache.
 * See resolve.h for the order and the folders. */
#define _GNU_SOURCE
#include "resolve.h"

#include "hub.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ================================================================ aliases */

static const char *builtin_aliases[][2] = {
    {"ds-r1", "deepseek-ai/DeepSeek-R1"},
    {"ds-r1-0528", "deepseek-ai/DeepSeek-R1-0528"},
    {"ds-v3", "deepseek-ai/DeepSeek-V3"},
    {"ds-v3-0324", "deepseek-ai/DeepSeek-V3-0324"},
    {"ds-v2-lite", "deepseek-ai/DeepSeek-V2-Lite"},
    {"kimi-k2", "moonshotai/Kimi-K2-Instruct"},
    {"kimi-k2-base", "moonshotai/Kimi-K2-Base"},
    {"llama3-8b", "meta-llama/Meta-Llama-3-8B"},
    {"llama3.1-8b", "meta-llama/Llama-3.1-8B"},
    {"llama3.2-1b", "meta-llama/Llama-3.2-1B"},
    {"llama2-7b", "meta-llama/Llama-2-7b-hf"},
    {"mistral-7b", "mistralai/Mistral-7B-v0.1"},
    {"qwen2.5-7b", "Qwen/Qwen2.5-7B"},
    {"qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B"},
    {"gpt2", "openai-community/gpt2"},
    {"smollm-135m", "HuggingFaceTB/SmolLM-135M"},
};
#define N_BUILTIN (sizeof builtin_aliases / sizeof *builtin_aliases)

typedef struct { char *alias, *target; } user_alias;
static user_alias *user_aliases;
static size_t n_user;
static bool user_loaded;

static bool exists(const char *p) { struct stat sb; return stat(p, &sb) == 0; }
static bool is_dir(const char *p) { struct stat sb; return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode); }

static char *env_dir(const char *var, const char *home_rel) {
    const char *v = getenv(var);
    if (v && *v) return al_strdup(v);
    const char *home = getenv("HOME");
    return al_asprintf("%s/%s", home && *home ? home : "/tmp", home_rel);
}

char *resolve_home_dir(void) {
    char *d = env_dir("ATTNLAB_HOME", ".config/attnlab");
    if (d) (void)al_mkdirs(d);
    return d;
}

char *resolve_cache_dir(void) {
    char *d = env_dir("ATTNLAB_CACHE", ".cache/attnlab");
    if (d) (void)al_mkdirs(d);
    return d;
}

char *resolve_hf_cache_dir(void) {
    const char *hub = getenv("HF_HUB_CACHE");
    if (hub && *hub) return al_strdup(hub);
    const char *hf = getenv("HF_HOME");
    if (hf && *hf) return al_asprintf("%s/hub", hf);
    const char *home = getenv("HOME");
    return al_asprintf("%s/.cache/huggingface/hub", home && *home ? home : "/tmp");
}

/* Reads "alias target" lines from the user's alias file once (at most AL_CAP_SMALL, a regular
 * file: one that cannot be read is skipped with a warning). */
static void load_user_aliases(void) {
    if (user_loaded) return;
    user_loaded = true;
    char *home = resolve_home_dir();
    char *path = home ? al_asprintf("%s/aliases", home) : NULL;
    free(home);
    char *text = path && exists(path) ? al_read_file_max(path, NULL, AL_CAP_SMALL, "alias") : NULL;
    if (path && !text && exists(path)) al_warn("%s; the aliases in it are ignored", al_errmsg());
    free(path);
    for (char *line = text, *next; line && *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next) *next++ = 0;
        char a[256], t[768];
        if (line[0] == '#' || sscanf(line, "%255s %767s", a, t) != 2) continue;
        user_alias *nu = realloc(user_aliases, (n_user + 1) * sizeof *nu);
        if (!nu) break;
        user_aliases = nu;
        user_aliases[n_user].alias = strdup(a);
        user_aliases[n_user].target = strdup(t);
        n_user++;
    }
    free(text);
}

const char *resolve_alias(const char *alias) {
    load_user_aliases();
    for (size_t i = 0; i < n_user; i++)           /* the user's file wins */
        if (strcmp(user_aliases[i].alias, alias) == 0) return user_aliases[i].target;
    for (size_t i = 0; i < N_BUILTIN; i++)
        if (strcmp(builtin_aliases[i][0], alias) == 0) return builtin_aliases[i][1];
    return NULL;
}

bool resolve_alias_at(size_t i, const char **alias, const char **target) {
    load_user_aliases();
    if (i < n_user) { *alias = user_aliases[i].alias; *target = user_aliases[i].target; return true; }
    i -= n_user;
    if (i < N_BUILTIN) { *alias = builtin_aliases[i][0]; *target = builtin_aliases[i][1]; return true; }
    return false;
}

/* ================================================================ HF cache */

/* True for a revision name refs/main may hold: a commit hash or a plain token of letters, digits,
 * '.', '_' and '-', not starting with '.' (so never "..", never a path). */
static bool plain_revision(const char *rev) {
    size_t n = strlen(rev);
    if (n == 0 || n > 127 || rev[0] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        char c = rev[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* The snapshot refs/<rev> names (folder "<snaps>/<commit>" when it has a config.json, else NULL), or
 * AL_ERR when the file is there but does not hold a plain revision name. */
static int hf_ref_snapshot(const char *snaps, const char *rev, char **snap) {
    *snap = NULL;
    char *ref = al_asprintf("%.*s/refs/%s", (int)(strlen(snaps) - strlen("/snapshots")), snaps, rev);
    if (!ref || !exists(ref)) { free(ref); return AL_OK; }
    char *text = al_read_file_max(ref, NULL, AL_CAP_SMALL, "refs");
    int rc = text ? AL_OK : AL_ERR;
    if (text) {
        size_t n = strlen(text);
        while (n && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' ')) text[--n] = 0;
        char shown[96];
        if (!plain_revision(text))
            rc = al_err("%s holds '%s', not a revision name (a commit hash, or letters, digits, '.', '_', '-' without "
                        "'/' or '..'): the cache is damaged; delete that file or download the model again", ref,
                        al_printable(text, shown, sizeof shown));
    }
    char *cand = rc == AL_OK ? al_asprintf("%s/%s", snaps, text) : NULL, *cfg = cand ? al_asprintf("%s/config.json", cand) : NULL;
    if (cfg && exists(cfg)) { *snap = cand; cand = NULL; }
    free(cfg);
    free(cand);
    free(text);
    free(ref);
    return rc;
}

static bool is_commit(const char *rev) { return strlen(rev) == 40 && strspn(rev, "0123456789abcdef") == 40; }

/* The snapshot folder of repo (org/name) at rev (NULL: main) that has a config.json, or NULL:
 * snapshots/<rev> for a commit, else the one refs/<rev> names, else (main only) the newest; `looked`
 * gets the folder searched. AL_ERR (error set) when the refs file is damaged. */
static int hf_snapshot(const char *repo, const char *rev, char **looked, char **snap) {
    *snap = NULL;
    char *hub = resolve_hf_cache_dir();
    if (!hub) return AL_OK;
    char flat[512] = "models--";           /* org/name -> models--org--name */
    size_t k = strlen(flat);
    for (const char *p = repo; *p && k + 3 < sizeof flat; p++) {
        if (*p == '/') flat[k++] = '-';
        flat[k++] = *p == '/' ? '-' : *p;
    }
    flat[k] = 0;
    char *snaps = al_asprintf("%s/%s/snapshots", hub, flat);
    free(hub);
    *looked = snaps;
    if (!snaps || !is_dir(snaps)) return AL_OK;
    if (rev && !plain_revision(rev)) return AL_OK;           /* "refs/pr/1" and the like: the Hub's */
    if (rev && is_commit(rev)) {
        char *cand = al_asprintf("%s/%s", snaps, rev), *cfg = cand ? al_asprintf("%s/config.json", cand) : NULL;
        if (cfg && exists(cfg)) { *snap = cand; cand = NULL; }
        free(cfg);
        free(cand);
        if (*snap) return AL_OK;
    }
    /* refs/<rev> names the commit the hub last gave; prefer it */
    if (hf_ref_snapshot(snaps, rev ? rev : "main", snap) != AL_OK) return AL_ERR;
    if (*snap || rev) return AL_OK;
    DIR *d = opendir(snaps);
    char *best = NULL;
    time_t best_t = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char *cand = al_asprintf("%s/%s", snaps, de->d_name), *cfg = cand ? al_asprintf("%s/config.json", cand) : NULL;
        struct stat sb;
        if (cfg && stat(cfg, &sb) == 0 && (!best || sb.st_mtime > best_t)) { free(best); best = cand; best_t = sb.st_mtime; cand = NULL; }
        free(cand);
        free(cfg);
    }
    if (d) closedir(d);
    *snap = best;
    return AL_OK;
}

/* Appends printf text to buf (capacity cap, current length *n), truncating instead of overflowing. */
static void looked_add(char *buf, size_t cap, size_t *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void looked_add(char *buf, size_t cap, size_t *n, const char *fmt, ...) {
    if (*n + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + *n, cap - *n, fmt, ap);
    va_end(ap);
    if (k > 0) *n = (size_t)k >= cap - *n ? cap - 1 : *n + (size_t)k;
}

/* True for "org/name": exactly one '/', not at either end, not a path (., .., ~, /). */
static bool looks_like_repo(const char *name) {
    const char *slash = strchr(name, '/');
    if (!slash || slash == name || !slash[1] || strchr(slash + 1, '/')) return false;
    return name[0] != '.' && name[0] != '~';
}

/* True when attnlab's cache streams the HF snapshot snap of repo from the Hub (hub.h): it has that
 * commit's folder (made before anything of the commit enters the HF cache), so the HF snapshot may
 * hold only the config and index, or shards not all there yet. */
static bool hub_streamed(const char *repo, const char *snap) {
    const char *commit = strrchr(snap, '/') ? strrchr(snap, '/') + 1 : snap;
    char *own = resolve_cache_dir(), flat[512] = "models--";
    size_t k = strlen(flat);
    for (const char *p = repo; *p && k + 3 < sizeof flat; p++) {
        if (*p == '/') flat[k++] = '-';
        flat[k++] = *p == '/' ? '-' : *p;
    }
    flat[k] = 0;
    char *dir = own ? al_asprintf("%s/hub/%s/snapshots/%s", own, flat, commit) : NULL;
    bool yes = dir && is_dir(dir);
    free(dir);
    free(own);
    return yes;
}

/* True when the cached snapshot snap of repo@rev (NULL: main) is the one to open: offline, rev is
 * its commit, the Hub names the same commit, or the Hub cannot be asked (a warning says so). False
 * when the revision moved on the Hub: the new commit is to be opened. */
static bool hf_current(const char *repo, const char *rev, const char *snap) {
    const char *have = strrchr(snap, '/') ? strrchr(snap, '/') + 1 : snap;
    if (hub_offline() || (rev && !strcmp(rev, have))) return true;
    char now[96] = "";
    if (hub_revision_commit(repo, rev ? rev : "main", now, sizeof now) == AL_OK) return strcmp(now, have) == 0;
    if (al_interrupted()) return false;            /* Ctrl-C: no fallback; the Hub's load says so */
    al_warn("%s: %s; using the cached snapshot %s", repo, al_errmsg(), have);
    return true;
}

/* repo@rev from the Hub (hub_open with this process's cache folders). */
static int hub_fetch(const char *repo, const char *rev, char **path_out) {
    char *hf = resolve_hf_cache_dir(), *own = resolve_cache_dir();
    HubRequest rq = {.repo = repo, .revision = rev, .hf_cache = hf, .own_cache = own};
    int rc = hf && own ? hub_open(&rq, path_out) : AL_ERR;
    free(hf);
    free(own);
    return rc;
}

int resolve_model(const char *name, char **path_out) {
    *path_out = NULL;
    if (!name || !*name) return al_err("no model name given");
    if (exists(name)) { *path_out = al_strdup(name); return *path_out ? AL_OK : AL_ERR; }
    if (name[0] == '/' || name[0] == '.' || name[0] == '~')
        return al_err("%s: no such file or folder (a model is a folder with config.json, a .safetensors file or a "
                      "llama2.c .bin)", name);
    char looked[2048];
    size_t n = 0;
    looked[0] = 0;
    looked_add(looked, sizeof looked, &n, "path '%.200s' (no such file or folder)", name);
    const char *repo = resolve_alias(name);
    if (repo && (repo[0] == '/' || repo[0] == '~' || repo[0] == '.')) {     /* an alias of a local folder */
        const char *home = getenv("HOME");
        char *p = repo[0] == '~' ? al_asprintf("%s%s", home ? home : "", repo + 1) : al_strdup(repo);
        if (p && exists(p)) { *path_out = p; return AL_OK; }
        free(p);
        return al_err("alias '%s' = %s: no such file or folder (fix the line in $ATTNLAB_HOME/aliases)", name, repo);
    }
    if (repo) looked_add(looked, sizeof looked, &n, "; alias '%s' = %s", name, repo);
    else repo = looks_like_repo(name) ? name : NULL;
    if (repo) {
        char base[512], *dir = NULL, *snap = NULL;
        snprintf(base, sizeof base, "%s", repo);
        char *rev = strchr(base, '@');             /* org/name@revision */
        if (rev) *rev++ = 0;
        if (hf_snapshot(base, rev, &dir, &snap) != AL_OK) { free(dir); return AL_ERR; }
        if (snap && !hub_streamed(base, snap) && hf_current(base, rev, snap)) { free(dir); *path_out = snap; return AL_OK; }
        if (!snap) looked_add(looked, sizeof looked, &n, "; Hugging Face cache %s (no snapshot with a config.json)", dir ? dir : "?");
        free(snap);
        free(dir);
        if (hub_fetch(base, rev, path_out) == AL_OK) return AL_OK;
        looked_add(looked, sizeof looked, &n, "; the Hub: %s", al_errmsg());
    } else {
        char *home = resolve_home_dir();
        looked_add(looked, sizeof looked, &n, "; no alias '%.200s' among the built-in ones or in %s/aliases (see `help load` for the list)",
                   name, home ? home : "$ATTNLAB_HOME");
        free(home);
    }
    return al_err("model '%.200s' not found. Looked at: %s. Check the name and the network (HF_ENDPOINT, HF_TOKEN), "
                  "set HF_HOME to a cache that holds it, or give a path", name, looked);
}
