#!/usr/bin/env python3
"""hub_server.py -- a small Hugging Face Hub stand-in on 127.0.0.1 for tests/cli_hub.sh.

Serves the folders ROOT/<org>/<name>/ as model repos with the Hub's routes:
  GET /api/models/<org>/<name>/revision/<rev>   {"sha": commit, "siblings": [{"rfilename": f}]}
  GET|HEAD /<org>/<name>/resolve/<rev>/<file>    a *.json file (in git on the real Hub): 200 with
      X-Repo-Commit and ETag its git blob sha1; any other (LFS) file: 302 to http://localhost:<port>/store/<sha256> (another
      host name than the endpoint's 127.0.0.1, so a token must not follow) with X-Repo-Commit,
      X-Linked-Etag (the sha256), X-Linked-Size, ETag
  GET /store/<sha256>                            the bytes, honouring one "Range: bytes=a-b" / "a-"
Gated repos (--gated org/name) answer 401 unless "Authorization: Bearer <--token>"; unknown repos,
revisions and files 404. Test controls: /_control?fail=N&status=503 (the next N /store requests
fail), /_control?badsha=N (the next N LFS files claim a wrong sha256), /_control?slow=N (the next N
/store bodies trickle, 8 KB per 20 ms), /_control?norange=N (the next N ignore Range), /_control?cut=N (the next N /store responses stop after half their body),
/_control?ref=org/name&name=REV&to=org/other (revision REV of org/name -- main moving to a new commit,
or a new branch -- now serves the folder org/other, commit sha1("org/other"); the old commit stays), /_reset; /_stats
gives {"store_bytes", "store_requests", "auth_on_store", "api_requests", "injected"} (bytes of /store
bodies sent; faults injected).
The port goes to --port-file once listening."""
import argparse, hashlib, json, os, re, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

LOCK = threading.Lock()
STATS = {"store_bytes": 0, "store_requests": 0, "auth_on_store": 0, "api_requests": 0, "injected": 0}
FAULTS = {"fail": 0, "status": 503, "cut": 0, "badsha": 0, "slow": 0, "norange": 0}
BLOBS = {}        # sha256 -> path
REFS = {}         # (repo, revision name) -> the folder it serves (default: main -> the repo's own)


def repo_files(root, repo):
    d = os.path.join(root, repo)
    if not os.path.isdir(d):
        return None
    return sorted(f for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def commit_of(repo):
    return hashlib.sha1(repo.encode()).hexdigest()


def folder_of(repo, rev):
    """The folder repo@rev serves (a branch REFS names, main, or a commit of either), or None."""
    with LOCK:
        f = REFS.get((repo, rev)) or (repo if rev == "main" else None)
        cands = {repo} | {v for (r, _), v in REFS.items() if r == repo}
    if f:
        return f
    return next((c for c in cands if commit_of(c) == rev), None)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body=b"", headers=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def authorized(self, repo):
        if repo not in self.server.gated:
            return True
        return self.headers.get("Authorization") == "Bearer " + self.server.token

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        u = urlparse(self.path)
        path = unquote(u.path)
        if path == "/_stats":
            with LOCK:
                return self.send(200, json.dumps(STATS).encode())
        if path == "/_reset":
            with LOCK:
                for k in STATS:
                    STATS[k] = 0
            return self.send(200, b"{}")
        if path == "/_control":
            q = parse_qs(u.query)
            with LOCK:
                for k in ("fail", "status", "cut", "badsha", "slow", "norange"):
                    if k in q:
                        FAULTS[k] = int(q[k][0])
                if "ref" in q:
                    REFS[(q["ref"][0], q["name"][0])] = q["to"][0]
            return self.send(200, b"{}")
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/revision/(.+)", path)
        if m:
            return self.api(m.group(1), m.group(2))
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m:
            return self.resolve(m.group(1), m.group(2), m.group(3))
        m = re.fullmatch(r"/store/([0-9a-f]{64})", path)
        if m:
            return self.store(m.group(1))
        self.send(404, b'{"error": "no such route"}')

    def api(self, repo, rev):
        with LOCK:
            STATS["api_requests"] += 1
        files = repo_files(self.server.root, repo)
        if files is None:
            return self.send(404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepositoryNotFound"})
        if not self.authorized(repo):
            return self.send(401, b'{"error": "Access to this model is restricted"}', {"X-Error-Code": "GatedRepo"})
        folder = folder_of(repo, rev)
        if folder is None:
            return self.send(404, b'{"error": "Revision not found"}', {"X-Error-Code": "RevisionNotFound"})
        files = repo_files(self.server.root, folder)
        body = {"id": repo, "sha": commit_of(folder), "siblings": [{"rfilename": f} for f in files]}
        self.send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def resolve(self, repo, rev, file):
        files = repo_files(self.server.root, repo)
        if files is None:
            return self.send(404, b"Repository not found", {"X-Error-Code": "RepositoryNotFound"})
        if not self.authorized(repo):
            return self.send(401, b"Access restricted", {"X-Error-Code": "GatedRepo"})
        folder = folder_of(repo, rev)
        if folder is None or file not in repo_files(self.server.root, folder):
            return self.send(404, b"Entry not found", {"X-Error-Code": "EntryNotFound"})
        repo = folder                   # X-Repo-Commit below: the folder's commit
        p = os.path.join(self.server.root, folder, file)
        if file.endswith(".json"):      # a small file in git, not LFS: served here, ETag its git blob sha1
            with open(p, "rb") as f:
                body = f.read()
            gsha = hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()
            return self.send(200, body, {"X-Repo-Commit": commit_of(repo), "ETag": '"%s"' % gsha})
        sha = sha256_of(p)
        with LOCK:
            BLOBS[sha] = p
            said = sha
            if FAULTS["badsha"] > 0:            # a wrong checksum (a corrupted CDN object, as seen from here)
                FAULTS["badsha"] -= 1
                said = hashlib.sha256(b"not these bytes").hexdigest()
        loc = "http://localhost:%d/store/%s" % (self.server.server_address[1], sha)
        self.send(302, b"", {"Location": loc, "X-Repo-Commit": commit_of(repo), "X-Linked-Etag": '"%s"' % said,
                             "X-Linked-Size": str(os.path.getsize(p)), "ETag": '"%s"' % said})

    def store(self, sha):
        with LOCK:
            p = BLOBS.get(sha)
            STATS["store_requests"] += 1
            if self.headers.get("Authorization"):
                STATS["auth_on_store"] += 1
            fail = FAULTS["fail"] > 0
            if fail:
                FAULTS["fail"] -= 1
            cut = not fail and FAULTS["cut"] > 0
            if cut:
                FAULTS["cut"] -= 1
            if fail or cut:
                STATS["injected"] += 1
            slow = FAULTS["slow"] > 0
            if slow:
                FAULTS["slow"] -= 1
        if fail:
            return self.send(FAULTS["status"], b"injected failure", {"Retry-After": "0"})
        if not p:
            return self.send(404, b"no such blob")
        size = os.path.getsize(p)
        a, b, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        with LOCK:
            if FAULTS["norange"] > 0:           # a server that ignores Range: 200 and the whole file
                FAULTS["norange"] -= 1
                rng = None
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m or int(m.group(1)) >= size:
                return self.send(416, b"", {"Content-Range": "bytes */%d" % size})
            a, b, status = int(m.group(1)), min(int(m.group(2)) if m.group(2) else size - 1, size - 1), 206
        n = b - a + 1
        self.send_response(status)
        self.send_header("Content-Length", str(n))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (a, b, size))
        self.end_headers()
        if self.command == "HEAD":
            return
        if not cut and not slow:                # the fast path: the kernel copies the file
            self.wfile.flush()
            with open(p, "rb") as f:
                sent = 0
                while sent < n:
                    k = os.sendfile(self.connection.fileno(), f.fileno(), a + sent, n - sent)
                    if k <= 0:
                        break
                    sent += k
            with LOCK:
                STATS["store_bytes"] += sent
            return
        with open(p, "rb") as f:
            f.seek(a)
            body = f.read(n)
        if cut:
            body = body[: len(body) // 2]
        if slow:                                # 8 KB every 20 ms: a transfer Ctrl-C can meet
            for i in range(0, len(body), 8192):
                self.wfile.write(body[i:i + 8192])
                self.wfile.flush()
                time.sleep(0.02)
        else:
            self.wfile.write(body)
        with LOCK:
            STATS["store_bytes"] += len(body)
        if cut:
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--gated", action="append", default=[])
    ap.add_argument("--token", default="hf_secret_test_token")
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.root, srv.gated, srv.token = a.root, set(a.gated), a.token
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(tmp, a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
