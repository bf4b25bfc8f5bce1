/* cli/compile.c — `fheplan compile FILE -o OUT`: the plan, loaded from source or bytecode,
 * written out as verified bytecode, atomically, never over its input. */
#include "cli/cli.h"
#include "cli/commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_compile(cli *c)
{
    input in;
    int rc = load_input(c, c->files[0], &in, 0);
    if (rc == 0) {
        void *b = NULL;
        size_t n = 0;
        fhr_error e;
        fhr_error_init(&e);
        if (rplan_write_mem(in.p, &b, &n) != FHR_OK) {
            fprintf(stderr, "fheplan: cannot serialise '%s': out of memory\n", in.path);
            rc = EX_SOFTWARE_;
        } else if (write_atomic(c->out, b, n) != 0) {
            fprintf(stderr, "fheplan: cannot write '%s': %s\n", c->out, strerror(errno));
            rc = EX_FAIL;
        }
        free(b);
        fhr_error_clear(&e);
    }
    input_free(&in);
    return rc;
}
