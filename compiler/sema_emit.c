/* compiler/sema_emit.c — emission into the program: instructions with their line-table
 * records, and the source span an instruction is reported at. */
#include "compiler/sema.h"

rp_linerec rp_sema_line_of(rp_loc l)
{
    rp_linerec r;
    r.line = l.first_line;
    r.col = l.first_column > 0xFFFF ? 0xFFFF : (uint16_t)l.first_column;
    uint32_t len = l.last_line == l.first_line && l.last_column >= l.first_column
                       ? l.last_column - l.first_column + 1
                       : 1;
    r.len = len > 0xFFFF ? 0xFFFF : (uint16_t)len;
    return r;
}

void rp_sema_emit(S *s, int op, uint8_t a, uint8_t b, uint32_t x, uint32_t y, rp_loc l)
{
    rp_ins in = {(uint8_t)op, a, b, 0, x, y};
    if (!rp_prog_emit(s->p, in, rp_sema_line_of(l)))
        s->oom = 1;
}

rp_loc rp_sema_join(rp_loc a, rp_loc b)
{
    if (b.last_line == a.first_line) {
        a.last_line = b.last_line;
        a.last_column = b.last_column;
    }
    return a;
}
