/* cuda/staging_emu.h — one staged copy through the pipeline with any backend's device as
 * the DMA engine (the emulated device in the tests and the host-side bench). Internal. */
#ifndef FHEPLAN_STAGING_EMU_H
#define FHEPLAN_STAGING_EMU_H

#include "cuda/copy_threads.h"
#include "cuda/staging_pipeline.h"

/* A stager on b's cuda:0: a stream, slots of shape->max_chunk pinned bytes (made when
 * first used), their events, and cp's threads for the host stages. */
typedef struct staging_emu staging_emu;
fhr_status staging_emu_create(fhr_backend *b, copy_pool *cp, const staging_shape *shape,
                              staging_emu **out, fhr_error *err);
/* n bytes between dev (at cuda:0) and host (pageable), as the CUDA backend's staged copy:
 * cut by staging_plan_make, ordered by staging_run (a copy staging_small takes: by
 * staging_small_plan_make and staging_small_run, the caller alone; any other copy is
 * staged, whatever its size); returns once every host stage and every DMA is done. *first_dma_ns (may be NULL): nanoseconds from the call to the
 * first DMA's start. */
fhr_status staging_emu_copy(staging_emu *x, void *dev, void *host, size_t n, int to_device,
                            uint64_t *first_dma_ns, fhr_error *err);
/* 1 when no host stage of any slot is pending (always so after staging_emu_copy). */
int staging_emu_idle(const staging_emu *x);
void staging_emu_destroy(staging_emu *x);

#endif
