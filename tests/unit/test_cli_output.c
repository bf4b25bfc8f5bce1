/* tests/unit/test_cli_output.c — the fheplan command's output reaching its file: a
 * standard output that cannot be written (a full disk, /dev/full) fails with exit 1 and
 * a message on standard error, whatever the command and however much it wrote; output
 * files that are character devices, FIFOs or symbolic links are written through, never
 * replaced; --trace and --timeline never name one file. */
#include "tests/unit/tmpdir.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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

/* ---- special output files --------------------------------------------------------- */

#define PLAN "plans/design-example.rplan"

/* Runs `fheplan args` (printf-style), output streams discarded; the exit status. */
static int cli(const char *fmt, ...)
{
    char args[1536], cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>&1 </dev/null", FHEPLAN_CLI, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    char *b = malloc(1 << 20);
    cr_assert_not_null(b);
    *n = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

/* The bytes `compile PLAN` writes to a regular file. */
static char *compiled(size_t *n)
{
    const char *path = tmp_path("plain.rbc");
    cr_assert_eq(cli("compile %s -o %s", PLAN, path), 0);
    return slurp(path, n);
}

/* A character device to write to: a null device made in the test's directory (root), else
 * /dev/null itself, which only root could replace: so a broken build never replaces the
 * machine's /dev/null (as root without a usable device node the test skips). */
static void char_device(char *path, size_t cap)
{
    snprintf(path, cap, "%s/null", tmpdir_get());
    if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        int fd = open(path, O_WRONLY);
        if (fd >= 0) {
            close(fd);
            return;
        }
        unlink(path); /* a filesystem mounted nodev */
    }
    if (geteuid() == 0)
        cr_skip_test("root cannot make a usable device node under %s", tmpdir_get());
    snprintf(path, cap, "/dev/null");
}

static void expect_char_device(const char *path)
{
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "%s", path);
    cr_assert(S_ISCHR(st.st_mode), "%s is no longer a character device (mode %o)", path,
              (unsigned)st.st_mode);
    cr_assert_eq(major(st.st_rdev), 1);
    cr_assert_eq(minor(st.st_rdev), 3);
}

/* A small plan for the runs. */
static const char *tiny_plan(void)
{
    const char *p = tmp_path("tiny.rplan");
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs("rplan 1\nvalue w = 1 KiB at host init synth(1)\nplan \"p\" { body { run touch(w) } }\n", f);
    fclose(f);
    return p;
}

Test(cli_output, a_character_device_is_written_through_not_replaced)
{
    char dev[600];
    char_device(dev, sizeof dev);
    cr_assert_eq(cli("compile %s -o %s", PLAN, dev), 0);
    expect_char_device(dev);
    cr_assert_eq(cli("run --device emu --trace %s --timeline %s %s", dev, tmp_path("t.html"),
                     tiny_plan()), 0);
    expect_char_device(dev);
    cr_assert_eq(cli("run --device emu --timeline %s %s", dev, tiny_plan()), 0);
    expect_char_device(dev);
}

/* A reader of the FIFO in a child: it copies what it reads to `to` (ends itself after 30 s
 * should nothing ever open the FIFO for writing). */
static pid_t fifo_reader(const char *fifo, const char *to)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        alarm(30);
        int in = open(fifo, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0)
            _exit(2);
        char b[4096];
        ssize_t n;
        while ((n = read(in, b, sizeof b)) > 0)
            if (write(out, b, (size_t)n) != n)
                _exit(3);
        _exit(n == 0 ? 0 : 4);
    }
    return pid;
}

Test(cli_output, a_fifo_is_written_through_not_replaced, .timeout = 60)
{
    size_t want_n, got_n;
    char *want = compiled(&want_n);
    char fifo[600], got[600];
    snprintf(fifo, sizeof fifo, "%s/pipe", tmpdir_get());
    snprintf(got, sizeof got, "%s/got", tmpdir_get());
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    pid_t pid = fifo_reader(fifo, got);
    int rc = cli("compile %s -o %s", PLAN, fifo);
    struct stat st;
    cr_assert_eq(lstat(fifo, &st), 0);
    int still = S_ISFIFO(st.st_mode);
    if (!still)
        kill(pid, SIGKILL); /* the FIFO it waits on is gone */
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(still, "the FIFO was replaced (mode %o)", (unsigned)st.st_mode);
    cr_assert_eq(rc, 0);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "reader status %d", ws);
    char *data = slurp(got, &got_n);
    cr_assert_eq(got_n, want_n, "%zu bytes through the FIFO, %zu to a file", got_n, want_n);
    cr_assert_eq(memcmp(data, want, want_n), 0);
    free(data);
    free(want);
}

Test(cli_output, a_symbolic_link_keeps_its_place_and_its_target_is_replaced)
{
    size_t want_n, got_n;
    char *want = compiled(&want_n);
    char real[600], link[600], dangling[600], made[600];
    snprintf(real, sizeof real, "%s/real.rbc", tmpdir_get());
    snprintf(link, sizeof link, "%s/link.rbc", tmpdir_get());
    snprintf(made, sizeof made, "%s/made.rbc", tmpdir_get());
    snprintf(dangling, sizeof dangling, "%s/dangling.rbc", tmpdir_get());
    FILE *f = fopen(real, "w");
    cr_assert_not_null(f);
    fputs("old content\n", f);
    fclose(f);
    cr_assert_eq(chmod(real, 0640), 0);
    cr_assert_eq(symlink("real.rbc", link), 0);
    cr_assert_eq(cli("compile %s -o %s", PLAN, link), 0);
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
    cr_assert_eq(stat(real, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0640, "the target keeps its mode: %o", (unsigned)st.st_mode);
    char *data = slurp(real, &got_n);
    cr_assert_eq(got_n, want_n);
    cr_assert_eq(memcmp(data, want, want_n), 0, "the target holds the output");
    free(data);
    /* a link to a file not there yet: the file is made, the link stays */
    cr_assert_eq(symlink("made.rbc", dangling), 0);
    cr_assert_eq(cli("compile %s -o %s", PLAN, dangling), 0);
    cr_assert_eq(lstat(dangling, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the dangling link was replaced");
    data = slurp(made, &got_n);
    cr_assert_eq(got_n, want_n);
    free(data);
    /* fmt -w through a link: the link's file is rewritten, the link stays */
    char src[600], srclink[600], cmd[1400];
    snprintf(src, sizeof src, "%s/p.rplan", tmpdir_get());
    snprintf(srclink, sizeof srclink, "%s/p-link.rplan", tmpdir_get());
    snprintf(cmd, sizeof cmd, "sed 's/^value /value  /' %s > %s", PLAN, src);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(symlink("p.rplan", srclink), 0);
    cr_assert_eq(cli("fmt -w %s", srclink), 0);
    cr_assert_eq(lstat(srclink, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "fmt -w replaced the link");
    cr_assert_eq(cli("fmt --check %s", src), 0, "the link's file was formatted");
    free(want);
}

Test(cli_output, a_directory_is_refused_as_an_output)
{
    cr_assert_eq(cli("compile %s -o %s", PLAN, tmpdir_get()), 64);
    struct stat st;
    cr_assert_eq(stat(tmpdir_get(), &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
}

Test(cli_output, trace_and_timeline_to_one_file_are_refused)
{
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/t.json", tmpdir_get());
    snprintf(b, sizeof b, "%s/t-link.json", tmpdir_get());
    cr_assert_eq(cli("run --device emu --trace %s --timeline %s %s", a, a, tiny_plan()), 64);
    struct stat st;
    cr_assert_neq(stat(a, &st), 0, "a refused run wrote nothing");
    /* the same file by another name */
    FILE *f = fopen(a, "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(symlink("t.json", b), 0);
    cr_assert_eq(cli("run --device emu --trace %s --timeline %s %s", b, a, tiny_plan()), 64);
    cr_assert_eq(cli("run --device emu --trace - --timeline - %s", tiny_plan()), 64);
    /* two files: both written */
    cr_assert_eq(cli("run --device emu --trace %s --timeline %s %s", a, tmp_path("t.html"),
                     tiny_plan()), 0);
    cr_assert_eq(stat(tmp_path("t.html"), &st), 0);
    cr_assert_gt(st.st_size, 0);
}
