/* python/src/dlpack_abi.h — the DLPack exchange structures, written from the public
 * DLPack specification (the unversioned "dltensor" capsule form that NumPy, PyTorch and
 * CuPy all produce and accept). Only the layout matters: these are plain C structs. */
#ifndef FHPY_DLPACK_ABI_H
#define FHPY_DLPACK_ABI_H

#include <stdint.h>

/* Device kinds this binding produces or accepts. */
enum {
    FHPY_DL_CPU = 1,
    FHPY_DL_CUDA = 2,
    FHPY_DL_CUDA_HOST = 3,
    FHPY_DL_CUDA_MANAGED = 13
};

/* Element kinds. */
enum {
    FHPY_DL_INT = 0,
    FHPY_DL_UINT = 1,
    FHPY_DL_FLOAT = 2,
    FHPY_DL_BFLOAT = 4,
    FHPY_DL_COMPLEX = 5,
    FHPY_DL_BOOL = 6
};

typedef struct fhpy_dl_device {
    int32_t device_type; /* an enum of int size in the specification */
    int32_t device_id;
} fhpy_dl_device;

typedef struct fhpy_dl_dtype {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} fhpy_dl_dtype;

typedef struct fhpy_dl_tensor {
    void *data;
    fhpy_dl_device device;
    int32_t ndim;
    fhpy_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides;     /* in elements; NULL: compact row-major */
    uint64_t byte_offset;
} fhpy_dl_tensor;

typedef struct fhpy_dl_managed {
    fhpy_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct fhpy_dl_managed *self);
} fhpy_dl_managed;

/* Capsule names: a producer hands out "dltensor"; the consumer renames it when it takes
 * ownership, after which the capsule's destructor must leave the tensor alone. */
#define FHPY_DL_NAME "dltensor"
#define FHPY_DL_USED "used_dltensor"

#endif
