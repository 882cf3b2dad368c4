/* resolve.h -- from what a user types after `load` to a path on disk.
 *
 * Order: an existing path (folder, .safetensors, .bin); a short alias (built-in table, extended
 * by the user file $ATTNLAB_HOME/aliases or ~/.config/attnlab/aliases, lines "alias org/name" or
 * "alias /path/to/folder" -- a target starting with '/', '~' or '.' is a local path) mapped to
 * org/name or that path; org/name through the Hugging Face cache
 * ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub:
 * models--org--name/snapshots/<commit>/: for org/name@<commit> that folder; else the one
 * refs/<revision> names (main when none is given) -- a plain revision name, never a path;
 * anything else is an error -- else, for main only, the newest snapshot with a config.json).
 * Unless $HF_HUB_OFFLINE is set or the revision named is that commit, the Hub's API is asked which
 * commit the revision names now: a different one (the revision moved) is opened from the Hub; a
 * Hub that does not answer leaves the cached snapshot in use, with a warning.
 * When attnlab streams that commit (its cache has a folder for it: the HF snapshot may hold
 * only the config and index, or shards not all there yet), or no snapshot is there, or the
 * revision moved: org/name[@revision] from the Hub (hub.h).
 * Demo names (demo-r1, demo-llama, demo-gpt2) are handled by the shell, not here. */
#ifndef AL_RESOLVE_H
#define AL_RESOLVE_H

#include "al.h"

/* Resolves name to a path (caller frees). On failure the message lists every place looked. */
int resolve_model(const char *name, char **path_out);
/* The org/name an alias stands for, or NULL. */
const char *resolve_alias(const char *alias);
/* Alias table, for completion and `help load`: the i-th alias and its target; false past the end. */
bool resolve_alias_at(size_t i, const char **alias, const char **target);
/* The HF hub cache folder in use (caller frees). */
char *resolve_hf_cache_dir(void);
/* attnlab's own folders: $ATTNLAB_HOME or ~/.config/attnlab (history, aliases), and
 * $ATTNLAB_CACHE or ~/.cache/attnlab (demo models). Caller frees; created on demand. */
char *resolve_home_dir(void);
char *resolve_cache_dir(void);

#endif
