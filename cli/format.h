/* cli/format.h — human units for the command's reports: bytes in powers of 1024, times
 * in s, ms or us, and counted nouns. */
#ifndef FHEPLAN_CLI_FORMAT_H
#define FHEPLAN_CLI_FORMAT_H

#include <stddef.h>
#include <stdint.h>

const char *fmt_bytes(uint64_t b, char *buf, size_t cap);
const char *fmt_time(double s, char *buf, size_t cap);
/* "1 request", "2 requests": one when n is 1, else many (for report lines). */
const char *plural(uint64_t n, const char *one, const char *many);

#endif
