/* tests/unit/compile_ok.h — compiles a plan that the test expects to be valid, failing the
 * test with the rendered diagnostics when it is not; filename is what they name. */
#ifndef FHEPLAN_TESTS_COMPILE_OK_H
#define FHEPLAN_TESTS_COMPILE_OK_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fheplan/rplan.h"

static inline rplan_program *compile_ok_named(const char *src, const char *filename)
{
    rplan_program *p = NULL;
    rplan_diags *d = rplan_diags_new();
    rplan_compile_opts o = {.filename = filename};
    fhr_status st = rplan_compile(src, strlen(src), &o, &p, d);
    char *txt = rplan_diags_render_string(d);
    cr_assert_eq(st, FHR_OK, "%s", txt ? txt : "");
    free(txt);
    rplan_diags_free(d);
    return p;
}

#endif
