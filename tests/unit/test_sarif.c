/* tests/unit/test_sarif.c — diagnostic rules and `fheplan check --sarif`: every message of
 * tests/plans/fail has a rule of its own kind, fheplan-diagnose(7) lists every rule, and
 * the SARIF log passes the structural checks of the SARIF 2.1.0 schema written out by
 * hand (required properties, no property the schema does not allow, enums, regions,
 * rule references, related locations); --json diagnostics carry the span's end. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fheplan/rplan.h"

#ifndef FHEPLAN_CLI /* the CLI of the build this test belongs to (the Makefile) */
#error "FHEPLAN_CLI is not defined: build the tests with make"
#endif

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = '\0';
    fclose(f);
    return b;
}

static char *run(const char *args, int *rc)
{
    char o[] = "/tmp/fheplan-sarif-XXXXXX";
    int fd = mkstemp(o);
    cr_assert(fd >= 0);
    close(fd);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s >%s 2>/dev/null", FHEPLAN_CLI, args, o);
    int st = system(cmd);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    char *s = slurp(o);
    unlink(o);
    return s;
}

Test(rules, every_failing_plan_message_has_a_rule)
{
    DIR *dd = opendir("tests/plans/fail");
    cr_assert_not_null(dd);
    struct dirent *e;
    size_t n = 0;
    while ((e = readdir(dd))) {
        size_t nl = strlen(e->d_name);
        if (nl < 7 || strcmp(e->d_name + nl - 6, ".rplan"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "tests/plans/fail/%s", e->d_name);
        rplan_diags *d = rplan_diags_new();
        rplan_program *p = NULL;
        rplan_compile_file(path, NULL, &p, d);
        rplan_program_free(p);
        for (size_t i = 0; i < rplan_diags_count(d); i++) {
            const rplan_diag *g = rplan_diags_get(d, i);
            if (g->severity == RPLAN_NOTE)
                continue;
            const rplan_rule *r = rplan_rule_of(g->message);
            cr_assert_str_neq(r->id, "RP000", "%s: no rule for \"%s\"", path, g->message);
            n++;
            /* the end of the span is at or after its start */
            if (g->line) {
                cr_assert_geq(g->end_line, g->line, "%s", path);
                if (g->end_line == g->line)
                    cr_assert_gt(g->end_column, g->col, "%s: %s", path, g->message);
            }
        }
        rplan_diags_free(d);
    }
    closedir(dd);
    cr_assert_gt(n, 50);
    /* a few kinds pinned */
    cr_assert_str_eq(rplan_rule_of("unknown value 'ww'; did you mean 'w'?")->id, "RP301");
    cr_assert_str_eq(rplan_rule_of("unknown unit 'Gib'; did you mean 'GiB'?")->id, "RP302");
    cr_assert_str_eq(rplan_rule_of("unknown policy kind 'x'")->id, "RP304");
    cr_assert_str_eq(rplan_rule_of("no such thing at all")->id, "RP000");
    cr_assert_str_eq(rplan_rule_of_dry_run("no such thing at all")->id, "RP608");
}

/* The messages of check's own proofs and limits (most only bytecode or a plan too large for
 * tests/plans/fail can raise) each have their rule. */
Test(rules, the_verifier_and_limit_messages_have_rules)
{
    static const struct {
        const char *msg, *id;
    } cases[] = {
        {"constants 'A' and 'B' are defined in terms of each other (a cycle)", "RP307"},
        {"'B' is used before its declaration (constants are declared before they are used)",
         "RP307"},
        {"byte 0xff in a string is not UTF-8 text (control bytes and ill-formed sequences are "
         "refused)", "RP101"},
        {"invalid character '\xc3\xa9' (names and keywords are ASCII; other text goes in a "
         "string)", "RP101"},
        {"stages are nested too deeply (at most 32 levels)", "RP203"},
        {"the loops here unroll to more than 1000000 iterations (at most 1000000 iterations "
         "and 1000000 instructions in all)", "RP407"},
        {"loop of 2^64 iterations is too long (at most 1000000)", "RP407"},
        {"bad arguments to the built-in kernel 'ckks.keyswitch': it takes "
         "ckks.keyswitch(ciphertext, key [, batch])", "RP406"},
        {"run touch: argument 'y' has no copy at cuda:0, where the body runs", "RP603"},
        {"run touch: argument 'y' is not required at cuda:0, where the body runs", "RP603"},
        {"verify of 'ct': its content comes from a file; only synth and zero content can be "
         "recomputed", "RP404"},
        {"value 3: source position 4294967280:65535 is outside the embedded source (4 lines)",
         "RP702"},
        {"string at offset 12: byte 0xff at 3 is not UTF-8", "RP702"},
        {"program of 2000000 instructions is too long (at most 1000000)", "RP702"},
        {"checksum mismatch (stored bd089cef, computed 06456295)", "RP702"},
        {"truncated or padded: the header says 400 bytes, the file has 12", "RP702"},
        {"value 0: bad generator name", "RP702"},
        {"not a bytecode file: bad magic", "RP702"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_str_eq(rplan_rule_of(cases[i].msg)->id, cases[i].id, "\"%s\"", cases[i].msg);
}

Test(rules, ids_unique_and_listed_in_the_manual)
{
    char *page = slurp("man/fheplan-diagnose.7");
    cr_assert_not_null(page);
    cr_assert_gt(rplan_nrules(), 30);
    cr_assert_null(rplan_rule_get(rplan_nrules()));
    for (size_t i = 0; i < rplan_nrules(); i++) {
        const rplan_rule *r = rplan_rule_get(i);
        for (size_t j = 0; j < i; j++) {
            cr_assert_str_neq(rplan_rule_get(j)->id, r->id);
            cr_assert_str_neq(rplan_rule_get(j)->name, r->name);
        }
        char want[128];
        snprintf(want, sizeof want, ".It Li %s Cm %s", r->id, r->name);
        cr_assert(strstr(page, want), "fheplan-diagnose(7) lacks \"%s\"", want);
    }
    free(page);
}

/* ---- the SARIF 2.1.0 schema's constraints on what check writes -------------------- */

static void only_keys(const cJSON *o, const char *what, const char *const *allowed)
{
    cr_assert(cJSON_IsObject(o), "%s is not an object", what);
    for (const cJSON *k = o->child; k; k = k->next) {
        int ok = 0;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = !strcmp(k->string, allowed[i]);
        cr_assert(ok, "%s: property \"%s\" is not in the schema", what, k->string);
    }
}

static const cJSON *need(const cJSON *o, const char *key, const char *what)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    cr_assert_not_null(v, "%s lacks \"%s\"", what, key);
    return v;
}

static void check_message(const cJSON *m, const char *what)
{
    static const char *const k[] = {"text", "markdown", "id", "arguments", "properties", NULL};
    only_keys(m, what, k);
    const cJSON *t = need(m, "text", what);
    cr_assert(cJSON_IsString(t) && t->valuestring[0], "%s: empty text", what);
}

static int positive_int(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble == (double)(long)v->valuedouble;
}

static void check_location(const cJSON *l, const char *what, int related)
{
    static const char *const kl[] = {"id", "physicalLocation", "logicalLocations", "message",
                                     "annotations", "relationships", "properties", NULL};
    static const char *const kp[] = {"address", "artifactLocation", "region", "contextRegion",
                                     "properties", NULL};
    static const char *const ka[] = {"uri", "uriBaseId", "index", "description", "properties",
                                     NULL};
    static const char *const kr[] = {"startLine", "startColumn", "endLine", "endColumn",
                                     "charOffset", "charLength", "byteOffset", "byteLength",
                                     "snippet", "message", "sourceLanguage", "properties", NULL};
    only_keys(l, what, kl);
    if (related) {
        const cJSON *id = need(l, "id", what);
        cr_assert(cJSON_IsNumber(id) && id->valuedouble >= 0, "%s: bad id", what);
        check_message(need(l, "message", what), what);
    }
    const cJSON *p = need(l, "physicalLocation", what);
    only_keys(p, what, kp);
    const cJSON *a = need(p, "artifactLocation", what);
    only_keys(a, what, ka);
    const cJSON *u = need(a, "uri", what);
    cr_assert(cJSON_IsString(u) && u->valuestring[0] && !strchr(u->valuestring, ' '),
              "%s: bad uri", what);
    const cJSON *r = cJSON_GetObjectItem(p, "region");
    if (!r)
        return;
    only_keys(r, what, kr);
    const cJSON *bo = cJSON_GetObjectItem(r, "byteOffset");
    if (bo) { /* a binary region (SARIF 3.30.2): a byte offset and length, no lines */
        const cJSON *bl = need(r, "byteLength", what);
        cr_assert(cJSON_IsNumber(bo) && bo->valuedouble >= 0 && cJSON_IsNumber(bl) &&
                  bl->valuedouble >= 0, "%s: bad byte region", what);
        cr_assert_null(cJSON_GetObjectItem(r, "startLine"), "%s: lines and bytes", what);
        return;
    }
    const cJSON *sl = need(r, "startLine", what), *sc = need(r, "startColumn", what),
                *el = need(r, "endLine", what), *ec = need(r, "endColumn", what);
    cr_assert(positive_int(sl) && positive_int(sc) && positive_int(el) && positive_int(ec),
              "%s: region numbers must be integers >= 1", what);
    cr_assert_geq(el->valuedouble, sl->valuedouble, "%s: ends before it starts", what);
    if (el->valuedouble == sl->valuedouble)
        cr_assert_gt(ec->valuedouble, sc->valuedouble, "%s: empty region", what);
}

/* Checks the log against the schema's rules; returns the number of results. */
static size_t check_sarif(const char *text)
{
    static const char *const klog[] = {"$schema", "version", "runs", "inlineExternalProperties",
                                       "properties", NULL};
    static const char *const krun[] = {
        "tool", "invocations", "conversion", "language", "versionControlProvenance",
        "originalUriBaseIds", "artifacts", "logicalLocations", "graphs", "results",
        "automationDetails", "runAggregates", "baselineGuid", "redactionTokens",
        "defaultEncoding", "defaultSourceLanguage", "newlineSequences", "columnKind",
        "externalPropertyFileReferences", "threadFlowLocations", "taxonomies", "addresses",
        "translations", "policies", "webRequests", "webResponses", "specialLocations",
        "properties", NULL};
    static const char *const ktool[] = {"driver", "extensions", "properties", NULL};
    static const char *const kdrv[] = {
        "guid", "name", "organization", "product", "productSuite", "shortDescription",
        "fullDescription", "fullName", "version", "semanticVersion", "dottedQuadFileVersion",
        "releaseDateUtc", "downloadUri", "informationUri", "globalMessageStrings",
        "notifications", "rules", "taxa", "locations", "language", "contents",
        "isComprehensive", "localizedDataSemanticVersion", "minimumRequiredLocalizedDataSemanticVersion",
        "associatedComponent", "translationMetadata", "supportedTaxonomies", "properties", NULL};
    static const char *const krule[] = {
        "id", "deprecatedIds", "guid", "deprecatedGuids", "name", "deprecatedNames",
        "shortDescription", "fullDescription", "messageStrings", "defaultConfiguration",
        "helpUri", "help", "relationships", "properties", NULL};
    static const char *const kconf[] = {"enabled", "level", "rank", "parameters", "properties",
                                        NULL};
    static const char *const kres[] = {
        "ruleId", "ruleIndex", "rule", "kind", "level", "message", "analysisTarget",
        "locations", "guid", "correlationGuid", "occurrenceCount", "partialFingerprints",
        "fingerprints", "stacks", "codeFlows", "graphs", "graphTraversals", "relatedLocations",
        "suppressions", "baselineState", "rank", "attachments", "hostedViewerUri", "workItemUris",
        "provenance", "fixes", "taxa", "webRequest", "webResponse", "properties", NULL};
    static const char *const kart[] = {"location", "parentIndex", "offset", "length", "roles",
                                       "mimeType", "contents", "encoding", "sourceLanguage",
                                       "hashes", "lastModifiedTimeUtc", "description",
                                       "properties", NULL};
    cJSON *log = cJSON_Parse(text);
    cr_assert_not_null(log, "not JSON:\n%s", text);
    only_keys(log, "sarifLog", klog);
    cr_assert_str_eq(need(log, "version", "sarifLog")->valuestring, "2.1.0");
    cr_assert(strstr(need(log, "$schema", "sarifLog")->valuestring, "sarif-2.1.0"));
    const cJSON *runs = need(log, "runs", "sarifLog");
    cr_assert(cJSON_IsArray(runs) && cJSON_GetArraySize(runs) == 1);
    const cJSON *r = cJSON_GetArrayItem(runs, 0);
    only_keys(r, "run", krun);
    const char *ck = need(r, "columnKind", "run")->valuestring;
    cr_assert(!strcmp(ck, "utf16CodeUnits") || !strcmp(ck, "unicodeCodePoints"));
    const cJSON *tool = need(r, "tool", "run");
    only_keys(tool, "tool", ktool);
    const cJSON *drv = need(tool, "driver", "tool");
    only_keys(drv, "toolComponent", kdrv);
    cr_assert_str_eq(need(drv, "name", "driver")->valuestring, "fheplan");
    const cJSON *rules = need(drv, "rules", "driver");
    int nrules = cJSON_GetArraySize(rules);
    cr_assert_eq((size_t)nrules, rplan_nrules());
    for (int i = 0; i < nrules; i++) {
        const cJSON *ru = cJSON_GetArrayItem(rules, i);
        only_keys(ru, "reportingDescriptor", krule);
        cr_assert(cJSON_IsString(need(ru, "id", "rule")));
        check_message(need(ru, "shortDescription", "rule"), "shortDescription");
        const cJSON *dc = need(ru, "defaultConfiguration", "rule");
        only_keys(dc, "reportingConfiguration", kconf);
    }
    const cJSON *arts = need(r, "artifacts", "run");
    for (int i = 0; i < cJSON_GetArraySize(arts); i++) {
        const cJSON *a = cJSON_GetArrayItem(arts, i);
        only_keys(a, "artifact", kart);
        need(need(a, "location", "artifact"), "uri", "artifactLocation");
    }
    const cJSON *res = need(r, "results", "run");
    cr_assert(cJSON_IsArray(res));
    size_t n = (size_t)cJSON_GetArraySize(res);
    for (size_t i = 0; i < n; i++) {
        const cJSON *o = cJSON_GetArrayItem(res, (int)i);
        only_keys(o, "result", kres);
        check_message(need(o, "message", "result"), "result.message");
        const char *lv = need(o, "level", "result")->valuestring;
        cr_assert(!strcmp(lv, "none") || !strcmp(lv, "note") || !strcmp(lv, "warning") ||
                  !strcmp(lv, "error"), "level %s", lv);
        const cJSON *id = need(o, "ruleId", "result"), *ix = need(o, "ruleIndex", "result");
        cr_assert(cJSON_IsNumber(ix) && ix->valueint >= 0 && ix->valueint < nrules);
        cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(rules, ix->valueint), "id")->valuestring,
                         id->valuestring, "ruleIndex does not name ruleId");
        const cJSON *locs = need(o, "locations", "result");
        cr_assert(cJSON_IsArray(locs) && cJSON_GetArraySize(locs) >= 1);
        for (int k = 0; k < cJSON_GetArraySize(locs); k++)
            check_location(cJSON_GetArrayItem(locs, k), "result.location", 0);
        const cJSON *rel = cJSON_GetObjectItem(o, "relatedLocations");
        for (int k = 0; rel && k < cJSON_GetArraySize(rel); k++) {
            check_location(cJSON_GetArrayItem(rel, k), "relatedLocation", 1);
            for (int q = 0; q < k; q++)
                cr_assert_neq(cJSON_GetObjectItem(cJSON_GetArrayItem(rel, q), "id")->valueint,
                              cJSON_GetObjectItem(cJSON_GetArrayItem(rel, k), "id")->valueint,
                              "related location ids repeat");
        }
    }
    cJSON_Delete(log);
    return n;
}

Test(sarif, every_failing_plan_is_a_valid_log)
{
    int rc;
    char *s = run("check --sarif tests/plans/fail/*.rplan", &rc);
    cr_assert_eq(rc, 1);
    size_t n = check_sarif(s);
    cr_assert_gt(n, 60);
    /* notes are related locations, not results */
    cJSON *log = cJSON_Parse(s);
    const cJSON *res = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(log, "runs"), 0),
                                           "results");
    int related = 0, notes = 0;
    for (int i = 0; i < cJSON_GetArraySize(res); i++) {
        const cJSON *o = cJSON_GetArrayItem(res, i);
        related += cJSON_GetObjectItem(o, "relatedLocations") != NULL;
        notes += !strcmp(cJSON_GetObjectItem(o, "level")->valuestring, "note");
        cr_assert_str_neq(cJSON_GetObjectItem(o, "ruleId")->valuestring, "RP000",
                          "%s", cJSON_GetObjectItem(cJSON_GetObjectItem(o, "message"), "text")->valuestring);
    }
    cr_assert_gt(related, 5);
    cr_assert_eq(notes, 0);
    cJSON_Delete(log);
    free(s);
}

Test(sarif, feasible_plans_have_no_results_and_regions_count_code_points)
{
    int rc;
    char *s = run("check --sarif plans/*.rplan", &rc);
    cr_assert_eq(rc, 0);
    cr_assert_eq(check_sarif(s), 0);
    free(s);
    /* "é" is two bytes: the error after it starts one code point earlier than its byte */
    char path[] = "/tmp/fheplan-sarif-plan-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    const char *src = "rplan 1\nstage \"\xc3\xa9\" { discard nope }\n";
    cr_assert_eq(write(fd, src, strlen(src)), (ssize_t)strlen(src));
    close(fd);
    char args[256];
    snprintf(args, sizeof args, "check --sarif %s", path);
    s = run(args, &rc);
    cr_assert_eq(rc, 1);
    cr_assert_eq(check_sarif(s), 1);
    cJSON *log = cJSON_Parse(s);
    const cJSON *reg = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(
                                                   cJSON_GetObjectItem(cJSON_GetArrayItem(
                                                       cJSON_GetObjectItem(log, "runs"), 0), "results"), 0),
                                               "locations"), 0),
                            "physicalLocation"),
        "region");
    /* byte columns 22..25 ('nope'); code points 21..24, end one past */
    cr_assert_eq(cJSON_GetObjectItem(reg, "startColumn")->valueint, 21);
    cr_assert_eq(cJSON_GetObjectItem(reg, "endColumn")->valueint, 25);
    cJSON_Delete(log);
    free(s);
    /* --json: the same diagnostic in bytes, with its end and rule */
    snprintf(args, sizeof args, "check --json %s", path);
    s = run(args, &rc);
    cr_assert(strstr(s, "\"col\":\t22") && strstr(s, "\"end_col\":\t26") &&
              strstr(s, "\"end_line\":\t2") && strstr(s, "\"rule\":\t\"RP301\""), "%s", s);
    free(s);
    /* a dry-run failure: its rule, and a region to the end of its statement */
    s = run("check --sarif --budget cuda:0=1MiB plans/ckks-bootstrap.rplan", &rc);
    cr_assert_eq(rc, 1);
    cr_assert_eq(check_sarif(s), 1, "%s", s);
    cr_assert(strstr(s, "\"ruleId\":\t\"RP601\""), "%s", s);
    free(s);
    s = run("check --sarif --json plans/ckks-bootstrap.rplan", &rc);
    cr_assert_eq(rc, 64);
    free(s);
    unlink(path);
}

/* Standard input is the artifact "stdin" (described as standard input), not "-" or an
 * escaped "<stdin>"; a damaged bytecode file's result is RP702 with the file as region. */
Test(sarif, standard_input_and_damaged_bytecode_are_located)
{
    int rc;
    char *s = run("check --sarif - < tests/plans/fail/unknown-unit.rplan", &rc);
    cr_assert_eq(rc, 1);
    cr_assert_gt(check_sarif(s), 0);
    cJSON *log = cJSON_Parse(s);
    const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItem(log, "runs"), 0);
    const cJSON *art = cJSON_GetArrayItem(cJSON_GetObjectItem(r0, "artifacts"), 0);
    cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(art, "location"), "uri")->valuestring,
                     "stdin");
    const cJSON *res = cJSON_GetArrayItem(cJSON_GetObjectItem(r0, "results"), 0);
    const cJSON *pl = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(res, "locations"), 0), "physicalLocation");
    cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(pl, "artifactLocation"), "uri")
                         ->valuestring, "stdin");
    cJSON_Delete(log);
    free(s);
    /* a bytecode file with one byte changed */
    char src[] = "/tmp/fheplan-sarif-bc-XXXXXX";
    int fd = mkstemp(src);
    cr_assert(fd >= 0);
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s compile plans/design-example.rplan -o %s && printf 'Z' | "
             "dd of=%s bs=1 seek=40 conv=notrunc 2>/dev/null", FHEPLAN_CLI, src, src);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "check --sarif %s", src);
    s = run(cmd, &rc);
    cr_assert_eq(rc, 1);
    cr_assert_gt(check_sarif(s), 0);
    log = cJSON_Parse(s);
    res = cJSON_GetArrayItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(log, "runs"), 0), "results"), 0);
    cr_assert_str_eq(cJSON_GetObjectItem(res, "ruleId")->valuestring, "RP702", "%s", s);
    pl = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(res, "locations"), 0),
                             "physicalLocation");
    const cJSON *reg = cJSON_GetObjectItem(pl, "region");
    cr_assert_not_null(reg, "%s", s);
    cr_assert_gt(cJSON_GetObjectItem(reg, "byteLength")->valuedouble, 100, "%s", s);
    cJSON_Delete(log);
    free(s);
    unlink(src);
}
