/* registry_internal.h -- pieces of the registry that only commands/ and its tests use (not part
 * of the command API in registry.h). */
#ifndef AL_REGISTRY_INTERNAL_H
#define AL_REGISTRY_INTERNAL_H

#include <stddef.h>

/* Edit distance of two words (out_edit_distance: a swap of neighbours counts 1; at most 63 bytes
 * each, longer: the longer length), for the
 * "did you mean" suggestions of the parser. */
size_t cmd_edit_distance(const char *a, const char *b);

#endif
