/* cmd_farr.h -- the kind of transformation `truncate` leaves (cmd_farr_xform: its export in formats
 * hf / factors / dense, and `check DIR` of a dense export), for methods.c's list of checkable kinds. */
#ifndef AL_CMD_FARR_H
#define AL_CMD_FARR_H

#include "xform.h"

extern const XformKind cmd_farr_xform;

#endif
