/* cmd_calib_check.c -- `check DIR` of a KQ-SVD export: the folder read back (core kqsvd_load), the
 * model it was learned on found, the text's windows chosen as `kvsvd eval` chose them (the
 * recorded split, at most 32 windows of the calibration's seqlen) and every set evaluated with
 * core/methods/kqsvd.h's evaluator, beside the errors the export recorded. See cmd_calib_check.h. */
#define _GNU_SOURCE
#include "cmd_calib_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "kqsvd.h"
#include "ws_calib.h"
#include "ws_check.h"
#include "ws_lm.h"

#define EVAL_WINDOWS 32          /* kvsvd eval's default `samples` */

/* The windows to evaluate on: `text FILE` or `ids FILE`, else the session's calibration text of m; split and
 * seqlen as the export recorded. *own: owned tokens (or NULL); on: what they are. */
static int eval_windows(Session *s, Model *m, const KqExport *e, const Args *a, int **own, const int **ids, size_t *L,
                        size_t *first, size_t *count, char *on, size_t cap) {
    const char *file;
    bool train = e->eval_split && !strcmp(e->eval_split, "train");
    calib_split split = train ? CALIB_TRAIN : CALIB_VALID;
    CalibText ct;
    size_t n;
    if (ws_check_input(s, m, a, own, &n, &file)) return AL_ERR;    /* text FILE or ids FILE */
    if (file) {
        *ids = *own;
    } else if (ws_calib_text(s, m, &ct)) {
        *ids = ct.ids;
        n = ct.n;
        file = ct.req.text;
    } else
        return al_err("check: a KQ-SVD export is measured on the model's own activations: give text FILE (the "
                      "calibration text%s%s reproduces its recorded errors), or calibrate %s first",
                      e->calib_source ? " " : "", e->calib_source ? e->calib_source : "", m->name ? m->name : m->path);
    *L = e->calib_seqlen ? e->calib_seqlen : 256;
    if (calib_windows(n, *L, split, EVAL_WINDOWS, first, count)) {
        free(*own);
        *own = NULL;
        return al_err_ctx("check: %s", file);
    }
    snprintf(on, cap, "%zu %s window%s of %zu tokens of %s (the split `kvsvd eval` recorded: %s)", *count,
             train ? "training" : "validation", al_s(*count), *L, file ? file : "?",
             e->eval_split ? e->eval_split : "none; valid taken");
    return AL_OK;
}

/* Evaluates every set of e on the windows and prints the table (and the comparison with the
 * recorded errors). */
static int evaluate(Session *s, Model *m, bool session_model, const CalibShape *sh, KqExport *e, const int *ids,
                    size_t L, size_t count, const char *on, const Args *a, Out *out) {
    Forward *f = NULL, *own_f = NULL;
    KqEval *ev = NULL;
    int rc = session_model ? lm_forward(s, m, &f) : fwd_new(m, NULL, &own_f);
    if (own_f) f = own_f;
    if (rc == AL_OK) rc = kq_eval_new(sh, (const KqProj *const *)e->sets, e->nsets, &ev);
    if (rc == AL_OK) rc = kq_eval_run(ev, m, f, ids, count, L);
    fwd_free(own_f);
    if (rc) { kq_eval_free(ev); return rc; }
    out_printf(out, "relative Frobenius errors per layer on %s\n", on);
    Table *t = table_new(9, "layer", "method", "rank_k", "rank_v", "k_err", "q_err", "v_err", "kq_err", "out_err");
    double worst = 0;
    int compared = 0;
    for (int l = 0; t && l < sh->n_layers; l++)
        for (size_t i = 0; i < e->nsets; i++) {
            KqErr r;
            kq_eval_result(ev, i, l, &r);
            if (table_row(t)) { table_free(t); t = NULL; break; }
            table_int(t, l);
            table_str(t, kq_method_name(e->sets[i]->method));
            table_int(t, e->sets[i]->rank_k[l]);
            table_int(t, e->sets[i]->rank_v[l]);
            table_num(t, r.k); table_num(t, r.q); table_num(t, r.v); table_num(t, r.kq); table_num(t, r.out);
            if (e->errs[i] && e->errs[i][l].n_seq) {
                worst = fmax(worst, fabs(r.out - e->errs[i][l].out));
                compared++;
            }
        }
    kq_eval_free(ev);
    if (compared)
        out_printf(out, "the errors the export recorded (`kvsvd eval` before `export`): out_err within %.2g of them in "
                   "%d layer-method rows%s\n", worst, compared,
                   worst > 1e-4 ? " -- another text, split or seqlen than the recorded evaluation's" : "");
    else
        out_printf(out, "the export recorded no evaluation (`kvsvd eval` was not run before `export`)\n");
    return t ? out_table_to(out, args_str(a, "to"), t) : AL_ERR;
}

int cmd_kvsvd_check_dir(Session *s, const char *dir, const Args *a, Out *out) {
    Model *m = NULL, *opened = NULL;
    const char *name = args_str(a, "source");
    char *path = name && *name ? NULL : kqsvd_export_model(dir);
    if (!(name && *name) && !path) return AL_ERR;
    int src_rc = ws_check_source(s, a, path, dir, KQ_MANIFEST, &m, &opened);
    free(path);
    if (src_rc) return AL_ERR;
    CalibShape sh;
    KqExport *e = NULL;
    int *own = NULL;
    const int *ids = NULL;
    size_t L = 0, first = 0, count = 0;
    char on[512];
    int rc = calib_shape_of(m, &sh);
    if (rc == AL_OK) rc = kqsvd_load(dir, &sh, &e);
    if (rc == AL_OK) rc = eval_windows(s, m, e, a, &own, &ids, &L, &first, &count, on, sizeof on);
    if (rc == AL_OK) {
        out_printf(out, "%s against %s: %zu KQ-SVD projection set%s, evaluated as `kvsvd eval` evaluates them\n", dir,
                   m->name ? m->name : m->path, e->nsets, al_s(e->nsets));
        rc = evaluate(s, m, opened == NULL, &sh, e, ids + first * L, L, count, on, a, out);
    }
    free(own);
    kqsvd_export_free(e);
    model_free(opened);
    return rc;
}
