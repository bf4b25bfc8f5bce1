/* cuda/nvml.h — optional NVML observations, loaded with dlopen when the driver ships
 * libnvidia-ml: never required, never linked (internal to the CUDA backend). */
#ifndef FHEPLAN_NVML_H
#define FHEPLAN_NVML_H

#include <stdint.h>

typedef struct nvml_lib nvml_lib;

/* NULL when NVML is absent or fails to initialise. */
nvml_lib *nvml_open(void);
void nvml_close(nvml_lib *n);
/* Device memory as NVML sees it (every process and context on the device), by PCI bus
 * id ("0000:17:00.0"). 0 on success. */
int nvml_memory(nvml_lib *n, const char *pci_bus_id, uint64_t *used, uint64_t *total);

#endif
