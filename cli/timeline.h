/* cli/timeline.h — run --timeline's page (cli/timeline.c): a run drawn from its trace. */
#ifndef FHEPLAN_CLI_TIMELINE_H
#define FHEPLAN_CLI_TIMELINE_H

#include "fheplan/vm.h"

/* Writes path atomically (through a temporary file; "-" is standard output): one
 * self-contained HTML file (inline SVG and CSS, nothing loaded from
 * elsewhere) drawing, over the run's time, the stages, one lane per stream with its
 * transfers and bodies, the host's plans and requests, the evictions, and per location
 * the charged bytes against the budget. trace_json is rplan_vm_trace_json's document;
 * rep (may be NULL) gives the summary line. 0, or -1 with errno set. */
int timeline_write(const char *path, const char *plan, const rplan_vm_report *rep,
                   const char *trace_json);

#endif
