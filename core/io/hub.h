/* hub.h -- models straight from the Hugging Face Hub over HTTP (libcurl): the API's revision
 * listing, whole small files into the Hugging Face cache layout, and a remote byte source the
 * store reads tensors from on first use.
 *
 * The Hub's conventions, as huggingface_hub implements them: $HF_ENDPOINT (default
 * https://huggingface.co), $HF_TOKEN else the token file ($HF_TOKEN_PATH, else $HF_HOME/token,
 * else ~/.cache/huggingface/token), sent as "Authorization: Bearer" to the endpoint's host only
 * (libcurl drops it on a redirect to another host); $HF_HUB_OFFLINE (1/ON/YES/TRUE: no HTTP at
 * all). GET {endpoint}/api/models/{repo}/revision/{rev} gives the commit ("sha") and the files
 * ("siblings"); {endpoint}/{repo}/resolve/{commit}/{file} redirects to the bytes and says
 * X-Repo-Commit, ETag / X-Linked-Etag (an LFS file's sha256) and X-Linked-Size.
 *
 * Whole files (config.json, the index, tokenizer files) go to the Hugging Face cache:
 * blobs/<etag> (sha256-checked when the etag is one), snapshots/<commit>/<file> a relative link
 * to it, refs/<rev> the commit -- what transformers and huggingface-cli read and write.
 * Shards are never put there partly: each is a sparse file of the shard's size in attnlab's cache
 * ($ATTNLAB_CACHE/hub/models--org--name/snapshots/<commit>/<shard>) holding its header, with
 * "<shard>.ranges" recording the byte ranges held ("begin end" lines, appended) and
 * ".attnlab-remote" describing the source; a shard once held whole is sha256-checked and put into
 * the HF cache (blobs/<etag>, a hard link, and its snapshot link); that folder links the whole files from the HF cache,
 * so store_open reads it as any checkpoint folder and asks hub_remote_ensure for a tensor's bytes
 * before it touches them. Transfers retry 429/5xx and cut connections with backoff (resuming
 * with Range from the last byte written), stop on Ctrl-C keeping the complete ranges, and report
 * through al_progress (label "fetching <what>", units bytes). */
#ifndef AL_HUB_H
#define AL_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "al.h"

typedef struct {
    const char *repo;        /* org/name */
    const char *revision;    /* branch, tag or commit; NULL: main */
    const char *hf_cache;    /* the Hugging Face hub cache folder */
    const char *own_cache;   /* attnlab's cache folder */
} HubRequest;

/* Makes repo@revision loadable: asks the API for the commit and files (offline: the commit
 * attnlab's cache recorded for that revision; the same, with a warning, when the API fails and
 * that snapshot is there), fetches config.json, the index, tokenizer files
 * and every shard's header, and gives the folder to open (caller frees). Errors name the repo or
 * file: 401 says how to give a token (never printing one), 404 names what is missing. */
int hub_open(const HubRequest *r, char **path_out);

/* True when $HF_HUB_OFFLINE says no HTTP at all. */
bool hub_offline(void);
/* Asks the API which commit repo's revision rev (a branch, tag or commit) names now, into commit
 * (cap bytes): one request, no file fetched. An error (set) when offline or the Hub does not answer. */
int hub_revision_commit(const char *repo, const char *rev, char *commit, size_t cap);

typedef struct HubRemote HubRemote;
/* The remote source of a folder hub_open made, or NULL (an ordinary folder; no error set). */
HubRemote *hub_remote_for_dir(const char *dir);
void hub_remote_free(HubRemote *h);
/* Makes bytes [begin, end) of the data section of shard `shard` (a path or file name) local,
 * fetching the ranges not held; `what` names them in the progress line. Thread-safe. */
int hub_remote_ensure(HubRemote *h, const char *shard, uint64_t begin, uint64_t end, const char *what);
/* Bytes held locally and the shards' total size. */
void hub_remote_local(HubRemote *h, uint64_t *local, uint64_t *total);
/* Bytes this process fetched over HTTP (all transfers). */
uint64_t hub_bytes_fetched(void);
/* The SHA-256 of buf as 64 lowercase hex digits plus NUL. */
void hub_sha256_hex(const void *buf, size_t n, char hex[65]);

#endif
