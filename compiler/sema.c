/* compiler/sema.c — the semantic pass's entry point: the predefined constants, the
 * top-level statement list, budget overrides and the budget table, then cleanup. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/sema.h"

size_t rp_sema(rp_node *root, rp_dctx *dc, const rplan_compile_opts *opts, rplan_program *p)
{
    S s;
    memset(&s, 0, sizeof s);
    s.dc = dc;
    s.p = p;
    size_t before = dc->nerrors;
    cx top = {CX_TOP, FHR_PHASE_NONE, "file"};
    /* predefined constants (no declaration position): the MPI rank and world size */
    uint32_t world = opts && opts->world_size ? opts->world_size : 1;
    uint32_t rank = opts ? opts->rank : 0;
    if (rank >= world)
        ERR(&s, ((rp_loc){0, 0, 0, 0}), "rank %" PRIu32 " is out of range for world size %" PRIu32,
            rank, world);
    static const char *const predef[] = {"rank", "world_size"};
    for (int i = 0; i < 2 && !s.oom; i++) {
        sym *y = rp_sema_add_sym(&s, predef[i], SYM_CONST, (rp_loc){0, 0, 0, 0});
        if (y) {
            y->v = i ? world : rank;
            y->vkind = K_INT;
        }
    }
    s.root = root;
    if (dc->nerrors == before)
        rp_sema_lower_list(&s, root, &top);
    if (opts)
        for (size_t i = 0; i < opts->nbudget_override; i++) {
            int slot = fhr_loc_slot(opts->budget_override[i].loc);
            if (slot < 0) {
                ERR(&s, ((rp_loc){0, 0, 0, 0}), "budget override %zu has an invalid location",
                    i);
                continue;
            }
            s.has_budget[slot] = 1;
            s.budget[slot] = opts->budget_override[i].nbytes;
            s.budget_decl[slot] = (rp_loc){0, 0, 0, 0};
        }
    for (int slot = 0; slot < FHR_LOC_SLOTS; slot++) {
        if (!s.has_budget[slot])
            continue;
        if (p->nbuds == p->capbuds) {
            uint32_t nc = p->capbuds ? p->capbuds * 2 : 8;
            rp_budgetrec *v = realloc(p->buds, nc * sizeof *v);
            if (!v) {
                s.oom = 1;
                break;
            }
            p->buds = v;
            p->capbuds = nc;
        }
        rp_loc at = s.budget_decl[slot]; /* zero for an override */
        p->buds[p->nbuds++] = (rp_budgetrec){(uint8_t)slot, s.budget[slot], at.first_line,
                                             (uint16_t)at.first_column};
    }
    if (s.oom)
        ERR(&s, ((rp_loc){0, 0, 0, 0}), "out of memory");
    free(s.syms);
    free(s.ht);
    return dc->nerrors - before;
}
