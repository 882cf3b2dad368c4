/* cmd_session.h -- the session group (transforms, undo, save session) and its dispatch observer,
 * which commands_init installs (cmd_set_observer): it notes the state commands (methods.c) that
 * `save session` writes. */
#ifndef AL_CMD_SESSION_H
#define AL_CMD_SESSION_H

#include "registry.h"

extern const CommandGroup cmd_group_session;
/* Keeps the latest line of each state command (methods_state_commands) per model. */
void session_observe(Session *s, const Args *a);

#endif
