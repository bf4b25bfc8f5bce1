/* examples/cheddar/plan-test.c — the driver's plans without a GPU or Cheddar: boot.c's plan
 * writer over a model of bootparam_40's key set and phases (the adapter's catalogue: 43
 * keys, 38 phases, each phase's level and the q-limbs it reads; its per-phase MiB are those
 * of bench/results-cheddar-h200-b8.txt), every plan checked by `fheplan check --json`.
 * It fails unless every plan is feasible, whole-key plans name no limbs and no levels,
 * level plans cut every key and require a key at `level n - 1` exactly where a phase reads
 * n q-limbs of a key of more, and a level plan moves fewer bytes (and fewer per bootstrap)
 * than its whole-key twin; and unless --budgets takes `minks` and refuses what is no budget.
 *   plan-test FHEPLAN OUTDIR    (make cheddar-plan-test) */
#define main cheddar_boot_main
#include "boot.c"
#undef main

/* bootparam_40: N = 2^16 (one limb 256 KiB), 4 terminal + 43 main primes, 12 special. */
typedef struct model_key {
    int index;
    const char *name;
    int q, special;
} model_key;

static const model_key KEYS[] = {
    {-44444444, "std", 47, 12}, {-33333333, "dts", 2, 2}, {-22222222, "mult", 47, 12},
    {1, "rot1", 45, 12}, {2, "rot2", 45, 12}, {3, "rot3", 45, 12}, {4, "rot4", 45, 12},
    {5, "rot5", 45, 12}, {6, "rot6", 45, 12}, {7, "rot7", 45, 12}, {8, "rot8", 45, 12},
    {16, "rot16", 47, 12}, {24, "rot24", 45, 12}, {32, "rot32", 47, 12},
    {40, "rot40", 27, 12}, {48, "rot48", 47, 12}, {56, "rot56", 27, 12},
    {64, "rot64", 47, 12}, {80, "rot80", 47, 12}, {96, "rot96", 47, 12},
    {112, "rot112", 47, 12}, {128, "rot128", 47, 12}, {160, "rot160", 24, 12},
    {192, "rot192", 24, 12}, {224, "rot224", 24, 12}, {256, "rot256", 47, 12},
    {384, "rot384", 47, 12}, {512, "rot512", 47, 12}, {768, "rot768", 47, 12},
    {1024, "rot1024", 47, 12}, {1280, "rot1280", 24, 12}, {1536, "rot1536", 24, 12},
    {1792, "rot1792", 24, 12}, {2048, "rot2048", 47, 12}, {3072, "rot3072", 47, 12},
    {4096, "rot4096", 47, 12}, {5120, "rot5120", 23, 12}, {6144, "rot6144", 47, 12},
    {7168, "rot7168", 23, 12}, {8192, "rot8192", 47, 12}, {16384, "rot16384", 47, 12},
    {24576, "rot24576", 47, 12}, {11111111, "conj", 47, 12},
};

typedef struct model_phase {
    const char *name;
    int level, n; /* Cheddar's level; q-limbs read of every key (0: each key whole) */
    const char *keys;
} model_phase;

static const model_phase PHASES[] = {
    {"modup", 28, 0, "dts std"},
    {"cts0b", 28, 47, "rot2048 rot4096 rot6144"},
    {"cts0g1", 28, 47, "rot8192"},
    {"cts0g2", 28, 47, "rot16384"},
    {"cts0g3", 28, 47, "rot24576"},
    {"cts1b", 27, 47, "rot256 rot512 rot768"},
    {"cts1g1", 27, 47, "rot1024"},
    {"cts1g2", 27, 47, "rot2048"},
    {"cts1g3", 27, 47, "rot3072"},
    {"cts2b", 26, 47, "rot16 rot32 rot48 rot64 rot80 rot96 rot112"},
    {"cts2g1", 26, 47, "rot128"},
    {"cts2g2", 26, 47, "rot256"},
    {"cts2g3", 26, 47, "rot384"},
    {"cts3b", 25, 45, "rot1 rot2 rot3 rot4 rot5 rot6 rot7"},
    {"cts3g1", 25, 45, "rot8"},
    {"cts3g2", 25, 45, "rot16"},
    {"cts3g3", 25, 45, "rot24"},
    {"evalmod", 24, 43, "conj mult"},
    {"stc0b", 16, 27, "rot1 rot2 rot3 rot4 rot5 rot6 rot7"},
    {"stc0g1", 16, 27, "rot8"},
    {"stc0g2", 16, 27, "rot16"},
    {"stc0g3", 16, 27, "rot24"},
    {"stc0g4", 16, 27, "rot32"},
    {"stc0g5", 16, 27, "rot40"},
    {"stc0g6", 16, 27, "rot48"},
    {"stc0g7", 16, 27, "rot56"},
    {"stc1b", 15, 24, "rot32 rot64 rot96 rot128 rot160 rot192 rot224"},
    {"stc1g1", 15, 24, "rot256"},
    {"stc1g2", 15, 24, "rot512"},
    {"stc1g3", 15, 24, "rot768"},
    {"stc1g4", 15, 24, "rot1024"},
    {"stc1g5", 15, 24, "rot1280"},
    {"stc1g6", 15, 24, "rot1536"},
    {"stc1g7", 15, 24, "rot1792"},
    {"stc2b", 14, 21, "rot1024 rot2048 rot3072 rot4096 rot5120 rot6144 rot7168"},
    {"stc2g1", 14, 21, "rot8192"},
    {"stc2g2", 14, 21, "rot16384"},
    {"stc2g3", 14, 21, "rot24576"},
};

#define NK ((int)(sizeof KEYS / sizeof KEYS[0]))
#define NP ((int)(sizeof PHASES / sizeof PHASES[0]))
#define ALPHA 12
#define LIMB ((uint64_t)1 << 18)

struct ch_engine {
    ch_key_info keys[NK];
    ch_phase_info phases[NP];
    int pkeys[NP][8], plimbs[NP][8];
};

static int key_named(const char *s, size_t len)
{
    for (int k = 0; k < NK; k++)
        if (strlen(KEYS[k].name) == len && !strncmp(KEYS[k].name, s, len))
            return k;
    fprintf(stderr, "plan-test: no key %.*s in the model\n", (int)len, s);
    exit(2);
}

static void model_init(ch_engine *e)
{
    for (int k = 0; k < NK; k++) {
        ch_key_info *ki = &e->keys[k];
        memset(ki, 0, sizeof *ki);
        ki->index = KEYS[k].index;
        snprintf(ki->name, sizeof ki->name, "%s", KEYS[k].name);
        ki->q = KEYS[k].q;
        ki->special = KEYS[k].special;
        ki->alpha = ALPHA;
        ki->beta = (ki->q + ALPHA - 1) / ALPHA;
        ki->limb_bytes = LIMB;
        ki->part_bytes = (uint64_t)(ki->q + ki->special) * LIMB;
        ki->bytes = 2 * (uint64_t)ki->beta * ki->part_bytes;
    }
    for (int p = 0; p < NP; p++) {
        ch_phase_info *pi = &e->phases[p];
        memset(pi, 0, sizeof *pi);
        snprintf(pi->name, sizeof pi->name, "%s", PHASES[p].name);
        pi->level = PHASES[p].level;
        for (const char *s = PHASES[p].keys; *s;) {
            size_t len = strcspn(s, " ");
            int k = key_named(s, len);
            e->pkeys[p][pi->nkeys] = k;
            e->plimbs[p][pi->nkeys++] = PHASES[p].n ? PHASES[p].n : KEYS[k].q;
            s += len + (s[len] == ' ');
        }
        pi->keys = e->pkeys[p];
        pi->limbs = e->plimbs[p];
    }
}

/* The catalogue, from the model; the rest of the adapter is never called here. */
int ch_nkeys(const ch_engine *e) { (void)e; return NK; }
const ch_key_info *ch_key(const ch_engine *e, int k) { return &e->keys[k]; }
int ch_npts(const ch_engine *e) { (void)e; return 0; }
const ch_pt_info *ch_pt(const ch_engine *e, int p) { (void)e; (void)p; return NULL; }
int ch_nphases(const ch_engine *e) { (void)e; return NP; }
const ch_phase_info *ch_phase(const ch_engine *e, int ph) { return &e->phases[ph]; }
int ch_seeded_parts(const ch_engine *e, int k, int *parts, int max)
{
    int n = 0; /* as the adapter: all but the sparse-to-dense key's part 0 */
    for (int i = 0; i < e->keys[k].beta && n < max; i++)
        if (!(e->keys[k].index == -44444444 && i == 0))
            parts[n++] = i;
    return n;
}

#pragma GCC diagnostic ignored "-Wunused-parameter"
#define UNCALLED { fprintf(stderr, "plan-test: %s called\n", __func__); exit(2); }
int ch_create(const char *p, int b, ch_engine **o, char *m, size_t n) UNCALLED
void ch_destroy(ch_engine *e) UNCALLED
int ch_reference(ch_engine *e, int B, double *ms, char *m, size_t n) UNCALLED
int ch_resident_batch(ch_engine *e, int B, double *ms, double *p, int *i, char *m, size_t n)
    UNCALLED
int ch_export_keys(ch_engine *e, char *m, size_t n) UNCALLED
int ch_export_pts(ch_engine *e, char *m, size_t n) UNCALLED
int ch_load_key(ch_engine *e, int k, void *d, uint64_t nb, void *s, char *m, size_t n) UNCALLED
int ch_load_key_field(ch_engine *e, int k, int f, int h, void *d, void *s, char *m, size_t n)
    UNCALLED
int ch_load_pt(ch_engine *e, int p, void *d, uint64_t nb, void *s, char *m, size_t n) UNCALLED
int ch_batch_begin(ch_engine *e, int B, char *m, size_t n) UNCALLED
int ch_batch_identical(ch_engine *e, int B, int *i, char *m, size_t n) UNCALLED
int ch_run_phase(ch_engine *e, int ph, int B, const ch_key_copy *k, void *const *p, char *m,
                 size_t n) UNCALLED
int ch_sample_a(ch_engine *e, int k, int p, void *d, uint64_t nb, void *s, char *m, size_t n)
    UNCALLED
int ch_sample_a_range(ch_engine *e, int k, int p, void *d, uint64_t nb, uint64_t o, void *s,
                      char *m, size_t n) UNCALLED
int ch_verify_sampler(ch_engine *e, uint64_t *a, uint64_t *b, uint64_t *c, uint64_t *d,
                      char *m, size_t n) UNCALLED
int ch_minks(ch_engine *e, int B, double *ms, char *m, size_t n) UNCALLED
int ch_minks_keys(const ch_engine *e, int *keys, int max, uint64_t *own) UNCALLED
int ch_result_error(ch_engine *e, double *s, double *x, char *m, size_t n) UNCALLED
void ch_pool_marks(const ch_engine *e, uint64_t *a, uint64_t *b) UNCALLED
void ch_pool_reset_peak(ch_engine *e) UNCALLED
#pragma GCC diagnostic warning "-Wunused-parameter"

static int failures;

static void expect(int ok, const char *what, const char *path)
{
    if (!ok) {
        fprintf(stderr, "plan-test: FAIL: %s (%s)\n", what, path);
        failures++;
    }
}

/* Occurrences of s in the file at path. */
static int count_in(const char *path, const char *s)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        for (const char *p = line; (p = strstr(p, s)) != NULL; p += strlen(s))
            n++;
    if (f)
        fclose(f);
    return n;
}

/* What the level plan must say: a limb cut per key and one level clause per (phase, key)
 * reading fewer q-limbs than the key has, in every batch. */
static void expect_levels(ch_engine *e, const char *path, int level, int batches)
{
    int want = 0;
    for (int p = 0; p < NP; p++)
        for (int i = 0; i < e->phases[p].nkeys; i++)
            want += e->phases[p].limbs[i] < e->keys[e->phases[p].keys[i]].q;
    expect(count_in(path, ") limbs(") == (level ? NK : 0), "a limb cut on every key", path);
    expect(count_in(path, "@ cuda:0 level ") == (level ? want * batches : 0),
           "a level clause where a phase reads fewer q-limbs than the key has", path);
    if (level) { /* SlotToCoeff's first transform: 4 + 23 main primes, level 26 */
        expect(count_in(path, "require k_rot1 @ cuda:0 level 26\n") == batches,
               "stc0b reads 27 q-limbs of rot1", path);
        expect(count_in(path, "limbs(45, 12, 4, 12)") > 0, "rot1's cut", path);
        expect(count_in(path, "limbs(2, 2, 1, 12)") == 1, "the dense-to-sparse key's cut", path);
    }
}

static void expect_budgets(void)
{
    int b[MAX_LIST];
    expect(parse_budgets("25,minks", b) == 2 && b[0] == 25 && b[1] == BUDGET_MINKS,
           "--budgets 25,minks", "parse_budgets");
    expect(parse_budgets("0", b) < 0 && parse_budgets("101", b) < 0 &&
           parse_budgets("minksx", b) < 0 && parse_budgets("", b) < 0,
           "--budgets refuses 0, 101, minksx and nothing", "parse_budgets");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: plan-test FHEPLAN OUTDIR\n");
        return 2;
    }
    static ch_engine E;
    ch_engine *e = &E;
    model_init(e);
    expect_budgets();
    uint64_t managed = managed_bytes(e, 0), minks = 0;
    static const char *const mk[] = {"rot1", "rot8", "rot16", "rot32", "rot128", "rot256",
                                     "rot1024", "rot2048", "rot8192", "conj", "mult", "dts", "std"};
    for (size_t i = 0; i < sizeof mk / sizeof mk[0]; i++)
        minks += e->keys[key_named(mk[i], strlen(mk[i]))].bytes;
    double phase_ms[CH_MAX_PHASES];
    for (int p = 0; p < NP; p++)
        phase_ms[p] = 1.0;
    const int batches = 3;
    for (int B = 1; B <= 8; B += 7)
        for (int cfg = 0; cfg < 4; cfg++) {
            uint64_t budget = cfg / 2 ? minks : (managed * 25 + 99) / 100;
            budget = (budget + 4095) / 4096 * 4096;
            check_pred cp[2];
            char path[2][4096];
            for (int level = 0; level < 2; level++) {
                plan_spec ps = {B, 0, cfg % 2, level, batches, budget};
                snprintf(path[level], sizeof path[level], "%s/%s-%s-b%d-%s.rplan", argv[2],
                         cfg % 2 ? "seeded" : "whole", level ? "level" : "full", B,
                         cfg / 2 ? "minks" : "25");
                if (write_plan(path[level], e, &ps, phase_ms, "bootparam_40.json")) {
                    fprintf(stderr, "plan-test: cannot write %s\n", path[level]);
                    return 2;
                }
                cp[level] = check_plan(argv[1], path[level], 50.0, 0, B);
                expect(cp[level].ok && cp[level].feasible, "check finds the plan feasible",
                       path[level]);
                expect_levels(e, path[level], level, batches);
                printf("%-60s moved %9.1f MiB, %7.1f MiB over PCIe per bootstrap\n",
                       path[level], cp[level].moved / 1048576.0,
                       cp[level].link_boot / 1048576.0);
            }
            expect(cp[1].moved < cp[0].moved && cp[1].link_boot > 0 &&
                   cp[1].link_boot < cp[0].link_boot,
                   "keys at their level move fewer bytes than whole keys", path[1]);
        }
    printf("plan-test: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
