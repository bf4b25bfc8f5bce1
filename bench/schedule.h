/* bench/schedule.h — yardsticks for a key-streaming run, computed from its key sequence:
 * a proven lower bound (the exact optimum when every key fits), MIN's feasible schedule
 * and the best schedule a search over eviction decisions finds with the time objective. */
#ifndef FHEPLAN_BENCH_SCHEDULE_H
#define FHEPLAN_BENCH_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#define SCHED_NO_KEY UINT32_MAX

/* The work, in order: use i reads key[i] (SCHED_NO_KEY: none) on the device and then runs
 * for body_s[i] on one compute stream; keys are equal in size, each load takes load_s on
 * one link; the device holds `capacity` keys. lead_s and tail_s are link time before the
 * first use and after the last (the ciphertext's trips). */
typedef struct sched_in {
    const uint32_t *key;
    const double *body_s;
    size_t n;
    size_t capacity;
    double load_s, lead_s, tail_s;
    size_t node_limit; /* branch-and-bound nodes of the search (0: 200000) */
} sched_in;

typedef struct sched_out {
    double bound_s;     /* no schedule is faster (see schedule.c); exact when exact = 1 */
    int exact;          /* every key fits: the bound is met by loading in first-use order */
    double best_s;      /* a feasible schedule: Belady's MIN, loads as early as possible */
    uint64_t min_loads; /* loads of Belady's MIN over the whole sequence */
    double min_idle_s;  /* MIN's schedule: the link's longest idle stretch between loads */
    /* the search (schedule.c): the fastest schedule found over eviction decisions, never
     * slower than MIN's; exact = 1 when the branch-and-bound finished (the optimum of
     * this model: loads in use order, each after the link and its victim's last body) */
    double search_s;
    int search_exact;
    uint64_t search_loads;
    double search_idle_s;
} sched_out;

/* Returns 0, or -1 when memory runs out or capacity is 0 while a key is used. */
int sched_yardsticks(const sched_in *in, sched_out *out);


#endif
