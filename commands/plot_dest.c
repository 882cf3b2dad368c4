/* plot_dest.c -- where a figure goes (see plot_dest.h). */
#define _GNU_SOURCE
#include "plot_dest.h"
#include "write_guard.h"

#include <ctype.h>
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

int plot_dest_init(Session *s, const Args *a, const char *auto_name, PlotDest *d) {
    memset(d, 0, sizeof *d);
    d->o.width = s->plot_w;
    d->o.height = s->plot_h;
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
    if (write_guard_check(s, d->path) != AL_OK) {       /* never into a loaded model's folder */
        free(d->path);
        d->path = NULL;
        return AL_ERR;
    }
    d->o.path = d->path;
    return AL_OK;
}

int plot_dest_done(Out *out, PlotDest *d, int rc) {
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
