/*
 * snapshot.c - the quota database read into a tenant table (snapshot.h).
 */
#include "snapshot.h"

#include <stdio.h>
#include <string.h>

weir_tenant quota_snapshot_tenant(const quota_tenant *t, weir_tenant_limit *limits)
{
    for (size_t i = 0; i < t->n_overrides && i < QUOTA_MAX_OVERRIDES; i++) {
        const quota_override *o = &t->overrides[i];
        limits[i] = (weir_tenant_limit){
            o->descriptor, strlen(o->descriptor), (uint32_t)o->requests_per_unit,
            o->unit,       o->calendar,           o->time_zone,
            o->algorithm};
    }
    weir_tenant r = {t->key,
                     t->key_len,
                     t->tier[0] ? t->tier : NULL,
                     t->effective_at_us == QUOTA_TIME_NONE ? INT64_MIN : t->effective_at_us,
                     t->expires_at_us == QUOTA_TIME_NONE ? INT64_MAX : t->expires_at_us,
                     limits,
                     t->n_overrides};
    return r;
}

typedef struct reading {
    weir_tenants *t;
    quota_snapshot *out;
    bool nomem;
} reading;

/* "k\x01y..." of a key, for a log line. */
static void escaped(const char *key, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)key[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    }
    out[o] = '\0';
}

static bool add_one(void *arg, const quota_tenant *qt)
{
    reading *r = arg;
    weir_tenant_limit limits[QUOTA_MAX_OVERRIDES];
    weir_tenant t = quota_snapshot_tenant(qt, limits);
    weir_status st = weir_tenants_add(r->t, &t);
    if (st == WEIR_ENOMEM) {
        r->nomem = true;
        return false;
    }
    if (st != WEIR_OK) {
        if (r->out->skipped++ == 0) {
            char key[96];
            escaped(qt->key, qt->key_len, key, sizeof(key));
            snprintf(r->out->first_skipped, sizeof(r->out->first_skipped), "%s: %s", key,
                     weir_strerror(st));
        }
    }
    return true;
}

weir_tenants *quota_snapshot_read(quota_db *db, weir_ctx *ctx, quota_snapshot *out)
{
    memset(out, 0, sizeof(*out));
    reading r = {NULL, out, false};
    if (weir_tenants_new(ctx, &r.t) != WEIR_OK)
        return NULL;
    if (quota_db_load(db, add_one, &r) != QDB_OK || r.nomem) {
        weir_tenants_free(r.t);
        return NULL;
    }
    return r.t;
}
