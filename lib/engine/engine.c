/*
 * engine.c - the engine: the rules in force (a refcounted `ruleset`
 * behind a snapshot, replaced by reloads while other threads decide), and
 * the readers that decide (decide.c).
 *
 * Invariant: a ruleset is freed when the snapshot has replaced it and the
 * last decision holding it has completed; a reader is freed when it was
 * freed and the last decision it started has completed.
 */
#include <stdatomic.h>
#include <string.h>

#include "core/context.h"
#include "core/snapshot.h"
#include "engine/engine_internal.h"
#include "engine/ruleset.h"
#include "engine/tenants.h"
#include "store/store.h"
#include "weir/engine.h"

/* The first release's options end after the store. */
#define OPTIONS_V1_SIZE (offsetof(weir_engine_options, store) + sizeof(weir_store *))

weir_status weir_engine_new(weir_ctx *ctx, const weir_engine_options *opts, weir_rules *rules,
                            weir_engine **out)
{
    if (!ctx || !opts || !rules || !out || opts->size < OPTIONS_V1_SIZE || !opts->store)
        return WEIR_EINVAL;
    weir_engine_options o = {0};
    memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
    if (o.fallback && !weir__store_is_inline(o.fallback))
        return WEIR_EINVAL;
    weir_engine *e = weir__calloc(ctx, 1, sizeof(*e));
    if (!e)
        return WEIR_ENOMEM;
    unsigned char seed[32];
    weir_status st = weir__random(seed, sizeof(seed));
    if (st == WEIR_OK && XXH3_generateSecret(e->secret, SECRET_BYTES, seed, sizeof(seed)) != XXH_OK)
        st = WEIR_EIO;
    if (st != WEIR_OK) {
        weir__free(ctx, e);
        return st;
    }
    ruleset *rs;
    st = weir__ruleset_new(ctx, rules, e->secret, &rs);
    if (st == WEIR_OK) {
        st = weir__snap_new(ctx, rs, weir__ruleset_snap_destroy, NULL, &e->snap);
        if (st != WEIR_OK) {
            rs->rules = NULL; /* still the caller's */
            weir__ruleset_release(rs);
        }
    }
    if (st != WEIR_OK) {
        weir__free(ctx, e);
        return st;
    }
    pthread_mutex_init(&e->write_lock, NULL);
    e->current = rs;
    e->ctx = ctx;
    e->store = opts->store;
    e->inline_store = weir__store_is_inline(opts->store);
    e->shared_keys = (opts->store->ops->caps & WEIR_STORE_SHARED_KEYS) != 0;
    e->prefetch = opts->store->ops->prefetch;
    e->run_planned = e->inline_store ? opts->store->ops->run_planned : NULL;
    e->fallback = o.fallback;
    e->refuse_overrides = o.refuse_overrides;
    e->local_share_ppm = 1000000u / (o.instances ? o.instances : 1u);
    if (e->local_share_ppm == 0)
        e->local_share_ppm = 1;
    *out = e;
    return WEIR_OK;
}

void weir_engine_free(weir_engine *engine)
{
    if (!engine)
        return;
    weir__snap_free(engine->snap);
    pthread_mutex_destroy(&engine->write_lock);
    weir__free(engine->ctx, engine);
}

weir_status weir_engine_reload(weir_engine *engine, weir_rules *rules)
{
    if (!engine || !rules)
        return WEIR_EINVAL;
    ruleset *rs;
    weir_status st = weir__ruleset_new(engine->ctx, rules, engine->secret, &rs);
    if (st != WEIR_OK)
        return st;
    pthread_mutex_lock(&engine->write_lock);
    weir__ruleset_report_reload(engine->ctx, engine->current, rs);
    /* what adaptive limits learnt stays with them */
    weir__adaptive_adopt(&rs->plans.adaptive, &engine->current->plans.adaptive);
    rs->tenants = engine->current->tenants; /* the table in force stays */
    weir__tenants_hold(rs->tenants);
    st = weir__snap_swap(engine->snap, rs);
    if (st == WEIR_OK)
        engine->current = rs;
    pthread_mutex_unlock(&engine->write_lock);
    if (st != WEIR_OK) {
        rs->rules = NULL;
        weir__ruleset_release(rs);
    }
    return st;
}

weir_status weir_engine_set_tenants(weir_engine *engine, weir_tenants *tenants)
{
    if (!engine || (tenants && tenants->sealed))
        return WEIR_EINVAL;
    if (tenants)
        weir__tenants_seal(tenants, engine->secret);
    pthread_mutex_lock(&engine->write_lock);
    ruleset *rs;
    weir_status st = weir__ruleset_with_tenants(engine->current, tenants, &rs);
    if (st == WEIR_OK && (st = weir__snap_swap(engine->snap, rs)) != WEIR_OK)
        weir__ruleset_release(rs); /* drops the reference it took */
    if (st == WEIR_OK) {
        engine->current = rs;
        weir__tenants_release(tenants); /* the ruleset holds it now */
    } else if (tenants) {
        tenants->sealed = false; /* still the caller's */
    }
    pthread_mutex_unlock(&engine->write_lock);
    return st;
}

size_t weir_engine_tenant_count(weir_engine *engine)
{
    if (!engine)
        return 0;
    pthread_mutex_lock(&engine->write_lock);
    size_t n = weir_tenants_count(engine->current->tenants);
    pthread_mutex_unlock(&engine->write_lock);
    return n;
}

weir_status weir_engine_reload_path(weir_engine *engine, const char *path,
                                    const weir_rules_options *opts, weir_rules_error *errors,
                                    size_t max_errors, size_t *n_errors)
{
    if (!engine || !path)
        return WEIR_EINVAL;
    weir_rules *rules;
    weir_status st = weir_rules_load(engine->ctx, path, opts, &rules, errors, max_errors, n_errors);
    if (st != WEIR_OK) {
        weir__log(engine->ctx, WEIR_LOG_ERROR,
                  "event=rules_rejected path=%s status=%s; the rules in force stay", path,
                  weir_status_name(st));
        return st;
    }
    st = weir_engine_reload(engine, rules);
    if (st != WEIR_OK)
        weir_rules_free(rules);
    return st;
}

weir_status weir_engine_reader_new(weir_engine *engine, weir_engine_reader **out)
{
    return weir_engine_reader_new_session(engine, NULL, out);
}

weir_status weir_engine_reader_new_session(weir_engine *engine, weir_store_session *session,
                                           weir_engine_reader **out)
{
    if (!engine || !out || (session && session->store != engine->store))
        return WEIR_EINVAL;
    weir_engine_reader *r = weir__calloc(engine->ctx, 1, sizeof(*r));
    if (!r)
        return WEIR_ENOMEM;
    weir_status st = weir__snap_reader_new(engine->snap, &r->snap);
    if (st != WEIR_OK) {
        weir__free(engine->ctx, r);
        return st;
    }
    r->engine = engine;
    r->session = session;
    atomic_init(&r->spare, NULL);
    *out = r;
    return WEIR_OK;
}

void weir__reader_destroy(weir_engine_reader *reader)
{
    weir__snap_reader_free(reader->snap);
    weir__decision_destroy(reader->engine->ctx, atomic_load(&reader->spare));
    weir__decision_destroy(reader->engine->ctx, reader->own);
    weir__free(reader->engine->ctx, reader);
}

void weir_engine_reader_free(weir_engine_reader *reader)
{
    if (reader && atomic_fetch_or(&reader->live, READER_FREEING) == 0)
        weir__reader_destroy(reader);
}

const weir_rules *weir_engine_rules_hold(weir_engine *engine, weir_rules_hold **hold)
{
    if (!engine || !hold)
        return NULL;
    pthread_mutex_lock(&engine->write_lock);
    ruleset *rs = engine->current;
    atomic_fetch_add(&rs->refs, 1);
    pthread_mutex_unlock(&engine->write_lock);
    *hold = (weir_rules_hold *)rs;
    return rs->rules;
}

size_t weir_engine_adaptive_list(const weir_rules_hold *hold, weir_engine_adaptive *out, size_t cap)
{
    if (!hold)
        return 0;
    const adaptive_table *t = &((const ruleset *)hold)->plans.adaptive;
    for (size_t i = 0; out && i < t->n && i < cap; i++)
        out[i] = (weir_engine_adaptive){t->v[i].limit, (*t->v[i].slot)->a, t->v[i].id};
    return t->n;
}

void weir_engine_rules_unhold(weir_rules_hold *hold)
{
    weir__ruleset_release((ruleset *)hold);
}
