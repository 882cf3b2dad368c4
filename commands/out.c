/* out.c -- result values (tables, arrays, numbers, strings) and the one output layer: every byte
 * a command prints goes through out_write(); tables render as aligned text, CSV or JSON; the "did
 * you mean" suggester. */
#define _GNU_SOURCE
#include "out.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"
#include "safetensors.h"

/* ================================================================ a growable string */

typedef struct { char *p; size_t n, cap; bool bad; } Buf;

static void buf_add(Buf *b, const char *s, size_t n) {
    if (b->bad) return;
    if (al_reserve(&b->p, &b->cap, b->n + n + 1, 1, "a string")) { b->bad = true; return; }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void buf_puts(Buf *b, const char *s) { buf_add(b, s, strlen(s)); }
static void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(Buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) { b->bad = true; return; }
    if ((size_t)n < sizeof tmp) { buf_add(b, tmp, (size_t)n); return; }
    char *big = malloc((size_t)n + 1);
    if (!big) { b->bad = true; return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_add(b, big, (size_t)n);
    free(big);
}
/* Hands the buffer's string to the caller (NULL + error if an allocation failed). */
static char *buf_take(Buf *b, const char *what) {
    if (b->bad || !b->p) {
        free(b->p);
        if (!b->bad) return al_strdup("");
        al_err("out of memory rendering %s", what);
        return NULL;
    }
    return b->p;
}

/* ================================================================ tables */

Table *table_new_v(size_t ncols, const char *const *names) {
    Table *t = al_calloc(1, sizeof *t, "table");
    if (!t) return NULL;
    t->cols = al_calloc(ncols ? ncols : 1, sizeof *t->cols, "table columns");
    if (!t->cols) { free(t); return NULL; }
    t->ncols = ncols;
    for (size_t j = 0; j < ncols; j++) {
        t->cols[j] = al_strdup(names[j] ? names[j] : "");
        if (!t->cols[j]) { table_free(t); return NULL; }
    }
    return t;
}

Table *table_new(size_t ncols, ...) {
    const char *names[64];
    if (ncols > 64) { al_err("table_new: %zu column%s (at most 64; use table_new_v)", ncols, al_s(ncols)); return NULL; }
    va_list ap;
    va_start(ap, ncols);
    for (size_t j = 0; j < ncols; j++) names[j] = va_arg(ap, const char *);
    va_end(ap);
    return table_new_v(ncols, names);
}

void table_free(Table *t) {
    if (!t) return;
    for (size_t i = 0; i < t->nrows * t->ncols; i++) free(t->cells[i].str);
    for (size_t j = 0; j < t->ncols; j++) free(t->cols[j]);
    free(t->cols);
    free(t->cells);
    free(t);
}

int table_row(Table *t) {
    size_t row;             /* bytes of one row: ncols cells */
    if (!al_mul_ok(t->ncols ? t->ncols : 1, sizeof(Cell), &row, "table rows") ||
        al_reserve(&t->cells, &t->cap, t->nrows + 1, row, "a table")) return AL_ERR;
    memset(t->cells + t->nrows * t->ncols, 0, t->ncols * sizeof(Cell));
    t->nrows++;
    t->cur_col = 0;
    return AL_OK;
}

/* The next cell of the current row, or NULL (no row yet / row full). */
static Cell *next_cell(Table *t) {
    if (!t->nrows || t->cur_col >= t->ncols) return NULL;
    return &t->cells[(t->nrows - 1) * t->ncols + t->cur_col++];
}

void table_num(Table *t, double v) { Cell *c = next_cell(t); if (c) { c->kind = CELL_NUM; c->num = v; } }
void table_int(Table *t, long long v) { Cell *c = next_cell(t); if (c) { c->kind = CELL_INT; c->num = (double)v; } }
void table_count(Table *t, double v) {
    if (v == floor(v) && fabs(v) < 9e15) table_int(t, (long long)v); else table_num(t, v);
}
void table_bool(Table *t, bool b) { Cell *c = next_cell(t); if (c) { c->kind = CELL_BOOL; c->b = b; } }
void table_null(Table *t) { next_cell(t); }
void table_str(Table *t, const char *s) {
    Cell *c = next_cell(t);
    if (!c || !s) return;
    c->str = strdup(s);
    c->kind = c->str ? CELL_STR : CELL_NULL;
}

const Cell *table_cell(const Table *t, size_t row, size_t col) {
    if (row >= t->nrows || col >= t->ncols) return NULL;
    return &t->cells[row * t->ncols + col];
}

/* The column named name, or -1 when absent. */
static long table_col(const Table *t, const char *name) {
    for (size_t j = 0; j < t->ncols; j++)
        if (!strcmp(t->cols[j], name)) return (long)j;
    return -1;
}

/* ================================================================ rendering */

static const char *fmt_names[FMT_COUNT] = { "table", "csv", "json" };
const char *out_format_name(out_format f) { return (unsigned)f < FMT_COUNT ? fmt_names[f] : "?"; }
int out_format_parse(const char *s) {
    for (int i = 0; i < FMT_COUNT; i++) if (!strcmp(s, fmt_names[i])) return i;
    return -1;
}

/* A number as text: integers exactly, others with prec significant digits; non-finite values
 * as nan / inf / -inf (JSON callers map them to null). */
static void fmt_num(char *dst, size_t cap, double v, bool integer, int prec) {
    if (isnan(v)) snprintf(dst, cap, "nan");
    else if (isinf(v)) snprintf(dst, cap, v > 0 ? "inf" : "-inf");
    else if (integer || (v == floor(v) && fabs(v) < 1e15)) snprintf(dst, cap, "%.0f", v);
    else snprintf(dst, cap, "%.*g", prec > 0 ? prec : 6, v);
}

/* Cell text for the aligned and CSV forms. */
static void cell_text(const Cell *c, char *dst, size_t cap, int prec) {
    switch (c->kind) {
    case CELL_NULL: snprintf(dst, cap, "-"); break;
    case CELL_NUM: fmt_num(dst, cap, c->num, false, prec); break;
    case CELL_INT: fmt_num(dst, cap, c->num, true, prec); break;
    case CELL_BOOL: snprintf(dst, cap, "%s", c->b ? "true" : "false"); break;
    case CELL_STR: snprintf(dst, cap, "%s", c->str); break;
    }
}

static void json_str(Buf *b, const char *s) {
    buf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') { char e[2] = { '\\', (char)*p }; buf_add(b, e, 2); }
        else if (*p == '\n') buf_puts(b, "\\n");
        else if (*p == '\t') buf_puts(b, "\\t");
        else if (*p < 0x20) buf_printf(b, "\\u%04x", *p);
        else buf_add(b, (const char *)p, 1);
    }
    buf_puts(b, "\"");
}

static void csv_field(Buf *b, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) { buf_puts(b, s); return; }
    buf_puts(b, "\"");
    for (const char *p = s; *p; p++) {
        if (*p == '"') buf_puts(b, "\"\"");
        else buf_add(b, p, 1);
    }
    buf_puts(b, "\"");
}

/* Whether t's last row holds its totals (out.h: first cell "total" in a column that holds no other
 * string): CSV and JSON then write that cell empty / null and add a bool column "total" (true on
 * that row only), so each column keeps one type. Not when t already has a column "total". */
static bool has_total_row(const Table *t) {
    if (t->record || t->nrows < 1 || t->ncols < 2 || table_col(t, "total") >= 0) return false;
    const Cell *last = table_cell(t, t->nrows - 1, 0);
    if (last->kind != CELL_STR || strcmp(last->str, "total")) return false;
    for (size_t i = 0; i + 1 < t->nrows; i++)
        if (table_cell(t, i, 0)->kind == CELL_STR) return false;
    return true;
}

static void render_json(const Table *t, Buf *b, int prec) {
    char tmp[64];
    bool total = has_total_row(t);
    buf_puts(b, "[");
    for (size_t i = 0; i < t->nrows; i++) {
        buf_puts(b, i ? ",\n {" : "\n {");
        for (size_t j = 0; j < t->ncols; j++) {
            const Cell *c = table_cell(t, i, j);
            if (j) buf_puts(b, ", ");
            json_str(b, t->cols[j]);
            buf_puts(b, ": ");
            if (total && j == 0 && i + 1 == t->nrows) buf_puts(b, "null");
            else if (c->kind == CELL_STR) json_str(b, c->str);
            else if (c->kind == CELL_NULL || ((c->kind == CELL_NUM) && !isfinite(c->num))) buf_puts(b, "null");
            else if (c->kind == CELL_NUM) { snprintf(tmp, sizeof tmp, "%.*g", prec > 6 ? prec : 17, c->num); buf_puts(b, tmp); }
            else { cell_text(c, tmp, sizeof tmp, prec); buf_puts(b, tmp); }
        }
        if (total) buf_puts(b, i + 1 == t->nrows ? ", \"total\": true" : ", \"total\": false");
        buf_puts(b, "}");
    }
    buf_puts(b, t->nrows ? "\n]\n" : "]\n");
}

/* CSV; the context columns of o (NULL: none) that t does not have go after t's own. */
static void render_csv(const Table *t, Buf *b, int prec, const Out *o) {
    char tmp[1024];
    bool extra[OUT_CTX_MAX] = {0};
    size_t nctx = o && !t->record ? o->nctx : 0;
    for (size_t k = 0; k < nctx; k++) extra[k] = table_col(t, o->ctx[k].name) < 0;
    bool total = has_total_row(t);
    for (size_t j = 0; j < t->ncols; j++) { if (j) buf_puts(b, ","); csv_field(b, t->cols[j]); }
    if (total) buf_puts(b, ",total");
    for (size_t k = 0; k < nctx; k++) if (extra[k]) { buf_puts(b, ","); csv_field(b, o->ctx[k].name); }
    buf_puts(b, "\n");
    for (size_t i = 0; i < t->nrows; i++) {
        for (size_t j = 0; j < t->ncols; j++) {
            const Cell *c = table_cell(t, i, j);
            if (j) buf_puts(b, ",");
            if (c->kind == CELL_NULL || (total && j == 0 && i + 1 == t->nrows)) continue;
            if (c->kind == CELL_NUM && isfinite(c->num)) snprintf(tmp, sizeof tmp, "%.*g", prec > 6 ? prec : 9, c->num);
            else cell_text(c, tmp, sizeof tmp, prec);
            csv_field(b, c->kind == CELL_STR ? c->str : tmp);
        }
        if (total) buf_puts(b, i + 1 == t->nrows ? ",true" : ",false");
        for (size_t k = 0; k < nctx; k++) if (extra[k]) { buf_puts(b, ","); csv_field(b, o->ctx[k].value); }
        buf_puts(b, "\n");
    }
}

/* Aligned columns: a column holding any string is left-aligned, a numeric one right-aligned;
 * a rule under the header; no trailing blanks. */
static void render_aligned(const Table *t, Buf *b, int prec) {
    size_t nc = t->ncols ? t->ncols : 1;
    size_t *w = calloc(nc, sizeof *w);
    bool *left = calloc(nc, sizeof *left);
    char tmp[1024];
    if (!w || !left) { free(w); free(left); b->bad = true; return; }
    for (size_t j = 0; j < t->ncols; j++) w[j] = strlen(t->cols[j]);
    for (size_t i = 0; i < t->nrows; i++)
        for (size_t j = 0; j < t->ncols; j++) {
            const Cell *c = table_cell(t, i, j);
            size_t n = c->kind == CELL_STR ? strlen(c->str) : (cell_text(c, tmp, sizeof tmp, prec), strlen(tmp));
            if (n > w[j]) w[j] = n;
            if (c->kind == CELL_STR || c->kind == CELL_BOOL) left[j] = true;
        }
    Buf line = {0};
    for (int r = -2; r < (int)t->nrows; r++) {
        line.n = 0;
        for (size_t j = 0; j < t->ncols; j++) {
            const char *s;
            if (r == -2) s = t->cols[j];
            else if (r == -1) s = NULL;
            else {
                const Cell *c = table_cell(t, (size_t)r, j);
                s = c->kind == CELL_STR ? c->str : (cell_text(c, tmp, sizeof tmp, prec), tmp);
            }
            if (j) buf_puts(&line, "  ");
            if (!s) { for (size_t k = 0; k < w[j]; k++) buf_puts(&line, "-"); continue; }
            buf_printf(&line, left[j] || r == -2 ? "%-*s" : "%*s", (int)w[j], s);
        }
        while (line.n && line.p[line.n - 1] == ' ') line.n--;
        buf_add(b, line.p ? line.p : "", line.n);
        buf_puts(b, "\n");
    }
    if (line.bad) b->bad = true;
    free(line.p);
    free(w);
    free(left);
}

/* table_render with o's context columns in CSV. */
static char *render_with(const Table *t, out_format f, int prec, const Out *o) {
    Buf b = {0};
    if (f == FMT_JSON) render_json(t, &b, prec);
    else if (f == FMT_CSV) render_csv(t, &b, prec, o);
    else render_aligned(t, &b, prec);
    return buf_take(&b, "a table");
}

char *table_render(const Table *t, out_format f, int prec) { return render_with(t, f, prec, NULL); }

void out_context(Out *o, const char *name, const char *value) {
    size_t k = 0;
    while (k < o->nctx && strcmp(o->ctx[k].name, name)) k++;
    if (k == OUT_CTX_MAX) return;
    snprintf(o->ctx[k].name, sizeof o->ctx[k].name, "%s", name);
    snprintf(o->ctx[k].value, sizeof o->ctx[k].value, "%s", value);
    if (k == o->nctx) o->nctx++;
}

/* Format from a file name's extension, or -1. */
static int format_of_path(const char *path) {
    const char *dot = strrchr(path, '.');
    if (!dot || strchr(dot, '/')) return -1;
    if (!strcasecmp(dot, ".csv")) return FMT_CSV;
    if (!strcasecmp(dot, ".json")) return FMT_JSON;
    return -1;
}

int table_path_check(const Out *o, const char *path) {
    if (format_of_path(path) < 0) {
        const char *dot = strrchr(path, '.');
        if (dot && strchr(dot, '/')) dot = NULL;
        return al_err("cannot write a table to '%s': the extension %s%s%s is not .csv or .json "
                      "(name the file FILE.csv or FILE.json)", path, dot ? "'" : "", dot ? dot : "(none)", dot ? "'" : "");
    }
    return out_may_write(o, path);
}

int table_write_file(const Out *o, const Table *t, const char *path, int prec) {
    if (table_path_check(o, path) != AL_OK) return AL_ERR;
    int f = format_of_path(path);
    char *text = render_with(t, (out_format)f, prec, o);
    if (!text) return AL_ERR;
    int rc = out_write_file(o, path, text, strlen(text));
    free(text);
    return rc;
}

int out_may_write(const Out *o, const char *path) {
    if (!path || !*path) return al_err("no file name given: name the file to write");
    return o && o->may_write ? o->may_write(o->may_write_ud, path) : AL_OK;
}

int out_write_file(const Out *o, const char *path, const char *text, size_t len) {
    if (out_may_write(o, path) != AL_OK) return AL_ERR;
    if (al_parent_here(path) != AL_OK) return AL_ERR;    /* al.h's folder rule, as for figures and exports */
    return al_write_file_atomic(path, text, len);
}

/* ================================================================ Out */

void out_note_nan(Out *o, const char *row_fmt, ...) {
    char row[256];
    va_list ap;
    va_start(ap, row_fmt);
    vsnprintf(row, sizeof row, row_fmt, ap);
    va_end(ap);
    out_printf(o, "note: %s's errors are NaN: the weights compared hold NaN/Inf values (the warnings name the "
               "tensor), so there is no error to give\n", row);
}

void out_init(Out *o) {
    memset(o, 0, sizeof *o);
    o->fmt = FMT_TABLE;
    o->prec = 6;
}

void out_reset(Out *o) {
    table_free(o->table);
    free(o->arr);
    free(o->str);
    o->table = NULL; o->arr = NULL; o->str = NULL;
    o->arr_int = false;
    o->narr = 0; o->num = 0;
    o->kind = RES_NONE;
    o->written = false;
}

void out_free(Out *o) { out_reset(o); }

bool out_narrates(const Out *o) { return !o || o->quiet == OUT_LOUD; }

void out_write(Out *o, out_stream st, const char *s, size_t n) {
    if (o && o->quiet == OUT_SILENT && st == OUT_STDOUT) return;
    if (o && o->sink) { o->sink(o->sink_ud, st, s, n); return; }
    if (st == OUT_STDERR) {          /* keep stdout and stderr in order when both go to one place */
        fflush(stdout);
        fwrite(s, 1, n, stderr);
        fflush(stderr);
    } else
        fwrite(s, 1, n, stdout);
}

/* out_printf / out_eprintf with a va_list, to stream st (stdout narration: see out_write). */
static void out_vprintf(Out *o, out_stream st, const char *fmt, va_list ap) {
    char tmp[1024];
    if (o && o->quiet == OUT_SILENT && st == OUT_STDOUT) return;
    if (o && st == OUT_STDOUT && o->fmt != FMT_TABLE) st = OUT_STDERR;   /* csv / json: stdout is the results' */
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0) { va_end(ap2); return; }
    if ((size_t)n < sizeof tmp) out_write(o, st, tmp, (size_t)n);
    else {
        char *big = malloc((size_t)n + 1);
        if (big) { vsnprintf(big, (size_t)n + 1, fmt, ap2); out_write(o, st, big, (size_t)n); free(big); }
    }
    va_end(ap2);
}

void out_printf(Out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    out_vprintf(o, OUT_STDOUT, fmt, ap);
    va_end(ap);
}

void out_eprintf(Out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    out_vprintf(o, OUT_STDERR, fmt, ap);
    va_end(ap);
}

void out_table(Out *o, Table *t) {
    out_reset(o);
    if (!t) return;
    o->kind = RES_TABLE;
    o->table = t;
}

int out_array(Out *o, const double *v, size_t n) {
    out_reset(o);
    double *c = al_malloc3(n ? n : 1, 1, sizeof(double), "result array");
    if (!c) return AL_ERR;
    if (n) memcpy(c, v, n * sizeof(double));
    o->kind = RES_ARRAY;
    o->arr = c;
    o->narr = n;
    return AL_OK;
}

int out_array_int(Out *o, const double *v, size_t n) {
    if (out_array(o, v, n) != AL_OK) return AL_ERR;
    o->arr_int = true;
    return AL_OK;
}

void out_number(Out *o, double v) { out_reset(o); o->kind = RES_NUMBER; o->num = v; }

void out_string(Out *o, const char *s) {
    out_reset(o);
    o->str = al_strdup(s ? s : "");
    o->kind = o->str ? RES_STRING : RES_NONE;
}

int out_table_to(Out *o, const char *to, Table *t) {
    if (!t) return AL_ERR;
    out_table(o, t);
    if (!to) return AL_OK;
    if (table_write_file(o, t, to, o->prec) != AL_OK) return AL_ERR;
    o->written = true;
    out_printf(o, "wrote %zu row%s to %s\n", t->nrows, al_s(t->nrows), to);
    return AL_OK;
}

void out_emit_result(Out *o) {
    char tmp[64];
    if (o->written) return;
    switch (o->kind) {
    case RES_NONE: return;
    case RES_TABLE: {
        char *s = render_with(o->table, o->fmt, o->prec, o);
        if (s) { out_write(o, OUT_STDOUT, s, strlen(s)); free(s); }
        return;
    }
    case RES_ARRAY: {
        Buf b = {0};
        if (o->fmt == FMT_JSON) buf_puts(&b, "[");
        for (size_t i = 0; i < o->narr; i++) {
            fmt_num(tmp, sizeof tmp, o->arr[i], false, o->fmt == FMT_TABLE ? o->prec : 9);
            if (o->fmt == FMT_JSON) buf_printf(&b, "%s%s", i ? ", " : "", isfinite(o->arr[i]) ? tmp : "null");
            else buf_printf(&b, "%s\n", tmp);
        }
        if (o->fmt == FMT_JSON) buf_puts(&b, "]\n");
        if (!b.bad && b.p) out_write(o, OUT_STDOUT, b.p, b.n);
        free(b.p);
        return;
    }
    case RES_NUMBER:
        fmt_num(tmp, sizeof tmp, o->num, false, o->prec);
        if (o->fmt == FMT_JSON && !isfinite(o->num)) snprintf(tmp, sizeof tmp, "null");
        out_write(o, OUT_STDOUT, tmp, strlen(tmp));
        out_write(o, OUT_STDOUT, "\n", 1);
        return;
    case RES_STRING:
        out_write(o, OUT_STDOUT, o->str, strlen(o->str));
        out_write(o, OUT_STDOUT, "\n", 1);
        return;
    }
}

/* ================================================================ "did you mean" */

/* Optimal string alignment: insertions, deletions, substitutions and swaps of two neighbours
 * ("cvs" -> "csv") cost 1 each. */
size_t out_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return la > lb ? la : lb;
    size_t pp[64] = {0}, prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < cur[j])
                cur[j] = pp[j - 2] + 1;
        }
        memcpy(pp, prev, (lb + 1) * sizeof *pp);
        memcpy(prev, cur, (lb + 1) * sizeof *prev);
    }
    return prev[lb];
}

void out_suggest_try(OutSuggest *sg, const char *typed, const char *cand) {
    if (!typed || !cand || !*cand || !strcmp(typed, cand)) return;
    size_t lt = strlen(typed), d = out_edit_distance(typed, cand);
    size_t lim = lt <= 3 ? 1 : 2;
    if (d > lim && !strcasecmp(typed, cand)) d = 1;      /* only the case differs */
    if (lt >= 2 && !strncmp(cand, typed, lt)) d = 1;     /* a prefix of the candidate */
    if (d <= lim && (!sg->best || d < sg->d)) { sg->best = cand; sg->d = d; }
}

const char *out_suggest_text(const OutSuggest *sg, char *buf, size_t cap) {
    if (!sg->best) return "";
    snprintf(buf, cap, " (did you mean '%s'?)", sg->best);
    return buf;
}
