/* tests/oracle/gen.c — random valid rplan programs for the differential oracle: values of
 * mixed sizes (exclusive and replicable, adopted, sources, seeded), tiered_lru and
 * lookahead policies over one or two devices, requests with reservations and bodies,
 * explicit plans, top-level actions, holds, nested stages and loops; engine kernels whose
 * costs are declared (`kernel NAME reads SIZE` or `cost DURATION`), `verify` of sources
 * (seeded ones with fields among them, which the verifier refuses), exclusive values that
 * start on a device a request takes them away from. The generator keeps
 * the verifier's view of every copy (requests change nothing there, rplan(5)), so the
 * programs it writes compile under a generous budget; what a policy does at run time is
 * left to the policy. Values used by requests and values used by explicit actions are
 * kept mostly apart, with a few crossings on purpose (the shape of issue reproducer 1). */
#include "tests/oracle/oracle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* 0..n-1 (n > 0) */
static unsigned rnd(uint64_t *s, unsigned n)
{
    return (unsigned)(splitmix64(s) % n);
}

/* 1 with probability pct% */
static int chance(uint64_t *s, unsigned pct)
{
    return rnd(s, 100) < pct;
}

enum { L_HOST, L_PINNED, L_CUDA0, L_CUDA1, NLOC };
static const char *const loc_name[NLOC] = {"host", "pinned", "cuda:0", "cuda:1"};

#define MAXV 12   /* declared values */
#define MAXE 40   /* elements (array members count one each) */
#define MAXR 6    /* requirements of one request */

typedef struct gval {
    char name[8];
    unsigned count;    /* 0: a scalar, else an array of count elements */
    unsigned kib;      /* size per copy */
    int excl, source, seeded, prio;
    int fields;        /* a seeded value declared with fields(b0, seeded a0) */
    int at;            /* adopted at L_HOST or L_PINNED (not a source) */
    int group;         /* 0: used by requests, 1: by explicit actions */
    unsigned first;    /* its first element */
} gval;

typedef struct gen {
    uint64_t *s;
    uint64_t *s2;              /* the later features' own stream: the older ones draw as
                                  they did, so a seed keeps most of its plan */
    unsigned nkern;            /* engine kernels declared: ek0 .. ek(nkern-1) */
    char *buf;
    size_t len, cap;
    int ndev;
    gval v[MAXV];
    unsigned nv, ne;
    unsigned owner[MAXE];      /* element -> value */
    unsigned char where[MAXE]; /* the verifier's copies: bit per location */
    unsigned char held[MAXE];  /* held copies: bit per location */
    int npol;
    unsigned serial;           /* unique names */
    unsigned steps;            /* statements left to write */
    int indent;
} gen;

static void out(gen *g, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        size_t room = g->cap - g->len;
        int n = vsnprintf(g->buf + g->len, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < room) {
            g->len += (size_t)n;
            return;
        }
        size_t cap = g->cap * 2 + (size_t)n;
        char *nb = realloc(g->buf, cap);
        if (!nb)
            abort();
        g->buf = nb;
        g->cap = cap;
    }
}

static void line(gen *g, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    out(g, "%*s%s\n", 2 * g->indent, "", tmp);
}

/* "k[2]" or "ct" */
static const char *ename(const gen *g, unsigned e, char *b, size_t n)
{
    const gval *v = &g->v[g->owner[e]];
    if (v->count)
        snprintf(b, n, "%s[%u]", v->name, e - v->first);
    else
        snprintf(b, n, "%s", v->name);
    return b;
}

static int is_excl(const gen *g, unsigned e) { return g->v[g->owner[e]].excl; }
static int is_src(const gen *g, unsigned e) { return g->v[g->owner[e]].source; }
static int ncopies(const gen *g, unsigned e) { return __builtin_popcount(g->where[e]); }

/* An element of the group (or, with a small chance, of the other one) or -1. */
static int pick(gen *g, int group, int want_excl /* -1 any */)
{
    unsigned cand[MAXE], n = 0;
    int cross = chance(g->s, 4);
    for (unsigned e = 0; e < g->ne; e++) {
        if ((g->v[g->owner[e]].group == group) == cross)
            continue;
        if (want_excl >= 0 && is_excl(g, e) != want_excl)
            continue;
        cand[n++] = e;
    }
    return n ? (int)cand[rnd(g->s, n)] : -1;
}

static int dev_loc(int d) { return L_CUDA0 + d; }

static int pick_dev(gen *g) { return g->ndev == 2 && chance(g->s, 40) ? 1 : 0; }

/* ---- requests ---------------------------------------------------------------------------- */

/* The kernel a body runs over `args` (elements e[0..n)): touch, an engine kernel whose
 * cost is declared, or verify when every argument is a source (its content is known). */
static const char *body_kernel(gen *g, const unsigned *e, unsigned n, char *buf, size_t cap)
{
    int sources = n > 0;
    for (unsigned i = 0; i < n; i++)
        sources &= is_src(g, e[i]);
    if (sources && chance(g->s2, 15))
        return "verify";
    if (g->nkern && chance(g->s2, 50)) {
        snprintf(buf, cap, "ek%u", rnd(g->s2, g->nkern));
        return buf;
    }
    return "touch";
}

static void gen_request(gen *g)
{
    char nb[16], nb2[16];
    int d = pick_dev(g);
    unsigned req[MAXR], nreq = 0, want = 1 + rnd(g->s, 4);
    for (unsigned t = 0; t < 3 * want && nreq < want; t++) {
        int e = pick(g, 0, -1);
        int dup = e < 0;
        for (unsigned i = 0; i < nreq && !dup; i++)
            dup = req[i] == (unsigned)e;
        if (!dup)
            req[nreq++] = (unsigned)e;
    }
    if (!nreq)
        return;
    line(g, "request \"r%u\" using p%u {", g->serial++, rnd(g->s, (unsigned)g->npol));
    g->indent++;
    for (unsigned i = 0; i < nreq; i++)
        line(g, "require %s @ %s", ename(g, req[i], nb, sizeof nb), loc_name[dev_loc(d)]);
    if (g->ndev == 2 && chance(g->s, 25)) { /* one replicable value on the other device too */
        int e = pick(g, 0, 0);
        int dup = e < 0;
        for (unsigned i = 0; i < nreq && !dup; i++)
            dup = req[i] == (unsigned)e && is_excl(g, req[i]);
        if (!dup)
            line(g, "require %s @ %s", ename(g, (unsigned)e, nb, sizeof nb), loc_name[dev_loc(1 - d)]);
    }
    if (chance(g->s, 30))
        line(g, "reserve %s %u KiB \"ws%u\"", loc_name[dev_loc(d)], 1 + rnd(g->s, 4), g->serial++);
    if (chance(g->s, 75)) {
        unsigned k = rnd(g->s, 5);
        if (k == 0)
            line(g, "body { run spin(%u us) }", 1 + rnd(g->s, 20));
        else if (k == 1 && nreq >= 2)
            line(g, "body { run ckks.keyswitch(%s, %s) }", ename(g, req[0], nb, sizeof nb),
                 ename(g, req[1], nb2, sizeof nb2));
        else {
            char args[256] = "";
            size_t used = 0;
            unsigned na = 1 + rnd(g->s, nreq);
            for (unsigned i = 0; i < na; i++)
                used += (size_t)snprintf(args + used, sizeof args - used, "%s%s", i ? ", " : "",
                                         ename(g, req[i], nb, sizeof nb));
            char kb[16];
            line(g, "body { run %s(%s) }", body_kernel(g, req, na, kb, sizeof kb), args);
        }
    }
    g->indent--;
    line(g, "}");
}

/* requests in a loop over an array of the request group */
static void gen_loop(gen *g)
{
    int arr = -1;
    for (unsigned t = 0; t < 8 && arr < 0; t++) {
        unsigned i = rnd(g->s, g->nv);
        if (g->v[i].count && g->v[i].group == 0)
            arr = (int)i;
    }
    if (arr < 0) {
        gen_request(g);
        return;
    }
    const gval *a = &g->v[arr];
    int d = pick_dev(g), other = pick(g, 0, -1);
    char nb[16];
    unsigned n = 1 + rnd(g->s, a->count);
    line(g, "for i in 0..<%u {", n);
    g->indent++;
    line(g, "request \"l%u-{i}\" using p%u {", g->serial++, rnd(g->s, (unsigned)g->npol));
    g->indent++;
    if (other >= 0 && g->owner[other] != (unsigned)arr && chance(g->s, 60))
        line(g, "require %s @ %s", ename(g, (unsigned)other, nb, sizeof nb), loc_name[dev_loc(d)]);
    else
        other = -1;
    line(g, "require %s[i] @ %s", a->name, loc_name[dev_loc(d)]);
    if (chance(g->s, 20))
        line(g, "reserve %s %u KiB", loc_name[dev_loc(d)], 1 + rnd(g->s, 3));
    if (chance(g->s, 70)) {
        if (other >= 0)
            line(g, "body { run touch(%s, %s[i]) }", ename(g, (unsigned)other, nb, sizeof nb), a->name);
        else
            line(g, "body { run touch(%s[i]) }", a->name);
    }
    g->indent--;
    line(g, "}");
    g->indent--;
    line(g, "}");
}

/* ---- explicit actions -------------------------------------------------------------------- */

/* Brings e to location l (ensure, or move for an exclusive value); 0 when nothing to do. */
static int bring(gen *g, unsigned e, int l)
{
    char nb[16];
    if (g->where[e] & (1u << l))
        return 0;
    if (is_excl(g, e) && g->held[e])
        return 0; /* a held copy stays where it is */
    if (is_excl(g, e)) {
        int from = __builtin_ctz(g->where[e]);
        if (chance(g->s, 50))
            line(g, "move %s -> %s from %s", ename(g, e, nb, sizeof nb), loc_name[l], loc_name[from]);
        else
            line(g, "move %s -> %s", ename(g, e, nb, sizeof nb), loc_name[l]);
        g->where[e] = (unsigned char)(1u << l);
    } else {
        line(g, "ensure %s @ %s", ename(g, e, nb, sizeof nb), loc_name[l]);
        g->where[e] |= (unsigned char)(1u << l);
    }
    return 1;
}

/* Removes the copy of e at l when the verifier allows it; 0 when it does not. */
static int unbring(gen *g, unsigned e, int l)
{
    char nb[16];
    if (!(g->where[e] & (1u << l)) || (g->held[e] & (1u << l)))
        return 0;
    if (is_excl(g, e)) {
        int to = chance(g->s, 70) ? L_PINNED : L_HOST;
        line(g, "move %s -> %s from %s", ename(g, e, nb, sizeof nb), loc_name[to], loc_name[l]);
        g->where[e] = (unsigned char)(1u << to);
        return 1;
    }
    if (ncopies(g, e) < 2 && !is_src(g, e))
        return 0; /* never the last copy of a value that must be preserved */
    line(g, "drop %s @ %s", ename(g, e, nb, sizeof nb), loc_name[l]);
    g->where[e] &= (unsigned char)~(1u << l);
    return 1;
}

static void gen_plan(gen *g)
{
    char nb[16];
    int d = pick_dev(g), l = dev_loc(d);
    unsigned args[4], na = 0, want = 1 + rnd(g->s, 3);
    for (unsigned t = 0; t < 3 * want && na < want; t++) {
        int e = pick(g, 1, -1);
        int dup = e < 0;
        for (unsigned i = 0; i < na && !dup; i++)
            dup = args[i] == (unsigned)e;
        if (!dup)
            args[na++] = (unsigned)e;
    }
    if (!na)
        return;
    line(g, "plan \"p%u\" {", g->serial++);
    g->indent++;
    if (chance(g->s, 20)) { /* reclaim: drop some other value's device copy */
        int e = pick(g, 1, 0);
        int used = e < 0;
        for (unsigned i = 0; i < na && !used; i++)
            used = args[i] == (unsigned)e;
        if (!used && (g->where[e] & (1u << l)) && (ncopies(g, (unsigned)e) > 1 || is_src(g, (unsigned)e))) {
            line(g, "reclaim { drop %s @ %s }", ename(g, (unsigned)e, nb, sizeof nb), loc_name[l]);
            g->where[e] &= (unsigned char)~(1u << l);
        }
    }
    if (chance(g->s, 30))
        line(g, "reserve %s %u KiB \"out%u\"", loc_name[l], 1 + rnd(g->s, 4), g->serial++);
    /* enter: every argument onto the device, the first by an action (it fixes where the
     * body runs, rplan(5)) */
    line(g, "enter {");
    g->indent++;
    int acted = 0;
    for (unsigned i = 0; i < na; i++)
        acted |= bring(g, args[i], l);
    if (!acted) /* already there: a no-op ensure names the device; an exclusive value moves */
        for (unsigned i = 0; i < na && !acted; i++)
            if (!is_excl(g, args[i])) {
                line(g, "ensure %s @ %s", ename(g, args[i], nb, sizeof nb), loc_name[l]);
                acted = 1;
            }
    if (!acted && !g->held[args[0]]) { /* exclusive values already there: out and back */
        line(g, "move %s -> pinned from %s", ename(g, args[0], nb, sizeof nb), loc_name[l]);
        line(g, "move %s -> %s from pinned", nb, loc_name[l]);
    } else if (!acted) {
        line(g, "move %s -> host from %s", ename(g, args[0], nb, sizeof nb), loc_name[l]);
        line(g, "move %s -> %s from host", nb, loc_name[l]);
    }
    g->indent--;
    line(g, "}");
    char list[256] = "";
    size_t used = 0;
    for (unsigned i = 0; i < na; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 ename(g, args[i], nb, sizeof nb));
    if (chance(g->s, 85)) {
        char kb[16];
        line(g, "body { run %s(%s) }", body_kernel(g, args, na, kb, sizeof kb), list);
    }
    if (chance(g->s, 50)) {
        line(g, "exit {");
        g->indent++;
        for (unsigned i = 0; i < na; i++)
            if (chance(g->s, 60))
                unbring(g, args[i], l);
        g->indent--;
        line(g, "}"); /* an empty exit block is fine */
    }
    g->indent--;
    line(g, "}");
}

static void gen_action(gen *g)
{
    int e = pick(g, 1, -1);
    if (e < 0)
        return;
    int l = chance(g->s, 70) ? dev_loc(pick_dev(g)) : (chance(g->s, 50) ? L_PINNED : L_HOST);
    if (g->where[e] & (1u << l)) {
        if (!unbring(g, (unsigned)e, l))
            bring(g, (unsigned)e, L_PINNED);
    } else {
        bring(g, (unsigned)e, l);
    }
}

static void gen_block(gen *g, int depth);

static void gen_stage(gen *g, int depth)
{
    char nb[16];
    line(g, "stage \"s%u\" {", g->serial++);
    g->indent++;
    int held = -1, hl = 0;
    if (chance(g->s, 30)) { /* hold a copy of an explicit value for the whole stage */
        held = pick(g, 1, 0);
        if (held >= 0 && (g->where[held] & ((1u << L_HOST) | (1u << L_PINNED)))) {
            hl = (g->where[held] & (1u << L_PINNED)) ? L_PINNED : L_HOST;
            line(g, "hold %s @ %s", ename(g, (unsigned)held, nb, sizeof nb), loc_name[hl]);
            g->held[held] |= (unsigned char)(1u << hl);
        } else {
            held = -1;
        }
    }
    gen_block(g, depth + 1);
    if (held >= 0) { /* no action in between removed the held copy */
        line(g, "release %s @ %s", ename(g, (unsigned)held, nb, sizeof nb), loc_name[hl]);
        g->held[held] &= (unsigned char)~(1u << hl);
    }
    g->indent--;
    line(g, "}");
}

static void gen_block(gen *g, int depth)
{
    unsigned n = 1 + rnd(g->s, depth ? 4 : 7);
    for (unsigned i = 0; i < n && g->steps; i++) {
        g->steps--;
        unsigned k = rnd(g->s, 100);
        if (k < 38)
            gen_request(g);
        else if (k < 58)
            gen_plan(g);
        else if (k < 70)
            gen_action(g);
        else if (k < 82)
            gen_loop(g);
        else if (depth < 3)
            gen_stage(g, depth);
        else
            gen_request(g);
    }
}

/* ---- declarations ------------------------------------------------------------------------ */

static const unsigned sizes_kib[] = {1, 1, 2, 2, 3, 4, 6, 8};

static void gen_values(gen *g)
{
    unsigned nv = 3 + rnd(g->s, 6);
    for (unsigned i = 0; i < nv && g->ne < MAXE; i++) {
        gval *v = &g->v[g->nv];
        memset(v, 0, sizeof *v);
        v->group = i < 2 ? (int)i : (int)rnd(g->s, 2); /* both groups have a value */
        v->kib = sizes_kib[rnd(g->s, sizeof sizes_kib / sizeof *sizes_kib)];
        if (v->group == 0 && chance(g->s, 45))
            v->count = 2 + rnd(g->s, 4);
        if (g->ne + (v->count ? v->count : 1) > MAXE)
            break;
        v->excl = chance(g->s, 30);
        v->source = !v->excl && chance(g->s, v->group == 0 ? 60 : 25);
        v->seeded = v->source && chance(g->s, 30);
        v->at = chance(g->s, 60) ? L_PINNED : L_HOST;
        v->prio = chance(g->s, 20) ? (int)rnd(g->s, 10) : 0;
        /* an exclusive value of the requests that starts on a device: a request elsewhere
         * takes it away while the verifier keeps it charged there */
        if (v->excl && v->group == 0 && !v->count && chance(g->s2, g->ndev == 2 ? 70 : 35))
            v->at = g->ndev == 2 && chance(g->s2, 25) ? L_CUDA1 : L_CUDA0;
        v->fields = v->seeded && chance(g->s2, 30);
        snprintf(v->name, sizeof v->name, "%c%u", v->excl ? 'c' : v->source ? 'k' : 'w', g->nv);
        v->first = g->ne;
        unsigned n = v->count ? v->count : 1;
        for (unsigned k = 0; k < n; k++) {
            g->owner[g->ne] = g->nv;
            g->where[g->ne] = v->source ? 0 : (unsigned char)(1u << v->at);
            g->ne++;
        }
        char decl[256];
        size_t u = (size_t)snprintf(decl, sizeof decl, "value %s", v->name);
        if (v->count)
            u += (size_t)snprintf(decl + u, sizeof decl - u, "[%u]", v->count);
        u += (size_t)snprintf(decl + u, sizeof decl - u, " = %u KiB%s", v->kib,
                              v->excl ? " exclusive" : chance(g->s, 30) ? " replicable" : "");
        if (v->source)
            u += (size_t)snprintf(decl + u, sizeof decl - u, " source synth(%u%s)", 100 * g->nv,
                                  v->count ? " + i" : "");
        else if (chance(g->s, 70))
            u += (size_t)snprintf(decl + u, sizeof decl - u, " at %s init synth(%u%s)",
                                  loc_name[v->at], 100 * g->nv, v->count ? " + i" : "");
        else
            u += (size_t)snprintf(decl + u, sizeof decl - u, " at %s", loc_name[v->at]);
        if (v->prio)
            u += (size_t)snprintf(decl + u, sizeof decl - u, " priority %d", v->prio);
        if (v->fields)
            u += (size_t)snprintf(decl + u, sizeof decl - u, " fields(b0, seeded a0)");
        if (v->seeded)
            u += (size_t)snprintf(decl + u, sizeof decl - u, " seeded(%u%s)%s", 7000 + 10 * g->nv,
                                  v->count ? " + i" : "", chance(g->s, 15) ? " keep pinned" : "");
        line(g, "%s", decl);
        g->nv++;
    }
}

/* An exclusive value that starts on a device, required by a request on the other one,
 * then room needed on the first: the verifier keeps the value charged where it started
 * (requests change nothing in its view), so the plan needs more there than the run's peak
 * (check --min-budget's search must start above both). */
static void gen_moved_away(gen *g)
{
    char nb[16];
    for (unsigned i = 0; i < g->nv; i++) {
        const gval *v = &g->v[i];
        if (!v->excl || v->count || (v->at != L_CUDA0 && v->at != L_CUDA1))
            continue;
        int other = v->at == L_CUDA0 ? L_CUDA1 : L_CUDA0;
        line(g, "request \"away%u\" using p%u { require %s @ %s }", g->serial++,
             rnd(g->s2, (unsigned)g->npol), v->name, loc_name[other]);
        for (unsigned t = 0; t < 8; t++) {
            int e = pick(g, 1, 0);
            if (e >= 0 && !(g->where[e] & (1u << v->at))) {
                line(g, "ensure %s @ %s", ename(g, (unsigned)e, nb, sizeof nb), loc_name[v->at]);
                g->where[e] |= (unsigned char)(1u << v->at);
                break;
            }
        }
        return;
    }
}

char *oracle_generate(uint64_t seed, int *ndev_out)
{
    gen g;
    memset(&g, 0, sizeof g);
    uint64_t s = seed, s2 = seed ^ 0x6b65726e656c73ULL;
    g.s = &s;
    g.s2 = &s2;
    g.cap = 4096;
    g.buf = malloc(g.cap);
    if (!g.buf)
        abort();
    g.buf[0] = 0;
    g.ndev = chance(g.s, 35) ? 2 : 1;
    out(&g, "# oracle plan, seed 0x%016llx\nrplan 1\n", (unsigned long long)seed);
    /* generous budgets: the oracle replaces the one it tightens */
    line(&g, "budget cuda:0 1 MiB");
    if (g.ndev == 2)
        line(&g, "budget cuda:1 1 MiB");
    gen_values(&g);
    g.npol = 1 + (int)rnd(g.s, 2);
    for (int p = 0; p < g.npol; p++) {
        const char *kind = chance(g.s, 50) ? "lookahead" : "tiered_lru";
        if (g.ndev == 2)
            line(&g, "policy p%d = %s(cuda:0 -> pinned -> host, cuda:1 -> pinned%s)", p, kind,
                 chance(g.s, 50) ? " -> host" : "");
        else
            line(&g, "policy p%d = %s(cuda:0 -> %s)", p, kind,
                 chance(g.s, 70) ? "pinned -> host" : "host");
    }
    if (chance(g.s2, 50)) { /* engine kernels with declared costs, by reads or by time */
        g.nkern = 1 + rnd(g.s2, 3);
        for (unsigned k = 0; k < g.nkern; k++)
            if (chance(g.s2, 70))
                line(&g, "kernel ek%u reads %u KiB", k, 1u << rnd(g.s2, 13));
            else
                line(&g, "kernel ek%u cost %u us", k, 1 + rnd(g.s2, 40));
    }
    g.steps = 4 + rnd(g.s, 14);
    gen_block(&g, 0);
    if (g.ndev == 2 && chance(g.s2, 60))
        gen_moved_away(&g);
    *ndev_out = g.ndev;
    return g.buf;
}
