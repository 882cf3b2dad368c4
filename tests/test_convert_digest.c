/* test_convert_digest.c -- issue 32 (one pass where one pass is enough): `convert mla` with
 * statistics over what an export keeps (CI_MAX_BYTES; ATTNLAB_CI_MAX_BYTES puts stories260K-hf
 * over it) forms each layer's attention-input second moment once: the conversion forms it and the
 * digest `check DIR` needs is taken from those same values (TmlaOpts.moments_seen,
 * commands/ws_check.c's WsCheckDigest); before, the digest formed every layer a second time. The
 * layers a conversion of a layer range does not form are formed for the digest alone. The digest
 * is the one of every layer's statistics formed at once (ci_digest over calib_input_arrays). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "check.h"
#include "check_inputs.h"
#include "registry.h"
#include "session.h"
#include "test_shell_util.h"
#include "transmla.h"
#include "ws_calib.h"
#include "xform.h"

/* The digest ci_digest gives every layer's statistics of the session's calibration of m, formed at once. */
static uint64_t full_digest(Session *s, Model *m) {
    const CalibStats *cs = NULL;
    double **sg = NULL, **mu = NULL;
    CHECK_OK(ws_calib_stats(s, m, &cs));
    if (!cs) return 0;
    CHECK_OK(calib_input_arrays(cs, 0, -1, &sg, &mu));
    uint64_t h = ci_digest(m->cfg.n_layers, m->cfg.hidden, (const double *const *)sg, (const double *const *)mu);
    calib_free_arrays(m->cfg.n_layers, sg, mu);
    return h;
}

/* Runs `convert mla ... layers` and checks the moments it formed (forms) and the digest it kept (want). */
static void convert_once(Session *s, Capture *c, const char *layers, size_t forms, uint64_t want) {
    char line[256];
    snprintf(line, sizeof line, "convert mla kv-rank 16 stats act ppl off layers %s", layers);
    size_t before = calib_second_moment_forms();
    CHECK_OK(run(s, c, line));
    size_t n = calib_second_moment_forms() - before;
    CHECK(n == forms, "layers %s: %zu second moments formed, want %zu (each layer's once)", layers, n, forms);
    const Xform *x = xform_list(s);
    const TmlaResult *r = x && !strcmp(x->kind->name, "convert mla") ? x->data : NULL;
    CHECK(r && r->check_in.stats && !r->check_in.sigma, "layers %s: the digest kept, not the statistics", layers);
    if (r) CHECK(r->check_in.digest == want, "layers %s: digest %016llx, the statistics formed at once: %016llx", layers,
                 (unsigned long long)r->check_in.digest, (unsigned long long)want);
}

int main(void) {
    char tp[4200];
    setenv("ATTNLAB_CI_MAX_BYTES", "1000", 1);             /* stories260K's 5 x 64² doubles: over it */
    Capture *c = calloc(1, sizeof *c);
    Session *s = c ? shell_stories_calibrated(c, tp, sizeof tp) : NULL;
    if (!s) { free(c); return check_done(); }
    Model *m = session_find(s, "m");
    CHECK(m && m->cfg.n_layers == 5, "stories260K-hf: 5 layers");
    if (m) {
        uint64_t want = full_digest(s, m);
        CHECK(want != 0, "a digest");
        convert_once(s, c, "all", 5, want);      /* the conversion's 5 (the old digest: 5 more) */
        convert_once(s, c, "1-2", 5, want);      /* the conversion's 2 and the digest's 0, 3, 4 */
    }
    session_free(s);
    free(c);
    return check_done();
}
