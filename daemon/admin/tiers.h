/*
 * tiers.h - GET /admin/v1/tiers: every domain's tenants section (tenant
 * key, default tier, each tier's limits by scope) as JSON, rendered once
 * per rule load.
 */
#ifndef WEIR_DAEMON_ADMIN_TIERS_H
#define WEIR_DAEMON_ADMIN_TIERS_H

#include "common/buf.h"
#include "weir/rules.h"

/** {"domains":[{"domain":..,"tenant_key":..,"default_tier":..|null,
 *  "tiers":[{"name":..,"limits":[{"descriptor":"default"|"key:value",
 *  "requests_per_unit":N,"unit":..|"window_seconds":N,"algorithm":..},...]}]}]}
 *  (domains without a tenants section left out) into @b. */
void admin_render_tiers(weir_buf *b, const weir_rules *rules);

/** The limits tier @tier gives a tenant's own descriptor (the scope
 *  "default"), as a JSON array, from the first domain that has the tier;
 *  false (nothing written) when none has it. */
bool admin_render_tier_default(weir_buf *b, const weir_rules *rules, const char *tier);

#endif /* WEIR_DAEMON_ADMIN_TIERS_H */
