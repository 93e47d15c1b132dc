/*
 * shed.c - priorities and the event loop's lag (shed.h).
 */
#include "shed.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "weir/units.h"

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= SHED_NAME_BYTES)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return true;
}

int shed_priority_named(const shed_config *c, const char *p, size_t n)
{
    for (unsigned i = 0; i < c->n; i++)
        if (strlen(c->names[i]) == n && strncasecmp(c->names[i], p, n) == 0)
            return (int)i;
    return -1;
}

bool shed_configure(shed_config *c, const char *priorities, const char *dflt, const char *key,
                    const char *lag, char *err, size_t cap)
{
    memset(c, 0, sizeof(*c));
    for (const char *p = priorities; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (!name_ok(p, n)) {
            snprintf(err, cap, "--priorities: '%.*s' is not a name ([a-z0-9_-], 1 to 31)",
                     (int)(n > 40 ? 40 : n), p);
            return false;
        }
        if (shed_priority_named(c, p, n) >= 0 || c->n == SHED_MAX_PRIORITIES) {
            snprintf(err, cap, "--priorities: '%.*s' twice, or more than %u names", (int)n, p,
                     SHED_MAX_PRIORITIES);
            return false;
        }
        memcpy(c->names[c->n++], p, n);
        p = e ? e + 1 : p + n;
        if (e && !*p) {
            snprintf(err, cap, "--priorities: '' is not a name ([a-z0-9_-], 1 to 31)");
            return false;
        }
    }
    if (c->n == 0) {
        snprintf(err, cap, "--priorities: at least one name");
        return false;
    }
    int d = shed_priority_named(c, dflt, strlen(dflt));
    if (d < 0) {
        snprintf(err, cap, "--default-priority '%.40s' is not one of --priorities", dflt);
        return false;
    }
    c->dflt = (unsigned)d;
    if (strlen(key) >= sizeof(c->key)) {
        snprintf(err, cap, "--priority-key: at most %zu bytes", sizeof(c->key) - 1);
        return false;
    }
    strcpy(c->key, key);
    for (const char *p = lag; *p;) {
        const char *e = strchr(p, ','), *eq = strchr(p, '=');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char dur[32];
        int i = eq && eq < p + n ? shed_priority_named(c, p, (size_t)(eq - p)) : -1;
        size_t dl = eq && eq < p + n ? (size_t)(p + n - eq - 1) : 0;
        int64_t us = 0;
        if (i >= 0 && dl > 0 && dl < sizeof(dur)) {
            memcpy(dur, eq + 1, dl);
            dur[dl] = '\0';
            if (weir_duration_parse(dur, &us) != WEIR_OK || us <= 0)
                us = 0;
        }
        if (us <= 0) {
            snprintf(err, cap,
                     "--shed-lag: '%.*s' is not PRIORITY=DURATION of a known priority "
                     "(e.g. sheddable=50ms)",
                     (int)(n > 60 ? 60 : n), p);
            return false;
        }
        c->lag_us[i] = us;
        p = e ? e + 1 : p + n;
        if (e && !*p) {
            snprintf(err, cap, "--shed-lag: '' is not PRIORITY=DURATION (e.g. sheddable=50ms)");
            return false;
        }
    }
    return true;
}

unsigned shed_priority_of(const shed_config *c, const weir_request *req, int given)
{
    if (given >= 0 && (unsigned)given < c->n)
        return (unsigned)given;
    size_t kl = strlen(c->key);
    for (size_t d = 0; kl && d < req->n_descriptors; d++) {
        const weir_descriptor *ds = &req->descriptors[d];
        if (ds->n_entries == 1 && ds->entries[0].key_len == kl &&
            memcmp(ds->entries[0].key, c->key, kl) == 0) {
            int p = shed_priority_named(c, ds->entries[0].value, ds->entries[0].value_len);
            if (p >= 0)
                return (unsigned)p;
        }
    }
    return c->dflt;
}

bool shed_by_share(const shed_config *c, const weir_request *req, weir_code overall,
                   const weir_descriptor_status *st, size_t n, char *msg, size_t cap)
{
    if (overall != WEIR_CODE_OVER_LIMIT || req->priority == 0 || req->priority > c->n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (st[i].code == WEIR_CODE_OVER_LIMIT && !st[i].shed)
            return false;
    snprintf(msg, cap,
             "weir is overloaded: %s requests are shed (the limit keeps the rest for more "
             "important ones)",
             c->names[req->priority - 1]);
    return true;
}

void shed_tick(shed_monitor *m, uint64_t now_ms)
{
    int64_t late_us = m->due_ms && now_ms > m->due_ms ? (int64_t)(now_ms - m->due_ms) * 1000 : 0;
    m->last_us = late_us;
    /* a quick rise, a slower fall: one late tick counts at once (the
     * loop was stuck that long), and it takes a few calm ones to lift
     * the shedding */
    m->lag_us = late_us > m->lag_us ? (m->lag_us + 3 * late_us) / 4 : (3 * m->lag_us + late_us) / 4;
    m->due_ms = now_ms + SHED_TICK_MS;
}
