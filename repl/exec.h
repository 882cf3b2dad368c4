/* exec.h -- running command lines (the prompt, `-e`, piped input, `run FILE`) through the
 * command registry. Error reports depend on where a line came from (LineSrc): at the prompt a
 * caret under the bad token, from `-e` / piped input the line echoed with a caret under it, from
 * a file `file:line:col: message`. Errors and warnings go to the Out's stderr stream. */
#ifndef AL_EXEC_H
#define AL_EXEC_H

#include <stddef.h>
#include "out.h"
#include "session.h"

typedef struct {
    const char *file;     /* script file name (errors as file:line:col:), or NULL */
    long line;            /* line number in file */
    size_t prompt_w;      /* > 0: the line was typed after a prompt this wide: caret under it */
} LineSrc;

/* Runs every command of a line (';'-separated; '= expr' and 'lua CODE' are Lua), printing
 * results in the session format, errors with carets, and queued warnings ("warning: ...").
 * Stops at the first failing command. `parent` supplies the sink (NULL: stdout/stderr).
 * Returns AL_OK, AL_ERR (already reported), AL_EXIT (quit) or AL_INTERRUPTED. */
int shell_exec_line(Session *s, const char *line, const LineSrc *src, Out *parent);
/* Runs a file of commands, one line per command line ('#' starts a comment line); stops at the
 * first failing line (reported as file:line:). */
int shell_run_commands_file(Session *s, const char *path, Out *parent);

#endif
