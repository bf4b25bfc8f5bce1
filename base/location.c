/* base/location.c — locations: constructors, equality, slots (the dense index every
 * per-location table uses), and their text form ("host", "pinned", "cuda:N"). */
#include "fheplan/types.h"

#include <stdio.h>
#include <string.h>

fhr_location fhr_loc_host(void) { return (fhr_location){FHR_LOC_HOST, 0}; }
fhr_location fhr_loc_pinned(void) { return (fhr_location){FHR_LOC_PINNED, 0}; }
fhr_location fhr_loc_cuda(int index) { return (fhr_location){FHR_LOC_CUDA, index}; }

int fhr_loc_equal(fhr_location a, fhr_location b)
{
    return a.kind == b.kind && (a.kind != FHR_LOC_CUDA || a.index == b.index);
}

int fhr_loc_slot(fhr_location loc)
{
    switch (loc.kind) {
    case FHR_LOC_HOST: return 0;
    case FHR_LOC_PINNED: return 1;
    case FHR_LOC_CUDA:
        if (loc.index < 0 || loc.index >= FHR_MAX_CUDA_DEVICES)
            return -1;
        return 2 + loc.index;
    default: return -1;
    }
}

fhr_location fhr_loc_from_slot(int slot)
{
    if (slot == 0) return fhr_loc_host();
    if (slot == 1) return fhr_loc_pinned();
    if (slot >= 2 && slot < FHR_LOC_SLOTS) return fhr_loc_cuda(slot - 2);
    return (fhr_location){FHR_LOC_INVALID, 0};
}

fhr_status fhr_loc_parse(const char *text, fhr_location *out)
{
    if (!text || !out)
        return FHR_E_INVALID;
    if (strcmp(text, "host") == 0) { *out = fhr_loc_host(); return FHR_OK; }
    if (strcmp(text, "pinned") == 0) { *out = fhr_loc_pinned(); return FHR_OK; }
    if (strncmp(text, "cuda:", 5) == 0) {
        const char *p = text + 5;
        if (*p < '0' || *p > '9')
            return FHR_E_INVALID;
        long v = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            v = v * 10 + (*p - '0');
            if (v >= FHR_MAX_CUDA_DEVICES)
                return FHR_E_INVALID;
        }
        if (*p != '\0' || (text[5] == '0' && text[6] != '\0'))
            return FHR_E_INVALID;
        *out = fhr_loc_cuda((int)v);
        return FHR_OK;
    }
    return FHR_E_INVALID;
}

const char *fhr_loc_format(fhr_location loc, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return "";
    switch (loc.kind) {
    case FHR_LOC_HOST: snprintf(buf, cap, "host"); break;
    case FHR_LOC_PINNED: snprintf(buf, cap, "pinned"); break;
    case FHR_LOC_CUDA: snprintf(buf, cap, "cuda:%d", loc.index); break;
    default: snprintf(buf, cap, "invalid"); break;
    }
    return buf;
}
