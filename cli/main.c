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

static int cli_main(int argc, char **argv, const fp_world *w)
{
    if (argc < 2)
        return usage(NULL, NULL);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        fputs(usage_text, stdout);
        return EX_OK;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("fheplan %s%s\n", fhr_version(), fp_world_have_mpi() ? " (MPI)" : "");
        return EX_OK;
    }
    int is_check = !strcmp(cmd, "check"), is_run = !strcmp(cmd, "run"),
        is_compile = !strcmp(cmd, "compile"), is_disasm = !strcmp(cmd, "disasm"),
        is_fmt = !strcmp(cmd, "fmt");
    if (!is_check && !is_run && !is_compile && !is_disasm && !is_fmt)
        return usage("unknown command '%s'", cmd);
    usage_cmd = cmd;
    cli c;
    memset(&c, 0, sizeof c);
    c.colour = want_colour();
    c.files = calloc((size_t)argc, sizeof *c.files);
    if (!c.files)
        return EX_SOFTWARE_;
    int rc = 0, dashdash = 0;
    for (int i = 2; i < argc && !rc; i++) {
        const char *a = argv[i];
#define NEED_ARG()                                                                           \
    do {                                                                                     \
        if (i + 1 >= argc) {                                                                 \
            rc = usage("option %s needs an argument", a);                                    \
            break;                                                                           \
        }                                                                                    \
    } while (0)
        if (dashdash || a[0] != '-' || !a[1]) {
            c.files[c.nfiles++] = a;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_of(cmd), stdout);
            free(c.files);
            return EX_OK;
        } else if (!strcmp(a, "--")) {
            dashdash = 1;
        } else if (!strcmp(a, "--json") && (is_check || is_run)) {
            c.json = 1;
        } else if (!strcmp(a, "--world-size") && is_check) {
            NEED_ARG();
            if (!rc)
                rc = parse_world_size(&c, argv[++i]);
        } else if (!strncmp(a, "--world-size=", 13) && is_check) {
            rc = parse_world_size(&c, a + 13);
        } else if (!strcmp(a, "--quiet") && (is_run || is_check)) {
            c.quiet = 1;
        } else if (!strcmp(a, "--no-source") && is_disasm) {
            c.no_source = 1;
        } else if (!strcmp(a, "--budget") && (is_check || is_run)) {
            NEED_ARG();
            if (!rc)
                rc = parse_budget(&c, argv[++i]);
        } else if (!strncmp(a, "--budget=", 9) && (is_check || is_run)) {
            rc = parse_budget(&c, a + 9);
        } else if (!strcmp(a, "--device") && is_run) {
            NEED_ARG();
            if (!rc)
                c.device = argv[++i];
        } else if (!strncmp(a, "--device=", 9) && is_run) {
            c.device = a + 9;
        } else if (!strcmp(a, "--scale") && is_run) {
            NEED_ARG();
            if (!rc)
                rc = parse_scale(&c, argv[++i]);
        } else if (!strncmp(a, "--scale=", 8) && is_run) {
            rc = parse_scale(&c, a + 8);
        } else if (!strcmp(a, "--trace") && is_run) {
            NEED_ARG();
            if (!rc)
                c.trace = argv[++i];
        } else if (!strncmp(a, "--trace=", 8) && is_run) {
            c.trace = a + 8;
        } else if (!strcmp(a, "--policy") && (is_check || is_run)) {
            NEED_ARG();
            if (!rc)
                rc = parse_policy(&c, argv[++i]);
        } else if (!strcmp(a, "--objective") && (is_check || is_run)) {
            NEED_ARG();
            if (!rc)
                rc = parse_objective(&c, argv[++i]);
        } else if (!strncmp(a, "--objective=", 12) && (is_check || is_run)) {
            rc = parse_objective(&c, a + 12);
        } else if (!strcmp(a, "--prefetch") && is_run) {
            NEED_ARG();
            if (!rc)
                rc = parse_uint(argv[++i], "--prefetch", &c.prefetch);
            c.prefetch_set = 1;
        } else if ((!strcmp(a, "--pinned-gbps") || !strcmp(a, "--device-gbps") ||
                    !strcmp(a, "--gen-gbps") || !strcmp(a, "--peer-gbps")) &&
                   (is_check || is_run)) {
            NEED_ARG();
            double v = 0;
            if (!rc)
                rc = parse_rate_option(a, argv[++i], &v);
            if (!rc) {
                if (!strcmp(a, "--pinned-gbps"))
                    c.pinned_gbps = v;
                else if (!strcmp(a, "--peer-gbps"))
                    c.peer_gbps = v;
                else if (a[2] == 'g')
                    c.gen_gbps = v;
                else
                    c.device_gbps = v;
            }
        } else if (!strcmp(a, "--min-budget") && is_check) {
            NEED_ARG();
            if (!rc && fhr_loc_parse(argv[++i], &c.min_budget) != FHR_OK)
                rc = usage("bad --min-budget '%s' (want a location: host, pinned, cuda:N)",
                           argv[i]);
            c.has_min_budget = 1;
        } else if (!strncmp(a, "-W", 2) && (is_check || is_run || is_compile)) {
            rc = parse_warning(&c, a);
        } else if (!strcmp(a, "--check") && is_fmt) {
            c.fmt_check = 1;
        } else if (!strcmp(a, "-w") && is_fmt) {
            c.fmt_write = 1;
        } else if (!strcmp(a, "--sarif") && is_check) {
            c.sarif = 1;
        } else if (!strcmp(a, "--timeline") && is_run) {
            NEED_ARG();
            if (!rc)
                c.timeline = argv[++i];
        } else if (!strncmp(a, "--timeline=", 11) && is_run) {
            c.timeline = a + 11;
        } else if (!strcmp(a, "--profile-out") && is_run) {
            NEED_ARG();
            if (!rc)
                c.profile_out = argv[++i];
        } else if (!strcmp(a, "--profile") && (is_check || is_run)) {
            NEED_ARG();
            if (!rc)
                rc = read_profile(&c, argv[++i]);
        } else if (!strcmp(a, "-o") && is_compile) {
            NEED_ARG();
            if (!rc)
                c.out = argv[++i];
        } else {
            rc = usage("unknown option '%s'", a);
        }
    }
    if (!rc) {
        if (c.nfiles == 0)
            rc = usage("%s needs a FILE", cmd);
        else if (!is_check && !is_fmt && c.nfiles > 1)
            rc = usage("%s takes one FILE", cmd);
        else if (c.sarif && (c.json || c.world_size > 1 || w->mpi))
            rc = usage("check --sarif takes neither --json nor --world-size%s", "");
        else if (is_check && c.quiet && (c.json || c.sarif))
            rc = usage("check --quiet takes neither --json nor --sarif%s", "");
        else if (is_compile && !c.out)
            rc = usage("%s needs -o OUT", cmd);
        else if (c.device && check_device(c.device) != 0)
            rc = usage("bad --device '%s' (want auto, cuda, emu or emu:N with N in 1..62)",
                       c.device);
        else if (is_compile)
            rc = check_output(&c, c.out, "-o");
        else if (is_run && c.trace)
            rc = check_output(&c, c.trace, "--trace");
        if (!rc && (is_check || is_run))
            rc = check_environment();
        if (!rc && is_run && c.timeline)
            rc = check_output(&c, c.timeline, "--timeline");
        if (!rc && is_run && c.profile_out)
            rc = check_output(&c, c.profile_out, "--profile-out");
        for (size_t k = 0, stdin_uses = 0; !rc && k < c.nfiles; k++)
            if (!strcmp(c.files[k], "-") && ++stdin_uses > 1)
                rc = usage("%s reads standard input ('-') only once", cmd);
    }
    /* check --quiet: the exit status only (usage errors above still say what is wrong) */
    if (!rc && is_check && c.quiet &&
        (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)))
        rc = EX_SOFTWARE_;
    if (!rc && w->mpi && is_run) {
        rc = world_run(&c, w);
    } else if (!rc && w->mpi && w->rank != 0) {
        /* check, compile, disasm: rank 0 does them (check for every rank) */
    } else if (!rc) {
        if (is_check && w->mpi && !c.world_size)
            c.world_size = (uint32_t)w->size;
        rc = is_check && c.world_size > 1 ? world_check(&c)
             : is_check                   ? cmd_check(&c)
             : is_run                     ? cmd_run(&c)
             : is_compile                 ? cmd_compile(&c)
             : is_fmt                     ? cmd_fmt(&c)
                                          : cmd_disasm(&c);
    }
    input_stdin_release();
    free(c.files);
    rplan_profile_free(c.profile, c.nprofile);
    return rc;
}
