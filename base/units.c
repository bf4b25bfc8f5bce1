/* base/units.c — the one size formatter (units.h): exact units for disassembly and
 * verifier messages, rounded ones for the command's reports. */
#include "base/units.h"

#include <inttypes.h>
#include <stdio.h>

const char *fhr_size_format(uint64_t n, fhr_size_style style, char *buf, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (style == FHR_SIZE_EXACT) {
        for (int i = 4; i > 0; i--) {
            uint64_t m = 1ull << (10 * i);
            if (n >= m && n % m == 0) {
                snprintf(buf, cap, "%" PRIu64 " %s", n / m, unit[i]);
                return buf;
            }
        }
        snprintf(buf, cap, "%" PRIu64 " B", n);
        return buf;
    }
    double v = (double)n;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, cap, "%" PRIu64 " B", n);
    else
        snprintf(buf, cap, "%.4g %s", v, unit[i]);
    return buf;
}
