/* bench/policy.c — decide() latency of the tiered LRU controller with 10, 100, 1,000
 * and 10,000 resident values (model backend: nothing is allocated or copied). Each row
 * is the median of many calls in one run: the whole fhr_decide (snapshot + policy +
 * the manager's explain), and its parts measured alone. */
#include "fheplan/residency.h"
#include "fheplan/controller.h"
#include "bench/host_bench.h"

static void check(fhr_status st, const fhr_error *e, const char *what)
{
    bench_check("policy", st, e, what);
}

static fhr_handle adopt(fhr_manager *m, size_t n, int32_t prio, fhr_error *e)
{
    return bench_adopt("policy", m, fhr_loc_host(), n, prio, e);
}

int main(int argc, char **argv)
{
    int json = argc > 1 && !strcmp(argv[1], "--json");
    static const size_t sizes[] = {10, 100, 1000, 10000};
    fhr_error e;
    fhr_error_init(&e);
    if (json)
        printf("[");
    else
        printf("| resident values | decide (median us) | snapshot alone | policy alone | evictions | explored_states |\n"
               "|---:|---:|---:|---:|---:|---:|\n");
    for (size_t k = 0; k < 4; k++) {
        size_t n = sizes[k];
        fhr_backend *b;
        check(fhr_backend_model_create(1, &b, &e), &e, "model backend");
        fhr_budget bud = {fhr_loc_cuda(0), (uint64_t)n * 64};
        fhr_manager_config cfg = {b, &bud, 1, 0};
        fhr_manager *m;
        check(fhr_manager_create(&cfg, &m, &e), &e, "manager");
        uint64_t x = 88172645463325252ULL;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            fhr_handle h = adopt(m, 64, (int32_t)(x % 4), &e);
            check(fhr_ensure(m, h, fhr_loc_cuda(0), NULL, &e), &e, "ensure");
        }
        fhr_handle w = adopt(m, 128, 0, &e); /* needs two evictions at cuda:0 */
        fhr_location tiers[] = {fhr_loc_pinned(), fhr_loc_host()};
        fhr_tier_chain ch = {fhr_loc_cuda(0), tiers, 2};
        fhr_policy *p;
        check(fhr_policy_tiered_lru_create(&ch, 1, &p, &e), &e, "policy");
        fhr_controller *c;
        check(fhr_controller_create(m, p, &c, &e), &e, "controller");
        fhr_requirement rq = {w, fhr_loc_cuda(0), 0};
        fhr_reservation res = {fhr_loc_cuda(0), 64, "workspace"};
        fhr_request req = {"bench", &rq, 1, &res, 1, 0};
        int reps = n >= 10000 ? 51 : n >= 1000 ? 501 : 2001;
        double *t = malloc((size_t)reps * sizeof *t);
        double med[3];
        size_t nev = 0;
        uint64_t explored = 0;
        for (int phase = 0; phase < 3; phase++) {
            fhr_snapshot *s = NULL;
            if (phase == 2)
                check(fhr_snapshot_take_placement(m, &s, &e), &e, "snapshot");
            for (int r = -3; r < reps; r++) { /* three warm-up calls */
                double t0 = now_us();
                if (phase == 0) {
                    fhr_decision *d;
                    check(fhr_decide(c, &req, &d, &e), &e, "decide");
                    double t1 = now_us();
                    if (r >= 0)
                        t[r] = t1 - t0;
                    if (!fhr_decision_feasible(d)) {
                        fprintf(stderr, "policy: infeasible: %s\n", fhr_decision_explanation(d)->reason);
                        return 1;
                    }
                    nev = fhr_decision_nevictions(d);
                    explored = fhr_decision_explored_states(d);
                    fhr_decision_destroy(d);
                    continue;
                } else if (phase == 1) {
                    fhr_snapshot *s1;
                    check(fhr_snapshot_take_placement(m, &s1, &e), &e, "snapshot");
                    double t1 = now_us();
                    if (r >= 0)
                        t[r] = t1 - t0;
                    fhr_snapshot_free(s1);
                    continue;
                } else {
                    fhr_policy_out o;
                    check(fhr_policy_decide(p, s, &req, &o, &e), &e, "policy_decide");
                    double t1 = now_us();
                    if (r >= 0)
                        t[r] = t1 - t0;
                    fhr_policy_out_clear(&o);
                }
            }
            fhr_snapshot_free(s);
            med[phase] = median(t, reps);
        }
        if (json)
            printf("%s{\"values\":%zu,\"decide_us\":%.2f,\"snapshot_us\":%.2f,\"policy_us\":%.2f,"
                   "\"evictions\":%zu,\"explored_states\":%llu,\"reps\":%d}",
                   k ? "," : "", n, med[0], med[1], med[2], nev, (unsigned long long)explored, reps);
        else
            printf("| %zu | %.2f | %.2f | %.2f | %zu | %llu |\n", n, med[0], med[1], med[2], nev,
                   (unsigned long long)explored);
        free(t);
        fhr_controller_destroy(c);
        fhr_policy_destroy(p);
        fhr_manager_destroy(m);
        fhr_backend_destroy(b);
    }
    if (json)
        printf("]\n");
    return 0;
}
