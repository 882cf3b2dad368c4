/* methods.c -- the lists of methods.h: each method's sub-command in the `convert` hub and the
 * kinds whose exports `check DIR` recognizes, each by its own manifest (XformKind.dir_manifest, or
 * its owns_dir reading it); a folder none owns is refused with the list of what attnlab reads. */
#include "methods.h"

#include "cmd_calib_check.h"
#include "cmd_convert.h"
#include "cmd_farr.h"
#include "cmd_tpa.h"

const Command methods_convert_subs[] = {
    CMD_CONVERT_MLA_SUB,
    CMD_CONVERT_TPA_SUB,
    CMD_CONVERT_MLA_TABLE_SUB,
    {0}
};

const XformKind *const methods_checkable_kinds[] = {&cmd_tpa_xform, &cmd_farr_xform, &cmd_convert_xform, &cmd_kvsvd_xform,
                                                    NULL};

const char *const methods_state_commands[] = {"calibrate", "calib load", NULL};
