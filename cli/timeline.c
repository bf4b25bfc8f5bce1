/* cli/timeline.c — `fheplan run --timeline FILE.html`: the run's trace (rplan_vm_trace_json)
 * drawn as one self-contained HTML page: inline SVG that scales to the window, with our own
 * inline script to zoom (wheel, drag, buttons) and nothing loaded from elsewhere. Lanes are
 * the trace's tracks by their names (stages, the host, each stream), then the evictions and
 * per location the bytes present over time against the bytes charged and the budget. */
#include "cli/timeline.h"
#include "cli/cli.h"
#include "cli/format.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TL_W 1400      /* the picture's width in viewBox units: it scales to the window */
#define TL_LABEL 300   /* the label column */
#define TL_RIGHT 30
#define TL_ROW 18      /* one row of a lane */
#define TL_CHART 86    /* one location's chart */
#define TL_MAX_LANES 96
#define TL_MAX_LOCS 16

/* The colours, one per kind of work; the legend names each. */
#define C_PCIE "#3b73c9"   /* a copy onto a device over PCIe */
#define C_PEER "#8e44ad"   /* a copy from another device */
#define C_BACK "#d9892b"   /* a copy back to the host */
#define C_BODY "#3f9b4f"   /* a body */
#define C_REQ "#a7b0bc"    /* a request on the host */
#define C_PLAN "#5b6b8c"   /* a plan or a top-level action on the host */
#define C_WAIT "#f0b400"   /* the host waiting for a body */
#define C_EVICT "#c22"     /* an eviction */
#define C_IDLE "#f4a6a6"   /* the link idle while a later copy's room was free */

typedef struct lane {
    double tid;
    char name[160];
    double order;
    int rows;      /* nesting depth of its slices */
    int stages;    /* a lane of stages */
} lane;

typedef struct tl {
    FILE *f;
    double t0, t1; /* milliseconds */
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

static double xof(const tl *t, double ms)
{
    double span = t->t1 > t->t0 ? t->t1 - t->t0 : 1;
    return t->x0 + (ms - t->t0) / span * t->pw;
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

/* Milliseconds with a precision that suits them: the one unit of the page. */
static const char *fmt_ms(double ms, char *b, size_t n)
{
    double a = fabs(ms);
    snprintf(b, n, a >= 100 || a == 0 ? "%.1f ms" : a >= 1 ? "%.2f ms" : "%.3f ms", ms);
    return b;
}

static int is_window(const cJSON *e)
{
    return !strcmp(str_of(e, "cat"), "transfer") &&
           cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "bytes_peer_in") != NULL;
}

static const char *fill_of(const cJSON *e)
{
    const char *cat = str_of(e, "cat");
    const cJSON *a = cJSON_GetObjectItem(e, "args");
    if (!strcmp(cat, "body"))
        return C_BODY;
    if (!strcmp(cat, "transfer")) {
        const char *dir = str_of(a, "direction");
        const char *nm = str_of(e, "name");
        if (!strncmp(dir, "peer", 4))
            return C_PEER;
        if (strstr(dir, "device to host") || strstr(nm, "-> host") || strstr(nm, "-> pinned"))
            return C_BACK;
        return C_PCIE;
    }
    if (!strcmp(cat, "wait"))
        return C_WAIT;
    if (!strcmp(cat, "request"))
        return C_REQ;
    return C_PLAN;
}

/* A bar: its time span in data-a/data-b (ms) for the zoom script, and its tooltip. */
static void bar(const tl *t, const cJSON *e, double y, double h, const char *fill)
{
    double a = num_of(e, "ts") / 1e3, b = a + num_of(e, "dur") / 1e3;
    double x = xof(t, a), w = xof(t, b) - x;
    char s1[32], s2[32], s3[32];
    fprintf(t->f, "<rect class=\"t\" data-a=\"%.4f\" data-b=\"%.4f\" x=\"%.2f\" y=\"%.1f\" "
                  "width=\"%.2f\" height=\"%.1f\" fill=\"%s\"><title>",
            a, b, x, y, w > 0.6 ? w : 0.6, h, fill);
    esc(t->f, str_of(e, "name"));
    fprintf(t->f, "\n%s from %s", fmt_ms(b - a, s1, sizeof s1), fmt_ms(a, s2, sizeof s2));
    const cJSON *ar = cJSON_GetObjectItem(e, "args");
    if (cJSON_GetObjectItem(ar, "bytes")) {
        fprintf(t->f, "\n%s, %.2f GB/s over the window", fmt_bytes((uint64_t)num_of(ar, "bytes"), s3, sizeof s3),
                num_of(ar, "gbps"));
        if (str_of(ar, "direction")[0]) {
            fputs(", ", t->f);
            esc(t->f, str_of(ar, "direction"));
        }
    }
    if (cJSON_GetObjectItem(ar, "host_opened_us"))
        fprintf(t->f, "\nopened on the host at %s", fmt_ms(num_of(ar, "host_opened_us") / 1e3, s3, sizeof s3));
    const cJSON *vs = cJSON_GetObjectItem(ar, "values"), *v;
    int k = 0, nv = cJSON_GetArraySize(vs);
    if (nv > 0) {
        fputs("\nvalues: ", t->f);
        cJSON_ArrayForEach(v, vs)
        {
            if (k == 8) {
                fprintf(t->f, ", and %d more", nv - 8);
                break;
            }
            fputs(k++ ? ", " : "", t->f);
            esc(t->f, cJSON_GetStringValue(v));
        }
    }
    if (str_of(ar, "location")[0]) {
        fputs("\nat ", t->f);
        esc(t->f, str_of(ar, "location"));
    }
    fputs("</title></rect>\n", t->f);
}

/* A time step of about a tenth of the span: 1, 2 or 5 times a power of ten (ms). */
static double nice_step(double span)
{
    double p = pow(10, floor(log10(span > 0 ? span : 1)));
    static const double m[] = {0.1, 0.2, 0.5, 1, 2, 5, 10};
    for (int i = 0; i < 7; i++)
        if (span / (p * m[i]) <= 10)
            return p * m[i];
    return p * 10;
}

/* The y axis of a chart: one unit for all its labels. */
static void byte_unit(double top, const char **unit, double *div)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int k = 0;
    double d = 1;
    while (k < 4 && top >= d * 1024)
        d *= 1024, k++;
    *unit = u[k];
    *div = d;
}

typedef struct series {
    char name[48];
    double peak, budget;
    size_t n;
} series;

static void scan_series(const cJSON *ev, const char *name, series *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "C") || strcmp(str_of(e, "name"), name))
            continue;
        const cJSON *a = cJSON_GetObjectItem(e, "args");
        if (num_of(a, "bytes") > s->peak)
            s->peak = num_of(a, "bytes");
        if (num_of(a, "budget") > 0)
            s->budget = num_of(a, "budget");
        s->n++;
    }
}

/* A step path of a counter: each sample holds until the next. data-pts carries the
 * points (ms:y) for the zoom script. */
static void step_path(const tl *t, const cJSON *ev, const char *name, double base, double h,
                      double top, const char *cls, int area)
{
    const cJSON *e;
    fprintf(t->f, "<path class=\"s %s\" data-series=\"%s\" data-base=\"%.1f\" data-area=\"%d\" "
                  "data-pts=\"",
            cls, name, base, area);
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "C") || strcmp(str_of(e, "name"), name))
            continue;
        double v = num_of(cJSON_GetObjectItem(e, "args"), "bytes");
        fprintf(t->f, "%.4f:%.1f ", num_of(e, "ts") / 1e3, base - v / top * h);
    }
    fprintf(t->f, "\" d=\"M%.2f %.1f", t->x0, base);
    double last = base;
    int first = 1;
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "C") || strcmp(str_of(e, "name"), name))
            continue;
        double x = xof(t, num_of(e, "ts") / 1e3);
        double y = base - num_of(cJSON_GetObjectItem(e, "args"), "bytes") / top * h;
        if (first && !area)
            fprintf(t->f, " M%.2f %.1f", x, y);
        else
            fprintf(t->f, " L%.2f %.1f L%.2f %.1f", x, last, x, y);
        first = 0;
        last = y;
    }
    fprintf(t->f, " L%.2f %.1f", t->x0 + t->pw, last);
    if (area)
        fprintf(t->f, " L%.2f %.1f Z", t->x0 + t->pw, base);
    fputs("\"/>\n", t->f);
}

/* One location's chart: the bytes present (resident: from a copy's end to its last
 * reader's end), the bytes charged (admitted by the host, reservations included) and the
 * budget, on one scale in one unit. */
static void chart(const tl *t, const cJSON *ev, const char *loc, double y)
{
    char rn[64], cn[64], a[32], b[32];
    snprintf(rn, sizeof rn, "resident %s", loc);
    snprintf(cn, sizeof cn, "charged %s", loc);
    series rs, cs;
    scan_series(ev, rn, &rs);
    scan_series(ev, cn, &cs);
    double budget = cs.budget;
    double top = rs.peak > cs.peak ? rs.peak : cs.peak;
    int budget_on = budget > 0 && budget <= top * 1.6;
    if (budget_on && budget > top)
        top = budget;
    top = top > 0 ? top * 1.08 : 1;
    double h = TL_CHART - 24, base = y + TL_CHART - 8;
    fprintf(t->f, "<g class=\"chart\" data-lane=\"bytes at %s\">\n", loc);
    fprintf(t->f, "<text x=\"8\" y=\"%.1f\" class=\"lb\">bytes at ", y + 20);
    esc(t->f, loc);
    fprintf(t->f, "</text>\n<text x=\"8\" y=\"%.1f\" class=\"sm\">resident peak %s", y + 35,
            fmt_bytes((uint64_t)rs.peak, a, sizeof a));
    if (budget > 0)
        fprintf(t->f, " of %s (%.0f%%)", fmt_bytes((uint64_t)budget, b, sizeof b),
                100.0 * rs.peak / budget);
    fputs("</text>\n", t->f);
    fprintf(t->f, "<text x=\"8\" y=\"%.1f\" class=\"sm\">charged peak %s</text>\n", y + 49,
            fmt_bytes((uint64_t)cs.peak, a, sizeof a));
    if (budget > 0 && !budget_on)
        fprintf(t->f, "<text x=\"8\" y=\"%.1f\" class=\"sm\">budget %s: above the scale"
                      "</text>\n", y + 63, fmt_bytes((uint64_t)budget, b, sizeof b));
    /* the y axis: 0, half, top, in one unit */
    const char *unit;
    double div;
    byte_unit(top, &unit, &div);
    for (int k = 0; k <= 2; k++) {
        double v = top / 1.08 * k / 2, yy = base - v / top * h;
        fprintf(t->f, "<text x=\"%.1f\" y=\"%.1f\" class=\"sm ya\">%.*f %s</text>\n", t->x0 - 4,
                yy + 3, v / div >= 10 || v == 0 ? 0 : 1, v / div, unit);
        fprintf(t->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"hgrid\"/>\n",
                t->x0, yy, t->x0 + t->pw, yy);
    }
    fprintf(t->f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" class=\"bg\"/>\n",
            t->x0, base - h, t->pw, h);
    fputs("<g clip-path=\"url(#plot)\">\n", t->f);
    if (rs.n)
        step_path(t, ev, rn, base, h, top, "area", 1);
    if (cs.n)
        step_path(t, ev, cn, base, h, top, "charged", 0);
    fputs("</g>\n", t->f);
    if (budget_on) {
        double by = base - budget / top * h;
        fprintf(t->f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"budget\">"
                      "<title>budget %s</title></line>\n",
                t->x0, by, t->x0 + t->pw, by, fmt_bytes((uint64_t)budget, b, sizeof b));
        fprintf(t->f, "<text x=\"%.1f\" y=\"%.1f\" class=\"sm bt\">budget %s</text>\n",
                t->x0 + t->pw - 4, by - 3, b);
    }
    fputs("</g>\n", t->f);
}

/* The transfer lane's idle stretches during which a later window already had its room
 * (runtime/vm/link.c's ready idle time), marked and explained. */
static void idle_marks(const tl *t, const cJSON *ev, double tid, double y, double h)
{
    size_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev) n += !strcmp(str_of(e, "ph"), "X") && num_of(e, "tid") == tid && is_window(e);
    if (!n)
        return;
    double *w = malloc(n * 3 * sizeof *w), *rmin = malloc(n * sizeof *rmin);
    if (!w || !rmin) {
        free(w), free(rmin);
        return;
    }
    size_t k = 0;
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "X") || num_of(e, "tid") != tid || !is_window(e))
            continue;
        w[3 * k] = num_of(e, "ts") / 1e3;
        w[3 * k + 1] = w[3 * k] + num_of(e, "dur") / 1e3;
        w[3 * k + 2] = num_of(cJSON_GetObjectItem(e, "args"), "room_free_us") / 1e3;
        k++;
    }
    /* in stream order: the trace lists a track's slices by start */
    for (size_t i = n; i-- > 0;)
        rmin[i] = i + 1 < n && rmin[i + 1] < w[3 * i + 2] ? rmin[i + 1] : w[3 * i + 2];
    double c = w[1];
    char s1[32], s2[32];
    for (size_t i = 1; i < n; i++) {
        double s = w[3 * i];
        double from = rmin[i] > c ? rmin[i] : c;
        if (s > from && xof(t, s) - xof(t, from) >= 0.2) {
            fprintf(t->f, "<rect class=\"t idle\" data-a=\"%.4f\" data-b=\"%.4f\" x=\"%.2f\" "
                          "y=\"%.1f\" width=\"%.2f\" height=\"%.1f\"><title>link idle %s from "
                          "%s while a later copy's room was free</title></rect>\n",
                    from, s, xof(t, from), y, xof(t, s) - xof(t, from), h,
                    fmt_ms(s - from, s1, sizeof s1), fmt_ms(from, s2, sizeof s2));
        }
        if (w[3 * i + 1] > c)
            c = w[3 * i + 1];
    }
    free(w);
    free(rmin);
}

static int lane_cmp(const void *a, const void *b)
{
    const lane *x = a, *y = b;
    if (x->order != y->order)
        return x->order < y->order ? -1 : 1;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* The nesting depth of every slice (0: outermost) in the order of the trace, which lists
 * a track's slices by start, enclosing ones first. NULL when out of memory. */
static int *depths(const cJSON *ev)
{
    size_t n = 0, i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev) n += !strcmp(str_of(e, "ph"), "X");
    int *d = calloc(n + 1, sizeof *d);
    double stack[64], tid = -1;
    int top = 0;
    cJSON_ArrayForEach(e, ev)
    {
        if (!d || strcmp(str_of(e, "ph"), "X"))
            continue;
        double a = num_of(e, "ts"), b = a + num_of(e, "dur");
        if (num_of(e, "tid") != tid)
            top = 0, tid = num_of(e, "tid");
        while (top && stack[top - 1] <= a + 1e-3)
            top--;
        d[i++] = top;
        if (top < 64)
            stack[top++] = b;
    }
    return d;
}

static const char script[] =
    "<script>\n"
    "(function(){\n"
    "var svg=document.getElementById('tl');if(!svg)return;\n"
    "var T0=+svg.dataset.t0,T1=+svg.dataset.t1,X0=+svg.dataset.x0,PW=+svg.dataset.pw;\n"
    "var v0=T0,v1=T1,NS='http://www.w3.org/2000/svg';\n"
    "var bars=svg.querySelectorAll('.t'),paths=svg.querySelectorAll('path.s');\n"
    "var ticks=document.getElementById('ticks'),label=document.getElementById('win');\n"
    "function X(t){return X0+(t-v0)/(v1-v0)*PW;}\n"
    "function fmt(v,st){var d=Math.max(0,Math.min(4,-Math.floor(Math.log10(st)+1e-9)));"
    "return v.toFixed(d)+' ms';}\n"
    "function draw(){\n"
    " for(var i=0;i<bars.length;i++){var e=bars[i],a=+e.dataset.a;\n"
    "  if(e.tagName==='line'){var x=X(a);e.setAttribute('x1',x);e.setAttribute('x2',x);continue;}\n"
    "  var b=+e.dataset.b,x0=X(a),w=Math.max(X(b)-x0,0.6);\n"
    "  if(e.tagName==='text'){var xl=Math.max(x0,X0)+3,room=X(b)-xl;e.setAttribute('x',xl);"
    "e.style.display=room>6.2*e.textContent.length?'':'none';continue;}\n"
    "  e.setAttribute('x',x0);e.setAttribute('width',w);}\n"
    " for(var j=0;j<paths.length;j++){var p=paths[j],pts=p.dataset.pts.trim().split(' '),"
    "base=+p.dataset.base,area=p.dataset.area==='1',d='M'+X0+' '+base,last=base;\n"
    "  for(var k=0;k<pts.length;k++){if(!pts[k])continue;var q=pts[k].split(':'),x=X(+q[0]),y=+q[1];\n"
    "   d+=(k===0&&!area)?' M'+x+' '+y:' L'+x+' '+last+' L'+x+' '+y;last=y;}\n"
    "  d+=' L'+(X0+PW)+' '+last;if(area)d+=' L'+(X0+PW)+' '+base+' Z';p.setAttribute('d',d);}\n"
    " while(ticks.firstChild)ticks.removeChild(ticks.firstChild);\n"
    " var span=v1-v0,p10=Math.pow(10,Math.floor(Math.log10(span))),st=p10;\n"
    " [0.1,0.2,0.5,1,2,5,10].some(function(m){st=p10*m;return span/st<=10;});\n"
    " var top=+ticks.dataset.top,bot=+ticks.dataset.bottom;\n"
    " for(var v=Math.ceil(v0/st)*st;v<=v1+st*1e-6;v+=st){var x=X(v);\n"
    "  var l=document.createElementNS(NS,'line');l.setAttribute('x1',x);l.setAttribute('x2',x);"
    "l.setAttribute('y1',top+4);l.setAttribute('y2',bot);l.setAttribute('class','grid');ticks.appendChild(l);\n"
    "  var t=document.createElementNS(NS,'text');t.setAttribute('x',x);t.setAttribute('y',top);"
    "t.setAttribute('text-anchor','middle');t.setAttribute('class','tick');t.textContent=fmt(v,st);ticks.appendChild(t);}\n"
    " label.textContent='showing '+fmt(v0,st/10)+' to '+fmt(v1,st/10)+' of '+fmt(T1-T0,st/10);}\n"
    "function zoom(f,at){var s=(v1-v0)*f;if(s<(T1-T0)*1e-6)s=(T1-T0)*1e-6;if(s>T1-T0)s=T1-T0;\n"
    " var c=at===undefined?(v0+v1)/2:at,r=(c-v0)/(v1-v0);v0=c-r*s;v1=v0+s;clamp();draw();}\n"
    "function clamp(){var s=v1-v0;if(v0<T0){v0=T0;v1=T0+s;}if(v1>T1){v1=T1;v0=T1-s;}}\n"
    "function tAt(ev){var pt=svg.createSVGPoint();pt.x=ev.clientX;pt.y=ev.clientY;"
    "var p=pt.matrixTransform(svg.getScreenCTM().inverse());return v0+(p.x-X0)/PW*(v1-v0);}\n"
    "svg.addEventListener('wheel',function(ev){ev.preventDefault();"
    "zoom(ev.deltaY<0?0.8:1.25,tAt(ev));},{passive:false});\n"
    "var drag=null;svg.addEventListener('mousedown',function(ev){drag={t:tAt(ev),a:v0,b:v1};});\n"
    "window.addEventListener('mousemove',function(ev){if(!drag)return;var s=drag.b-drag.a,"
    "pt=svg.createSVGPoint();pt.x=ev.clientX;pt.y=ev.clientY;var p=pt.matrixTransform("
    "svg.getScreenCTM().inverse()),t=drag.a+(p.x-X0)/PW*s;v0=drag.a-(t-drag.t);v1=v0+s;clamp();draw();});\n"
    "window.addEventListener('mouseup',function(){drag=null;});\n"
    "document.querySelectorAll('button[data-z]').forEach(function(b){b.addEventListener('click',"
    "function(){var z=b.dataset.z;if(z==='in')zoom(0.5);else if(z==='out')zoom(2);"
    "else{v0=T0;v1=T1;draw();}});});\n"
    "var h=/^#t=([0-9.eE+-]+),([0-9.eE+-]+)$/.exec(location.hash);\n"
    "if(h&&+h[2]>+h[1]){v0=Math.max(T0,+h[1]);v1=Math.min(T1,+h[2]);}\n"
    "draw();\n"
    "})();\n"
    "</script>\n";

/* What one pass over the trace finds: the lanes (every track with slices), the time
 * range, the locations with a residency chart, the number of evictions. */
typedef struct scan {
    lane *lanes;
    size_t nl;
    char (*locs)[32];
    size_t nlocs, nevict;
    int *dep; /* depths() of the complete slices */
} scan;

/* A location of a counter ("resident cuda:0") into s->locs, once. */
static void scan_location(scan *s, const cJSON *e)
{
    const char *sp = strchr(str_of(e, "name"), ' ');
    if (!sp)
        return;
    size_t k = 0;
    while (k < s->nlocs && strcmp(s->locs[k], sp + 1))
        k++;
    if (k == s->nlocs && s->nlocs < TL_MAX_LOCS)
        snprintf(s->locs[s->nlocs++], sizeof s->locs[0], "%s", sp + 1);
}

/* A complete slice's track into s->lanes (once), with the depth it needs. */
static void scan_slice(scan *s, const cJSON *e, int depth)
{
    double tid = num_of(e, "tid");
    size_t k = 0;
    while (k < s->nl && s->lanes[k].tid != tid)
        k++;
    if (k == s->nl && s->nl < TL_MAX_LANES) {
        s->lanes[s->nl].tid = tid;
        s->lanes[s->nl].order = 1e9 + tid;
        snprintf(s->lanes[s->nl].name, sizeof s->lanes[s->nl].name, "track %.0f", tid);
        s->nl++;
    }
    if (k < s->nl) {
        if (depth + 1 > s->lanes[k].rows)
            s->lanes[k].rows = depth + 1;
        s->lanes[k].stages |= !strcmp(str_of(e, "cat"), "stage");
    }
}

/* The pass over the trace, then the lanes named and ordered by its metadata and the
 * locations in the order of their names (pinned, host, cuda:0, ...). */
static void scan_trace(const cJSON *ev, scan *s, tl *t)
{
    size_t xi = 0;
    const cJSON *e;
    t->t0 = 1e300;
    t->t1 = 0;
    cJSON_ArrayForEach(e, ev)
    {
        const char *ph = str_of(e, "ph");
        double ts = num_of(e, "ts") / 1e3, end = ts + num_of(e, "dur") / 1e3;
        if (!strcmp(ph, "M"))
            continue;
        t->t0 = ts < t->t0 ? ts : t->t0;
        t->t1 = end > t->t1 ? end : t->t1;
        if (!strcmp(ph, "i"))
            s->nevict++;
        else if (!strcmp(ph, "C"))
            scan_location(s, e);
        else if (!strcmp(ph, "X"))
            scan_slice(s, e, s->dep ? s->dep[xi++] : 0);
    }
    if (t->t1 <= t->t0) {
        t->t0 = 0;
        t->t1 = 1;
    }
    t->t0 = t->t0 < 0 ? t->t0 : 0; /* the axis starts at the run's start */
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "M"))
            continue;
        const cJSON *a = cJSON_GetObjectItem(e, "args");
        for (size_t k = 0; k < s->nl; k++) {
            if (s->lanes[k].tid != num_of(e, "tid"))
                continue;
            if (!strcmp(str_of(e, "name"), "thread_name"))
                snprintf(s->lanes[k].name, sizeof s->lanes[k].name, "%s", str_of(a, "name"));
            else if (!strcmp(str_of(e, "name"), "thread_sort_index"))
                s->lanes[k].order = num_of(a, "sort_index");
        }
    }
    qsort(s->lanes, s->nl, sizeof *s->lanes, lane_cmp);
    for (size_t a = 1; a < s->nlocs; a++)
        for (size_t b = a; b > 0 && strcmp(s->locs[b], s->locs[b - 1]) < 0; b--) {
            char x[32];
            memcpy(x, s->locs[b], sizeof x);
            memcpy(s->locs[b], s->locs[b - 1], sizeof x);
            memcpy(s->locs[b - 1], x, sizeof x);
        }
}

/* The page up to its first heading: title and style sheet. */
static void write_head(FILE *f, const char *plan)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    fputs("fheplan run ", f);
    esc(f, plan);
    fputs("</title>\n<style>\n"
          "body{font:14px/1.4 sans-serif;margin:12px 16px;color:#1d2330;background:#fff}\n"
          "h1{font-size:18px;margin:0 0 4px}p{margin:2px 0 8px}\n"
          "#tl{display:block;width:100%;height:auto;user-select:none;cursor:grab}\n"
          "svg text{font:11px sans-serif;fill:#1d2330}\n"
          "svg .lb{font-weight:bold}svg .sm{font-size:10px;fill:#4a5160}\n"
          "svg .in{fill:#fff;font-size:10px;pointer-events:none}svg .bt{text-anchor:end;fill:#c22}\n"
          "svg .ya{text-anchor:end}svg .tick{font-size:10px;fill:#4a5160}\n"
          "svg .bg{fill:#f3f5f8}svg .area{fill:#8fb3e8;stroke:#2d5fb0;stroke-width:1}\n"
          "svg .charged{fill:none;stroke:#555;stroke-width:1;stroke-dasharray:3 2}\n"
          "svg .budget{stroke:#c22;stroke-width:1.5;stroke-dasharray:6 3}\n"
          "svg .grid{stroke:#e1e5ea}svg .hgrid{stroke:#e9ecf0}svg .ev{stroke:" C_EVICT
          ";stroke-width:1.2}\n"
          "svg .idle{fill:" C_IDLE ";fill-opacity:.55}\n"
          ".key span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;"
          "vertical-align:-1px}\n"
          ".key i{font-style:normal;white-space:nowrap}\n"
          ".bar button{font:13px sans-serif;margin-right:4px}.bar{margin:6px 0}\n"
          ".note{font-size:13px;color:#4a5160;max-width:75em}\n"
          "</style>\n</head>\n<body>\n<h1>fheplan run ",
          f);
    esc(f, plan);
    fputs("</h1>\n<p>", f);
}

/* The line under the heading: device, time, bytes, evictions, bodies, the bound. */
static void write_summary(FILE *f, const rplan_vm_report *rep)
{
    char a[32], b[32], c[32];
    uint64_t moved = rep->total.load_bytes;
    for (int d = 0; d < FHR_DIR_NONE; d++)
        moved += rep->total.bytes[d];
    fprintf(f, "on %s", rep->device);
    if (rep->scale > 1)
        fprintf(f, " (sizes divided by %llu)", (unsigned long long)rep->scale);
    fprintf(f, ": %s, %s moved, %llu %s, %llu %s; lower bound %s",
            fmt_ms(rep->total.time_s * 1e3, a, sizeof a), fmt_bytes(moved, b, sizeof b),
            (unsigned long long)rep->total.evictions,
            plural(rep->total.evictions, "eviction", "evictions"),
            (unsigned long long)rep->total.bodies, plural(rep->total.bodies, "body", "bodies"),
            fmt_ms(rep->lower_bound_s * 1e3, c, sizeof c));
    size_t worst = 0;
    for (size_t i = 0; i < rep->ndevices; i++)
        if (rep->devices[i].bound_s > rep->devices[worst].bound_s)
            worst = i;
    if (rep->ndevices > 1) {
        char lb[16];
        fprintf(f, " (%s's, the slowest device)",
                fhr_loc_format(rep->devices[worst].loc, lb, sizeof lb));
    }
    fprintf(f, ", ratio %.2f; %s", rep->ratio, rep->ok ? "ok" : "FAILED: ");
    if (!rep->ok)
        esc(f, rep->message);
}

/* The colour key and the zoom buttons. */
static void write_key(FILE *f)
{
    fputs("</p>\n<p class=\"key\">"
          "<i data-key=\"pcie\"><span style=\"background:" C_PCIE "\"></span>copy onto a device over PCIe</i> "
          "<i data-key=\"peer\"><span style=\"background:" C_PEER "\"></span>peer copy from another device</i> "
          "<i data-key=\"back\"><span style=\"background:" C_BACK "\"></span>copy back to the host</i> "
          "<i data-key=\"body\"><span style=\"background:" C_BODY "\"></span>body (kernels)</i> "
          "<i data-key=\"request\"><span style=\"background:" C_REQ "\"></span>request (host)</i> "
          "<i data-key=\"plan\"><span style=\"background:" C_PLAN "\"></span>plan or action (host)</i> "
          "<i data-key=\"wait\"><span style=\"background:" C_WAIT "\"></span>host waits for a body</i> "
          "<i data-key=\"idle\"><span style=\"background:" C_IDLE "\"></span>link idle while a later copy's room was free</i> "
          "<i data-key=\"eviction\"><span style=\"background:" C_EVICT "\"></span>eviction</i> "
          "<i data-key=\"resident\"><span style=\"background:#8fb3e8\"></span>bytes resident</i> "
          "<i data-key=\"charged\"><span style=\"background:#fff;border:1px dashed #555;box-sizing:border-box\"></span>bytes charged</i> "
          "<i data-key=\"budget\"><span style=\"background:#fff;border-top:2px dashed #c22;box-sizing:border-box\"></span>budget</i></p>\n",
          f);
    fputs("<div class=\"bar\"><button data-z=\"in\" type=\"button\">zoom in</button>"
          "<button data-z=\"out\" type=\"button\">zoom out</button>"
          "<button data-z=\"all\" type=\"button\">whole run</button> "
          "<span id=\"win\"></span> &middot; wheel over the picture to zoom, drag to pan</div>\n",
          f);
}

/* The picture's frame and its time axis (ms), which the script redraws on zoom. */
static void write_axis(const tl *t, double y_axis, double height)
{
    FILE *f = t->f;
    fprintf(f, "<svg id=\"tl\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %.0f\" "
               "preserveAspectRatio=\"xMinYMin meet\" data-t0=\"%.4f\" data-t1=\"%.4f\" "
               "data-x0=\"%.1f\" data-pw=\"%.1f\">\n",
            TL_W, height, t->t0, t->t1, t->x0, t->pw);
    fprintf(f, "<defs><clipPath id=\"plot\"><rect x=\"%.1f\" y=\"0\" width=\"%.1f\" "
               "height=\"%.0f\"/></clipPath></defs>\n",
            t->x0, t->pw, height);
    fprintf(f, "<rect width=\"%d\" height=\"%.0f\" fill=\"#fff\"/>\n", TL_W, height);
    fprintf(f, "<text x=\"8\" y=\"%.1f\" class=\"lb\">time (ms from the start)</text>\n", y_axis);
    fprintf(f, "<g id=\"ticks\" data-top=\"%.1f\" data-bottom=\"%.1f\">\n", y_axis, height - 6);
    double st = nice_step(t->t1 - t->t0);
    int dec = (int)fmax(0, fmin(4, -floor(log10(st) + 1e-9)));
    for (double v = ceil(t->t0 / st) * st; v <= t->t1 + st * 1e-6; v += st) {
        double x = xof(t, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n", x,
                y_axis + 4, x, height - 6);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" class=\"tick\">%.*f ms"
                   "</text>\n", x, y_axis, dec, v);
    }
    fputs("</g>\n", f);
}

/* A stage's bar with its name inside when the name fits. */
static void stage_bar(const tl *t, const cJSON *e, double by, int d)
{
    static const char *const stage_fill[] = {"#44546a", "#5f7391", "#7b8fae", "#98aac6"};
    bar(t, e, by, TL_ROW - 2, stage_fill[d % 4]);
    const char *nm = str_of(e, "name"), *sl = strrchr(nm, '/');
    nm = sl && sl[1] ? sl + 1 : nm;
    double a0 = num_of(e, "ts") / 1e3, b0 = a0 + num_of(e, "dur") / 1e3;
    double x = xof(t, a0) + 3, w = xof(t, b0) - x;
    fprintf(t->f, "<text class=\"t in\" data-a=\"%.4f\" data-b=\"%.4f\" x=\"%.1f\" y=\"%.1f\"%s>",
            a0, b0, x, by + TL_ROW - 6,
            w > 6.2 * (double)strlen(nm) ? "" : " style=\"display:none\"");
    esc(t->f, nm);
    fputs("</text>\n", t->f);
}

/* One lane: its name, its background, the link's idle marks and a bar per slice. */
static void write_lane(const tl *t, const cJSON *ev, const int *dep, const lane *ln, double ly)
{
    FILE *f = t->f;
    int rows = ln->rows ? ln->rows : 1;
    fputs("<g class=\"lane\" data-lane=\"", f);
    esc(f, ln->name);
    fprintf(f, "\">\n<text x=\"8\" y=\"%.1f\"%s>", ly + 13, ln->stages ? " class=\"lb\"" : "");
    esc(f, ln->name);
    fputs("</text>\n", f);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" class=\"bg\"/>\n", t->x0,
            ly, t->pw, rows * TL_ROW);
    fputs("<g clip-path=\"url(#plot)\">\n", f);
    idle_marks(t, ev, ln->tid, ly, rows * TL_ROW);
    size_t xi = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "X"))
            continue;
        int d = dep && rows > 1 ? dep[xi] : 0;
        xi++;
        if (num_of(e, "tid") != ln->tid)
            continue;
        double by = ly + d * TL_ROW + 1;
        if (ln->stages)
            stage_bar(t, e, by, d);
        else
            bar(t, e, by, TL_ROW - 2, fill_of(e));
    }
    fputs("</g>\n</g>\n", f);
}

/* The evictions' lane: a tick per copy removed. */
static void write_evictions(const tl *t, const cJSON *ev, double y_ev, size_t nevict)
{
    FILE *f = t->f;
    char a[32];
    fprintf(f, "<g class=\"lane\" data-lane=\"evictions\">\n<text x=\"8\" y=\"%.1f\">evictions "
               "(%zu): a tick per copy removed</text>\n<g clip-path=\"url(#plot)\">\n",
            y_ev + 13, nevict);
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(str_of(e, "ph"), "i"))
            continue;
        double ms = num_of(e, "ts") / 1e3, x = xof(t, ms);
        fprintf(f, "<line class=\"t ev\" data-a=\"%.4f\" x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" "
                   "y2=\"%.1f\"><title>",
                ms, x, y_ev + 2, x, y_ev + TL_ROW - 2);
        esc(f, str_of(e, "name"));
        fprintf(f, "\nat %s</title></line>\n", fmt_ms(ms, a, sizeof a));
    }
    fputs("</g>\n</g>\n", f);
}

/* The note under the picture, the script and the page's end. */
static void write_tail(FILE *f)
{
    fputs("<p class=\"note\">Times are milliseconds from the start of the run. Rest the pointer "
          "on a bar for its name, start, duration, bytes, rate and values. Stages start with "
          "their first work on a device (the host opens them earlier: the tooltip says when) "
          "and overlap where the host runs ahead; slices that overlap without nesting take a "
          "row of their own. A transfer bar is a window of copies on a device's transfer "
          "stream; its rate is its bytes over the window. Bytes resident count a copy from "
          "the end of its transfer to the end of the last body reading it before its "
          "eviction; bytes charged are what the host admitted (copies and reservations) when "
          "it decided.</p>\n",
          f);
    fputs(script, f);
    fputs("</body>\n</html>\n", f);
}

/* The whole page into f: lanes one under the other, then evictions and the charts. */
static void write_page(tl *t, const char *plan, const rplan_vm_report *rep, const cJSON *ev,
                       const scan *s, const double *lane_y, double y_end)
{
    double y_axis = 22, y_ev = y_end + 4, y_ch = y_ev + TL_ROW + 14;
    double height = y_ch + (double)s->nlocs * TL_CHART + 8;
    write_head(t->f, plan);
    if (rep)
        write_summary(t->f, rep);
    write_key(t->f);
    write_axis(t, y_axis, height);
    for (size_t k = 0; k < s->nl; k++)
        write_lane(t, ev, s->dep, &s->lanes[k], lane_y[k]);
    write_evictions(t, ev, y_ev, s->nevict);
    for (size_t k = 0; k < s->nlocs; k++)
        chart(t, ev, s->locs[k], y_ch + (double)k * TL_CHART);
    fputs("</svg>\n", t->f);
    write_tail(t->f);
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
    scan s = {calloc(TL_MAX_LANES, sizeof *s.lanes), 0, calloc(TL_MAX_LOCS, sizeof *s.locs), 0,
              0, depths(ev)};
    double *lane_y = calloc(TL_MAX_LANES + 1, sizeof *lane_y);
    char *page = NULL;
    size_t page_len = 0;
    FILE *f = s.lanes && s.locs && lane_y ? open_memstream(&page, &page_len) : NULL;
    if (!f) {
        free(s.lanes), free(s.locs), free(s.dep), free(lane_y);
        cJSON_Delete(doc);
        errno = ENOMEM;
        return -1;
    }
    tl t = {f, 0, 0, TL_LABEL, TL_W - TL_LABEL - TL_RIGHT};
    scan_trace(ev, &s, &t);
    double y = 22 + 12; /* under the time axis */
    for (size_t k = 0; k < s.nl; k++) {
        lane_y[k] = y;
        y += (s.lanes[k].rows ? s.lanes[k].rows : 1) * TL_ROW + 4;
    }
    write_page(&t, plan, rep, ev, &s, lane_y, y);
    free(lane_y), free(s.dep), free(s.lanes), free(s.locs);
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
