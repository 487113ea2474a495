/*
 * rank_main.c - `autoplan-rank`, the worker `autoplan run` starts once per rank through mpirun
 * (or that runs inside an existing mpirun/srun launch): joins the MPI world, takes the job from
 * rank 0's standard input (JSON, runtime.h ap_rt_job) and broadcasts it, builds its share of the
 * model, measures the host, trains, writes the parameters if asked, and rank 0 prints the
 * gathered report between two marker lines on standard output.
 *
 * Usage: autoplan-rank [--timeout SECONDS] [--tag TEXT]
 *   --timeout  the rank ends itself (exit 124) after this long, so a hung job never outlives
 *              its launcher; the launcher's own timeout normally comes first
 *   --tag      ignored; lets a launcher find its ranks in the process table
 * A failing rank prints "autoplan-rank: rank R: reason" on standard error and aborts the whole
 * job (MPI_Abort): exit 2 for bad input, 1 otherwise.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_int.h"

#define RESULT_BEGIN "AUTOPLAN-RESULT-BEGIN"
#define RESULT_END "AUTOPLAN-RESULT-END"

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "autoplan-rank: timed out\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(124);
}

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = cap < ((size_t)64 << 20) ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, stdin);
        n += r;
        if (r == 0) break;
    }
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

static void die(ap_rt_comm *w, int rank, ap_status st, const ap_err *err) {
    const char *msg = err->msg[0] ? err->msg : ap_status_str(st);
    if (!strncmp(msg, "rank ", 5)) fprintf(stderr, "autoplan-rank: %s\n", msg);
    else fprintf(stderr, "autoplan-rank: rank %d: %s\n", rank, msg);
    fflush(stderr);
    (void)w;
    ap_rt_mpi_abort(ap_status_exit_code(st) ? ap_status_exit_code(st) : 1);
    exit(1);
}

/* The job from rank 0's standard input, on every rank. */
static ap_status receive_job(ap_rt_comm *w, ap_rt_job *job, ap_err *err) {
    rt_group *g = w->world;
    char *text = NULL;
    size_t len = 0;
    if (g->rank == 0) {
        text = read_stdin(&len);
        if (!text) return ap_err_set(err, AP_ERR_IO, "could not read the job from standard input");
    }
    int64_t n = (int64_t)len;
    ap_status st = g->ops->bcast(g, 0, &n, sizeof n, err);
    if (st == AP_OK && g->rank != 0) {
        text = malloc((size_t)n + 1);
        if (!text) st = ap_err_set(err, AP_ERR_NOMEM, "out of memory");
        else text[n] = '\0';
    }
    /* every rank takes part in the broadcast, even one that could not allocate */
    char dummy = 0;
    ap_status st2 = g->ops->bcast(g, 0, text ? text : &dummy, text ? n : 0, err);
    if (st == AP_OK) st = st2;
    if (st != AP_OK) {
        free(text);
        return st;
    }
    ap_json *j = ap_json_parse(text, (size_t)n, "job", err);
    free(text);
    if (!j) return AP_ERR_INPUT;
    st = ap_rt_job_from_json(j, "job", job, err);
    ap_json_free(j);
    return st;
}

int main(int argc, char **argv) {
    ap_rt_comm *w = NULL;
    ap_err err = {{0}};
    ap_status st = ap_rt_mpi_init(&argc, &argv, &w, &err);
    if (st != AP_OK) {
        fprintf(stderr, "autoplan-rank: %s\n", err.msg);
        return 1;
    }
    int rank = ap_rt_comm_rank(w);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
            double t = atof(argv[++i]);
            if (t > 0) {
                signal(SIGALRM, on_alarm);
                alarm((unsigned)(t + 0.999));
            }
        } else if (!strcmp(argv[i], "--tag") && i + 1 < argc) {
            i++;
        } else {
            ap_err_set(&err, AP_ERR_INPUT, "unknown argument '%s' (autoplan run starts this "
                       "worker)", argv[i]);
            die(w, rank, AP_ERR_INPUT, &err);
        }
    }
    static ap_rt_job job;
    if ((st = receive_job(w, &job, &err)) != AP_OK) die(w, rank, st, &err);
    int64_t tags = 2 * job.plan.grad_accum * (int64_t)job.plan.pp * job.plan.vp;
    if (tags > ap_rt_mpi_tag_ub()) {
        ap_err_set(&err, AP_ERR_INPUT, "%lld micro-batches x %d chunks exceed MPI's tag range",
                   (long long)job.plan.grad_accum, job.plan.pp * job.plan.vp);
        die(w, rank, AP_ERR_INPUT, &err);
    }
    ap_rt_session *s = NULL;
    if ((st = ap_rt_session_new(&job, w, &s, &err)) != AP_OK) die(w, rank, st, &err);
    if (job.bench && (st = ap_rt_session_bench(s, &err)) != AP_OK) die(w, rank, st, &err);
    ap_rt_report rep;
    if ((st = ap_rt_session_train(s, &rep, &err)) != AP_OK) die(w, rank, st, &err);
    if (job.save_path[0] && (st = ap_rt_session_save(s, job.save_path, &err)) != AP_OK)
        die(w, rank, st, &err);
    if (rank == 0) {
        if (gethostname(rep.host, sizeof rep.host - 1) != 0) snprintf(rep.host, sizeof rep.host, "?");
        ap_json *j = ap_rt_report_to_json(&rep);
        char *text = j ? ap_json_print(j, 0) : NULL;
        ap_json_free(j);
        if (!text) {
            ap_err_set(&err, AP_ERR_NOMEM, "out of memory writing the report");
            die(w, rank, AP_ERR_NOMEM, &err);
        }
        printf("%s\n%s\n%s\n", RESULT_BEGIN, text, RESULT_END);
        fflush(stdout);
        free(text);
    }
    ap_rt_report_free(&rep);
    ap_rt_session_free(s);
    ap_rt_mpi_finalize(w);
    return 0;
}
