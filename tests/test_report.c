/*
 * test_report.c - `autoplan compare` (cli/cmd_compare.c, output/report.c).
 *
 * Reference for every number is `autoplan estimate --json` run with the flags the report prints
 * for that plan: each number in report.md's tables and explanations is re-formatted from the
 * JSON field it names (same format per unit) and must be equal as text. plans.csv: the header
 * is the list of estimate --json paths below, the first and last rows are re-estimated and
 * every column compared (relative 1e-12), rows are sorted by step time and all fit.
 * report.html: no URL, script, external resource or inline colour on text; each chart has one
 * bar / label per estimated strategy, one over-capacity mark per plan that does not fit, and at
 * most 2,000 sampled points; text colours of the light, dark and print schemes have a WCAG 2.x
 * contrast ratio >= 4.5 with their background (relative luminance computed here). When
 * `chromium` is installed, the page is rendered headless: the DOM keeps the three SVG charts
 * with the same counts, a screenshot is not blank, and at 1000, 1400 and 1600 px no table or
 * page overflows, no chart text overlaps another or leaves its chart, no scatter label covers a
 * marker, and the bar and scatter axes are scaled to what fits (check_layout). Without chromium
 * only that part is skipped.
 *
 * Chart 4 (GPU-count sweep): present exactly when a sweep is asked, one point and one labelled
 * tick per count, each point's tokens/s equal to `autoplan plan --gpus <count> --json
 * --no-cache` plans[0] (data attribute to 1e-12, table cells as formatted), the time to train
 * equal to `plan --gpus LIST --tokens T --json`'s time_to_train_s. Chart 5 (simulator): the
 * command printed is `simulate` with the best plan's estimate flags; its --json worst stage's
 * allocated_peak_bytes, reserved_peak_bytes, device_peak_bytes and peak_op equal the table and
 * the chart's attributes, the peak label names the operation, and the marked peak is the
 * highest point of the allocated curve.
 *
 * Cases: Llama-2-7B on 8 A100 (defaults: top 5 + all baselines; DDP does not fit; no sweep),
 * Llama-2-70B on 8 A100 with a plan that is illegal (tp=3), baselines that do not fit and a
 * sweep 8..32 with --tokens 2T, and Llama-3-70B compared on 64 with a sweep 64,128,4 whose
 * 128-GPU answer has an uneven (repartitioned) pipeline split and where nothing fits on 4.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autoplan/json.h"
#include "autoplan/report.h"
#include "autoplan/request.h"
#include "autoplan/search.h"
#include "testlib.h"

#define GiB 1073741824.0
#define MAXROWS 64

/* ---- small text helpers ----------------------------------------------------------------- */

static int count(const char *hay, const char *needle) {
    int n = 0;
    size_t l = strlen(needle);
    for (const char *p = strstr(hay, needle); p; p = strstr(p + l, needle)) n++;
    return n;
}

/* the part of s between the first `from` and the next `to` (malloc'd), or NULL */
static char *between(const char *s, const char *from, const char *to) {
    const char *a = strstr(s, from);
    if (!a) return NULL;
    const char *b = strstr(a, to);
    if (!b) return NULL;
    size_t n = (size_t)(b - a);
    char *o = malloc(n + 1);
    memcpy(o, a, n);
    o[n] = '\0';
    return o;
}

/* split a Markdown table row into trimmed cells (escaped \| kept inside); returns the count */
static int split_row(char *line, char **cells, int max) {
    int n = 0;
    char *p = line;
    if (*p == '|') p++;
    while (*p && n < max) {
        char *start = p;
        while (*p && !(*p == '|' && (p == line || p[-1] != '\\'))) p++;
        char *end = p;
        if (*p) *p++ = '\0';
        while (*start == ' ') start++;
        while (end > start && end[-1] == ' ') *--end = '\0';
        cells[n++] = start;
        if (!*p || (*p == '\n')) break;
    }
    return n;
}

static const ap_json *jpath(const ap_json *j, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const ap_json *x = j;
    for (char *t = strtok(buf, "."); t && x; t = strtok(NULL, ".")) x = ap_json_get(x, t);
    return x;
}

static double jnum(const ap_json *j, const char *path) { return ap_json_number(jpath(j, path)); }

static void fmt_unit(double v, const char *unit, char *out, size_t n) {
    if (!strcmp(unit, "s")) snprintf(out, n, "%.3f", v);
    else if (!strcmp(unit, "GiB")) snprintf(out, n, "%.2f", v / GiB);
    else if (!strcmp(unit, "%")) snprintf(out, n, "%.1f", 100 * v);
    else snprintf(out, n, "%.0f", v);
}

/* where a JSON field lives: time_s keys under time, bytes under memory, the rest throughput */
static const char *field_path(const char *key, char *buf, size_t n) {
    static const char *mem[] = {"peak_bytes", "capacity_bytes", "headroom_bytes", "params_bytes",
                                "grads_bytes", "optimizer_bytes", "activations_bytes",
                                "other_bytes", "allocated_peak_bytes", "reserved_peak_bytes",
                                "device_peak_bytes", "smi_peak_bytes", "host_bytes_per_node",
                                "host_capacity_bytes"};
    static const char *tim[] = {"step_s", "compute_s", "recompute_s", "tp_comm_s", "cp_comm_s",
                                "ep_comm_s", "pp_comm_s", "dp_comm_s", "bubble_s", "offload_s",
                                "optimizer_s", "overhead_s"};
    static const char *thr[] = {"tokens_per_s", "mfu", "hfu", "model_tflops_per_gpu",
                                "hw_tflops_per_gpu"};
    for (size_t i = 0; i < sizeof mem / sizeof *mem; i++)
        if (!strcmp(key, mem[i])) { snprintf(buf, n, "memory.%s", key); return buf; }
    for (size_t i = 0; i < sizeof tim / sizeof *tim; i++)
        if (!strcmp(key, tim[i])) { snprintf(buf, n, "time.%s", key); return buf; }
    for (size_t i = 0; i < sizeof thr / sizeof *thr; i++)
        if (!strcmp(key, thr[i])) { snprintf(buf, n, "throughput.%s", key); return buf; }
    return NULL;
}

/* ---- one report ---------------------------------------------------------------------------- */

typedef struct {
    char name[64];
    char status[16];     /* yes / no / illegal */
    char args[1024];     /* estimate arguments */
    char expl[2048];     /* the explanation after "- vs **name**: " in report.md */
    ap_json *est;        /* estimate --json of the plan */
} strat;

typedef struct {
    strat s[MAXROWS];
    int n;
    int nest, nnofit, nillegal;
    long long evaluated, feasible, csv_rows;
    int sweep;           /* a GPU-count sweep was asked: chart 4 drawn */
} report;

static strat *find(report *r, const char *name) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->s[i].name, name)) return &r->s[i];
    return NULL;
}

static ap_json *run_estimate(const char *args) {
    char *out = NULL, *err = NULL;
    int rc = tl_run(args, &out, &err);
    CHECK_INT(rc, 0);
    ap_json *j = NULL;
    if (rc == 0 && out) {
        ap_err e;
        j = ap_json_parse(out, strlen(out), "estimate --json", &e);
    }
    if (rc != 0) fprintf(stderr, "estimate %s failed: %s\n", args, err ? err : "");
    free(out);
    free(err);
    return j;
}

/* check "<key> <num> [unit] [vs <num> [unit]]" runs in a sentence against a (and b for vs) */
static void check_sentence(const char *text, const ap_json *a, const ap_json *b, int *checked) {
    char *buf = strdup(text);
    char *tok[512];
    int n = 0;
    for (char *t = strtok(buf, " "); t && n < 512; t = strtok(NULL, " ")) tok[n++] = t;
    for (int i = 0; i + 1 < n; i++) {
        char key[64], path[96];
        snprintf(key, sizeof key, "%s", tok[i]);
        size_t kl = strlen(key);
        while (kl && (key[kl - 1] == ',' || key[kl - 1] == ':')) key[--kl] = '\0';
        if (!field_path(key, path, sizeof path)) continue;
        int j = i + 1;
        const ap_json *who = a;
        for (int side = 0; side < 2 && j < n; side++) {
            char num[64];
            snprintf(num, sizeof num, "%s", tok[j]);
            size_t nl = strlen(num);
            while (nl && strchr(".,;", num[nl - 1])) num[--nl] = '\0';
            char *end;
            strtod(num, &end);
            if (end == num || *end) break;
            const char *unit = "";
            char ubuf[16] = "";
            if (j + 1 < n) {
                snprintf(ubuf, sizeof ubuf, "%s", tok[j + 1]);
                size_t ul = strlen(ubuf);
                while (ul && strchr(".,;", ubuf[ul - 1])) ubuf[--ul] = '\0';
                if (!strcmp(ubuf, "s") || !strcmp(ubuf, "GiB")) unit = ubuf;
            }
            char want[64];
            fmt_unit(jnum(who, path), unit, want, sizeof want);
            if (strcmp(num, want) != 0)
                fprintf(stderr, "  in: %s\n  %s: %s, estimate --json gives %s\n", text, key, num,
                        want);
            CHECK_STR(num, want);
            (*checked)++;
            j += *unit ? 2 : 1;
            if (j < n && !strcmp(tok[j], "vs") && b) {
                who = b;
                j++;
            } else {
                break;
            }
        }
    }
    free(buf);
}

static void check_markdown(const char *md, report *r) {
    char *copy = strdup(md);
    /* reproduce table first: the estimate arguments of each strategy */
    char *rep = strstr(copy, "## Reproduce");
    CHECK(rep != NULL);
    char *sec_plans = strstr(copy, "## Compared plans");
    CHECK(sec_plans != NULL);
    if (!rep || !sec_plans) { free(copy); return; }
    /* compared plans */
    char *line = strstr(sec_plans, "\n|");
    int header_seen = 0;
    char hdr[16][64];
    int nh = 0;
    while (line && line[1] == '|') {
        line++;
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s", line);
        char *cells[16];
        int nc = split_row(tmp, cells, 16);
        if (!header_seen) {
            header_seen = 1;
            nh = nc;
            for (int i = 0; i < nc && i < 16; i++) snprintf(hdr[i], sizeof hdr[i], "%s", cells[i]);
        } else if (strncmp(cells[0], "---", 3) != 0 && r->n < MAXROWS) {
            CHECK_INT(nc, nh);
            strat *s = &r->s[r->n++];
            memset(s, 0, sizeof *s);
            snprintf(s->name, sizeof s->name, "%s", cells[0]);
            snprintf(s->status, sizeof s->status, "%s", cells[nc - 1]);
        }
        line = nl ? nl : NULL;
        if (line) *line = '\n';
    }
    CHECK_INT(nh, 11);
    /* reproduce commands */
    line = strstr(rep, "\n|");
    int skip = 2;
    while (line && line[1] == '|') {
        line++;
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (skip > 0) skip--;
        else {
            char tmp[4096];
            snprintf(tmp, sizeof tmp, "%s", line);
            char *cells[4];
            int nc = split_row(tmp, cells, 4);
            strat *s = nc == 2 ? find(r, cells[0]) : NULL;
            CHECK(s != NULL);
            const char *pre = "`autoplan estimate ";
            CHECK(!strncmp(cells[1], pre, strlen(pre)));
            if (s && !strncmp(cells[1], pre, strlen(pre))) {
                snprintf(s->args, sizeof s->args, "estimate %s", cells[1] + strlen(pre));
                size_t l = strlen(s->args);
                if (l && s->args[l - 1] == '`') s->args[l - 1] = '\0';
                s->est = run_estimate(s->args);
                CHECK(s->est != NULL);
            }
        }
        if (!nl) break;
        *nl = '\n';
        line = nl;
    }
    for (int i = 0; i < r->n; i++) {
        strat *s = &r->s[i];
        if (!strcmp(s->status, "illegal")) {
            r->nillegal++;
            CHECK(s->args[0] == '\0');
        } else {
            r->nest++;
            if (!strcmp(s->status, "no")) r->nnofit++;
            else CHECK_STR(s->status, "yes");
            CHECK(s->est != NULL);
            if (s->est) CHECK_INT(ap_json_bool(jpath(s->est, "memory.fits")), !strcmp(s->status, "yes"));
        }
    }
    free(copy);

    /* every numeric cell of the compared-plans table */
    copy = strdup(md);
    int checked = 0;
    line = strstr(strstr(copy, "## Compared plans"), "\n|");
    for (int row = 0; line && line[1] == '|'; row++) {
        line++;
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *cells[16];
        int nc = split_row(line, cells, 16);
        strat *s = row >= 2 ? find(r, cells[0]) : NULL;
        if (s && s->est && nc == 11) {
            char want[64], lbl[64];
            CHECK_STR(cells[2], ap_json_string(jpath(s->est, "plan.trainer")));
            snprintf(lbl, sizeof lbl, "tp%.0f pp%.0f dp%.0f", jnum(s->est, "plan.tp"),
                     jnum(s->est, "plan.pp"), jnum(s->est, "plan.dp"));
            CHECK(!strncmp(cells[1], lbl, strlen(lbl)));
            snprintf(lbl, sizeof lbl, "mbs%.0f z%.0f", jnum(s->est, "plan.mbs"),
                     jnum(s->est, "plan.zero"));
            CHECK_CONTAINS(cells[1], lbl);
            fmt_unit(jnum(s->est, "time.step_s"), "s", want, sizeof want);
            CHECK_STR(cells[3], want);
            fmt_unit(jnum(s->est, "throughput.tokens_per_s"), "", want, sizeof want);
            CHECK_STR(cells[4], want);
            fmt_unit(jnum(s->est, "throughput.mfu"), "%", want, sizeof want);
            CHECK_STR(cells[5], want);
            fmt_unit(jnum(s->est, "memory.device_peak_bytes"), "GiB", want, sizeof want);
            CHECK_STR(cells[6], want);
            fmt_unit(jnum(s->est, "memory.capacity_bytes"), "GiB", want, sizeof want);
            CHECK_STR(cells[7], want);
            check_sentence(cells[8], s->est, NULL, &checked);
            if (!strcmp(s->status, "no")) {
                double over = jnum(s->est, "memory.device_peak_bytes") +
                               jnum(s->est, "memory.headroom_bytes") -
                               jnum(s->est, "memory.capacity_bytes");
                fmt_unit(over, "GiB", want, sizeof want);
                CHECK_STR(cells[9], want);
            } else {
                CHECK_STR(cells[9], "");
            }
            checked += 7;
        }
        line = nl;
        if (line) *line = '\n';
    }
    free(copy);
    CHECK(checked >= 7 * r->nest);

    /* step-time and memory tables: header cells are the JSON keys */
    const char *secs[] = {"## Step time parts (s)", "## Memory of the worst stage (GiB)"};
    for (int k = 0; k < 2; k++) {
        copy = strdup(md);
        char *sec = strstr(copy, secs[k]);
        CHECK(sec != NULL);
        line = sec ? strstr(sec, "\n|") : NULL;
        char keys[20][48];
        int nk = 0, rows = 0;
        for (int row = 0; line && line[1] == '|'; row++) {
            line++;
            char *nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            char *cells[20];
            int nc = split_row(line, cells, 20);
            if (row == 0) {
                nk = nc;
                for (int i = 0; i < nc; i++) snprintf(keys[i], sizeof keys[i], "%s", cells[i]);
            } else if (row >= 2) {
                strat *s = find(r, cells[0]);
                CHECK(s && s->est);
                CHECK_INT(nc, nk);
                for (int i = 1; s && s->est && i < nc; i++) {
                    char path[96], want[64];
                    CHECK(field_path(keys[i], path, sizeof path) != NULL);
                    if (!field_path(keys[i], path, sizeof path)) continue;
                    fmt_unit(jnum(s->est, path), k == 0 ? "s" : "GiB", want, sizeof want);
                    CHECK_STR(cells[i], want);
                }
                rows++;
            }
            line = nl;
            if (line) *line = '\n';
        }
        CHECK_INT(rows, r->nest);
        free(copy);
    }

    /* explanations: "- vs **name**: ..." against that plan (first number) and the best (vs) */
    copy = strdup(md);
    char *best_at = strstr(copy, "Best: **");
    strat *best = NULL;
    if (best_at) {
        char nm[64];
        if (sscanf(best_at, "Best: **%63[^*]**", nm) == 1) best = find(r, nm);
    }
    CHECK(best != NULL && best->est != NULL && !strcmp(best->status, "yes"));
    int nexpl = 0;
    checked = 0;
    for (char *p = strstr(copy, "\n- vs **"); p && best && best->est; p = strstr(p + 1, "\n- vs **")) {
        char nm[64];
        if (sscanf(p, "\n- vs **%63[^*]**", nm) != 1) continue;
        strat *s = find(r, nm);
        CHECK(s != NULL);
        char *nl = strchr(p + 1, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *text = strndup(p + 1, len - 1);
        nexpl++;
        char *colon = strstr(text, "**: ");
        if (s && colon) snprintf(s->expl, sizeof s->expl, "%s", colon + 4);
        if (s && s->est) {
            check_sentence(text, s->est, best->est, &checked);
            double a = jnum(s->est, "time.step_s"), b = jnum(best->est, "time.step_s");
            int tie = fabs(a - b) / b < 0.05;
            if (!strcmp(s->status, "yes")) {
                /* ties are called ties, and only ties */
                CHECK_INT(strstr(text, "a tie") != NULL, tie);
                CHECK_INT(strstr(text, "slower") != NULL, !tie);
                /* the best is the simplest within the validated time error of the fastest
                   fitting one (ap_report_pick_best, as `plan` ranks) */
                CHECK(b <= a * 1.05);
                CHECK_CONTAINS(copy, "Picked as `autoplan plan` ranks: of the strategies that fit");
            } else {
                CHECK_CONTAINS(text, "does not fit");
                char want[64], over[80];
                fmt_unit(jnum(s->est, "memory.device_peak_bytes") + jnum(s->est, "memory.headroom_bytes") -
                             jnum(s->est, "memory.capacity_bytes"), "GiB", want, sizeof want);
                snprintf(over, sizeof over, "over by %s GiB", want);
                CHECK_CONTAINS(text, over);
            }
        } else if (s) {
            CHECK_CONTAINS(text, "not legal");
        }
        free(text);
    }
    CHECK_INT(nexpl, r->n - 1);
    CHECK(checked >= 2 * (r->nest - 1));
    /* the bottleneck sentence */
    char *bn = strstr(copy, "\nBottleneck: ");
    CHECK(bn != NULL);
    if (bn && best && best->est) {
        char *nl = strchr(bn + 1, '\n');
        char *text = strndup(bn + 1, nl ? (size_t)(nl - bn - 1) : strlen(bn + 1));
        int c0 = 0;
        check_sentence(text, best->est, NULL, &c0);
        CHECK_INT(c0, 3);
        free(text);
    }
    /* totals */
    char *ev = strstr(copy, "## Evaluated plans\n\n");
    CHECK(ev != NULL);
    if (ev) {
        CHECK_INT(sscanf(ev, "## Evaluated plans\n\n%lld plans evaluated, %lld feasible",
                         &r->evaluated, &r->feasible), 2);
        char *rows = strstr(ev, "plans.csv has ");
        CHECK(rows && sscanf(rows, "plans.csv has %lld rows", &r->csv_rows) == 1);
    }
    free(copy);
}

/* ---- plans.csv --------------------------------------------------------------------------- */

static const char *csv_cols[] = {
    "label", "plan.trainer", "plan.tp", "plan.pp", "plan.dp", "plan.cp", "plan.ep", "plan.etp",
    "plan.vp", "plan.mbs", "plan.gbs", "plan.grad_accum", "plan.seq", "plan.zero",
    "plan.recompute", "plan.recompute_layers", "plan.sp", "plan.overlap",
    "plan.offload.optimizer", "plan.offload.params", "plan.dtype", "plan.flash_attn",
    "time.step_s", "time.compute_s", "time.recompute_s", "time.tp_comm_s", "time.cp_comm_s",
    "time.ep_comm_s", "time.pp_comm_s", "time.dp_comm_s", "time.bubble_s", "time.offload_s",
    "time.optimizer_s", "time.overhead_s", "throughput.tokens_per_s",
    "throughput.model_tflops_per_gpu", "throughput.hw_tflops_per_gpu", "throughput.mfu",
    "throughput.hfu", "memory.peak_bytes", "memory.capacity_bytes", "memory.headroom_bytes",
    "memory.params_bytes", "memory.grads_bytes", "memory.optimizer_bytes",
    "memory.activations_bytes", "memory.other_bytes", "memory.fits",
    "memory.allocated_peak_bytes", "memory.reserved_peak_bytes", "memory.device_peak_bytes",
    "memory.smi_peak_bytes", "memory.worst_stage", "memory.host_bytes_per_node", "memory.host_capacity_bytes",
    "memory.host_fits"};
#define NCSV ((int)(sizeof csv_cols / sizeof csv_cols[0]))

/* split one CSV line (quoted label first, no other quotes) into fields */
static int csv_split(char *line, char **f, int max) {
    int n = 0;
    char *p = line;
    while (n < max) {
        if (*p == '"') {
            char *e = strchr(p + 1, '"');
            if (!e) return -1;
            *e = '\0';
            f[n++] = p + 1;
            p = e + 1;
        } else {
            f[n++] = p;
            p += strcspn(p, ",");
        }
        if (*p == ',') *p++ = '\0';
        else break;
    }
    return n;
}

static void check_csv_row(char **f, const char *model_gpus) {
    /* re-estimate the row's plan and compare every column */
    char args[1024];
    snprintf(args, sizeof args, "estimate %s --trainer %s --tp %s --pp %s --cp %s --ep %s "
             "--vp %s --mbs %s --gbs %s --seq %s --zero %s --recompute %s%s%s%s%s%s "
             "--offload-optimizer %s --offload-params %s --dtype %s%s --json",
             model_gpus, f[1], f[2], f[3], f[5], f[6], f[8], f[9], f[10], f[12], f[13], f[14],
             strcmp(f[15], "0") ? " --recompute-layers " : "", strcmp(f[15], "0") ? f[15] : "",
             !strcmp(f[16], "true") ? " --sp" : "", !strcmp(f[17], "true") ? " --overlap" : "",
             "", f[18], f[19], f[20], !strcmp(f[21], "true") ? "" : " --no-flash-attn");
    ap_json *j = run_estimate(args);
    if (!j) return;
    for (int c = 1; c < NCSV; c++) {
        const ap_json *x = jpath(j, csv_cols[c]);
        CHECK(x != NULL);
        if (!x) continue;
        if (ap_json_is_string(x)) {
            CHECK_STR(f[c], ap_json_string(x));
        } else if (ap_json_is_bool(x)) {
            CHECK_STR(f[c], ap_json_bool(x) ? "true" : "false");
        } else {
            double got = strtod(f[c], NULL), want = ap_json_number(x);
            if (want == 0) CHECK(got == 0);
            else CHECK_NEAR(got, want, 1e-12);
        }
    }
    ap_json_free(j);
}

static void check_csv(const char *csv, const report *r, const char *model_gpus) {
    char *copy = strdup(csv);
    char *save = NULL;
    char *line = strtok_r(copy, "\n", &save);
    CHECK(line != NULL);
    if (!line) { free(copy); return; }
    char *f[128];
    int n = csv_split(line, f, 128);
    CHECK_INT(n, NCSV);
    for (int i = 0; i < n && i < NCSV; i++) CHECK_STR(f[i], csv_cols[i]);
    long long rows = 0, bad = 0;
    double prev = 0;
    char *first = NULL, *last = NULL;
    for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *dup = strdup(line);
        int k = csv_split(line, f, 128);
        if (k != NCSV || strcmp(f[47], "true") != 0) bad++;
        double step = strtod(f[22], NULL);
        if (rows > 0 && step < prev) bad++;
        prev = step;
        rows++;
        if (!first) first = dup;
        else {
            free(last);
            last = dup;
        }
    }
    CHECK_INT(bad, 0);
    CHECK_INT(rows, r->csv_rows);
    CHECK(rows <= 100000);
    CHECK(rows > 0);
    CHECK(r->feasible >= rows && r->evaluated >= r->feasible);
    if (r->feasible <= 100000) CHECK_INT(rows, r->feasible);
    char *rowv[2] = {first, last};
    for (int i = 0; i < 2; i++) {
        if (!rowv[i]) continue;
        int k = csv_split(rowv[i], f, 128);
        CHECK_INT(k, NCSV);
        if (k == NCSV) check_csv_row(f, model_gpus);
    }
    free(first);
    free(last);
    free(copy);
}

/* ---- HTML ---------------------------------------------------------------------------------- */

static double channel(int v) {
    double c = v / 255.0;
    return c <= 0.03928 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4); /* WCAG 2.x */
}
static double luminance(const char *hex) {
    unsigned r, g, b;
    if (sscanf(hex, "#%02x%02x%02x", &r, &g, &b) != 3) return -1;
    return 0.2126 * channel((int)r) + 0.7152 * channel((int)g) + 0.0722 * channel((int)b);
}
static double contrast(const char *a, const char *b) {
    double la = luminance(a), lb = luminance(b);
    double hi = la > lb ? la : lb, lo = la > lb ? lb : la;
    return (hi + 0.05) / (lo + 0.05);
}

static void var_in(const char *block, const char *name, char *out) {
    out[0] = '\0';
    const char *p = block ? strstr(block, name) : NULL;
    if (p) sscanf(p + strlen(name), "%7s", out);
}

static void check_contrast(const char *html) {
    /* three schemes: :root (light), prefers-color-scheme: dark, print */
    const char *light = strstr(html, ":root{--bg:");
    const char *dark = strstr(html, "@media (prefers-color-scheme: dark){:root{");
    const char *print = strstr(html, "@media print{:root{");
    CHECK(light && dark && print);
    const char *blocks[3] = {light, dark, print};
    CHECK_INT(count(html, "--bg:"), 3);
    for (int i = 0; i < 3; i++) {
        char bg[8], fg[8], muted[8];
        var_in(blocks[i], "--bg:", bg);
        var_in(blocks[i], "--fg:", fg);
        var_in(blocks[i], "--muted:", muted);
        CHECK(luminance(bg) >= 0 && luminance(fg) >= 0 && luminance(muted) >= 0);
        double c1 = contrast(fg, bg), c2 = contrast(muted, bg);
        if (c1 < 4.5 || c2 < 4.5)
            fprintf(stderr, "scheme %d: fg %s muted %s on %s: %.2f %.2f\n", i, fg, muted, bg, c1, c2);
        CHECK(c1 >= 4.5);
        CHECK(c2 >= 4.5);
    }
    /* every text colour comes from those variables: no text element carries its own fill, and
     * the only colours given to text in the style sheet are the variables */
    CHECK_INT(count(html, "<text fill"), 0);
    CHECK_INT(count(html, "<text style"), 0);
    char *css = between(html, "<style>", "</style>");
    CHECK(css != NULL);
    if (css) {
        for (char *p = strstr(css, "color:"); p; p = strstr(p + 1, "color:")) {
            if (p > css && (p[-1] == '-')) continue; /* background-color etc. */
            CHECK(!strncmp(p, "color:var(--", 12));
        }
        for (char *p = strstr(css, "text"); p; p = strstr(p + 1, "text")) {
            char *brace = strchr(p, '{'), *end = brace ? strchr(brace, '}') : NULL;
            if (!brace || !end || brace - p > 40) continue;
            char *fill = strstr(brace, "fill:");
            if (fill && fill < end) CHECK(!strncmp(fill, "fill:var(--", 11));
        }
        free(css);
    }
    /* a plain-number contrast check of the formula itself: black on white is 21:1 */
    CHECK_NEAR(contrast("#000000", "#ffffff"), 21.0, 1e-9);
}

static int attr_ll(const char *svg, const char *attr, long long *v) {
    const char *p = strstr(svg, attr);
    return p && sscanf(p + strlen(attr), "\"%lld\"", v) == 1;
}

/* counts of the chart elements (in the file and in Chromium's serialisation of the DOM) */
static void check_charts(const char *html, const report *r) {
    /* charts 1-3, 5 (the simulator's) and, with a sweep, 4 */
    CHECK_INT(count(html, "<svg"), 4 + r->sweep);
    CHECK_INT(count(html, "<svg id=\"chart-sweep\""), r->sweep);
    CHECK_INT(count(html, "<svg id=\"chart-sim\""), 1);
    char *t = between(html, "<svg id=\"chart-time\"", "</svg>");
    char *m = between(html, "<svg id=\"chart-memory\"", "</svg>");
    char *s = between(html, "<svg id=\"chart-scatter\"", "</svg>");
    CHECK(t && m && s);
    if (t) {
        CHECK_INT(count(t, "<g class=\"bar\""), r->nest);
        CHECK_INT(count(t, "class=\"barlabel\""), r->nest);
        /* whiskers on every bar inside the axis; a bar cut at the axis end gets a break mark */
        CHECK_INT(count(t, "class=\"errband\""), r->nest - count(t, "data-beyond=\"1\""));
        CHECK_INT(count(t, "class=\"break\""), count(t, "data-beyond=\"1\""));
        CHECK_INT(count(t, "class=\"legend-item\""), 11);
        CHECK_INT(count(t, "class=\"na\""), r->nillegal);
        CHECK_INT(count(t, "class=\"name\""), r->n);
        CHECK_INT(count(t, " tokens/s"), r->nest);
        CHECK_INT(count(t, "MFU "), r->nest);
        CHECK_CONTAINS(t, "step time (s)");
        CHECK_CONTAINS(t, "data-plot-x0=\""); /* the layout check reads the axis from it */
        CHECK(count(t, "class=\"seg\"") >= r->nest);
    }
    if (m) {
        CHECK_INT(count(m, "<g class=\"bar\""), r->nest);
        CHECK_INT(count(m, "class=\"barlabel\""), r->nest);
        CHECK_INT(count(m, "class=\"legend-item\""), 6);
        CHECK_INT(count(m, "<g class=\"over\""), r->nnofit);
        CHECK_INT(count(m, "OVER by "), r->nnofit);
        CHECK_INT(count(m, "class=\"capacity\""), 1);
        CHECK_INT(count(m, "class=\"break\""), count(m, "data-beyond=\"1\""));
        /* the axis is scaled to what fits: only plans that do not fit run past it */
        CHECK(count(m, "data-beyond=\"1\"") <= r->nnofit);
        CHECK_CONTAINS(m, "(GiB)");
        CHECK_CONTAINS(m, "data-plot-x0=\"");
    }
    if (s) {
        long long ev = -1, fe = -1, fr = -1, sa = -1;
        CHECK(attr_ll(s, "data-evaluated=", &ev) && attr_ll(s, "data-feasible=", &fe) &&
              attr_ll(s, "data-front=", &fr) && attr_ll(s, "data-sampled=", &sa));
        CHECK_INT(ev, r->evaluated);
        CHECK_INT(fe, r->feasible);
        CHECK(sa <= 2000 && fr >= 1 && fr + sa <= r->csv_rows);
        CHECK_INT(count(s, "<circle class=\"pt\""), sa + 1); /* + the key's sample */
        CHECK_INT(count(s, "<rect class=\"front-pt\""), fr + 1);
        /* one label per spot: strategies on the same spot share it, names joined */
        int nl = count(s, "class=\"stratlabel\"");
        CHECK(nl >= 1 && nl <= r->nest);
        for (int i = 0; i < r->n; i++) {
            if (!r->s[i].est) continue;
            int found = 0;
            for (char *p = strstr(s, "class=\"stratlabel\""); p && !found;
                 p = strstr(p + 1, "class=\"stratlabel\"")) {
                char *lab = between(p, ">", "</text>");
                if (lab) {
                    /* the name as a whole item of the label's list */
                    size_t l = strlen(r->s[i].name);
                    for (char *q = strstr(lab, r->s[i].name); q && !found; q = strstr(q + 1, r->s[i].name))
                        found = (q == lab + 1 || q[-1] == ' ') &&
                                (q[l] == '\0' || q[l] == ',' || q[l] == ' ' || q[l] == ':');
                    free(lab);
                }
            }
            if (!found) fprintf(stderr, "  scatter: no label names %s\n", r->s[i].name);
            CHECK(found);
        }
        char tot[64];
        snprintf(tot, sizeof tot, ">%lld evaluated<", ev);
        CHECK_CONTAINS(s, tot);
        CHECK_CONTAINS(s, "throughput (tokens/s)");
        CHECK_CONTAINS(s, "data-plot=\"");
        CHECK_CONTAINS(s, "(GiB)");
        for (int i = 0; i < r->n; i++)
            if (r->s[i].est) CHECK(strstr(s, r->s[i].name) != NULL);
    }
    free(t);
    free(m);
    free(s);
}

static void check_html(const char *html, const report *r) {
    CHECK(!strncmp(html, "<!DOCTYPE html>", 15));
    CHECK_INT(count(html, "http://"), 0);
    CHECK_INT(count(html, "https://"), 0);
    CHECK_INT(count(html, "src="), 0);
    CHECK_INT(count(html, "href="), 0);
    CHECK_INT(count(html, "<script"), 0);
    CHECK_INT(count(html, "<link"), 0);
    CHECK_INT(count(html, "@import"), 0);
    CHECK_INT(count(html, "@font-face"), 0);
    CHECK_INT(count(html, "url("), count(html, "url(#"));
    CHECK_INT(count(html, "//"), 0); /* no protocol-relative or any other URL */
    check_contrast(html);
    check_charts(html, r);
    /* chart 4 without a sweep is said to be absent; chart 5 is there */
    CHECK_INT(count(html, "id=\"sweep-absent\""), !r->sweep);
    CHECK_INT(count(html, "id=\"sim-absent\""), 0);
    CHECK_CONTAINS(html, "simulator");
    /* every compared strategy appears in the explanation or is the best */
    for (int i = 0; i < r->n; i++) CHECK(strstr(html, r->s[i].name) != NULL);
    /* the HTML's plan table and explanations carry the same numbers as report.md (checked
     * against estimate --json there) */
    for (int i = 0; i < r->n; i++) {
        const strat *s = &r->s[i];
        if (s->est) {
            const char *keys[] = {"time.step_s", "throughput.tokens_per_s", "throughput.mfu",
                                  "memory.device_peak_bytes"};
            const char *units[] = {"s", "", "%", "GiB"};
            for (int k = 0; k < 4; k++) {
                char want[64], cell[80];
                fmt_unit(jnum(s->est, keys[k]), units[k], want, sizeof want);
                snprintf(cell, sizeof cell, "<td>%s</td>", want);
                CHECK_CONTAINS(html, cell);
            }
        }
        if (s->expl[0]) {
            char esc[4096];
            size_t k = 0;
            for (const char *c = s->expl; *c && k + 6 < sizeof esc; c++) {
                const char *e = *c == '>' ? "&gt;" : *c == '<' ? "&lt;" : *c == '&' ? "&amp;" : NULL;
                if (e) { strcpy(esc + k, e); k += strlen(e); }
                else esc[k++] = *c;
            }
            esc[k] = '\0';
            CHECK_CONTAINS(html, esc);
        }
    }
}

/* ---- chart 4: the GPU-count sweep ----------------------------------------------------------- */

static ap_json *run_json(const char *args) {
    char *out = NULL, *err = NULL;
    int rc = tl_run(args, &out, &err);
    CHECK_INT(rc, 0);
    if (rc != 0) fprintf(stderr, "autoplan %s failed: %s\n", args, err ? err : "");
    ap_json *j = NULL;
    if (rc == 0 && out) {
        ap_err e;
        j = ap_json_parse(out, strlen(out), args, &e);
    }
    CHECK(j != NULL);
    free(out);
    free(err);
    return j;
}

/* the number after `attr="` following the first occurrence of `key` in s (NAN when absent) */
static double attr_after(const char *s, const char *key, const char *attr) {
    const char *p = s ? strstr(s, key) : NULL;
    if (!p) return NAN;
    const char *q = strstr(p, attr);
    if (!q) return NAN;
    return strtod(q + strlen(attr), NULL);
}

/* the cells of the Markdown row starting with "| <first> |" after `from` in md (n cells) */
static int md_row(const char *md, const char *from, const char *first, char *buf, size_t bn,
                  char **cells, int max) {
    const char *sec = strstr(md, from);
    char pre[64];
    snprintf(pre, sizeof pre, "\n| %s |", first);
    const char *row = sec ? strstr(sec, pre) : NULL;
    if (!row) return 0;
    row++;
    const char *nl = strchr(row, '\n');
    size_t len = nl ? (size_t)(nl - row) : strlen(row);
    if (len >= bn) len = bn - 1;
    memcpy(buf, row, len);
    buf[len] = '\0';
    return split_row(buf, cells, max);
}

/* Chart 4 and the sweep table against `autoplan plan --gpus <count> --json --no-cache` with the
 * same search flags: one point per count, each count a labelled tick, tokens/s equal to
 * plans[0].throughput.tokens_per_s (data attribute to 1e-12, table as formatted), the time to
 * train equal to `plan --gpus LIST --tokens T --json`'s time_to_train_s. */
static void check_sweep(const char *html, const char *md, const char *model, const char *sweep,
                        const char *plan_flags, const char *tokens_arg, double tokens) {
    char *svg = between(html, "<svg id=\"chart-sweep\"", "</svg>");
    if (!sweep) {
        CHECK(svg == NULL);
        CHECK_CONTAINS(md, "No GPU-count sweep was asked");
        free(svg);
        return;
    }
    CHECK(svg != NULL);
    if (!svg) return;
    int counts[64], n = 0;
    {
        /* "a..b": powers of two from a, then b; "a,b,c": the list */
        char buf[256];
        snprintf(buf, sizeof buf, "%s", sweep);
        char *dots = strstr(buf, "..");
        if (dots) {
            int lo = atoi(buf), hi = atoi(dots + 2);
            for (int c = lo; c <= hi; c *= 2) counts[n++] = c;
            if (counts[n - 1] != hi) counts[n++] = hi;
        } else {
            for (char *t = strtok(buf, ","); t && n < 64; t = strtok(NULL, ",")) counts[n++] = atoi(t);
        }
    }
    ap_json *plan_sweep = NULL;
    if (tokens > 0) {
        char args[1024];
        snprintf(args, sizeof args, "plan %s --gpus %s %s --tokens %s --json --no-cache", model,
                 sweep, plan_flags, tokens_arg);
        plan_sweep = run_json(args);
    }
    long long v = -1;
    CHECK(attr_ll(svg, "data-counts=", &v) && v == n);
    CHECK(attr_ll(svg, "data-time-to-train=", &v) && v == (tokens > 0));
    CHECK_INT(count(svg, "class=\"tick gpus\""), n * (tokens > 0 ? 2 : 1));
    CHECK_CONTAINS(svg, "GPUs (log scale)");
    CHECK_CONTAINS(svg, "throughput (tokens/s)");
    CHECK_CONTAINS(svg, "best plan, tokens/s");
    if (tokens > 0) {
        CHECK_CONTAINS(svg, "time to train (days)");
    } else {
        CHECK_CONTAINS(svg, "needs --tokens");
        CHECK_CONTAINS(md, "Time to train needs `--tokens N`");
    }
    int fitting = 0;
    for (int i = 0; i < n; i++) {
        char args[1024], key[64], want[64], buf[2048], *cells[16];
        snprintf(args, sizeof args, "plan %s --gpus %d %s --json --no-cache", model, counts[i],
                 plan_flags);
        ap_json *j = run_json(args);
        const ap_json *best = j ? ap_json_at(ap_json_get(j, "plans"), 0) : NULL;
        snprintf(key, sizeof key, ">%d</text>", counts[i]);
        CHECK_CONTAINS(svg, key); /* the tick label */
        snprintf(key, sizeof key, "| %d |", counts[i]);
        snprintf(want, sizeof want, "%d", counts[i]);
        int nc = md_row(md, "## GPU-count sweep", want, buf, sizeof buf, cells, 16);
        CHECK_INT(nc, 7);
        if (!best) {
            if (nc >= 2) CHECK_STR(cells[1], "nothing fits");
            CHECK_CONTAINS(svg, "nothing fits</text>");
            snprintf(key, sizeof key, "data-gpus=\"%d\"", counts[i]);
            CHECK(strstr(svg, key) == NULL); /* no point */
            ap_json_free(j);
            continue;
        }
        fitting++;
        double tps = jnum(best, "throughput.tokens_per_s");
        snprintf(key, sizeof key, "data-gpus=\"%d\" data-tokens-per-s=", counts[i]);
        CHECK_NEAR(attr_after(svg, key, "data-tokens-per-s=\""), tps, 1e-12);
        if (nc == 7) {
            CHECK_STR(cells[1], ap_json_string(ap_json_get(best, "label")));
            fmt_unit(jnum(best, "time.step_s"), "s", want, sizeof want);
            CHECK_STR(cells[2], want);
            fmt_unit(tps, "", want, sizeof want);
            CHECK_STR(cells[3], want);
            fmt_unit(jnum(best, "throughput.mfu"), "%", want, sizeof want);
            CHECK_STR(cells[4], want);
            fmt_unit(jnum(best, "memory.device_peak_bytes"), "GiB", want, sizeof want);
            CHECK_STR(cells[5], want);
            if (tokens > 0) {
                const ap_json *row = ap_json_at(ap_json_get(plan_sweep, "sweep"), i);
                double ttt = jnum(row, "time_to_train_s");
                CHECK_NEAR(ttt, tokens / tps, 1e-12);
                snprintf(want, sizeof want, "%.2f", ttt / 86400.0);
                CHECK_STR(cells[6], want);
                snprintf(key, sizeof key, "data-gpus=\"%d\" data-time-to-train-s=", counts[i]);
                CHECK_NEAR(attr_after(svg, key, "data-time-to-train-s=\""), ttt, 1e-12);
            } else {
                CHECK_STR(cells[6], "");
            }
        }
        ap_json_free(j);
    }
    CHECK(attr_ll(svg, "data-points=", &v) && v == fitting);
    CHECK_INT(count(svg, "<circle class=\"sw-pt\""), fitting);
    CHECK_INT(count(svg, "<rect class=\"sw-ttt-pt\""), tokens > 0 ? fitting : 0);
    CHECK(fitting >= 2);
    ap_json_free(plan_sweep);
    free(svg);
}

/* ---- chart 5: memory over one iteration ---------------------------------------------------- */

/* Chart 5 and its table against `autoplan simulate <the best plan's flags> --json`: the worst
 * stage's allocated_peak_bytes, reserved_peak_bytes, device_peak_bytes and peak_op; the peak
 * marked is the highest point of the allocated curve; the capacity line is drawn. */
static void check_sim(const char *html, const char *md, report *r) {
    const char *b = strstr(md, "Best: **");
    char nm[64] = "";
    if (b) CHECK(sscanf(b, "Best: **%63[^*]**", nm) == 1);
    strat *best = find(r, nm);
    CHECK(best != NULL && best->args[0]);
    if (!best || !best->args[0]) return;
    const char *sec = strstr(md, "## Memory over one iteration (simulator)");
    CHECK(sec != NULL);
    const char *cmd = sec ? strstr(sec, "`autoplan simulate ") : NULL;
    CHECK(cmd != NULL);
    if (!cmd) return;
    cmd += strlen("`autoplan ");
    const char *end = strchr(cmd, '`');
    char args[1200];
    snprintf(args, sizeof args, "%.*s", end ? (int)(end - cmd) : 0, cmd);
    char want_args[1200];
    snprintf(want_args, sizeof want_args, "simulate %s", best->args + strlen("estimate "));
    CHECK_STR(args, want_args); /* the best plan, as estimated */
    ap_json *j = run_json(args);
    if (!j) return;
    int w = (int)jnum(j, "worst_stage");
    const ap_json *st = ap_json_at(ap_json_get(j, "stages"), w);
    CHECK(st != NULL);
    char buf[2048], *cells[16], want[64];
    const char *hdr = "| worst_stage |";
    const char *h = strstr(sec, hdr);
    CHECK(h != NULL);
    snprintf(want, sizeof want, "%.0f", jnum(st, "stage"));
    int nc = md_row(sec, hdr, want, buf, sizeof buf, cells, 16);
    CHECK_INT(nc, 8);
    double apk = jnum(st, "allocated_peak_bytes");
    if (nc == 8) {
        snprintf(want, sizeof want, "%.0f", apk);
        CHECK_STR(cells[1], want);
        fmt_unit(apk, "GiB", want, sizeof want);
        CHECK_STR(cells[2], want);
        snprintf(want, sizeof want, "%.0f", jnum(st, "reserved_peak_bytes"));
        CHECK_STR(cells[3], want);
        fmt_unit(jnum(st, "reserved_peak_bytes"), "GiB", want, sizeof want);
        CHECK_STR(cells[4], want);
        fmt_unit(jnum(st, "device_peak_bytes"), "GiB", want, sizeof want);
        CHECK_STR(cells[5], want);
        fmt_unit(jnum(j, "capacity_bytes"), "GiB", want, sizeof want);
        CHECK_STR(cells[6], want);
        CHECK_STR(cells[7], ap_json_string(ap_json_get(st, "peak_op")));
    }
    char *svg = between(html, "<svg id=\"chart-sim\"", "</svg>");
    CHECK(svg != NULL);
    if (svg) {
        long long v = -1;
        CHECK(attr_ll(svg, "data-allocated-peak-bytes=", &v) && (double)v == apk);
        CHECK(attr_ll(svg, "data-reserved-peak-bytes=", &v) &&
              (double)v == jnum(st, "reserved_peak_bytes"));
        CHECK(attr_ll(svg, "data-stage=", &v) && v == (long long)jnum(st, "stage"));
        CHECK_INT(count(svg, "class=\"capacity\""), 1);
        CHECK_INT(count(svg, "<polyline class=\"sim-alloc\""), 1);
        CHECK_INT(count(svg, "<polyline class=\"sim-res\""), 1);
        CHECK_INT(count(svg, "<circle class=\"sim-peak\""), 1);
        CHECK_CONTAINS(svg, ">allocated</text>");
        CHECK_CONTAINS(svg, ">reserved</text>");
        CHECK_CONTAINS(svg, "device memory (GiB)");
        CHECK_CONTAINS(svg, "in execution order");
        char *lab = between(svg, "class=\"peaklabel\"", "</text>");
        CHECK(lab != NULL);
        if (lab) {
            fmt_unit(apk, "GiB", want, sizeof want);
            char peak[96];
            snprintf(peak, sizeof peak, "peak %s GiB allocated", want);
            CHECK_CONTAINS(lab, peak);
            CHECK_CONTAINS(lab, ap_json_string(ap_json_get(st, "peak_op")));
            free(lab);
        }
        /* the marked peak is the allocated curve's highest point (smallest y) */
        double cy = attr_after(svg, "<circle class=\"sim-peak\"", "cy=\"");
        const char *pts = strstr(svg, "<polyline class=\"sim-alloc\" points=\"");
        double ymin = 1e300;
        long long npts = 0;
        CHECK(attr_ll(svg, "data-points=", &v) && v >= 2 && v <= 500);
        if (pts) {
            const char *q = pts + strlen("<polyline class=\"sim-alloc\" points=\"");
            while (*q && *q != '"') {
                char *e1;
                strtod(q, &e1);
                if (*e1 != ',') break;
                double y = strtod(e1 + 1, &e1);
                if (y < ymin) ymin = y;
                npts++;
                q = e1;
                while (*q == ' ') q++;
            }
        }
        CHECK_INT(npts, v);
        CHECK_NEAR(ymin, cy, 1e-9);
        free(svg);
    }
    ap_json_free(j);
}

/* ---- Chromium ------------------------------------------------------------------------------ */

/* Layout in the browser: a measuring page (the report itself has no script) holds report.html
 * in three frames 1000, 1400 and 1600 px wide and, once they have loaded, writes into its own
 * DOM (which --dump-dom returns) what it finds in each: a page or table wider than its column,
 * a chart text outside its chart or overlapping another text (boxes from
 * getBoundingClientRect, 1 px tolerance), a scatter label over a strategy marker, a bar past
 * the end of its axis, fitting bars squeezed into the first half of the axis, or the feasible
 * points of the scatter spanning under a quarter of its width. One line per finding; there
 * must be none. */
static const char *MEASURE_PAGE =
    "<!DOCTYPE html><html><body style=\"margin:0\">"
    "<iframe src=\"report.html\" style=\"display:block;border:0;width:1000px;height:900px\"></iframe>"
    "<iframe src=\"report.html\" style=\"display:block;border:0;width:1400px;height:900px\"></iframe>"
    "<iframe src=\"report.html\" style=\"display:block;border:0;width:1600px;height:900px\"></iframe>"
    "<script>"
    "function measure(doc,out){"
    "function r(e){return e.getBoundingClientRect();}"
    "function ov(a,b,t){return a.left+t<b.right&&b.left+t<a.right&&a.top+t<b.bottom&&b.top+t<a.bottom;}"
    "var W=doc.documentElement.clientWidth;out.push('WIDTH '+W);"
    "if(doc.documentElement.scrollWidth>W+1)out.push('page-overflow '+doc.documentElement.scrollWidth);"
    "var body=r(doc.body);"
    "doc.querySelectorAll('table').forEach(function(t){var p=t.parentElement;"
    " if(p.scrollWidth>p.clientWidth+1||r(t).right>body.right+1)out.push('table-overflow '+(t.id||'?')+' '+Math.round(r(t).width));});"
    "doc.querySelectorAll('svg.chart').forEach(function(svg){var sb=r(svg),boxes=[];"
    " svg.querySelectorAll('text').forEach(function(e){var b=r(e);if(b.width<=0)return;boxes.push([e.textContent,b]);"
    "  if(b.left<sb.left-0.5||b.right>sb.right+0.5||b.top<sb.top-0.5||b.bottom>sb.bottom+0.5)out.push('clip '+svg.id+' \"'+e.textContent+'\"');});"
    " for(var a=0;a<boxes.length;a++)for(var c=a+1;c<boxes.length;c++)"
    "  if(ov(boxes[a][1],boxes[c][1],1))out.push('overlap '+svg.id+' \"'+boxes[a][0]+'\" \"'+boxes[c][0]+'\"');"
    " svg.querySelectorAll('text.stratlabel').forEach(function(l){"
    "  svg.querySelectorAll('g.strat circle,g.strat path.offscale').forEach(function(m){"
    "   if(!m.closest('g.key')&&ov(r(m),r(l),1))out.push('label-on-marker '+svg.id+' \"'+l.textContent+'\"');});});"
    " var x0=parseFloat(svg.getAttribute('data-plot-x0')),x1=parseFloat(svg.getAttribute('data-plot-x1'));"
    " if(!isNaN(x0)){var fit=0;svg.querySelectorAll('g.bar').forEach(function(g){var e=x0;"
    "  g.querySelectorAll('rect.seg').forEach(function(q){var bb=q.getBBox();if(bb.x+bb.width>e)e=bb.x+bb.width;});"
    "  if(e>x1+0.5)out.push('bar-past-axis '+svg.id+' '+g.getAttribute('data-strategy'));"
    "  if(g.getAttribute('data-fits')=='1'&&e>fit)fit=e;});"
    "  if(fit>0&&fit<x0+0.5*(x1-x0))out.push('squeezed '+svg.id+' '+Math.round(fit-x0)+' of '+Math.round(x1-x0));}"
    " var pl=svg.getAttribute('data-plot');if(pl){var P=pl.split(' ').map(parseFloat),lo=1e9,hi=-1e9;"
    "  svg.querySelectorAll('g.samples circle,g.fronts rect').forEach(function(q){var bb=q.getBBox();"
    "   lo=Math.min(lo,bb.x);hi=Math.max(hi,bb.x+bb.width);});"
    "  if(hi>lo&&hi-lo<0.25*(P[2]-P[0]))out.push('squeezed '+svg.id+' '+Math.round(hi-lo)+' of '+Math.round(P[2]-P[0]));"
    "  svg.querySelectorAll('g.strat').forEach(function(g){if(g.closest('g.key'))return;var bb=g.firstElementChild.getBBox();"
    "   var cx=bb.x+bb.width/2,cy=bb.y+bb.height/2;"
    "   if(cx<P[0]-0.5||cx>P[2]+0.5||cy<P[1]-0.5||cy>P[3]+0.5)out.push('marker-outside '+g.getAttribute('data-strategy'));});}"
    "});}"
    "window.addEventListener('load',function(){var out=[];"
    " document.querySelectorAll('iframe').forEach(function(f){"
    "  try{measure(f.contentDocument,out);}catch(e){out.push('error '+e);}});"
    " var pre=document.createElement('pre');pre.id='measure';"
    " pre.textContent='MEASURED\\n'+out.join('\\n')+'\\nEND';document.body.appendChild(pre);});"
    "</script></body></html>";

static void check_layout(const char *dir) {
    char path[2048], cmd[8192];
    snprintf(path, sizeof path, "%s/measure.html", dir);
    CHECK_INT(tl_write(path, MEASURE_PAGE), 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && timeout 120 chromium --headless --no-sandbox "
             "--disable-gpu --hide-scrollbars --allow-file-access-from-files "
             "--virtual-time-budget=10000 --user-data-dir='%s/chrome' --window-size=1700,1000 "
             "--dump-dom 'file://%s/measure.html' >'%s/measure.out' 2>/dev/null", dir, dir, dir, dir);
    CHECK_INT(system(cmd), 0);
    snprintf(path, sizeof path, "%s/measure.out", dir);
    char *dom = tl_read(path);
    char *res = dom ? between(dom, "<pre id=\"measure\">MEASURED\n", "END") : NULL;
    CHECK(res != NULL); /* the script ran */
    if (res) {
        /* three frames measured at their widths, then nothing else */
        int widths[3] = {0, 0, 0}, nw = 0, bad = 0;
        for (char *line = strtok(res + strlen("<pre id=\"measure\">MEASURED\n"), "\n"); line;
             line = strtok(NULL, "\n")) {
            if (!strncmp(line, "WIDTH ", 6) && nw < 3) widths[nw++] = atoi(line + 6);
            else {
                fprintf(stderr, "  layout (frame %d px): %s\n", nw ? widths[nw - 1] : 0, line);
                bad++;
            }
        }
        CHECK_INT(nw, 3);
        CHECK_INT(widths[0], 1000);
        CHECK_INT(widths[1], 1400);
        CHECK_INT(widths[2], 1600);
        CHECK_INT(bad, 0);
    }
    free(res);
    free(dom);
}

static int have_chromium(void) { return system("command -v chromium >/dev/null 2>&1") == 0; }

static void check_chromium(const char *dir, const report *r) {
    char cmd[8192], path[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && timeout 120 chromium --headless --no-sandbox "
             "--disable-gpu --user-data-dir='%s/chrome' --dump-dom 'file://%s/report.html' "
             ">'%s/dom.html' 2>/dev/null", dir, dir, dir, dir);
    CHECK_INT(system(cmd), 0);
    snprintf(path, sizeof path, "%s/dom.html", dir);
    char *dom = tl_read(path);
    CHECK(dom != NULL);
    if (dom) {
        /* the parsed document keeps the three charts with all their elements */
        check_charts(dom, r);
        free(dom);
    }
    snprintf(cmd, sizeof cmd, "cd '%s' && timeout 120 chromium --headless --no-sandbox "
             "--disable-gpu --user-data-dir='%s/chrome' --hide-scrollbars --window-size=1100,2400 "
             "--screenshot='%s/shot.png' 'file://%s/report.html' >/dev/null 2>&1", dir, dir, dir, dir);
    CHECK_INT(system(cmd), 0);
    snprintf(path, sizeof path, "%s/shot.png", dir);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f) {
        unsigned char sig[8];
        CHECK(fread(sig, 1, 8, f) == 8 && !memcmp(sig, "\x89PNG\r\n\x1a\n", 8));
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fclose(f);
        /* a uniform 1100x2400 page compresses to a few kB; charts and tables give far more */
        if (sz < 40000) fprintf(stderr, "screenshot only %ld bytes: blank?\n", sz);
        CHECK(sz > 40000);
    }
    check_layout(dir);
}

/* compare's topN are plan's top N: the same plans (stage split included, via the reproduce
 * command's --stage-layers/--stage-recompute) with the same step time and peak (1e-12) */
static void check_top_as_plan(const report *r, const char *model, int gpus, const char *plan_flags) {
    int ntop = 0;
    for (int i = 0; i < r->n; i++)
        if (!strncmp(r->s[i].name, "top", 3) && atoi(r->s[i].name + 3) > ntop)
            ntop = atoi(r->s[i].name + 3);
    if (ntop == 0) return;
    char args[1024];
    snprintf(args, sizeof args, "plan %s --gpus %d %s --top %d --json --no-cache", model, gpus,
             plan_flags, ntop);
    ap_json *j = run_json(args);
    const ap_json *plans = j ? ap_json_get(j, "plans") : NULL;
    for (int i = 0; i < r->n && plans; i++) {
        const strat *s = &r->s[i];
        if (strncmp(s->name, "top", 3) != 0 || !s->est) continue;
        const ap_json *pe = ap_json_at(plans, atoi(s->name + 3) - 1);
        CHECK(pe != NULL);
        if (!pe) continue;
        double a = jnum(pe, "time.step_s"), b = jnum(s->est, "time.step_s");
        double ma = jnum(pe, "memory.device_peak_bytes"), mb = jnum(s->est, "memory.device_peak_bytes");
        if (fabs(a - b) > 1e-12 * a)
            fprintf(stderr, "  %s: compare %.6f s, plan %.6f s (%s)\n", s->name, b, a,
                    ap_json_string(ap_json_get(pe, "label")));
        CHECK_NEAR(b, a, 1e-12 * a);
        CHECK_NEAR(mb, ma, 1e-12 * ma);
    }
    ap_json_free(j);
}

/* ---- driver -------------------------------------------------------------------------------- */

/* compare MODEL --gpus (sweep, or the single count) [--tokens] plan_flags extra; plan_flags are
 * the flags `autoplan plan` takes too (for the sweep's reference runs) */
static void run_case(const char *model, int gpus, const char *sweep, const char *tokens_arg,
                     double tokens, const char *plan_flags, const char *extra, int want_illegal,
                     int want_nofit) {
    const char *dir = tl_tmpdir();
    char d[512], model_gpus[512];
    snprintf(d, sizeof d, "%s", dir);
    snprintf(model_gpus, sizeof model_gpus, "%s --gpus %d", model, gpus);
    char args[2048];
    char gv[256];
    if (sweep) snprintf(gv, sizeof gv, "%s", sweep);
    else snprintf(gv, sizeof gv, "%d", gpus);
    snprintf(args, sizeof args, "compare %s --gpus %s%s%s %s %s --out '%s/out'", model, gv,
             tokens_arg ? " --tokens " : "", tokens_arg ? tokens_arg : "", plan_flags, extra, d);
    char *out = NULL, *err = NULL;
    int rc = tl_run(args, &out, &err);
    CHECK_INT(rc, 0);
    if (rc != 0) fprintf(stderr, "%s\n", err ? err : "");
    CHECK_CONTAINS(out ? out : "", "wrote");
    free(out);
    free(err);
    char path[1024];
    snprintf(path, sizeof path, "%s/out/report.md", d);
    char *md = tl_read(path);
    snprintf(path, sizeof path, "%s/out/report.html", d);
    char *html = tl_read(path);
    snprintf(path, sizeof path, "%s/out/plans.csv", d);
    char *csv = tl_read(path);
    CHECK(md && html && csv);
    static report r;
    memset(&r, 0, sizeof r);
    r.sweep = sweep != NULL;
    if (md) check_markdown(md, &r);
    CHECK(r.n >= 2);
    if (want_illegal) CHECK(r.nillegal >= 1);
    if (want_nofit) CHECK(r.nnofit >= 1);
    if (csv) check_csv(csv, &r, model_gpus);
    check_top_as_plan(&r, model, gpus, plan_flags);
    if (html) check_html(html, &r);
    if (html && md) check_sweep(html, md, model, sweep, plan_flags, tokens_arg, tokens);
    if (html && md) check_sim(html, md, &r);
    if (html) {
        snprintf(path, sizeof path, "%s/out", d);
        if (have_chromium()) check_chromium(path, &r);
        else fprintf(stderr, "chromium not installed: headless rendering checks skipped\n");
    }
    for (int i = 0; i < r.n; i++) ap_json_free(r.s[i].est);
    free(md);
    free(html);
    free(csv);
    snprintf(path, sizeof path, "rm -rf '%s'", d);
    CHECK_INT(system(path), 0);
}

static void fault_paths(void) {
    char *out = NULL, *err = NULL;
    /* --gpus errors are plan's, word for word (one parser) */
    const char *bad[] = {"8..", "64..8", "8,,16"};
    for (int i = 0; i < 3; i++) {
        char a1[256], a2[256];
        char *o2 = NULL, *e2 = NULL;
        snprintf(a1, sizeof a1, "compare examples/models/llama-2-7b.json --gpus %s --out /tmp/x",
                 bad[i]);
        snprintf(a2, sizeof a2, "plan examples/models/llama-2-7b.json --gpus %s --no-cache", bad[i]);
        CHECK_INT(tl_run(a1, &out, &err), 2);
        CHECK_INT(tl_run(a2, &o2, &e2), 2);
        CHECK_CONTAINS(err ? err : "", "--gpus: ");
        CHECK_STR(err ? err : "", e2 ? e2 : "");
        free(out); free(err); free(o2); free(e2);
    }
    int rc = tl_run("compare examples/models/llama-2-7b.json --gpus 8", &out, &err);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(err ? err : "", "--out");
    free(out); free(err);
    rc = tl_run("compare examples/models/llama-2-7b.json --gpus 8 --strategies bogus --out /tmp/x",
                &out, &err);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(err ? err : "", "unknown strategy 'bogus'");
    /* one line: the default batch's note waits until every flag has been read */
    CHECK(err && strchr(err, '\n') == strrchr(err, '\n'));
    CHECK(err && !strstr(err, "global batch"));
    free(out); free(err);
    rc = tl_run("compare examples/models/llama-2-7b.json --gpus 8 --strategies tp=x --out /tmp/x",
                &out, &err);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(err ? err : "", "--strategies tp");
    free(out); free(err);
    rc = tl_run("compare examples/models/llama-2-7b.json --gpus 8 --strategies tp=2,tp=4 "
                "--out /tmp/x", &out, &err);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(err ? err : "", "given twice");
    free(out); free(err);
    /* an empty item, a strategy twice, two topN: refused, not run twice or skipped */
    const char *lists[][2] = {{"tp=2,,pp=2", "empty item"}, {"ddp,ddp", "listed twice"},
                              {"top1,top3", "one topN"}};
    for (int i = 0; i < 3; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "compare examples/models/llama-2-7b.json --gpus 8 "
                 "--strategies '%s' --out /tmp/x", lists[i][0]);
        rc = tl_run(cmd, &out, &err);
        CHECK_INT(rc, 2);
        CHECK_CONTAINS(err ? err : "", lists[i][1]);
        free(out); free(err);
    }
}

/* ap_report_pick_best ranks as `plan` does (search.h "Ties"): the simplest fitting strategy
 * within 5% of the fastest, the faster when equally simple; a faster strategy that does not
 * fit is not a candidate. Worked by hand on copies of one estimate. */
/* Llama-2-7B on 8 A100s, dp 8, ZeRO-1, 64 x 4096 tokens: the estimate both tests below copy
 * (m is loaded into *m); 0 when it cannot be made. */
static int dp8_estimate(ap_model *m, ap_estimate *e) {
    ap_cluster c;
    ap_err err;
    if (ap_model_load("examples/models/llama-2-7b.json", m, &err) != AP_OK) return 0;
    ap_cluster_from_gpu(ap_gpu_find("a100-sxm4-80g"), 8, &c);
    ap_plan p;
    ap_plan_init(&p);
    p.dp = 8; p.mbs = 1; p.gbs = 64; p.grad_accum = 8; p.seq = 4096; p.zero = 1;
    return ap_estimate_plan(m, &c, &p, NULL, e, &err) == AP_OK;
}

static void test_pick_best(void) {
    ap_model m;
    static ap_estimate e;
    if (!dp8_estimate(&m, &e)) { CHECK(0); return; }
    CHECK(e.fits && ap_estimate_confidence(&e) == AP_CONF_FITS);
    static ap_report_strategy st[4];
    ap_report r;
    memset(&r, 0, sizeof r);
    r.model = &m;
    r.strat = st;
    r.nstrat = 4;
    for (int i = 0; i < 4; i++) st[i].status = AP_REPORT_OK, st[i].est = e;
    st[0].est.plan.zero = 3, st[0].est.time.step_s = 100;  /* fastest, ZeRO-3 */
    st[1].est.plan.zero = 0, st[1].est.time.step_s = 104;  /* ZeRO-0, 4% slower: a tie */
    st[2].est.plan.zero = 0, st[2].est.time.step_s = 103;  /* ZeRO-0, faster of the two */
    st[3].status = AP_REPORT_NOFIT, st[3].est.time.step_s = 50;
    CHECK_INT(ap_report_pick_best(&r), 2);
    st[2].est.time.step_s = st[1].est.time.step_s = 106;   /* beyond the margin */
    CHECK_INT(ap_report_pick_best(&r), 0);
    st[0].status = st[1].status = st[2].status = AP_REPORT_ILLEGAL;
    CHECK_INT(ap_report_pick_best(&r), -1);
}

/* plans.csv streamed (output/report_csv.c): the same bytes whatever the thread count and
 * however it is cut into pieces or on a thread of its own, the header alone for no rows, a
 * writer's failure returned with no piece handed over after it, and a cancel. 40,000 rows
 * (enough for several threads and chunks), copies of one estimate's row with distinct step
 * times and micro-batches. */
typedef struct {
    ap_strbuf text;
    int calls, fail_at;
} csv_sink_state;

static ap_status csv_collect(void *ctx, const void *data, size_t len, ap_err *err) {
    csv_sink_state *s = ctx;
    if (++s->calls == s->fail_at) return ap_err_set(err, AP_ERR_IO, "disk full (test)");
    ap_strbuf_put(&s->text, data, len);
    return AP_OK;
}

static void test_csv_stream(void) {
    ap_model m;
    ap_err err;
    static ap_estimate e;
    if (!dp8_estimate(&m, &e)) { CHECK(0); return; }
    ap_report r;
    memset(&r, 0, sizeof r);
    r.nrows = 40000;
    r.rows = calloc((size_t)r.nrows, sizeof *r.rows);
    if (!r.rows) { CHECK(0); return; }
    for (int64_t i = 0; i < r.nrows; i++) {
        ap_report_row_from_estimate(&e, &r.rows[i]);
        r.rows[i].step_s = 1 + (double)i / 7;
        r.rows[i].mbs = 1 + (int)(i % 13);
    }
    r.threads = 1;
    char *ref = NULL;
    size_t ref_len = 0;
    CHECK_INT(ap_report_csv(&r, &ref, &ref_len, &err), AP_OK);
    int lines = 0;
    for (size_t k = 0; ref && k < ref_len; k++) lines += ref[k] == '\n';
    CHECK_INT(lines, 40001);
    for (int t = 1; t <= 9; t += 4) {
        r.threads = t;
        csv_sink_state s = {{0}, 0, 0};
        CHECK_INT(ap_report_csv_write(&r, csv_collect, &s, &err), AP_OK);
        CHECK(s.calls > 2);
        CHECK(ref && s.text.len == ref_len && !memcmp(s.text.buf, ref, ref_len));
        ap_strbuf_free(&s.text);
        csv_sink_state f = {{0}, 0, 3};
        CHECK_INT(ap_report_csv_write(&r, csv_collect, &f, &err), AP_ERR_IO);
        CHECK_INT(f.calls, 3);
        CHECK_CONTAINS(err.msg, "disk full (test)");
        ap_strbuf_free(&f.text);
    }
    /* on a thread of its own: the same bytes; a writer's failure comes back from finish; a
     * cancel returns AP_OK (the caller has its own error) */
    r.threads = 2;
    csv_sink_state a = {{0}, 0, 0}, f = {{0}, 0, 2};
    ap_report_csv_job *job = NULL;
    CHECK_INT(ap_report_csv_start(&r, csv_collect, &a, &job, &err), AP_OK);
    CHECK_INT(ap_report_csv_finish(job, 0, &err), AP_OK);
    CHECK(ref && a.text.len == ref_len && !memcmp(a.text.buf, ref, ref_len));
    CHECK_INT(ap_report_csv_start(&r, csv_collect, &f, &job, &err), AP_OK);
    CHECK_INT(ap_report_csv_finish(job, 0, &err), AP_ERR_IO);
    CHECK_INT(f.calls, 2);
    ap_strbuf_free(&a.text);
    ap_strbuf_free(&f.text);
    csv_sink_state k = {{0}, 0, 0};
    CHECK_INT(ap_report_csv_start(&r, csv_collect, &k, &job, &err), AP_OK);
    CHECK_INT(ap_report_csv_finish(job, 1, &err), AP_OK);
    CHECK(k.text.len <= ref_len && (!k.text.len || !memcmp(k.text.buf, ref, k.text.len)));
    ap_strbuf_free(&k.text);
    int64_t n = r.nrows;
    r.nrows = 0;
    csv_sink_state h = {{0}, 0, 0};
    CHECK_INT(ap_report_csv_write(&r, csv_collect, &h, &err), AP_OK);
    CHECK_INT(h.calls, 1);
    const char *nl = ref ? strchr(ref, '\n') : NULL;
    CHECK(nl && h.text.len == (size_t)(nl - ref + 1) && !memcmp(h.text.buf, ref, h.text.len));
    ap_strbuf_free(&h.text);
    r.nrows = n;
    free(ref);
    free(r.rows);
}

/* ---- plans.csv past AP_REPORT_MAX_ROWS ------------------------------------------------------
 * Past AP_REPORT_MAX_ROWS feasible plans the enumeration keeps the fastest in a heap: its rows
 * are the first AP_REPORT_MAX_ROWS of every feasible plan sorted by (step, device memory), in
 * that order. gpt-oss-20b on 64 A100s meets more than that. */
typedef struct {
    double *step, *peak;
    int64_t n, cap;
    int oom;
} all_feasible;

static void note_feasible(void *ctx, const ap_estimate *e) {
    all_feasible *a = ctx;
    if (!e->fits || a->oom) return;
    if (a->n == a->cap) {
        int64_t cap = a->cap ? 2 * a->cap : 65536;
        double *s = realloc(a->step, (size_t)cap * sizeof *s);
        if (s) a->step = s;
        double *p = s ? realloc(a->peak, (size_t)cap * sizeof *p) : NULL;
        if (p) a->peak = p;
        if (!s || !p) {
            a->oom = 1;
            return;
        }
        a->cap = cap;
    }
    a->step[a->n] = e->time.step_s;
    a->peak[a->n++] = e->device_peak_bytes;
}

static const all_feasible *cmp_ctx;
static int by_step_peak(const void *x, const void *y) {
    int64_t i = *(const int64_t *)x, j = *(const int64_t *)y;
    const all_feasible *a = cmp_ctx;
    if (a->step[i] != a->step[j]) return a->step[i] < a->step[j] ? -1 : 1;
    return (a->peak[i] > a->peak[j]) - (a->peak[i] < a->peak[j]);
}

static void test_rows_kept(void) {
    ap_request rq;
    ap_request_init(&rq);
    rq.model = "examples/models/gpt-oss-20b.json";
    rq.gpus.given = 1;
    rq.gpus.v = 64;
    static ap_resolved r;
    ap_err err = {{0}};
    if (ap_request_resolve(&rq, AP_REQUEST_SEARCH, &r, &err) != AP_OK) {
        fprintf(stderr, "rows kept: %s\n", err.msg);
        CHECK(0);
        return;
    }
    all_feasible a = {0};
    int64_t evaluated = 0;
    int capped = 0;
    CHECK(ap_report_each_plan(&r.model, &r.cluster, &r.search, AP_REPORT_MAX_EVALS, note_feasible,
                              &a, &evaluated, &capped, &err) == AP_OK);
    CHECK(!a.oom && !capped);
    CHECK(a.n > AP_REPORT_MAX_ROWS);
    ap_report rep;
    memset(&rep, 0, sizeof rep);
    CHECK(ap_report_enumerate(&r.model, &r.cluster, &r.search, &rep, &err) == AP_OK);
    CHECK_INT(rep.fit, a.n);
    CHECK_INT(rep.nrows, AP_REPORT_MAX_ROWS);
    int64_t *ord = malloc((size_t)(a.n > 0 ? a.n : 1) * sizeof *ord);
    if (ord && rep.nrows == AP_REPORT_MAX_ROWS && a.n > AP_REPORT_MAX_ROWS) {
        for (int64_t i = 0; i < a.n; i++) ord[i] = i;
        cmp_ctx = &a;
        qsort(ord, (size_t)a.n, sizeof *ord, by_step_peak);
        int64_t bad = 0;
        for (int64_t i = 0; i < rep.nrows; i++)
            bad += rep.rows[i].step_s != a.step[ord[i]] ||
                   rep.rows[i].device_peak_bytes != a.peak[ord[i]];
        CHECK_INT(bad, 0);
    }
    free(ord);
    free(a.step);
    free(a.peak);
    ap_report_free(&rep);
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    if (chdir(tl_srcdir) != 0) {
        fprintf(stderr, "cannot chdir to %s\n", tl_srcdir);
        return 1;
    }
    test_pick_best();
    test_csv_stream();
    test_rows_kept();
    /* defaults: top 5 and every baseline; DDP of a 7B model does not fit in 80 GB; no sweep */
    run_case("examples/models/llama-2-7b.json", 8, NULL, NULL, 0, "", "", 0, 1);
    /* an illegal spec (tp=3 on 8 GPUs), baselines that do not fit, explicit batch; a sweep
     * 8..32 (powers of two) with the time to train 2T tokens */
    run_case("examples/models/llama-2-70b.json", 8, "8..32", "2T", 2e12, "--gbs 64",
             "--strategies 'top2,ddp,zero3,megatron,tp=3;tp=4,pp=2'", 1, 1);
    /* a list sweep without --tokens: tokens/s only, the time to train asks for --tokens; at
     * 128 GPUs plan's answer is an uneven pipeline split (the search's re-split): 64655 tokens/s
     * against 64497 with uniform stages when this was written; on 4 GPUs nothing fits */
    run_case("examples/models/llama-3-70b.json", 64, "64,128,4", NULL, 0, "",
             "--strategies top1,zero3", 0, 0);
    /* compared on 128 GPUs, where plan's best is an uneven split: compare's top2 are plan's
     * top 2, split included (check_top_as_plan) */
    run_case("examples/models/llama-3-70b.json", 128, NULL, NULL, 0, "",
             "--strategies top2,megatron", 0, 0);
    fault_paths();
    return tl_finish();
}
