/* cli/options.c — the words of the fheplan command line: the usage text, colour on stderr,
 * sizes, and the values of --budget, --scale, --policy, --objective, --prefetch and
 * --world-size. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One block per subcommand; the full usage is all of them. */
static const char usage_check[] =
    "usage: fheplan check [--budget LOC=SIZE]... [--policy KIND] [--objective bytes|time|auto]\n"
    "                     [--min-budget LOC] [--pinned-gbps X] [--peer-gbps X] [--device-gbps X]\n"
    "                     [--world-size N] [--profile FILE] [--json | --sarif] FILE...\n";
static const char usage_run[] =
    "usage: fheplan run [--device auto|cuda|emu|emu:N] [--scale N] [--budget LOC=SIZE]...\n"
    "                   [--policy KIND] [--objective bytes|time|auto] [--prefetch N]\n"
    "                   [--pinned-gbps X] [--peer-gbps X] [--device-gbps X]\n"
    "                   [--trace FILE] [--timeline FILE.html] [--profile FILE]\n"
    "                   [--profile-out FILE] [--json] [--quiet] FILE\n";
static const char usage_compile[] = "usage: fheplan compile FILE -o OUT\n";
static const char usage_disasm[] = "usage: fheplan disasm [--no-source] FILE\n";
static const char usage_fmt[] = "usage: fheplan fmt [--check | -w] FILE...\n";

const char usage_text[] =
    "usage: fheplan check [--budget LOC=SIZE]... [--policy KIND] [--objective bytes|time|auto]\n"
    "                     [--min-budget LOC] [--pinned-gbps X] [--peer-gbps X] [--device-gbps X]\n"
    "                     [--gen-gbps X] [--world-size N] [--profile FILE] [--json | --sarif]\n"
    "                     FILE...\n"
    "       fheplan run [--device auto|cuda|emu|emu:N] [--scale N] [--budget LOC=SIZE]...\n"
    "                   [--policy KIND] [--objective bytes|time|auto] [--prefetch N]\n"
    "                   [--pinned-gbps X] [--peer-gbps X] [--device-gbps X] [--gen-gbps X]\n"
    "                   [--trace FILE] [--timeline FILE.html] [--profile FILE]\n"
    "                   [--profile-out FILE] [--json] [--quiet] FILE\n"
    "       fheplan compile FILE -o OUT\n"
    "       fheplan disasm [--no-source] FILE\n"
    "       fheplan fmt [--check | -w] FILE...\n"
    "       fheplan --version | --help\n"
    "FILE may be - for standard input. See fheplan(1).\n";

const char *usage_of(const char *cmd)
{
    return !strcmp(cmd, "check")     ? usage_check
           : !strcmp(cmd, "run")     ? usage_run
           : !strcmp(cmd, "compile") ? usage_compile
           : !strcmp(cmd, "disasm")  ? usage_disasm
           : !strcmp(cmd, "fmt")     ? usage_fmt
                                     : usage_text;
}

const char *usage_cmd;

int usage(const char *fmt, const char *arg)
{
    if (fmt) {
        fputs("fheplan: ", stderr);
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
    }
    fputs(usage_cmd ? usage_of(usage_cmd) : usage_text, stderr);
    return EX_USAGE_;
}

int want_colour(void)
{
    const char *nc = getenv("NO_COLOR");
    if (nc && *nc)
        return 0;
    const char *t = getenv("TERM");
    if (t && strcmp(t, "dumb") == 0)
        return 0;
    return isatty(2);
}

/* ---- sizes -------------------------------------------------------------------------- */

/* Decimal digits into *out without overflow; the end of them in *end. 0, or -1. */
static int digits(const char *s, uint64_t *out, const char **end)
{
    uint64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++)
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
            return -1;
    if (p == s)
        return -1;
    *out = v;
    *end = p;
    return 0;
}

int parse_size(const char *s, uint64_t *out)
{
    uint64_t whole, frac = 0, scale10 = 1;
    const char *end;
    if (digits(s, &whole, &end) != 0)
        return -1;
    if (*end == '.') {
        const char *f = end + 1;
        for (end = f; *end >= '0' && *end <= '9'; end++)
            if (end - f < 18) {
                frac = frac * 10 + (uint64_t)(*end - '0');
                scale10 *= 10;
            }
        if (end == f)
            return -1;
    }
    while (*end == ' ')
        end++;
    unsigned shift;
    if (!*end || !strcmp(end, "B")) shift = 0;
    else if (!strcasecmp(end, "K") || !strcmp(end, "KiB") || !strcmp(end, "KB")) shift = 10;
    else if (!strcasecmp(end, "M") || !strcmp(end, "MiB") || !strcmp(end, "MB")) shift = 20;
    else if (!strcasecmp(end, "G") || !strcmp(end, "GiB") || !strcmp(end, "GB")) shift = 30;
    else if (!strcasecmp(end, "T") || !strcmp(end, "TiB") || !strcmp(end, "TB")) shift = 40;
    else
        return -1;
    /* whole << shift plus the fraction of one unit, rounded to the nearest byte */
    if (shift && whole > (UINT64_MAX >> shift))
        return -1;
    uint64_t v = whole << shift;
    if (frac) {
        unsigned __int128 part = ((unsigned __int128)frac << shift) + scale10 / 2;
        part /= scale10;
        if ((uint64_t)part > UINT64_MAX - v)
            return -1;
        v += (uint64_t)part;
    }
    *out = v;
    return 0;
}

int parse_count(const char *arg, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;
    const char *end;
    if (digits(arg, &v, &end) != 0 || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int parse_gbps(const char *arg, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end || errno || !(v > 0) || v > 1e9 || (arg[0] < '0' || arg[0] > '9'))
        return -1;
    *out = v;
    return 0;
}

int check_device(const char *spec)
{
    uint64_t n;
    if (!strcmp(spec, "auto") || !strcmp(spec, "cuda") || !strcmp(spec, "emu"))
        return 0;
    if (!strncmp(spec, "emu:", 4) && parse_count(spec + 4, 1, FHR_MAX_CUDA_DEVICES, &n) == 0)
        return 0;
    return -1;
}

/* ---- arguments ----------------------------------------------------------------------- */

int parse_world_size(cli *c, const char *arg)
{
    uint64_t v;
    if (parse_count(arg, 1, 65536, &v) != 0)
        return usage("bad --world-size '%s' (want an integer 1..65536)", arg);
    c->world_size = (uint32_t)v;
    return 0;
}

int parse_budget(cli *c, const char *arg)
{
    const char *eq = strchr(arg, '=');
    char loc[32];
    if (c->nbudgets == 16)
        return usage("too many --budget options at '%s' (at most 16)", arg);
    if (!eq || (size_t)(eq - arg) >= sizeof loc)
        return usage("bad --budget '%s' (want LOC=SIZE, e.g. cuda:0=2GiB)", arg);
    memcpy(loc, arg, (size_t)(eq - arg));
    loc[eq - arg] = 0;
    fhr_budget *b = &c->budgets[c->nbudgets];
    if (fhr_loc_parse(loc, &b->loc) != FHR_OK)
        return usage("bad --budget '%s' (want LOC=SIZE with LOC host, pinned or cuda:N)", arg);
    if (parse_size(eq + 1, &b->nbytes) != 0)
        return usage("bad --budget '%s' (want a SIZE below 16 EiB: digits, an optional "
                     "fraction and B, KiB, MiB, GiB or TiB)", arg);
    c->nbudgets++;
    return 0;
}

int parse_scale(cli *c, const char *arg)
{
    const char *s = strncmp(arg, "1/", 2) == 0 ? arg + 2 : arg;
    uint64_t v;
    if (parse_count(s, 1, UINT64_MAX, &v) != 0)
        return usage("bad --scale '%s' (want a positive integer N or 1/N below 2^64)", arg);
    c->scale = v;
    return 0;
}

int parse_policy(cli *c, const char *arg)
{
    if (!strcmp(arg, "tiered_lru") || !strcmp(arg, "lru"))
        c->policy = RPLAN_POLICY_TIERED_LRU;
    else if (!strcmp(arg, "lookahead"))
        c->policy = RPLAN_POLICY_LOOKAHEAD;
    else if (!strcmp(arg, "as-written"))
        c->policy = 0;
    else
        return usage("bad --policy '%s' (want tiered_lru, lookahead or as-written)", arg);
    return 0;
}

int parse_objective(cli *c, const char *arg)
{
    if (!strcmp(arg, "bytes"))
        c->objective = RPLAN_OBJECTIVE_BYTES;
    else if (!strcmp(arg, "time"))
        c->objective = RPLAN_OBJECTIVE_TIME;
    else if (!strcmp(arg, "auto"))
        c->objective = RPLAN_OBJECTIVE_AUTO;
    else
        return usage("bad --objective '%s' (want bytes, time or auto)", arg);
    c->objective_set = 1;
    return 0;
}

int parse_uint(const char *arg, const char *opt, unsigned *out)
{
    uint64_t v;
    if (parse_count(arg, 0, 1000000, &v) != 0) {
        fprintf(stderr, "fheplan: bad %s '%s' (want an integer 0..1000000)\n", opt, arg);
        return usage(NULL, NULL);
    }
    *out = (unsigned)v;
    return 0;
}
