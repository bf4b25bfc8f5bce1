/* tests/unit/test_backend_open.c — fhr_backend_open: spec parsing, the environment
 * variable, errors that name the spec, and "auto" falling back to the emulated device. */
#include "fheplan/backend.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fhr_backend *open_ok(const char *spec, const char *name, int ndev)
{
    fhr_backend *b = NULL;
    fhr_error err;
    fhr_error_init(&err);
    cr_assert_eq(fhr_backend_open(spec, &b, &err), FHR_OK, "%s: %s", spec, err.message);
    cr_assert_str_eq(b->ops->name, name, "spec %s", spec ? spec : "(null)");
    cr_assert_eq(b->ops->device_count(b), ndev, "spec %s", spec ? spec : "(null)");
    return b;
}

Test(backend_open, good_specs)
{
    struct { const char *spec, *name; int ndev; } cases[] = {
        {"emu", "emu", 1},     {"emu:1", "emu", 1},     {"emu:4", "emu", 4},
        {"emu:62", "emu", 62}, {"model", "model", 1},   {"model:8", "model", 8},
        {"emu,virtual", "emu", 1}, {"emu:3,virtual", "emu", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fhr_backend *b = open_ok(cases[i].spec, cases[i].name, cases[i].ndev);
        int virt = -1;
        fhr_backend_clock_ns(b, &virt);
        cr_assert_eq(virt, strstr(cases[i].spec, ",virtual") != NULL, "%s", cases[i].spec);
        fhr_backend_destroy(b);
    }
}

Test(backend_open, bad_specs_are_named_in_the_error)
{
    const char *bad[] = {"", "emu:", "emu:0", "emu:63", "emu:2x", "emu:-1", "emu:+2", "emux",
                         "gpu", "model:", "model:1:2", "cuda:0", "AUTO", " emu", "emu,",
                         "emu:2,virt", "emu:0,virtual", "model,virtual", "emu,virtual,virtual",
                         "emu:2,virtualx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fhr_backend *b = NULL;
        fhr_error err;
        fhr_error_init(&err);
        cr_assert_eq(fhr_backend_open(bad[i], &b, &err), FHR_E_INVALID, "spec '%s'", bad[i]);
        char quoted[80];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        cr_assert(strstr(err.message, quoted), "'%s' not named in: %s", bad[i], err.message);
        cr_assert_null(b);
    }
}

Test(backend_open, null_spec_reads_the_environment)
{
    setenv("FHEPLAN_DEVICE", "model:5", 1);
    fhr_backend_destroy(open_ok(NULL, "model", 5));
    setenv("FHEPLAN_DEVICE", "emu:2", 1);
    fhr_backend_destroy(open_ok(NULL, "emu", 2));
    setenv("FHEPLAN_DEVICE", "bogus", 1);
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_open(NULL, &b, NULL), FHR_E_INVALID);
}

/* "auto" is CUDA exactly when the CUDA backend can be created; otherwise emu:1. */
static void check_auto(const char *spec)
{
    fhr_backend *cuda = NULL, *b = NULL;
    fhr_error err;
    fhr_error_init(&err);
    fhr_status cst = fhr_backend_cuda_create(&cuda, &err);
    if (cst == FHR_OK)
        fhr_backend_destroy(cuda);
    else
        cr_assert_eq(cst, FHR_E_UNSUPPORTED, "no GPU must read as unsupported: %s", err.message);
    cr_assert_eq(fhr_backend_open(spec, &b, NULL), FHR_OK);
    cr_assert_str_eq(b->ops->name, cst == FHR_OK ? "cuda" : "emu");
    if (cst != FHR_OK)
        cr_assert_eq(b->ops->device_count(b), 1);
    fhr_backend_destroy(b);
}

Test(backend_open, auto_falls_back_to_emu_without_a_gpu) { check_auto("auto"); }

Test(backend_open, unset_environment_means_auto)
{
    unsetenv("FHEPLAN_DEVICE");
    check_auto(NULL);
}

Test(backend_open, cuda_without_a_device_is_unsupported_with_a_reason)
{
    fhr_backend *b = NULL;
    fhr_error err;
    fhr_error_init(&err);
    fhr_status st = fhr_backend_open("cuda", &b, &err);
    if (st == FHR_OK) {
        cr_assert_str_eq(b->ops->name, "cuda");
        cr_assert_geq(b->ops->device_count(b), 1);
        fhr_backend_destroy(b);
        return;
    }
    cr_assert_eq(st, FHR_E_UNSUPPORTED);
    cr_assert_gt(strlen(err.message), 10, "%s", err.message);
}

Test(backend_open, wrappers_reject_null)
{
    fhr_stream *s = NULL;
    cr_assert_eq(fhr_stream_create(NULL, fhr_loc_host(), &s, NULL), FHR_E_INVALID);
    cr_assert_eq(fhr_stream_sync(NULL, NULL, NULL), FHR_E_INVALID);
    cr_assert_eq(fhr_backend_open("emu", NULL, NULL), FHR_E_INVALID);
    fhr_stream_destroy(NULL, NULL);
    fhr_backend_destroy(NULL);
}
