/*
 * runtime_bench.c - the runtime's full matrix (test_runtime runs a pairwise cover of it): every
 * valid combination of rank count (1, 2, 4, 8), tp x pp x dp shape, ZeRO stage 0-3, recompute
 * (none, selective, full, full on 1 layer per chunk), sequence parallelism (with tp > 1) and
 * interleaving (vp 2 with pp > 1), for both model families (examples/models/tiny-llama.json,
 * tiny-gpt.json), each run through `autoplan run` for 5 steps. Prints one line per plan: the
 * loss's and the parameters' largest deviation from the single-rank run, the largest memory
 * error of any rank and category against the simulator, and the step time measured against the
 * cost model's prediction; then a summary (worst errors; time error median and spread).
 *
 * usage: runtime_bench [--model llama|gpt] [--ranks N] [--limit K] [--offload]
 *                      [AUTOPLAN [SOURCE_DIR]]
 * Defaults: both models, every rank count, all plans, offload 0 (--offload adds 0.5 to every
 * plan as a second variant), the autoplan beside this executable and the source tree it was
 * built from. A full run is about a thousand launches: an hour on 2 cores.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autoplan/json.h"

#define SEQ 16
#define GBS 8
#define STEPS 5

static char autoplan[4200], srcdir[4096], tmpdir[256];

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Run `autoplan run MODEL FLAGS --json`; returns the parsed output or NULL. */
static ap_json *run(const char *model, const char *flags, const char *save) {
    char cmd[16500], out[300];
    snprintf(out, sizeof out, "%s/out.json", tmpdir);
    snprintf(cmd, sizeof cmd,
             "'%s' run '%s/examples/models/tiny-%s.json' %s --seq %d --gbs %d --steps %d --json "
             "--no-db --save '%s' >'%s' 2>/dev/null",
             autoplan, srcdir, model, flags, SEQ, GBS, STEPS, save, out);
    if (system(cmd) != 0) return NULL;
    ap_err err = {{0}};
    return ap_json_parse_file(out, &err);
}

static float *params(const char *path, long *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    int c;
    while ((c = fgetc(f)) != EOF && c != '\n') {
    }
    long start = ftell(f);
    fseek(f, 0, SEEK_END);
    *n = (ftell(f) - start) / 4;
    fseek(f, start, SEEK_SET);
    float *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    if (v && fread(v, 4, (size_t)*n, f) != (size_t)*n) {
        free(v);
        v = NULL;
    }
    fclose(f);
    return v;
}

static double num(const ap_json *o, const char *k) { return ap_json_number(ap_json_get(o, k)); }

/* the largest relative error of any rank's peak, category or host pool */
static double memory_error(const ap_json *j) {
    const char *keys[] = {"peak_bytes",        "params_bytes",      "grads_bytes",
                          "optimizer_bytes",   "activations_bytes", "temporaries_bytes",
                          "comm_bytes",        "host_peak_bytes"};
    const ap_json *ranks = ap_json_get(j, "ranks");
    double worst = 0;
    for (int i = 0; i < ap_json_size(ranks); i++) {
        const ap_json *r = ap_json_at(ranks, i);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            double a = num(ap_json_get(r, "measured"), keys[k]);
            double b = num(ap_json_get(r, "predicted"), keys[k]);
            double e = b > 0 ? fabs(a - b) / b : (a == 0 ? 0 : 1);
            if (e > worst) worst = e;
        }
    }
    return worst;
}

int main(int argc, char **argv) {
    const char *only_model = NULL;
    int only_ranks = 0, limit = 0, offload = 0, npos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) only_model = argv[++i];
        else if (!strcmp(argv[i], "--ranks") && i + 1 < argc) only_ranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--limit") && i + 1 < argc) limit = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--offload")) offload = 1;
        else if (npos == 0) snprintf(autoplan, sizeof autoplan, "%s", argv[i]), npos++;
        else snprintf(srcdir, sizeof srcdir, "%s", argv[i]), npos++;
    }
    if (!autoplan[0]) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        self[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) *slash = '\0';
        snprintf(autoplan, sizeof autoplan, "%s/autoplan", self);
    }
    if (!srcdir[0]) snprintf(srcdir, sizeof srcdir, "%s", AP_SOURCE_DIR);
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/rtbench.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) return 1;

    const char *models[] = {"llama", "gpt"};
    const char *rcs[] = {"", "--recompute selective", "--recompute full",
                         "--recompute full --recompute-layers 1"};
    double worst_loss = 0, worst_par = 0, worst_mem = 0;
    double *terr = malloc(4096 * sizeof *terr);
    int nt = 0, runs = 0, failed = 0;
    printf("%-6s %-58s %9s %9s %9s %10s %10s %7s\n", "model", "plan", "loss err", "param err",
           "mem err", "step", "predicted", "error");
    for (int mi = 0; mi < 2; mi++) {
        if (only_model && strcmp(only_model, models[mi])) continue;
        int heads = 8, kv = mi == 0 ? 4 : 8, layers = 4;
        char refsave[400];
        snprintf(refsave, sizeof refsave, "%s/ref.bin", tmpdir);
        ap_json *ref = run(models[mi], "--gpus 1 --mbs 1 --no-bench", refsave);
        long nref = 0;
        float *refp = params(refsave, &nref);
        if (!ref || !refp) {
            fprintf(stderr, "runtime_bench: the single-rank reference failed\n");
            return 1;
        }
        const ap_json *refloss = ap_json_get(ref, "loss");
        for (int R = 1; R <= 8; R *= 2) {
            if (only_ranks && R != only_ranks) continue;
            for (int tp = 1; tp <= R; tp *= 2)
                for (int pp = 1; pp * tp <= R; pp *= 2) {
                    int dp = R / (tp * pp);
                    if (heads % tp || kv % tp || pp > layers) continue;
                    for (int z = 0; z <= 3; z++)
                        for (int rc = 0; rc < 4; rc++)
                            for (int sp = 0; sp <= (tp > 1); sp++)
                                for (int vp = 1; vp <= (pp > 1 && layers % (2 * pp) == 0 ? 2 : 1);
                                     vp++)
                                    for (int off = 0; off <= offload; off++) {
                                        int m = GBS / dp; /* micro-batches with mbs 1 */
                                        if (vp > 1 && m % pp) continue;
                                        if (limit && runs >= limit) goto done;
                                        char flags[512], save[400];
                                        snprintf(flags, sizeof flags,
                                                 "--gpus %d --tp %d --pp %d --vp %d --zero %d "
                                                 "--mbs 1 %s%s%s",
                                                 R, tp, pp, vp, z, sp ? "--sp " : "", rcs[rc],
                                                 off ? " --offload-optimizer 0.5" : "");
                                        snprintf(save, sizeof save, "%s/run.bin", tmpdir);
                                        runs++;
                                        ap_json *j = run(models[mi], flags, save);
                                        if (!j) {
                                            printf("%-6s %-58s FAILED\n", models[mi], flags);
                                            failed++;
                                            continue;
                                        }
                                        const ap_json *loss = ap_json_get(j, "loss");
                                        double le = 0, pe = 0;
                                        for (int s = 0; s < ap_json_size(loss); s++) {
                                            double a = ap_json_number(ap_json_at(loss, s));
                                            double b = ap_json_number(ap_json_at(refloss, s));
                                            le = fmax(le, fabs(a - b) / fabs(b));
                                        }
                                        long np = 0;
                                        float *p = params(save, &np);
                                        for (long k = 0; p && k < np && k < nref; k++)
                                            pe = fmax(pe, fabs((double)p[k] - (double)refp[k]));
                                        free(p);
                                        double me = memory_error(j);
                                        const ap_json *t = ap_json_get(j, "time");
                                        double ms = num(ap_json_get(t, "measured"), "step_s");
                                        double ps = num(ap_json_get(t, "predicted"), "step_s");
                                        double te = ps > 0 ? (ms - ps) / ps : 0;
                                        if (ps > 0 && nt < 4096) terr[nt++] = te;
                                        worst_loss = fmax(worst_loss, le);
                                        worst_par = fmax(worst_par, pe);
                                        worst_mem = fmax(worst_mem, me);
                                        printf("%-6s %-58s %9.2g %9.2g %9.2g %8.2f ms %7.2f ms "
                                               "%+6.0f%%\n",
                                               models[mi], flags, le, pe, me, ms * 1e3, ps * 1e3,
                                               100 * te);
                                        fflush(stdout);
                                        ap_json_free(j);
                                    }
                }
        }
    done:
        ap_json_free(ref);
        free(refp);
    }
    printf("\n%d plans, %d failed; worst loss error %.2g relative, parameters %.2g, memory %.2g\n",
           runs, failed, worst_loss, worst_par, worst_mem);
    if (nt > 0) {
        qsort(terr, (size_t)nt, sizeof *terr, cmp_double);
        printf("step time, measured vs predicted: median %+.0f%%, 10th %+.0f%%, 90th %+.0f%%\n",
               100 * terr[nt / 2], 100 * terr[nt / 10], 100 * terr[nt * 9 / 10]);
    }
    free(terr);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) return 1;
    return failed > 0;
}
