/* compiler/rules.c — the stable rule id of each kind of diagnostic (RP101 ...), found from
 * the message by patterns, for SARIF and --json; the list is fheplan-diagnose(7)'s. */
#include <string.h>

#include "compiler/lang.h"

typedef struct rule_pat {
    int rule;            /* index into rules[] */
    const char *pattern; /* '*' matches any run of characters */
} rule_pat;

static const rplan_rule rules[] = {
    {"RP000", "other", "a diagnostic of no other kind (internal errors, out of memory)"},
    {"RP101", "invalid-character", "a byte the language has no use for"},
    {"RP102", "unterminated-string", "a string without its closing quote on its line"},
    {"RP103", "integer-too-large", "an integer literal above 2^64 - 1"},
    {"RP201", "syntax", "a token the grammar does not allow here"},
    {"RP202", "format-version", "a missing or unsupported 'rplan N' line"},
    {"RP203", "nesting", "statements, loops, blocks or expressions nested too deeply"},
    {"RP301", "unknown-name", "a name, value, policy or function that is not declared"},
    {"RP302", "unknown-unit", "a unit other than B, KiB, MiB, GiB, TiB, ns, us, ms, s"},
    {"RP303", "unknown-location", "a location other than host, pinned and cuda:N"},
    {"RP304", "unknown-policy-kind", "a policy kind other than tiered_lru and lookahead"},
    {"RP305", "duplicate-declaration", "a name or budget declared twice, or predefined"},
    {"RP306", "wrong-kind", "a name used as what it is not (a constant as a value, ...)"},
    {"RP401", "misplaced-statement", "a statement or block where it is not allowed"},
    {"RP402", "phase-order", "phases, requirements or reservations out of order"},
    {"RP403", "duplicate", "a block or value attribute given twice"},
    {"RP404", "value-declaration", "a value without a placement, with conflicting ones, or a misplaced keep"},
    {"RP405", "fallback-chain", "a policy's fallback chains malformed"},
    {"RP406", "arguments", "a call with the wrong number or kind of arguments"},
    {"RP407", "loop-too-long", "loops that unroll to more than 1000000 iterations or instructions"},
    {"RP408", "name-template", "a malformed {NAME} template in a stage, plan or request name"},
    {"RP409", "limb-cut", "a limbs(...) cut that does not fit its value, or a level it does not allow"},
    {"RP501", "overflow", "a size or expression that does not fit in 64 bits"},
    {"RP502", "negative", "a subtraction or negation below zero"},
    {"RP503", "division-by-zero", "a division or remainder by zero"},
    {"RP504", "units", "a size where a duration is wanted, a missing unit, mixed kinds"},
    {"RP505", "ckks-parameters", "N, level or dnum outside what the cost model covers"},
    {"RP506", "range", "a priority, array size, value size or rank out of range"},
    {"RP601", "over-budget", "a placement, move, reservation or request over a budget"},
    {"RP602", "use-after-discard", "a value used after its discard"},
    {"RP603", "no-copy", "an action on a copy that is not (or already) there"},
    {"RP604", "last-copy", "a drop of the last copy of a value that must be preserved"},
    {"RP605", "held-copy", "a held copy moved or dropped, a hold never released or unmatched"},
    {"RP606", "exclusive", "an EXCLUSIVE value ensured, or required at two locations"},
    {"RP607", "same-location", "a move from and to one location"},
    {"RP608", "dry-run", "a failure of the dry run that no other rule names"},
    {"RP701", "unreadable", "a file that cannot be opened or read"},
    {"RP702", "malformed-bytecode", "a bytecode file that is damaged or inconsistent"},
    {"RP307", "constant-order", "a constant used before its declaration, or constants in a cycle"},
    {"RP801", "unused-constant", "warning: a constant that nothing uses"},
    {"RP802", "unused-value", "warning: a value (or array) that no statement names"},
    {"RP803", "unused-policy", "warning: a policy that no request uses"},
    {"RP804", "unused-budget", "warning: a budget at a location where nothing is placed"},
};

enum { R_OTHER, R_INVCHAR, R_UNTERM, R_INTBIG, R_SYNTAX, R_VERSION, R_NESTING, R_UNKNOWN,
       R_UNIT, R_LOCATION, R_POLKIND, R_DUPDECL, R_KIND, R_MISPLACED, R_ORDER, R_DUP,
       R_VALUE, R_CHAIN, R_ARGS, R_LOOP, R_TEMPLATE, R_LIMBS, R_OVERFLOW, R_NEGATIVE, R_DIVZERO,
       R_UNITS, R_CKKS, R_RANGE, R_BUDGET, R_DISCARDED, R_NOCOPY, R_LASTCOPY, R_HELD,
       R_EXCLUSIVE, R_SAME, R_DRYRUN, R_UNREADABLE, R_BYTECODE, R_CONSTORDER, R_UNUSED_CONST,
       R_UNUSED_VALUE, R_UNUSED_POLICY, R_UNUSED_BUDGET };

/* First match wins: the specific patterns come before the general ones. */
static const rule_pat pats[] = {
    {R_UNUSED_CONST, "constant * is never used*"},
    {R_UNUSED_VALUE, "value * is never used*"},
    {R_UNUSED_POLICY, "policy * is never used*"},
    {R_UNUSED_BUDGET, "budget for * is never used*"},
    {R_LIMBS, "limbs of *: *"},
    {R_LIMBS, "a level needs a limb-cut value*"},
    {R_LIMBS, "a level names a partial device copy*"},
    {R_LIMBS, "level * of * is out of range*"},
    {R_INVCHAR, "invalid character *"},
    {R_INVCHAR, "invalid byte *"},
    {R_INVCHAR, "byte * in a string is not UTF-8 text*"},
    {R_INVCHAR, "character U+* in a string is a control or bidirectional*"},
    {R_UNTERM, "unterminated string"},
    {R_INTBIG, "integer literal is too large"},
    {R_VERSION, "unsupported format version *"},
    {R_VERSION, "a plan file starts with *"},
    {R_SYNTAX, "unexpected *"},
    {R_NESTING, "* nested too deeply*"},
    {R_UNIT, "unknown unit *"},
    {R_LOCATION, "unknown location *"},
    {R_LOCATION, "CUDA device index in * is out of range*"},
    {R_POLKIND, "unknown policy kind *"},
    {R_TEMPLATE, "unknown name * in \"*"},
    {R_UNKNOWN, "unknown *"},
    {R_CONSTORDER, "constants * and * are defined in terms of each other*"},
    {R_CONSTORDER, "* is used before its declaration (constants *"},
    {R_DUPDECL, "* is already declared"},
    {R_DUPDECL, "* is predefined (the constants *"},
    {R_DUPDECL, "budget for * is declared twice"},
    {R_DUPDECL, "budget override * has an invalid location"},
    {R_KIND, "* is a *, not a *"},
    {R_KIND, "* is a loop variable, not a value"},
    {R_KIND, "* is not an array"},
    {R_KIND, "* is an array of * values; name one as *"},
    {R_KIND, "* cannot be indexed in an expression"},
    {R_KIND, "index * is out of range for *"},
    {R_KIND, "expected an expression"},
    {R_DUP, "duplicate *"},
    {R_VALUE, "value * has both 'at' and 'source'*"},
    {R_VALUE, "value * needs an initial location*"},
    {R_VALUE, "'init' gives the data of an adopted value*"},
    {R_VALUE, "'zero' cannot reconstruct a value*"},
    {R_VALUE, "file() needs a path"},
    {R_VALUE, "'keep' says where host copies hold the regenerated half*"},
    {R_VALUE, "'keep' takes host or pinned*"},
    {R_VALUE, "field * is seeded, but value * names no generator*"},
    {R_VALUE, "the fields of * hold *"},
    {R_VALUE, "* fields cannot share the * bytes of *"},
    {R_VALUE, "give every field a size*"},
    {R_VALUE, "field * has no bytes"},
    {R_VALUE, "a value has at most * fields*"},
    {R_VALUE, "the fields of seeded value * mark none 'seeded'*"},
    {R_VALUE, "every field of seeded value * is seeded*"},
    {R_VALUE, "verify of *: its content comes from *"},
    {R_VALUE, "verify of *: it has seeded fields*"},
    {R_CHAIN, "a fallback chain *"},
    {R_CHAIN, "location * appears twice in one fallback chain"},
    {R_CHAIN, "a policy has at most *"},
    {R_CHAIN, "two fallback chains start at *"},
    {R_ARGS, "a kernel call takes at most *"},
    {R_ARGS, "bad arguments to the built-in kernel *: it takes *"},
    {R_ARGS, "* takes * arguments, not *"},
    {R_ARGS, "*(): argument * must be an integer*"},
    {R_ARGS, "*(): arguments must have the same kind*"},
    {R_LOOP, "loop of * iterations is too long*"},
    {R_LOOP, "the loops here unroll to more than *"},
    {R_TEMPLATE, "unterminated '{' in *"},
    {R_TEMPLATE, "expected a name inside '{}' in *"},
    {R_TEMPLATE, "unmatched '}' in *"},
    {R_TEMPLATE, "name is longer than *"},
    {R_OVERFLOW, "size overflow*"},
    {R_OVERFLOW, "request size overflows"},
    {R_OVERFLOW, "reservations*overflow"},
    {R_NEGATIVE, "negative result*"},
    {R_DIVZERO, "division by zero"},
    {R_UNITS, "* needs a unit (*"},
    {R_UNITS, "cannot apply * to *"},
    {R_UNITS, "unit * applied to *"},
    {R_UNITS, "* must be a *, not a *"},
    {R_UNITS, "* must be an *, not a *"},
    {R_CKKS, "*(): N must be *"},
    {R_CKKS, "*(): level must be *"},
    {R_CKKS, "*(): dnum must be *"},
    {R_RANGE, "priority must be *"},
    {R_RANGE, "array size must be *"},
    {R_RANGE, "a value size must not be zero"},
    {R_RANGE, "a seeded value regenerates its second half and needs at least *"},
    {R_RANGE, "too many values*"},
    {R_RANGE, "rank * is out of range for world size *"},
    {R_RANGE, "reservation of zero bytes"},
    {R_BUDGET, "* exceeds the budget of *"},
    {R_BUDGET, "request * cannot fit *"},
    {R_BUDGET, "budget: *"},
    {R_BUDGET, "* is short by * after every legal eviction*"},
    {R_DISCARDED, "* after it was discarded*"},
    {R_LASTCOPY, "drop of the last copy of *"},
    {R_LASTCOPY, "drop of the last whole copy of *"},
    {R_NOCOPY, "run *: argument * is not required at *, where the body runs"},
    {R_NOCOPY, "* no copy at *"},
    {R_NOCOPY, "* has no copy to *"},
    {R_NOCOPY, "move of *: its copy at * holds only a level's limbs*"},
    {R_NOCOPY, "* it already has a copy at *"},
    {R_HELD, "cannot * at *: the copy is held"},
    {R_HELD, "hold of * is never released*"},
    {R_HELD, "release of * without a matching hold*"},
    {R_EXCLUSIVE, "ensure of EXCLUSIVE value *"},
    {R_EXCLUSIVE, "EXCLUSIVE value * is required at two locations*"},
    {R_SAME, "move from and to the same location"},
    {R_UNREADABLE, "cannot open *"},
    {R_UNREADABLE, "cannot read *"},
    {R_UNREADABLE, "out of memory reading *"},
    {R_MISPLACED, "* is only allowed *"},
    {R_MISPLACED, "* is not allowed here*"},
    {R_MISPLACED, "* declarations are only allowed at the top level"},
    {R_MISPLACED, "* block is not allowed in a request*"},
    {R_ORDER, "* block after *; a * runs *"},
    {R_ORDER, "'reserve' after the * block*"},
    {R_ORDER, "'require' after *"},
    /* what only a damaged or hand-made bytecode file can say (the verifier's checks) */
    {R_BYTECODE, "instruction *"},
    {R_BYTECODE, "value *: source position * is outside the embedded source*"},
    {R_BYTECODE, "string at offset *"},
    {R_BYTECODE, "program of * instructions is too long*"},
    {R_BYTECODE, "policy *: *"},
    {R_BYTECODE, "budget *: bad or repeated location"},
    {R_BYTECODE, "* is never closed"},
    {R_BYTECODE, "'*' outside *"},
    {R_BYTECODE, "'*' inside *"},
    {R_BYTECODE, "'*' without *"},
    {R_BYTECODE, "phase * after phase *"},
    {R_BYTECODE, "phase * inside a request"},
    {R_BYTECODE, "requirement after phase *"},
    {R_BYTECODE, "reservation after phase *"},
    {R_BYTECODE, "'run' expects *"},
    {R_BYTECODE, "fallback chains not owned by any policy"},
    {R_BYTECODE, "source name is not a valid string"},
    {R_BYTECODE, "string table *"},
    {R_BYTECODE, "not an rplan bytecode file*"},
    {R_BYTECODE, "bytecode *"},
    {R_BYTECODE, "not a bytecode file*"},
    {R_BYTECODE, "unsupported bytecode version *"},
    {R_BYTECODE, "truncated or padded: *"},
    {R_BYTECODE, "bad header: *"},
    {R_BYTECODE, "checksum mismatch *"},
    {R_BYTECODE, "truncated section directory"},
    {R_BYTECODE, "bad section directory entry *"},
    {R_BYTECODE, "line table has * entries for * instructions"},
    {R_BYTECODE, "* stray bytes after the last section"},
    {R_BYTECODE, "value *: *"},
    {R_BYTECODE, "budget *: reserved byte is not zero"},
    {R_BYTECODE, "seeded value record *"},
    {R_BYTECODE, "seeded field record *"},
    {R_BYTECODE, "limb record *"},
};

/* Glob match with '*' only; iterative, backtracking to the last star. */
static int glob(const char *p, const char *s)
{
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') {
            star = p++;
            resume = s;
        } else if (*p == *s) {
            p++;
            s++;
        } else if (star) {
            p = star + 1;
            s = ++resume;
        } else {
            return 0;
        }
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

const rplan_rule *rplan_rule_of(const char *message)
{
    if (message)
        for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++)
            if (glob(pats[i].pattern, message))
                return &rules[pats[i].rule];
    return &rules[R_OTHER];
}

const rplan_rule *rplan_rule_of_dry_run(const char *message)
{
    const rplan_rule *r = rplan_rule_of(message);
    return r == &rules[R_OTHER] ? &rules[R_DRYRUN] : r;
}

size_t rplan_nrules(void) { return sizeof rules / sizeof rules[0]; }

const rplan_rule *rplan_rule_get(size_t i)
{
    return i < sizeof rules / sizeof rules[0] ? &rules[i] : NULL;
}
