/* al.h -- attnlab core: status codes, the error message, interrupts, checked allocation.
 *
 * Every core/ function that can fail returns an al_status and leaves a one-line message
 * (al_errmsg) that names the file, tensor or argument and says what to do. core/ never
 * prints and never exits. Messages are thread-local, so worker threads can fail on their own.
 * Warnings (e.g. NaN weights) are queued; the front end drains and shows them. */
#ifndef AL_H
#define AL_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

typedef enum {
    AL_OK = 0,
    AL_ERR = 1,
    AL_EXIT = 2,        /* the session asked to quit (front ends only) */
    AL_INTERRUPTED = 3  /* Ctrl-C stopped a long loop; partial results are kept */
} al_status;

/* ---------------------------------------------------------------- errors */

/* Sets the thread's error message (printf format) and returns AL_ERR. */
int al_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prefixes the current message with "prefix: " (for adding context on the way up); returns AL_ERR. */
int al_err_ctx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *al_errmsg(void);
void al_err_clear(void);

/* ---------------------------------------------------------------- warnings */

/* Queues a warning (process-wide, thread-safe). A text already queued is counted, not queued
 * again; past 64 queued texts the rest are only counted. */
void al_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Pops the oldest queued warning into buf (" (N times)" added when it came N > 1 times), then
 * one "N more warnings not shown" line when some were past the limit; false when none is left. */
bool al_warn_pop(char *buf, size_t cap);

/* ---------------------------------------------------------------- interrupts */

/* Set by the front end's SIGINT handler; long loops poll al_interrupted() between
 * heads or layers and return AL_INTERRUPTED. The front end clears it before each command.
 * A unit of work that must run whole (one calibration sequence: every layer's statistics must see
 * it or none) is wrapped in al_interrupt_defer(true) / (false): meanwhile every poll answers
 * false, and the caller asks al_interrupt_pending() between units. */
extern volatile sig_atomic_t al_interrupt_flag;
extern atomic_int al_interrupt_deferred;
static inline bool al_interrupted(void) {
    return al_interrupt_flag != 0 && atomic_load_explicit(&al_interrupt_deferred, memory_order_relaxed) == 0;
}
static inline bool al_interrupt_pending(void) { return al_interrupt_flag != 0; }
void al_interrupt_defer(bool on);

/* ---------------------------------------------------------------- progress */

/* Long loops report progress through this hook (done of total units, with a label such as
 * "layer"); NULL means silent. The front end installs a terminal progress line. */
typedef void (*al_progress_fn)(const char *label, size_t done, size_t total, void *ud);
void al_set_progress(al_progress_fn fn, void *ud);
void al_progress(const char *label, size_t done, size_t total);

/* ---------------------------------------------------------------- allocation */

/* a*b with overflow check: returns false (and sets an error naming what) on overflow. */
bool al_mul_ok(size_t a, size_t b, size_t *out, const char *what);
/* malloc/calloc that set an error naming `what` on failure (returns NULL). */
void *al_malloc(size_t n, const char *what);
void *al_calloc(size_t n, size_t size, const char *what);
/* malloc(a*b*elt) with overflow checks. */
void *al_malloc3(size_t a, size_t b, size_t elt, const char *what);
char *al_strdup(const char *s);
/* Formatted allocation (caller frees). */
char *al_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Files read whole are capped per kind (the message states the cap): */
#define AL_CAP_CONFIG (16 << 20)       /* config.json, generation_config.json */
#define AL_CAP_MANIFEST (16 << 20)     /* attnlab's export manifests */
#define AL_CAP_INDEX (64 << 20)        /* model.safetensors.index.json */
#define AL_CAP_TOKENIZER (256 << 20)   /* tokenizer.json, llama2.c tokenizer.bin */
#define AL_CAP_SMALL (1 << 20)         /* the alias file, the HF cache's refs/main */
#define AL_CAP_TEXT (1024 << 20)       /* text and token-id files the user names */

/* A whole regular file of at most cap bytes as a NUL-terminated buffer (caller frees); len may be
 * NULL. kind ("config", "tokenizer") names it in messages. A FIFO, device or folder is refused
 * before reading (a symlink is followed to what it names), a longer file is refused with the cap
 * in the message, and Ctrl-C (al_interrupted) stops a long read. Errors name the file. */
char *al_read_file_max(const char *path, size_t *len, size_t cap, const char *kind);
/* The same for text the user names (corpora, id lists): at most AL_CAP_TEXT, and a pipe or
 * terminal is read too (/dev/stdin). */
char *al_read_file(const char *path, size_t *len);
/* AL_OK when path (symlinks followed) is a regular file; else an error naming it and saying what
 * it is. For files that are mapped rather than read (calibration files). */
int al_check_regular(const char *path, const char *kind);
/* s for a message: control characters become \xNN (a newline or escape code never reaches the
 * terminal), cut to fit cap bytes; returns buf. */
const char *al_printable(const char *s, char *buf, size_t cap);

/* The plural ending of a counted noun: "s", or "" for one -- "%d layer%s", n, al_s(n) prints "1 layer", "4 layers".
 * Every message that counts goes through it. */
static inline const char *al_s(long long n) { return n == 1 ? "" : "s"; }

/* mkdir -p: creates path and its missing parents; an error names the folder that failed. */
int al_mkdirs(const char *path);
/* The folder rule of every command that writes (tables, figures, exports, checkpoints): creates
 * folder dir and its missing ancestors when the nearest one that exists is the working directory
 * or inside it (`to out/r.csv` makes out/); a folder elsewhere (an absolute path, or one reaching
 * out with ..) must exist, and the error names the first missing folder and says to create it. */
int al_mkdirs_here(const char *dir);
/* The same rule for the folder that holds file path (nothing to do when path has no folder). */
int al_parent_here(const char *path);

/* Creates path for writing with O_CREAT | O_EXCL | O_NOFOLLOW (mode 0644): an existing file or a
 * planted symlink is refused, never followed or truncated. Returns the fd, or -1 with an error. */
int al_create_excl(const char *path);
/* Creates an unpredictable temporary sibling "<path>.tmp.XXXXXX" (mkstemp, so O_EXCL: a planted
 * symlink is never followed); its name goes to tmp (cap bytes). Returns the fd or -1 (error set). */
int al_temp_beside(const char *path, char *tmp, size_t cap);
/* Writes all of buf to fd (retrying short writes and EINTR); false on error (errno kept). */
bool al_write_all(int fd, const void *buf, size_t len);
/* Closes fd (a temporary sibling of path, al_temp_beside) and, when ok and synced, renames tmp to
 * path; otherwise removes tmp. The error names path and what failed. */
int al_temp_finish(int fd, const char *tmp, const char *path, bool ok);
/* Writes a whole file atomically (a temporary sibling, fsync, rename): every table and figure
 * file attnlab writes goes through it. */
int al_write_file_atomic(const char *path, const void *data, size_t len);
/* Removes a folder and everything in it (symlinks removed, never followed). Quiet: best effort. */
void al_remove_tree(const char *dir);

/* Number of worker threads for head sweeps (defaults to the online CPU count; ATTNLAB_THREADS
 * overrides; on a thread that set al_threads_here, its own count). */
int al_threads(void);
/* This thread's own al_threads (0: none): a lane running work beside others (tmla_lanes.h). */
void al_threads_here(int n);

/* Room for `need` elements in a growing array: when *cap < need, *arr (the address of a T *
 * pointer) is reallocated to double the capacity (16 at first) until it holds need elements of elt
 * bytes. The array is untouched on failure; the error names what. */
int al_reserve(void *arr, size_t *cap, size_t need, size_t elt, const char *what);

#endif
