/* cli/sarif.h — check --sarif's log (cli/sarif.c): one SARIF 2.1.0 run with the rules of
 * rplan_rule_get and a result per error or warning of each file. */
#ifndef FHEPLAN_CLI_SARIF_H
#define FHEPLAN_CLI_SARIF_H

#include "fheplan/rplan.h"
#include "fheplan/vm.h"

#include <cjson/cJSON.h>
#include <stdio.h>

cJSON *sarif_new(void); /* the log, with no results yet (cJSON_Delete) */
/* One file: rc is check's exit code for it (2: unreadable), d its diagnostics, rep its
 * dry run (or NULL), text its source (columns count code points; NULL: bytes). */
void sarif_add(cJSON *log, const char *path, int rc, const rplan_diags *d,
               const rplan_vm_report *rep, const char *text, size_t len);
void sarif_print(cJSON *log, FILE *out);

#endif
