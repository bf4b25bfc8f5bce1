/* tests/unit/test_units.c — the one size formatter (base/units.h): exact units as the
 * language writes sizes, rounded ones for reports, at every unit boundary. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/units.h"

Test(units, exact_and_rounded_sizes)
{
    static const struct { uint64_t n; const char *exact, *rounded; } k[] = {
        {0, "0 B", "0 B"},
        {1023, "1023 B", "1023 B"},
        {1024, "1 KiB", "1 KiB"},
        {1536, "1536 B", "1.5 KiB"},
        {64ull << 20, "64 MiB", "64 MiB"},
        {(64ull << 20) + 1, "67108865 B", "64 MiB"},
        {3ull << 30, "3 GiB", "3 GiB"},
        {5ull << 40, "5 TiB", "5 TiB"},
        {2048ull << 40, "2048 TiB", "2048 TiB"},
        {UINT64_MAX, "18446744073709551615 B", "1.678e+07 TiB"},
    };
    char b[32];
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        cr_expect_str_eq(fhr_size_format(k[i].n, FHR_SIZE_EXACT, b, sizeof b), k[i].exact);
        cr_expect_str_eq(fhr_size_format(k[i].n, FHR_SIZE_ROUNDED, b, sizeof b), k[i].rounded);
    }
}

/* One grammar for sizes and rates (base/units.h): a unit is required, the unit a user
 * most likely meant is suggested, fractions must come to whole bytes. */
Test(units, sizes_need_a_unit_and_the_likely_one_is_suggested)
{
    static const struct { const char *s; uint64_t n; } ok[] = {
        {"1B", 1}, {"4 GiB", 4ull << 30}, {"1.5KiB", 1536}, {".5 KiB", 512},
        {"18446744073709551615B", UINT64_MAX}, {"0.25MiB", 256 << 10},
    };
    char why[160];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t n = 0;
        cr_expect_eq(fhr_size_parse(ok[i].s, &n, why, sizeof why), 0, "%s: %s", ok[i].s, why);
        cr_expect_eq(n, ok[i].n, "%s", ok[i].s);
    }
    static const struct { const char *s, *why; } bad[] = {
        {"4", "needs a unit"}, {"1.5", "needs a unit"}, {"2GB", "did you mean GiB?"},
        {"1 G", "did you mean GiB?"}, {"3 mb", "did you mean MiB?"}, {"1 Kb", "did you mean KiB"},
        {"1.0001KiB", "whole number of bytes"}, {"1.5B", "whole number of bytes"},
        {"18446744073709551616B", "below 2^64"}, {"16777216TiB", "below 2^64"},
        {"-1GiB", "decimal number"}, {"1e3GiB", "not a unit"}, {"0x10B", "not a unit"},
        {"1.GiB", "decimal number"}, {"", "decimal number"}, {"2 XB", "'XB' is not a unit"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t n = 0;
        why[0] = 0;
        cr_expect_eq(fhr_size_parse(bad[i].s, &n, why, sizeof why), -1, "%s accepted", bad[i].s);
        cr_expect(strstr(why, bad[i].why), "%s: %s", bad[i].s, why);
    }
    cr_expect_str_eq(fhr_unit_guess("GB"), "GiB");
    cr_expect_str_eq(fhr_unit_guess("tb"), "TiB");
    cr_expect_str_eq(fhr_unit_guess("msec"), "ms");
    cr_expect_null(fhr_unit_guess("GiB"));
    cr_expect_null(fhr_unit_guess("foo"));
}

Test(units, rates_are_positive_decimal_numbers)
{
    static const struct { const char *s; double v; } ok[] = {
        {"55.5", 55.5}, {".5", 0.5}, {"1000000000", 1e9}, {"3", 3},
    };
    char why[160];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        double v = 0;
        cr_expect_eq(fhr_rate_parse(ok[i].s, &v, why, sizeof why), 0, "%s: %s", ok[i].s, why);
        cr_expect_eq(v, ok[i].v, "%s", ok[i].s);
    }
    static const char *const bad[] = {"abc", "-1", "nan", "inf", "1e400", "1e3", "0x10", "0",
                                      "0.0", "1000000000.5", " 5", "5 ", "+5", "1.", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double v = 0;
        cr_expect_eq(fhr_rate_parse(bad[i], &v, why, sizeof why), -1, "'%s' accepted", bad[i]);
    }
}
