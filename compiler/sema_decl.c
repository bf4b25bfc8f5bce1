/* compiler/sema_decl.c — the top-level declarations: budgets, constants, policies with
 * their fallback chains, and values (arrays expanded) into the program's tables. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/sema.h"

void rp_sema_decl_budget(S *s, rp_node *n)
{
    uint8_t slot;
    uint64_t v;
    int okl = rp_sema_resolve_loc(s, n->a, &slot);
    if (!rp_sema_eval_kind(s, n->b, K_SIZE, "a budget", &v) || !okl)
        return;
    if (s->has_budget[slot]) {
        char b[24];
        ERR(s, n->loc, "budget for %s is declared twice", rp_sema_slot_name(slot, b, sizeof b));
        NOTE(s, s->budget_decl[slot], "previous budget for %s is here", b);
        return;
    }
    s->has_budget[slot] = 1;
    s->budget_decl[slot] = n->loc;
    s->budget[slot] = v;
}

void rp_sema_decl_const(S *s, rp_node *n)
{
    rp_int v;
    int k;
    s->defining = n->text;
    s->cause = NULL;
    s->cycle_reported = 0;
    int ok = rp_sema_eval_signed(s, n->a, &v, &k);
    if (!ok)
        rp_sema_mark_broken(s, n->text, s->cause, n->loc);
    s->defining = NULL;
    s->cycle_reported = 0;
    if (!ok)
        return;
    if (rp_sema_check_new_name(s, n->text, n->loc))
        return;
    sym *y = rp_sema_add_sym(s, n->text, SYM_CONST, n->loc);
    if (y) {
        y->v = v;
        y->vkind = k;
    }
}

static void decl_policy(S *s, rp_node *n);

/* A policy or value whose declaration failed leaves its name behind as broken: its uses
 * are not reported again ("unknown policy 'keys'" after "unknown policy kind"). */
void rp_sema_decl_policy(S *s, rp_node *n)
{
    decl_policy(s, n);
    if (n->text && !rp_sema_lookup(s, n->text))
        rp_sema_mark_broken(s, n->text, NULL, n->loc);
}

static void decl_value(S *s, rp_node *n);

void rp_sema_decl_value(S *s, rp_node *n)
{
    decl_value(s, n);
    if (n->text && !rp_sema_lookup(s, n->text))
        rp_sema_mark_broken(s, n->text, NULL, n->loc);
}

static void decl_policy(S *s, rp_node *n)
{
    static const char *const kinds[] = {"tiered_lru", "lookahead"};
    uint32_t kind = strcmp(n->text2, "tiered_lru") == 0  ? RPLAN_POLICY_TIERED_LRU
                    : strcmp(n->text2, "lookahead") == 0 ? RPLAN_POLICY_LOOKAHEAD
                                                         : 0;
    if (!kind) {
        rp_loc l = n->a->loc;
        const char *sug = rp_suggest(n->text2, kinds, 2);
        if (sug)
            ERR(s, l, "unknown policy kind '%s'; did you mean '%s'?", n->text2, sug);
        else
            ERR(s, l, "unknown policy kind '%s' (the built-in kinds are tiered_lru and lookahead)",
                n->text2);
        return;
    }
    if (rp_sema_check_new_name(s, n->text, n->loc))
        return;
    rplan_program *p = s->p;
    rp_policyrec pr = {0, kind, p->nchains, 0};
    int ok = 1;
    uint8_t firsts[8];
    for (rp_node *ch = n->c->a; ch; ch = ch->next) {
        rp_chainrec cr;
        memset(cr.s, RP_NOLOC, sizeof cr.s);
        size_t k = 0;
        if (ch->a->num < 2) {
            ERR(s, ch->loc, "a fallback chain needs at least two locations (PREFERRED -> "
                            "FALLBACK)");
            ok = 0;
            continue;
        }
        if (ch->a->num > RP_MAX_CHAIN) {
            ERR(s, ch->loc, "a fallback chain has at most %d locations", RP_MAX_CHAIN);
            ok = 0;
            continue;
        }
        for (rp_node *l = ch->a->a; l; l = l->next) {
            uint8_t slot;
            if (!rp_sema_resolve_loc(s, l, &slot)) {
                ok = 0;
                break;
            }
            for (size_t j = 0; j < k; j++)
                if (cr.s[j] == slot) {
                    char b[24];
                    ERR(s, l->loc, "location %s appears twice in one fallback chain",
                        rp_sema_slot_name(slot, b, sizeof b));
                    ok = 0;
                }
            cr.s[k++] = slot;
        }
        if (!ok)
            continue;
        if (pr.n == 8) {
            ERR(s, ch->loc, "a policy has at most 8 fallback chains");
            ok = 0;
            break;
        }
        for (uint32_t j = 0; j < pr.n; j++)
            if (firsts[j] == cr.s[0]) {
                char b[24];
                ERR(s, ch->loc, "two fallback chains start at %s",
                    rp_sema_slot_name(cr.s[0], b, sizeof b));
                ok = 0;
            }
        firsts[pr.n] = cr.s[0];
        if (p->nchains == p->capchains) {
            uint32_t nc = p->capchains ? p->capchains * 2 : 8;
            rp_chainrec *v = realloc(p->chains, nc * sizeof *v);
            if (!v) {
                s->oom = 1;
                return;
            }
            p->chains = v;
            p->capchains = nc;
        }
        p->chains[p->nchains++] = cr;
        pr.n++;
    }
    if (!ok) {
        p->nchains = pr.first;
        return;
    }
    if (!rp_prog_str(p, n->text, strlen(n->text), &pr.name) ||
        (p->npols == p->cappols &&
         !(p->pols = realloc(p->pols, (p->cappols = p->cappols ? p->cappols * 2 : 8) *
                                          sizeof *p->pols)))) {
        s->oom = 1;
        return;
    }
    sym *y = rp_sema_add_sym(s, n->text, SYM_POLICY, n->loc);
    if (y)
        y->first = p->npols;
    p->pols[p->npols++] = pr;
}

/* "engine.NAME" -> "NAME"; NULL when text is not of that form. */
static const char *engine_loader_name(const char *text)
{
    static const char pre[] = "engine.";
    if (!text || strncmp(text, pre, sizeof pre - 1) != 0 || !text[sizeof pre - 1])
        return NULL;
    return text + sizeof pre - 1;
}

/* fields(...): distinct names, at most RP_MAX_FIELDS, sizes on all of them or none. The
 * field past the limit is refused where it stands, before any more is looked at, so a
 * long list costs no more than a short one. */
static int check_field_names(S *s, rp_node *fields)
{
    int n = 0, sized = 0, ok = 1;
    for (rp_node *f = fields->a->a; f; f = f->next) {
        if (++n > RP_MAX_FIELDS) {
            ERR(s, f->loc, "a value has at most %d fields; '%s' is field %d", RP_MAX_FIELDS,
                f->text, n);
            return 0;
        }
        sized += f->a != NULL;
        for (rp_node *g = fields->a->a; g != f; g = g->next)
            if (strcmp(g->text, f->text) == 0) {
                ERR(s, f->loc, "duplicate field '%s'", f->text);
                NOTE(s, g->loc, "first given here");
                ok = 0;
            }
    }
    if (sized && sized != n) {
        ERR(s, fields->loc, "give every field a size ('NAME = SIZE') or none (equal shares)");
        ok = 0;
    }
    return ok;
}

/* The field records of one value of `size` bytes: declared sizes that add up to it, or
 * equal shares of it. */
static int add_fields(S *s, rp_node *fields, const char *value, uint64_t size, uint32_t *count)
{
    rplan_program *p = s->p;
    uint64_t n = 0, sum = 0;
    for (rp_node *f = fields->a->a; f; f = f->next)
        n++;
    int sized = fields->a->a && fields->a->a->a;
    if (!sized && size % n) {
        ERR(s, fields->loc, "%" PRIu64 " fields cannot share the %" PRIu64 " bytes of '%s' "
                            "equally; give each a size", n, size, value);
        return 0;
    }
    for (rp_node *f = fields->a->a; f; f = f->next) {
        uint64_t fb = size / n;
        if (sized) {
            if (!rp_sema_eval_kind(s, f->a, K_SIZE, "a field size", &fb))
                return 0;
            if (fb == 0) {
                ERR(s, f->a->loc, "field '%s' has no bytes", f->text);
                return 0;
            }
            if (fb > size - sum) {
                ERR(s, f->a->loc, "the fields of '%s' hold more than its %" PRIu64 " bytes",
                    value, size);
                return 0;
            }
            sum += fb;
        }
        rp_fieldrec r = {p->nvals, 0, fb, (uint8_t)(f->op == 1)};
        if (!rp_prog_str(p, f->text, strlen(f->text), &r.name) || !rp_prog_field(p, r)) {
            s->oom = 1;
            return 0;
        }
    }
    if (sized && sum != size) {
        ERR(s, fields->loc, "the fields of '%s' hold %" PRIu64 " bytes, the value %" PRIu64,
            value, sum, size);
        return 0;
    }
    *count = (uint32_t)n;
    return 1;
}

/* A value declaration's attributes and what is computed from them before its elements
 * are made. */
typedef struct vdecl {
    rp_node *mode, *at, *init, *src, *prio, *seeded, *keep, *fields, *limbs;
    rp_node *data;       /* the source's or init's data, or NULL */
    uint8_t keep_bits;   /* FHR_KEEP_* */
    uint32_t gen;        /* the generator's name (string offset) */
    uint64_t dim;        /* array size; 0: a scalar */
    uint8_t slot;        /* initial location, RP_NOLOC for a source */
    int64_t priority;
    uint32_t path, loader; /* file path, loader name (string offsets) */
} vdecl;

/* Each attribute in its slot of d; a repeated one is reported. 0 when one was. */
static int value_attrs(S *s, rp_node *n, vdecl *d)
{
    int ok = 1;
    for (rp_node *a = n->c->a; a; a = a->next) {
        rp_node **slot = a->kind == A_MODE ? &d->mode : a->kind == A_AT ? &d->at
                       : a->kind == A_INIT ? &d->init : a->kind == A_SOURCE ? &d->src
                       : a->kind == A_SEEDED ? &d->seeded : a->kind == A_KEEP ? &d->keep
                       : a->kind == A_FIELDS ? &d->fields : a->kind == A_LIMBS ? &d->limbs
                                             : &d->prio;
        static const char *const an[] = {"replica mode", "at", "init", "source", "priority",
                                         "seeded", "keep", "fields", "limbs"};
        if (*slot) {
            ERR(s, a->loc, "duplicate %s%s%s for value '%s'", a->kind == A_MODE ? "" : "'",
                an[a->kind - A_MODE], a->kind == A_MODE ? "" : "'", n->text);
            NOTE(s, (*slot)->loc, "first given here");
            ok = 0;
        }
        *slot = a;
    }
    d->data = d->src ? d->src->a : d->init ? d->init->a : NULL;
    return ok;
}

/* Where the value comes from: a location or a source, its data. 0 when refused. */
static int value_origin(S *s, rp_node *n, const vdecl *d)
{
    int ok = 1;
    if (d->src && d->at) {
        ERR(s, d->src->loc, "value '%s' has both 'at' and 'source': a value is either adopted "
                            "at a location or reconstructed from a source", n->text);
        ok = 0;
    } else if (!d->src && !d->at) {
        ERR(s, n->loc, "value '%s' needs an initial location ('at LOC') or a source "
                       "('source synth(SEED)' or 'source file(PATH)')", n->text);
        ok = 0;
    }
    if (d->init && d->src) {
        ERR(s, d->init->loc, "'init' gives the data of an adopted value; value '%s' has a "
                             "source instead", n->text);
        ok = 0;
    }
    if (d->src && d->src->a->kind == N_NAME) {
        ERR(s, d->src->a->loc, "'zero' cannot reconstruct a value; use synth(SEED) or "
                               "file(PATH)");
        ok = 0;
    }
    if (d->data && d->data->kind == N_ENGINE && !engine_loader_name(d->data->text)) {
        ERR(s, d->data->loc, "unknown data '%s': data is zero, synth(SEED), file(PATH) or "
                             "engine.NAME(ARG), which the engine's loader NAME supplies",
            d->data->text);
        ok = 0;
    }
    return ok;
}

/* fields(...) against seeded(...): seeded fields need a generator, a seeded value marks
 * some but not all of its fields seeded. 0 when refused. */
static int value_fields(S *s, rp_node *n, const vdecl *d)
{
    if (!d->fields)
        return 1;
    if (!check_field_names(s, d->fields))
        return 0;
    rp_node *first_seeded = NULL;
    int nf = 0, nseeded = 0;
    for (rp_node *f = d->fields->a->a; f; f = f->next) {
        nf++;
        nseeded += f->op == 1;
        if (f->op == 1 && !first_seeded)
            first_seeded = f;
    }
    if (first_seeded && !d->seeded) {
        ERR(s, first_seeded->loc, "field '%s' is seeded, but value '%s' names no generator; "
            "add 'seeded GEN(SEED)'", first_seeded->text, n->text);
        return 0;
    }
    if (d->seeded && !nseeded) {
        ERR(s, d->fields->loc, "the fields of seeded value '%s' mark none 'seeded'; write "
            "'seeded NAME' before each field its generator regenerates", n->text);
        NOTE(s, d->seeded->loc, "the generator is given here");
        return 0;
    }
    if (d->seeded && nseeded == nf) {
        ERR(s, d->fields->loc, "every field of seeded value '%s' is seeded; at least one is "
            "stored (loaded from its data)", n->text);
        return 0;
    }
    return 1;
}

/* keep, the array size, the location and the priority, evaluated into d. 0 when one is
 * refused (-1: out of memory). */
static int value_numbers(S *s, rp_node *n, vdecl *d)
{
    int ok = 1;
    if (d->keep && !d->seeded) {
        ERR(s, d->keep->loc, "'keep' says where host copies hold the regenerated half; value "
                             "'%s' is not 'seeded'", n->text);
        ok = 0;
    } else if (d->keep) {
        uint8_t ks = RP_NOLOC;
        if (!rp_sema_resolve_loc(s, d->keep->a, &ks))
            ok = 0;
        else if (ks > 1) {
            ERR(s, d->keep->a->loc, "'keep' takes host or pinned: devices always hold the "
                                    "regenerated half");
            ok = 0;
        } else
            d->keep_bits = ks == 0 ? FHR_KEEP_HOST : FHR_KEEP_PINNED;
    }
    const char *gn = d->seeded && d->seeded->text ? d->seeded->text : FHR_GENERATOR_COUNTER;
    if (d->seeded && !rp_prog_str(s->p, gn, strlen(gn), &d->gen))
        return -1;
    if (n->a) {
        if (!rp_sema_eval_kind(s, n->a, K_INT, "an array size", &d->dim))
            ok = 0;
        else if (d->dim == 0 || d->dim > 1000000) {
            ERR(s, n->a->loc, "array size must be from 1 to 1000000, not %" PRIu64, d->dim);
            ok = 0;
        }
    }
    d->slot = RP_NOLOC;
    if (d->at && !rp_sema_resolve_loc(s, d->at->a, &d->slot))
        ok = 0;
    if (d->prio) {
        rp_int pv;
        int pk;
        if (!rp_sema_eval_signed(s, d->prio->a, &pv, &pk))
            ok = 0;
        else if (pk != K_INT) {
            ERR(s, d->prio->a->loc, "a priority must be an integer, not a %s",
                pk == K_SIZE ? "size" : "duration");
            ok = 0;
        } else if (pv > INT32_MAX || pv < INT32_MIN) {
            ERR(s, d->prio->a->loc, "priority must be from -2147483648 to 2147483647");
            ok = 0;
        } else
            d->priority = (int64_t)pv;
    }
    return ok;
}

/* The file path and the loader name, interned. 0 when refused (s->oom on memory). */
static int value_strings(S *s, vdecl *d)
{
    rplan_program *p = s->p;
    if (d->data && d->data->kind == N_FILE) {
        if (!d->data->text[0]) {
            ERR(s, d->data->loc, "file() needs a path");
            return 0;
        }
        if (!rp_prog_str(p, d->data->text, strlen(d->data->text), &d->path)) {
            s->oom = 1;
            return 0;
        }
    }
    if (d->data && d->data->kind == N_ENGINE) {
        const char *ln = engine_loader_name(d->data->text);
        if (!rp_prog_str(p, ln, strlen(ln), &d->loader)) {
            s->oom = 1;
            return 0;
        }
    }
    return 1;
}

/* The name of field k of v (its declared one; "b", "a" of a seeded value; "data"). */
static const char *field_name(const rplan_program *p, const rp_value *v, uint32_t k)
{
    if (v->nfields)
        return rp_prog_cstr(p, p->fields[v->field0 + k].name);
    return v->seeded ? (k ? "a" : "b") : "data";
}

/* limbs(Q, K[, P]) of the value v named nm: every field Q + K limbs of equal size, the
 * fields P equal parts. 0 when refused. */
static int value_cut(S *s, const vdecl *d, const char *nm, rp_value *v)
{
    const rp_node *a = d->limbs;
    uint64_t q, k, parts = 1, alpha = 0;
    rp_node *an = a->c ? a->c->next : NULL;
    if (!rp_sema_eval_kind(s, a->a, K_INT, "a limb count", &q) ||
        !rp_sema_eval_kind(s, a->b, K_INT, "a limb count", &k) ||
        (a->c && !rp_sema_eval_kind(s, a->c, K_INT, "a part count", &parts)) ||
        (an && !rp_sema_eval_kind(s, an, K_INT, "a limb count", &alpha)))
        return 0;
    uint32_t nf = rp_value_nfields(v);
    if (v->mode) { /* FHR_EXCLUSIVE */
        ERR(s, a->loc, "limbs of '%s': an exclusive value moves whole; only a replicable value "
            "has partial device copies", nm);
        return 0;
    }
    if (q < 1 || q > RP_MAX_LIMBS) {
        ERR(s, a->a->loc, "limbs of '%s': Q must be from 1 to %u, not %" PRIu64, nm,
            RP_MAX_LIMBS, q);
        return 0;
    }
    if (k > RP_MAX_LIMBS) {
        ERR(s, a->b->loc, "limbs of '%s': K must be from 0 to %u, not %" PRIu64, nm,
            RP_MAX_LIMBS, k);
        return 0;
    }
    rp_loc pl = a->c ? a->c->loc : a->loc;
    if (parts < 1 || parts > nf) {
        ERR(s, pl, "limbs of '%s': P must be from 1 to its %u field%s, not %" PRIu64, nm, nf,
            nf == 1 ? "" : "s", parts);
        return 0;
    }
    if (an && (alpha < 1 || alpha * (parts - 1) >= q || alpha * parts < q)) {
        ERR(s, an->loc, "limbs of '%s': %" PRIu64 " parts of %" PRIu64 " q-limbs do not cover "
            "Q = %" PRIu64 " (the parts must be ceil(Q / ALPHA))", nm, parts, alpha, q);
        return 0;
    }
    if (nf % parts) {
        ERR(s, pl, "limbs of '%s': P = %" PRIu64 " does not divide its %u fields into equal "
            "parts", nm, parts, nf);
        return 0;
    }
    for (uint32_t f = 0; f < nf; f++) {
        uint64_t fb = rp_value_field_nbytes(s->p, v, f);
        if (fb % (q + k)) {
            ERR(s, a->loc, "limbs of '%s': field '%s' of %" PRIu64 " bytes is not Q + K = %"
                PRIu64 " limbs of equal size", nm, field_name(s->p, v, f), fb, q + k);
            return 0;
        }
    }
    v->cut = 1;
    v->limb_q = (uint32_t)q;
    v->limb_special = (uint32_t)k;
    v->limb_parts = (uint32_t)parts;
    v->limb_alpha = alpha == (q + parts - 1) / parts ? 0 : (uint32_t)alpha;
    return 1;
}

/* Element e of the declaration (the whole value when it is no array): its record,
 * appended to the program. 0 when refused (s->oom on memory). */
static int value_element(S *s, rp_node *n, const vdecl *d, uint64_t e)
{
    rplan_program *p = s->p;
    uint64_t size;
    if (!rp_sema_eval_kind(s, n->b, K_SIZE, "a value size", &size))
        return 0;
    if (size == 0) {
        ERR(s, n->b->loc, "a value size must not be zero");
        return 0;
    }
    if (d->seeded && !d->fields && size < 16) {
        ERR(s, d->seeded->loc, "a seeded value regenerates its second half and needs at least "
                               "16 bytes; '%s' has %" PRIu64, n->text, size);
        return 0;
    }
    rp_value v;
    memset(&v, 0, sizeof v);
    char nm[128];
    if (n->a)
        snprintf(nm, sizeof nm, "%s[%" PRIu64 "]", n->text, e);
    else
        snprintf(nm, sizeof nm, "%s", n->text);
    if (!rp_prog_str(p, nm, strlen(nm), &v.name)) {
        s->oom = 1;
        return 0;
    }
    v.mode = d->mode && d->mode->op == FHR_EXCLUSIVE;
    v.recov = d->src != NULL;
    v.init_slot = d->slot;
    v.nbytes = size;
    v.prio = (int32_t)d->priority;
    v.data = RPLAN_DATA_ZERO;
    if (d->data && d->data->kind == N_SYNTH) {
        v.data = RPLAN_DATA_SYNTH;
        if (!rp_sema_eval_kind(s, d->data->a, K_INT, "a seed", &v.arg))
            return 0;
    } else if (d->data && d->data->kind == N_FILE) {
        v.data = RPLAN_DATA_FILE;
        v.arg = d->path;
    } else if (d->data && d->data->kind == N_ENGINE) {
        v.data = RPLAN_DATA_ENGINE;
        v.loader = d->loader;
        if (!rp_sema_eval_kind(s, d->data->a, K_INT, "a loader argument", &v.arg))
            return 0;
    }
    if (d->fields) {
        v.field0 = p->nfields;
        if (!add_fields(s, d->fields, n->text, size, &v.nfields))
            return 0;
    }
    if (d->seeded) {
        v.seeded = 1;
        v.keep = d->keep_bits;
        v.gen = d->gen;
        if (!rp_sema_eval_kind(s, d->seeded->a, K_INT, "a seed", &v.seed))
            return 0;
    }
    if (d->limbs && !value_cut(s, d, nm, &v))
        return 0;
    rp_linerec ln = rp_sema_line_of(n->loc);
    v.line = ln.line;
    v.col = ln.col;
    v.len = ln.len;
    if (p->nvals == p->capvals) {
        uint32_t nc = p->capvals ? p->capvals * 2 : 16;
        rp_value *nv = realloc(p->vals, nc * sizeof *nv);
        if (!nv) {
            s->oom = 1;
            return 0;
        }
        p->vals = nv;
        p->capvals = nc;
    }
    p->vals[p->nvals++] = v;
    return 1;
}

/* value NAME[DIM] = SIZE attrs: the attributes checked together, then one record per
 * element (an array's elements with the loop variable i bound), then the name. */
static void decl_value(S *s, rp_node *n)
{
    vdecl d;
    memset(&d, 0, sizeof d);
    int ok = value_attrs(s, n, &d);
    ok &= value_origin(s, n, &d);
    ok &= value_fields(s, n, &d);
    int num = value_numbers(s, n, &d);
    if (num < 0) {
        s->oom = 1;
        return;
    }
    if (rp_sema_check_new_name(s, n->text, n->loc) || !ok || !num)
        return;
    rplan_program *p = s->p;
    uint64_t count = n->a ? d.dim : 1;
    if (p->nvals + count > 1000000) {
        ERR(s, n->loc, "too many values (at most 1000000)");
        return;
    }
    if (!value_strings(s, &d))
        return;
    uint32_t first = p->nvals, first_field = p->nfields;
    int pushed = 0;
    if (n->a) {
        if (s->nloops == (int)(sizeof s->loops / sizeof s->loops[0])) {
            ERR(s, n->loc, "loops are nested too deeply");
            return;
        }
        s->loops[s->nloops++] = (loopvar){"i", 0, n->loc};
        pushed = 1;
    }
    int made = 1;
    for (uint64_t e = 0; e < count && made; e++) {
        if (pushed)
            s->loops[s->nloops - 1].v = e;
        made = value_element(s, n, &d, e);
    }
    if (pushed)
        s->nloops--;
    if (!made) {
        p->nvals = first;
        p->nfields = first_field;
        return;
    }
    sym *y = rp_sema_add_sym(s, n->text, SYM_VALUE, n->loc);
    if (y) {
        y->first = first;
        y->dim = (uint32_t)d.dim;
        y->is_array = n->a != NULL;
    }
}

/* The slot of the kernel declaration named by the interned string `name` in s->kht (0:
 * none yet), the table grown to keep it at most half full; NULL when out of memory. Names
 * are interned, so equal offsets are equal names and one look-up decides a repeat. */
static uint32_t *kernel_slot(S *s, uint32_t name)
{
    const rplan_program *p = s->p;
    if (2 * ((size_t)p->nkerns + 1) > s->khtcap) {
        size_t cap = s->khtcap ? 2 * s->khtcap : 64;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < s->khtcap; i++) {
            if (!s->kht[i])
                continue;
            size_t h = (p->kerns[s->kht[i] - 1].name * 2654435761u) & (cap - 1);
            while (t[h])
                h = (h + 1) & (cap - 1);
            t[h] = s->kht[i];
        }
        free(s->kht);
        s->kht = t;
        s->khtcap = cap;
    }
    size_t h = (name * 2654435761u) & (s->khtcap - 1);
    while (s->kht[h] && p->kerns[s->kht[h] - 1].name != name)
        h = (h + 1) & (s->khtcap - 1);
    return &s->kht[h];
}

/* kernel NAME cost DURATION | kernel NAME reads SIZE: the model's time for an engine
 * kernel (rplan(5), "Kernels"). */
void rp_sema_decl_kernel(S *s, rp_node *n)
{
    rplan_program *p = s->p;
    int reads = strcmp(n->text2, "reads") == 0;
    if (!reads && strcmp(n->text2, "cost") != 0) {
        ERR(s, n->b->loc, "a kernel declaration gives 'cost DURATION' or 'reads SIZE', not "
                          "'%s'", n->text2);
        return;
    }
    rp_kernrec k = {0, reads ? RPLAN_COST_READS : RPLAN_COST_DURATION, 0};
    uint32_t *slot = NULL;
    if (!rp_prog_str(p, n->text, strlen(n->text), &k.name) || !(slot = kernel_slot(s, k.name))) {
        s->oom = 1;
        return;
    }
    if (*slot) {
        ERR(s, n->loc, "kernel '%s' is declared twice", n->text);
        return;
    }
    if (!rp_sema_eval_kind(s, n->a, reads ? K_SIZE : K_DUR,
                           reads ? "bytes read per call" : "a duration per call", &k.imm))
        return;
    if (!rp_prog_kernel(p, k)) {
        s->oom = 1;
        return;
    }
    *slot = p->nkerns; /* its index + 1 */
}
