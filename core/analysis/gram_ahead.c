/* gram_ahead.c -- a sweep's reads of the next layer's pair (gram_ahead.h): the page cache where the
 * pages are there, else O_DIRECT into the sweep's own two buffers, lent to the store while the layer
 * computes. Owns the process's direct-read policy and count. */
#define _GNU_SOURCE
#include "gram_ahead.h"
#include "gram.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Bytes per madvise or pread call of the reading thread: the reads stop within one step when asked. */
#define AHEAD_STEP ((size_t)8 << 20)
/* O_DIRECT's alignment of offsets, lengths and buffers (every logical block size up to a page). */
#define DIRECT_ALIGN ((size_t)4096)
#define SLOT_ROUND ((size_t)2 << 20)

static _Atomic int direct_policy = GRAM_DIRECT_AUTO;
static atomic_size_t direct_reads;

void gram_direct_set(gram_direct policy) { atomic_store(&direct_policy, (int)policy); }
gram_direct gram_direct_get(void) { return (gram_direct)atomic_load(&direct_policy); }
size_t gram_direct_reads(void) { return atomic_load(&direct_reads); }

/* ================================================================ the slots */

typedef struct {
    uint8_t *buf;            /* anonymous memory, 2 MB pages where the system gives them */
    size_t cap;
    bool busy;               /* claimed by a GramAhead (start to end, on the sweep's thread) */
} Slot;

struct GramSlots {
    Slot s[2];
    gram_direct policy;
    size_t most;             /* the largest pair read past the page cache: an eighth of the memory */
};

GramSlots *gram_slots_new(gram_direct policy) {
    GramSlots *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
    s->policy = policy;
    s->most = pages > 0 && pg > 0 ? (size_t)pages * (size_t)pg / 8 : (size_t)1 << 30;
    return s;
}

void gram_slots_free(GramSlots *s) {
    if (!s) return;
    for (int i = 0; i < 2; i++)
        if (s->s[i].buf) munmap(s->s[i].buf, s->s[i].cap);
    free(s);
}

/* Grows slot s to `need` bytes (its old bytes are not kept). */
static bool slot_reserve(Slot *s, size_t need) {
    if (need <= s->cap) return true;
    if (s->buf) munmap(s->buf, s->cap);
    s->buf = NULL;
    s->cap = 0;
    size_t cap = (need + SLOT_ROUND - 1) / SLOT_ROUND * SLOT_ROUND;
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    madvise(p, cap, MADV_HUGEPAGE);
    s->buf = p;
    s->cap = cap;
    return true;
}

/* ================================================================ one pair */

typedef struct {
    char *name;
    const uint8_t *map;      /* its bytes in the mapping (set by the thread), len of them */
    size_t len;
    const char *path;        /* the file a direct read takes them from, at off (NULL: not a mapped file) */
    size_t off;
    const uint8_t *scale;    /* its FP8 block scales in the mapping, scale_len bytes (NULL: none) */
    size_t scale_len;
    const uint8_t *copy;     /* its bytes in the slot, once read whole */
} AheadTensor;

struct GramAhead {
    pthread_t thread;
    bool joined;
    atomic_bool stop;
    const Store *store;
    AheadTensor t[2];
    int nt;
    Slot *slot;              /* where a direct read goes (NULL: the page cache only) */
    gram_direct policy;
    size_t most;
    bool direct;             /* the thread read every tensor into the slot */
    bool lent;
};

/* Where tensor t's bytes lie: the mapping, the file and its offset, its block scales. Asking the
 * store for its file fetches the bytes first on a model streamed from the Hub (store.h), so that
 * transfer too runs while the last layer computes. */
static bool tensor_span(const Store *st, AheadTensor *t) {
    const st_entry *e, *se;
    const st_file *f, *sf;
    if (store_entry(st, t->name, &e, &f) != AL_OK || e->end <= e->begin) return false;
    bool ok;
    t->map = st_data(f, e);
    t->len = e->end - e->begin;
    t->off = st_file_offset(f, e, &ok);
    t->path = ok ? st_path(f) : NULL;
    char sname[640];
    if ((size_t)snprintf(sname, sizeof sname, "%s_scale_inv", t->name) < sizeof sname && store_has(st, sname) &&
        store_entry(st, sname, &se, &sf) == AL_OK) {
        t->scale = st_data(sf, se);
        t->scale_len = se->end - se->begin;
    }
    return true;
}

/* Maps [p, p + len) into the page tables, reading what is not in the page cache, a step at a time
 * (MADV_POPULATE_READ; before Linux 5.14, MADV_WILLNEED: reads ahead, maps nothing). */
static void populate(GramAhead *g, const uint8_t *p, size_t len, int *advice) {
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)p - (uintptr_t)p % pg, hi = (uintptr_t)p + len;
    for (uintptr_t a = lo; a < hi && !atomic_load(&g->stop); a += AHEAD_STEP) {
        size_t n = hi - a < AHEAD_STEP ? hi - a : AHEAD_STEP;
        if (madvise((void *)a, n, *advice) != 0 && errno == EINVAL && *advice != MADV_WILLNEED) {
            *advice = MADV_WILLNEED;
            madvise((void *)a, n, *advice);
        }
    }
}

/* The fraction of the pair's pages in the page cache (mincore; 1 where it cannot tell). */
static double resident(const GramAhead *g) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), in = 0, all = 0;
    for (int i = 0; i < g->nt; i++) {
        uintptr_t lo = (uintptr_t)g->t[i].map - (uintptr_t)g->t[i].map % pg;
        size_t n = ((uintptr_t)g->t[i].map + g->t[i].len - lo + pg - 1) / pg;
        unsigned char *v = malloc(n);
        if (!v || mincore((void *)lo, n * pg, v) != 0) { free(v); return 1; }
        for (size_t k = 0; k < n; k++) in += v[k] & 1;
        all += n;
        free(v);
    }
    return all ? (double)in / (double)all : 1;
}

/* Reads [off, off + len) of path into dst with O_DIRECT, whole pages from the page below off:
 * dst + off % DIRECT_ALIGN holds the bytes. False on any failure or a stop. */
static bool read_direct(GramAhead *g, const char *path, size_t off, size_t len, uint8_t *dst) {
#ifndef O_DIRECT
    (void)g; (void)path; (void)off; (void)len; (void)dst;
    return false;                        /* no O_DIRECT here: the page cache */
#else
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) return false;
    size_t lo = off - off % DIRECT_ALIGN, hi = off + len, at = lo;
    while (at < hi && !atomic_load(&g->stop)) {
        size_t want = hi - at < AHEAD_STEP ? hi - at : AHEAD_STEP;
        want = (want + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
        ssize_t r = pread(fd, dst + (at - lo), want, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;               /* an error, or the end of the file before hi */
        at += (size_t)r;
        if ((size_t)r < want) break;     /* the file's end: enough only when it is at or past hi */
    }
    close(fd);
    return at >= hi && !atomic_load(&g->stop);
#endif
}

/* The pair into g's slot, each tensor from the page below it; false (nothing lent) on any failure. */
static bool pair_direct(GramAhead *g) {
    size_t need = 0, at[2];
    for (int i = 0; i < g->nt; i++) {
        if (!g->t[i].path) return false;
        at[i] = need;
        need += (g->t[i].off % DIRECT_ALIGN + g->t[i].len + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
    }
    if (need > g->most || !slot_reserve(g->slot, need)) return false;
    for (int i = 0; i < g->nt; i++) {
        uint8_t *dst = g->slot->buf + at[i];
        if (!read_direct(g, g->t[i].path, g->t[i].off, g->t[i].len, dst)) return false;
        g->t[i].copy = dst + g->t[i].off % DIRECT_ALIGN;
    }
    return true;
}

static void *ahead_thread(void *ud) {
    GramAhead *g = ud;
    int advice = MADV_POPULATE_READ;
    int n = 0;
    for (int i = 0; i < g->nt; i++)
        if (tensor_span(g->store, &g->t[i])) g->t[n++] = g->t[i];
        else free(g->t[i].name);
    g->nt = n;
    if (g->slot && n > 0 && g->policy != GRAM_DIRECT_NEVER && (g->policy == GRAM_DIRECT_ALWAYS || resident(g) < 0.5))
        g->direct = pair_direct(g);
    for (int i = 0; i < g->nt; i++) {
        if (!g->direct) populate(g, g->t[i].map, g->t[i].len, &advice);
        if (g->t[i].scale) populate(g, g->t[i].scale, g->t[i].scale_len, &advice);
    }
    return NULL;
}

/* ================================================================ start, wait, end */

GramAhead *gram_prefetch_start(const Model *m, int layer, head_kind a, head_kind b, GramSlots *slots) {
    const head_kind kinds[2] = {a, b};
    GramAhead *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    atomic_init(&g->stop, false);
    g->store = m->store;
    for (int f = 0; f < 2; f++) {
        GramView v;
        if (gram_view(m, kinds[f], layer, 0, PART_ALL, &v) != AL_OK &&
            gram_view(m, kinds[f], layer, 0, PART_NOPE, &v) != AL_OK)
            continue;
        /* one tensor holding both (GPT-2's c_attn: Q and K) is read once */
        if (store_has(m->store, v.tensor) && (g->nt == 0 || strcmp(g->t[0].name, v.tensor)))
            if ((g->t[g->nt].name = strdup(v.tensor))) g->nt++;
        gram_view_clear(&v);
    }
    for (int i = 0; slots && i < 2 && !g->slot; i++)
        if (!slots->s[i].busy) g->slot = &slots->s[i];
    if (g->slot) {
        g->slot->busy = true;
        g->policy = slots->policy;
        g->most = slots->most;
    }
    if (g->nt == 0 || pthread_create(&g->thread, NULL, ahead_thread, g) != 0) {
        g->joined = true;
        gram_prefetch_end(g, false);
        return NULL;
    }
    return g;
}

void gram_prefetch_wait(GramAhead *g) {
    if (!g || g->joined) return;
    pthread_join(g->thread, NULL);
    g->joined = true;
    if (!g->direct) return;
    for (int i = 0; i < g->nt; i++) store_lend(g->store, g->t[i].name, g->t[i].copy);
    g->lent = true;
    atomic_fetch_add(&direct_reads, (size_t)g->nt);
}

void gram_prefetch_end(GramAhead *g, bool stop) {
    if (!g) return;
    if (stop) atomic_store(&g->stop, true);
    if (!g->joined) pthread_join(g->thread, NULL);
    for (int i = 0; i < g->nt; i++) {
        if (g->lent) store_lend(g->store, g->t[i].name, NULL);
        free(g->t[i].name);
    }
    if (g->slot) g->slot->busy = false;
    free(g);
}
