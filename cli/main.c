/* cli/main.c — `fheplan`: main inside the MPI world, --help and --version, each
 * subcommand's options read into a cli and checked, and the dispatch to its file. */
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/world.h"
#include "fheplan/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int cli_main(int argc, char **argv, const fp_world *w);

/* --profile FILE: a kernel profile that run --profile-out wrote. 0, or EX_NOINPUT_ with
 * the reason. */
static int read_profile(cli *c, const char *path)
{
    char *txt = NULL;
    size_t len = 0;
    fhr_error e;
    fhr_error_init(&e);
    fhr_status st = fhr_read_file(path, &txt, &len, &e);
    if (st == FHR_OK) {
        rplan_profile_free(c->profile, c->nprofile);
        c->profile = NULL;
        c->nprofile = 0;
        st = rplan_profile_parse(txt, len, &c->profile, &c->nprofile, &e);
    }
    free(txt);
    if (st != FHR_OK)
        fprintf(stderr, "fheplan: --profile '%s': %s\n", path, e.message);
    fhr_error_clear(&e);
    return st == FHR_OK ? 0 : EX_NOINPUT_;
}

int main(int argc, char **argv)
{
    fp_world w;
    if (fp_world_init(&argc, &argv, &w) != 0)
        return EX_SOFTWARE_;
    int rc = cli_main(argc, argv, &w);
    /* Output is only done once it reached the file: a full disk or a closed pipe fails. */
    int e = fflush(stdout) == EOF ? errno : 0;
    if (e || ferror(stdout)) {
        fprintf(stderr, "fheplan: cannot write standard output: %s\n",
                e ? strerror(e) : "write error");
        if (rc == EX_OK)
            rc = EX_FAIL;
    }
    fp_world_finish(&w);
    return rc;
}

/* The subcommands, and which one a command line names. */
enum { CMD_CHECK, CMD_RUN, CMD_COMPILE, CMD_DISASM, CMD_FMT, NCMD };
static const char *const cmd_names[NCMD] = {"check", "run", "compile", "disasm", "fmt"};

/* Levenshtein distance of two short words (longer words: a large number). */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[32];
    if (la >= 32 || lb >= 32)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* "unknown command 'chek'", with "(did you mean 'check'?)" when one command (or help,
 * version) lies within two edits of it. */
static int unknown_command(const char *cmd)
{
    static const char *const all[] = {"check", "run", "compile", "disasm", "fmt", "help",
                                      "version"};
    const char *best = NULL;
    size_t bestd = 3;
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        size_t d = edit_distance(cmd, all[k]);
        if (d < bestd && d < strlen(all[k])) {
            bestd = d;
            best = all[k];
        }
    }
    if (!best)
        return usage("unknown command '%s'", cmd);
    fprintf(stderr, "fheplan: unknown command '%s' (did you mean '%s'?)\n", cmd, best);
    return usage(NULL, NULL);
}

static int command_of(const char *name)
{
    for (int k = 0; k < NCMD; k++)
        if (!strcmp(name, cmd_names[k]))
            return k;
    return -1;
}

/* `fheplan help [COMMAND]`: every command's usage, or COMMAND's alone. */
static int help(int argc, char **argv)
{
    if (argc < 3) {
        fputs(usage_text, stdout);
        return EX_OK;
    }
    if (argc > 3)
        return usage("help takes one COMMAND, not %s", "several");
    if (command_of(argv[2]) < 0)
        return unknown_command(argv[2]);
    fputs(usage_of(argv[2]), stdout);
    printf("See fheplan(1) for what each option does.\n");
    return EX_OK;
}

/* Whether option a (as "--name VALUE" or "--name=VALUE") is the one named; its value in
 * *val. Without a value: 1 with *rc set to usage()'s status. */
static int opt_value(const char *a, const char *name, int argc, char **argv, int *i,
                     const char **val, int *rc)
{
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n])
        return 0;
    if (*i + 1 >= argc) {
        *rc = usage("option %s needs an argument", a);
        *val = NULL;
        return 1;
    }
    *val = argv[++*i];
    return 1;
}

/* The options check and run share: 1 when a is one of them (*rc: its status). */
static int shared_option(cli *c, const char *a, int argc, char **argv, int *i, int *rc)
{
    const char *v = NULL;
    if (!strcmp(a, "--json")) {
        c->json = 1;
    } else if (!strcmp(a, "--quiet")) {
        c->quiet = 1;
    } else if (opt_value(a, "--budget", argc, argv, i, &v, rc)) {
        if (v)
            *rc = parse_budget(c, v);
    } else if (opt_value(a, "--policy", argc, argv, i, &v, rc)) {
        if (v)
            *rc = parse_policy(c, v);
    } else if (opt_value(a, "--objective", argc, argv, i, &v, rc)) {
        if (v)
            *rc = parse_objective(c, v);
    } else if (opt_value(a, "--profile", argc, argv, i, &v, rc)) {
        if (v)
            *rc = read_profile(c, v);
    } else if (!strncmp(a, "-W", 2)) {
        *rc = parse_warning(c, a);
    } else {
        static const char *const rates[] = {"--pinned-gbps", "--peer-gbps", "--gen-gbps",
                                            "--device-gbps"};
        double *dst[] = {&c->pinned_gbps, &c->peer_gbps, &c->gen_gbps, &c->device_gbps};
        for (int k = 0; k < 4; k++)
            if (opt_value(a, rates[k], argc, argv, i, &v, rc)) {
                if (v)
                    *rc = parse_rate_option(rates[k], v, dst[k]);
                return 1;
            }
        return 0;
    }
    return 1;
}

/* run's own options: 1 when a is one of them (*rc: its status). */
static int run_option(cli *c, const char *a, int argc, char **argv, int *i, int *rc)
{
    const char *v = NULL;
    if (opt_value(a, "--device", argc, argv, i, &v, rc)) {
        c->device = v;
    } else if (opt_value(a, "--scale", argc, argv, i, &v, rc)) {
        if (v)
            *rc = parse_scale(c, v);
    } else if (opt_value(a, "--trace", argc, argv, i, &v, rc)) {
        c->trace = v;
    } else if (opt_value(a, "--timeline", argc, argv, i, &v, rc)) {
        c->timeline = v;
    } else if (opt_value(a, "--profile-out", argc, argv, i, &v, rc)) {
        c->profile_out = v;
    } else if (opt_value(a, "--repeat", argc, argv, i, &v, rc)) {
        if (v && (*rc = parse_uint(v, "--repeat", &c->repeat)) == 0 && c->repeat == 0)
            *rc = usage("bad --repeat '%s' (want 1 or more runs)", v);
    } else if (opt_value(a, "--prefetch", argc, argv, i, &v, rc)) {
        if (v)
            *rc = parse_uint(v, "--prefetch", &c->prefetch);
        c->prefetch_set = 1;
    } else {
        return 0;
    }
    return 1;
}

/* The options of check, compile, disasm and fmt alone: 1 when a is one (*rc: status). */
static int other_option(cli *c, int cmd, const char *a, int argc, char **argv, int *i, int *rc)
{
    const char *v = NULL;
    if (cmd == CMD_CHECK && opt_value(a, "--world-size", argc, argv, i, &v, rc)) {
        if (v)
            *rc = parse_world_size(c, v);
    } else if (cmd == CMD_CHECK && opt_value(a, "--min-budget", argc, argv, i, &v, rc)) {
        if (v && fhr_loc_parse(v, &c->min_budget) != FHR_OK)
            *rc = usage("bad --min-budget '%s' (want a location: host, pinned, cuda:N)", v);
        c->has_min_budget = 1;
    } else if (cmd == CMD_CHECK && !strcmp(a, "--sarif")) {
        c->sarif = 1;
    } else if (cmd == CMD_COMPILE && !strncmp(a, "-W", 2)) {
        *rc = parse_warning(c, a);
    } else if (cmd == CMD_COMPILE && opt_value(a, "-o", argc, argv, i, &v, rc)) {
        c->out = v;
    } else if (cmd == CMD_DISASM && !strcmp(a, "--no-source")) {
        c->no_source = 1;
    } else if (cmd == CMD_FMT && !strcmp(a, "--check")) {
        c->fmt_check = 1;
    } else if (cmd == CMD_FMT && !strcmp(a, "-w")) {
        c->fmt_write = 1;
    } else {
        return 0;
    }
    return 1;
}

/* The words after the subcommand into *c: 0, EX_USAGE_ (said), or -1 after --help (the
 * command's usage printed). */
static int parse_args(cli *c, int cmd, int argc, char **argv)
{
    int rc = 0, dashdash = 0;
    for (int i = 2; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (dashdash || a[0] != '-' || !a[1]) {
            c->files[c->nfiles++] = a;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_of(cmd_names[cmd]), stdout);
            return -1;
        } else if (!strcmp(a, "--")) {
            dashdash = 1;
        } else if ((cmd == CMD_CHECK || cmd == CMD_RUN) &&
                   shared_option(c, a, argc, argv, &i, &rc)) {
            /* read */
        } else if (cmd == CMD_RUN && run_option(c, a, argc, argv, &i, &rc)) {
            /* read */
        } else if (!other_option(c, cmd, a, argc, argv, &i, &rc)) {
            rc = usage("unknown option '%s'", a);
        }
    }
    return rc;
}

/* --timeline writes an HTML page: a name ending in .svg would hold HTML under an image's
 * name, so it is refused. */
static int check_timeline_name(const char *path)
{
    size_t n = strlen(path);
    if (n >= 4 && !strcasecmp(path + n - 4, ".svg"))
        return usage("--timeline writes an HTML page, not an SVG image: '%s' "
                     "(name it FILE.html)", path);
    return 0;
}

/* The checks that span options: 0, or usage()'s status (said). */
static int check_args(cli *c, int cmd, const fp_world *w)
{
    const char *name = cmd_names[cmd];
    int is_check = cmd == CMD_CHECK, is_run = cmd == CMD_RUN;
    int rc = 0;
    if (c->nfiles == 0)
        rc = usage("%s needs a FILE", name);
    else if (!is_check && cmd != CMD_FMT && c->nfiles > 1)
        rc = usage("%s takes one FILE", name);
    else if (c->sarif && (c->json || c->world_size > 1 || w->mpi))
        rc = usage("check --sarif takes neither --json nor --world-size%s", "");
    else if (is_check && c->quiet && (c->json || c->sarif))
        rc = usage("check --quiet takes neither --json nor --sarif%s", "");
    else if (cmd == CMD_COMPILE && !c->out)
        rc = usage("%s needs -o OUT", name);
    else if (c->device && check_device(c->device) != 0)
        rc = usage("bad --device '%s' (want auto, cuda, emu or emu:N with N in 1..62)",
                   c->device);
    else if (cmd == CMD_COMPILE)
        rc = check_output(c, c->out, "-o");
    else if (is_run && c->trace)
        rc = check_output(c, c->trace, "--trace");
    if (!rc && (is_check || is_run))
        rc = check_environment();
    if (!rc && is_run && c->timeline)
        rc = check_timeline_name(c->timeline);
    if (!rc && is_run && c->timeline)
        rc = check_output(c, c->timeline, "--timeline");
    if (!rc && is_run && c->profile_out)
        rc = check_output(c, c->profile_out, "--profile-out");
    if (!rc && is_run && c->trace && c->timeline && same_output(c->trace, c->timeline))
        rc = usage("--trace and --timeline name the same file '%s'", c->trace);
    for (size_t k = 0, stdin_uses = 0; !rc && k < c->nfiles; k++)
        if (!strcmp(c->files[k], "-") && ++stdin_uses > 1)
            rc = usage("%s reads standard input ('-') only once", name);
    return rc;
}

/* The subcommand on a checked command line: in an MPI world, run on every rank and the
 * rest on rank 0 (check for every rank). */
static int dispatch(cli *c, int cmd, const fp_world *w)
{
    if (w->mpi && cmd == CMD_RUN)
        return world_run(c, w);
    if (w->mpi && w->rank != 0)
        return 0;
    if (cmd == CMD_CHECK && w->mpi && !c->world_size)
        c->world_size = (uint32_t)w->size;
    switch (cmd) {
    case CMD_CHECK:
        return c->world_size > 1 ? world_check(c) : cmd_check(c);
    case CMD_RUN:
        return cmd_run(c);
    case CMD_COMPILE:
        return cmd_compile(c);
    case CMD_FMT:
        return cmd_fmt(c);
    default:
        return cmd_disasm(c);
    }
}

static int cli_main(int argc, char **argv, const fp_world *w)
{
    if (argc < 2)
        return usage(NULL, NULL);
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h"))
        return help(argc, argv);
    if (!strcmp(name, "version") || !strcmp(name, "--version")) {
        printf("fheplan %s%s\n", fhr_version(), fp_world_have_mpi() ? " (MPI)" : "");
        return EX_OK;
    }
    int cmd = command_of(name);
    if (cmd < 0)
        return unknown_command(name);
    usage_cmd = name;
    cli c;
    memset(&c, 0, sizeof c);
    c.colour = want_colour();
    c.files = calloc((size_t)argc, sizeof *c.files);
    if (!c.files)
        return EX_SOFTWARE_;
    int rc = parse_args(&c, cmd, argc, argv);
    if (rc == -1) { /* --help */
        rc = EX_OK;
        goto out;
    }
    if (!rc)
        rc = check_args(&c, cmd, w);
    /* check --quiet: the exit status only (usage errors above still say what is wrong) */
    if (!rc && cmd == CMD_CHECK && c.quiet &&
        (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)))
        rc = EX_SOFTWARE_;
    if (!rc)
        rc = dispatch(&c, cmd, w);
out:
    input_stdin_release();
    free(c.files);
    rplan_profile_free(c.profile, c.nprofile);
    return rc;
}
