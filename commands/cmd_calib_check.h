/* cmd_calib_check.h -- the calib group's part of `check DIR` (listed by methods.c): a KQ-SVD
 * export (`kvsvd learn` + `export DIR`: kvsvd_manifest.json) read back and its projections
 * evaluated as `kvsvd eval` evaluates them. */
#ifndef AL_CMD_CALIB_CHECK_H
#define AL_CMD_CALIB_CHECK_H

#include "xform.h"

/* The transformation `kvsvd learn` leaves (cmd_calib.c); its folders are known by KQ_MANIFEST. */
extern const XformKind cmd_kvsvd_xform;

/* `check DIR` of a KQ-SVD export against its model (`source NAME`, else the manifest's path): the
 * projections on the windows its recorded errors came from -- the `text FILE`, else the session's
 * calibration text of the model; its split and seqlen -- with the recorded errors compared. */
int cmd_kvsvd_check_dir(Session *s, const char *dir, const Args *a, Out *out);

#endif
