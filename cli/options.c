/* cli/options.c — the words of the fheplan command line: the usage text, colour on stderr,
 * sizes, and the values of --budget, --scale, --policy, --prefetch and --world-size. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char usage_text[] =
    "usage: fheplan check [--budget LOC=SIZE]... [--policy KIND] [--min-budget LOC]\n"
    "                     [--pinned-gbps X] [--device-gbps X] [--gen-gbps X] [--world-size N]\n"
    "                     [--json | --sarif] FILE...\n"
    "       fheplan run [--device auto|cuda|emu|emu:N] [--scale N] [--budget LOC=SIZE]...\n"
    "                   [--policy KIND] [--prefetch N] [--pinned-gbps X] [--gen-gbps X]\n"
    "                   [--trace FILE] [--timeline FILE.html] [--json] [--quiet] FILE\n"
    "       fheplan compile FILE -o OUT\n"
    "       fheplan disasm [--no-source] FILE\n"
    "       fheplan fmt [--check | -w] FILE...\n"
    "       fheplan --version | --help\n";

int usage(const char *fmt, const char *arg)
{
    if (fmt) {
        fputs("fheplan: ", stderr);
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
    }
    fputs(usage_text, stderr);
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

int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    double mul = 1;
    if (!*end || !strcmp(end, "B")) mul = 1;
    else if (!strcasecmp(end, "K") || !strcmp(end, "KiB") || !strcmp(end, "KB")) mul = 1024.0;
    else if (!strcasecmp(end, "M") || !strcmp(end, "MiB") || !strcmp(end, "MB")) mul = 1048576.0;
    else if (!strcasecmp(end, "G") || !strcmp(end, "GiB") || !strcmp(end, "GB")) mul = 1073741824.0;
    else if (!strcasecmp(end, "T") || !strcmp(end, "TiB") || !strcmp(end, "TB")) mul = 1099511627776.0;
    else
        return -1;
    *out = (uint64_t)(v * mul + 0.5);
    return 0;
}

/* ---- arguments ----------------------------------------------------------------------- */

int parse_world_size(cli *c, const char *arg)
{
    char *end;
    unsigned long v = strtoul(arg, &end, 10);
    if (end == arg || *end || v == 0 || v > 65536)
        return usage("bad --world-size '%s' (want an integer 1..65536)", arg);
    c->world_size = (uint32_t)v;
    return 0;
}

int parse_budget(cli *c, const char *arg)
{
    const char *eq = strchr(arg, '=');
    char loc[32];
    if (!eq || (size_t)(eq - arg) >= sizeof loc || c->nbudgets == 16)
        return usage("bad --budget '%s' (want LOC=SIZE, e.g. cuda:0=2GiB)", arg);
    memcpy(loc, arg, (size_t)(eq - arg));
    loc[eq - arg] = 0;
    fhr_budget *b = &c->budgets[c->nbudgets];
    if (fhr_loc_parse(loc, &b->loc) != FHR_OK || parse_size(eq + 1, &b->nbytes) != 0)
        return usage("bad --budget '%s' (want LOC=SIZE, e.g. cuda:0=2GiB)", arg);
    c->nbudgets++;
    return 0;
}

int parse_scale(cli *c, const char *arg)
{
    const char *s = strncmp(arg, "1/", 2) == 0 ? arg + 2 : arg;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || v == 0)
        return usage("bad --scale '%s' (want a positive integer N or 1/N)", arg);
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

int parse_uint(const char *arg, const char *opt, unsigned *out)
{
    char *end;
    unsigned long v = strtoul(arg, &end, 10);
    if (end == arg || *end || v > 1000000)
        return usage("bad value for %s (want a count)", opt);
    (void)opt;
    *out = (unsigned)v;
    return 0;
}
