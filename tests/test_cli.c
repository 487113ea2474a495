/*
 * test_cli.c - the command line end to end: golden `estimate --json` outputs, the README's
 * main command on the bundled example, `validate --json` against the fidelity targets, and bad
 * input to the shared flags (one line on stderr naming the flag, exit 2, no crash).
 *
 * Golden files live in tests/golden/; AP_UPDATE_GOLDEN=1 rewrites them. They are compared as
 * JSON: same keys in the same order, numbers within 1e-9 relative.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autoplan/json.h"
#include "testlib.h"

/* Same keys in the same order, same strings and booleans, numbers equal within 1e-9
 * relative (the last bits of a double may differ between optimisation levels). */
static int same_json(const ap_json *a, const ap_json *b, char *where, size_t n) {
    if (ap_json_is_number(a) && ap_json_is_number(b)) {
        double x = ap_json_number(a), y = ap_json_number(b);
        double sc = fabs(y) > 1e-300 ? fabs(y) : 1.0;
        return fabs(x - y) <= 1e-9 * sc;
    }
    if (strcmp(ap_json_type_name(a), ap_json_type_name(b)) != 0) return 0;
    if (ap_json_is_string(a)) return strcmp(ap_json_string(a), ap_json_string(b)) == 0;
    if (ap_json_is_bool(a)) return ap_json_bool(a) == ap_json_bool(b);
    if (ap_json_is_object(a) || ap_json_is_array(a)) {
        if (ap_json_size(a) != ap_json_size(b)) return 0;
        const ap_json *x = ap_json_first(a), *y = ap_json_first(b);
        for (; x && y; x = ap_json_next(x), y = ap_json_next(y)) {
            if (ap_json_is_object(a) && strcmp(ap_json_key(x), ap_json_key(y)) != 0) return 0;
            if (!same_json(x, y, where, n)) {
                if (ap_json_key(x) && strlen(where) + strlen(ap_json_key(x)) + 2 < n) {
                    strcat(where, ".");
                    strcat(where, ap_json_key(x));
                }
                return 0;
            }
        }
    }
    return 1;
}

static void golden(const char *name, const char *args) {
    char *out = NULL, *err = NULL;
    char path[1024];
    snprintf(path, sizeof path, "tests/golden/%s", name);
    int rc = tl_run(args, &out, &err);
    CHECK_INT(rc, 0);
    if (rc != 0) fprintf(stderr, "stderr: %s\n", err ? err : "");
    if (getenv("AP_UPDATE_GOLDEN")) {
        CHECK(tl_write(tl_path(path), out ? out : "") == 0);
    } else {
        char *want = tl_read(tl_path(path));
        CHECK(want != NULL);
        ap_err e;
        ap_json *jw = want ? ap_json_parse(want, strlen(want), path, &e) : NULL;
        ap_json *jo = out ? ap_json_parse(out, strlen(out), "output", &e) : NULL;
        CHECK(jw != NULL && jo != NULL);
        char where[512] = "";
        if (jw && jo && !same_json(jo, jw, where, sizeof where)) {
            fprintf(stderr, "%s differs (at %s) from the output of: autoplan %s\n--- got:\n%s\n",
                    path, where, args, out);
            CHECK(0);
        }
        ap_json_free(jw);
        ap_json_free(jo);
        free(want);
    }
    free(out);
    free(err);
}

static void test_golden(void) {
    char args[2048];
    /* sp and overlap off as when these goldens were written (estimate's defaults now turn them
       on, as the search does) */
    snprintf(args, sizeof args, "estimate '%s' --gpus 1024 --tp 8 --pp 8 --mbs 1 --gbs 1536 "
             "--recompute full --no-sp --no-overlap --json",
             tl_path("examples/models/gpt3-175b.json"));
    golden("estimate-gpt3-175b.json", args);
    snprintf(args, sizeof args, "estimate '%s' --gpus 64 --tp 8 --pp 4 --sp --recompute selective "
             "--mbs 1 --gbs 128 --zero 1 --no-overlap --json",
             tl_path("examples/models/llama-3-70b.json"));
    golden("estimate-llama-3-70b.json", args);
}

/* issue 19: --gpus 1000 with a batch no data-parallel size can split says so and names a
 * batch that works, instead of "nothing fits" blaming memory; the default batch gets a hint
 * when it is far above a small model's critical batch or leaves a tenth of the step in the
 * pipeline bubble, and no hint when it suits the job or when the user chose it; the robust:
 * line only where stress can reorder the plans shown. */
static void test_plan_batch_messages(void) {
    char *out = NULL, *err = NULL;
    char args[1024];
    snprintf(args, sizeof args, "'%s' --gpus 1000 --gbs 1024 --no-cache --top 1",
             tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "the global batch of 1024 sequences does not split over 1000 GPUs");
    CHECK_CONTAINS(out, "use --gbs ");
    CHECK(strstr(out ? out : "", "nothing fits") == NULL);
    CHECK(strstr(out ? out : "", "recompute, the smallest micro-batch") == NULL);
    /* the batch it names has a plan */
    const char *g = out ? strstr(out, "use --gbs ") : NULL;
    long long g2 = g ? atoll(g + 10) : 0;
    free(out);
    free(err);
    CHECK(g2 > 0 && g2 != 1024);
    snprintf(args, sizeof args, "'%s' --gpus 1000 --gbs %lld --no-cache --top 1",
             tl_path("examples/models/llama-2-7b.json"), g2);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, " 1  tp");
    free(out);
    free(err);
    /* a memory problem is still a memory problem */
    snprintf(args, sizeof args, "'%s' --gpus 1 --no-cache --top 1",
             tl_path("examples/models/llama-3-70b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "nothing fits.");
    CHECK(strstr(out ? out : "", "does not split") == NULL);
    free(out);
    free(err);

    /* GPT-2 (124M) on one GPU with the default 4M tokens: Kaplan et al.'s critical batch for
     * 85M non-embedding parameters is 2e8 / ((8.8e13 / 8.5e7)^0.076)^(1/0.21) = 1.33M tokens
     * (worked: 8.8e13/84.95e6 = 1.036e6, ^0.076 = 2.865, ^4.762 = 150.3, 2e8/150.3 = 1.33e6) */
    snprintf(args, sizeof args, "'%s' --gpus 1 --no-cache --top 2",
             tl_path("examples/models/gpt2.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "hint: the default batch of 3.93M tokens is 3.0x the critical batch");
    CHECK_CONTAINS(out, "about 1.33M tokens");
    free(out);
    free(err);
    /* chosen by the user: no hint */
    snprintf(args, sizeof args, "'%s' --gpus 1 --no-cache --top 2 --tokens-per-step 4M",
             tl_path("examples/models/gpt2.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK(strstr(out ? out : "", "hint:") == NULL);
    free(out);
    free(err);
    /* a 7B model on 8 GPUs: the default batch suits it (critical batch ~6M tokens), no hint */
    snprintf(args, sizeof args, "'%s' --gpus 8 --no-cache --top 3",
             tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK(strstr(out ? out : "", "hint:") == NULL);
    free(out);
    free(err);
    /* Llama-3.1-405B on 2048 H100s: deep pipelines with the default batch, a bubble hint whose
     * share is the best plan's bubble_s / step_s (on A100s, without Megatron's TP overlap, a
     * Megatron-FSDP plan with no pipeline wins) */
    snprintf(args, sizeof args, "'%s' --gpus 2048 --gpu h100 --no-cache --top 3",
             tl_path("examples/models/llama-3.1-405b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "hint: the pipeline bubble is ");
    free(out);
    free(err);
    snprintf(args, sizeof args, "'%s' --gpus 2048 --gpu h100 --no-cache --top 3 --json",
             tl_path("examples/models/llama-3.1-405b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    ap_err e;
    ap_json *j = out ? ap_json_parse(out, strlen(out), "plan --json", &e) : NULL;
    CHECK(j != NULL);
    if (j) {
        const ap_json *t = ap_json_get(ap_json_at(ap_json_get(j, "plans"), 0), "time");
        CHECK(ap_json_number(ap_json_get(t, "bubble_s")) >=
              0.10 * ap_json_number(ap_json_get(t, "step_s")));
        /* the robust: line is printed exactly when stress could reorder (JSON could_reorder) */
        const ap_json *rb = ap_json_get(j, "robustness");
        CHECK(rb != NULL && ap_json_get(rb, "could_reorder") != NULL);
        ap_json_free(j);
    }
    free(out);
    free(err);
    for (int k = 0; k < 2; k++) {
        const char *model = k ? "examples/models/llama-3-70b.json" : "examples/models/gpt2.json";
        const int gpus = k ? 64 : 1;
        snprintf(args, sizeof args, "'%s' --gpus %d --no-cache --top 5 --json", tl_path(model),
                 gpus);
        CHECK_INT(tl_run(args, &out, &err), 0);
        j = out ? ap_json_parse(out, strlen(out), "plan --json", &e) : NULL;
        int could = j ? ap_json_bool(ap_json_get(ap_json_get(j, "robustness"), "could_reorder"))
                      : -1;
        ap_json_free(j);
        free(out);
        free(err);
        snprintf(args, sizeof args, "'%s' --gpus %d --no-cache --top 5", tl_path(model), gpus);
        CHECK_INT(tl_run(args, &out, &err), 0);
        CHECK_INT(strstr(out ? out : "", "robust: ") != NULL, could == 1);
        free(out);
        free(err);
    }
}

/* issue 19: within the validated time error the simpler plan ranks first (search.h "Ties").
 * Llama-2-7B on 8 A100-80GB: the fastest plan offloads the optimizer and is tight; it is
 * named under the table, and every plan shown is within 5% of it and neither tight nor
 * offloading. --tie-margin 0 ranks by step time (the offloading plan first, no ties line);
 * a margin outside [0, 1] is an input error. */
/* The ties footer names the fastest plan "not shown" only when no row of the table is it. */
static void check_ties_footer(const char *out) {
    const char *f = out ? strstr(out, "\nties: ") : NULL;
    if (!f) return;
    const char *a = strstr(f, "of the fastest, ");
    CHECK(a != NULL);
    if (!a) return;
    a += strlen("of the fastest, ");
    const char *b = strstr(a, " (");
    if (!strncmp(a, "plan ", 5) || !b || !strstr(b, "not shown)")) return;
    char label[200], row[220];
    snprintf(label, sizeof label, "%.*s", (int)(b - a), a);
    snprintf(row, sizeof row, "  %s  ", label);
    const char *hit = strstr(out, row);
    CHECK(hit == NULL || hit > f);
}

static void test_plan_ties(void) {
    char *out = NULL, *err = NULL, args[1024];
    const char *m = tl_path("examples/models/llama-2-7b.json");
    snprintf(args, sizeof args, "'%s' --gpus 8 --no-cache --top 5 --json", m);
    CHECK_INT(tl_run(args, &out, &err), 0);
    ap_err e;
    ap_json *j = out ? ap_json_parse(out, strlen(out), "plan --json", &e) : NULL;
    CHECK(j != NULL);
    const ap_json *fa = j ? ap_json_get(j, "fastest") : NULL;
    CHECK(fa != NULL);
    if (fa) {
        double best = ap_json_number(ap_json_get(ap_json_get(fa, "time"), "step_s"));
        /* the fastest offloads the optimizer states to the host and fills the GPUs (tight):
         * the five within the margin fit without offload, none at ZeRO-3 (Megatron-FSDP,
         * 1% slower than it, whose per-layer gathers slow the compute beside them) */
        CHECK_CONTAINS(ap_json_string(ap_json_get(fa, "label")), "tp1 pp1 dp8 off-opt100% mbs2 z1");
        const ap_json *plans = ap_json_get(j, "plans");
        CHECK_INT(ap_json_size(plans), 5);
        for (int i = 0; i < ap_json_size(plans); i++) {
            const ap_json *p = ap_json_at(plans, i);
            double s = ap_json_number(ap_json_get(ap_json_get(p, "time"), "step_s"));
            CHECK(s > best && s <= best * 1.05);
            CHECK(!strcmp(ap_json_string(ap_json_get(p, "confidence")), "fits"));
            CHECK(!strstr(ap_json_string(ap_json_get(p, "label")), "off-"));
            CHECK(!strstr(ap_json_string(ap_json_get(p, "label")), " z3"));
        }
    }
    ap_json_free(j);
    free(out);
    free(err);
    snprintf(args, sizeof args, "'%s' --gpus 8 --no-cache --top 5", m);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "\nties: plans 1-5 within 5% (the validated time error) of the fastest, "
                        "tp1 pp1 dp8 off-opt100% mbs2 z1 (");
    CHECK_CONTAINS(out, "not shown), so listed simplest first: fits before tight");
    check_ties_footer(out);
    free(out);
    free(err);
    snprintf(args, sizeof args, "'%s' --gpus 8 --no-cache --top 5 --tie-margin 0", m);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, " 1  tp1 pp1 dp8 off-opt100% mbs2 z1 ");
    CHECK(strstr(out ? out : "", "ties:") == NULL);
    free(out);
    free(err);
    const char *bad[] = {"2", "-0.1", "nan", "5%x"};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "'%s' --gpus 8 --no-cache --tie-margin '%s'", m, bad[i]);
        CHECK_INT(tl_run(args, &out, &err), 2);
        CHECK_CONTAINS(err, "--tie-margin");
        free(out);
        free(err);
    }
    /* the fastest among the plans shown is named by its rank (it was "not shown"); tl_path's
       buffer is reused, so m is not used after this */
    snprintf(args, sizeof args, "'%s' --gpus 32 --trainer colossalai --ep 4 --gbs 960 --no-cache "
             "--top 20", tl_path("examples/models/mixtral-8x7b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "of the fastest, plan ");
    check_ties_footer(out);
    free(out);
    free(err);
}

/* issue 19: a plan label reproduces its own number with `estimate`. Every plan of a few
 * searches (trainers, pipelines, interleaving, cp/ep, offload, recompute, and --no-sp
 * --no-overlap) is estimated with the flags its label implies, plus the search's own
 * --trainer/--gbs/--seq; step time and device peak must be the search's to 1e-12. An "uneven"
 * label adds the plan's --stage-layers and --stage-recompute (what a label does not carry). */
static int label_flags(const char *label, const ap_json *plan, char *out, size_t n) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", label);
    size_t k = 0;
    out[0] = '\0';
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) {
        double v, g;
        const char *f = NULL;
        char tmp[160] = "";
        if (sscanf(t, "tp%lf", &v) == 1) snprintf(tmp, sizeof tmp, "--tp %.0f", v);
        else if (sscanf(t, "pp%lf", &v) == 1) snprintf(tmp, sizeof tmp, "--pp %.0f", v);
        else if (sscanf(t, "dp%lf", &v) == 1) continue; /* the GPUs left */
        else if (sscanf(t, "cp%lf", &v) == 1)
            snprintf(tmp, sizeof tmp, "--cp %.0f%s", v, strstr(t, "a2a") ? " --cp-a2a" : "");
        else if (sscanf(t, "ep%lf", &v) == 1) snprintf(tmp, sizeof tmp, "--ep %.0f", v);
        else if (sscanf(t, "vp%lf", &v) == 1) snprintf(tmp, sizeof tmp, "--vp %.0f", v);
        else if (sscanf(t, "mbs%lf", &v) == 1) snprintf(tmp, sizeof tmp, "--mbs %.0f", v);
        else if (sscanf(t, "z%lfg%lf", &v, &g) == 2)
            snprintf(tmp, sizeof tmp, "--zero %.0f --zero-group %.0f", v, g);
        else if (sscanf(t, "z%lf", &v) == 1) snprintf(tmp, sizeof tmp, "--zero %.0f", v);
        else if (sscanf(t, "off-opt%lf", &v) == 1)
            snprintf(tmp, sizeof tmp, "--offload-optimizer %g", v / 100);
        else if (sscanf(t, "off-par%lf", &v) == 1)
            snprintf(tmp, sizeof tmp, "--offload-params %g", v / 100);
        else if (sscanf(t, "shard%lf", &v) == 1)
            snprintf(tmp, sizeof tmp, "--shard-param-frac %g", v / 100);
        else if (!strcmp(t, "gemini-auto")) f = "--gemini auto";
        else if (!strcmp(t, "gemini-static")) f = "--gemini static";
        else if (sscanf(t, "full%lf", &v) == 1)
            snprintf(tmp, sizeof tmp, "--recompute full --recompute-layers %.0f", v);
        else if (!strcmp(t, "full")) f = "--recompute full";
        else if (!strcmp(t, "sel")) f = "--recompute selective";
        else if (!strcmp(t, "sp")) f = "--sp";
        else if (!strcmp(t, "no-sp")) f = "--no-sp";
        else if (!strcmp(t, "no-ov")) f = "--no-overlap";
        else if (!strcmp(t, "uneven")) {
            /* the split and, when the plan has them, the per-chunk recompute counts */
            const char *keys[2] = {"stage_layers", "stage_recompute"};
            size_t m = 0;
            for (int q = 0; q < 2; q++) {
                const ap_json *sl = ap_json_get(plan, keys[q]);
                int custom = !q; /* recompute counts: only a list with a chunk's own count */
                for (int i = 0; q && i < ap_json_size(sl); i++)
                    custom |= ap_json_number(ap_json_at(sl, i)) > 0;
                if (!sl || !custom) continue;
                m += (size_t)snprintf(tmp + m, sizeof tmp - m, "%s--stage-%s ", m ? " " : "",
                                      q ? "recompute" : "layers");
                for (int i = 0; i < ap_json_size(sl) && m < sizeof tmp; i++)
                    m += (size_t)snprintf(tmp + m, sizeof tmp - m, "%s%.0f", i ? "," : "",
                                          ap_json_number(ap_json_at(sl, i)));
            }
        } else {
            fprintf(stderr, "  label token '%s' of '%s' has no flag\n", t, label);
            return 0;
        }
        k += (size_t)snprintf(out + k, n - k, " %s", f ? f : tmp);
    }
    return 1;
}

static void test_label_reproduces(void) {
    static const struct {
        const char *model, *flags;
    } cases[] = {
        {"examples/models/llama-2-7b.json", "--gpus 8"},
        {"examples/models/llama-3-70b.json", "--gpus 64"},
        {"examples/models/llama-3-70b.json", "--gpus 64 --no-sp --no-overlap"},
        {"examples/models/mixtral-8x7b.json", "--gpus 16 --trainer megatron"},
        {"examples/models/llama-3-8b.json", "--gpus 8 --trainer torchtitan --seq 16384"},
        {"examples/models/llama-2-7b.json", "--gpus 8 --trainer deepspeed"},
        {"examples/models/llama-2-7b.json", "--gpus 8 --trainer colossalai --no-overlap"},
        {"examples/models/llama-3-8b.json", "--gpus 16 --trainer fsdp"},
        /* context parallelism by all-to-all: pinned for Megatron-LM, DeepSpeed's own kind */
        {"examples/models/llama-3-8b.json", "--gpus 16 --seq 65536 --cp-a2a"},
        {"examples/models/llama-2-7b.json", "--gpus 16 --trainer deepspeed --seq 65536"},
        /* Gemini pinned in the search (it was ignored there) */
        {"examples/models/llama-2-7b.json", "--gpus 8 --trainer colossalai --gemini auto"},
        {"examples/models/llama-2-7b.json",
         "--gpus 8 --trainer colossalai --gemini static --shard-param-frac 0.5"},
    };
    int checked = 0, uneven = 0, nosp = 0, noov = 0, gemini = 0, a2a = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char args[1024], *out = NULL, *err = NULL;
        snprintf(args, sizeof args, "plan '%s' %s --no-cache --top 10 --json",
                 tl_path(cases[c].model), cases[c].flags);
        CHECK_INT(tl_run(args, &out, &err), 0);
        ap_err e;
        ap_json *j = out ? ap_json_parse(out, strlen(out), "plan --json", &e) : NULL;
        free(out);
        free(err);
        CHECK(j != NULL);
        if (!j) continue;
        const ap_json *plans = ap_json_get(j, "plans");
        CHECK(ap_json_size(plans) > 0);
        for (int i = 0; i < ap_json_size(plans); i++) {
            const ap_json *pe = ap_json_at(plans, i), *p = ap_json_get(pe, "plan");
            const char *label = ap_json_string(ap_json_get(pe, "label"));
            char fl[512];
            CHECK(label_flags(label, p, fl, sizeof fl));
            /* the flags a search shares with its plans: trainer, batch, sequence, GPUs */
            const char *gpus = strstr(cases[c].flags, "--gpus ");
            snprintf(args, sizeof args, "estimate '%s' --gpus %d --trainer %s --gbs %.0f --seq "
                     "%.0f%s --json", tl_path(cases[c].model), gpus ? atoi(gpus + 7) : 0,
                     ap_json_string(ap_json_get(p, "trainer")) ? ap_json_string(ap_json_get(p,
                     "trainer")) : ap_json_string(ap_json_get(j, "trainer")),
                     ap_json_number(ap_json_get(p, "gbs")), ap_json_number(ap_json_get(p, "seq")),
                     fl);
            char *o2 = NULL, *e2 = NULL;
            int rc = tl_run(args, &o2, &e2);
            CHECK_INT(rc, 0);
            ap_json *est = rc == 0 && o2 ? ap_json_parse(o2, strlen(o2), "estimate", &e) : NULL;
            CHECK(est != NULL);
            if (est) {
                double a = ap_json_number(ap_json_get(ap_json_get(pe, "time"), "step_s"));
                double b = ap_json_number(ap_json_get(ap_json_get(est, "time"), "step_s"));
                double ma = ap_json_number(ap_json_get(ap_json_get(pe, "memory"), "device_peak_bytes"));
                double mb = ap_json_number(ap_json_get(ap_json_get(est, "memory"), "device_peak_bytes"));
                if (fabs(a - b) > 1e-12 * a || fabs(ma - mb) > 1e-12 * ma)
                    fprintf(stderr, "  label '%s': search %.6f s %.0f B, `autoplan %s` %.6f s %.0f B\n",
                            label, a, ma, args, b, mb);
                CHECK_NEAR(b, a, 1e-12 * a);
                CHECK_NEAR(mb, ma, 1e-12 * ma);
                checked++;
                uneven += strstr(label, "uneven") != NULL;
                nosp += strstr(label, "no-sp") != NULL;
                noov += strstr(label, "no-ov") != NULL;
                a2a += strstr(label, "a2a") != NULL;
                gemini += strstr(label, "gemini-auto") != NULL ||
                          strstr(label, "gemini-static shard50%") != NULL;
            }
            ap_json_free(est);
            free(o2);
            free(e2);
        }
        ap_json_free(j);
    }
    CHECK(checked >= 40);
    CHECK(nosp > 0 && noov > 0); /* the non-default labels were exercised */
    CHECK(uneven > 0); /* and an uneven split with its --stage-layers */
    CHECK(gemini >= 20); /* every plan of the two Gemini searches has the pinned placement */
    CHECK(a2a >= 5);     /* and the all-to-all context parallelism of the two long sequences */
}

/* The README's first command: the main job on the bundled example. */
static void test_readme_main(void) {
    char *out = NULL, *err = NULL;
    char args[1024];
    snprintf(args, sizeof args, "'%s' --gpus 8 --no-cache", tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "Llama-2-7b");
    CHECK_CONTAINS(out, "plans enumerated");
    CHECK_CONTAINS(out, " 1  tp");
    CHECK_CONTAINS(err, "global batch");
    free(out);
    free(err);
    /* and the README's second command is the ctest line of .ci/run */
    char *readme = tl_read(tl_path("README.md"));
    char *ci = tl_read(tl_path(".ci/run"));
    CHECK(readme && ci);
    if (readme && ci) {
        CHECK_CONTAINS(readme, "ctest --test-dir build --output-on-failure");
        CHECK_CONTAINS(ci, "ctest --test-dir build --output-on-failure");
        CHECK_CONTAINS(readme, "autoplan examples/models/llama-2-7b.json --gpus 8");
        /* the first command works verbatim as root without sudo and as a user with sudo: its
           install part, with apt-get replaced by echo, runs under sh; as root it calls no sudo,
           as another user every apt-get goes through sudo */
        const char *start = strstr(readme, "```sh\n");
        const char *end = start ? strstr(start, " && cmake") : NULL;
        CHECK(start && end);
        if (start && end) {
            start += 6;
            char line[1024], cmd[2300], q[2100];
            snprintf(line, sizeof line, "%.*s", (int)(end - start), start);
            size_t k = 0;
            for (const char *s2 = line; *s2 && k + 8 < sizeof q; s2++) {
                if (!strncmp(s2, "apt-get", 7)) {
                    k += (size_t)snprintf(q + k, sizeof q - k, "echo apt-get");
                    s2 += 6;
                } else if (*s2 == '\'') {
                    k += (size_t)snprintf(q + k, sizeof q - k, "'\\''");
                } else {
                    q[k++] = *s2;
                }
            }
            q[k] = '\0';
            snprintf(cmd, sizeof cmd, "sh -c '%s' 2>&1", q);
            FILE *pf = popen(cmd, "r");
            char got[512] = "";
            size_t nr = pf ? fread(got, 1, sizeof got - 1, pf) : 0;
            got[nr] = '\0';
            int rc = pf ? pclose(pf) : -1;
            CHECK_INT(rc, 0);
            CHECK_CONTAINS(got, "apt-get update");
            CHECK_CONTAINS(got, "apt-get install -y build-essential cmake");
            if (geteuid() == 0) CHECK(strstr(got, "sudo") == NULL);
            CHECK(strncmp(line, "sudo ", 5) != 0);
        }
    }
    free(readme);
    free(ci);
}

/* issue 19 defaults: a pinned degree that does not divide the GPU count is an input error
 * naming the pin; --tokens-per-step has one meaning and the batch is rounded to a size that
 * divides well, printed. */
static void test_plan_defaults(void) {
    char *out = NULL, *err = NULL;
    char args[1024];
    snprintf(args, sizeof args, "'%s' --gpus 8 --tp 3 --no-cache",
             tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &err), 2);
    CHECK_CONTAINS(err, "--tp 3 does not divide --gpus 8");
    CHECK(strchr(err, '\n') == strrchr(err, '\n'));
    free(out);
    free(err);
    /* "4M" typed and the default are the same 4,000,000 tokens: 976.6 sequences of 4096 ->
     * 960 (a multiple of 64), never the prime 977 */
    for (int typed = 0; typed < 2; typed++) {
        snprintf(args, sizeof args, "'%s' --gpus 8 --no-cache --top 1%s",
                 tl_path("examples/models/llama-2-7b.json"), typed ? " --tokens-per-step 4M" : "");
        CHECK_INT(tl_run(args, &out, &err), 0);
        CHECK_CONTAINS(err, "global batch 960 sequences");
        CHECK_CONTAINS(err, "rounded to a multiple of 64");
        free(out);
        free(err);
    }
}

/* One validation row of source `src` with tensor-parallel degree tp on a model of 4 heads. */
/* Run a command that succeeds and prints JSON; its parsed output (the caller frees it). */
static ap_json *run_json(const char *cmd, const char *what) {
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run(cmd, &out, &err), 0);
    ap_err e;
    ap_json *j = out ? ap_json_parse(out, strlen(out), what, &e) : NULL;
    CHECK(j != NULL);
    free(out);
    free(err);
    return j;
}

static void vrow_text(char *buf, size_t n, const char *src, int tp) {
    snprintf(buf, n,
             "{\"source\": \"%s\", \"cite\": \"c\", \"model\": {\"name\": \"m\", "
             "\"layers\": 2, \"hidden\": 64, \"heads\": 4, \"vocab\": 100, "
             "\"seq_len\": 128}, \"plan\": {\"tp\": %d, \"pp\": 1, \"dp\": 1, \"cp\": 1, "
             "\"vp\": 1, \"mbs\": 1, \"gbs\": 8, \"recompute\": \"none\", \"sp\": false, "
             "\"zero\": 0, \"dtype\": \"bf16\", \"overlap\": true, \"flash_attn\": true}, "
             "\"gpu\": \"h100-sxm\", \"gpus\": %d, \"gpus_per_node\": 8, \"network_bw\": "
             "\"400Gb/s\", \"metric\": \"step_s\", \"measured\": 1, \"how\": \"h\"}",
             src, tp, tp);
}

/* An out-of-sample run that autoplan's rules refuse (tp 3 does not divide 4 heads) is listed
 * with the reason and kept out of the errors; the other rows are still predicted, and more
 * out-of-sample sources than the bundled file's 22 load (40 here, past a former limit of 32). */
static void test_validate_refused(void) {
    enum { NSRC = 40 };
    size_t cap = 1200 * (NSRC + 3);
    char *doc = malloc(cap), row[1200], path[1024], cmd[1200];
    CHECK(doc != NULL);
    if (!doc) return;
    vrow_text(row, sizeof row, "in", 1);
    size_t k = (size_t)snprintf(doc, cap, "{\"version\": 1, \"rows\": [%s], \"outofsample\": [",
                                row);
    for (int i = 0; i < NSRC; i++) {
        char src[32];
        snprintf(src, sizeof src, "oos-%02d", i);
        vrow_text(row, sizeof row, src, i == 7 ? 3 : 1);
        k += (size_t)snprintf(doc + k, cap - k, "%s%s", i ? ", " : "", row);
    }
    snprintf(doc + k, cap - k, "]}\n");
    snprintf(path, sizeof path, "%s/refused.json", tl_tmpdir());
    CHECK(tl_write(path, doc) == 0);
    free(doc);
    char *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "validate --data %s --profile none", path);
    CHECK_INT(tl_run(cmd, &out, &err), 0);
    CHECK_CONTAINS(out, "REFUSED: heads (4) are not divisible by tp 3");
    CHECK_CONTAINS(out, "runs autoplan refuses (REFUSED above, in no error): 1 of 40");
    CHECK_CONTAINS(out, "oos-39");
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "validate --data %s --json --profile none", path);
    ap_json *j = run_json(cmd, "validate --json");
    const ap_json *o = j ? ap_json_get(j, "out_of_sample") : NULL;
    CHECK(o != NULL);
    if (o) {
        CHECK_INT((int)ap_json_number(ap_json_get(o, "refused")), 1);
        CHECK_INT(ap_json_size(ap_json_get(o, "by_source")), NSRC);
        const ap_json *r7 = ap_json_at(ap_json_get(o, "rows"), 7);
        CHECK(r7 && ap_json_get(r7, "refused") && !ap_json_get(r7, "predicted"));
        const ap_json *r8 = ap_json_at(ap_json_get(o, "rows"), 8);
        CHECK(r8 && ap_json_number(ap_json_get(r8, "predicted")) > 0);
    }
    ap_json_free(j);
    /* in the scored rows the same run is an error: exit 2, named */
    char one[1400];
    vrow_text(row, sizeof row, "in", 3);
    snprintf(one, sizeof one, "{\"version\": 1, \"rows\": [%s]}\n", row);
    CHECK(tl_write(path, one) == 0);
    out = err = NULL;
    snprintf(cmd, sizeof cmd, "validate --data %s --profile none", path);
    CHECK_INT(tl_run(cmd, &out, &err), 2);
    CHECK_CONTAINS(err, "rows[0] (m, ");
    CHECK_CONTAINS(err, "heads (4) are not divisible by tp 3");
    free(out);
    free(err);
    /* the reference data's layout (a top-level array) is named, with the converter */
    CHECK(tl_write(path, "[{\"source\": \"s\"}]\n") == 0);
    out = err = NULL;
    CHECK_INT(tl_run(cmd, &out, &err), 2);
    CHECK_CONTAINS(err, "tools/make_validation.py converts it");
    free(out);
    free(err);
}

/* --breakdown SOURCE: the source's step-time rows with their predicted step in parts that add
 * up to it, in the text report and under "breakdown" in the JSON (every source with "all");
 * refused rows have none, and a source with no row to show is an input error. */
static void test_validate_breakdown(void) {
    char a1[1200], a2[1200], b1[1200], in[1200], r3[1200], path[1024], cmd[1400];
    vrow_text(in, sizeof in, "in", 1);
    vrow_text(a1, sizeof a1, "a", 1);
    vrow_text(a2, sizeof a2, "a", 2);
    vrow_text(b1, sizeof b1, "b", 1);
    vrow_text(r3, sizeof r3, "r", 3);
    char *doc = malloc(8000);
    CHECK(doc != NULL);
    if (!doc) return;
    snprintf(doc, 8000, "{\"version\": 1, \"rows\": [%s], \"outofsample\": [%s, %s, %s, %s]}\n",
             in, a1, a2, b1, r3);
    snprintf(path, sizeof path, "%s/breakdown.json", tl_tmpdir());
    CHECK(tl_write(path, doc) == 0);
    free(doc);
    char *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "validate --data %s --profile none --breakdown a", path);
    CHECK_INT(tl_run(cmd, &out, &err), 0);
    const char *sec = out ? strstr(out, "\nbreakdown of a: ") : NULL;
    CHECK(sec != NULL);
    if (sec) {
        int lines = 0;
        for (const char *q = sec + 1; (q = strchr(q, '\n')) != NULL; q++)
            if (!strncmp(q, "\n  a ", 5)) lines++;
        CHECK_INT(lines, 2); /* the two rows of source a, not b's or in's */
        CHECK(strstr(sec, "compute") && strstr(sec, "overhead"));
    }
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "validate --data %s --profile none --breakdown all --json", path);
    ap_json *j = run_json(cmd, "validate --json");
    const ap_json *bd = j ? ap_json_get(j, "breakdown") : NULL;
    CHECK_INT(bd ? ap_json_size(bd) : -1, 4); /* in, a, a, b: the refused row has none */
    for (int i = 0; bd && i < ap_json_size(bd); i++) {
        const ap_json *x = ap_json_at(bd, i), *parts = ap_json_get(x, "parts");
        double pred = ap_json_number(ap_json_get(x, "predicted")), sum = 0;
        CHECK(pred > 0);
        CHECK_INT(parts ? ap_json_size(parts) : 0, 11);
        for (const ap_json *m = parts ? ap_json_first(parts) : NULL; m; m = ap_json_next(m)) {
            double v = ap_json_number(m);
            CHECK(v >= 0);
            sum += v;
        }
        CHECK(fabs(sum - pred) <= 1e-9 * pred);
    }
    /* the same prediction as the row's own */
    const ap_json *row0 = j ? ap_json_at(ap_json_get(j, "rows"), 0) : NULL;
    if (bd && row0)
        CHECK(ap_json_number(ap_json_get(ap_json_at(bd, 0), "predicted")) ==
              ap_json_number(ap_json_get(row0, "predicted")));
    ap_json_free(j);
    const char *none[] = {"zz", "r"};
    for (int k = 0; k < 2; k++) {
        out = err = NULL;
        snprintf(cmd, sizeof cmd, "validate --data %s --profile none --breakdown %s", path,
                 none[k]);
        CHECK_INT(tl_run(cmd, &out, &err), 2);
        CHECK_CONTAINS(err, "no step-time row of that source");
        free(out);
        free(err);
    }
}


/* The memory MAPE (percent) validate's out-of-sample table prints for a source: its fourth
 * figure after the name (time MAPE, bias, max, memory MAPE); 100 when the row is missing. */
static double source_memory_mape(const char *table, const char *source) {
    const char *row = table ? strstr(table, source) : NULL;
    double tm = 100, tb = 100, tx = 100, mm = 100;
    if (!row || sscanf(row + strlen(source), "%lf%% %lf%% %lf%% %lf%%", &tm, &tb, &tx, &mm) != 4)
        return 100;
    return mm;
}
static void test_validate_targets(void) {
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run("validate --json --leave-one-source-out", &out, &err), 0);
    ap_err e;
    ap_json *j = out ? ap_json_parse(out, strlen(out), "validate --json", &e) : NULL;
    CHECK(j != NULL);
    if (!j) {
        free(out);
        free(err);
        return;
    }
    const ap_json *ov = ap_json_get(j, "overall");
    /* issue targets: time MAPE <= 5%, any row <= 15%, leave-one-source-out <= 10%, every
     * published run predicted to fit, Figure 1 activations within 3% */
    CHECK(ap_json_number(ap_json_get(ov, "time_mape")) <= 0.05);
    CHECK(ap_json_number(ap_json_get(ov, "rows")) >= 41);

    CHECK(ap_json_number(ap_json_get(ap_json_get(j, "leave_one_source_out"), "time_mape")) <= 0.10);
    const ap_json *rows = ap_json_get(j, "rows");
    for (int i = 0; i < ap_json_size(rows); i++) {
        const ap_json *r = ap_json_at(rows, i);
        const char *metric = ap_json_string(ap_json_get(r, "metric"));
        double e1 = ap_json_number(ap_json_get(r, "error"));
        if (!metric) continue;
        if (!strcmp(metric, "step_s") || !strcmp(metric, "layer_s")) CHECK(e1 <= 0.15);
        if (!strcmp(metric, "activations_bytes")) CHECK(e1 <= 0.03);
    }
    /* the exact key sets, in order */
    const char *okeys[] = {"time_mape", "time_max", "memory_mape", "memory_max", "rows", NULL};
    const char *bkeys[] = {"source", "time_mape", "time_max", "memory_mape", "rows", NULL};
    const char *rkeys[] = {"source", "model", "plan", "metric", "predicted", "measured", "error",
                           NULL};
    const char *tkeys[] = {"overall", "by_source", "rows", "leave_one_source_out",
                           "crosscheck", "out_of_sample", NULL};
    /* the cross-check: each GPU's calibration beside its rows; the built-in values (the
     * calibration's own test is the text's, below) */
    const ap_json *cx = ap_json_get(j, "crosscheck");
    const char *ckeys[] = {"overall", "calibration", "rows", NULL};
    const char *cckeys[] = {"gpu", "gemm_eff_max", "gemm_half_flops", NULL};
    const ap_json *ccal = ap_json_get(cx, "calibration");
    CHECK_INT(ap_json_size(ccal), 2);
    CHECK_STR(ap_json_string(ap_json_get(ap_json_at(ccal, 0), "gpu")), "h100-sxm");
    CHECK_STR(ap_json_string(ap_json_get(ap_json_at(ccal, 1), "gpu")), "b200");
    CHECK_NEAR(ap_json_number(ap_json_get(ap_json_at(ccal, 1), "gemm_eff_max")), 0.7344, 1e-9);
    CHECK(ap_json_number(ap_json_get(ap_json_get(cx, "overall"), "time_mape")) <= 0.10);
    CHECK_INT(ap_json_size(ap_json_get(cx, "rows")), 10);
    /* the out-of-sample part: what the text prints, as fractions */
    const ap_json *xs = ap_json_get(j, "out_of_sample");
    const char *xkeys[] = {"overall", "by_source", "rows", "recorded_oom", "ran", NULL};
    const char *xokeys[] = {"time_mape", "time_max", "memory_mape", "memory_max", "rows",
                            "time_bias", NULL};
    const char *xrkeys[] = {"source", "model", "plan", "metric", "predicted", "measured", "error",
                            "signed_error", NULL};
    const char *xakeys[] = {"rows", "predicted_not_to_fit", "within_headroom", NULL};
    const ap_json *objs[] = {ov, ap_json_at(ap_json_get(j, "by_source"), 0), ap_json_at(rows, 0),
                             j, xs, ap_json_get(xs, "overall"),
                             ap_json_at(ap_json_get(xs, "rows"), 0), ap_json_get(xs, "ran"),
                             ap_json_get(xs, "recorded_oom"), cx, ap_json_at(ccal, 0),
                             ap_json_get(cx, "overall"), ap_json_at(ap_json_get(cx, "rows"), 0)};
    const char **keys[] = {okeys, bkeys, rkeys, tkeys, xkeys, xokeys, xrkeys, xakeys, xakeys,
                           ckeys, cckeys, okeys, rkeys};
    CHECK(ap_json_number(ap_json_get(ap_json_get(xs, "overall"), "time_mape")) <= 0.10);
    CHECK(ap_json_number(ap_json_get(ap_json_get(xs, "recorded_oom"), "rows")) >= 6);
    CHECK(ap_json_number(ap_json_get(ap_json_get(xs, "ran"), "predicted_not_to_fit")) == 0);
    const ap_json *xr = ap_json_get(xs, "rows");
    int noom = 0;
    for (int i = 0; i < ap_json_size(xr); i++) {
        const ap_json *r = ap_json_at(xr, i);
        const char *metric = ap_json_string(ap_json_get(r, "metric"));
        if (metric && !strcmp(metric, "oom")) {
            noom++;
            CHECK(ap_json_get(r, "predicted_not_to_fit") != NULL);
        } else {
            double pr = ap_json_number(ap_json_get(r, "predicted"));
            double me = ap_json_number(ap_json_get(r, "measured"));
            CHECK_NEAR(ap_json_number(ap_json_get(r, "signed_error")), (pr - me) / me, 1e-12);
        }
    }
    CHECK_NEAR(noom, ap_json_number(ap_json_get(ap_json_get(xs, "recorded_oom"), "rows")), 0);
    for (int k = 0; k < 13; k++) {
        const ap_json *x = ap_json_first(objs[k]);
        int i = 0;
        for (; keys[k][i] && x; i++, x = ap_json_next(x)) CHECK_STR(ap_json_key(x), keys[k][i]);
        CHECK(keys[k][i] == NULL && x == NULL);
    }
    free(out);
    free(err);
    ap_json_free(j);
    /* every published run that ran is predicted to fit */
    CHECK_INT(tl_run("validate", &out, &err), 0);
    CHECK_CONTAINS(out, "every published run predicted to fit: yes");
    /* the H100 and B200 cross-checks (shown, not scored) stay within their stated figures:
     * MAPE under 10%, no row over 15% */
    const char *cc = out ? strstr(out, "cross-check time MAPE ") : NULL;
    CHECK(cc != NULL);
    if (cc) {
        double mape = 100, mx = 100;
        CHECK(sscanf(cc, "cross-check time MAPE %lf%%, max %lf%%", &mape, &mx) == 2);
        CHECK(mape <= 10.0);
        CHECK(mx <= 15.0);
    }
    /* each cross-check GPU's built-in GEMM efficiency (costmodel/calib.c) is what `validate
     * --fit` finds on that GPU's rows: Hopper 0.7217 on NeMo 24.09, Blackwell 0.7344 on
     * Megatron-Bridge's B200 runs */
    char *fout = NULL, *ferr = NULL;
    CHECK_INT(tl_run("validate --fit", &fout, &ferr), 0);
    const char *gpus[] = {"h100-sxm", "b200"};
    for (int g = 0; g < 2; g++) {
        char want[64];
        snprintf(want, sizeof want, "calibration of %s: as below, gemm_eff_max ", gpus[g]);
        const char *a = out ? strstr(out, want) : NULL, *b = fout ? strstr(fout, want) : NULL;
        double built = 0, fitted = 1;
        CHECK(a && b && sscanf(a + strlen(want), "%lf", &built) == 1 &&
              sscanf(b + strlen(want), "%lf", &fitted) == 1);
        CHECK_NEAR(built, fitted, 1e-4);
    }
    free(fout);
    free(ferr);
    /* the out-of-sample runs (other trainers, models, GPUs; never fitted) stay within their
     * stated figures (README "Validation"): the mean over sources, each source's MAPE, and
     * every recorded out-of-memory run predicted not to fit */
    const char *os = out ? strstr(out, "out-of-sample time MAPE ") : NULL;
    CHECK(os != NULL);
    if (os) {
        double mape = 100, mx = 100;
        CHECK(sscanf(os, "out-of-sample time MAPE %lf%%, max %lf%%", &mape, &mx) == 2);
        /* 6.90% over the twenty-seven sources, MT-NLG's DeepSpeed pipeline runs (-19%) the
         * largest part */
        CHECK(mape <= 10.0);
    }
    struct {
        const char *source;
        double max_mape;
    } oos[] = {{"llm-foundry-fsdp", 10}, {"flashattn-gpt-a100", 10}, {"nemo-automodel-h100", 15},
               {"megatron-h100-weak", 10}, {"megatron-h100-strong", 15}, {"torchtitan-h100", 10}, {"torchtitan-a100", 10},
               {"torchtitan-h200", 10},
               {"bigscience-bloom", 15}, {"mtnlg-530b-deepspeed", 25},
               {"nvidia-dgxc-h100", 10}, {"nvidia-dgxc-grok1", 10}, {"nemo-longseq-h100", 10},
               {"nemo-perf-h100", 10}, {"megatron-bridge-h100", 10}, {"internlm-a100", 13},
               {"mlperf-gpt3-h100", 15}, {"mlperf40-gpt3-h100", 15},
               {"mlperf30-gpt3-h100", 20}, {"mlperf41-gpt3-h100", 15},
               {"mlperf50-llama405b-h100", 10}, {"mlperf41-gpt3-b200", 10},
               {"megatron-core-moe-h100", 10}, {"nemo-megatron-a100", 10},
               {"flagperf-nvidia", 10}, {"nemo-longseq-b200", 10},
               {"megatron-bridge-blackwell", 10}};
    const char *table = out ? strstr(out, "out-of-sample source") : NULL;
    CHECK(table != NULL);
    for (size_t i = 0; table && i < sizeof oos / sizeof oos[0]; i++) {
        const char *line = strstr(table, oos[i].source);
        CHECK(line != NULL);
        double mape = 100;
        if (line) CHECK(sscanf(line + strlen(oos[i].source), "%lf%%", &mape) == 1);
        if (mape > oos[i].max_mape) fprintf(stderr, "%s: %.2f%%\n", oos[i].source, mape);
        CHECK(mape <= oos[i].max_mape);
    }
    /* BLOOM's 40 nvidia-smi readings within 5% (3.38%: the device bytes with the blocks the
     * caching allocator keeps, GMLake's 15%, the NCCL 2.10 communicators of DeepSpeed's
     * pipeline engine connected when made and BF16_Optimizer's fp32 copy of each gradient;
     * 8.37% with NCCL priced as 2.22 connects) */
    CHECK(source_memory_mape(table, "bigscience-bloom") <= 5.0);
    /* torchtitan's 18 logged max-reserved readings (max_reserved_bytes: nvidia-smi's predicted
     * reading less what lies outside the allocator) within 7% (5.14%) */
    CHECK(source_memory_mape(table, "torchtitan-h100") <= 7.0);
    const char *oom = out ? strstr(out, "recorded out-of-memory runs predicted not to fit: ") : NULL;
    CHECK(oom != NULL);
    if (oom) {
        int hit = -1, n = -2, tight = -1;
        CHECK(sscanf(oom, "recorded out-of-memory runs predicted not to fit: %d of %d (device "
                          "peak above the GPU's memory); %d more", &hit, &n, &tight) == 3);
        /* the target is every one; not met: of BLOOM's six recorded out-of-memory
         * topologies two are predicted within the GPU's memory (184B at TP 4 PP 6 with one
         * sequence per micro-batch, 78.4 of 80 GiB: a plan the search would not offer, past
         * the 2 GiB headroom; and 206B at TP 4 PP 12, which no smooth model separates from
         * the 203B that ran at 67 GB; README "Validation"), so this holds the four it
         * catches, FlagPerf's Llama 3 8B at DP 8 without pipelining, torchtitan's Llama 2 70B
         * at two sequences per GPU (both selective modes) and its 405B under FSDP alone, and the
         * one within the headroom */
        CHECK(n >= 10 && hit >= 8 && hit + tight >= 9);
    }
    /* runs that ran: none with a predicted device peak above the GPU's memory, at most ten
     * within the 2 GiB planning headroom (README "Validation": llm-foundry rows on A100-40GB
     * that fit with 1 GiB; NeMo's BF16 Llama 3.1 8B on 8 and 405B on 576 H100) */
    const char *ran = out ? strstr(out, "runs that ran predicted not to fit: ") : NULL;
    CHECK(ran != NULL);
    if (ran) {
        int nofit = -1, n = -2, tight = -1;
        CHECK(sscanf(ran, "runs that ran predicted not to fit: %d of %d (device peak above the "
                          "GPU's memory); %d more", &nofit, &n, &tight) == 3);
        CHECK(n >= 200 && nofit == 0 && tight >= 0 && tight <= 10);
    }
    free(out);
    free(err);
    /* an H100 bf16 run outside the fit (NeMo AutoModel, Llama-3-70B FSDP2, 18.90 s per step)
     * by the nearest command, torchtitan's path with cuDNN attention, within 20% (+16.6%; its
     * validation row, Transformer Engine's own ring, +14.1%, is held within 15% above: both
     * were +3-6% before the compute beside the hidden per-layer gathers and ring exchanges
     * paid for them, estimate_int.h overlap_cost_s, and +8.1% and +5.7% before FSDP2's
     * copies into and out of its collectives, 14 bytes a parameter a micro-batch, 1.56 s of
     * the step, estimate.c fsdp2_copy) */
    char args[1024];
    snprintf(args, sizeof args, "estimate '%s' --gpus 64 --gpu h100 --trainer torchtitan --cp 2 "
             "--zero 3 --mbs 1 --gbs 128 --seq 8192 --overlap --recompute full --attn-impl cudnn "
             "--json",
             tl_path("examples/models/llama-3-70b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    ap_err e2;
    ap_json *h = out ? ap_json_parse(out, strlen(out), "estimate", &e2) : NULL;
    CHECK(h != NULL);
    CHECK_NEAR(ap_json_number(ap_json_get(ap_json_get(h, "time"), "step_s")), 18.90, 0.20);
    ap_json_free(h);
    free(out);
    free(err);
}

/* `profile show`: the table in use and the source of every figure; the dispatcher refuses an
 * unknown subcommand with a hint. */
static void test_profile_show(void) {
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run("profile show a100", &out, &err), 0);
    CHECK_CONTAINS(out, "a100-sxm4-80g");
    CHECK_CONTAINS(out, "FlashAttention-2 (arXiv 2307.08691) Fig. 4");
    CHECK_CONTAINS(out, "Maximum Achievable Matmul FLOPS");
    CHECK_CONTAINS(out, "GTC24 S62129");
    CHECK_CONTAINS(out, "tuning.cc");
    free(out);
    free(err);
    CHECK_INT(tl_run("profile show h200", &out, &err), 0);
    CHECK_CONTAINS(out, "carried over from h100-sxm");
    CHECK_CONTAINS(out, "FlashAttention-3");
    free(out);
    free(err);
    CHECK_INT(tl_run("profile shwo a100", &out, &err), 2);
    CHECK_CONTAINS(err, "did you mean 'show'");
    free(out);
    free(err);
    CHECK_INT(tl_run("profile show a200", &out, &err), 2);
    CHECK_CONTAINS(err, "unknown GPU");
    free(out);
    free(err);
}

/* The case: a 16-stage pipeline over the nodes of a cluster prices its sends on the
 * network, so a slower network gives a slower step; the attention kernel is printed, and the
 * elementwise ops the trainer runs eagerly. */
static void test_pp_over_network(void) {
    char *out = NULL, *err = NULL;
    char args[1024];
    double step[2] = {0, 0};
    const char *bw[2] = {"200Gb/s", "1Gb/s"};
    char model[512];
    snprintf(model, sizeof model, "%s", tl_path("examples/models/llama-2-7b.json"));
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "estimate '%s' --cluster '%s' --pp 16 --vp 2 --gbs 1024 "
                 "--zero 1 --overlap --network-bw %s --json", model,
                 tl_path("examples/clusters/dgx-a100.json"), bw[i]);
        int rc = tl_run(args, &out, &err);
        CHECK_INT(rc, 0);
        if (rc != 0) fprintf(stderr, "stderr: %s\n", err ? err : "");
        ap_err e;
        ap_json *j = out ? ap_json_parse(out, strlen(out), "estimate", &e) : NULL;
        CHECK(j != NULL);
        step[i] = ap_json_number(ap_json_get(ap_json_get(j, "time"), "step_s"));
        CHECK_STR(ap_json_string(ap_json_get(ap_json_get(j, "plan"), "attn_impl")), "fa2");
        ap_json_free(j);
        free(out);
        free(err);
    }
    CHECK(step[1] > 1.5 * step[0]);
    /* the kernels line names the elementwise ops the trainer's code runs eagerly: a Hugging
     * Face Llama under DeepSpeed all three, Megatron-LM none, GPT-3 (LayerNorm, learned
     * positions, GeLU) under DeepSpeed none */
    snprintf(args, sizeof args, "estimate '%s' --gpus 8 --trainer deepspeed --zero 3", model);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "attention fa2, RMSNorm, rotary and gated activation as eager ops (");
    free(out);
    free(err);
    snprintf(args, sizeof args, "estimate '%s' --gpus 8", model);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK(out && !strstr(out, "eager ops"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "estimate '%s' --gpus 64 --tp 8 --pp 8 --trainer deepspeed",
             tl_path("examples/models/gpt3-175b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK(out && !strstr(out, "eager ops"));
    free(out);
    free(err);
}

/* Bad input through the shared flag parser: exit 2, one line naming the flag, nothing on
 * stdout. */
static void bad(const char *args, const char *needle) {
    char *out = NULL, *err = NULL;
    char full[2048];
    snprintf(full, sizeof full, args, tl_path("examples/models/llama-2-7b.json"));
    int rc = tl_run(full, &out, &err);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(err, needle);
    /* one line */
    if (err) {
        char *nl = strchr(err, '\n');
        CHECK(nl == NULL || nl[1] == '\0');
    }
    CHECK(out && !*out);
    free(out);
    free(err);
}

/* --nccl-version: a DeepSpeed TP 2 PP 2 plan on 8 GPUs holds seven communicators (tp, the
 * default group of 8 for its sends, dp, the grid's slice, pipe, model (4) and tied groups):
 * under NCCL 2.18 five of two ranks at 544 MB and two at 688 MB instead of 128 MiB each, in
 * the estimate's device peak and in the simulator's overhead alike. */
static double nccl_figure(const char *cmd, const char *flag, const char *key) {
    char args[1024];
    snprintf(args, sizeof args, "%s '%s' --gpus 8 --trainer deepspeed --tp 2 --pp 2 --json %s",
             cmd, tl_path("examples/models/llama-2-7b.json"), flag);
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run(args, &out, &err), 0);
    ap_err e;
    ap_json *j = out ? ap_json_parse(out, strlen(out), cmd, &e) : NULL;
    CHECK(j != NULL);
    const ap_json *v = ap_json_get(j, key);
    if (!v) v = ap_json_get(ap_json_get(j, "memory"), key);
    double x = v ? ap_json_number(v) : -1;
    ap_json_free(j);
    free(out);
    free(err);
    return x;
}

/* Context parallelism by all-to-all on the command line: Megatron-LM with --cp-a2a and
 * DeepSpeed's own --cp label the plan "a2a" and say so on the kernels line; the ring says its
 * blocks; --cp-a2a is refused, one line and exit 2, by a trainer without it (torchtitan), with
 * cp 1, and DeepSpeed's --cp beside tp. */
static void test_cp_a2a_cli(void) {
    const char *m = tl_path("examples/models/llama-3-8b.json");
    static const struct {
        const char *flags, *label, *kernels;
    } ok[] = {
        {"--tp 2 --cp 4 --cp-a2a", "cp4a2a", "context parallelism by all-to-all"},
        {"--trainer deepspeed --cp 8", "cp8a2a", "context parallelism by all-to-all"},
        {"--tp 2 --cp 4", " cp4 ", "context parallelism as a ring of 4 blocks"},
    };
    char cmd[1024], *out = NULL, *err = NULL;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(cmd, sizeof cmd, "estimate '%s' --gpus 8 --seq 32768 --gbs 8 --profile none %s",
                 m, ok[i].flags);
        CHECK_INT(tl_run(cmd, &out, &err), 0);
        CHECK_CONTAINS(out, ok[i].label);
        CHECK_CONTAINS(out, ok[i].kernels);
        free(out);
        free(err);
    }
#define CP_A2A_BAD "estimate '%s' --gpus 8 --seq 32768 --gbs 8 --profile none "
    bad(CP_A2A_BAD "--trainer torchtitan --cp 4 --zero 3 --cp-a2a",
        "no all-to-all context parallelism");
    bad(CP_A2A_BAD "--cp-a2a", "needs cp > 1");
    bad(CP_A2A_BAD "--trainer deepspeed --tp 2 --cp 4", "without tensor, pipeline or expert");
#undef CP_A2A_BAD
}

/* --dp without --gpus: the GPUs are dp x tp x pp x cp, the same estimate as --gpus gives */
static void test_estimate_dp(void) {
    char a[1024], b[1024];
    const char *m = tl_path("examples/models/llama-2-7b.json");
    snprintf(a, sizeof a, "estimate '%s' --tp 2 --pp 2 --dp 4 --json --profile none", m);
    snprintf(b, sizeof b, "estimate '%s' --tp 2 --pp 2 --gpus 16 --json --profile none", m);
    char *oa = NULL, *ea = NULL, *ob = NULL, *eb = NULL;
    CHECK_INT(tl_run(a, &oa, &ea), 0);
    CHECK_INT(tl_run(b, &ob, &eb), 0);
    CHECK(oa && ob && strcmp(oa, ob) == 0);
    free(oa);
    free(ea);
    free(ob);
    free(eb);
}

static void test_nccl_version(void) {
    const double d = 5 * 544e6 + 2 * 688e6 - 7 * 128.0 * 1024 * 1024;
    CHECK_NEAR(nccl_figure("estimate", "--nccl-version 2.18", "device_peak_bytes") -
                   nccl_figure("estimate", "", "device_peak_bytes"), d, 1e-3);
    CHECK_NEAR(nccl_figure("simulate", "--nccl-version 2.18.3", "device_overhead_bytes") -
                   nccl_figure("simulate", "", "device_overhead_bytes"), d, 1e-3);
    CHECK_NEAR(nccl_figure("estimate", "--nccl-version 2.22", "device_peak_bytes"),
               nccl_figure("estimate", "", "device_peak_bytes"), 0);
    /* estimate names what lies outside the allocator: 4.096 GB of NCCL buffers */
    char args[1024];
    snprintf(args, sizeof args, "estimate '%s' --gpus 8 --trainer deepspeed --tp 2 --pp 2 "
             "--nccl-version 2.18", tl_path("examples/models/llama-2-7b.json"));
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "outside   4.37 GiB on each GPU beside the allocator: CUDA context and "
                        "cuBLAS workspaces 564.0 MiB, NCCL buffers 3.81 GiB (7 communicators)");
    free(out);
    free(err);
}

/* `validate --data` on one row whose plan adds `plan` (zero and dtype among them) and whose
 * row adds `row` (each field followed by ", "): exit 2, the message holding `want`. */
static void bad_row(const char *plan, const char *row, const char *want) {
    char path[1024], cmd[1200], doc[1600];
    snprintf(path, sizeof path, "%s/row.json", tl_tmpdir());
    snprintf(doc, sizeof doc,
             "{\"version\": 1, \"rows\": [{\"source\": \"s\", \"cite\": \"c\", "
             "\"model\": {\"name\": \"m\", \"layers\": 2, \"hidden\": 64, \"heads\": 4, "
             "\"vocab\": 100, \"seq_len\": 128}, \"plan\": {\"tp\": 1, \"pp\": 1, "
             "\"dp\": 8, \"cp\": 1, \"vp\": 1, \"mbs\": 1, \"gbs\": 8, \"recompute\": "
             "\"none\", \"sp\": false, %s, \"overlap\": true, \"flash_attn\": true}, "
             "\"gpu\": \"h100-sxm\", \"gpus\": 8, \"gpus_per_node\": 8, \"network_bw\": "
             "\"400Gb/s\", %s\"metric\": \"step_s\", \"measured\": 1, \"how\": \"h\"}]}\n",
             plan, row);
    CHECK(tl_write(path, doc) == 0);
    snprintf(cmd, sizeof cmd, "validate --data %s", path);
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run(cmd, &out, &err), 2);
    CHECK_CONTAINS(err, want);
    free(out);
    free(err);
}

static void test_bad_input(void) {
    bad("estimate '%s' --gpus 8 --nccl-version latest", "--nccl-version: 'latest' is not an NCCL");
    bad("plan '%s' --gpus 8 --nccl-version 2", "--nccl-version");
    bad("run '%s' --gpus 2 --nccl-version 2.18", "--nccl-version: the runtime's ranks");
    bad("estimate '%s' --gpus 0", "--gpus");
    /* --dp: the degree a run reports, checked against the GPUs or giving them */
    bad("estimate '%s' --gpus 16 --tp 2 --dp 4",
        "--dp 4: 16 GPUs / (tp 2 x pp 1 x cp 1) give dp 8");
    bad("estimate '%s' --dp 0", "--dp: 0 is out of range");
    bad("estimate '%s' --tp 8 --pp 8 --dp 32768", "is more than 1048576 GPUs");
    bad("estimate '%s' --gpus eight", "--gpus");
    bad("estimate '%s' --gpus 8 --network-bw 400", "has no unit");
    bad("estimate '%s' --gpus 8 --network-bw 400Gbit", "--network-bw");
    bad("estimate '%s' --gpus 8 --cpu-mem 512", "has no unit");
    bad("estimate '%s' --gpus 8 --headroom -1GiB", "--headroom");
    bad("estimate '%s' --gpus 8 --tpp 2", "did you mean --tp");
    bad("estimate '%s' --gpus 8 --tp 2 --tp 4", "given twice");
    bad("estimate '%s' --gpus 8 --trainer jax", "--trainer: 'jax' is not one of megatron");
    bad("estimate '%s' --gpus 8 --gpu a200", "unknown GPU");
    bad("estimate '%s' --gpus 8 --dtype fp8", "fp8");
    bad("estimate '%s' --gpus 8 --dtype int4", "--dtype");
    /* FP8 weights: an FP8 run, a trainer that keeps them, the stages where it does */
    bad("estimate '%s' --gpus 8 --gpu h100-sxm --fp8-params", "--fp8-params needs --dtype fp8");
    bad("plan '%s' --gpus 8 --gpu h100-sxm --fp8-params", "--fp8-params needs --dtype fp8");
    bad("plan '%s' --gpus 8 --gpu h100-sxm --dtype fp8 --fp8-params --trainer fsdp",
        "--fp8-params: PyTorch FSDP does not keep its weights in FP8");
    bad("estimate '%s' --gpus 8 --gpu h100-sxm --dtype fp8 --fp8-params --zero 0",
        "only with ZeRO stage 1 or 3");
    /* the FP8 scaling recipe: of an FP8 run, one the trainer runs */
    bad("estimate '%s' --gpus 8 --gpu h100-sxm --fp8-recipe tensorwise",
        "--fp8-recipe needs --dtype fp8");
    bad("estimate '%s' --gpus 8 --gpu h100-sxm --dtype fp8 --fp8-recipe current",
        "--fp8-recipe: 'current' is not one of auto, delayed, tensorwise, mxfp8");
    /* MXFP8 block scaling: Blackwell's, and Megatron-LM's among the trainers */
    bad("estimate '%s' --gpus 8 --gpu h100-sxm --dtype fp8 --fp8-recipe mxfp8",
        "fp8_recipe mxfp8 needs Blackwell tensor cores (compute capability 10.0: b200, gb200), "
        "not h100-sxm's");
    bad("plan '%s' --gpus 8 --gpu b200 --dtype fp8 --fp8-recipe mxfp8 --trainer fsdp",
        "mxfp8");
    bad("plan '%s' --gpus 8 --gpu h100-sxm --dtype fp8 --fp8-recipe delayed --trainer torchtitan",
        "--fp8-recipe delayed: torchtitan scales FP8 tensorwise only");
    bad("compare '%s' --gpus 8 --gpu h100-sxm --fp8-recipe delayed --out /nonexistent/ap",
        "--fp8-recipe needs --dtype fp8");
    bad("estimate '%s' --gpus 8 --attn-impl fa4", "--attn-impl");
    bad("estimate '%s' --gpus 8 --attn-impl fa3", "does not run on a100");
    bad("estimate '%s' --gpus 8 --attn-impl fa2 --no-flash-attn", "contradicts --no-flash-attn");
    bad("estimate '%s' --gpus 8 --gpu v100-sxm2-32g --attn-impl triton", "runs attention unfused");
    bad("estimate '%s' --gpus 8 --offload-optimizer 1.5", "--offload-optimizer");
    bad("estimate '%s' --gpus 8 --recompute some", "--recompute");
    bad("estimate '%s' --gpus 8 --tp 3", "not divisible");
    bad("estimate '%s' --gpus 8 --gbs 6 --mbs 4", "--gbs");
    bad("estimate '%s' --gpus 16 --tp 16", "NVLink");
    bad("estimate '%s' --gpus 16 --trainer deepspeed --pp 2 --zero 3", "pipeline");
    bad("estimate '%s' --gpus 8 --mbs", "needs a value");
    bad("estimate '%s' --tp --gpus 8", "--tp needs a value (N) before --gpus");
    bad("estimate '%s' --gpus 8 --nvme-bw 1GB/s --nvme-read-bw 5GB/s", "not both");
    /* plan refuses the pins estimate refuses, up front (not "nothing fits", exit 0) */
    bad("plan '%s' --gpus 8 --attn-impl fa3 --no-cache", "does not run on a100");
    bad("plan '%s' --gpus 8 --dtype fp32 --no-cache", "not fp32");
    bad("plan '%s' --gpus 8 --fix ep=2 --no-cache", "dense model");
    bad("fit --gpu cpu", "do not run on the cpu device");
    /* --gpus lists: no empty count, no count twice */
    bad("plan '%s' --gpus 8, --no-cache", "is not a count");
    bad("plan '%s' --gpus 8,8 --no-cache", "listed twice");
    /* validate's --profile names a stored profile, as estimate's does (%s unused) */
    bad("validate --profile nope", "--profile nope");
    bad("validate --profile 'bad name!'", "a profile name may hold");
    bad("estimate '%s' --gpus 8 --sp=1", "takes no value");
    bad("estimate '%s' --gpus 8 --stage-layers 16,x", "--stage-layers");
    bad("estimate '%s' --gpus 8 --pp 2 --stage-layers 10,10", "sum to");
    bad("estimate '%s' --gpus 8 --recompute-layers 2", "needs --recompute full");
    /* ZeRO within groups: at least two ranks that divide dp x cp, a trainer and stage that
       group (the search is refused up front, not answered with nothing legal) */
    bad("estimate '%s' --gpus 64 --trainer fsdp --zero 3 --zero-group 1", "at least 2 ranks");
    bad("estimate '%s' --gpus 64 --trainer fsdp --zero 3 --zero-group 3", "must divide dp x cp");
    bad("estimate '%s' --gpus 64 --trainer fsdp --zero 3 --zero-group x", "--zero-group");
    bad("plan '%s' --gpus 64 --trainer colossalai --zero-group 8",
        "Colossal-AI does not shard within groups");
    bad("plan '%s' --gpus 64 --trainer megatron --zero 3 --zero-group 8",
        "Megatron-LM groups ZeRO stage 1, not 3");
    bad("estimate '%s' --gpus 64 --trainer deepspeed --zero 1 --zero-group 8",
        "DeepSpeed groups ZeRO stage 3, not 1");
    bad("estimate '%s' --gpus 64 --trainer deepspeed --zero 3 --zero-group 8 --offload-optimizer 1 "
        "--offload-params 1", "priced without offload devices");
    bad("estimate /nonexistent/model.json --gpus 8 --cluster %s", "/nonexistent/model.json");
    bad("plan '%s' --gpus 8 --tokens-per-step 4M --gbs 64", "not both");
    bad("plan '%s' --gpus 8..4", "empty");
    /* a search keeps the placement pins (it once ignored them) and their rules */
    bad("plan '%s' --gpus 8 --gemini auto", "Gemini placement is Colossal-AI's");
    bad("plan '%s' --gpus 8 --trainer colossalai --gemini static --zero 1",
        "--gemini static runs ZeRO stage 3; --zero 1 contradicts it");
    bad("plan '%s' --gpus 8 --trainer deepspeed --offload-optimizer 1 --offload-device nvme",
        "NVMe offload needs the cluster's NVMe");
    bad("plan '%s' --gpus 8 --fix tp=2,qq=3", "unknown key");
    bad("plan '%s' --gpus 8 --deadline 30d", "--deadline needs --tokens");
    bad("plan '%s' --gpus 8 --tokens 2T --deadline 30", "has no unit");
    bad("plan '%s' --gpus 8 --emit megatron", "--emit needs --out");
    bad("plan '%s' --gpus 8 --top 0", "--top");
    bad("estimat --gpus 8 --cluster %s", "neither a command nor a model file");
    bad("--gpus 8 %s", "unknown flag");
    /* validation rows (costmodel/validation.c): FP8 weights need an FP8 run, a fused norm an
     * eager block, an FSDP version PyTorch FSDP, a 2-byte master remainder bf16 weights, a row's NCCL a version */
    bad_row("\"zero\": 1, \"dtype\": \"bf16\", \"fp8_params\": true", "",
            "rows[0].plan: field 'fp8_params' needs dtype fp8");
    bad_row("\"zero\": 1, \"dtype\": \"fp16\", \"param_remainders\": true", "",
            "rows[0].plan: field 'param_remainders' needs bf16 weights");
    bad_row("\"zero\": 1, \"dtype\": \"bf16\", \"fused_norm\": true", "",
            "rows[0].plan: field 'fused_norm' needs 'compile': false");
    bad_row("\"zero\": 1, \"dtype\": \"bf16\", \"compile\": true, \"fused_norm\": true", "",
            "rows[0].plan: field 'fused_norm' needs 'compile': false");
    bad_row("\"zero\": 3, \"dtype\": \"bf16\", \"trainer\": \"torchtitan\", \"fsdp_version\": 1",
            "", "rows[0].plan: field 'fsdp_version' needs trainer \"fsdp\"");
    bad_row("\"zero\": 3, \"dtype\": \"bf16\", \"trainer\": \"fsdp\", \"fsdp_version\": 3", "",
            "rows[0].plan: field 'fsdp_version'");
    bad_row("\"zero\": 1, \"dtype\": \"bf16\"", "\"nccl\": \"2.x\", ",
            "rows[0]: field 'nccl': '2.x' is not an NCCL version");
    /* ZeRO within groups: a group that divides dp x cp, at ZeRO 1 or 2; bucket and recompute
     * fields in range */
    const char *bad[][2] = {
        {"\"zero\": 1, \"zero_group\": 3", "field 'zero_group' = 3 must divide dp x cp = 8"},
        {"\"zero\": 0, \"zero_group\": 4", "field 'zero_group' needs zero 1, 2 or 3"},
        {"\"zero\": 1, \"dp_bucket\": 0", "dp_bucket"},
        /* a partial recomputation's layer count: of a full recomputation, at least one */
        {"\"zero\": 1, \"recompute_layers\": 1", "field 'recompute_layers' needs recompute"},
        {"\"zero\": 1, \"recompute_layers\": 0", "recompute_layers"},
        /* an FP8 scaling recipe: of an FP8 run, one of the two the cost model tells apart */
        {"\"zero\": 1, \"fp8_recipe\": \"tensorwise\"", "field 'fp8_recipe' needs dtype fp8"},
        {"\"zero\": 1, \"fp8_recipe\": 3", "fp8_recipe"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char plan[256];
        snprintf(plan, sizeof plan, "%s, \"dtype\": \"bf16\"", bad[i][0]);
        bad_row(plan, "", "rows[0].plan: ");
        bad_row(plan, "", bad[i][1]);
    }
}

/* `autoplan CMD llama-2-7b --gpus 8 --gpu h100-sxm --dtype fp8 --zero 1 --mbs 1 --gbs 64 --json`,
 * with --fp8-params when f, parsed (NULL when it fails). */
static ap_json *fp8_run(const char *cmdname, int f) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s '%s' --gpus 8 --gpu h100-sxm --dtype fp8 --zero 1 --mbs 1 "
             "--gbs 64 --json%s", cmdname, tl_path("examples/models/llama-2-7b.json"),
             f ? " --fp8-params" : "");
    return run_json(cmd, cmdname);
}

/* --fp8-params (Megatron-LM --fp8-param-gather): the weights take one byte per parameter
 * instead of two and Transformer Engine's FP8 copy beside them (one byte, in "other") is gone;
 * the search keeps the pin and the Megatron script carries the flag. Llama-2-7B: 6,738,415,616
 * parameters, ZeRO-1 on 8 GPUs keeps every weight on every GPU. */
/* --fp8-recipe tensorwise (Megatron-LM's current scaling): every plan the search ranks carries
 * it, the script and plan.json say it, and it costs the amax pass of every fp8 GEMM input but
 * not the delayed recipe's amax all-reduces; a cached answer for one recipe is never the
 * other's. */
static void test_fp8_recipe(void) {
    char cmd[4400];
    const char *model = tl_path("examples/models/llama-2-7b.json");
    double step[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        snprintf(cmd, sizeof cmd, "estimate '%s' --gpus 8 --gpu h100-sxm --dtype fp8 --tp 2 "
                 "--mbs 1 --gbs 64 --json%s", model, r ? " --fp8-recipe tensorwise" : "");
        ap_json *j = run_json(cmd, "estimate");
        const ap_json *pl = ap_json_get(j, "plan");
        CHECK_STR(ap_json_string(ap_json_get(pl, "fp8_recipe")), r ? "tensorwise" : "delayed");
        step[r] = ap_json_number(ap_json_get(ap_json_get(j, "time"), "step_s"));
        ap_json_free(j);
    }
    CHECK(step[1] != step[0]);
    char dir[1024], db[1100];
    snprintf(dir, sizeof dir, "%s/fp8r", tl_tmpdir());
    snprintf(db, sizeof db, "%s/fp8r.db", tl_tmpdir());
    for (int r = 1; r >= 0; r--) {
        snprintf(cmd, sizeof cmd, "plan '%s' --gpus 16 --gpu h100-sxm --dtype fp8 --db '%s' "
                 "--json --out '%s' --emit megatron%s", model, db, dir,
                 r ? " --fp8-recipe tensorwise" : "");
        ap_json *j = run_json(cmd, "plan --json");
        const ap_json *plans = ap_json_get(j, "plans");
        CHECK(ap_json_size(plans) > 0);
        for (int i = 0; i < ap_json_size(plans); i++)
            CHECK_STR(ap_json_string(ap_json_get(ap_json_get(ap_json_at(plans, i), "plan"),
                                                 "fp8_recipe")),
                      r ? "tensorwise" : "delayed");
        ap_json_free(j);
        char path[1200];
        snprintf(path, sizeof path, "%s/megatron.sh", dir);
        char *sh = tl_read(path);
        CHECK_CONTAINS(sh, r ? "--fp8-recipe tensorwise" : "--fp8-recipe delayed");
        free(sh);
        snprintf(path, sizeof path, "%s/plan.json", dir);
        char *pj = tl_read(path);
        CHECK_CONTAINS(pj, r ? "\"fp8_recipe\": \"tensorwise\"" : "\"fp8_recipe\": \"delayed\"");
        free(pj);
    }
}

static void test_fp8_params(void) {
    char *out = NULL, *err = NULL, cmd[1400];
    double params[2] = {0, 0}, other[2] = {0, 0}, sim[2] = {0, 0};
    for (int f = 0; f < 2; f++) {
        ap_json *j = fp8_run("estimate", f);
        const ap_json *mem = ap_json_get(j, "memory");
        params[f] = ap_json_number(ap_json_get(mem, "params_bytes"));
        other[f] = ap_json_number(ap_json_get(mem, "other_bytes"));
        const ap_json *f8 = ap_json_get(ap_json_get(j, "plan"), "fp8_params");
        CHECK(f ? f8 && ap_json_bool(f8) : f8 == NULL);
        ap_json_free(j);
        /* the simulator's live weights: 16-bit plus Transformer Engine's FP8 copy of the
         * linear weights, or the FP8 weights alone */
        j = fp8_run("simulate", f);
        const ap_json *st0 = ap_json_at(ap_json_get(j, "stages"), 0);
        sim[f] = ap_json_number(ap_json_get(ap_json_get(st0, "breakdown"), "params"));
        ap_json_free(j);
    }
    CHECK_NEAR(params[0], 2.0 * 6738415616.0, 1.0);
    CHECK_NEAR(params[1], 6738415616.0, 1.0);
    CHECK(other[1] < other[0]);
    CHECK_NEAR(sim[1], 6738415616.0, 1.0);
    CHECK(sim[0] > 2.0 * 6738415616.0 && sim[0] < 3.0 * 6738415616.0);
    /* the search keeps the pin in every plan it ranks and the script says so */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fp8w", tl_tmpdir());
    snprintf(cmd, sizeof cmd, "plan '%s' --gpus 16 --gpu h100-sxm --dtype fp8 --fp8-params "
             "--no-cache --json --out '%s' --emit megatron",
             tl_path("examples/models/llama-2-7b.json"), dir);
    CHECK_INT(tl_run(cmd, &out, &err), 0);
    ap_err e;
    ap_json *j = out ? ap_json_parse(out, strlen(out), "plan --json", &e) : NULL;
    const ap_json *plans = ap_json_get(j, "plans");
    CHECK(ap_json_size(plans) > 0);
    for (int i = 0; i < ap_json_size(plans); i++) {
        const ap_json *pl = ap_json_get(ap_json_at(plans, i), "plan");
        CHECK(ap_json_bool(ap_json_get(pl, "fp8_params")));
        CHECK(ap_json_number(ap_json_get(pl, "zero")) != 0);
    }
    ap_json_free(j);
    free(out);
    free(err);
    char path[1200];
    snprintf(path, sizeof path, "%s/megatron.sh", dir);
    char *sh = tl_read(path);
    CHECK_CONTAINS(sh, "--fp8-param-gather");
    free(sh);
    snprintf(path, sizeof path, "%s/plan.json", dir);
    char *pj = tl_read(path);
    CHECK_CONTAINS(pj, "\"fp8_params\": true");
    free(pj);
}

/* --expandable-segments: the estimate's fragmentation is that of expandable segments (3% of
 * what is allocated and freed, 8% without, estimate.c stage_frag), nvidia-smi's reading is the
 * reserved bytes (no cached blocks, ap_mem_smi_bytes) and the text prints no separate reading;
 * without it the reading is the allocated peak over 1 - 0.15 plus the overhead; the runtime,
 * which has no PyTorch allocator, refuses the flag with exit 2. */
static void test_expandable_segments(void) {
    double dev[2] = {0, 0}, smi[2] = {0, 0}, alloc[2] = {0, 0}, res[2] = {0, 0};
    char cmd[1400], *out = NULL, *err = NULL;
    for (int x = 0; x < 2; x++) {
        snprintf(cmd, sizeof cmd, "estimate '%s' --gpus 8 --tp 2 --json%s",
                 tl_path("examples/models/llama-2-7b.json"), x ? " --expandable-segments" : "");
        ap_json *j = run_json(cmd, "estimate --json");
        const ap_json *mem = ap_json_get(j, "memory");
        dev[x] = ap_json_number(ap_json_get(mem, "device_peak_bytes"));
        smi[x] = ap_json_number(ap_json_get(mem, "smi_peak_bytes"));
        alloc[x] = ap_json_number(ap_json_get(mem, "allocated_peak_bytes"));
        res[x] = ap_json_number(ap_json_get(mem, "reserved_peak_bytes"));
        ap_json_free(j);
    }
    CHECK_NEAR(alloc[1], alloc[0], 0);
    CHECK(dev[1] < dev[0] && res[1] < res[0]);
    CHECK_NEAR(smi[1], dev[1], 0);
    CHECK_NEAR(smi[0], alloc[0] / 0.85 + (dev[0] - res[0]), 1e-9);
    snprintf(cmd, sizeof cmd, "estimate '%s' --gpus 8 --tp 2 --expandable-segments",
             tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(cmd, &out, &err), 0);
    CHECK(out && !strstr(out, "nvidia-smi"));
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "estimate '%s' --gpus 8 --tp 2",
             tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(cmd, &out, &err), 0);
    CHECK_CONTAINS(out, "nvidia-smi about ");
    free(out);
    free(err);
    /* compare carries it into the commands its report gives for each plan */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/cmp-expandable", tl_tmpdir());
    snprintf(cmd, sizeof cmd, "compare '%s' --gpus 8 --out '%s' --expandable-segments",
             tl_path("examples/models/llama-2-7b.json"), dir);
    CHECK_INT(tl_run(cmd, &out, &err), 0);
    free(out);
    free(err);
    char path[1200];
    snprintf(path, sizeof path, "%s/report.md", dir);
    char *md = tl_read(path);
    CHECK_CONTAINS(md, "--expandable-segments");
    free(md);
    /* fit: the largest model grows or stays (less fragmentation in what fits) */
    double params[2] = {0, 0};
    for (int x = 0; x < 2; x++) {
        snprintf(cmd, sizeof cmd, "fit --gpu a100-sxm4-80g --gpus 8 --family llama "
                 "--strategies zero-3 --json%s", x ? " --expandable-segments" : "");
        ap_json *j = run_json(cmd, "fit --json");
        const ap_json *r0 = ap_json_at(ap_json_get(j, "strategies"), 0);
        params[x] = ap_json_number(ap_json_get(r0, "largest_params"));
        ap_json_free(j);
    }
    CHECK(params[0] > 0 && params[1] >= params[0]);
    bad("run '%s' --gpus 2 --expandable-segments",
        "--expandable-segments: the runtime allocates its own buffers");
}

/* text with the first `from` replaced by `to` (malloc'd; NULL when absent) */
static char *replaced(const char *text, const char *from, const char *to) {
    const char *at = text ? strstr(text, from) : NULL;
    if (!at) return NULL;
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *r = malloc(n);
    if (r) snprintf(r, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    return r;
}

/* A plan.json written by another version whose model fingerprint differs reads with a
 * warning; when the file also fails to read, the error is the one line on stderr (the warning
 * waits until the whole file has read). */
static void test_planfile_warning_order(void) {
    char dir[1024], path[1200], cmd[2600], *out = NULL, *err = NULL;
    snprintf(dir, sizeof dir, "%s/fpwarn", tl_tmpdir());
    snprintf(cmd, sizeof cmd, "plan '%s' --gpus 8 --no-cache --out '%s'",
             tl_path("examples/models/llama-2-7b.json"), dir);
    CHECK_INT(tl_run(cmd, &out, &err), 0);
    free(out);
    free(err);
    snprintf(path, sizeof path, "%s/plan.json", dir);
    char *pj = tl_read(path);
    char *old = replaced(pj, "\"autoplan_version\": \"", "\"autoplan_version\": \"0.0.9-");
    char *fp = replaced(old, "\"fingerprint\": \"", "\"fingerprint\": \"0");
    char *broken = replaced(fp, "\"cpu_cores\"", "\"cpu_cores_x\"");
    CHECK(broken != NULL);
    snprintf(path, sizeof path, "%s/other.json", dir);
    CHECK(fp && tl_write(path, fp) == 0);
    snprintf(cmd, sizeof cmd, "simulate --plan '%s'", path);
    CHECK_INT(tl_run(cmd, &out, &err), 0);
    CHECK_CONTAINS(err, "fingerprint");
    free(out);
    free(err);
    snprintf(path, sizeof path, "%s/broken.json", dir);
    CHECK(broken && tl_write(path, broken) == 0);
    snprintf(cmd, sizeof cmd, "simulate --plan '%s'", path);
    CHECK_INT(tl_run(cmd, &out, &err), 2);
    CHECK_CONTAINS(err, "missing field 'cpu_cores'");
    CHECK(err && !strstr(err, "fingerprint") && strchr(err, '\n') == strrchr(err, '\n'));
    free(out);
    free(err);
    free(pj);
    free(old);
    free(fp);
    free(broken);
}

/* Output paths and the hostfile are checked before the work: a --trace or --save whose
 * directory does not exist, or a hostfile that is not a regular, readable file naming a host,
 * is bad input (exit 2, one line naming the flag and the path) before anything is simulated or
 * trained, and nothing is made. */
static void test_paths_checked_first(void) {
    char dir[1024], missing[1200], hosts[1200], sim[1200], run[1200], args[4096];
    snprintf(dir, sizeof dir, "%s", tl_tmpdir());
    snprintf(missing, sizeof missing, "%s/nx", dir);
    snprintf(hosts, sizeof hosts, "%s/hosts", dir);
    CHECK(tl_write(hosts, "# no hosts yet\n\n") == 0);
    snprintf(sim, sizeof sim, "simulate '%s' --gpus 8",
             tl_path("examples/models/llama-2-7b.json"));
    snprintf(run, sizeof run, "run '%s' --gpus 2 --seq 16 --gbs 4 --no-db --no-bench "
             "--timeout 60s", tl_path("examples/models/tiny-llama.json"));
    struct {
        const char *cmd, *flag, *path, *file, *needle;
    } cases[] = {
        {sim, "--trace", missing, "/t.json", "does not exist"},
        {run, "--save", missing, "/y.bin", "does not exist"},
        {run, "--trace", missing, "/t.json", "does not exist"},
        {run, "--hostfile", "/dev/null", "", "not a regular file"},
        {run, "--hostfile", dir, "", "is a directory"},
        {run, "--hostfile", hosts, "", "names no host"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "%s %s '%s%s'", cases[i].cmd, cases[i].flag, cases[i].path,
                 cases[i].file);
        char *out = NULL, *err = NULL;
        int rc = tl_run(args, &out, &err);
        if (rc != 2) fprintf(stderr, "  autoplan %s: exit %d: %s\n", args, rc, err ? err : "");
        CHECK_INT(rc, 2);
        CHECK_CONTAINS(err, cases[i].flag);
        CHECK_CONTAINS(err, cases[i].path);
        CHECK_CONTAINS(err, cases[i].needle);
        CHECK(err && strchr(err, '\n') == strrchr(err, '\n')); /* one line */
        CHECK(out && !*out); /* refused before anything was simulated or trained */
        free(out);
        free(err);
    }
    /* a sweep with a count the cluster cannot take writes nothing, not the counts before it */
    snprintf(args, sizeof args, "plan '%s' --gpus 8,12 --no-cache --out '%s'",
             tl_path("examples/models/llama-2-7b.json"), missing);
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run(args, &out, &err), 2);
    CHECK_CONTAINS(err, "--gpus 12");
    free(out);
    free(err);
    CHECK(access(missing, F_OK) != 0);
    /* --trace - of a Gemini plan: the trace on standard output, no file named '-' */
    snprintf(args, sizeof args, "simulate '%s' --gpus 8 --trainer colossalai --zero 3 "
             "--gemini auto --trace -", tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK(out && !strncmp(out, "{\"traceEvents\":", 15));
    CHECK(access("-", F_OK) != 0);
    free(out);
    free(err);
    remove(hosts);
    rmdir(dir);
}

/* fit: the best row's closest plan carries its measured need (never "0 B"); unknown keys in a
 * family file's shapes are refused; --recompute pins the best and a trainer that does not offer
 * it is labelled "trainer", not "gpu"; --tokens-per-step's rounding is said and reported; both
 * ends of the family's range print alike. */
static void test_fit_fixes(void) {
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run("fit --gpu a100 --seq 1000000 --strategies best", &out, &err), 0);
    CHECK(out && !strstr(out, "needs 0 B"));
    CHECK_CONTAINS(out, "GPU needs ");
    free(out);
    free(err);
    /* a typo in shapes[0] */
    char *model = tl_read(tl_path("examples/models/tiny-llama.json"));
    CHECK(model != NULL);
    char fam[512], args[1024];
    snprintf(fam, sizeof fam, "%s/fit-fam.json", tl_tmpdir());
    FILE *f = fopen(fam, "w");
    CHECK(f != NULL);
    if (f && model) {
        fprintf(f, "{\"name\":\"fam\",\"model\":%s,\"shapes\":[{\"layers\":4,\"hidden\":512,"
                "\"heads\":8,\"kv_head\":2,\"ffn_hidden\":1376}]}", model);
        fclose(f);
    }
    free(model);
    snprintf(args, sizeof args, "fit --gpu a100 --strategies ddp --family %s", fam);
    CHECK_INT(tl_run(args, &out, &err), 2);
    CHECK_CONTAINS(err, "shapes[0]: unknown field 'kv_head' (did you mean 'kv_heads'?)");
    free(out);
    free(err);
    /* the header of the same family spelled right: both ends with two decimals, under 1B */
    char *text = tl_read(fam);
    char *typo = text ? strstr(text, "kv_head\"") : NULL;
    f = typo ? fopen(fam, "w") : NULL;
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "%.*skv_heads%s", (int)(typo - text), text, typo + 7);
        fclose(f);
    }
    free(text);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK(out && strstr(out, "B to 0.") && !strstr(out, " to 0B)") && !strstr(out, " to 1B)"));
    free(out);
    free(err);
    remove(fam);
    /* recompute */
    CHECK_INT(tl_run("fit --gpu a100 --gpus 8 --strategies zero-3 --recompute selective", &out,
                     &err), 2);
    CHECK_CONTAINS(err, "--recompute: no strategy asked can run selective");
    free(out);
    free(err);
    ap_json *j = run_json("fit --gpu a100 --gpus 8 --strategies zero-3,best --recompute selective "
                          "--json", "fit --json");
    ap_json *ss = j ? ap_json_get(j, "strategies") : NULL;
    CHECK(ss && ap_json_size(ss) == 2);
    if (ss && ap_json_size(ss) == 2) {
        CHECK(!strcmp(ap_json_string(ap_json_get(ap_json_at(ss, 0), "binding")), "trainer"));
        CHECK(ap_json_number(ap_json_get(ap_json_at(ss, 1), "largest_params")) > 0);
    }
    ap_json_free(j);
    double lp[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "fit --gpu a100 --gpus 8 --strategies best --json "
                 "--recompute %s", i ? "full" : "none");
        j = run_json(args, "fit --json");
        ss = j ? ap_json_get(j, "strategies") : NULL;
        if (ss) lp[i] = ap_json_number(ap_json_get(ap_json_at(ss, 0), "largest_params"));
        ap_json_free(j);
    }
    CHECK(lp[0] > 0 && lp[0] < lp[1]); /* no recomputation holds less */
    /* the batch */
    CHECK_INT(tl_run("fit --gpu a100 --strategies ddp --tokens-per-step 6000 --json", &out, &err),
              0);
    CHECK_CONTAINS(out, "\"tokens_per_step\": 6144");
    CHECK_CONTAINS(err, "global batch 3 sequences x 2048 tokens = 6144 tokens");
    free(out);
    free(err);
}

/* plan --json writes stage_recompute (all -1) for every uneven plan; without full recompute
 * the list reads back as saying nothing, and one count of its own still needs --recompute full */
static void test_stage_recompute_readback(void) {
    char args[2048], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "estimate '%s' --gpus 64 --tp 8 --pp 2 --recompute none "
             "--stage-recompute -1,-1 --stage-layers 41,39",
             tl_path("examples/models/llama-3-70b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    free(out);
    free(err);
    bad("estimate '%s' --gpus 8 --pp 2 --recompute none --stage-recompute 2,-1",
        "--stage-recompute needs --recompute full");
}

/* Nothing fits: the closest plan is one whose memory was measured (a Gemini layout that failed
 * before its simulation ran has a peak of 0, and was named closest at "0.0 GiB"), and a plan
 * bound by host memory alone says what it has to spare on the GPU, not "-4.4 GiB over". */
static void test_closest_measured(void) {
    char args[2048], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "plan '%s' --gpus 1 --trainer colossalai --seq 1000000 "
             "--no-cache", tl_path("examples/models/llama-2-7b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "GiB over");
    CHECK(out && !strstr(out, "needs 0.0 GiB"));
    free(out);
    free(err);
    snprintf(args, sizeof args, "plan '%s' --gpus 1 --trainer colossalai --no-cache",
             tl_path("examples/models/llama-3.1-405b.json"));
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK_CONTAINS(out, "GiB to spare\nhost memory binds");
    CHECK(out && !strstr(out, "GiB headroom: -"));
    free(out);
    free(err);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    test_planfile_warning_order();
    test_fp8_params();
    test_fp8_recipe();
    test_expandable_segments();
    test_golden();
    test_readme_main();
    test_plan_defaults();
    test_plan_batch_messages();
    test_plan_ties();
    test_label_reproduces();
    test_validate_targets();
    test_validate_refused();
    test_validate_breakdown();
    test_profile_show();
    test_pp_over_network();
    test_bad_input();
    test_nccl_version();
    test_estimate_dp();
    test_cp_a2a_cli();
    test_paths_checked_first();
    test_stage_recompute_readback();
    test_closest_measured();
    test_fit_fixes();
    return tl_finish();
}
