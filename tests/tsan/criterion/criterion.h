/* tests/tsan/criterion/criterion.h — a minimal in-process stand-in for Criterion's
 * Test() and cr_assert*() used only by `make tsan`: Criterion's forking sandbox cannot
 * start under ThreadSanitizer (its inheritable arena collides with TSan's memory map),
 * so the threaded suites are compiled against this header and run in one process. */
#ifndef FHEPLAN_TSAN_CRITERION_SHIM_H
#define FHEPLAN_TSAN_CRITERION_SHIM_H

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

struct shim_test {
    const char *suite, *name;
    void (*fn)(void);
    struct shim_test *next;
};

void shim_register(struct shim_test *t);
void shim_fail(const char *file, int line, const char *expr);

#define Test(suite_, name_, ...)                                                         \
    static void suite_##_##name_##_impl(void);                                           \
    static struct shim_test suite_##_##name_##_desc = {#suite_, #name_,                 \
                                                       suite_##_##name_##_impl, NULL};   \
    __attribute__((constructor)) static void suite_##_##name_##_reg(void)                \
    {                                                                                    \
        shim_register(&suite_##_##name_##_desc);                                         \
    }                                                                                    \
    static void suite_##_##name_##_impl(void)

#define cr_assert(cond, ...)                                                             \
    do {                                                                                 \
        if (!(cond))                                                                     \
            shim_fail(__FILE__, __LINE__, #cond);                                        \
    } while (0)
#define cr_assert_not(cond, ...) cr_assert(!(cond))
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b))
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b))
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b))
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b))
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b))
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b))
#define cr_assert_null(p, ...) cr_assert((p) == NULL)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0)
#define cr_assert_arr_eq(a, b, n, ...) cr_assert(memcmp((a), (b), (n)) == 0)

#endif
