/* cuda/nvml.c — optional NVML observations through dlopen: the device's memory use as
 * NVML reports it, which includes contexts and allocations outside the manager. */
#include "cuda/nvml.h"

#include <dlfcn.h>
#include <stdlib.h>

typedef struct nvml_memory_t {
    unsigned long long total, free, used;
} nvml_memory_t;

typedef int (*init_fn)(void);
typedef int (*shutdown_fn)(void);
typedef int (*by_pci_fn)(const char *, void **);
typedef int (*meminfo_fn)(void *, nvml_memory_t *);

struct nvml_lib {
    void *so;
    shutdown_fn shutdown;
    by_pci_fn by_pci;
    meminfo_fn meminfo;
};

nvml_lib *nvml_open(void)
{
    void *so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!so)
        return NULL;
    nvml_lib *n = calloc(1, sizeof *n);
    init_fn init = (init_fn)dlsym(so, "nvmlInit_v2");
    if (n) {
        n->so = so;
        n->shutdown = (shutdown_fn)dlsym(so, "nvmlShutdown");
        n->by_pci = (by_pci_fn)dlsym(so, "nvmlDeviceGetHandleByPciBusId_v2");
        n->meminfo = (meminfo_fn)dlsym(so, "nvmlDeviceGetMemoryInfo");
    }
    if (!n || !init || !n->shutdown || !n->by_pci || !n->meminfo || init() != 0) {
        free(n);
        dlclose(so);
        return NULL;
    }
    return n;
}

void nvml_close(nvml_lib *n)
{
    if (!n)
        return;
    n->shutdown();
    dlclose(n->so);
    free(n);
}

int nvml_memory(nvml_lib *n, const char *pci_bus_id, uint64_t *used, uint64_t *total)
{
    void *dev = NULL;
    nvml_memory_t m;
    if (!n || n->by_pci(pci_bus_id, &dev) != 0 || n->meminfo(dev, &m) != 0)
        return -1;
    *used = m.used;
    *total = m.total;
    return 0;
}
