/* tests/unit/test_link.c — the link's figures (runtime/vm/link.c): how long the transfer
 * streams onto devices were busy, idle, and idle while a transfer made later already had
 * its room. The interval arithmetic on hand-made windows, then whole runs on the emulated
 * device's virtual clock, each figure exact: with every key fitting, prefetch keeps the
 * link from idling while a load is ready and serial issue does not; with room for one key,
 * or with MIN's victim read by a long body, the link's idle time is spent waiting for the
 * body that frees the room, which is not ready time. */
#include "runtime/vm/internal.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vm_link_figures measure(const vm_link_win *w, size_t n)
{
    vm_link_figures f = {0};
    vm_link_measure(w, n, &f);
    return f;
}

#define NEAR(a, b) cr_assert_float_eq((a), (b), 1e-12, "%.9f against %.9f", (double)(a), (double)(b))

Test(link, back_to_back_windows_never_idle)
{
    vm_link_win w[] = {{0, 1, 0}, {1, 3, 0}, {3, 3.5, 0}};
    vm_link_figures f = measure(w, 3);
    NEAR(f.busy_s, 3.5);
    NEAR(f.idle_s, 0);
    NEAR(f.ready_idle_s, 0);
}

Test(link, a_gap_before_a_window_with_room_is_ready_time)
{
    /* the host issued the second window 2 s late although its room was free */
    vm_link_win w[] = {{0, 1, 0}, {3, 4, 0}};
    vm_link_figures f = measure(w, 2);
    NEAR(f.busy_s, 2);
    NEAR(f.idle_s, 2);
    NEAR(f.ready_idle_s, 2);
}

Test(link, waiting_for_room_is_idle_but_not_ready)
{
    /* the second window's copies waited on the device until its victim's reader ended at
     * 3: the stream reached it at 1 (open) but was busy only from 3 */
    vm_link_win w[] = {{0, 1, 0}, {1, 4, 3}};
    vm_link_figures f = measure(w, 2);
    NEAR(f.busy_s, 2);
    NEAR(f.idle_s, 2);
    NEAR(f.ready_idle_s, 0);
    /* room free part-way through the gap: only the rest is ready time */
    vm_link_win v[] = {{0, 1, 0}, {4, 5, 2.5}};
    f = measure(v, 2);
    NEAR(f.idle_s, 3);
    NEAR(f.ready_idle_s, 1.5);
}

Test(link, a_later_window_with_room_makes_the_wait_ready_time)
{
    /* head of line: window 2 waits for its room until 5 while window 3's room was free
     * from 2: from 2 the link could have carried window 3 */
    vm_link_win w[] = {{0, 1, 0}, {1, 6, 5}, {6, 7, 2}};
    vm_link_figures f = measure(w, 3);
    NEAR(f.busy_s, 3);
    NEAR(f.idle_s, 4);
    NEAR(f.ready_idle_s, 3);
}

Test(link, windows_without_copies_and_room_after_the_end)
{
    /* an empty window (its stream reached and passed it at once) and a ready time past a
     * window's end (clamped: its copies cannot end before they begin) */
    vm_link_win w[] = {{0, 2, 0}, {2, 2, 0}, {2.5, 3, 9}};
    vm_link_figures f = measure(w, 3);
    NEAR(f.busy_s, 2);
    NEAR(f.idle_s, 1);
    NEAR(f.ready_idle_s, 0);
    vm_link_figures z = measure(w, 0);
    NEAR(z.busy_s + z.idle_s + z.ready_idle_s, 0);
}

/* ---- whole runs on the emulated device's virtual clock ---------------------------------
 * Simulated time (fhr_backend(3), "Virtual time"): a 4 MiB load from pinned memory lasts
 * ceil(4 MiB / 55.5 GB/s) ns, a body the kernel model's time (touch: its bytes at
 * 3000 GB/s; spin: its duration), the host takes no time between waits. So every figure
 * below is exact, however loaded the machine is. */

#define LOAD_NS  ((uint64_t)ceil(4194304 / 55.5))       /* 75574 */
#define TOUCH_NS ((uint64_t)llround(4194304 / 3000.0))  /* 1398 */
#define SPIN_NS  10000000ull                             /* spin(10 ms) */
#define EXACT(a, ns) cr_assert_float_eq((a), (double)(ns) * 1e-9, 1e-12, "%s: %.9f s, want %.9f s", \
                                        #a, (double)(a), (double)(ns) * 1e-9)

static rplan_vm_report *run_src(const char *src, int serial, double device_gbps, uint64_t windows)
{
    rplan_program *p = NULL;
    rplan_compile_opts co = {.filename = "link.rplan"};
    rplan_diags *d = rplan_diags_new();
    cr_assert_eq(rplan_compile(src, strlen(src), &co, &p, d), FHR_OK);
    rplan_diags_free(d);
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_open("emu:1,virtual", &b, NULL), FHR_OK);
    rplan_vm_opts o = {0};
    o.serial = serial;
    o.device_gbps = device_gbps;
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, &e), FHR_OK, "%s", e.message);
    rplan_vm_report *r = NULL;
    cr_assert_eq(rplan_vm_run(vm, &r, &e), FHR_OK, "%s", e.message);
    fhr_error_clear(&e);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
    cr_assert(r->ok, "%s", r->message);
    cr_assert_eq(r->link_windows, windows, "one window per load: %llu",
                 (unsigned long long)r->link_windows);
    return r;
}

static rplan_vm_report *run_keys(uint64_t budget_mib, int serial)
{
    char src[2048];
    snprintf(src, sizeof src,
             "rplan 1\n"
             "budget cuda:0 %llu MiB\n"
             "value k[6] = 4 MiB replicable source synth(10 + i)\n"
             "policy keys = lookahead(cuda:0 -> pinned -> host)\n"
             "stage \"s\" {\n"
             "  for i in 0..5 {\n"
             "    request \"r{i}\" using keys {\n"
             "      require k[i] @ cuda:0\n"
             "      body { run touch(k[i]); run spin(10 ms) }\n"
             "    }\n"
             "  }\n"
             "}\n",
             (unsigned long long)budget_mib);
    return run_src(src, serial, 0, 6);
}

Test(link, prefetch_keeps_a_ready_link_busy_and_serial_issue_does_not)
{
    rplan_vm_report *pre = run_keys(64, 0), *ser = run_keys(64, 1);
    uint64_t body = TOUCH_NS + SPIN_NS;
    /* prefetch: the host issues all six loads at once, back to back on the link; the
     * bodies follow the first load one after another */
    EXACT(pre->link_busy_s, 6 * LOAD_NS);
    EXACT(pre->link_idle_s, 0);
    EXACT(pre->link_ready_idle_s, 0);
    EXACT(pre->total.body_s, 6 * body);
    EXACT(pre->total.time_s, LOAD_NS + 6 * body);
    /* serial: every load after the first waits on the host for the body before it, with
     * its room free all along: five bodies of ready idle time */
    EXACT(ser->link_busy_s, 6 * LOAD_NS);
    EXACT(ser->link_idle_s, 5 * body);
    EXACT(ser->link_ready_idle_s, 5 * body);
    EXACT(ser->total.time_s, 6 * (LOAD_NS + body));
    rplan_vm_report_free(pre);
    rplan_vm_report_free(ser);
}

Test(link, idle_for_the_only_room_is_not_ready_time)
{
    /* room for one key: load i + 1 evicts key i, which body i reads: the link idles for
     * five bodies, none of it ready time */
    rplan_vm_report *r = run_keys(5, 0);
    uint64_t body = TOUCH_NS + SPIN_NS;
    EXACT(r->link_busy_s, 6 * LOAD_NS);
    EXACT(r->link_idle_s, 5 * body);
    EXACT(r->link_ready_idle_s, 0);
    EXACT(r->total.time_s, 6 * (LOAD_NS + body));
    char *js = rplan_vm_report_json(r);
    cr_assert_not_null(strstr(js, "\"ready_idle_s\""), "%s", js);
    free(js);
    rplan_vm_report_free(r);
}

/* MIN's victim still read by an older body: the host waits for that body (MIN's regret,
 * not a wait for room) and then evicts the victim; the load's room is free only when the
 * body ends, so the link's idle time meanwhile is not ready time although the request
 * itself waited for no room. */
Test(link, waiting_for_mins_victim_is_not_ready_time)
{
    static const char *src =
        "rplan 1\n"
        "budget cuda:0 13 MiB\n"
        "value k[4] = 4 MiB replicable source synth(10 + i)\n"
        "policy keys = lookahead(cuda:0 -> pinned -> host)\n"
        "stage \"s\" {\n"
        "  request \"x\" using keys { require k[0] @ cuda:0\n body { run touch(k[0]) } }\n"
        "  request \"y\" using keys { require k[1] @ cuda:0\n"
        "    body { run touch(k[1]); run ckks.keyswitch(k[1], k[1], 4) } }\n"
        "  request \"z\" using keys { require k[2] @ cuda:0\n body { run touch(k[2]) } }\n"
        "  request \"m\" using keys { require k[3] @ cuda:0\n body { run touch(k[3]) } }\n"
        "  request \"x again\" using keys { require k[0] @ cuda:0\n body { run touch(k[0]) } }\n"
        "}\n";
    rplan_vm_report *r = run_src(src, 0, 1, 4); /* bodies at 1 GB/s: a long keyswitch */
    cr_assert_eq(r->host_waits[RPLAN_WAIT_REGRET], 1, "the host waited for MIN's victim");
    /* at 1 GB/s a touch of 4 MiB lasts T and the keyswitch of batch 4 lasts 4 T; bodies run
     * one after another from the end of the first load. k[0..2] load back to back; the
     * load of k[3] evicts k[1] (MIN's victim) and so waits for y's body, which ends at
     * L + 2 T + 4 T: the link idles from 3 L to then, none of it ready time, and x again
     * finds k[0] still held (four windows) */
    uint64_t t = 4194304, ks = 4 * t;
    EXACT(r->link_busy_s, 4 * LOAD_NS);
    EXACT(r->link_idle_s, LOAD_NS + 2 * t + ks - 3 * LOAD_NS);
    EXACT(r->link_ready_idle_s, 0);
    EXACT(r->total.body_s, 5 * t + ks);
    EXACT(r->total.time_s, LOAD_NS + 5 * t + ks);
    rplan_vm_report_free(r);
}
