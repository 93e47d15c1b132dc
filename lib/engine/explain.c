/*
 * explain.c - weir_engine_explain(): the walk of a request's descriptors
 * through the rules in force, told for a person. It reads the rules the
 * way a decision does (inside the reader's snapshot section, or the open
 * section of the decision whose callback it runs in) and writes nothing
 * shared.
 */
#include <stdlib.h>

#include "engine/engine_internal.h"
#include "engine/match.h"

static bool shape_ok(const weir_request *req)
{
    if (!req->descriptors || req->n_descriptors == 0 ||
        req->n_descriptors > WEIR_ENGINE_MAX_DESCRIPTORS)
        return false;
    for (size_t d = 0; d < req->n_descriptors; d++) {
        const weir_descriptor *ds = &req->descriptors[d];
        if (!ds->entries || ds->n_entries == 0 || ds->n_entries > WEIR_ENGINE_MAX_ENTRIES)
            return false;
        for (size_t k = 0; k < ds->n_entries; k++) {
            const weir_entry *en = &ds->entries[k];
            if ((!en->key && en->key_len) || (!en->value && en->value_len))
                return false;
        }
    }
    return true;
}

weir_status weir_engine_explain(weir_engine_reader *reader, const weir_request *req,
                                weir_explain_cb cb, void *arg)
{
    if (!reader || !req || !cb || (!req->domain && req->domain_len) || !shape_ok(req))
        return WEIR_EINVAL;
    weir_match_trace *traces =
        weir__calloc(reader->engine->ctx, req->n_descriptors, sizeof(*traces));
    if (!traces)
        return WEIR_ENOMEM;
    /* inside a decision's callback its section is open: read its rules */
    bool enter = !reader->in_section;
    const ruleset *rs = enter ? weir__snap_enter(reader->snap) : reader->cur;
    const weir__match_domain *dom =
        req->domain ? weir__match_domain_find(rs->idx, req->domain, req->domain_len) : NULL;
    for (size_t d = 0; d < req->n_descriptors; d++) {
        const weir_descriptor *ds = &req->descriptors[d];
        weir__match_explain(rs->idx, dom, (const weir__entry *)ds->entries, ds->n_entries,
                            &traces[d]);
    }
    cb(arg, traces, req->n_descriptors);
    if (enter)
        weir__snap_exit(reader->snap);
    weir__free(reader->engine->ctx, traces);
    return WEIR_OK;
}
