/* runtime/types.c — names and text forms of the shared small types: statuses,
 * phases, locations, handles, and the caller-owned error record. */
#include "fheplan/residency.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fhr_status_name(fhr_status st)
{
    static const char *const names[FHR_STATUS_COUNT_] = {
        [FHR_OK] = "ok",
        [FHR_E_INVALID] = "invalid",
        [FHR_E_HANDLE] = "handle",
        [FHR_E_LOCATION] = "location",
        [FHR_E_REPLICA] = "replica",
        [FHR_E_STATE] = "state",
        [FHR_E_PRESERVE] = "preserve",
        [FHR_E_PROTECTED] = "protected",
        [FHR_E_BUDGET] = "budget",
        [FHR_E_REENTRANT] = "reentrant",
        [FHR_E_NOMEM] = "nomem",
        [FHR_E_BACKEND] = "backend",
        [FHR_E_SOURCE] = "source",
        [FHR_E_STALE] = "stale",
        [FHR_E_PLAN] = "plan",
        [FHR_E_INFEASIBLE] = "infeasible",
        [FHR_E_LEASE] = "lease",
        [FHR_E_SCOPE] = "scope",
        [FHR_E_UNSUPPORTED] = "unsupported",
    };
    if ((unsigned)st >= FHR_STATUS_COUNT_)
        return "unknown";
    return names[st];
}

const char *fhr_phase_name(fhr_phase ph)
{
    switch (ph) {
    case FHR_PHASE_NONE: return "none";
    case FHR_PHASE_PREFLIGHT: return "preflight";
    case FHR_PHASE_RECLAIM: return "reclaim";
    case FHR_PHASE_RESERVE: return "reserve";
    case FHR_PHASE_ENTER: return "enter";
    case FHR_PHASE_BODY: return "body";
    case FHR_PHASE_EXIT: return "exit";
    case FHR_PHASE_RELEASE: return "release";
    case FHR_PHASE_ACTIONS: return "actions";
    }
    return "unknown";
}

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

int fhr_handle_equal(fhr_handle a, fhr_handle b)
{
    return a.manager_id == b.manager_id && a.serial == b.serial;
}

uint64_t fhr_handle_hash(fhr_handle h)
{
    uint64_t x = h.manager_id ^ (h.serial * 0x9e3779b97f4a7c15ULL);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

void fhr_error_init(fhr_error *err)
{
    if (!err)
        return;
    memset(err, 0, sizeof *err);
    err->action_index = -1;
}

void fhr_error_clear(fhr_error *err)
{
    if (!err)
        return;
    fhr_report_free(err->partial_report);
    fhr_error_init(err);
}

#include "base/error.h"
#include <stdarg.h>

fhr_status fhr_fail(fhr_error *err, fhr_status st, const char *fmt, ...)
{
    if (!err)
        return st;
    fhr_error_clear(err);
    err->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return st;
}

const char *fhr_action_kind_name(fhr_action_kind k)
{
    switch (k) {
    case FHR_ACT_ENSURE: return "ensure";
    case FHR_ACT_MOVE: return "move";
    case FHR_ACT_DROP: return "drop";
    case FHR_ACT_DISCARD: return "discard";
    }
    return "unknown";
}

#include "fheplan/version.h"

int fhr_version_number(void) { return FHEPLAN_VERSION_NUMBER; }
const char *fhr_version(void) { return FHEPLAN_VERSION; }

int fhr_grow(void **arr, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return 1;
    size_t ncap = *cap ? *cap * 2 : first;
    if (ncap <= n)
        ncap = n + 1;
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return 0;
    *arr = p;
    *cap = ncap;
    return 1;
}
