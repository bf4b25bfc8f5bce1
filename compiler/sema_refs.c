/* compiler/sema_refs.c — what statements refer to: locations (host, pinned, cuda:N) to
 * slots, value references (arrays and indexes) to value indexes, and {name} strings. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "compiler/sema.h"

/* A string quoted in a message: at most 60 bytes of it, then "..." (the source line under
 * the message shows the rest). */
#define CLIP(t) (strlen(t) > 60 ? 60 : (int)strlen(t)), (t), (strlen(t) > 60 ? "..." : "")

int rp_sema_resolve_loc(S *s, rp_node *n, uint8_t *slot)
{
    fhr_location l;
    if (n->op == 0)
        l = fhr_loc_host();
    else if (n->op == 1)
        l = fhr_loc_pinned();
    else if (fhr_loc_parse(n->text, &l) != FHR_OK) {
        if (strncmp(n->text, "cuda:", 5) == 0) {
            ERR(s, n->loc, "CUDA device index in '%s' is out of range (0 to %d)", n->text,
                FHR_MAX_CUDA_DEVICES - 1);
            return 0;
        }
        static const char *const cands[] = {"host", "pinned", "cuda"};
        char word[32];
        snprintf(word, sizeof word, "%.*s", (int)strcspn(n->text, ":"), n->text);
        const char *sug = rp_suggest(word, cands, 3);
        if (sug)
            ERR(s, n->loc, "unknown location '%s'; did you mean '%s%s'?", n->text, sug,
                strcmp(sug, "cuda") == 0 ? (strchr(n->text, ':') ? strchr(n->text, ':') : ":0")
                                         : "");
        else
            ERR(s, n->loc, "unknown location '%s' (locations are host, pinned and cuda:N)",
                n->text);
        return 0;
    }
    *slot = (uint8_t)fhr_loc_slot(l);
    return 1;
}

const char *rp_sema_slot_name(uint8_t slot, char *buf, size_t cap)
{
    return fhr_loc_format(fhr_loc_from_slot(slot), buf, cap);
}

/* Resolves a value reference to a value index. */
int rp_sema_resolve_value(S *s, rp_node *n, uint32_t *out)
{
    sym *y = rp_sema_lookup(s, n->text);
    if (y)
        y->used = 1;
    if (!y || y->kind != SYM_VALUE) {
        if (!y && rp_sema_lookup_loop(s, n->text)) {
            ERR(s, n->loc, "'%s' is a loop variable, not a value", n->text);
            return 0;
        }
        if (y) {
            ERR(s, n->loc, "'%s' is a %s, not a value", n->text, rp_sema_sym_kind_name(y->kind));
            DECL_NOTE(s, y, n->text);
            return 0;
        }
        rp_sema_unknown_name(s, n->loc, "value", n->text, SYM_VALUE);
        return 0;
    }
    if (n->kind == N_NAME) {
        if (y->is_array) {
            ERR(s, n->loc, "'%s' is an array of %u values; name one as %s[INDEX]", n->text,
                y->dim, n->text);
            DECL_NOTE(s, y, n->text);
            return 0;
        }
        *out = y->first;
        return 1;
    }
    uint64_t idx;
    if (!rp_sema_eval_kind(s, n->a, K_INT, "an index", &idx))
        return 0;
    if (!y->is_array) {
        ERR(s, n->loc, "'%s' is not an array", n->text);
        DECL_NOTE(s, y, n->text);
        return 0;
    }
    if (idx >= y->dim) {
        ERR(s, n->loc, "index %" PRIu64 " is out of range for '%s' (%u values, 0 to %u)", idx,
            n->text, y->dim, y->dim - 1);
        DECL_NOTE(s, y, n->text);
        return 0;
    }
    *out = y->first + (uint32_t)idx;
    return 1;
}

/* Expands {name} in a string literal; the result goes to p's string table. */
int rp_sema_interp(S *s, rp_node *n, uint32_t *out)
{
    char buf[1024];
    size_t len = 0;
    const char *t = n->text;
    while (*t) {
        if (*t == '{') {
            const char *e = strchr(t, '}');
            if (!e) {
                ERR(s, n->loc, "unterminated '{' in \"%.*s%s\"", CLIP(n->text));
                return 0;
            }
            char name[64];
            size_t nl = (size_t)(e - t - 1);
            if (nl == 0 || nl >= sizeof name) {
                ERR(s, n->loc, "expected a name inside '{}' in \"%.*s%s\"", CLIP(n->text));
                return 0;
            }
            memcpy(name, t + 1, nl);
            name[nl] = '\0';
            rp_int v;
            loopvar *lv = rp_sema_lookup_loop(s, name);
            sym *y = lv ? NULL : rp_sema_lookup(s, name);
            if (lv)
                v = lv->v;
            else if (y && y->kind == SYM_CONST) {
                v = y->v;
                y->used = 1;
            } else {
                const char *sug = rp_sema_suggest_name(s, name, SYM_CONST);
                if (sug)
                    ERR(s, n->loc, "unknown name '%s' in \"%.*s%s\"; did you mean '%s'?", name,
                        CLIP(n->text), sug);
                else
                    ERR(s, n->loc, "unknown name '%s' in \"%.*s%s\"", name, CLIP(n->text));
                return 0;
            }
            char num[32];
            int w = snprintf(buf + len, sizeof buf - len, "%s", rp_int_str(v, num, sizeof num));
            if (w < 0 || (size_t)w >= sizeof buf - len)
                goto toolong;
            len += (size_t)w;
            t = e + 1;
            continue;
        }
        if (*t == '}') {
            ERR(s, n->loc, "unmatched '}' in \"%.*s%s\"", CLIP(n->text));
            return 0;
        }
        if (len + 1 >= sizeof buf)
            goto toolong;
        buf[len++] = *t++;
    }
    if (!rp_prog_str(s->p, buf, len, out)) {
        s->oom = 1;
        return 0;
    }
    return 1;
toolong:
    ERR(s, n->loc, "name is longer than %zu bytes", sizeof buf - 1);
    return 0;
}
