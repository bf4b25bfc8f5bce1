/* runtime/manager/value.h — internals of concrete values shared by the manager: stream-ordered
 * copies and frees (internal). */
#ifndef FHEPLAN_RUNTIME_VALUE_H
#define FHEPLAN_RUNTIME_VALUE_H

#include "fheplan/residency.h"

#include <stdatomic.h>

typedef enum { VBUF_BORROWED = 0, VBUF_FN, VBUF_BACKEND } vbuf_owner;

typedef struct vbuf {
    void *ptr;
    size_t nbytes;
    vbuf_owner owner;
    fhr_free_fn fn;
    void *ctx;
    fhr_backend *b;
} vbuf;

typedef struct vfield {
    char *name;
    size_t buf;   /* VFIELD_OMITTED: a regenerable field with no storage in this copy */
    size_t off;
    size_t nbytes;
} vfield;
#define VFIELD_OMITTED SIZE_MAX

typedef struct vregen { /* a regenerable field (regen.c) */
    size_t field;        /* index into fields */
    char *gen;           /* generator name */
    unsigned char *seed;
    size_t seed_len;
    unsigned keep;       /* FHR_KEEP_* */
} vregen;

/* Metadata, shared by the copies of a value and by values made alike (value_create_like):
 * immutable, freed with its last reference. */
typedef struct vmeta {
    atomic_uint refs;
    fhr_ckks_meta meta;
} vmeta;

struct fhr_value {
    fhr_location loc;
    vmeta *meta;         /* NULL: all zero */
    vbuf *bufs;
    size_t nbufs, capbufs;
    vfield *fields;
    size_t nfields, capfields;
    vregen *regens;      /* regen.c */
    size_t nregens;
    uint64_t generated;  /* bytes the copy that made this value generated */
    uint64_t ondevice;   /* bytes it copied from a partial copy on the same device */
};

typedef struct gen_registry gen_registry; /* generator.c */

/* Whether two metadata are the same field for field (scale by its bits, every prime id). */
int value_meta_same(const fhr_ckks_meta *a, const fhr_ckks_meta *b);
extern const fhr_ckks_meta value_zero_meta;
/* fhr_value_create with like's metadata, shared rather than copied. */
fhr_status value_create_like(fhr_location loc, const fhr_value *like, fhr_value **out,
                             fhr_error *err);
/* Moves buffers [first, nbufs) of v, and the fields over them (the last ones: FHR_E_STATE
 * otherwise), into *tail, a new value at v's location with no fields; v keeps the rest.
 * On failure v is unchanged. */
fhr_status value_split_tail(fhr_value *v, size_t first, fhr_value **tail, fhr_error *err);

/* Copy of v at `to`, allocated and filled in order on s; no host wait (value.c: the
 * compacting copy of a value without regenerable fields). */
fhr_status value_copy_to(const fhr_value *v, fhr_location to, fhr_backend *b, fhr_stream *s,
                         fhr_value **out, fhr_error *err);
/* value_to.c: any value, with a manager's generators (gens NULL: the built-in one only). */
fhr_status value_copy_to_gen(const fhr_value *v, fhr_location to, fhr_backend *b, fhr_stream *s,
                             const gen_registry *gens, fhr_value **out, fhr_error *err);
/* Frees v's buffers after the work enqueued on s so far (s NULL: now). */
void value_destroy_on(fhr_value *v, fhr_backend *b, fhr_stream *s);
/* Whether v matches spec: same fields (names, sizes, order), same metadata, storage
 * within the charge. On mismatch fills err with FHR_E_SOURCE naming the difference. */
fhr_status value_check_spec(const fhr_value *v, const fhr_value_spec *spec, fhr_error *err);


/* ---- regen.c: regenerable fields ---- */
/* Declares field fi regenerable (copies generator and seed). */
fhr_status regen_declare(fhr_value *v, size_t fi, const char *generator, const void *seed,
                         size_t seed_len, unsigned keep, const char *op, fhr_error *err);
/* Whether a copy at `loc` keeps regenerable field r (devices always do). */
int regen_kept_at(const vregen *r, fhr_location loc);
/* Bytes of regenerable fields a copy at a location of this kind omits. */
uint64_t regen_omitted(const fhr_value *v, fhr_loc_kind kind);
/* Checks that v's regenerable fields have storage exactly where they are kept. */
fhr_status regen_check_placement(const fhr_value *v, const char *op, fhr_error *err);
void regen_free(fhr_value *v);

/* ---- generator.c: the generator registry ---- */
fhr_status gens_create(gen_registry **out, fhr_error *err);
void gens_destroy(gen_registry *r);
/* The generator called `name` (NULL registry: only the built-in one). */
fhr_status gens_lookup(const gen_registry *r, const char *name, fhr_generator_fn *fn,
                       void **ctx, fhr_error *err);
/* Its range function (fhr_generator_register_range). */
fhr_status gens_lookup_range(const gen_registry *r, const char *name,
                             fhr_generator_range_fn *fn, void **ctx, fhr_error *err);

#endif
