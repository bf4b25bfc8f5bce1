/* cli/compile.c — `fheplan compile FILE -o OUT`: the plan, loaded from source or bytecode,
 * written out as verified bytecode. */
#include "cli/cli.h"
#include "cli/commands.h"

#include <stdio.h>

int cmd_compile(cli *c)
{
    input in;
    int rc = load_input(c, c->files[0], &in, 0);
    if (rc == 0) {
        fhr_error e;
        fhr_error_init(&e);
        if (rplan_write_file(in.p, c->out, &e) != FHR_OK) {
            fprintf(stderr, "fheplan: cannot write '%s': %s\n", c->out, e.message);
            rc = EX_FAIL;
        }
        fhr_error_clear(&e);
    }
    input_free(&in);
    return rc;
}
