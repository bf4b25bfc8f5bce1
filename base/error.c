/* base/error.c — the caller-owned error record (init, clear, fail) and the names of
 * statuses and plan phases that every layer reports with. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
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
    if (err->partial_report) {
        fhr_owned *o = (fhr_owned *)(void *)err->partial_report;
        o->destroy(o);
    }
    fhr_error_init(err);
}

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
