/* cmd_plot_xy.c -- figures of data the user computed (`plot xy`, `plot matrix`), several figures on
 * one page (`plot panels`) and `replot` (see cmd_plot_xy.h).
 *
 * Data comes as CSV: a file the user wrote, or the one repl/lua_data.c writes from Lua tables
 * (attn.plot("xy", {series = ...}) arrives here as `data TMP.csv x ... y ...`), so the prompt, `-e`
 * and Lua share one reader and `replot` can re-run either. A CSV has an optional header row (a row
 * with a cell that is not a number names the columns; else they are "column N"), one row per line,
 * cells separated by commas (a cell in double quotes may hold commas); an empty cell, NA or nan is a gap (the line breaks there); lines
 * starting with '#' are comments. Every figure here goes through plot_dest like the built-in ones
 * and takes the same overrides (params.h PARAM_PLOT_VIEW). */
#define _GNU_SOURCE
#include "cmd_plot_xy.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "params.h"
#include "plot.h"
#include "plot_dest.h"
#include "session.h"

/* ================================================================ CSV */

typedef struct {
    size_t rows, cols;
    char **names;              /* (cols) */
    double *v;                 /* (rows, cols) row-major; NaN: a gap */
    bool header;               /* the first line named the columns */
} Csv;

static void csv_free(Csv *c) {
    for (size_t j = 0; c->names && j < c->cols; j++) free(c->names[j]);
    free(c->names);
    free(c->v);
    memset(c, 0, sizeof *c);
}

/* Trims spaces around a cell, in place. */
static char *cell_trim(char *p) {
    while (isspace((unsigned char)*p)) p++;
    char *e = p + strlen(p);
    while (e > p && isspace((unsigned char)e[-1])) *--e = '\0';
    return p;
}

/* A cell as a number: true with *v (NaN for a gap: empty, NA, nan), false when it is text. */
static bool cell_num(const char *p, double *v) {
    if (!*p || !strcasecmp(p, "na") || !strcasecmp(p, "nan")) { *v = NAN; return true; }
    char *end;
    *v = strtod(p, &end);
    return *end == '\0';
}

/* Splits line (modified in place) at commas into at most cap cells, each trimmed; a cell in double
 * quotes may hold commas, "" is one quote (RFC 4180). Returns the count. */
static size_t split_cells(char *line, char **cells, size_t cap) {
    size_t n = 0;
    char *r = line, *w = line;
    for (;;) {
        while (*r == ' ' || *r == '\t') r++;
        char *start = w;
        if (*r == '"') {
            for (r++; *r && !(*r == '"' && r[1] != '"'); r++) {
                if (*r == '"') r++;      /* "" */
                *w++ = *r;
            }
            if (*r == '"') r++;
            while (*r && *r != ',') r++;     /* text after the closing quote is dropped */
        } else
            while (*r && *r != ',') *w++ = *r++;
        bool more = *r == ',';
        *w++ = '\0';
        if (n < cap) cells[n] = cell_trim(start);
        n++;
        if (!more) break;
        r++;
    }
    return n;
}

#define CSV_MAX_COLS 4096

/* One data line into row r of c; an error names the file, line and cell. */
static int csv_row(Csv *c, char **cells, size_t n, const char *path, size_t lineno, size_t r) {
    if (n != c->cols)
        return al_err("%s line %zu has %zu cell%s, the %s has %zu: every row needs one value per column (empty for a "
                      "gap)", path, lineno, n, al_s(n), c->header ? "header" : "first row", c->cols);
    for (size_t j = 0; j < n; j++)
        if (!cell_num(cells[j], &c->v[r * c->cols + j]))
            return al_err("%s line %zu, column %zu: '%s' is not a number", path, lineno, j + 1, cells[j]);
    return AL_OK;
}

/* The column names: the header's cells, or "column N". */
static int csv_names(Csv *c, char **cells, bool header) {
    c->names = al_calloc(c->cols, sizeof *c->names, "CSV column names");
    if (!c->names) return AL_ERR;
    for (size_t j = 0; j < c->cols; j++)
        if (!(c->names[j] = header && *cells[j] ? al_strdup(cells[j]) : al_asprintf("column %zu", j + 1))) return AL_ERR;
    c->header = header;
    return AL_OK;
}

static int csv_read(const char *path, Csv *c) {
    memset(c, 0, sizeof *c);
    size_t len;
    char *text = al_read_file(path, &len), **cells = NULL;
    if (!text) return AL_ERR;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    int rc = (cells = al_calloc(CSV_MAX_COLS, sizeof *cells, "CSV cells")) ? AL_OK : AL_ERR;
    char *save = NULL;
    size_t lineno = 0;
    for (char *line = strtok_r(text, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
        lineno++;        /* strtok_r skips empty lines: numbers count the lines it returns */
        line[strcspn(line, "\r")] = '\0';
        char *t = cell_trim(line);
        if (!*t || *t == '#') continue;
        size_t n = split_cells(line, cells, CSV_MAX_COLS);
        if (n > CSV_MAX_COLS) { rc = al_err("%s line %zu: more than %d columns", path, lineno, CSV_MAX_COLS); break; }
        if (!c->cols) {
            double v;
            bool header = false;
            for (size_t j = 0; j < n; j++) header |= !cell_num(cells[j], &v);
            c->cols = n;
            if (!(c->v = al_malloc3(lines, n, sizeof(double), "CSV values")) || csv_names(c, cells, header)) rc = AL_ERR;
            if (header || rc) continue;
        }
        if (!(rc = csv_row(c, cells, n, path, lineno, c->rows))) c->rows++;
    }
    free(cells);
    free(text);
    if (!rc && !c->rows)
        rc = al_err("%s has no data rows%s", path, c->cols ? " (only a header)" : " (the file is empty)");
    if (rc) csv_free(c);
    return rc;
}

/* Column `spec` (a header name or a 1-based number) of c; -1 with an error listing the columns. */
static long csv_col(const Csv *c, const char *spec, const char *path, const char *what) {
    for (size_t j = 0; j < c->cols; j++)
        if (!strcmp(c->names[j], spec)) return (long)j;
    char *end;
    long k = strtol(spec, &end, 10);
    if (*spec && !*end && k >= 1 && (size_t)k <= c->cols) return k - 1;
    char list[512];
    size_t n = 0;
    list[0] = '\0';
    for (size_t j = 0; j < c->cols && n + 1 < sizeof list; j++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", j ? ", " : "", c->names[j]);
    al_err("%s: no column '%s' in %s (%zu column%s: %s; or a number 1-%zu)", what, spec, path, c->cols, al_s(c->cols),
           list, c->cols);
    return -1;
}

/* A comma-separated list of columns into idx (at most cap); returns the count, or -1. */
static long csv_cols(const Csv *c, const char *list, const char *path, const char *what, long *idx, size_t cap) {
    char *copy = al_strdup(list), *save = NULL;
    long n = 0;
    if (!copy) return -1;
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if ((size_t)n == cap) {
            free(copy);
            al_err("%s: at most %zu column%s", what, cap, al_s(cap));
            return -1;
        }
        if ((idx[n++] = csv_col(c, cell_trim(w), path, what)) < 0) { free(copy); return -1; }
    }
    free(copy);
    if (!n) al_err("%s: no column named", what);
    return n ? n : -1;
}

/* ================================================================ plot xy */

#define XY_MAX 16

const char CMD_PLOT_XY_HELP[] =
    "Plot what you computed: series from a CSV file against one x column (or one x column per\n"
    "series), as lines, points or both (default auto: both up to 200 points a series, lines\n"
    "beyond), each with its own colour, marker and dash (cycled, or set with `marker` / `dash`), a\n"
    "legend from the header (or `legend`), error bars from `yerr` columns, and every figure's\n"
    "overrides: logx, logy, xrange A:B, yrange A:B, title, xlabel, ylabel, size. COL is a header\n"
    "name or a 1-based number. Without `x` the first column is x; without `y` every other column\n"
    "(but the yerr ones) is a series. An empty cell (or NA) breaks a line; a cell in double quotes\n"
    "may hold commas (\"\" is a quote). Markers: dot, square, triangle, diamond, down, cross (or\n"
    "1-6); dashes 1 (solid) to 8.\n"
    "From Lua: attn.plot(\"xy\", {series = {{x = {...}, y = {...}, name = \"max\", yerr = {...},\n"
    "marker = \"square\", dash = 2}, ...}, logy = true, title = \"...\"}) -- the tables are written to a\n"
    "temporary CSV that this command reads.\n"
    "Examples:\n"
    "  plot xy data ranks.csv x layer y max,median yerr sd,sd logy to ranks.svg\n"
    "  plot xy data loss.csv x 1 y 2,3 style points marker square,triangle xrange 0:100\n"
    "  plot xy data r.csv x layer y max title \"max rank\" ylabel rank legend \"VO max\"";

static const char *const STYLE_CHOICES[] = {"lines", "points", "both", "auto", NULL};
enum { XY_LINES, XY_POINTS, XY_BOTH, XY_AUTO };
#define XY_AUTO_MARKS 200       /* style auto: markers on series of up to this many points */

#define PARAM_DATA { .name = "data", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE.csv", \
                     .help = "the CSV file (optional header row; from Lua: tables, see help)" }

const Param cmd_plot_xy_kw[] = {
    PARAM_DATA,
    { .name = "x", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "COL[,COL...]",
      .help = "the x column (name or 1-based number), or one per series (default: the first column)" },
    { .name = "y", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "COL,COL...",
      .help = "the series' columns (default: every column but x and yerr)" },
    { .name = "yerr", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "COL,COL...",
      .help = "error bar columns (y +- yerr), one per series (or one for all)" },
    { .name = "style", .type = ARG_ENUM, .choices = STYLE_CHOICES, .def = "auto", .flags = PF_VIEW,
      .comp = COMP_CHOICES, .help = "lines, points, both, or auto: both up to 200 points a series, lines beyond" },
    { .name = "marker", .type = ARG_STRING, .flags = PF_VIEW, .comp = COMP_NONE, .metavar = "M,M...",
      .help = "a marker per series: dot, square, triangle, diamond, down, cross or 1-6 (default: cycled)" },
    { .name = "dash", .type = ARG_STRING, .flags = PF_VIEW, .comp = COMP_NONE, .metavar = "D,D...",
      .help = "a dash per series: 1 solid .. 8 (default: cycled, solid first)" },
    { .name = "legend", .type = ARG_STRING, .flags = PF_VIEW, .comp = COMP_NONE, .metavar = "NAME,NAME...",
      .help = "the series' names (default: the y columns' header names)" },
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

static const char *const MARKER_NAMES[] = {"dot", "square", "triangle", "diamond", "down", "cross", NULL};

/* One marker or dash word of a list: a name (markers) or 1..max; -1 with an error. */
static int style_word(const char *w, const char *what, int max, bool names) {
    for (int i = 0; names && MARKER_NAMES[i]; i++)
        if (!strcasecmp(w, MARKER_NAMES[i])) return i;
    char *end;
    long k = strtol(w, &end, 10);
    if (*w && !*end && k >= 1 && k <= max) return (int)k - (names ? 1 : 0);
    al_err("plot xy %s '%s': %s", what, w,
           names ? "a marker is dot, square, triangle, diamond, down, cross or 1-6" : "a dash is 1 (solid) to 8");
    return -1;
}

/* A list of markers (or dashes) into v[0..n): the list's words in order, cycled; absent: cycled
 * through the 6 markers (8 dashes, solid first). */
static int style_list(const Args *a, const char *name, int *v, size_t n, bool names) {
    for (size_t i = 0; i < n; i++) v[i] = names ? (int)(i % 6) : (int)(i % 8) + 1;
    const char *s = args_str(a, name);
    if (!s) return AL_OK;
    char *copy = al_strdup(s), *save = NULL;
    int got[XY_MAX];
    size_t k = 0;
    if (!copy) return AL_ERR;
    for (char *w = strtok_r(copy, ",", &save); w && k < XY_MAX; w = strtok_r(NULL, ",", &save))
        if ((got[k++] = style_word(cell_trim(w), name, names ? 6 : 8, names)) < 0) { free(copy); return AL_ERR; }
    free(copy);
    for (size_t i = 0; k && i < n; i++) v[i] = got[i % k];
    return AL_OK;
}

/* The columns of a plot xy: x (one, or one per series), y, yerr (none, one, or one per series). */
typedef struct {
    long x[XY_MAX], y[XY_MAX], e[XY_MAX];
    long nx, ny, ne;
} XyCols;

static bool in_list(const long *v, long n, long j) {
    for (long i = 0; i < n; i++) if (v[i] == j) return true;
    return false;
}

static int xy_cols(const Args *a, const Csv *c, const char *path, XyCols *k) {
    memset(k, 0, sizeof *k);
    const char *xs = args_str(a, "x"), *ys = args_str(a, "y"), *es = args_str(a, "yerr");
    k->nx = xs ? csv_cols(c, xs, path, "plot xy x", k->x, XY_MAX) : 1;
    if (k->nx < 0) return AL_ERR;
    if (es && (k->ne = csv_cols(c, es, path, "plot xy yerr", k->e, XY_MAX)) < 0) return AL_ERR;
    if (ys) {
        if ((k->ny = csv_cols(c, ys, path, "plot xy y", k->y, XY_MAX)) < 0) return AL_ERR;
    } else
        for (size_t j = 0; j < c->cols; j++)
            if (!in_list(k->x, k->nx, (long)j) && !in_list(k->e, k->ne, (long)j)) {
                if (k->ny == XY_MAX) return al_err("plot xy: %s has more than %d series; pick them with `y`", path, XY_MAX);
                k->y[k->ny++] = (long)j;
            }
    if (!k->ny) return al_err("plot xy: %s has no column left for y (it has %zu); name them with `y`", path, c->cols);
    if (k->nx != 1 && k->nx != k->ny)
        return al_err("plot xy: %ld x column%s for %ld y column%s; give one x, or one per series", k->nx, al_s(k->nx),
                      k->ny, al_s(k->ny));
    if (k->ne > 1 && k->ne != k->ny)
        return al_err("plot xy: %ld yerr column%s for %ld y column%s; give one, or one per series", k->ne, al_s(k->ne),
                      k->ny, al_s(k->ny));
    return AL_OK;
}

/* The legend names: `legend` words (cycled short lists are an error), else the y headers. */
static int xy_names(const Args *a, const Csv *c, const XyCols *k, char **names) {
    const char *ls = args_str(a, "legend");
    for (long i = 0; i < k->ny; i++) names[i] = NULL;
    if (!ls) {
        for (long i = 0; i < k->ny; i++) if (!(names[i] = al_strdup(c->names[k->y[i]]))) return AL_ERR;
        return AL_OK;
    }
    char *copy = al_strdup(ls), *save = NULL;
    long n = 0;
    if (!copy) return AL_ERR;
    for (char *w = strtok_r(copy, ",", &save); w && n < k->ny; w = strtok_r(NULL, ",", &save))
        if (!(names[n++] = al_strdup(cell_trim(w)))) { free(copy); return AL_ERR; }
    free(copy);
    if (n != k->ny) return al_err("plot xy legend: %ld name%s for %ld series", n, al_s(n), k->ny);
    return AL_OK;
}

/* Column j of c copied out (a (rows) array in one allocation with the others: see xy_curves). */
static void col_copy(const Csv *c, long j, double *dst) {
    for (size_t r = 0; r < c->rows; r++) dst[r] = c->v[r * c->cols + (size_t)j];
}

/* The curves of a plot xy: vals holds (3 ny, rows) doubles (x, y, yerr of each series). */
static int xy_curves(const Args *a, const Csv *c, const XyCols *k, PlotCurve *cv, double *vals, char **names) {
    int marker[XY_MAX], dash[XY_MAX];
    if (style_list(a, "marker", marker, (size_t)k->ny, true) || style_list(a, "dash", dash, (size_t)k->ny, false) ||
        xy_names(a, c, k, names))
        return AL_ERR;
    int style = args_enum(a, "style");
    if (style == XY_AUTO) style = c->rows <= XY_AUTO_MARKS ? XY_BOTH : XY_LINES;
    for (long i = 0; i < k->ny; i++) {
        double *x = vals + (size_t)(3 * i) * c->rows, *y = x + c->rows, *e = y + c->rows;
        col_copy(c, k->x[k->nx == 1 ? 0 : i], x);
        col_copy(c, k->y[i], y);
        if (k->ne) col_copy(c, k->e[k->ne == 1 ? 0 : i], e);
        cv[i] = (PlotCurve){.label = names[i], .x = x, .y = y, .n = c->rows, .yerr = k->ne ? e : NULL,
                            .points = style != XY_LINES, .no_line = style == XY_POINTS, .marker = marker[i],
                            .dash = dash[i]};
    }
    return AL_OK;
}

/* The file name part of path, without its extension, for automatic figure names. */
static void base_name(const char *path, char *dst, size_t cap) {
    const char *b = strrchr(path, '/');
    snprintf(dst, cap, "%s", b ? b + 1 : path);
    char *dot = strrchr(dst, '.');
    if (dot && dot != dst) *dot = '\0';
}

/* The data file a figure reads: an error when `data` is missing. */
static const char *data_path(const Args *a) {
    const char *p = args_str(a, "data");
    if (!p) al_err("%s needs `data FILE.csv` (from Lua: the tables, see help %s)", a->path, a->path);
    return p;
}

int cmd_plot_xy(Session *s, const Args *a, Out *out) {
    const char *path = data_path(a);
    Csv c;
    if (!path || csv_read(path, &c)) return AL_ERR;
    XyCols k;
    PlotCurve cv[XY_MAX];
    char *names[XY_MAX] = {0}, title[512], auto_name[256], bn[128];
    double *vals = NULL;
    int rc = xy_cols(a, &c, path, &k);
    if (!rc && !(vals = al_malloc3(c.rows, 3 * (size_t)k.ny, sizeof(double), "plot xy points"))) rc = AL_ERR;
    if (!rc) rc = xy_curves(a, &c, &k, cv, vals, names);
    if (!rc) {
        size_t n = 0;
        for (long i = 0; i < k.ny && n < sizeof title; i++)
            n += (size_t)snprintf(title + n, sizeof title - n, "%s%s", i ? ", " : "", names[i]);
        if (n < sizeof title) snprintf(title + n, sizeof title - n, " against %s", c.names[k.x[0]]);
        base_name(path, bn, sizeof bn);
        snprintf(auto_name, sizeof auto_name, "xy-%s", bn);
        PlotLabels l = {.title = title, .xlabel = k.nx == 1 ? c.names[k.x[0]] : "x",
                        .ylabel = k.ny == 1 ? names[0] : "value"};
        rc = plot_dest_curves(s, a, out, auto_name, &l, cv, (size_t)k.ny);
    }
    for (long i = 0; i < XY_MAX; i++) free(names[i]);
    free(vals);
    csv_free(&c);
    return rc;
}

/* ================================================================ plot matrix */

const char CMD_PLOT_MATRIX_HELP[] =
    "A matrix as a heatmap: a CSV grid (one row per line; a header row of names is skipped), or\n"
    "from Lua a table of rows, attn.plot(\"matrix\", {data = {{1, 2}, {3, 4}}}). Diverging colours\n"
    "centred on 0 (blue < 0 < red), a colour bar, pooled when larger than the figure -- as\n"
    "`plot heatmap` draws a head's matrix. Takes title, xlabel, ylabel, size; xrange / yrange crop\n"
    "it to those columns / rows (cell j spans j..j+1; the axes keep the matrix's indices).\n"
    "Examples:\n"
    "  plot matrix data scores.csv title \"layer 3 head 1\" to scores.png";

const Param cmd_plot_matrix_kw[] = {
    PARAM_DATA,
    PARAM_PLOT_TO,
    PARAM_WINDOW,
    {0}
};

int cmd_plot_matrix(Session *s, const Args *a, Out *out) {
    const char *path = data_path(a);
    Csv c;
    if (!path || csv_read(path, &c)) return AL_ERR;
    Mat *m = mat_new(c.rows, c.cols);
    int rc = m ? AL_OK : AL_ERR;
    for (size_t i = 0; !rc && i < c.rows * c.cols; i++) {
        if (!isfinite(c.v[i])) rc = al_err("plot matrix: %s row %zu column %zu is empty or not finite; a matrix needs every value",
                                           path, i / c.cols + 1, i % c.cols + 1);
        else m->data[i] = (float)c.v[i];
    }
    char title[256], bn[128], auto_name[256];
    base_name(path, bn, sizeof bn);
    snprintf(title, sizeof title, "%s (%zu x %zu)", bn, c.rows, c.cols);
    snprintf(auto_name, sizeof auto_name, "matrix-%s", bn);
    PlotDest d;
    if (!rc && !(rc = plot_dest_init(s, a, auto_name, &d))) {
        d.o.title = title;
        plot_dest_window_hint(out, &d);
        rc = plot_dest_done(out, &d, plot_heatmap(&d.o, m));
    }
    mat_free(m);
    csv_free(&c);
    return rc;
}

/* ================================================================ plot panels */

const char CMD_PLOT_PANELS_HELP[] =
    "Several figures on one page, C columns by R rows filled row by row (gnuplot's multiplot,\n"
    "PLplot subpages): `figures` holds the `plot` commands separated by ';' (quote it; inner\n"
    "quotes single). Each panel takes its own options (title, logy, xrange, ...); `to`, `window`\n"
    "and `size` (default: plot.size scaled by 0.8 per panel) are the page's. From Lua:\n"
    "attn.plot(\"panels\", \"2x2\", {figures = {\"plot xy data a.csv\", \"plot energy vo layer 0 head 0\"}}).\n"
    "Examples:\n"
    "  plot panels 2x1 figures \"plot spectrum vo layer 0 head 0; plot energy vo layer 0 head 0\" to p.png\n"
    "  plot panels 2x2 figures \"plot xy data a.csv title 'A'; plot xy data b.csv logy\" to p.svg";

const Param cmd_plot_panels_pos[] = {
    { .name = "layout", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "CxR",
      .help = "columns x rows, e.g. 2x2" },
    {0}
};

const Param cmd_plot_panels_kw[] = {
    { .name = "figures", .type = ARG_STRING, .comp = COMP_NONE, .metavar = "\"CMD; CMD...\"",
      .help = "the plot commands of the panels, separated by ';'" },
    PARAM_PLOT_TO,
    { .name = "window", .type = ARG_FLAG, .comp = COMP_NONE, .help = "show the page in a window (needs a display)" },
    { .name = "size", .type = ARG_STRING, .flags = PF_VIEW, .comp = COMP_NONE, .metavar = "WxH",
      .help = "the page's size (default: plot.size times 0.8 per panel)" },
    {0}
};

/* Runs one panel's command line: it must be a plot figure (not panels). */
static int panel_run(Session *s, const char *line, size_t from, size_t *next, int i) {
    Tokens t = {0};
    ParseErr e;
    Args a;
    memset(&a, 0, sizeof a);
    if (cmd_tokenize(line, from, next, &t, &e)) return al_err("plot panels, figure %d: %s", i, e.msg);
    if (!t.n) { tokens_free(&t); return AL_OK; }
    int rc = cmd_parse_tokens(s, &t, line, &a, &e);
    tokens_free(&t);
    if (rc) rc = al_err("plot panels, figure %d: %s", i, e.msg);
    else if (strcmp(a.top->name, "plot") || !strcmp(a.cmd->name, "panels"))
        rc = al_err("plot panels, figure %d: '%s' is not a figure; each panel is a `plot` command", i, a.path);
    if (!rc) {
        Out o;
        out_init(&o);
        o.quiet = OUT_SILENT;
        rc = cmd_dispatch(s, &a, &o);
        out_free(&o);
        if (rc) {
            char msg[600];      /* al_err must not read the message it is writing */
            snprintf(msg, sizeof msg, "%s", al_errmsg());
            rc = al_err("plot panels, figure %d (%s): %s", i, a.path, msg);
        }
    }
    args_free(&a);
    return rc;
}

int cmd_plot_panels(Session *s, const Args *a, Out *out) {
    int nx, ny;
    char extra;
    const char *lay = args_str(a, "layout"), *figs = args_str(a, "figures");
    if (sscanf(lay, "%dx%d%c", &nx, &ny, &extra) != 2 || nx < 1 || ny < 1 || nx * ny > 64)
        return al_err("plot panels '%s': the layout is CxR, columns by rows (e.g. 2x2), 1 to 64 panels", lay);
    if (!figs || !*figs) return al_err("plot panels: name the figures: figures \"plot ...; plot ...\"");
    PlotDest d;
    char auto_name[64];
    snprintf(auto_name, sizeof auto_name, "panels-%dx%d", nx, ny);
    if (plot_dest_init(s, a, auto_name, &d)) return AL_ERR;
    if (!args_given(a, "size")) {
        d.o.width = (int)fmin(10000, 0.8 * s->plot_w * nx);
        d.o.height = (int)fmin(10000, 0.8 * s->plot_h * ny);
    }
    plot_dest_window_hint(out, &d);
    int rc = plot_panels_begin(&d.o, nx, ny), i = 0;
    size_t pos = 0, n = strlen(figs);
    while (!rc && pos < n) {
        size_t next;
        if (++i > nx * ny) rc = al_err("plot panels %s: more than %d figure%s", lay, nx * ny, al_s(nx * ny));

        else rc = panel_run(s, figs, pos, &next, i);
        pos = next;
    }
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", al_errmsg());
        plot_panels_end(false);
        al_err("%s", msg);
    } else
        rc = plot_panels_end(true);
    return plot_dest_done(out, &d, rc);
}

/* ================================================================ replot */

const char CMD_REPLOT_HELP[] =
    "Draws the session's last figure again (any `plot` command, from the prompt, `-e` or Lua),\n"
    "with CHANGES: keywords of that figure that replace its own (`title \"T\"`, `logy`, `xrange 0:10`,\n"
    "`to other.svg`, ...); `no` before a flag removes it (`replot nology`). Without `to` it goes\n"
    "where the last one went. The changed command becomes the last figure.\n"
    "Examples:\n"
    "  plot xy data r.csv x layer y max to r.svg\n"
    "  replot logy title \"max rank (log)\"\n"
    "  replot nology to r2.png";

const Param cmd_replot_pos[] = {
    { .name = "changes", .type = ARG_STRING, .flags = PF_REST, .def = "", .comp = COMP_NONE,
      .metavar = "CHANGES...", .help = "keywords of the figure that replace its own" },
    {0}
};

/* Keyword `w` of c (NULL when w names none: a positional's value). */
static const Param *kw_of(const Command *c, const char *w) {
    for (size_t i = 0; c->kw && c->kw[i].name; i++)
        if (!strcmp(c->kw[i].name, w)) return &c->kw[i];
    return NULL;
}

/* True when the changes set keyword `name`, or remove it with no<name>. */
static bool changed(const Tokens *ch, const Command *c, const char *name) {
    for (size_t i = 0; i < ch->n; i++) {
        const char *w = ch->tok[i].text;
        if (ch->tok[i].quoted) continue;
        if (!strcmp(w, name) && kw_of(c, w)) return true;
        if (!strncmp(w, "no", 2) && !strcmp(w + 2, name) && !kw_of(c, w)) return true;
        const Param *p = kw_of(c, w);
        if (p && p->type != ARG_FLAG) i++;      /* skip the value */
    }
    return false;
}

static int tok_add(Tokens *t, const Token *src) {
    if (t->n >= ARGS_TOKENS_MAX) return al_err("replot: too many words");
    if (!(t->tok[t->n].text = al_strdup(src->text))) return AL_ERR;
    t->tok[t->n].quoted = src->quoted;
    t->n++;
    return AL_OK;
}

/* The last figure's tokens with the changed keywords left out, then the changes (no<flag> dropped). */
static int merge_tokens(const Tokens *last, const Tokens *ch, const Command *c, size_t path_len, Tokens *m) {
    for (size_t i = 0; i < last->n; i++) {
        const Param *p = i >= path_len && !last->tok[i].quoted ? kw_of(c, last->tok[i].text) : NULL;
        size_t span = p && p->type != ARG_FLAG ? 2 : 1;
        if (p && changed(ch, c, p->name)) { i += span - 1; continue; }
        for (size_t k = 0; k < span && i + k < last->n; k++)
            if (tok_add(m, &last->tok[i + k])) return AL_ERR;
        i += span - 1;
    }
    for (size_t i = 0; i < ch->n; i++) {
        const char *w = ch->tok[i].text;
        const Param *p = ch->tok[i].quoted ? NULL : kw_of(c, w);
        if (!p && !strncmp(w, "no", 2) && kw_of(c, w + 2)) continue;
        if (!p) return al_err("replot: '%s' is not a keyword of %s", w, c->name);
        if (tok_add(m, &ch->tok[i])) return AL_ERR;
        if (p->type != ARG_FLAG && ++i < ch->n && tok_add(m, &ch->tok[i])) return AL_ERR;
    }
    return AL_OK;
}

int cmd_replot(Session *s, const Args *a, Out *out) {
    if (!s->last_plot) return al_err("replot: no figure yet in this session; draw one with `plot ...`");
    char *last = al_strdup(s->last_plot);
    const char *chs = args_str(a, "changes");
    Tokens lt = {0}, ct = {0}, mt = {0};
    ParseErr e;
    Args la, ma;
    size_t next;
    memset(&la, 0, sizeof la);
    memset(&ma, 0, sizeof ma);
    int rc = last ? AL_OK : AL_ERR;
    if (!rc && (cmd_tokenize(last, 0, &next, &lt, &e) || cmd_parse_tokens(s, &lt, last, &la, &e)))
        rc = al_err("replot: the last figure's command `%s` no longer parses: %s", last, e.msg);
    if (!rc && chs && *chs && cmd_tokenize(chs, 0, &next, &ct, &e)) rc = al_err("replot: %s", e.msg);
    if (!rc) rc = merge_tokens(&lt, &ct, la.cmd, la.cmd == la.top ? 1 : 2, &mt);
    if (!rc && cmd_parse_tokens(s, &mt, NULL, &ma, &e)) rc = al_err("replot: %s", e.msg);
    if (!rc) rc = cmd_dispatch(s, &ma, out);
    args_free(&la);
    args_free(&ma);
    tokens_free(&lt);
    tokens_free(&ct);
    tokens_free(&mt);
    free(last);
    return rc;
}
