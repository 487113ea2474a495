/*
 * test_flags.c - random command lines: each command's flags as its --help lists them, with
 * values drawn from pools of valid and invalid ones for the flag's argument (a count, a
 * bandwidth, a size, a fraction, a list...), over the bundled models and some Hugging Face
 * configs. Whatever the draw, autoplan must answer (exit 0) or refuse it (exit 2 with one line
 * on stderr, one per trainer that cannot express the plan under --emit): never crash, never
 * an internal error, never a sanitizer report. The draws are seeded, so a failure prints the
 * command line that reproduces it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

enum { MAX_FLAGS = 96, DRAWS_PER_COMMAND = 18 };

typedef struct {
    char name[40]; /* "--gpus" */
    char arg[24];  /* "N", "BW", ...; "" for a switch */
} flag;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static int answered_n, refused_n;

static unsigned draw(unsigned n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* One of a[0..n): three times in four one of the first `valid` (the valid values come first). */
static const char *pick(const char *const *a, unsigned n, unsigned valid) {
    return draw(4) != 0 ? a[draw(valid)] : a[draw(n)];
}
#define PICK(a) ((a)[draw((unsigned)(sizeof(a) / sizeof((a)[0])))])
#define PICKV(a, valid) pick((a), (unsigned)(sizeof(a) / sizeof((a)[0])), (valid))

/* The flags `autoplan CMD --help` lists: lines "  --name ARG   text" or "  --name   text". */
static int flags_of(const char *cmd, flag *f) {
    char args[128], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "%s --help", cmd);
    CHECK_INT(tl_run(args, &out, &err), 0);
    int n = 0;
    for (const char *l = out; l && *l && n < MAX_FLAGS;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len > 4 && l[0] == ' ' && l[1] == ' ' && l[2] == '-' && l[3] == '-') {
            char line[256];
            snprintf(line, sizeof line, "%.*s", (int)(len < 255 ? len : 255), l);
            char name[40] = "", arg[24] = "";
            /* the argument is the next word when a single space separates it */
            if (sscanf(line, " %39s", name) == 1 && strcmp(name, "--help") != 0) {
                const char *after = strstr(line, name) + strlen(name);
                if (after[0] == ' ' && after[1] != ' ') sscanf(after, " %23s", arg);
                snprintf(f[n].name, sizeof f[n].name, "%s", name);
                snprintf(f[n].arg, sizeof f[n].arg, "%s", arg);
                n++;
            }
        }
        l = e ? e + 1 : l + len;
    }
    free(out);
    free(err);
    CHECK(n > 0);
    return n;
}

/* A value for flag f: mostly valid ones, some out of range or not numbers at all. `tmp`: a
 * scratch directory for files the command may write. */
static const char *value_of(const flag *f, const char *tmp, const char *planfile, char *buf,
                            size_t n) {
    static const char *counts[] = {"1", "2", "4", "8", "16", "0", "-1", "3", "x", "1.5",
                                   "99999999999999999999"};
    static const char *bws[] = {"400Gb/s", "50GB/s", "1Mb/s", "0GB/s", "-5GB/s", "nan",
                                "1e300GB/s", "25", "3TB/s"};
    static const char *sizes[] = {"512GiB", "2GiB", "80GB", "0", "-1GiB", "1e30GiB", "nan"};
    static const char *fracs[] = {"0", "0.5", "1", "1.5", "-0.1", "nan"};
    static const char *lists[] = {"1,2,3", "8,8,8,8", "0", "a,b", "", "0.1,0.5,1"};
    static const char *words[] = {"x", "", "none", "all", "auto", "1"};
    const char *a = f->arg, *nm = f->name;
    if (!strcmp(nm, "--out") || !strcmp(nm, "--trace")) {
        snprintf(buf, n, "%s/%s%u", tmp, nm + 2, draw(3));
        return buf;
    }
    if (!strcmp(nm, "--db")) {
        snprintf(buf, n, "%s/flags.db", tmp);
        return buf;
    }
    if (!strcmp(nm, "--plan") || !strcmp(nm, "--cluster")) {
        const char *cluster = tl_path("examples/clusters/dgx-a100.json");
        const char *c[] = {!strcmp(nm, "--plan") ? planfile : cluster, planfile, cluster,
                           "/nonexistent.json", tmp};
        snprintf(buf, n, "%s", PICKV(c, 3));
        return buf;
    }
    if (!strcmp(nm, "--gpus")) {
        const char *g[] = {"8", "16", "64", "1", "8..64", "8,16", "3", "0", "x"};
        return PICKV(g, 6);
    }
    if (!strcmp(nm, "--gpu")) {
        const char *g[] = {"a100-sxm4-80g", "h100-sxm", "rtx-3090", "b200", "nosuch"};
        return PICKV(g, 4);
    }
    if (!strcmp(nm, "--trainer")) {
        const char *t[] = {"megatron", "deepspeed", "fsdp", "colossalai", "torchtitan",
                           "accelerate", "x"};
        return PICKV(t, 6);
    }
    if (!strcmp(nm, "--emit")) {
        const char *e[] = {"all", "deepspeed", "megatron,torchtitan", "colossalai,accelerate",
                           "x", ""};
        return PICKV(e, 4);
    }
    if (!strcmp(nm, "--threads")) {
        const char *t[] = {"1", "2", "0", "x"};
        return PICKV(t, 3);
    }
    if (!strcmp(a, "BW")) return PICKV(bws, 3);
    if (!strcmp(a, "SIZE")) return PICKV(sizes, 3);
    if (!strcmp(a, "F")) return PICKV(fracs, 3);
    if (!strcmp(a, "LIST")) return PICKV(lists, 2);
    if (!strcmp(a, "N") || !strcmp(a, "K") || !strcmp(a, "B") || !strcmp(a, "0-3"))
        return PICKV(counts, 5);
    if (!strcmp(a, "S") || !strcmp(a, "TOKENS")) { /* a sequence length */
        const char *s[] = {"1024", "4096", "2048", "1", "0", "-5", "8k", "x"};
        return PICKV(s, 4);
    }
    if (!strcmp(a, "T")) { /* tokens */
        const char *t[] = {"4M", "2T", "1024", "0", "x", "-1M"};
        return PICKV(t, 3);
    }
    if (!strcmp(a, "R")) {
        const char *r[] = {"none", "full", "selective", "x"};
        return PICKV(r, 3);
    }
    if (!strcmp(a, "D")) {
        const char *d[] = {"bf16", "fp16", "fp8", "cpu", "nvme", "fp32", "x"};
        return PICKV(d, 5);
    }
    if (!strcmp(a, "IMPL")) {
        const char *i[] = {"fa1", "fa2", "fa3", "cudnn", "triton", "unfused", "x"};
        return PICKV(i, 6);
    }
    if (!strcmp(a, "V")) {
        const char *v[] = {"2.10", "2.22", "2.18.3", "3", "x"};
        return PICKV(v, 3);
    }
    if (strchr(a, '|')) { /* "dp|ilp|auto", "NAME|none": a listed word or not */
        snprintf(buf, n, "%s", a);
        char *words_of[8];
        int k = 0;
        for (char *t = strtok(buf, "|"); t && k < 8; t = strtok(NULL, "|")) words_of[k++] = t;
        return draw(4) == 0 ? "x" : words_of[draw((unsigned)k)];
    }
    return PICK(words);
}

/* A refusal's stderr: one line "autoplan: ...", or with --emit one such line per trainer that
 * cannot express the plan (the others are written). */
static int refusal_lines(const char *err, int per_target) {
    int lines = 0;
    for (const char *l = err; l && *l; lines++) {
        if (strncmp(l, "autoplan: ", 10) != 0) return 0;
        const char *e = strchr(l, '\n');
        l = e ? e + 1 : l + strlen(l);
    }
    return lines == 1 || (per_target && lines > 1);
}

/* Draw and run DRAWS_PER_COMMAND command lines of `cmd`. */
static void random_lines(const char *cmd, const char *tmp, const char *planfile) {
    static const char *models[] = {
        "examples/models/tiny-llama.json", "examples/models/tiny-gpt.json",
        "examples/models/llama-2-7b.json", "examples/models/gpt2.json",
        "examples/models/mixtral-8x7b.json", "examples/models/gpt-oss-20b.json",
        "examples/models/llama-3-70b.json", "tests/data/hf/gemma-3-1b-pt.json",
        "tests/data/hf/qwen3-30b-a3b.json", "tests/data/hf/phi-3.5-moe-instruct.json"};
    flag fl[MAX_FLAGS];
    int nf = flags_of(cmd, fl);
    for (int d = 0; d < DRAWS_PER_COMMAND; d++) {
        char args[8192], v[1200];
        int len = !strcmp(cmd, "fit") || !strcmp(cmd, "emit") /* no model: fit finds the
                                                                 largest, emit reads a plan */
                      ? snprintf(args, sizeof args, "%s", cmd)
                      : snprintf(args, sizeof args, "%s '%s'", cmd, tl_path(PICK(models)));
        if (!strcmp(cmd, "emit") && draw(4) != 0)
            len += snprintf(args + len, sizeof args - (size_t)len, " --plan '%s' --out '%s/emit'",
                            planfile, tmp);
        if (strcmp(cmd, "info") && strcmp(cmd, "fit") && strcmp(cmd, "emit") && draw(8) != 0)
            len += snprintf(args + len, sizeof args - (size_t)len, " --gpus %s",
                            draw(2) ? "8" : "16");
        if (!strcmp(cmd, "compare") && draw(4) != 0)
            len += snprintf(args + len, sizeof args - (size_t)len, " --out '%s/report'", tmp);
        if (!strcmp(cmd, "plan")) /* never the user's cache */
            len += snprintf(args + len, sizeof args - (size_t)len, " --db '%s/flags.db'", tmp);
        for (int k = (int)draw(3); k >= 0 && len < 6000; k--) {
            const flag *f = &fl[draw((unsigned)nf)];
            len += snprintf(args + len, sizeof args - (size_t)len, " %s", f->name);
            if (f->arg[0])
                len += snprintf(args + len, sizeof args - (size_t)len, " '%s'",
                                value_of(f, tmp, planfile, v, sizeof v));
        }
        char *out = NULL, *err = NULL;
        int rc = tl_run(args, &out, &err);
        int one_line = refusal_lines(err, strstr(args, "--emit") != NULL);
        int sanitizer = err && (strstr(err, "runtime error") || strstr(err, "Sanitizer"));
        int ok = (rc == 0 || (rc == 2 && one_line)) && !sanitizer;
        CHECK(ok);
        answered_n += rc == 0;
        refused_n += rc == 2;
        if (!ok)
            fprintf(stderr, "  autoplan %s\n  exit %d, stderr: %s\n", args, rc, err ? err : "");
        free(out);
        free(err);
    }
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    /* AP_FLAGS_SEED: other draws than CI's (exploring; a failure prints its command line) */
    const char *seed = getenv("AP_FLAGS_SEED");
    if (seed && strtoull(seed, NULL, 10) != 0) rng = strtoull(seed, NULL, 10);
    const char *tmp = tl_tmpdir();
    char dir[1024], planfile[1100];
    snprintf(dir, sizeof dir, "%s", tmp);
    /* a valid plan.json for --plan */
    char *o = tl_run_ok("plan '%s' --gpus 8 --db '%s/flags.db' --out '%s/p'",
                        tl_path("examples/models/tiny-llama.json"), dir, dir);
    free(o);
    snprintf(planfile, sizeof planfile, "%s/p/plan.json", dir);
    const char *cmds[] = {"estimate", "plan", "simulate", "partition", "fit", "compare", "info",
                          "emit"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) random_lines(cmds[i], dir, planfile);
    /* both kinds of answer occur, or the draws test nothing */
    CHECK(answered_n > 0 && refused_n > 0);
    fprintf(stderr, "%d command lines answered, %d refused\n", answered_n, refused_n);
    char rm[1200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return tl_finish();
}
