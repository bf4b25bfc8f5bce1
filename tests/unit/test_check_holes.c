/* tests/unit/test_check_holes.c — where `check` and `run` could part (issue 43): a kernel's
 * declared read size costs the same at every --scale, `run verify(...)` of a value with
 * seeded fields is refused at its line by the verifier, and a failed run's integrity line
 * counts only the checks that passed before the failure. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fheplan/backend.h"
#include "fheplan/rplan.h"
#include "fheplan/vm.h"

static rplan_program *compile_src(const char *src, rplan_diags *d)
{
    rplan_program *p = NULL;
    rplan_compile_opts co = {.filename = "holes.rplan"};
    rplan_compile(src, strlen(src), &co, &p, d);
    return p;
}

static rplan_program *compile_must(const char *src)
{
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = compile_src(src, d);
    char *txt = rplan_diags_render_string(d);
    cr_assert_not_null(p, "%s", txt ? txt : "");
    free(txt);
    rplan_diags_free(d);
    return p;
}

/* One VM run of p: explain on the model backend (check) or a run on the emulated device at
 * `scale`, under `objective`. */
static rplan_vm_report *vm_report(const rplan_program *p, int explain, uint64_t scale,
                                  int objective)
{
    fhr_backend *b = NULL;
    const char *spec = explain ? "model:2" : "emu:2";
    cr_assert_eq(fhr_backend_open(spec, &b, NULL), FHR_OK, "backend %s", spec);
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.mode = explain ? RPLAN_VM_EXPLAIN : RPLAN_VM_RUN;
    o.scale = scale;
    o.unknown_as_touch = 1;
    o.objective = objective;
    rplan_vm *vm = NULL;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, &e), FHR_OK, "%s", e.message);
    rplan_vm_report *r = NULL;
    rplan_vm_run(vm, &r, &e);
    cr_assert_not_null(r, "%s", e.message);
    fhr_error_clear(&e);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    return r;
}

static uint64_t moved(const rplan_stage_report *t)
{
    uint64_t m = t->load_bytes;
    for (int d = 0; d < FHR_DIR_NONE; d++)
        m += t->bytes[d];
    return m;
}

/* One 16 MiB value, a kernel declared to read 48 MiB, three requests: the modelled body
 * time is the full-size one at every scale (it was divided by the scale). */
Test(holes, kernel_reads_cost_the_same_at_every_scale)
{
    static const char src[] = "rplan 1\n"
                              "kernel mix reads 48 MiB\n"
                              "value x = 16 MiB source synth(1)\n"
                              "policy p = tiered_lru(cuda:0 -> pinned)\n"
                              "for i in 0..<3 {\n"
                              "  request \"r{i}\" using p { require x @ cuda:0 body { run mix(x) } }\n"
                              "}\n";
    rplan_program *p = compile_must(src);
    rplan_vm_report *c = vm_report(p, 1, 1, RPLAN_OBJECTIVE_BYTES);
    cr_assert(c->ok, "%s", c->message);
    cr_assert_gt(c->total.model_body_s, 0);
    uint64_t scales[] = {1, 4, 16};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        rplan_vm_report *r = vm_report(p, 0, scales[i], RPLAN_OBJECTIVE_BYTES);
        cr_assert(r->ok, "%s", r->message);
        cr_assert_float_eq(r->total.model_body_s, c->total.model_body_s,
                           1e-9 * c->total.model_body_s, "scale %llu: body %g s, check %g s",
                           (unsigned long long)scales[i], r->total.model_body_s,
                           c->total.model_body_s);
        rplan_vm_report_free(r);
    }
    rplan_vm_report_free(c);
    rplan_program_free(p);
}

/* Under the time objective the read costs decide which key goes: a run at --scale 16 makes
 * the decisions check makes (the same bytes, scaled). */
Test(holes, kernel_reads_decide_alike_at_scale_under_time)
{
    static const char src[] = "rplan 1\n"
                              "budget cuda:0 40 MiB\n"
                              "kernel big reads 1024 MiB\n"
                              "kernel big2 reads 1024 MiB\n"
                              "kernel small reads 1 MiB\n"
                              "value a = 16 MiB source synth(1)\n"
                              "value b = 12 MiB source synth(2)\n"
                              "value c = 14 MiB source synth(3)\n"
                              "value d = 16 MiB source synth(4)\n"
                              "policy p = lookahead(cuda:0 -> pinned)\n"
                              "request \"1\" using p { require a @ cuda:0 body { run big(a) } }\n"
                              "request \"2\" using p { require b @ cuda:0 body { run small(b) } }\n"
                              "request \"3\" using p { require c @ cuda:0 body { run big2(c) } }\n"
                              "request \"4\" using p { require d @ cuda:0 body { run small(d) } }\n"
                              "request \"5\" using p { require a @ cuda:0 body { run big(a) } }\n"
                              "request \"6\" using p { require b @ cuda:0 body { run small(b) } }\n"
                              "request \"7\" using p { require c @ cuda:0 body { run big2(c) } }\n"
                              "request \"8\" using p { require d @ cuda:0 body { run small(d) } }\n";
    rplan_program *p = compile_must(src);
    rplan_vm_report *c = vm_report(p, 1, 1, RPLAN_OBJECTIVE_TIME);
    cr_assert(c->ok, "%s", c->message);
    rplan_vm_report *r = vm_report(p, 0, 16, RPLAN_OBJECTIVE_TIME);
    cr_assert(r->ok, "%s", r->message);
    cr_assert_eq(moved(&c->total), 16 * moved(&r->total), "check moves %llu B, run --scale 16 %llu B",
                 (unsigned long long)moved(&c->total), (unsigned long long)(16 * moved(&r->total)));
    cr_assert_float_eq(r->total.model_body_s, c->total.model_body_s, 1e-9 * c->total.model_body_s);
    rplan_vm_report_free(r);
    rplan_vm_report_free(c);
    rplan_program_free(p);
}

/* `run verify(k)` of a seeded value with fields passed check and failed the run: the
 * verifier refuses it at the call, with the declaration as a note. */
Test(holes, verify_of_seeded_fields_refused_at_its_line)
{
    static const char src[] =
        "rplan 1\n"
        "value k = 4 KiB replicable source synth(1) fields(b0, seeded a0) seeded(7)\n"
        "ensure k @ cuda:0\n"
        "plan \"p\" { body { run verify(k) } }\n";
    rplan_diags *d = rplan_diags_new();
    rplan_program *p = compile_src(src, d);
    char *txt = rplan_diags_render_string(d);
    cr_assert_null(p, "compiled: verify of seeded fields accepted");
    cr_assert_not_null(txt);
    cr_assert(strstr(txt, "holes.rplan:4:19: error: verify of 'k': it has seeded fields") != NULL,
              "%s", txt);
    cr_assert(strstr(txt, "holes.rplan:2:7: note: 'k' is declared here") != NULL, "%s", txt);
    free(txt);
    rplan_diags_free(d);
    /* the same value without fields verifies */
    static const char ok[] = "rplan 1\n"
                             "value k = 4 KiB replicable source synth(1) seeded(7)\n"
                             "ensure k @ cuda:0\n"
                             "plan \"p\" { body { run verify(k) } }\n";
    rplan_program *q = compile_must(ok);
    rplan_vm_report *r = vm_report(q, 0, 1, RPLAN_OBJECTIVE_BYTES);
    cr_assert(r->ok, "%s", r->message);
    rplan_vm_report_free(r);
    rplan_program_free(q);
}

/* An engine's verify that passes its first call and fails the next. */
static fhr_status verify_once(void *ctx, const rplan_kernel_call *c, fhr_error *err)
{
    (void)c;
    int *calls = ctx;
    if ((*calls)++ == 0)
        return FHR_OK;
    if (err) {
        err->status = FHR_E_BACKEND;
        snprintf(err->message, sizeof err->message, "the second check cannot run");
    }
    return FHR_E_BACKEND;
}

/* A failed run counts the checks made before the failure, not the call that failed. */
Test(holes, failed_run_counts_only_the_checks_made)
{
    static const char src[] = "rplan 1\n"
                              "value k = 4 KiB source synth(1)\n"
                              "ensure k @ cuda:0\n"
                              "plan \"a\" { body { run verify(k) } }\n"
                              "plan \"b\" { body { run verify(k) } }\n";
    rplan_program *p = compile_must(src);
    fhr_backend *b = NULL;
    cr_assert_eq(fhr_backend_open("emu", &b, NULL), FHR_OK);
    rplan_vm_opts o;
    memset(&o, 0, sizeof o);
    o.mode = RPLAN_VM_RUN;
    rplan_vm *vm = NULL;
    cr_assert_eq(rplan_vm_create(p, b, &o, &vm, NULL), FHR_OK);
    int calls = 0;
    cr_assert_eq(rplan_kernel_register(vm, "verify", verify_once, &calls, NULL), FHR_OK);
    rplan_vm_report *r = NULL;
    cr_assert_neq(rplan_vm_run(vm, &r, NULL), FHR_OK);
    cr_assert_not_null(r);
    cr_assert(!r->ok);
    cr_assert_eq(calls, 2);
    cr_assert_eq(r->total.checks, 1, "checks %llu: the failed call was counted",
                 (unsigned long long)r->total.checks);
    cr_assert_eq(r->total.check_failures, 0);
    rplan_vm_report_free(r);
    rplan_vm_destroy(vm);
    fhr_backend_destroy(b);
    rplan_program_free(p);
}

#ifndef FHEPLAN_CLI
#define FHEPLAN_CLI "build/fheplan"
#endif

/* The first integrity line of `fheplan run --device emu` of src. */
static void integrity_line(const char *src, char *line, size_t cap)
{
    char path[] = "/tmp/fheplan-holes-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(src, f);
    fclose(f);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s run --device emu %s 2>&1", FHEPLAN_CLI, path);
    FILE *pp = popen(cmd, "r");
    cr_assert_not_null(pp);
    char buf[1024];
    line[0] = 0;
    while (fgets(buf, sizeof buf, pp))
        if (!line[0] && strstr(buf, "integrity:"))
            snprintf(line, cap, "%s", strstr(buf, "integrity:"));
    pclose(pp);
    unlink(path);
}

/* The integrity line says what was checked, in the right number. */
Test(holes, integrity_line_says_what_was_checked)
{
    char line[256];
    integrity_line("rplan 1\nvalue k = 4 KiB source synth(1)\nensure k @ cuda:0\n"
                   "plan \"p\" { body { run verify(k) } }\n",
                   line, sizeof line);
    cr_assert_str_eq(line, "integrity: ok (1 check, 0 failed)\n");
    integrity_line("rplan 1\nvalue k = 4 KiB source synth(1)\nensure k @ cuda:0\n"
                   "plan \"p\" { body { run touch(k) } }\n",
                   line, sizeof line);
    cr_assert_str_eq(line, "integrity: not checked (no verify call ran)\n");
    integrity_line("rplan 1\nvalue k[2] = 4 KiB source synth(1 + i) seeded(3)\n"
                   "ensure k[0] @ cuda:0\nensure k[1] @ cuda:0\n"
                   "plan \"p\" { body { run verify(k[0], k[1]) } }\n",
                   line, sizeof line);
    cr_assert_str_eq(line, "integrity: ok (2 checks, 2 of them on seeded values, both halves; "
                           "0 failed)\n");
}

/* 1 when s[0..n) is well-formed UTF-8 */
static int utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], lo = 0x80, hi = 0xbf;
        size_t k = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!k || i + k > n)
            return 0;
        lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        if (k > 1 && (s[i + 1] < lo || s[i + 1] > hi))
            return 0;
        for (size_t j = 2; j < k; j++)
            if (s[i + j] < 0x80 || s[i + j] > 0xbf)
                return 0;
        i += k;
    }
    return 1;
}

static uint32_t crc32c(const unsigned char *b, size_t n, uint32_t crc)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= b[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (crc & 1 ? 0x82f63b78u : 0);
    }
    return ~crc;
}

/* stdout of a shell command, whole */
static unsigned char *sh_out(const char *cmd, size_t *n)
{
    FILE *pp = popen(cmd, "r");
    cr_assert_not_null(pp);
    size_t cap = 1 << 16;
    unsigned char *b = malloc(cap);
    *n = 0;
    size_t k;
    while ((k = fread(b + *n, 1, cap - *n, pp)) > 0)
        if ((*n += k) == cap)
            cr_assert_not_null(b = realloc(b, cap *= 2));
    pclose(pp);
    return b;
}

/* check --json prints UTF-8 whatever the input's names are: a file name that is not UTF-8,
 * bytecode whose embedded source name is not (a mutant with a good checksum). */
Test(holes, json_output_is_utf8_whatever_the_names)
{
    char dir[] = "/tmp/fheplan-utf8-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char plan[256], rpc[256], bad[256], cmd[1024];
    snprintf(plan, sizeof plan, "%s/srcname.rplan", dir);
    snprintf(rpc, sizeof rpc, "%s/m.rpc", dir);
    snprintf(bad, sizeof bad, "%s/x\xff.rplan", dir);
    FILE *f = fopen(plan, "w");
    fputs("rplan 1\nvalue a = 4 KiB at host\nensure a @ cuda:0\n", f);
    fclose(f);
    cr_assert_eq(link(plan, bad), 0);
    char cli[512] = "";
    if (FHEPLAN_CLI[0] != '/')
        cr_assert_not_null(getcwd(cli, sizeof cli - 1));
    snprintf(cmd, sizeof cmd, "cd %s && %s%s%s compile srcname.rplan -o m.rpc", dir, cli,
             cli[0] ? "/" : "", FHEPLAN_CLI);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    size_t n;
    snprintf(cmd, sizeof cmd, "cat %s", rpc);
    unsigned char *b = sh_out(cmd, &n);
    unsigned char *at = memmem(b, n, "srcname.rplan", 13);
    cr_assert_not_null(at);
    *at = 0xff;
    uint32_t crc = crc32c(b, 20, 0);
    crc = crc32c((const unsigned char[4]){0}, 4, crc);
    crc = crc32c(b + 24, n - 24, crc);
    for (int i = 0; i < 4; i++)
        b[20 + i] = (unsigned char)(crc >> (8 * i));
    f = fopen(rpc, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    free(b);
    const char *files[] = {rpc, bad};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s check --json '%s' 2>/dev/null", FHEPLAN_CLI, files[i]);
        unsigned char *out = sh_out(cmd, &n);
        cr_assert_gt(n, 0, "%s: no output", cmd);
        cr_assert(utf8_ok(out, n), "%s: not UTF-8: %.*s", cmd, (int)n, out);
        cr_assert_not_null(memmem(out, n, "\xef\xbf\xbd", 3), "%s: no U+FFFD: %.*s", cmd, (int)n,
                           out);
        free(out);
    }
    unlink(bad);
    unlink(plan);
    unlink(rpc);
    rmdir(dir);
}

/* Profiles are strict JSON with kernel names as the language writes them. */
Test(holes, profiles_strict_json_and_names)
{
    static const char *bad[] = {
        "{\"fheplan_profile\": 1, \"kernels\": []} trailing",
        "{\"fheplan_profile\": 1, \"kernels\": []}{}",
        "{\"fheplan_profile\": 1, \"kernels\": [{\"name\": \"a\\u0000b\", \"mean_s\": 1}]}",
        "{\"fheplan_profile\": 1, \"kernels\": [{\"name\": \"a\\u001bb\", \"mean_s\": 1}]}",
        "{\"fheplan_profile\": 1, \"kernels\": [{\"name\": \"a\x1b b\", \"mean_s\": 1}]}",
        "{\"fheplan_profile\": 1, \"kernels\": [{\"name\": \"a b\", \"mean_s\": 1}]}",
        "{\"fheplan_profile\": 1, \"kernels\": [{\"name\": \"ckks.\", \"mean_s\": 1}]}",
        "{\"fheplan_profile\": 1, \"kernels\": [{\"name\": \"9k\", \"mean_s\": 1}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rplan_kernel_profile *p = NULL;
        size_t n = 0;
        fhr_error e;
        fhr_error_init(&e);
        cr_assert_eq(rplan_profile_parse(bad[i], strlen(bad[i]), &p, &n, &e), FHR_E_INVALID,
                     "accepted: %s", bad[i]);
        cr_assert_null(p);
        cr_assert(strstr(e.message, "profile: ") == e.message, "%s", e.message);
        fhr_error_clear(&e);
    }
    static const char good[] = "{\"fheplan_profile\": 1, \"kernels\": [{\"name\": \"ckks.mul_2\","
                               " \"mean_s\": 1e-3}, {\"name\": \"_x\", \"mean_s\": 0}]}\n \n";
    rplan_kernel_profile *p = NULL;
    size_t n = 0;
    cr_assert_eq(rplan_profile_parse(good, strlen(good), &p, &n, NULL), FHR_OK);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(p[0].name, "ckks.mul_2");
    rplan_profile_free(p, n);
}

/* A repeat among many names is found (the look-up is hashed): the profile's, and a kernel
 * declared twice after 20,000 others. */
Test(holes, repeats_found_among_many_names)
{
    size_t cap = 64 + 20001 * 48, len = 0;
    char *t = malloc(cap);
    len += (size_t)snprintf(t + len, cap - len, "{\"fheplan_profile\": 1, \"kernels\": [");
    for (int i = 0; i < 20000; i++)
        len += (size_t)snprintf(t + len, cap - len, "{\"name\": \"k%d\", \"mean_s\": 1},", i);
    len += (size_t)snprintf(t + len, cap - len, "{\"name\": \"k17\", \"mean_s\": 1}]}");
    rplan_kernel_profile *p = NULL;
    size_t n = 0;
    fhr_error e;
    fhr_error_init(&e);
    cr_assert_eq(rplan_profile_parse(t, len, &p, &n, &e), FHR_E_INVALID);
    cr_assert_str_eq(e.message, "profile: kernel 'k17' is given twice");
    fhr_error_clear(&e);
    free(t);
    cap = 32 + 20001 * 32;
    t = malloc(cap);
    len = (size_t)snprintf(t, cap, "rplan 1\n");
    for (int i = 0; i < 20000; i++)
        len += (size_t)snprintf(t + len, cap - len, "kernel k%d cost 1 us\n", i);
    len += (size_t)snprintf(t + len, cap - len, "kernel k17 cost 2 us\n");
    rplan_diags *d = rplan_diags_new();
    rplan_program *prog = compile_src(t, d);
    char *txt = rplan_diags_render_string(d);
    cr_assert_null(prog);
    cr_assert(strstr(txt, "holes.rplan:20002:8: error: kernel 'k17' is declared twice"), "%s", txt);
    free(txt);
    rplan_diags_free(d);
    free(t);
}

/* The field past the limit is refused where it stands. */
Test(holes, seventeenth_field_refused_where_it_stands)
{
    char src[4096];
    size_t len = (size_t)snprintf(src, sizeof src, "rplan 1\nvalue a = 1 MiB at host fields(");
    for (int i = 0; i < 200; i++)
        len += (size_t)snprintf(src + len, sizeof src - len, "%sf%d", i ? ", " : "", i);
    snprintf(src + len, sizeof src - len, ")\n");
    rplan_diags *d = rplan_diags_new();
    rplan_program *prog = compile_src(src, d);
    char *txt = rplan_diags_render_string(d);
    cr_assert_null(prog);
    /* "fields(" ends at column 31; f0..f9 take 4 columns each, f10..f15 5 */
    cr_assert(strstr(txt, "holes.rplan:2:102: error: a value has at most 16 fields; 'f16' is "
                          "field 17"),
              "%s", txt);
    cr_assert_null(strstr(txt, "f17'"), "%s", txt);
    free(txt);
    rplan_diags_free(d);
}
