/* cli/options.c — the words of the fheplan command line: the usage text, colour on stderr,
 * sizes, and the values of --budget, --scale, --policy, --objective, --prefetch, --repeat
 * and --world-size. */
#include "cli/cli.h"
#include "base/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One block per subcommand; the full usage is all of them. */
static const char usage_check[] =
    "usage: fheplan check [--budget LOC=SIZE]... [--policy KIND] [--objective bytes|time|auto]\n"
    "                     [--min-budget LOC] [--pinned-gbps X] [--peer-gbps X] [--device-gbps X]\n"
    "                     [--gen-gbps X] [--world-size N] [--profile FILE]\n"
    "                     [--json | --sarif | --quiet] [-Werror] [-Wno-NAME] FILE...\n";
static const char usage_run[] =
    "usage: fheplan run [--device auto|cuda|emu|emu:N] [--scale N] [--budget LOC=SIZE]...\n"
    "                   [--policy KIND] [--objective bytes|time|auto] [--prefetch N]\n"
    "                   [--pinned-gbps X] [--peer-gbps X] [--device-gbps X] [--gen-gbps X]\n"
    "                   [--trace FILE] [--timeline FILE.html] [--profile FILE]\n"
    "                   [--profile-out FILE] [--repeat N] [--json] [--quiet] [-Werror]\n"
    "                   [-Wno-NAME] FILE\n";
static const char usage_compile[] = "usage: fheplan compile [-Werror] [-Wno-NAME] FILE -o OUT\n";
static const char usage_disasm[] = "usage: fheplan disasm [--no-source] FILE\n";
static const char usage_fmt[] = "usage: fheplan fmt [--check | -w] FILE...\n";

const char usage_text[] =
    "usage: fheplan check [--budget LOC=SIZE]... [--policy KIND] [--objective bytes|time|auto]\n"
    "                     [--min-budget LOC] [--pinned-gbps X] [--peer-gbps X] [--device-gbps X]\n"
    "                     [--gen-gbps X] [--world-size N] [--profile FILE]\n"
    "                     [--json | --sarif | --quiet] [-Werror] [-Wno-NAME] FILE...\n"
    "       fheplan run [--device auto|cuda|emu|emu:N] [--scale N] [--budget LOC=SIZE]...\n"
    "                   [--policy KIND] [--objective bytes|time|auto] [--prefetch N]\n"
    "                   [--pinned-gbps X] [--peer-gbps X] [--device-gbps X] [--gen-gbps X]\n"
    "                   [--trace FILE] [--timeline FILE.html] [--profile FILE]\n"
    "                   [--profile-out FILE] [--repeat N] [--json] [--quiet] [-Werror]\n"
    "                   [-Wno-NAME] FILE\n"
    "       fheplan compile [-Werror] [-Wno-NAME] FILE -o OUT\n"
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

int parse_count(const char *arg, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;
    const char *end;
    if (digits(arg, &v, &end) != 0 || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int parse_rate_option(const char *opt, const char *arg, double *out)
{
    char why[160];
    if (fhr_rate_parse(arg, out, why, sizeof why) == 0)
        return 0;
    fprintf(stderr, "fheplan: bad %s '%s': %s\n", opt, arg, why);
    return usage(NULL, NULL);
}

/* Every FHEPLAN_*_GBPS the library reads, with the option that overrides it. */
static const char *const rate_vars[] = {"FHEPLAN_PINNED_GBPS", "FHEPLAN_DEVICE_GBPS",
                                        "FHEPLAN_GEN_GBPS", "FHEPLAN_PEER_GBPS"};

int check_environment(void)
{
    char why[160];
    for (size_t i = 0; i < sizeof rate_vars / sizeof rate_vars[0]; i++) {
        const char *v = getenv(rate_vars[i]);
        double r;
        if (v && fhr_rate_parse(v, &r, why, sizeof why) != 0) {
            fprintf(stderr, "fheplan: bad %s '%s' in the environment: %s\n", rate_vars[i], v,
                    why);
            return EX_USAGE_;
        }
    }
    const char *m = getenv("FHEPLAN_EMU_MEMORY");
    uint64_t n = 0;
    if (m && fhr_size_parse(m, &n, why, sizeof why) == 0 && n == 0)
        snprintf(why, sizeof why, "want a SIZE above 0 B");
    if (m && n == 0) {
        fprintf(stderr, "fheplan: bad FHEPLAN_EMU_MEMORY '%s' in the environment: %s\n", m, why);
        return EX_USAGE_;
    }
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
    char why[160];
    if (fhr_size_parse(eq + 1, &b->nbytes, why, sizeof why) != 0) {
        fprintf(stderr, "fheplan: bad --budget '%s': %s\n", arg, why);
        return usage(NULL, NULL);
    }
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

int parse_warning(cli *c, const char *arg)
{
    static const char *const names[] = {"unused", "unused-constant", "unused-value",
                                        "unused-policy", "unused-budget"};
    const char *w = arg + 2;
    if (!strcmp(w, "error") || !strcmp(w, "no-error")) {
        c->warn_error = w[0] == 'e';
        return 0;
    }
    int off = !strncmp(w, "no-", 3);
    const char *name = off ? w + 3 : w;
    size_t i = 0;
    while (i < sizeof names / sizeof names[0] && strcmp(names[i], name))
        i++;
    if (i == sizeof names / sizeof names[0])
        return usage("unknown warning option '%s' (want -Werror, -Wno-error, -Wno-NAME or "
                     "-WNAME with NAME unused, unused-constant, unused-value, unused-policy or "
                     "unused-budget)", arg);
    /* the last option for a name wins: drop it, then add it back when it turns it off */
    size_t k = 0;
    for (size_t j = 0; j < c->nwarn_off; j++)
        if (strcmp(c->warn_off[j], names[i]))
            c->warn_off[k++] = c->warn_off[j];
    c->nwarn_off = k;
    if (off)
        c->warn_off[c->nwarn_off++] = names[i];
    return 0;
}
