/* tests/unit/test_cli_output.c — the fheplan command's output reaching its file: a
 * standard output that cannot be written (a full disk, /dev/full) fails with exit 1 and
 * a message on standard error, whatever the command and however much it wrote. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FHEPLAN_CLI /* the CLI of the build this test belongs to (the Makefile) */
#error "FHEPLAN_CLI is not defined: build the tests with make"
#endif

/* Runs `fheplan args >/dev/full`; returns the exit status, stderr in err (malloc'd). */
static int run_to_full(const char *args, char **err)
{
    char e[] = "/tmp/fheplan-full-XXXXXX";
    int fe = mkstemp(e);
    cr_assert(fe >= 0);
    close(fe);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s >/dev/full 2>%s </dev/null", FHEPLAN_CLI, args, e);
    int st = system(cmd);
    FILE *f = fopen(e, "rb");
    cr_assert_not_null(f);
    *err = calloc(1, 4096);
    cr_assert_not_null(*err);
    size_t got = fread(*err, 1, 4095, f);
    (*err)[got] = 0;
    fclose(f);
    unlink(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_write_failure(const char *args)
{
    char *err;
    int rc = run_to_full(args, &err);
    cr_expect_eq(rc, 1, "fheplan %s >/dev/full: exit %d, stderr: %s", args, rc, err);
    cr_expect(strstr(err, "cannot write standard output"), "fheplan %s: stderr: %s", args, err);
    free(err);
}

/* The disassembly is larger than stdio's buffer: the failure shows while writing. */
Test(cli_output, disasm_to_a_full_disk_exits_1)
{
    expect_write_failure("disasm plans/ckks-bootstrap.rplan");
}

/* One small JSON document: the failure shows only at the final flush. */
Test(cli_output, check_json_to_a_full_disk_exits_1)
{
    expect_write_failure("check --json plans/design-example.rplan");
}

Test(cli_output, check_text_help_and_version_to_a_full_disk_exit_1)
{
    expect_write_failure("check plans/design-example.rplan");
    expect_write_failure("--help");
    expect_write_failure("--version");
}

/* A rejected plan still exits 1 (not 0) and keeps its own diagnostics on stderr. */
Test(cli_output, a_failure_keeps_its_status_when_output_fails_too)
{
    char *err;
    int rc = run_to_full("check tests/plans/fail/drop-last-copy.rplan", &err);
    cr_expect_eq(rc, 1, "exit %d, stderr: %s", rc, err);
    cr_expect(strstr(err, "error:"), "%s", err);
    free(err);
}
