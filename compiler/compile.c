/* compiler/compile.c — the public entry points that tie the pieces together: compile
 * (parse, semantic pass, verify), load (decode, verify), file I/O, and turning a
 * verifier refusal into a diagnostic at the failing instruction's source position. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/units.h"
#include "compiler/lang.h"
#include "fheplan/file.h"
#include "runtime/program/program.h"

fhr_status rp_decode(const void *buf, size_t len, rplan_program **out, char *msg, size_t cap);

static rp_loc loc_of_line(rp_linerec l)
{
    rp_loc r = {l.line, l.col, l.line, l.col + (l.len ? l.len : 1) - 1u};
    return r;
}

/* Reports a verifier refusal; positions come from the line table / declarations. */
static void report_vfail(rp_dctx *dc, const rplan_program *p, const rp_vfail *f)
{
    rp_loc at = {0, 0, 0, 0};
    if (f->instr >= 0 && (uint32_t)f->instr < p->ncode)
        at = loc_of_line(p->lines[f->instr]);
    else if (f->value >= 0 && (uint32_t)f->value < p->nvals) {
        const rp_value *v = &p->vals[f->value];
        at = loc_of_line((rp_linerec){v->line, v->col, v->len});
    }
    /* refusals that name a value or the program's length: the value's declaration, or
     * the first instruction past the limit (when the line table holds them) */
    unsigned vi, nins;
    if (!at.first_line && sscanf(f->msg, "value %u: ", &vi) == 1 && vi < p->nvals) {
        const rp_value *v = &p->vals[vi];
        at = loc_of_line((rp_linerec){v->line, v->col, v->len});
    } else if (!at.first_line && sscanf(f->msg, "program of %u instructions", &nins) == 1 &&
               p->ncode > RP_MAX_INSTRS && p->lines)
        at = loc_of_line(p->lines[RP_MAX_INSTRS]);
    rp_diag(dc, RPLAN_ERROR, at, "%s", f->msg);
    if (!f->note[0])
        return;
    rp_loc nl = {0, 0, 0, 0};
    if (f->note_instr >= 0 && (uint32_t)f->note_instr < p->ncode)
        nl = loc_of_line(p->lines[f->note_instr]);
    else if (f->note_value >= 0 && (uint32_t)f->note_value < p->nvals) {
        const rp_value *v = &p->vals[f->note_value];
        nl = loc_of_line((rp_linerec){v->line, v->col, v->len});
    }
    rp_diag(dc, RPLAN_NOTE, nl, "%s", f->note);
}

/* A budget refusal also says where the bytes come from (the value named first in the
 * message, where it is declared, and its size) and where the budget was set (its
 * declaration, or an override: fheplan's --budget). */
static void budget_notes(rp_dctx *dc, const rplan_program *p, const rp_vfail *f)
{
    const char *m = strstr(f->msg, " exceeds the budget of ");
    char ln[24] = "", sz[32];
    fhr_location loc;
    if (!m || sscanf(m + 23, "%23s", ln) != 1)
        return;
    if (ln[0] && ln[strlen(ln) - 1] == ':')
        ln[strlen(ln) - 1] = '\0';
    if (fhr_loc_parse(ln, &loc) != FHR_OK)
        return;
    const char *q = memchr(f->msg, '\'', (size_t)(m - f->msg));
    const char *qe = q ? memchr(q + 1, '\'', (size_t)(m - q - 1)) : NULL;
    for (uint32_t i = 0; qe && i < p->nvals; i++) {
        const char *nm = p->strs + p->vals[i].name;
        if (strlen(nm) != (size_t)(qe - q - 1) || memcmp(nm, q + 1, (size_t)(qe - q - 1)))
            continue;
        const rp_value *v = &p->vals[i];
        if (f->instr < 0 && f->value == (long)i)
            break; /* the error is at its declaration already */
        rp_diag(dc, RPLAN_NOTE, loc_of_line((rp_linerec){v->line, v->col, v->len}),
                "'%s' is %s at %s, declared here", nm,
                fhr_size_format(rp_value_charge(p, v, (uint8_t)fhr_loc_slot(loc)), FHR_SIZE_EXACT,
                                sz, sizeof sz), ln);
        break;
    }
    for (uint32_t i = 0; i < p->nbuds; i++) {
        const rp_budgetrec *b = &p->buds[i];
        if (b->slot != fhr_loc_slot(loc))
            continue;
        fhr_size_format(b->nbytes, FHR_SIZE_EXACT, sz, sizeof sz);
        if (b->line)
            rp_diag(dc, RPLAN_NOTE, (rp_loc){b->line, b->col, b->line, b->col},
                    "the budget of %s, %s, is set here", ln, sz);
        else
            rp_diag(dc, RPLAN_NOTE, (rp_loc){0, 0, 0, 0},
                    "the budget of %s, %s, is set by the caller, not the file (fheplan: "
                    "--budget %s=SIZE)", ln, sz, ln);
        break;
    }
}

fhr_status rplan_compile(const char *src, size_t len, const rplan_compile_opts *opts,
                         rplan_program **out, rplan_diags *diags)
{
    if (!out || (!src && len))
        return FHR_E_INVALID;
    *out = NULL;
    const char *fname = opts && opts->filename ? opts->filename : "<input>";
    rp_dctx dc = {diags, -1, fname, 0};
    dc.src = rp_diags_add_source(diags, fname, src ? src : "", len);
    char *buf = malloc(len + 1);
    rplan_program *p = rp_prog_new();
    if (!buf || !p) {
        free(buf);
        rplan_program_free(p);
        return FHR_E_NOMEM;
    }
    if (len)
        memcpy(buf, src, len);
    buf[len] = '\0';
    rp_parser ps;
    memset(&ps, 0, sizeof ps);
    ps.dc = &dc;
    ps.lx.buf = ps.lx.cur = ps.lx.line_start = buf;
    ps.lx.lim = buf + len;
    ps.lx.line = 1;
    ps.lx.dc = &dc;
    rp_parse_run(&ps);
    size_t nbefore = rplan_diags_count(diags);
    if (!dc.nerrors && ps.root)
        rp_sema(ps.root, &dc, opts, p);
    size_t nwarned = rplan_diags_count(diags); /* sema's warnings come last, after no error */
    rp_node_free(ps.root);
    fhr_status st = FHR_OK;
    if (dc.nerrors) {
        st = FHR_E_INVALID;
        goto done;
    }
    if (!rp_prog_str(p, fname, strlen(fname), &p->src_name)) {
        st = FHR_E_NOMEM;
        goto done;
    }
    rp_prog_drop_build_tables(p);
    if (!(opts && opts->strip_source) && len <= UINT32_MAX / 2) {
        p->src = buf;
        p->srclen = (uint32_t)len;
        buf = NULL;
    }
    rp_vfail f;
    st = rp_verify(p, &f);
    if (st) {
        /* warnings are for a program that is otherwise accepted: the refusal alone */
        rp_diags_remove_from(diags, nbefore, nwarned);
        report_vfail(&dc, p, &f);
        if (st == FHR_E_INFEASIBLE)
            budget_notes(&dc, p, &f);
        if (st != FHR_E_INFEASIBLE && st != FHR_E_NOMEM)
            st = FHR_E_INVALID;
    }
done:
    free(buf);
    if (st) {
        rplan_program_free(p);
        return st;
    }
    *out = p;
    return FHR_OK;
}

/* The one file reader (fheplan/file.h), with the failure as one diagnostic naming the
 * file. */
static fhr_status read_reporting(const char *path, char **b, size_t *n, rplan_diags *diags)
{
    fhr_error e;
    fhr_error_init(&e);
    fhr_status st = fhr_read_file(path, b, n, &e);
    const char *msg = e.message;
    if (st) {
        rp_dctx dc = {diags, -1, path, 0};
        rp_diag(&dc, RPLAN_ERROR, (rp_loc){0, 0, 0, 0}, "%s", msg);
    }
    return st;
}

fhr_status rplan_compile_file(const char *path, const rplan_compile_opts *opts,
                              rplan_program **out, rplan_diags *diags)
{
    if (!path || !out)
        return FHR_E_INVALID;
    char *b;
    size_t n;
    fhr_status st = read_reporting(path, &b, &n, diags);
    if (st)
        return st;
    rplan_compile_opts o = {0};
    if (opts)
        o = *opts;
    if (!o.filename)
        o.filename = path;
    st = rplan_compile(b, n, &o, out, diags);
    free(b);
    return st;
}

fhr_status rplan_load_mem(const void *buf, size_t len, const char *name, rplan_program **out,
                          rplan_diags *diags)
{
    if (!out)
        return FHR_E_INVALID;
    *out = NULL;
    char msg[512];
    rplan_program *p;
    rp_dctx dc = {diags, -1, name ? name : "<bytecode>", 0};
    fhr_status st = rp_decode(buf, len, &p, msg, sizeof msg);
    if (st) {
        dc.src = rp_diags_add_source(diags, dc.file, NULL, 0);
        rp_diag(&dc, RPLAN_ERROR, (rp_loc){0, 0, 0, 0}, "%s", msg);
        return st;
    }
    rp_vfail f;
    st = rp_verify(p, &f);
    if (st) {
        /* position the refusal with the file's own line table and source when it has them */
        const char *fname = dc.file;
        if (p->nstrs && p->strs[p->nstrs - 1] == '\0' && p->src_name < p->nstrs &&
            p->strs[p->src_name])
            fname = p->strs + p->src_name;
        dc.src = rp_diags_add_source(diags, fname, p->src, p->src ? p->srclen : 0);
        report_vfail(&dc, p, &f);
        rplan_program_free(p);
        return st == FHR_E_INFEASIBLE || st == FHR_E_NOMEM ? st : FHR_E_INVALID;
    }
    *out = p;
    return FHR_OK;
}

fhr_status rplan_load_file(const char *path, rplan_program **out, rplan_diags *diags)
{
    if (!path || !out)
        return FHR_E_INVALID;
    char *b;
    size_t n;
    fhr_status st = read_reporting(path, &b, &n, diags);
    if (st)
        return st;
    st = rplan_load_mem(b, n, path, out, diags);
    free(b);
    return st;
}

fhr_status rplan_write_file(const rplan_program *p, const char *path, fhr_error *err)
{
    void *b;
    size_t n;
    fhr_status st = rplan_write_mem(p, &b, &n);
    if (st)
        return st;
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(b, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = 0;
    free(b);
    if (!ok) {
        if (err) {
            err->status = FHR_E_INVALID;
            snprintf(err->message, sizeof err->message, "cannot write '%s': %s", path,
                     strerror(errno));
        }
        return FHR_E_INVALID;
    }
    return FHR_OK;
}
