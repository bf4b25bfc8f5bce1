/* base/grow.c — the growth helper behind every growable array of the library:
 * doubling, and leaving the array untouched when memory runs out. */
#include "base/error.h"

#include <stdlib.h>

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
