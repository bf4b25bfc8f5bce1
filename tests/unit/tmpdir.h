/* tests/unit/tmpdir.h — one temporary directory per test process (Criterion runs each test
 * in its own), under $TMPDIR or /tmp, removed with everything in it when the test exits:
 * suites running side by side on one machine never share a file name. */
#ifndef FHEPLAN_TESTS_TMPDIR_H
#define FHEPLAN_TESTS_TMPDIR_H

#define _XOPEN_SOURCE_EXTENDED 1
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir_path_[512];

static int tmpdir_rm_(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

static void tmpdir_cleanup_(void)
{
    if (tmpdir_path_[0])
        nftw(tmpdir_path_, tmpdir_rm_, 16, FTW_DEPTH | FTW_PHYS);
    tmpdir_path_[0] = 0;
}

/* The directory, made on first use. */
static const char *tmpdir_get(void)
{
    if (!tmpdir_path_[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir_path_, sizeof tmpdir_path_, "%s/fheplan-test-XXXXXX",
                 base && *base ? base : "/tmp");
        cr_assert_not_null(mkdtemp(tmpdir_path_), "mkdtemp %s", tmpdir_path_);
        atexit(tmpdir_cleanup_);
    }
    return tmpdir_path_;
}

/* DIR/name, in one of 16 rotating buffers (enough for the paths of one command). */
static const char *tmp_path(const char *name)
{
    static char ring[16][600];
    static unsigned k;
    char *b = ring[k++ % 16];
    snprintf(b, sizeof ring[0], "%s/%s", tmpdir_get(), name);
    return b;
}

#endif
