/* cli/format.h — human units for the command's reports: bytes in powers of 1024, times
 * in s, ms or us, and counted nouns; JSON strings made well-formed UTF-8. */
#ifndef FHEPLAN_CLI_FORMAT_H
#define FHEPLAN_CLI_FORMAT_H

#include <stddef.h>
#include <stdint.h>

const char *fmt_bytes(uint64_t b, char *buf, size_t cap);
const char *fmt_time(double s, char *buf, size_t cap);
/* "1 request", "2 requests": one when n is 1, else many (for report lines). */
const char *plural(uint64_t n, const char *one, const char *many);

/* Replaces, in every string and key of o and what follows and is inside it, each byte that
 * is not part of well-formed UTF-8 by U+FFFD, so the JSON printed is UTF-8 whatever the
 * input (a file name, a program's embedded source name) was. */
struct cJSON;
void json_clean_utf8(struct cJSON *o);

#endif
