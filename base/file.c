/* base/file.c — the library's one whole-file reader (fheplan/file.h): a stream read in
 * doubling chunks, NUL-terminated, with failures that name the file. */
#include "fheplan/file.h"
#include "base/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

fhr_status fhr_read_stream(FILE *f, const char *name, char **out, size_t *len, fhr_error *err)
{
    if (!out || !len)
        return fhr_fail(err, FHR_E_INVALID, "read: out and len are required");
    *out = NULL;
    *len = 0;
    if (!f)
        return fhr_fail(err, FHR_E_INVALID, "read '%.300s': no stream", name ? name : "");
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *nb = cap < (SIZE_MAX - 1) / 2 ? realloc(buf, cap * 2 + 1) : NULL;
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (!buf)
        return fhr_fail(err, FHR_E_NOMEM, "out of memory reading '%.300s'", name ? name : "");
    if (ferror(f)) {
        int e = errno;
        free(buf);
        return fhr_fail(err, FHR_E_INVALID, "cannot read '%.300s': %s", name ? name : "",
                        e ? strerror(e) : "read error");
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return FHR_OK;
}

fhr_status fhr_read_file(const char *path, char **out, size_t *len, fhr_error *err)
{
    if (out)
        *out = NULL;
    if (!path)
        return fhr_fail(err, FHR_E_INVALID, "read: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f)
        return fhr_fail(err, FHR_E_INVALID, "cannot read '%.300s': %s", path, strerror(errno));
    fhr_status st = fhr_read_stream(f, path, out, len, err);
    fclose(f);
    return st;
}
