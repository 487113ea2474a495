/*
 * test_trust.c - answers a user can trust (issue 14): one test per item, each of which failed on
 * the code before its fix (run this test with an older autoplan binary as the second argument to
 * see it). The library halves (the escaper, the result check) are tested here too.
 *
 *   item01_cache_key            a cached answer is never one for other inputs
 *   item02_cached_results       cached/imported rows are checked as a fresh plan, bad ones searched
 *   item03_hostile_names        user text cannot escape its place in a generated file or terminal
 *   item04_non_regular_targets  FIFOs, symlinks and devices are refused as outputs; '-' is stdout
 *   item05_output_sets          the files of one run land together; no temporary files survive
 *   item06_stdout_errors        a failed write to stdout is exit 1
 *   item07_out_with_sweeps      --out with a sweep writes DIR/gpus-N/ per count
 *   item07_sweep_rows_then_single  a sweep's nothing-fits row answers a single count in full
 *   item11_event_bound          the simulator refuses a run over its event budget
 *   item12_undefined_behaviour  overflow and float-to-int cases are refused, not wrapped
 *   item13_silent_inputs        inputs accepted silently before are refused with one line
 *   item14_exit_codes           one exit-code rule for the same mistake in every command
 *   item15_messages             the messages of item 15
 * The cache items (8, 9, 10) are in test_db.c.
 */
#define _DEFAULT_SOURCE /* mknod, makedev */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autoplan/json.h"
#include "autoplan/text.h"
#include "testlib.h"

static char tmp[512]; /* this run's scratch directory */

static const char *in_tmp(const char *name) {
    static char bufs[4][1024];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", tmp, name);
    return b;
}

static int run(const char *args, char **out, char **err) {
    char *o = NULL, *e = NULL;
    int rc = tl_run(args, &o, &e);
    if (out) *out = o; else free(o);
    if (err) *err = e; else free(e);
    return rc;
}

static int runf(char **out, char **err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int runf(char **out, char **err, const char *fmt, ...) {
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return run(args, out, err);
}

/* 1 when text has a byte a terminal would act on: controls but newline, DEL, ESC, C1 (UTF-8
 * C2 80-9F). */
static int has_control(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        if ((*p < 0x20 && *p != '\n') || *p == 0x7f) return 1;
        if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F) return 1;
    }
    return 0;
}

static const char *LLAMA = "examples/models/llama-2-7b.json";

/* ---- item 1: the cache key ------------------------------------------------------------------ */

static void item01_cache_key(void) {
    char *out = NULL, *err = NULL;
    const char *db = in_tmp("key.db");
    const char *m = tl_path(LLAMA);
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --db '%s'", m, db), 0);
    /* --offload-optimizer 0 pins no offload: not the default run's off-opt100% answer */
    CHECK_INT(runf(&out, &err, "'%s' --gpus 8 --offload-optimizer 0 --db '%s' --json", m, db), 0);
    ap_err e;
    ap_json *j = out ? ap_json_parse(out, strlen(out), "plan --json", &e) : NULL;
    CHECK(j != NULL);
    CHECK(!ap_json_bool(ap_json_get(j, "cached")));
    const ap_json *plans = ap_json_get(j, "plans");
    CHECK(ap_json_size(plans) > 0);
    for (int i = 0; i < ap_json_size(plans); i++)
        CHECK(ap_json_number(ap_json_get(ap_json_get(ap_json_get(ap_json_at(plans, i), "plan"),
                                                     "offload"), "optimizer")) == 0);
    ap_json_free(j);
    free(out);
    free(err);
    CHECK_INT(runf(&out, NULL, "'%s' --gpus 8 --offload-params 0 --db '%s'", m, db), 0);
    CHECK(out && !strstr(out, "answered from the cache"));
    free(out);
    /* --recompute-layers 2 after --recompute full */
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --recompute full --db '%s'", m, db), 0);
    CHECK_INT(runf(&out, NULL, "'%s' --gpus 8 --recompute full --recompute-layers 2 --db '%s'", m,
                   db), 0);
    CHECK(out && !strstr(out, "answered from the cache"));
    free(out);
    /* and the same request again is a hit */
    CHECK_INT(runf(&out, NULL, "'%s' --gpus 8 --recompute full --recompute-layers 2 --db '%s'", m,
                   db), 0);
    CHECK(out && strstr(out, "answered from the cache"));
    free(out);
}

/* ---- item 2: cached and imported results are checked ------------------------------------------- */

/* The export of a database with one row, its result replaced by `result` (a JSON value). */
static char *export_with(const char *export_text, const ap_json *result) {
    ap_err e;
    ap_json *x = ap_json_parse(export_text, strlen(export_text), "export", &e);
    if (!x) return NULL;
    ap_json *row = ap_json_at(ap_json_get(x, "plans"), 0);
    char *text = ap_json_print(result, 0);
    ap_json_free(ap_json_detach(row, "result_json"));
    ap_json_add_string(row, "result_json", text ? text : "");
    free(text);
    char *s = ap_json_print(x, 1);
    ap_json_free(x);
    return s;
}

/* Plant `result` as the cached answer of `args` in a fresh database; run args and return the
 * exit code, stdout and stderr. */
static int with_planted(const char *export_text, const ap_json *result, const char *args,
                        char **out, char **err) {
    static int k;
    char name[64];
    snprintf(name, sizeof name, "planted%d.db", k);
    char *db = strdup(in_tmp(name));
    snprintf(name, sizeof name, "planted%d.json", k++);
    const char *file = in_tmp(name);
    char *text = export_with(export_text, result);
    CHECK(text && tl_write(file, text) == 0);
    free(text);
    CHECK_INT(runf(NULL, NULL, "db import '%s' --db '%s'", file, db), 0);
    int rc = runf(out, err, "%s --db '%s'", args, db);
    free(db);
    return rc;
}

static ap_json *field_path(ap_json *o, const char *a, const char *b, const char *c) {
    o = ap_json_get(o, a);
    if (b) o = ap_json_get(o, b);
    if (c) o = ap_json_get(o, c);
    return o;
}

static void set_number(ap_json *obj, const char *key, double v) {
    ap_json_free(ap_json_detach(obj, key));
    ap_json_add_number(obj, key, v);
}

static void item02_cached_results(void) {
    const char *m = tl_path("examples/models/tiny-gpt.json");
    const char *db = in_tmp("fresh.db");
    char *fresh = NULL, *exported = NULL, *out = NULL, *err = NULL, args[2048];
    snprintf(args, sizeof args, "'%s' --gpus 8 --gbs 64 --top 3", m);
    CHECK_INT(runf(&fresh, NULL, "%s --db '%s'", args, db), 0);
    CHECK_INT(runf(&exported, NULL, "db export --db '%s'", db), 0);
    ap_err e;
    ap_json *x = exported ? ap_json_parse(exported, strlen(exported), "export", &e) : NULL;
    CHECK(x != NULL);
    const char *rj = ap_json_string(ap_json_get(ap_json_at(ap_json_get(x, "plans"), 0),
                                                "result_json"));
    ap_json *good = rj ? ap_json_parse(rj, strlen(rj), "result", &e) : NULL;
    CHECK(good != NULL);
    if (!good || !fresh) goto done;
    /* the ranking: from plan 1 to the blank line after the table */
    char fresh_table[4096] = "";
    const char *t1 = strstr(fresh, "\n  1  ");
    const char *t2 = t1 ? strstr(t1 + 1, "\n\n") : NULL;
    if (t1 && t2 && (size_t)(t2 - t1) < sizeof fresh_table)
        memcpy(fresh_table, t1, (size_t)(t2 - t1));
    CHECK(fresh_table[0] != '\0');
    /* each variant: a warning, the fresh answer, exit 0, and the row repaired */
    for (int v = 0; v < 9; v++) {
        ap_json *bad = ap_json_duplicate(good);
        ap_json *p0 = ap_json_at(ap_json_get(bad, "plans"), 0);
        const char *what = "";
        switch (v) {
        case 0: set_number(ap_json_get(p0, "plan"), "tp", -2147483648.0); what = "tp INT_MIN"; break;
        case 1: set_number(ap_json_get(p0, "plan"), "dp", 0); what = "dp 0"; break;
        case 2:
            ap_json_free(ap_json_detach(p0, "label"));
            ap_json_add_string(p0, "label", "\x1b[2J\x1b[Hcleared");
            what = "escape sequence label";
            break;
        case 3: set_number(field_path(p0, "time", NULL, NULL), "step_s", 1.0); what = "forged time"; break;
        case 4: {
            ap_json *plans = ap_json_get(bad, "plans");
            for (int i = 0; i < 2000; i++) ap_json_push(plans, ap_json_duplicate(p0));
            what = "2000 plans for --top 3";
            break;
        }
        case 5: set_number(ap_json_get(p0, "plan"), "mbs", 3); what = "mbs not dividing"; break;
        case 6: {
            /* the first two swapped: a slower plan, no simpler, above a faster one (the tie
             * rule of search.h orders them by step time) */
            ap_json *plans = ap_json_detach(bad, "plans"), *swapped = ap_json_new_array();
            ap_json_push(swapped, ap_json_duplicate(ap_json_at(plans, 1)));
            ap_json_push(swapped, ap_json_duplicate(ap_json_at(plans, 0)));
            for (int i = 2; i < ap_json_size(plans); i++)
                ap_json_push(swapped, ap_json_duplicate(ap_json_at(plans, i)));
            ap_json_free(plans);
            ap_json_add(bad, "plans", swapped);
            what = "ranking against the tie rule";
            break;
        }
        case 7:
            /* a 'fastest' plan slower than the first one shown (the old key removed first: a
               duplicate key is refused at import, before the check this variant is for) */
            ap_json_free(ap_json_detach(bad, "fastest"));
            ap_json_add(bad, "fastest", ap_json_duplicate(ap_json_at(ap_json_get(bad, "plans"), 1)));
            what = "forged fastest";
            break;
        case 8:
            /* an MFU of 500%: the TFLOP/s, MFU and HFU no longer agree */
            set_number(field_path(p0, "throughput", NULL, NULL), "mfu", 5.0);
            what = "forged mfu";
            break;
        }
        int rc = with_planted(exported, bad, args, &out, &err);
        if (rc != 0 || !out || !strstr(out, fresh_table))
            fprintf(stderr, "item 2 variant '%s': rc %d\nstdout:\n%s\nstderr:\n%s\n", what, rc,
                    out ? out : "", err ? err : "");
        CHECK_INT(rc, 0);
        CHECK(out && strstr(out, fresh_table) != NULL); /* the fresh ranking */
        CHECK(out && !strstr(out, "answered from the cache"));
        CHECK(err && strstr(err, "not used"));
        CHECK(out && !has_control(out));
        free(out);
        free(err);
        ap_json_free(bad);
    }
    /* a planted row is replaced by the fresh result: the next run is a hit again */
    {
        ap_json *bad = ap_json_duplicate(good);
        set_number(ap_json_get(ap_json_at(ap_json_get(bad, "plans"), 0), "plan"), "tp", 0);
        const char *pdb = in_tmp("planted-repair.db");
        const char *file = in_tmp("planted-repair.json");
        char *text = export_with(exported, bad);
        CHECK(text && tl_write(file, text) == 0);
        free(text);
        CHECK_INT(runf(NULL, NULL, "db import '%s' --db '%s'", file, pdb), 0);
        /* plan.json and configs from a planted row: never a division by zero or tp 0 */
        CHECK_INT(runf(NULL, &err, "%s --db '%s' --out '%s' --emit all", args, pdb,
                       in_tmp("planted-out")), 0);
        free(err);
        char *pj = tl_read(in_tmp("planted-out/plan.json"));
        CHECK(pj && !strstr(pj, "\"tp\": 0") && !strstr(pj, "-2147483648"));
        free(pj);
        CHECK_INT(runf(&out, NULL, "%s --db '%s'", args, pdb), 0);
        CHECK(out && strstr(out, "answered from the cache"));
        free(out);
        ap_json_free(bad);
    }
done:
    ap_json_free(good);
    ap_json_free(x);
    free(fresh);
    free(exported);
}

/* ---- item 3: hostile names ------------------------------------------------------------------ */

static const char *const hostile[] = {
    "x\ntouch PWNED\n#",
    "q\"uo'te\\",
    "$(touch PWNED)",
    "`touch PWNED`",
    "*/ --> </script><script>alert(1)</script><!--",
    "nul\\u0000after", /* JSON escape: the string ends at the NUL */
    "esc\\u001b[2J\\u001b]0;title\\u0007\\u009b31m\\r",
    "line\\u2028sep\\u2029par\\u0085nel\\u202ertl",
};

/* JSON text of a name: the entries above are JSON string bodies except the first five, which
 * need their quotes and backslashes escaped. */
static void json_name(int i, char *buf, size_t n) {
    if (i >= 5) {
        snprintf(buf, n, "\"%s\"", hostile[i]);
        return;
    }
    ap_strbuf b = {0};
    ap_text_escape(&b, AP_TEXT_JSON, hostile[i]);
    snprintf(buf, n, "%s", b.buf ? b.buf : "\"\"");
    ap_strbuf_free(&b);
}

/* A tiny native model named by JSON text `name`. */
static void write_model(const char *path, const char *name) {
    char text[4096];
    snprintf(text, sizeof text, "{\"name\": %s, \"layers\": 4, \"hidden\": 256, \"heads\": 8, "
             "\"vocab\": 1024, \"seq_len\": 512, \"activation\": \"gelu\", \"norm\": "
             "\"layernorm\", \"bias\": true, \"tied_embeddings\": true}", name);
    CHECK(tl_write(path, text) == 0);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* Generated files to parse with their languages' own parsers, all in one python3 run at the
 * end of the item (a python start costs about 0.3 s). */
static char parse_list[256][1300];
static int nparse;

static void to_parse(const char *path) {
    if (nparse < 256) snprintf(parse_list[nparse++], sizeof parse_list[0], "%s", path);
}

/* Parse every listed file: bash -n, ast, yaml.safe_load, tomllib, json, strict UTF-8 for the
 * rest. Each file that does not parse is a failure naming it. */
static void parse_all(void) {
    static const char script[] =
        "import ast, json, subprocess, sys, tomllib, yaml\n"
        "bad = 0\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        if p.endswith('.sh'):\n"
        "            subprocess.run(['bash', '-n', p], check=True, capture_output=True)\n"
        "        elif p.endswith('.py'): ast.parse(open(p, encoding='utf-8').read())\n"
        "        elif p.endswith('.yaml'): yaml.safe_load(open(p, encoding='utf-8'))\n"
        "        elif p.endswith('.toml'): tomllib.load(open(p, 'rb'))\n"
        "        elif p.endswith('.json'): json.load(open(p, encoding='utf-8'))\n"
        "        else: open(p, encoding='utf-8').read()\n"
        "    except Exception as e:\n"
        "        bad += 1\n"
        "        print('does not parse:', repr(p), type(e).__name__, file=sys.stderr)\n"
        "sys.exit(1 if bad else 0)\n";
    const char *py = in_tmp("parse.py");
    CHECK(tl_write(py, script) == 0);
    ap_strbuf cmd = {0};
    ap_strbuf_printf(&cmd, "python3 '%s'", py);
    for (int i = 0; i < nparse; i++) {
        ap_strbuf_puts(&cmd, " ");
        ap_text_escape(&cmd, AP_TEXT_SH, parse_list[i]);
    }
    int ok = cmd.buf && system(cmd.buf) == 0;
    CHECK(ok);
    ap_strbuf_free(&cmd);
    nparse = 0;
}

static const char *const generated[] = {
    "plan.json", "megatron.sh", "deepspeed_launch.sh", "ds_config.json", "ds_config_hf.json",
    "colossalai_booster.py", "torchtitan.toml", "accelerate.yaml", "accelerate_ds_config.json",
};

/* Every file of a run with a hostile name parses, has as many lines as with a benign name, and
 * running the launch scripts' header creates nothing. */
static void check_outputs(const char *dir, const char *benign_dir, const char *what) {
    char path[1024], bpath[1024];
    for (size_t f = 0; f < sizeof generated / sizeof generated[0]; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, generated[f]);
        snprintf(bpath, sizeof bpath, "%s/%s", benign_dir, generated[f]);
        char *t = tl_read(path), *b = tl_read(bpath);
        CHECK((t == NULL) == (b == NULL));
        if (t && b) {
            to_parse(path);
            if (count_lines(t) != count_lines(b))
                fprintf(stderr, "%s: %s has %d lines, %d with a benign name\n", what, path,
                        count_lines(t), count_lines(b));
            CHECK_INT(count_lines(t), count_lines(b));
            CHECK(strlen(t) == strnlen(t, strlen(t) + 1)); /* no NUL inside */
        }
        free(t);
        free(b);
    }
    /* the headers of the scripts, run as the issue did (head -7 megatron.sh | bash) */
    for (int s = 0; s < 2; s++) {
        char cmd[2048], script[1100];
        snprintf(script, sizeof script, "%s/%s", dir, s ? "deepspeed_launch.sh" : "megatron.sh");
        if (access(script, F_OK) != 0) continue;
        snprintf(cmd, sizeof cmd, "cd '%s' && head -12 '%s' | bash >/dev/null 2>&1; test ! -e "
                 "PWNED", dir, script);
        int ok = system(cmd) == 0;
        if (!ok) fprintf(stderr, "%s: running the header of a script created PWNED\n", what);
        CHECK(ok);
    }
}

static void item03_hostile_names(void) {
    char name[512], mpath[1024], dir[1024], bench[1024], cmpdir[1024];
    const char *benign = in_tmp("benign.json");
    write_model(benign, "\"benign\"");
    snprintf(bench, sizeof bench, "%s", in_tmp("benign-out"));
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --gbs 64 --no-cache --out '%s' --emit all", benign, bench), 0);
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        json_name((int)i, name, sizeof name);
        snprintf(mpath, sizeof mpath, "%s/hostile%zu.json", tmp, i);
        write_model(mpath, name);
        snprintf(dir, sizeof dir, "%s/hostile%zu-out", tmp, i);
        char *out = NULL, *err = NULL;
        int rc = runf(&out, &err, "'%s' --gpus 8 --gbs 64 --no-cache --out '%s' --emit all", mpath, dir);
        CHECK_INT(rc, 0);
        CHECK(!has_control(out));
        CHECK(!has_control(err));
        free(out);
        free(err);
        check_outputs(dir, bench, hostile[i]);
        /* the terminal: info, estimate, simulate, the cache listing */
        const char *cmds[] = {"info '%s'", "estimate '%s' --gpus 8", "simulate '%s' --gpus 8",
                              "'%s' --gpus 8 --gbs 64 --db '%s'"};
        for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
            char fmt[256];
            snprintf(fmt, sizeof fmt, "%s", cmds[k]);
            rc = runf(&out, &err, fmt, mpath, in_tmp("hostile-names.db"));
            CHECK_INT(rc, 0);
            CHECK(!has_control(out));
            CHECK(!has_control(err));
            free(out);
            free(err);
        }
        rc = runf(&out, NULL, "db list --db '%s'", in_tmp("hostile-names.db"));
        CHECK(!has_control(out));
        free(out);
        /* the comparison report, HTML and Markdown (for three of the names: the escapers are
         * pinned language by language in item03_escaper) */
        if (i != 0 && i != 4 && i != 6) continue;
        snprintf(cmpdir, sizeof cmpdir, "%s/hostile%zu-cmp", tmp, i);
        CHECK_INT(runf(NULL, NULL, "compare '%s' --gpus 8 --gbs 64 --strategies top1,ddp --out '%s'", mpath,
                       cmpdir), 0);
        char path[1200];
        snprintf(path, sizeof path, "%s/report.html", cmpdir);
        char *html = tl_read(path);
        CHECK(html && !strstr(html, "<script>") && !strstr(html, "alert(1)</") &&
              !has_control(html));
        free(html);
        snprintf(path, sizeof path, "%s/report.md", cmpdir);
        char *md = tl_read(path);
        CHECK(md && !strstr(md, "<script>") && !strstr(md, "\ntouch PWNED") && !has_control(md));
        CHECK(md && strncmp(md, "# Strategy comparison: ", 23) == 0 && strchr(md, '\n') &&
              strstr(md, " on 8 x ") < strchr(md, '\n')); /* the heading stays one line */
        free(md);
        to_parse(path);
    }
    /* the directory name of a Hugging Face model, and a long UTF-8 name cut in a character */
    char hfdir[1024];
    snprintf(hfdir, sizeof hfdir, "%s/x\ntouch PWNED\n#", tmp);
    CHECK(mkdir(hfdir, 0755) == 0);
    char cfg[1200];
    snprintf(cfg, sizeof cfg, "%s/config.json", hfdir);
    CHECK(tl_write(cfg, "{\"model_type\": \"llama\", \"hidden_size\": 512, \"intermediate_size\": "
                        "1376, \"num_hidden_layers\": 4, \"num_attention_heads\": 8, "
                        "\"vocab_size\": 32000, \"max_position_embeddings\": 1024}") == 0);
    snprintf(dir, sizeof dir, "%s/hfdir-out", tmp);
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --gbs 64 --no-cache --out '%s' --emit megatron", cfg,
                   dir), 0);
    char sh[1100];
    snprintf(sh, sizeof sh, "%s/megatron.sh", dir);
    to_parse(sh);
    ap_strbuf longname = {0};
    ap_strbuf_puts(&longname, "\"a");
    for (int k = 0; k < 200; k++) ap_strbuf_puts(&longname, "\xc3\xa9"); /* U+00E9, 2 bytes */
    ap_strbuf_puts(&longname, "\"");
    snprintf(mpath, sizeof mpath, "%s/long.json", tmp);
    write_model(mpath, longname.buf);
    ap_strbuf_free(&longname);
    snprintf(dir, sizeof dir, "%s/long-out", tmp);
    char *err = NULL;
    int rc = runf(NULL, &err, "'%s' --gpus 8 --gbs 64 --no-cache --out '%s' --emit all", mpath, dir);
    /* too long for a name: refused in one line, or accepted and every file valid */
    CHECK(rc == 0 || (rc == 2 && err && count_lines(err) == 1));
    if (rc == 0) check_outputs(dir, bench, "long UTF-8 name");
    free(err);
    parse_all();
}

/* The escaper itself, language by language, with the hostile names (text.h). */
static void item03_escaper(void) {
    struct { ap_text_lang lang; const char *in, *want; } cases[] = {
        {AP_TEXT_LINE, "x\ntouch PWNED\n#", "x?touch PWNED?#"},
        {AP_TEXT_LINE, "esc\x1b[2J\xc2\x9b" "31m", "esc?[2J?31m"},
        {AP_TEXT_LINE, "bad\xff\xc3", "bad??"},
        {AP_TEXT_LINE, "caf\xc3\xa9 \xe2\x80\xae", "caf\xc3\xa9 ?"},
        {AP_TEXT_SH, "it's", "'it'\\''s'"},
        {AP_TEXT_SH, "$(x)`y`", "'$(x)`y`'"},
        {AP_TEXT_SH, "a\nb'", "$'a\\x0ab\\''"},
        {AP_TEXT_PY, "a\"b\\c\nd\x1b", "\"a\\\"b\\\\c\\x0ad\\x1b\""},
        {AP_TEXT_YAML, "a\"\n\xe2\x80\xa8\xc2\x85", "\"a\\\"\\x0a\\L\\N\""},
        {AP_TEXT_TOML, "a\"\\\n\x7f", "\"a\\\"\\\\\\u000a\\u007f\""},
        {AP_TEXT_JSON, "a\"\n\x01\xff", "\"a\\\"\\n\\u0001\\ufffd\""},
        {AP_TEXT_HTML, "</script><b a='1'>&", "&lt;/script&gt;&lt;b a=&#39;1&#39;&gt;&amp;"},
        {AP_TEXT_HTML, "--> */", "--&gt; */"},
        {AP_TEXT_MD, "*x* [l](u) | <i>\n`c`", "\\*x\\* \\[l\\](u) \\| \\<i\\> \\`c\\`"},
        {AP_TEXT_MD_CODE, "a|b", "`a\\|b`"},
        {AP_TEXT_MD_CODE, "a`b", "`` a`b ``"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ap_strbuf b = {0};
        ap_text_escape(&b, cases[i].lang, cases[i].in);
        CHECK_STR(b.buf ? b.buf : "", cases[i].want);
        ap_strbuf_free(&b);
    }
    char buf[16];
    CHECK_STR(ap_text_line(buf, sizeof buf, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 0),
              "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9...");
    CHECK_STR(ap_text_line(buf, sizeof buf, "abcdefgh", 5), "ab...");
    char cut[8] = "ab\xc3";
    ap_text_cut_utf8(cut);
    CHECK_STR(cut, "ab");
}

/* ---- items 4-7: outputs --------------------------------------------------------------------- */

static int is_fifo(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0 && S_ISFIFO(sb.st_mode);
}

static void item04_non_regular_targets(void) {
    const char *m = tl_path("examples/models/tiny-gpt.json");
    char dir[600], path[700], victim[700], *err = NULL, *out = NULL;
    /* a FIFO where plan.json goes */
    snprintf(dir, sizeof dir, "%s/fifo-out", tmp);
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(path, sizeof path, "%s/plan.json", dir);
    CHECK(mkfifo(path, 0644) == 0);
    CHECK_INT(runf(NULL, &err, "'%s' --gpus 8 --no-cache --out '%s'", m, dir), 2);
    CHECK(err && strstr(err, "FIFO") && count_lines(err) <= 2);
    CHECK(is_fifo(path));
    free(err);
    /* a symbolic link where a config goes: neither replaced nor followed */
    snprintf(dir, sizeof dir, "%s/link-out", tmp);
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(victim, sizeof victim, "%s/victim.txt", tmp);
    CHECK(tl_write(victim, "keep me\n") == 0);
    snprintf(path, sizeof path, "%s/megatron.sh", dir);
    CHECK(symlink(victim, path) == 0);
    CHECK_INT(runf(NULL, &err, "'%s' --gpus 8 --no-cache --out '%s' --emit megatron", m, dir), 2);
    CHECK(err && strstr(err, "symbolic link"));
    free(err);
    struct stat sb;
    CHECK(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode));
    char *v = tl_read(victim);
    CHECK(v && !strcmp(v, "keep me\n"));
    free(v);
    snprintf(path, sizeof path, "%s/plan.json", dir);
    CHECK(access(path, F_OK) != 0); /* nothing of the set moved in */
    /* a device node (root only: mknod), through db export --output and simulate --trace */
    snprintf(path, sizeof path, "%s/null-device", tmp);
    if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        CHECK_INT(runf(NULL, &err, "db export --db '%s' --output '%s'", in_tmp("key.db"), path), 2);
        CHECK(err && strstr(err, "character device"));
        free(err);
        CHECK(lstat(path, &sb) == 0 && S_ISCHR(sb.st_mode));
        CHECK_INT(runf(NULL, NULL, "simulate '%s' --gpus 1 --trace '%s'", m, path), 2);
        CHECK(lstat(path, &sb) == 0 && S_ISCHR(sb.st_mode));
    }
    /* compare's report */
    snprintf(dir, sizeof dir, "%s/fifo-report", tmp);
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(path, sizeof path, "%s/report.md", dir);
    CHECK(mkfifo(path, 0644) == 0);
    CHECK_INT(runf(NULL, NULL, "compare '%s' --gpus 8 --strategies top1 --out '%s'", m, dir), 2);
    CHECK(is_fifo(path));
    /* '-' is standard output */
    CHECK_INT(runf(&out, NULL, "simulate '%s' --gpus 1 --trace -", m), 0);
    CHECK(out && strstr(out, "\"traceEvents\""));
    free(out);
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --db '%s'", m, in_tmp("export.db")), 0);
    CHECK_INT(runf(&out, NULL, "db export --db '%s' --output -", in_tmp("export.db")), 0);
    CHECK(out && strstr(out, "\"format\": \"autoplan-db-export\""));
    free(out);
}

/* The pid of a process that has ended (a child reaped). */
static long dead_pid(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    int st;
    waitpid(p, &st, 0);
    return (long)p;
}

static int has_temporaries(const char *dir) {
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q -e '^\\.autoplan-' -e '\\.tmp\\.'", dir);
    return system(cmd) == 0;
}

static void item05_output_sets(void) {
    char tiny[1024]; /* tl_path returns one static buffer */
    snprintf(tiny, sizeof tiny, "%s", tl_path("examples/models/tiny-gpt.json"));
    char dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/set-out", tmp);
    /* the leftovers of a killed run: a temporary directory and a temporary file of dead pids */
    CHECK(mkdir(dir, 0755) == 0);
    long pid = dead_pid();
    snprintf(path, sizeof path, "%s/.autoplan-%ld.tmp", dir, pid);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/.autoplan-%ld.tmp/megatron.sh", dir, pid);
    CHECK(tl_write(path, "half") == 0);
    snprintf(path, sizeof path, "%s/plan.json.tmp.%ld", dir, pid);
    CHECK(tl_write(path, "half") == 0);
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --no-cache --out '%s' --emit all", tiny, dir), 0);
    CHECK(!has_temporaries(dir));
    /* a second run with fewer targets: no config of the first run is left beside its plan */
    snprintf(path, sizeof path, "%s/ds_config.json", dir);
    CHECK(access(path, F_OK) == 0);
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --no-cache --out '%s' --emit megatron",
                   tl_path(LLAMA), dir), 0);
    CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/plan.json", dir);
    char *pj = tl_read(path);
    CHECK(pj && strstr(pj, "Llama-2-7b-hf"));
    free(pj);
    CHECK(!has_temporaries(dir));
    /* a set that cannot be completed (one target is a FIFO) leaves the directory as it was */
    snprintf(path, sizeof path, "%s/megatron.sh", dir);
    unlink(path);
    CHECK(mkfifo(path, 0644) == 0);
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --no-cache --out '%s' --emit all", tiny, dir), 2);
    snprintf(path, sizeof path, "%s/plan.json", dir);
    pj = tl_read(path);
    CHECK(pj && strstr(pj, "Llama-2-7b-hf")); /* still the previous run's */
    free(pj);
    CHECK(!has_temporaries(dir));
    /* the emit command: the same sets */
    char dir2[700];
    snprintf(dir2, sizeof dir2, "%s/emit-out", tmp);
    CHECK_INT(runf(NULL, NULL, "emit --plan '%s' --emit all --out '%s'", path, dir2), 0);
    CHECK(!has_temporaries(dir2));
    /* every file a target renders is in the family a set replaces */
    static const char *targets[] = {"deepspeed", "megatron", "colossalai", "torchtitan",
                                    "accelerate"};
    char list[1200];
    snprintf(list, sizeof list, "ls '%s' | grep -v -x -e plan.json -e ds_config.json -e "
             "ds_config_hf.json -e deepspeed_launch.sh -e megatron.sh -e colossalai_booster.py "
             "-e torchtitan.toml -e accelerate.yaml -e accelerate_ds_config.json", dir2);
    CHECK(system(list) != 0); /* grep -v found nothing else */
    (void)targets;
}

static void item06_stdout_errors(void) {
    if (access("/dev/full", W_OK) != 0) {
        printf("item 6: no /dev/full here; skipped\n");
        return;
    }
    const char *m = tl_path("examples/models/tiny-gpt.json");
    const char *cmds[] = {"info '%s'", "'%s' --gpus 8 --no-cache", "estimate '%s' --gpus 8 --json",
                          "gpus", "db list --db '%s'"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[1024], cmd[2048];
        snprintf(args, sizeof args, cmds[i], i == 4 ? in_tmp("key.db") : m);
        snprintf(cmd, sizeof cmd, "'%s' %s >/dev/full 2>/dev/null", tl_bin, args);
        int st = system(cmd);
        int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        if (rc != 1) fprintf(stderr, "item 6: autoplan %s > /dev/full: exit %d\n", args, rc);
        CHECK_INT(rc, 1);
    }
}

static void item07_out_with_sweeps(void) {
    const char *m = tl_path("examples/models/tiny-gpt.json");
    char dir[600], path[700], *out = NULL;
    snprintf(dir, sizeof dir, "%s/sweep-out", tmp);
    CHECK_INT(runf(&out, NULL, "'%s' --gpus 8,16 --no-cache --out '%s' --emit megatron", m, dir), 0);
    CHECK(out && strstr(out, "gpus-16/plan.json"));
    free(out);
    int counts[2] = {8, 16};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/gpus-%d/plan.json", dir, counts[i]);
        char *pj = tl_read(path);
        ap_err e;
        ap_json *j = pj ? ap_json_parse(pj, strlen(pj), path, &e) : NULL;
        CHECK(j != NULL);
        CHECK_INT((int)ap_json_number(ap_json_get(ap_json_get(j, "cluster"), "gpus")), counts[i]);
        ap_json_free(j);
        free(pj);
        snprintf(path, sizeof path, "%s/gpus-%d/megatron.sh", dir, counts[i]);
        CHECK(access(path, F_OK) == 0);
    }
    /* --tokens with one count: the plan of that count in DIR */
    snprintf(dir, sizeof dir, "%s/tokens-out", tmp);
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --tokens 1T --no-cache --out '%s'", m, dir), 0);
    snprintf(path, sizeof path, "%s/plan.json", dir);
    CHECK(access(path, F_OK) == 0);
}

/* A sweep stores its nothing-fits rows without the suggestions (its table does not show them);
 * a single count answered from such a row adds them: the same JSON as a fresh search, and
 * the row, updated, answers the next run as it is. */
static void item07_sweep_rows_then_single(void) {
    const char *m = tl_path(LLAMA), *db = in_tmp("sweep-rows.db");
    char *out[3] = {NULL, NULL, NULL};
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 1,2 --gpu v100-16g --gbs 8 --db '%s'", m, db), 0);
    CHECK_INT(runf(&out[0], NULL, "'%s' --gpus 1 --gpu v100-16g --gbs 8 --db '%s' --json", m, db),
              0);
    CHECK_INT(runf(&out[1], NULL, "'%s' --gpus 1 --gpu v100-16g --gbs 8 --db '%s' --json", m, db),
              0);
    CHECK_INT(runf(&out[2], NULL, "'%s' --gpus 1 --gpu v100-16g --gbs 8 --no-cache --json", m), 0);
    ap_json *j[3];
    for (int i = 0; i < 3; i++) {
        ap_err e;
        j[i] = out[i] ? ap_json_parse(out[i], strlen(out[i]), "plan --json", &e) : NULL;
        CHECK(j[i] != NULL);
    }
    if (j[0] && j[1] && j[2]) {
        CHECK(ap_json_bool(ap_json_get(j[0], "cached")) && ap_json_bool(ap_json_get(j[1], "cached")));
        CHECK_INT(ap_json_size(ap_json_get(j[2], "plans")), 0);
        CHECK(ap_json_size(ap_json_get(j[2], "suggestions")) > 0);
        char *txt[3];
        for (int i = 0; i < 3; i++) {
            /* what may differ: the cached flag and the search's own time */
            ap_json_free(ap_json_detach(j[i], "cached"));
            ap_json_free(ap_json_detach(ap_json_get(j[i], "search"), "search_s"));
            txt[i] = ap_json_print(j[i], 0);
        }
        CHECK(txt[0] && txt[1] && txt[2] && !strcmp(txt[0], txt[2]) && !strcmp(txt[1], txt[2]));
        for (int i = 0; i < 3; i++) free(txt[i]);
    }
    for (int i = 0; i < 3; i++) {
        ap_json_free(j[i]);
        free(out[i]);
    }
}

/* A stored plan whose uniform split is uneven (61 layers over 16 stages) and which lists no
 * per-stage recompute counts reads back as the plan it was: the second run is a cache hit,
 * not a warning and a new search (the reader took absent counts for per-stage ones). */
static void item07_uneven_uniform_split_hits(void) {
    const char *m = tl_path("examples/models/deepseek-v3.json"), *db = in_tmp("uneven.db");
    char *out[2] = {NULL, NULL}, *err[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        CHECK_INT(runf(&out[i], &err[i], "'%s' --gpus 128 --gpu h100-sxm --top 3 --db '%s' --json",
                       m, db), 0);
    CHECK(err[1] && !strstr(err[1], "not used"));
    ap_json *j[2];
    for (int i = 0; i < 2; i++) {
        ap_err e;
        j[i] = out[i] ? ap_json_parse(out[i], strlen(out[i]), "plan --json", &e) : NULL;
        CHECK(j[i] != NULL);
    }
    if (j[0] && j[1]) {
        CHECK(!ap_json_bool(ap_json_get(j[0], "cached")));
        CHECK(ap_json_bool(ap_json_get(j[1], "cached")));
        /* the fixture holds such a plan: a ranked plan with an unequal uniform split */
        int uneven_uniform = 0;
        const ap_json *pl = ap_json_get(j[1], "plans");
        for (int k = 0; k < ap_json_size(pl); k++) {
            const ap_json *sl = ap_json_get(ap_json_get(ap_json_at(pl, k), "plan"), "stage_layers");
            const char *lbl = ap_json_string(ap_json_get(ap_json_at(pl, k), "label"));
            for (int c = 1; c < ap_json_size(sl); c++)
                if (ap_json_number(ap_json_at(sl, c)) != ap_json_number(ap_json_at(sl, 0)) && lbl &&
                    !strstr(lbl, "uneven"))
                    uneven_uniform = 1;
        }
        CHECK(uneven_uniform);
        char *txt[2];
        for (int i = 0; i < 2; i++) {
            ap_json_free(ap_json_detach(j[i], "cached"));
            ap_json_free(ap_json_detach(ap_json_get(j[i], "search"), "search_s"));
            txt[i] = ap_json_print(j[i], 0);
        }
        CHECK(txt[0] && txt[1] && !strcmp(txt[0], txt[1]));
        for (int i = 0; i < 2; i++) free(txt[i]);
    }
    for (int i = 0; i < 2; i++) {
        ap_json_free(j[i]);
        free(out[i]);
        free(err[i]);
    }
}

/* ---- items 8-10: the cache ------------------------------------------------------------------ */

static int has_side_files(const char *db) {
    char p[1100];
    snprintf(p, sizeof p, "%s-wal", db);
    if (access(p, F_OK) == 0) return 1;
    snprintf(p, sizeof p, "%s-shm", db);
    return access(p, F_OK) == 0;
}

static void item08_readers_leave_no_files(void) {
    const char *m = tl_path("examples/models/tiny-gpt.json");
    char db[800];
    snprintf(db, sizeof db, "%s", in_tmp("ro.db"));
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --db '%s'", m, db), 0);
    CHECK(!has_side_files(db));
    /* a read-only file: planning answers from it, db list and export read it; no side files */
    CHECK(chmod(db, 0444) == 0);
    char *out = NULL;
    CHECK_INT(runf(&out, NULL, "'%s' --gpus 8 --db '%s'", m, db), 0);
    CHECK(out && strstr(out, "answered from the cache"));
    free(out);
    CHECK_INT(runf(NULL, NULL, "db list --db '%s'", db), 0);
    CHECK_INT(runf(NULL, NULL, "db export --db '%s'", db), 0);
    CHECK(!has_side_files(db));
    CHECK(chmod(db, 0644) == 0);
    /* a refused database (another program's SQLite file) gains nothing either */
    const char *other = in_tmp("other.db");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 -c \"import sqlite3; c=sqlite3.connect('%s'); "
             "c.execute('pragma journal_mode=wal'); c.execute('create table t(x)'); c.commit()\"",
             other);
    if (system(cmd) == 0) {
        char *err = NULL;
        CHECK_INT(runf(NULL, &err, "'%s' --gpus 8 --db '%s'", m, other), 0);
        CHECK(err && strstr(err, "another program"));
        free(err);
        CHECK_INT(runf(NULL, NULL, "db list --db '%s'", other), 1);
        CHECK(!has_side_files(other));
    }
    /* a reader without write permission in a shared directory does not lock its owner out */
    if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) {
        printf("item 8: not root or no setpriv: the two-user case skipped\n");
        return;
    }
    char shared[700], sdb[800], bin[600];
    snprintf(shared, sizeof shared, "%s/shared", tmp);
    CHECK(chmod(tmp, 0711) == 0 && mkdir(shared, 0777) == 0 && chmod(shared, 01777) == 0);
    snprintf(sdb, sizeof sdb, "%s/c.db", shared);
    snprintf(bin, sizeof bin, "%s", tl_bin);
    const char *as_owner = "setpriv --reuid=65534 --regid=65534 --clear-groups";
    const char *as_reader = "setpriv --reuid=12345 --regid=12345 --clear-groups";
    snprintf(cmd, sizeof cmd, "%s '%s' '%s' --gpus 8 --db '%s' >/dev/null 2>&1", as_owner, bin, m,
             sdb);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s '%s' '%s' --gpus 8 --db '%s' >/dev/null 2>&1", as_reader, bin,
             m, sdb);
    CHECK(system(cmd) == 0);
    CHECK(!has_side_files(sdb));
    snprintf(cmd, sizeof cmd, "%s '%s' '%s' --gpus 16 --db '%s' 2>&1 >/dev/null | grep -q "
             "warning", as_owner, bin, m, sdb);
    CHECK(system(cmd) != 0); /* the owner stores his next plan without a warning */
}

static void item09_file_size_limit(void) {
    const char *m = tl_path("examples/models/tiny-gpt.json");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ulimit -f 8; '%s' '%s' --gpus 8 --db '%s' >'%s' 2>'%s'", tl_bin, m,
             in_tmp("limit.db"), in_tmp("limit.out"), in_tmp("limit.err"));
    int st = system(cmd);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    CHECK_INT(rc, 0);
    char *out = tl_read(in_tmp("limit.out")), *err = tl_read(in_tmp("limit.err"));
    CHECK(out && strstr(out, "  1  tp"));             /* the plans were printed */
    CHECK(err && strstr(err, "warning: plan cache")); /* the cache is a warning */
    free(out);
    free(err);
}

static void item10_quick_check(void) {
    const char *m = tl_path("examples/models/tiny-gpt.json");
    const char *db = in_tmp("corrupt.db");
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --db '%s'", m, db), 0);
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 16 --db '%s'", m, db), 0);
    /* damage a page a cache hit does not read: the used_at index */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "python3 -c \"import sqlite3; c=sqlite3.connect('%s'); "
             "r=c.execute(\\\"select rootpage from sqlite_schema where name='plans_used_at'\\\")"
             ".fetchone()[0]; ps=c.execute('pragma page_size').fetchone()[0]; c.close(); "
             "f=open('%s','r+b'); f.seek((r-1)*ps+8); f.write(b'\\\\xff'*64); f.close()\"", db,
             db);
    CHECK(system(cmd) == 0);
    char *out = NULL, *err = NULL;
    CHECK_INT(runf(&out, &err, "'%s' --gpus 8 --db '%s'", m, db), 0);
    CHECK(err && strstr(err, "corrupt"));
    CHECK(out && !strstr(out, "answered from the cache") && strstr(out, "  1  tp"));
    free(out);
    free(err);
}

/* ---- items 11-15: bounds, undefined behaviour, silent inputs, exit codes, messages ---------- */

/* exit 2 with exactly one line on stderr containing needle */
static void refused(const char *needle, const char *fmt, const char *a, const char *b) {
    char *out = NULL, *err = NULL;
    int rc = runf(&out, &err, fmt, a, b);
    if (rc != 2 || !err || !strstr(err, needle) || count_lines(err) != 1)
        fprintf(stderr, "expected exit 2 and one line with \"%s\" from: ", needle),
            fprintf(stderr, fmt, a, b), fprintf(stderr, "\n  got exit %d, stderr: %s\n", rc, err);
    CHECK_INT(rc, 2);
    CHECK(err && strstr(err, needle) != NULL);
    CHECK_INT(count_lines(err), 1);
    free(out);
    free(err);
}

static void item11_event_bound(void) {
    refused("too large to simulate", "simulate '%s' --gpus 1 --gbs 2000000%s",
            tl_path("examples/models/tiny-gpt.json"), "");
}

/* A plan.json made by `plan --out`, with `key` of the plan section set to the JSON `value`
 * (and key2 to value2 when key2 is not NULL, ...). */
static const char *plan_file_with3(const char *name, const char *section, const char *key,
                                   const char *value, const char *key2, const char *value2,
                                   const char *key3, const char *value3);
static const char *plan_file_with(const char *name, const char *section, const char *key,
                                  const char *value) {
    return plan_file_with3(name, section, key, value, NULL, NULL, NULL, NULL);
}

static const char *plan_file_with3(const char *name, const char *section, const char *key,
                                   const char *value, const char *key2, const char *value2,
                                   const char *key3, const char *value3) {
    static char path[700];
    const char *good = in_tmp("good-plan/plan.json");
    if (access(good, F_OK) != 0)
        CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --no-cache --out '%s'",
                       tl_path("examples/models/tiny-gpt.json"), in_tmp("good-plan")), 0);
    char *text = tl_read(good);
    ap_err e;
    ap_json *j = text ? ap_json_parse(text, strlen(text), good, &e) : NULL;
    free(text);
    CHECK(j != NULL);
    if (!j) return good;
    ap_json *sec = section ? ap_json_get(j, section) : j;
    const char *keys[3] = {key, key2, key3}, *values[3] = {value, value2, value3};
    for (int i = 0; i < 3 && keys[i]; i++) {
        ap_json *v = ap_json_parse(values[i], strlen(values[i]), "value", &e);
        ap_json_free(ap_json_detach(sec, keys[i]));
        ap_json_add(sec, keys[i], v);
    }
    char *out = ap_json_print(j, 1);
    ap_json_free(j);
    snprintf(path, sizeof path, "%s", in_tmp(name));
    CHECK(out && tl_write(path, out) == 0);
    free(out);
    return path;
}

static void item12_undefined_behaviour(void) {
    /* mbs x dp x grad_accum = 2^37 x 8 x (2^24 + 1) = 2^64 + 2^40 wraps in int64 to 2^40, which
     * equals gbs: refused (mbs out of range), never accepted */
    const char *p = plan_file_with3("wrap.json", "plan", "mbs", "137438953472", "grad_accum",
                                    "16777217", "gbs", "1099511627776");
    refused("field 'mbs'", "emit --plan '%s' --out '%s'", p, in_tmp("wrap-out"));
    /* within the ranges, a product past int64 is compared without overflow */
    p = plan_file_with3("wrap2.json", "plan", "mbs", "1048576", "grad_accum", "4294967296", "gbs",
                        "4294967296");
    refused("must equal mbs x dp x grad_accum", "emit --plan '%s' --out '%s'", p,
            in_tmp("wrap-out"));
    /* a duration of 1e300 weeks is not converted to a time */
    refused("--older-than", "db gc --older-than 1e300w --db '%s'%s", in_tmp("key.db"), "");
    /* a cached plan with mbs 1e300 is not converted to an integer: searched again */
    char *exported = NULL, *out = NULL, *err = NULL;
    const char *m = tl_path("examples/models/tiny-gpt.json");
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --db '%s'", m, in_tmp("ub.db")), 0);
    CHECK_INT(runf(&exported, NULL, "db export --db '%s'", in_tmp("ub.db")), 0);
    ap_err e;
    ap_json *x = exported ? ap_json_parse(exported, strlen(exported), "x", &e) : NULL;
    const char *rj = ap_json_string(ap_json_get(ap_json_at(ap_json_get(x, "plans"), 0),
                                                "result_json"));
    ap_json *res = rj ? ap_json_parse(rj, strlen(rj), "r", &e) : NULL;
    CHECK(res != NULL);
    if (res) {
        set_number(ap_json_get(ap_json_at(ap_json_get(res, "plans"), 0), "plan"), "mbs", 1e300);
        char args[1200];
        snprintf(args, sizeof args, "'%s' --gpus 8 --out '%s'", m, in_tmp("ub-out"));
        CHECK_INT(with_planted(exported, res, args, &out, &err), 0);
        CHECK(err && strstr(err, "not used"));
        free(out);
        free(err);
    }
    ap_json_free(res);
    ap_json_free(x);
    free(exported);
}

static void item13_silent_inputs(void) {
    char tiny[1024], llama[1024]; /* tl_path returns one static buffer */
    snprintf(tiny, sizeof tiny, "%s", tl_path("examples/models/tiny-gpt.json"));
    snprintf(llama, sizeof llama, "%s", tl_path(LLAMA));
    /* duplicate keys in a model file and in a plan file */
    const char *dup = in_tmp("dup-model.json");
    CHECK(tl_write(dup, "{\"name\": \"d\", \"layers\": 4, \"layers\": 8, \"hidden\": 256, "
                        "\"heads\": 8, \"vocab\": 1024, \"seq_len\": 512}") == 0);
    refused("key 'layers' appears twice", "info '%s'%s", dup, "");
    char *good = tl_read(in_tmp("good-plan/plan.json"));
    if (good) {
        char *pos = strstr(good, "\"tp\": 1,");
        CHECK(pos != NULL);
        if (pos) {
            ap_strbuf b = {0};
            ap_strbuf_put(&b, good, (size_t)(pos - good));
            ap_strbuf_puts(&b, "\"tp\": 1, \"tp\": 8,");
            ap_strbuf_puts(&b, pos + strlen("\"tp\": 1,"));
            const char *pd = in_tmp("dup-plan.json");
            CHECK(tl_write(pd, b.buf) == 0);
            ap_strbuf_free(&b);
            refused("key 'tp' appears twice", "emit --plan '%s' --out '%s'", pd, in_tmp("dup-out"));
        }
    }
    free(good);
    refused("--fix: tp is given twice", "'%s' --gpus 8 --no-cache --fix tp=8,tp=2%s", llama, "");
    refused("--recompute-layers: 99 is more than the model's 32 layers",
            "estimate '%s' --gpus 8 --recompute full --recompute-layers 99%s", llama, "");
    refused("--offload-fractions needs --choose-offload",
            "partition '%s' --gpus 8 --pp 2 --offload-fractions 0,1%s", llama, "");
    refused("--stage-layers", "estimate '%s' --gpus 8 --pp 2 --stage-layers 16,16,%s", llama, "");
    const char *p = plan_file_with("seq.json", "plan", "seq", "1073741824");
    refused("field 'seq'", "emit --plan '%s' --out '%s'", p, in_tmp("seq-out"));
    /* an fp32 plan for a GPU trainer (fp32 is only the runtime trainer's, autoplan run's) */
    p = plan_file_with("fp32.json", "plan", "dtype", "\"fp32\"");
    refused("megatron trains in bf16, fp16 or fp8, not fp32", "emit --plan '%s' --out '%s'", p,
            in_tmp("fp32-out"));
    p = plan_file_with("fp64.json", "plan", "dtype", "\"fp64\"");
    refused("field 'dtype' = \"fp64\" is not one of", "emit --plan '%s' --out '%s'", p,
            in_tmp("fp64-out"));
    refused("--network-bw", "estimate '%s' --gpus 16 --network-bw 1e-300GB/s%s", tiny, "");
    const char *cl = in_tmp("slow-cluster.json");
    CHECK(tl_write(cl, "{\"gpu\": \"a100\", \"gpus\": 16, \"network_bw\": \"1e-300GB/s\"}") == 0);
    refused("below 1 MB/s", "estimate '%s' --cluster '%s'", tiny, cl);
    /* an imported run with 16,777,216 ranks (more GPUs than a cluster may have) */
    const char *imp = in_tmp("ranks.json");
    CHECK(tl_write(imp, "{\"format\": \"autoplan-db-export\", \"format_version\": 1, "
                        "\"autoplan_version\": \"0.1.0\", \"schema_version\": 1, "
                        "\"exported_at\": 1, \"plans\": [], \"profiles\": [], \"runs\": "
                        "[{\"plan_key\": \"\", \"host\": \"h\", \"backend\": \"cpu\", "
                        "\"started_at\": 1, \"ranks\": 16777216, \"predicted_step_s\": 1, "
                        "\"measured_step_s\": 1, \"predicted_peak_bytes\": 1, "
                        "\"measured_peak_bytes\": 1, \"plan_json\": \"{}\", "
                        "\"per_rank\": []}]}") == 0);
    refused("ranks", "db import '%s' --db '%s'", imp, in_tmp("ranks.db"));
    /* flags that describe the cluster cannot be given beside --plan, which holds it */
    refused("not with --plan", "simulate --plan '%s' --network-bw 10GB/s%s",
            in_tmp("good-plan/plan.json"), "");
}

static void item14_exit_codes(void) {
    const char *tiny = tl_path("examples/models/tiny-gpt.json");
    const char *file = in_tmp("a-file");
    CHECK(tl_write(file, "x") == 0);
    /* --out at a file: 2 everywhere */
    refused("not a directory", "'%s' --gpus 8 --no-cache --out '%s'", tiny, file);
    refused("not a directory", "compare '%s' --gpus 8 --strategies top1 --out '%s'", tiny, file);
    refused("not a directory", "emit --plan '%s' --out '%s'", in_tmp("good-plan/plan.json"), file);
    /* a missing database: 2 for list, show and export */
    const char *none = in_tmp("no-such.db");
    refused("no database there", "db list --db '%s'%s", none, "");
    refused("no database there", "db show plan:1 --db '%s'%s", none, "");
    refused("no database there", "db export --db '%s'%s", none, "");
    /* a named trainer that cannot express the plan (torchtitan has no ZeRO-1): 2 from plan
     * --emit and from emit, the others written; with all: 0 when one was written */
    char *err = NULL;
    CHECK_INT(runf(NULL, &err, "'%s' --gpus 8 --no-cache --fix zero=1 --out '%s' --emit "
                   "megatron,torchtitan", tiny, in_tmp("named-out")), 2);
    CHECK(err && strstr(err, "torchtitan: cannot express"));
    free(err);
    CHECK(access(in_tmp("named-out/megatron.sh"), F_OK) == 0);
    CHECK_INT(runf(NULL, NULL, "emit --plan '%s' --emit megatron,torchtitan --out '%s'",
                   in_tmp("named-out/plan.json"), in_tmp("named-out2")), 2);
    CHECK_INT(runf(NULL, NULL, "'%s' --gpus 8 --no-cache --out '%s' --emit all", tiny,
                   in_tmp("all-out")), 0);
    CHECK_INT(runf(NULL, NULL, "emit --plan '%s' --emit all --out '%s'",
                   in_tmp("named-out/plan.json"), in_tmp("all-out2")), 0);
    /* the rule is written down */
    char *readme = tl_read(tl_path("README.md"));
    CHECK(readme && strstr(readme, "## Exit status"));
    free(readme);
}

static void item15_messages(void) {
    const char *tiny = tl_path("examples/models/tiny-gpt.json");
    char *out = NULL, *err = NULL;
    CHECK_INT(runf(NULL, &err, "'%s' --gpus 8 --out '%s' --emit bogus", tiny, in_tmp("m")), 2);
    CHECK(err && strstr(err, "--emit: unknown target") && !strstr(err, "--emit: --emit"));
    free(err);
    CHECK_INT(runf(&out, NULL, "emit --help%s", ""), 0);
    CHECK(out && !strstr(out, "usage: usage:"));
    free(out);
    CHECK_INT(runf(NULL, &err, "emit --out '%s'", in_tmp("m")), 2);
    CHECK(err && !strstr(err, "usage: usage:"));
    free(err);
    /* step times print in a few digits however slow the network */
    CHECK_INT(runf(&out, NULL, "estimate '%s' --gpus 16 --network-bw 1MB/s --tp 1", tiny), 0);
    const char *st = out ? strstr(out, "step time ") : NULL;
    CHECK(st && strchr(st, '\n') - st < 100);
    free(out);
    /* a long path keeps the reason at the end of the message */
    char longpath[1600];
    snprintf(longpath, sizeof longpath, "%s/", tmp);
    for (int i = 0; i < 70; i++) strcat(longpath, "a-long-directory/");
    strcat(longpath, "model.json");
    CHECK_INT(runf(NULL, &err, "info '%s'", longpath), 2);
    CHECK(err && strstr(err, "No such file or directory") && strstr(err, "model.json") &&
          count_lines(err) == 1);
    free(err);
    /* a pinned degree that cannot divide the GPUs is named */
    refused("--tp 3 does not divide --gpus 8", "'%s' --gpus 8 --no-cache --tp 3%s", tl_path(LLAMA),
            "");
    /* nesting depth is named as such */
    ap_strbuf deep = {0};
    for (int i = 0; i < 1200; i++) ap_strbuf_puts(&deep, "[");
    for (int i = 0; i < 1200; i++) ap_strbuf_puts(&deep, "]");
    CHECK(tl_write(in_tmp("deep.json"), deep.buf) == 0);
    ap_strbuf_free(&deep);
    refused("nested deeper than 1000 levels", "info '%s'%s", in_tmp("deep.json"), "");
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    const char *t = tl_tmpdir();
    if (!t) return 1;
    snprintf(tmp, sizeof tmp, "%s", t);
    setenv("XDG_CACHE_HOME", in_tmp("xdg"), 1);
    const char *only = getenv("AP_TRUST_ONLY");
#define ITEM(f) if (!only || strstr(#f, only)) f()
    ITEM(item01_cache_key);
    ITEM(item02_cached_results);
    ITEM(item03_escaper);
    ITEM(item03_hostile_names);
    ITEM(item04_non_regular_targets);
    ITEM(item05_output_sets);
    ITEM(item06_stdout_errors);
    ITEM(item07_out_with_sweeps);
    ITEM(item07_sweep_rows_then_single);
    ITEM(item07_uneven_uniform_split_hits);
    ITEM(item08_readers_leave_no_files);
    ITEM(item09_file_size_limit);
    ITEM(item10_quick_check);
    ITEM(item11_event_bound);
    ITEM(item12_undefined_behaviour);
    ITEM(item13_silent_inputs);
    ITEM(item14_exit_codes);
    ITEM(item15_messages);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return tl_finish();
}
