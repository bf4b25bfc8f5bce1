/* cli/timeline.c — `fheplan run --timeline FILE.html`: the run's trace (rplan_vm_trace_json)
 * drawn as one self-contained HTML page of inline SVG: stages, streams, evictions, charges. */
#include "cli/timeline.h"
#include "cli/cli.h"
#include "cli/format.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TL_WIDTH 1500   /* the picture's width in px */
#define TL_LABEL 230    /* the label column */
#define TL_LANE 22      /* one stream's row */
#define TL_STAGE 18     /* one level of stages */
#define TL_CHART 74     /* one location's charged-bytes chart */
#define TL_MAX_LANES 64
#define TL_MAX_LOCS 16

typedef struct lane {
    double tid;
    char name[64];
    int host;
} lane;

typedef struct tl {
    FILE *f;
    double t0, t1; /* microseconds */
    double x0, pw; /* plot origin and width */
} tl;

static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

static double xof(const tl *t, double us)
{
    double span = t->t1 > t->t0 ? t->t1 - t->t0 : 1;
    return t->x0 + (us - t->t0) / span * t->pw;
}

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static double num_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* A rectangle with its tooltip (name, start, duration) and, when wide enough, its name. */
static void slice(const tl *t, const cJSON *e, double y, double h, const char *fill, int label)
{
    double ts = num_of(e, "ts"), dur = num_of(e, "dur");
    double x = xof(t, ts), w = xof(t, ts + dur) - x;
    if (w < 0.6)
        w = 0.6;
    char a[32], b[32];
    fprintf(t->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                  "<title>", x, y, w, h, fill);
    esc(t->f, str_of(e, "name"));
    fprintf(t->f, " \xe2\x80\x94 at %s, %s</title></rect>\n", fmt_time(ts / 1e6, a, sizeof a),
            fmt_time(dur / 1e6, b, sizeof b));
    /* the label: a stage's last name part, when it fits */
    const char *nm = str_of(e, "name"), *sl = strrchr(nm, '/');
    if (label && sl && sl[1])
        nm = sl + 1;
    if (label && w > 6.2 * (double)strlen(nm) + 6) {
        fprintf(t->f, "<text x=\"%.1f\" y=\"%.1f\" class=\"in\">", x + 3, y + h - 5);
        esc(t->f, nm);
        fputs("</text>\n", t->f);
    }
}

static const char *lane_fill(const cJSON *e)
{
    const char *cat = str_of(e, "cat");
    if (!strcmp(cat, "body"))
        return "#3f9b4f";
    if (!strcmp(cat, "transfer"))
        return strstr(str_of(e, "name"), "-> host") || strstr(str_of(e, "name"), "-> pinned")
                   ? "#d9892b"
                   : "#3b73c9";
    if (!strcmp(cat, "request"))
        return "#9aa4b1";
    if (!strcmp(cat, "plan"))
        return "#7d6bb3";
    return "#b8b8b8";
}

/* A step chart of one location's charged bytes against its budget. */
static void chart(const tl *t, const cJSON *ev, const char *name, double y)
{
    double peak = 0, budget = 0;
    size_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "C") || strcmp(str_of(e, "name"), name))
            continue;
        const cJSON *a = cJSON_GetObjectItem(e, "args");
        double v = num_of(a, "bytes");
        if (v > peak)
            peak = v;
        if (num_of(a, "budget") > 0)
            budget = num_of(a, "budget");
        n++;
    }
    double top = (budget > peak ? budget : peak) * 1.08;
    if (top <= 0)
        top = 1;
    double h = TL_CHART - 16, base = y + TL_CHART - 6;
    char pb[32], bb[32];
    fprintf(t->f, "<text x=\"8\" y=\"%.1f\" class=\"lb\">", y + 22);
    esc(t->f, name);
    fprintf(t->f, "</text>\n<text x=\"8\" y=\"%.1f\" class=\"sm\">peak %s", y + 38,
            fmt_bytes((uint64_t)peak, pb, sizeof pb));
    if (budget > 0)
        fprintf(t->f, " of %s (%.0f%%)", fmt_bytes((uint64_t)budget, bb, sizeof bb),
                100.0 * peak / budget);
    fputs("</text>\n", t->f);
    fprintf(t->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"bg\"/>\n",
            t->x0, base - h, t->pw, h);
    /* the step path: a sample holds until the next one */
    fprintf(t->f, "<path class=\"area\" d=\"M%.1f %.1f", t->x0, base);
    double last = 0;
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "C") || strcmp(str_of(e, "name"), name))
            continue;
        double x = xof(t, num_of(e, "ts"));
        double v = num_of(cJSON_GetObjectItem(e, "args"), "bytes");
        fprintf(t->f, " L%.1f %.1f L%.1f %.1f", x, base - last / top * h, x, base - v / top * h);
        last = v;
    }
    fprintf(t->f, " L%.1f %.1f L%.1f %.1f Z\"/>\n", t->x0 + t->pw, base - last / top * h,
            t->x0 + t->pw, base);
    if (budget > 0) {
        double by = base - budget / top * h;
        fprintf(t->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"budget\">"
                      "<title>budget %s</title></line>\n",
                t->x0, by, t->x0 + t->pw, by, bb);
        fprintf(t->f, "<text x=\"%.1f\" y=\"%.1f\" class=\"sm bt\">budget %s</text>\n",
                t->x0 + t->pw - 4, by - 3, bb);
    }
    (void)n;
}

static int nice_step(double span_us, double *step)
{
    static const double m[] = {1, 2, 5};
    double s = 1;
    for (int k = 0; k < 40; k++) {
        for (int i = 0; i < 3; i++) {
            double v = s * m[i];
            if (span_us / v <= 10) {
                *step = v;
                return 1;
            }
        }
        s *= 10;
    }
    *step = span_us;
    return 1;
}

int timeline_write(const char *path, const char *plan, const rplan_vm_report *rep,
                   const char *trace_json)
{
    cJSON *doc = trace_json ? cJSON_Parse(trace_json) : NULL;
    const cJSON *ev = doc ? cJSON_GetObjectItem(doc, "traceEvents") : NULL;
    if (!cJSON_IsArray(ev)) {
        cJSON_Delete(doc);
        errno = EINVAL;
        return -1;
    }
    /* the lanes (one per stream that did something), the time range, the stage depth */
    lane lanes[TL_MAX_LANES];
    size_t nl = 0;
    char locs[TL_MAX_LOCS][48];
    size_t nlocs = 0, nevict = 0;
    tl t = {0};
    t.t0 = 1e300;
    t.t1 = 0;
    const cJSON *e;
    int host_scopes = 0;
    cJSON_ArrayForEach(e, ev)
    {
        const char *ph = str_of(e, "ph"), *cat = str_of(e, "cat");
        double ts = num_of(e, "ts"), end = ts + num_of(e, "dur");
        if (!strcmp(ph, "M"))
            continue;
        if (ts < t.t0)
            t.t0 = ts;
        if (end > t.t1)
            t.t1 = end;
        if (!strcmp(ph, "i"))
            nevict++;
        if (!strcmp(ph, "C")) {
            size_t k = 0;
            while (k < nlocs && strcmp(locs[k], str_of(e, "name")))
                k++;
            if (k == nlocs && nlocs < TL_MAX_LOCS)
                snprintf(locs[nlocs++], sizeof locs[0], "%s", str_of(e, "name"));
            continue;
        }
        if (strcmp(ph, "X") || !strcmp(cat, "stage") || !strcmp(cat, "action"))
            continue;
        double tid = num_of(e, "tid");
        if (tid == 0) {
            host_scopes = 1;
            continue;
        }
        size_t k = 0;
        while (k < nl && lanes[k].tid != tid)
            k++;
        if (k == nl && nl < TL_MAX_LANES) {
            lanes[nl].tid = tid;
            lanes[nl].host = 0;
            snprintf(lanes[nl].name, sizeof lanes[nl].name, "other stream %.0f", tid);
            nl++;
        }
    }
    if (t.t1 <= t.t0) {
        t.t0 = 0;
        t.t1 = 1;
    }
    /* lane names from the trace's thread names; transfer streams first */
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "M"))
            continue;
        for (size_t k = 0; k < nl; k++)
            if (lanes[k].tid == num_of(e, "tid"))
                snprintf(lanes[k].name, sizeof lanes[k].name, "%s",
                         str_of(cJSON_GetObjectItem(e, "args"), "name"));
    }
    for (size_t a = 0; a < nl; a++)
        for (size_t b = a + 1; b < nl; b++) {
            int ta = !strncmp(lanes[a].name, "transfer", 8), tb = !strncmp(lanes[b].name, "transfer", 8);
            if ((tb && !ta) || (ta == tb && strcmp(lanes[b].name, lanes[a].name) < 0)) {
                lane x = lanes[a];
                lanes[a] = lanes[b];
                lanes[b] = x;
            }
        }
    if (host_scopes && nl < TL_MAX_LANES) {
        lanes[nl].tid = 0;
        lanes[nl].host = 1;
        snprintf(lanes[nl].name, sizeof lanes[nl].name, "host: plans and requests");
        nl++;
    }
    /* stage levels: a stage inside another's interval sits one level below */
    size_t nst = 0;
    cJSON_ArrayForEach(e, ev) nst += !strcmp(str_of(e, "cat"), "stage");
    double *st0 = calloc(nst + 1, sizeof *st0), *st1 = calloc(nst + 1, sizeof *st1);
    int *lvl = calloc(nst + 1, sizeof *lvl), *sdep = calloc(nst + 1, sizeof *sdep);
    const cJSON **sev = calloc(nst + 1, sizeof *sev);
    if (!st0 || !st1 || !lvl || !sev || !sdep) {
        free(st0), free(st1), free(lvl), free(sev), free(sdep);
        cJSON_Delete(doc);
        errno = ENOMEM;
        return -1;
    }
    size_t si = 0;
    int depth = 0;
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "cat"), "stage"))
            continue;
        sev[si] = e;
        st0[si] = num_of(e, "ts");
        st1[si] = st0[si] + num_of(e, "dur");
        si++;
    }
    /* a stage's level is its nesting (the '/' in its name); stages of one level whose
     * times overlap (the host runs ahead of the device) take rows of their own */
    double rowend[64];
    int rowdepth[64], nrows = 0;
    for (size_t a = 0; a < nst; a++) {
        int d = 0;
        for (const char *q = str_of(sev[a], "name"); *q; q++)
            d += *q == '/';
        int r = -1;
        for (int k = 0; k < nrows && r < 0; k++)
            if (rowdepth[k] == d && rowend[k] <= st0[a])
                r = k;
        if (r < 0 && nrows < 64) {
            r = nrows++;
            rowdepth[r] = d;
        }
        if (r < 0)
            r = nrows - 1;
        rowend[r] = st1[a];
        lvl[a] = r;
        sdep[a] = d;
    }
    /* rows in order of depth, then of creation */
    int order[64];
    for (int k = 0; k < nrows; k++) {
        order[k] = 0;
        for (int q = 0; q < nrows; q++)
            order[k] += rowdepth[q] < rowdepth[k] || (rowdepth[q] == rowdepth[k] && q < k);
    }
    for (size_t a = 0; a < nst; a++)
        lvl[a] = order[lvl[a]];
    depth = nrows;

    /* built in memory, then written atomically: a failure leaves no half-written page and
     * the file that was there stays */
    char *page = NULL;
    size_t page_len = 0;
    FILE *f = open_memstream(&page, &page_len);
    if (!f) {
        free(st0), free(st1), free(lvl), free(sev), free(sdep);
        cJSON_Delete(doc);
        return -1;
    }
    t.f = f;
    t.x0 = TL_LABEL;
    t.pw = TL_WIDTH - TL_LABEL - 20;
    double y_axis = 28, y_st = y_axis + 8, y_lanes = y_st + depth * TL_STAGE + 10;
    double y_ev = y_lanes + (double)nl * TL_LANE + 6, y_ch = y_ev + TL_LANE + 10;
    double height = y_ch + (double)nlocs * TL_CHART + 10;

    char a[32], b[32], c[32];
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
    fputs("fheplan run ", f);
    esc(f, plan);
    fputs("</title>\n<style>\n"
          "body{font:14px/1.4 sans-serif;margin:16px 20px;color:#1d2330;background:#fff}\n"
          "h1{font-size:18px;margin:0 0 4px}p{margin:2px 0 10px}\n"
          "svg text{font:11px sans-serif;fill:#1d2330}\n"
          "svg .lb{font-weight:bold}svg .sm{font-size:10px;fill:#4a5160}\n"
          "svg .in{fill:#fff;font-size:10px}svg .bt{text-anchor:end;fill:#c22}\n"
          "svg .bg{fill:#f3f5f8}svg .area{fill:#8fb3e8;stroke:#2d5fb0;stroke-width:1}\n"
          "svg .budget{stroke:#c22;stroke-width:1.5;stroke-dasharray:6 3}\n"
          "svg .grid{stroke:#e1e5ea}svg .ev{stroke:#c22;stroke-width:1.2}\n"
          ".key span{display:inline-block;width:12px;height:12px;margin:0 4px 0 14px;"
          "vertical-align:-1px}\n"
          "</style>\n</head>\n<body>\n<h1>fheplan run ", f);
    esc(f, plan);
    fputs("</h1>\n<p>", f);
    if (rep) {
        uint64_t moved = rep->total.load_bytes;
        for (int d = 0; d < FHR_DIR_NONE; d++)
            moved += rep->total.bytes[d];
        fprintf(f, "on %s", rep->device);
        if (rep->scale > 1)
            fprintf(f, " (sizes divided by %llu)", (unsigned long long)rep->scale);
        fprintf(f, ": %s, %s moved, %llu evictions, %llu bodies; lower bound %s, ratio %.2f; %s",
                fmt_time(rep->total.time_s, a, sizeof a), fmt_bytes(moved, b, sizeof b),
                (unsigned long long)rep->total.evictions, (unsigned long long)rep->total.bodies,
                fmt_time(rep->lower_bound_s, c, sizeof c), rep->ratio,
                rep->ok ? "ok" : "FAILED: ");
        if (!rep->ok)
            esc(f, rep->message);
    }
    fputs("</p>\n<p class=\"key\">"
          "<span style=\"background:#3b73c9\"></span>transfer to a device"
          "<span style=\"background:#d9892b\"></span>transfer back"
          "<span style=\"background:#3f9b4f\"></span>body (kernels)"
          "<span style=\"background:#9aa4b1\"></span>request"
          "<span style=\"background:#7d6bb3\"></span>plan"
          "<span style=\"background:#c22\"></span>eviction, budget"
          "<span style=\"background:#8fb3e8\"></span>bytes charged</p>\n", f);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
               "viewBox=\"0 0 %d %.0f\">\n",
            TL_WIDTH, height, TL_WIDTH, height);
    fprintf(f, "<rect width=\"%d\" height=\"%.0f\" fill=\"#fff\"/>\n", TL_WIDTH, height);
    /* the time axis and its grid */
    double step;
    nice_step(t.t1 - t.t0, &step);
    for (double v = 0; t.t0 + v <= t.t1 + 1e-9; v += step) {
        double x = xof(&t, t.t0 + v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n", x,
                y_axis + 4, x, height - 6);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x, y_axis,
                fmt_time(v / 1e6, a, sizeof a));
    }
    fprintf(f, "<text x=\"8\" y=\"%.1f\" class=\"lb\">time</text>\n", y_axis);
    /* stages */
    fprintf(f, "<text x=\"8\" y=\"%.1f\" class=\"lb\">stages</text>\n", y_st + 13);
    static const char *const stage_fill[] = {"#44546a", "#5f7391", "#7b8fae", "#98aac6"};
    for (size_t k = 0; k < nst; k++)
        slice(&t, sev[k], y_st + lvl[k] * TL_STAGE, TL_STAGE - 2, stage_fill[sdep[k] % 4], 1);
    /* one lane per stream, then the host's scopes */
    for (size_t k = 0; k < nl; k++) {
        double y = y_lanes + (double)k * TL_LANE;
        fprintf(f, "<text x=\"8\" y=\"%.1f\">", y + 15);
        esc(f, lanes[k].name);
        fputs("</text>\n", f);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" class=\"bg\"/>\n", t.x0,
                y + 2, t.pw, TL_LANE - 4);
        cJSON_ArrayForEach(e, ev)
        {
            const char *cat = str_of(e, "cat");
            if (strcmp(str_of(e, "ph"), "X") || !strcmp(cat, "stage") || !strcmp(cat, "action") ||
                num_of(e, "tid") != lanes[k].tid)
                continue;
            slice(&t, e, y + 2, TL_LANE - 4, lane_fill(e), 0);
        }
    }
    /* evictions */
    fprintf(f, "<text x=\"8\" y=\"%.1f\">evictions (%zu)</text>\n", y_ev + 15, nevict);
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "i"))
            continue;
        double x = xof(&t, num_of(e, "ts"));
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"ev\"><title>", x,
                y_ev + 3, x, y_ev + TL_LANE - 3);
        esc(f, str_of(e, "name"));
        fprintf(f, " \xe2\x80\x94 at %s</title></line>\n", fmt_time(num_of(e, "ts") / 1e6, a, sizeof a));
    }
    /* charged bytes per location */
    for (size_t k = 0; k < nlocs; k++)
        chart(&t, ev, locs[k], y_ch + (double)k * TL_CHART);
    fputs("</svg>\n<p class=\"sm\">Hover over a bar for its name, start and duration. Charged "
          "bytes are the manager's accounting (copies plus reservations) sampled at every "
          "scope; times are from the start of the run.</p>\n</body>\n</html>\n",
          f);
    free(st0), free(st1), free(lvl), free(sev), free(sdep);
    cJSON_Delete(doc);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || !page) {
        free(page);
        errno = ENOMEM;
        return -1;
    }
    int rc = write_atomic(path, page, page_len);
    int saved = errno;
    free(page);
    errno = saved;
    return rc;
}
