/*
 * launch.c - starting the ranks of `autoplan run` (runtime.h, ap_rt_launch): the worker
 * `autoplan-rank` under `mpirun -np N` (Open MPI's launcher; across hosts with a hostfile), or,
 * when autoplan itself already runs as one rank of an mpirun/srun launch, the worker as a child
 * of this process, which takes over its place in the MPI world (MPI reads the rank from the
 * inherited environment, as with any wrapper script). The job goes to rank 0's standard input;
 * rank 0's standard output carries the report; standard error is collected for the message of
 * a failing rank.
 *
 * Bounded: the whole launch gets `timeout_s`; past it, or on a cancel request, the launcher's
 * process group gets SIGTERM, then SIGKILL two seconds later, and Open MPI takes its ranks down
 * with it (each rank also ends itself at the same deadline, `autoplan-rank --timeout`). The
 * child runs in its own process group; on Linux this process is also the "child subreaper" of
 * the launch, so ranks orphaned by a killed mpirun are reparented here and reaped, never left
 * as zombies or strays.
 *
 * Environment given to the ranks (unless already set): OPENBLAS_NUM_THREADS=1 (one core per
 * rank: OpenBLAS's own threads would oversubscribe), and
 * OMPI_MCA_btl_vader_single_copy_mechanism=none (Open MPI's shared-memory transport otherwise
 * needs ptrace permission for CMA copies, which containers deny).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "autoplan/runtime.h"

int ap_rt_launched_rank(int *rank, int *size) {
    /* Open MPI (OMPI_COMM_WORLD_*), MPICH/Hydra and PMI-2 (PMI_*), Slurm's srun job steps
       (SLURM_STEP_ID with SLURM_PROCID/SLURM_NTASKS; a batch script alone has no step id) */
    static const char *pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                     {"PMI_RANK", "PMI_SIZE"},
                                     {"SLURM_PROCID", "SLURM_NTASKS"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const char *r = getenv(pairs[i][0]), *s = getenv(pairs[i][1]);
        if (!r || !s) continue;
        if (i == 2 && !getenv("SLURM_STEP_ID")) continue;
        *rank = atoi(r);
        *size = atoi(s);
        if (*size >= 1 && *rank >= 0 && *rank < *size) return 1;
    }
    return 0;
}

typedef struct buf {
    char *p;
    size_t n, cap;
    int oom;
} buf;

static void buf_add(buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 65536;
        while (nc < b->n + n + 1) nc *= 2;
        char *q = ap_realloc(b->p, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* argv of the child: mpirun ... autoplan-rank ..., or autoplan-rank ... alone. */
static int build_argv(const ap_rt_launch_opts *o, int direct, char **argv, int max, char *np,
                      char *timeout) {
    int n = 0;
    snprintf(np, 16, "%d", o->ranks);
    snprintf(timeout, 32, "%.0f", o->timeout_s > 0 ? o->timeout_s + 5 : 0);
    if (!direct) {
        argv[n++] = (char *)o->mpirun;
        argv[n++] = "-np";
        argv[n++] = np;
        argv[n++] = "--oversubscribe"; /* more ranks than cores: tests, small hosts */
        argv[n++] = "--bind-to";
        argv[n++] = "none";
        if (geteuid() == 0) argv[n++] = "--allow-run-as-root"; /* containers, CI */
        if (o->hostfile && *o->hostfile) {
            argv[n++] = "--hostfile";
            argv[n++] = (char *)o->hostfile;
        }
        /* exported to ranks on other hosts too */
        argv[n++] = "-x";
        argv[n++] = "OPENBLAS_NUM_THREADS";
        argv[n++] = "-x";
        argv[n++] = "OMPI_MCA_btl_vader_single_copy_mechanism";
    }
    argv[n++] = (char *)o->rank_bin;
    if (o->timeout_s > 0) {
        argv[n++] = "--timeout";
        argv[n++] = timeout;
    }
    if (o->tag && *o->tag) {
        argv[n++] = "--tag";
        argv[n++] = (char *)o->tag;
    }
    argv[n] = NULL;
    return n < max ? 0 : -1;
}

static void kill_group(pid_t pid, double *term_at) {
    if (*term_at <= 0) {
        kill(-pid, SIGTERM);
        *term_at = now_s();
    } else if (now_s() - *term_at > 2.0) {
        kill(-pid, SIGKILL);
    }
}

/* The launcher (mpirun, or the worker alone in a direct launch) in its own process group, with
 * pipes for its standard input (the job), output and error. */
typedef struct child {
    pid_t pid;
    int in, out, err; /* our ends */
} child;

static ap_status start_child(char **argv, child *ch, ap_err *err) {
    int in[2], out[2], er[2];
    if (pipe(in) != 0) return ap_err_set(err, AP_ERR_IO, "pipe: %s", strerror(errno));
    if (pipe(out) != 0) {
        close(in[0]), close(in[1]);
        return ap_err_set(err, AP_ERR_IO, "pipe: %s", strerror(errno));
    }
    if (pipe(er) != 0) {
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        return ap_err_set(err, AP_ERR_IO, "pipe: %s", strerror(errno));
    }
    fflush(NULL);
#ifdef PR_SET_CHILD_SUBREAPER
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
    pid_t pid = fork();
    if (pid < 0) {
        close(in[0]), close(in[1]), close(out[0]), close(out[1]), close(er[0]), close(er[1]);
        return ap_err_set(err, AP_ERR_IO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(er[1], 2);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]), close(er[0]), close(er[1]);
        setenv("OPENBLAS_NUM_THREADS", "1", 0);
        setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
        execvp(argv[0], argv);
        dprintf(2, "autoplan run: cannot start %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* both sides set it: no race with the exec */
    close(in[0]), close(out[1]), close(er[1]);
    ch->pid = pid;
    ch->in = in[1];
    ch->out = out[0];
    ch->err = er[0];
    return AP_OK;
}

/* Write the job to the launcher's standard input and close it. */
static void send_job(child *ch, const char *job) {
    if (job) {
        size_t len = strlen(job), off = 0;
        signal(SIGPIPE, SIG_IGN);
        while (off < len) {
            ssize_t w = write(ch->in, job + off, len - off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            off += (size_t)w;
        }
    }
    close(ch->in);
    ch->in = -1;
}

/* Read the launcher's output and error until it has exited and closed them; at the timeout or
 * on cancellation stop its group (SIGTERM, then SIGKILL). Returns its wait status. */
static int pump(const ap_rt_launch_opts *o, child *ch, buf *bo, buf *be, double t0,
                ap_rt_launch_result *res) {
    struct pollfd fds[2] = {{ch->out, POLLIN, 0}, {ch->err, POLLIN, 0}};
    double term_at = 0;
    int status = 0, exited = 0, open_fds = 2;
    while (!exited || open_fds > 0) {
        int rc = poll(fds, 2, 200);
        if (rc < 0 && errno != EINTR) break;
        for (int i = 0; i < 2 && rc > 0; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char chunk[8192];
            ssize_t r = read(fds[i].fd, chunk, sizeof chunk);
            if (r > 0) {
                buf_add(i == 0 ? bo : be, chunk, (size_t)r);
            } else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
        if (!exited && waitpid(ch->pid, &status, WNOHANG) == ch->pid) exited = 1;
        int cancel = o->cancel && *o->cancel;
        if (!exited && ((o->timeout_s > 0 && now_s() - t0 > o->timeout_s) || cancel)) {
            if (!cancel) res->timed_out = 1;
            res->cancelled = cancel;
            kill_group(ch->pid, &term_at);
        }
        /* a rank that left the pipes open after the launcher ended: stop reading */
        if (exited && open_fds > 0 && now_s() - t0 > (o->timeout_s > 0 ? o->timeout_s : 1e9) + 5)
            break;
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    if (!exited) {
        kill(-ch->pid, SIGKILL);
        waitpid(ch->pid, &status, 0);
    }
    return status;
}

/* Anything of the launcher's group still alive after a failure (a rank that ignored SIGTERM),
 * then every descendant orphaned to us (we are their subreaper): reap them all. */
static void reap_all(pid_t pid, int failed) {
    if (failed) kill(-pid, SIGKILL);
    double t_end = now_s();
    int killed = 0;
    while (now_s() - t_end < 5.0) {
        int st2;
        pid_t w = waitpid(-1, &st2, WNOHANG);
        if (w > 0) continue;
        if (w < 0) break; /* ECHILD: nothing left */
        if (!killed && now_s() - t_end > 2.0) {
            kill(-pid, SIGKILL);
            killed = 1;
        }
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
}

ap_status ap_rt_launch(const ap_rt_launch_opts *o, const char *job, ap_rt_launch_result *res,
                       ap_err *err) {
    memset(res, 0, sizeof *res);
    int lrank = 0, lsize = 0;
    int direct = ap_rt_launched_rank(&lrank, &lsize);
    if (direct && lsize != o->ranks)
        return ap_err_set(err, AP_ERR_INPUT, "this launch has %d ranks, the plan needs %d (tp x "
                          "pp x dp)", lsize, o->ranks);
    char *argv[40], np[16], timeout[32];
    if (build_argv(o, direct, argv, 40, np, timeout) != 0)
        return ap_err_set(err, AP_ERR_INTERNAL, "too many launcher arguments");
    child ch = {0, -1, -1, -1};
    ap_status st = start_child(argv, &ch, err);
    if (st != AP_OK) return st;
    double t0 = now_s();
    /* the job for rank 0 (a direct launch: only this launch's rank 0 reads it) */
    send_job(&ch, !direct || lrank == 0 ? job : NULL);
    buf bo = {0}, be = {0};
    int status = pump(o, &ch, &bo, &be, t0, res);
    if (WIFEXITED(status)) res->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) res->exit_code = 128 + WTERMSIG(status);
    reap_all(ch.pid, res->timed_out || res->cancelled || res->exit_code != 0);
    res->elapsed_s = now_s() - t0;
    res->out = bo.p;
    res->out_len = bo.n;
    res->errtext = be.p;
    res->err_len = be.n;
    res->direct = direct;
    res->launch_rank = lrank;
    if (bo.oom || be.oom) return ap_err_set(err, AP_ERR_NOMEM, "out of memory reading the ranks");
    return AP_OK;
}

void ap_rt_launch_result_free(ap_rt_launch_result *r) {
    if (!r) return;
    ap_free(r->out);
    ap_free(r->errtext);
    memset(r, 0, sizeof *r);
}

const char *ap_rt_result_text(const char *out, size_t *len) {
    static const char begin[] = "AUTOPLAN-RESULT-BEGIN\n", end[] = "\nAUTOPLAN-RESULT-END";
    const char *a = out ? strstr(out, begin) : NULL;
    if (!a) return NULL;
    a += sizeof begin - 1;
    const char *b = strstr(a, end);
    if (!b) return NULL;
    *len = (size_t)(b - a);
    return a;
}
