/* tests/tsan/main.c — runner for the threaded tests under ThreadSanitizer: runs every
 * test registered by the files linked in (the Makefile's TSAN_UNIT), in one process, and
 * prints a closing "N passed, N failed" line. */
#include "criterion/criterion.h"

#include <stdlib.h>

static struct shim_test *head;
static jmp_buf *current;

void shim_register(struct shim_test *t)
{
    t->next = head;
    head = t;
}

void shim_fail(const char *file, int line, const char *expr)
{
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, expr);
    longjmp(*current, 1);
}

/* Runs one test; 1 when it passed. Kept apart so no local lives across longjmp. */
static int run_one(struct shim_test *t)
{
    jmp_buf jb;
    current = &jb;
    if (setjmp(jb) != 0)
        return 0;
    t->fn();
    return 1;
}

int main(void)
{
    int passed = 0, failed = 0;
    for (struct shim_test *t = head; t; t = t->next) {
        int ok = run_one(t);
        passed += ok;
        failed += !ok;
        printf("[%s] %s::%s\n", ok ? "PASS" : "FAIL", t->suite, t->name);
        fflush(stdout);
    }
    printf("tsan: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
