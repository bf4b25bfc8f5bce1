/* runtime/manager/peak_json.c — a location's peak as JSON (peak_json.h), with the same
 * keys as the snapshot's per-location accounting. */
#include "runtime/manager/peak_json.h"

void fhr_peak_json_add(cJSON *arr, fhr_location loc, int has_used, uint64_t peak_used,
                       uint64_t peak_charged, int has_budget, uint64_t budget)
{
    char b[16];
    cJSON *x = cJSON_CreateObject();
    if (!x)
        return;
    cJSON_AddStringToObject(x, "location", fhr_loc_format(loc, b, sizeof b));
    if (has_used)
        cJSON_AddNumberToObject(x, "peak_used_bytes", (double)peak_used);
    cJSON_AddNumberToObject(x, "peak_charged_bytes", (double)peak_charged);
    if (has_budget)
        cJSON_AddNumberToObject(x, "budget_bytes", (double)budget);
    else
        cJSON_AddNullToObject(x, "budget_bytes");
    cJSON_AddItemToArray(arr, x);
}
