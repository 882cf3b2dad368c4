/* hub.c -- models from the Hugging Face Hub: HTTP through libcurl (retries, resume, Ctrl-C,
 * progress), the revision API, whole files into the HF cache layout, shards streamed by Range
 * into attnlab's partial-shard cache. See hub.h for the conventions and the folders. */
#define _GNU_SOURCE
#include "hub.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HUB_MAX_WHOLE ((size_t)AL_CAP_TOKENIZER)  /* the largest file fetched whole into memory */
#define HUB_MAX_HEADER (100u << 20)              /* a shard's JSON header */
#define HUB_TRIES 6
#define HUB_DEADLINE_S 60                        /* no new try after this long on one transfer */

static atomic_uint_fast64_t fetched_total;

uint64_t hub_bytes_fetched(void) { return atomic_load(&fetched_total); }

/* ================================================================ SHA-256 (FIPS 180-4) */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (ROR(v[4], 6) ^ ROR(v[4], 11) ^ ROR(v[4], 25)) + ((v[4] & v[5]) ^ (~v[4] & v[6])) + K256[i] + w[i];
        uint32_t t2 = (ROR(v[0], 2) ^ ROR(v[0], 13) ^ ROR(v[0], 22)) + ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof *v);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) h[i] += v[i];
}

void hub_sha256_hex(const void *buf, size_t n, char hex[65]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = buf;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) sha256_block(h, p + i);
    uint8_t last[128] = {0};
    size_t r = n - i, tail = r < 56 ? 64 : 128;
    memcpy(last, p + i, r);
    last[r] = 0x80;
    for (int k = 0; k < 8; k++) last[tail - 1 - k] = (uint8_t)((uint64_t)n * 8 >> (8 * k));
    sha256_block(h, last);
    if (tail == 128) sha256_block(h, last + 64);
    for (int k = 0; k < 8; k++) snprintf(hex + 8 * k, 9, "%08x", h[k]);
}

/* ================================================================ settings */

static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct {
    char *endpoint;          /* no trailing '/' */
    char *token;             /* NULL: none */
    bool offline;
} HubEnv;

static bool env_true(const char *v) {
    return v && (!strcasecmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true"));
}

/* The token: $HF_TOKEN, else the first line of the token file. */
static char *hub_token(void) {
    const char *t = getenv("HF_TOKEN");
    if (t && *t) return strdup(t);
    const char *tp = getenv("HF_TOKEN_PATH"), *hf = getenv("HF_HOME"), *home = getenv("HOME");
    char *path = tp && *tp ? strdup(tp) : hf && *hf ? al_asprintf("%s/token", hf)
                                                     : al_asprintf("%s/.cache/huggingface/token", home ? home : "/tmp");
    FILE *f = path ? fopen(path, "r") : NULL;
    free(path);
    if (!f) return NULL;
    char line[512] = "";
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    line[strcspn(line, "\r\n \t")] = 0;
    return ok && *line ? strdup(line) : NULL;
}

static void env_load(HubEnv *e) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, curl_init_once);          /* before any thread makes a transfer */
    const char *ep = getenv("HF_ENDPOINT");
    e->endpoint = strdup(ep && *ep ? ep : "https://huggingface.co");
    size_t n = e->endpoint ? strlen(e->endpoint) : 0;
    while (n && e->endpoint[n - 1] == '/') e->endpoint[--n] = 0;
    e->token = hub_token();
    e->offline = env_true(getenv("HF_HUB_OFFLINE"));
}

static void env_free(HubEnv *e) {
    free(e->endpoint);
    if (e->token) memset(e->token, 0, strlen(e->token));
    free(e->token);
}

/* ================================================================ HTTP */

typedef struct {
    char commit[96], etag[160], linked_etag[160];
    long long linked_size, range_total;   /* -1: not said */
} HubHeaders;

typedef struct {
    char *buf; size_t len, cap;           /* into memory (fd < 0) */
    uint64_t max;                         /* the most bytes taken (either way) */
    int fd; uint64_t off;                 /* or into a file at off */
    uint64_t written;                     /* bytes of this transfer taken so far (all attempts) */
    uint64_t total;                       /* for the progress line (0: unknown) */
    const char *label;
    bool too_big;
    CURL *curl;                           /* the transfer (its status decides whether a body is data) */
} Sink;

static size_t on_body(char *p, size_t sz, size_t nm, void *ud) {
    Sink *s = ud;
    size_t n = sz * nm;
    long status = 0;
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200 && status != 206) return n;       /* an error page or a redirect's body */
    if (s->written + n > s->max) { s->too_big = true; return 0; }   /* more than asked: a server ignoring Range */
    if (s->fd >= 0) {
        if (pwrite(s->fd, p, n, (off_t)(s->off + s->written)) != (ssize_t)n) return 0;
    } else {
        if (s->len + n + 1 > s->cap) {
            size_t nc = (s->len + n + 1) * 2;
            char *nb = realloc(s->buf, nc);
            if (!nb) return 0;
            s->buf = nb;
            s->cap = nc;
        }
        memcpy(s->buf + s->len, p, n);
        s->len += n;
        s->buf[s->len] = 0;
    }
    s->written += n;
    atomic_fetch_add(&fetched_total, n);
    return n;
}

/* Copies a header's value (trimmed, quotes and W/ removed) when its name matches. */
static void header_value(const char *line, size_t n, const char *name, char *dst, size_t cap) {
    size_t k = strlen(name);
    if (n <= k + 1 || strncasecmp(line, name, k) || line[k] != ':') return;
    const char *v = line + k + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    if (end - v >= 2 && v[0] == 'W' && v[1] == '/') v += 2;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '"')) end--;
    if (v < end && *v == '"') v++;
    size_t len = (size_t)(end - v) < cap - 1 ? (size_t)(end - v) : cap - 1;
    if (!*dst) { memcpy(dst, v, len); dst[len] = 0; }   /* the first response's value wins (the Hub's redirect) */
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ud) {
    HubHeaders *h = ud;
    size_t n = sz * nm;
    char num[32] = "";
    header_value(p, n, "X-Repo-Commit", h->commit, sizeof h->commit);
    header_value(p, n, "ETag", h->etag, sizeof h->etag);
    header_value(p, n, "X-Linked-Etag", h->linked_etag, sizeof h->linked_etag);
    header_value(p, n, "X-Linked-Size", num, sizeof num);
    if (*num && h->linked_size < 0) h->linked_size = atoll(num);
    *num = 0;
    header_value(p, n, "Content-Range", num, sizeof num);
    const char *slash = *num ? strchr(num, '/') : NULL;
    if (slash && slash[1] != '*') h->range_total = atoll(slash + 1);
    return n;
}

static int on_xfer(void *ud, curl_off_t dltot, curl_off_t dlnow, curl_off_t ultot, curl_off_t ulnow) {
    (void)dltot; (void)dlnow; (void)ultot; (void)ulnow;
    Sink *s = ud;
    if (al_interrupted()) return 1;
    if (s->label && s->total) al_progress(s->label, (size_t)s->written, (size_t)s->total);
    return 0;
}

/* One attempt: GET url from byte r0 (and to r1 inclusive when r1 >= 0). *status is the final
 * HTTP status; the curl code is returned. */
static CURLcode http_attempt(const HubEnv *env, const char *url, long long r0, long long r1, Sink *s, HubHeaders *h,
                             long *status) {
    CURL *c = curl_easy_init();
    if (!c) return CURLE_FAILED_INIT;
    struct curl_slist *hdr = NULL;
    char *auth = env->token && !strncmp(url, env->endpoint, strlen(env->endpoint))
                     ? al_asprintf("Authorization: Bearer %s", env->token) : NULL;
    if (auth) hdr = curl_slist_append(hdr, auth);       /* libcurl keeps it from other hosts on redirects */
    hdr = curl_slist_append(hdr, "User-Agent: attnlab (huggingface_hub conventions)");
    char range[64];
    if (r0 > 0 || r1 >= 0) {
        if (r1 >= 0) snprintf(range, sizeof range, "%lld-%lld", r0, r1);
        else snprintf(range, sizeof range, "%lld-", r0);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    s->curl = c;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);    /* a dead link: under 1 B/s for 30 s */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_xfer);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, s);
    CURLcode rc = curl_easy_perform(c);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(hdr);
    if (auth) { memset(auth, 0, strlen(auth)); free(auth); }
    curl_easy_cleanup(c);
    return rc;
}

/* The error for a final HTTP status (what names the repo or file). */
static int http_error(const HubEnv *env, long status, const char *what) {
    if (status == 401 || status == 403)
        return al_err("%s: HTTP %ld from %s: the repository is gated or private. %s", what, status, env->endpoint,
                      env->token ? "The token given (HF_TOKEN or the token file) has no access to it: accept its terms "
                                   "on the model page with that account"
                                 : "Give a token: set HF_TOKEN, or write it to $HF_HOME/token (huggingface-cli login)");
    if (status == 404) return al_err("%s: not found on %s (HTTP 404): check the repository name, revision and file", what, env->endpoint);
    return al_err("%s: HTTP %ld from %s", what, status, env->endpoint);
}

static bool retryable(CURLcode rc, long status) {
    if (rc == CURLE_ABORTED_BY_CALLBACK || rc == CURLE_WRITE_ERROR) return false;
    if (rc == CURLE_OK) return status == 429 || status >= 500;
    return rc != CURLE_URL_MALFORMAT && rc != CURLE_UNSUPPORTED_PROTOCOL && rc != CURLE_COULDNT_RESOLVE_HOST;
}

/* GET url [r0, r1] (r1 < 0: to the end) into s, retrying 429/5xx and cut transfers with
 * backoff and resuming after the bytes taken. */
static int http_get(const HubEnv *env, const char *url, long long r0, long long r1, Sink *s, HubHeaders *h,
                    const char *what) {
    long status = 0;
    CURLcode rc = CURLE_OK;
    h->linked_size = h->range_total = -1;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int attempt = 0; attempt < HUB_TRIES; attempt++) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (attempt && now.tv_sec - t0.tv_sec > HUB_DEADLINE_S) break;    /* a dead endpoint: give up */
        if (attempt) {
            long ms = 100L << (attempt < 4 ? attempt : 4);                              /* 0.2 s .. 1.6 s */
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        long long from = r0 + (long long)s->written;
        if (r1 >= 0 && from > r1) return AL_OK;
        rc = http_attempt(env, url, from, r1, s, h, &status);
        if (rc == CURLE_OK && (status == 200 || status == 206)) {
            if (status == 200 && from > 0) return al_err("%s: %s ignored a Range request", what, env->endpoint);
            return AL_OK;
        }
        if (rc == CURLE_ABORTED_BY_CALLBACK) return al_err("%s: interrupted; the ranges complete so far are kept", what);
        if (s->too_big) return al_err("%s: %s sent more than the %zu byte%s asked for", what, env->endpoint, (size_t)s->max, al_s((size_t)s->max));
        if (rc == CURLE_OK && !retryable(rc, status)) return http_error(env, status, what);
        if (!retryable(rc, status)) break;
    }
    if (rc == CURLE_OK) return http_error(env, status, what);
    return al_err("%s: %s: %s (after %d tries; set HF_HUB_OFFLINE=1 to use only the cache)", what, env->endpoint,
                  curl_easy_strerror(rc), HUB_TRIES);
}

/* ================================================================ the HF cache layout */

/* "org/name" -> "models--org--name" (caller frees). */
static char *repo_folder(const char *repo) {
    char *out = malloc(strlen(repo) * 2 + 10);
    if (!out) return NULL;
    char *o = out + sprintf(out, "models--");
    for (const char *p = repo; *p; p++) {
        if (*p == '/') { *o++ = '-'; *o++ = '-'; } else *o++ = *p;
    }
    *o = 0;
    return out;
}

/* Writes n bytes to path through a temporary file and rename(2) (two processes: one wins whole). */
static int write_atomic(const char *path, const void *buf, size_t n) {
    char *tmp = al_asprintf("%s.tmp.%d", path, (int)getpid());
    if (!tmp) return AL_ERR;
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(buf, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    int rc = ok ? AL_OK : al_err("%s: cannot write: %s", path, strerror(errno));
    if (!ok) unlink(tmp);
    free(tmp);
    return rc;
}

static bool is_sha256(const char *s) {
    if (strlen(s) != 64) return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return false;
    return true;
}

/* The context of one model: env, repo, commit, and its two folders. */
typedef struct {
    HubEnv env;
    const char *repo;
    char commit[96];
    char *hf_repo;      /* <hf_cache>/models--org--name */
    char *own_repo;     /* <own_cache>/hub/models--org--name */
    char *own_snap;     /* <own_repo>/snapshots/<commit> */
} HubCtx;

static char *resolve_url(const HubCtx *c, const char *file) {
    return al_asprintf("%s/%s/resolve/%s/%s", c->env.endpoint, c->repo, c->commit, file);
}

/* Fetches file whole into the HF cache (blobs/<etag>, sha256-checked when the etag is one;
 * snapshots/<commit>/<file> a relative link) unless the snapshot has it; links it from own_snap. */
static int fetch_whole(HubCtx *c, const char *file) {
    char *snap = al_asprintf("%s/snapshots/%s/%s", c->hf_repo, c->commit, file);
    char *own = al_asprintf("%s/%s", c->own_snap, file);
    int rc = snap && own ? AL_OK : AL_ERR;
    struct stat sb;
    if (rc == AL_OK && stat(snap, &sb) != 0) {
        char *url = resolve_url(c, file), *what = al_asprintf("%s: %s", c->repo, file);
        Sink s = {.fd = -1, .max = HUB_MAX_WHOLE, .label = what};
        HubHeaders h = {0};
        rc = url && what ? http_get(&c->env, url, 0, -1, &s, &h, what) : AL_ERR;
        const char *etag = *h.linked_etag ? h.linked_etag : h.etag;
        char hex[65] = "";
        if (rc == AL_OK && !*etag) rc = al_err("%s: the server sent no ETag", what);
        if (rc == AL_OK && (strchr(etag, '/') || etag[0] == '.')) rc = al_err("%s: the ETag is not a plain name", what);
        if (rc == AL_OK && is_sha256(etag)) hub_sha256_hex(s.buf ? s.buf : "", s.len, hex);
        if (rc == AL_OK && *hex && strcmp(hex, etag))
            rc = al_err("%s: the bytes received have sha256 %s, the Hub says %s: not stored", what, hex, etag);
        char *blob = rc == AL_OK ? al_asprintf("%s/blobs/%s", c->hf_repo, etag) : NULL;
        char *dir = blob ? al_asprintf("%s/snapshots/%s", c->hf_repo, c->commit) : NULL;
        char *bdir = dir ? al_asprintf("%s/blobs", c->hf_repo) : NULL;
        if (bdir && (al_mkdirs(bdir) != AL_OK || al_mkdirs(dir) != AL_OK)) rc = AL_ERR;
        if (rc == AL_OK && stat(blob, &sb) != 0) rc = write_atomic(blob, s.buf ? s.buf : "", s.len);
        char *rel = rc == AL_OK ? al_asprintf("../../blobs/%s", etag) : NULL;
        if (rel && symlink(rel, snap) != 0 && errno != EEXIST) rc = al_err("%s: cannot link: %s", snap, strerror(errno));
        free(rel); free(bdir); free(dir); free(blob); free(s.buf); free(url); free(what);
    }
    if (rc == AL_OK && lstat(own, &sb) != 0 && symlink(snap, own) != 0 && errno != EEXIST) rc = al_err("%s: cannot link: %s", own, strerror(errno));
    free(snap);
    free(own);
    return rc;
}

/* ================================================================ the revision listing */

/* Asks the API for rev's commit and files; the files go to *siblings (a cJSON array, caller frees). */
static int api_revision(HubCtx *c, const char *rev, cJSON **siblings) {
    *siblings = NULL;
    char *esc = curl_easy_escape(NULL, rev, 0);
    char *url = esc ? al_asprintf("%s/api/models/%s/revision/%s", c->env.endpoint, c->repo, esc) : NULL;
    char *what = al_asprintf("model '%s' (revision %s)", c->repo, rev);
    curl_free(esc);
    Sink s = {.fd = -1, .max = AL_CAP_INDEX};
    HubHeaders h = {0};
    int rc = url && what ? http_get(&c->env, url, 0, -1, &s, &h, what) : AL_ERR;
    cJSON *root = rc == AL_OK ? cJSON_Parse(s.buf ? s.buf : "") : NULL;
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(root, "sha");
    cJSON *sib = cJSON_DetachItemFromObjectCaseSensitive(root, "siblings");
    if (rc == AL_OK && (!cJSON_IsString(sha) || !cJSON_IsArray(sib) || strlen(sha->valuestring) >= sizeof c->commit ||
                        strchr(sha->valuestring, '/') || sha->valuestring[0] == '.'))
        rc = al_err("%s: the Hub's answer has no commit \"sha\" and \"siblings\" list", what);
    if (rc == AL_OK) { snprintf(c->commit, sizeof c->commit, "%s", sha->valuestring); *siblings = sib; sib = NULL; }
    cJSON_Delete(sib);
    cJSON_Delete(root);
    free(s.buf); free(url); free(what);
    return rc;
}

static bool listed(const cJSON *siblings, const char *file) {
    const cJSON *it;
    cJSON_ArrayForEach(it, siblings) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "rfilename");
        if (cJSON_IsString(f) && !strcmp(f->valuestring, file)) return true;
    }
    return false;
}

/* ================================================================ shards */

/* Records [b, e) of the shard file at path as held: one line appended to "<path>.ranges" (O_APPEND:
 * lines of two processes do not mix). */
static int ranges_append(const char *path, uint64_t b, uint64_t e) {
    char *rp = al_asprintf("%s.ranges", path);
    int rf = rp ? open(rp, O_WRONLY | O_APPEND | O_CREAT, 0644) : -1;
    char line[64];
    int ln = snprintf(line, sizeof line, "%llu %llu\n", (unsigned long long)b, (unsigned long long)e);
    int rc = rf >= 0 && write(rf, line, (size_t)ln) == ln ? AL_OK : al_err("%s: cannot write: %s", rp ? rp : path, strerror(errno));
    if (rf >= 0) close(rf);
    free(rp);
    return rc;
}

/* Fetches a shard's header into a sparse file of the shard's size (own_snap/<name>), records the
 * header's range as held, and appends the shard's line to the description *desc. */
static int fetch_shard_header(HubCtx *c, const char *name, char **desc) {
    char *url = resolve_url(c, name), *what = al_asprintf("%s: %s (header)", c->repo, name);
    char *path = al_asprintf("%s/%s", c->own_snap, name), *tmp = path ? al_asprintf("%s.tmp.%d", path, (int)getpid()) : NULL;
    if (!url || !what || !tmp) { free(url); free(what); free(path); free(tmp); return AL_ERR; }
    uint8_t len8[8] = {0};
    Sink s = {.fd = -1, .max = 8};
    HubHeaders h = {0};
    int rc = http_get(&c->env, url, 0, 7, &s, &h, what);
    if (rc == AL_OK && s.len == 8) memcpy(len8, s.buf, 8);
    uint64_t hl = 0, size = h.range_total > 0 ? (uint64_t)h.range_total : h.linked_size > 0 ? (uint64_t)h.linked_size : 0;
    for (int k = 7; k >= 0; k--) hl = hl << 8 | len8[k];
    free(s.buf);
    if (rc == AL_OK && (s.len != 8 || !size || hl > HUB_MAX_HEADER || 8 + hl > size))
        rc = al_err("%s: not a safetensors file (header length %llu, file size %llu)", what, (unsigned long long)hl,
                    (unsigned long long)size);
    int fd = rc == AL_OK ? open(tmp, O_CREAT | O_TRUNC | O_RDWR, 0644) : -1;
    if (rc == AL_OK && (fd < 0 || ftruncate(fd, (off_t)size) != 0)) rc = al_err("%s: cannot create: %s", tmp, strerror(errno));
    Sink body = {.fd = fd, .off = 8, .max = HUB_MAX_HEADER};
    if (rc == AL_OK && pwrite(fd, len8, 8, 0) != 8) rc = al_err("%s: cannot write: %s", tmp, strerror(errno));
    HubHeaders h2 = {0};
    if (rc == AL_OK) rc = http_get(&c->env, url, 8, 8 + (long long)hl - 1, &body, &h2, what);
    if (fd >= 0 && close(fd) != 0 && rc == AL_OK) rc = al_err("%s: cannot write: %s", tmp, strerror(errno));
    /* link(2), not rename: a shard file another process made (and may have mapped) stays */
    if (rc == AL_OK && link(tmp, path) != 0 && errno != EEXIST) rc = al_err("%s: cannot create: %s", path, strerror(errno));
    if (rc == AL_OK) rc = ranges_append(path, 0, 8 + hl);
    const char *etag = *h.linked_etag ? h.linked_etag : h.etag;
    char *line = rc == AL_OK ? al_asprintf("%sshard %s %llu %llu %s\n", *desc, name, (unsigned long long)size,
                                           (unsigned long long)(8 + hl), *etag ? etag : "-") : NULL;
    if (line) { free(*desc); *desc = line; }
    unlink(tmp);
    free(url); free(what); free(path); free(tmp);
    return rc;
}

/* The files fetched whole when listed (besides config.json). */
static const char *const WHOLE_FILES[] = {"model.safetensors.index.json", "generation_config.json", "tokenizer.json",
                                          "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json"};

/* The index fetched into own_snap, parsed (NULL: none, or not JSON -- store_open reports that). */
static cJSON *read_index(const HubCtx *c) {
    char *p = al_asprintf("%s/model.safetensors.index.json", c->own_snap);
    struct stat sb;
    char *text = p && stat(p, &sb) == 0 ? al_read_file_max(p, NULL, AL_CAP_INDEX, "index") : NULL;
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    free(p);
    return root;
}

/* Whether store_open will read shard n: those the index's weight_map names; without an index
 * model.safetensors when the repo has it, else every *.safetensors (Mistral's repos also hold a
 * consolidated.safetensors of the same weights: its header is not fetched). */
static bool shard_wanted(const cJSON *wm, bool single, const char *n) {
    if (!wm) return !single || !strcmp(n, "model.safetensors");
    const cJSON *it;
    cJSON_ArrayForEach(it, wm)
        if (cJSON_IsString(it) && !strcmp(it->valuestring, n)) return true;
    return false;
}

/* Builds own_snap for c->commit: whole files, every shard's header, then ".attnlab-remote". */
static int build_snapshot(HubCtx *c, const cJSON *siblings) {
    if (al_mkdirs(c->own_snap) != AL_OK) return AL_ERR;
    if (!listed(siblings, "config.json")) return al_err("model '%s' at %s has no config.json", c->repo, c->commit);
    int rc = fetch_whole(c, "config.json");
    for (size_t i = 0; rc == AL_OK && i < sizeof WHOLE_FILES / sizeof *WHOLE_FILES; i++)
        if (listed(siblings, WHOLE_FILES[i])) rc = fetch_whole(c, WHOLE_FILES[i]);
    char *desc = rc == AL_OK ? al_asprintf("endpoint %s\nrepo %s\ncommit %s\nhfrepo %s\n", c->env.endpoint, c->repo,
                                           c->commit, c->hf_repo) : NULL;
    if (rc == AL_OK && !desc) rc = AL_ERR;
    const cJSON *it;
    size_t nshards = 0;
    cJSON *index = rc == AL_OK ? read_index(c) : NULL;
    bool single = listed(siblings, "model.safetensors");
    cJSON_ArrayForEach(it, siblings) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(it, "rfilename");
        if (rc != AL_OK || !cJSON_IsString(f)) continue;
        const char *n = f->valuestring;
        size_t l = strlen(n);
        if (l < 12 || strcmp(n + l - 12, ".safetensors") || strchr(n, '/') || n[0] == '.') continue;
        if (!shard_wanted(cJSON_GetObjectItemCaseSensitive(index, "weight_map"), single, n)) continue;
        rc = fetch_shard_header(c, n, &desc);
        nshards++;
    }
    cJSON_Delete(index);
    if (rc == AL_OK && !nshards) rc = al_err("model '%s' at %s has no *.safetensors file", c->repo, c->commit);
    char *marker = rc == AL_OK ? al_asprintf("%s/.attnlab-remote", c->own_snap) : NULL;
    if (marker) rc = write_atomic(marker, desc, strlen(desc));
    free(marker);
    free(desc);
    return rc;
}

/* ================================================================ opening */

static bool plain_name(const char *s) {
    if (!*s || *s == '.' || strlen(s) > 90) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("._-", *s))) return false;
    return true;
}

/* The commit attnlab's cache recorded for rev (offline), into c->commit. */
static int offline_commit(HubCtx *c, const char *rev) {
    char *ref = plain_name(rev) ? al_asprintf("%s/refs/%s", c->own_repo, rev) : NULL;
    char *text = NULL;
    struct stat sb;
    if (ref && stat(ref, &sb) == 0) text = al_read_file_max(ref, NULL, AL_CAP_SMALL, "refs");
    free(ref);
    if (!text && strlen(rev) == 40 && strspn(rev, "0123456789abcdef") == 40) text = strdup(rev);   /* a commit itself */
    if (text) text[strcspn(text, "\r\n ")] = 0;
    int rc = text && plain_name(text) ? AL_OK
                                      : al_err("model '%s' (revision %s): HF_HUB_OFFLINE is set and neither the Hugging Face "
                                               "cache nor attnlab's cache (%s) holds it", c->repo, rev, c->own_repo);
    if (rc == AL_OK) snprintf(c->commit, sizeof c->commit, "%s", text);
    free(text);
    return rc;
}

/* After the API failed (error set): the commit attnlab's cache recorded for rev, when its snapshot
 * is complete there, with a warning naming the failure; else the API's error stays. Ctrl-C: none. */
static int cached_commit(HubCtx *c, const char *rev) {
    char why[512], *marker = NULL;
    snprintf(why, sizeof why, "%s", al_errmsg());
    struct stat sb;
    bool ok = !al_interrupted() && offline_commit(c, rev) == AL_OK &&
              (marker = al_asprintf("%s/snapshots/%s/.attnlab-remote", c->own_repo, c->commit)) && stat(marker, &sb) == 0;
    free(marker);
    if (!ok) return al_err("%s", why);
    al_warn("%s; using attnlab's cached snapshot %s", why, c->commit);
    return AL_OK;
}

static int open_ctx(HubCtx *c, const HubRequest *r, const char *rev) {
    char *hflat = repo_folder(r->repo);
    int rc = hflat ? AL_OK : AL_ERR;
    if (rc == AL_OK && (!plain_name(rev) && !(strlen(rev) < 90 && !strstr(rev, "..")))) rc = al_err("revision '%s' is not a name", rev);
    c->hf_repo = rc == AL_OK ? al_asprintf("%s/%s", r->hf_cache, hflat) : NULL;
    c->own_repo = c->hf_repo ? al_asprintf("%s/hub/%s", r->own_cache, hflat) : NULL;
    free(hflat);
    if (rc == AL_OK && !c->own_repo) rc = AL_ERR;
    if (rc != AL_OK) return rc;
    /* attnlab's refs/ first; build_snapshot makes own_snap before anything goes into the HF cache:
     * resolve takes a commit with it as streamed, so another process never opens an HF snapshot
     * that has a config.json but no shards */
    char *own_refs = al_asprintf("%s/refs", c->own_repo);
    if (!c->env.offline && (!own_refs || al_mkdirs(own_refs) != AL_OK)) rc = AL_ERR;
    free(own_refs);
    cJSON *siblings = NULL;
    if (rc == AL_OK) rc = c->env.offline ? offline_commit(c, rev) : api_revision(c, rev, &siblings);
    if (rc != AL_OK && !c->env.offline && c->own_repo) rc = cached_commit(c, rev);   /* the Hub does not answer */
    c->own_snap = rc == AL_OK ? al_asprintf("%s/snapshots/%s", c->own_repo, c->commit) : NULL;
    if (rc == AL_OK && !c->own_snap) rc = AL_ERR;
    char *marker = c->own_snap ? al_asprintf("%s/.attnlab-remote", c->own_snap) : NULL;
    struct stat sb;
    if (rc == AL_OK && marker && stat(marker, &sb) != 0) {
        if (c->env.offline) rc = al_err("model '%s': attnlab's cache %s is incomplete and HF_HUB_OFFLINE is set", c->repo, c->own_snap);
        else rc = build_snapshot(c, siblings);
    }
    free(marker);
    cJSON_Delete(siblings);
    if (rc == AL_OK && !c->env.offline && plain_name(rev) && strcmp(rev, c->commit)) {   /* refs/<rev>, both caches */
        char *refs[2] = {al_asprintf("%s/refs", c->own_repo), al_asprintf("%s/refs", c->hf_repo)};
        for (int k = 0; k < 2; k++) {
            char *f = refs[k] ? al_asprintf("%s/%s", refs[k], rev) : NULL;
            if (f && al_mkdirs(refs[k]) == AL_OK) (void)write_atomic(f, c->commit, strlen(c->commit));
            free(f);
            free(refs[k]);
        }
    }
    return rc;
}

int hub_open(const HubRequest *r, char **path_out) {
    *path_out = NULL;
    HubCtx c = {.repo = r->repo};
    env_load(&c.env);
    if (!c.env.endpoint) return al_err("out of memory");
    int rc = open_ctx(&c, r, r->revision && *r->revision ? r->revision : "main");
    if (rc == AL_OK) { *path_out = c.own_snap; c.own_snap = NULL; }
    free(c.hf_repo); free(c.own_repo); free(c.own_snap);
    env_free(&c.env);
    return rc;
}

bool hub_offline(void) { return env_true(getenv("HF_HUB_OFFLINE")); }

int hub_revision_commit(const char *repo, const char *rev, char *commit, size_t cap) {
    HubCtx c = {.repo = repo};
    env_load(&c.env);
    int rc = !c.env.endpoint ? al_err("out of memory") : c.env.offline ? al_err("HF_HUB_OFFLINE is set") : AL_OK;
    cJSON *siblings = NULL;
    if (rc == AL_OK) rc = api_revision(&c, rev, &siblings);
    cJSON_Delete(siblings);
    if (rc == AL_OK) snprintf(commit, cap, "%s", c.commit);
    env_free(&c.env);
    return rc;
}

/* ================================================================ the remote byte source */

typedef struct {
    char *name, *path, *etag;
    uint64_t size, data_off;
    uint64_t (*r)[2];        /* held ranges [begin, end), sorted, merged */
    size_t nr;
} HubShard;

struct HubRemote {
    pthread_mutex_t mu;          /* the shards' range lists */
    pthread_mutex_t fetch_mu;    /* one transfer at a time; a reader of held bytes never waits on it */
    HubEnv env;
    char *repo, *commit, *dir, *hf_repo;
    HubShard *shards;
    size_t n;
};

/* Adds [b, e) to the shard's held ranges, merging neighbours. */
static int ranges_add(HubShard *s, uint64_t b, uint64_t e) {
    uint64_t (*nr)[2] = realloc(s->r, (s->nr + 1) * sizeof *nr);
    if (!nr) return al_err("out of memory");
    s->r = nr;
    size_t i = 0;
    while (i < s->nr && s->r[i][0] < b) i++;
    memmove(s->r + i + 1, s->r + i, (s->nr - i) * sizeof *s->r);
    s->r[i][0] = b;
    s->r[i][1] = e;
    s->nr++;
    size_t k = 0;
    for (size_t j = 1; j < s->nr; j++) {
        if (s->r[j][0] <= s->r[k][1]) { if (s->r[j][1] > s->r[k][1]) s->r[k][1] = s->r[j][1]; }
        else { k++; s->r[k][0] = s->r[j][0]; s->r[k][1] = s->r[j][1]; }
    }
    s->nr = s->nr ? k + 1 : 0;
    return AL_OK;
}

/* Reads "<shard>.ranges" again (another process may have fetched more). */
static void ranges_load(HubShard *s) {
    char *rp = al_asprintf("%s.ranges", s->path);
    FILE *f = rp ? fopen(rp, "r") : NULL;
    free(rp);
    unsigned long long b, e;
    while (f && fscanf(f, "%llu %llu", &b, &e) == 2)
        if (b < e && e <= s->size) (void)ranges_add(s, b, e);
    if (f) fclose(f);
}

static uint64_t ranges_held(const HubShard *s) {
    uint64_t t = 0;
    for (size_t i = 0; i < s->nr; i++) t += s->r[i][1] - s->r[i][0];
    return t;
}

/* Parses one "shard NAME SIZE DATAOFF ETAG" line. */
static int remote_add_shard(HubRemote *h, const char *line) {
    char name[256], etag[160];
    unsigned long long size, off;
    if (sscanf(line, "shard %255s %llu %llu %159s", name, &size, &off, etag) != 4 || strchr(name, '/')) return AL_ERR;
    HubShard *ns = realloc(h->shards, (h->n + 1) * sizeof *ns);
    if (!ns) return AL_ERR;
    h->shards = ns;
    HubShard *s = &h->shards[h->n++];
    *s = (HubShard){.name = strdup(name), .etag = strdup(etag), .path = al_asprintf("%s/%s", h->dir, name),
                    .size = size, .data_off = off};
    if (s->path) ranges_load(s);
    return s->name && s->etag && s->path ? AL_OK : AL_ERR;
}

HubRemote *hub_remote_for_dir(const char *dir) {
    char *mp = al_asprintf("%s/.attnlab-remote", dir);
    struct stat sb;
    char *text = mp && stat(mp, &sb) == 0 ? al_read_file_max(mp, NULL, AL_CAP_SMALL, "attnlab remote") : NULL;
    free(mp);
    if (!text) { al_err_clear(); return NULL; }
    HubRemote *h = calloc(1, sizeof *h);
    bool ok = h != NULL;
    if (ok) { pthread_mutex_init(&h->mu, NULL); pthread_mutex_init(&h->fetch_mu, NULL); env_load(&h->env); h->dir = strdup(dir); }
    for (char *line = text, *next; ok && line && *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next) *next++ = 0;
        if (!strncmp(line, "repo ", 5)) h->repo = strdup(line + 5);
        else if (!strncmp(line, "commit ", 7)) h->commit = strdup(line + 7);
        else if (!strncmp(line, "hfrepo ", 7)) h->hf_repo = strdup(line + 7);
        else if (!strncmp(line, "shard ", 6)) ok = remote_add_shard(h, line) == AL_OK;
    }
    free(text);
    if (ok && (!h->repo || !h->commit || !h->n)) ok = false;
    if (!ok) { hub_remote_free(h); return NULL; }
    return h;
}

void hub_remote_free(HubRemote *h) {
    if (!h) return;
    for (size_t i = 0; i < h->n; i++) { free(h->shards[i].name); free(h->shards[i].path); free(h->shards[i].etag); free(h->shards[i].r); }
    free(h->shards); free(h->repo); free(h->commit); free(h->dir); free(h->hf_repo);
    env_free(&h->env);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->fetch_mu);
    free(h);
}

/* A shard held whole: its sha256 checked against the Hub's etag, then the file put into the HF
 * cache as blobs/<etag> (a hard link: no copy; a copy across file systems) with its snapshot
 * link, where transformers and huggingface-cli find it. A mismatch is an error; nothing moves. */
static int promote(HubRemote *h, HubShard *s) {
    if (!h->hf_repo || !is_sha256(s->etag)) return AL_OK;           /* no checksum to verify against */
    int fd = open(s->path, O_RDONLY);
    size_t n = (size_t)s->size;
    void *bytes = fd >= 0 && n ? mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;   /* no copy of a 5 GB shard */
    if (fd >= 0) close(fd);
    if (bytes == MAP_FAILED) return al_err("%s: cannot map: %s", s->path, strerror(errno));
    char hex[65];
    hub_sha256_hex(bytes, n, hex);
    char *blob = al_asprintf("%s/blobs/%s", h->hf_repo, s->etag), *bdir = al_asprintf("%s/blobs", h->hf_repo);
    char *sdir = al_asprintf("%s/snapshots/%s", h->hf_repo, h->commit), *snap = sdir ? al_asprintf("%s/%s", sdir, s->name) : NULL;
    char *rel = al_asprintf("../../blobs/%s", s->etag);
    int rc = blob && bdir && snap && rel ? AL_OK : AL_ERR;
    if (rc == AL_OK && strcmp(hex, s->etag))
        rc = al_err("%s: the bytes fetched have sha256 %s, the Hub says %s: the streamed copy is damaged (delete %s)",
                    s->name, hex, s->etag, h->dir);
    struct stat sb;
    if (rc == AL_OK && (al_mkdirs(bdir) != AL_OK || al_mkdirs(sdir) != AL_OK)) rc = AL_ERR;
    if (rc == AL_OK && stat(blob, &sb) != 0 && link(s->path, blob) != 0) rc = write_atomic(blob, bytes, n);
    if (rc == AL_OK && symlink(rel, snap) != 0 && errno != EEXIST) rc = al_err("%s: cannot link: %s", snap, strerror(errno));
    munmap(bytes, n);
    free(blob); free(bdir); free(sdir); free(snap); free(rel);
    return rc;
}

/* Fetches [b, e) of shard s into its sparse file and records it as held. */
static int fetch_range(HubRemote *h, HubShard *s, uint64_t b, uint64_t e, const char *what) {
    if (h->env.offline)
        return al_err("%s: %s's bytes %llu..%llu are not in attnlab's cache and HF_HUB_OFFLINE is set", what, s->name,
                      (unsigned long long)b, (unsigned long long)e);
    char *url = al_asprintf("%s/%s/resolve/%s/%s", h->env.endpoint, h->repo, h->commit, s->name);
    char *label = al_asprintf("fetching %s", what);       /* progress.c draws "fetching" lines in bytes */
    int fd = open(s->path, O_WRONLY);
    int rc = url && label ? AL_OK : AL_ERR;
    if (rc == AL_OK && fd < 0) rc = al_err("%s: cannot open: %s", s->path, strerror(errno));
    Sink sk = {.fd = fd, .off = b, .total = e - b, .label = label, .max = e - b};
    HubHeaders hd = {0};
    if (rc == AL_OK) rc = http_get(&h->env, url, (long long)b, (long long)e - 1, &sk, &hd, what);
    if (rc == AL_OK && sk.written != e - b) rc = al_err("%s: %s sent %llu byte%s of %llu", what, s->name,
                                                        (unsigned long long)sk.written, al_s((unsigned long long)sk.written), (unsigned long long)(e - b));
    if (rc == AL_OK && fdatasync(fd) != 0) rc = al_err("%s: cannot write: %s", s->path, strerror(errno));
    if (fd >= 0) close(fd);
    if (label) al_progress(label, (size_t)(e - b), (size_t)(e - b));      /* ends the line */
    if (rc == AL_OK) rc = ranges_append(s->path, b, e);
    pthread_mutex_lock(&h->mu);
    if (rc == AL_OK) rc = ranges_add(s, b, e);
    bool whole = rc == AL_OK && s->nr == 1 && s->r[0][0] == 0 && s->r[0][1] == s->size;
    pthread_mutex_unlock(&h->mu);
    if (whole) rc = promote(h, s);
    free(url); free(label);
    return rc;
}

/* The first part of [b, e) the shard does not hold, in [*gb, *ge); false when it holds all. */
static bool first_gap(const HubShard *s, uint64_t b, uint64_t e, uint64_t *gb, uint64_t *ge) {
    uint64_t at = b;
    for (size_t i = 0; i < s->nr && at < e; i++) {
        if (s->r[i][1] <= at) continue;
        if (s->r[i][0] > at) { *gb = at; *ge = s->r[i][0] < e ? s->r[i][0] : e; return true; }
        at = s->r[i][1];
    }
    *gb = at;
    *ge = e;
    return at < e;
}

int hub_remote_ensure(HubRemote *h, const char *shard, uint64_t begin, uint64_t end, const char *what) {
    const char *base = strrchr(shard, '/') ? strrchr(shard, '/') + 1 : shard;
    HubShard *s = NULL;
    for (size_t i = 0; i < h->n && !s; i++)
        if (!strcmp(h->shards[i].name, base)) s = &h->shards[i];
    if (!s) return AL_OK;                                /* not a streamed shard */
    begin += s->data_off;
    end += s->data_off;
    if (end > s->size) return al_err("%s: bytes beyond %s's end", what, s->name);
    uint64_t gb, ge;
    pthread_mutex_lock(&h->mu);
    bool gap = first_gap(s, begin, end, &gb, &ge);
    pthread_mutex_unlock(&h->mu);
    if (!gap) return AL_OK;
    pthread_mutex_lock(&h->fetch_mu);
    pthread_mutex_lock(&h->mu);
    ranges_load(s);                                   /* another process may have fetched it */
    gap = first_gap(s, begin, end, &gb, &ge);
    pthread_mutex_unlock(&h->mu);
    int rc = AL_OK;
    while (rc == AL_OK && gap) {
        rc = fetch_range(h, s, gb, ge, what);
        pthread_mutex_lock(&h->mu);
        gap = first_gap(s, begin, end, &gb, &ge);
        pthread_mutex_unlock(&h->mu);
    }
    pthread_mutex_unlock(&h->fetch_mu);
    return rc;
}

void hub_remote_local(HubRemote *h, uint64_t *local, uint64_t *total) {
    *local = *total = 0;
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < h->n; i++) { *local += ranges_held(&h->shards[i]); *total += h->shards[i].size; }
    pthread_mutex_unlock(&h->mu);
}
