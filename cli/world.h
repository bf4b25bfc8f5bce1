/* cli/world.h — fheplan as one rank of an MPI job (mpirun -n R fheplan run PLAN): device
 * binding, MPI start and end, the gather of every rank's report at rank 0 (cli/mpi.c),
 * and the combined report rank 0 prints (cli/world.c). The library knows nothing of
 * MPI: each rank is an ordinary process with its own manager and VM. */
#ifndef FHEPLAN_CLI_WORLD_H
#define FHEPLAN_CLI_WORLD_H

#include <stddef.h>

typedef struct fp_world {
    int mpi;        /* 1: this process is one rank of an MPI job (MPI initialised) */
    int rank, size; /* 0 and 1 when not under MPI */
    int local_rank; /* rank among the job's processes on this host */
    char bind[128]; /* CUDA_VISIBLE_DEVICES as set for this rank ("" untouched) */
} fp_world;

/* Call first in main, before anything may initialise CUDA. Under mpirun (the launcher's
 * OMPI_COMM_WORLD_SIZE is set) it binds the rank to its GPU by rotating
 * CUDA_VISIBLE_DEVICES by the local rank (plan cuda:0 is then GPU <local rank>; unless
 * FHEPLAN_BIND=0) and initialises MPI. Returns 0, or -1 with a message on stderr when the
 * process was started by mpirun but fheplan was built without MPI. */
int fp_world_init(int *argc, char ***argv, fp_world *w);
/* Ends MPI (when started). Every rank calls it. */
void fp_world_finish(fp_world *w);
/* 1 when fheplan was built with MPI. */
int fp_world_have_mpi(void);

/* Collective (every rank calls it): sends `doc` (NUL-terminated; NULL: none) to rank 0.
 * On rank 0 returns w->size malloc'd strings (NULL where a rank sent none; free each and
 * the array); NULL on the other ranks. */
char **fp_world_gather(const fp_world *w, const char *doc);

/* What one rank sends: {"rank", "host", "exit", "bind", "output"} where output is the
 * rank's JSON document (report or diagnostics), or null. malloc'd. */
char *fp_world_rank_doc(const fp_world *w, int exit_code, const char *output);
/* At rank 0: prints the combined report of a run — per rank and totals (bytes summed,
 * time the slowest rank's, throughput = total bytes / that time) — as text on stdout
 * (and each failing rank's error on stderr, naming the rank), or as one JSON document.
 * Returns the exit status: 0 when every rank succeeded, else the highest rank status. */
int fp_world_print_run(const char *file, int size, char *const *docs, int json, int colour);

#endif
