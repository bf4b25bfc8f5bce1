/* tests/gpu/gpu_backend.h — the one way the GPU suites open the real CUDA backend: a test
 * skips (with the backend's reason) where no usable device is visible. */
#ifndef FHEPLAN_TESTS_GPU_BACKEND_H
#define FHEPLAN_TESTS_GPU_BACKEND_H

#include "fheplan/backend.h"

#include <criterion/criterion.h>

/* Criterion forks each test, so every test creates its own backend (and CUDA context). */
static inline fhr_backend *cuda_or_skip(void)
{
    fhr_backend *b = NULL;
    fhr_error err;
    fhr_error_init(&err);
    fhr_status st = fhr_backend_cuda_create(&b, &err);
    if (st == FHR_E_UNSUPPORTED)
        cr_skip("%s", err.message);
    cr_assert_eq(st, FHR_OK, "%s", err.message);
    cr_assert_str_eq(b->ops->name, "cuda");
    return b;
}

#endif
