/* cli/output.c — what the subcommands print and write alike: diagnostics as JSON, the one
 * JSON document (on stdout or into a rank's buffer), a stage's report as text, and output
 * files (never over an input, written atomically). */
#include "cli/cli.h"
#include "cli/format.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- output files ------------------------------------------------------------------ */

int check_output(const cli *c, const char *out, const char *opt)
{
    struct stat so, si;
    if (!strcmp(out, "-"))
        return 0; /* standard output is never an input file */
    if (stat(out, &so) != 0)
        return 0; /* not there yet: cannot be an input */
    for (size_t i = 0; i < c->nfiles; i++)
        if (strcmp(c->files[i], "-") && stat(c->files[i], &si) == 0 &&
            si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            fprintf(stderr, "fheplan: %s '%s' is the input file '%s'; refusing to overwrite "
                    "it\n", opt, out, c->files[i]);
            return usage(NULL, NULL);
        }
    return 0;
}

int write_atomic(const char *path, const void *buf, size_t len)
{
    if (!strcmp(path, "-"))
        return fwrite(buf, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : -1;
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(tmp, n + 16, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        free(tmp);
        return -1;
    }
    /* the mode of the file it replaces, else what creat() would give (mkstemp's is 0600) */
    struct stat st;
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, stat(path, &st) == 0 ? st.st_mode & 07777 : 0666 & ~um);
    const char *p = buf;
    size_t left = len;
    int ok = 1;
    while (left && ok) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        ok = w > 0;
        if (ok) {
            p += w;
            left -= (size_t)w;
        }
    }
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        saved = errno;
    }
    if (!ok)
        unlink(tmp);
    free(tmp);
    errno = saved;
    return ok ? 0 : -1;
}

/* ---- JSON ------------------------------------------------------------------------- */

cJSON *diags_json(const rplan_diags *d)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; d && i < rplan_diags_count(d); i++) {
        const rplan_diag *g = rplan_diags_get(d, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "severity", g->severity == RPLAN_ERROR     ? "error"
                                               : g->severity == RPLAN_WARNING ? "warning"
                                                                              : "note");
        cJSON_AddStringToObject(o, "file", g->file ? g->file : "");
        cJSON_AddNumberToObject(o, "line", g->line);
        cJSON_AddNumberToObject(o, "col", g->col);
        cJSON_AddNumberToObject(o, "end_line", g->end_line);
        cJSON_AddNumberToObject(o, "end_col", g->end_column);
        if (g->severity != RPLAN_NOTE)
            cJSON_AddStringToObject(o, "rule", rplan_rule_of(g->message)->id);
        cJSON_AddStringToObject(o, "message", g->message ? g->message : "");
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

cJSON *input_diags_json(const input *in)
{
    cJSON *a = diags_json(in->d);
    if (in->error[0]) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "severity", "error");
        cJSON_AddStringToObject(o, "file", in->path ? in->path : "");
        cJSON_AddNumberToObject(o, "line", 0);
        cJSON_AddNumberToObject(o, "col", 0);
        cJSON_AddStringToObject(o, "message", in->error);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

/* Where print_json writes: stdout, or a buffer while one MPI rank or world-size check
 * collects its document (world_run, world_check). */
FILE *json_out;

void print_json(cJSON *o)
{
    char *s = cJSON_Print(o);
    FILE *out = json_out ? json_out : stdout;
    if (s) {
        fputs(s, out);
        fputc('\n', out);
        free(s);
    }
}

/* ---- report text ------------------------------------------------------------------- */

void print_stage(const rplan_stage_report *r, int explain, int is_total)
{
    char a[32], b[32], t[32];
    uint64_t moved = r->load_bytes;
    for (int d = 0; d < FHR_DIR_NONE; d++)
        moved += r->bytes[d];
    if (explain) {
        printf("  %s %s: %llu plans, %llu requests, %llu bodies; %s would move\n",
               is_total ? "" : "stage", r->name, (unsigned long long)r->plans,
               (unsigned long long)r->requests, (unsigned long long)r->bodies,
               fmt_bytes(moved, a, sizeof a));
    } else {
        printf("%s %s: %s, %s moved (%.2f GB/s), %llu plans, %llu requests\n",
               is_total ? "" : "stage", r->name, fmt_time(r->time_s, t, sizeof t),
               fmt_bytes(moved, a, sizeof a), r->time_s > 0 ? (double)moved / r->time_s / 1e9 : 0,
               (unsigned long long)r->plans, (unsigned long long)r->requests);
    }
    const char *ind = explain ? "    " : "  ";
    printf("%smoves:", ind);
    for (int d = 0; d < FHR_DIR_NONE; d++)
        printf(" %s %s (%llu)", fhr_direction_name((fhr_direction)d),
               fmt_bytes(r->bytes[d], a, sizeof a), (unsigned long long)r->copies[d]);
    printf(", loads %s (%llu), evictions %llu\n", fmt_bytes(r->load_bytes, b, sizeof b),
           (unsigned long long)r->loads, (unsigned long long)r->evictions);
    if (r->regen_bytes)
        printf("%sregenerated on devices: %s (seeded fields; not over PCIe)\n", ind,
               fmt_bytes(r->regen_bytes, a, sizeof a));
    printf("%speak:", ind);
    for (size_t i = 0; i < r->npeaks; i++) {
        char lb[16];
        printf("%s %s %s", i ? "," : "", fhr_loc_format(r->peaks[i].loc, lb, sizeof lb),
               fmt_bytes(r->peaks[i].peak_bytes, a, sizeof a));
        if (r->peaks[i].has_budget)
            printf(" of %s", fmt_bytes(r->peaks[i].budget_bytes, b, sizeof b));
    }
    if (!r->npeaks)
        printf(" nothing placed");
    printf("\n");
    if (!explain && r->regen_checks)
        printf("  bodies: %llu, %s of body time; integrity: %s (%llu checks, %llu of them "
               "on seeded values, both halves; %llu failed)\n",
               (unsigned long long)r->bodies, fmt_time(r->body_s, t, sizeof t),
               r->check_failures ? "FAILED" : "ok", (unsigned long long)r->checks,
               (unsigned long long)r->regen_checks, (unsigned long long)r->check_failures);
    else if (!explain)
        printf("  bodies: %llu, %s of body time; integrity: %s (%llu checks, %llu failed)\n",
               (unsigned long long)r->bodies, fmt_time(r->body_s, t, sizeof t),
               r->check_failures ? "FAILED" : "ok", (unsigned long long)r->checks,
               (unsigned long long)r->check_failures);
}
