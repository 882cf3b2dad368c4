/* plot_common.c -- pages, palette, fonts, titles and legends shared by every renderer.
 *
 * Owns the PLplot stream discipline: each figure gets its own stream (plmkstrm), ends it with
 * plend1 and returns to the previous stream, so a process can draw any number of figures.
 * Everything that would make PLplot prompt on stdin or exit -- no device, a missing folder, an
 * unwritable file -- is checked here before plinit and reported through al_err. Files are
 * written under a temporary name in the target folder and renamed into place when complete. */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>

#include "al.h"
#include "plot_int.h"

/* ================================================================ palette */

static const unsigned char PALETTE[PC_N][3] = {
    [PC_BG] = {255, 255, 255},   [PC_FG] = {25, 25, 25},
    [PC_BLUE] = {0, 114, 178},   [PC_ORANGE] = {230, 159, 0},
    [PC_GREEN] = {0, 158, 115},  [PC_VERMIL] = {213, 94, 0},
    [PC_PURPLE] = {204, 121, 167}, [PC_SKY] = {86, 180, 233},
    [PC_GREY] = {119, 119, 119}, [PC_LIGHT] = {221, 221, 221},
    [PC_YELLOW] = {240, 228, 66}, [PC_BAND] = {204, 227, 240},
    [PC_GAP] = {239, 239, 239},
};

/* Installs PALETTE as cmap0 of the current stream (before plinit: sets the background too). */
static void palette_set(void) {
    PLINT r[PC_N], g[PC_N], b[PC_N];
    for (int i = 0; i < PC_N; i++) { r[i] = PALETTE[i][0]; g[i] = PALETTE[i][1]; b[i] = PALETTE[i][2]; }
    plscmap0n(PC_N);
    plscmap0(r, g, b, PC_N);
}

PLINT plot_series_color(size_t i) {
    static const PLINT order[] = {PC_BLUE, PC_ORANGE, PC_GREEN, PC_VERMIL, PC_PURPLE, PC_SKY, PC_FG};
    return order[i % (sizeof order / sizeof order[0])];
}

/* ================================================================ options */

const char *plot_device_for(const char *path) {
    static const struct { const char *ext, *dev; } map[] = {
        {".png", "pngcairo"}, {".svg", "svg"}, {".pdf", "pdfcairo"},
    };
    const char *dot = path ? strrchr(path, '.') : NULL;
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (dot && (!slash || dot > slash))
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (strcasecmp(dot, map[i].ext) == 0) return map[i].dev;
    al_err("plot file '%s': unknown extension; name it .png, .svg or .pdf", path ? path : "(none)");
    return NULL;
}

bool plot_have_display(void) {
    const char *d = getenv("DISPLAY");
    return d && *d;
}

/* Opens and closes a connection to $DISPLAY through libX11 (loaded at run time: the xcairo
 * driver needs it anyway). PLplot's xcairo calls exit() when the display cannot be opened, so
 * this runs before plinit. */
int plot_window_check(void) {
    if (!plot_have_display())
        return al_err("plot window: no display ($DISPLAY is not set); write a file with `to FILE.png`");
    const char *d = getenv("DISPLAY");
    void *x11 = dlopen("libX11.so.6", RTLD_NOW | RTLD_LOCAL);
    if (!x11) return al_err("plot window: cannot load libX11 (%s); write a file with `to FILE.png`", dlerror());
    void *(*open_display)(const char *) = (void *(*)(const char *))dlsym(x11, "XOpenDisplay");
    int (*close_display)(void *) = (int (*)(void *))dlsym(x11, "XCloseDisplay");
    void *dpy = open_display && close_display ? open_display(NULL) : NULL;
    if (dpy) close_display(dpy);
    dlclose(x11);
    if (!dpy)
        return al_err("plot window: cannot open the X display '%s'; check $DISPLAY or write a file with `to FILE.png`",
                      d ? d : "");
    return AL_OK;
}

int plot_parse_size(const char *s, int *w, int *h) {
    char *end;
    long a, b;
    if (!s) return al_err("plot size: expected WxH, e.g. 1000x700");
    a = strtol(s, &end, 10);
    if (end == s || (*end != 'x' && *end != 'X'))
        return al_err("plot size '%s': expected WxH, e.g. 1000x700", s);
    const char *p = end + 1;
    b = strtol(p, &end, 10);
    if (end == p || *end)
        return al_err("plot size '%s': expected WxH, e.g. 1000x700", s);
    if (a < 200 || b < 150 || a > 10000 || b > 10000)
        return al_err("plot size '%s': width must be 200..10000 and height 150..10000", s);
    *w = (int)a;
    *h = (int)b;
    return AL_OK;
}

/* ================================================================ files */

/* mkdir -p for the folder part of path (nothing when path has no folder). */
static int make_parent_dirs(const char *path) {
    char *dir = al_strdup(path);
    if (!dir) return AL_ERR;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) { free(dir); return AL_OK; }
    *slash = '\0';
    for (char *p = dir + 1; ; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            al_err("plot file '%s': cannot make folder '%s' (%s); choose another path or `set plot.dir`",
                   path, dir, strerror(e));
            free(dir);
            return AL_ERR;
        }
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            al_err("plot file '%s': '%s' exists and is not a folder", path, dir);
            free(dir);
            return AL_ERR;
        }
        *p = c;
        if (c == '\0') break;
    }
    free(dir);
    return AL_OK;
}

/* Makes the temporary file name "<dir>/.<base>.<pid>.tmp" for path (caller frees). */
static char *tmp_name_for(const char *path) {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    return al_asprintf("%.*s.%s.%ld.tmp", dirlen, path, base, (long)getpid());
}

/* Checks that path can be written: folder made, no folder in the way, a scratch file created. */
static int prepare_file(const char *path, char **tmp_out) {
    struct stat st;
    if (!*path) return al_err("plot file: empty path; name a .png, .svg or .pdf file");
    if (path[strlen(path) - 1] == '/')
        return al_err("plot file '%s' is a folder; name a .png, .svg or .pdf file in it", path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return al_err("plot file '%s' is a folder; name a .png, .svg or .pdf file in it", path);
    if (make_parent_dirs(path)) return AL_ERR;
    char *tmp = tmp_name_for(path);
    if (!tmp) return AL_ERR;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return al_err("plot file '%s': cannot write there (%s); choose another path or `set plot.dir`",
                      path, strerror(e));
    }
    close(fd);
    *tmp_out = tmp;
    return AL_OK;
}

/* ================================================================ pages */

static double font_scale = 1.0;
static double text_mm(const char *s, double rel);
static char abort_msg[256];   /* first PLplot abort message of the current page, "" if none */

/* PLplot calls this instead of printing "*** PLPLOT ERROR, ABORTING OPERATION ***": keep the
 * first message so plot_page_close can report it. */
static void on_plabort(PLCHAR_VECTOR msg) {
    if (!abort_msg[0]) snprintf(abort_msg, sizeof abort_msg, "%s", msg ? msg : "(no message)");
}

double plot_font_scale(void) { return font_scale; }

/* PLplot's default character height grows with the page size by its own rule; set it in
 * millimetres instead (the cairo devices draw at 72 dpi: 6 mm is about 17 px) so text has the
 * same size on every page and scales only with font_scale. */
#define CHAR_MM 6.0

void plot_chr(double rel) { plschr(CHAR_MM * font_scale, rel); }

static int page_w = PLOT_DEFAULT_WIDTH, page_h = PLOT_DEFAULT_HEIGHT;

/* 72 dpi: one pixel (or point) is 25.4 / 72 mm. */
double plot_em_y(void) { return CHAR_MM * font_scale / (page_h * 25.4 / 72.0); }
double plot_em_x(void) { return CHAR_MM * font_scale / (page_w * 25.4 / 72.0); }

int plot_page_open(const PlotOpts *o, PlotPage *pg) {
    return plot_page_open_design(o, pg, PLOT_DEFAULT_WIDTH, PLOT_DEFAULT_HEIGHT);
}

/* ================================================================ the user's overrides */

/* The PV_* overrides a view asks for. */
static unsigned view_wants(const PlotView *v) {
    return (v->logx ? PV_LOGX : 0) | (v->logy ? PV_LOGY : 0) | (v->xrange ? PV_XRANGE : 0) | (v->yrange ? PV_YRANGE : 0);
}

static const char *view_name(unsigned bit) {
    return bit == PV_LOGX ? "logx" : bit == PV_LOGY ? "logy" : bit == PV_XRANGE ? "xrange" : "yrange";
}

/* Error naming the first override of `wants` that `can` lacks, and those the figure takes. */
static int view_refuse(unsigned wants, unsigned can, const char *fig) {
    for (unsigned bit = PV_LOGX; bit <= PV_YRANGE; bit <<= 1)
        if ((wants & bit) && !(can & bit)) {
            char takes[128] = "title, xlabel, ylabel, size";
            for (unsigned b = PV_LOGX; b <= PV_YRANGE; b <<= 1)
                if (can & b) snprintf(takes + strlen(takes), sizeof takes - strlen(takes), ", %s", view_name(b));
            return al_err("%s: `%s` is not available for this figure (it takes %s)", fig ? fig : "plot",
                          view_name(bit), takes);
        }
    return AL_OK;
}

int plot_view(const PlotOpts *in, PlotOpts *out, unsigned can, const char *fig) {
    *out = *in;
    if (view_refuse(view_wants(&in->view), can, fig)) return AL_ERR;
    if (in->view.logx) out->logx = true;
    if (in->view.logy) out->logy = true;
    out->view_can = can | PV_APPLIED;
    return AL_OK;
}

/* One axis of plot_view_range: r[0..1] of that axis, lg when it is a log axis. */
static int view_axis(const double given[2], bool lg, double *r, const char *name) {
    for (int i = 0; i < 2; i++) {
        if (isnan(given[i])) continue;
        if (lg && !(given[i] > 0))
            return al_err("%s %g: a log axis takes positive bounds only", name, given[i]);
        r[i] = lg ? log10(given[i]) : given[i];
    }
    if (!(r[1] > r[0])) return al_err("%s: the upper bound must exceed the lower one", name);
    return AL_OK;
}

int plot_view_range(const PlotOpts *o, double r[4]) {
    if (o->view.xrange && view_axis(o->view.xr, o->logx, r, "xrange")) return AL_ERR;
    if (o->view.yrange && view_axis(o->view.yr, o->logy, r + 2, "yrange")) return AL_ERR;
    return AL_OK;
}

/* ================================================================ panels */

static struct {
    bool active;
    PlotPage pg;               /* the one page all panels share */
    int nx, ny;
    int cur;                   /* subpages started (1: the first, top left; row by row) */
} panels;

/* plgvpd in the coordinates plvpor takes: the page's, or inside a panel figure the subpage's
 * (plgvpd answers in the whole page's normalized device coordinates). */
static void vpd(PLFLT *x0, PLFLT *x1, PLFLT *y0, PLFLT *y1) {
    plgvpd(x0, x1, y0, y1);
    if (!panels.active || panels.cur < 1) return;
    int col = (panels.cur - 1) % panels.nx, row = (panels.cur - 1) / panels.nx;
    double w = 1.0 / panels.nx, h = 1.0 / panels.ny, sx = col * w, sy = 1.0 - (row + 1) * h;
    *x0 = (*x0 - sx) / w, *x1 = (*x1 - sx) / w;
    *y0 = (*y0 - sy) / h, *y1 = (*y1 - sy) / h;
}

bool plot_panels_active(void) { return panels.active; }

static int page_start(const PlotOpts *o, PlotPage *pg, int design_w, int design_h, int nx, int ny);

/* Fonts scale with the page (or a panel's subpage) relative to the figure's design size, within 0.75..4. */
static double page_font_scale(int w, int h, int design_w, int design_h) {
    double f = fmin((double)w / design_w, (double)h / design_h);
    return f < 0.75 ? 0.75 : f > 4.0 ? 4.0 : f;
}

int plot_panels_begin(const PlotOpts *opts, int nx, int ny) {
    if (panels.active) return al_err("plot panels: a panel figure is already being drawn (panels do not nest)");
    if (nx < 1 || ny < 1 || nx * ny > 64) return al_err("plot panels %dx%d: 1 to 64 panels", nx, ny);
    if (page_start(opts, &panels.pg, PLOT_DEFAULT_WIDTH * nx, PLOT_DEFAULT_HEIGHT * ny, nx, ny)) return AL_ERR;
    panels.active = true;
    panels.nx = nx;
    panels.ny = ny;
    panels.cur = 0;
    return AL_OK;
}

int plot_panels_end(bool keep) {
    if (!panels.active) return AL_OK;
    panels.active = false;
    if (keep) return plot_page_close(&panels.pg);
    PlotPage *pg = &panels.pg;      /* a panel failed: close the stream, leave no partial file */
    if (pg->open) {
        plend1();
        plsstrm(pg->prev_stream);
        pg->open = false;
    }
    abort_msg[0] = '\0';
    if (pg->tmp_path) unlink(pg->tmp_path);
    free(pg->tmp_path);
    free(pg->final_path);
    pg->tmp_path = pg->final_path = NULL;
    font_scale = 1.0;
    return AL_OK;
}

/* A renderer's page inside a panel figure: the next subpage, fonts scaled to it. */
static int panel_page(const PlotOpts *o, PlotPage *pg, int design_w, int design_h) {
    memset(pg, 0, sizeof *pg);
    if (view_refuse(view_wants(&o->view), o->view_can, NULL)) return AL_ERR;
    pg->width = panels.pg.width / panels.nx;
    pg->height = panels.pg.height / panels.ny;
    font_scale = page_font_scale(pg->width, pg->height, design_w, design_h);
    page_w = pg->width;
    page_h = pg->height;
    memset(plot_geom(), 0, sizeof(PlotGeom));
    plot_chr(1.0);
    plwidth(1.0 * font_scale);
    pladv(0);
    panels.cur++;
    plcol0(PC_FG);
    return AL_OK;
}

int plot_page_open_design(const PlotOpts *o, PlotPage *pg, int design_w, int design_h) {
    if (!o) { memset(pg, 0, sizeof *pg); return al_err("plot: no options given"); }
    plot_ytick_room(0);
    if (panels.active) return panel_page(o, pg, design_w, design_h);
    if (view_refuse(view_wants(&o->view), o->view_can, NULL)) { memset(pg, 0, sizeof *pg); return AL_ERR; }
    if (page_start(o, pg, design_w, design_h, 1, 1)) return AL_ERR;
    pladv(0);
    return AL_OK;
}

/* plot_page_open_design without the first pladv, on nx x ny subpages. */
static int page_start(const PlotOpts *o, PlotPage *pg, int design_w, int design_h, int nx, int ny) {
    memset(pg, 0, sizeof *pg);
    if (!o) return al_err("plot: no options given");
    const char *dev;
    if (o->window) {
        if (plot_window_check()) return AL_ERR;
        dev = "xcairo";
    } else {
        if (!o->path) return al_err("plot: no output file; name a .png, .svg or .pdf file");
        if (!(dev = plot_device_for(o->path))) return AL_ERR;
    }
    pg->width = o->width > 0 ? o->width : design_w;
    pg->height = o->height > 0 ? o->height : design_h;
    if (pg->width < 200 || pg->height < 150 || pg->width > 10000 || pg->height > 10000)
        return al_err("plot size %dx%d: width must be 200..10000 and height 150..10000",
                      pg->width, pg->height);
    if (!o->window) {
        if (prepare_file(o->path, &pg->tmp_path)) return AL_ERR;
        if (!(pg->final_path = al_strdup(o->path))) {
            unlink(pg->tmp_path);
            free(pg->tmp_path);
            pg->tmp_path = NULL;
            return AL_ERR;
        }
    }
    plgstrm(&pg->prev_stream);
    plmkstrm(&pg->stream);
    if (pg->stream < 0) {
        plot_page_close(pg);
        return al_err("plot: PLplot has no free stream left (too many figures open)");
    }
    abort_msg[0] = '\0';
    plsabort(on_plabort);
    plsdev(dev);
    if (pg->tmp_path) plsfnam(pg->tmp_path);
    pg->svg = !strcmp(dev, "svg");
    plspage(0.0, 0.0, pg->width, pg->height, 0, 0);
    palette_set();
    plspause(o->window ? 1 : 0);
    plssub(nx, ny);
    plinit();
    pg->open = true;
    font_scale = page_font_scale(pg->width, pg->height, design_w, design_h);
    page_w = pg->width;
    page_h = pg->height;
    memset(plot_geom(), 0, sizeof(PlotGeom));
    plfontld(1);
    plot_chr(1.0);
    plwidth(1.0 * font_scale);
    plcol0(PC_FG);
    return AL_OK;
}

/* PLplot's svg driver sizes the page in points: width="1200pt" height="800pt" with viewBox
 * "0 0 1200 800", while pngcairo's page of the same numbers is 1200 x 800 pixels. 1200pt is 1600
 * CSS px, so the SVG's natural size is 4/3 of the PNG's, and a renderer that takes the canvas from
 * width / height but draws the user units 1:1 leaves the right and bottom quarter empty. Rewrites
 * the two units as px in place (same length), so the SVG's size, its viewBox and the PNG's pixels
 * agree. Returns AL_OK also when the header is not the expected one (nothing changed). */
static int svg_size_in_px(const char *path, int w, int h) {
    char head[1024], want[64];
    FILE *f = fopen(path, "r+b");
    if (!f) return al_err("plot file '%s': cannot reopen the SVG (%s)", path, strerror(errno));
    size_t n = fread(head, 1, sizeof head - 1, f);
    head[n] = '\0';
    int rc = AL_OK;
    const char *names[2] = {"width", "height"};
    int vals[2] = {w, h};
    for (int i = 0; rc == AL_OK && i < 2; i++) {
        snprintf(want, sizeof want, "%s=\"%dpt\"", names[i], vals[i]);
        char *at = strstr(head, want);
        if (!at) continue;
        long off = (long)(at - head) + (long)strlen(want) - 2;     /* the 't' of "pt" */
        if (fseek(f, off, SEEK_SET) != 0 || fputc('x', f) == EOF)
            rc = al_err("plot file '%s': cannot rewrite the SVG's size (%s)", path, strerror(errno));
    }
    if (fclose(f) != 0 && rc == AL_OK) rc = al_err("plot file '%s': cannot finish the SVG (%s)", path, strerror(errno));
    return rc;
}

int plot_page_close(PlotPage *pg) {
    int rc = AL_OK;
    const char *what = pg->final_path ? pg->final_path : "window";
    if (pg->open) {
        plend1();
        plsstrm(pg->prev_stream);
        pg->open = false;
    }
    if (abort_msg[0]) {
        rc = al_err("plot '%s': PLplot refused a drawing step (%s)", what, abort_msg);
        abort_msg[0] = '\0';
    }
    if (pg->tmp_path) {
        struct stat st;
        if (!rc && (stat(pg->tmp_path, &st) != 0 || st.st_size == 0))
            rc = al_err("plot file '%s': PLplot wrote nothing", what);
        if (!rc && pg->svg) rc = svg_size_in_px(pg->tmp_path, pg->width, pg->height);
        if (!rc && rename(pg->tmp_path, pg->final_path) != 0) {
            int e = errno;
            rc = al_err("plot file '%s': cannot rename the finished figure into place (%s)",
                        what, strerror(e));
        }
        if (rc) unlink(pg->tmp_path);
    }
    free(pg->tmp_path);
    free(pg->final_path);
    pg->tmp_path = pg->final_path = NULL;
    font_scale = 1.0;
    return rc;
}

/* ================================================================ text */

char *plot_esc(char *dst, size_t cap, const char *src) {
    size_t j = 0;
    if (!cap) return dst;
    for (size_t i = 0; src && src[i] && j + 2 < cap; i++) {
        if (src[i] == '#') dst[j++] = '#';
        dst[j++] = src[i];
    }
    dst[j] = '\0';
    return dst;
}

/* Text size (times the default) at most `rel` that fits s within 96% of the page width. */
static double fit_rel(const char *s, double rel) {
    double page_mm = page_w * 25.4 / 72.0;
    while (rel > 0.6 && text_mm(s, rel) > 0.96 * page_mm) rel *= 0.93;
    return rel;
}

#define LEGEND_GAP_EM 0.7        /* legend above the data: its gap to the frame, in characters */
#define SUBTITLE_MIN_REL 0.82   /* below this a long subtitle wraps onto a second line instead */

/* Whether a subtitle may break at s[i] in pass `pass` (depth: the parentheses open there): after a
 * "; " outside parentheses (pass 0), else after such a ", " not in a list of numbers ("layers 1, 4";
 * pass 1), else at such a space (2), else at any space (3). */
static bool subtitle_break(const char *s, size_t i, size_t depth, int pass) {
    if (pass == 3) return s[i] == ' ';
    if (depth) return false;
    if (pass == 2) return s[i] == ' ';
    if (s[i + 1] != ' ') return false;
    return pass == 0 ? s[i] == ';' : s[i] == ',' && !isdigit((unsigned char)s[i + 2]);
}

/* The subtitle as printed: escaped into l1 (and l2, "" when it fits one line) at *rel. A subtitle
 * that would shrink below SUBTITLE_MIN_REL breaks at the first pass's place (subtitle_break) nearest
 * its middle: "no fit (6 eigenvalues; it needs 10)" stays whole. Returns the number of lines (0
 * without a subtitle). */
static int subtitle_lines(const PlotOpts *o, char *l1, char *l2, size_t cap, double *rel) {
    l1[0] = l2[0] = 0;
    if (!o->subtitle) return 0;
    plot_esc(l1, cap, o->subtitle);
    *rel = fit_rel(l1, 0.95);
    if (*rel >= SUBTITLE_MIN_REL) return 1;
    size_t n = strlen(l1), best = 0;
    for (int pass = 0; pass < 4 && !best; pass++)
        for (size_t i = 1, depth = 0; i + 1 < n; i++) {
            depth += l1[i] == '(';
            depth -= l1[i] == ')' && depth > 0;
            if (subtitle_break(l1, i, depth, pass) &&
                (!best || (i > n / 2 ? i - n / 2 : n / 2 - i) < (best > n / 2 ? best - n / 2 : n / 2 - best)))
                best = i;
        }
    if (!best) return 1;
    bool punct = l1[best] != ' ';                  /* kept at the end of the first line */
    snprintf(l2, cap, "%s", l1 + best + (punct ? 2 : 1));
    l1[best + punct] = 0;
    double r1 = fit_rel(l1, 0.95), r2 = fit_rel(l2, 0.95);
    *rel = r1 < r2 ? r1 : r2;
    return 2;
}

void plot_page_title(const PlotOpts *o, const char *dflt) {
    char buf[512], l2[512];
    const char *ut = o->view.title ? o->view.title : o->title;
    const char *t = ut ? plot_esc(buf, sizeof buf, ut) : dflt;
    plvpor(0.0, 1.0, 0.0, 1.0);
    plwind(0.0, 1.0, 0.0, 1.0);
    plcol0(PC_FG);
    double ey = plot_em_y(), rel = 0.95;
    plot_chr(fit_rel(t, 1.25));
    plptex(0.5, 1.0 - 1.6 * ey, 1.0, 0.0, 0.5, t);
    int lines = subtitle_lines(o, buf, l2, sizeof buf, &rel);
    if (lines) {
        plot_chr(rel);
        plcol0(PC_GREY);
        plptex(0.5, 1.0 - 3.5 * ey, 1.0, 0.0, 0.5, buf);
        if (lines == 2) plptex(0.5, 1.0 - 4.9 * ey, 1.0, 0.0, 0.5, l2);
    }
    plot_chr(1.0);
    plcol0(PC_FG);
}

double plot_top(const PlotOpts *o, int legend_rows) {
    double ey = plot_em_y(), rel;
    char l1[512], l2[512];
    int lines = subtitle_lines(o, l1, l2, sizeof l1, &rel);
    double top = 1.0 - (lines == 2 ? 5.9 : lines ? 4.5 : 2.9) * ey;
    if (legend_rows > 0) top -= (LEGEND_GAP_EM + 0.75 + 1.85 * legend_rows) * ey;
    return top - 0.4 * ey;
}

/* The left margin and the y label's distance from the axis, in character heights: 6.6 and 4.2 hold
 * tick labels of up to 4 characters; plot_ytick_room widens both for longer ones. */
static double left_em = 6.6, ylabel_disp = 4.2;

void plot_ytick_room(int chars) {
    double need = 0.5 + 0.85 * chars + 0.8;          /* the labels' offset, their width, a gap */
    ylabel_disp = need > 4.2 ? need : 4.2;
    left_em = ylabel_disp + 2.4;
}

void plot_vpor_std(const PlotOpts *o, int legend_rows, double right_em) {
    plvpor(left_em * plot_em_x(), 1.0 - right_em * plot_em_x(), 4.6 * plot_em_y(), plot_top(o, legend_rows));
}

double plot_vpor_std_width(double right_em) { return 1.0 - (left_em + right_em) * plot_em_x(); }

const char *plot_xlabel(const PlotOpts *o) { return o->view.xlabel ? o->view.xlabel : o->xlabel; }
const char *plot_ylabel(const PlotOpts *o) { return o->view.ylabel ? o->view.ylabel : o->ylabel; }

void plot_axis_labels(const PlotOpts *o, const char *dx, const char *dy) {
    char bx[256], by[256];
    plcol0(PC_FG);
    const char *ux = plot_xlabel(o), *uy = plot_ylabel(o);
    plmtex("b", 3.0, 0.5, 0.5, ux ? plot_esc(bx, sizeof bx, ux) : dx);
    plmtex("l", ylabel_disp, 0.5, 0.5, uy ? plot_esc(by, sizeof by, uy) : dy);
}

void plot_log_labels(double lo, double hi) {
    if (!(hi > lo) || hi - lo > 2.01) return;
    char buf[32];
    for (double k = floor(lo); k <= hi; k += 1.0)
        for (int m = 2; m <= 5; m += 3) {
            double y = k + log10((double)m);
            if (y <= lo || y >= hi) continue;
            snprintf(buf, sizeof buf, "%g", m * pow(10.0, k));
            plmtex("lv", 0.5, (y - lo) / (hi - lo), 1.0, buf);
        }
}

/* ================================================================ legends */

#define LEGEND_MAX 16
#define LEGEND_SYMBOL_W 0.045    /* width of the line/symbol sample, fraction of the viewport */

/* Estimated printed width of PLplot text in mm at `rel` times the default height: about 0.8
 * character heights per character (DejaVu Sans), escapes (#d, #u, ...) not counted. */
static double text_mm(const char *s, double rel) {
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        if (*p == '#' && p[1]) { if (p[1] == '#') chars++; p++; continue; }
        if ((*p & 0xC0) != 0x80) chars++;    /* count UTF-8 code points */
    }
    return 0.75 * (double)chars * CHAR_MM * font_scale * rel;
}

/* Columns that fit n items side by side in a viewport vp_w wide (fraction of the page width):
 * pllegend gives every column the width of the longest label. */
static int legend_cols(const PlotLegendItem *items, int n, double vp_w, double rel) {
    double page_mm = page_w * 25.4 / 72.0, vp_mm = vp_w * page_mm, longest = 0.0;
    for (int i = 0; i < n; i++) longest = fmax(longest, text_mm(items[i].label, rel));
    double col_mm = LEGEND_SYMBOL_W * vp_mm + 4.0 * CHAR_MM * font_scale * rel + longest;
    int cols = (int)(0.97 * vp_mm / col_mm);
    if (cols < 1) cols = 1;
    if (cols > n) cols = n;
    int rows = (n + cols - 1) / cols;
    return (n + rows - 1) / rows;    /* balance: the fewest columns giving that many rows */
}

int plot_legend_rows(const PlotLegendItem *items, int n, double vp_w, double rel) {
    if (n <= 0) return 0;
    if (n > LEGEND_MAX) n = LEGEND_MAX;
    int cols = legend_cols(items, n, vp_w, rel);
    return (n + cols - 1) / cols;
}

/* plot_legend / plot_legend_right: above the viewport in balanced columns, or right of it in one. */
static void legend_draw(const PlotLegendItem *items, int n, double rel, bool right) {
    PLINT opt[LEGEND_MAX], tcol[LEGEND_MAX], lcol[LEGEND_MAX], lsty[LEGEND_MAX];
    PLINT scol[LEGEND_MAX], snum[LEGEND_MAX], bcol[LEGEND_MAX], bpat[LEGEND_MAX];
    PLFLT lwid[LEGEND_MAX], sscale[LEGEND_MAX], bscale[LEGEND_MAX], bwid[LEGEND_MAX];
    const char *text[LEGEND_MAX], *sym[LEGEND_MAX];
    PLFLT w, h, vx0, vx1, vy0, vy1;
    if (n <= 0) return;
    if (n > LEGEND_MAX) n = LEGEND_MAX;
    for (int i = 0; i < n; i++) {
        switch (items[i].kind) {
        case PL_ITEM_LINE: opt[i] = PL_LEGEND_LINE; break;
        case PL_ITEM_DOT: opt[i] = PL_LEGEND_SYMBOL; break;
        case PL_ITEM_LINE_DOT: opt[i] = PL_LEGEND_LINE | PL_LEGEND_SYMBOL; break;
        default: opt[i] = PL_LEGEND_COLOR_BOX; break;
        }
        text[i] = items[i].label;
        tcol[i] = PC_FG;
        lcol[i] = scol[i] = bcol[i] = items[i].color;
        lsty[i] = items[i].line_style > 0 ? items[i].line_style : 1;
        lwid[i] = 2.5 * font_scale;
        sscale[i] = 1.0;
        snum[i] = 1;
        sym[i] = items[i].glyph ? items[i].glyph : "●";
        bpat[i] = 0;
        bscale[i] = 0.8;
        bwid[i] = 1.0;
    }
    vpd(&vx0, &vx1, &vy0, &vy1);
    int cols = right ? 1 : legend_cols(items, n, vx1 - vx0, rel);
    int rows = (n + cols - 1) / cols;
    plot_chr(rel);
    /* Above: 0.7 characters over the frame, clear of a tick label centred on its top edge.
     * Right: one character right of the frame (no tick labels there), top-aligned. */
    double off = LEGEND_GAP_EM * plot_em_y() / (vy1 - vy0), offx = plot_em_x() / (vx1 - vx0);
    pllegend(&w, &h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX | PL_LEGEND_ROW_MAJOR,
             right ? PL_POSITION_RIGHT | PL_POSITION_TOP | PL_POSITION_OUTSIDE : PL_POSITION_TOP | PL_POSITION_OUTSIDE,
             right ? offx : 0.0, right ? 0.0 : off,
             LEGEND_SYMBOL_W, PC_BG, PC_LIGHT, 1, rows, cols, n, opt,
             0.8, 1.0, 2.0, 0.0, tcol, text,
             bcol, bpat, bscale, bwid, lcol, lsty, lwid, scol, sscale, snum, sym);
    double *lb = plot_geom()->legend, vw = vx1 - vx0, vh = vy1 - vy0;
    lb[0] = right ? vx1 + vw * offx : vx0 + vw * 0.5 * (1.0 - w);
    lb[1] = lb[0] + vw * w;
    lb[2] = right ? vy1 - vh * h : vy1 + vh * off;
    lb[3] = lb[2] + vh * h;
    plot_chr(1.0);
    pllsty(1);
    plcol0(PC_FG);
}

void plot_legend(const PlotLegendItem *items, int n, double rel) { legend_draw(items, n, rel, false); }
void plot_legend_right(const PlotLegendItem *items, int n, double rel) { legend_draw(items, n, rel, true); }

double plot_legend_width_em(const PlotLegendItem *items, int n, double rel) {
    double longest = 0.0;
    for (int i = 0; i < n && i < LEGEND_MAX; i++) longest = fmax(longest, text_mm(items[i].label, rel));
    /* the sample (LEGEND_SYMBOL_W of a viewport of about 0.75 of the page), text offset, margins */
    double page_mm = page_w * 25.4 / 72.0, em = CHAR_MM * font_scale;
    return (LEGEND_SYMBOL_W * 0.75 * page_mm + longest) / em + 3.5 * rel + 1.0;
}

void plot_dots(size_t n, const double *x, const double *y, double rel) { plot_marks(n, x, y, rel, "●"); }

/* ================================================================ axes */

double plot_nice_step(double range, int target) {
    if (!(range > 0) || target < 1) return 1.0;
    double raw = range / target, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    double nice = f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 2.5 ? 2.5 : f <= 5.0 ? 5.0 : 10.0;
    return nice * mag;
}

double plot_whole_step(double range, int target) {
    double s = plot_nice_step(range, target);
    return s < 1.0 ? 1.0 : floor(s);
}

/* ================================================================ layout record */

static PlotGeom geom;

const PlotGeom *plot_last_geom(void) { return &geom; }
PlotGeom *plot_geom(void) { return &geom; }

void plot_geom_data_area(bool logy) {
    vpd(&geom.vp[0], &geom.vp[1], &geom.vp[2], &geom.vp[3]);
    plgvpw(&geom.win[0], &geom.win[1], &geom.win[2], &geom.win[3]);
    geom.logy = logy;
}

void plot_page_xy(double x, double y, double *px, double *py) {
    PLFLT v[4], w[4];
    vpd(&v[0], &v[1], &v[2], &v[3]);
    plgvpw(&w[0], &w[1], &w[2], &w[3]);
    *px = v[0] + (x - w[0]) / (w[1] - w[0]) * (v[1] - v[0]);
    *py = v[2] + (y - w[2]) / (w[3] - w[2]) * (v[3] - v[2]);
}

/* ================================================================ log axes */

/* Ticks at m * 10^k (m from the mantissa set) inside lo..hi. */
static int log_ticks_set(double lo, double hi, const double *set, int nset, double *vals, int cap) {
    int n = 0;
    for (double k = floor(lo) - 1; k <= ceil(hi); k += 1.0)
        for (int j = 0; j < nset; j++) {
            double v = set[j] * pow(10.0, k), y = log10(v);
            if (y >= lo - 1e-9 && y <= hi + 1e-9 && n < cap) vals[n++] = v;
        }
    return n;
}

int plot_log_ticks(double lo, double hi, double *vals, int cap) {
    if (!(hi > lo) || hi - lo > 3.01 || cap < 1) return 0;
    static const double s1[] = {1}, s3[] = {1, 2, 5}, s4[] = {1, 2, 3, 5}, s9[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    static const struct { const double *v; int n; } sets[] = {{s1, 1}, {s3, 3}, {s4, 4}, {s9, 9}};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        int n = log_ticks_set(lo, hi, sets[i].v, sets[i].n, vals, cap);
        if (n >= (hi - lo >= 2.0 ? 3 : 4)) return n;
    }
    /* Less than a third of a decade: round linear steps inside it. */
    double a = pow(10.0, lo), b = pow(10.0, hi), st = plot_nice_step(b - a, 4);
    int n = 0;
    for (double v = ceil(a / st - 1e-9) * st; v <= b * (1 + 1e-12) && n < cap; v += st) vals[n++] = v;
    return n;
}

/* A log tick's label: %g when it takes at most 4 characters (0.01 .. 9999), else 10^k for a
 * power of ten and "2e-3" style for others, so labels keep clear of the axis title. */
static void log_label(double v, char *buf, size_t cap) {
    snprintf(buf, cap, "%.3g", v);
    if (strlen(buf) <= 4) return;
    int k = (int)floor(log10(v) + 1e-9);
    double m = v / pow(10.0, k);
    if (fabs(m - 1.0) < 1e-6) snprintf(buf, cap, "10#u%d#d", k);
    else snprintf(buf, cap, "%.2ge%d", m, k);
}

/* plot_log_axis / plot_log_xaxis: the ticks of lo..hi labelled on the left (bottom) axis, a light
 * grid line at each across c0..c1, recorded as the y (x) ticks. */
static int log_axis(double lo, double hi, double c0, double c1, bool xaxis) {
    double v[GEOM_TICKS];
    int n = plot_log_ticks(lo, hi, v, GEOM_TICKS);
    char buf[32];
    for (int i = 0; i < n; i++) {
        double t = log10(v[i]);
        plcol0(PC_LIGHT);
        if (xaxis) pljoin(t, c0, t, c1);
        else pljoin(c0, t, c1, t);
        plcol0(PC_FG);
        log_label(v[i], buf, sizeof buf);
        if (xaxis) plmtex("b", 1.6, (t - lo) / (hi - lo), 0.5, buf);
        else plmtex("lv", 0.5, (t - lo) / (hi - lo), 1.0, buf);
        (xaxis ? geom.xticks : geom.yticks)[i] = v[i];
    }
    *(xaxis ? &geom.n_xticks : &geom.n_yticks) = n;
    return n;
}

int plot_log_axis(double lo, double hi, double x0, double x1) { return log_axis(lo, hi, x0, x1, false); }
int plot_log_xaxis(double lo, double hi, double y0, double y1) { return log_axis(lo, hi, y0, y1, true); }

/* ================================================================ markers */

const char *plot_marker_glyph(int i) {
    static const char *const g[] = {"●", "■", "▲", "◆", "▼", "✚"};
    return g[(i < 0 ? 0 : i) % (int)(sizeof g / sizeof g[0])];
}

void plot_marks(size_t n, const double *x, const double *y, double rel, const char *glyph) {
    PLFLT def, cur;
    plgchr(&def, &cur);
    plot_chr(rel);
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) plstring(1, &x[i], &y[i], glyph);
    plschr(0.0, cur / def);
}

/* ================================================================ checks */

int plot_check_finite(const double *v, size_t n, const char *what) {
    if (!v) return al_err("plot: no %s given", what);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return al_err("plot: %s[%zu] is %g; the figure needs finite values", what, i, v[i]);
    return AL_OK;
}
