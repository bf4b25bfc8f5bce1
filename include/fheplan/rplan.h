/* fheplan/rplan.h — the .rplan plan language: compile source to a verified program,
 * diagnostics, the bytecode file (write, load, verify), the disassembler, and a
 * read-only inspection API for the VM. Language and file format: rplan(5). */
#ifndef FHEPLAN_RPLAN_H
#define FHEPLAN_RPLAN_H

#include <stdio.h>
#include "fheplan/residency.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A compiled and verified program. Immutable; any thread may read one program
 * concurrently. Owned by the caller of the function that returned it. */
typedef struct rplan_program rplan_program;

/* ---- diagnostics ------------------------------------------------------------------ */

typedef enum rplan_severity {
    RPLAN_ERROR = 0,
    RPLAN_WARNING,
    RPLAN_NOTE /* attached to the error or warning before it */
} rplan_severity;

/* One diagnostic. line/col are 1-based (col counts bytes); 0 when unknown.
 * end_col is one past the last column of the span on `line`. */
typedef struct rplan_diag {
    rplan_severity severity;
    const char *file;    /* the file name given to the compiler or loader */
    uint32_t line, col, end_col;
    const char *message; /* stable wording; tests pin it */
    /* The span's last line and the column one past its end on that line (the span may
     * cover several lines); 0 when the position is unknown. */
    uint32_t end_line, end_column;
} rplan_diag;

/* A caller-owned list of diagnostics; compile and load append to it. Not thread-safe. */
typedef struct rplan_diags rplan_diags;

FHR_API rplan_diags *rplan_diags_new(void); /* NULL on allocation failure */
FHR_API void rplan_diags_free(rplan_diags *d);
FHR_API size_t rplan_diags_count(const rplan_diags *d);
FHR_API size_t rplan_diags_nerrors(const rplan_diags *d);
/* Borrowed; valid until the list is freed. NULL if i is out of range. */
FHR_API const rplan_diag *rplan_diags_get(const rplan_diags *d, size_t i);
/* Text form: "file:line:col: error: message", then the source line and a ^~~~ under
 * the span when the source is known. colour: 0 never, 1 always (ANSI). Returns 0, or -1
 * when writing to out failed (errno tells why; the stream's error flag is set). */
FHR_API int rplan_diags_render(const rplan_diags *d, FILE *out, int colour);
/* The same into a malloc'd string (free()); NULL on allocation failure. */
FHR_API char *rplan_diags_render_string(const rplan_diags *d);

/* The kind of a diagnostic: a stable id ("RP301"), a name ("unknown-name") and what it
 * covers; the list is in fheplan-diagnose(7). SARIF's ruleId and --json's "rule". */
typedef struct rplan_rule {
    const char *id, *name, *summary;
} rplan_rule;
/* The rule of an error or warning, from its message; "RP000" (other) when none fits.
 * Never NULL. The _dry_run form is for a run's failure (rplan_vm_report.message): "RP608"
 * where no other rule fits. */
FHR_API const rplan_rule *rplan_rule_of(const char *message);
FHR_API const rplan_rule *rplan_rule_of_dry_run(const char *message);
FHR_API size_t rplan_nrules(void);
FHR_API const rplan_rule *rplan_rule_get(size_t i); /* NULL past the last */

/* ---- compile -------------------------------------------------------------------- */

typedef struct rplan_compile_opts {
    const char *filename;             /* used in diagnostics; "<input>" when NULL */
    const fhr_budget *budget_override; /* replace or add budgets (check --budget) */
    size_t nbudget_override;
    int strip_source;                 /* 1: do not keep the source text in the program */
    /* The predefined integer constants `rank` and `world_size` (rplan(5)): a program
     * run by several processes (MPI ranks) is compiled, and so verified, once per rank.
     * world_size 0 means 1; rank must be below world_size. */
    uint32_t rank;
    uint32_t world_size;
    /* Warnings (rplan(5) WARNINGS): each has a rule (rplan_rule_of) whose name is
     * "unused-constant", "unused-value", "unused-policy" or "unused-budget". The names in
     * warn_off (a rule's name, or a group such as "unused") are not reported; with
     * warn_error set the others are reported as errors, and the compile fails. */
    const char *const *warn_off;
    size_t nwarn_off;
    int warn_error;
} rplan_compile_opts;

/* Compiles src (len bytes; need not be NUL-terminated) and verifies the result,
 * including the dry run of placements and budgets. On success *out owns a new program.
 * Fails with FHR_E_INVALID when the source has errors (all of them appended to diags,
 * which may be NULL), FHR_E_INFEASIBLE when the dry run fails, FHR_E_NOMEM. */
FHR_API fhr_status rplan_compile(const char *src, size_t len, const rplan_compile_opts *opts,
                                 rplan_program **out, rplan_diags *diags);
/* Reads path and compiles it; the file name in diagnostics is path unless opts says
 * otherwise. FHR_E_INVALID also when the file cannot be read (one diagnostic). */
FHR_API fhr_status rplan_compile_file(const char *path, const rplan_compile_opts *opts,
                                      rplan_program **out, rplan_diags *diags);
FHR_API void rplan_program_free(rplan_program *p);

/* Lays out plan source in the one canonical form (`fheplan fmt`; the rules are in
 * rplan(5), FORMAT): *out receives the formatted text (free()). Comments are kept; the
 * result compiles to the same program and formats to itself. A source with syntax errors
 * is refused with FHR_E_INVALID and its errors appended to diags (filename names it). */
FHR_API fhr_status rplan_format(const char *src, size_t len, const char *filename, char **out,
                                rplan_diags *diags);

/* ---- bytecode file -------------------------------------------------------------- */

/* Serialises p. *buf is malloc'd (free()). FHR_E_NOMEM only. */
FHR_API fhr_status rplan_write_mem(const rplan_program *p, void **buf, size_t *len);
FHR_API fhr_status rplan_write_file(const rplan_program *p, const char *path, fhr_error *err);
/* Loads and always verifies (framing, checksum, structure, operands, phase order,
 * scopes and holds, and the dry run). buf is not retained. On failure nothing is
 * returned and diags holds one error: FHR_E_INVALID (malformed or refused by the
 * verifier), FHR_E_INFEASIBLE (the dry run fails), FHR_E_NOMEM. name: file name
 * used in diagnostics (NULL: the name stored in the file, else "<bytecode>"). */
FHR_API fhr_status rplan_load_mem(const void *buf, size_t len, const char *name,
                                  rplan_program **out, rplan_diags *diags);
FHR_API fhr_status rplan_load_file(const char *path, rplan_program **out, rplan_diags *diags);
/* 1 if the bytes start with the bytecode magic (so a CLI can accept either form). */
FHR_API int rplan_is_bytecode(const void *buf, size_t len);

/* ---- disassembler --------------------------------------------------------------- */

#define RPLAN_DISASM_NOSOURCE 1u /* omit the source lines even when known */

/* Returns 0, or -1 when writing to out failed (errno tells why; the stream's error flag
 * is set) or p or out is NULL. Output still buffered in out is the caller's to flush. */
FHR_API int rplan_disasm(const rplan_program *p, FILE *out, unsigned flags);
FHR_API char *rplan_disasm_string(const rplan_program *p, unsigned flags); /* free() */

/* ---- inspection (for the VM) ------------------------------------------------------ */

typedef enum rplan_data_kind {
    RPLAN_DATA_ZERO = 0, /* adopted, zero-filled */
    RPLAN_DATA_SYNTH,    /* deterministic synthetic bytes from `seed` */
    RPLAN_DATA_FILE,     /* bytes read from `path` */
    RPLAN_DATA_ENGINE    /* `engine.NAME(ARG)`: the engine's loader NAME fills each copy
                            (rplan_loader_register), or the engine adopts the value
                            (rplan_vm_adopt) */
} rplan_data_kind;

typedef struct rplan_value_info {
    const char *name;                /* "ct", "rot[3]" */
    uint64_t nbytes;                 /* the per-copy charge */
    fhr_replica_mode mode;
    fhr_recoverability recoverability;
    int has_initial;                 /* MUST_PRESERVE: adopted at `initial` */
    fhr_location initial;
    rplan_data_kind data;            /* init data (adopted) or the source (reconstructible) */
    uint64_t seed;                   /* RPLAN_DATA_SYNTH */
    const char *path;                /* RPLAN_DATA_FILE, else NULL */
    int32_t priority;
    uint32_t line, col;              /* declaration */
    /* `seeded`: without fields(...), the value has fields "b" (from init or source) and
     * "a", its last regen_nbytes bytes (floor(nbytes / 16) * 8), regenerated on devices
     * by `generator` from the 8 little-endian bytes of regen_seed. With fields(...), its
     * fields marked `seeded` (rplan_value_field_seeded) are regenerated, regen_nbytes in
     * all: the k-th of them (k from 0, in declaration order) from the 8 little-endian
     * bytes of regen_seed + k; the others are stored (from init or source). */
    int seeded;
    const char *generator;           /* "counter" unless named */
    uint64_t regen_seed;
    uint64_t regen_nbytes;
    unsigned keep;                   /* FHR_KEEP_*: host copies that keep "a" */
    /* RPLAN_DATA_ENGINE: the loader's name ("key" for engine.key(i)) and its argument */
    const char *loader;
    uint64_t loader_arg;
    /* `fields(...)`: the value's named fields (rplan_value_field); 0: one field "data"
     * (a seeded value without fields(...): "b" and "a") */
    size_t nfields;
    /* `limbs(Q, K, P)` (rplan(5), "Limb-cut values and levels"): each field is limb_q
     * q-limbs then limb_special special limbs of equal size, and the fields form
     * limb_parts equal consecutive groups (parts). All 0 without limbs(...). A device copy
     * may hold the cut a level needs (rplan_instr.limbs, rplan_value_cut). */
    uint32_t limb_q, limb_special, limb_parts;
    uint32_t limb_alpha; /* q-limbs per part: `limbs(Q, K, P, ALPHA)`, else ceil(Q / P) */
} rplan_value_info;

/* Field k of value i: its name (borrowed from the program) and size in bytes, in
 * declaration order; the fields lie back to back in that order. FHR_E_INVALID when i or
 * k is out of range. */
FHR_API fhr_status rplan_value_field(const rplan_program *p, size_t i, size_t k,
                                     const char **name, uint64_t *nbytes);

/* The cut of value i that holds q-limbs 0..limbs-1 (level limbs - 1; limbs 0: the whole
 * value): the bytes of a device copy that holds only it. Field f of part p (the fields in
 * limb_parts consecutive groups) is present when p * limb_alpha <=
 * limbs - 1, with limbs + limb_special of its limbs: q-limbs 0..limbs-1, then its special
 * limbs; present fields are packed back to back in field order. rplan_value_cut_field
 * gives field k's offset in such a copy and its bytes there (0: absent). FHR_E_INVALID
 * when i or k is out of range, or limbs is not 0 and value i has no limbs(...) or fewer
 * than limbs q-limbs. (The fields are the declared ones; without fields(...) a seeded
 * value's "b" and "a", else one field, the whole value.) */
FHR_API fhr_status rplan_value_cut(const rplan_program *p, size_t i, uint32_t limbs,
                                   uint64_t *nbytes);
FHR_API fhr_status rplan_value_cut_field(const rplan_program *p, size_t i, uint32_t limbs,
                                         size_t k, uint64_t *offset, uint64_t *nbytes);

/* 1: field k of value i is marked `seeded` (regenerated by the value's generator, not
 * stored); 0: it is stored; -1: i or k is out of range. */
FHR_API int rplan_value_field_seeded(const rplan_program *p, size_t i, size_t k);

/* The cost a `kernel NAME cost DURATION` or `kernel NAME reads SIZE` declaration gives an
 * engine kernel (rplan(5), "Kernels"), for the model's body time. */
typedef enum rplan_cost_kind {
    RPLAN_COST_DURATION = 1, /* imm nanoseconds per call */
    RPLAN_COST_READS = 2     /* imm bytes read per call, at the device bandwidth */
} rplan_cost_kind;
typedef struct rplan_kernel_info {
    const char *name;
    rplan_cost_kind kind;
    uint64_t imm;
} rplan_kernel_info;
FHR_API size_t rplan_nkernels(const rplan_program *p);
FHR_API fhr_status rplan_kernel_cost(const rplan_program *p, size_t i, rplan_kernel_info *out);

typedef enum rplan_policy_kind {
    RPLAN_POLICY_TIERED_LRU = 1, /* least recently used first (fhr_policy_tiered_lru_create) */
    RPLAN_POLICY_LOOKAHEAD = 2   /* farthest next use first (fhr_policy_lookahead_create) */
} rplan_policy_kind;

typedef struct rplan_policy_info {
    const char *name;
    rplan_policy_kind kind;
    size_t nchains;
    /* chain i: chain_len[i] locations, first the preferred one, then its fallbacks */
    size_t chain_len[8];
    fhr_location chain[8][8];
} rplan_policy_info;

/* How a VM runs a verified program (rplan(5), BYTECODE, lists the opcodes):
 *  - values: adopt (has_initial: MUST_PRESERVE at `initial`, data from `data`) or
 *    register_source (RECONSTRUCTIBLE; the source makes `data`), in index order, after
 *    setting the budgets;
 *  - stage/endstage: named, nested scopes of the report; holds taken inside a stage are
 *    released inside it (the verifier guarantees it);
 *  - plan ... end: one fhr_plan: the actions after `phase reclaim`, `phase enter` and
 *    `phase exit` form its action lists, each `reserve` a reservation; the `run`s after
 *    `phase body` are the scope's body;
 *  - request ... end: `require`s, `reserve`s, then the body's `run`s; the request's
 *    policy decides the placements;
 *  - require/ensure with limbs n >= 1 (`level n - 1`, a device location, a limb-cut
 *    value): a device copy holding q-limbs 0..n-1 of each present part suffices
 *    (rplan_value_cut); limbs 0: the whole value;
 *  - ensure/move/drop/discard outside a plan: the direct primitives. An ensure of a
 *    value that already has a copy there is a no-op (the verifier's rule too); a move
 *    without a source lets the manager choose (pinned, host, devices in order);
 *  - hold/release: fhr_hold_acquire/fhr_hold_release on (value, location);
 *  - run NAME/count: call the kernel registered as NAME with the `count` arg.*
 *    instructions that follow (values, integers, sizes in bytes, durations in ns).
 * The verifier has already proved every explicit action feasible from the declared
 * initial state against the program's budgets. */

/* Operand kinds of the opcode table (runtime/program/opcodes.def). */
typedef enum rplan_operand {
    RPLAN_OPD_NONE = 0,
    RPLAN_OPD_VAL,    /* index into the values */
    RPLAN_OPD_LOC,    /* a location */
    RPLAN_OPD_LOCOPT, /* a location or none */
    RPLAN_OPD_STR,    /* a string */
    RPLAN_OPD_CONST,  /* a 64-bit constant */
    RPLAN_OPD_POL,    /* index into the policies */
    RPLAN_OPD_PHASE,  /* an fhr_phase */
    RPLAN_OPD_COUNT,  /* a small count */
    RPLAN_OPD_LIMBS   /* require/ensure: q-limbs kept, 0: the whole value (bytecode 1.5) */
} rplan_operand;

/* A decoded instruction. Fields not used by the opcode are zero / NULL. */
typedef struct rplan_instr {
    int op;                /* RPLAN_OP_* (see rplan_opcode_name) */
    const char *opname;
    uint32_t value;        /* value index */
    int has_loc;
    fhr_location loc;      /* ensure/drop/hold/unhold/require/reserve: the location; move: to */
    int has_from;
    fhr_location from;     /* move: the source when given */
    fhr_phase phase;       /* phase marker */
    const char *str;       /* stage/plan/request name, kernel name, reservation label */
    uint64_t imm;          /* reserve bytes, arg constant (size in bytes, duration in ns) */
    uint32_t policy;       /* request policy index */
    uint32_t count;        /* run: number of ARG instructions that follow */
    uint32_t line, col;    /* source position */
    /* require/ensure: 0 for the whole value; n >= 1 for `level n - 1`: a device copy
     * that holds q-limbs 0..n-1 of its limb-cut value suffices (rplan_value_cut) */
    uint32_t limbs;
} rplan_instr;

FHR_API size_t rplan_nvalues(const rplan_program *p);
FHR_API fhr_status rplan_value(const rplan_program *p, size_t i, rplan_value_info *out);
FHR_API size_t rplan_nbudgets(const rplan_program *p);
FHR_API fhr_status rplan_budget(const rplan_program *p, size_t i, fhr_budget *out);
/* Where budget i is declared (0, 0: it came from an override, or bytecode 1.0). */
FHR_API fhr_status rplan_budget_position(const rplan_program *p, size_t i, uint32_t *line,
                                         uint32_t *col);
FHR_API size_t rplan_npolicies(const rplan_program *p);
FHR_API fhr_status rplan_policy(const rplan_program *p, size_t i, rplan_policy_info *out);
FHR_API size_t rplan_ninstrs(const rplan_program *p);
FHR_API fhr_status rplan_instr_get(const rplan_program *p, size_t i, rplan_instr *out);
/* The source file name recorded in the program ("" if none). */
FHR_API const char *rplan_source_name(const rplan_program *p);

/* Opcode numbers are those of runtime/program/opcodes.def, in order. */
FHR_API int rplan_opcode_count(void);
FHR_API const char *rplan_opcode_name(int op); /* "ensure"; "?" when out of range */

/* ---- the minimum budget (rplan_vm(3), MINIMUM BUDGET) ------------------------------- */

#define RPLAN_MIN_BUDGET_INTERVALS 64 /* feasible intervals kept (the rest are counted) */
#define RPLAN_MIN_BUDGET_PROBES 20000 /* windows probed before the walk stops */

typedef struct rplan_budget_interval {
    uint64_t from, to; /* feasible from..to bytes, inclusive; to UINT64_MAX: and above */
} rplan_budget_interval;

typedef struct rplan_min_budget_result {
    int found;          /* 0: no budget at the location makes the program feasible */
    int unused;         /* nothing there needs bytes: every budget, 0 included */
    int exact;          /* every budget was decided */
    uint64_t feasible;  /* the smallest feasible budget */
    uint64_t threshold; /* every budget from it on is feasible; one byte less is not */
    uint64_t near;      /* the smallest from the threshold on within 5% of unbounded_s */
    uint64_t peak;      /* the highest charge the unbounded runs set against the location */
    uint64_t floor;     /* the dry run's highest charge there: every budget below it is
                           refused by the dry run, without a probe */
    size_t probes;      /* budgets probed to decide feasibility (a probe: the dry run and
                           the explain run at one budget), one per window of budgets over
                           which the run takes one course, from the floor up */
    uint64_t undecided_from, undecided_to; /* exact 0: the budgets left undecided after
                           RPLAN_MIN_BUDGET_PROBES probes (from > to: none) */
    size_t nint;        /* intervals in iv (the last is the threshold's) */
    size_t nint_all;    /* feasible intervals found (1: monotonic) */
    rplan_budget_interval iv[RPLAN_MIN_BUDGET_INTERVALS];
    double unbounded_s, feasible_s, threshold_s, near_s; /* predicted times */
    char reason[512];   /* found 0: why the unbounded budget is refused */
} rplan_min_budget_result;

struct rplan_vm_opts;
/* The budgets at loc under which p is feasible, as `fheplan check --budget LOC=B` decides
 * (the verifier's dry run and the VM's explain run on a model backend): every feasible
 * interval, the threshold, the smallest feasible budget and the budget within 5% of the
 * unbounded predicted time. opts (NULL: the defaults) are the explain run's: its other
 * budget overrides, policy, objective, rates and profile; its mode, scale and trace are
 * ignored. FHR_OK with out->found 0 and out->reason when no budget makes p feasible;
 * FHR_E_INVALID for a NULL argument or a bad location; FHR_E_NOMEM; FHR_E_BACKEND when
 * a probe cannot run, naming it in err. */
FHR_API fhr_status rplan_min_budget(const rplan_program *p, fhr_location loc,
                                    const struct rplan_vm_opts *opts,
                                    rplan_min_budget_result *out, fhr_error *err);

/* ---- CKKS cost model (rplan(5) gives the formulas) --------------------------------- */

/* Each returns FHR_E_INVALID on an out-of-range argument (N not a power of two in
 * 2^10..2^17, level > 100, dnum 0 or > level+1) and FHR_E_BUDGET on overflow. */
FHR_API fhr_status rplan_ckks_ciphertext(uint64_t n, uint64_t level, uint64_t *out);
FHR_API fhr_status rplan_ckks_plaintext(uint64_t n, uint64_t level, uint64_t *out);
FHR_API fhr_status rplan_ckks_switching_key(uint64_t n, uint64_t level, uint64_t dnum,
                                            uint64_t *out);
FHR_API fhr_status rplan_ckks_keyswitch_workspace(uint64_t n, uint64_t level, uint64_t dnum,
                                                  uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
