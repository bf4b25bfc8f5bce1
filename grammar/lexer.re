/* grammar/lexer.re — the .rplan lexer (re2c). One function, rp_lex(), scans the
 * NUL-terminated copy of the source held by rp_lexer; a catch-all rule reports stray bytes.
 * With keep_comments set it also returns comments (T_COMMENT), for the formatter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/units.h"
#include "compiler/lang.h"
#include "parser.h"
#include "runtime/program/program.h"

static const rp_unit units[] = {
    {"B", RP_UK_SIZE, 1ull},
    {"KiB", RP_UK_SIZE, 1ull << 10},
    {"MiB", RP_UK_SIZE, 1ull << 20},
    {"GiB", RP_UK_SIZE, 1ull << 30},
    {"TiB", RP_UK_SIZE, 1ull << 40},
    {"ns", RP_UK_DURATION, 1ull},
    {"us", RP_UK_DURATION, 1000ull},
    {"ms", RP_UK_DURATION, 1000000ull},
    {"s", RP_UK_DURATION, 1000000000ull},
};

int rp_unit_find(const char *name)
{
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(units[i].name, name) == 0)
            return (int)i;
    return -1;
}

const char *rp_unit_suggest(const char *name)
{
    /* what the user most likely meant (GB: GiB, msec: ms) before the nearest spelling */
    const char *g = fhr_unit_guess(name);
    if (g && rp_unit_find(g) >= 0)
        return g;
    const char *c[sizeof units / sizeof units[0]];
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        c[i] = units[i].name;
    return rp_suggest(name, c, sizeof units / sizeof units[0]);
}

const rp_unit *rp_unit_get(int code)
{
    if (code < 0 || (size_t)code >= sizeof units / sizeof units[0])
        return NULL;
    return &units[code];
}

static const char *const keywords[] = {
    "rplan", "budget", "const", "value", "policy", "stage", "plan", "request", "using",
    "reclaim", "reserve", "enter", "body", "exit", "require", "ensure", "move", "drop",
    "discard", "hold", "release", "run", "for", "in", "from", "at", "init", "source",
    "priority", "exclusive", "replicable", "host", "pinned", "synth", "file", "zero",
    "seeded", "keep", "fields", "kernel", "limbs", "level",
};

const char *rp_keyword_suggest(const char *word)
{
    return rp_suggest(word, keywords, sizeof keywords / sizeof keywords[0]);
}

static rp_loc tok_loc(const rp_lexer *lx)
{
    rp_loc l;
    l.first_line = l.last_line = lx->line;
    l.first_column = (uint32_t)(lx->tok - lx->line_start) + 1;
    l.last_column = (uint32_t)(lx->cur - lx->line_start);
    if (l.last_column < l.first_column)
        l.last_column = l.first_column;
    return l;
}

static char *dup_range(const char *a, const char *b)
{
    size_t n = (size_t)(b - a);
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, a, n);
        s[n] = '\0';
    }
    return s;
}

static int lex_int(rp_lexer *lx, RP_STYPE *lval, int base)
{
    uint64_t v = 0;
    const char *p = lx->tok + (base == 16 ? 2 : 0);
    for (; p < lx->cur; p++) {
        unsigned d;
        if (*p == '_')
            continue;
        if (*p >= '0' && *p <= '9')
            d = (unsigned)(*p - '0');
        else if (*p >= 'a' && *p <= 'f')
            d = (unsigned)(*p - 'a' + 10);
        else
            d = (unsigned)(*p - 'A' + 10);
        if (v > (UINT64_MAX - d) / (uint64_t)base) {
            rp_diag(lx->dc, RPLAN_ERROR, tok_loc(lx), "integer literal is too large");
            return T_RP_error;
        }
        v = v * (uint64_t)base + d;
    }
    lval->u = v;
    return T_INT;
}

/*!re2c
    re2c:api:style = free-form;
    re2c:define:YYCTYPE = "unsigned char";
    re2c:define:YYCURSOR = "lx->cur";
    re2c:define:YYMARKER = "lx->mar";
    re2c:yyfill:enable = 0;
    re2c:flags:input = custom;
    re2c:define:YYPEEK = "(unsigned char)*lx->cur";
    re2c:define:YYSKIP = "++lx->cur;";
    re2c:define:YYBACKUP = "lx->mar = lx->cur;";
    re2c:define:YYRESTORE = "lx->cur = lx->mar;";

    ident = [a-zA-Z_][a-zA-Z0-9_]*;
    dec   = [0-9][0-9_]*;
    hex   = "0" [xX] [0-9a-fA-F][0-9a-fA-F_]*;
*/

int rp_lex(RP_STYPE *lval, RP_LTYPE *lloc, rp_lexer *lx)
{
    for (;;) {
        lx->tok = lx->cur;
        int tk = -1;
        /*!re2c
            "\x00" {
                if (lx->cur - 1 < lx->lim) {
                    *lloc = tok_loc(lx);
                    rp_diag(lx->dc, RPLAN_ERROR, *lloc, "invalid byte 0x00 in source");
                    continue;
                }
                lx->cur--;
                tk = T_YYEOF;
                goto done;
            }
            "\n" | "\r\n" | "\r" { lx->line++; lx->line_start = lx->cur; continue; }
            [ \t]+ { continue; }
            "#" [^\n\r\x00]* {
                if (lx->keep_comments) {
                    tk = T_COMMENT;
                    goto done;
                }
                continue;
            }

            "rplan"      { tk = T_RPLAN; goto done; }
            "budget"     { tk = T_BUDGET; goto done; }
            "const"      { tk = T_CONST; goto done; }
            "value"      { tk = T_VALUE; goto done; }
            "policy"     { tk = T_POLICY; goto done; }
            "stage"      { tk = T_STAGE; goto done; }
            "plan"       { tk = T_PLAN; goto done; }
            "request"    { tk = T_REQUEST; goto done; }
            "using"      { tk = T_USING; goto done; }
            "reclaim"    { tk = T_RECLAIM; goto done; }
            "reserve"    { tk = T_RESERVE; goto done; }
            "enter"      { tk = T_ENTER; goto done; }
            "body"       { tk = T_BODY; goto done; }
            "exit"       { tk = T_EXIT; goto done; }
            "require"    { tk = T_REQUIRE; goto done; }
            "ensure"     { tk = T_ENSURE; goto done; }
            "move"       { tk = T_MOVE; goto done; }
            "drop"       { tk = T_DROP; goto done; }
            "discard"    { tk = T_DISCARD; goto done; }
            "hold"       { tk = T_HOLD; goto done; }
            "release"    { tk = T_RELEASE; goto done; }
            "run"        { tk = T_RUN; goto done; }
            "for"        { tk = T_FOR; goto done; }
            "in"         { tk = T_IN; goto done; }
            "from"       { tk = T_FROM; goto done; }
            "at"         { tk = T_AT; goto done; }
            "init"       { tk = T_INIT; goto done; }
            "source"     { tk = T_SOURCE; goto done; }
            "priority"   { tk = T_PRIORITY; goto done; }
            "seeded"     { tk = T_SEEDED; goto done; }
            "keep"       { tk = T_KEEP; goto done; }
            "fields"     { tk = T_FIELDS; goto done; }
            "kernel"     { tk = T_KERNEL; goto done; }
            "limbs"      { tk = T_LIMBS; goto done; }
            "level"      { tk = T_LEVEL; goto done; }
            "exclusive"  { lval->u = FHR_EXCLUSIVE; tk = T_MODE; goto done; }
            "replicable" { lval->u = FHR_REPLICABLE; tk = T_MODE; goto done; }
            "host"       { tk = T_HOST; goto done; }
            "pinned"     { tk = T_PINNED; goto done; }
            "synth"      { tk = T_SYNTH; goto done; }
            "file"       { tk = T_FILE; goto done; }
            "zero"       { tk = T_ZERO; goto done; }


            [a-z]+ ":" [0-9]+ {
                lval->s = dup_range(lx->tok, lx->cur);
                tk = lval->s ? T_LOCLIT : T_RP_error;
                goto done;
            }
            ident {
                lval->s = dup_range(lx->tok, lx->cur);
                tk = lval->s ? T_IDENT : T_RP_error;
                goto done;
            }
            hex { *lloc = tok_loc(lx); return lex_int(lx, lval, 16); }
            dec { *lloc = tok_loc(lx); return lex_int(lx, lval, 10); }

            ["] [^"\n\r\x00]* ["] {
                size_t n = (size_t)(lx->cur - lx->tok) - 2, bad = rp_text_bad(lx->tok + 1, n);
                if (bad < n) {
                    /* reported, and the string still parses: one error, no cascade */
                    RP_LTYPE at = tok_loc(lx);
                    at.first_column += (uint32_t)bad + 1;
                    at.last_column = at.first_column;
                    const unsigned char *b = (const unsigned char *)lx->tok + 1 + bad;
                    size_t k = rp_utf8_seq((const char *)b, n - bad);
                    if (k == 2 || k == 3) /* well-formed, but C1 or a bidirectional override */
                        rp_diag(lx->dc, RPLAN_ERROR, at, "character U+%04X in a string is a "
                                "control or bidirectional formatting character (refused: it "
                                "changes what a reader sees)",
                                k == 2 ? (unsigned)(b[0] & 0x1f) << 6 | (b[1] & 0x3f)
                                       : (unsigned)(b[0] & 0x0f) << 12 | (unsigned)(b[1] & 0x3f) << 6 |
                                             (b[2] & 0x3f));
                    else
                        rp_diag(lx->dc, RPLAN_ERROR, at, "byte 0x%02x in a string is not UTF-8 "
                                "text (control bytes and ill-formed sequences are refused)", b[0]);
                }
                lval->s = dup_range(lx->tok + 1, lx->cur - 1);
                tk = lval->s ? T_STRING : T_RP_error;
                goto done;
            }
            ["] [^"\n\r\x00]* {
                *lloc = tok_loc(lx);
                rp_diag(lx->dc, RPLAN_ERROR, *lloc, "unterminated string");
                return T_RP_error;
            }

            "->" { tk = T_ARROW; goto done; }
            "..<" { tk = T_DOTDOTLT; goto done; }
            ".." { tk = T_DOTDOT; goto done; }
            "<<" { tk = T_SHL; goto done; }
            "{" {
                if (lx->nopen < sizeof lx->open / sizeof lx->open[0])
                    lx->open[lx->nopen] = tok_loc(lx);
                lx->nopen++;
                tk = '{';
                goto done;
            }
            "}" {
                if (lx->nopen)
                    lx->nopen--;
                tk = '}';
                goto done;
            }
            "(" { tk = '('; goto done; }
            ")" { tk = ')'; goto done; }
            "[" { tk = '['; goto done; }
            "]" { tk = ']'; goto done; }
            "," { tk = ','; goto done; }
            ";" { tk = ';'; goto done; }
            "=" { tk = '='; goto done; }
            "@" { tk = '@'; goto done; }
            "." { tk = '.'; goto done; }
            "+" { tk = '+'; goto done; }
            "-" { tk = '-'; goto done; }
            "*" { tk = '*'; goto done; }
            "/" { tk = '/'; goto done; }
            "%" { tk = '%'; goto done; }

            [\xc2-\xf4] {
                /* a whole UTF-8 character outside a string: one error for all its bytes */
                size_t k = rp_utf8_seq(lx->tok, (size_t)(lx->lim - lx->tok));
                if (k > 1) {
                    lx->cur = lx->tok + k;
                    *lloc = tok_loc(lx);
                    rp_diag(lx->dc, RPLAN_ERROR, *lloc, "invalid character '%.*s' (names and "
                            "keywords are ASCII; other text goes in a string)", (int)k, lx->tok);
                    return T_RP_error;
                }
                *lloc = tok_loc(lx);
                rp_diag(lx->dc, RPLAN_ERROR, *lloc, "invalid byte 0x%02x in source",
                        (unsigned char)lx->tok[0]);
                return T_RP_error;
            }
            * {
                unsigned char c = (unsigned char)lx->tok[0];
                *lloc = tok_loc(lx);
                if (c >= 0x20 && c < 0x7f)
                    rp_diag(lx->dc, RPLAN_ERROR, *lloc, "invalid character '%c'", c);
                else
                    rp_diag(lx->dc, RPLAN_ERROR, *lloc, "invalid byte 0x%02x in source", c);
                return T_RP_error;
            }
        */
    done:
        *lloc = tok_loc(lx);
        return tk;
    }
}
