/* compiler/out.h — a text sink that is either a FILE or a growing string, shared by the
 * diagnostics renderer and the disassembler (internal); it remembers a failed write. */
#ifndef FHEPLAN_COMPILER_OUT_H
#define FHEPLAN_COMPILER_OUT_H

#include <stddef.h>
#include <stdio.h>

typedef struct rp_out {
    FILE *f;       /* non-NULL: write here */
    char *s;       /* else: the string built so far (NUL-terminated), malloc'd */
    size_t n, cap;
    int fail;      /* a write to f failed, or the string could not grow; later output is dropped */
} rp_out;

void rp_out_put(rp_out *o, const char *p, size_t n);
void rp_out_puts(rp_out *o, const char *s);
void rp_out_printf(rp_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
