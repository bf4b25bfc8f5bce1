/* compiler/lang.h — internals of the .rplan front end shared by the lexer, parser,
 * semantic pass and diagnostics: source spans, the AST, the diagnostic context. */
#ifndef FHEPLAN_COMPILER_LANG_H
#define FHEPLAN_COMPILER_LANG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "fheplan/rplan.h"

#define RP_HIDDEN __attribute__((visibility("hidden")))
#define RP_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* A source span (1-based lines and byte columns; last_column is inclusive).
 * The field names are Bison's so YYLLOC_DEFAULT works unchanged. */
typedef struct rp_loc {
    uint32_t first_line, first_column, last_line, last_column;
} rp_loc;

/* ---- diagnostics ---------------------------------------------------------------- */

/* Where diagnostics go while one file is processed. */
typedef struct rp_dctx {
    rplan_diags *d;
    int src; /* source id in d, -1 when the source text is unknown */
    const char *file;
    size_t nerrors; /* errors reported through this context */
} rp_dctx;

/* One error at line:col (0: none) of file, whose text (len bytes, or NULL) is shown under it
 * as the compiler shows its own: the run's refusals in check's layout. 0, or -1. */
RP_HIDDEN int rp_diags_add_error_at(rplan_diags *d, const char *file, const char *text,
                                    size_t len, uint32_t line, uint32_t col, const char *msg);
/* Removes diagnostics from..to-1 (the warnings of a program the verifier then refused). */
RP_HIDDEN void rp_diags_remove_from(rplan_diags *d, size_t from, size_t to);
RP_HIDDEN int rp_diags_add_source(rplan_diags *d, const char *name, const char *text,
                                  size_t len);
RP_HIDDEN const char *rp_diags_source_name(rplan_diags *d, int src);
RP_HIDDEN void rp_diag(rp_dctx *dc, rplan_severity sev, rp_loc loc, const char *fmt, ...)
    RP_PRINTF(4, 5);
RP_HIDDEN void rp_vdiag(rp_dctx *dc, rplan_severity sev, rp_loc loc, const char *fmt,
                        va_list ap);
/* The closest candidate within edit distance (NULL if none is close enough). */
RP_HIDDEN const char *rp_suggest(const char *word, const char *const *cands, size_t n);
RP_HIDDEN size_t rp_edit_distance(const char *a, const char *b, size_t cap);

/* ---- AST -------------------------------------------------------------------------- */

typedef enum rp_kind {
    N_LIST, /* a = head, b = tail; children chained by next */
    N_INT,  /* num */
    N_NAME, /* text */
    N_INDEX, /* text[a] */
    N_CALL, /* text(a...) */
    N_BIN,  /* a op b */
    N_NEG,  /* -a */
    N_UNIT, /* a unit(op) */
    N_STR,  /* text */
    N_LOC,  /* op: 0 host, 1 pinned, 2 text "kind:N", 3 bare identifier text */
    N_SYNTH, /* synth(a) */
    N_FILE, /* file("text") */
    N_ENGINE, /* text "engine.NAME"(a): data the engine's loader NAME supplies */
    N_FIELD,  /* text = a (a size expr, or NULL: an equal share); op 1: `seeded` */
    N_CHAIN, /* a: list of N_LOC */
    A_MODE, /* op: fhr_replica_mode */
    A_AT,   /* a: loc */
    A_INIT, /* a: N_SYNTH / N_FILE / N_NAME "zero" */
    A_SOURCE,
    A_PRIORITY, /* a: expr */
    A_SEEDED,   /* text: generator or NULL (the built-in counter), a: seed expr */
    A_KEEP,     /* a: loc (host or pinned) */
    A_FIELDS,   /* a: list of N_FIELD */
    A_LIMBS,    /* limbs(a, b[, c[, c->next]]): q-limbs, special limbs, parts (NULL: 1),
                 * q-limbs per part (NULL: ceil(a / c)) */
    S_VERSION, /* num */
    S_BUDGET, /* a loc, b expr */
    S_CONST,  /* text = a */
    S_VALUE,  /* text, a: dim or NULL, b: size expr, c: attr list */
    S_POLICY, /* text = b(text2)( c chains ) */
    S_STAGE,  /* a: name (N_STR), b: block */
    S_PLAN,   /* a: name, b: block */
    S_REQUEST, /* a: name, b: policy N_NAME, c: block */
    S_PHASE,  /* op: fhr_phase, a: block */
    S_RESERVE, /* a loc, b expr, c label N_STR or NULL */
    S_REQUIRE, /* a vref, b loc, c level expr or NULL */
    S_ENSURE,  /* a vref, b loc, c level expr or NULL */
    S_MOVE,    /* a vref, b to, c from or NULL */
    S_DROP,    /* a vref, b loc */
    S_DISCARD, /* a vref */
    S_HOLD,    /* a vref, b loc */
    S_RELEASE, /* a vref, b loc */
    S_RUN,     /* text kernel, a: args list */
    S_FOR,     /* text var, a lo, b hi, c block; op 1: hi is exclusive */
    S_KERNEL   /* text kernel, text2 "cost" or "reads" (b: N_NAME at its position), a: expr */
} rp_kind;

typedef struct rp_node {
    rp_kind kind;
    int op;
    rp_loc loc;
    rp_loc end; /* stage, plan, request: the closing brace */
    char *text;
    char *text2;
    uint64_t num;
    struct rp_node *a, *b, *c;
    struct rp_node *next;
} rp_node;

RP_HIDDEN rp_node *rp_node_new(rp_kind k, rp_loc loc);
RP_HIDDEN void rp_node_free(rp_node *n);
RP_HIDDEN rp_node *rp_list_new(rp_loc loc);
RP_HIDDEN rp_node *rp_list_append(rp_node *list, rp_node *item); /* returns list */

/* Units (lexer → parser → sema). */
typedef enum rp_unit_kind { RP_UK_SIZE = 1, RP_UK_DURATION = 2 } rp_unit_kind;
typedef struct rp_unit {
    const char *name;
    rp_unit_kind kind;
    uint64_t mult; /* bytes or nanoseconds */
} rp_unit;
RP_HIDDEN const rp_unit *rp_unit_get(int code);
RP_HIDDEN int rp_unit_find(const char *name); /* -1 if unknown */
RP_HIDDEN const char *rp_unit_suggest(const char *name);

/* ---- lexer and parser -------------------------------------------------------------- */

typedef struct rp_lexer {
    const char *buf; /* NUL-terminated copy of the source */
    const char *cur, *lim, *tok, *mar;
    const char *line_start;
    uint32_t line;
    rp_dctx *dc;
    /* the '{' still open, innermost last (the first 64 kept), for "to match this '{'" */
    rp_loc open[64];
    size_t nopen;
    int keep_comments; /* 1: return comments as T_COMMENT tokens (the formatter) */
} rp_lexer;

typedef struct rp_parser {
    rp_lexer lx;
    rp_dctx *dc;
    rp_node *root; /* the statement list */
} rp_parser;

/* Parses; ps->root receives whatever statements survived error recovery. */
RP_HIDDEN void rp_parse_run(rp_parser *ps);
RP_HIDDEN const char *rp_keyword_suggest(const char *word);

/* ---- semantic pass -------------------------------------------------------------- */

struct rplan_program;
/* Lowers the AST into p (already created, empty). Returns the number of errors. */
RP_HIDDEN size_t rp_sema(rp_node *root, rp_dctx *dc, const rplan_compile_opts *opts,
                         struct rplan_program *p);

#endif
