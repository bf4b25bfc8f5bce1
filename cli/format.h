/* cli/format.h — human units for the command's reports: bytes in powers of 1024, times
 * in s, ms or us. */
#ifndef FHEPLAN_CLI_FORMAT_H
#define FHEPLAN_CLI_FORMAT_H

#include <stddef.h>
#include <stdint.h>

const char *fmt_bytes(uint64_t b, char *buf, size_t cap);
const char *fmt_time(double s, char *buf, size_t cap);

#endif
