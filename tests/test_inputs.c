/*
 * test_inputs.c - user input to plan, estimate, compare, partition, fit, simulate and info that
 * was once accepted with a wrong answer or refused without cause: each test runs the built
 * autoplan on the input and checks the exit status and the distinctive part of the message
 * (exit 2, one line naming the flag or file) or the corrected answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

/* `model` as a command's argument: a path in the repository, or an absolute one as it is */
static const char *model_path(const char *model) {
    return *model == '/' ? model : tl_path(model);
}

/* Run `fmt` (one %s: the path of `model`, model_path; "" for none) and check exit 2 and that
 * stderr holds `want` on one line. */
static void refused(const char *fmt, const char *model, const char *want) {
    char path[1024], args[2048];
    snprintf(path, sizeof path, "%s", *model ? model_path(model) : "");
    snprintf(args, sizeof args, fmt, path);
    char *out = NULL, *err = NULL;
    int rc = tl_run(args, &out, &err);
    CHECK_INT(rc, 2);
    CHECK_CONTAINS(err, want);
    if (err) {
        const char *nl = strchr(err, '\n');
        CHECK(nl == NULL || nl[1] == '\0'); /* one line */
    }
    if (rc != 2) fprintf(stderr, "  autoplan %s\n  stderr: %s\n", args, err ? err : "");
    free(out);
    free(err);
}

/* Run `fmt` (one %s: the path of `model`, model_path), check exit 0 and return its standard
 * output (the caller frees it; NULL when there was none). */
static char *answered(const char *fmt, const char *model) {
    return tl_run_ok(fmt, model_path(model));
}

/* --seq beyond a model's learned positions (GPT-2 wpe, OPT embed_positions): `info` refused it,
 * estimate, plan, simulate, partition and compare answered for positions the model does not
 * have. */
static void test_seq_beyond_learned_positions(void) {
    const char *m = "examples/models/tiny-gpt.json"; /* 512 learned positions */
    const char *want = "--seq: 1024 tokens exceed the 512 learned positions of ";
    refused("estimate '%s' --gpus 8 --seq 1024", m, want);
    refused("plan '%s' --gpus 8 --seq 1024 --no-cache", m, want);
    refused("simulate '%s' --gpus 8 --seq 1024", m, want);
    refused("partition '%s' --gpus 8 --pp 2 --seq 1024", m, want);
    char args[2048];
    snprintf(args, sizeof args, "compare '%%s' --gpus 8 --seq 1024 --out %s/cmp",
             tl_tmpdir());
    refused(args, m, want);
    /* the positions the model has are fine */
    free(answered("estimate '%s' --gpus 8 --seq 512", m));
}

/* The step time of `estimate MODEL <args>` as printed ("step time 551.2 ms"), or "" */
static void step_line(const char *args, char *buf, size_t n) {
    char *out = NULL, *err = NULL;
    buf[0] = '\0';
    CHECK_INT(tl_run(args, &out, &err), 0);
    const char *s = out ? strstr(out, "step time ") : NULL;
    if (s) {
        size_t k = strcspn(s, "\n");
        snprintf(buf, n, "%.*s", (int)(k < n ? k : n - 1), s);
    }
    free(out);
    free(err);
}

/* A cluster file describing part of one node ("gpus": 4 of an 8-GPU node) with --gpus 16: the
 * file's own count once shrank the node to 4 GPUs, so 16 GPUs were four 4-GPU nodes (tp 8
 * refused as crossing NVLink domains, other plans priced over the network). */
static void test_cluster_node_kept_under_gpus(void) {
    char cl[1024], args[4096], a[256], b[256];
    snprintf(cl, sizeof cl, "%s/part-node.json", tl_tmpdir());
    CHECK(tl_write(cl, "{\"gpu\": \"a100-sxm4-80g\", \"gpus\": 4, \"gpus_per_node\": 8}\n") == 0);
    const char *m = tl_path("examples/models/llama-2-7b.json");
    char model[1024];
    snprintf(model, sizeof model, "%s", m);
    snprintf(args, sizeof args, "estimate '%s' --cluster %s --gpus 16 --tp 2 --pp 2", model, cl);
    step_line(args, a, sizeof a);
    snprintf(args, sizeof args, "estimate '%s' --gpus 16 --tp 2 --pp 2", model);
    step_line(args, b, sizeof b);
    CHECK(a[0] != '\0');
    CHECK_STR(a, b);
    /* tp 8 stays inside one 8-GPU node */
    char *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "estimate '%s' --cluster %s --gpus 16 --tp 8", model, cl);
    CHECK_INT(tl_run(args, &out, &err), 0);
    CHECK(err == NULL || strstr(err, "NVLink domain") == NULL);
    free(out);
    free(err);
    /* and the file's node still says what whole nodes are */
    snprintf(args, sizeof args, "estimate '%s' --cluster %s --gpus 12", model, cl);
    CHECK_INT(tl_run(args, &out, &err), 2);
    CHECK_CONTAINS(err, "with --gpus: field 'gpus': 12 GPUs do not fill whole nodes of 8");
    free(out);
    free(err);
}

/* fit --strategies: an empty item or a strategy listed twice was skipped or merged silently
 * (compare's --strategies refuses both) */
static void test_fit_strategies_list(void) {
    refused("fit --gpu a100 --strategies ddp,%s", "", "--strategies: 'ddp,' has an empty item");
    refused("fit --gpu a100 --strategies ,ddp%s", "", "--strategies: ',ddp' has an empty item");
    refused("fit --gpu a100 --strategies ddp,,zero-2%s", "", "has an empty item");
    refused("fit --gpu a100 --strategies ddp,zero-2,ddp%s", "", "--strategies: 'ddp' listed twice");
}

/* Write a plan.json of tiny-gpt on 8 GPUs into the temporary directory; its path. */
static const char *tiny_plan(void) {
    static char path[1100];
    char dir[1024], args[3072];
    snprintf(dir, sizeof dir, "%s/tiny-plan", tl_tmpdir());
    snprintf(args, sizeof args, "plan '%s' --gpus 8 --no-cache --out %s",
             tl_path("examples/models/tiny-gpt.json"), dir);
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run(args, &out, &err), 0);
    free(out);
    free(err);
    snprintf(path, sizeof path, "%s/plan.json", dir);
    return path;
}

/* simulate --plan: the plan file holds the plan and cluster, and only some of the flags that
 * describe them were refused beside it; --attn-impl, --zero-group, --gemini, --no-sp, --nvme,
 * --profile, ... were silently ignored. */
static void test_simulate_plan_flags(void) {
    const char *plan = tiny_plan();
    const char *flags[] = {"--attn-impl fa3", "--fp8-params", "--zero-group 4", "--gemini auto",
                           "--no-sp", "--no-overlap", "--stage-recompute 1", "--nvme 1TB",
                           "--profile none", "--offload-device cpu", "--shard-param-frac 0.5"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        char fmt[256], want[64];
        snprintf(fmt, sizeof fmt, "simulate --plan '%%s' %s", flags[i]);
        snprintf(want, sizeof want, "%.*s: not with --plan", (int)strcspn(flags[i], " "),
                 flags[i]);
        char args[2048];
        snprintf(args, sizeof args, fmt, plan);
        char *out = NULL, *err = NULL;
        CHECK_INT(tl_run(args, &out, &err), 2);
        CHECK_CONTAINS(err, want);
        free(out);
        free(err);
    }
    /* the simulation's own settings stay */
    char args[2048];
    snprintf(args, sizeof args, "simulate --plan '%s' --headroom 1GiB --expandable-segments",
             plan);
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run(args, &out, &err), 0);
    free(out);
    free(err);
}

/* simulate --trace - --json: the trace went to standard output and --json was ignored */
static void test_simulate_trace_stdout_json(void) {
    refused("simulate '%s' --gpus 8 --trace - --json", "examples/models/tiny-gpt.json",
            "--json: not with --trace -");
}

/* DeepSeek-V2/V3 config.json with n_routed_experts 0 or null but num_experts_per_tok 6: read
 * as a dense model (transformers builds a MoE layer for any non-null n_routed_experts); the
 * Mixtral reader already refused the same contradiction. */
static void test_deepseek_no_experts_topk(void) {
    char *src = tl_read(tl_path("tests/data/hf/deepseek-v2-lite.json"));
    CHECK(src != NULL);
    if (!src) return;
    const char *vals[] = {"0", "null"};
    for (int i = 0; i < 2; i++) {
        const char *k = strstr(src, "\"n_routed_experts\"");
        CHECK(k != NULL);
        if (!k) break;
        const char *v = strchr(k, ':') + 1, *end = v + strcspn(v, ",}");
        char path[1024], doc[65536];
        snprintf(doc, sizeof doc, "%.*s %s%s", (int)(v - src), src, vals[i], end);
        snprintf(path, sizeof path, "%s/ds-%d.json", tl_tmpdir(), i);
        CHECK(tl_write(path, doc) == 0);
        char args[1200];
        snprintf(args, sizeof args, "info %s", path);
        char *out = NULL, *err = NULL;
        CHECK_INT(tl_run(args, &out, &err), 2);
        CHECK_CONTAINS(err, "field 'n_routed_experts'");
        CHECK_CONTAINS(err, "but 'num_experts_per_tok' = 6");
        free(out);
        free(err);
    }
    free(src);
}

/* A model that describes experts but whose layers are all dense (moe.first_dense_layers =
 * layers): --ep 2 was accepted and the search ranked ep plans of a model with nothing to
 * split. */
static void test_ep_without_moe_layers(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/all-dense.json", tl_tmpdir());
    CHECK(tl_write(path, "{\"name\": \"x\", \"layers\": 4, \"hidden\": 64, \"heads\": 4, "
                         "\"vocab\": 100, \"seq_len\": 128, \"moe\": {\"experts\": 8, "
                         "\"top_k\": 2, \"first_dense_layers\": 4}}\n") == 0);
    refused("estimate %s --gpus 8 --ep 2", path,
            "ep/etp > 1 on a model whose 4 layers are all dense");
    refused("plan %s --gpus 8 --ep 2 --no-cache", path, "no layer is MoE");
    char *out = answered("plan %s --gpus 8 --no-cache --top 100", path);
    CHECK(out && !strstr(out, " ep2 ") && !strstr(out, " ep4 ") && !strstr(out, " ep8 "));
    free(out);
}

/* --gpus 4 --nvlink-domain 8 (8-GPU nodes, half of one used) was refused with "must be in [1, 4]
 * (the GPUs of one node)", though the same node from a cluster file (--gpus 4 over
 * dgx-a100.json) is accepted; the step time is the same as the catalog's 4-GPU node. */
static void test_nvlink_domain_part_node(void) {
    char args[2048], a[256], b[256];
    const char *m = tl_path("examples/models/llama-2-7b.json");
    char model[1024];
    snprintf(model, sizeof model, "%s", m);
    snprintf(args, sizeof args, "estimate '%s' --gpus 4 --nvlink-domain 8 --tp 4", model);
    step_line(args, a, sizeof a);
    snprintf(args, sizeof args, "estimate '%s' --gpus 4 --tp 4 --cluster '%s'", model,
             tl_path("examples/clusters/dgx-a100.json"));
    step_line(args, b, sizeof b);
    CHECK(a[0] != '\0');
    CHECK_STR(a, b);
    snprintf(args, sizeof args, "estimate '%s' --gpus 4 --gpus-per-node 8 --nvlink-domain 8",
             model);
    step_line(args, a, sizeof a);
    CHECK(a[0] != '\0');
    /* beyond the node as described it is still refused */
    refused("estimate '%s' --gpus 4 --nvlink-domain 16", "examples/models/llama-2-7b.json",
            "field 'nvlink_domain': must be in [1, 4]");
    refused("estimate '%s' --gpus 4 --gpus-per-node 8 --nvlink-domain 3",
            "examples/models/llama-2-7b.json", "field 'nvlink_domain'");
}

/* fit --family FILE: a shape whose heads do not divide its hidden size was read with the head
 * dim rounded down (hidden 100, 3 heads: 3 x 33 = 99 columns), a model other than the one
 * described */
static void test_family_heads_divide_hidden(void) {
    char *model = tl_read(tl_path("examples/models/tiny-llama.json"));
    CHECK(model != NULL);
    if (!model) return;
    char fam[1024], args[1200];
    snprintf(fam, sizeof fam, "%s/fam-heads.json", tl_tmpdir());
    FILE *f = fopen(fam, "w");
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "{\"name\": \"fam\", \"model\": %s, \"shapes\": [{\"layers\": 4, "
                "\"hidden\": 100, \"heads\": 3, \"ffn_hidden\": 256}]}", model);
        fclose(f);
    }
    free(model);
    snprintf(args, sizeof args, "fit --gpu a100 --strategies ddp --family %s", fam);
    char *out = NULL, *err = NULL;
    CHECK_INT(tl_run(args, &out, &err), 2);
    CHECK_CONTAINS(err, "shapes[0]: field 'heads' = 3 does not divide 'hidden' = 100");
    free(out);
    free(err);
}

/* Nothing fits on 2 GPUs: "use N GPUs" was tried on N GPUs in nodes of the 2 (the partial node
 * of --gpus 2), so Llama-2-70B was told "use 32 GPUs" (tp 2 at most) though `plan --gpus 16`
 * fits it on two 8-GPU nodes */
static void test_more_gpus_suggestion_node(void) {
    const char *m = "examples/models/llama-2-70b.json";
    char *out = answered("plan '%s' --gpus 2 --no-cache --trainer megatron --zero 0", m);
    CHECK_CONTAINS(out, "nothing fits");
    CHECK_CONTAINS(out, "  - use 16 GPUs: tp4 pp4");
    free(out);
    /* nodes of 2 given: the suggestion keeps them */
    out = answered("plan '%s' --gpus 2 --gpus-per-node 2 --no-cache --trainer megatron --zero 0",
                   m);
    CHECK_CONTAINS(out, "  - use 32 GPUs: tp2 pp16");
    free(out);
}

/* "use --gpu h200" was tried on the catalog's reference H200 system, not on the user's other
 * settings: with 32 GiB of host memory per node it suggested offloading the optimizer states
 * (about 75 GiB for Llama 2 7B), which that host cannot hold; the line the user would run keeps
 * --cpu-mem, and so does the plan it names */
static void test_bigger_gpu_suggestion_keeps_cluster(void) {
    char *out = answered("plan '%s' --gpus 1 --gpu a100-sxm4-40g --cpu-mem 32GiB --no-cache "
                         "--top 1", "examples/models/llama-2-7b.json");
    CHECK_CONTAINS(out, "nothing fits");
    const char *line = out ? strstr(out, "  - use --gpu h200: ") : NULL;
    CHECK(line != NULL);
    const char *eol = line ? strchr(line, '\n') : NULL;
    const char *off = line ? strstr(line, "off-opt") : NULL;
    CHECK(line && (!off || (eol && off > eol)));
    free(out);
}

/* plan/compare --tokens below one token (0.5, 1e-300T) answered "time to train 1e-288 tokens:
 * 0.0 us"; --tokens-per-step refuses a fraction of a token */
static void test_tokens_fraction(void) {
    const char *m = "examples/models/tiny-gpt.json";
    refused("plan '%s' --gpus 8..16 --no-cache --tokens 0.5", m,
            "--tokens: 0.5 is not a token count");
    refused("plan '%s' --gpus 8..16 --no-cache --tokens 1e-300T", m, "--tokens: 1e-288 is not a");
    char fmt[1200];
    snprintf(fmt, sizeof fmt, "compare '%%s' --gpus 8,16 --tokens 0.5 --out %s/tok",
             tl_tmpdir());
    refused(fmt, m, "--tokens: 0.5 is not a token count");
}

/* plan --solver foo: the message listed dp, ilp and auto, not the search's "off" */
static void test_plan_solver_list(void) {
    refused("plan '%s' --gpus 8 --no-cache --solver foo", "examples/models/tiny-gpt.json",
            "--solver: 'foo' is not one of dp, ilp, auto, off");
}

/* --out at a symbolic link to nothing: refused before the search (exit 2) where it once said
 * "cannot write in" after it (exit 1) */
static void test_out_dangling_link(void) {
    char link[512], fmt[1200];
    snprintf(link, sizeof link, "%s/dangling-out", tl_tmpdir());
    remove(link);
    char target[600];
    snprintf(target, sizeof target, "%s/no-such-dir", tl_tmpdir());
    CHECK(symlink(target, link) == 0);
    snprintf(fmt, sizeof fmt, "plan '%%s' --gpus 8 --no-cache --out '%s'", link);
    refused(fmt, "examples/models/tiny-gpt.json", "is a symbolic link that cannot be followed");
    snprintf(fmt, sizeof fmt, "compare '%%s' --gpus 8 --out '%s'", link);
    refused(fmt, "examples/models/tiny-gpt.json", "is a symbolic link that cannot be followed");
    remove(link);
}

/* A plan file whose sequence exceeds the model's learned positions: the reader refuses it as
 * the flags' check does (simulate --plan and run --plan answered for positions the model does
 * not have) */
static void test_planfile_seq_beyond_positions(void) {
    const char *plan = tiny_plan();
    char *text = tl_read(plan);
    CHECK(text != NULL);
    char *at = text ? strstr(text, "\"seq\": 512") : NULL;
    CHECK(at != NULL);
    if (!at) {
        free(text);
        return;
    }
    memcpy(at, "\"seq\": 999", 10); /* the plan section's first "seq" */
    char path[1200];
    snprintf(path, sizeof path, "%s/seq-plan.json", tl_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    free(text);
    char fmt[1400];
    snprintf(fmt, sizeof fmt, "simulate --plan '%s'%%s", path);
    refused(fmt, "", "plan: field 'seq' = 999 exceeds the 512 learned positions of the model");
}

/* Sequence parallelism needs the sequence (per cp rank) to split over tp: the search ranked
 * tp8 sp plans at 4095 tokens, which Megatron-LM refuses to run. Now the default turns sp off
 * there, a pinned --sp is refused, and the search's tp8 plans run plain TP. */
static void test_sp_needs_divisible_seq(void) {
    const char *m = "examples/models/llama-2-7b.json";
    refused("estimate '%s' --gpus 8 --tp 8 --seq 4095 --sp", m,
            "--sp: the 4095 tokens of a sequence are not divisible by tp 8");
    char *out = answered("estimate '%s' --gpus 8 --tp 8 --seq 4095", m);
    CHECK_CONTAINS(out, "tp8 pp1 dp1 no-sp");
    free(out);
    out = answered("plan '%s' --gpus 8 --seq 4095 --fix tp=8 --no-cache", m);
    CHECK_CONTAINS(out, "  1  tp8 pp1 dp1 no-sp");
    CHECK(out && !strstr(out, " sp mbs"));
    free(out);
}

/* Another autoplan file given as a plan (a `db export`): its format is named, where the
 * reader said "major version 2 is not supported" of a field the file does not have */
static void test_planfile_other_format(void) {
    char path[1024], fmt[1200];
    snprintf(path, sizeof path, "%s/export.json", tl_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("{\"format\": \"autoplan-db-export\", \"format_version\": 1, \"runs\": []}\n", f);
    fclose(f);
    snprintf(fmt, sizeof fmt, "simulate --plan '%s'%%s", path);
    refused(fmt, "", "format 'autoplan-db-export', not a plan file");
    snprintf(fmt, sizeof fmt, "emit --plan '%s' --out '%s/eo'%%s", path, tl_tmpdir());
    refused(fmt, "", "format 'autoplan-db-export', not a plan file");
}

int main(int argc, char **argv) {
    tl_init(argc, argv);
    test_seq_beyond_learned_positions();
    test_cluster_node_kept_under_gpus();
    test_fit_strategies_list();
    test_simulate_plan_flags();
    test_simulate_trace_stdout_json();
    test_deepseek_no_experts_topk();
    test_ep_without_moe_layers();
    test_nvlink_domain_part_node();
    test_family_heads_divide_hidden();
    test_more_gpus_suggestion_node();
    test_bigger_gpu_suggestion_keeps_cluster();
    test_tokens_fraction();
    test_plan_solver_list();
    test_out_dangling_link();
    test_planfile_seq_beyond_positions();
    test_sp_needs_divisible_seq();
    test_planfile_other_format();
    return tl_finish();
}
