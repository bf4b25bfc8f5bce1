/* tests/unit/test_file.c — the one whole-file reader (fheplan/file.h): contents past the
 * first chunk come back byte for byte and NUL-terminated, an empty file is an empty
 * string, and a missing file or a directory fails with a message naming it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fheplan/file.h"

Test(file, reads_every_byte_past_the_first_chunk)
{
    char path[] = "/tmp/fheplan-file-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    size_t n = 200000 + 17; /* more than three 64 KiB chunks */
    unsigned char *want = malloc(n);
    cr_assert_not_null(want);
    for (size_t i = 0; i < n; i++)
        want[i] = (unsigned char)(i * 131 + (i >> 9));
    cr_assert_eq(write(fd, want, n), (ssize_t)n);
    close(fd);
    char *got = NULL;
    size_t len = 0;
    cr_assert_eq(fhr_read_file(path, &got, &len, NULL), FHR_OK);
    cr_assert_eq(len, n);
    cr_assert_eq(memcmp(got, want, n), 0);
    cr_assert_eq(got[n], '\0');
    free(got);
    /* empty */
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(fhr_read_file(path, &got, &len, NULL), FHR_OK);
    cr_assert_eq(len, 0);
    cr_assert_str_eq(got, "");
    free(got);
    unlink(path);
    free(want);
}

Test(file, missing_files_and_directories_fail_naming_the_path)
{
    fhr_error e;
    fhr_error_init(&e);
    char *got = (char *)1;
    size_t len = 7;
    cr_assert_eq(fhr_read_file("/nonexistent/x.rplan", &got, &len, &e), FHR_E_INVALID);
    cr_assert_null(got);
    cr_assert(strstr(e.message, "cannot read '/nonexistent/x.rplan': "), "%s", e.message);
    cr_assert_eq(fhr_read_file("/tmp", &got, &len, &e), FHR_E_INVALID);
    cr_assert_null(got);
    cr_assert(strstr(e.message, "'/tmp'"), "%s", e.message);
    cr_assert_eq(fhr_read_file(NULL, &got, &len, &e), FHR_E_INVALID);
}
