/*
 * refusal.c - the reasons the engine refuses a request, as every protocol
 * states them.
 */
#include <stdio.h>

#include "api.h"

const char *weir_api_refusal(const weir_request *req, char *buf, size_t cap)
{
    if (!req->domain_len)
        return "rate limit domain must not be empty";
    if (!req->n_descriptors)
        return "rate limit descriptor list must not be empty";
    for (size_t i = 0; i < req->n_descriptors; i++) {
        const weir_descriptor *d = &req->descriptors[i];
        if (!d->n_entries) {
            snprintf(buf, cap, "descriptors[%zu] has no entries", i);
            return buf;
        }
        if (d->limit && d->limit->unit == WEIR_UNIT_NONE) {
            snprintf(buf, cap, "descriptors[%zu].limit.unit must not be UNKNOWN", i);
            return buf;
        }
    }
    return NULL;
}
