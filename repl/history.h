/* history.h -- the prompt's history (Readline's), kept across sessions in the history file of
 * attnlab's home folder ($ATTNLAB_HOME or ~/.config/attnlab), 2000 entries at most; lines of
 * piped input and -e join it for this session only. `history to FILE` writes a command file. */
#ifndef AL_HISTORY_H
#define AL_HISTORY_H

#include "out.h"

/* Reads the history file into Readline's history (no-op without a home folder). */
void shell_history_open(void);
/* Adds a line typed at the prompt (not repeats) and appends it to the file at once (only kept in
 * memory when no history file is open: piped input, -e). */
void shell_history_add(const char *line);
/* Trims the file to HISTORY_MAX entries and forgets its path. */
void shell_history_close(void);
/* Prints the last n history entries (all with n <= 0). */
int shell_history_list(long n, Out *out);
/* Writes a command file `run FILE` replays: the lines of this session (the last n entries with
 * n > 0), without numbers, leaving out `history` commands. */
int shell_history_write(long n, const char *path, Out *out);

#endif
