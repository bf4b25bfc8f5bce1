/* cli/commands.h — the subcommands cli/main.c dispatches to, one file each: check.c (and
 * check --world-size), run.c (and one MPI rank's run), compile.c, disasm.c, fmt.c. */
#ifndef FHEPLAN_CLI_COMMANDS_H
#define FHEPLAN_CLI_COMMANDS_H

#include "cli/cli.h"
#include "cli/world.h"

/* Each returns the command's exit code (see cli/cli.h). */
int cmd_check(cli *c);   /* every file of c->files, for c->rank */
int world_check(cli *c); /* cmd_check once per rank 0..c->world_size-1 */
int cmd_run(cli *c);
int world_run(cli *c, const fp_world *w); /* this process's rank of an MPI run */
int cmd_compile(cli *c);
int cmd_disasm(cli *c);
int cmd_fmt(cli *c);     /* every file of c->files ("-": standard input) */

#endif
