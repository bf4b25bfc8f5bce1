/* runtime/plan/plan.h — plan internals and the model dry run shared by explain and
 * preflight (internal). */
#ifndef FHEPLAN_RUNTIME_PLAN_H
#define FHEPLAN_RUNTIME_PLAN_H

#include "runtime/manager/manager.h"

struct fhr_plan {
    char *name;
    fhr_action *acts[3]; /* reclaim, enter, exit */
    size_t nacts[3];
    fhr_reservation *res;
    size_t nres;
};

/* One step list for the model: either a plan or a raw action sequence. */
typedef struct sim_input {
    const fhr_plan *plan;        /* NULL: raw sequence */
    const fhr_action *acts;
    size_t nacts;
} sim_input;

/* Dry run against the live state under the lock (caller holds it). */
void plan_simulate(fhr_manager *m, const sim_input *in, fhr_explanation *out);
/* Fills err from an infeasible explanation (FHR_E_INFEASIBLE). */
fhr_status plan_infeasible(const fhr_explanation *ex, const char *what, fhr_error *err);

#endif
