/* cli/output.c — what the subcommands print and write alike: diagnostics as JSON, the one
 * JSON document (on stdout or into a rank's buffer), a stage's report as text, and output
 * files (never over an input; a regular file replaced atomically, through a symbolic link
 * the file it names; a character device or FIFO written through, never replaced). */
#include "cli/cli.h"
#include "cli/format.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- output files ------------------------------------------------------------------ */

/* What an existing output path is, following symbolic links: 'r' a regular file (or
 * nothing there yet), 's' a stream written through (character device, FIFO), 'd' a
 * directory, 'x' anything else (block device, socket). */
static char output_kind(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 'r';
    if (S_ISREG(st.st_mode))
        return 'r';
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
        return 's';
    return S_ISDIR(st.st_mode) ? 'd' : 'x';
}

int check_output(const cli *c, const char *out, const char *opt)
{
    struct stat so, si;
    if (!strcmp(out, "-"))
        return 0; /* standard output is never an input file */
    char kind = output_kind(out);
    if (kind == 'd' || kind == 'x') {
        fprintf(stderr, "fheplan: %s '%s' is %s; refusing to write it (a regular file, a "
                "character device or a FIFO, or a symbolic link to one, is written)\n", opt,
                out, kind == 'd' ? "a directory" : "neither a regular file, a character device "
                "nor a FIFO");
        return usage(NULL, NULL);
    }
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

int same_output(const char *a, const char *b)
{
    struct stat sa, sb;
    if (!strcmp(a, b))
        return 1;
    return strcmp(a, "-") && strcmp(b, "-") && stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Writes all of buf to fd; 0, or -1 with errno set. */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* A character device or FIFO (or a link to one): written through, never replaced. */
static int write_through(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_NOCTTY);
    if (fd < 0)
        return -1;
    int rc = write_all(fd, buf, len), saved = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    errno = saved;
    return rc;
}

int write_atomic(const char *path, const void *buf, size_t len)
{
    if (!strcmp(path, "-"))
        return fwrite(buf, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : -1;
    switch (output_kind(path)) {
    case 's':
        return write_through(path, buf, len);
    case 'd':
        errno = EISDIR;
        return -1;
    case 'x':
        errno = EINVAL;
        return -1;
    default:
        break;
    }
    /* a symbolic link: the file it names is replaced (the link stays); a link to nothing
     * yet is written through, creating that file */
    struct stat lst;
    char *real = NULL;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        real = realpath(path, NULL);
        if (!real) {
            if (errno != ENOENT)
                return -1;
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY, 0666);
            if (fd < 0)
                return -1;
            int rc = write_all(fd, buf, len), saved = errno;
            if (close(fd) != 0 && rc == 0) {
                rc = -1;
                saved = errno;
            }
            errno = saved;
            return rc;
        }
        path = real;
    }
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp) {
        free(real);
        errno = ENOMEM;
        return -1;
    }
    snprintf(tmp, n + 16, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int saved = errno;
        free(tmp);
        free(real);
        errno = saved;
        return -1;
    }
    /* the mode of the file it replaces, else what creat() would give (mkstemp's is 0600) */
    struct stat st;
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, stat(path, &st) == 0 ? st.st_mode & 07777 : 0666 & ~um);
    int ok = write_all(fd, buf, len) == 0;
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
    free(real);
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
    json_clean_utf8(o); /* names and messages copied from input may be ill-formed */
    char *s = cJSON_Print(o);
    FILE *out = json_out ? json_out : stdout;
    if (s) {
        fputs(s, out);
        fputc('\n', out);
        free(s);
    }
}


/* The integrity words of a stage: what the verify calls that ran checked and how many
 * differed; "not checked" when no verify call ran (nothing was checked, so nothing is ok). */
static const char *integrity_text(const rplan_stage_report *r, char *buf, size_t cap)
{
    unsigned long long n = r->checks, g = r->regen_checks, f = r->check_failures;
    if (!n) {
        snprintf(buf, cap, "not checked (no verify call ran)");
        return buf;
    }
    int o = snprintf(buf, cap, "%s (%llu check%s", f ? "FAILED" : "ok", n, n == 1 ? "" : "s");
    if (g && o > 0 && (size_t)o < cap)
        o += snprintf(buf + o, cap - (size_t)o, ", %llu of them on seeded values, both halves", g);
    if (o > 0 && (size_t)o < cap)
        snprintf(buf + o, cap - (size_t)o, "%s %llu failed)", g ? ";" : ",", f);
    return buf;
}

/* ---- report text ------------------------------------------------------------------- */

void print_stage(const rplan_stage_report *r, int explain, int is_total)
{
    char a[32], b[32], t[32];
    uint64_t moved = r->load_bytes;
    for (int d = 0; d < FHR_DIR_NONE; d++)
        moved += r->bytes[d];
    if (explain) {
        printf("  %s %s: %llu %s, %llu %s, %llu %s; %s would move\n",
               is_total ? "" : "stage", r->name, (unsigned long long)r->plans,
               plural(r->plans, "plan", "plans"), (unsigned long long)r->requests,
               plural(r->requests, "request", "requests"), (unsigned long long)r->bodies,
               plural(r->bodies, "body", "bodies"), fmt_bytes(moved, a, sizeof a));
    } else {
        printf("%s %s: %s, %s moved (%.2f GB/s), %llu %s, %llu %s\n",
               is_total ? "" : "stage", r->name, fmt_time(r->time_s, t, sizeof t),
               fmt_bytes(moved, a, sizeof a), r->time_s > 0 ? (double)moved / r->time_s / 1e9 : 0,
               (unsigned long long)r->plans, plural(r->plans, "plan", "plans"),
               (unsigned long long)r->requests, plural(r->requests, "request", "requests"));
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
    if (!explain) {
        char ig[160];
        printf("  bodies: %llu, %s of body time; integrity: %s\n", (unsigned long long)r->bodies,
               fmt_time(r->body_s, t, sizeof t), integrity_text(r, ig, sizeof ig));
    }
}
