/* out.h -- what a command produces: human text and one result value, and the single output
 * layer that prints them.
 *
 * A handler writes narration with out_printf() and, when it computes something, sets ONE result
 * value: a Table (named columns, rows of number/int/string/bool cells), an array of numbers, a
 * number or a string. The front door decides what to do with the value: the REPL and `-e` print
 * it in the session's format (aligned table, CSV or JSON); the Lua module `attn` returns it as a
 * Lua value (a table result becomes an array of row tables keyed by column name; an array
 * becomes a Lua array of numbers). Two table shapes are told apart for Lua: a Table with
 * .record set (field, value rows) becomes ONE table keyed by field; a last row whose first cell
 * is the string "total" holds the table's totals: Lua gets the other rows and, as a second
 * value, the totals keyed by column (without that first cell); CSV and JSON write that cell empty /
 * null and add a bool column "total" (true on that row alone), so every column keeps one type.
 *
 * Tables and `to FILE`: any command producing a table takes the keyword `to FILE.csv|FILE.json`
 * (put PARAM_TO in its keyword list, see registry.h) and ends with
 *     return out_table_to(out, args_str(a, "to"), t);
 * which writes the file atomically when `to` was given (and says so), else keeps the table as
 * the result to print. Either way Lua still gets the value.
 *
 * All bytes go through out_write() -> Out.sink, so tests capture everything by installing a sink.
 * Narration (out_printf) goes to stdout in format table, and to stderr in csv and json, where
 * stdout carries the results alone (out_emit_result, and raw data written with out_write: token
 * ids, generated text, a table a handler renders itself) -- `attnlab -e ... | pandas` reads it.
 *
 * Example:
 *     Table *t = table_new(3, "layer", "head", "rank_vo");     // 3 columns
 *     for (...) { table_row(t); table_int(t, L); table_int(t, h); table_int(t, r); }
 *     return out_table_to(out, args_str(a, "to"), t);            // takes ownership of t
 */
#ifndef AL_OUT_H
#define AL_OUT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>


/* ================================================================ tables */

typedef enum { CELL_NULL, CELL_NUM, CELL_INT, CELL_STR, CELL_BOOL } cell_kind;

typedef struct {
    cell_kind kind;
    double num;            /* CELL_NUM, CELL_INT (an integer value held exactly in a double) */
    char *str;             /* CELL_STR, owned */
    bool b;                /* CELL_BOOL */
} Cell;

typedef struct Table {
    size_t ncols;
    char **cols;           /* (ncols) column names, owned; also the Lua row keys */
    size_t nrows, cap;
    Cell *cells;           /* (nrows, ncols) row-major, owned */
    size_t cur_col;        /* next column table_int()/... fills in the current row */
    bool record;           /* one record, a (field, value) row per field (`info`): Lua gets one
                              table keyed by the first column instead of rows */
} Table;

/* A table with ncols columns named by the variadic const char * arguments. NULL + error on
 * failure. Caller owns (or hands it to out_table / out_table_to). */
Table *table_new(size_t ncols, ...);
/* Same with the names in an array. */
Table *table_new_v(size_t ncols, const char *const *names);
void table_free(Table *t);
/* Starts a new row (all cells CELL_NULL); the appenders below fill it left to right. Returns
 * AL_OK or AL_ERR (allocation). Appending past the last column is ignored. */
int table_row(Table *t);
void table_num(Table *t, double v);
void table_int(Table *t, long long v);
/* A count, or a mean of counts (KV values per token over layers): an integer cell when it is whole,
 * so Lua gets an integer (math.type "integer") as for table_int; else a number. */
void table_count(Table *t, double v);
void table_str(Table *t, const char *s);      /* copied; NULL gives a null cell */
void table_bool(Table *t, bool b);
void table_null(Table *t);
/* Cell (row, col). */
const Cell *table_cell(const Table *t, size_t row, size_t col);

/* ================================================================ output formats */

typedef enum { FMT_TABLE, FMT_CSV, FMT_JSON, FMT_COUNT } out_format;
const char *out_format_name(out_format f);
/* Parses "table" | "csv" | "json"; -1 when unknown. */
int out_format_parse(const char *s);

/* Renders a table as text in a format (caller frees). `prec` is the significant digits of
 * CELL_NUM values (0: default 6). JSON is an array of objects keyed by column name. */
char *table_render(const Table *t, out_format f, int prec);
struct Out;
/* Writes a table to path, format from the extension (.csv or .json; anything else is an error
 * naming the extension), through out_write_file (o's write guard, folder made, atomic); CSV gets
 * o's context columns (Out.ctx). */
int table_write_file(const struct Out *o, const Table *t, const char *path, int prec);
/* Whether a table may go to path: a .csv or .json name the write guard allows (AL_ERR saying what to name it).
 * cmd_dispatch asks it of a table's `to FILE` before the command runs. */
int table_path_check(const struct Out *o, const char *path);

/* ================================================================ Out */

typedef enum { OUT_STDOUT, OUT_STDERR } out_stream;
/* Receives every byte a command prints. */
typedef void (*out_sink_fn)(void *ud, out_stream st, const char *s, size_t n);

typedef enum { RES_NONE, RES_TABLE, RES_ARRAY, RES_NUMBER, RES_STRING } res_kind;

/* How much a command says (Out.quiet), set by the front end -- the one way to silence narration:
 *   OUT_LOUD    everything (the prompt, `-e`, command files);
 *   OUT_QUIET   the values go to a program (commands called from Lua and notebooks): handlers
 *               skip narration -- summary lines, tables printed beside a value result -- and
 *               still say which files they wrote (test with out_narrates());
 *   OUT_SILENT  nothing on stdout at all (attn.quiet(true)); warnings and errors still print. */
typedef enum { OUT_LOUD = 0, OUT_QUIET, OUT_SILENT } out_quiet;

/* A setting or parameter in force for the command (name, value as typed). */
#define OUT_CTX_MAX 16
typedef struct { char name[32]; char value[128]; } OutCtx;

typedef struct Out {
    out_sink_fn sink;      /* NULL: stdout / stderr */
    void *sink_ud;
    out_format fmt;        /* how results print at the prompt (session `set format`) */
    int prec;              /* significant digits for numbers (session `set precision`) */

    res_kind kind;         /* the result value, owned: */
    Table *table;          /*   RES_TABLE */
    double *arr;           /*   RES_ARRAY (narr) */
    size_t narr;
    bool arr_int;          /*   ... of whole numbers (token ids): Lua gets integers (out_array_int) */
    double num;            /*   RES_NUMBER */
    char *str;             /*   RES_STRING */
    bool written;          /* the result went to a file (`to FILE`): do not print it again */
    out_quiet quiet;       /* OUT_LOUD unless the front end silences narration (above) */
    /* The check every file a command writes (not exports) goes through: AL_OK or an error.
       cmd_dispatch installs write_guard_check (commands/write_guard.h: never into a loaded
       model's folder) with the Session as ud; NULL: any path. */
    int (*may_write)(const void *ud, const char *path);
    const void *may_write_ud;
    /* The settings and parameters the command ran with (cmd_dispatch fills them with `set
       csv.params on`: the model, tau, kv-rank, policy, seed, ...): CSV output -- `to FILE.csv`
       and `format csv` -- appends them as columns, one value on every row, after the table's own
       (a name the table already has is left out; not for records), so the CSVs of a sweep
       concatenate. Kept by out_reset. */
    OutCtx ctx[OUT_CTX_MAX];
    size_t nctx;
} Out;

/* An Out with the default sink; out_reset() drops the result (keeps sink, format and quiet). */
void out_init(Out *o);
void out_reset(Out *o);
void out_free(Out *o);

/* False when narration is off (o->quiet is OUT_QUIET or OUT_SILENT): skip summaries. */
bool out_narrates(const Out *o);

/* Text: all output goes through out_write (stdout text is dropped under OUT_SILENT); out_printf is
 * narration: stderr when o->fmt is csv or json (above). */
void out_write(Out *o, out_stream st, const char *s, size_t n);
void out_printf(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void out_eprintf(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds (or replaces) a context column (see Out.ctx); past OUT_CTX_MAX it is dropped. */
void out_context(Out *o, const char *name, const char *value);

/* AL_OK when o's guard lets path be written (always without a guard), else its error. */
int out_may_write(const Out *o, const char *path);
/* Writes len bytes of text to path for a command: o's guard first (out_may_write), then the
 * path's folder made if missing, then an atomic write (temp + rename). An empty path is refused. */
int out_write_file(const Out *o, const char *path, const char *text, size_t len);

/* The note under a table of errors holding NaN: "note: ROW's errors are NaN: ..." saying why (NaN/Inf
 * in the weights compared; the load warnings name the tensor). ROW is printf-formatted. */
void out_note_nan(Out *o, const char *row_fmt, ...) __attribute__((format(printf, 2, 3)));

/* Results (replace any previous result; the Out takes ownership of t / copies arr, s). */
void out_table(Out *o, Table *t);
int out_array(Out *o, const double *v, size_t n);
/* The same for whole numbers -- ids, counts --, which Lua gets as integers (math.type "integer"). */
int out_array_int(Out *o, const double *v, size_t n);
void out_number(Out *o, double v);
void out_string(Out *o, const char *s);

/* The one-line helper for table commands: when to (the `to` keyword's value) is not NULL, writes t there
 * (CSV/JSON by extension, atomically), prints "wrote N rows to FILE" and marks the result
 * written; the table stays the result either way (Lua gets it). Takes ownership of t.
 * Returns AL_OK, or AL_ERR when t is NULL or the file cannot be written. */
int out_table_to(Out *o, const char *to, Table *t);

/* Prints the result value (if any and not written) in o->fmt: tables aligned/CSV/JSON,
 * arrays one number per line (JSON: an array), numbers and strings on one line. */
void out_emit_result(Out *o);

/* ================================================================ "did you mean"
 *
 * The one suggester of the command language (the parser's unknown commands, keywords and enum
 * values, unknown settings, model names): feed it the candidates, then append its text to the
 * error.
 *     OutSuggest sg = {0};
 *     for (...) out_suggest_try(&sg, typed, name[i]);
 *     al_err("no model named '%s'%s", typed, out_suggest_text(&sg, buf, sizeof buf));
 * A candidate is kept when it is within edit distance 2 (1 for words of 3 bytes or less), differs
 * only in case, or starts with what was typed (2 bytes or more); the closest wins. */
typedef struct { const char *best; size_t d; } OutSuggest;
/* Edit distance of two words, a swap of two neighbours counting 1 (at most 63 bytes each; longer:
 * the longer length). */
size_t out_edit_distance(const char *a, const char *b);
void out_suggest_try(OutSuggest *sg, const char *typed, const char *cand);
/* " (did you mean 'x'?)" in buf, or "" when nothing was close. */
const char *out_suggest_text(const OutSuggest *sg, char *buf, size_t cap);

#endif
