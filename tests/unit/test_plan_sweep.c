/* tests/unit/test_plan_sweep.c — a fault sweep over every plan in plans/: each program
 * runs through the VM on the emulated device (scaled down) behind the fault decorator,
 * once per injection point of its clean run — every allocation, copy and event record,
 * which covers every source load (a load allocates and copies; the clean run's load
 * count is reported). After each failure: the error names the stage and the action (or
 * the value, for a failure while the initial values are set up); no MUST_PRESERVE value
 * lost its last copy; a recount of copies matches the accounting to the byte; every synth
 * (and zero) value still verifies bit-exact in every copy, a seeded value's regenerated
 * half in every device copy; nothing stays reserved or
 * leased. Leaks show under `make sanitize` and `make valgrind`. */
#include "mgr_helpers.h"
#include "tests/unit/observe.h"
#include "fheplan/vm.h"
#include "cuda/counter_gen.h"

#include <dirent.h>

#define SCALE 65536 /* sizes, budgets and reservations divided by this */

typedef struct vrun {
    const rplan_program *p;
    fhr_backend *fault;
    rplan_vm *vm;
    rplan_vm_report *rep;
    fhr_status st;
    uint64_t count[FHR_FAULT_KINDS_]; /* calls of each kind the run made */
} vrun;

static void vrun_start(vrun *R, const rplan_program *p, fhr_fault_kind kind, uint64_t k)
{
    memset(R, 0, sizeof *R);
    R->p = p;
    cr_assert_eq(fhr_backend_fault_create(emu_backend(2), &R->fault, NULL), FHR_OK);
    if (k)
        fhr_backend_fault_arm(R->fault, kind, k);
    rplan_vm_opts o = {0};
    o.mode = RPLAN_VM_RUN;
    o.scale = SCALE;
    o.unknown_as_touch = 1;
    o.pinned_gbps = 10; /* no bandwidth measurement: it would spend injection points */
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(p, R->fault, &o, &R->vm, &e), FHR_OK, "%s", e.message);
    R->st = rplan_vm_run(R->vm, &R->rep, &e);
    cr_assert_not_null(R->rep);
    fhr_error_clear(&e);
    for (int i = 0; i < FHR_FAULT_KINDS_; i++)
        R->count[i] = fhr_backend_fault_count(R->fault, (fhr_fault_kind)i);
    /* disarm (this also restarts that kind's count) so that the checks run fault-free */
    fhr_backend_fault_arm(R->fault, kind, 0);
}

static void vrun_free(vrun *R)
{
    rplan_vm_report_free(R->rep);
    rplan_vm_destroy(R->vm);
    fhr_backend_destroy(R->fault);
}

/* The stage path open at instruction pc ("" at top level). */
static void stage_at(const rplan_program *p, long pc, char *out, size_t cap)
{
    size_t len[64];
    int depth = 0;
    out[0] = '\0';
    for (long i = 0; i < pc; i++) {
        rplan_instr in;
        cr_assert_eq(rplan_instr_get(p, (size_t)i, &in), FHR_OK);
        if (!strcmp(in.opname, "stage") && depth < 64) {
            size_t l = strlen(out);
            len[depth++] = l;
            snprintf(out + l, cap - l, "%s%s", l ? "/" : "", in.str);
        } else if (!strcmp(in.opname, "endstage") && depth > 0) {
            out[len[--depth]] = '\0';
        }
    }
}

/* Where byte k of a copy's field lies in the value's content: after the fields before it
 * (declared fields lie back to back), and in a partial copy of a limb-cut value its
 * q-limbs first, then its special limbs, which the whole field has after all q-limbs. */
typedef struct content_map {
    uint64_t base, limb, held, q;
} content_map;

static content_map content_of(vrun *R, size_t i, fhr_location loc, const rplan_value_info *vi,
                              const fhr_value *hv, size_t f, size_t len)
{
    content_map cm = {0, 0, 0, 0};
    if (!vi->nfields || vi->seeded)
        return cm; /* one field, or a seeded value's b and a: each from 0 */
    uint32_t limbs = 0;
    if (vi->limb_q)
        cr_assert_eq(fhr_copy_limbs(rplan_vm_manager(R->vm), rplan_vm_handle(R->vm, i), loc,
                                    &limbs, NULL), FHR_OK);
    if (limbs) { /* a partial copy: every field of a cut value is one size */
        cm.limb = len / (limbs + vi->limb_special);
        cm.held = limbs;
        cm.q = vi->limb_q;
    }
    const char *name = fhr_value_field_name(hv, f);
    for (size_t k = 0; k < vi->nfields; k++) {
        const char *dn = NULL;
        uint64_t dnb = 0;
        cr_assert_eq(rplan_value_field(R->p, i, k, &dn, &dnb), FHR_OK);
        if (!strcmp(dn, name))
            break;
        /* the field before it, at this copy's scale */
        cm.base += limbs ? cm.limb * (vi->limb_q + vi->limb_special) : dnb / (R->rep->scale ? R->rep->scale : 1);
    }
    return cm;
}

static uint64_t content_at(const content_map *cm, uint64_t k)
{
    if (!cm->limb || k < cm->held * cm->limb)
        return cm->base + k;
    return cm->base + cm->q * cm->limb + (k - cm->held * cm->limb);
}

/* Every copy of value i holds its declared content (synth or zero). */
static void check_value_content(vrun *R, size_t i)
{
    rplan_value_info vi;
    cr_assert_eq(rplan_value(R->p, i, &vi), FHR_OK);
    if (vi.data == RPLAN_DATA_FILE || vi.data == RPLAN_DATA_ENGINE)
        return; /* a file's bytes, or an engine's (a rehearsal fills them synthetically) */
    fhr_manager *m = rplan_vm_manager(R->vm);
    fhr_handle h = rplan_vm_handle(R->vm, i);
    fhr_backend *b = R->fault;
    for (int slot = 0; slot < 3; slot++) {
        fhr_location loc = fhr_loc_from_slot(slot);
        if (t_is_resident(m, h, loc) != 1)
            continue;
        fhr_stream *cs = NULL;
        if (loc.kind == FHR_LOC_CUDA)
            cr_assert_eq(fhr_stream_create(b, loc, &cs, NULL), FHR_OK);
        fhr_lease *l = NULL;
        fhr_error e;
        fhr_error_init(&e);
        cr_assert_eq(fhr_acquire(m, &h, 1, loc, cs, &l, &e), FHR_OK, "%s", e.message);
        if (cs)
            fhr_stream_sync(b, cs, NULL);
        fhr_value *hv = NULL;
        cr_assert_eq(fhr_value_to(fhr_lease_value(l, h), fhr_loc_host(), b, NULL, &hv, NULL),
                     FHR_OK);
        if (vi.seeded && loc.kind == FHR_LOC_CUDA) { /* the regenerated half, in place */
            void *pa;
            size_t na;
            unsigned char seed[8];
            for (int k = 0; k < 8; k++)
                seed[k] = (unsigned char)(vi.regen_seed >> (8 * k));
            cr_assert_eq(fhr_value_field(fhr_lease_value(l, h), "a", &pa, &na), FHR_OK);
            cr_assert_eq(fhr_counter_differs_host(pa, na, fhr_counter_key(seed, 8)), 0,
                         "value %s: the regenerated half differs", vi.name);
        }
        for (size_t f = 0; f < fhr_value_nfields(hv); f++) {
            void *ptr;
            size_t len;
            if (vi.seeded && fhr_value_field_materialized(hv, fhr_value_field_name(hv, f)) == 0)
                continue; /* a host copy omits the regenerated half */
            cr_assert_eq(fhr_value_field_at(hv, f, &ptr, &len), FHR_OK);
            if (vi.seeded && strcmp(fhr_value_field_name(hv, f), "a") == 0)
                continue; /* kept by a host copy: only with keep, checked on the device */
            const uint8_t *c = ptr;
            content_map cm = content_of(R, i, loc, &vi, hv, f, len);
            for (size_t k = 0; k < len; k++) {
                uint64_t at = content_at(&cm, k);
                uint8_t want = vi.data == RPLAN_DATA_SYNTH
                                   ? (uint8_t)(rplan_synth_word(vi.seed, at / 8) >> (8 * (at % 8)))
                                   : 0;
                cr_assert_eq(c[k], want, "value %s at slot %d: byte %zu of %zu differs", vi.name,
                             slot, k, len);
            }
        }
        fhr_value_destroy(hv);
        cr_assert_eq(fhr_lease_release(l, NULL), FHR_OK);
        fhr_lease_destroy(l);
        if (cs) {
            fhr_stream_sync(b, cs, NULL);
            fhr_stream_destroy(b, cs);
        }
        t_reap(m);
    }
}

static void check_state(vrun *R, const char *what)
{
    fhr_manager *m = rplan_vm_manager(R->vm);
    cr_assert_not_null(m);
    t_reap(m);
    check_accounting(m);
    fhr_snapshot *s;
    cr_assert_eq(fhr_snapshot_take(m, &s, NULL), FHR_OK);
    for (size_t i = 0; i < s->nvalues; i++) {
        const fhr_value_info *v = &s->values[i];
        if (v->recoverability == FHR_MUST_PRESERVE)
            cr_assert_geq(v->ncopies, 1, "%s: value %s lost its last copy", what, v->label);
        for (size_t c = 0; c < v->ncopies; c++)
            cr_assert_eq(v->copies[c].leases + v->copies[c].pending_events, 0,
                         "%s: value %s still leased", what, v->label);
    }
    for (size_t i = 0; i < s->nlocs; i++)
        cr_assert_eq(s->locs[i].reserved_bytes, 0, "%s: headroom leaked at slot %d", what,
                     fhr_loc_slot(s->locs[i].loc));
    fhr_snapshot_free(s);
    for (size_t i = 0; i < rplan_nvalues(R->p); i++)
        check_value_content(R, i);
}

/* The message names the failing action: the instruction's own opcode, or (for a plan or
 * request instruction) "<phase> action N (<kind> ..." with the kind of the decided action. */
static int names_action(const char *msg, const char *opname)
{
    if (strstr(msg, opname))
        return 1;
    for (const char *a = strstr(msg, " action "); a; a = strstr(a + 1, " action ")) {
        const char *p = a + 8;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == a + 8 || strncmp(p, " (", 2) != 0)
            continue;
        for (int k = FHR_ACT_ENSURE; k <= FHR_ACT_DISCARD; k++) {
            const char *kn = fhr_action_kind_name((fhr_action_kind)k);
            if (!strncmp(p + 2, kn, strlen(kn)) && p[2 + strlen(kn)] == ' ')
                return 1;
        }
    }
    return 0;
}

/* A failure names where it happened: the stage and the action, or the value. */
static void check_failure(vrun *R, const char *what)
{
    const rplan_vm_report *r = R->rep;
    cr_assert(!r->ok && r->status == R->st, "%s", what);
    cr_assert(strstr(r->message, "injected fault"), "%s: message '%s' hides the cause", what,
              r->message);
    if (r->instr < 0) {
        /* while the initial values are placed: the message names the value; while the
         * devices are warmed up (the event that times bodies): the device */
        cr_assert(strstr(r->message, "value") || strstr(r->message, "warm-up of cuda:"),
                  "%s: '%s' (scope '%s', phase %s) names no value", what, r->message, r->scope,
                  fhr_phase_name(r->phase));
        return;
    }
    rplan_instr in;
    cr_assert_eq(rplan_instr_get(R->p, (size_t)r->instr, &in), FHR_OK);
    cr_assert(r->line == in.line && r->line > 0, "%s: no source position", what);
    char stage[512];
    stage_at(R->p, r->instr, stage, sizeof stage);
    if (stage[0])
        cr_assert(strstr(r->message, stage) || strstr(r->scope, stage),
                  "%s: failure at %u:%u ('%s', scope '%s') does not name stage '%s'", what,
                  r->line, r->col, r->message, r->scope, stage);
    cr_assert(names_action(r->message, in.opname), "%s: '%s' names no action (instruction %s)",
              what, r->message, in.opname);
}

static const char *const kind_name[] = {"allocation", "copy", "event record"};

/* Sweeps one program; returns the number of injection points. */
static uint64_t sweep_program(const char *path, const rplan_program *p)
{
    vrun R;
    vrun_start(&R, p, FHR_FAULT_ALLOC, 0);
    cr_assert_eq(R.st, FHR_OK, "%s: clean run failed: %s", path, R.rep->message);
    uint64_t points[FHR_FAULT_KINDS_];
    for (int k = 0; k < FHR_FAULT_KINDS_; k++)
        points[k] = R.count[k];
    uint64_t loads = R.rep->total.loads;
    check_state(&R, "clean run");
    vrun_free(&R);
    uint64_t total = 0, absorbed[FHR_FAULT_KINDS_] = {0, 0, 0};
    for (int k = 0; k < FHR_FAULT_KINDS_; k++) {
        for (uint64_t i = 1; i <= points[k]; i++) {
            char what[600];
            snprintf(what, sizeof what, "%s, %s %llu of %llu", path, kind_name[k],
                     (unsigned long long)i, (unsigned long long)points[k]);
            vrun X;
            vrun_start(&X, p, (fhr_fault_kind)k, i);
            /* A fault either fails the run, which then says where, or is absorbed by a
             * safe fallback (a lease whose consumer event cannot be recorded is waited
             * for instead); either way the state checks below must hold. */
            if (X.st != FHR_OK)
                check_failure(&X, what);
            else
                absorbed[k]++;
            check_state(&X, what);
            vrun_free(&X);
        }
        if (points[k])
            cr_assert_lt(absorbed[k], points[k], "%s: no %s fault surfaced", path, kind_name[k]);
        total += points[k];
    }
    fprintf(stderr,
            "plan_sweep: %s: %llu fault points (%llu allocations, %llu copies, %llu event "
            "records; the clean run made %llu source loads); absorbed safely: %llu, %llu, %llu\n",
            path, (unsigned long long)total, (unsigned long long)points[0],
            (unsigned long long)points[1], (unsigned long long)points[2],
            (unsigned long long)loads, (unsigned long long)absorbed[0],
            (unsigned long long)absorbed[1], (unsigned long long)absorbed[2]);
    return total;
}

Test(plan_sweep, every_plan_every_fault_point, .timeout = 600)
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
        cr_assert_eq(rplan_compile_file(path, NULL, &p, NULL), FHR_OK, "%s does not compile",
                     path);
        cr_assert_gt(sweep_program(path, p), 0, "%s: nothing to sweep", path);
        rplan_program_free(p);
        nplans++;
    }
    closedir(d);
    cr_assert_gt(nplans, 0);
}
