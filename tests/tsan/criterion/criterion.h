/* tests/tsan/criterion/criterion.h — a minimal in-process stand-in for Criterion, so the backend's
 * threaded suites run under TSan (Criterion's own runner aborts under TSan: Criterion #274). */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef struct shim_test { const char *suite, *name; void (*fn)(void); struct shim_test *next; } shim_test;
extern shim_test *shim_tests;
#define Test(s, n) \
    static void s##_##n(void); \
    static shim_test s##_##n##_rec = {#s, #n, s##_##n, 0}; \
    __attribute__((constructor)) static void s##_##n##_reg(void) { s##_##n##_rec.next = shim_tests; shim_tests = &s##_##n##_rec; } \
    static void s##_##n(void)
#define SHIM_FAIL(...) do { fprintf(stderr, "%s:%d: assertion failed\n", __FILE__, __LINE__); abort(); } while (0)
#define cr_assert(c, ...) do { if (!(c)) SHIM_FAIL(); } while (0)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b))
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b))
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b))
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b))
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b))
#define cr_assert_null(a, ...) cr_assert((a) == NULL)
#define cr_assert_not_null(a, ...) cr_assert((a) != NULL)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0)
#define cr_assert_arr_eq(a, b, n, ...) cr_assert(memcmp((a), (b), (n)) == 0)
#define cr_skip(...) return
