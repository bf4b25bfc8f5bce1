/* compiler/sema.h — internals of the semantic pass shared by its files (sema*.c): the
 * pass state, symbols and loop variables, statement contexts, and what crosses files. */
#ifndef FHEPLAN_COMPILER_SEMA_H
#define FHEPLAN_COMPILER_SEMA_H

#include <stddef.h>
#include <stdint.h>

#include "compiler/lang.h"
#include "runtime/program/program.h"

enum { K_INT = 0, K_SIZE = 1, K_DUR = 2 };
/* A constant expression's value: signed, its magnitude below 2^64 (rplan(5): a negative
 * intermediate result or constant is fine; what a count, size or seed takes is not). */
typedef __int128 rp_int;
enum { SYM_CONST, SYM_VALUE, SYM_POLICY };
enum { CX_TOP, CX_STAGE, CX_PLAN, CX_REQ, CX_ACTS, CX_BODY };

typedef struct sym {
    const char *name;
    int kind;
    rp_loc decl;
    rp_int v;      /* const value */
    int vkind;     /* const kind */
    int used;      /* named by a statement or expression (warnings) */
    uint32_t first; /* value index or policy index */
    uint32_t dim;  /* 0: scalar */
    int is_array;
} sym;

typedef struct loopvar {
    const char *name;
    uint64_t v;
    rp_loc decl;
} loopvar;

typedef struct cx {
    int kind;
    fhr_phase phase; /* PLAN/REQ: the furthest phase seen */
    const char *what; /* "plan" or "request" */
} cx;

typedef struct S {
    rp_dctx *dc;
    const rplan_compile_opts *opts;
    rplan_program *p;
    sym *syms;
    size_t nsyms, capsyms;
    uint32_t *ht; /* sym index + 1 */
    size_t htcap;
    uint32_t *kht; /* kernel declarations by interned name: kernel index + 1 */
    size_t khtcap;
    loopvar loops[32];
    int nloops;
    int has_budget[FHR_LOC_SLOTS];
    rp_loc budget_decl[FHR_LOC_SLOTS];
    uint64_t budget[FHR_LOC_SLOTS];
    int oom;
    int depth; /* expression and block nesting, bounded to protect the stack */
    int nstages;       /* stages open around the statement being lowered */
    rp_node *root;     /* the top-level statements (for names declared further down) */
    const char *defining; /* the constant whose expression is being evaluated */
    const char *cause;    /* the first unknown name in it */
    /* declarations that failed (reported): later uses of their names say nothing more */
    struct { const char *name, *cause; rp_loc decl; int cycle; } broken[256];
    int nbroken;
    int cycle_reported; /* the constant being defined was reported as part of a cycle */
    uint64_t unrolled; /* loop iterations lowered so far, all loops together */
    int too_big;       /* the unroll or instruction limit was reported */
} S;

#define ERR(s, l, ...) rp_diag((s)->dc, RPLAN_ERROR, (l), __VA_ARGS__)
#define NOTE(s, l, ...) rp_diag((s)->dc, RPLAN_NOTE, (l), __VA_ARGS__)
/* Where the symbol y named `name` comes from (predefined symbols have no position). */
#define DECL_NOTE(s, y, name)                                                                \
    ((y)->decl.first_line ? NOTE(s, (y)->decl, "'%s' is declared here", name)              \
                          : NOTE(s, (y)->decl, "'%s' is predefined (rplan(5))", name))

/* ---- names (sema_names.c) ----------------------------------------------------------- */

RP_HIDDEN sym *rp_sema_lookup(S *s, const char *name);
RP_HIDDEN loopvar *rp_sema_lookup_loop(S *s, const char *name);
/* NULL (and s->oom set) when out of memory. */
RP_HIDDEN sym *rp_sema_add_sym(S *s, const char *name, int kind, rp_loc decl);
RP_HIDDEN const char *rp_sema_sym_kind_name(int k);
/* Reports a duplicate; returns 1 if name is taken. */
RP_HIDDEN int rp_sema_check_new_name(S *s, const char *name, rp_loc at);
/* The closest declared name of the given kind (-1: any kind, loop variables too). */
RP_HIDDEN const char *rp_sema_suggest_name(S *s, const char *word, int kind);
RP_HIDDEN void rp_sema_unknown_name(S *s, rp_loc at, const char *what, const char *name,
                                    int kind);
/* Records a declaration whose error was reported (cause: for a constant, the first unknown
 * name in its expression), so that its uses are not reported again. */
RP_HIDDEN void rp_sema_mark_broken(S *s, const char *name, const char *cause, rp_loc decl);
/* An unknown name in an expression: a cycle of constants, a constant declared further
 * down, a constant whose own definition failed (no second error), or unknown. */
RP_HIDDEN void rp_sema_unknown_expr_name(S *s, rp_loc at, const char *name);

/* ---- expressions (sema_expr.c) ------------------------------------------------------ */

/* Evaluates e to a value of kind K_INT, K_SIZE or K_DUR; 0 after reporting an error. */
RP_HIDDEN int rp_sema_eval_signed(S *s, rp_node *e, rp_int *v, int *kind);
/* The same for a value that may not be negative ("negative result: ... is below zero"). */
RP_HIDDEN int rp_sema_eval(S *s, rp_node *e, uint64_t *v, int *kind);
/* Writes v in decimal into buf (cap bytes; 24 suffice) and returns buf. */
RP_HIDDEN const char *rp_int_str(rp_int v, char *buf, size_t cap);
/* Like rp_sema_eval, and the kind must be want (what names the operand in the error). */
RP_HIDDEN int rp_sema_eval_kind(S *s, rp_node *e, int want, const char *what, uint64_t *v);

/* ---- locations, values, strings (sema_refs.c) --------------------------------------- */

RP_HIDDEN int rp_sema_resolve_loc(S *s, rp_node *n, uint8_t *slot);
RP_HIDDEN const char *rp_sema_slot_name(uint8_t slot, char *buf, size_t cap);
/* Resolves a value reference to a value index. */
RP_HIDDEN int rp_sema_resolve_value(S *s, rp_node *n, uint32_t *out);
/* Expands {name} in a string literal; the result goes to p's string table. */
RP_HIDDEN int rp_sema_interp(S *s, rp_node *n, uint32_t *out);

/* ---- emission (sema_emit.c) --------------------------------------------------------- */

RP_HIDDEN rp_linerec rp_sema_line_of(rp_loc l);
RP_HIDDEN void rp_sema_emit(S *s, int op, uint8_t a, uint8_t b, uint32_t x, uint32_t y,
                            rp_loc l);
RP_HIDDEN rp_loc rp_sema_join(rp_loc a, rp_loc b);

/* ---- declarations (sema_decl.c) ----------------------------------------------------- */

RP_HIDDEN void rp_sema_decl_budget(S *s, rp_node *n);
RP_HIDDEN void rp_sema_decl_const(S *s, rp_node *n);
RP_HIDDEN void rp_sema_decl_policy(S *s, rp_node *n);
RP_HIDDEN void rp_sema_decl_kernel(S *s, rp_node *n);
RP_HIDDEN void rp_sema_decl_value(S *s, rp_node *n);

/* ---- statements (sema_stmt.c) ------------------------------------------------------- */

/* Checks and lowers each statement of list in context c (statements nest recursively). */
RP_HIDDEN void rp_sema_lower_list(S *s, rp_node *list, cx *c);

#endif
