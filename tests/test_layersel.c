/* test_layersel.c -- which layers an analysis over a layer range runs (core/model/layersel): on a
 * 48-layer Qwen3-Next description (attention every fourth layer) a range narrows to its attention
 * layers with the one line naming the linear ones, a linear layer alone or a range of linear layers
 * is an error naming the attention layers; on Llama and on a layer_types hybrid the range is as given. */
#include "check.h"
#include "config.h"
#include "layersel.h"

static ModelConfig parse(const char *body) {
    char json[2048];
    snprintf(json, sizeof json, "{%s}", body);
    ModelConfig c;
    CHECK_OK(model_config_parse(json, "t/config.json", &c));
    return c;
}

#define QWEN3_NEXT "\"model_type\": \"qwen3_next\", \"hidden_size\": 64, \"num_attention_heads\": 4, " \
    "\"num_key_value_heads\": 2, \"head_dim\": 16, \"num_hidden_layers\": 48, \"full_attention_interval\": 4"

static void test_hybrid(void) {
    ModelConfig c = parse(QWEN3_NEXT);
    char note[1024], t[256];
    int lo = 0, hi = 47;
    CHECK(layersel_count(&c, 0, 47) == 12 && layersel_next(&c, 0, 47) == 3 && layersel_next(&c, 4, 47) == 7 &&
          layersel_next(&c, 44, 46) == 47 && layersel_attn(&c, 47) && !layersel_attn(&c, 46), "qwen3_next: 12 of 48");
    CHECK_OK(layersel_range(&c, "ranks", &lo, &hi, note, sizeof note));
    CHECK(lo == 3 && hi == 47, "all: narrowed to 3-47, got %d-%d", lo, hi);
    CHECK(!strcmp(note, "layers 0-2, 4-6, 8-10, 12-14, 16-18, 20-22, 24-26, 28-30, 32-34, 36-38, 40-42, 44-46 are "
                        "Gated DeltaNet linear attention: sweeping the 12 attention layers 3, 7, 11, 15, 19, 23, 27, "
                        "31, 35, 39, 43, 47"), "all: %s", note);
    lo = 2; hi = 8;
    CHECK_OK(layersel_range(&c, "ranks", &lo, &hi, note, sizeof note));
    CHECK(lo == 3 && hi == 7 && !strcmp(note, "layers 2, 4-6, 8 are Gated DeltaNet linear attention: sweeping the 2 "
                                              "attention layers 3, 7"), "2-8: %d-%d: %s", lo, hi, note);
    CHECK(!strcmp(layersel_text(&c, 3, 7, t, sizeof t), "3, 7"), "text of 3-7: %s", t);
    lo = hi = 7;
    CHECK_OK(layersel_range(&c, "ranks", &lo, &hi, note, sizeof note));
    CHECK(lo == 7 && hi == 7 && !note[0], "one attention layer: no line: %s", note);
    lo = hi = 5;
    CHECK_ERR(layersel_range(&c, "ranks", &lo, &hi, note, sizeof note),
              "ranks: layer 5 of this qwen3_next model is a Gated DeltaNet linear-attention layer");
    CHECK(strstr(al_errmsg(), "its softmax-attention layers are 3, 7, 11,") != NULL, "names them: %s", al_errmsg());
    lo = 4; hi = 6;
    CHECK_ERR(layersel_range(&c, "truncate", &lo, &hi, NULL, 0),
              "truncate: layers 4-6 of this qwen3_next model are all Gated DeltaNet linear attention");
    CHECK(lo == 4 && hi == 6, "an error leaves the range: %d-%d", lo, hi);
    CHECK(layersel_note(&c, 0, 47, "the KV cache is that of", note, sizeof note) == 12 &&
          strstr(note, ": the KV cache is that of the 12 attention layers 3, 7,") != NULL, "note's verb: %s", note);
}

static void test_not_hybrid(void) {
    ModelConfig c = parse("\"model_type\": \"llama\", \"hidden_size\": 64, \"num_attention_heads\": 4, "
                          "\"num_hidden_layers\": 4");
    char note[256] = "x", t[64];
    int lo = 0, hi = 3;
    CHECK_OK(layersel_range(&c, "ranks", &lo, &hi, note, sizeof note));
    CHECK(lo == 0 && hi == 3 && !note[0] && layersel_count(&c, 0, 3) == 4, "llama: as given");
    CHECK(!strcmp(layersel_text(&c, 1, 1, t, sizeof t), "1-1") && !strcmp(layersel_text(&c, 0, 3, t, sizeof t), "0-3"),
          "llama: 'lo-hi' as the commands always said: %s", t);
    /* layer_types: the first layer full attention, the rest linear: a range of it starts there */
    c = parse("\"model_type\": \"qwen3_next\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 3, "
              "\"layer_types\": [\"full_attention\", \"linear_attention\", \"linear_attention\"]");
    lo = 0; hi = 2;
    CHECK_OK(layersel_range(&c, "ranks", &lo, &hi, note, sizeof note));
    CHECK(lo == 0 && hi == 0 && !strcmp(note, "layers 1-2 are Gated DeltaNet linear attention: sweeping the 1 attention "
                                              "layer 0"), "layer_types: %d-%d: %s", lo, hi, note);
}

int main(void) {
    test_hybrid();
    test_not_hybrid();
    return check_done();
}
