/* ws_calib.h -- the calibration service of the session's workspace: per model, the statistics
 * `calibrate` / `calib load` made for it, the text they came from, and what `kvsvd learn` and
 * `kvsvd eval` derived from them (several models, each with its own). Every group that needs a
 * calibration (TransMLA's activation statistics, TPA's activation-weighted fit, `compare`, the
 * KQ-SVD figures) asks here; a model's state is dropped when it closes. Whatever replaces or drops
 * a calibration says so in one line; a figure's own `calib FILE` statistics are a CalibState of its
 * own (ws_calib_run_own), never the session's. */
#ifndef AL_WS_CALIB_H
#define AL_WS_CALIB_H

#include "calib.h"
#include "kqsvd.h"
#include "out.h"
#include "session.h"

/* What a calibration run reads. */
typedef struct {
    const char *text;         /* the file, as the user named it */
    bool ids_file;            /* a file of token ids rather than text */
    size_t samples;           /* most windows to run */
    size_t seqlen;            /* tokens per window */
    calib_split split;        /* which windows of the text (calib_windows) */
    bool with_x;              /* keep the attention input's G_X and S_X */
} CalibRequest;

/* One model's calibration in the workspace (or a command's own, ws_calib_run_own). Fields are read
 * by the calib group and the KQ-SVD figures; change them through the functions below. */
typedef struct CalibState {
    Model *m;                       /* the model the statistics belong to */
    CalibStats *st;
    int *ids;                       /* token ids of the calibration text (for eval splits), owned */
    size_t nids;
    char *text;                     /* where the ids came from */
    CalibRequest req;               /* the run that made st from ids (req.text = text) */
    size_t first, count;            /* its windows */
    KqProj *proj[KQ_NMETHODS];      /* learned projections (`kvsvd learn`), NULL when not learned */
    double *gw;                     /* W_O Grams of m (kq_wo_grams), cached */
    KqErr *errs[KQ_NMETHODS];       /* last `kvsvd eval`: (n_layers) per method, or NULL */
    char eval_split[8];
    char eval_on[256];              /* which windows the last evaluation ran on (ws_calib_eval_tokens) */
    size_t eval_seqs;
    char *loaded;                   /* the file `calib load` read st from (owned), or NULL */
    unsigned long after;            /* the serial of m's newest transformation when st was made (0:
                                       none): `save session` replays st before the later ones */
    struct CalibState *next;        /* the workspace's next model */
} CalibState;

/* The calibration state of the current model / of m, created on first use (it may hold no
 * statistics). */
int ws_calib(Session *s, CalibState **out);
int ws_calib_of(Session *s, Model *m, CalibState **out);
/* The state when it holds statistics of the current model, else an error saying how to get them. */
int ws_calib_need(Session *s, CalibState **out);
/* Forgets the last evaluation / the learned projections (and the evaluation) / everything (the
 * state stays m's). */
void ws_calib_drop_eval(CalibState *c);
void ws_calib_drop_proj(CalibState *c);
void ws_calib_drop_all(CalibState *c);
/* Makes st (taken over, read from file; after: CalibState.after) the statistics
 * of c's model, with nothing else (`calib load`), saying on
 * out in one line what it replaced and dropped (nothing when there was nothing). */
void ws_calib_set(CalibState *c, CalibStats *st, const char *file, unsigned long after, Out *out);
/* The command that rebuilds m's calibration when a session is replayed (`save session`):
 * `calibrate TEXT|ids FILE samples N seqlen L split S inputs on|off` with N the windows run (an
 * interrupted calibrate's too), or `calib load FILE`; NULL when m has none (or out of memory).
 * *after: CalibState.after (0 when none). Caller frees. */
char *ws_calib_replay_line(const Session *s, const Model *m, unsigned long *after);

/* The calibration statistics of model m in this session (*out NULL, AL_OK, when there are none).
 * Owned by the workspace; valid until the next `calibrate` / `calib load` of m or m closes. */
int ws_calib_stats(const Session *s, const Model *m, const CalibStats **out);

/* Token ids of a text file (encoded with m's tokenizer, BOS first) or, with ids_file, of a file of
 * whitespace-separated ids; every id is checked against m's vocabulary. Caller frees *ids. */
int ws_read_tokens(Session *s, Model *m, const char *path, bool ids_file, int **ids, size_t *n);

/* The same from what the user typed: `what` is a text file, or the word ids with the id file in
 * `file` (cmd names the command in errors); for the current model. */
int ws_read_tokens_arg(Session *s, const char *cmd, const char *what, const char *file, int **ids, size_t *n);

/* What `calibrate` does, for other commands too (`convert mla ... calib FILE`): runs the windows of
 * rq->split of ids[0..n) (taken over, freed on failure) through m's forward pass (narrating
 * "calibrating ..." on out) and makes the statistics the session's calibration of m, replacing
 * earlier ones and any learned projections (said in one line). Ctrl-C (seen within one layer's
 * window: calib_run) leaves m's calibration as it was (said so) and returns AL_INTERRUPTED: a
 * calibration either completes or changes nothing. */
int ws_calib_run(Session *s, Model *m, int *ids, size_t n, const CalibRequest *rq, Out *out);
/* The same into *own (a command's own statistics, zeroed first; release with ws_calib_drop_all):
 * the session's calibration is not touched. An interrupted run leaves *own empty. */
int ws_calib_run_own(Session *s, Model *m, int *ids, size_t n, const CalibRequest *rq, CalibState *own, Out *out);

/* The text of the session's calibration of m (false when there is none: no calibration, or
 * statistics loaded from a file): all its tokens (borrowed, valid as long as the statistics), the
 * windows [first, first + count) of req.seqlen tokens that were run, and the request. */
typedef struct {
    const int *ids;
    size_t n;
    size_t first, count;
    CalibRequest req;
} CalibText;
bool ws_calib_text(const Session *s, const Model *m, CalibText *out);
/* The same of one state (a command's own). */
bool ws_calib_state_text(const CalibState *c, CalibText *out);

/* Token windows for an evaluation (keywords of PARAM_EVAL_WINDOWS, params.h: split, samples,
 * seqlen, text, ids) of the calibration c: *ids borrowed from c, or read from the given text and
 * owned in *own (caller frees); windows [first, first + count) of *seqlen tokens. Of the
 * calibration's own text, `split train` is exactly the windows the statistics came from (at most
 * `samples` of them: in-sample) and `split valid` its validation windows (held out unless the
 * calibration ran on them). on (cap bytes) says which windows, for narration and figures ("2
 * validation windows of 32 tokens of story.txt (held out)"). cmd names the command in errors. */
typedef struct Args Args;
int ws_calib_eval_tokens(Session *s, CalibState *c, const Args *a, const char *cmd, int **own, const int **ids,
                         size_t *seqlen, size_t *first, size_t *count, char *on, size_t cap);

/* Per-layer E[x xᵀ] of layers lo..hi (sigma has n_layers entries, NULL outside lo..hi) from the
 * session's calibration of m, when `fit` (0 auto, 1 weights, 2 calib: PARAM_FIT_CHOICES) asks for
 * it (auto: when there are statistics with the attention input). *sigma stays NULL for the
 * weights' own fit; free with ws_calib_free_sigma. *ntok: tokens behind layer lo. */
int ws_calib_fit_sigma(Session *s, const Model *m, int fit, int lo, int hi, double ***sigma, size_t *ntok);
void ws_calib_free_sigma(double **sigma, int n_layers);

#endif
