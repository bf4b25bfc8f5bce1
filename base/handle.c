/* base/handle.c — handle identity: equality and the hash every handle-keyed table
 * uses (a handle is a manager id and a serial, never reused). */
#include "fheplan/types.h"

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
