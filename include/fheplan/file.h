/* fheplan/file.h — reading a whole file or stream into memory: the one reader behind the
 * compiler, the command line, the fuzz driver, the benchmarks and the tests. */
#ifndef FHEPLAN_FILE_H
#define FHEPLAN_FILE_H

#include "fheplan/types.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reads all of f into a malloc'd buffer (free()), NUL-terminated after its *len bytes.
 * name is used in messages. FHR_E_NOMEM, or FHR_E_INVALID when reading fails; *out is
 * then NULL. */
FHR_API fhr_status fhr_read_stream(FILE *f, const char *name, char **out, size_t *len,
                                   fhr_error *err);
/* The same for the file at path ("cannot read 'path': reason" when it cannot be opened). */
FHR_API fhr_status fhr_read_file(const char *path, char **out, size_t *len, fhr_error *err);

#ifdef __cplusplus
}
#endif
#endif
