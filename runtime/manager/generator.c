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
    fhr_generator_fn fn;       /* NULL: registered with a range function only */
    void *ctx;
    fhr_generator_range_fn range; /* NULL: whole fields only */
    void *range_ctx;
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

/* The entry called `name` under the registry's lock, copied out; 0: none. */
static int entry_of(const gen_registry *cr, const char *name, gen_entry *out)
{
    gen_registry *r = (gen_registry *)cr;
    int found = 0;
    if (!r)
        return 0;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n && !found; i++)
        if (strcmp(r->e[i].name, name) == 0) {
            *out = r->e[i];
            found = 1;
        }
    pthread_mutex_unlock(&r->lock);
    return found;
}

fhr_status gens_lookup(const gen_registry *cr, const char *name, fhr_generator_fn *fn,
                       void **ctx, fhr_error *err)
{
    gen_entry e;
    int found = entry_of(cr, name, &e);
    if (found && e.fn) {
        *fn = e.fn;
        *ctx = e.ctx;
        return FHR_OK;
    }
    if (!found && strcmp(name, FHR_GENERATOR_COUNTER) == 0) {
        *fn = fhr_generator_counter;
        *ctx = NULL;
        return FHR_OK;
    }
    return fhr_fail(err, FHR_E_UNSUPPORTED,
                    found ? "generator '%.100s' has only a range function: register a "
                            "whole-field one too (fhr_generator_register)"
                          : "generator '%.100s' is not registered (fhr_generator_register)",
                    name);
}

fhr_status gens_lookup_range(const gen_registry *cr, const char *name,
                             fhr_generator_range_fn *fn, void **ctx, fhr_error *err)
{
    gen_entry e;
    int found = entry_of(cr, name, &e);
    if (found && e.range) {
        *fn = e.range;
        *ctx = e.range_ctx;
        return FHR_OK;
    }
    if (!found && strcmp(name, FHR_GENERATOR_COUNTER) == 0) {
        *fn = fhr_generator_counter_range;
        *ctx = NULL;
        return FHR_OK;
    }
    return fhr_fail(err, FHR_E_UNSUPPORTED,
                    found ? "generator '%.100s' cannot generate part of a field, which a partial "
                            "copy of a cut value needs (fhr_generator_register_range)"
                          : "generator '%.100s' is not registered (fhr_generator_register)",
                    name);
}

/* Adds or updates the entry `name` (whole: fn, else range). */
static fhr_status put_entry(fhr_manager *m, const char *name, int whole, void *fn, void *ctx,
                            fhr_error *err)
{
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
            r->e[r->n++] = (gen_entry){nm, NULL, NULL, NULL, NULL};
        }
    }
    if (st == FHR_OK && whole) {
        r->e[i].fn = (fhr_generator_fn)fn;
        r->e[i].ctx = ctx;
    } else if (st == FHR_OK) {
        r->e[i].range = (fhr_generator_range_fn)fn;
        r->e[i].range_ctx = ctx;
    }
    pthread_mutex_unlock(&r->lock);
    return st;
}

fhr_status fhr_generator_register(fhr_manager *m, const char *name, fhr_generator_fn fn,
                                  void *ctx, fhr_error *err)
{
    if (!m || !name || !*name || !fn)
        return fhr_fail(err, FHR_E_INVALID, "generator_register: manager, name and function are required");
    return put_entry(m, name, 1, (void *)fn, ctx, err);
}

fhr_status fhr_generator_register_range(fhr_manager *m, const char *name,
                                        fhr_generator_range_fn fn, void *ctx, fhr_error *err)
{
    if (!m || !name || !*name || !fn)
        return fhr_fail(err, FHR_E_INVALID, "generator_register_range: manager, name and function "
                        "are required");
    return put_entry(m, name, 0, (void *)fn, ctx, err);
}

fhr_status fhr_generator_counter_range(void *ctx, fhr_backend *b, fhr_location at,
                                       fhr_stream *s, void *dst, size_t nbytes, uint64_t offset,
                                       const void *seed, size_t seed_len, fhr_error *err)
{
    (void)ctx;
    return fhr_counter_generate_at(b, at, s, dst, nbytes, fhr_counter_key(seed, seed_len),
                                   offset, err);
}

fhr_status fhr_generator_counter(void *ctx, fhr_backend *b, fhr_location at, fhr_stream *s,
                                 void *dst, size_t nbytes, const void *seed, size_t seed_len,
                                 fhr_error *err)
{
    (void)ctx;
    return fhr_counter_generate(b, at, s, dst, nbytes, fhr_counter_key(seed, seed_len), err);
}
