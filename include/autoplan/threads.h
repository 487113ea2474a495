/*
 * threads.h - helper threads kept for the life of the process (base/threads.c).
 *
 * A parallel phase of a few milliseconds (a search's enumeration, its re-split ranking) paid
 * for creating and joining its threads: 25-40 us each on a 2-core virtual machine, about 2% of
 * a 2-thread megatron-1t search, twice per search. Helpers are created on first use and kept:
 * a finished helper polls briefly for its next task (the next phase starts microseconds later),
 * then sleeps on its own condition variable. A task is a function and its argument; the caller
 * waits for the tasks it started with ap_tasks_wait. A helper that cannot be created (no memory,
 * no thread) leaves its task unstarted: ap_tasks_start says how many started, and the caller
 * shares the work among those (every user here pulls its work from a shared queue).
 *
 * Thread-safe: any thread may start tasks; a task may itself start tasks. After fork() the
 * child starts from an empty set (the parent's helpers do not exist there).
 */
#ifndef AP_THREADS_H
#define AP_THREADS_H

#include <pthread.h>

/* The tasks one caller started (on its stack; ap_tasks_start initialises it). */
typedef struct ap_tasks {
    pthread_mutex_t mu;
    pthread_cond_t done;
    _Atomic int pending; /* started and not returned (changed under mu; polled without it) */
} ap_tasks;

/* Start fn(args[i]) for i in [0, n) on helper threads, in that order; returns how many
 * started (0..n): tasks from that index on did not start. */
int ap_tasks_start(ap_tasks *t, int n, void *(*fn)(void *), void *const *args);

/* The same with one argument for every task: n copies of fn(arg), for workers that pull their
 * work from a shared queue in arg. */
int ap_tasks_start_same(ap_tasks *t, int n, void *(*fn)(void *), void *arg);

/* Wait until every task t started has returned (polling for a few tens of microseconds before
 * sleeping); t is then finished with. */
void ap_tasks_wait(ap_tasks *t);

/* Poll while busy(arg) holds, for at most 50 us: a sleep and a wake-up on a condition variable
 * cost tens of microseconds on a virtual machine (a futex call and an inter-processor
 * interrupt each way), where the phases and batches of a search follow each other
 * microseconds apart. The caller then waits on its condition variable as usual (busy may
 * still hold). The helpers poll so for their next task, ap_tasks_wait for its tasks, and the
 * re-split's pool for its batches. */
void ap_poll_while(int (*busy)(const void *arg), const void *arg);

#endif
