/* test_layer_cache.c -- the model's layer cache (core/model/model.c) from many threads on many layers at once, as a
 * conversion's lanes use it without taking turns (issue 32, helper one): four threads, each on its own sequence of the
 * four layers of a BF16 Llama, load a layer (model_layer_load) and copy every Q / K / V / O head out of it
 * (model_head), or read it whole (attn_layer_load), while the others switch the cache to their layers. Every head and
 * every loaded matrix must equal, bit for bit, the one read alone before the threads started, and no call may fail.
 * The cache used to hold one layer whose tensors a load of another layer freed under a head being copied: a
 * use-after-free (a segfault, or wrong values where the freed memory was reused); run under ASan it is reported. The
 * heads a thread reads while another holds the cache come from the mapping instead (the same values). */
#include "check.h"
#include "test_transmla_util.h"
#include "attn_eval.h"
#include "model.h"

#include <pthread.h>
#include <stdatomic.h>

enum { L = 4, H = 8, KV = 4, DH = 64, D = 512, THREADS = 4, ROUNDS = 24 };

typedef struct {
    Model *m;
    Mat *ref[L][4][H];          /* [layer][kind][head], read alone */
    AttnLayer *whole[L];        /* attn_layer_load, read alone */
    atomic_int calls_failed, heads_differ, layers_differ, reads;
} Shared;

typedef struct { Shared *s; int t; } Arg;

static int heads_of(head_kind k) { return k == HK_K || k == HK_V ? KV : H; }

static bool same_mat(const Mat *a, const Mat *b) {
    return a && b && a->rows == b->rows && a->cols == b->cols &&
           memcmp(a->data, b->data, a->rows * a->cols * sizeof *a->data) == 0;
}

/* Every head of layer l against the reference; counts into s. */
static void heads_check(Shared *s, int l) {
    for (int k = 0; k < 4; k++)
        for (int h = 0; h < heads_of((head_kind)k); h++) {
            Mat *v = NULL;
            if (model_head(s->m, (head_kind)k, l, h, PART_ALL, &v) != AL_OK) atomic_fetch_add(&s->calls_failed, 1);
            else if (!same_mat(v, s->ref[l][k][h])) atomic_fetch_add(&s->heads_differ, 1);
            atomic_fetch_add(&s->reads, 1);
            mat_free(v);
        }
}

static void *worker(void *p) {
    Arg *a = p;
    Shared *s = a->s;
    for (int r = 0; r < ROUNDS; r++) {
        int l = (a->t + r * (a->t + 1)) % L;         /* each thread its own walk over the layers */
        if (r % 3 == 2) {
            AttnLayer *x = NULL;
            if (attn_layer_load(s->m, l, &x) != AL_OK) atomic_fetch_add(&s->calls_failed, 1);
            else if (!same_mat(x->W_Q, s->whole[l]->W_Q) || !same_mat(x->W_K, s->whole[l]->W_K) ||
                     !same_mat(x->W_V, s->whole[l]->W_V) || !same_mat(x->W_O, s->whole[l]->W_O))
                atomic_fetch_add(&s->layers_differ, 1);
            attn_layer_free(x);
            continue;
        }
        if (model_layer_load(s->m, l) != AL_OK) atomic_fetch_add(&s->calls_failed, 1);
        heads_check(s, l);
    }
    return NULL;
}

int main(void) {
    const char *tmp = test_tmpdir();
    char src[4200];
    snprintf(src, sizeof src, "%s/src", tmp);
    TuModel spec = {.model_type = "llama", .layers = L, .hidden = D, .heads = H, .kv_heads = KV, .head_dim = DH,
                    .inter = 64, .vocab = 50, .dtype = DT_BF16};
    CHECK_OK(tu_write_model(src, &spec));
    static Shared s;
    CHECK_OK(model_open(src, &s.m));
    if (!s.m) return check_done();
    for (int l = 0; l < L; l++)                      /* alone: each head from the mapping, then each layer whole */
        for (int k = 0; k < 4; k++)
            for (int h = 0; h < heads_of((head_kind)k); h++) CHECK_OK(model_head(s.m, (head_kind)k, l, h, PART_ALL,
                                                                                &s.ref[l][k][h]));
    for (int l = 0; l < L; l++) CHECK_OK(attn_layer_load(s.m, l, &s.whole[l]));
    for (int l = 0; l < L && s.whole[l]; l++) {      /* the cached layer's slices equal the mapping's blocks */
        CHECK_OK(model_layer_load(s.m, l));
        Mat *v = NULL;
        CHECK_OK(model_head(s.m, HK_O, l, H - 1, PART_ALL, &v));
        CHECK(same_mat(v, s.ref[l][HK_O][H - 1]), "layer %d: the cached slice of O head %d differs", l, H - 1);
        mat_free(v);
    }
    pthread_t th[THREADS];
    Arg args[THREADS];
    for (int t = 0; t < THREADS; t++) {
        args[t] = (Arg){&s, t};
        pthread_create(&th[t], NULL, worker, &args[t]);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    int want = THREADS * (ROUNDS - ROUNDS / 3) * (2 * H + 2 * KV);
    CHECK(atomic_load(&s.calls_failed) == 0, "%d loads or head reads failed (last: %s)", atomic_load(&s.calls_failed),
          al_errmsg());
    CHECK(atomic_load(&s.reads) == want, "%d head reads, want %d", atomic_load(&s.reads), want);
    CHECK(atomic_load(&s.heads_differ) == 0, "%d of %d heads read beside other threads' loads differ from the same "
          "head read alone", atomic_load(&s.heads_differ), want);
    CHECK(atomic_load(&s.layers_differ) == 0, "%d layers loaded beside other threads' loads differ",
          atomic_load(&s.layers_differ));
    printf("%d heads and %d whole layers read by %d threads on %d layers\n", want, THREADS * (ROUNDS / 3), THREADS, L);
    for (int l = 0; l < L; l++) {
        for (int k = 0; k < 4; k++)
            for (int h = 0; h < H; h++) mat_free(s.ref[l][k][h]);
        attn_layer_free(s.whole[l]);
    }
    model_free(s.m);
    return check_done();
}
