/* runtime/program/program.h — the in-memory program (what the compiler builds and the loader
 * decodes), the opcode enum and operand table from opcodes.def, and the verifier. */
#ifndef FHEPLAN_COMPILER_PROGRAM_H
#define FHEPLAN_COMPILER_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "fheplan/rplan.h"

#define RP_HIDDEN __attribute__((visibility("hidden")))

enum rp_opcode {
#define OP(id, text, x, y, a, b, ctx, rule) RPLAN_OP_##id,
#include "runtime/program/opcodes.def"
#undef OP
    RPLAN_OP_COUNT_
};

typedef enum rp_ctx { CTX_ITEM, CTX_SCOPE, CTX_REQ, CTX_ACTION, CTX_BODY, CTX_ARG } rp_ctx;

typedef struct rp_opinfo {
    const char *name;
    uint8_t x, y, a, b; /* rplan_operand */
    uint8_t ctx;        /* rp_ctx */
} rp_opinfo;

RP_HIDDEN extern const rp_opinfo rp_ops[RPLAN_OP_COUNT_];

#define RP_NOLOC 0xFFu
#define RP_MAX_CHAIN 8
/* Limits every layer applies alike (rplan(5), "Limits"). */
#define RP_MAX_STAGE_DEPTH 32             /* stages nested in one another */
#define RP_MAX_UNROLLED 1000000ull        /* loop iterations a program unrolls, in all */
#define RP_MAX_INSTRS 1000000u            /* instructions of a program */
#define RP_MAX_ARGS 16 /* arguments of one kernel call (the VM's rplan_arg array) */

/* File format constants (rplan(5), "BYTECODE"). */
#define RP_MAGIC "\x89RPLAN\r\n"
#define RP_MAJOR 1
#define RP_MINOR 3 /* 1.1: budget records carry their declaration; 1.2: the REGN section;
                      1.3: engine data (the loader in the value record), FLDS and KERN */
#define RP_HDR_SIZE 32
#define RP_DIR_SIZE 16
enum {
    RP_SEC_STRS = 1, RP_SEC_CONS, RP_SEC_VALS, RP_SEC_BUDG, RP_SEC_POLI, RP_SEC_CHAI,
    RP_SEC_CODE, RP_SEC_LINE, RP_SEC_SRCE, RP_SEC_REGN, RP_SEC_FLDS, RP_SEC_KERN,
    RP_NSECTIONS = RP_SEC_KERN
};
#define RP_NSECTIONS_1_2 RP_SEC_REGN /* minor 2 files end with the seeded-value section */
#define RP_FLDS_SIZE 16
#define RP_KERN_SIZE 16
#define RP_MAX_FIELDS 16 /* fields of one value (a kernel call's pointers per value) */
#define RP_NSECTIONS_1_0 RP_SEC_SRCE /* minor 0 files end with the source section */
#define RP_REGN_SIZE 24
#define RP_VAL_SIZE 40
#define RP_BUDG_SIZE 16
#define RP_POLI_SIZE 16
#define RP_CHAI_SIZE 8
#define RP_CODE_SIZE 12
#define RP_LINE_SIZE 8

typedef struct rp_value {
    uint32_t name; /* string offset */
    uint8_t mode, recov, init_slot, data;
    uint64_t nbytes;
    uint64_t arg; /* synth seed, or file path string offset */
    int32_t prio;
    uint32_t line;
    uint16_t col, len;
    /* seeded (the REGN section): the last rp_regen_nbytes() bytes are generated */
    uint8_t seeded, keep; /* keep: FHR_KEEP_* */
    uint32_t gen;         /* generator name (string offset) */
    uint64_t seed;
    /* engine data (RPLAN_DATA_ENGINE): the loader's name (string offset; arg is its
     * argument); declared fields: records field0 .. field0 + nfields - 1 (FLDS) */
    uint32_t loader;
    uint32_t field0, nfields;
} rp_value;

typedef struct rp_fieldrec {
    uint32_t value, name; /* value index, field name (string offset) */
    uint64_t nbytes;
} rp_fieldrec;

typedef struct rp_kernrec {
    uint32_t name, kind;  /* kernel name (string offset), rplan_cost_kind */
    uint64_t imm;         /* nanoseconds per call, or bytes read per call */
} rp_kernrec;

typedef struct rp_budgetrec {
    uint8_t slot;
    uint64_t nbytes;
    uint32_t line; /* its declaration, 0:0 when it came from an override */
    uint16_t col;
} rp_budgetrec;

typedef struct rp_policyrec {
    uint32_t name, kind, first, n;
} rp_policyrec;

typedef struct rp_chainrec {
    uint8_t s[RP_MAX_CHAIN];
} rp_chainrec;

typedef struct rp_ins {
    uint8_t op, a, b, c;
    uint32_t x, y;
} rp_ins;

typedef struct rp_linerec {
    uint32_t line;
    uint16_t col, len;
} rp_linerec;

struct rplan_program {
    char *strs;
    uint32_t nstrs, capstrs;
    uint64_t *cons;
    uint32_t ncons, capcons;
    rp_value *vals;
    uint32_t nvals, capvals;
    rp_budgetrec *buds;
    uint32_t nbuds, capbuds;
    rp_policyrec *pols;
    uint32_t npols, cappols;
    rp_chainrec *chains;
    uint32_t nchains, capchains;
    rp_fieldrec *fields;
    uint32_t nfields, capfields;
    rp_kernrec *kerns;
    uint32_t nkerns, capkerns;
    rp_ins *code;
    rp_linerec *lines;
    uint32_t ncode, capcode;
    uint32_t src_name; /* string offset of the source file name */
    char *src;         /* source text (NUL-terminated), NULL when stripped */
    uint32_t srclen;
    /* build-time dedupe tables (compiler only) */
    uint32_t *strhash;
    uint32_t strhcap, nstrhash;
    uint32_t *conhash;
    uint32_t conhcap;
};

RP_HIDDEN rplan_program *rp_prog_new(void);
/* Builders: return 0 on allocation failure. */
RP_HIDDEN int rp_prog_str(rplan_program *p, const char *s, size_t n, uint32_t *out);
RP_HIDDEN int rp_prog_const(rplan_program *p, uint64_t v, uint32_t *out);
RP_HIDDEN int rp_prog_emit(rplan_program *p, rp_ins in, rp_linerec ln);
RP_HIDDEN int rp_prog_field(rplan_program *p, rp_fieldrec f);
RP_HIDDEN int rp_prog_kernel(rplan_program *p, rp_kernrec k);
RP_HIDDEN void rp_prog_drop_build_tables(rplan_program *p);
RP_HIDDEN const char *rp_prog_cstr(const rplan_program *p, uint32_t off); /* verified only */

/* Verifier. On failure fills *f and returns FHR_E_INVALID (structure) or
 * FHR_E_INFEASIBLE (dry run). */
typedef struct rp_vfail {
    char msg[512];
    long instr;      /* failing instruction, -1 none */
    long value;      /* value whose declaration is the position (instr -1), -1 none */
    long note_value; /* value to point a "declared here" note at, -1 none */
    long note_instr; /* instruction to point a note at, -1 none */
    char note[256];
} rp_vfail;

RP_HIDDEN fhr_status rp_verify(const rplan_program *p, rp_vfail *f);

/* regen.c: seeded values. The regenerable half of a value of n bytes: its last
 * floor(n / 16) * 8 bytes. The dry-run charge of value v at slot (host and pinned copies
 * omit the half they do not keep). Checks v's seeded fields: 0 and a message if bad. */
RP_HIDDEN uint64_t rp_regen_nbytes(uint64_t nbytes);
RP_HIDDEN uint64_t rp_value_charge(const rp_value *v, uint8_t slot);
RP_HIDDEN int rp_check_seeded(const rplan_program *p, uint32_t i, char *msg, size_t cap);
/* Text (runtime/program/text.c): the offset of the first byte of s[0..n) that is not
 * well-formed UTF-8 or is a control byte other than tab, or n; the length of the UTF-8
 * sequence at s (0 when ill-formed); and the same text with every such byte made '?'. */
RP_HIDDEN size_t rp_text_bad(const char *s, size_t n);
RP_HIDDEN size_t rp_utf8_seq(const char *s, size_t n);
RP_HIDDEN void rp_text_clean(char *s, size_t n);

/* CRC-32C (Castagnoli). */
RP_HIDDEN uint32_t rp_crc32c(uint32_t crc, const void *buf, size_t len);
/* Recomputes the checksum of a serialized file in place (tests use it to make the
 * verifier, not the CRC, catch a corruption). 0 if the buffer is too short. */
RP_HIDDEN int rp_bytecode_restamp(void *buf, size_t len);

#endif
