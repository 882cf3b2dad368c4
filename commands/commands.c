/* commands.c -- the ONE list of commands/'s command groups, in `help` order. To add a group,
 * declare its cmd_group_<group> here and add one line to the list. */
#include "commands.h"

#include <stddef.h>

#include "cmd_session.h"
#include "registry.h"

extern const CommandGroup cmd_group_base;
extern const CommandGroup cmd_group_synth;
extern const CommandGroup cmd_group_plot;
extern const CommandGroup cmd_group_farr;
extern const CommandGroup cmd_group_export;
extern const CommandGroup cmd_group_lm;
extern const CommandGroup cmd_group_attend;
extern const CommandGroup cmd_group_convert;
extern const CommandGroup cmd_group_tpa;
extern const CommandGroup cmd_group_calib;
extern const CommandGroup cmd_group_lint;

static const CommandGroup *const builtin_groups[] = {
    &cmd_group_base,
    &cmd_group_synth,
    &cmd_group_plot,
    &cmd_group_farr,
    &cmd_group_export,
    &cmd_group_lm,
    &cmd_group_attend,
    &cmd_group_convert,
    &cmd_group_tpa,
    &cmd_group_calib,
    &cmd_group_lint,
    &cmd_group_session,
    NULL
};

int commands_init(void) {
    for (size_t g = 0; builtin_groups[g]; g++)
        if (cmd_register_group(builtin_groups[g]) != AL_OK) return AL_ERR;
    cmd_set_observer(session_observe);
    return AL_OK;
}
