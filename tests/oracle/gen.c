/* tests/oracle/gen.c — random valid rplan programs for the differential oracle: values of
 * mixed sizes (exclusive and replicable, adopted, sources, seeded), tiered_lru and
 * lookahead policies over one or two devices, requests with reservations and bodies,
 * explicit plans, top-level actions, holds, nested stages and loops; engine kernels whose
 * costs are declared (`kernel NAME reads SIZE` or `cost DURATION`), `verify` of sources
 * (seeded ones with fields among them, which the verifier refuses), exclusive values that
 * start on a device a request takes them away from, and (in about 30% of the plans, from
 * a stream of their own) limb-cut values required and ensured at levels that rise and
 * fall, grown, made whole, dropped, moved whole and held. The generator keeps
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
    /* a limb cut, limbs(q, k, parts[, alpha]) (q 0: none): nf fields of (q + k) limbs of
     * limb bytes each, written out as fields(b0, a0, ...) (pairs) or fields(f0, ...) */
    unsigned q, k, parts, alpha, nf, limb;
    int pairs, plain;
} gval;

typedef struct gen {
    uint64_t *s;
    uint64_t *s2;              /* the later features' own stream: the older ones draw as
                                  they did, so a seed keeps most of its plan */
    uint64_t *s3;              /* limb cuts and levels: a stream of their own too, drawn
                                  only in the plans that use them */
    int limbs;                 /* this plan cuts values and asks for levels */
    unsigned nkern;            /* engine kernels declared: ek0 .. ek(nkern-1) */
    char *buf;
    size_t len, cap;
    int ndev;
    gval v[MAXV];
    unsigned nv, ne;
    unsigned owner[MAXE];      /* element -> value */
    unsigned char where[MAXE]; /* the verifier's copies: bit per location */
    unsigned char held[MAXE];  /* held copies: bit per location */
    unsigned char cutl[MAXE][2]; /* the verifier's device copies of a cut value: the q-limbs
                                    they hold (0: whole) */
    signed char lvl[MAXE], dir[MAXE]; /* a cut element's last level and its trend */
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
static int is_cut(const gen *g, unsigned e) { return g->v[g->owner[e]].q > 0; }

/* ---- limb cuts and levels ---------------------------------------------------------------- */

/* The locations of e's whole copies (the verifier's view: a copy at a level is not one,
 * even at the top level). */
static unsigned whole_of(const gen *g, unsigned e)
{
    unsigned w = g->where[e];
    for (int d = 0; d < 2; d++)
        if (g->cutl[e][d])
            w &= ~(1u << (L_CUDA0 + d));
    return w;
}

/* A drop of e's copy at l keeps a whole copy of a value that must be preserved. */
static int can_drop(const gen *g, unsigned e, int l)
{
    return is_src(g, e) || (whole_of(g, e) & ~(1u << l));
}

/* The q-limbs of e's held copy at l when it holds a level's (0: none, or whole). A
 * held copy is never grown: the manager frees the copy the hold keeps (the case
 * cases/limbs-grow-held-copy.rplan). */
static unsigned held_limbs(const gen *g, unsigned e, int l)
{
    return l >= L_CUDA0 && (g->held[e] >> l & 1) ? g->cutl[e][l - L_CUDA0] : 0;
}

/* The next level of a cut element: its last one moved up or down (a trend that turns at
 * either end, so levels rise and fall over time), now and then anywhere. */
static unsigned next_level(gen *g, unsigned e)
{
    int q = (int)g->v[g->owner[e]].q, l = g->lvl[e];
    if (chance(g->s3, 20)) {
        l = (int)rnd(g->s3, (unsigned)q);
    } else {
        l += g->dir[e] * (int)(1 + rnd(g->s3, 2));
        if (l >= q)
            l = q - 1, g->dir[e] = -1;
        if (l < 0)
            l = 0, g->dir[e] = 1;
    }
    g->lvl[e] = (signed char)l;
    return (unsigned)l;
}

/* " level L" for a requirement or an ensure of e at l, the q-limbs it asks for into *lim,
 * or "" (the whole value, *lim 0): only cut values at devices have levels. */
static const char *level_of(gen *g, unsigned e, int l, unsigned *lim, char *b, size_t n)
{
    *lim = 0;
    b[0] = 0;
    if (!g->limbs || !is_cut(g, e) || l < L_CUDA0)
        return b;
    unsigned held = held_limbs(g, e, l);
    if (!held && chance(g->s3, 25))
        return b;
    unsigned lv = next_level(g, e);
    if (held && lv >= held)
        lv = held - 1; /* at most the held copy's */
    *lim = lv + 1;
    snprintf(b, n, " level %u", lv);
    return b;
}

/* The level of a cut array's element (or another cut value) in a loop over i: fixed,
 * rising, falling or round the q-limbs; "" for the whole value. */
static const char *loop_level(gen *g, const gval *v, char *b, size_t n)
{
    b[0] = 0;
    if (!g->limbs || !v->q || chance(g->s3, 25))
        return b;
    unsigned q = v->q, st = 1 + rnd(g->s3, 3), c = rnd(g->s3, q);
    switch (rnd(g->s3, 4)) {
    case 0: snprintf(b, n, " level %u", c); break;
    case 1: snprintf(b, n, " level min(i * %u + %u, %u)", st, c, q - 1); break;
    case 2: snprintf(b, n, " level max(%u - i * %u, 0)", q - 1 - c / 2, st); break;
    default: snprintf(b, n, " level (i * %u + %u) %% %u", st, c, q); break;
    }
    return b;
}

/* `ensure e @ l` asking for lim q-limbs (0: whole), as the verifier counts it: a new copy,
 * a copy of fewer limbs grown, or nothing. */
static void ensure_at(gen *g, unsigned e, int l, unsigned lim)
{
    char nb[16], lv[24] = "";
    if (lim)
        snprintf(lv, sizeof lv, " level %u", lim - 1);
    line(g, "ensure %s @ %s%s", ename(g, e, nb, sizeof nb), loc_name[l], lv);
    unsigned char *c = l >= L_CUDA0 ? &g->cutl[e][l - L_CUDA0] : NULL;
    if (!(g->where[e] & (1u << l))) {
        g->where[e] |= (unsigned char)(1u << l);
        if (c)
            *c = (unsigned char)lim;
    } else if (c && *c && (!lim || lim > *c)) {
        *c = (unsigned char)lim;
    }
}

/* Moves a whole copy of the cut element e to l, which holds none (a move takes a whole
 * copy, rplan(5)): the manager's choice of source when it is whole and free, else a named
 * one. 0 when there is none. */
static int move_whole(gen *g, unsigned e, int l)
{
    char nb[16];
    unsigned w = whole_of(g, e) & ~(unsigned)g->held[e] & ~(1u << l);
    if ((g->where[e] & (1u << l)) || !w)
        return 0;
    static const int order[] = {L_PINNED, L_HOST, L_CUDA0, L_CUDA1};
    int from = -1;
    for (int i = 0; i < 4 && from < 0; i++)
        if (g->where[e] & (1u << order[i]))
            from = order[i];
    if ((w >> from & 1) && chance(g->s3, 50)) {
        line(g, "move %s -> %s", ename(g, e, nb, sizeof nb), loc_name[l]);
    } else {
        unsigned k = rnd(g->s3, (unsigned)__builtin_popcount(w));
        for (from = 0; !(w >> from & 1) || k--; from++)
            ;
        line(g, "move %s -> %s from %s", ename(g, e, nb, sizeof nb), loc_name[l], loc_name[from]);
    }
    g->where[e] = (unsigned char)((g->where[e] | 1u << l) & ~(1u << from));
    for (int d = 0; d < 2; d++)
        if (l == L_CUDA0 + d || from == L_CUDA0 + d)
            g->cutl[e][d] = 0;
    return 1;
}

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
    char lv[24];
    unsigned lim;
    for (unsigned i = 0; i < nreq; i++)
        line(g, "require %s @ %s%s", ename(g, req[i], nb, sizeof nb), loc_name[dev_loc(d)],
             level_of(g, req[i], dev_loc(d), &lim, lv, sizeof lv));
    if (g->limbs && chance(g->s3, 25)) /* a cut value twice, at another level or whole */
        for (unsigned i = 0; i < nreq; i++)
            if (is_cut(g, req[i])) {
                line(g, "require %s @ %s%s", ename(g, req[i], nb, sizeof nb),
                     loc_name[dev_loc(d)], level_of(g, req[i], dev_loc(d), &lim, lv, sizeof lv));
                break;
            }
    if (g->ndev == 2 && chance(g->s, 25)) { /* one replicable value on the other device too */
        int e = pick(g, 0, 0);
        int dup = e < 0;
        for (unsigned i = 0; i < nreq && !dup; i++)
            dup = req[i] == (unsigned)e && is_excl(g, req[i]);
        if (!dup)
            line(g, "require %s @ %s%s", ename(g, (unsigned)e, nb, sizeof nb),
                 loc_name[dev_loc(1 - d)],
                 level_of(g, (unsigned)e, dev_loc(1 - d), &lim, lv, sizeof lv));
    }
    if (chance(g->s, 30))
        line(g, "reserve %s %u KiB \"ws%u\"", loc_name[dev_loc(d)], 1 + rnd(g->s, 4), g->serial++);
    if (g->limbs && chance(g->s3, 15)) {
        /* a long body: a later request may grow a partial copy it still reads */
        line(g, "body { run spin(%u us) }", 500 + rnd(g->s3, 2500));
    } else if (chance(g->s, 75)) {
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
    char lv[48];
    unsigned lim;
    if (other >= 0 && g->owner[other] != (unsigned)arr && chance(g->s, 60))
        line(g, "require %s @ %s%s", ename(g, (unsigned)other, nb, sizeof nb), loc_name[dev_loc(d)],
             held_limbs(g, (unsigned)other, dev_loc(d))
                 ? level_of(g, (unsigned)other, dev_loc(d), &lim, lv, sizeof lv)
                 : loop_level(g, &g->v[g->owner[other]], lv, sizeof lv)); /* grows as i rises */
    else
        other = -1;
    line(g, "require %s[i] @ %s%s", a->name, loc_name[dev_loc(d)], loop_level(g, a, lv, sizeof lv));
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

/* Brings e to location l (ensure, or move for an exclusive value; a cut value's device
 * copy at a level, or grown to a higher one or whole); 0 when nothing to do. */
static int bring(gen *g, unsigned e, int l)
{
    char nb[16], lv[24];
    unsigned lim;
    if (g->where[e] & (1u << l)) {
        unsigned have = l >= L_CUDA0 ? g->cutl[e][l - L_CUDA0] : 0;
        if (!have || held_limbs(g, e, l))
            return 0;
        level_of(g, e, l, &lim, lv, sizeof lv);
        if (lim && lim <= have)
            return 0;
        ensure_at(g, e, l, lim);
        return 1;
    }
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
        level_of(g, e, l, &lim, lv, sizeof lv);
        ensure_at(g, e, l, lim);
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
    if (!can_drop(g, e, l))
        return 0; /* never the last (whole) copy of a value that must be preserved */
    line(g, "drop %s @ %s", ename(g, e, nb, sizeof nb), loc_name[l]);
    g->where[e] &= (unsigned char)~(1u << l);
    if (l >= L_CUDA0)
        g->cutl[e][l - L_CUDA0] = 0;
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
        if (!used && (g->where[e] & (1u << l)) && !(g->held[e] & (1u << l)) &&
            can_drop(g, (unsigned)e, l)) {
            line(g, "reclaim { drop %s @ %s }", ename(g, (unsigned)e, nb, sizeof nb), loc_name[l]);
            g->where[e] &= (unsigned char)~(1u << l);
            g->cutl[e][d] = 0;
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
                /* a level at or below the copy's, or whole (not a held copy) */
                unsigned have = g->cutl[args[i]][d];
                int low = have && g->limbs && (held_limbs(g, args[i], l) || chance(g->s3, 70));
                ensure_at(g, args[i], l, low ? 1 + rnd(g->s3, have) : 0);
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
    if (g->limbs && is_cut(g, (unsigned)e) && chance(g->s3, 25) && move_whole(g, (unsigned)e, l))
        return;
    if (g->limbs && l >= L_CUDA0 && g->cutl[e][l - L_CUDA0] && chance(g->s3, 50) &&
        bring(g, (unsigned)e, l))
        return; /* a partial copy grows */
    if (g->where[e] & (1u << l)) {
        if (!unbring(g, (unsigned)e, l))
            bring(g, (unsigned)e, L_PINNED);
    } else {
        bring(g, (unsigned)e, l);
    }
}

static void gen_block(gen *g, int depth);

/* A cut element for an explicit action: mostly one of the explicit actions' values, now
 * and then one the requests use (their copies at run time are not the verifier's), or -1. */
static int pick_cut(gen *g)
{
    unsigned cand[MAXE], n = 0;
    int cross = chance(g->s3, 25);
    for (unsigned e = 0; e < g->ne; e++)
        if (is_cut(g, e) && (g->v[g->owner[e]].group == 1) != cross)
            cand[n++] = e;
    return n ? (int)cand[rnd(g->s3, n)] : -1;
}

/* In a plan that uses limb cuts, now and then a stage holds a device copy of a cut value
 * (made at a level if there is none) instead of its own hold, and a request requires the
 * held copy at a level: the verifier counts the larger of the two. */
static void hold_cut(gen *g, int *held, int *hl)
{
    char nb[16], lv[24];
    unsigned lim;
    int e = chance(g->s3, 40) ? pick_cut(g) : -1, l = dev_loc(g->ndev == 2 && chance(g->s3, 40));
    if (e < 0 || g->held[e] || g->v[g->owner[e]].group != 1)
        return; /* (the requests' values are required at any level) */
    if (!(g->where[e] & (1u << l))) {
        level_of(g, (unsigned)e, l, &lim, lv, sizeof lv);
        ensure_at(g, (unsigned)e, l, lim);
    }
    if (*held >= 0) {
        line(g, "release %s @ %s", ename(g, (unsigned)*held, nb, sizeof nb), loc_name[*hl]);
        g->held[*held] &= (unsigned char)~(1u << *hl);
    }
    line(g, "hold %s @ %s", ename(g, (unsigned)e, nb, sizeof nb), loc_name[l]);
    g->held[e] |= (unsigned char)(1u << l);
    *held = e;
    *hl = l;
    line(g, "request \"h%u\" using p%u {", g->serial++, rnd(g->s3, (unsigned)g->npol));
    g->indent++;
    line(g, "require %s @ %s%s", nb, loc_name[l], level_of(g, (unsigned)e, l, &lim, lv, sizeof lv));
    if (chance(g->s3, 60))
        line(g, "body { run touch(%s) }", nb);
    g->indent--;
    line(g, "}");
}

/* An explicit action on a cut value (plans that use limb cuts): a device copy at a level,
 * grown to a higher one or made whole, dropped, or a whole copy moved. */
static void gen_limb_action(gen *g)
{
    int e = pick_cut(g);
    if (e < 0)
        return;
    int l = dev_loc(g->ndev == 2 && chance(g->s3, 40));
    unsigned k = rnd(g->s3, 100);
    if (k < 25) {
        int to = chance(g->s3, 60) ? l : chance(g->s3, 50) ? L_PINNED : L_HOST;
        if (move_whole(g, (unsigned)e, to))
            return;
    } else if (k < 45 && unbring(g, (unsigned)e, l)) {
        return;
    }
    if (!bring(g, (unsigned)e, l) && !held_limbs(g, (unsigned)e, l) && chance(g->s3, 30))
        ensure_at(g, (unsigned)e, l, 0); /* there already: made whole */
}

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
    if (g->limbs)
        hold_cut(g, &held, &hl);
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
        if (g->limbs && chance(g->s3, 30))
            gen_limb_action(g);
    }
}

/* ---- declarations ------------------------------------------------------------------------ */

static const unsigned sizes_kib[] = {1, 1, 2, 2, 3, 4, 6, 8};

/* A limb cut for the replicable value v: its fields (the one whole field, a seeded value's
 * b and a, pairs b0, a0, ... or plain fields f0, ...), in parts of consecutive fields, q
 * q-limbs covered by parts of alpha (ALPHA written when the default does not cover them,
 * or to make the last part short), k special limbs, and limb bytes a multiple of 128 so
 * that every --scale up to 16 leaves them whole words (now and then an odd number of
 * words, which the run's exact scale must keep whole: fheplan(1), --scale). */
static void cut_value(gen *g, gval *v)
{
    uint64_t *r = g->s3;
    unsigned kind = rnd(r, 3);
    v->pairs = kind == 1 || (v->seeded && kind == 2);
    v->plain = !v->seeded && kind == 2;
    v->nf = v->pairs ? 2 * (1 + rnd(r, 4)) : v->plain ? 2 + rnd(r, 5) : v->seeded ? 2 : 1;
    unsigned div[8], nd = 0;
    for (unsigned p = 1; p <= v->nf; p++)
        if (v->nf % p == 0)
            div[nd++] = p;
    v->parts = v->pairs && chance(r, 50) ? v->nf / 2 : div[rnd(r, nd)];
    unsigned a = 1 + rnd(r, v->parts > 3 ? 2 : 4);
    v->q = a * (v->parts - 1) + 1 + rnd(r, a); /* parts of a cover q */
    if (v->parts == 1) { /* one part: any alpha from q on */
        v->q = 2 + rnd(r, 10);
        a = v->q + rnd(r, 3);
    }
    unsigned def = (v->q + v->parts - 1) / v->parts;
    int def_covers = def * (v->parts - 1) < v->q;
    v->alpha = !def_covers || chance(r, a != def ? 60 : 15) ? a : 0;
    v->k = rnd(r, 4);
    unsigned limbs = v->nf * (v->q + v->k), m = 96 / limbs;
    v->limb = 128 * (1 + rnd(r, m ? m : 1));
    if (chance(r, 15)) /* an odd number of words: the run keeps its scale exact below that */
        v->limb = 8 * (1 + 2 * rnd(r, 8));
    v->fields = 0; /* the cut writes its own fields */
}

/* `value ...` for v, its elements and the verifier's first view of them; r draws the
 * optional words. */
static void declare(gen *g, gval *v, uint64_t *r)
{
    snprintf(v->name, sizeof v->name, "%c%u", v->excl ? 'c' : v->source ? 'k' : 'w', g->nv);
    v->first = g->ne;
    unsigned n = v->count ? v->count : 1;
    for (unsigned k = 0; k < n; k++) {
        g->owner[g->ne] = g->nv;
        g->where[g->ne] = v->source ? 0 : (unsigned char)(1u << v->at);
        if (v->q) {
            g->lvl[g->ne] = (signed char)rnd(g->s3, v->q);
            g->dir[g->ne] = chance(g->s3, 50) ? 1 : -1;
        }
        g->ne++;
    }
    char decl[512];
    size_t u = (size_t)snprintf(decl, sizeof decl, "value %s", v->name);
    if (v->count)
        u += (size_t)snprintf(decl + u, sizeof decl - u, "[%u]", v->count);
    const char *mode = v->excl ? " exclusive" : chance(r, 30) ? " replicable" : "";
    if (v->q)
        u += (size_t)snprintf(decl + u, sizeof decl - u, " = %u B%s",
                              v->nf * (v->q + v->k) * v->limb, mode);
    else
        u += (size_t)snprintf(decl + u, sizeof decl - u, " = %u KiB%s", v->kib, mode);
    if (v->source)
        u += (size_t)snprintf(decl + u, sizeof decl - u, " source synth(%u%s)", 100 * g->nv,
                              v->count ? " + i" : "");
    else if (chance(r, 70))
        u += (size_t)snprintf(decl + u, sizeof decl - u, " at %s init synth(%u%s)",
                              loc_name[v->at], 100 * g->nv, v->count ? " + i" : "");
    else
        u += (size_t)snprintf(decl + u, sizeof decl - u, " at %s", loc_name[v->at]);
    if (v->prio)
        u += (size_t)snprintf(decl + u, sizeof decl - u, " priority %d", v->prio);
    if (v->fields)
        u += (size_t)snprintf(decl + u, sizeof decl - u, " fields(b0, seeded a0)");
    if (v->pairs || v->plain) {
        u += (size_t)snprintf(decl + u, sizeof decl - u, " fields(");
        for (unsigned f = 0; f < v->nf; f++)
            u += (size_t)snprintf(decl + u, sizeof decl - u, "%s%s%u", f ? ", " : "",
                                  v->plain ? "f" : f % 2 ? v->seeded ? "seeded a" : "a" : "b",
                                  v->plain ? f : f / 2);
        u += (size_t)snprintf(decl + u, sizeof decl - u, ")");
    }
    if (v->seeded)
        u += (size_t)snprintf(decl + u, sizeof decl - u, " seeded(%u%s)%s", 7000 + 10 * g->nv,
                              v->count ? " + i" : "", chance(r, 15) ? " keep pinned" : "");
    if (v->q) {
        u += (size_t)snprintf(decl + u, sizeof decl - u, " limbs(%u, %u", v->q, v->k);
        if (v->parts > 1 || v->alpha)
            u += (size_t)snprintf(decl + u, sizeof decl - u, ", %u", v->parts);
        if (v->alpha)
            u += (size_t)snprintf(decl + u, sizeof decl - u, ", %u", v->alpha);
        snprintf(decl + u, sizeof decl - u, ")");
    }
    line(g, "%s", decl);
    g->nv++;
}

/* Keys of a plan that uses limb cuts: replicable, sources (some seeded) or adopted,
 * scalars or arrays, each cut. */
static void add_keys(gen *g)
{
    unsigned n = 1 + rnd(g->s3, 2);
    for (unsigned i = 0; i < n && g->nv < MAXV; i++) {
        gval *v = &g->v[g->nv];
        memset(v, 0, sizeof *v);
        v->group = (int)rnd(g->s3, 2);
        if (v->group == 0 && chance(g->s3, 50))
            v->count = 2 + rnd(g->s3, 3);
        if (g->ne + (v->count ? v->count : 1) > MAXE)
            return;
        v->source = chance(g->s3, 65);
        v->seeded = v->source && chance(g->s3, 45);
        v->at = chance(g->s3, 60) ? L_PINNED : L_HOST;
        v->prio = chance(g->s3, 20) ? (int)rnd(g->s3, 10) : 0;
        cut_value(g, v);
        declare(g, v, g->s3);
    }
}

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
        if (g->limbs && !v->excl && chance(g->s3, 40))
            cut_value(g, v);
        declare(g, v, g->s);
    }
    if (g->limbs)
        add_keys(g);
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
                unsigned lim;
                level_of(g, (unsigned)e, v->at, &lim, nb, sizeof nb);
                ensure_at(g, (unsigned)e, v->at, lim);
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
    uint64_t s = seed, s2 = seed ^ 0x6b65726e656c73ULL, s3 = seed ^ 0x6c696d6273ULL;
    g.s = &s;
    g.s2 = &s2;
    g.s3 = &s3;
    g.limbs = chance(g.s3, 30);
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
