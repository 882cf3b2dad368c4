/* write_guard.h -- the one check every non-export write goes through: tables (`to FILE`), `info
 * to`, `calib save`, `tokenize ... to`, figures. A path inside a loaded model's folder (or the
 * file of a single-file model) is refused, naming the model, so no command ever overwrites a
 * checkpoint it reads (`info to config.json` run inside the model's folder). Exports have their
 * own stricter check (core/io/ckpt_write.c: never into or over the source).
 *
 * Out carries the check (Out.may_write, installed by cmd_dispatch), so table writers that see
 * only the Out use out_may_write() / out_write_file(); commands that see the Session call
 * write_guard_check() directly. */
#ifndef AL_WRITE_GUARD_H
#define AL_WRITE_GUARD_H

#include "session.h"

/* AL_OK when path may be written; else an error naming the loaded model whose folder holds it.
 * Matches out.h's may_write callback (ud: the Session). */
int write_guard_check(const void *session, const char *path);

#endif
