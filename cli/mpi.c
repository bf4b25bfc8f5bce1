/* cli/mpi.c — MPI under the fheplan command: binding each rank to its GPU before CUDA
 * starts, MPI_Init/MPI_Finalize, and the gather of the ranks' reports at rank 0 (MPI_Gather
 * of the lengths, then MPI_Gatherv). Built without MPI (make MPI=0), every rank is alone. */
#include "cli/world.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FHEPLAN_HAVE_MPI
#include <mpi.h>
#endif

int fp_world_have_mpi(void)
{
#ifdef FHEPLAN_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    char *end;
    long v = s && *s ? strtol(s, &end, 10) : -1;
    return s && *s && !*end && v >= 0 && v < (1L << 30) ? (int)v : dflt;
}

/* The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries: the variable's own
 * list when set, else one entry per GPU the NVIDIA driver lists. Returns the count. */
static int visible_gpus(char ids[][32], int cap)
{
    int n = 0;
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd) {
        const char *p = cvd;
        while (*p && n < cap) {
            size_t k = strcspn(p, ",");
            if (k && k < 32) {
                memcpy(ids[n], p, k);
                ids[n++][k] = 0;
            }
            p += k + (p[k] == ',');
        }
        return n;
    }
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    n = n < cap ? n : cap;
    for (int i = 0; i < n; i++)
        snprintf(ids[i], 32, "%d", i);
    return n;
}

/* Rotates the visible GPUs by the local rank: plan location cuda:k is then GPU
 * (local_rank + k) mod n of the host, so cuda:0 is the rank's own. */
static void bind_gpu(fp_world *w)
{
    const char *b = getenv("FHEPLAN_BIND");
    if (b && strcmp(b, "0") == 0)
        return;
    char ids[64][32];
    int n = visible_gpus(ids, 64);
    if (n <= 0)
        return;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        const char *id = ids[(w->local_rank + i) % n];
        int k = snprintf(w->bind + used, sizeof w->bind - used, "%s%s", i ? "," : "", id);
        if (k < 0 || (size_t)k >= sizeof w->bind - used) {
            w->bind[used] = 0; /* keep the entries that fit: the first is the rank's own */
            break;
        }
        used += (size_t)k;
    }
    setenv("CUDA_VISIBLE_DEVICES", w->bind, 1);
}

int fp_world_init(int *argc, char ***argv, fp_world *w)
{
    memset(w, 0, sizeof *w);
    w->size = 1;
    int size = env_int("OMPI_COMM_WORLD_SIZE", -1);
    if (size < 1)
        return 0; /* not started by mpirun: an ordinary process */
    w->local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
#ifdef FHEPLAN_HAVE_MPI
    bind_gpu(w);
    MPI_Init(argc, argv);
    /* errors come back as values; a failing rank still reaches every collective */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    w->mpi = 1;
    return 0;
#else
    (void)argc;
    (void)argv;
    (void)bind_gpu;
    if (size == 1)
        return 0;
    fprintf(stderr, "fheplan: started as one of %d MPI ranks, but built without MPI "
                    "(install Open MPI with `make deps` and rebuild with MPI=1)\n", size);
    return -1;
#endif
}

void fp_world_finish(fp_world *w)
{
#ifdef FHEPLAN_HAVE_MPI
    if (w->mpi)
        MPI_Finalize();
#endif
    w->mpi = 0;
}

char **fp_world_gather(const fp_world *w, const char *doc)
{
    if (!w->mpi) {
        char **all = calloc(1, sizeof *all);
        if (all && doc)
            all[0] = strdup(doc);
        return all;
    }
#ifdef FHEPLAN_HAVE_MPI
    int len = doc ? (int)strlen(doc) + 1 : 0;
    int root = w->rank == 0;
    int *lens = root ? calloc((size_t)w->size, sizeof *lens) : NULL;
    int *displs = root ? calloc((size_t)w->size, sizeof *displs) : NULL;
    if (root && (!lens || !displs))
        MPI_Abort(MPI_COMM_WORLD, 70); /* the gather cannot go on without them */
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char *buf = NULL;
    if (root) {
        size_t total = 0;
        for (int r = 0; r < w->size; r++) {
            displs[r] = (int)total;
            total += (size_t)lens[r];
        }
        buf = malloc(total ? total : 1);
        if (!buf)
            MPI_Abort(MPI_COMM_WORLD, 70);
    }
    MPI_Gatherv(doc, len, MPI_CHAR, buf, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
    char **all = NULL;
    if (root) {
        all = calloc((size_t)w->size, sizeof *all);
        for (int r = 0; all && r < w->size; r++)
            if (lens[r] > 0) {
                buf[displs[r] + lens[r] - 1] = 0;
                all[r] = strdup(buf + displs[r]);
            }
    }
    free(buf);
    free(lens);
    free(displs);
    return all;
#else
    return NULL;
#endif
}
