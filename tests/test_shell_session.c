/* test_shell_session.c -- the session: loading demo models and folders under names (demo name,
 * base name, `as`, unique suffixes), use / close and which model becomes current, the hooks that
 * release subsystem state, the settings table, and `info` values against the config. */
#include <cjson/cJSON.h>
#include <string.h>

#include "testutil.h"
#include "registry.h"
#include "session.h"
#include "shell.h"
#include "test_shell_util.h"

static int freed, closed;
static const Model *last_closed;

static void hook_free(Session *s) { (void)s; freed++; }
static void hook_close(Session *s, Model *m) { (void)s; closed++; last_closed = m; }
static const SessionHook hook = { .name = "test", .on_free = hook_free, .on_model_close = hook_close };

static void test_settings(Session *s) {
    char *v = session_get(s, "tau");
    CHECK(v && !strcmp(v, "0.999"), "default tau %s", v ? v : "?");
    free(v);
    CHECK_OK(session_set(s, "tau", "0.99"));
    CHECK_NEAR(s->tau, 0.99, 0);
    CHECK_ERR(session_set(s, "tau", "1.5"), "not a number in (0, 1]");
    CHECK_ERR(session_set(s, "tau", "abc"), "set tau");
    CHECK_OK(session_set(s, "plot.size", "1600x900"));
    CHECK(s->plot_w == 1600 && s->plot_h == 900, "plot.size");
    CHECK_ERR(session_set(s, "plot.size", "1600"), "WxH");
    CHECK_OK(session_set(s, "plot.dir", "figs"));
    CHECK(!strcmp(s->plot_dir, "figs"), "plot.dir");
    CHECK_OK(session_set(s, "format", "json"));
    CHECK(s->fmt == FMT_JSON, "format");
    CHECK_ERR(session_set(s, "format", "xml"), "not one of table, csv, json");
    CHECK_ERR(session_set(s, "plot.format", "gif"), "png, svg, pdf");
    CHECK_ERR(session_set(s, "lyer", "1"), "unknown setting 'lyer'");
    CHECK(session_get(s, "nope") == NULL, "unknown get");
    const Setting *st;
    size_t n = 0;
    while ((st = session_setting_at(n))) {
        char *val = session_get(s, st->name);
        CHECK(val != NULL, "setting %s has no value", st->name);
        free(val);
        n++;
    }
    CHECK(n == 8, "%zu settings", n);
    CHECK_OK(session_set(s, "format", "table"));
    CHECK_OK(session_set(s, "tau", "0.999"));
}

int main(void) {
    const char *tmp = test_tmpdir();
    Session *s = session_new();
    CHECK(s && s->tau == 0.999 && s->fmt == FMT_TABLE && !s->cur, "defaults");
    test_settings(s);
    CHECK_OK(session_hook_add(s, &hook));
    CHECK_OK(session_hook_add(s, &hook));
    CHECK(s->nhooks == 1, "hook added once");
    Model *m0 = NULL;
    CHECK_ERR(session_model(s, &m0), "no model loaded");

    /* a demo model: written into the cache on first use, named after the demo */
    Model *m1 = NULL, *m2 = NULL, *m3 = NULL;
    CHECK_OK(session_load(s, "demo-llama", NULL, &m1));
    if (!m1) { session_free(s); return check_done(); }
    CHECK(!strcmp(m1->name, "demo-llama") && s->cur == m1, "demo name %s", m1->name);
    CHECK(m1->cfg.family == FAM_LLAMA, "demo-llama family");
    /* the same demo again: unique name, and no rewrite needed */
    CHECK_OK(session_load(s, "demo-llama", NULL, &m2));
    CHECK(m2 && !strcmp(m2->name, "demo-llama-2") && s->cur == m2, "unique name %s", m2 ? m2->name : "?");
    /* a folder path: its base name, or `as` */
    char path[4200];
    snprintf(path, sizeof path, "%s/", m1->path);
    CHECK_OK(session_load(s, path, "mine", &m3));
    CHECK(m3 && !strcmp(m3->name, "mine"), "as name");
    CHECK_ERR(session_load(s, path, "mine", NULL), "already loaded");
    CHECK_ERR(session_load(s, "/no/such/model/folder", NULL, NULL), "/no/such/model/folder");
    CHECK(s->nmodels == 3 && s->cur == m3, "failed loads change nothing");

    CHECK_OK(session_use(s, "demo-llama"));
    CHECK(s->cur == m1, "use");
    CHECK_ERR(session_use(s, "nope"), "loaded: demo-llama, demo-llama-2, mine");
    CHECK(session_find(s, "mine") == m3 && !session_find(s, "x"), "find");

    /* close: hooks first; the most recent remaining becomes current */
    CHECK_OK(session_close(s, "demo-llama"));
    CHECK(closed == 1 && last_closed == m1, "close hook");
    CHECK(s->cur == m3 && s->nmodels == 2, "current after closing the current one");
    CHECK_ERR(session_close(s, "demo-llama"), "no model named 'demo-llama' to close");

    /* commands over the session */
    Capture *cap = calloc(1, sizeof *cap);
    CHECK_OK(run(s, cap, "models"));
    CHECK(strstr(cap->buf, "demo-llama-2  false") && strstr(cap->buf, "mine          true"), "models:\n%s", cap->buf);
    CHECK_OK(run(s, cap, "use demo-llama-2; close; models"));
    CHECK(strstr(cap->buf, "closed demo-llama-2; current model: mine") != NULL, "close current:\n%s", cap->buf);
    CHECK(closed == 2, "close hook again");

    snprintf(path, sizeof path, "info to '%s/i.json'", tmp);
    CHECK_OK(run(s, cap, path));
    snprintf(path, sizeof path, "%s/i.json", tmp);
    char *text = slurp(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    CHECK(j != NULL, "info JSON parses");
    if (j) {
        const ModelConfig *c = &m3->cfg;
        struct { const char *k; double v; } nums[] = {
            { "layers", c->n_layers }, { "heads", c->n_heads }, { "kv_heads", c->n_kv_heads }, { "hidden", c->hidden },
            { "qk_nope_head_dim", c->qk_nope_dim }, { "qk_rope_head_dim", c->qk_rope_dim }, { "v_head_dim", c->v_dim },
            { "q_lora_rank", c->q_lora_rank }, { "kv_lora_rank", c->kv_lora_rank }, { "rope_theta", c->rope_theta },
            { "attn_params_per_layer", (double)cfg_attn_params(c) },
            { "attn_params_total", (double)cfg_attn_params(c) * c->n_layers },
            { "kv_values_per_token_per_layer", (double)cfg_kv_values(c) },
            { "kv_bytes_per_token_per_layer", (double)cfg_kv_values(c) * dt_size(c->dtype == DT_F8_E4M3 ? DT_BF16 : c->dtype) },
        };
        for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
            const cJSON *it = cJSON_GetObjectItemCaseSensitive(j, nums[i].k);
            CHECK(cJSON_IsNumber(it) && it->valuedouble == nums[i].v, "info.%s = %g, want %g", nums[i].k,
                  cJSON_IsNumber(it) ? it->valuedouble : -1, nums[i].v);
        }
        const cJSON *fam = cJSON_GetObjectItemCaseSensitive(j, "family");
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
        const cJSON *rl = cJSON_GetObjectItemCaseSensitive(j, "rope_layout");
        CHECK(cJSON_IsString(fam) && !strcmp(fam->valuestring, "llama"), "family");
        CHECK(cJSON_IsString(dt) && !strcmp(dt->valuestring, dt_name(m3->cfg.dtype)), "dtype");
        CHECK(cJSON_IsString(rl) && !strcmp(rl->valuestring, "rotate_half"), "rope layout");
        /* GQA: 2 x KV heads x head dim values per token per layer */
        CHECK(cfg_kv_values(&m3->cfg) == (size_t)(2 * m3->cfg.n_kv_heads * m3->cfg.v_dim), "kv values");
        cJSON_Delete(j);
    }
    free(text);

    /* demo-r1 (MLA): KV cache = kv_lora_rank + qk_rope values, BF16 for FP8 weights */
    if (run(s, cap, "load demo-r1 as r1; info") == AL_OK) {
        Model *r1 = session_find(s, "r1");
        char want[128];
        snprintf(want, sizeof want, "kv_values_per_token_per_layer  %d\n", r1->cfg.kv_lora_rank + r1->cfg.qk_rope_dim);
        CHECK(strstr(cap->buf, want) != NULL, "MLA kv values: %s", cap->buf);
        if (r1->cfg.dtype == DT_F8_E4M3) CHECK(strstr(cap->buf, "kv_cache_dtype                 BF16") != NULL, "BF16 cache");
    } else CHECK(0, "load demo-r1: %s", cap->buf);

    CHECK_OK(run(s, cap, "close all"));
    CHECK(s->nmodels == 0 && !s->cur && closed == 4, "close all (%d closes)", closed);
    CHECK(run(s, cap, "info") == AL_ERR && strstr(cap->buf, "needs a model"), "info without model");
    free(cap);
    session_free(s);
    CHECK(freed == 1, "free hook ran %d times", freed);
    return check_done();
}
