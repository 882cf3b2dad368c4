/* workspace.h -- everything the session keeps between commands, per model: one store of typed
 * state slots behind Session.ws, created on first use and released through ONE session hook
 * (session_free, and `close` dropping what belongs to the closed model).
 *
 * A service (ws_lm.c: tokenizer and forward pass; ws_calib.c: calibration; ws_compare.c: kept
 * comparisons; xform.c: pending transformations; the FaRR cache below) describes its state once:
 *     static void *lm_create(void);                     -- NULL + al_err on failure
 *     static void lm_destroy(void *st);
 *     static void lm_closed(void *st, Model *m);        -- drop what belongs to m (may be NULL)
 *     static const WsSlot lm_slot = { "lm", lm_create, lm_destroy, lm_closed };
 * and reaches it with ws_state(s, &lm_slot, &p) (created on first use) or ws_peek (NULL when no
 * command made it yet). Command groups use the services' accessors, never each other. */
#ifndef AL_WORKSPACE_H
#define AL_WORKSPACE_H

#include "farr.h"
#include "session.h"

typedef struct WsSlot {
    const char *name;                          /* for messages */
    void *(*create)(void);                     /* fresh state, or NULL with al_err set */
    void (*destroy)(void *st);                 /* NULL is fine */
    void (*model_closed)(void *st, Model *m);  /* m is about to be freed (may be NULL) */
} WsSlot;

/* The state of slot k in s's workspace, created on first use. */
int ws_state(Session *s, const WsSlot *k, void **out);
/* The state of slot k, or NULL when no command created it yet. */
void *ws_peek(const Session *s, const WsSlot *k);

/* The session's FaRR state (core/analysis/farr.h: spectra cache, the working copy's `truncate` plans, the
 * kept fused head), shared by the farr and plot groups. */
int ws_farr(Session *s, FarrState **out);

#endif
