/* params.c -- the choices and readers of the shared parameters (params.h). */
#include "params.h"

#include "layersel.h"
#include "session.h"

const char *const PARAM_PAIR_CHOICES[] = {"vo", "qk", NULL};
const char *const PARAM_FIT_CHOICES[] = {"auto", "weights", "calib", NULL};
const char *const PARAM_SPLIT_CHOICES[] = {"train", "valid", NULL};

double param_tau(const Session *s, const Args *a) { return args_given(a, "tau") ? args_float(a, "tau") : s->tau; }

int param_offset(const Args *a) { return args_given(a, "offset") ? (int)args_int(a, "offset") : FARR_NO_OFFSET; }

farr_kind param_pair(const Args *a) { return args_enum(a, "pair") == 1 ? FARR_QK : FARR_VO; }

int param_layers(Out *out, const Args *a, const char *name, const Model *m, long *lo, long *hi) {
    if (args_range(a, name, m->cfg.n_layers, lo, hi)) return AL_ERR;
    int l = (int)*lo, h = (int)*hi;
    char note[640];
    if (layersel_range(&m->cfg, a->path, &l, &h, note, sizeof note)) return AL_ERR;
    if (note[0] && out_narrates(out)) out_printf(out, "%s\n", note);
    *lo = l;
    *hi = h;
    return AL_OK;
}
