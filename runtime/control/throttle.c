/* runtime/control/throttle.c — the throttling layer above the policy: decide, and when
 * pending consumer events alone block the decision, wait for them outside the lock and
 * decide again (fhr_use_begin_opts). The policy itself never waits. */
#include "fheplan/residency.h"
#include "fheplan/controller.h"
#include "runtime/control/use.h"
#include "runtime/manager/query.h"
#include "base/error.h"

/* Whether waiting can fix an infeasible decision: the short location holds a protected
 * copy whose only protection is pending consumer events, or at least the shortfall in
 * bytes of copies other threads are making (each becomes a copy, leased or pending, once
 * made: what it holds can then be waited for or evicted). Bytes in flight short of the
 * shortfall alone do not make a wait worth it: a request that can never fit is refused
 * at once, however busy the other threads. */
static int waiting_helps(fhr_manager *m, const fhr_decision *d)
{
    const fhr_explanation *ex = fhr_decision_explanation(d);
    if (ex->loc.kind == FHR_LOC_INVALID || ex->bytes_short == 0)
        return 0;
    if (mgr_inflight_bytes(m, ex->loc) >= ex->bytes_short)
        return 1;
    const unsigned blocking =
        FHR_PROT_LEASED | FHR_PROT_HELD | FHR_PROT_REQUIRED | FHR_PROT_NO_TIER;
    for (size_t i = 0; i < fhr_decision_nprotected(d); i++) {
        const fhr_protected_copy *p = fhr_decision_protected(d, i);
        if (fhr_loc_equal(p->at, ex->loc) && (p->reasons & FHR_PROT_PENDING) &&
            !(p->reasons & blocking))
            return 1;
    }
    return 0;
}

#define MAX_STALE 64 /* other threads changed the state between decide and entry */
#define MAX_IDLE 2   /* rounds in which waiting found nothing still pending */

fhr_status fhr_use_begin_opts(fhr_controller *c, const fhr_request *req,
                              const fhr_stream_map *consumer, size_t nconsumer,
                              const fhr_stream_map *transfer, size_t ntransfer,
                              const fhr_use_opts *opts, fhr_use **out, fhr_error *err)
{
    if (!opts)
        return fhr_use_begin(c, req, consumer, nconsumer, transfer, ntransfer, out, err);
    if (!c || !out)
        return fhr_fail(err, FHR_E_INVALID, "use: controller and out are required");
    *out = NULL;
    if (opts->flags & ~FHR_USE_WAIT)
        return fhr_fail(err, FHR_E_INVALID, "use: unknown option flags 0x%x",
                        opts->flags & ~FHR_USE_WAIT);
    fhr_manager *m = controller_manager(c);
    uint64_t waits = 0;
    unsigned stale = 0, idle = 0;
    for (;;) {
        fhr_decision *d = NULL;
        fhr_status st = fhr_decide(c, req, &d, err);
        if (st == FHR_E_STALE && ++stale < MAX_STALE)
            continue;
        if (st != FHR_OK)
            return st;
        int wait = !fhr_decision_feasible(d) && (opts->flags & FHR_USE_WAIT) &&
                   waiting_helps(m, d) && idle < MAX_IDLE &&
                   (opts->max_waits == 0 || waits < opts->max_waits);
        if (wait) {
            const fhr_explanation *ex = fhr_decision_explanation(d);
            size_t n = 0;
            st = fhr_wait_pending(m, ex->loc, ex->bytes_short, &n, err);
            fhr_decision_destroy(d);
            if (st != FHR_OK)
                return st;
            waits += n;
            idle = n ? 0 : idle + 1;
            continue;
        }
        /* An infeasible decision is the policy's verdict on this state: deciding again
         * without a wait would only repeat it. */
        int verdict = !fhr_decision_feasible(d);
        fhr_error e2;
        fhr_error_init(&e2);
        st = fhr_use_decision(c, d, consumer, nconsumer, transfer, ntransfer, out, &e2);
        if (st == FHR_OK) {
            fhr_error_clear(&e2);
            use_adopt_decision(*out, d, waits);
            return FHR_OK;
        }
        fhr_decision_destroy(d);
        /* A feasible decision gone stale, or refused by preflight for budget: another
         * thread's copy, admitted after this decision and still in flight, holds bytes it
         * counted on (the state version moves when a copy commits). Preflight refuses
         * before any action, so nothing changed: decide again. */
        if (!verdict &&
            (st == FHR_E_STALE || (st == FHR_E_INFEASIBLE && e2.cause == FHR_E_BUDGET)) &&
            ++stale < MAX_STALE) {
            fhr_error_clear(&e2);
            continue;
        }
        if (err) {
            fhr_error_clear(err);
            *err = e2;
        } else {
            fhr_error_clear(&e2);
        }
        return st;
    }
}
