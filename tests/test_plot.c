/* test_plot.c -- every figure kind of plots/ renders headlessly to PNG, SVG and PDF.
 *
 * PNGs are checked for the requested size (IHDR) and decoded (libcairo, loaded with dlopen: it
 * is already on the machine as PLplot's cairo driver dependency) to count non-white pixels and
 * the palette colours each kind must show. SVG and PDF are checked for their headers and page
 * size. Errors (unwritable path, unknown extension, no display, bad data) must come back as
 * al_err messages with no prompt (stdin is /dev/null) and no console output (stderr is
 * captured while rendering and must stay empty). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include "check.h"
#include "plot.h"
#include "plot_int.h"      /* plot_whole_step */

/* ================================================================ PNG decoding (libcairo) */

static struct {
    void *lib;
    void *(*from_png)(const char *);
    int (*status)(void *);
    int (*width)(void *), (*height)(void *), (*stride)(void *);
    unsigned char *(*data)(void *);
    void (*destroy)(void *);
} cairo;

static bool cairo_load(void) {
    if (cairo.lib) return true;
    cairo.lib = dlopen("libcairo.so.2", RTLD_NOW);
    if (!cairo.lib) return false;
    *(void **)&cairo.from_png = dlsym(cairo.lib, "cairo_image_surface_create_from_png");
    *(void **)&cairo.status = dlsym(cairo.lib, "cairo_surface_status");
    *(void **)&cairo.width = dlsym(cairo.lib, "cairo_image_surface_get_width");
    *(void **)&cairo.height = dlsym(cairo.lib, "cairo_image_surface_get_height");
    *(void **)&cairo.stride = dlsym(cairo.lib, "cairo_image_surface_get_stride");
    *(void **)&cairo.data = dlsym(cairo.lib, "cairo_image_surface_get_data");
    *(void **)&cairo.destroy = dlsym(cairo.lib, "cairo_surface_destroy");
    return cairo.from_png && cairo.status && cairo.width && cairo.height && cairo.stride && cairo.data &&
           cairo.destroy;
}

/* The palette colours the renderers use (plots/plot_common.c), and the heatmap ends. */
enum { C_BLUE, C_ORANGE, C_GREEN, C_VERMIL, C_PURPLE, C_BAND, C_RED_END, C_BLUE_END, C_N };
static const int COLOR[C_N][3] = {
    {0, 114, 178}, {230, 159, 0}, {0, 158, 115}, {213, 94, 0}, {204, 121, 167}, {204, 227, 240},
    {178, 24, 43}, {33, 102, 172},
};

typedef struct {
    int w, h;                 /* from the IHDR chunk */
    size_t pixels, nonwhite;  /* decoded */
    size_t count[C_N];        /* pixels within a small distance of each colour */
    bool decoded;
} PngInfo;

/* A decoded PNG (cairo's ARGB32 image surface). */
typedef struct {
    void *s;
    int w, h, stride;
    const unsigned char *d;
} Img;

static bool img_open(const char *path, Img *im) {
    memset(im, 0, sizeof *im);
    if (!cairo_load()) return false;
    im->s = cairo.from_png(path);
    if (cairo.status(im->s) != 0) { cairo.destroy(im->s); im->s = NULL; return false; }
    im->w = cairo.width(im->s), im->h = cairo.height(im->s), im->stride = cairo.stride(im->s);
    im->d = cairo.data(im->s);
    return true;
}

static void img_close(Img *im) {
    if (im->s) cairo.destroy(im->s);
    im->s = NULL;
}

static void img_rgb(const Img *im, int x, int y, int rgb[3]) {
    uint32_t p;
    memcpy(&p, im->d + (size_t)y * im->stride + 4 * (size_t)x, 4);
    rgb[0] = (p >> 16) & 255, rgb[1] = (p >> 8) & 255, rgb[2] = p & 255;
}

static bool near_rgb(const int a[3], const int b[3]) { return abs(a[0] - b[0]) + abs(a[1] - b[1]) + abs(a[2] - b[2]) <= 24; }

/* Pixels within page box (x0, x1, y0, y1: page fractions, y up) whose colour is near rgb. */
static size_t img_count(const Img *im, const double box[4], const int rgb[3]) {
    size_t n = 0;
    int x0 = (int)floor(box[0] * im->w), x1 = (int)ceil(box[1] * im->w);
    int y0 = (int)floor((1.0 - box[3]) * im->h), y1 = (int)ceil((1.0 - box[2]) * im->h);
    for (int y = y0 < 0 ? 0 : y0; y < y1 && y < im->h; y++)
        for (int x = x0 < 0 ? 0 : x0; x < x1 && x < im->w; x++) {
            int c[3];
            img_rgb(im, x, y, c);
            n += near_rgb(c, rgb);
        }
    return n;
}

/* Reads the PNG's IHDR size; decodes it when libcairo is at hand. */
static bool png_read(const char *path, PngInfo *pi) {
    memset(pi, 0, sizeof *pi);
    unsigned char hdr[24];
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t got = fread(hdr, 1, sizeof hdr, f);
    fclose(f);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (got != sizeof hdr || memcmp(hdr, sig, 8) || memcmp(hdr + 12, "IHDR", 4)) return false;
    pi->w = (hdr[16] << 24) | (hdr[17] << 16) | (hdr[18] << 8) | hdr[19];
    pi->h = (hdr[20] << 24) | (hdr[21] << 16) | (hdr[22] << 8) | hdr[23];
    if (!cairo_load()) return true;
    Img im;
    if (!img_open(path, &im)) return false;
    for (int y = 0; y < im.h; y++)
        for (int x = 0; x < im.w; x++) {
            int c[3];
            img_rgb(&im, x, y, c);
            pi->pixels++;
            if (c[0] < 245 || c[1] < 245 || c[2] < 245) pi->nonwhite++;
            for (int k = 0; k < C_N; k++) pi->count[k] += near_rgb(c, COLOR[k]);
        }
    img_close(&im);
    pi->decoded = true;
    return true;
}

/* ================================================================ file checks */

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    *n = fread(buf, 1, (size_t)len, f);
    buf[*n] = '\0';
    fclose(f);
    return buf;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Renders one figure through fn to base.png / .svg / .pdf at w x h (0: the default) and checks
 * each file, expecting a page of ew x eh. Returns the PNG's info for colour checks. */
typedef int (*render_fn)(const PlotOpts *o, const void *ctx);

static const char *dir;

static PngInfo render_all(const char *base, render_fn fn, const void *ctx, int w, int h, int ew, int eh) {
    static const char *ext[3] = {"png", "svg", "pdf"};
    PngInfo pi = {0};
    for (int e = 0; e < 3; e++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.%s", dir, base, ext[e]);
        PlotOpts o = {.path = path, .width = w, .height = h};
        CHECK_OK(fn(&o, ctx));
        CHECK(exists(path), "%s was not written", path);
        if (e == 0) {
            CHECK(png_read(path, &pi), "%s is not a readable PNG", path);
            CHECK(pi.w == ew && pi.h == eh, "%s is %dx%d, want %dx%d", path, pi.w, pi.h, ew, eh);
            if (pi.decoded)
                CHECK(pi.nonwhite > pi.pixels / 100, "%s is blank: %zu of %zu pixels non-white", path,
                      pi.nonwhite, pi.pixels);
        } else {
            size_t n = 0;
            char *txt = slurp(path, &n);
            CHECK(txt != NULL, "cannot read %s", path);
            if (!txt) continue;
            char want[96];
            if (e == 1) {
                CHECK(strncmp(txt, "<?xml", 5) == 0 && strstr(txt, "<svg"), "%s is not SVG", path);
                /* the page in px, as the PNG's (PLplot's svg driver writes pt: 4/3 larger), and a
                 * viewBox of the same numbers, so user units are pixels in every renderer */
                snprintf(want, sizeof want, "width=\"%dpx\"", ew);      /* PLplot's svg driver: one per line */
                CHECK(strstr(txt, want) != NULL, "%s lacks %s", path, want);
                snprintf(want, sizeof want, "height=\"%dpx\"", eh);
                CHECK(strstr(txt, want) != NULL, "%s lacks %s", path, want);
                snprintf(want, sizeof want, "viewBox=\"0 0 %d %d\"", ew, eh);
                CHECK(strstr(txt, want) != NULL, "%s lacks %s", path, want);
                CHECK(strstr(txt, "pt\"") == NULL || strstr(txt, "pt\"") > strstr(txt, "viewBox"),
                      "%s: a size in pt is left in its header", path);
                CHECK(strstr(txt, "<text") != NULL, "%s: its text is not text (<text> elements)", path);
                CHECK(n > 5000, "%s is nearly empty (%zu bytes)", path, n);
            } else {
                snprintf(want, sizeof want, "MediaBox [ 0 0 %d %d ]", ew, eh);
                CHECK(strncmp(txt, "%PDF-", 5) == 0, "%s is not PDF", path);
                CHECK(memmem(txt, n, "%%EOF", 5) != NULL, "%s has no %%%%EOF", path);
                CHECK(memmem(txt, n, want, strlen(want)) != NULL, "%s lacks %s", path, want);
                CHECK(n > 2000, "%s is nearly empty (%zu bytes)", path, n);
            }
            free(txt);
        }
    }
    return pi;
}

/* ================================================================ test data */

#define NS 128
static double sigma[NS], energy[NS];
static PlotTauMark marks[2];

/* A spectrum with an elbow at 64 (seed 1.3's Q head), its cumulative energy and tau marks. */
static void make_spectrum(void) {
    double tot = 0, c = 0;
    for (int i = 0; i < NS; i++) {
        sigma[i] = i < 64 ? 3.0 * exp(-0.02 * i) : 0.05 * exp(-0.05 * (i - 64));
        tot += sigma[i] * sigma[i];
    }
    for (int i = 0; i < NS; i++) { c += sigma[i] * sigma[i]; energy[i] = c / tot; }
    const double taus[2] = {0.99, 0.999};
    for (int k = 0; k < 2; k++) {
        size_t r = 0;
        while (energy[r] < taus[k]) r++;
        marks[k] = (PlotTauMark){taus[k], r + 1};
    }
}

#define NL 61
#define NH 128
static int ra[NL][NH], rb[NL][NH], rf[NL][NH];
static PlotLayerRanks layers[NL];
static const PlotRanksInfo info = {.model = "demo#r1", .name_a = "V", .name_b = "O", .name_fused = "VO",
                                   .tau = 0.999, .head_dim = 128};

/* 61 layers like seed 2.4: early layers half bottleneck (low V), half low only when fused. */
static void make_ranks(void) {
    unsigned s = 12345;
    for (int l = 0; l < NL; l++) {
        for (int h = 0; h < NH; h++) {
            s = s * 1103515245u + 12345u;
            int noise = (int)((s >> 16) % 16);
            rb[l][h] = 110 + noise;
            bool early = l < 15;
            ra[l][h] = early && h % 2 == 0 ? 10 + noise : 100 + noise;
            rf[l][h] = early ? (h % 2 == 0 ? 8 + noise : 30 + noise) : 112 + noise;
        }
        layers[l] = (PlotLayerRanks){.layer = l, .n_heads = NH, .rank_a = ra[l], .rank_b = rb[l], .rank_fused = rf[l]};
    }
}

/* ================================================================ render adapters */

static int r_spectrum(const PlotOpts *o, const void *ctx) { (void)ctx; return plot_spectrum(o, sigma, NS); }
static int r_spectrum_log(const PlotOpts *o, const void *ctx) {
    (void)ctx;
    PlotOpts p = *o;
    p.logy = true;
    return plot_spectrum(&p, sigma, NS);
}
static int r_energy(const PlotOpts *o, const void *ctx) { return plot_energy(o, sigma, energy, NS, marks, ctx ? 2 : 0); }
static int r_ranks(const PlotOpts *o, const void *ctx) { (void)ctx; return plot_ranks(o, &info, &layers[4]); }
static int r_grid(const PlotOpts *o, const void *ctx) { return plot_ranks_grid(o, &info, layers, *(const size_t *)ctx); }
static int r_bylayer(const PlotOpts *o, const void *ctx) { (void)ctx; return plot_ranks_by_layer(o, &info, layers, NL); }
static int r_heatmap(const PlotOpts *o, const void *ctx) { return plot_heatmap(o, ctx); }
static int r_keynorms(const PlotOpts *o, const void *ctx) {
    (void)ctx;
    enum { NP = 256 };
    static double re[3][NP], im[3][NP];
    for (int i = 0; i < NP; i++) {
        re[0][i] = 1.5 + ((i * 37) % 11) / 5.0 + (i % 32 < 3 ? 5.0 : 0.0);
        im[0][i] = 0.9 * re[0][i];
        re[1][i] = 12.0 * exp(-i / 12.0) + 0.4; im[1][i] = 11.0 * exp(-i / 12.0) + 0.4;
        re[2][i] = 14.0 * exp(-i / 8.0) + 0.2;  im[2][i] = 13.0 * exp(-i / 8.0) + 0.2;
    }
    PlotKeyNorms v[3] = {{"original", re[0], im[0]}, {"RoRoPE", re[1], im[1]}, {"RoRoPE + 4D FreqFold", re[2], im[2]}};
    return plot_key_norms(o, v, 3, NP, 32);
}
static int r_curves(const PlotOpts *o, const void *ctx) {
    (void)ctx;
    static double x[20], y[3][20];
    for (int i = 0; i < 20; i++) {
        x[i] = 5.0 * i;
        y[0][i] = 2 + 4 * i * i / 400.0;
        y[1][i] = 2 + 1.5 * i / 20.0;
        y[2][i] = i == 7 ? NAN : 2 + 0.5 * sin(i);     /* a gap */
    }
    PlotCurve c[3] = {{.label = "MHA2MLA", .x = x, .y = y[0], .n = 20, .points = true},
                      {.label = "RoRoPE", .x = x, .y = y[1], .n = 20},
                      {.label = "gap #7", .x = x, .y = y[2], .n = 20}};
    PlotOpts p = *o;
    p.xlabel = "RoPE dims removed (%)";
    p.ylabel = "log perplexity";
    return plot_curves(&p, c, 3);
}

/* ================================================================ tests */

static void test_kinds(void) {
    PngInfo pi;
    size_t n61 = NL, n4 = 4;

    pi = render_all("spectrum", r_spectrum, NULL, 0, 0, 1000, 700);
    if (pi.decoded) CHECK(pi.count[C_BLUE] > 300, "spectrum: %zu blue pixels", pi.count[C_BLUE]);
    pi = render_all("spectrum_log", r_spectrum_log, NULL, 640, 480, 640, 480);
    if (pi.decoded) CHECK(pi.count[C_BLUE] > 200, "log spectrum: %zu blue pixels", pi.count[C_BLUE]);

    /* energy: the tau marks (green, vermilion) appear only when marks are given. */
    pi = render_all("energy", r_energy, "marks", 0, 0, 1000, 700);
    PngInfo plain = render_all("energy_nomarks", r_energy, NULL, 0, 0, 1000, 700);
    if (pi.decoded) {
        CHECK(pi.count[C_BLUE] > 300 && pi.count[C_ORANGE] > 300, "energy: curves missing (%zu blue, %zu orange)",
              pi.count[C_BLUE], pi.count[C_ORANGE]);
        CHECK(pi.count[C_GREEN] > 200 && pi.count[C_VERMIL] > 200, "energy: tau marks missing (%zu, %zu)",
              pi.count[C_GREEN], pi.count[C_VERMIL]);
        CHECK(plain.count[C_GREEN] < 20 && plain.count[C_VERMIL] < 20,
              "energy without marks still shows mark colours (%zu, %zu)", plain.count[C_GREEN], plain.count[C_VERMIL]);
    }

    pi = render_all("ranks", r_ranks, NULL, 0, 0, 1000, 700);
    if (pi.decoded)
        CHECK(pi.count[C_ORANGE] > 1000 && pi.count[C_BLUE] > 1000 && pi.count[C_GREEN] > 300,
              "ranks: %zu V (orange), %zu O (blue), %zu fused (green) pixels", pi.count[C_ORANGE],
              pi.count[C_BLUE], pi.count[C_GREEN]);

    pi = render_all("grid61", r_grid, &n61, 0, 0, 1560, 1320);   /* 8 x 8 panels: 120 + 180 x 8, 200 + 140 x 8 */
    if (pi.decoded) {
        CHECK(pi.count[C_ORANGE] > 5000 && pi.count[C_BLUE] > 5000 && pi.count[C_GREEN] > 2000,
              "grid: %zu orange, %zu blue, %zu green pixels", pi.count[C_ORANGE], pi.count[C_BLUE], pi.count[C_GREEN]);
    }
    /* Every one of the 61 x 128 V dots is in the SVG, drawn in orange (#E69F00). */
    {
        char path[1024];
        size_t n = 0, hits = 0;
        snprintf(path, sizeof path, "%s/grid61.svg", dir);
        char *txt = slurp(path, &n);
        for (char *p = txt; p && (p = strstr(p, "fill=\"#E69F00\"")); p++) hits++;
        CHECK(hits >= NL * NH, "grid SVG has %zu orange marks, want at least %d", hits, NL * NH);
        free(txt);
    }
    pi = render_all("grid4", r_grid, &n4, 1200, 800, 1200, 800);
    render_all("bylayer", r_bylayer, NULL, 0, 0, 1000, 700);

    /* heatmap: the colour map is centred on 0 -- the upper half +1 (red), the lower half -1
     * (blue) give equal red and blue areas; an all-positive matrix shows no blue. */
    Mat *m = mat_new(64, 96), *pos = mat_new(64, 96);
    for (size_t i = 0; i < 64; i++)
        for (size_t j = 0; j < 96; j++) {
            *mat_at(m, i, j) = i < 32 ? 1.0f : -1.0f;
            *mat_at(pos, i, j) = (float)(0.5 + 0.5 * (double)j / 96.0);
        }
    pi = render_all("heatmap", r_heatmap, m, 0, 0, 1000, 700);
    if (pi.decoded) {
        CHECK(pi.count[C_RED_END] > 10000 && pi.count[C_BLUE_END] > 10000, "heatmap: %zu red, %zu blue pixels",
              pi.count[C_RED_END], pi.count[C_BLUE_END]);
        double ratio = (double)pi.count[C_RED_END] / (double)(pi.count[C_BLUE_END] ? pi.count[C_BLUE_END] : 1);
        CHECK(ratio > 0.9 && ratio < 1.1, "heatmap: red / blue area ratio %.3f, want about 1", ratio);
    }
    pi = render_all("heatmap_pos", r_heatmap, pos, 0, 0, 1000, 700);
    if (pi.decoded)
        CHECK(pi.count[C_RED_END] > 1000 && pi.count[C_BLUE_END] < 600,
              "positive heatmap: %zu red, %zu blue pixels (blue only in the colour bar)",
              pi.count[C_RED_END], pi.count[C_BLUE_END]);
    mat_free(m);
    mat_free(pos);

    /* A matrix larger than the figure is pooled, and a lone outlier does not wash it out. */
    Mat *big = mat_new(512, 7168);
    for (size_t i = 0; i < big->rows; i++)
        for (size_t j = 0; j < big->cols; j++) *mat_at(big, i, j) = (float)(0.01 * sin(0.05 * i + 0.003 * j));
    *mat_at(big, 100, 5000) = -3.0f;
    pi = render_all("heatmap_big", r_heatmap, big, 0, 0, 1000, 700);
    if (pi.decoded)
        CHECK(pi.count[C_RED_END] > 20000 && pi.count[C_BLUE_END] > 20000,
              "pooled heatmap washed out: %zu red, %zu blue", pi.count[C_RED_END], pi.count[C_BLUE_END]);
    mat_free(big);

    pi = render_all("keynorms", r_keynorms, NULL, 0, 0, 1000, 700);
    if (pi.decoded)
        CHECK(pi.count[C_BLUE] > 500 && pi.count[C_ORANGE] > 200 && pi.count[C_GREEN] > 200,
              "key norms: %zu, %zu, %zu pixels of the three variants", pi.count[C_BLUE], pi.count[C_ORANGE],
              pi.count[C_GREEN]);
    pi = render_all("curves", r_curves, NULL, 0, 0, 1000, 700);
    if (pi.decoded)
        CHECK(pi.count[C_BLUE] > 300 && pi.count[C_ORANGE] > 300 && pi.count[C_GREEN] > 200,
              "curves: %zu, %zu, %zu pixels", pi.count[C_BLUE], pi.count[C_ORANGE], pi.count[C_GREEN]);
}

static void test_errors(void) {
    char path[1200], file[1024];
    /* A folder that cannot be made (a regular file stands in the way): an error, no prompt,
     * nothing written. Works as root too, unlike permission bits. */
    snprintf(file, sizeof file, "%s/not_a_dir", dir);
    FILE *f = fopen(file, "w");
    fputs("x", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/sub/fig.png", file);
    PlotOpts o = {.path = path};
    CHECK_ERR(plot_spectrum(&o, sigma, NS), "not a folder");
    CHECK(!exists(path), "%s exists after a failed plot", path);
    /* The path is a folder. */
    snprintf(path, sizeof path, "%s/folder.png", dir);
    mkdir(path, 0777);
    o.path = path;
    CHECK_ERR(plot_spectrum(&o, sigma, NS), "is a folder");
    /* /proc refuses new files even to root. */
    o.path = "/proc/attnlab-figure.png";
    CHECK_ERR(plot_spectrum(&o, sigma, NS), "cannot write");
    /* Extensions. */
    snprintf(path, sizeof path, "%s/fig.jpg", dir);
    o.path = path;
    CHECK_ERR(plot_spectrum(&o, sigma, NS), "unknown extension");
    o.path = NULL;
    CHECK_ERR(plot_spectrum(&o, sigma, NS), "no output file");
    /* A window with no display, and with a display nobody answers (PLplot's xcairo would call
     * exit() there: the check must come first). */
    unsetenv("DISPLAY");
    PlotOpts w = {.window = true};
    CHECK_ERR(plot_spectrum(&w, sigma, NS), "no display");
    setenv("DISPLAY", ":9999", 1);
    CHECK_ERR(plot_spectrum(&w, sigma, NS), "cannot open the X display");
    unsetenv("DISPLAY");
    /* Sizes. */
    snprintf(path, sizeof path, "%s/tiny.png", dir);
    PlotOpts t = {.path = path, .width = 50, .height = 50};
    CHECK_ERR(plot_spectrum(&t, sigma, NS), "width must be");
    int pw, ph;
    CHECK_OK(plot_parse_size("1200x800", &pw, &ph));
    CHECK(pw == 1200 && ph == 800, "parsed %dx%d", pw, ph);
    CHECK_ERR(plot_parse_size("1200", &pw, &ph), "expected WxH");
    CHECK_ERR(plot_parse_size("12x8", &pw, &ph), "width must be");

    /* Bad data. */
    snprintf(path, sizeof path, "%s/bad.png", dir);
    PlotOpts b = {.path = path};
    double nan_sigma[3] = {1.0, NAN, 0.5};
    CHECK_ERR(plot_spectrum(&b, nan_sigma, 3), "sigma[1]");
    CHECK_ERR(plot_spectrum(&b, sigma, 0), "no singular values");
    PlotTauMark bad_mark = {0.999, NS + 1};
    CHECK_ERR(plot_energy(&b, sigma, energy, NS, &bad_mark, 1), "outside 1..128");
    PlotLayerRanks hole = layers[0];
    hole.rank_b = NULL;
    CHECK_ERR(plot_ranks(&b, &info, &hole), "lacks one of its three rank arrays");
    CHECK_ERR(plot_ranks_grid(&b, &info, layers, 0), "no layers");
    Mat *nanm = mat_new(4, 4);
    *mat_at(nanm, 2, 3) = NAN;
    CHECK_ERR(plot_heatmap(&b, nanm), "entry (2, 3)");
    mat_free(nanm);
    CHECK(!exists(path), "%s written by a failed plot", path);

    /* A missing folder is made. */
    snprintf(path, sizeof path, "%s/made/on/demand/fig.svg", dir);
    o.path = path;
    CHECK_OK(plot_spectrum(&o, sigma, NS));
    CHECK(exists(path), "%s not written", path);
}

/* No temporary files are left behind anywhere under dir (one level of subfolders is enough). */
static void test_no_temp_files(void) {
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t tmp = 0, files = 0;
    while (d && (e = readdir(d))) {
        files++;
        if (strstr(e->d_name, ".tmp")) { tmp++; fprintf(stderr, "left behind: %s\n", e->d_name); }
    }
    if (d) closedir(d);
    CHECK(files > 30, "only %zu files in %s", files, dir);
    CHECK(tmp == 0, "%zu temporary files left in %s", tmp, dir);
}

/* ================================================================ whole-number ticks */

/* Counts the tick labels of an SVG (the text of its <tspan>s, PLplot's svg driver writes each
 * character as &#xHH;) that are numbers, and those of them that are not whole numbers. */
static void svg_number_labels(const char *txt, int *numbers, int *fractional, char *bad, size_t cap) {
    *numbers = *fractional = 0;
    bad[0] = 0;
    for (const char *p = txt; (p = strstr(p, "<tspan")); p++) {
        const char *q = strchr(p, '>');
        if (!q) break;
        char lab[64];
        size_t n = 0;
        for (q++; *q && *q != '<' && n + 1 < sizeof lab; ) {
            unsigned c;
            int used = 0;
            if (sscanf(q, "&#x%x;%n", &c, &used) == 1 && used > 0) { lab[n++] = c < 128 ? (char)c : '?'; q += used; }
            else lab[n++] = *q++;
        }
        lab[n] = 0;
        char *end;
        double v = strtod(lab, &end);
        if (n == 0 || *end) continue;
        (*numbers)++;
        if (v != floor(v) || strchr(lab, '.')) {
            (*fractional)++;
            snprintf(bad + strlen(bad), cap - strlen(bad), " %s", lab);
        }
    }
}

/* Integer data (layers, ranks) get integer ticks: plot_whole_step, and the SVGs of ranks by layer
 * over 2 layers of head dim 10 (PLplot's own steps and plot_nice_step's 2.5 gave 0.5 and 2.5
 * ticks), and of two models whose medians lie between 4 and 6. */
static void test_whole_ticks(void) {
    for (int t = 2; t <= 8; t++)
        for (double r = 0.3; r < 5000; r *= 1.37) {
            double s = plot_whole_step(r, t);
            CHECK(s >= 1 && s == floor(s), "plot_whole_step(%g, %d) = %g: not a whole number >= 1", r, t, s);
            CHECK(s >= plot_nice_step(r, t) / 1.25 - 1e-9 || s == 1, "plot_whole_step(%g, %d) = %g: far below %g", r, t,
                  s, plot_nice_step(r, t));
        }
    CHECK(plot_whole_step(10, 4) == 2, "plot_whole_step(10, 4) = %g, want 2 (nice 2.5)", plot_whole_step(10, 4));
    static int fa[2][3] = {{3, 5, 7}, {4, 6, 9}}, fm[3][4] = {{4, 5, 5, 6}, {4, 4, 5, 6}, {5, 6, 6, 6}};
    PlotLayerRanks two[2], three[3];
    for (int l = 0; l < 2; l++) two[l] = (PlotLayerRanks){.layer = l, .n_heads = 3, .rank_a = fa[l], .rank_b = fa[l], .rank_fused = fa[l]};
    for (int l = 0; l < 3; l++) three[l] = (PlotLayerRanks){.layer = l, .n_heads = 4, .rank_a = fm[l], .rank_b = fm[l], .rank_fused = fm[l]};
    PlotRanksInfo in = info;
    in.head_dim = 10;
    PlotRanksModel mods[2] = {{.model = "a", .layers = two, .n_layers = 2, .head_dim = 10},
                              {.model = "b", .layers = three, .n_layers = 3, .head_dim = 10}};
    for (int k = 0; k < 2; k++) {
        char path[1024], bad[256];
        snprintf(path, sizeof path, "%s/whole%d.svg", dir, k);
        PlotOpts o = {.path = path};
        CHECK_OK(k == 0 ? plot_ranks_by_layer(&o, &in, two, 2)
                        : plot_ranks_by_layer_models(&o, &in, mods, 2, PLOT_RANK_MEDIAN));
        size_t n = 0;
        char *txt = slurp(path, &n);
        int numbers = 0, fractional = 0;
        if (txt) svg_number_labels(txt, &numbers, &fractional, bad, sizeof bad);
        CHECK(numbers >= 5, "%s: only %d numeric tick labels", path, numbers);
        CHECK(fractional == 0, "%s: %d tick labels are not whole numbers:%s", path, fractional, bad);
        free(txt);
    }
}

/* ================================================================ paper figures (issue 25 §7) */

/* PNG path in the test folder. */
static const char *png_path(const char *base) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s.png", dir, base);
    return path;
}

/* One default character height as a fraction of a w x h page (plot_common.c's rule). */
static double em_y_of(int w, int h) {
    double fs = fmin(w / 1000.0, h / 700.0);
    if (fs < 0.75) fs = 0.75;
    return 6.0 * fs / (h * 25.4 / 72.0);
}

/* The legend box of the last figure lies outside its data area (above it and clear of a tick
 * label centred on the frame's top, or right of it) and inside the page. */
static void check_legend_clear(const char *what, int w, int h) {
    const PlotGeom *g = plot_last_geom();
    const double *lb = g->legend, *vp = g->vp;
    CHECK(lb[1] > lb[0] && lb[3] > lb[2], "%s: no legend box recorded", what);
    bool above = lb[2] >= vp[3] + 0.55 * em_y_of(w, h), right = lb[0] >= vp[1];
    CHECK(above || right, "%s: legend [%.3f-%.3f] x [%.3f-%.3f] covers the data [%.3f-%.3f] x [%.3f-%.3f] or its top label",
          what, lb[0], lb[1], lb[2], lb[3], vp[0], vp[1], vp[2], vp[3]);
    CHECK(lb[0] >= 0 && lb[1] <= 1.0 && lb[2] >= 0 && lb[3] <= 1.0, "%s: legend leaves the page", what);
}

/* Log axes: fitted to the data (0.3-1.1 was drawn on 0.1-10), labelled at round values. */
static void test_log_axis_fit(void) {
    double v[GEOM_TICKS];
    int n = plot_log_ticks(log10(0.28), log10(1.2), v, GEOM_TICKS);
    CHECK(n >= 4, "0.28-1.2: %d log ticks", n);
    for (int i = 0; i < n; i++) CHECK(v[i] >= 0.28 && v[i] <= 1.2, "tick %g outside 0.28-1.2", v[i]);
    n = plot_log_ticks(-2.4, 0.1, v, GEOM_TICKS);
    CHECK(n >= 3 && n <= 12, "2.5 decades: %d ticks", n);
    n = plot_log_ticks(log10(0.50), log10(0.52), v, GEOM_TICKS);
    CHECK(n >= 2, "0.50-0.52: %d ticks (linear steps inside the decade)", n);
    for (int i = 0; i < n; i++) CHECK(v[i] >= 0.5 - 1e-12 && v[i] <= 0.52 + 1e-12, "tick %g outside 0.50-0.52", v[i]);
    CHECK(plot_log_ticks(-5, 0, v, GEOM_TICKS) == 0, "5 decades: PLplot's decade labels expected");

    /* compare-like data: six methods, errors 0.3 .. 1.1 by layer, long legend labels */
    static double x[4] = {0, 1, 2, 3}, y[6][4];
    static const char *lab[6] = {"farr: r_v 16 (error 0: exact, not drawn)", "transmla: R 64 + D 32 (FreqFold 1)",
                                 "kqsvd: R_K 24, R_V 24", "tpa-a: R_K 2, R_V 1", "tpa-b: R_K 24, R_V 24",
                                 "mean-pool: 1 KV head (of 2), 64 values"};
    PlotCurve c[6];
    for (int k = 0; k < 6; k++) {
        for (int i = 0; i < 4; i++) y[k][i] = 0.3 + 0.8 * ((k * 4 + i) % 7) / 6.0;
        c[k] = (PlotCurve){.label = lab[k], .x = x, .y = y[k], .n = 4, .points = true};
    }
    static const int sizes[3][2] = {{1000, 700}, {900, 600}, {1600, 700}};
    for (int z = 0; z < 3; z++) {
        PlotOpts o = {.path = png_path("paper_compare"), .logy = true, .x_whole = true,
                      .width = sizes[z][0], .height = sizes[z][1], .title = "compare", .subtitle = "s"};
        for (int nc = 3; nc <= 6; nc += 3) {
            CHECK_OK(plot_curves(&o, c, (size_t)nc));
            const PlotGeom *g = plot_last_geom();
            double lo = pow(10, g->win[2]), hi = pow(10, g->win[3]);
            CHECK(g->logy && lo > 0.2 && lo < 0.3 && hi > 1.1 && hi < 1.5,
                  "%dx%d: log y range %g-%g for data 0.3-1.1 (wanted fitted, 0.2-1.5 at most)", o.width, o.height, lo, hi);
            CHECK(g->n_yticks >= 4, "%dx%d: %d labelled y ticks", o.width, o.height, g->n_yticks);
            for (int i = 0; i < g->n_yticks; i++)
                CHECK(g->yticks[i] >= lo && g->yticks[i] <= hi, "y tick %g outside %g-%g", g->yticks[i], lo, hi);
            check_legend_clear(nc == 6 ? "compare, 6 curves" : "compare, 3 curves", o.width, o.height);
        }
    }
    /* linear axes were already fitted; the legend stays clear there too */
    PlotOpts o = {.path = png_path("paper_linear"), .title = "t"};
    CHECK_OK(plot_curves(&o, c, 6));
    CHECK(plot_last_geom()->win[2] > 0.2 && plot_last_geom()->win[3] < 1.2, "linear y range %g-%g",
          plot_last_geom()->win[2], plot_last_geom()->win[3]);
    check_legend_clear("linear, 6 curves", 1000, 700);
}

/* Energy: at tau 0.99 and 0.999 of one rank the marks are a decade apart on the log(1 - energy)
 * axis; on the linear axis they are concentric rings of different sizes. */
static void test_energy_marks(void) {
    enum { N = 32 };
    double sg[N], en[N], tot = 0, c = 0;
    for (int i = 0; i < N; i++) { sg[i] = i < 6 ? 3.0 - 0.01 * i : 0.0; tot += sg[i] * sg[i]; }
    for (int i = 0; i < N; i++) { c += sg[i] * sg[i]; en[i] = c / tot; }
    PlotTauMark mk[2] = {{0.99, 6}, {0.999, 6}};
    PlotOpts o = {.path = png_path("paper_energy_log"), .residual = true};
    CHECK_OK(plot_energy(&o, sg, en, N, mk, 2));
    const PlotGeom *g = plot_last_geom();
    CHECK(g->n_marks == 2, "log energy: %d marks recorded", g->n_marks);
    CHECK(fabs(g->mark[0][1] - g->mark[1][1]) > 0.05, "log energy: marks at page y %.3f and %.3f (same rank, want apart)",
          g->mark[0][1], g->mark[1][1]);
    CHECK(g->mark[0][1] > g->mark[1][1], "log energy: tau 0.99 (1 - tau = 0.01) must sit above 0.999");
    o.path = png_path("paper_energy_linear");
    o.residual = false;
    CHECK_OK(plot_energy(&o, sg, en, N, mk, 2));
    CHECK(g->n_marks == 2 && g->mark[0][2] > 1.3 * g->mark[1][2],
          "linear energy: coinciding marks of sizes %.2f and %.2f (want a visible ring)", g->mark[0][2], g->mark[1][2]);
    /* tau = 1 has no residual line: its mark sits on the axis floor, which stays at 1e-4 (0.01 / 100) */
    PlotTauMark one[2] = {{0.99, 6}, {1.0, 6}};
    o.residual = true;
    CHECK_OK(plot_energy(&o, sg, en, N, one, 2));
    CHECK(g->n_marks == 2 && fabs(g->mark[1][1] - g->vp[2]) < 1e-6, "tau = 1: mark at page y %.4f, the floor is %.4f",
          g->mark[1][1], g->vp[2]);
    double up = (g->mark[0][1] - g->vp[2]) / (g->vp[3] - g->vp[2]);     /* 1e-2 on 1e-4 .. 10^0.08: 2 / 4.08 */
    CHECK(fabs(up - 2.0 / 4.08) < 0.02, "tau = 1 stretched the axis: 0.99's mark at %.3f of the height, want %.3f", up,
          2.0 / 4.08);
    o.residual = false;
    /* different ranks: plain dots of one size */
    PlotTauMark apart[2] = {{0.5, 2}, {0.999, 6}};
    CHECK_OK(plot_energy(&o, sg, en, N, apart, 2));
    CHECK(g->mark[0][2] == g->mark[1][2], "different ranks: sizes %.2f and %.2f", g->mark[0][2], g->mark[1][2]);
}

/* Ranks by layer over models: a marker shape and a dash per model; normalize divides by the
 * head dim (8 and 32 here: y 0..1). Grids: x ticks are 0-based head positions. */
static void test_ranks_paper(void) {
    static int r8[3][4] = {{8, 8, 8, 8}, {2, 2, 2, 2}, {8, 8, 8, 8}}, r32[3][4] = {{32, 32, 32, 32}, {8, 8, 8, 8}, {32, 32, 32, 32}};
    PlotLayerRanks a[3], b[3];
    for (int l = 0; l < 3; l++) {
        a[l] = (PlotLayerRanks){.layer = l, .n_heads = 4, .rank_a = r8[l], .rank_b = r8[l], .rank_fused = r8[l]};
        b[l] = (PlotLayerRanks){.layer = l, .n_heads = 4, .rank_a = r32[l], .rank_b = r32[l], .rank_fused = r32[l]};
    }
    PlotRanksModel same[3] = {{.model = "demo-r1", .layers = b, .n_layers = 3, .head_dim = 32},
                              {.model = "demo-llama", .layers = b, .n_layers = 3, .head_dim = 32},
                              {.model = "demo-gpt2", .layers = b, .n_layers = 3, .head_dim = 32}};
    PlotOpts o = {.path = png_path("paper_models")};
    CHECK_OK(plot_ranks_by_layer_models(&o, &info, same, 3, PLOT_RANK_MAX));
    const PlotGeom *g = plot_last_geom();
    CHECK(g->n_series == 3, "models: %d series", g->n_series);
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++) {
            CHECK(g->series_marker[i] != g->series_marker[j], "models %d and %d share marker %d", i, j, g->series_marker[i]);
            CHECK(g->series_style[i] != g->series_style[j], "models %d and %d share line style %d", i, j, g->series_style[i]);
        }
    PlotRanksModel mixed[2] = {{.model = "hd8", .layers = a, .n_layers = 3, .head_dim = 8},
                               {.model = "hd32", .layers = b, .n_layers = 3, .head_dim = 32}};
    PlotRanksInfo in = info;
    in.normalize = true;
    CHECK_OK(plot_ranks_by_layer_models(&o, &in, mixed, 2, PLOT_RANK_MAX));
    CHECK(g->win[3] <= 1.1 && g->win[2] >= 0.0, "normalize: y %g-%g, want within 0..1.1", g->win[2], g->win[3]);
    CHECK_OK(plot_ranks_by_layer(&o, &in, b, 3));
    CHECK(g->win[3] <= 1.1, "normalize, one model: y up to %g", g->win[3]);
    in.normalize = false;
    CHECK_OK(plot_ranks_by_layer_models(&o, &in, mixed, 2, PLOT_RANK_MAX));
    CHECK(g->win[3] >= 32, "not normalized: y up to %g, want the ranks (32)", g->win[3]);

    static int r8h[4][8];
    PlotLayerRanks eight[4];
    for (int l = 0; l < 4; l++) {
        for (int h = 0; h < 8; h++) r8h[l][h] = 4 + h;
        eight[l] = (PlotLayerRanks){.layer = l, .n_heads = 8, .rank_a = r8h[l], .rank_b = r8h[l], .rank_fused = r8h[l]};
    }
    for (int by_head = 0; by_head < 2; by_head++) {
        PlotRanksInfo gi = info;
        gi.head_dim = 16;
        gi.by_head = by_head;
        o.path = png_path("paper_grid");
        CHECK_OK(plot_ranks_grid(&o, &gi, eight, 4));
        CHECK(g->n_xticks >= 2 && g->xticks[0] == 0 && g->xticks[g->n_xticks - 1] == 7,
              "grid (by_head %d): x ticks %g .. %g over 8 heads, want 0 .. 7", by_head,
              g->n_xticks ? g->xticks[0] : -1, g->n_xticks ? g->xticks[g->n_xticks - 1] : -1);
    }
}

/* ================================================================ what a reader reads off */

/* Page fraction of data x (y) in the last figure's data area (y in log10 units on a log axis). */
static double page_x(const PlotGeom *g, double x) { return g->vp[0] + (x - g->win[0]) / (g->win[1] - g->win[0]) * (g->vp[1] - g->vp[0]); }
static double page_y(const PlotGeom *g, double y) { return g->vp[2] + (y - g->win[2]) / (g->win[3] - g->win[2]) * (g->vp[3] - g->vp[2]); }

/* Ranks by layer on a hybrid's attention layers 1, 4 and 5 (2 and 3 are Mamba-2 blocks, absent
 * from the data): the x axis is the layer number, and nothing -- a line or the min..max band --
 * is drawn across layers 2-3, while the lines and the band join 4 and 5. */
static void test_bylayer_gaps(void) {
    static int r1[4] = {4, 10, 12, 30}, r4[4] = {2, 6, 8, 16}, r5[4] = {3, 7, 9, 18};
    PlotLayerRanks h[3] = {{.layer = 1, .n_heads = 4, .rank_a = r1, .rank_b = r1, .rank_fused = r1},
                           {.layer = 4, .n_heads = 4, .rank_a = r4, .rank_b = r4, .rank_fused = r4},
                           {.layer = 5, .n_heads = 4, .rank_a = r5, .rank_b = r5, .rank_fused = r5}};
    PlotRanksInfo in = info;
    in.head_dim = 32;
    const char *path = png_path("bylayer_hybrid");
    PlotOpts o = {.path = path};
    CHECK_OK(plot_ranks_by_layer(&o, &in, h, 3));
    const PlotGeom *g = plot_last_geom();
    CHECK(g->win[0] < 1 && g->win[0] > 0 && g->win[1] > 5 && g->win[1] < 6, "x window %g..%g: layers 1..5 with half a layer's room",
          g->win[0], g->win[1]);
    Img im;
    if (!img_open(path, &im)) return;
    double gap[4] = {page_x(g, 2.2), page_x(g, 2.8), g->vp[2], g->vp[3]}, run[4] = {page_x(g, 4.4), page_x(g, 4.6), g->vp[2], g->vp[3]};
    size_t lines = img_count(&im, gap, COLOR[C_VERMIL]) + img_count(&im, gap, COLOR[C_BLUE]) + img_count(&im, gap, COLOR[C_GREEN]);
    CHECK(lines == 0, "a line crosses the Mamba-2 layers 2-3: %zu max / median / min pixels there", lines);
    CHECK(img_count(&im, gap, COLOR[C_BAND]) == 0, "the min..max band spans layers 2-3: %zu band pixels there",
          img_count(&im, gap, COLOR[C_BAND]));
    CHECK(img_count(&im, run, COLOR[C_VERMIL]) > 0 && img_count(&im, run, COLOR[C_BAND]) > 100,
          "layers 4-5: the max line (%zu pixels) and the band (%zu) join them", img_count(&im, run, COLOR[C_VERMIL]),
          img_count(&im, run, COLOR[C_BAND]));
    img_close(&im);
}

/* The density figure's legend shows the colour its bars are filled with (its swatch once was the
 * bars' edge colour, on bars of another fill). */
static void test_esd_legend(void) {
    static double edges[11], dens[10];
    for (int k = 0; k <= 10; k++) edges[k] = pow(2.0, k - 5);
    for (int k = 0; k < 10; k++) dens[k] = 100.0 * pow(0.5, 1.5 * k);
    PlotEsd e = {.edges = edges, .dens = dens, .nb = 10, .alpha = NAN, .mp_edge = 0};
    const char *path = png_path("esd_legend");
    PlotOpts o = {.path = path};
    CHECK_OK(plot_esd(&o, &e));
    const PlotGeom *g = plot_last_geom();
    Img im;
    if (!img_open(path, &im)) return;
    /* the fill: the pixel half-way up the first (tallest) bar */
    double px = page_x(g, log10(sqrt(edges[0] * edges[1]))), py = page_y(g, 0.5 * (g->win[2] + log10(dens[0])));
    int fill[3];
    img_rgb(&im, (int)(px * im.w), (int)((1.0 - py) * im.h), fill);
    static const int white[3] = {255, 255, 255};
    CHECK(!near_rgb(fill, white), "no bar at (%.3f, %.3f)", px, py);
    size_t sw = img_count(&im, g->legend, fill);
    CHECK(sw > 40, "the legend shows the bars' fill (%d, %d, %d) in %zu pixels, want a swatch of it", fill[0], fill[1],
          fill[2], sw);
    img_close(&im);
}

int main(void) {
    dir = test_tmpdir();
    if (!freopen("/dev/null", "r", stdin)) { perror("stdin"); return 1; }
    make_spectrum();
    make_ranks();
    if (!cairo_load()) printf("note: libcairo.so.2 not loadable; PNG pixel checks skipped\n");

    /* Everything PLplot might print goes to stderr: capture it while rendering. */
    char cap[1024];
    snprintf(cap, sizeof cap, "%s/stderr.txt", dir);
    fflush(stderr);
    int saved = dup(2), fd = open(cap, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    test_kinds();
    test_whole_ticks();
    test_log_axis_fit();
    test_energy_marks();
    test_ranks_paper();
    test_bylayer_gaps();
    test_esd_legend();
    test_errors();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t n = 0;
    char *out = slurp(cap, &n);
    CHECK(n == 0, "rendering printed to stderr (PLplot noise or failed checks above):\n%s", out ? out : "");
    free(out);
    unlink(cap);
    test_no_temp_files();
    return check_done();
}
