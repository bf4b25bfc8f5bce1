/* tests/oracle/oracle.h — the differential oracle's generator (tests/oracle/gen.c). */
#ifndef FHEPLAN_TESTS_ORACLE_H
#define FHEPLAN_TESTS_ORACLE_H

#include <stdint.h>

/* The next number of a splitmix64 stream whose state is *s. */
uint64_t splitmix64(uint64_t *s);

/* A random valid rplan program (malloc'd text) for seed; *ndev: the devices it names
 * (1 or 2). Every size and reservation is a whole number of KiB, or for a limb-cut value
 * of limbs of a multiple of 128 bytes (whole words at every --scale up to 16) or, now and
 * then, of an odd number of 8-byte words. */
char *oracle_generate(uint64_t seed, int *ndev);

#endif
