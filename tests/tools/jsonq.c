/* tests/tools/jsonq.c — prints one member of the JSON document on stdin, for shell tests:
 * `jsonq .totals.bytes_moved`, `jsonq '.ranks[1].ok'`; a path ending in `#` prints the
 * length of an array. Numbers print as integers when they are whole. Exit 1: no such
 * member or unparsable input. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: jsonq PATH < doc.json\n", stderr);
        return 64;
    }
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n - 1, stdin)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    if (!buf)
        return 70;
    buf[n] = 0;
    cJSON *root = cJSON_Parse(buf), *cur = root;
    free(buf);
    const char *p = argv[1];
    int count = 0;
    while (cur && *p) {
        if (*p == '.') {
            p++;
            size_t k = strcspn(p, ".[#");
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)k, p);
            cur = k ? cJSON_GetObjectItemCaseSensitive(cur, key) : cur;
            p += k;
        } else if (*p == '[') {
            char *end;
            long i = strtol(p + 1, &end, 10);
            cur = *end == ']' ? cJSON_GetArrayItem(cur, (int)i) : NULL;
            p = *end == ']' ? end + 1 : p;
        } else if (*p == '#' && !p[1]) {
            count = 1;
            p++;
        } else {
            cur = NULL;
        }
    }
    int rc = 0;
    if (!cur)
        rc = 1;
    else if (count)
        printf("%d\n", cJSON_GetArraySize(cur));
    else if (cJSON_IsNumber(cur) && cur->valuedouble == (double)(long long)cur->valuedouble)
        printf("%lld\n", (long long)cur->valuedouble);
    else if (cJSON_IsNumber(cur))
        printf("%.17g\n", cur->valuedouble);
    else if (cJSON_IsString(cur))
        printf("%s\n", cur->valuestring);
    else {
        char *s = cJSON_PrintUnformatted(cur);
        printf("%s\n", s ? s : "");
        free(s);
    }
    cJSON_Delete(root);
    return rc;
}
