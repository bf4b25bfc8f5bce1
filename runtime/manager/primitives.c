/* runtime/manager/primitives.c — ensure, move, drop and discard against live state: the rule
 * core decides; this file prepares under the lock, allocates, copies and loads without it,
 * commits under it again, frees stream-ordered and keeps accounting, trace and report. */
#include "runtime/manager/manager.h"
#include "base/error.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mgr_rule_view(fhr_manager *m, const val *v, rule_view *rv)
{
    /* why[] is read only at protected slots, set below: the rest is left as it is */
    memset(rv, 0, offsetof(rule_view, why));
    rv->unsettled = 0;
    rv->h = mgr_handle(m, v);
    rv->serial = v->serial;
    rv->label = val_label(v);
    rv->mode = v->mode;
    rv->recov = v->recov;
    rv->has_src = v->rs != NULL;
    rv->charge = v->charge;
    rv->omit[0] = v->omit[0];
    rv->omit[1] = v->omit[1];
    rv->regen = v->regen;
    rv->present = v->present;
    rv->links = &m->links;
    rv->cut = v->cut;
    if (v->cut) { /* rv_limbs reads them only then */
        memset(rv->limbs, 0, sizeof rv->limbs);
        memset(rv->parts, 0, sizeof rv->parts);
    }
    rv->by_parts = 0;
    for (const mat *x = v->copies; x; x = x->next) { /* one per present bit */
        int s = x->slot;
        rv->limbs[s] = x->limbs;
        rv->parts[s] = x->parts;
        rv->by_parts |= (uint64_t)(x->by_parts != 0) << s;
        if (s >= 2 && x->ready && !ev_done(m, x->ready))
            rv->unsettled |= 1ULL << s; /* still being filled (a source all the same) */
        const char *why = x->leases    ? "an active lease"
                          : x->holds   ? "a hold"
                          : x->pending ? "a pending consumer event (not yet completed and reaped: "
                                         "synchronize the consumer's stream, then call fhr_reap, "
                                         "or wait with fhr_wait_pending)"
                                       : NULL;
        if (why) {
            rv->protected_ |= 1ULL << s;
            rv->why[s] = why;
        }
    }
}

/* The free of a removed copy, without the lock: the location's own stream waits for
 * every copy into or out of it still in flight, then frees (no host wait); when that
 * cannot be ordered, the host waits instead. */
static void free_copy_work(fhr_manager *m, mgr_chore *c)
{
    mat *x = (mat *)((char *)c - offsetof(mat, chore));
    fhr_backend *b = m->b;
    fhr_stream *r = x->free_on;
    int ordered = r != NULL;
    for (size_t i = 0; ordered && i <= x->nreads; i++) {
        evref *e = i < x->nreads ? x->reads[i] : x->ready;
        if (e && b->ops->stream_wait_event(b, r, e->ev, NULL) != FHR_OK)
            ordered = 0;
    }
    if (!ordered)
        for (size_t i = 0; i <= x->nreads; i++) {
            evref *e = i < x->nreads ? x->reads[i] : x->ready;
            if (e)
                b->ops->event_sync(b, e->ev, NULL);
        }
    value_destroy_on(x->value, b, ordered ? r : NULL);
}

static void free_copy_done(fhr_manager *m, mgr_chore *c)
{
    mat *x = (mat *)((char *)c - offsetof(mat, chore));
    if (x->ready)
        ev_unref(m, x->ready);
    for (size_t i = 0; i < x->nreads; i++)
        ev_unref(m, x->reads[i]);
    free(x->reads);
    free(x);
}

/* Removes a copy from the state (accounting, presence) at once; its free is a chore done
 * after the lock is let go. */
static void remove_mat(fhr_manager *m, val *v, int slot)
{
    mat *x = val_take_mat(v, slot);
    v->present &= ~(1ULL << slot);
    mgr_changed(m, v->serial);
    acct_release(&m->loc[slot], mat_charge(v, x));
    if (mgr_stream(m, x->loc, &x->free_on, NULL) != FHR_OK)
        x->free_on = NULL;
    if (x->ready && ev_done(m, x->ready)) { /* forget what is known complete */
        ev_unref(m, x->ready);
        x->ready = NULL;
    }
    for (size_t i = 0; i < x->nreads;) {
        if (ev_done(m, x->reads[i])) {
            ev_unref(m, x->reads[i]);
            x->reads[i] = x->reads[--x->nreads];
        } else {
            i++;
        }
    }
    x->chore.work = free_copy_work;
    x->chore.done = free_copy_done;
    mgr_chore_push(m, &x->chore);
}

/* A drop of parts: the partial copy at slot keeps the parts a use of `keep` q-limbs
 * reads (one buffer per part, value_copy_limbs); the others leave the accounting at once
 * and are freed, as a removed copy is, once the copies reading them are done. The bytes
 * freed in *freed. A failure changes nothing. */
static fhr_status trim_copy(fhr_manager *m, val *v, int slot, uint32_t keep, uint64_t *freed,
                            fhr_error *err)
{
    mat *x = val_mat(v, slot);
    uint32_t parts = cut_parts_read(v->cut, keep < v->cut->q ? keep : 0);
    mat *g = calloc(1, sizeof *g);
    evref **reads = x->nreads ? malloc(x->nreads * sizeof *reads) : NULL;
    fhr_value *tail = NULL;
    fhr_status st = !g || (x->nreads && !reads)
                        ? fhr_fail(err, FHR_E_NOMEM, "out of host memory")
                        : value_split_tail(x->value, parts, &tail, err);
    if (st != FHR_OK) {
        free(g);
        free(reads);
        return st;
    }
    uint64_t before = mat_charge(v, x);
    if (!x->limbs)
        x->limbs = v->cut->q; /* a whole copy: now one of every q-limb in fewer parts */
    x->parts = parts;
    x->storage = fhr_value_storage_nbytes(x->value);
    *freed = before - mat_charge(v, x);
    acct_release(&m->loc[slot], *freed);
    mgr_changed(m, v->serial);
    /* the dropped buffers, as a removed copy with the same readers */
    g->loc = x->loc;
    g->slot = slot;
    g->value = tail;
    g->serial = v->serial;
    if ((g->ready = x->ready))
        g->ready->refs++;
    for (size_t i = 0; i < x->nreads; i++) {
        reads[i] = x->reads[i];
        reads[i]->refs++;
    }
    g->reads = reads;
    g->nreads = g->capreads = x->nreads;
    if (mgr_stream(m, g->loc, &g->free_on, NULL) != FHR_OK)
        g->free_on = NULL;
    g->chore.work = free_copy_work;
    g->chore.done = free_copy_done;
    mgr_chore_push(m, &g->chore);
    return FHR_OK;
}

/* Forgets completed readers of src and makes room for one more (lock held). */
static fhr_status reads_make_room(fhr_manager *m, mat *src)
{
    for (size_t i = 0; i < src->nreads;) {
        if (ev_done(m, src->reads[i])) {
            ev_unref(m, src->reads[i]);
            src->reads[i] = src->reads[--src->nreads];
            continue;
        }
        i++;
    }
    return fhr_grow((void **)&src->reads, &src->capreads, src->nreads, sizeof *src->reads, 4)
               ? FHR_OK
               : FHR_E_NOMEM;
}

/* A load, without the lock: the source's callback runs with every new call refused;
 * a value produced elsewhere is brought to `at` (its bytes counted as a temporary). */
static fhr_status load_copy(fhr_manager *m, val *v, fhr_location at, fhr_stream *s,
                            fhr_value **out, fhr_error *err)
{
    char nm[96];
    fhr_value *lv = NULL;
    fhr_error lerr;
    fhr_error_init(&lerr);
    mgr_lock(m);
    mgr_callback_begin(m);
    fhr_status st = v->rs->src.load(v->rs->src.ctx, &v->rs->spec, at, m->b, s, &lv, &lerr);
    mgr_callback_end(m);
    mgr_unlock(m);
    if (st != FHR_OK || !lv) {
        if (lv)
            value_destroy_on(lv, m->b, s);
        st = fhr_fail(err, FHR_E_SOURCE, "load %s: source failed (%s): %s",
                      mgr_vname(v, nm, sizeof nm), fhr_status_name(st ? st : FHR_E_SOURCE),
                      lerr.message[0] ? lerr.message : "no value returned");
        fhr_error_clear(&lerr);
        return st;
    }
    fhr_error_clear(&lerr);
    fhr_error cerr;
    fhr_error_init(&cerr);
    if ((st = value_check_spec(lv, &v->rs->spec, &cerr)) != FHR_OK) {
        value_destroy_on(lv, m->b, s);
        st = fhr_fail(err, st, "load %s: %s", mgr_vname(v, nm, sizeof nm), cerr.message);
        fhr_error_clear(&cerr);
        return st;
    }
    if (!fhr_loc_equal(lv->loc, at)) { /* the source produced it elsewhere: bring it here */
        int ts = fhr_loc_slot(lv->loc);
        if (ts < 0 || (lv->loc.kind == FHR_LOC_CUDA && lv->loc.index >= m->ndev)) {
            value_destroy_on(lv, m->b, NULL);
            return fhr_fail(err, FHR_E_SOURCE, "load %s: source returned a value at an invalid location",
                            mgr_vname(v, nm, sizeof nm));
        }
        uint64_t tmp = fhr_value_storage_nbytes(lv);
        mgr_lock(m);
        m->loc[ts].temp += tmp;
        acct_charge(&m->loc[ts], 0); /* record the temporary in peak_charged */
        mgr_unlock(m);
        fhr_value *moved = NULL;
        st = value_copy_to_gen(lv, at, m->b, s, m->gens, &moved, err);
        value_destroy_on(lv, m->b, s);
        mgr_lock(m);
        m->loc[ts].temp -= tmp;
        mgr_unlock(m);
        if (st != FHR_OK)
            return st;
        lv = moved;
    }
    *out = lv;
    return FHR_OK;
}

/* The admission of a copy made outside the lock: its charge is held as inflight from the
 * prepare to the commit or failure, so that every other admission meanwhile (primitives,
 * explain, preflight, the controller's fast path and snapshots) counts it. */
static void hold_inflight(fhr_manager *m, int slot, uint64_t charge, int hold)
{
    if (hold) {
        m->loc[slot].inflight += charge;
    } else {
        m->loc[slot].inflight -= charge;
        m->loc[slot].inflight_ended++;
        pthread_cond_broadcast(&m->inflight_cv); /* fhr_wait_pending */
    }
}

/* The copy's content, without the lock: a copy of src (or a load) with eff's limbs; a
 * grow copies the limbs the partial copy `over` holds on the device. */
static fhr_status make_content(fhr_manager *m, val *v, const rule_effect *eff, fhr_location at,
                               mat *src, const mat *over, fhr_stream *s, fhr_value **nv,
                               fhr_error *err)
{
    fhr_status st = FHR_OK;
    fhr_value *lv = NULL;
    /* a partial copy's source is loaded into pinned memory (a source with a host store may
     * hand a view of it), and only the limbs cross the link */
    int by_parts = rules_by_parts(v->cut, eff, fhr_loc_slot(at));
    fhr_location lat = by_parts ? fhr_loc_pinned() : at;
    if (!src && (st = load_copy(m, v, lat, s, &lv, err)) != FHR_OK)
        return st;
    if (!by_parts) {
        if (lv)
            *nv = lv;
        else
            st = value_copy_to_gen(src->value, at, m->b, s, m->gens, nv, err);
        return st;
    }
    /* a partial copy, or a grow: the loaded value is the source of the limbs */
    st = value_copy_limbs(v->cut, v->cut_names, lv ? lv : src->value, lv ? 0 : src->limbs,
                          over ? over->value : NULL, eff->had, over ? over->parts : 0,
                          eff->limbs, at, m->b, s, m->gens, nv, err);
    if (lv)
        value_destroy_on(lv, m->b, s);
    return st;
}

/* Creates the copy of v at `at` in three steps: prepared with the lock (admission held
 * as inflight, the source kept by the claim, room for the bookkeeping made), done
 * without it (the wait for the source, allocation, copy or load, the ready event),
 * committed with it again. A grow replaces the partial copy at `at` (which the claim
 * keeps meanwhile) with the larger one. A failure before the commit leaves the state as
 * it was. */
static fhr_status create_copy(fhr_manager *m, val *v, const rule_effect *eff, fhr_location at,
                              fhr_stream *s, fhr_transition *tr, fhr_error *err)
{
    int slot = fhr_loc_slot(at);
    mat *src = eff->src >= 0 ? val_mat(v, eff->src) : NULL;
    mat *old = eff->had ? val_mat(v, slot) : NULL;
    mat *x = calloc(1, sizeof *x);
    if (!x || (src && reads_make_room(m, src) != FHR_OK) ||
        (old && reads_make_room(m, old) != FHR_OK)) {
        free(x);
        return fhr_fail(err, FHR_E_NOMEM, "out of host memory");
    }
    evref *wait[2] = {NULL, NULL};
    mat *from[2] = {src, old};
    for (int k = 0; k < 2; k++)
        if (from[k] && from[k]->ready && !ev_done(m, from[k]->ready)) {
            wait[k] = from[k]->ready;
            wait[k]->refs++;
        }
    /* the whole copy, generated fields included; a partial one, its limbs */
    uint64_t charge = eff->limbs ? cut_bytes(v->cut, eff->limbs, 0, 0) : VAL_CHARGE(v, slot);
    hold_inflight(m, slot, charge, 1);
    mgr_unlock(m);

    fhr_status st = FHR_OK;
    fhr_value *nv = NULL;
    evref *ready = NULL;
    for (int k = 0; k < 2 && st == FHR_OK; k++)
        if (wait[k])
            st = m->b->ops->stream_wait_event(m->b, s, wait[k]->ev, err);
    if (st == FHR_OK)
        st = make_content(m, v, eff, at, src, old, s, &nv, err);
    if (st == FHR_OK && (st = ev_new(m, s, &ready, err)) != FHR_OK) {
        value_destroy_on(nv, m->b, s);
        nv = NULL;
    }

    mgr_lock(m);
    hold_inflight(m, slot, charge, 0);
    for (int k = 0; k < 2; k++)
        if (wait[k])
            ev_unref(m, wait[k]);
    if (st != FHR_OK) {
        free(x);
        return st;
    }
    for (int k = 0; k < 2; k++)
        if (from[k]) { /* read by the new copy: its free waits for it */
            ready->refs++;
            from[k]->reads[from[k]->nreads++] = ready; /* room was made above */
        }
    if (src) {
        tr->has_from = 1;
        tr->from = src->loc;
        x->copied = 1;
        x->source = src->loc;
    } else {
        tr->loaded = 1;
    }
    x->storage = fhr_value_storage_nbytes(nv);
    /* over the link; the rest was generated, or (a grow) copied on the device */
    tr->nbytes = x->storage - nv->generated - nv->ondevice;
    tr->regen_nbytes = nv->generated;
    x->loc = at;
    x->value = nv;
    x->ready = ready;
    x->limbs = eff->limbs;
    x->by_parts = rules_by_parts(v->cut, eff, slot);
    x->last_use = ++m->clock;
    x->serial = v->serial;
    acct_charge(&m->loc[slot], charge);
    tr->charged_nbytes = charge;
    if (old) {
        tr->replaced_nbytes = mat_charge(v, old);
        remove_mat(m, v, slot);
    }
    val_add_mat(v, x);
    v->present |= 1ULL << slot;
    mgr_changed(m, v->serial);
    return FHR_OK;
}

static void release_source(fhr_manager *m, val *v)
{
    if (!v->rs || !v->rs->src.release)
        return;
    mgr_callback_begin(m);
    v->rs->src.release(v->rs->src.ctx);
    mgr_callback_end(m);
}

fhr_status prim_apply(fhr_manager *m, const fhr_action *a, fhr_stream *s, fhr_report *rep,
                      fhr_phase phase, size_t index, fhr_error *err)
{
    const char *op = fhr_action_kind_name(a->kind);
    val *v;
    fhr_status st = mgr_lookup(m, a->handle, op, &v, err);
    if (st != FHR_OK)
        return st;
    rule_view rv;
    mgr_rule_view(m, v, &rv);
    rule_effect eff;
    if ((st = rules_check(&rv, a, m->loc, m->ndev, &eff, err)) != FHR_OK)
        return st;
    if (eff.noop) {
        mat *x = a->kind == FHR_ACT_DROP ? NULL : val_mat(v, fhr_loc_slot(a->at));
        if (x) {
            x->last_use = ++m->clock;
            mgr_changed(m, v->serial);
        }
        return FHR_OK;
    }
    fhr_transition tr;
    memset(&tr, 0, sizeof tr);
    tr.phase = phase;
    tr.action_index = index;
    tr.kind = a->kind;
    tr.handle = a->handle;
    tr.to = a->at;
    tr.t_start_ns = fhr_now_ns();
    if (eff.discard) {
        for (int sl = 0; sl < FHR_LOC_SLOTS; sl++)
            if (v->present & (1ULL << sl))
                remove_mat(m, v, sl);
        m->vals[v->serial] = NULL;
        m->nlive--;
        mgr_changed(m, v->serial);
        mgr_bump(m);
        release_source(m, v);
        tr.to = (fhr_location){FHR_LOC_INVALID, 0};
        mgr_trace(m, FHR_TR_DISCARD, a->handle, tr.to, tr.to, 0, NULL, NULL);
        mgr_free_record(v);
    } else {
        if (eff.create >= 0) {
            if (!s && (st = mgr_stream(m, a->at, &s, err)) != FHR_OK)
                return st;
            if ((st = create_copy(m, v, &eff, a->at, s, &tr, err)) != FHR_OK)
                return st;
            tr.stream_id = m->b->ops->stream_id(m->b, s);
        }
        if (eff.trim >= 0) {
            if ((st = trim_copy(m, v, eff.trim, eff.keep, &tr.dropped_nbytes, err)) != FHR_OK)
                return st;
            tr.has_from = 1;
            tr.from = a->at;
        }
        if (eff.remove >= 0) {
            tr.has_from = 1;
            tr.from = fhr_loc_from_slot(eff.remove);
            if (a->kind == FHR_ACT_DROP)
                tr.to = tr.from;
            remove_mat(m, v, eff.remove);
        }
        /* only now, when the transition has succeeded: a failed one changes nothing */
        m->loc[fhr_loc_slot(a->at)].present = 1;
        mgr_bump(m);
        mgr_trace(m, tr.loaded ? FHR_TR_LOAD : a->kind == FHR_ACT_ENSURE ? FHR_TR_ENSURE
                     : a->kind == FHR_ACT_MOVE                       ? FHR_TR_MOVE
                                                                     : FHR_TR_DROP,
                  a->handle, tr.has_from ? tr.from : (fhr_location){FHR_LOC_INVALID, 0}, tr.to,
                  tr.nbytes, s, NULL);
    }
    tr.t_end_ns = fhr_now_ns();
    if (rep && fhr_report_add_transition(rep, &tr) != FHR_OK)
        return fhr_fail(err, FHR_E_NOMEM, "report: out of host memory");
    return FHR_OK;
}

fhr_status mgr_run_action(fhr_manager *m, const fhr_action *a, fhr_stream *s, fhr_error *err)
{
    fhr_status st = mgr_enter(m, fhr_action_kind_name(a->kind), err);
    if (st != FHR_OK)
        return st;
    mgr_claims c;
    mgr_claims_init(&c);
    mgr_claims_add(&c, &a->handle, 1, NULL); /* fits the inline room: cannot fail */
    mgr_claim(m, &c);
    st = prim_apply(m, a, s, NULL, FHR_PHASE_NONE, 0, err);
    mgr_unclaim(m, &c);
    mgr_leave(m);
    return st;
}

fhr_status fhr_ensure(fhr_manager *m, fhr_handle h, fhr_location at, fhr_stream *s,
                      fhr_error *err)
{
    fhr_action a = {FHR_ACT_ENSURE, h, at, 0, {0, 0}, 0};
    return mgr_run_action(m, &a, s, err);
}

fhr_status fhr_move(fhr_manager *m, fhr_handle h, fhr_location to, const fhr_location *from,
                    fhr_stream *s, fhr_error *err)
{
    fhr_action a = {FHR_ACT_MOVE, h, to, from != NULL, from ? *from : (fhr_location){0, 0}, 0};
    return mgr_run_action(m, &a, s, err);
}

fhr_status fhr_drop(fhr_manager *m, fhr_handle h, fhr_location at, fhr_error *err)
{
    fhr_action a = {FHR_ACT_DROP, h, at, 0, {0, 0}, 0};
    return mgr_run_action(m, &a, NULL, err);
}

fhr_status fhr_discard(fhr_manager *m, fhr_handle h, fhr_error *err)
{
    fhr_action a = {FHR_ACT_DISCARD, h, {0, 0}, 0, {0, 0}, 0};
    return mgr_run_action(m, &a, NULL, err);
}
