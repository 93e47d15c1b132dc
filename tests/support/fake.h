/*
 * fake.h - test support: a fake clock moved by hand, a seeded PRNG whose
 * seed every property test prints, and a counting allocator.
 */
#ifndef WEIR_TEST_FAKE_H
#define WEIR_TEST_FAKE_H

#include <stddef.h>
#include <stdint.h>

#include "weir/weir.h"

typedef struct fake_clock {
    int64_t now_us;
} fake_clock;

/* weir_clock_fn reading a fake_clock. */
int64_t fake_clock_read(void *ud);

/* splitmix64: small, fast, good enough for test traces. */
typedef struct test_rng {
    uint64_t s;
} test_rng;

uint64_t rng_next(test_rng *r);
/* uniform in [0, n) (n > 0) */
uint64_t rng_below(test_rng *r, uint64_t n);

/* The seed for a property test: $WEIR_TEST_SEED if set, else from the time;
 * printed to stdout either way so a failure can be replayed. */
uint64_t test_seed(const char *test_name);

/* A context whose allocator counts live bytes. */
typedef struct counting_alloc {
    weir_allocator a;
    int64_t live_bytes;
    int64_t live_blocks;
    int fail_after; /* fail the N-th allocation from now; 0 = never */
} counting_alloc;

void counting_alloc_init(counting_alloc *c);

/* counting_alloc_init(@c), then a context allocating through it. */
weir_status counting_ctx_new(counting_alloc *c, weir_ctx **out);

#endif /* WEIR_TEST_FAKE_H */
