/* grammar/parser.y — the .rplan grammar (GNU Bison): a pure, reentrant LALR(1) parser
 * with locations, custom syntax errors with LAC, and error recovery per statement. It
 * builds the AST of compiler/lang.h; every semantic type has a destructor. */
%require "3.8"
%define api.pure full
%define api.prefix {rp_}
%define api.token.prefix {T_}
%define api.location.type {rp_loc}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%param {rp_lexer *lx}
%parse-param {rp_parser *ps}

%code requires {
#include "compiler/lang.h"
}

%code provides {
int rp_lex(RP_STYPE *lval, RP_LTYPE *lloc, rp_lexer *lx);
}

%code {
#include <stdlib.h>
#include <string.h>

static rp_node *mk(rp_kind k, rp_loc l, rp_node *a, rp_node *b, rp_node *c)
{
    rp_node *n = rp_node_new(k, l);
    if (!n) {
        rp_node_free(a);
        rp_node_free(b);
        rp_node_free(c);
        return NULL;
    }
    n->a = a;
    n->b = b;
    n->c = c;
    return n;
}

static rp_loc end_of(rp_loc l)
{
    rp_loc r = {l.last_line, l.last_column, l.last_line, l.last_column};
    return r;
}

static rp_node *mkt(rp_kind k, rp_loc l, char *text, rp_node *a, rp_node *b, rp_node *c)
{
    rp_node *n = mk(k, l, a, b, c);
    if (n)
        n->text = text;
    else
        free(text);
    return n;
}

static rp_node *mkop(rp_kind k, rp_loc l, int op, rp_node *a, rp_node *b)
{
    rp_node *n = mk(k, l, a, b, NULL);
    if (n)
        n->op = op;
    return n;
}

static void rp_error(RP_LTYPE *loc, rp_lexer *lx, rp_parser *ps, const char *msg)
{
    (void)lx;
    if (strcmp(msg, "memory exhausted") == 0) /* Bison's stack limit */
        msg = "input is nested too deeply";
    rp_diag(ps->dc, RPLAN_ERROR, *loc, "%s", msg);
}

#define NOMEM(x) do { if (!(x)) YYNOMEM; } while (0)
}

%union {
    rp_node *n;
    char *s;
    const char *cs;
    uint64_t u;
}

%token <s> IDENT "identifier" STRING "string" LOCLIT "location"
%token <u> INT "integer" MODE "replica mode"
%token RPLAN "rplan" BUDGET "budget" CONST "const" VALUE "value" POLICY "policy"
%token STAGE "stage" PLAN "plan" REQUEST "request" USING "using" RECLAIM "reclaim"
%token RESERVE "reserve" ENTER "enter" BODY "body" EXIT "exit" REQUIRE "require"
%token ENSURE "ensure" MOVE "move" DROP "drop" DISCARD "discard" HOLD "hold"
%token RELEASE "release" RUN "run" FOR "for" IN "in" FROM "from" AT "at" INIT "init"
%token SOURCE "source" PRIORITY "priority" HOST "host" PINNED "pinned"
%token SYNTH "synth" FILE "file" ZERO "zero" SEEDED "seeded" KEEP "keep"
%token FIELDS "fields" KERNEL "kernel" LIMBS "limbs" LEVEL "level"
%token ARROW "->" DOTDOT ".." DOTDOTLT "..<" SHL "<<"
%token COMMENT "comment" /* only with rp_lexer.keep_comments (the formatter) */

%type <n> stmts stmt block expr loc vref str attrs attr data chains chain locs
%type <n> args argl opt_from opt_label opt_dim fieldl field opt_level
%type <s> kname
%type <cs> kword

%destructor { free($$); } <s>
%destructor { rp_node_free($$); } <n>
%destructor { (void)$$; } <u>

%left SHL
%left '+' '-'
%left '*' '/' '%'
%precedence NEG
%precedence IDENT /* a unit after an expression binds tightest: 2 * 3 MiB, -0 ms */

%%

file:
    version stmts { ps->root = $2; }
    ;

version:
    RPLAN INT {
        if ($2 != 1)
            rp_diag(ps->dc, RPLAN_ERROR, @2,
                    "unsupported format version %llu (this compiler reads version 1)",
                    (unsigned long long)$2);
    }
    | error {
        /* the diagnostic says what was found; add what a file must start with */
        rp_diag(ps->dc, RPLAN_NOTE, @$, "a plan file starts with 'rplan 1'");
    }
    ;

stmts:
    %empty { $$ = rp_list_new(@$); NOMEM($$); }
    | stmts stmt { $$ = $1; $1 = NULL; if ($2) rp_list_append($$, $2); }
    | stmts ';' { $$ = $1; }
    ;

block:
    '{' stmts '}' { $$ = $2; }
    ;

stmt:
    BUDGET loc expr { $$ = mk(S_BUDGET, @$, $2, $3, NULL); NOMEM($$); }
    | CONST IDENT '=' expr { $$ = mkt(S_CONST, @2, $2, $4, NULL, NULL); NOMEM($$); }
    | VALUE IDENT opt_dim '=' expr attrs {
        $$ = mkt(S_VALUE, @2, $2, $3, $5, $6); NOMEM($$);
    }
    | KERNEL kname IDENT expr {
        $$ = mkt(S_KERNEL, @2, $2, $4, NULL, NULL);
        if ($$) { $$->text2 = $3; $$->b = rp_node_new(N_NAME, @3); }
        else free($3);
        NOMEM($$ && $$->b);
    }
    | POLICY IDENT '=' IDENT '(' chains ')' {
        $$ = mkt(S_POLICY, @2, $2, NULL, NULL, $6);
        if ($$) { $$->text2 = $4; $$->a = rp_node_new(N_NAME, @4); }
        else free($4);
        NOMEM($$ && $$->a);
    }
    | STAGE str block { $$ = mk(S_STAGE, @1, $2, $3, NULL); NOMEM($$); $$->end = end_of(@3); }
    | PLAN str block { $$ = mk(S_PLAN, @1, $2, $3, NULL); NOMEM($$); $$->end = end_of(@3); }
    | REQUEST str USING IDENT block {
        rp_node *pol = mkt(N_NAME, @4, $4, NULL, NULL, NULL);
        $$ = mk(S_REQUEST, @1, $2, pol, $5); NOMEM(pol && $$); $$->end = end_of(@5);
    }
    | RECLAIM block { $$ = mkop(S_PHASE, @1, FHR_PHASE_RECLAIM, $2, NULL); NOMEM($$); }
    | ENTER block { $$ = mkop(S_PHASE, @1, FHR_PHASE_ENTER, $2, NULL); NOMEM($$); }
    | BODY block { $$ = mkop(S_PHASE, @1, FHR_PHASE_BODY, $2, NULL); NOMEM($$); }
    | EXIT block { $$ = mkop(S_PHASE, @1, FHR_PHASE_EXIT, $2, NULL); NOMEM($$); }
    | RESERVE loc expr opt_label { $$ = mk(S_RESERVE, @$, $2, $3, $4); NOMEM($$); }
    | REQUIRE vref '@' loc opt_level { $$ = mk(S_REQUIRE, @$, $2, $4, $5); NOMEM($$); }
    | ENSURE vref '@' loc opt_level { $$ = mk(S_ENSURE, @$, $2, $4, $5); NOMEM($$); }
    | MOVE vref ARROW loc opt_from { $$ = mk(S_MOVE, @$, $2, $4, $5); NOMEM($$); }
    | DROP vref '@' loc opt_level { $$ = mk(S_DROP, @$, $2, $4, $5); NOMEM($$); }
    | DISCARD vref { $$ = mk(S_DISCARD, @$, $2, NULL, NULL); NOMEM($$); }
    | HOLD vref '@' loc { $$ = mk(S_HOLD, @$, $2, $4, NULL); NOMEM($$); }
    | RELEASE vref '@' loc { $$ = mk(S_RELEASE, @$, $2, $4, NULL); NOMEM($$); }
    | RUN kname '(' args ')' { $$ = mkt(S_RUN, @$, $2, $4, NULL, NULL); NOMEM($$); }
    | FOR IDENT IN expr DOTDOT expr block {
        $$ = mkt(S_FOR, @2, $2, $4, $6, $7); NOMEM($$);
    }
    | FOR IDENT IN expr DOTDOTLT expr block {
        $$ = mkt(S_FOR, @2, $2, $4, $6, $7); NOMEM($$); $$->op = 1;
    }
    | error { $$ = NULL; }
    ;

opt_dim:
    %empty { $$ = NULL; }
    | '[' expr ']' { $$ = $2; }
    ;

/* `level L`: a device copy with the q-limbs of level L suffices (a limb-cut value) */
opt_level:
    %empty { $$ = NULL; }
    | LEVEL expr { $$ = $2; }
    ;

opt_from:
    %empty { $$ = NULL; }
    | FROM loc { $$ = $2; }
    ;

opt_label:
    %empty { $$ = NULL; }
    | str { $$ = $1; }
    ;

attrs:
    %empty { $$ = rp_list_new(@$); NOMEM($$); }
    | attrs attr { $$ = rp_list_append($1, $2); $1 = NULL; }
    ;

attr:
    MODE { $$ = mkop(A_MODE, @1, (int)$1, NULL, NULL); NOMEM($$); }
    | AT loc { $$ = mk(A_AT, @1, $2, NULL, NULL); NOMEM($$); }
    | INIT data { $$ = mk(A_INIT, @1, $2, NULL, NULL); NOMEM($$); }
    | SOURCE data { $$ = mk(A_SOURCE, @1, $2, NULL, NULL); NOMEM($$); }
    | PRIORITY expr { $$ = mk(A_PRIORITY, @1, $2, NULL, NULL); NOMEM($$); }
    | SEEDED '(' expr ')' { $$ = mk(A_SEEDED, @1, $3, NULL, NULL); NOMEM($$); }
    | SEEDED kname '(' expr ')' { $$ = mkt(A_SEEDED, @1, $2, $4, NULL, NULL); NOMEM($$); }
    | KEEP loc { $$ = mk(A_KEEP, @1, $2, NULL, NULL); NOMEM($$); }
    | FIELDS '(' fieldl ')' { $$ = mk(A_FIELDS, @1, $3, NULL, NULL); NOMEM($$); }
    | LIMBS '(' expr ',' expr ')' { $$ = mk(A_LIMBS, @1, $3, $5, NULL); NOMEM($$); }
    | LIMBS '(' expr ',' expr ',' expr ')' { $$ = mk(A_LIMBS, @1, $3, $5, $7); NOMEM($$); }
    | LIMBS '(' expr ',' expr ',' expr ',' expr ')' {
          $$ = mk(A_LIMBS, @1, $3, $5, $7); NOMEM($$); $7->next = $9; }
    ;

fieldl:
    field { $$ = rp_list_new(@$); NOMEM($$); rp_list_append($$, $1); }
    | fieldl ',' field { $$ = rp_list_append($1, $3); $1 = NULL; }
    ;

/* `seeded NAME`: a field the value's generator regenerates (its `seeded GEN(SEED)`) */
field:
    IDENT { $$ = mkt(N_FIELD, @1, $1, NULL, NULL, NULL); NOMEM($$); }
    | IDENT '=' expr { $$ = mkt(N_FIELD, @1, $1, $3, NULL, NULL); NOMEM($$); }
    | SEEDED IDENT { $$ = mkt(N_FIELD, @2, $2, NULL, NULL, NULL); NOMEM($$); $$->op = 1; }
    | SEEDED IDENT '=' expr {
        $$ = mkt(N_FIELD, @2, $2, $4, NULL, NULL); NOMEM($$); $$->op = 1;
    }
    ;

data:
    SYNTH '(' expr ')' { $$ = mk(N_SYNTH, @$, $3, NULL, NULL); NOMEM($$); }
    | FILE '(' STRING ')' { $$ = mkt(N_FILE, @$, $3, NULL, NULL, NULL); NOMEM($$); }
    | ZERO { $$ = mk(N_NAME, @$, NULL, NULL, NULL); NOMEM($$); }
    | kname '(' expr ')' { $$ = mkt(N_ENGINE, @$, $1, $3, NULL, NULL); NOMEM($$); }
    ;

chains:
    chain { $$ = rp_list_new(@$); NOMEM($$); rp_list_append($$, $1); }
    | chains ',' chain { $$ = rp_list_append($1, $3); $1 = NULL; }
    ;

chain:
    locs { $$ = mk(N_CHAIN, @$, $1, NULL, NULL); NOMEM($$); }
    ;

locs:
    loc { $$ = rp_list_new(@$); NOMEM($$); rp_list_append($$, $1); }
    | locs ARROW loc { $$ = rp_list_append($1, $3); $1 = NULL; }
    ;

loc:
    HOST { $$ = mkop(N_LOC, @1, 0, NULL, NULL); NOMEM($$); }
    | PINNED { $$ = mkop(N_LOC, @1, 1, NULL, NULL); NOMEM($$); }
    | LOCLIT { $$ = mkt(N_LOC, @1, $1, NULL, NULL, NULL); NOMEM($$); if ($$) $$->op = 2; }
    | IDENT { $$ = mkt(N_LOC, @1, $1, NULL, NULL, NULL); NOMEM($$); if ($$) $$->op = 3; }
    ;

vref:
    IDENT { $$ = mkt(N_NAME, @1, $1, NULL, NULL, NULL); NOMEM($$); }
    | IDENT '[' expr ']' { $$ = mkt(N_INDEX, @$, $1, $3, NULL, NULL); NOMEM($$); }
    ;

str:
    STRING { $$ = mkt(N_STR, @1, $1, NULL, NULL, NULL); NOMEM($$); }
    ;

kname:
    IDENT { $$ = $1; }
    | kname '.' kword {
        size_t a = strlen($1), b = strlen($3);
        $$ = malloc(a + b + 2);
        if ($$) { memcpy($$, $1, a); $$[a] = '.'; memcpy($$ + a + 1, $3, b + 1); }
        free($1);
        NOMEM($$);
    }
    | kname '.' IDENT {
        size_t a = strlen($1), b = strlen($3);
        $$ = malloc(a + b + 2);
        if ($$) { memcpy($$, $1, a); $$[a] = '.'; memcpy($$ + a + 1, $3, b + 1); }
        free($1); free($3);
        NOMEM($$);
    }
    ;

/* the words after `kernel`, `fields`, `limbs` and `level` were identifiers before they
   were keywords: as parts of a dotted kernel name they still are */
kword:
    KERNEL { $$ = "kernel"; }
    | FIELDS { $$ = "fields"; }
    | LIMBS { $$ = "limbs"; }
    | LEVEL { $$ = "level"; }
    ;

args:
    %empty { $$ = rp_list_new(@$); NOMEM($$); }
    | argl { $$ = $1; }
    ;

argl:
    expr { $$ = rp_list_new(@$); NOMEM($$); rp_list_append($$, $1); }
    | argl ',' expr { $$ = rp_list_append($1, $3); $1 = NULL; }
    ;

expr:
    INT { $$ = mk(N_INT, @1, NULL, NULL, NULL); NOMEM($$); $$->num = $1; }
    | IDENT { $$ = mkt(N_NAME, @1, $1, NULL, NULL, NULL); NOMEM($$); }
    | IDENT '[' expr ']' { $$ = mkt(N_INDEX, @$, $1, $3, NULL, NULL); NOMEM($$); }
    | IDENT '(' args ')' { $$ = mkt(N_CALL, @$, $1, $3, NULL, NULL); NOMEM($$); }
    | '(' expr ')' { $$ = $2; }
    | expr '+' expr { $$ = mkop(N_BIN, @2, '+', $1, $3); NOMEM($$); }
    | expr '-' expr { $$ = mkop(N_BIN, @2, '-', $1, $3); NOMEM($$); }
    | expr '*' expr { $$ = mkop(N_BIN, @2, '*', $1, $3); NOMEM($$); }
    | expr '/' expr { $$ = mkop(N_BIN, @2, '/', $1, $3); NOMEM($$); }
    | expr '%' expr { $$ = mkop(N_BIN, @2, '%', $1, $3); NOMEM($$); }
    | expr SHL expr { $$ = mkop(N_BIN, @2, 'S', $1, $3); NOMEM($$); }
    | '-' expr %prec NEG { $$ = mk(N_NEG, @1, $2, NULL, NULL); NOMEM($$); }
    | expr IDENT {
        int u = rp_unit_find($2);
        if (u < 0) {
            const char *sug = rp_unit_suggest($2), *kw = rp_keyword_suggest($2);
            if (sug)
                rp_diag(ps->dc, RPLAN_ERROR, @2, "unknown unit '%s'; did you mean '%s'?", $2, sug);
            else if (kw)
                /* after a size, a misspelt attribute reads as a unit */
                rp_diag(ps->dc, RPLAN_ERROR, @2, "unknown unit '%s'; did you mean the keyword "
                        "'%s'?", $2, kw);
            else
                rp_diag(ps->dc, RPLAN_ERROR, @2,
                        "unknown unit '%s' (sizes: B, KiB, MiB, GiB, TiB; durations: ns, us, "
                        "ms, s)", $2);
        }
        free($2);
        $$ = mkop(N_UNIT, @2, u, $1, NULL); NOMEM($$);
    }
    ;

%%

/* Token names as diagnostics show them: keywords and punctuation quoted, classes bare. */
/* Token names as diagnostics show them: keywords and punctuation quoted, classes bare. */
static const char *tok_text(yysymbol_kind_t k, char *buf, size_t cap)
{
    const char *s = yysymbol_name(k);
    if (k == YYSYMBOL_YYEOF)
        return "end of file";
    if (k == YYSYMBOL_IDENT || k == YYSYMBOL_STRING || k == YYSYMBOL_LOCLIT ||
        k == YYSYMBOL_INT || k == YYSYMBOL_MODE || s[0] == '\'')
        return s;
    snprintf(buf, cap, "'%s'", s);
    return buf;
}

static int yyreport_syntax_error(const yypcontext_t *ctx, rp_lexer *lx, rp_parser *ps)
{
    enum { MAXEXP = 5 };
    yysymbol_kind_t exp[YYNTOKENS];
    int n = yypcontext_expected_tokens(ctx, exp, YYNTOKENS);
    int closes = 0;
    for (int i = 0; i < n; i++)
        closes |= strcmp(yysymbol_name(exp[i]), "'}'") == 0;
    yysymbol_kind_t got = yypcontext_token(ctx);
    const RP_LTYPE *loc = yypcontext_location(ctx);
    char msg[512];
    size_t len = 0;
    (void)lx;

    char tb[64];
    if (got == YYSYMBOL_IDENT || got == YYSYMBOL_STRING || got == YYSYMBOL_LOCLIT ||
        got == YYSYMBOL_INT || got == YYSYMBOL_MODE)
        len = (size_t)snprintf(msg, sizeof msg, "unexpected %s '%.*s'",
                               tok_text(got, tb, sizeof tb),
                               (int)(lx->cur - lx->tok > 40 ? 40 : lx->cur - lx->tok),
                               lx->tok);
    else
        len = (size_t)snprintf(msg, sizeof msg, "unexpected %s", tok_text(got, tb, sizeof tb));
    if (got == YYSYMBOL_YYEOF && closes) {
        len += (size_t)snprintf(msg + len, sizeof msg - len, ", expected '}'");
    } else if (n > 0 && n <= MAXEXP) {
        for (int i = 0; i < n && len < sizeof msg; i++)
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s",
                                    i == 0 ? ", expected " : i == n - 1 ? " or " : ", ",
                                    tok_text(exp[i], tb, sizeof tb));
    }
    if (got == YYSYMBOL_IDENT && len < sizeof msg) {
        char word[64];
        int wl = (int)(lx->cur - lx->tok);
        if (wl > 0 && wl < (int)sizeof word) {
            memcpy(word, lx->tok, (size_t)wl);
            word[wl] = '\0';
            const char *kw = rp_keyword_suggest(word);
            if (kw)
                snprintf(msg + len, sizeof msg - len, "; did you mean '%s'?", kw);
        }
    }
    rp_diag(ps->dc, RPLAN_ERROR, *loc, "%s", msg);
    if (got == YYSYMBOL_YYEOF && lx->nopen) {
        size_t k = lx->nopen - 1, cap = sizeof lx->open / sizeof lx->open[0];
        if (k < cap)
            rp_diag(ps->dc, RPLAN_NOTE, lx->open[k], "to match this '{'");
    }
    return 0;
}

void rp_parse_run(rp_parser *ps)
{
    size_t before = ps->dc->nerrors;
    ps->root = NULL;
    if (rp_parse(&ps->lx, ps) == 2 && ps->dc->nerrors == before)
        rp_diag(ps->dc, RPLAN_ERROR, (rp_loc){0, 0, 0, 0}, "out of memory while parsing");
}
