/* cli/format.c — human units for the command's reports (see format.h); sizes through
 * the library's one formatter (base/units.h). */
#include "cli/format.h"
#include "base/units.h"

#include <math.h>
#include <stdio.h>

const char *fmt_bytes(uint64_t b, char *buf, size_t cap)
{
    return fhr_size_format(b, FHR_SIZE_ROUNDED, buf, cap);
}

const char *fmt_time(double s, char *buf, size_t cap)
{
    if (!isfinite(s) || s < 0)
        snprintf(buf, cap, "%s", isnan(s) || s < 0 ? "unknown time" : "unbounded time");
    else if (s >= 1e6) /* absurd rates: a number with an exponent, still in seconds */
        snprintf(buf, cap, "%.3g s", s);
    else if (s >= 1)
        snprintf(buf, cap, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(buf, cap, "%.2f ms", s * 1e3);
    else
        snprintf(buf, cap, "%.1f us", s * 1e6);
    return buf;
}

const char *plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}
