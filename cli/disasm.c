/* cli/disasm.c — `fheplan disasm [--no-source] FILE`: the plan's bytecode (compiled first
 * when the file is source) as text on stdout, with its source lines unless --no-source. */
#include "cli/cli.h"
#include "cli/commands.h"

#include <stdio.h>

int cmd_disasm(cli *c)
{
    input in;
    int rc = load_input(c, c->files[0], &in, 0);
    if (rc == 0 && rplan_disasm(in.p, stdout, c->no_source ? RPLAN_DISASM_NOSOURCE : 0) != 0)
        rc = EX_FAIL; /* main reports the write error */
    input_free(&in);
    return rc;
}
