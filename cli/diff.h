/* cli/diff.h — a unified diff of two texts by lines (cli/diff.c), for fmt --check. */
#ifndef FHEPLAN_CLI_DIFF_H
#define FHEPLAN_CLI_DIFF_H

#include <stdio.h>

/* Writes to out the unified diff (three lines of context) turning a into b, headed by
 * "--- name" and "+++ name (formatted)"; a last line without a newline differs from the
 * same line with one and is followed by "\ No newline at end of file". 0 when they are
 * equal, 1 when a diff was written, -1 when out of memory. */
int diff_unified(FILE *out, const char *name, const char *a, const char *b);

#endif
