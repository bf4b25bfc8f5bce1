/* runtime/manager/report.h — building execution reports (internal). */
#ifndef FHEPLAN_RUNTIME_REPORT_H
#define FHEPLAN_RUNTIME_REPORT_H

#include "fheplan/residency.h"
#include "base/error.h"

struct fhr_report {
    fhr_owned owned; /* first: an fhr_error that owns a partial report frees it */
    char *name;
    fhr_transition *tr;
    size_t ntr, captr;
    fhr_reservation_event *rev;
    size_t nrev, caprev;
    uint64_t bytes[FHR_DIR_COUNT_];
    uint64_t regen_bytes; /* generated instead of copied, copies and loads */
    uint64_t count[FHR_DIR_COUNT_];
    uint64_t waits; /* host waits a throttled use made before its decision (fhr_use_report) */
};

fhr_report *fhr_report_new(const char *name);
fhr_status fhr_report_add_transition(fhr_report *r, const fhr_transition *t);
fhr_status fhr_report_add_reservation(fhr_report *r, int admitted, const fhr_reservation *res,
                                      uint64_t t_ns);
uint64_t fhr_now_ns(void);

#endif
