/* cli/format.c — human units for the command's reports (see format.h); sizes through
 * the library's one formatter (base/units.h). */
#include "cli/format.h"
#include "base/units.h"

#include <cjson/cJSON.h>
#include <string.h>

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

/* ---- JSON text ---------------------------------------------------------------------- */

/* Length of the well-formed UTF-8 sequence at s, or 0 (ill-formed, overlong, a surrogate,
 * past U+10FFFF, or cut short by the terminating NUL). */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned c = s[0], lo = 0x80, hi = 0xbf;
    size_t k = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (k < 2)
        return k;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return k;
}

/* s with each byte that does not start a well-formed sequence replaced by U+FFFD, in
 * cJSON's allocator; NULL when s is well-formed already (or out of memory). */
static char *utf8_fixed(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t bad = 0, n = 0;
    for (size_t k; u[n]; n += k ? k : 1)
        bad += !(k = utf8_seq(u + n));
    char *o = bad ? cJSON_malloc(n + 2 * bad + 1) : NULL;
    if (!o)
        return NULL;
    size_t j = 0;
    for (size_t i = 0, k; u[i]; i += k ? k : 1) {
        if ((k = utf8_seq(u + i)) != 0) {
            memcpy(o + j, s + i, k);
            j += k;
        } else {
            memcpy(o + j, "\xef\xbf\xbd", 3);
            j += 3;
        }
    }
    o[j] = 0;
    return o;
}

void json_clean_utf8(cJSON *o)
{
    for (; o; o = o->next) {
        char *f;
        if (o->string && !(o->type & cJSON_StringIsConst) && (f = utf8_fixed(o->string))) {
            cJSON_free(o->string);
            o->string = f;
        }
        if (cJSON_IsString(o) && o->valuestring && (f = utf8_fixed(o->valuestring))) {
            cJSON_free(o->valuestring);
            o->valuestring = f;
        }
        json_clean_utf8(o->child);
    }
}

const char *plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}
