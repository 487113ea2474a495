/*
 * main.c - the autoplan command line: git-style subcommands dispatched from one table. The
 * default command is `plan` (`autoplan MODEL --gpus N`). This is the only file with main(); the
 * commands live in cli/cmd_*.c and return exit codes (0 ok, 1 internal, 2 bad input).
 */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "autoplan/emit.h"
#include "autoplan/db.h"
#include "autoplan/report.h"
#include "autoplan/sim.h"
#include "autoplan/partition.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"plan", ap_cmd_plan, "search the parallel plans that fit and rank them by step time"},
    {"estimate", ap_cmd_estimate, "memory per GPU and step time of one given plan"},
    {"simulate", ap_cmd_simulate, "memory timeline of one plan: when and why it peaks"},
    {"info", ap_cmd_info, "parameter counts, FLOPs and sizes of a model"},
    {"gpus", ap_cmd_gpus, "list the built-in GPU catalog"},
    {"validate", ap_cmd_validate, "predict published training runs and report the errors"},
    {"emit", ap_cmd_emit, "trainer configs (DeepSpeed, Megatron, ...) from a saved plan.json"},
    {"partition", ap_cmd_partition, "optimal uneven split of the layers onto pipeline stages"},
    {"compare", ap_cmd_compare, "compare strategies: report.html with charts, report.md, plans.csv"},
    {"db", ap_cmd_db, "the plan cache, GPU profiles and measured runs (list, import, gc)"},
    {"profile", ap_cmd_profile, "kernel profiles: the tables in use, measure a GPU, share, check"},
    {"fit", ap_cmd_fit, "the largest model a GPU and its host can train, per strategy"},
    {"run", ap_cmd_run, "execute a plan for real on CPU ranks (MPI) and measure it"},
};

static void usage(FILE *f) {
    fprintf(f,
            "autoplan %s - how to split a transformer across GPUs, will it fit, how fast is it\n"
            "\n"
            "usage: autoplan MODEL --gpus N [flags]      (same as `autoplan plan ...`)\n"
            "       autoplan COMMAND [args] [flags]\n"
            "\n"
            "commands:\n",
            AP_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`autoplan COMMAND --help` documents every flag with its units.\n"
               "MODEL is a Hugging Face config.json, a model directory containing one, or an\n"
               "autoplan model file (see README.md).\n");
}

/* Every result goes to stdout: a write that failed there (a full disk, a closed pipe the shell
 * did not turn into SIGPIPE) is a failure, exit 1, however the command ended. A command that
 * already failed has said why in its one line (`db export > /dev/full` names the write): no
 * second line. */
static int finish(int rc) {
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (rc) return rc;
        fprintf(stderr, "autoplan: writing standard output failed: %s\n", strerror(errno));
        return 1;
    }
    return rc;
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv) {
    /* A file size limit (ulimit -f) kills a writer with SIGXFSZ by default; ignored, the write
     * fails with EFBIG instead: the cache is then a warning (unusable, like a full disk) and an
     * output file an I/O error, never a killed process with nothing printed. */
    signal(SIGXFSZ, SIG_IGN);
#ifdef __GLIBC__
    /* The searches allocate and free blocks of 0.1-1 MB by the thousand (each re-split's stage
     * table and DP, each variant search's rankings). glibc maps such blocks fresh and returns
     * them at once (above M_MMAP_THRESHOLD, or trimmed off the heap's top), so every reuse
     * faults its pages in again: 50,000 page faults, 14% of the CPU time of the megatron-1t
     * sweep 64..16384. Kept on the heap below 32 MiB and trimmed above 64 MiB free, they are
     * reused: 5,100 faults, for 2-3 MB more peak memory. Large buffers (traces, plans.csv) are
     * still mapped on their own. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
    return finish(dispatch(argc, argv));
}

static int dispatch(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *a = argv[1];
    if (!strcmp(a, "--help") || !strcmp(a, "-h") || !strcmp(a, "help")) {
        if (argc == 2) {
            usage(stdout);
            return 0;
        }
        /* `autoplan help db list` is `autoplan db list --help` (git's `help`): the command's own
           help, not the overview; anything else after it is not a command */
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (!strcmp(argv[2], commands[i].name)) {
                static char help_flag[] = "--help";
                char *sub[8];
                int n = 0;
                for (int k = 3; k < argc && n < 6; k++) sub[n++] = argv[k];
                sub[n++] = help_flag;
                sub[n] = NULL;
                return commands[i].run(n, sub);
            }
        char b[64];
        fprintf(stderr, "autoplan: %s: '%s' is not a command (autoplan --help lists them)\n", a,
                ap_cli_shown(argv[2], b, sizeof b));
        return 2;
    }
    if (!strcmp(a, "--version")) {
        if (argc > 2) {
            char b[64];
            fprintf(stderr, "autoplan: --version: unexpected argument '%s'\n",
                    ap_cli_shown(argv[2], b, sizeof b));
            return 2;
        }
        printf("autoplan %s\n", AP_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(a, commands[i].name)) return commands[i].run(argc - 2, argv + 2);
    if (a[0] == '-') {
        fprintf(stderr, "autoplan: unknown flag '%s' before the command (try autoplan --help)\n", a);
        return 2;
    }
    /* default command: plan MODEL ... */
    return ap_cmd_plan(argc - 1, argv + 1);
}
