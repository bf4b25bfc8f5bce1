/* tests/fuzz/driver.c — a plain main() for the fuzz targets, for compilers without
 * libFuzzer (gcc) and for AFL++: runs LLVMFuzzerTestOneInput once per file named on
 * the command line (a directory: every file in it), or once over standard input when
 * no file is named (AFL++ feeds inputs that way). Exit status 0 when every input ran. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "fheplan/file.h"

static int run_stream(FILE *f, const char *name)
{
    char *buf;
    size_t n;
    fhr_error e;
    fhr_error_init(&e);
    if (fhr_read_stream(f, name, &buf, &n, &e) != FHR_OK) {
        fprintf(stderr, "%s\n", e.message);
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)buf, n);
    free(buf);
    return 0;
}

static int run_path(const char *path, size_t *count)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) {
            perror(path);
            return 1;
        }
        int rc = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            rc |= run_path(sub, count);
        }
        closedir(d);
        return rc;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    int rc = run_stream(f, path);
    fclose(f);
    (*count)++;
    return rc;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int rc = 0;
    if (argc < 2)
        return run_stream(stdin, "<stdin>");
    for (int i = 1; i < argc; i++)
        rc |= run_path(argv[i], &count);
    fprintf(stderr, "%s: %zu inputs run\n", argv[0], count);
    return rc;
}
