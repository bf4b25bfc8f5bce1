/* cli/world.c — the report of a run over several MPI ranks, made at rank 0 from the
 * ranks' own JSON documents: per-rank figures, totals (bytes and counts summed, time the
 * slowest rank's, throughput = total bytes / that time) and every failure with its
 * rank. Plain JSON work: no MPI here (cli/mpi.c moves the documents). */
#include "cli/format.h"
#include "cli/world.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *fp_world_rank_doc(const fp_world *w, int exit_code, const char *output)
{
    cJSON *o = cJSON_CreateObject();
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = 0;
    cJSON_AddNumberToObject(o, "rank", w->rank);
    cJSON_AddStringToObject(o, "host", host);
    cJSON_AddNumberToObject(o, "local_rank", w->local_rank);
    cJSON_AddStringToObject(o, "cuda_visible_devices", w->bind);
    cJSON_AddNumberToObject(o, "exit", exit_code);
    cJSON *out = output ? cJSON_Parse(output) : NULL;
    if (out)
        cJSON_AddItemToObject(o, "output", out);
    else
        cJSON_AddNullToObject(o, "output");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* The first error of a rank's output as "file:line:col: error: message" (or a note that
 * the rank produced no report). */
static void rank_error(const cJSON *out, int exit_code, char *buf, size_t cap)
{
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(out, "error");
    const cJSON *diags = cJSON_GetObjectItemCaseSensitive(out, "diagnostics");
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(out, "file");
    const char *fn = cJSON_IsString(file) ? file->valuestring : "?";
    if (cJSON_IsObject(err)) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(err, "message");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(err, "scope");
        snprintf(buf, cap, "%s:%.0f:%.0f: error: %s%s%s%s", fn, num(err, "line"), num(err, "col"),
                 cJSON_IsString(m) ? m->valuestring : "failed",
                 cJSON_IsString(sc) && sc->valuestring[0] ? " (in '" : "",
                 cJSON_IsString(sc) ? sc->valuestring : "",
                 cJSON_IsString(sc) && sc->valuestring[0] ? "')" : "");
        return;
    }
    const cJSON *d;
    cJSON_ArrayForEach(d, diags)
    {
        const cJSON *sev = cJSON_GetObjectItemCaseSensitive(d, "severity");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(d, "message");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(d, "file");
        if (!cJSON_IsString(sev) || strcmp(sev->valuestring, "error") != 0)
            continue;
        snprintf(buf, cap, "%s:%.0f:%.0f: error: %s", cJSON_IsString(f) ? f->valuestring : fn,
                 num(d, "line"), num(d, "col"), cJSON_IsString(m) ? m->valuestring : "");
        return;
    }
    snprintf(buf, cap, "failed with exit status %d before it had a report (its standard "
                       "error says why)", exit_code);
}

static const char *const dirs[] = {"h2h", "h2d", "d2h", "d2d", "load"};

int fp_world_print_run(const char *file, int size, char *const *docs, int json, int colour)
{
    int worst = 0, nfailed = 0;
    double bytes[5] = {0}, moved = 0, max_time = 0, body = 0, plans = 0, requests = 0,
           bodies = 0, evictions = 0, checks = 0, check_failures = 0;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "file", file);
    cJSON_AddNumberToObject(root, "world_size", size);
    cJSON *ranks = cJSON_AddArrayToObject(root, "ranks");
    cJSON *failed = cJSON_CreateArray();
    const char *red = colour ? "\033[1;31m" : "", *off = colour ? "\033[0m" : "";
    const char *device = "?";
    double scale = 1;
    for (int r = 0; r < size; r++) {
        cJSON *rd = docs[r] ? cJSON_Parse(docs[r]) : NULL;
        if (!rd) { /* cannot happen with a well-behaved rank; keep the rank visible */
            rd = cJSON_CreateObject();
            cJSON_AddNumberToObject(rd, "rank", r);
            cJSON_AddNumberToObject(rd, "exit", 70);
            cJSON_AddNullToObject(rd, "output");
        }
        int ex = (int)num(rd, "exit");
        cJSON *out = cJSON_GetObjectItemCaseSensitive(rd, "output");
        const cJSON *okj = cJSON_GetObjectItemCaseSensitive(out, "ok");
        int ok = ex == 0 && cJSON_IsTrue(okj);
        cJSON_AddBoolToObject(rd, "ok", ok);
        const cJSON *tot = cJSON_GetObjectItemCaseSensitive(out, "totals");
        const cJSON *dev = cJSON_GetObjectItemCaseSensitive(out, "device");
        if (cJSON_IsString(dev))
            device = dev->valuestring;
        if (num(out, "scale") > 1)
            scale = num(out, "scale");
        double t = tot ? num(tot, "time_s") : 0, mv = tot ? num(tot, "bytes_moved") : 0;
        if (tot) {
            const cJSON *b = cJSON_GetObjectItemCaseSensitive(tot, "bytes");
            const cJSON *ig = cJSON_GetObjectItemCaseSensitive(tot, "integrity");
            for (int d = 0; d < 5; d++)
                bytes[d] += num(b, dirs[d]);
            moved += mv;
            body += num(tot, "body_s");
            plans += num(tot, "plans");
            requests += num(tot, "requests");
            bodies += num(tot, "bodies");
            evictions += num(tot, "evictions");
            checks += num(ig, "checks");
            check_failures += num(ig, "failures");
            if (t > max_time)
                max_time = t;
        }
        char a[32], tb[32], err[1200];
        if (!json) {
            if (tot)
                printf("  rank %d (%s): %s, %s moved (%.2f GB/s), %.0f %s, %.0f %s, %.0f %s%s\n",
                       r, cJSON_IsString(dev) ? dev->valuestring : "?", fmt_time(t, tb, sizeof tb),
                       fmt_bytes((uint64_t)mv, a, sizeof a), t > 0 ? mv / t / 1e9 : 0,
                       num(tot, "plans"), plural((uint64_t)num(tot, "plans"), "plan", "plans"),
                       num(tot, "requests"),
                       plural((uint64_t)num(tot, "requests"), "request", "requests"),
                       num(tot, "bodies"), plural((uint64_t)num(tot, "bodies"), "body", "bodies"),
                       ok ? "" : ", FAILED");
            else
                printf("  rank %d: FAILED\n", r);
        }
        if (!ok) {
            nfailed++;
            rank_error(out, ex, err, sizeof err);
            cJSON_AddStringToObject(rd, "message", err);
            cJSON_AddItemToArray(failed, cJSON_CreateNumber(r));
            if (!json)
                fprintf(stderr, "fheplan: %srank %d:%s %s\n", red, r, off, err);
            if (ex == 0)
                ex = 1;
        }
        if (ex > worst)
            worst = ex;
        cJSON_AddItemToArray(ranks, rd);
    }
    cJSON *t = cJSON_AddObjectToObject(root, "totals");
    cJSON *b = cJSON_AddObjectToObject(t, "bytes");
    for (int d = 0; d < 5; d++)
        cJSON_AddNumberToObject(b, dirs[d], bytes[d]);
    cJSON_AddNumberToObject(t, "bytes_moved", moved);
    cJSON_AddNumberToObject(t, "plans", plans);
    cJSON_AddNumberToObject(t, "requests", requests);
    cJSON_AddNumberToObject(t, "bodies", bodies);
    cJSON_AddNumberToObject(t, "evictions", evictions);
    cJSON_AddNumberToObject(t, "body_s", body);
    cJSON_AddNumberToObject(t, "time_s", max_time); /* the slowest rank */
    cJSON_AddNumberToObject(t, "throughput_gbps", max_time > 0 ? moved / max_time / 1e9 : 0);
    cJSON *ig = cJSON_AddObjectToObject(t, "integrity");
    cJSON_AddNumberToObject(ig, "checks", checks);
    cJSON_AddNumberToObject(ig, "failures", check_failures);
    cJSON_AddBoolToObject(ig, "ok", check_failures == 0);
    cJSON_AddItemToObject(root, "failed_ranks", failed);
    cJSON_AddBoolToObject(root, "ok", nfailed == 0);
    if (json) {
        json_clean_utf8(root);
        char *s = cJSON_Print(root);
        if (s)
            printf("%s\n", s);
        free(s);
    } else {
        char a[32], tb[32], h[32], d2[32], bs[32], sc[48] = "";
        if (scale > 1)
            snprintf(sc, sizeof sc, " (sizes divided by %.0f)", scale);
        printf("total over %d ranks on %s%s: %s moved in %s (slowest rank) = %.2f GB/s; "
               "h2d %s, d2h %s; %.0f bodies, %s of body time; integrity %s\n",
               size, device, sc, fmt_bytes((uint64_t)moved, a, sizeof a),
               fmt_time(max_time, tb, sizeof tb), max_time > 0 ? moved / max_time / 1e9 : 0,
               fmt_bytes((uint64_t)bytes[1], h, sizeof h),
               fmt_bytes((uint64_t)bytes[2], d2, sizeof d2), bodies,
               fmt_time(body, bs, sizeof bs), check_failures ? "FAILED" : "ok");
        if (nfailed)
            printf("FAILED on %d of %d ranks\n", nfailed, size);
        else
            printf("ok\n");
    }
    cJSON_Delete(root);
    return worst;
}
