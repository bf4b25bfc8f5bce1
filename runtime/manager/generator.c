/* runtime/manager/generator.c — the per-manager registry of generators for regenerable
 * fields (by name, like VM kernels), with its own small lock so loads may read it, and the
 * built-in counter generator. */
#include "runtime/manager/manager.h"
#include "base/error.h"
#include "cuda/counter_gen.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct gen_entry {
    char *name;
    fhr_generator_fn fn;
    void *ctx;
} gen_entry;

struct gen_registry {
    pthread_mutex_t lock;
    gen_entry *e;
    size_t n, cap;
};

fhr_status gens_create(gen_registry **out, fhr_error *err)
{
    gen_registry *r = calloc(1, sizeof *r);
    if (!r || pthread_mutex_init(&r->lock, NULL) != 0) {
        free(r);
        return fhr_fail(err, FHR_E_NOMEM, "generators: out of host memory");
    }
    *out = r;
    return FHR_OK;
}

void gens_destroy(gen_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        free(r->e[i].name);
    free(r->e);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

fhr_status gens_lookup(const gen_registry *cr, const char *name, fhr_generator_fn *fn,
                       void **ctx, fhr_error *err)
{
    gen_registry *r = (gen_registry *)cr;
    if (r) {
        pthread_mutex_lock(&r->lock);
        for (size_t i = 0; i < r->n; i++)
            if (strcmp(r->e[i].name, name) == 0) {
                *fn = r->e[i].fn;
                *ctx = r->e[i].ctx;
                pthread_mutex_unlock(&r->lock);
                return FHR_OK;
            }
        pthread_mutex_unlock(&r->lock);
    }
    if (strcmp(name, FHR_GENERATOR_COUNTER) == 0) {
        *fn = fhr_generator_counter;
        *ctx = NULL;
        return FHR_OK;
    }
    return fhr_fail(err, FHR_E_UNSUPPORTED,
                    "generator '%.100s' is not registered (fhr_generator_register)", name);
}

fhr_status fhr_generator_register(fhr_manager *m, const char *name, fhr_generator_fn fn,
                                  void *ctx, fhr_error *err)
{
    if (!m || !name || !*name || !fn)
        return fhr_fail(err, FHR_E_INVALID, "generator_register: manager, name and function are required");
    gen_registry *r = m->gens;
    pthread_mutex_lock(&r->lock);
    fhr_status st = FHR_OK;
    size_t i = 0;
    while (i < r->n && strcmp(r->e[i].name, name) != 0)
        i++;
    if (i == r->n) {
        char *nm = strdup(name);
        if (!nm || !fhr_grow((void **)&r->e, &r->cap, r->n, sizeof *r->e, 4)) {
            free(nm);
            st = fhr_fail(err, FHR_E_NOMEM, "generator_register: out of host memory");
        } else {
            r->e[r->n++] = (gen_entry){nm, fn, ctx};
        }
    } else {
        r->e[i].fn = fn;
        r->e[i].ctx = ctx;
    }
    pthread_mutex_unlock(&r->lock);
    return st;
}

fhr_status fhr_generator_counter(void *ctx, fhr_backend *b, fhr_location at, fhr_stream *s,
                                 void *dst, size_t nbytes, const void *seed, size_t seed_len,
                                 fhr_error *err)
{
    (void)ctx;
    return fhr_counter_generate(b, at, s, dst, nbytes, fhr_counter_key(seed, seed_len), err);
}
