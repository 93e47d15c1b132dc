/*
 * rules_text.h - the compiled rules as text, one line per limit, in the
 * spirit of envoyproxy/ratelimit's /rlconfig: `weir config print` and
 * GET /v1/rules write the same lines.
 */
#ifndef WEIR_FRONTENDS_API_RULES_TEXT_H
#define WEIR_FRONTENDS_API_RULES_TEXT_H

#include "common/buf.h"
#include "weir/rules.h"

/** Appends "DOMAIN.PATH: requests_per_unit=N unit=U ... shadow_mode=B\n"
 *  for every limit of @rules, in file order. */
void weir_api_render_rules(weir_buf *out, const weir_rules *rules);

/** Appends envoyproxy/ratelimit's /rlconfig lines, "DOMAIN.PATH:
 *  unit=MINUTE requests_per_unit=5, shadow_mode: false\n", one per limit
 *  (UNKNOWN and 0 for an unlimited limit; UNKNOWN for a `window:`). */
void weir_api_render_rlconfig(weir_buf *out, const weir_rules *rules);

#endif /* WEIR_FRONTENDS_API_RULES_TEXT_H */
