/* plot_dest.c -- where a figure goes (see plot_dest.h). */
#define _GNU_SOURCE
#include "plot_dest.h"
#include "write_guard.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A file-name-safe copy of s: letters, digits, '.', '-', '_' kept, anything else '_'. */
static void safe_name(char *dst, size_t cap, const char *s) {
    size_t j = 0;
    for (; s && *s && j + 1 < cap; s++)
        dst[j++] = (isalnum((unsigned char)*s) || *s == '.' || *s == '-' || *s == '_') ? *s : '_';
    dst[j] = '\0';
}

/* True when the last path component of p has an extension. */
static bool has_ext(const char *p) {
    const char *slash = strrchr(p, '/'), *dot = strrchr(p, '.');
    return dot && (!slash || dot > slash) && dot[1];
}

/* The value of view keyword `name` when the command declares it and it was typed, else NULL. */
static const char *view_arg(const Args *a, const char *name) {
    return cmd_find_kw(a->cmd, name) && args_given(a, name) ? args_str(a, name) : NULL;
}

static bool view_flag(const Args *a, const char *name) { return cmd_find_kw(a->cmd, name) && args_flag(a, name); }

/* "A:B" with either side empty (NaN: fitted) into r. */
static int parse_range(const char *name, const char *v, double r[2]) {
    const char *colon = strchr(v, ':');
    if (!colon) return al_err("%s '%s': expected A:B (e.g. 0:10, 1e-3:, :100)", name, v);
    char *end;
    r[0] = r[1] = NAN;
    if (colon > v) {
        r[0] = strtod(v, &end);
        if (end != colon) return al_err("%s '%s': '%.*s' is not a number", name, v, (int)(colon - v), v);
    }
    if (colon[1]) {
        r[1] = strtod(colon + 1, &end);
        if (*end) return al_err("%s '%s': '%s' is not a number", name, v, colon + 1);
    }
    if (!isnan(r[0]) && !isnan(r[1]) && !(r[1] > r[0]))
        return al_err("%s '%s': the upper bound must exceed the lower one", name, v);
    return AL_OK;
}

int plot_dest_view(const Args *a, PlotOpts *o) {
    PlotView *v = &o->view;
    const char *x;
    v->title = view_arg(a, "title");
    v->xlabel = view_arg(a, "xlabel");
    v->ylabel = view_arg(a, "ylabel");
    v->logx = view_flag(a, "logx");
    v->logy = view_flag(a, "logy");
    if ((x = view_arg(a, "xrange"))) {
        v->xrange = true;
        if (parse_range("xrange", x, v->xr)) return AL_ERR;
    }
    if ((x = view_arg(a, "yrange"))) {
        v->yrange = true;
        if (parse_range("yrange", x, v->yr)) return AL_ERR;
    }
    if ((x = view_arg(a, "size")) && plot_parse_size(x, &o->width, &o->height)) return AL_ERR;
    return AL_OK;
}

int plot_dest_init(Session *s, const Args *a, const char *auto_name, PlotDest *d) {
    memset(d, 0, sizeof *d);
    d->s = s;
    d->o.width = s->plot_w;
    d->o.height = s->plot_h;
    if (plot_dest_view(a, &d->o)) return AL_ERR;
    if (plot_panels_active()) return AL_OK;    /* a panel of `plot panels`: the panels' page */
    const char *fmt = s->plot_fmt && *s->plot_fmt ? s->plot_fmt : "png";
    const char *to = args_str(a, "to");
    if (to && !*to) return al_err("plot: `to \"\"` names no file: give FILE.png|.svg|.pdf, or leave `to` out");
    if (to) {
        d->path = has_ext(to) ? al_strdup(to) : al_asprintf("%s.%s", to, fmt);
    } else if (args_flag(a, "window")) {
        if (plot_window_check()) return AL_ERR;
        d->o.window = true;
        return AL_OK;
    } else if (s->interactive && plot_have_display() && plot_window_check() == AL_OK) {
        d->o.window = true;
        return AL_OK;
    } else {
        al_err_clear();             /* a display that did not answer is not an error: use a file */
        char name[256];
        safe_name(name, sizeof name, auto_name);
        d->path = al_asprintf("%s/%s.%s", s->plot_dir && *s->plot_dir ? s->plot_dir : ".", name, fmt);
    }
    if (!d->path) return AL_ERR;
    if (write_guard_check(s, d->path) != AL_OK || al_parent_here(d->path) != AL_OK) {   /* never into a loaded
                                                        model's folder; al.h's folder rule */
        free(d->path);
        d->path = NULL;
        return AL_ERR;
    }
    d->o.path = d->path;
    return AL_OK;
}

/* The running command's line as the session's last figure (kept as it was when there is none). */
static void record_last(Session *s) {
    const Args *a = cmd_running();
    char *line = s && a && !plot_panels_active() ? args_line(a) : NULL;
    if (!line) { al_err_clear(); return; }
    free(s->last_plot);
    s->last_plot = line;
}

int plot_dest_done(Out *out, PlotDest *d, int rc) {
    if (rc == AL_OK) record_last(d->s);
    if (rc == AL_OK) {
        if (d->path) {
            out_printf(out, "wrote %s\n", d->path);
            out_string(out, d->path);
            out->written = true;    /* printed above; Lua still gets the path */
        } else
            out_string(out, "window");
    }
    free(d->path);
    d->path = NULL;
    return rc;
}

void plot_dest_window_hint(Out *out, const PlotDest *d) {
    if (d->o.window) out_printf(out, "showing the figure: press a key or click in its window to go on\n");
}

int plot_dest_curves(Session *s, const Args *a, Out *out, const char *auto_name, const PlotLabels *l,
                     const PlotCurve *cv, size_t nc) {
    PlotDest d;
    if (plot_dest_init(s, a, auto_name, &d)) return AL_ERR;
    d.o.title = l->title;
    d.o.subtitle = l->subtitle;
    d.o.xlabel = l->xlabel;
    d.o.ylabel = l->ylabel;
    d.o.logy = l->logy;
    d.o.x_whole = l->x_whole;
    plot_dest_window_hint(out, &d);
    return plot_dest_done(out, &d, plot_curves(&d.o, cv, nc));
}
