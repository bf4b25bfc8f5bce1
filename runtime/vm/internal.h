/* runtime/vm/internal.h — state shared by the VM's files in runtime/vm/ and the functions
 * they share, declared below under the file that defines them. Calls between the files go
 * one way: a file calls only files after it in vm.c (the interpreter), create.c (the VM's
 * lifetime), request.c, scope.c, body.c, values.c, engine.c, kernels.c, stage.c, link.c, trace.c,
 * streams.c; report.c calls none. Not installed. */
#ifndef FHEPLAN_VM_INTERNAL_H
#define FHEPLAN_VM_INTERNAL_H

#include "fheplan/vm.h"
#include "fheplan/controller.h"

#define VM_MAX_STAGE_DEPTH 32 /* RP_MAX_STAGE_DEPTH: the compiler's and the verifier's limit */
#define VM_TALLY_BLOCK 256

/* Opcode numbers and their statement class, from the one opcode table. */
enum vm_opcode {
#define OP(id, text, x, y, a, b, ctx, rule) RPLAN_OP_##id,
#include "runtime/program/opcodes.def"
#undef OP
    RPLAN_OP_COUNT_
};
enum vm_opclass { VM_CLASS_ITEM, VM_CLASS_SCOPE, VM_CLASS_REQ, VM_CLASS_ACTION, VM_CLASS_BODY,
                  VM_CLASS_ARG };

typedef struct vm_kernel {
    char *name;
    rplan_kernel_fn fn;
    void *ctx;
} vm_kernel;

/* A timestamp pair written by host functions on a stream (markers); read only after
 * the stream has been synchronised. */
typedef struct vm_mark {
    uint64_t t0, t1;
    uint64_t tid;          /* trace track (stream id) */
    int kind;              /* 0 body, 1 transfer window */
    int stage;             /* stage record that owns it (-1: none) */
    size_t nstages;        /* every open stage record at the time */
    int stages[VM_MAX_STAGE_DEPTH + 1];
    char name[96];
    fhr_event *ev0, *ev1;  /* timed events around the work on a device (else host functions) */
    int slot;              /* the device location whose reference times them */
    size_t after;          /* a transfer window: 1 + the index of the body mark whose end
                              frees its room (link.c); 0: its room was free when decided */
    fhr_backend *b;        /* whose clock its host functions read */
    /* tracing: a body's values (indices into the program's values); a window's values
     * copied in and its bytes by link (PCIe to the device, peer, PCIe back) */
    uint32_t nv, v[16];
    uint64_t bytes_h2d, bytes_d2d, bytes_d2h;
} vm_mark;

/* Tracing: one change of the bytes present at a location (trace.c's residency counter).
 * An arrival counts when its copy ends (its transfer window's end), a departure when the
 * last body reading the copy ends, and never before the host decided it. */
typedef struct vm_resid {
    uint64_t t;            /* the host's decision (the action's end on the host) */
    size_t win;            /* 1 + the transfer window that carried it; 0: none */
    size_t after;          /* a departure: 1 + the last body mark reading the copy; 0: none */
    int slot;
    int arrive;
    uint64_t bytes;
} vm_resid;
/* One declared field of a value (engine.c). */
typedef struct vm_field {
    const char *name; /* borrowed from the program, or "data" */
    uint64_t nbytes;  /* scaled */
    int regen;        /* a seeded field: regenerated, not stored */
} vm_field;

/* A host-side trace slice (scopes, submitted transitions). */
typedef struct vm_slice {
    uint64_t t0, t1;
    uint64_t tid;
    const char *cat;
    char name[112];
    uint64_t host_t0;      /* a stage: when the host opened it (its slice starts on a device) */
    uint64_t bytes;        /* a copy on a stream of the manager's own: its bytes, value, */
    long value;            /* direction and destination (the trace's args) */
    int dir;
    fhr_location at;
} vm_slice;

/* The bytes charged at one location at one moment (tracing only): used plus reserved,
 * sampled whenever the stage peaks are. */
typedef struct vm_sample {
    uint64_t t;
    fhr_location loc;
    uint64_t charged, budget;
    int has_budget;
} vm_sample;

typedef struct vm_src {
    struct rplan_vm *vm;
    uint32_t index;
} vm_src;

/* One body argument list, decoded. */
typedef struct vm_run {
    const rplan_instr *in;   /* the RUN instruction */
    size_t pc;
    rplan_arg args[16];
    size_t nargs;
    uint32_t vals[16];       /* program value index per RPLAN_ARG_VALUE */
    size_t nvals;
} vm_run;

/* objective time: a request's bodies on the modelled timeline, with the copies they read */
typedef struct vm_mflight {
    fhr_handle *hs;    /* every copy the request requires (vm_reads_set: no limit) */
    fhr_location *at;
    size_t nh;
    double end_s;
} vm_mflight;

struct rplan_vm {
    long setup_value; /* the value whose setup failed, -1 none */
    char bad_budget[200]; /* a budget at a device the backend lacks: the run's failure */
    uint32_t bad_budget_line, bad_budget_col;
    const rplan_program *p;
    fhr_backend *b;
    rplan_vm_opts o;
    int explain, is_cuda, ran;
    char device[32];
    fhr_manager *m;
    fhr_value *meta_like;      /* an empty value with the metadata vm_value_new gave last:
                                * the next values with the same share it (no copy each) */
    size_t nvals;
    rplan_value_info *vinfo;   /* nbytes scaled */
    fhr_handle *h;
    vm_src *srcs;
    void **backing;            /* reconstructible values: their content, in pinned memory */
    void **pristine;           /* init values of synth or file data: their first content,
                                  kept by the first run for the next (host memory) */
    fhr_location backing_loc;
    size_t ninstr;
    rplan_instr *ins;
    vm_kernel *kerns;
    size_t nkerns, capkerns;
    fhr_stream *compute[FHR_LOC_SLOTS];
    fhr_stream *xfer[FHR_LOC_SLOTS];
    void *scratch[FHR_LOC_SLOTS];
    /* per device location: a timed event completed at host time tref_ns (warm-up), from
     * which the timed events around bodies get their host times */
    fhr_event *tref[FHR_LOC_SLOTS];
    uint64_t tref_ns[FHR_LOC_SLOTS];
    uint64_t *counter[FHR_LOC_SLOTS];  /* verify mismatch counters (2 words) at the location */
    size_t scratch_nbytes;
    uint64_t checks_total;
    /* holds by (value, location) */
    struct vm_hold { uint32_t v; fhr_location loc; fhr_hold *hd; } *holds;
    size_t nholds, capholds;
    /* report */
    rplan_stage_report *stages;
    size_t nstages, capstages;
    int stack[VM_MAX_STAGE_DEPTH + 1];
    uint64_t stack_t0[VM_MAX_STAGE_DEPTH + 1];
    uint64_t stack_checks0[VM_MAX_STAGE_DEPTH + 1];
    /* Stage records are timed without host waits: [t0, t1] from the host's opening to
     * the last marker of its work, resolved once the run has synchronised. */
    uint64_t *stage_t0, *stage_t1;
    /* Verify-failure counters are read without host waits too: at stage boundaries the
     * counters are copied, in stream order, into pinned tally slots read at the end. */
    struct vm_tally { int stage; int sign; uint64_t *slot; } *tallies;
    size_t ntallies, captallies;
    uint64_t **tally_blocks;   /* pinned blocks of VM_TALLY_BLOCK slots (4 words each) */
    size_t ntally_blocks, tally_used;
    size_t depth;
    int top_open;              /* the innermost open record is a "(top level)" one */
    rplan_stage_report total;
    uint64_t t_begin;
    vm_mark **marks;
    size_t nmarks, capmarks;
    vm_slice *slices;
    size_t nslices, capslices;
    vm_sample *samples;
    size_t nsamples, capsamples;
    size_t scopes_total, scopes_done;
    uint64_t bytes_moved;
    /* requests: one policy and controller per program policy; the known future */
    fhr_policy **pols;
    fhr_controller **ctls;
    size_t npols;
    uint64_t req_pos;          /* position of the request being run (1-based) */
    /* bodies still in flight, oldest first: each request records one event */
    struct vm_inflight {
        fhr_event *ev;
        fhr_handle *hs;     /* every copy they read (vm_reads_set: no limit) */
        fhr_location *at;   /* where the bodies read them */
        size_t nh;
        double model_s; /* the bodies' modelled time */
        double mend_s;  /* objective time: when the modelled timeline ends them */
        size_t mark;    /* 1 + the index of the request's last body mark (0: none) */
    } *inflight;
    double pinned_gbps;        /* measured at the start of the run */
    size_t ninflight, capinflight;
    /* the known future, sorted by (serial, location slot, position), for next uses */
    fhr_future_use *future;
    size_t nfuture;
    /* objective time (objective.c): the modelled timeline of the requests, in both modes */
    vm_mflight *mflight;       /* bodies the model has not finished, in issue order */
    size_t nmflight, capmflight;
    double m_link, m_comp, m_host; /* when the link and the compute stream are free; the
                                      host's modelled time (it moves only by waiting) */
    double m_gbps;             /* the bandwidth profile of the model */
    double m_idle;             /* longest idle stretch of the modelled link */
    int m_loaded;              /* the modelled link has carried a load */
    double auto_s[2];          /* objective auto: the bytes and time timelines modelled */
    /* link.c: per (value, location slot), 1 + the index of the last body mark reading it;
     * the request being run: 1 + the latest body mark it waited for room behind */
    size_t *last_read;
    size_t ready_after;
    /* double buffering (request.c): per location slot, the copies the last request
     * whose bodies ran there read */
    struct vm_prev { fhr_requirement *rq; size_t n, cap; } prev[FHR_LOC_SLOTS];
    size_t nprev;              /* their total */
    uint64_t waits[RPLAN_WAITS];   /* host waits for bodies, by reason (RPLAN_WAIT_*) */
    uint64_t wait_ns[RPLAN_WAITS];
    /* of those waits, the ones for the newest body in flight: nothing issued after it,
     * so its device has no queued work once it ends until the host issues more */
    uint64_t drained, drained_ns;
    /* per location slot: bytes over its PCIe link (copies onto it and back, loads onto it),
     * peer bytes copied onto it, bytes generated on it (link.c's per-device bound) */
    uint64_t dev_pcie[FHR_LOC_SLOTS], dev_peer[FHR_LOC_SLOTS], dev_regen[FHR_LOC_SLOTS];
    /* tracing: the transfer windows of the scope being accounted (scope.c), the bytes
     * present per location when the first sample was taken, and every change after */
    vm_mark **cur_win;
    size_t ncur_win;
    int resid_base_set;
    uint64_t resid_base[FHR_LOC_SLOTS];
    vm_resid *resid;
    size_t nresid, capresid;
    uint64_t *resid_at;        /* per value: the location slots holding a copy */
    uint64_t *resid_cut;       /* per limb-cut value and slot: its copy's charge there */
    /* engine.c: what an engine hands the VM */
    struct vm_loader *loaders;
    size_t nloaders, caploaders;
    fhr_value **adopted;           /* per value: rplan_vm_adopt's, until the run adopts it */
    int engine_stream[FHR_LOC_SLOTS]; /* compute[slot] is the engine's: never destroyed */
    int xfer_given[FHR_LOC_SLOTS];    /* xfer[slot] is the caller's: never destroyed */
    vm_field *flds;                /* every value's fields, scaled (seeded values without
                                      fields(...): none) */
    size_t *fld0;                  /* per value: its first field in flds */
    struct vm_kcost *kcost;        /* kernel costs by name: an open-addressed table */
    size_t kcost_cap;              /* its slots (a power of two; 0: no kernel costs) */
    /* create.c: what a later run keeps or replays (vm_rerun_reset): the manager's budgets
     * and trace size, the generators registered, the loaders' size probe passed, and the
     * first run's pinned bandwidth (the report's, never a decision's) */
    fhr_budget mbud[FHR_LOC_SLOTS];
    size_t nmbud, trace_cap;
    struct vm_gen {
        char *name;
        fhr_generator_fn fn; /* NULL: a range function only */
        void *ctx;
        fhr_generator_range_fn range; /* NULL: whole fields only */
        void *range_ctx;
    } *gens;
    size_t ngens;
    int probed;
    double pinned_kept;
    unsigned long nruns;           /* runs started (rplan_vm_run) */
};

/* engine.c: fields, loaders, adopted values, the engine's body stream, kernel costs. */
#define RP_VM_MAX_FIELDS 16 /* RP_MAX_FIELDS */
fhr_status vm_fields_setup(rplan_vm *vm, fhr_error *err);
size_t vm_value_nfields(const rplan_vm *vm, size_t i);
/* A value at the backing store's location over p (borrowed), with value i's fields. */
fhr_status vm_value_view(rplan_vm *vm, size_t i, void *p, const fhr_ckks_meta *meta,
                         fhr_value **out, fhr_error *err);
fhr_status vm_value_new(rplan_vm *vm, size_t i, fhr_location at, const fhr_ckks_meta *meta,
                        fhr_stream *s, fhr_value **out, fhr_error *err);
fhr_status vm_engine_load(rplan_vm *vm, size_t i, fhr_value *v, fhr_stream *s, fhr_error *err);
/* A seeded engine value's stored fields ("b", or its fields not marked seeded), back to
 * back from base at `at`: filled by its loader (or, in a rehearsal, synthetic content). */
fhr_status vm_engine_load_stored(rplan_vm *vm, size_t i, void *base, fhr_location at,
                                 fhr_stream *s, fhr_error *err);
fhr_status vm_engine_check(rplan_vm *vm, long *bad, fhr_error *err);
/* A value over the buffers of rplan_vm_adopt's value i, borrowed (*out NULL: none
 * adopted): what each run hands its manager, so the VM keeps the engine's buffers. */
fhr_status vm_adopted_view(rplan_vm *vm, size_t i, fhr_value **out, fhr_error *err);
fhr_status vm_kernel_costs_setup(rplan_vm *vm, fhr_error *err);
double vm_kernel_cost(const rplan_vm *vm, const char *name, double device_gbps);
void vm_engine_free(rplan_vm *vm);
void vm_profile_build(rplan_vm *vm, rplan_vm_report *rep);
uint64_t vm_scale_up8(uint64_t x, uint64_t scale); /* create.c */
/* create.c: before a run after the first, the state rplan_vm_create left (a new manager
 * with the same budgets and generators) with what runs keep; a failure changes nothing. */
fhr_status vm_rerun_reset(rplan_vm *vm, fhr_error *err);

/* streams.c: the clock; compute and transfer streams per location, made on first use;
 * synchronising all of them (and reaping); pinned -> device GB/s at the start of a run
 * (the report's) and the declared rate (every decision's). */
uint64_t vm_now_ns(const rplan_vm *vm);
int vm_virtual(const rplan_vm *vm); /* 1: the backend runs on a virtual clock */
fhr_status vm_compute_stream(rplan_vm *vm, fhr_location loc, fhr_stream **out, fhr_error *err);
fhr_stream *vm_xfer_stream(rplan_vm *vm, fhr_location loc, fhr_error *err);
fhr_status vm_sync_all(rplan_vm *vm, fhr_error *err);
double vm_pinned_bandwidth(rplan_vm *vm);
double vm_profile_gbps(const rplan_vm *vm);

/* link.c: the transfer streams' busy and idle time, from their timed transfer windows. */
typedef struct vm_link_win {
    double open, end, ready; /* when the stream reached it, when its copies ended, and when
                                its room was free (its victims' and waited bodies' ends) */
} vm_link_win;
typedef struct vm_link_figures {
    double busy_s, idle_s, ready_idle_s; /* idle: from the first window to the last one's
                                            end; ready: while a window not yet begun had
                                            its room */
} vm_link_figures;
/* Windows in stream order (one stream): adds their figures to *f. */
void vm_link_measure(const vm_link_win *w, size_t n, vm_link_figures *f);
/* A body mark for run r at loc: the last reader of its values there. */
void vm_link_read(rplan_vm *vm, const vm_run *r, fhr_location loc);
/* 1 + the last body mark reading the copy of h at loc; 0: none. */
size_t vm_link_last_read(const rplan_vm *vm, fhr_handle h, fhr_location loc);
/* After vm_marks_time: each window's busy start, and the report's link figures. */
void vm_link_resolve(rplan_vm *vm, rplan_vm_report *rep);
/* Once total.time_s is known: the figures per device (compute, link) and the lower
 * bound, the largest device's, with the ratio of the run to it. */
void vm_figures_resolve(rplan_vm *vm, rplan_vm_report *rep);
/* The index of the program value whose handle is h; -1: none. */
long vm_value_index(const rplan_vm *vm, fhr_handle h);

/* trace.c: host-side slices and stream markers (rplan_vm_trace_json is public). */
fhr_status vm_add_slice(rplan_vm *vm, uint64_t t0, uint64_t t1, uint64_t tid, const char *cat,
                        const char *name);
vm_mark *vm_new_mark(rplan_vm *vm, int kind, uint64_t tid, const char *name);
fhr_status vm_add_sample(rplan_vm *vm, uint64_t t, fhr_location loc, uint64_t charged,
                         int has_budget, uint64_t budget);
/* A named profiler range on the calling thread, through the backend (NVTX on CUDA). */
void vm_range_push(rplan_vm *vm, const char *kind, const char *name);
void vm_range_pop(rplan_vm *vm);
void vm_mark_begin(void *arg);
fhr_status vm_mark_timed(rplan_vm *vm, vm_mark *mk, fhr_location loc, fhr_stream *s, int *timed,
                         fhr_error *err);
void vm_marks_time(rplan_vm *vm);
void vm_mark_end(void *arg);

/* stage.c: stage records, the accounting into every open one, verify-failure tallies. */
/* Every open stage record, outermost first, then the total. */
#define FOR_OPEN_RECORDS(vm, r)                                                              \
    for (size_t k_ = 0; k_ <= (vm)->depth; k_++)                                             \
        for (rplan_stage_report *r = k_ < (vm)->depth ? &(vm)->stages[(vm)->stack[k_]]       \
                                                      : &(vm)->total;                        \
             r; r = NULL)
void vm_account_report(rplan_vm *vm, const fhr_report *rep, int is_request);
/* Bytes a value keeps in the backing store (a seeded one: its stored fields). */
static inline uint64_t vm_backing_nbytes(const rplan_value_info *vi)
{
    return vi->seeded ? vi->nbytes - vi->regen_nbytes : vi->nbytes;
}
/* The device generation rate in GB/s (opts, FHEPLAN_GEN_GBPS, else the default). */
double vm_gen_rate(const rplan_vm *vm);
double vm_peer_rate(const rplan_vm *vm);
void vm_sample_peaks(rplan_vm *vm);
fhr_status vm_stage_open(rplan_vm *vm, const char *name, int top);
void vm_stage_close(rplan_vm *vm);
/* After the final synchronisation: stage times from markers, failures from tallies. */
void vm_stage_resolve(rplan_vm *vm);
/* Work outside any stage is reported under "(top level)". */
fhr_status vm_ensure_record(rplan_vm *vm);
/* Reads the verify mismatch counters (streams must be synchronised). */
uint64_t vm_read_failures(rplan_vm *vm);
/* A pinned tally slot of 4 words; NULL when out of memory. */
uint64_t *vm_tally_slot(rplan_vm *vm);

/* kernels.c: the kernel registry, the built-in kernels, synthetic content. */
fhr_status vm_register_builtins(rplan_vm *vm, fhr_error *err);
const vm_kernel *vm_find_kernel(const rplan_vm *vm, const char *name);
fhr_status vm_touch_kernel(void *ctx, const rplan_kernel_call *c, fhr_error *err);
/* Fills n bytes at p (a location `loc`) with the value's initial content (synth/zero
 * or the bytes at `from`) — synchronously, through stream s where device memory. */
fhr_status vm_fill(rplan_vm *vm, void *p, fhr_location loc, size_t n, const rplan_value_info *vi,
                   const void *from, fhr_stream *s, fhr_error *err);
void vm_synth_host(void *p, size_t n, uint64_t seed);

/* values.c: adopts every MUST_PRESERVE value and registers every source. */
fhr_status vm_setup_values(rplan_vm *vm, fhr_error *err);
void vm_pristine_free(rplan_vm *vm);

/* body.c: RUN argument lists, bodies run under leases, the kernel model, the warm-up. */
fhr_status vm_decode_runs(rplan_vm *vm, size_t pc, size_t end, vm_run **out, size_t *n,
                          fhr_error *err);
/* Where a plan body without an enter action to a device runs: the lowest device holding
 * every value argument, else pinned when it holds them all, else host. */
fhr_location vm_body_location(rplan_vm *vm, const vm_run *r);
fhr_status vm_run_body(rplan_vm *vm, const vm_run *runs, size_t nruns, const fhr_location *at,
                       int request, fhr_error *err);
/* Predicted time of one body from the kernel model. */
double vm_model_body(const rplan_vm *vm, const vm_run *r);
/* Before timing starts: streams, scratch, counters and the first tally block. */
fhr_status vm_warm_up(rplan_vm *vm, fhr_error *err);

/* scope.c: one plan as a scope with its body (PLAN and REQUEST). */
fhr_status vm_exec_scope_plan(rplan_vm *vm, const fhr_plan *plan, const fhr_stream_map *xs, size_t nxs,
                              int has_version, uint64_t version, const vm_run *runs,
                              size_t nruns, fhr_location *at, int request,
                              fhr_report **rep_out, fhr_error *err);

/* request.c: the program's policies and controllers (after the values exist), the
 * execution of REQUEST pc..END through the controller, and their teardown. */
fhr_status vm_requests_setup(rplan_vm *vm, fhr_error *err);
fhr_status vm_exec_request(rplan_vm *vm, size_t pc, size_t end, fhr_error *err);
/* Records the end of bodies just issued at loc that read the copies rq (requests' and
 * plans' alike): the run's decisions are made as if they had ended (request.c). A failed
 * event is the run's failure. */
fhr_status vm_inflight_push(rplan_vm *vm, const char *who, fhr_location loc,
                            const fhr_requirement *rq, size_t nrq, double model_s, double mend_s,
                            fhr_error *err);
void vm_requests_teardown(rplan_vm *vm);

/* objective.c: the time objective's modelled timeline (see rplan_vm_opts.objective) */
int vm_objective_time(const rplan_vm *vm, unsigned policy);
void vm_host_waited(rplan_vm *vm, int why, uint64_t t0);
void vm_model_reset(rplan_vm *vm);
double vm_model_issue(const rplan_vm *vm);
void vm_model_advance(rplan_vm *vm, double t);
fhr_status vm_model_hold(rplan_vm *vm, const fhr_requirement *rq, size_t nrq, fhr_hold ***out,
                         size_t *nout, fhr_error *err);
void vm_model_unhold(fhr_hold **hs, size_t n);
fhr_status vm_model_commit(rplan_vm *vm, double t_issue, uint64_t bytes, double model_s,
                           const fhr_requirement *rq, size_t nrq, int has_body, double *end,
                           fhr_error *err);
void vm_model_free(rplan_vm *vm);
/* The copies a body set reads, as owned arrays *hs and *at of n entries (0 on no memory:
 * the caller fails); vm_reads_free frees them. */
int vm_reads_set(fhr_handle **hs, fhr_location **at, const fhr_requirement *rq, size_t n);
void vm_reads_free(fhr_handle *hs, fhr_location *at);

#endif
