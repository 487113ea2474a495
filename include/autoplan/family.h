/*
 * family.h - model families scaled along their published shapes (costmodel/family.c), for
 * `autoplan fit`: the largest model of a family that a GPU and its host can train.
 *
 * A family is an architecture (a base ap_model: activation, norm, biases, vocabulary, positions,
 * tying, sequence length) and its published shapes ("anchors": hidden, layers, heads, KV heads,
 * FFN width). Its ladder of sizes walks the anchors in order of parameters and, between two
 * anchors, deepens the smaller one a layer at a time until it would pass the next (below the
 * first anchor it is made shallower; past the last one deeper, up to 8x its layers). Every rung
 * is a real shape of the family's widths, so "the next size" is one layer more or the next
 * published width. Built-in families cite their shape tables; a JSON file can describe others
 * (docs/heterogeneous.md).
 */
#ifndef AP_FAMILY_H
#define AP_FAMILY_H

#include "autoplan/model.h"

#define AP_FAMILY_MAX_SHAPES 32

typedef struct ap_family_shape {
    char name[32];          /* "GPT-3 13B" */
    int64_t layers, hidden, heads, kv_heads, ffn_hidden;
} ap_family_shape;

typedef struct ap_family {
    char name[32];          /* "gpt", "llama", ... */
    char cite[256];         /* where the shapes come from */
    ap_model base;          /* the architecture; shape fields are replaced per rung */
    int nshapes;
    ap_family_shape shapes[AP_FAMILY_MAX_SHAPES]; /* sorted by parameters */
} ap_family;

typedef struct ap_family_rung {
    int shape;              /* anchor whose widths it uses */
    int64_t layers;
    int64_t params;
} ap_family_rung;

/* Built-in families: "gpt" (GPT-3, Brown et al. 2020 Table 2.1), "llama" (Llama 2, Touvron et
 * al. 2023 Table 1 + the released configs), "llama3" (Llama 3, Dubey et al. 2024 Table 3),
 * "gpt2-colossalai" (Colossal-AI's GPT-2 examples, the models of its single-GPU chart). Any other
 * name is read as a JSON file: {"name", "model": {native model fields}, "shapes": [{"name",
 * "layers", "hidden", "heads", "kv_heads", "ffn_hidden"}]}; err names the file and field. */
ap_status ap_family_get(const char *name_or_path, ap_family *out, ap_err *err);
/* Comma-separated names of the built-in families. */
const char *ap_family_builtin_names(void);

/* The ladder, ascending in parameters. Caller frees *out. */
ap_status ap_family_ladder(const ap_family *f, ap_family_rung **out, int *n, ap_err *err);
/* The model of one rung ("gpt 13B+8L" names: the anchor and the layers added or removed). */
ap_status ap_family_model(const ap_family *f, const ap_family_rung *r, ap_model *out,
                          ap_err *err);

#endif
