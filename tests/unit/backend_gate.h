/* tests/unit/backend_gate.h — test helpers for backend tests: a gate host function that
 * holds a stream until the test opens it, and byte patterns for bit-exact copies. */
#ifndef FHEPLAN_TEST_BACKEND_GATE_H
#define FHEPLAN_TEST_BACKEND_GATE_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    int entered; /* how many host functions reached the gate */
} gate;

static inline void gate_init(gate *g)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = 0;
    g->entered = 0;
}

/* Host function: blocks its stream until gate_open. */
static inline void gate_wait(void *arg)
{
    gate *g = arg;
    pthread_mutex_lock(&g->mu);
    g->entered++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

/* Waits until n host functions sit at the gate (so the stream is surely blocked there). */
static inline void gate_await_entered(gate *g, int n)
{
    pthread_mutex_lock(&g->mu);
    while (g->entered < n)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static inline void gate_open(gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static inline void gate_fini(gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

/* Fills p with a pattern that differs for every seed and offset (xorshift bytes). */
static inline void fill_pattern(void *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1u;
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        c[i] = (unsigned char)x;
    }
}

#endif
