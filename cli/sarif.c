/* cli/sarif.c — `fheplan check --sarif`: the diagnostics and dry-run failures of every
 * file as one SARIF 2.1.0 log (the format code scanning reads), notes as related locations. */
#include "cli/sarif.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

cJSON *sarif_new(void)
{
    cJSON *log = cJSON_CreateObject();
    cJSON_AddStringToObject(log, "$schema", "https://json.schemastore.org/sarif-2.1.0.json");
    cJSON_AddStringToObject(log, "version", "2.1.0");
    cJSON *run = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(log, "runs"), run);
    cJSON *drv = cJSON_AddObjectToObject(cJSON_AddObjectToObject(run, "tool"), "driver");
    cJSON_AddStringToObject(drv, "name", "fheplan");
    cJSON_AddStringToObject(drv, "version", fhr_version());
    cJSON_AddStringToObject(drv, "informationUri", "man:fheplan-diagnose(7)");
    cJSON *rules = cJSON_AddArrayToObject(drv, "rules");
    for (size_t i = 0; i < rplan_nrules(); i++) {
        const rplan_rule *r = rplan_rule_get(i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", r->id);
        cJSON_AddStringToObject(o, "name", r->name);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "shortDescription"), "text", r->summary);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "defaultConfiguration"), "level",
                                strncmp(r->name, "unused-", 7) ? "error" : "warning");
        cJSON_AddItemToArray(rules, o);
    }
    cJSON_AddStringToObject(run, "columnKind", "unicodeCodePoints");
    cJSON_AddArrayToObject(run, "artifacts");
    cJSON_AddArrayToObject(run, "results");
    return log;
}

static cJSON *run_of(cJSON *log) { return cJSON_GetArrayItem(cJSON_GetObjectItem(log, "runs"), 0); }

static int rule_index(const rplan_rule *r)
{
    for (size_t i = 0; i < rplan_nrules(); i++)
        if (rplan_rule_get(i) == r)
            return (int)i;
    return 0;
}

/* A file name as a relative URI reference: unreserved bytes and '/' as they are, the
 * rest percent-encoded. */
static char *uri_of(const char *path)
{
    /* standard input has no file name: a relative reference of its own, "stdin" */
    if (!strcmp(path, "-") || !strcmp(path, "<stdin>"))
        path = "stdin";
    size_t n = strlen(path);
    char *u = malloc(3 * n + 1), *q = u;
    if (!u)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/", *p))
            *q++ = (char)*p;
        else
            q += sprintf(q, "%%%02X", *p);
    }
    *q = '\0';
    return u;
}

typedef struct srctext {
    const char *s;
    size_t n;
    int bytecode;   /* the input is bytecode (its file is binary) */
    size_t filelen; /* its length */
} srctext;

/* Start of line (1-based) in t, or NULL. */
static const char *line_at(srctext t, uint32_t line, const char **end)
{
    if (!t.s || !line)
        return NULL;
    const char *p = t.s, *lim = t.s + t.n;
    for (uint32_t l = 1; l < line; p++) {
        if (p >= lim)
            return NULL;
        if (*p == '\n')
            l++;
    }
    const char *e = p;
    while (e < lim && *e != '\n')
        e++;
    *end = e;
    return p;
}

/* A byte column (1-based) as a column of code points: UTF-8 continuation bytes before it
 * do not count. */
static uint32_t code_point_col(srctext t, uint32_t line, uint32_t col)
{
    const char *end, *p = line_at(t, line, &end);
    if (!p || !col)
        return col;
    uint32_t cp = 1;
    for (uint32_t k = 0; k + 1 < col && p + k < end; k++)
        cp += ((unsigned char)p[k] & 0xC0) != 0x80;
    return cp + (uint32_t)(p + col - 1 > end ? p + col - 1 - end : 0);
}

static cJSON *location(const char *file, srctext t, uint32_t line, uint32_t col,
                       uint32_t end_line, uint32_t end_col)
{
    cJSON *loc = cJSON_CreateObject();
    cJSON *phys = cJSON_AddObjectToObject(loc, "physicalLocation");
    char *u = uri_of(file ? file : "<input>");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(phys, "artifactLocation"), "uri", u ? u : "");
    free(u);
    if (!line && t.bytecode) {
        /* a damaged bytecode file has no source position: the region is the file */
        cJSON *r = cJSON_AddObjectToObject(phys, "region");
        cJSON_AddNumberToObject(r, "byteOffset", 0);
        cJSON_AddNumberToObject(r, "byteLength", (double)t.filelen);
    }
    if (line) {
        cJSON *r = cJSON_AddObjectToObject(phys, "region");
        uint32_t el = end_line >= line ? end_line : line;
        uint32_t sc = code_point_col(t, line, col ? col : 1);
        uint32_t ec = code_point_col(t, el, end_col ? end_col : (col ? col : 1) + 1);
        if (el == line && ec <= sc)
            ec = sc + 1;
        cJSON_AddNumberToObject(r, "startLine", line);
        cJSON_AddNumberToObject(r, "startColumn", sc);
        cJSON_AddNumberToObject(r, "endLine", el);
        cJSON_AddNumberToObject(r, "endColumn", ec);
    }
    return loc;
}

static cJSON *result(cJSON *results, const rplan_rule *rule, const char *level, const char *msg,
                     cJSON *loc)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "ruleId", rule->id);
    cJSON_AddNumberToObject(o, "ruleIndex", rule_index(rule));
    cJSON_AddStringToObject(o, "level", level);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "message"), "text", msg);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "locations"), loc);
    cJSON_AddItemToArray(results, o);
    return o;
}

void sarif_add(cJSON *log, const char *path, int rc, const rplan_diags *d,
               const rplan_vm_report *rep, const char *text, size_t len)
{
    cJSON *run = run_of(log);
    cJSON *results = cJSON_GetObjectItem(run, "results");
    srctext t = {text, len, 0, 0};
    struct stat st;
    if (strcmp(path, "-") && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        FILE *f = fopen(path, "rb");
        char head[16];
        size_t got = f ? fread(head, 1, sizeof head, f) : 0;
        if (f)
            fclose(f);
        t.bytecode = rplan_is_bytecode(head, got);
        t.filelen = (size_t)st.st_size;
    }
    char *u = uri_of(path);
    cJSON *art = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(art, "location"), "uri", u ? u : "");
    if (!strcmp(path, "-"))
        cJSON_AddStringToObject(cJSON_AddObjectToObject(art, "description"), "text",
                                "standard input");
    cJSON_AddItemToArray(cJSON_GetObjectItem(run, "artifacts"), art);
    free(u);
    if (rc == 2 && rplan_diags_count(d) == 0) { /* unreadable: load_input said nothing */
        char msg[600];
        snprintf(msg, sizeof msg, "cannot read '%s'", path);
        result(results, rplan_rule_of(msg), "error", msg, location(path, t, 0, 0, 0, 0));
        return;
    }
    cJSON *last = NULL;
    int related = 0;
    for (size_t i = 0; i < rplan_diags_count(d); i++) {
        const rplan_diag *g = rplan_diags_get(d, i);
        cJSON *loc = location(g->file, t, g->line, g->col, g->end_line, g->end_column);
        if (g->severity == RPLAN_NOTE && last) {
            cJSON *rl = cJSON_GetObjectItem(last, "relatedLocations");
            if (!rl)
                rl = cJSON_AddArrayToObject(last, "relatedLocations");
            cJSON_AddNumberToObject(loc, "id", ++related);
            cJSON_AddStringToObject(cJSON_AddObjectToObject(loc, "message"), "text", g->message);
            cJSON_AddItemToArray(rl, loc);
            continue;
        }
        const char *level = g->severity == RPLAN_ERROR ? "error"
                            : g->severity == RPLAN_WARNING ? "warning"
                                                           : "note";
        last = result(results, rplan_rule_of(g->message), level, g->message, loc);
        related = 0;
    }
    if (rep && !rep->ok) {
        /* the dry run's failure: from its column to the end of the statement's line */
        char msg[900];
        if (rep->scope[0])
            snprintf(msg, sizeof msg, "%s (in '%s')", rep->message, rep->scope);
        else
            snprintf(msg, sizeof msg, "%s", rep->message);
        uint32_t ec = 0;
        const char *end, *p = line_at(t, rep->line, &end);
        if (p) {
            const char *h = memchr(p, '#', (size_t)(end - p));
            const char *e = h ? h : end;
            while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                e--;
            ec = (uint32_t)(e - p) + 1;
        }
        result(results, rplan_rule_of_dry_run(rep->message), "error", msg,
               location(path, t, rep->line, rep->col, rep->line, ec));
    }
}

void sarif_print(cJSON *log, FILE *out)
{
    char *s = cJSON_Print(log);
    if (s) {
        fputs(s, out);
        fputc('\n', out);
        free(s);
    }
}
