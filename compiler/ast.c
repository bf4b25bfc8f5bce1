/* compiler/ast.c — allocation and release of AST nodes and lists (the parser's
 * destructors and the semantic pass use these). */
#include <stdlib.h>

#include "compiler/lang.h"

rp_node *rp_node_new(rp_kind k, rp_loc loc)
{
    rp_node *n = calloc(1, sizeof *n);
    if (n) {
        n->kind = k;
        n->loc = loc;
    }
    return n;
}

/* Iterative with an explicit worklist: a long expression or list must not recurse. */
void rp_node_free(rp_node *n)
{
    size_t cap = 64, top = 0;
    rp_node **st = malloc(cap * sizeof *st);
    if (!st)
        return; /* cannot happen in practice; leaking beats crashing here */
    st[top++] = n;
    while (top) {
        rp_node *x = st[--top];
        if (!x)
            continue;
        if (top + 4 > cap) {
            rp_node **ns = realloc(st, cap * 2 * sizeof *st);
            if (!ns)
                break;
            st = ns;
            cap *= 2;
        }
        st[top++] = x->next;
        st[top++] = x->a;
        if (x->kind != N_LIST) /* a list's b is its tail, owned through the chain */
            st[top++] = x->b;
        st[top++] = x->c;
        free(x->text);
        free(x->text2);
        free(x);
    }
    free(st);
}

rp_node *rp_list_new(rp_loc loc)
{
    return rp_node_new(N_LIST, loc);
}

rp_node *rp_list_append(rp_node *list, rp_node *item)
{
    if (!list) {
        rp_node_free(item);
        return NULL;
    }
    if (!item)
        return list;
    if (!list->a)
        list->a = item;
    else
        list->b->next = item;
    list->b = item;
    list->num++;
    return list;
}
