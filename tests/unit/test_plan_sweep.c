/* tests/unit/test_plan_sweep.c — a fault sweep over every plan in plans/: each program
 * is compiled, lowered onto the manager (scaled down) and run on the emulated device
 * behind the fault decorator once per injection point — every allocation, copy, event
 * record and source load the clean run reaches. After each failure: the error names the
 * stage and the action, no MUST_PRESERVE value lost its last copy, a recount of copies
 * matches the accounting to the byte, every synth value is still bit-exact, nothing
 * stays reserved or protected; leaks show under `make sanitize` and `make valgrind`.
 *
 * The lowering covers the explicit statements (top-level primitives, holds, plans with
 * their phases and reservations); requests are policy-driven and left to the VM, so
 * they are skipped here. Bodies do not run. */
#include "mgr_helpers.h"
#include "fheplan/rplan.h"

#include <dirent.h>

#define SCALE (UINT64_C(1) << 20) /* sizes, budgets and reservations divided by this */
#define MAXV 256
#define MAXA 64

/* Byte k of synthetic content `seed` (the VM's definition: rplan_synth_word). */
static uint8_t synth_byte(uint64_t seed, uint64_t k)
{
    uint64_t z = seed * 0xD1B54A32D192ED03ULL + (k / 8 + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (uint8_t)(z >> (8 * (k % 8)));
}

static uint64_t scaled(uint64_t n) { return ((n + SCALE - 1) / SCALE + 7) & ~UINT64_C(7); }

/* What a value's bytes must be: synth, zero, or file (unchecked). */
typedef struct vdata {
    int check;     /* 1: content known */
    uint64_t seed; /* 0 with check: zeros */
} vdata;

typedef struct sweep_src {
    struct world *W;
    size_t vi;
} sweep_src;

typedef struct world {
    const rplan_program *p;
    fhr_backend *fault;
    fhr_manager *m;
    size_t nv;
    fhr_handle h[MAXV];
    uint64_t size[MAXV];
    vdata data[MAXV];
    sweep_src src[MAXV];
    int loads, fail_load_at; /* source loads so far; the one to fail (0: none) */
    fhr_hold *holds[MAXV];
    uint32_t hold_value[MAXV];
    fhr_location hold_loc[MAXV];
    size_t nholds;
    char stage[256];
    /* the failure */
    int failed;
    fhr_error err;
    char where[600];
} world;

static fhr_value *make_value(size_t n, const vdata *d)
{
    fhr_value *v = host_value(n, 0);
    void *ptr;
    size_t len;
    cr_assert_eq(fhr_value_field(v, "data", &ptr, &len), FHR_OK);
    for (size_t k = 0; k < len; k++)
        ((uint8_t *)ptr)[k] = d->seed ? synth_byte(d->seed, k) : 0;
    return v;
}

static fhr_status sweep_load(void *ctx, const fhr_value_spec *spec, fhr_location at,
                             fhr_backend *b, fhr_stream *s, fhr_value **out, fhr_error *err)
{
    (void)spec;
    (void)s;
    sweep_src *ss = ctx;
    world *W = ss->W;
    if (++W->loads == W->fail_load_at) {
        if (err) {
            err->status = FHR_E_SOURCE;
            snprintf(err->message, sizeof err->message, "injected fault: source load %d",
                     W->loads);
        }
        return FHR_E_SOURCE;
    }
    fhr_value *hv = make_value(W->size[ss->vi], &W->data[ss->vi]);
    if (at.kind == FHR_LOC_HOST) {
        *out = hv;
        return FHR_OK;
    }
    fhr_status st = fhr_value_to(hv, at, b, NULL, out, err);
    fhr_value_destroy(hv);
    return st;
}

static void world_init(world *W, const rplan_program *p, fhr_fault_kind kind, uint64_t k,
                       int fail_load_at)
{
    memset(W, 0, sizeof *W);
    W->p = p;
    fhr_error_init(&W->err);
    W->fail_load_at = fail_load_at;
    cr_assert_eq(fhr_backend_fault_create(emu_backend(1), &W->fault, NULL), FHR_OK);
    W->nv = rplan_nvalues(p);
    cr_assert_leq(W->nv, MAXV);
    fhr_budget bud[FHR_LOC_SLOTS];
    size_t nb = rplan_nbudgets(p);
    for (size_t i = 0; i < nb; i++) {
        cr_assert_eq(rplan_budget(p, i, &bud[i]), FHR_OK);
        bud[i].nbytes = bud[i].nbytes / SCALE + 8 * W->nv;
    }
    W->m = new_manager(W->fault, bud, nb);
    for (size_t i = 0; i < W->nv; i++) {
        rplan_value_info vi;
        cr_assert_eq(rplan_value(p, i, &vi), FHR_OK);
        W->size[i] = scaled(vi.nbytes);
        W->data[i].check = vi.data != RPLAN_DATA_FILE;
        /* synth(s) as seed s+1 (0 means zeros); file contents stand in as synth, unchecked */
        W->data[i].seed = vi.data == RPLAN_DATA_SYNTH ? vi.seed + 1
                          : vi.data == RPLAN_DATA_FILE ? 0x5eed + i : 0;
        fhr_adopt_opts o = {vi.mode, vi.name, vi.priority};
        if (vi.recoverability == FHR_MUST_PRESERVE) {
            cr_assert(vi.has_initial, "value %s: MUST_PRESERVE without a location", vi.name);
            fhr_value *hv = make_value(W->size[i], &W->data[i]), *v = hv;
            if (vi.initial.kind != FHR_LOC_HOST) {
                cr_assert_eq(fhr_value_to(hv, vi.initial, W->fault, NULL, &v, NULL), FHR_OK);
                fhr_value_destroy(hv);
            }
            cr_assert_eq(fhr_adopt(W->m, &v, &o, &W->h[i], NULL), FHR_OK);
        } else {
            fhr_field_spec f;
            fhr_value_spec spec = pat_spec(&f, W->size[i]);
            W->src[i] = (sweep_src){W, i};
            fhr_source src = {sweep_load, &W->src[i], NULL};
            cr_assert_eq(fhr_register_source(W->m, &spec, &src, &o, &W->h[i], NULL), FHR_OK);
        }
    }
    /* faults count from here: setup is not part of the program */
    if (k)
        fhr_backend_fault_arm(W->fault, kind, fhr_backend_fault_count(W->fault, kind) + k);
}

static void world_free(world *W)
{
    for (size_t i = 0; i < W->nholds; i++)
        fhr_hold_destroy(W->holds[i]);
    fhr_error_clear(&W->err);
    fhr_manager_destroy(W->m);
    fhr_backend_destroy(W->fault);
}

static fhr_action lower_action(world *W, const rplan_instr *in)
{
    fhr_action a = {FHR_ACT_ENSURE, W->h[in->value], in->loc, in->has_from, in->from};
    if (!strcmp(in->opname, "move"))
        a.kind = FHR_ACT_MOVE;
    else if (!strcmp(in->opname, "drop"))
        a.kind = FHR_ACT_DROP;
    else if (!strcmp(in->opname, "discard"))
        a.kind = FHR_ACT_DISCARD;
    return a;
}

static int is_action(const char *op)
{
    return !strcmp(op, "ensure") || !strcmp(op, "move") || !strcmp(op, "drop") ||
           !strcmp(op, "discard");
}

/* Records the failure of the statement at instr i; the error names stage and action. */
static void failed(world *W, const rplan_instr *in, const char *what)
{
    W->failed = 1;
    snprintf(W->where, sizeof W->where, "stage '%.250s', %.200s at %u:%u", W->stage,
             what, in->line, in->col);
}

/* Runs a plan's instructions [i, end]; returns the index of its `end`. */
static size_t run_plan(world *W, size_t i, const rplan_instr *head)
{
    fhr_action acts[3][MAXA];
    size_t nacts[3] = {0, 0, 0};
    fhr_reservation res[MAXA];
    size_t nres = 0;
    int list = -1; /* 0 reclaim, 1 enter, 2 exit, -1 other */
    rplan_instr in;
    for (i++;; i++) {
        cr_assert_eq(rplan_instr_get(W->p, i, &in), FHR_OK);
        if (!strcmp(in.opname, "end"))
            break;
        if (!strcmp(in.opname, "phase"))
            list = in.phase == FHR_PHASE_RECLAIM ? 0 : in.phase == FHR_PHASE_ENTER ? 1
                   : in.phase == FHR_PHASE_EXIT ? 2 : -1;
        else if (!strcmp(in.opname, "reserve")) {
            cr_assert_lt(nres, MAXA);
            res[nres++] = (fhr_reservation){in.loc, scaled(in.imm), in.str};
        } else if (is_action(in.opname) && list >= 0) {
            cr_assert_lt(nacts[list], MAXA);
            acts[list][nacts[list]++] = lower_action(W, &in);
        }
    }
    fhr_plan_desc d = {head->str, acts[0], nacts[0], acts[1], nacts[1], acts[2], nacts[2],
                       res, nres};
    fhr_plan *pl = NULL;
    cr_assert_eq(fhr_plan_create(&d, &pl, NULL), FHR_OK);
    fhr_scope *sc = NULL;
    cr_assert_eq(fhr_scope_create(W->m, pl, NULL, 0, &sc, NULL), FHR_OK);
    char what[200];
    if (fhr_scope_enter(sc, &W->err) != FHR_OK) {
        snprintf(what, sizeof what, "plan '%s' entry", head->str);
        failed(W, head, what);
    } else if (fhr_scope_exit(sc, FHR_OK, &W->err) != FHR_OK) {
        snprintf(what, sizeof what, "plan '%s' exit", head->str);
        failed(W, head, what);
    }
    fhr_scope_destroy(sc);
    fhr_plan_destroy(pl);
    return i;
}

/* Runs the program until its end or the first failure. */
static void run_program(world *W)
{
    size_t n = rplan_ninstrs(W->p);
    size_t stage_len[32];
    int depth = 0;
    for (size_t i = 0; i < n && !W->failed; i++) {
        rplan_instr in;
        cr_assert_eq(rplan_instr_get(W->p, i, &in), FHR_OK);
        const char *op = in.opname;
        if (!strcmp(op, "stage")) {
            cr_assert_lt(depth, 32);
            stage_len[depth++] = strlen(W->stage);
            size_t l = strlen(W->stage);
            snprintf(W->stage + l, sizeof W->stage - l, "%s%s", l ? "/" : "", in.str);
        } else if (!strcmp(op, "endstage")) {
            W->stage[stage_len[--depth]] = '\0';
        } else if (!strcmp(op, "plan")) {
            i = run_plan(W, i, &in);
        } else if (!strcmp(op, "request")) {
            /* policy-driven: skipped by this lowering */
            for (; strcmp(in.opname, "end") != 0; i++)
                cr_assert_eq(rplan_instr_get(W->p, i + 1, &in), FHR_OK);
        } else if (is_action(op)) {
            fhr_action a = lower_action(W, &in);
            fhr_status st = fhr_execute_actions(W->m, &a, 1, NULL, 0, NULL, &W->err);
            if (st != FHR_OK) {
                char what[64];
                snprintf(what, sizeof what, "%s", op);
                failed(W, &in, what);
            }
        } else if (!strcmp(op, "hold")) {
            cr_assert_lt(W->nholds, MAXV);
            if (fhr_hold_acquire(W->m, &W->h[in.value], 1, in.loc, &W->holds[W->nholds],
                                 &W->err) != FHR_OK) {
                failed(W, &in, "hold");
            } else {
                W->hold_value[W->nholds] = in.value;
                W->hold_loc[W->nholds++] = in.loc;
            }
        } else if (!strcmp(op, "release")) {
            /* the most recent hold on this value at this location */
            size_t k = W->nholds;
            while (k-- > 0 && !(W->hold_value[k] == in.value && fhr_loc_equal(W->hold_loc[k], in.loc)))
                ;
            cr_assert_lt(k, W->nholds, "release without a hold at %u:%u", in.line, in.col);
            cr_assert_eq(fhr_hold_release(W->holds[k], NULL), FHR_OK);
            fhr_hold_destroy(W->holds[k]);
            W->nholds--;
            W->holds[k] = W->holds[W->nholds];
            W->hold_value[k] = W->hold_value[W->nholds];
            W->hold_loc[k] = W->hold_loc[W->nholds];
        }
    }
}

/* Content of every copy of every value whose bytes are known. */
static void check_contents(world *W)
{
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(W->m, &s, NULL), FHR_OK);
    for (size_t i = 0; i < W->nv; i++) {
        const fhr_value_info *vi = fhr_snapshot_value(s, W->h[i]);
        if (!vi || !W->data[i].check)
            continue;
        for (size_t c = 0; c < vi->ncopies; c++) {
            fhr_location loc = vi->copies[c].loc;
            fhr_backend *b = W->fault;
            fhr_stream *cs = NULL;
            if (loc.kind == FHR_LOC_CUDA)
                cr_assert_eq(fhr_stream_create(b, loc, &cs, NULL), FHR_OK);
            fhr_lease *l = NULL;
            cr_assert_eq(fhr_acquire(W->m, &W->h[i], 1, loc, cs, &l, NULL), FHR_OK);
            if (cs)
                fhr_stream_sync(b, cs, NULL);
            fhr_value *hv = NULL;
            cr_assert_eq(fhr_value_to(fhr_lease_value(l, W->h[i]), fhr_loc_host(), b, NULL, &hv,
                                      NULL), FHR_OK);
            void *ptr;
            size_t len;
            cr_assert_eq(fhr_value_field(hv, "data", &ptr, &len), FHR_OK);
            cr_assert_eq(len, W->size[i]);
            for (size_t k = 0; k < len; k++) {
                uint8_t want = W->data[i].seed ? synth_byte(W->data[i].seed, k) : 0;
                cr_assert_eq(((uint8_t *)ptr)[k], want, "value %zu byte %zu differs", i, k);
            }
            fhr_value_destroy(hv);
            cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
            fhr_lease_destroy(l);
            if (cs) {
                fhr_stream_sync(b, cs, NULL);
                fhr_stream_destroy(b, cs);
            }
            fhr_reap(W->m);
        }
    }
    fhr_snapshot_free(s);
}

static void check_after(world *W, const char *plan, const char *what)
{
    if (W->failed) {
        /* the error names the stage and the action, and says why */
        cr_assert(W->where[0] && strstr(W->where, "stage '"), "%s", W->where);
        cr_assert(W->err.status == FHR_E_BACKEND || W->err.status == FHR_E_SOURCE ||
                      W->err.status == FHR_E_PLAN,
                  "%s %s: %s: status %s", plan, what, W->where, fhr_status_name(W->err.status));
        if (W->err.status == FHR_E_PLAN) {
            cr_assert(W->err.cause == FHR_E_BACKEND || W->err.cause == FHR_E_SOURCE,
                      "%s: cause %s", W->where, fhr_status_name(W->err.cause));
            cr_assert(W->err.phase != FHR_PHASE_NONE, "%s: no phase", W->where);
            cr_assert(strstr(W->err.message, "plan '"), "%s: %s", W->where, W->err.message);
        }
        cr_assert(strstr(W->err.message, "injected fault"), "%s: %s", W->where, W->err.message);
    }
    for (size_t i = 0; i < W->nholds; i++)
        fhr_hold_destroy(W->holds[i]);
    W->nholds = 0;
    check_accounting(W->m);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(W->m, &s, NULL), FHR_OK);
    for (size_t i = 0; i < s->nvalues; i++) {
        const fhr_value_info *v = &s->values[i];
        if (v->recoverability == FHR_MUST_PRESERVE)
            cr_assert_geq(v->ncopies, 1, "%s %s: value %s lost its last copy", plan, what,
                          v->label);
        for (size_t c = 0; c < v->ncopies; c++)
            cr_assert_eq(v->copies[c].leases + v->copies[c].holds, 0, "%s: still protected",
                         v->label);
    }
    for (size_t i = 0; i < s->nlocs; i++)
        cr_assert_eq(s->locs[i].reserved_bytes, 0, "%s %s: headroom leaked", plan, what);
    fhr_snapshot_free(s);
    check_contents(W);
}

static const char *const kind_name[] = {"allocation", "copy", "event record"};

/* Sweeps one program; returns the number of injection points. */
static uint64_t sweep_program(const char *path, const rplan_program *p)
{
    world W;
    world_init(&W, p, FHR_FAULT_ALLOC, 0, 0);
    run_program(&W);
    cr_assert_not(W.failed, "%s: clean run failed at %s: %s", path, W.where, W.err.message);
    int loads = W.loads;
    check_after(&W, path, "clean run");
    uint64_t points[FHR_FAULT_KINDS_];
    world_free(&W);
    /* injection points: what the program's run does, not the checks after it */
    uint64_t total = 0;
    for (int k = 0; k < FHR_FAULT_KINDS_; k++) {
        world C;
        world_init(&C, p, (fhr_fault_kind)k, 0, 0);
        uint64_t b0 = fhr_backend_fault_count(C.fault, (fhr_fault_kind)k);
        run_program(&C);
        points[k] = fhr_backend_fault_count(C.fault, (fhr_fault_kind)k) - b0;
        world_free(&C);
        uint64_t surfaced = 0;
        for (uint64_t i = 1; i <= points[k]; i++) {
            world X;
            world_init(&X, p, (fhr_fault_kind)k, i, 0);
            run_program(&X);
            fhr_backend_fault_arm(X.fault, (fhr_fault_kind)k, 0);
            char what[64];
            snprintf(what, sizeof what, "%s %llu", kind_name[k], (unsigned long long)i);
            surfaced += X.failed;
            check_after(&X, path, what);
            world_free(&X);
        }
        if (points[k])
            cr_assert_gt(surfaced, 0, "%s: none of %llu %s faults surfaced", path,
                         (unsigned long long)points[k], kind_name[k]);
        total += points[k];
    }
    for (int i = 1; i <= loads; i++) {
        world X;
        world_init(&X, p, FHR_FAULT_ALLOC, 0, i);
        run_program(&X);
        cr_assert(X.failed, "%s: failing source load %d went unnoticed", path, i);
        check_after(&X, path, "source load");
        world_free(&X);
    }
    total += (uint64_t)loads;
    fprintf(stderr,
            "plan_sweep: %s: %llu fault points (%llu allocations, %llu copies, %llu event "
            "records, %d source loads)\n",
            path, (unsigned long long)total, (unsigned long long)points[0],
            (unsigned long long)points[1], (unsigned long long)points[2], loads);
    return total;
}

Test(plan_sweep, every_plan_every_fault_point, .timeout = 300)
{
    DIR *d = opendir("plans");
    cr_assert_not_null(d, "run from the repository root");
    struct dirent *e;
    int nplans = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 7 || strcmp(e->d_name + l - 6, ".rplan") != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "plans/%s", e->d_name);
        rplan_program *p = NULL;
        rplan_diags *dg = rplan_diags_new();
        fhr_status st = rplan_compile_file(path, NULL, &p, dg);
        rplan_diags_free(dg);
        cr_assert_eq(st, FHR_OK, "%s does not compile", path);
        uint64_t points = sweep_program(path, p);
        cr_assert_gt(points, 0, "%s: nothing to sweep", path);
        rplan_program_free(p);
        nplans++;
    }
    closedir(d);
    cr_assert_gt(nplans, 0);
}
