/* bench/request.c — the host cost of one request through the controller at 10, 100, 1,000
 * and 10,000 resident values: decide + placement + lease + release (fhr_use_begin, then
 * fhr_use_end), for a request whose value is already resident and for one that loads (and
 * evicts), on the model backend (nothing is copied: only the host's work is timed), and the
 * loading request in parts: decide (of which the manager's explain, timed again alone) and
 * the use of the decision (scope entry: the eviction and the load; the lease; release and
 * exit). Beside them, measured in the same run as yardsticks: a bare placement snapshot,
 * and a manual fhr_ensure + lease + release of the same value. Medians of many calls.
 * The policy is tiered LRU (cuda:0 -> pinned), the one whose victims come from the
 * controller's victim index; `--values N` runs one size only (for a profiler). */
#include "fheplan/residency.h"
#include "fheplan/controller.h"
#include "bench/host_bench.h"

#define VALUE_BYTES 64

static void check(fhr_status st, const fhr_error *e, const char *what)
{
    bench_check("request bench", st, e, what);
}

static fhr_handle adopt(fhr_manager *m, fhr_error *e)
{
    return bench_adopt("request bench", m, fhr_loc_pinned(), VALUE_BYTES, 0, e);
}

typedef struct bench {
    fhr_backend *b;
    fhr_manager *m;
    fhr_policy *p;
    fhr_controller *c;
    fhr_stream *s;
    fhr_handle *h;  /* n + 1 values: the first n resident on cuda:0, the last not */
    size_t n;
} bench;

static void bench_open(bench *k, size_t n, fhr_error *e)
{
    memset(k, 0, sizeof *k);
    k->n = n;
    check(fhr_backend_model_create(1, &k->b, e), e, "model backend");
    /* room for exactly n values: a request for the (n+1)-th evicts one */
    fhr_budget bud = {fhr_loc_cuda(0), (uint64_t)n * VALUE_BYTES};
    fhr_manager_config cfg = {k->b, &bud, 1, 0};
    check(fhr_manager_create(&cfg, &k->m, e), e, "manager");
    k->h = malloc((n + 1) * sizeof *k->h);
    for (size_t i = 0; i <= n; i++) {
        k->h[i] = adopt(k->m, e);
        if (i < n)
            check(fhr_ensure(k->m, k->h[i], fhr_loc_cuda(0), NULL, e), e, "ensure");
    }
    fhr_location tiers[] = {fhr_loc_pinned()};
    fhr_tier_chain ch = {fhr_loc_cuda(0), tiers, 1};
    check(fhr_policy_tiered_lru_create(&ch, 1, &k->p, e), e, "policy");
    check(fhr_controller_create(k->m, k->p, &k->c, e), e, "controller");
    check(fhr_stream_create(k->b, fhr_loc_cuda(0), &k->s, e), e, "stream");
}

static void bench_close(bench *k)
{
    fhr_stream_destroy(k->b, k->s);
    fhr_controller_destroy(k->c);
    fhr_policy_destroy(k->p);
    fhr_manager_destroy(k->m);
    fhr_backend_destroy(k->b);
    free(k->h);
}

/* One use of h at cuda:0 through the controller: begin, end. */
static void use_once(bench *k, fhr_handle h, fhr_error *e)
{
    fhr_requirement rq = {h, fhr_loc_cuda(0), 0};
    fhr_request req = {"bench", &rq, 1, NULL, 0, 0};
    fhr_stream_map cons = {fhr_loc_cuda(0), k->s};
    fhr_use *u = NULL;
    check(fhr_use_begin(k->c, &req, &cons, 1, NULL, 0, &u, e), e, "use_begin");
    check(fhr_use_end(u, FHR_OK, e), e, "use_end");
    fhr_use_destroy(u);
}

/* The same by hand: ensure (a no-op when resident), one lease, release. */
static void manual_once(bench *k, fhr_handle h, fhr_error *e)
{
    check(fhr_ensure(k->m, h, fhr_loc_cuda(0), NULL, e), e, "ensure");
    fhr_lease *l = NULL;
    check(fhr_acquire(k->m, &h, 1, fhr_loc_cuda(0), k->s, &l, e), e, "lease");
    check(fhr_lease_release(l, e), e, "release");
    fhr_lease_destroy(l);
}

/* The loading request in parts, on the same cycle: decide, explain alone, use + end. */
static void loads_in_parts(bench *k, fhr_handle h, double *dt, fhr_error *e)
{
    fhr_requirement rq = {h, fhr_loc_cuda(0), 0};
    fhr_request req = {"bench", &rq, 1, NULL, 0, 0};
    fhr_stream_map cons = {fhr_loc_cuda(0), k->s};
    fhr_decision *d = NULL;
    fhr_use *u = NULL;
    fhr_explanation ex;
    double t0 = now_us();
    check(fhr_decide(k->c, &req, &d, e), e, "decide");
    double t1 = now_us();
    check(fhr_explain(k->m, fhr_decision_plan(d), &ex, e), e, "explain");
    double t2 = now_us();
    check(fhr_use_decision(k->c, d, &cons, 1, NULL, 0, &u, e), e, "use_decision");
    check(fhr_use_end(u, FHR_OK, e), e, "use_end");
    double t3 = now_us();
    fhr_use_destroy(u);
    fhr_decision_destroy(d);
    dt[0] = t1 - t0;
    dt[1] = t2 - t1;
    dt[2] = t3 - t2;
}

/* run in this order: the loads cases last, since they change what is resident */
enum { RESIDENT, MANUAL, SNAPSHOT, LOADS, PARTS, NCASES };
enum { P_DECIDE, P_EXPLAIN, P_USE, NPARTS };

int main(int argc, char **argv)
{
    static size_t sizes[] = {10, 100, 1000, 10000};
    size_t nsizes = sizeof sizes / sizeof *sizes;
    int json = 0, bad = 0;
    for (int a = 1; a < argc && !bad; a++) {
        char *end;
        if (!strcmp(argv[a], "--json")) {
            json = 1;
        } else if (!strcmp(argv[a], "--values") && a + 1 < argc) {
            /* one size only (profiling): --values N */
            unsigned long long v = strtoull(argv[++a], &end, 10);
            bad = *end || v < 1 || v > 1000000;
            sizes[0] = (size_t)v;
            nsizes = 1;
        } else {
            bad = 1;
        }
    }
    if (bad) {
        fprintf(stderr, "usage: request [--json] [--values N]\n");
        return 2;
    }
    fhr_error e;
    fhr_error_init(&e);
    if (json)
        printf("[");
    else
        printf("| resident values | use, resident (median us) | use, loads and evicts | "
               "snapshot alone | ensure + lease by hand | loads: decide | of which explain | "
               "loads: use + end | resident / by hand | loads / snapshot |\n"
               "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t z = 0; z < nsizes; z++) {
        size_t n = sizes[z];
        bench k;
        bench_open(&k, n, &e);
        int reps = n >= 10000 ? 101 : 1001;
        double *t = malloc((size_t)reps * sizeof *t), med[NCASES], pmed[NPARTS];
        double *pt[NPARTS];
        for (int p = 0; p < NPARTS; p++)
            pt[p] = malloc((size_t)reps * sizeof *pt[p]);
        size_t next = n; /* the loads cycle: h[n], h[0], h[1], ... */
        for (int c = 0; c < NCASES; c++) {
            for (int r = -3; r < reps; r++) { /* three warm-up calls */
                /* resident: a value on cuda:0; loads: cycling through all n + 1 values
                 * under LRU, every request misses (the least recently used is the next) */
                fhr_handle h = k.h[(size_t)(r + 3) % n];
                if (c == LOADS || c == PARTS) {
                    h = k.h[next];
                    next = (next + 1) % (n + 1);
                }
                double t0 = now_us();
                if (c == PARTS) {
                    double dt[NPARTS];
                    loads_in_parts(&k, h, dt, &e);
                    for (int p = 0; p < NPARTS && r >= 0; p++)
                        pt[p][r] = dt[p];
                } else if (c == RESIDENT || c == LOADS) {
                    use_once(&k, h, &e);
                } else if (c == SNAPSHOT) {
                    fhr_snapshot *s;
                    check(fhr_snapshot_take_placement(k.m, &s, &e), &e, "snapshot");
                    fhr_snapshot_free(s);
                } else {
                    manual_once(&k, h, &e);
                }
                double t1 = now_us();
                if (r >= 0)
                    t[r] = t1 - t0;
                fhr_reap(k.m, NULL, NULL);
            }
            med[c] = c == PARTS ? 0 : median(t, reps);
            if (c == SNAPSHOT) {
                /* h[n] is the only value not resident; using h[0..n-1] in order makes h[0]
                 * the least recently used, so the loads case, which starts at h[n] and goes
                 * on with h[0], h[1], ..., evicts exactly the value it asks for next but n */
                for (size_t i = 0; i < n; i++)
                    use_once(&k, k.h[i], &e);
            }
        }
        for (int p = 0; p < NPARTS; p++)
            pmed[p] = median(pt[p], reps);
        if (json)
            printf("%s{\"values\":%zu,\"use_resident_us\":%.2f,\"use_load_us\":%.2f,"
                   "\"snapshot_us\":%.2f,\"manual_us\":%.2f,\"load_decide_us\":%.2f,"
                   "\"load_explain_us\":%.2f,\"load_use_us\":%.2f,\"reps\":%d}",
                   z ? "," : "", n, med[RESIDENT], med[LOADS], med[SNAPSHOT], med[MANUAL],
                   pmed[P_DECIDE], pmed[P_EXPLAIN], pmed[P_USE], reps);
        else
            printf("| %zu | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f |\n", n,
                   med[RESIDENT], med[LOADS], med[SNAPSHOT], med[MANUAL], pmed[P_DECIDE],
                   pmed[P_EXPLAIN], pmed[P_USE], med[RESIDENT] / med[MANUAL],
                   med[LOADS] / med[SNAPSHOT]);
        for (int p = 0; p < NPARTS; p++)
            free(pt[p]);
        free(t);
        bench_close(&k);
    }
    if (json)
        printf("]\n");
    return 0;
}
