/*
 * fuzz_lease_token.c - fuzzes the lease token reader (daemon/lease_token.c):
 * any bytes are accepted or refused cleanly, and an accepted token is
 * exactly what lease_token_put() writes for the leases it names (one
 * spelling per token) when it could have written it: its adaptive leases
 * taken at one time, each with at most its limit in flight. A broken
 * invariant aborts.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lease_token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static lease_token tok;
    if (!lease_token_parse((const char *)data, size, &tok)) {
        if (tok.n != 0)
            abort();
        return 0;
    }
    if (tok.n > LEASE_TOKEN_MAX_LEASES)
        abort();
    /* the leases as one descriptor's outcomes, written back */
    static weir_limit_outcome outs[LEASE_TOKEN_MAX_LEASES];
    int64_t at = 0;
    bool writable = true;
    for (size_t i = 0; i < tok.n; i++) {
        const weir_lease *l = &tok.leases[i];
        if (l->lease == 0 || l->limit == 0 || l->limit > WEIR_MAX_LEASES || l->window_us <= 0 ||
            l->key_len == 0 || l->key_len > WEIR_MAX_KEY_BYTES || l->dropped)
            abort();
        if (l->adaptive &&
            (l->acquired_us <= 0 || l->in_flight == 0 || l->in_flight > WEIR_MAX_LEASES))
            abort();
        if (!l->adaptive && (l->acquired_us || l->in_flight))
            abort();
        if (l->adaptive) {
            writable &= (at == 0 || at == l->acquired_us) && l->in_flight <= l->limit;
            at = l->acquired_us;
        }
        outs[i] = (weir_limit_outcome){.requests_per_unit = (uint32_t)l->limit,
                                       .remaining = l->adaptive ? l->limit - l->in_flight : 0,
                                       .window_us = l->window_us,
                                       .lease = l->lease,
                                       .key = l->key,
                                       .key_len = l->key_len,
                                       .adaptive = l->adaptive};
    }
    if (!writable)
        return 0;
    weir_descriptor_status st = {0};
    st.outcomes = outs;
    st.n_outcomes = tok.n;
    weir_buf b;
    weir_buf_init(&b, SIZE_MAX);
    if (lease_token_put(&b, &st, 1, at) != tok.n || !weir_buf_ok(&b) || b.len != size ||
        memcmp(b.p, data, size) != 0)
        abort();
    weir_buf_free(&b);
    return 0;
}
