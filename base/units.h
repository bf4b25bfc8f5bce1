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

/* ---- reading numbers, sizes and rates ------------------------------------------------ *
 * One grammar for the command's options, FHEPLAN_* variables and the language's units:
 * a NUMBER is decimal digits with an optional fraction (12, 0.5, .5, 1.25); no sign, no
 * exponent, no hexadecimal, no space inside. A SIZE is a NUMBER, optional spaces and one
 * of the units B, KiB, MiB, GiB, TiB; it must come to a whole number of bytes below 2^64.
 * A RATE is a NUMBER of GB/s, positive and at most 1e9. */

/* The unit a user most likely meant by word: KiB for K, KB, kb, Kib, k...; MiB, GiB and
 * TiB alike; B for b; s, ms, us, ns for sec, msec, usec, nsec...; NULL when nothing
 * fits. Never word itself. */
const char *fhr_unit_guess(const char *word);

/* A SIZE, all of s. 0, or -1 with a short reason in why (cap bytes; 128 suffice): "a SIZE
 * needs a unit: ...", "'GB' is not a unit; did you mean GiB? (sizes are powers of
 * 1024)", ... */
int fhr_size_parse(const char *s, uint64_t *out, char *why, size_t cap);

/* A RATE, all of s. 0, or -1 with the reason in why (like fhr_size_parse). */
int fhr_rate_parse(const char *s, double *out, char *why, size_t cap);

#endif
