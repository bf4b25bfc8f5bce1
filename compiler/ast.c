/* compiler/ast.c — allocation and release of AST nodes and lists (the parser's
 * destructors and the semantic pass use these). */
#include <stdlib.h>

#include "lang.h"

rp_node *rp_node_new(rp_kind k, rp_loc loc)
{
    rp_node *n = calloc(1, sizeof *n);
    if (n) {
        n->kind = k;
        n->loc = loc;
    }
    return n;
}

/* Iterative over `next` chains, recursive over children (depth is bounded by nesting). */
void rp_node_free(rp_node *n)
{
    while (n) {
        rp_node *next = n->next;
        if (n->kind == N_LIST) {
            rp_node_free(n->a); /* the chain; b is the tail, not owned twice */
        } else {
            rp_node_free(n->a);
            rp_node_free(n->b);
        }
        rp_node_free(n->c);
        free(n->text);
        free(n->text2);
        free(n);
        n = next;
    }
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
