/* test_hub.c -- the Hub module's pieces that need no server: SHA-256 against FIPS 180-4's
 * vectors (the check every whole file fetched into the HF cache passes), and a streamed folder's
 * record of held ranges read back offline (overlapping lines merged; bytes held answered, bytes
 * not held an error that names HF_HUB_OFFLINE). tests/cli_hub.sh runs the HTTP side. */
#include "testutil.h"
#include "hub.h"

#include <unistd.h>

static void sha(const char *msg, size_t n, const char *want) {
    char hex[65];
    hub_sha256_hex(msg, n, hex);
    CHECK(strcmp(hex, want) == 0, "sha256 of %zu bytes: %s, want %s", n, hex, want);
}

static void test_sha256(void) {
    sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m56 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha(m56, 56, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m112 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    sha(m112, 112, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    static char million[1000000];
    memset(million, 'a', sizeof million);
    sha(million, sizeof million, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void write_text(const char *rel, const char *text) { CHECK_OK(al_write_file_atomic(tpath(rel, NULL), text, strlen(text))); }

static void test_ranges(void) {
    CHECK(hub_remote_for_dir(tpath("", NULL)) == NULL, "an ordinary folder is not streamed");
    setenv("HF_HUB_OFFLINE", "1", 1);
    write_text(".attnlab-remote", "endpoint http://127.0.0.1:9\nrepo acme/x\ncommit abc\nshard s.safetensors 100 16 -\n");
    write_text("s.safetensors", "");
    write_text("s.safetensors.ranges", "0 16\n10 30\n50 60\n55 58\n");
    HubRemote *h = hub_remote_for_dir(tpath("", NULL));
    CHECK(h != NULL, "the folder is streamed");
    if (!h) return;
    uint64_t local = 0, total = 0;
    hub_remote_local(h, &local, &total);
    CHECK(local == 40 && total == 100, "held %llu of %llu (want 40 of 100: [0,30) and [50,60))",
          (unsigned long long)local, (unsigned long long)total);
    CHECK_OK(hub_remote_ensure(h, "s.safetensors", 0, 14, "t0"));          /* data bytes 16..30 */
    CHECK_OK(hub_remote_ensure(h, "other.safetensors", 0, 1000, "t1"));    /* not a streamed shard */
    CHECK_ERR(hub_remote_ensure(h, "s.safetensors", 10, 40, "t2"), "HF_HUB_OFFLINE is set");
    CHECK_ERR(hub_remote_ensure(h, "s.safetensors", 80, 90, "t3"), "beyond");
    hub_remote_free(h);
    unsetenv("HF_HUB_OFFLINE");
}

int main(void) {
    snprintf(tu_dir, sizeof tu_dir, "%s", test_tmpdir());
    unlink(tpath(".attnlab-remote", NULL));
    test_sha256();
    test_ranges();
    return check_done();
}
