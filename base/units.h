/* base/units.h — the one size formatter of the library and the command (internal):
 * bytes in powers of 1024, exactly as the language writes them or rounded for reports. */
#ifndef FHEPLAN_BASE_UNITS_H
#define FHEPLAN_BASE_UNITS_H

#include <stddef.h>
#include <stdint.h>

typedef enum fhr_size_style {
    FHR_SIZE_EXACT,  /* the largest unit that divides n: "64 MiB", "1536 B" (plan syntax) */
    FHR_SIZE_ROUNDED /* four significant digits in the largest unit below n: "1.5 KiB" */
} fhr_size_style;

/* Writes n into buf (cap bytes; 32 always suffice) and returns buf. */
const char *fhr_size_format(uint64_t n, fhr_size_style style, char *buf, size_t cap);

#endif
