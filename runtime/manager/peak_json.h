/* runtime/manager/peak_json.h — the one writer of a location's peak as JSON, shared by the
 * plan explanation and the VM's run report (internal). */
#ifndef FHEPLAN_RUNTIME_PEAK_JSON_H
#define FHEPLAN_RUNTIME_PEAK_JSON_H

#include "fheplan/types.h"

#include <cjson/cJSON.h>

/* Appends {"location", "peak_used_bytes" (only when has_used), "peak_charged_bytes",
 * "budget_bytes": n or null} to the array arr: the keys of the snapshot's locations. */
void fhr_peak_json_add(cJSON *arr, fhr_location loc, int has_used, uint64_t peak_used,
                       uint64_t peak_charged, int has_budget, uint64_t budget);

#endif
