/* al.c -- attnlab core: error messages, warnings, interrupts, progress, checked allocation. */
#define _GNU_SOURCE
#include "al.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

volatile sig_atomic_t al_interrupt_flag = 0;
atomic_int al_interrupt_deferred = 0;

void al_interrupt_defer(bool on) { atomic_fetch_add(&al_interrupt_deferred, on ? 1 : -1); }

/* ================================================================ errors */

static _Thread_local char err_buf[1024];

int al_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return AL_ERR;
}

int al_err_ctx(const char *fmt, ...) {
    char prefix[512], old[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err_buf, sizeof old);
    size_t pl = strnlen(prefix, sizeof prefix), cap = sizeof err_buf - 1, n = 0;
    for (size_t i = 0; i < pl && n < cap; i++) err_buf[n++] = prefix[i];
    for (const char *t = ": "; *t && n < cap; t++) err_buf[n++] = *t;
    for (size_t i = 0; old[i] && n < cap; i++) err_buf[n++] = old[i];
    err_buf[n] = 0;
    return AL_ERR;
}

const char *al_errmsg(void) { return err_buf[0] ? err_buf : "unknown error"; }
void al_err_clear(void) { err_buf[0] = 0; }

/* ================================================================ warnings */

#define WARN_MAX 64                  /* queued at most; the rest are counted, then said in one line */
static char *warn_q[WARN_MAX];
static unsigned warn_rep[WARN_MAX];  /* how many times each queued text came (identical ones queue once) */
static int warn_head, warn_len;
static unsigned long warn_dropped;   /* past WARN_MAX */
static pthread_mutex_t warn_mu = PTHREAD_MUTEX_INITIALIZER;

void al_warn(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&warn_mu);
    int i = 0;
    while (i < warn_len && strcmp(warn_q[(warn_head + i) % WARN_MAX] ? warn_q[(warn_head + i) % WARN_MAX] : "", buf)) i++;
    if (i < warn_len) {
        warn_rep[(warn_head + i) % WARN_MAX]++;
    } else if (warn_len < WARN_MAX) {
        warn_q[(warn_head + warn_len) % WARN_MAX] = strdup(buf);
        warn_rep[(warn_head + warn_len) % WARN_MAX] = 1;
        warn_len++;
    } else
        warn_dropped++;
    pthread_mutex_unlock(&warn_mu);
}

bool al_warn_pop(char *buf, size_t cap) {
    bool got = false;
    pthread_mutex_lock(&warn_mu);
    if (warn_len > 0) {
        char *w = warn_q[warn_head];
        unsigned rep = warn_rep[warn_head];
        warn_head = (warn_head + 1) % WARN_MAX;
        warn_len--;
        if (cap && rep > 1) snprintf(buf, cap, "%s (%u time%s)", w ? w : "", rep, al_s(rep));
        else if (cap) snprintf(buf, cap, "%s", w ? w : "");
        free(w);
        got = true;
    } else if (warn_dropped) {
        if (cap) snprintf(buf, cap, "%lu more warnings not shown (at most %d are kept)", warn_dropped, WARN_MAX);
        warn_dropped = 0;
        got = true;
    }
    pthread_mutex_unlock(&warn_mu);
    return got;
}

/* ================================================================ progress */

static al_progress_fn progress_fn;
static void *progress_ud;

void al_set_progress(al_progress_fn fn, void *ud) { progress_fn = fn; progress_ud = ud; }

void al_progress(const char *label, size_t done, size_t total) {
    if (progress_fn) progress_fn(label, done, total, progress_ud);
}

/* ================================================================ allocation */

bool al_mul_ok(size_t a, size_t b, size_t *out, const char *what) {
    if (a != 0 && b > SIZE_MAX / a) {
        al_err("size overflow computing %zu x %zu for %s", a, b, what ? what : "a buffer");
        return false;
    }
    *out = a * b;
    return true;
}

void *al_malloc(size_t n, const char *what) {
    void *p = malloc(n ? n : 1);
    if (!p) al_err("out of memory allocating %zu byte%s for %s", n, al_s(n), what ? what : "a buffer");
    return p;
}

void *al_calloc(size_t n, size_t size, const char *what) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) al_err("out of memory allocating %zu x %zu bytes for %s", n, size, what ? what : "a buffer");
    return p;
}

void *al_malloc3(size_t a, size_t b, size_t elt, const char *what) {
    size_t ab, n;
    if (!al_mul_ok(a, b, &ab, what) || !al_mul_ok(ab, elt, &n, what)) return NULL;
    return al_malloc(n, what);
}

char *al_strdup(const char *s) {
    char *p = strdup(s ? s : "");
    if (!p) al_err("out of memory copying a string");
    return p;
}

char *al_asprintf(const char *fmt, ...) {
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    if (!s) al_err("out of memory formatting a string");
    return s;
}

static _Thread_local int threads_here;   /* al_threads_here */

void al_threads_here(int n) { threads_here = n > 0 ? n : 0; }

int al_threads(void) {
    if (threads_here) return threads_here;
    const char *env = getenv("ATTNLAB_THREADS");
    if (env && atoi(env) > 0) return atoi(env);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ================================================================ files */

/* Opens path for reading without waiting on a FIFO (O_NONBLOCK, cleared once it is known what
 * the path is) and refuses what is not a regular file -- or, with streams, a pipe, socket or
 * terminal (/dev/stdin) -- before a byte is read: a symlink to /dev/zero never fills memory. */
static int open_to_read(const char *path, const char *kind, bool streams, struct stat *sb) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { al_err("%s: cannot open: %s", path, strerror(errno)); return -1; }
    bool ok = fstat(fd, sb) == 0;
    bool stream = ok && (S_ISFIFO(sb->st_mode) || S_ISSOCK(sb->st_mode) || (S_ISCHR(sb->st_mode) && isatty(fd)));
    int fl = ok ? fcntl(fd, F_GETFL) : -1;
    if (!ok || fl < 0) al_err("%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(sb->st_mode)) { ok = false; al_err("%s: is a folder, not a %s file", path, kind); }
    else if (!S_ISREG(sb->st_mode) && !(streams && stream)) {
        ok = false;
        al_err("%s: not a regular file (a %s): attnlab reads a %s file only from a regular file", path,
               S_ISFIFO(sb->st_mode) ? "FIFO" : S_ISCHR(sb->st_mode) ? "character device" : S_ISBLK(sb->st_mode) ? "block device"
               : S_ISSOCK(sb->st_mode) ? "socket" : "special file", kind);
    } else if (fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) { ok = false; al_err("%s: cannot read: %s", path, strerror(errno)); }
    if (!ok) { close(fd); return -1; }
    return fd;
}

/* Reads fd to the end into a NUL-terminated buffer, at most cap bytes; stops on Ctrl-C. */
static char *read_fd_capped(int fd, const char *path, size_t cap, const char *kind, size_t *len) {
    char *buf = NULL;
    size_t n = 0, room = 0;
    for (;;) {
        if (al_interrupted()) { al_err("%s: reading interrupted (Ctrl-C)", path); break; }
        if (n + 65536 + 1 > room) {
            room = room ? 2 * room : 1 << 17;
            char *nb = realloc(buf, room);
            if (!nb) { al_err("%s: out of memory reading it", path); break; }
            buf = nb;
        }
        ssize_t got = read(fd, buf + n, 65536);
        if (got < 0 && errno == EINTR) continue;                 /* Ctrl-C is checked at the top */
        if (got < 0) { al_err("%s: read error: %s", path, strerror(errno)); break; }
        if (got == 0) { buf[n] = 0; if (len) *len = n; return buf; }
        n += (size_t)got;
        if (n > cap) { al_err("%s: longer than %zu MiB, the most attnlab reads for a %s file; is it the right file?",
                              path, cap >> 20, kind); break; }
    }
    free(buf);
    return NULL;
}

char *al_read_file_max(const char *path, size_t *len, size_t cap, const char *kind) {
    struct stat sb;
    int fd = open_to_read(path, kind, false, &sb);
    if (fd < 0) return NULL;
    char *buf = NULL;
    if ((uint64_t)sb.st_size > cap)
        al_err("%s: %.1f MiB, larger than the %zu MiB attnlab reads for a %s file; is it the right file?", path,
               (double)sb.st_size / (1 << 20), cap >> 20, kind);
    else buf = read_fd_capped(fd, path, cap, kind, len);
    close(fd);
    return buf;
}

char *al_read_file(const char *path, size_t *len) {
    struct stat sb;
    int fd = open_to_read(path, "text", true, &sb);         /* pipes and /dev/stdin work too */
    if (fd < 0) return NULL;
    char *buf = NULL;
    if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > AL_CAP_TEXT)
        al_err("%s: %.1f MiB, larger than the %d MiB attnlab reads for a text file", path,
               (double)sb.st_size / (1 << 20), AL_CAP_TEXT >> 20);
    else buf = read_fd_capped(fd, path, AL_CAP_TEXT, "text", len);
    close(fd);
    return buf;
}

int al_check_regular(const char *path, const char *kind) {
    struct stat sb;
    int fd = open_to_read(path, kind, false, &sb);
    if (fd < 0) return AL_ERR;
    close(fd);
    return AL_OK;
}

const char *al_printable(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    if (!cap) return buf;
    for (size_t i = 0; s && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ctl = c < 0x20 || c == 0x7f;
        if (n + (ctl ? 4 : 1) >= cap) break;
        if (ctl) n += (size_t)snprintf(buf + n, cap - n, "\\x%02x", c);
        else buf[n++] = (char)c;
    }
    buf[n] = 0;
    return buf;
}

int al_mkdirs(const char *path) {
    char *p = al_strdup(path);
    if (!p) return AL_ERR;
    int rc = AL_OK;
    for (char *c = p + 1; rc == AL_OK; c++) {          /* each ancestor, then the folder itself */
        if (*c != '/' && *c != 0) continue;
        char saved = *c;
        *c = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) rc = al_err("cannot create folder %s: %s", p, strerror(errno));
        *c = saved;
        if (saved == 0) break;
    }
    struct stat sb;
    if (rc == AL_OK && (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        rc = al_err("%s exists and is not a folder", path);
    free(p);
    return rc;
}

/* Whether folder `existing` is the working directory or inside it (both resolved). */
static bool under_cwd(const char *existing) {
    char cwd[PATH_MAX], here[PATH_MAX], there[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd) || !realpath(cwd, here) || !realpath(existing, there)) return false;
    size_t n = strlen(here);
    return !strcmp(here, "/") || (!strncmp(there, here, n) && (there[n] == 0 || there[n] == '/'));
}

int al_mkdirs_here(const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) == 0) return S_ISDIR(sb.st_mode) ? AL_OK : al_err("%s exists and is not a folder", dir);
    char *missing = al_strdup(dir), *up = NULL;
    while (missing) {                                  /* climb to the topmost missing folder */
        char *q = al_strdup(missing);
        up = q ? al_strdup(dirname(q)) : NULL;
        free(q);
        if (!up || !strcmp(up, missing) || stat(up, &sb) == 0) break;
        free(missing);
        missing = up;
        up = NULL;
    }
    int rc = !missing || !up ? AL_ERR
           : under_cwd(up) ? al_mkdirs(dir)
           : al_err("folder %s does not exist: attnlab creates missing folders only inside the working directory; "
                    "create it first (mkdir -p %s) or give a path in a folder that exists", missing, dir);
    free(missing);
    free(up);
    return rc;
}

int al_parent_here(const char *path) {
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!slash) return AL_OK;
    if (slash == path) return AL_OK;                   /* "/file": the root exists */
    char *dir = strndup(path, (size_t)(slash - path));
    int rc = dir ? al_mkdirs_here(dir) : al_err("out of memory");
    free(dir);
    return rc;
}

int al_create_excl(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        al_err("%s: cannot create: %s%s", path, strerror(errno),
               errno == EEXIST || errno == ELOOP ? " (something is already there: attnlab never writes through it)" : "");
    return fd;
}

int al_temp_beside(const char *path, char *tmp, size_t cap) {
    if ((size_t)snprintf(tmp, cap, "%s.tmp.XXXXXX", path) >= cap) {
        al_err("%s: path too long", path);
        return -1;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) { al_err("%s: cannot create a temporary file beside it: %s", path, strerror(errno)); return -1; }
    if (fchmod(fd, 0644) != 0) { /* best effort: mkstemp makes 0600 */ }
    return fd;
}

bool al_write_all(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len) {
        ssize_t k = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (k < 0) { if (errno == EINTR) continue; return false; }
        p += k;
        len -= (size_t)k;
    }
    return true;
}

int al_temp_finish(int fd, const char *tmp, const char *path, bool ok) {
    if (ok && fsync(fd) != 0) ok = false;
    if (close(fd) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return al_err("%s: cannot rename into place: %s", path, strerror(e));
    }
    if (!ok) {
        int e = errno;
        unlink(tmp);
        return al_err("%s: write failed: %s", path, strerror(e));
    }
    return AL_OK;
}

int al_write_file_atomic(const char *path, const void *data, size_t len) {
    char tmp[4096];
    int fd = al_temp_beside(path, tmp, sizeof tmp);
    if (fd < 0) return AL_ERR;
    return al_temp_finish(fd, tmp, path, al_write_all(fd, data, len));
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

void al_remove_tree(const char *dir) {
    if (dir && *dir) nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int al_reserve(void *arr, size_t *cap, size_t need, size_t elt, const char *what) {
    if (need <= *cap) return AL_OK;
    size_t c = *cap ? *cap : 16, bytes;
    while (c < need) {
        if (c > SIZE_MAX / 2) return al_err("size overflow growing %s", what);
        c *= 2;
    }
    if (!al_mul_ok(c, elt, &bytes, what)) return AL_ERR;
    void *old;
    memcpy(&old, arr, sizeof old);
    void *p = realloc(old, bytes);
    if (!p) return al_err("out of memory growing %s", what);
    memcpy(arr, &p, sizeof p);
    *cap = c;
    return AL_OK;
}
