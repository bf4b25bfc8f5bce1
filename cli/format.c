/* cli/format.c — human units for the command's reports (see format.h). */
#include "cli/format.h"

#include <stdio.h>

const char *fmt_bytes(uint64_t b, char *buf, size_t cap)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, cap, "%.4g %s", v, u[i]);
    return buf;
}

const char *fmt_time(double s, char *buf, size_t cap)
{
    if (s >= 1)
        snprintf(buf, cap, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(buf, cap, "%.2f ms", s * 1e3);
    else
        snprintf(buf, cap, "%.1f us", s * 1e6);
    return buf;
}
