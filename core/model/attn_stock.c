/* attn_stock.c -- the stored weights a transformed layer runs with in the forward pass (attn_stock.h). */
#include "attn_stock.h"

#include <stdlib.h>
#include <string.h>

AttnStock *attn_stock_new(void) { return al_calloc(1, sizeof(AttnStock), "a stock layer"); }

void attn_stock_free(AttnStock *s) {
    if (!s) return;
    for (int i = 0; i < AS_N; i++) { free(s->buf[i]); mat_free(s->b[i]); }
    free(s);
}

int attn_stock_set(AttnStock *s, attn_stock_slot i, const Mat *M, dt_type dt) {
    Mat *t = mat_transpose(M);                          /* (out, in) */
    size_t n = t ? t->rows * t->cols : 0;
    void *buf = t ? mm_alloc(n * dt_size(dt), "a stock weight") : NULL;
    int rc = buf ? dt_from_f32(dt, t->data, n, buf) : AL_ERR;
    if (rc == AL_OK) {
        free(s->buf[i]);
        s->buf[i] = buf;
        s->w[i] = (WMat){.dt = dt, .data = buf, .rows = t->rows, .cols = t->cols};
    } else free(buf);
    mat_free(t);
    return rc;
}

int attn_stock_set_bias(AttnStock *s, attn_stock_slot i, const float *b, size_t out, dt_type dt) {
    Mat *v = mat_new(1, out);
    void *tmp = v ? malloc(out * dt_size(dt) + 1) : NULL;
    int rc = tmp ? dt_from_f32(dt, b, out, tmp) : AL_ERR;
    if (rc == AL_OK) rc = dt_to_f32(dt, tmp, out, v->data);
    free(tmp);
    if (rc != AL_OK) { mat_free(v); return al_err_ctx("a stock bias"); }
    mat_free(s->b[i]);
    s->b[i] = v;
    return AL_OK;
}
