/*
 * test_emit.c - plan.json (output/planio.c) and the trainer config emitters (output/emit*.c).
 *
 * Reference for every check is the plan itself: each emitted file is parsed back (Megatron and
 * Megatron-DeepSpeed flags with a small tokenizer below, JSON with ap_json, TOML with Python's
 * tomllib, YAML with python3-yaml, the Colossal-AI snippet with Python's ast) into the fields
 * the trainer can express, and those must equal the plan's. Every key and flag emitted must be
 * in the trainer's reference list (tests/data/trainers/, sources in its README). Batch and
 * world-size arithmetic is checked per flavour. Refusals must name a closest plan that the same
 * target then accepts. Golden files (tests/golden/emit/) are compared byte for byte;
 * AP_UPDATE_GOLDEN=1 rewrites them. plan.json: write/read round trip of every field, and bad
 * files (unknown major version, missing fields, wrong types, inconsistent degrees).
 *
 * When python3 (with tomllib and yaml) is missing, only the TOML/YAML/Python parse-backs are
 * skipped. AP_EMIT_KEEP=1 keeps the emitted files of every round-trip plan and prints where.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autoplan/planio.h"
#include "autoplan/emit.h"
#include "autoplan/json.h"
#include "testlib.h"

/* ---- reference lists -------------------------------------------------------------------- */

typedef struct {
    char **names;
    int n;
} namelist;

static namelist load_list(const char *rel) {
    namelist l = {0};
    char *text = tl_read(tl_path(rel));
    CHECK(text != NULL);
    if (!text) return l;
    int cap = 1024;
    l.names = malloc(sizeof(char *) * (size_t)cap);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!*line) continue;
        if (l.n == cap) {
            cap *= 2;
            l.names = realloc(l.names, sizeof(char *) * (size_t)cap);
        }
        l.names[l.n++] = strdup(line);
    }
    free(text);
    return l;
}

static int in_list(const namelist *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], name)) return 1;
    return 0;
}

static namelist L_ds, L_meg, L_mds, L_col, L_colx, L_tt, L_acc;

/* Report a name missing from a list as a failed check that names it. */
static void check_known(const namelist *l, const namelist *l2, const char *name, const char *file) {
    int ok = in_list(l, name) || (l2 && in_list(l2, name));
    if (!ok) fprintf(stderr, "  %s: '%s' is not in the trainer's reference list\n", file, name);
    CHECK(ok);
}

/* ---- python helper ---------------------------------------------------------------------- */

static int have_python;
static char pyconv[512];

static const char *PYCONV =
    "import ast, json, sys\n"
    "kind, path = sys.argv[1], sys.argv[2]\n"
    "if kind == 'toml':\n"
    "    import tomllib\n"
    "    print(json.dumps(tomllib.load(open(path, 'rb'))))\n"
    "elif kind == 'yaml':\n"
    "    import yaml\n"
    "    print(json.dumps(yaml.safe_load(open(path))))\n"
    "else:\n"
    "    tree = ast.parse(open(path).read())\n"
    "    out = {'consts': {}, 'imports': []}\n"
    "    def call(c):\n"
    "        d = {'__class__': c.func.id}\n"
    "        for k in c.keywords:\n"
    "            d[k.arg] = call(k.value) if isinstance(k.value, ast.Call) else "
    "ast.literal_eval(k.value)\n"
    "        return d\n"
    "    for node in tree.body:\n"
    "        if isinstance(node, ast.ImportFrom):\n"
    "            out['imports'] += [node.module + '.' + a.name for a in node.names]\n"
    "        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and "
    "node.targets[0].id == 'plugin':\n"
    "            out['plugin'] = call(node.value)\n"
    "        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):\n"
    "            out['consts'][node.targets[0].id] = node.value.value\n"
    "    print(json.dumps(out))\n";

/* Convert a TOML/YAML/Python file to JSON with python3; NULL when python is unavailable or
 * the file does not parse (the latter is a failed check). */
static ap_json *py_json(const char *kind, const char *path) {
    if (!have_python) return NULL;
    char out[600], cmd[2048];
    snprintf(out, sizeof out, "%s.json", path);
    snprintf(cmd, sizeof cmd, "python3 '%s' %s '%s' > '%s'", pyconv, kind, path, out);
    int rc = system(cmd);
    CHECK(rc == 0);
    if (rc != 0) {
        fprintf(stderr, "  %s does not parse as %s\n", path, kind);
        return NULL;
    }
    ap_err err;
    ap_json *j = ap_json_parse_file(out, &err);
    CHECK(j != NULL);
    unlink(out);
    return j;
}

/* ---- models and clusters ---------------------------------------------------------------- */

static int load_model(const char *name, ap_model *m) {
    char rel[256];
    ap_err err;
    snprintf(rel, sizeof rel, "examples/models/%s.json", name);
    if (ap_model_load(tl_path(rel), m, &err) != AP_OK) {
        fprintf(stderr, "  cannot load %s: %s\n", rel, err.msg);
        return 0;
    }
    return 1;
}

static void make_cluster(const char *gpu, int gpus, ap_cluster *c) {
    const ap_gpu *g = ap_gpu_find(gpu);
    CHECK(g != NULL);
    ap_cluster_from_gpu(g, gpus, c);
}

/* ---- test plans ------------------------------------------------------------------------- */

typedef struct pcase {
    const char *name, *model;
    int gpus;
    ap_trainer_id trainer;
    int tp, pp, dp, cp, ep, etp, vp;
    int64_t mbs, gbs, seq;
    int zero;
    ap_recompute rc;
    int rc_layers, sp, ovg, ovp;
    double off_opt, off_par;
    ap_dtype dtype;
    int no_flash;
    int nch;
    int layers[8];
    int rcs[8];
    int a2a; /* context parallelism by all-to-all (plan.h cp_a2a) */
} pcase;

#define MEG AP_TRAINER_MEGATRON
#define DS AP_TRAINER_DEEPSPEED
#define FS AP_TRAINER_FSDP
#define TT AP_TRAINER_TORCHTITAN
#define CO AP_TRAINER_COLOSSALAI
#define NO AP_RECOMPUTE_NONE
#define SEL AP_RECOMPUTE_SELECTIVE
#define FULL AP_RECOMPUTE_FULL
#define BF AP_DTYPE_BF16
#define F16 AP_DTYPE_FP16
#define F8 AP_DTYPE_FP8

/* name, model, gpus, trainer, tp pp dp cp ep etp vp, mbs gbs seq, zero, rc rcl sp ovg ovp,
 * off_opt off_par, dtype, no_flash, nch layers rcs[, a2a] */
static const pcase cases[] = {
    {"meg-7b-golden", "llama-2-7b", 8, MEG, 2, 1, 4, 1, 1, 1, 1, 2, 64, 4096, 1, SEL, 0, 1, 1, 1,
     0, 0, BF, 0, 0, {0}, {0}, 0},
    {"meg-7b-dp8-fp16", "llama-2-7b", 8, MEG, 1, 1, 8, 1, 1, 1, 1, 4, 128, 2048, 0, NO, 0, 0, 0,
     0, 0, 0, F16, 1, 0, {0}, {0}, 0},
    {"meg-70b-pp4-vp5", "llama-3-70b", 64, MEG, 8, 4, 2, 1, 1, 1, 5, 1, 64, 8192, 1, SEL, 0, 1,
     1, 1, 0, 0, BF, 0, 0, {0}, {0}, 0},
    {"meg-70b-first-last", "llama-3-70b", 32, MEG, 4, 4, 2, 1, 1, 1, 1, 1, 32, 4096, 1, FULL, 0,
     1, 1, 0, 0, 0, BF, 0, 4, {19, 21, 21, 19}, {-1, -1, -1, -1}, 0},
    {"meg-70b-layout-fp8", "llama-3-70b", 32, MEG, 8, 4, 1, 1, 1, 1, 1, 1, 16, 4096, 0, FULL, 4,
     1, 0, 0, 0, 0, F8, 0, 4, {18, 22, 20, 20}, {-1, -1, -1, -1}, 0},
    /* FP8 weights (fp8_params, --fp8-param-gather) with the distributed optimizer */
    {"meg-8b-fp8w", "llama-3-8b", 8, MEG, 1, 1, 8, 1, 1, 1, 1, 2, 64, 4096, 1, SEL, 0, 0, 1, 1,
     0, 0, F8, 0, 0, {0}, {0}, 0},
    {"meg-8b-cp2", "llama-3-8b", 8, MEG, 2, 1, 2, 2, 1, 1, 1, 1, 32, 8192, 1, SEL, 0, 1, 1, 1, 0,
     0, BF, 0, 0, {0}, {0}, 0},
    /* context parallelism by all-to-all (--cp-comm-type a2a): 16 query and 4 key/value heads
       per tp rank, divisible by cp 4 */
    {"meg-8b-cp4-a2a", "llama-3-8b", 8, MEG, 2, 1, 1, 4, 1, 1, 1, 1, 16, 16384, 1, SEL, 0, 1, 1,
     1, 0, 0, BF, 0, 0, {0}, {0}, 1},
    {"meg-mixtral-ep4", "mixtral-8x7b", 16, MEG, 2, 2, 4, 1, 4, 1, 1, 1, 64, 4096, 1, FULL, 0, 1,
     1, 1, 0, 0, BF, 0, 0, {0}, {0}, 0},
    {"meg-7b-vp-uneven", "llama-2-7b", 8, MEG, 1, 2, 4, 1, 1, 1, 2, 1, 32, 4096, 0, NO, 0, 0, 1,
     0, 0, 0, BF, 0, 4, {7, 9, 9, 7}, {-1, -1, -1, -1}, 0},
    {"meg-8b-offload", "llama-3-8b", 8, MEG, 1, 1, 8, 1, 1, 1, 1, 1, 64, 4096, 1, NO, 0, 0, 1, 1,
     0.5, 0, BF, 0, 0, {0}, {0}, 0},
    {"meg-dsv3", "deepseek-v3", 64, MEG, 2, 4, 8, 1, 8, 1, 1, 1, 256, 4096, 1, FULL, 0, 1, 1, 1,
     0, 0, BF, 0, 0, {0}, {0}, 0},
    {"meg-gpt2-tp2", "gpt2", 8, MEG, 2, 1, 4, 1, 1, 1, 1, 8, 256, 1024, 0, FULL, 6, 0, 1, 0, 0,
     0, BF, 0, 0, {0}, {0}, 0},
    {"ds-7b-z2", "llama-2-7b", 8, DS, 1, 1, 8, 1, 1, 1, 1, 4, 256, 4096, 2, FULL, 0, 0, 1, 0, 0,
     0, BF, 0, 0, {0}, {0}, 0},
    {"ds-7b-z3-offload", "llama-2-7b", 8, DS, 1, 1, 8, 1, 1, 1, 1, 2, 64, 4096, 3, NO, 0, 0, 1, 1,
     1, 1, BF, 0, 0, {0}, {0}, 0},
    {"ds-8b-z3-ratio", "llama-3-8b", 8, DS, 1, 1, 8, 1, 1, 1, 1, 1, 32, 4096, 3, FULL, 0, 0, 1, 0,
     0.6, 0, BF, 0, 0, {0}, {0}, 0},
    {"ds-7b-tp2-pp2-fp16", "llama-2-7b", 8, DS, 2, 2, 2, 1, 1, 1, 1, 1, 16, 4096, 1, NO, 0, 1, 0,
     0, 0, 0, F16, 0, 0, {0}, {0}, 0},
    {"ds-7b-z0", "llama-2-7b", 8, DS, 1, 1, 8, 1, 1, 1, 1, 1, 8, 2048, 0, NO, 0, 0, 0, 0, 0, 0,
     BF, 0, 0, {0}, {0}, 0},
    /* DeepSpeed-Ulysses (--ds-sequence-parallel-size), alone, all-to-all by itself */
    {"ds-8b-ulysses", "llama-3-8b", 8, DS, 1, 1, 2, 4, 1, 1, 1, 1, 16, 16384, 3, FULL, 0, 0, 1,
     1, 0, 0, BF, 0, 0, {0}, {0}, 0},
    {"ds-7b-autotp", "llama-2-7b", 8, DS, 2, 1, 4, 1, 1, 1, 1, 2, 64, 4096, 1, FULL, 0, 0, 1, 0,
     0, 0, BF, 0, 0, {0}, {0}, 0},
    /* interleaved chunks uniform: Colossal-AI refuses an uneven interleaved split */
    {"col-7b-pp-vp-perstage", "llama-2-7b", 8, CO, 2, 2, 2, 1, 1, 1, 2, 1, 16, 4096, 1, FULL, 0,
     1, 1, 0, 0, 0, BF, 0, 4, {8, 8, 8, 8}, {2, 4, 3, 1}, 0},
    /* Gemini offloads parameters only with every optimizer state offloaded */
    {"col-8b-gemini", "llama-3-8b", 8, CO, 1, 1, 8, 1, 1, 1, 1, 2, 64, 4096, 3, NO, 0, 0, 1, 1,
     1, 0.25, BF, 0, 0, {0}, {0}, 0},
    {"col-7b-lowlevel", "llama-2-7b", 8, CO, 1, 1, 8, 1, 1, 1, 1, 4, 128, 2048, 2, FULL, 0, 0, 1,
     1, 1, 0, F16, 0, 0, {0}, {0}, 0},
    /* the MoE plugin: ZeRO-1, no overlap */
    {"col-mixtral-ep", "mixtral-8x7b", 8, CO, 1, 1, 8, 1, 4, 1, 1, 1, 32, 4096, 1, NO, 0, 0, 0, 0,
     0, 0, BF, 0, 0, {0}, {0}, 0},
    {"tt-8b-tp2-z3", "llama-3-8b", 8, TT, 2, 1, 4, 1, 1, 1, 1, 1, 32, 8192, 3, SEL, 0, 1, 1, 1, 0,
     0, BF, 0, 0, {0}, {0}, 0},
    {"tt-70b-pp-vp-partial", "llama-3-70b", 64, TT, 8, 4, 2, 1, 1, 1, 2, 1, 32, 8192, 2, FULL, 5,
     1, 1, 1, 0, 0, BF, 0, 0, {0}, {0}, 0},
    {"tt-7b-fp8-replicate", "llama-2-7b", 8, TT, 1, 1, 8, 1, 1, 1, 1, 2, 16, 4096, 0, NO, 0, 0, 1,
     0, 0, 0, F8, 0, 0, {0}, {0}, 0},
    {"tt-8b-cp-offload", "llama-3-8b", 8, TT, 2, 1, 2, 2, 1, 1, 1, 1, 16, 8192, 3, FULL, 0, 1, 1,
     1, 1, 1, BF, 0, 0, {0}, {0}, 0},
    {"tt-7b-pp-uneven", "llama-2-7b", 8, TT, 1, 4, 2, 1, 1, 1, 1, 1, 16, 4096, 2, FULL, 0, 0, 1,
     1, 0, 0, BF, 0, 4, {7, 9, 9, 7}, {-1, -1, -1, -1}, 0},
    {"fsdp-7b-z3-offload", "llama-2-7b", 8, FS, 1, 1, 8, 1, 1, 1, 1, 1, 32, 4096, 3, FULL, 0, 0,
     1, 1, 1, 1, BF, 0, 0, {0}, {0}, 0},
    {"fsdp-8b-z2-fp16", "llama-3-8b", 8, FS, 1, 1, 8, 1, 1, 1, 1, 2, 64, 4096, 2, NO, 0, 0, 1, 1,
     0, 0, F16, 0, 0, {0}, {0}, 0},
    {"fsdp-8b-2nodes", "llama-3-8b", 16, FS, 1, 1, 16, 1, 1, 1, 1, 1, 64, 4096, 3, FULL, 0, 0, 1,
     1, 0, 0, BF, 0, 0, {0}, {0}, 0},
    /* FP8 under FSDP through Accelerate: Transformer Engine's delayed scaling (its default) */
    {"fsdp-8b-fp8", "llama-3-8b", 8, FS, 1, 1, 8, 1, 1, 1, 1, 1, 32, 4096, 3, FULL, 0, 0, 1, 1, 0,
     0, F8, 0, 0, {0}, {0}, 0},
    {"ds-8b-2nodes-z2", "llama-3-8b", 16, DS, 1, 1, 16, 1, 1, 1, 1, 2, 64, 4096, 2, NO, 0, 0, 1, 0,
     0, 0, BF, 0, 0, {0}, {0}, 0},
    {"fsdp-7b-ddp", "llama-2-7b", 8, FS, 1, 1, 8, 1, 1, 1, 1, 1, 16, 2048, 0, FULL, 0, 0, 1, 0, 0,
     0, BF, 0, 0, {0}, {0}, 0},
    /* ZeRO within groups of 8 of the 16 data-parallel ranks (zero_group_of): Megatron-LM's
     * partial distributed optimizer, DeepSpeed MiCS, FSDP2 and torchtitan HSDP */
    {"meg-8b-zg8", "llama-3-8b", 16, MEG, 1, 1, 16, 1, 1, 1, 1, 2, 64, 4096, 1, SEL, 0, 0, 1, 1,
     0, 0, BF, 0, 0, {0}, {0}, 0},
    {"ds-8b-mics-zg8", "llama-3-8b", 16, DS, 1, 1, 16, 1, 1, 1, 1, 1, 32, 4096, 3, FULL, 0, 0, 1,
     0, 0, 0, BF, 0, 0, {0}, {0}, 0},
    {"fsdp-8b-hsdp-zg8", "llama-3-8b", 16, FS, 1, 1, 16, 1, 1, 1, 1, 1, 64, 4096, 3, FULL, 0, 0,
     1, 1, 0, 0, BF, 0, 0, {0}, {0}, 0},
    {"tt-8b-hsdp-zg8", "llama-3-8b", 16, TT, 1, 1, 16, 1, 1, 1, 1, 1, 32, 8192, 2, SEL, 0, 0, 1,
     1, 0, 0, BF, 0, 0, {0}, {0}, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static const pcase *find_case(const char *name) {
    for (int i = 0; i < NCASES; i++)
        if (!strcmp(cases[i].name, name)) return &cases[i];
    fprintf(stderr, "test_emit: no case %s\n", name);
    abort();
}

/* The cases whose weights are FP8 tensors (plan.h fp8_params). */
static int fp8_weights_case(const pcase *k) { return !strcmp(k->name, "meg-8b-fp8w"); }
/* The FP8 recipe of a case: current scaling for the uneven Megatron one, the trainer's else. */
static ap_fp8_recipe fp8_recipe_of(const pcase *k) {
    return !strcmp(k->name, "meg-70b-layout-fp8") ? AP_FP8_TENSORWISE : AP_FP8_AUTO;
}

/* The ZeRO group of a case (plan.h zero_group): 8 for the "-zg8" cases, else all ranks. */
static int zero_group_of(const pcase *k) {
    size_t n = strlen(k->name);
    return n > 4 && !strcmp(k->name + n - 4, "-zg8") ? 8 : 0;
}

static void build_plan(const pcase *k, ap_plan *p) {
    ap_plan_init(p);
    p->fp8_params = fp8_weights_case(k);
    p->fp8_recipe = fp8_recipe_of(k);
    p->zero_group = zero_group_of(k);
    p->trainer = k->trainer;
    p->tp = k->tp; p->pp = k->pp; p->dp = k->dp; p->cp = k->cp;
    p->cp_a2a = k->a2a;
    p->ep = k->ep; p->etp = k->etp; p->vp = k->vp;
    p->mbs = k->mbs; p->gbs = k->gbs; p->seq = k->seq;
    p->grad_accum = k->gbs / (k->mbs * k->dp);
    p->zero = k->zero;
    p->recompute = k->rc;
    p->recompute_layers = k->rc_layers;
    p->sp = k->sp;
    p->overlap_grad = k->ovg;
    p->overlap_param = k->ovp;
    p->offload_optimizer = k->off_opt;
    p->offload_params = k->off_par;
    p->dtype = k->dtype;
    p->flash_attn = !k->no_flash;
    for (int c = 0; c < AP_MAX_CHUNKS; c++) p->stage_recompute[c] = -1;
    p->nchunks = k->nch;
    for (int c = 0; c < k->nch; c++) {
        p->stage_layers[c] = k->layers[c];
        p->stage_recompute[c] = k->rcs[c];
    }
}

/* ---- what a parser recovered ------------------------------------------------------------ */

typedef struct got {
    ap_plan p;
    int n;                 /* chunk count recovered (pp*vp) */
    int layers[AP_MAX_CHUNKS];
    int rcs[AP_MAX_CHUNKS];/* per-chunk recompute counts, -1 unknown */
    int64_t world;
    int64_t model_layers, hidden, heads, kv, ffn, vocab;
    int swiglu, rmsnorm, untied, nobias, rope; /* -1 = not parsed */
} got;

static void got_init(got *g) {
    memset(g, 0, sizeof *g);
    ap_plan_init(&g->p);
    g->p.flash_attn = -1;
    for (int c = 0; c < AP_MAX_CHUNKS; c++) g->rcs[c] = -1;
}

/* Chunk layers of the expected plan, for comparison with what a parser recovered. */
static void check_chunks(const ap_plan *p, const ap_model *m, const got *g, const char *who) {
    CHECK_INT(g->n, p->pp * p->vp);
    int bad = 0;
    for (int c = 0; c < g->n && c < p->pp * p->vp; c++)
        if (g->layers[c] != ap_plan_chunk_layers(p, m->layers, c)) bad = 1;
    if (bad) fprintf(stderr, "  %s: stage layers differ\n", who);
    CHECK(!bad);
}

/* ---- megatron.sh / deepspeed_launch.sh flag tokenizer ----------------------------------- */

typedef struct flagval {
    char flag[96];
    char val[2048];
} flagval;

/* All "--flag [value]" lines inside bash arrays NAME=( ... ). Returns the count. */
static int parse_arrays(const char *text, flagval *out, int max) {
    int n = 0, in = 0;
    const char *s = text;
    while (*s) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char line[4096];
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, s, len);
        line[len] = '\0';
        char *t = line;
        while (*t == ' ') t++;
        if (!in && strstr(line, "=(") && line[strlen(line) - 1] == '(') in = 1;
        else if (in && !strcmp(t, ")")) in = 0;
        else if (in && t[0] == '-' && t[1] == '-' && n < max) {
            char *sp = strchr(t, ' ');
            if (sp) *sp = '\0';
            snprintf(out[n].flag, sizeof out[n].flag, "%.95s", t);
            out[n].val[0] = '\0';
            if (sp) {
                char *v = sp + 1;
                size_t vl = strlen(v);
                if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
                    v[vl - 1] = '\0';
                    v++;
                }
                snprintf(out[n].val, sizeof out[n].val, "%s", v);
            }
            n++;
        }
        s = e ? e + 1 : s + len;
    }
    return n;
}

static const char *fv(const flagval *f, int n, const char *flag) {
    for (int i = 0; i < n; i++)
        if (!strcmp(f[i].flag, flag)) return f[i].val;
    return NULL;
}

static int64_t shell_int(const char *text, const char *var) {
    char key[64];
    snprintf(key, sizeof key, "\n%s=", var);
    const char *s = strstr(text, key);
    return s ? atoll(s + strlen(key)) : -1;
}

static int bash_ok(const char *path) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "bash -n '%s' 2>/dev/null", path);
    return system(cmd) == 0;
}

/* Megatron-LM and Megatron-DeepSpeed share the flag names parsed here. */
static void parse_megatron_flags(const flagval *f, int n, const ap_model *m, got *g) {
    const char *v;
    ap_plan *p = &g->p;
    g->model_layers = (v = fv(f, n, "--num-layers")) ? atoll(v) : -1;
    g->hidden = (v = fv(f, n, "--hidden-size")) ? atoll(v) : -1;
    g->heads = (v = fv(f, n, "--num-attention-heads")) ? atoll(v) : -1;
    g->ffn = (v = fv(f, n, "--ffn-hidden-size")) ? atoll(v) : -1;
    g->kv = (v = fv(f, n, "--num-query-groups")) ? atoll(v)
          : (v = fv(f, n, "--num-key-value-heads")) ? atoll(v) : g->heads;
    g->vocab = (v = fv(f, n, "--vocab-size")) ? atoll(v) : -1;
    g->swiglu = fv(f, n, "--swiglu") != NULL;
    g->rmsnorm = (v = fv(f, n, "--normalization")) && (!strcmp(v, "RMSNorm") || !strcmp(v, "rmsnorm"));
    g->untied = fv(f, n, "--untie-embeddings-and-output-weights") != NULL;
    g->nobias = fv(f, n, "--disable-bias-linear") != NULL;
    g->rope = ((v = fv(f, n, "--position-embedding-type")) && !strcmp(v, "rope")) ||
              fv(f, n, "--use-rotary-position-embeddings") != NULL;
    p->tp = (v = fv(f, n, "--tensor-model-parallel-size")) ? atoi(v) : 1;
    p->pp = (v = fv(f, n, "--pipeline-model-parallel-size")) ? atoi(v) : 1;
    p->cp = (v = fv(f, n, "--context-parallel-size")) ? atoi(v)
          : (v = fv(f, n, "--ds-sequence-parallel-size")) ? atoi(v) : 1;
    p->cp_a2a = (v = fv(f, n, "--cp-comm-type")) && !strcmp(v, "a2a");
    p->ep = (v = fv(f, n, "--expert-model-parallel-size")) ? atoi(v)
          : (v = fv(f, n, "--moe-expert-parallel-size")) ? atoi(v) : 1;
    p->etp = (v = fv(f, n, "--expert-tensor-parallel-size")) ? atoi(v) : 1;
    p->sp = fv(f, n, "--sequence-parallel") != NULL;
    p->mbs = (v = fv(f, n, "--micro-batch-size")) ? atoll(v) : -1;
    p->gbs = (v = fv(f, n, "--global-batch-size")) ? atoll(v) : -1;
    p->seq = (v = fv(f, n, "--seq-length")) ? atoll(v) : -1;
    /* Megatron-FSDP's optim_grads_params (with the distributed optimizer it requires) is 3 */
    v = fv(f, n, "--data-parallel-sharding-strategy");
    p->zero = fv(f, n, "--use-megatron-fsdp") && v && !strcmp(v, "optim_grads_params") ? 3
            : fv(f, n, "--use-distributed-optimizer") ? 1
            : (v = fv(f, n, "--zero-stage")) ? atoi(v) : 0;
    p->overlap_grad = fv(f, n, "--overlap-grad-reduce") != NULL;
    p->overlap_param = fv(f, n, "--overlap-param-gather") != NULL;
    p->overlap_tp = fv(f, n, "--tp-comm-overlap") != NULL;
    p->dtype = fv(f, n, "--fp16") ? AP_DTYPE_FP16
             : fv(f, n, "--fp8-format") ? AP_DTYPE_FP8 : AP_DTYPE_BF16;
    p->fp8_params = fv(f, n, "--fp8-param-gather") != NULL;
    v = fv(f, n, "--fp8-recipe");
    p->fp8_recipe = !v ? AP_FP8_AUTO : !strcmp(v, "delayed") ? AP_FP8_DELAYED
                  : !strcmp(v, "tensorwise") ? AP_FP8_TENSORWISE
                  : !strcmp(v, "mxfp8") ? AP_FP8_MXFP8 : (ap_fp8_recipe)-1;
    if ((v = fv(f, n, "--attention-backend"))) p->flash_attn = !strcmp(v, "flash");
    else p->flash_attn = fv(f, n, "--use-flash-attn-v2") != NULL;
    p->offload_optimizer = fv(f, n, "--optimizer-cpu-offload")
                               ? ((v = fv(f, n, "--optimizer-offload-fraction")) ? atof(v) : 1)
                               : 0;
    const char *gran = fv(f, n, "--recompute-granularity");
    p->recompute = !gran ? AP_RECOMPUTE_NONE
                 : !strcmp(gran, "selective") ? AP_RECOMPUTE_SELECTIVE : AP_RECOMPUTE_FULL;
    p->recompute_layers = 0;
    if (p->recompute == AP_RECOMPUTE_FULL && (v = fv(f, n, "--recompute-method")) &&
        !strcmp(v, "block"))
        p->recompute_layers = atoi(fv(f, n, "--recompute-num-layers"));
    /* stage split */
    int64_t L = g->model_layers;
    const char *layout = fv(f, n, "--pipeline-model-parallel-layout");
    p->vp = 1;
    if (layout) {
        g->n = 0;
        int cur = 0;
        for (const char *s = layout;; s++) {
            if (*s == 't') cur++;
            if (*s == '|' || !*s) {
                g->layers[g->n++] = cur;
                cur = 0;
            }
            if (!*s) break;
        }
        p->vp = g->n / p->pp;
        CHECK(layout[0] == 'E' && layout[strlen(layout) - 1] == 'L');
    } else if ((v = fv(f, n, "--num-layers-per-virtual-pipeline-stage"))) {
        int per = atoi(v);
        p->vp = (int)(L / (p->pp * per));
        g->n = p->pp * p->vp;
        for (int c = 0; c < g->n; c++) g->layers[c] = per;
    } else {
        const char *fs = fv(f, n, "--decoder-first-pipeline-num-layers");
        const char *ls = fv(f, n, "--decoder-last-pipeline-num-layers");
        int first = fs ? atoi(fs) : -1, last = ls ? atoi(ls) : -1;
        int64_t rest = L - (first > 0 ? first : 0) - (last > 0 ? last : 0);
        int nrest = p->pp - (first >= 0) - (last >= 0);
        g->n = p->pp;
        for (int c = 0; c < p->pp; c++) g->layers[c] = nrest > 0 ? (int)(rest / nrest) : 0;
        if (first >= 0) g->layers[0] = first;
        if (last >= 0) g->layers[p->pp - 1] = last;
        CHECK(nrest == 0 || rest % nrest == 0);
    }
    (void)m;
}

static void compare_model(const got *g, const ap_model *m) {
    CHECK_INT(g->model_layers, m->layers);
    CHECK_INT(g->hidden, m->hidden);
    CHECK_INT(g->heads, m->heads);
    CHECK_INT(g->kv, m->kv_heads);
    CHECK_INT(g->ffn, m->ffn_hidden);
    CHECK_INT(g->vocab, m->vocab);
    CHECK_INT(g->swiglu, m->act == AP_ACT_SWIGLU);
    CHECK_INT(g->rmsnorm, m->norm == AP_NORM_RMSNORM);
    CHECK_INT(g->untied, !m->tied_embeddings);
    CHECK_INT(g->nobias, !m->bias);
    CHECK_INT(g->rope, m->pos == AP_POS_ROTARY);
}

/* The parameter count the Megatron-LM / Megatron-DeepSpeed flags imply, by Megatron's own model
 * construction (megatron/core/models/gpt: embedding padded to a multiple of
 * make_vocab_size_divisible_by (128) x tp, per layer input norm + q/k/v/o (GQA groups,
 * kv-channels, MLA projections with --qk-layernorm's q_a/kv_a norms) + pre-MLP norm + MLP or
 * router/experts/shared experts, final norm, output layer when untied), written independently of
 * model.c. *pad_rows receives the vocabulary padding (rows Megatron adds to V). */
static int64_t implied_params(const flagval *f, int n, int64_t *pad_rows) {
    const char *v;
    int64_t L = (v = fv(f, n, "--num-layers")) ? atoll(v) : 0;
    int64_t h = (v = fv(f, n, "--hidden-size")) ? atoll(v) : 0;
    int64_t a = (v = fv(f, n, "--num-attention-heads")) ? atoll(v) : 0;
    int64_t ffn = (v = fv(f, n, "--ffn-hidden-size")) ? atoll(v) : 4 * h;
    int64_t g = (v = fv(f, n, "--num-query-groups")) ? atoll(v)
              : (v = fv(f, n, "--num-key-value-heads")) ? atoll(v) : a;
    int64_t d = (v = fv(f, n, "--kv-channels")) ? atoll(v) : (a ? h / a : 0);
    int64_t V = (v = fv(f, n, "--vocab-size")) ? atoll(v) : 0;
    int64_t tp = (v = fv(f, n, "--tensor-model-parallel-size")) ? atoll(v) : 1;
    int64_t div = 128 * tp;
    int64_t Vp = (V + div - 1) / div * div;
    *pad_rows = Vp - V;
    int bias = fv(f, n, "--disable-bias-linear") == NULL;
    int qkv_bias = fv(f, n, "--add-qkv-bias") != NULL;
    int glu = fv(f, n, "--swiglu") || fv(f, n, "--quick-geglu");
    int rms = (v = fv(f, n, "--normalization")) && (!strcmp(v, "RMSNorm") || !strcmp(v, "rmsnorm"));
    int64_t norm = rms ? h : 2 * h;
    int untied = fv(f, n, "--untie-embeddings-and-output-weights") != NULL;
    int qkln = fv(f, n, "--qk-layernorm") != NULL;
    int sinks = (v = fv(f, n, "--softmax-type")) && !strcmp(v, "learnable");
    /* attention */
    int64_t attn;
    if (fv(f, n, "--multi-latent-attention")) {
        int64_t ql = (v = fv(f, n, "--q-lora-rank")) ? atoll(v) : 0;
        int64_t kl = atoll(fv(f, n, "--kv-lora-rank"));
        int64_t qn = atoll(fv(f, n, "--qk-head-dim")), qr = atoll(fv(f, n, "--qk-pos-emb-head-dim"));
        int64_t vd = atoll(fv(f, n, "--v-head-dim"));
        attn = (ql ? h * ql + ql * a * (qn + qr) + (qkln ? ql : 0) : h * a * (qn + qr)) +
               h * (kl + qr) + (qkln ? kl : 0) + kl * a * (qn + vd) + a * vd * h;
    } else {
        attn = h * (a + 2 * g) * d + a * d * h;
        if (bias) attn += (a + 2 * g) * d + h;
        else if (qkv_bias) attn += (a + 2 * g) * d;
        if (qkln) attn += 2 * (rms ? d : 2 * d);
    }
    if (sinks) attn += a;
    int64_t mlp = (glu ? 3 : 2) * h * ffn + (bias ? (glu ? 2 : 1) * ffn + h : 0);
    /* experts */
    int64_t E = (v = fv(f, n, "--num-experts")) ? atoll(v) : 0;
    int64_t nmoe = 0;
    int64_t moe_layer = 0;
    if (E > 0) {
        int64_t fe = (v = fv(f, n, "--moe-ffn-hidden-size")) ? atoll(v) : ffn;
        int64_t fs = (v = fv(f, n, "--moe-shared-expert-intermediate-size")) ? atoll(v) : 0;
        int64_t expert = (glu ? 3 : 2) * h * fe + (bias ? (glu ? 2 : 1) * fe + h : 0);
        int64_t shared = fs ? (glu ? 3 : 2) * h * fs + (bias ? (glu ? 2 : 1) * fs + h : 0) : 0;
        if (fs && fv(f, n, "--moe-shared-expert-gate")) shared += h;
        int64_t router = h * E + (fv(f, n, "--moe-router-enable-expert-bias") ? E : 0);
        moe_layer = attn + 2 * norm + router + E * expert + shared;
        /* --moe-layer-freq "([0]*3+[1]*58)" (Megatron) or --expert-interval k (Megatron-DeepSpeed,
         * MoE on every k-th layer); default every layer */
        nmoe = L;
        if ((v = fv(f, n, "--moe-layer-freq")) && v[0] == '(') {
            nmoe = 0;
            for (const char *s = v; (s = strstr(s, "[1]*")) != NULL; s += 4) nmoe += atoll(s + 4);
        } else if ((v = fv(f, n, "--expert-interval"))) {
            nmoe = L / atoll(v);
        }
    }
    int64_t dense_layer = attn + 2 * norm + mlp;
    /* learned absolute positions: max-position-embeddings rows (Megatron-DeepSpeed's default
       unless --no-position-embedding) */
    const char *pet = fv(f, n, "--position-embedding-type");
    int learned = pet ? !strcmp(pet, "learned_absolute") : !fv(f, n, "--no-position-embedding");
    int64_t pos = learned ? atoll(fv(f, n, "--max-position-embeddings")) * h : 0;
    return Vp * h + pos + (L - nmoe) * dense_layer + nmoe * moe_layer + norm + (untied ? Vp * h : 0);
}

static void check_implied_params(const flagval *f, int n, const ap_model *m, const char *who) {
    int64_t pad = 0;
    int64_t got_params = implied_params(f, n, &pad);
    int64_t want = ap_model_total_params(m) + pad * m->hidden * (m->tied_embeddings ? 1 : 2);
    if (got_params != want)
        fprintf(stderr, "  %s (%s): flags imply %lld parameters, the model has %lld (+ %lld "
                "padding rows)\n", who, m->name, (long long)got_params,
                (long long)ap_model_total_params(m), (long long)pad);
    CHECK_INT(got_params, want);
}

static void check_megatron(const char *dir, const ap_model *m, const ap_cluster *c,
                           const ap_plan *p) {
    char path[1024];
    snprintf(path, sizeof path, "%s/megatron.sh", dir);
    char *text = tl_read(path);
    CHECK(text != NULL);
    if (!text) return;
    CHECK(bash_ok(path));
    static flagval f[512];
    int n = parse_arrays(text, f, 512);
    CHECK(n > 20);
    for (int i = 0; i < n; i++) check_known(&L_meg, NULL, f[i].flag, "megatron.sh");
    CHECK(strstr(text, "--virtual-pipeline-model-parallel-size") == NULL);
    /* set for tp or cp > 1, but never under Megatron-FSDP (which asserts it is not 1) */
    CHECK((strstr(text, "export CUDA_DEVICE_MAX_CONNECTIONS=1") != NULL) ==
          ((p->tp > 1 || p->cp > 1) && p->zero != 3));
    CHECK(strstr(text, "torchrun --standalone") != NULL);
    CHECK(strstr(text, "--rdzv-backend c10d") != NULL);
    CHECK(strstr(text, "#SBATCH --nodes=") != NULL);
    got g;
    got_init(&g);
    parse_megatron_flags(f, n, m, &g);
    int64_t world = shell_int(text, "NNODES") * shell_int(text, "GPUS_PER_NODE");
    CHECK_INT(world, c->gpus);
    /* Megatron: world divisible by tp*pp*cp; dp = world / (tp*pp*cp); gbs % (mbs*dp) == 0 */
    int64_t mp = (int64_t)g.p.tp * g.p.pp * g.p.cp;
    CHECK(world % mp == 0);
    int64_t dp = world / mp;
    CHECK(g.p.gbs % (g.p.mbs * dp) == 0);
    compare_model(&g, m);
    check_implied_params(f, n, m, "megatron.sh");
    CHECK_INT(g.p.tp, p->tp);
    CHECK_INT(g.p.pp, p->pp);
    CHECK_INT(g.p.cp, p->cp);
    CHECK_INT(g.p.cp_a2a, p->cp > 1 && p->cp_a2a);
    CHECK_INT(g.p.ep, p->ep);
    CHECK_INT(g.p.etp, p->etp);
    CHECK_INT(g.p.vp, p->vp);
    CHECK_INT(dp, p->dp);
    CHECK_INT(g.p.mbs, p->mbs);
    CHECK_INT(g.p.gbs, p->gbs);
    CHECK_INT(g.p.gbs / (g.p.mbs * dp), p->grad_accum);
    CHECK_INT(g.p.seq, p->seq);
    CHECK_INT(g.p.sp, p->sp);
    CHECK_INT(g.p.zero, p->zero);
    CHECK_INT(g.p.recompute, p->recompute);
    CHECK_INT(g.p.recompute_layers, p->recompute_layers);
    CHECK_INT(g.p.overlap_grad, p->overlap_grad);
    CHECK_INT(g.p.overlap_param, p->overlap_param);
    CHECK_INT(g.p.overlap_tp, p->overlap_tp);
    CHECK_INT(g.p.dtype, p->dtype);
    CHECK_INT(g.p.fp8_params, p->fp8_params);
    /* FP8 plans name the recipe they were priced with, explicitly */
    CHECK_INT(g.p.fp8_recipe, p->dtype == AP_DTYPE_FP8 ? ap_plan_fp8_recipe(p) : AP_FP8_AUTO);
    CHECK_INT(g.p.flash_attn, p->flash_attn);
    CHECK_NEAR(g.p.offload_optimizer + 1, p->offload_optimizer + 1, 1e-9);
    /* the partial distributed optimizer: dp x cp / zero_group replicas */
    const char *inst = fv(f, n, "--num-distributed-optimizer-instances");
    CHECK_INT(inst ? dp * g.p.cp / atoi(inst) : 0, p->zero_group);
    check_chunks(p, m, &g, "megatron.sh");
    free(text);
}

/* ---- DeepSpeed ---------------------------------------------------------------------------- */

/* Every key path of a ds_config is in the DeepSpeed list. */
static void ds_keys(const ap_json *o, const char *prefix, const char *file) {
    for (ap_json *it = ap_json_first(o); it; it = ap_json_next(it)) {
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", ap_json_key(it));
        check_known(&L_ds, NULL, path, file);
        if (ap_json_is_object(it)) ds_keys(it, path, file);
    }
}

static double jnum(const ap_json *o, const char *path) {
    char key[64];
    const ap_json *cur = o;
    const char *s = path;
    while (cur && *s) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        memcpy(key, s, n);
        key[n] = '\0';
        cur = ap_json_get(cur, key);
        s = dot ? dot + 1 : s + n;
    }
    if (!cur) return NAN;
    if (ap_json_is_bool(cur)) return ap_json_bool(cur);
    return ap_json_is_number(cur) ? ap_json_number(cur) : NAN;
}

static const char *jstr(const ap_json *o, const char *key) {
    return ap_json_string(ap_json_get(o, key));
}

/* The ds_config fields every flavour holds. */
static void check_ds_common(const ap_json *j, const ap_plan *p, const char *file) {
    ds_keys(j, "", file);
    CHECK_INT(jnum(j, "train_micro_batch_size_per_gpu"), p->mbs);
    CHECK_INT(jnum(j, "gradient_accumulation_steps"), p->grad_accum);
    CHECK(!isnan(jnum(j, "gradient_clipping")));
    CHECK_INT(jnum(j, "zero_optimization.stage"), p->zero);
    if (p->zero >= 1) CHECK_INT(jnum(j, "zero_optimization.overlap_comm"), p->overlap_grad);
    if (p->zero == 3)
        CHECK_INT(jnum(j, "zero_optimization.stage3_prefetch_bucket_size") > 0, p->overlap_param);
    /* MiCS: the ZeRO-3 group, absent when the states shard over every rank */
    double mics = jnum(j, "zero_optimization.mics_shard_size");
    CHECK_INT(isnan(mics) ? 0 : (int64_t)mics, p->zero_group);
    if (p->dtype == AP_DTYPE_FP16) {
        CHECK_INT(jnum(j, "fp16.enabled"), 1);
        CHECK(ap_json_get(j, "bf16") == NULL);
    } else {
        CHECK_INT(jnum(j, "bf16.enabled"), 1);
        CHECK(ap_json_get(j, "fp16") == NULL);
    }
    /* offload: device cpu, explicit pin_memory, ratio only below 1 */
    double ratio = jnum(j, "zero_optimization.offload_optimizer.ratio");
    if (p->offload_optimizer > 0) {
        CHECK_INT(jnum(j, "zero_optimization.offload_optimizer.pin_memory"), 1);
        CHECK_NEAR(isnan(ratio) ? 1.0 : ratio, p->offload_optimizer, 1e-12);
    } else {
        CHECK(ap_json_get(ap_json_get(j, "zero_optimization"), "offload_optimizer") == NULL);
    }
    if (p->offload_params > 0) CHECK_INT(jnum(j, "zero_optimization.offload_param.pin_memory"), 1);
    else CHECK(ap_json_get(ap_json_get(j, "zero_optimization"), "offload_param") == NULL);
    /* DeepSpeed: offload_param only with stage 3 (reference README) */
    if (ap_json_get(ap_json_get(j, "zero_optimization"), "offload_param")) CHECK_INT(p->zero, 3);
    /* a top-level "auto" only works through HF: never emitted */
    char *text = ap_json_print(j, 0);
    CHECK(text && !strstr(text, "\"auto\""));
    free(text);
}

static void check_deepspeed(const char *dir, const ap_model *m, const ap_cluster *c,
                            const ap_plan *p, const char *note) {
    ap_err err;
    char path[1024];
    snprintf(path, sizeof path, "%s/ds_config.json", dir);
    ap_json *j = ap_json_parse_file(path, &err);
    CHECK(j != NULL);
    if (!j) return;
    check_ds_common(j, p, "ds_config.json");
    /* DeepSpeed: pipeline parallelism works only with ZeRO 0/1 (reference README) */
    if (p->pp > 1) CHECK(jnum(j, "zero_optimization.stage") <= 1);
    /* Megatron-DeepSpeed flavour: train_batch_size = micro x accumulation x dp */
    CHECK_INT(jnum(j, "train_batch_size"), p->mbs * p->grad_accum * p->dp);
    CHECK_INT(jnum(j, "train_batch_size"), p->gbs);
    CHECK_INT(ap_json_get(j, "activation_checkpointing") != NULL, p->recompute == AP_RECOMPUTE_FULL);
    ap_json_free(j);

    snprintf(path, sizeof path, "%s/ds_config_hf.json", dir);
    int hf = access(path, F_OK) == 0;
    CHECK_INT(hf, p->pp == 1 && p->cp == 1 && p->ep == 1 && !p->sp && !(p->tp > 1 && p->zero > 2));
    if (!hf) CHECK_CONTAINS(note, "ds_config_hf.json not written");
    if (hf) {
        j = ap_json_parse_file(path, &err);
        CHECK(j != NULL);
        if (j) {
            check_ds_common(j, p, "ds_config_hf.json");
            /* HF/AutoTP: no topology, DeepSpeed multiplies over all ranks -> no train_batch_size */
            CHECK(ap_json_get(j, "train_batch_size") == NULL);
            CHECK_INT(isnan(jnum(j, "tensor_parallel.autotp_size")) ? 1
                                                                    : jnum(j, "tensor_parallel.autotp_size"),
                      p->tp);
            ap_json_free(j);
        }
    }

    snprintf(path, sizeof path, "%s/deepspeed_launch.sh", dir);
    char *text = tl_read(path);
    CHECK(text != NULL);
    if (!text) return;
    CHECK(bash_ok(path));
    static flagval f[512];
    int n = parse_arrays(text, f, 512);
    for (int i = 0; i < n; i++) check_known(&L_mds, NULL, f[i].flag, "deepspeed_launch.sh");
    got g;
    got_init(&g);
    parse_megatron_flags(f, n, m, &g);
    int64_t world = shell_int(text, "NNODES") * shell_int(text, "GPUS_PER_NODE");
    CHECK_INT(world, c->gpus);
    compare_model(&g, m);
    check_implied_params(f, n, m, "deepspeed_launch.sh");
    CHECK_INT(g.p.tp, p->tp);
    CHECK_INT(g.p.pp, p->pp);
    CHECK_INT(g.p.cp, p->cp);
    CHECK_INT(world / ((int64_t)g.p.tp * g.p.pp * g.p.cp), p->dp);
    CHECK_INT(g.p.sp, p->sp);
    CHECK_INT(g.p.mbs, p->mbs);
    CHECK_INT(g.p.gbs, p->gbs);
    CHECK_INT(g.p.seq, p->seq);
    CHECK_INT(g.p.zero, p->zero);
    CHECK_INT(g.p.recompute, p->recompute);
    CHECK_INT(g.p.dtype == AP_DTYPE_FP16, p->dtype == AP_DTYPE_FP16);
    CHECK_INT(g.p.flash_attn, p->flash_attn);
    CHECK_INT(g.p.ep, p->ep);
    CHECK_INT(fv(f, n, "--no-pipeline-parallel") != NULL, p->pp == 1);
    CHECK_CONTAINS(fv(f, n, "--deepspeed_config"), "ds_config.json");
    if (hf && p->recompute == AP_RECOMPUTE_FULL)
        CHECK_CONTAINS(text, "model.gradient_checkpointing_enable()");
    free(text);
}

/* ---- Colossal-AI -------------------------------------------------------------------------- */

static int jint_or(const ap_json *o, const char *k, int dflt) {
    const ap_json *v = ap_json_get(o, k);
    if (!v) return dflt;
    if (ap_json_is_bool(v)) return ap_json_bool(v);
    return (int)ap_json_number(v);
}

static void check_colossalai(const char *dir, const ap_model *m, const ap_cluster *c,
                             const ap_plan *p) {
    char path[1024];
    snprintf(path, sizeof path, "%s/colossalai_booster.py", dir);
    ap_json *j = py_json("py", path);
    if (!j) return;
    ap_json *pl = ap_json_get(j, "plugin"), *k = ap_json_get(j, "consts");
    CHECK(pl != NULL);
    if (!pl) { ap_json_free(j); return; }
    const char *cls = jstr(pl, "__class__");
    for (ap_json *it = ap_json_first(pl); it; it = ap_json_next(it)) {
        if (!strcmp(ap_json_key(it), "__class__")) continue;
        char name[160];
        snprintf(name, sizeof name, "%s.%s", cls, ap_json_key(it));
        check_known(&L_col, NULL, name, "colossalai_booster.py");
        if (ap_json_is_object(it))
            for (ap_json *sub = ap_json_first(it); sub; sub = ap_json_next(sub)) {
                if (!strcmp(ap_json_key(sub), "__class__")) continue;
                snprintf(name, sizeof name, "%s.%s", jstr(it, "__class__"), ap_json_key(sub));
                check_known(&L_colx, NULL, name, "colossalai_booster.py");
            }
    }
    /* the class is imported */
    char imp[160];
    snprintf(imp, sizeof imp, "colossalai.booster.plugin.%s", cls);
    int imported = 0;
    ap_json *imps = ap_json_get(j, "imports");
    for (int i = 0; i < ap_json_size(imps); i++)
        if (!strcmp(ap_json_string(ap_json_at(imps, i)), imp)) imported = 1;
    CHECK(imported);
    /* plugin rules (reference README): Gemini for ZeRO-3, Hybrid zero_stage <= 2 (<= 1 with pp) */
    const char *want = p->zero == 3 ? "GeminiPlugin"
                     : (p->zero >= 1 && p->tp == 1 && p->pp == 1 && p->ep == 1 && !p->sp)
                           ? "LowLevelZeroPlugin"
                     : p->ep > 1 ? "MoeHybridParallelPlugin" : "HybridParallelPlugin";
    CHECK_STR(cls, want);
    const char *prec = jstr(pl, "precision");
    CHECK_STR(prec, p->dtype == AP_DTYPE_FP16 ? "fp16" : "bf16");
    /* FP8 linear layers beside the 16-bit precision (use_fp8: per-tensor current scaling) */
    CHECK_INT(jint_or(pl, "use_fp8", 0), p->dtype == AP_DTYPE_FP8);
    /* batch arithmetic: no global-batch argument; the constants carry it */
    int64_t micro = (int64_t)jnum(k, "MICRO_BATCH_SIZE"), acc = (int64_t)jnum(k, "GRAD_ACCUM_STEPS");
    int64_t dp = (int64_t)jnum(k, "DATA_PARALLEL_SIZE");
    CHECK_INT(micro, p->mbs);
    CHECK_INT(acc, p->grad_accum);
    CHECK_INT(dp, p->dp);
    CHECK_INT((int64_t)jnum(k, "GLOBAL_BATCH_SIZE"), micro * acc * dp);
    CHECK_INT((int64_t)jnum(k, "SEQ_LEN"), p->seq);
    CHECK_INT(dp * p->tp * p->pp, c->gpus);
    if (!strcmp(cls, "GeminiPlugin")) {
        CHECK_STR(jstr(pl, "placement_policy"), "static");
        CHECK_NEAR(jnum(pl, "offload_optim_frac") + 1, p->offload_optimizer + 1, 1e-12);
        CHECK_NEAR(jnum(pl, "offload_param_frac") + 1, p->offload_params + 1, 1e-12);
        CHECK_NEAR(jnum(pl, "shard_param_frac"), 1.0, 1e-12);
        CHECK_INT(jint_or(pl, "tp_size", 1), p->tp);
        CHECK_INT(jint_or(pl, "enable_sequence_parallelism", 0), p->sp);
        CHECK_INT(jint_or(pl, "enable_async_reduce", 0), p->overlap_grad);
        CHECK_INT(jint_or(pl, "max_prefetch", 0) > 0, p->overlap_param);
        CHECK_INT(jint_or(pl, "enable_flash_attention", 0), p->flash_attn);
    } else if (!strcmp(cls, "LowLevelZeroPlugin")) {
        CHECK_INT(jint_or(pl, "stage", -1), p->zero);
        CHECK_INT(jint_or(pl, "cpu_offload", 0), p->offload_optimizer > 0);
        CHECK_INT(p->offload_optimizer == 0 || p->offload_optimizer == 1, 1);
        CHECK_INT(jint_or(pl, "overlap_communication", 0), p->overlap_grad);
        CHECK_INT(jint_or(pl, "overlap_allgather", 0), p->overlap_param);
    } else {
        CHECK_INT(jint_or(pl, "tp_size", 1), p->tp);
        CHECK_INT(jint_or(pl, "pp_size", 1), p->pp);
        CHECK_INT(jint_or(pl, "ep_size", 1), p->ep);
        int z = jint_or(pl, "zero_stage", 0);
        CHECK_INT(z, p->zero);
        CHECK(z <= 2 && (p->pp == 1 || z <= 1));
        CHECK_INT(jint_or(pl, "enable_sequence_parallelism", 0), p->sp);
        CHECK_INT(jint_or(pl, "enable_flash_attention", 0), p->flash_attn);
        if (p->zero >= 1) {
            CHECK_INT(jint_or(pl, "overlap_communication", 0), p->overlap_grad);
            CHECK_INT(jint_or(pl, "overlap_allgather", 0), p->overlap_param);
            CHECK_INT(jint_or(pl, "cpu_offload", 0), p->offload_optimizer > 0);
        }
        if (p->pp > 1) {
            CHECK_INT(jint_or(pl, "microbatch_size", -1), p->mbs);
            CHECK_INT((int64_t)jnum(k, "DATALOADER_BATCH_SIZE"), p->mbs * p->grad_accum);
            int chunks = jint_or(pl, "num_model_chunks", 1);
            CHECK_INT(chunks, p->vp);
            CHECK_STR(jstr(pl, "pp_style"), p->vp > 1 ? "interleaved" : "1f1b");
            got g;
            got_init(&g);
            g.n = p->pp * chunks;
            ap_json *nl = ap_json_get(pl, "num_layers_per_stage");
            for (int i = 0; i < g.n; i++)
                g.layers[i] = nl ? (int)ap_json_number(ap_json_at(nl, i))
                                 : (int)(m->layers / g.n);
            if (nl) CHECK_INT(ap_json_size(nl), g.n);
            check_chunks(p, m, &g, "colossalai_booster.py");
            ap_json *gc = ap_json_get(pl, "gradient_checkpoint_config");
            CHECK_INT(gc != NULL, p->recompute == AP_RECOMPUTE_FULL);
            if (gc) {
                ap_json *ck = ap_json_get(gc, "num_ckpt_layers_per_stage");
                CHECK_INT(ap_json_size(ck), g.n);
                for (int i = 0; i < g.n && i < ap_json_size(ck); i++) {
                    int layers = ap_plan_chunk_layers(p, m->layers, i);
                    int want_k = p->nchunks && p->stage_recompute[i] >= 0 ? p->stage_recompute[i]
                                                                         : p->recompute_layers;
                    if (want_k == 0 || want_k > layers) want_k = layers;
                    CHECK_INT((int)ap_json_number(ap_json_at(ck, i)), want_k);
                }
            }
        } else {
            CHECK_INT((int64_t)jnum(k, "DATALOADER_BATCH_SIZE"), p->mbs);
        }
    }
    if (p->recompute == AP_RECOMPUTE_FULL && p->pp == 1) {
        char *text = tl_read(path);
        CHECK_CONTAINS(text, "model.gradient_checkpointing_enable()");
        free(text);
    }
    ap_json_free(j);
}

/* ---- torchtitan --------------------------------------------------------------------------- */

static void tt_keys(const ap_json *o, const char *prefix) {
    for (ap_json *it = ap_json_first(o); it; it = ap_json_next(it)) {
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", ap_json_key(it));
        if (ap_json_is_object(it)) tt_keys(it, path);
        else check_known(&L_tt, NULL, path, "torchtitan.toml");
    }
}

static void check_torchtitan(const char *dir, const ap_model *m, const ap_cluster *c,
                             const ap_plan *p) {
    char path[1024];
    snprintf(path, sizeof path, "%s/torchtitan.toml", dir);
    char *text = tl_read(path);
    CHECK_CONTAINS(text, "v0.2.2");
    free(text);
    ap_json *j = py_json("toml", path);
    if (!j) return;
    tt_keys(j, "");
    ap_json *tr = ap_json_get(j, "training"), *pa = ap_json_get(j, "parallelism"),
            *ac = ap_json_get(j, "activation_checkpoint");
    int rep = jint_or(pa, "data_parallel_replicate_degree", 1);
    int shard = jint_or(pa, "data_parallel_shard_degree", -1);
    int tp = jint_or(pa, "tensor_parallel_degree", 1), pp = jint_or(pa, "pipeline_parallel_degree", 1);
    int cp = jint_or(pa, "context_parallel_degree", 1);
    CHECK_INT((int64_t)rep * shard * tp * pp * cp, c->gpus);
    CHECK_INT(tp, p->tp);
    CHECK_INT(pp, p->pp);
    CHECK_INT(cp, p->cp);
    CHECK_INT(rep * shard, p->dp);
    CHECK_INT(jint_or(pa, "expert_parallel_degree", 1), p->ep);
    CHECK_INT(jint_or(pa, "expert_tensor_parallel_degree", 1), p->etp);
    if (p->tp > 1) CHECK_INT(jint_or(pa, "enable_async_tensor_parallel", 0), p->overlap_tp);
    /* ZeRO: 0 replicate; 2/3 shard with reshard never/always, within groups of zero_group
       (shard x cp) ranks replicated across the groups; tp > 1 needs sharding */
    int gshard = p->zero >= 2 && p->zero_group > 0 ? p->zero_group / p->cp : p->dp;
    if (p->dp > 1) CHECK_INT(p->zero == 0 ? rep : shard, p->zero == 0 ? p->dp : gshard);
    if (tp > 1 && p->dp > 1) CHECK(shard == gshard);
    const char *rs = jstr(pa, "fsdp_reshard_after_forward");
    if (p->zero >= 2) CHECK_STR(rs, p->zero == 3 ? "always" : "never");
    /* batch: local x dp x accumulation = global */
    int64_t local = (int64_t)jnum(tr, "local_batch_size"), global = (int64_t)jnum(tr, "global_batch_size");
    CHECK_INT(global, p->gbs);
    CHECK(global % (local * p->dp) == 0);
    if (pp > 1) {
        int64_t mb = (int64_t)jnum(pa, "pipeline_parallel_microbatch_size");
        CHECK_INT(mb, p->mbs);
        CHECK_INT(local / mb * (global / (local * p->dp)), p->grad_accum);
        const char *sched = jstr(pa, "pipeline_parallel_schedule");
        CHECK_STR(sched, p->vp > 1 ? "Interleaved1F1B" : "1F1B");
        got g;
        got_init(&g);
        ap_json *parts = ap_json_get(pa, "module_fqns_per_model_part");
        if (parts) {
            g.n = ap_json_size(parts);
            for (int i = 0; i < g.n; i++) {
                ap_json *part = ap_json_at(parts, i);
                for (int k = 0; k < ap_json_size(part); k++)
                    if (!strncmp(ap_json_string(ap_json_at(part, k)), "layers.", 7)) g.layers[i]++;
            }
        } else {
            /* as torchtitan v0.2.2 counts stages (pipeline_parallel.py): the embedding and
               the head weigh first_less / last_less layers, default 1 each */
            int per = jint_or(pa, "pipeline_parallel_layers_per_stage", 0);
            int w = jint_or(pa, "pipeline_parallel_first_stage_less_layers", 1) +
                    jint_or(pa, "pipeline_parallel_last_stage_less_layers", 1);
            CHECK(per > 0);
            g.n = per > 0 ? (int)((m->layers + w + per - 1) / per) : 0;
            for (int i = 0; i < g.n; i++) g.layers[i] = per;
        }
        check_chunks(p, m, &g, "torchtitan.toml");
    } else {
        CHECK_INT(local, p->mbs);
        CHECK_INT(global / (local * p->dp), p->grad_accum);
    }
    CHECK_INT((int64_t)jnum(tr, "seq_len"), p->seq);
    CHECK_INT(jint_or(tr, "enable_cpu_offload", 0), p->offload_optimizer > 0);
    if (p->offload_optimizer > 0) CHECK(p->offload_optimizer == 1 && p->offload_params == 1);
    const char *mode = jstr(ac, "mode"), *opt = jstr(ac, "selective_ac_option");
    if (p->recompute == AP_RECOMPUTE_NONE) CHECK_STR(mode, "none");
    else if (p->recompute == AP_RECOMPUTE_SELECTIVE) {
        CHECK_STR(mode, "selective");
        CHECK_STR(opt, "op");
    } else if (p->recompute_layers > 0) {
        CHECK_STR(mode, "selective");
        int every = opt ? atoi(opt) : 0;
        int per = (int)(m->layers / (p->pp * p->vp));
        CHECK(every > 0 && per / every == p->recompute_layers);
    } else {
        CHECK_STR(mode, "full");
    }
    ap_json *conv = ap_json_get(ap_json_get(j, "model"), "converters");
    CHECK_INT(conv != NULL, p->dtype == AP_DTYPE_FP8);
    CHECK_STR(jstr(tr, "mixed_precision_param"), "bfloat16");
    ap_json_free(j);
}

/* ---- Accelerate --------------------------------------------------------------------------- */

static void check_accelerate(const char *dir, const ap_model *m, const ap_cluster *c,
                             const ap_plan *p) {
    (void)m;
    char path[1024];
    snprintf(path, sizeof path, "%s/accelerate.yaml", dir);
    ap_json *j = py_json("yaml", path);
    ap_trainer_id tid = ap_emit_trainer(AP_EMIT_ACCELERATE, p);
    char dsp[1024];
    snprintf(dsp, sizeof dsp, "%s/accelerate_ds_config.json", dir);
    CHECK_INT(access(dsp, F_OK) == 0, tid == AP_TRAINER_DEEPSPEED);
    if (tid == AP_TRAINER_DEEPSPEED) {
        ap_err err;
        ap_json *d = ap_json_parse_file(dsp, &err);
        CHECK(d != NULL);
        if (d) {
            check_ds_common(d, p, "accelerate_ds_config.json");
            CHECK(ap_json_get(d, "train_batch_size") == NULL);
            ap_json_free(d);
        }
    }
    if (!j) return;
    for (ap_json *it = ap_json_first(j); it; it = ap_json_next(it)) {
        check_known(&L_acc, NULL, ap_json_key(it), "accelerate.yaml");
        if (ap_json_is_object(it))
            for (ap_json *s = ap_json_first(it); s; s = ap_json_next(s)) {
                char name[200];
                snprintf(name, sizeof name, "%s.%s", ap_json_key(it), ap_json_key(s));
                check_known(&L_acc, NULL, name, "accelerate.yaml");
            }
    }
    int nodes = jint_or(j, "num_machines", 0);
    CHECK_INT(jint_or(j, "num_processes", 0), c->gpus);
    CHECK_INT(nodes, (c->gpus + c->gpus_per_node - 1) / c->gpus_per_node);
    const char *dt = jstr(j, "distributed_type");
    if (tid == AP_TRAINER_DEEPSPEED) {
        CHECK_STR(dt, "DEEPSPEED");
        ap_json *dc = ap_json_get(j, "deepspeed_config");
        CHECK_STR(jstr(dc, "deepspeed_config_file"), "accelerate_ds_config.json");
        /* no duplicated settings next to deepspeed_config_file (reference README) */
        static const char *const dup[] = {"zero_stage", "gradient_accumulation_steps",
                                          "gradient_clipping", "offload_optimizer_device",
                                          "offload_param_device", NULL};
        for (int i = 0; dup[i]; i++) CHECK(ap_json_get(dc, dup[i]) == NULL);
        CHECK(ap_json_get(j, "mixed_precision") == NULL);
    } else {
        CHECK_STR(jstr(j, "mixed_precision"), p->dtype == AP_DTYPE_FP16  ? "fp16"
                                              : p->dtype == AP_DTYPE_FP8 ? "fp8" : "bf16");
        /* FP8 through the backend of the plan's recipe: Transformer Engine's delayed scaling
         * (HYBRID, as Megatron-LM's), or torchao's tensorwise Float8Linear */
        ap_json *f8 = ap_json_get(j, "fp8_config");
        CHECK_INT(f8 != NULL, p->dtype == AP_DTYPE_FP8);
        if (f8 && ap_plan_fp8_recipe(p) == AP_FP8_TENSORWISE) {
            CHECK_STR(jstr(f8, "fp8_backend"), "AO");
            CHECK(ap_json_get(f8, "fp8_format") == NULL);
        } else if (f8) {
            CHECK_STR(jstr(f8, "fp8_backend"), "TE");
            CHECK_STR(jstr(f8, "fp8_format"), "HYBRID");
        }
        if (p->zero == 0) {
            CHECK_STR(dt, "MULTI_GPU");
        } else {
            CHECK_STR(dt, "FSDP");
            ap_json *fc = ap_json_get(j, "fsdp_config");
            CHECK_INT(jint_or(fc, "fsdp_reshard_after_forward", -1), p->zero == 3);
            CHECK_INT(jint_or(fc, "fsdp_offload_params", -1), p->offload_params > 0);
            CHECK_INT(jint_or(fc, "fsdp_activation_checkpointing", -1),
                      p->recompute == AP_RECOMPUTE_FULL);
            /* HSDP: shard within zero_group ranks, replicate across the groups */
            int gshard = p->zero_group > 0 ? p->zero_group : p->dp;
            CHECK_INT(jint_or(ap_json_get(j, "parallelism_config"),
                              "parallelism_config_dp_shard_size", -1), gshard);
            CHECK_INT(jint_or(ap_json_get(j, "parallelism_config"),
                              "parallelism_config_dp_replicate_size", 1), p->dp / gshard);
        }
    }
    char *text = tl_read(path);
    char want[64];
    snprintf(want, sizeof want, "gradient_accumulation_steps=%lld", (long long)p->grad_accum);
    if (tid != AP_TRAINER_DEEPSPEED) CHECK_CONTAINS(text, want);
    free(text);
    ap_json_free(j);
}

/* ---- round trip over all plans and targets ---------------------------------------------- */

static void rm_rf(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", dir);
}

static int target_of(ap_trainer_id t) {
    switch (t) {
    case AP_TRAINER_MEGATRON: return AP_EMIT_MEGATRON;
    case AP_TRAINER_DEEPSPEED: return AP_EMIT_DEEPSPEED;
    case AP_TRAINER_COLOSSALAI: return AP_EMIT_COLOSSALAI;
    case AP_TRAINER_TORCHTITAN: return AP_EMIT_TORCHTITAN;
    default: return AP_EMIT_ACCELERATE;
    }
}

static int emit_has_per_stage_recompute_test(const ap_plan *p) {
    for (int c = 0; c < p->nchunks; c++)
        if (p->stage_recompute[c] >= 0) return 1;
    return 0;
}

static int covered[32];
enum { COV_TP, COV_PP, COV_VP, COV_SP, COV_CP, COV_EP, COV_Z0, COV_Z1, COV_Z2, COV_Z3, COV_SEL,
       COV_FULL, COV_PARTIAL, COV_PERSTAGE, COV_OFFLOAD, COV_FRACTION, COV_UNEVEN, COV_FP16,
       COV_FP8, COV_N };

static void test_roundtrip(void) {
    int done = 0;
    for (int i = 0; i < NCASES; i++) {
        const pcase *k = &cases[i];
        ap_model m;
        ap_cluster c;
        ap_plan p;
        if (!load_model(k->model, &m)) {
            CHECK(0);
            continue;
        }
        make_cluster("h100-sxm", k->gpus, &c);
        build_plan(k, &p);
        ap_err err;
        ap_status st = ap_plan_check(&p, &m, &c, 1, &err);
        if (st != AP_OK) fprintf(stderr, "  case %s: plan invalid: %s\n", k->name, err.msg);
        CHECK(st == AP_OK);
        if (st != AP_OK) continue;
        const char *tmp = tl_tmpdir();
        char dir[512];
        snprintf(dir, sizeof dir, "%s", tmp);
        ap_emit_report rep;
        st = ap_emit_files_ex(dir, "all", &m, &c, &p, NULL, &rep, &err);
        CHECK(st == AP_OK || st == AP_ERR_INFEASIBLE);
        int own = target_of(k->trainer);
        if (rep.status[own] != AP_OK)
            fprintf(stderr, "  case %s: its own trainer refused it: %s\n", k->name, rep.msg[own]);
        CHECK_INT(rep.status[own], AP_OK);
        for (int t = 0; t < AP_EMIT_COUNT; t++) {
            CHECK(rep.requested[t]);
            if (rep.status[t] == AP_OK) {
                done++;
                switch (t) {
                case AP_EMIT_MEGATRON: check_megatron(dir, &m, &c, &p); break;
                case AP_EMIT_DEEPSPEED: check_deepspeed(dir, &m, &c, &p, rep.msg[t]); break;
                case AP_EMIT_COLOSSALAI: check_colossalai(dir, &m, &c, &p); break;
                case AP_EMIT_TORCHTITAN: check_torchtitan(dir, &m, &c, &p); break;
                case AP_EMIT_ACCELERATE: check_accelerate(dir, &m, &c, &p); break;
                }
            } else {
                /* a refusal names the reason and a closest plan the same target accepts */
                CHECK_INT(rep.status[t], AP_ERR_INFEASIBLE);
                CHECK_CONTAINS(rep.msg[t], "cannot express this plan");
                CHECK_CONTAINS(rep.msg[t], "closest expressible plan");
                ap_plan q;
                ap_err e2;
                CHECK_INT(ap_emit_check((ap_emit_target)t, &m, &c, &p, &q, &e2), AP_ERR_INFEASIBLE);
                if (q.tp > 0) {
                    ap_err e3;
                    ap_status s3 = ap_emit_check((ap_emit_target)t, &m, &c, &q, NULL, &e3);
                    if (s3 != AP_OK)
                        fprintf(stderr, "  case %s: closest plan for %s refused: %s\n", k->name,
                                ap_emit_target_name((ap_emit_target)t), e3.msg);
                    CHECK_INT(s3, AP_OK);
                    CHECK_INT(q.tp * q.pp * q.cp * q.dp, c.gpus);
                }
                /* nothing of a refused target is written */
                static const char *const names[AP_EMIT_COUNT] = {
                    "ds_config.json", "megatron.sh", "colossalai_booster.py", "torchtitan.toml",
                    "accelerate.yaml"};
                char path[1024];
                snprintf(path, sizeof path, "%s/%s", dir, names[t]);
                CHECK(access(path, F_OK) != 0);
            }
        }
        /* no temporary files left behind */
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "ls '%s' | grep -q '\\.tmp\\.'", dir);
        CHECK(system(cmd) != 0);
        if (getenv("AP_EMIT_KEEP")) printf("kept %s: %s\n", k->name, dir); /* for debugging */
        else rm_rf(dir);
        /* coverage of plan features */
        covered[COV_TP] |= p.tp > 1; covered[COV_PP] |= p.pp > 1; covered[COV_VP] |= p.vp > 1;
        covered[COV_SP] |= p.sp; covered[COV_CP] |= p.cp > 1; covered[COV_EP] |= p.ep > 1;
        covered[COV_Z0 + p.zero] = 1;
        covered[COV_SEL] |= p.recompute == AP_RECOMPUTE_SELECTIVE;
        covered[COV_FULL] |= p.recompute == AP_RECOMPUTE_FULL && p.recompute_layers == 0;
        covered[COV_PARTIAL] |= p.recompute_layers > 0;
        covered[COV_PERSTAGE] |= emit_has_per_stage_recompute_test(&p);
        covered[COV_OFFLOAD] |= p.offload_optimizer == 1 || p.offload_params == 1;
        covered[COV_FRACTION] |= (p.offload_optimizer > 0 && p.offload_optimizer < 1);
        covered[COV_UNEVEN] |= p.nchunks > 0;
        covered[COV_FP16] |= p.dtype == AP_DTYPE_FP16;
        covered[COV_FP8] |= p.dtype == AP_DTYPE_FP8;
    }
    CHECK(NCASES >= 20);
    for (int f = 0; f < COV_N; f++) {
        if (!covered[f]) fprintf(stderr, "  feature %d not covered by any test plan\n", f);
        CHECK(covered[f]);
    }
    printf("round trip: %d plans, %d emitted target files checked\n", NCASES, done);
}

/* ---- plan.json ---------------------------------------------------------------------------- */

static void compare_models(const ap_model *a, const ap_model *b) {
    CHECK_STR(a->name, b->name);
    CHECK_STR(a->model_type, b->model_type);
#define MF(f) CHECK_INT(a->f, b->f)
    MF(layers); MF(hidden); MF(heads); MF(kv_heads); MF(head_dim); MF(ffn_hidden); MF(vocab);
    MF(seq_len); MF(max_positions); MF(learned_pos); MF(act); MF(norm); MF(pos);
    MF(tied_embeddings); MF(bias); MF(qkv_bias); MF(norms_per_layer); MF(parallel_attn);
    MF(embed_norm); MF(final_norm); MF(dropout);
    MF(moe.experts); MF(moe.top_k); MF(moe.ffn_hidden); MF(moe.shared_experts);
    MF(moe.shared_ffn_hidden); MF(moe.first_dense_layers); MF(moe.layer_freq);
    MF(moe.shared_expert_gate); MF(moe.router_bias);
    MF(mla.q_lora_rank); MF(mla.kv_lora_rank); MF(mla.qk_nope_head_dim);
    MF(mla.qk_rope_head_dim); MF(mla.v_head_dim);
#undef MF
    CHECK(a->moe.capacity_factor == b->moe.capacity_factor);
    CHECK(ap_model_fingerprint(a) == ap_model_fingerprint(b));
}

static void compare_clusters(const ap_cluster *a, const ap_cluster *b) {
    CHECK_STR(a->name, b->name);
    CHECK_STR(a->gpu.name, b->gpu.name);
    CHECK(a->gpu.mem_bytes == b->gpu.mem_bytes);
#define CF(f) CHECK_INT(a->f, b->f)
    CF(gpus); CF(gpus_per_node); CF(nvlink_domain); CF(gpus_per_pcie_switch); CF(cpu_cores);
#undef CF
    CHECK(a->link_bytes_per_s == b->link_bytes_per_s);
    CHECK(a->net_bytes_per_s == b->net_bytes_per_s);
    CHECK(a->pcie_bytes_per_s == b->pcie_bytes_per_s);
    CHECK(a->cpu_mem_bytes == b->cpu_mem_bytes);
    CHECK(a->host_mem_bytes_per_s == b->host_mem_bytes_per_s);
    CHECK(ap_cluster_fingerprint(a) == ap_cluster_fingerprint(b));
}

static void compare_plans(const ap_plan *a, const ap_plan *b, int64_t L) {
#define PF(f) CHECK_INT(a->f, b->f)
    PF(trainer); PF(tp); PF(pp); PF(dp); PF(cp); PF(ep); PF(etp); PF(vp); PF(mbs); PF(gbs);
    PF(grad_accum); PF(seq); PF(zero); PF(recompute); PF(recompute_layers); PF(sp);
    PF(overlap_grad); PF(overlap_param); PF(dtype); PF(flash_attn); PF(nchunks);
#undef PF
    CHECK(a->offload_optimizer == b->offload_optimizer);
    CHECK(a->offload_params == b->offload_params);
    for (int c = 0; c < a->pp * a->vp; c++) {
        CHECK_INT(ap_plan_chunk_layers(a, L, c), ap_plan_chunk_layers(b, L, c));
        CHECK_INT(a->stage_recompute[c], b->stage_recompute[c]);
    }
}

static void test_planfile_roundtrip(void) {
    int n = 0;
    for (int i = 0; i < NCASES; i++) {
        const pcase *k = &cases[i];
        ap_model m, m2;
        ap_cluster c, c2;
        ap_plan p, p2;
        if (!load_model(k->model, &m)) continue;
        make_cluster("h100-sxm", k->gpus, &c);
        build_plan(k, &p);
        /* a real estimate from the cost model, to carry through the file */
        ap_estimate *e = calloc(1, sizeof *e);
        ap_err err;
        ap_json *est = NULL;
        if (e && ap_estimate_plan(&m, &c, &p, NULL, e, &err) == AP_OK) est = ap_estimate_to_json(e, &m);
        free(e);
        CHECK(est != NULL);
        const char *dir = tl_tmpdir();
        char path[512];
        snprintf(path, sizeof path, "%s/plan.json", dir);
        ap_status st = ap_planfile_write(path, &m, &c, &p, est, &err);
        if (st != AP_OK) fprintf(stderr, "  %s: %s\n", k->name, err.msg);
        CHECK_INT(st, AP_OK);
        ap_json *est2 = NULL;
        st = ap_planfile_read(path, &m2, &c2, &p2, &est2, &err);
        if (st != AP_OK) fprintf(stderr, "  %s: %s\n", k->name, err.msg);
        CHECK_INT(st, AP_OK);
        if (st == AP_OK) {
            compare_models(&m, &m2);
            compare_clusters(&c, &c2);
            compare_plans(&p, &p2, m.layers);
            char *a = est ? ap_json_print(est, 0) : NULL, *b = est2 ? ap_json_print(est2, 0) : NULL;
            CHECK(a && b && !strcmp(a, b));
            free(a);
            free(b);
            n++;
        }
        /* reading without asking for the estimate */
        CHECK_INT(ap_planfile_read(path, &m2, &c2, &p2, NULL, &err), AP_OK);
        ap_json_free(est);
        ap_json_free(est2);
        rm_rf(dir);
    }
    CHECK_INT(n, NCASES);
}

/* Mutate a valid plan.json tree and expect the reader to refuse it with `needle` in the
 * message (or accept it when needle is NULL). */
typedef void (*mutator)(ap_json *root);

static ap_json *sec(ap_json *root, const char *k) { return ap_json_get(root, k); }
static void set_num(ap_json *o, const char *k, double v) {
    ap_json_free(ap_json_detach(o, k));
    ap_json_add_number(o, k, v);
}
static void set_str(ap_json *o, const char *k, const char *v) {
    ap_json_free(ap_json_detach(o, k));
    ap_json_add_string(o, k, v);
}
static void drop(ap_json *o, const char *k) { ap_json_free(ap_json_detach(o, k)); }

static void mu_v2(ap_json *r) { set_num(r, "schema_version", 2); }
static void mu_v2s(ap_json *r) { set_str(r, "schema_version", "2.0"); }
static void mu_v13s(ap_json *r) { set_str(r, "schema_version", "1.3"); }
static void mu_v15(ap_json *r) { set_num(r, "schema_version", 1.5); }
static void mu_vbad(ap_json *r) { set_str(r, "schema_version", "one"); }
static void mu_vdot(ap_json *r) { set_str(r, "schema_version", "1."); }
static void mu_vnone(ap_json *r) { drop(r, "schema_version"); }
static void mu_vbool(ap_json *r) { drop(r, "schema_version"); ap_json_add_bool(r, "schema_version", 1); }
static void mu_nomodel(ap_json *r) { drop(r, "model"); }
static void mu_notp(ap_json *r) { drop(sec(r, "plan"), "tp"); }
static void mu_tpstr(ap_json *r) { set_str(sec(r, "plan"), "tp", "2"); }
static void mu_tp0(ap_json *r) { set_num(sec(r, "plan"), "tp", 0); }
static void mu_tpfrac(ap_json *r) { set_num(sec(r, "plan"), "tp", 1.5); }
static void mu_world(ap_json *r) { set_num(sec(r, "plan"), "dp", 8); }
static void mu_gbs(ap_json *r) { set_num(sec(r, "plan"), "gbs", 65); }
static void mu_zero4(ap_json *r) { set_num(sec(r, "plan"), "zero", 4); }
static void mu_sum(ap_json *r) {
    ap_json *a = ap_json_new_array();
    ap_json_push(a, ap_json_new_number(31));
    ap_json_free(ap_json_detach(sec(r, "plan"), "stage_layers"));
    ap_json_add(sec(r, "plan"), "stage_layers", a);
}
static void mu_len(ap_json *r) {
    ap_json *a = ap_json_new_array();
    for (int i = 0; i < 3; i++) ap_json_push(a, ap_json_new_number(16));
    ap_json_free(ap_json_detach(sec(r, "plan"), "stage_layers"));
    ap_json_add(sec(r, "plan"), "stage_layers", a);
}
static void mu_slstr(ap_json *r) { set_str(sec(r, "plan"), "stage_layers", "32"); }
static void mu_gran(ap_json *r) { set_str(sec(sec(r, "plan"), "recompute"), "granularity", "sometimes"); }
static void mu_dtype(ap_json *r) { set_str(sec(r, "plan"), "dtype", "fp64"); }
static void mu_trainer(ap_json *r) { set_str(r, "trainer", "horovod"); }
static void mu_layers(ap_json *r) { set_num(sec(r, "model"), "layers", -1); }
static void mu_gpu(ap_json *r) { set_str(sec(r, "cluster"), "gpu", "tpu-v5"); }
static void mu_fp(ap_json *r) { set_num(sec(r, "model"), "ffn_hidden", 11000); }
static void mu_est(ap_json *r) { set_num(r, "estimate", 3); }
static void mu_off(ap_json *r) { set_num(sec(sec(r, "plan"), "offload"), "optimizer", 1.5); }
static void mu_spnum(ap_json *r) { set_num(sec(r, "plan"), "sp", 1); }
static void mu_act(ap_json *r) { set_str(sec(r, "model"), "activation", "tanh"); }
static void mu_nomoe(ap_json *r) { drop(sec(r, "model"), "moe"); }
static void mu_impl(ap_json *r) { set_str(sec(r, "plan"), "attn_impl", "fa9"); }
static void mu_perstage(ap_json *r) { set_num(sec(sec(r, "plan"), "recompute"), "per_stage", 0); }
static void mu_ds_pp_z3(ap_json *r) {
    set_str(r, "trainer", "deepspeed");
    set_num(sec(r, "plan"), "zero", 3);
    set_num(sec(r, "plan"), "pp", 2);
    set_num(sec(r, "plan"), "dp", 2);
    set_num(sec(r, "plan"), "grad_accum", 16);
    ap_json *a = ap_json_new_array();
    for (int i = 0; i < 2; i++) ap_json_push(a, ap_json_new_number(16));
    ap_json_free(ap_json_detach(sec(r, "plan"), "stage_layers"));
    ap_json_add(sec(r, "plan"), "stage_layers", a);
    ap_json *b = ap_json_new_array();
    for (int i = 0; i < 2; i++) ap_json_push(b, ap_json_new_number(-1));
    ap_json_free(ap_json_detach(sec(sec(r, "plan"), "recompute"), "per_stage"));
    ap_json_add(sec(sec(r, "plan"), "recompute"), "per_stage", b);
}

/* Every member of a valid plan.json (outside "estimate") is typed, and every one but the
 * optional ones is required: removing it, or giving it a value of another type, must be refused
 * with a message naming it. Optional: "attn_impl" (added with the kernel tables; absent reads as
 * "auto", test_planfile_before_attn_impl), "fp8_params" (absent: 16-bit weights), "cp_a2a"
 * (absent: the ring) and "zero_group" (absent: ZeRO over all data-parallel ranks). */
static int optional_member(const char *key) {
    return !strcmp(key, "attn_impl") || !strcmp(key, "fp8_params") || !strcmp(key, "fp8_recipe") ||
           !strcmp(key, "cp_a2a") || !strcmp(key, "zero_group");
}

static int planfile_refuses(const ap_json *root, const char *key) {
    ap_model m2;
    ap_cluster c2;
    ap_plan p2;
    ap_err err;
    err.msg[0] = '\0';
    ap_status st = ap_planfile_from_json(root, "sys.json", &m2, &c2, &p2, NULL, &err);
    char quoted[80];
    snprintf(quoted, sizeof quoted, "'%s'", key);
    int ok = st == AP_ERR_INPUT && strstr(err.msg, quoted) && !strchr(err.msg, '\n');
    if (!ok) fprintf(stderr, "  key %s: status %d, message: %s\n", key, (int)st, err.msg);
    return ok;
}

static void walk_members(ap_json *root, ap_json *obj, int *n) {
    char keys[64][64];
    int nk = 0;
    for (ap_json *it = ap_json_first(obj); it && nk < 64; it = ap_json_next(it))
        snprintf(keys[nk++], sizeof keys[0], "%s", ap_json_key(it));
    for (int i = 0; i < nk; i++) {
        const char *key = keys[i];
        if (obj == root && !strcmp(key, "estimate")) continue;
        ap_json *it = ap_json_get(obj, key);
        if (ap_json_is_object(it)) walk_members(root, it, n);
        ap_json *copy = ap_json_detach(obj, key);
        /* removed */
        if (!optional_member(key)) CHECK(planfile_refuses(root, key));
        /* a value of another type */
        ap_json *wrong = ap_json_is_string(copy) ? ap_json_new_number(7)
                       : ap_json_is_number(copy) || ap_json_is_bool(copy) ? ap_json_new_string("x")
                       : ap_json_new_number(1);
        ap_json_add(obj, key, wrong);
        CHECK(planfile_refuses(root, key));
        ap_json_free(ap_json_detach(obj, key));
        ap_json_add(obj, key, copy);
        (*n)++;
    }
}

static void test_planfile_every_field(void) {
    ap_model m;
    ap_cluster c;
    ap_plan p;
    if (!load_model("deepseek-v3", &m)) { CHECK(0); return; }
    make_cluster("h100-sxm", 64, &c);
    build_plan(find_case("meg-dsv3"), &p);
    ap_json *root = ap_planfile_to_json(&m, &c, &p, NULL);
    CHECK(root != NULL);
    if (!root) return;
    int n = 0;
    walk_members(root, root, &n);
    /* every member of the model, cluster and plan sections, and the top level */
    CHECK(n >= 80);
    /* and the tree still reads after all the restores */
    ap_model m2;
    ap_cluster c2;
    ap_plan p2;
    ap_err err;
    CHECK_INT(ap_planfile_from_json(root, "sys.json", &m2, &c2, &p2, NULL, &err), AP_OK);
    ap_json_free(root);
    printf("plan.json: %d members each refused when missing or mistyped\n", n);
}

/* A plan.json written before "attn_impl" existed (by autoplan at the parent of commit df18298:
 * `autoplan plan examples/models/llama-3-8b.json --gpus 16 --gpu a100-sxm4-80g --out DIR`)
 * still reads, with the trainer's default kernel ("auto"), and estimates like the same plan
 * given "auto" explicitly; a present but unknown kernel name is still refused. */
static void test_planfile_before_attn_impl(void) {
    const char *path = tl_path("tests/data/plan-v1-before-attn-impl.json");
    char *text = tl_read(path);
    CHECK(text != NULL);
    if (!text) return;
    CHECK(strstr(text, "attn_impl") == NULL);
    free(text);
    ap_model m;
    ap_cluster c;
    ap_plan p;
    ap_err err;
    err.msg[0] = '\0';
    ap_status st = ap_planfile_read(path, &m, &c, &p, NULL, &err);
    if (st != AP_OK) fprintf(stderr, "  %s\n", err.msg);
    CHECK_INT(st, AP_OK);
    if (st != AP_OK) return;
    CHECK_INT(p.attn_impl, AP_ATTN_AUTO);
    CHECK_INT(p.fp8_params, 0); /* nor "fp8_params": 16-bit weights */
    CHECK_INT(p.tp * p.pp * p.cp * p.dp, c.gpus);
    ap_estimate *e1 = calloc(1, sizeof *e1), *e2 = calloc(1, sizeof *e2);
    CHECK(e1 && e2);
    if (e1 && e2) {
        CHECK_INT(ap_estimate_plan(&m, &c, &p, NULL, e1, &err), AP_OK);
        /* "auto" resolves to a concrete kernel (FA2 for Megatron on A100 bf16), and the plan
         * naming that kernel explicitly is priced the same */
        CHECK_INT(e1->plan.attn_impl, AP_ATTN_FA2);
        ap_plan q = p;
        q.attn_impl = e1->plan.attn_impl;
        CHECK_INT(ap_estimate_plan(&m, &c, &q, NULL, e2, &err), AP_OK);
        CHECK(e1->time.step_s > 0);
        CHECK_NEAR(e1->time.step_s, e2->time.step_s, 1e-12);
    }
    free(e1);
    free(e2);
    /* the same tree with an explicit "auto" reads the same; an unknown name is refused */
    ap_json *root = ap_planfile_to_json(&m, &c, &p, NULL);
    CHECK(root != NULL);
    if (!root) return;
    ap_plan p2;
    ap_model m2;
    ap_cluster c2;
    CHECK_INT(ap_planfile_from_json(root, "t.json", &m2, &c2, &p2, NULL, &err), AP_OK);
    CHECK_INT(p2.attn_impl, AP_ATTN_AUTO);
    ap_json *pl = ap_json_get(root, "plan");
    ap_json_free(ap_json_detach(pl, "attn_impl"));
    ap_json_add(pl, "attn_impl", ap_json_new_string("fa4"));
    CHECK_INT(ap_planfile_from_json(root, "t.json", &m2, &c2, &p2, NULL, &err), AP_ERR_INPUT);
    CHECK(strstr(err.msg, "'attn_impl'") != NULL);
    ap_json_free(root);
}

static void test_planfile_bad(void) {
    ap_model m;
    ap_cluster c;
    ap_plan p;
    if (!load_model("llama-2-7b", &m)) { CHECK(0); return; }
    make_cluster("h100-sxm", 8, &c);
    build_plan(find_case("meg-7b-golden"), &p); /* tp2 dp4 mbs2 gbs64 */
    static const struct { const char *name; mutator fn; const char *needle; } bad[] = {
        {"major version 2", mu_v2, "major version 2 is not supported"},
        {"version \"2.0\"", mu_v2s, "major version 2 is not supported"},
        {"version \"1.3\" (minor ok)", mu_v13s, NULL},
        {"version 1.5 (minor ok)", mu_v15, NULL},
        {"version \"one\"", mu_vbad, "is not a version"},
        {"version \"1.\"", mu_vdot, "is not a version"},
        {"no version", mu_vnone, "missing field 'schema_version'"},
        {"version true", mu_vbool, "must be a number or string"},
        {"no model", mu_nomodel, "missing field 'model'"},
        {"no plan.tp", mu_notp, "plan: missing field 'tp'"},
        {"tp string", mu_tpstr, "field 'tp' must be an integer"},
        {"tp 0", mu_tp0, "field 'tp' = 0 is out of range"},
        {"tp 1.5", mu_tpfrac, "field 'tp' must be an integer"},
        {"world size", mu_world, "but the cluster has 8 GPUs"},
        {"gbs", mu_gbs, "must equal mbs x dp x grad_accum"},
        {"zero 4", mu_zero4, "field 'zero' = 4 is out of range"},
        {"stage sum", mu_sum, "sums to 31 layers, the model has 32"},
        {"stage len", mu_len, "has 3 entries, want pp x vp = 1"},
        {"stage_layers string", mu_slstr, "field 'stage_layers' must be an array"},
        {"granularity", mu_gran, "is not one of none, selective, full"},
        {"dtype", mu_dtype, "field 'dtype' = \"fp64\""},
        {"trainer", mu_trainer, "field 'trainer' = \"horovod\" is not one of megatron"},
        {"layers -1", mu_layers, "field 'layers' = -1 is out of range"},
        {"gpu", mu_gpu, "is not in the GPU catalog"},
        {"fingerprint", mu_fp, "field 'fingerprint'"},
        {"estimate number", mu_est, "field 'estimate' must be an object"},
        {"offload 1.5", mu_off, "field 'optimizer' = 1.5 is out of range"},
        {"sp number", mu_spnum, "field 'sp' must be true or false"},
        {"activation", mu_act, "\"tanh\" is not one of gelu, swiglu, relu"},
        {"no moe", mu_nomoe, "missing field 'moe'"},
        {"per_stage number", mu_perstage, "field 'per_stage' must be an array"},
        {"deepspeed pp + zero3", mu_ds_pp_z3, "cannot be combined with pipeline"},
        {"attn_impl fa9", mu_impl, "field 'attn_impl' = \"fa9\" is not one of auto, unfused"},
    };
    int nb = (int)(sizeof bad / sizeof bad[0]);
    for (int i = 0; i < nb; i++) {
        ap_json *root = ap_planfile_to_json(&m, &c, &p, NULL);
        CHECK(root != NULL);
        if (!root) continue;
        bad[i].fn(root);
        ap_model m2;
        ap_cluster c2;
        ap_plan p2;
        ap_err err;
        err.msg[0] = '\0';
        ap_json *est = (ap_json *)1;
        ap_status st = ap_planfile_from_json(root, "bad.json", &m2, &c2, &p2, &est, &err);
        if (bad[i].needle) {
            if (st == AP_OK) fprintf(stderr, "  bad case '%s' was accepted\n", bad[i].name);
            CHECK_INT(st, AP_ERR_INPUT);
            CHECK_CONTAINS(err.msg, bad[i].needle);
            CHECK(strncmp(err.msg, "bad.json", 8) == 0); /* names the file */
            CHECK(strchr(err.msg, '\n') == NULL);        /* one line */
            CHECK(est == NULL);
        } else {
            if (st != AP_OK) fprintf(stderr, "  '%s' refused: %s\n", bad[i].name, err.msg);
            CHECK_INT(st, AP_OK);
        }
        ap_json_free(root);
    }
    /* files: not JSON, not an object, missing */
    const char *dir = tl_tmpdir();
    char path[512];
    ap_err err;
    ap_model m2;
    ap_cluster c2;
    ap_plan p2;
    snprintf(path, sizeof path, "%s/broken.json", dir);
    tl_write(path, "{\"schema_version\": 1,\n \"model\": {\n");
    CHECK(ap_planfile_read(path, &m2, &c2, &p2, NULL, &err) != AP_OK);
    CHECK_CONTAINS(err.msg, "invalid JSON");
    tl_write(path, "[1, 2]");
    CHECK_INT(ap_planfile_read(path, &m2, &c2, &p2, NULL, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "must be a JSON object");
    snprintf(path, sizeof path, "%s/missing.json", dir);
    CHECK(ap_planfile_read(path, &m2, &c2, &p2, NULL, &err) != AP_OK);
    CHECK_CONTAINS(err.msg, "missing.json");
    /* atomic write: an unwritable directory fails cleanly */
    CHECK(ap_planfile_write("/nonexistent-dir/plan.json", &m, &c, &p, NULL, &err) != AP_OK);
    rm_rf(dir);
}

/* ---- golden files ------------------------------------------------------------------------- */

typedef struct sb_text {
    char *buf;
    size_t len;
} sb_text;

static void sbt_add(sb_text *b, const char *line) {
    size_t n = strlen(line);
    char *nb = realloc(b->buf, b->len + n + 2);
    if (!nb) return;
    b->buf = nb;
    memcpy(b->buf + b->len, line, n);
    b->len += n;
    b->buf[b->len++] = '\n';
    b->buf[b->len] = '\0';
}

/* A fixed estimate for the golden headers, so the goldens do not move with the cost model:
 * 1.5 s per step, 41.25 GiB peak of 80 GiB. */
static ap_json *golden_estimate(void) {
    ap_err err;
    static const char text[] =
        "{\"time\": {\"step_s\": 1.5}, \"memory\": {\"peak_bytes\": 44291850240, "
        "\"capacity_bytes\": 85899345920}}";
    return ap_json_parse(text, sizeof text - 1, "golden estimate", &err);
}

static int update_golden(void) {
    const char *v = getenv("AP_UPDATE_GOLDEN");
    return v && !strcmp(v, "1");
}

static void golden_compare(const char *rel_dir, const char *name, const char *text) {
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s", rel_dir, name);
    if (update_golden()) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tl_path(rel_dir));
        CHECK(system(cmd) == 0);
        CHECK(tl_write(tl_path(rel), text) == 0);
        printf("updated %s\n", rel);
        return;
    }
    char *want = tl_read(tl_path(rel));
    if (!want) fprintf(stderr, "  golden %s missing (AP_UPDATE_GOLDEN=1 creates it)\n", rel);
    CHECK(want != NULL);
    if (want) {
        int same = !strcmp(want, text);
        if (!same)
            fprintf(stderr, "  %s differs from the emitted file (AP_UPDATE_GOLDEN=1 to accept)\n",
                    rel);
        CHECK(same);
    }
    free(want);
}

static void golden_case(const char *dir_name, const char *model, int gpus, const ap_plan *p) {
    ap_model m;
    ap_cluster c;
    if (!load_model(model, &m)) { CHECK(0); return; }
    make_cluster("h100-sxm", gpus, &c);
    ap_err err;
    ap_status st = ap_plan_check(p, &m, &c, 1, &err);
    if (st != AP_OK) fprintf(stderr, "  golden %s: %s\n", dir_name, err.msg);
    CHECK_INT(st, AP_OK);
    ap_json *est = golden_estimate();
    CHECK(est != NULL);
    char rel_dir[256];
    snprintf(rel_dir, sizeof rel_dir, "tests/golden/emit/%s", dir_name);
    sb_text refusals = {0};
    int nfiles = 0;
    for (int t = 0; t < AP_EMIT_COUNT; t++) {
        ap_emit_out out;
        st = ap_emit_render((ap_emit_target)t, &m, &c, p, est, &out, &err);
        if (st == AP_OK) {
            for (int i = 0; i < out.nfiles; i++, nfiles++)
                golden_compare(rel_dir, out.files[i].name, out.files[i].text);
            ap_emit_out_free(&out);
        } else {
            CHECK_INT(st, AP_ERR_INFEASIBLE);
            sbt_add(&refusals, err.msg);
        }
    }
    golden_compare(rel_dir, "refusals.txt", refusals.buf ? refusals.buf : "");
    free(refusals.buf);
    /* the golden folder holds exactly these files */
    if (!update_golden()) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "test $(ls '%s' | wc -l) -eq %d", tl_path(rel_dir), nfiles + 1);
        CHECK(system(cmd) == 0);
    }
    ap_json_free(est);
}

static void test_golden(void) {
    ap_plan p;
    /* Llama-2-7B on 8 x H100: tp 2, dp 4, micro 2, global 64, bf16, distributed optimizer,
       selective recompute (Megatron-LM) */
    build_plan(find_case("meg-7b-golden"), &p);
    golden_case("llama2-7b-tp2-dp4", "llama-2-7b", 8, &p);
    /* the same shape with ZeRO-1 and full recompute for the DeepSpeed-family targets */
    build_plan(find_case("ds-7b-autotp"), &p);
    golden_case("llama2-7b-tp2-dp4-zero1", "llama-2-7b", 8, &p);
    /* Llama-3-70B on 64 x H100 (8 nodes): tp 8, pp 4 with 5 virtual stages per rank, dp 2 */
    build_plan(find_case("meg-70b-pp4-vp5"), &p);
    golden_case("llama3-70b-pp4-vp5", "llama-3-70b", 64, &p);
    /* readable examples of the other formats: torchtitan (tp 2 + FSDP ZeRO-3, selective) and
       Accelerate's FSDP path */
    build_plan(find_case("tt-8b-tp2-z3"), &p);
    golden_case("llama3-8b-torchtitan-tp2-fsdp", "llama-3-8b", 8, &p);
    build_plan(find_case("fsdp-7b-z3-offload"), &p);
    golden_case("llama2-7b-fsdp-zero3-offload", "llama-2-7b", 8, &p);
}

/* ---- specific refusals ------------------------------------------------------------------- */

static void test_refusals(void) {
    ap_model m;
    ap_cluster c;
    ap_plan p, q;
    ap_err err;
    if (!load_model("llama-2-7b", &m)) { CHECK(0); return; }
    make_cluster("h100-sxm", 8, &c);
    /* torchtitan has no ZeRO-1: closest is sharded (ZeRO-2) */
    build_plan(find_case("meg-7b-golden"), &p);
    CHECK_INT(ap_emit_check(AP_EMIT_TORCHTITAN, &m, &c, &p, &q, &err), AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "torchtitan: cannot express this plan: torchtitan does not offer ZeRO "
                            "stage 1");
    CHECK_INT(q.zero, 2);
    CHECK_INT(q.tp, 2);
    /* DeepSpeed has no selective recompute: closest is full */
    CHECK_INT(ap_emit_check(AP_EMIT_DEEPSPEED, &m, &c, &p, &q, &err), AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "selective");
    CHECK_INT(q.recompute, AP_RECOMPUTE_FULL);
    CHECK_INT(q.tp * q.dp, 8);
    /* Accelerate on the FSDP path folds tp into dp */
    p.trainer = AP_TRAINER_FSDP;
    p.zero = 3;
    p.recompute = AP_RECOMPUTE_FULL;
    CHECK_INT(ap_emit_check(AP_EMIT_ACCELERATE, &m, &c, &p, &q, &err), AP_ERR_INFEASIBLE);
    CHECK_INT(q.tp, 1);
    CHECK_INT(q.dp, 8);
    CHECK_INT(q.gbs, 64);
    CHECK_INT(q.grad_accum, 4);
    /* Megatron-LM: parameter-gather overlap needs gradient-reduce overlap (trainer table); the
       closest plan drops the parameter-gather overlap */
    build_plan(find_case("meg-7b-golden"), &p);
    p.overlap_grad = 0;
    CHECK_INT(ap_emit_check(AP_EMIT_MEGATRON, &m, &c, &p, &q, &err), AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "gradient reduction overlapped");
    CHECK_INT(q.overlap_grad, 0);
    CHECK_INT(q.overlap_param, 0);
    /* a refused target leaves the others written */
    const char *dir = tl_tmpdir();
    build_plan(find_case("meg-7b-golden"), &p);
    ap_status st = ap_emit_files(dir, "megatron,torchtitan", &m, &c, &p, NULL, &err);
    CHECK_INT(st, AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(err.msg, "torchtitan");
    char path[512];
    snprintf(path, sizeof path, "%s/megatron.sh", dir);
    CHECK(access(path, F_OK) == 0);
    snprintf(path, sizeof path, "%s/torchtitan.toml", dir);
    CHECK(access(path, F_OK) != 0);
    /* list parsing */
    unsigned mask;
    CHECK_INT(ap_emit_parse_list("all", &mask, &err), AP_OK);
    CHECK_INT(mask, (1u << AP_EMIT_COUNT) - 1);
    CHECK_INT(ap_emit_parse_list("megatron,deepspeed", &mask, &err), AP_OK);
    CHECK_INT(mask, (1u << AP_EMIT_MEGATRON) | (1u << AP_EMIT_DEEPSPEED));
    CHECK_INT(ap_emit_parse_list("megatron,horovod", &mask, &err), AP_ERR_INPUT);
    CHECK_CONTAINS(err.msg, "unknown target 'horovod'");
    CHECK_INT(ap_emit_parse_list("", &mask, &err), AP_ERR_INPUT);
    rm_rf(dir);
}

/* ---- the CLI ------------------------------------------------------------------------------ */

/* A GB200 NVL72 "node" is an NVLink domain of 64 GPUs driven by 4-GPU hosts (catalog.c
 * ref_gpus_per_host): the launch scripts start 4 processes on each of gpus / 4 hosts, not 64
 * on gpus / 64, and the header says so; an 8-GPU DGX keeps its node as the host. */
static void test_gb200_launch_hosts(void) {
    static const pcase k = {"gb200-hosts", "llama-3-70b", 128, AP_TRAINER_MEGATRON, 4, 1, 32, 1,
                            1, 1, 1, 1, 256, 8192, 1, AP_RECOMPUTE_NONE, 0, 1, 1, 1, 0, 0,
                            AP_DTYPE_BF16, 0, 0, {0}, {0}, 0};
    ap_model m;
    if (!load_model(k.model, &m)) {
        CHECK(0);
        return;
    }
    const char *gpus[] = {"gb200", "b200"};
    const int want_host[] = {4, 8};
    for (int g = 0; g < 2; g++) {
        ap_cluster c;
        make_cluster(gpus[g], k.gpus, &c);
        CHECK_INT(ap_cluster_gpus_per_host(&c), want_host[g]);
        ap_plan p;
        build_plan(&k, &p);
        ap_err err;
        ap_status st = ap_plan_check(&p, &m, &c, 1, &err);
        if (st != AP_OK) fprintf(stderr, "  %s: %s\n", gpus[g], err.msg);
        CHECK_INT(st, AP_OK);
        if (st != AP_OK) continue;
        const char *dir = tl_tmpdir();
        ap_emit_report rep;
        st = ap_emit_files_ex(dir, "megatron", &m, &c, &p, NULL, &rep, &err);
        CHECK_INT(st, AP_OK);
        if (st != AP_OK) continue;
        check_megatron(dir, &m, &c, &p);
        char path[1024];
        snprintf(path, sizeof path, "%s/megatron.sh", dir);
        char *text = tl_read(path);
        CHECK(text != NULL);
        if (!text) continue;
        CHECK_INT(shell_int(text, "GPUS_PER_NODE"), want_host[g]);
        CHECK_INT(shell_int(text, "NNODES"), k.gpus / want_host[g]);
        CHECK((strstr(text, "of 4-GPU hosts (32 launcher nodes)") != NULL) == (g == 0));
        free(text);
    }
}

/* An MXFP8 plan on B200: megatron.sh asks for the recipe it was priced with (check_megatron
 * reads --fp8-recipe back); a target without MXFP8 names the refusal and offers the plan at
 * its own recipe. */
static void test_mxfp8_emit(void) {
    static const pcase k = {"b200-mxfp8", "llama-3-8b", 8, AP_TRAINER_MEGATRON, 1, 1, 8, 1, 1,
                            1, 1, 2, 128, 8192, 1, AP_RECOMPUTE_NONE, 0, 0, 1, 1, 0, 0,
                            AP_DTYPE_FP8, 0, 0, {0}, {0}, 0};
    ap_model m;
    if (!load_model(k.model, &m)) {
        CHECK(0);
        return;
    }
    ap_cluster c;
    make_cluster("b200", k.gpus, &c);
    ap_plan p;
    build_plan(&k, &p);
    p.fp8_recipe = AP_FP8_MXFP8;
    ap_err err;
    CHECK_INT(ap_plan_check(&p, &m, &c, 1, &err), AP_OK);
    const char *dir = tl_tmpdir();
    ap_emit_report rep;
    ap_status st = ap_emit_files_ex(dir, "all", &m, &c, &p, NULL, &rep, &err);
    CHECK(st == AP_OK || st == AP_ERR_INFEASIBLE);
    CHECK_INT(rep.status[AP_EMIT_MEGATRON], AP_OK);
    if (rep.status[AP_EMIT_MEGATRON] == AP_OK) check_megatron(dir, &m, &c, &p);
    CHECK_INT(rep.status[AP_EMIT_TORCHTITAN], AP_ERR_INFEASIBLE);
    CHECK_CONTAINS(rep.msg[AP_EMIT_TORCHTITAN], "fp8 tensorwise");
}

/* torchtitan recomputes K layers of a chunk as every (n/K)-th of uniform chunks of n layers:
 * the trainer table refuses other counts and splits, and the search's re-split never proposes
 * them (found by tools/trainer_validate.py: `full1 uneven` for Llama-3-70B tp4 pp4). */
static void test_torchtitan_counts(void) {
    if (access(tl_bin, X_OK) != 0) return;
    const char *model = tl_path("examples/models/llama-3-70b.json");
    char args[2048], *out = NULL, *er = NULL;
    const char *base = "estimate '%s' --gpus 32 --trainer torchtitan --tp 4 --pp 4 --mbs 1 "
                       "--gbs 64 --zero 2 --recompute full %s";
    snprintf(args, sizeof args, base, model, "--recompute-layers 1 --stage-layers 21,19,20,20");
    CHECK_INT(tl_run(args, NULL, &er), 2);
    CHECK_CONTAINS(er, "torchtitan: recomputing 1 layers per chunk (every (n/1)-th of n) needs "
                       "uniform chunks whose size it divides");
    free(er);
    snprintf(args, sizeof args, base, model, "--recompute-layers 3"); /* 3 does not divide 20 */
    CHECK_INT(tl_run(args, NULL, &er), 2);
    CHECK_CONTAINS(er, "needs uniform chunks whose size it divides");
    free(er);
    snprintf(args, sizeof args, base, model, "--recompute-layers 4");
    CHECK_INT(tl_run(args, NULL, NULL), 0);
    /* torchtitan's DDP (ZeRO 0) is 1-D only ("DDP has not supported > 1D parallelism",
       found by tools/trainer_validate.py on a tp1 pp4 dp2 z0 plan); dp alone runs */
    snprintf(args, sizeof args, "estimate '%s' --gpus 8 --trainer torchtitan --pp 4 --zero 0 "
             "--mbs 1 --gbs 64", tl_path("examples/models/llama-3-8b.json"));
    CHECK_INT(tl_run(args, NULL, &er), 2);
    CHECK_CONTAINS(er, "torchtitan: replicated data parallelism (ZeRO 0) runs only as the sole "
                       "parallelism");
    free(er);
    snprintf(args, sizeof args, "estimate '%s' --gpus 8 --trainer torchtitan --zero 0 --mbs 1 "
             "--gbs 64", tl_path("examples/models/llama-3-8b.json"));
    CHECK_INT(tl_run(args, NULL, NULL), 0);
    /* the plan the validator found: every plan shown is one torchtitan runs */
    snprintf(args, sizeof args, "plan '%s' --gpus 32 --trainer torchtitan --tp 4 --pp 4 "
             "--recompute full --no-cache --top 10 --json", model);
    CHECK_INT(tl_run(args, &out, NULL), 0);
    ap_err e;
    ap_json *j = out ? ap_json_parse(out, strlen(out), "plan --json", &e) : NULL;
    CHECK(j != NULL);
    int n = 0;
    for (ap_json *pl = ap_json_first(ap_json_get(j, "plans")); pl; pl = ap_json_next(pl), n++) {
        const char *label = ap_json_string(ap_json_get(pl, "label"));
        CHECK(label != NULL);
        if (label && strstr(label, "uneven")) CHECK(!strstr(label, " full") || strstr(label, " full "));
    }
    CHECK(n > 0);
    ap_json_free(j);
    free(out);
}

static void test_cli(void) {
    if (access(tl_bin, X_OK) != 0) {
        printf("skipped CLI checks: %s not built\n", tl_bin);
        return;
    }
    ap_model m;
    ap_cluster c;
    ap_plan p;
    ap_err err;
    if (!load_model("llama-2-7b", &m)) { CHECK(0); return; }
    make_cluster("h100-sxm", 8, &c);
    build_plan(find_case("meg-7b-golden"), &p);
    const char *tmp = tl_tmpdir();
    char dir[512], args[2048], path[600];
    snprintf(dir, sizeof dir, "%s", tmp);
    snprintf(path, sizeof path, "%s/plan.json", dir);
    CHECK_INT(ap_planfile_write(path, &m, &c, &p, NULL, &err), AP_OK);
    char *out = NULL, *er = NULL;
    snprintf(args, sizeof args, "emit --plan '%s' --emit megatron,torchtitan --out '%s/cfg'", path,
             dir);
    int rc = tl_run(args, &out, &er);
    CHECK_INT(rc, 2); /* megatron written, torchtitan (named) refused: exit 2 (README) */
    CHECK_CONTAINS(out, "megatron: wrote megatron.sh");
    CHECK_CONTAINS(er, "torchtitan: cannot express this plan");
    free(out);
    free(er);
    snprintf(args, sizeof args, "emit --plan '%s' --emit torchtitan --out '%s/cfg2'", path, dir);
    CHECK_INT(tl_run(args, NULL, NULL), 2); /* nothing written */
    snprintf(args, sizeof args, "emit --plan '%s' --emit bogus --out '%s/cfg3'", path, dir);
    rc = tl_run(args, NULL, &er);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(er, "unknown target 'bogus'");
    free(er);
    snprintf(path, sizeof path, "%s/bad.json", dir);
    tl_write(path, "{\"schema_version\": 7}");
    snprintf(args, sizeof args, "emit --plan '%s' --out '%s/cfg4'", path, dir);
    rc = tl_run(args, NULL, &er);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(er, "bad.json: field 'schema_version': major version 7");
    free(er);
    CHECK_INT(tl_run("emit --help", NULL, NULL), 0);
    rm_rf(dir);
}

/* `emit` that writes nothing leaves nothing: no configs, and none of the directories of --out
 * that did not exist before the run (the ones that did stay). */
static void test_emit_leaves_nothing(void) {
    if (access(tl_bin, X_OK) != 0) {
        printf("skipped emit directory checks: %s not built\n", tl_bin);
        return;
    }
    ap_model m;
    ap_cluster c;
    ap_plan p;
    ap_err err;
    if (!load_model("llama-2-7b", &m)) { CHECK(0); return; }
    make_cluster("h100-sxm", 8, &c);
    build_plan(find_case("meg-7b-golden"), &p); /* torchtitan cannot express it */
    char dir[512], path[700], sub[700], outdir[800], args[2400];
    snprintf(dir, sizeof dir, "%s", tl_tmpdir());
    snprintf(path, sizeof path, "%s/plan.json", dir);
    CHECK_INT(ap_planfile_write(path, &m, &c, &p, NULL, &err), AP_OK);
    snprintf(sub, sizeof sub, "%s/n9", dir);
    /* every part of --out made by the run: none is left (a trailing '/' as users type it) */
    snprintf(args, sizeof args, "emit --plan '%s' --emit torchtitan --out '%s/a/b/'", path, sub);
    char *er = NULL;
    CHECK_INT(tl_run(args, NULL, &er), 2);
    CHECK_CONTAINS(er, "torchtitan: cannot express this plan");
    free(er);
    CHECK(access(sub, F_OK) != 0);
    /* a part that existed stays, the parts below it go */
    CHECK(mkdir(sub, 0755) == 0);
    snprintf(args, sizeof args, "emit --plan '%s' --emit torchtitan --out '%s/a/b'", path, sub);
    CHECK_INT(tl_run(args, NULL, NULL), 2);
    snprintf(outdir, sizeof outdir, "%s/a", sub);
    CHECK(access(outdir, F_OK) != 0);
    CHECK(access(sub, F_OK) == 0);
    /* the library call the same way */
    snprintf(outdir, sizeof outdir, "%s/lib/x", sub);
    ap_emit_report rep;
    CHECK_INT(ap_emit_files_ex(outdir, "torchtitan", &m, &c, &p, NULL, &rep, &err),
              AP_ERR_INFEASIBLE);
    snprintf(outdir, sizeof outdir, "%s/lib", sub);
    CHECK(access(outdir, F_OK) != 0);
    /* with a target written, the directories and its file stay */
    snprintf(args, sizeof args, "emit --plan '%s' --emit megatron,torchtitan --out '%s/w/x'",
             path, sub);
    CHECK_INT(tl_run(args, NULL, NULL), 2);
    snprintf(outdir, sizeof outdir, "%s/w/x/megatron.sh", sub);
    CHECK(access(outdir, F_OK) == 0);
    rm_rf(dir);
}

/* plan.json's estimate, which the configs' headers quote, is checked by the reader
 * (ap_planfile_read): numbers that cannot be and an estimate of another plan are refused naming
 * the field (exit 2, one line), before any directory is made; the estimate the cost model gives
 * is accepted and quoted. */
typedef enum { EST_NUM, EST_STR, EST_DROP } est_edit;

static void test_emit_estimate_checked(void) {
    if (access(tl_bin, X_OK) != 0) {
        printf("skipped emit estimate checks: %s not built\n", tl_bin);
        return;
    }
    ap_model m;
    ap_cluster c;
    ap_plan p;
    ap_err err;
    if (!load_model("llama-2-7b", &m)) { CHECK(0); return; }
    make_cluster("h100-sxm", 8, &c);
    build_plan(find_case("meg-7b-golden"), &p); /* tp2 dp4 mbs2 gbs64, bf16 */
    ap_estimate *e = calloc(1, sizeof *e);
    ap_json *est = NULL;
    if (e && ap_estimate_plan(&m, &c, &p, NULL, e, &err) == AP_OK) est = ap_estimate_to_json(e, &m);
    free(e);
    CHECK(est != NULL);
    if (!est) return;
    char dir[512], path[700], outdir[800], args[2400];
    snprintf(dir, sizeof dir, "%s", tl_tmpdir());
    snprintf(path, sizeof path, "%s/plan.json", dir);
    /* the cost model's estimate: written, and quoted */
    CHECK_INT(ap_planfile_write(path, &m, &c, &p, est, &err), AP_OK);
    snprintf(args, sizeof args, "emit --plan '%s' --emit megatron --out '%s/good'", path, dir);
    CHECK_INT(tl_run(args, NULL, NULL), 0);
    snprintf(outdir, sizeof outdir, "%s/good/megatron.sh", dir);
    char *sh = tl_read(outdir);
    CHECK_CONTAINS(sh, "# predicted: step ");
    CHECK(sh && !strstr(sh, "step ?") && !strstr(sh, "step -"));
    free(sh);
    static const struct {
        const char *group, *key;
        est_edit edit;
        double num;
        const char *str, *needle;
    } bad[] = {
        {"time", "step_s", EST_NUM, -1, NULL,
         "plan.json: field 'estimate.time.step_s' must be a positive number of seconds, got -1"},
        {"time", "step_s", EST_STR, 0, "fast",
         "field 'estimate.time.step_s' must be a positive number of seconds, got a string"},
        {"memory", "peak_bytes", EST_NUM, -5, NULL,
         "field 'estimate.memory.peak_bytes' must be a positive number of bytes, got -5"},
        {"memory", "capacity_bytes", EST_NUM, 1e9, NULL,
         "field 'estimate.memory.capacity_bytes' is not the"},
        {"plan", "tp", EST_NUM, 64, NULL,
         "field 'estimate.plan.tp' is 64, the plan's is 2 (the estimate is of another plan)"},
        {"plan", "gbs", EST_NUM, 128, NULL, "field 'estimate.plan.gbs' is 128, the plan's is 64"},
        {"plan", "dtype", EST_STR, 0, "fp16", "field 'estimate.plan.dtype' is 'fp16'"},
        {"plan", "sp", EST_NUM, 1, NULL, "field 'estimate.plan.sp' must be true or false"},
        {"plan", "stage_layers", EST_NUM, 32, NULL, "field 'estimate.plan.stage_layers' must list"},
        {NULL, "plan", EST_DROP, 0, NULL, "field 'estimate.plan' is missing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ap_json *x = ap_json_duplicate(est);
        ap_json *o = bad[i].group ? ap_json_get(x, bad[i].group) : x;
        CHECK(o != NULL);
        if (!o) { ap_json_free(x); continue; }
        if (bad[i].edit == EST_NUM) set_num(o, bad[i].key, bad[i].num);
        else if (bad[i].edit == EST_STR) set_str(o, bad[i].key, bad[i].str);
        else drop(o, bad[i].key);
        CHECK_INT(ap_planfile_write(path, &m, &c, &p, x, &err), AP_OK);
        ap_json_free(x);
        /* the reader refuses it when asked for the estimate, and reads the plan when not
           (simulate, run) */
        ap_model m2;
        ap_cluster c2;
        ap_plan p2;
        ap_json *est2 = NULL;
        CHECK_INT(ap_planfile_read(path, &m2, &c2, &p2, &est2, &err), AP_ERR_INPUT);
        CHECK_CONTAINS(err.msg, bad[i].needle);
        CHECK(est2 == NULL);
        CHECK_INT(ap_planfile_read(path, &m2, &c2, &p2, NULL, &err), AP_OK);
        snprintf(outdir, sizeof outdir, "%s/bad%zu", dir, i);
        snprintf(args, sizeof args, "emit --plan '%s' --emit megatron --out '%s/cfg'", path,
                 outdir);
        char *out = NULL, *er = NULL;
        CHECK_INT(tl_run(args, &out, &er), 2);
        CHECK_CONTAINS(er, bad[i].needle);
        CHECK(er && strchr(er, '\n') == strrchr(er, '\n')); /* one line */
        CHECK(out && !*out);
        CHECK(access(outdir, F_OK) != 0); /* nothing made */
        free(out);
        free(er);
    }
    ap_json_free(est);
    rm_rf(dir);
}

/* ---- main --------------------------------------------------------------------------------- */

/* ---- issue 19: what the trainers' own validation refuses or misreads --------------------- */

static int load_hf(const char *file, ap_model *m) {
    char rel[256];
    ap_err err;
    snprintf(rel, sizeof rel, "tests/data/hf/%s", file);
    if (ap_model_load(tl_path(rel), m, &err) != AP_OK) {
        fprintf(stderr, "  cannot load %s: %s\n", rel, err.msg);
        return 0;
    }
    return 1;
}

static void plan_for(ap_plan *p, ap_trainer_id t, int tp, int pp, int dp, int ep, int zero,
                     int64_t seq) {
    ap_plan_init(p);
    p->trainer = t;
    p->tp = tp; p->pp = pp; p->dp = dp; p->ep = ep;
    p->mbs = 1; p->grad_accum = 4; p->gbs = 4 * dp; p->seq = seq;
    p->zero = zero;
    p->sp = tp > 1 && t != AP_TRAINER_DEEPSPEED;
    p->overlap_grad = p->overlap_param = 0;
    for (int c = 0; c < AP_MAX_CHUNKS; c++) p->stage_recompute[c] = -1;
}

/* Render target t; returns the named file's text (caller frees) or NULL; *st the status. */
static char *render(ap_emit_target t, const ap_model *m, const ap_cluster *c, const ap_plan *p,
                    const char *file, ap_status *st, ap_err *err, char *note, size_t note_n) {
    ap_emit_out out;
    *st = ap_emit_render(t, m, c, p, NULL, &out, err);
    if (*st != AP_OK) return NULL;
    char *text = NULL;
    for (int i = 0; i < out.nfiles; i++)
        if (!strcmp(out.files[i].name, file)) text = strdup(out.files[i].text);
    if (note) snprintf(note, note_n, "%s", out.note);
    ap_emit_out_free(&out);
    return text;
}

/* Nemotron's squared ReLU and LayerNorm1P survive plan.json (emit reads the model from it):
 * "norm_1p" is written where set, read as false where absent (files written before it), and
 * refused when not a boolean. */
static void test_planfile_nemotron(void) {
    ap_model m, m2;
    ap_cluster c, c2;
    ap_plan p, p2;
    ap_err err;
    if (!load_hf("nemotron-4-15b.json", &m)) { CHECK(0); return; }
    make_cluster("h100-sxm", 8, &c);
    plan_for(&p, AP_TRAINER_MEGATRON, 2, 1, 4, 1, 1, 4096);
    ap_json *root = ap_planfile_to_json(&m, &c, &p, NULL);
    CHECK(root != NULL);
    if (!root) return;
    CHECK_INT(ap_planfile_from_json(root, "n.json", &m2, &c2, &p2, NULL, &err), AP_OK);
    CHECK(m2.norm_1p == 1 && m2.act == AP_ACT_RELU2);
    ap_json *arch = ap_json_get(ap_json_get(root, "model"), "arch");
    CHECK(arch != NULL && ap_json_get(arch, "norm_1p") != NULL);
    if (arch) {
        ap_json_free(ap_json_detach(arch, "norm_1p"));
        CHECK_INT(ap_planfile_from_json(root, "n.json", &m2, &c2, &p2, NULL, &err), AP_OK);
        CHECK_INT(m2.norm_1p, 0);
        CHECK_INT(ap_json_add_number(arch, "norm_1p", 3), AP_OK);
        CHECK_INT(ap_planfile_from_json(root, "n.json", &m2, &c2, &p2, NULL, &err), AP_ERR_INPUT);
        CHECK_CONTAINS(err.msg, "norm_1p");
    }
    ap_json_free(root);
}

static void test_issue19(void) {
    ap_model m;
    ap_cluster c;
    ap_plan p;
    ap_err err;
    ap_status st;
    char note[256];
    static flagval f[512];
    /* Megatron, DeepSeek-V3: the expert bias needs the sigmoid score function */
    if (load_model("deepseek-v3", &m)) {
        make_cluster("h100", 64, &c);
        plan_for(&p, AP_TRAINER_MEGATRON, 2, 4, 8, 8, 1, 4096);
        p.sp = 1;
        p.stage_recompute[0] = -1;
        char *t = render(AP_EMIT_MEGATRON, &m, &c, &p, "megatron.sh", &st, &err, NULL, 0);
        if (st != AP_OK) fprintf(stderr, "  dsv3: %s\n", err.msg);
        CHECK(t != NULL);
        if (t) {
            CHECK_CONTAINS(t, "--moe-router-score-function sigmoid");
            CHECK_CONTAINS(t, "--moe-router-enable-expert-bias");
            CHECK_CONTAINS(t, "--rope-type yarn");
            CHECK_CONTAINS(t, "--rotary-scaling-factor 40");
            int n = parse_arrays(t, f, 512);
            for (int i = 0; i < n; i++) check_known(&L_meg, NULL, f[i].flag, "megatron.sh");
            check_implied_params(f, n, &m, "megatron.sh");
            free(t);
        }
        /* torchtitan: DeepSeek-V3 flavours use flex attention, which its cp refuses */
        plan_for(&p, AP_TRAINER_TORCHTITAN, 1, 1, 32, 1, 3, 8192);
        p.cp = 2;
        CHECK_INT(ap_emit_check(AP_EMIT_TORCHTITAN, &m, &c, &p, NULL, &err), AP_ERR_INFEASIBLE);
        CHECK_CONTAINS(err.msg, "multi-latent");
    }
    /* Megatron, Mixtral at tp 2: --expert-tensor-parallel-size 1 always emitted */
    if (load_model("mixtral-8x7b", &m)) {
        make_cluster("h100", 16, &c);
        plan_for(&p, AP_TRAINER_MEGATRON, 2, 1, 8, 2, 1, 4096);
        char *t = render(AP_EMIT_MEGATRON, &m, &c, &p, "megatron.sh", &st, &err, NULL, 0);
        CHECK(t != NULL);
        if (t) CHECK_CONTAINS(t, "--expert-tensor-parallel-size 1\n");
        free(t);
        /* DeepSpeed: native MoE refuses ZeRO-3 whatever ep is */
        plan_for(&p, AP_TRAINER_DEEPSPEED, 1, 1, 16, 1, 3, 4096);
        CHECK_INT(ap_plan_check(&p, &m, &c, 1, &err), AP_ERR_INFEASIBLE);
        CHECK_CONTAINS(err.msg, "ZeRO stage 3");
        /* Colossal-AI: the MoE plugin is ZeRO-1 without overlap */
        plan_for(&p, AP_TRAINER_COLOSSALAI, 1, 1, 16, 4, 2, 4096);
        CHECK_INT(ap_plan_check(&p, &m, &c, 1, &err), AP_ERR_INFEASIBLE);
        p.zero = 1;
        p.overlap_grad = 1;
        CHECK_INT(ap_plan_check(&p, &m, &c, 1, &err), AP_ERR_INFEASIBLE);
        p.overlap_grad = 0;
        CHECK_INT(ap_plan_check(&p, &m, &c, 1, &err), AP_OK);
    }
    if (load_model("llama-3-8b", &m)) {
        /* Megatron's --tp-comm-overlap (TE userbuffers) needs CUDA multicast: on H100 SXM the
         * script carries it; on A100 a plan asking for it is refused, its closest plan and the
         * script drop it, and the other flags stay */
        make_cluster("h100", 8, &c);
        plan_for(&p, AP_TRAINER_MEGATRON, 2, 1, 4, 1, 1, 4096);
        p.sp = 1;
        p.overlap_tp = 1;
        char *mt = render(AP_EMIT_MEGATRON, &m, &c, &p, "megatron.sh", &st, &err, NULL, 0);
        CHECK(mt != NULL);
        if (mt) CHECK_CONTAINS(mt, "--tp-comm-overlap");
        free(mt);
        make_cluster("a100-sxm4-80g", 8, &c);
        ap_plan q;
        CHECK_INT(ap_emit_check(AP_EMIT_MEGATRON, &m, &c, &p, &q, &err), AP_ERR_INFEASIBLE);
        CHECK_CONTAINS(err.msg, "multicast");
        CHECK_INT(q.overlap_tp, 0);
        CHECK_INT(q.tp, 2);
        CHECK_INT(q.sp, 1);
        p.overlap_tp = 0;
        mt = render(AP_EMIT_MEGATRON, &m, &c, &p, "megatron.sh", &st, &err, NULL, 0);
        CHECK(mt != NULL);
        if (mt) {
            CHECK(strstr(mt, "--tp-comm-overlap") == NULL);
            CHECK_CONTAINS(mt, "--sequence-parallel");
        }
        free(mt);
    }
    if (load_model("llama-3-8b", &m)) {
        /* torchtitan async TP needs [compile] with the model */
        make_cluster("h100", 8, &c);
        plan_for(&p, AP_TRAINER_TORCHTITAN, 2, 1, 4, 1, 3, 4096);
        p.overlap_tp = 1;
        char *t = render(AP_EMIT_TORCHTITAN, &m, &c, &p, "torchtitan.toml", &st, &err, NULL, 0);
        CHECK(t != NULL);
        if (t) CHECK_CONTAINS(t, "[compile]\nenable = true\ncomponents = [\"model\"]");
        free(t);
        /* torchtitan with cp > 1 shards parameters: a ZeRO-0 plan is refused */
        plan_for(&p, AP_TRAINER_TORCHTITAN, 1, 1, 4, 1, 0, 8192);
        p.cp = 2;
        CHECK_INT(ap_plan_check(&p, &m, &c, 1, &err), AP_ERR_INFEASIBLE);
        CHECK_CONTAINS(err.msg, "cp > 1");
        /* V100: no FlashAttention (sm80+) */
        make_cluster("v100-sxm2-32g", 8, &c);
        plan_for(&p, AP_TRAINER_MEGATRON, 1, 1, 8, 1, 1, 4096);
        p.dtype = AP_DTYPE_FP16;
        p.flash_attn = 1;
        t = render(AP_EMIT_MEGATRON, &m, &c, &p, "megatron.sh", &st, &err, NULL, 0);
        CHECK(t != NULL);
        if (t) CHECK_CONTAINS(t, "--attention-backend unfused");
        free(t);
    }
    /* Colossal-AI Gemini: parameter offload only with every optimizer state offloaded */
    if (load_model("llama-3-8b", &m)) {
        make_cluster("h100", 8, &c);
        plan_for(&p, AP_TRAINER_COLOSSALAI, 1, 1, 8, 1, 3, 4096);
        p.offload_params = 0.5;
        p.offload_optimizer = 0.5;
        CHECK_INT(ap_plan_check(&p, &m, &c, 1, &err), AP_ERR_INFEASIBLE);
        p.offload_optimizer = 1;
        CHECK_INT(ap_plan_check(&p, &m, &c, 1, &err), AP_OK);
    }
    /* Llama-3.1: rope base and llama3 scaling reach Megatron */
    if (load_model("llama-3.1-405b", &m)) {
        make_cluster("h100", 64, &c);
        plan_for(&p, AP_TRAINER_MEGATRON, 8, 8, 1, 1, 1, 8192);
        char *t = render(AP_EMIT_MEGATRON, &m, &c, &p, "megatron.sh", &st, &err, NULL, 0);
        CHECK(t != NULL);
        if (t) {
            CHECK_CONTAINS(t, "--rotary-base 500000\n");
            CHECK_CONTAINS(t, "--use-rope-scaling\n    --rope-scaling-factor 8\n");
        }
        free(t);
    }
    /* Qwen1.5-MoE through Megatron-DeepSpeed: experts 1408 wide, a 5632-wide shared expert
       and q/k/v biases: the shared expert and the q/k/v-only bias cannot be expressed, so
       ds_config.json is left out with the reason (experts get 1408 when written), the HF
       flavour is still written; Megatron-LM expresses it (shared expert with its gate) */
    const char *qmoe = "{\"model_type\":\"qwen2_moe\",\"hidden_size\":2048,\"intermediate_size\":"
                       "5632,\"moe_intermediate_size\":1408,\"shared_expert_intermediate_size\":"
                       "5632,\"num_experts\":60,\"num_experts_per_tok\":4,\"num_attention_heads\":"
                       "16,\"num_key_value_heads\":16,\"num_hidden_layers\":24,\"vocab_size\":"
                       "151936,\"tie_word_embeddings\":false,\"rope_theta\":1000000.0}";
    CHECK_INT(ap_model_parse(qmoe, strlen(qmoe), "qwen1.5-moe.json", &m, &err), AP_OK);
    make_cluster("h100", 8, &c);
    plan_for(&p, AP_TRAINER_DEEPSPEED, 1, 1, 8, 1, 2, 4096);
    char *t = render(AP_EMIT_DEEPSPEED, &m, &c, &p, "ds_config.json", &st, &err, note, sizeof note);
    CHECK_INT(st, AP_OK);
    CHECK(t == NULL);
    CHECK_CONTAINS(note, "ds_config.json not written");
    CHECK_CONTAINS(note, "no shared experts");
    CHECK_CONTAINS(note, "q/k/v-only bias");
    free(t);
    plan_for(&p, AP_TRAINER_MEGATRON, 1, 1, 8, 1, 1, 4096);
    t = render(AP_EMIT_MEGATRON, &m, &c, &p, "megatron.sh", &st, &err, NULL, 0);
    CHECK(t != NULL);
    if (t) {
        CHECK_CONTAINS(t, "--moe-shared-expert-gate");
        CHECK_CONTAINS(t, "--add-qkv-bias");
        int n = parse_arrays(t, f, 512);
        check_implied_params(f, n, &m, "megatron.sh");
    }
    free(t);

    /* found by tools/trainer_validate.py (docs/trainer-validation.md): torchtitan refuses
       context parallelism for the models its flavours run on flex attention: gpt-oss (sinks,
       "CP support for gpt-oss model is still in progress") and Llama-4 (chunked attention with
       NoPE layers, the *_irope flavours: "Context Parallel only supports SDPA attention");
       Qwen3 runs SDPA and keeps it */
    {
        static const struct {
            const char *file;
            int refused;
            const char *why;
        } cpm[] = {{"gpt-oss-20b.json", 1, "attention-sink"},
                   {"llama-4-scout-17b-16e.json", 1, "chunked-attention"},
                   {"qwen3-8b.json", 0, NULL}};
        make_cluster("h100", 16, &c);
        for (size_t i = 0; i < sizeof cpm / sizeof cpm[0]; i++) {
            if (!load_hf(cpm[i].file, &m)) {
                CHECK(0);
                continue;
            }
            plan_for(&p, AP_TRAINER_TORCHTITAN, 1, 1, 8, 1, 3, 8192);
            p.cp = 2;
            if (m.moe.experts > 0) p.ep = 8;
            ap_status cs = ap_plan_check(&p, &m, &c, 1, &err);
            if (cpm[i].refused) {
                CHECK_INT(cs, AP_ERR_INFEASIBLE);
                if (cs != AP_OK) CHECK_CONTAINS(err.msg, cpm[i].why);
            } else {
                if (cs != AP_OK) fprintf(stderr, "  %s: %s\n", cpm[i].file, err.msg);
                CHECK_INT(cs, AP_OK);
            }
        }
    }
    /* torchtitan v0.2.2 takes the expert-parallel ranks out of the FSDP shard x cp x tp ranks
       (parallel_dims.py: efsdp = dp_shard * cp * tp // (etp * ep)): ZeRO-0 replicates, so dp
       16 ep 8 at ZeRO 0 has one shard rank and the mesh product is 0 (found with
       tools/trainer_validate.py on DeepSeek-V3: "The product of mesh_sizes=(16, 16, 0, 16, 1)
       is 0"); the closest plan shards (ZeRO 2), which expresses it */
    if (load_hf("qwen3-30b-a3b.json", &m)) {
        make_cluster("h100", 16, &c);
        plan_for(&p, AP_TRAINER_TORCHTITAN, 1, 1, 16, 8, 0, 4096);
        ap_status cs = ap_plan_check(&p, &m, &c, 1, &err);
        CHECK_INT(cs, AP_ERR_INFEASIBLE);
        if (cs != AP_OK) CHECK_CONTAINS(err.msg, "which ep 8 does not divide");
        ap_plan close;
        CHECK_INT(ap_emit_check(AP_EMIT_TORCHTITAN, &m, &c, &p, &close, &err), AP_ERR_INFEASIBLE);
        CHECK(close.zero >= 2);
        CHECK_INT(close.ep, 8);
        CHECK_INT(ap_emit_check(AP_EMIT_TORCHTITAN, &m, &c, &close, NULL, &err), AP_OK);
        p.zero = 2; /* 16 shard ranks hold ep 8 */
        CHECK_INT(ap_plan_check(&p, &m, &c, 1, &err), AP_OK);
    } else {
        CHECK(0);
    }
    /* Colossal-AI v0.5.1: PipelineStageManager takes num_layers_per_stage of pp entries, so an
       uneven interleaved split is refused (AssertionError in HybridParallelPlugin(...)); the
       closest plan keeps the interleaving with uniform chunks, which need no list */
    if (load_model("llama-3-70b", &m)) {
        make_cluster("a100-sxm4-80g", 64, &c);
        plan_for(&p, AP_TRAINER_COLOSSALAI, 8, 4, 2, 1, 1, 4096);
        p.vp = 4;
        p.nchunks = 16;
        static const int lay[16] = {5, 6, 6, 5, 5, 5, 5, 5, 5, 5, 5, 5, 4, 5, 5, 4};
        for (int k = 0; k < 16; k++) p.stage_layers[k] = lay[k];
        ap_plan close;
        CHECK_INT(ap_emit_check(AP_EMIT_COLOSSALAI, &m, &c, &p, &close, &err), AP_ERR_INFEASIBLE);
        CHECK_CONTAINS(err.msg, "unevenly only without interleaving");
        CHECK_INT(close.vp, 4);
        CHECK_INT(close.nchunks, 0);
        CHECK_INT(ap_emit_check(AP_EMIT_COLOSSALAI, &m, &c, &close, NULL, &err), AP_OK);
        char *t2 = render(AP_EMIT_COLOSSALAI, &m, &c, &close, "colossalai_booster.py", &st, &err,
                          NULL, 0);
        CHECK(t2 != NULL);
        if (t2) {
            CHECK_CONTAINS(t2, "num_model_chunks=4");
            CHECK(strstr(t2, "num_layers_per_stage") == NULL);
        }
        free(t2);
        /* uneven without interleaving stays: pp entries are what it takes */
        p.vp = 1;
        p.nchunks = 4;
        static const int lay4[4] = {19, 21, 21, 19};
        for (int k = 0; k < 4; k++) p.stage_layers[k] = lay4[k];
        CHECK_INT(ap_emit_check(AP_EMIT_COLOSSALAI, &m, &c, &p, NULL, &err), AP_OK);
    }

    /* Every family: Megatron-LM either expresses every architecture field (and the flags imply
       the model's parameter count) or refuses with the reason; never a different model. */
    static const struct {
        const char *file;
        const char *refusal; /* NULL: must be expressible */
    } fam[] = {
        {"qwen3-8b.json", NULL},          {"qwen3-30b-a3b.json", NULL},
        {"phi-4-mini-instruct.json", "longrope"}, {"olmo-2-1124-7b.json", "post"},
        {"gemma-7b.json", "GeGLU"},       {"gemma-3-1b-pt.json", "GeGLU"},
        {"phi-3.5-moe-instruct.json", "biases"}, {"gpt-oss-20b.json", "router has no bias"},
        {"llama-4-scout-17b-16e.json", "chunked"}, {"deepseek-v2-lite.json", NULL},
        {"deepseek-moe-16b-base.json", NULL}, {"c4ai-command-r-v01.json", "LayerNorm"},
        {"starcoder2-7b.json", NULL},     {"internlm2-7b.json", "dynamic"},
        {"chatglm3-6b.json", NULL},       {"gpt-j-6b.json", "parallel"},
        {"baichuan2-13b-base.json", "ALiBi"}, {"minicpm-moe-8x2b.json", NULL},
        {"stablelm-2-1_6b.json", NULL}, {"phi-3.5-mini-instruct.json", "longrope"},
        {"nemotron-4-15b.json", NULL},    {"mpt-7b.json", "ALiBi"},
        {"dbrx-base.json", "LayerNorm"},
    };
    make_cluster("h100", 8, &c);
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
        if (!load_hf(fam[i].file, &m)) {
            CHECK(0);
            continue;
        }
        plan_for(&p, AP_TRAINER_MEGATRON, 1, 1, 8, 1, 1, 2048);
        t = render(AP_EMIT_MEGATRON, &m, &c, &p, "megatron.sh", &st, &err, NULL, 0);
        if (fam[i].refusal) {
            if (st != AP_ERR_INFEASIBLE) fprintf(stderr, "  %s: not refused\n", fam[i].file);
            CHECK_INT(st, AP_ERR_INFEASIBLE);
            if (st != AP_OK) CHECK_CONTAINS(err.msg, fam[i].refusal);
        } else {
            if (st != AP_OK) fprintf(stderr, "  %s: %s\n", fam[i].file, err.msg);
            CHECK_INT(st, AP_OK);
            if (t) {
                int n = parse_arrays(t, f, 512);
                for (int k = 0; k < n; k++) check_known(&L_meg, NULL, f[k].flag, fam[i].file);
                check_implied_params(f, n, &m, fam[i].file);
                if (m.act == AP_ACT_RELU2) { /* Nemotron-4 as Megatron-LM builds it */
                    CHECK(fv(f, n, "--squared-relu") && fv(f, n, "--apply-layernorm-1p"));
                    CHECK_STR(fv(f, n, "--rotary-percent"), "0.5");
                }
            }
        }
        free(t);
    }
}

/* torchtitan v0.2.2 has no pipelining function for its qwen3 and gpt_oss families
 * (pipelining_fn=None: tools/trainer_validate.py found tt-qwen3-8b at pp 8 failing with
 * "'NoneType' object is not callable"); the job file names the family to run. */
static void test_torchtitan_families(void) {
    static const struct { const char *file; int hf; const char *family; int pp_ok; } cases[] = {
        {"llama-3-8b", 0, "llama3", 1},
        {"deepseek-v3", 0, "deepseek_v3", 1},
        {"qwen3-8b", 0, "qwen3", 0},
        {"gpt-oss-20b", 0, "gpt_oss", 0},
        {"qwen3-30b-a3b.json", 1, "qwen3", 0},
        {"llama-4-scout-17b-16e.json", 1, "llama4", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ap_model m;
        ap_cluster c;
        ap_plan p;
        ap_err err;
        if (!(cases[i].hf ? load_hf(cases[i].file, &m) : load_model(cases[i].file, &m))) {
            CHECK(0);
            continue;
        }
        CHECK_STR(ap_torchtitan_family(&m), cases[i].family);
        make_cluster("h100", 64, &c);
        /* pp 2 x dp 32, FSDP: legal for torchtitan but for the family rule */
        plan_for(&p, AP_TRAINER_TORCHTITAN, 1, 2, 32, 1, 2, 4096);
        p.gbs = 256, p.grad_accum = 8;
        ap_status st = ap_plan_check(&p, &m, &c, 0, &err);
        if (cases[i].pp_ok) {
            if (st != AP_OK) fprintf(stderr, "  %s: %s\n", cases[i].file, err.msg);
            CHECK_INT(st, AP_OK);
        } else {
            CHECK_INT(st, AP_ERR_INFEASIBLE);
            CHECK_CONTAINS(err.msg, "has no pipelining function");
            CHECK_CONTAINS(err.msg, cases[i].family);
        }
        /* the same plan without pipelining is torchtitan's, and its file names the family */
        plan_for(&p, AP_TRAINER_TORCHTITAN, 1, 1, 64, 1, 2, 4096);
        p.gbs = 256, p.grad_accum = 4;
        char *t = render(AP_EMIT_TORCHTITAN, &m, &c, &p, "torchtitan.toml", &st, &err, NULL, 0);
        if (st != AP_OK) fprintf(stderr, "  %s: %s\n", cases[i].file, err.msg);
        CHECK(t != NULL);
        if (t) {
            char want[64];
            snprintf(want, sizeof want, "--model.name %s ", cases[i].family);
            CHECK_CONTAINS(t, want);
        }
        free(t);
    }
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    L_ds = load_list("tests/data/trainers/deepspeed_keys.txt");
    L_meg = load_list("tests/data/trainers/megatron_flags.txt");
    L_mds = load_list("tests/data/trainers/megatron_deepspeed_flags.txt");
    L_col = load_list("tests/data/trainers/colossalai_plugin_args.txt");
    L_colx = load_list("tests/data/trainers/colossalai_extra_args.txt");
    L_tt = load_list("tests/data/trainers/torchtitan_keys.txt");
    L_acc = load_list("tests/data/trainers/accelerate_keys.txt");
    have_python = system("python3 -c 'import tomllib, yaml' >/dev/null 2>&1") == 0;
    const char *pdir = tl_tmpdir();
    snprintf(pyconv, sizeof pyconv, "%s/conv.py", pdir ? pdir : "/tmp");
    if (have_python && tl_write(pyconv, PYCONV) != 0) have_python = 0;
    if (!have_python) printf("python3 with tomllib and yaml missing: TOML/YAML/Python parse-backs skipped\n");

    test_planfile_roundtrip();
    test_planfile_bad();
    test_planfile_every_field();
    test_planfile_before_attn_impl();
    test_roundtrip();
    test_refusals();
    test_torchtitan_counts();
    test_gb200_launch_hosts();
    test_mxfp8_emit();
    test_torchtitan_families();
    test_golden();
    test_issue19();
    test_planfile_nemotron();
    test_cli();
    test_emit_leaves_nothing();
    test_emit_estimate_checked();
    if (pdir) rm_rf(pdir);
    return tl_finish();
}
