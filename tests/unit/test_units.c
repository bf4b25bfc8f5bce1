/* tests/unit/test_units.c — the one size formatter (base/units.h): exact units as the
 * language writes sizes, rounded ones for reports, at every unit boundary. */
#include <criterion/criterion.h>

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
