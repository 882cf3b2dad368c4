/* cmd_farr.h -- what the FaRR command group shares with other groups: the session's FaRR state
 * (spectra cache, working copy, kept fused head), created on first use by whichever group asks
 * and freed through one session hook. */
#ifndef AL_CMD_FARR_H
#define AL_CMD_FARR_H

#include "farr.h"
#include "session.h"

int cmd_farr_state(Session *s, FarrState **out);

#endif
