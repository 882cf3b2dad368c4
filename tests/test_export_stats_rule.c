/* test_export_stats_rule.c -- one size rule for the session's statistics in an export (commands/ws_check.c:
 * ws_check_take_for_export, which `export` after `convert mla` and after `convert tpa` both call; each had
 * its own, conv_stats_large counting the means, tpa_stats_large not): the layers of lo..hi with tokens x
 * (D² + D with the means) x 8 bytes against CI_MAX_BYTES, taken at the limit and not one byte under it;
 * over it *why NULL ("over the size kept in the folder"); a session whose calibration has no attention
 * inputs: "the session has no calibration ..." at any size; and a take that succeeds clears *why
 * (ws_check_take_session left "the session has no calibration" set on success). stories260K-hf: 5 layers,
 * D 64: with the means 5 x 4160 x 8 = 166400 bytes, without 5 x 4096 x 8 = 163840, layers 1-2 65536. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "check.h"
#include "check_inputs.h"
#include "session.h"
#include "test_shell_util.h"
#include "ws_calib.h"
#include "ws_check.h"

/* The digest of the session's statistics of m as a conversion draws them: every layer's E[x xᵀ] and mean
 * (with_mu: TransMLA's), else E[x xᵀ] of lo..hi (TPA's). */
static uint64_t digest_of(Session *s, Model *m, bool with_mu, int lo, int hi) {
    const CalibStats *cs = NULL;
    double **sg = NULL, **mu = NULL;
    size_t ntok;
    CHECK_OK(ws_calib_stats(s, m, &cs));
    if (!cs) return 0;
    if (with_mu) CHECK_OK(calib_input_arrays(cs, 0, -1, &sg, &mu));
    else CHECK_OK(ws_calib_fit_sigma(s, m, 2, lo, hi, &sg, &ntok));
    uint64_t h = ci_digest(m->cfg.n_layers, m->cfg.hidden, (const double *const *)sg, (const double *const *)mu);
    if (with_mu) calib_free_arrays(m->cfg.n_layers, sg, mu);
    else ws_calib_free_sigma(sg, m->cfg.n_layers);
    return h;
}

/* Whether the export takes the statistics at ATTNLAB_CI_MAX_BYTES = limit; *why as it left it. */
static bool taken(Session *s, Model *m, bool with_mu, int lo, int hi, size_t limit, const char **why) {
    char v[32];
    snprintf(v, sizeof v, "%zu", limit);
    setenv("ATTNLAB_CI_MAX_BYTES", v, 1);
    CheckInputs ci = {.stats = true, .tokens = 64, .n_layers = m->cfg.n_layers, .hidden = m->cfg.hidden,
                      .digest = digest_of(s, m, with_mu, lo, hi)};
    *why = "unset";
    CHECK_OK(ws_check_take_for_export(s, m, with_mu, lo, hi, &ci, why));
    bool got = ci.sigma != NULL;
    if (got) CHECK(ci_fits(&ci), "limit %zu: taken, so the export writes them (ci_fits)", limit);
    ci_free(&ci);
    unsetenv("ATTNLAB_CI_MAX_BYTES");
    return got;
}

/* The rule at its limit: taken at `bytes`, not at bytes - 1 (and then *why NULL: over the size). */
static void at_limit(Session *s, Model *m, bool with_mu, int lo, int hi, size_t bytes) {
    const char *why;
    CHECK(taken(s, m, with_mu, lo, hi, bytes, &why), "mu %d, layers %d..%d: taken at %zu bytes", with_mu, lo, hi, bytes);
    CHECK(why == NULL, "  and *why cleared on success [%s]", why ? why : "");
    CHECK(!taken(s, m, with_mu, lo, hi, bytes - 1, &why), "mu %d, layers %d..%d: not at %zu", with_mu, lo, hi, bytes - 1);
    CHECK(why == NULL, "  over the size: *why NULL [%s]", why ? why : "");
}

int main(void) {
    char tp[4200], line[9000];
    Capture *c = calloc(1, sizeof *c);
    Session *s = c ? shell_stories_calibrated(c, tp, sizeof tp) : NULL;
    if (!s) { free(c); return check_done(); }
    Model *m = session_find(s, "m");
    CHECK(m && m->cfg.n_layers == 5 && m->cfg.hidden == 64, "stories260K-hf: 5 layers of 64");
    if (m) {
        at_limit(s, m, true, 0, -1, 5 * (64 * 64 + 64) * 8);     /* convert mla's: with the means */
        at_limit(s, m, false, 0, -1, 5 * 64 * 64 * 8);           /* convert tpa's: without */
        at_limit(s, m, false, 1, 2, 2 * 64 * 64 * 8);            /* a range: its layers */
        CheckInputs ci = {.stats = true, .tokens = 64, .n_layers = 5, .hidden = 64, .digest = digest_of(s, m, true, 0, -1)};
        const char *why = "unset";
        CHECK_OK(ws_check_take_session(s, m, true, 0, -1, &ci, &why));      /* check DIR's: any size */
        CHECK(ci.sigma && why == NULL, "ws_check_take_session: taken, *why cleared [%s]", why ? why : "");
        ci_free(&ci);
        snprintf(line, sizeof line, "calibrate %s samples 2 seqlen 32 inputs off", tp);
        CHECK_OK(run(s, c, line));
        for (int mu = 0; mu < 2; mu++) {
            CheckInputs none = {.stats = true, .tokens = 64, .n_layers = 5, .hidden = 64, .digest = 1};
            setenv("ATTNLAB_CI_MAX_BYTES", "1000", 1);           /* over it, and still the calibration's absence */
            CHECK_OK(ws_check_take_for_export(s, m, mu, 0, -1, &none, &why));
            CHECK(!none.sigma && why && strstr(why, "the session has no calibration of the source with attention inputs"),
                  "mu %d: a calibration without inputs, over the limit: '%s'", mu, why ? why : "(null: over the size)");
            ci_free(&none);
        }
    }
    session_free(s);
    free(c);
    return check_done();
}
