/* progress.h -- the terminal progress line ("layer i/N  x.x layers/s  ~Ns left" on stderr) that
 * draws core's al_progress reports while a long command runs. */
#ifndef AL_PROGRESS_H
#define AL_PROGRESS_H

/* Installs the terminal progress line (only draws when stderr is a terminal). */
void shell_progress_install(void);
/* Clears a progress line left on the screen (a command ended early); no-op when none. */
void shell_progress_end(void);

#endif
