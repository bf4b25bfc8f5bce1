/* cli/input.c — a plan file as the command reads it: source (compiled with the command's
 * budgets and rank) or bytecode, and one VM run whose failure is shown at its source line. */
#include "cli/cli.h"
#include "compiler/lang.h"
#include "fheplan/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- input ------------------------------------------------------------------------ */

/* Standard input as first read: check --world-size compiles "-" once per rank, and every
 * rank must see the same text (stdin can be read only once). */
static char *stdin_text;
static size_t stdin_len;
static int stdin_done;

void input_stdin_release(void)
{
    free(stdin_text);
    stdin_text = NULL;
    stdin_len = 0;
    stdin_done = 0;
}

/* The whole file, or standard input for "-", through the library's one reader; NULL
 * with the reason in *e (which may be NULL). */
static char *slurp(const char *path, size_t *len, fhr_error *e)
{
    char *buf = NULL;
    if (strcmp(path, "-")) {
        fhr_read_file(path, &buf, len, e);
        return buf;
    }
    if (!stdin_done) {
        if (fhr_read_stream(stdin, "standard input", &stdin_text, &stdin_len, e) != FHR_OK)
            return NULL;
        stdin_done = 1;
    }
    buf = malloc(stdin_len + 1);
    if (!buf) {
        if (e) {
            e->status = FHR_E_NOMEM;
            snprintf(e->message, sizeof e->message, "cannot copy standard input");
        }
        return NULL;
    }
    memcpy(buf, stdin_text, stdin_len);
    buf[stdin_len] = 0;
    *len = stdin_len;
    return buf;
}

void input_free(input *in)
{
    rplan_program_free(in->p);
    rplan_diags_free(in->d);
    free(in->text);
    memset(in, 0, sizeof *in);
}

/* Loads source or bytecode. Returns 0, or an exit code (diagnostics printed unless
 * quiet_diags, in which case they stay in in->d for JSON). */
int load_input(const cli *c, const char *path, input *in, int quiet_diags)
{
    memset(in, 0, sizeof *in);
    in->path = path;
    in->d = rplan_diags_new();
    if (!in->d)
        return EX_SOFTWARE_;
    size_t len = 0;
    fhr_error e;
    fhr_error_init(&e);
    char *buf = slurp(path, &len, &e);
    if (!buf) {
        snprintf(in->error, sizeof in->error, "%s", e.message);
        fprintf(stderr, "fheplan: %s\n", in->error); /* with --json too: stderr stays human */
        return EX_NOINPUT_;
    }
    fhr_status st;
    if (rplan_is_bytecode(buf, len)) {
        st = rplan_load_mem(buf, len, strcmp(path, "-") ? path : "<stdin>", &in->p, in->d);
        free(buf);
        /* the source text, when the file it came from is still around */
        if (in->p && rplan_source_name(in->p)[0] && strcmp(rplan_source_name(in->p), "-"))
            in->text = slurp(rplan_source_name(in->p), &in->len, NULL);
    } else {
        rplan_compile_opts o = {.filename = strcmp(path, "-") ? path : "<stdin>",
                                .budget_override = c->budgets,
                                .nbudget_override = c->nbudgets, .rank = c->rank,
                                .world_size = c->world_size, .warn_off = c->warn_off,
                                .nwarn_off = c->nwarn_off, .warn_error = c->warn_error};
        in->text = buf;
        in->len = len;
        in->compiled = 1;
        st = rplan_compile(buf, len, &o, &in->p, in->d);
    }
    if (!quiet_diags)
        rplan_diags_render(in->d, stderr, c->colour);
    if (st == FHR_OK)
        return 0;
    return st == FHR_E_NOMEM ? EX_SOFTWARE_ : EX_FAIL;
}

const char *input_name(const char *path)
{
    return strcmp(path, "-") ? path : "<stdin>";
}

/* A runtime diagnostic at a source position, in the compiler's layout (check's): the
 * same renderer, so line ends, tabs, bad bytes and colour are treated alike. */
static void render_at(const cli *c, const input *in, uint32_t line, uint32_t col, const char *msg)
{
    const char *name = input_name(in->path);
    rplan_diags *d = rplan_diags_new();
    if (!d || rp_diags_add_error_at(d, name, in->text, in->len, line, col, msg) != 0)
        fprintf(stderr, "%s: error: %s\n", name, msg);
    else
        rplan_diags_render(d, stderr, c->colour);
    rplan_diags_free(d);
}

/* ---- one VM run ------------------------------------------------------------------- */

int run_vm(const cli *c, input *in, fhr_backend *b, rplan_vm_opts *o, rplan_vm **vm_out,
           rplan_vm_report **rep)
{
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    *rep = NULL;
    fhr_status st = rplan_vm_create(in->p, b, o, &vm, &e);
    if (st) {
        if (!c->json)
            render_at(c, in, 0, 0, e.message);
        /* refused before anything ran: a report that says so and carries the error, so
         * that --json documents it like a refusal by rplan_vm_run */
        *rep = calloc(1, sizeof **rep);
        if (*rep) {
            (*rep)->refused = 1;
            (*rep)->explain = o->mode == RPLAN_VM_EXPLAIN;
            (*rep)->scale = o->scale ? o->scale : 1;
            (*rep)->instr = -1;
            (*rep)->status = st;
            snprintf((*rep)->device, sizeof (*rep)->device, "%s", b->ops->name);
            snprintf((*rep)->message, sizeof (*rep)->message, "%s",
                     e.message[0] ? e.message : fhr_status_name(st));
        }
        fhr_error_clear(&e);
        return st == FHR_E_NOMEM ? EX_SOFTWARE_ : EX_FAIL;
    }
    st = rplan_vm_run(vm, rep, &e);
    fhr_error_clear(&e);
    *vm_out = vm;
    if (!*rep)
        return EX_SOFTWARE_;
    if (!(*rep)->ok && !c->json) {
        char msg[900];
        if ((*rep)->scope[0])
            snprintf(msg, sizeof msg, "%s (in '%s')", (*rep)->message, (*rep)->scope);
        else
            snprintf(msg, sizeof msg, "%s", (*rep)->message);
        render_at(c, in, (*rep)->line, (*rep)->col, msg);
    }
    return (*rep)->ok ? EX_OK : EX_FAIL;
}
