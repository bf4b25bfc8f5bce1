/* base/version.c — the library's version, for callers that compare it with the
 * FHEPLAN_VERSION_NUMBER of the headers they were built with. */
#include "fheplan/version.h"

int fhr_version_number(void) { return FHEPLAN_VERSION_NUMBER; }
const char *fhr_version(void) { return FHEPLAN_VERSION; }
