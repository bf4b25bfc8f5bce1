/* tests/tsan/main.c — runs every registered suite whose name starts with "threads", in
 * process, for `make tsan-backend`; an optional argument filters test names. */
#include <criterion/criterion.h>
shim_test *shim_tests;
int main(int argc, char **argv) {
    int n = 0;
    for (shim_test *t = shim_tests; t; t = t->next) {
        if (strncmp(t->suite, "threads", 7) != 0) continue;
        if (argc > 1 && !strstr(t->name, argv[1])) continue;
        t->fn(); n++;
    }
    printf("shim: %d threaded tests passed\n", n);
    return 0;
}
