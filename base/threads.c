/*
 * threads.c - helper threads kept for the life of the process (threads.h).
 *
 * Each helper has its own lock and condition variable, so starting a task wakes that helper
 * and no other; idle helpers wait on one list. A helper puts itself back on the list before it
 * tells its caller that the task returned, so a caller that starts its next phase at once (a
 * search's ranking right after its enumeration) finds it there instead of creating another.
 */
#include "autoplan/threads.h"

#include "autoplan/common.h"

#include <stdatomic.h>

/* How long ap_poll_while polls (threads.h) */
#define POLL_S 50e-6

typedef struct helper {
    pthread_mutex_t mu;
    pthread_cond_t go;
    _Atomic int posted;  /* a task is waiting in fn, arg, owner (written under mu) */
    void *(*fn)(void *);
    void *arg;
    ap_tasks *owner;
    struct helper *next; /* on the idle list (list_mu) */
} helper;

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static helper *idle;     /* helpers waiting for a task */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* fork(): the list is locked across it, and the child's is emptied (its helpers are the
 * parent's threads, which the child does not have; their structures are left behind). */
static void fork_prepare(void) { pthread_mutex_lock(&list_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&list_mu); }
static void fork_child(void) {
    idle = NULL;
    pthread_mutex_unlock(&list_mu);
}
static void fork_register(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

void ap_poll_while(int (*busy)(const void *arg), const void *arg) {
    double t0 = ap_now_s();
    for (unsigned i = 1; busy(arg); i++) {
        cpu_relax();
        if (i % 64 == 0 && ap_now_s() - t0 > POLL_S) return;
    }
}

static int not_posted(const void *h) {
    return !atomic_load_explicit(&((const helper *)h)->posted, memory_order_acquire);
}

static int tasks_pending(const void *t) {
    return atomic_load_explicit(&((const ap_tasks *)t)->pending, memory_order_acquire) > 0;
}

static void *helper_main(void *arg) {
    helper *h = arg;
    for (;;) {
        ap_poll_while(not_posted, h);
        pthread_mutex_lock(&h->mu);
        while (!h->posted) pthread_cond_wait(&h->go, &h->mu);
        void *(*fn)(void *) = h->fn;
        void *a = h->arg;
        ap_tasks *t = h->owner;
        h->posted = 0;
        pthread_mutex_unlock(&h->mu);
        fn(a);
        pthread_mutex_lock(&list_mu);
        h->next = idle;
        idle = h;
        pthread_mutex_unlock(&list_mu);
        /* the last touch of t: once pending reaches 0 the caller may return and t is gone
         * (the caller takes t->mu once more before it does, so this unlock comes first) */
        pthread_mutex_lock(&t->mu);
        if (--t->pending == 0) pthread_cond_signal(&t->done);
        pthread_mutex_unlock(&t->mu);
    }
    return NULL;
}

/* An idle helper, or a new one; NULL when none can be had. */
static helper *claim(void) {
    pthread_once(&fork_once, fork_register);
    pthread_mutex_lock(&list_mu);
    helper *h = idle;
    if (h) idle = h->next;
    pthread_mutex_unlock(&list_mu);
    if (h) return h;
    h = ap_calloc(1, sizeof *h);
    if (!h) return NULL;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->go, NULL);
    pthread_t tid;
    if (pthread_create(&tid, NULL, helper_main, h) != 0) {
        pthread_cond_destroy(&h->go);
        pthread_mutex_destroy(&h->mu);
        ap_free(h);
        return NULL;
    }
    pthread_detach(tid);
    return h;
}

/* n tasks fn(args[i]), or fn(arg) for each when args is NULL */
static int start(ap_tasks *t, int n, void *(*fn)(void *), void *const *args, void *arg) {
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->done, NULL);
    t->pending = 0;
    int started = 0;
    for (; started < n; started++) {
        helper *h = claim();
        if (!h) break;
        pthread_mutex_lock(&t->mu);
        t->pending++;
        pthread_mutex_unlock(&t->mu);
        pthread_mutex_lock(&h->mu);
        h->fn = fn;
        h->arg = args ? args[started] : arg;
        h->owner = t;
        atomic_store_explicit(&h->posted, 1, memory_order_release);
        pthread_cond_signal(&h->go);
        pthread_mutex_unlock(&h->mu);
    }
    return started;
}

int ap_tasks_start(ap_tasks *t, int n, void *(*fn)(void *), void *const *args) {
    return start(t, n, fn, args, NULL);
}

int ap_tasks_start_same(ap_tasks *t, int n, void *(*fn)(void *), void *arg) {
    return start(t, n, fn, NULL, arg);
}

void ap_tasks_wait(ap_tasks *t) {
    ap_poll_while(tasks_pending, t);
    pthread_mutex_lock(&t->mu);
    while (t->pending > 0) pthread_cond_wait(&t->done, &t->mu);
    pthread_mutex_unlock(&t->mu);
    pthread_cond_destroy(&t->done);
    pthread_mutex_destroy(&t->mu);
}
