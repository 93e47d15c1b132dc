/*
 * weir/engine.h - the decision engine: a request (domain, descriptors,
 * hits) matched against the loaded rules and decided against a store.
 *
 * Every descriptor of a request is matched on its own (envoyproxy/
 * ratelimit's rules, docs/CONFIG.md); every limit on the matched node is
 * checked; quota is charged only if every enforcing limit of the request
 * admits (check all, then charge all, atomically in the memory store).
 * Shadow-mode limits are counted and reported ("would deny") but never
 * deny. Rules can be replaced at any time while other threads decide; a
 * limit whose identity (domain, descriptor path, limit, algorithm) is
 * unchanged keeps its counters across a reload, since counters are keyed
 * by that identity.
 *
 * Threads: an engine is shared; each deciding thread has a reader of its
 * own (weir_engine_reader_new()). Reloads may come from any thread.
 */
#ifndef WEIR_ENGINE_H
#define WEIR_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/algo.h"
#include "weir/context.h"
#include "weir/export.h"
#include "weir/rules.h"
#include "weir/status.h"
#include "weir/store.h"
#include "weir/tenants.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weir_engine weir_engine;
typedef struct weir_engine_reader weir_engine_reader;

/** Most descriptors in one request. */
#define WEIR_ENGINE_MAX_DESCRIPTORS 64u
/** Most entries in one descriptor. */
#define WEIR_ENGINE_MAX_ENTRIES 64u
/** Most limits one request may charge (all descriptors together). */
#define WEIR_ENGINE_MAX_LIMITS 64u
/** limit_remaining reported for unlimited descriptors (upstream's). */
#define WEIR_ENGINE_UNLIMITED_REMAINING UINT32_MAX

typedef struct weir_engine_options {
    /** sizeof(weir_engine_options). */
    size_t size;
    /** Where the counters live (borrowed; must outlive the engine). */
    weir_store *store;
    /** Since 0.2. Where limits with failure_mode local are decided while
     *  @store fails: a store that completes inline (a memory store of the
     *  instance's own), or NULL (local limits then fail open). Borrowed. */
    weir_store *fallback;
    /** How many instances share @store: a local limit is the limit
     *  divided by this (at least 1 request), unless its rule gives a
     *  local_share. 0 = 1. */
    uint32_t instances;
    /** Since 0.2. Refuse requests that override a descriptor's limit
     *  (Envoy's RateLimitDescriptor.limit, weir's "limit"):
     *  WEIR_REFUSAL_OVERRIDE_REFUSED. For callers that must not choose
     *  their own limits. */
    bool refuse_overrides;
} weir_engine_options;

/** One `key=value` entry of a request descriptor (bytes, not necessarily
 *  NUL-terminated; borrowed for the call). */
typedef struct weir_entry {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
} weir_entry;

/** A request's override of a descriptor's limit (Envoy's
 *  RateLimitDescriptor.limit). */
typedef struct weir_limit_override {
    uint32_t requests_per_unit;
    weir_rule_unit unit; /* WEIR_UNIT_NONE is an error (WEIR_EINVAL) */
} weir_limit_override;

typedef struct weir_descriptor {
    const weir_entry *entries;
    size_t n_entries;
    /** The descriptor's own hits (Envoy's hits_addend), used when has_hits:
     *  0 checks without consuming. */
    bool has_hits;
    uint64_t hits;
    /** NULL = the configured limit. */
    const weir_limit_override *limit;
} weir_descriptor;

typedef struct weir_request {
    const char *domain;
    size_t domain_len;
    const weir_descriptor *descriptors;
    size_t n_descriptors;
    /** Hits for descriptors without their own; 0 means 1. */
    uint64_t hits;
    /** Since 0.2. The rank of the request's priority among the rules'
     *  priorities (weir_rules_options.priorities): 1 is the most
     *  important; 0 is none, and no limit's `shed:` share applies. A
     *  limit with a share for this priority admits the request only if
     *  that share of the limit stays free after it. */
    unsigned priority;
} weir_request;

typedef enum weir_code { WEIR_CODE_OK = 1, WEIR_CODE_OVER_LIMIT = 2 } weir_code;

/** One limit's part in a decision: every limit a descriptor's match put
 *  to the test (replaced ones left out), the reported one included. */
typedef struct weir_limit_outcome {
    /** Points into the rules in force; valid until the callback returns. */
    const weir_rule_limit *limit;
    /** The effective limit (the request's override when it gave one). */
    uint32_t requests_per_unit;
    weir_rule_unit unit;
    int64_t window_us;
    uint64_t remaining;
    int64_t reset_after_us;
    /** This limit did not admit (shadow limits included: they never deny
     *  the request, but they say whether they would have). */
    bool denied;
    bool shadow;
    /** The store failed and failure_mode decided `denied`. */
    bool failure_mode;
    /** ... and it was failure_mode local: remaining and reset are the
     *  instance's own memory's, under the limit's local share. */
    bool local;
    /** Since 0.2. A concurrency limit's acquire that was charged: the
     *  lease it holds, to give back with weir_engine_release() (0 for
     *  every other outcome, and when nothing was charged). */
    uint64_t lease;
    /** The counter's name in the store (with lease: what
     *  weir_engine_release() takes back); valid until the callback
     *  returns. */
    const void *key;
    size_t key_len;
    /** Since 0.2. A descriptor carrying a tenant's key (weir/tenants.h):
     *  the tenant's tier (its record's, else the domain's default tier),
     *  for every limit of the descriptor, and whether this limit is one of
     *  the tenant's own overrides. NULL and false for other descriptors.
     *  Valid until the callback returns. */
    const char *tier;
    bool tenant_override;
    /** Since 0.2. An `adaptive:` limit: its id, for the lease's
     *  weir_lease.adaptive, and the limit its controller set for this
     *  decision (both 0 for a fixed limit). requests_per_unit and
     *  remaining stay the counter's (its most, and the units free under
     *  it, so requests_per_unit - remaining is the count in flight with
     *  this lease); the descriptor's status reports against
     *  adaptive_limit. */
    uint64_t adaptive;
    uint32_t adaptive_limit;
    /** Since 0.2. Denied by the request's priority's `shed:` share of
     *  this limit, not by the limit itself: the request would have been
     *  admitted had the share not been kept free (denied is then true). */
    bool shed;
} weir_limit_outcome;

/** The verdict for one descriptor, in request order. */
typedef struct weir_descriptor_status {
    weir_code code;
    /** The limit reported: the most restrictive of the descriptor's limits
     *  (a denying one first, then the one with least remaining); NULL when
     *  none applied (no match, a whitelist, unlimited, replaced, unknown
     *  domain). Points into the rules in force for this decision; valid
     *  until the callback returns. */
    const weir_rule_limit *limit;
    /** The effective limit (the request's override when it gave one). */
    uint32_t requests_per_unit;
    weir_rule_unit unit;
    int64_t window_us;
    /** Requests left; WEIR_ENGINE_UNLIMITED_REMAINING when unlimited. */
    uint64_t remaining;
    int64_t reset_after_us;
    /** 0 when admitted; WEIR_NEVER when the cost can never fit. */
    int64_t retry_after_us;
    /** Leaky bucket shaper: how long the request should wait. */
    int64_t delay_us;
    /** The reported limit is in shadow mode: code is OK even if it would
     *  deny; would_deny says whether it would have. */
    bool shadow;
    bool would_deny;
    /** The store failed for this descriptor and the limit's failure_mode
     *  decided the code. */
    bool failure_mode;
    /** ... with failure_mode local: decided on the instance's own memory. */
    bool local;
    bool unlimited;
    /** The request's domain has no rules (every status is then OK with no
     *  limit, as upstream answers). */
    bool domain_not_found;
    /** Since 0.2. The code is OVER_LIMIT only because of the request's
     *  priority: every limit of the descriptor that denied it did so by
     *  its `shed:` share (weir_limit_outcome.shed). A caller that sheds
     *  load answers such a request "overloaded" rather than "over limit"
     *  when every descriptor that denied it says so. */
    bool shed;
    /** Every limit tested for this descriptor (n_outcomes of them, in rule
     *  order); valid until the callback returns. */
    const weir_limit_outcome *outcomes;
    size_t n_outcomes;
} weir_descriptor_status;

/**
 * Completion of a decision: the overall code (OVER_LIMIT when any enforcing
 * descriptor is over its limit) and the statuses, the same array given to
 * weir_engine_decide(). Called exactly once per accepted decision, never
 * when weir_engine_decide() returned an error.
 *
 * Where it runs: with a store that completes inline (WEIR_STORE_INLINE, the
 * memory store) it has run before weir_engine_decide() returns, on the
 * calling thread. With a store that completes later it runs afterwards,
 * on the loop of the reader's session (weir_engine_reader_new_session()),
 * or on whatever thread the store completes on for a reader without one.
 * Either way, everything the statuses point to (limits, outcomes) is
 * valid only until the callback returns: a reload may free it right
 * after. Copy what must outlive it.
 */
typedef void (*weir_decide_cb)(void *arg, weir_code overall, weir_descriptor_status *statuses,
                               size_t n);

/**
 * weir_engine_new() - an engine deciding with @rules against opts->store.
 *
 * @rules: taken over on success (freed with the engine or when replaced).
 * Returns WEIR_OK; WEIR_EINVAL (NULL argument, bad opts->size, no store);
 * WEIR_ENOMEM; WEIR_ERANGE when the rules are deeper than the matcher
 * allows. On failure @rules still belongs to the caller. Thread-safe.
 */
WEIR_API weir_status weir_engine_new(weir_ctx *ctx, const weir_engine_options *opts,
                                     weir_rules *rules, weir_engine **out);

/** Free an engine. Every reader must be freed and every decision complete
 *  first. NULL is a no-op. */
WEIR_API void weir_engine_free(weir_engine *engine);

/**
 * weir_engine_reload() - replace the rules while other threads decide.
 *
 * Decisions that started before keep the old rules; later ones see the new
 * rules whole. Counters of limits whose identity is unchanged carry over;
 * the context's log hook gets one INFO line with how many limits were kept,
 * added and removed. @rules is taken over on success; on failure (WEIR_EINVAL,
 * WEIR_ENOMEM, WEIR_ERANGE) it still belongs to the caller and the old
 * rules stay in force. Thread-safe.
 */
WEIR_API weir_status weir_engine_reload(weir_engine *engine, weir_rules *rules);

/**
 * weir_engine_set_tenants() - Since 0.2. Put @tenants in force (taken
 * over on success: the engine frees it once no decision can use it), or
 * none with NULL. Decisions already under way finish with the table they
 * started with; later ones use the new one. A table is given to one engine
 * once. Thread-safe, like a reload; the two are serialised.
 *
 * Returns WEIR_OK; WEIR_EINVAL for a NULL @engine or a table given before;
 * WEIR_ENOMEM (the table then still belongs to the caller).
 */
WEIR_API weir_status weir_engine_set_tenants(weir_engine *engine, weir_tenants *tenants);

/** Since 0.2. Records of the table in force (0 with none). */
WEIR_API size_t weir_engine_tenant_count(weir_engine *engine);

/** Since 0.2. A hold on the rules in force: a reload meanwhile does not
 *  free them. */
typedef struct weir_rules_hold weir_rules_hold;

/** Since 0.2. The rules in force, held until weir_engine_rules_unhold()
 *  of *@hold; NULL only for a NULL argument. Thread-safe. */
WEIR_API const weir_rules *weir_engine_rules_hold(weir_engine *engine, weir_rules_hold **hold);
WEIR_API void weir_engine_rules_unhold(weir_rules_hold *hold);

/** Since 0.2. An `adaptive:` limit of the rules in force and its
 *  controller (weir/adaptive.h: read its limit, stats and history, all
 *  thread-safe), valid while the rules are held. */
typedef struct weir_engine_adaptive {
    const weir_rule_limit *limit;
    const weir_adaptive *controller;
    uint64_t id; /* weir_limit_outcome.adaptive */
} weir_engine_adaptive;

/** Since 0.2. The adaptive limits of the rules @hold holds, in id order:
 *  the first min(@cap, their count) into @out; returns their count. A
 *  reload keeps a limit's controller when the limit keeps its identity
 *  (its counter) and its `adaptive:` options. */
WEIR_API size_t weir_engine_adaptive_list(const weir_rules_hold *hold, weir_engine_adaptive *out,
                                          size_t cap);

/**
 * weir_engine_reload_path() - load a rule file or directory and, if it is
 * valid, put it in force (weir_engine_reload()).
 *
 * @opts, @errors, @max_errors, @n_errors: as weir_rules_load().
 *
 * Returns WEIR_OK when the new rules are in force; otherwise what
 * weir_rules_load() or weir_engine_reload() returned, the problems are in
 * @errors, and the rules in force are unchanged (a bad file never takes a
 * service's limits away). Thread-safe.
 */
WEIR_API weir_status weir_engine_reload_path(weir_engine *engine, const char *path,
                                             const weir_rules_options *opts,
                                             weir_rules_error *errors, size_t max_errors,
                                             size_t *n_errors);

/** A reader for one deciding thread, submitting to the store directly
 *  (weir_store_submit()). Thread-safe. */
WEIR_API weir_status weir_engine_reader_new(weir_engine *engine, weir_engine_reader **out);

/**
 * weir_engine_reader_new_session() - a reader for the thread that runs an
 * event loop, deciding through @session (borrowed: a session of the
 * engine's store, made for that loop; it must outlive the reader). The
 * decisions' callbacks then run on that loop.
 *
 * Returns WEIR_OK; WEIR_EINVAL (NULL engine or out, a session of another
 * store); WEIR_ENOMEM. Thread-safe.
 */
WEIR_API weir_status weir_engine_reader_new_session(weir_engine *engine,
                                                    weir_store_session *session,
                                                    weir_engine_reader **out);

/** Free a reader, not while a call on it is under way. Decisions it
 *  started that have yet to complete may still complete (on the thread
 *  their store completes them on): the reader's memory then goes with the
 *  last of them. Free the reader's session after the reader: freeing the
 *  session completes them. NULL is a no-op. Thread-safe against those
 *  completions. */
WEIR_API void weir_engine_reader_free(weir_engine_reader *reader);

/**
 * weir_engine_decide() - decide one request.
 *
 * @reader:   the calling thread's reader.
 * @req:      borrowed until the call returns (the engine copies what it
 *            keeps).
 * @now_us:   the time of the decision (one time for every limit).
 * @statuses: req->n_descriptors entries, filled before @cb runs; must stay
 *            valid until then.
 * @cb, @arg: completion.
 *
 * Returns WEIR_OK when the decision was accepted (@cb runs, or has run);
 * otherwise weir_engine_refusal() says why, in words every protocol uses:
 * WEIR_EINVAL for an empty domain ("rate limit domain must not be empty"),
 * no descriptors ("rate limit descriptor list must not be empty"), more
 * than WEIR_ENGINE_MAX_DESCRIPTORS descriptors, a descriptor with no
 * entries or more than WEIR_ENGINE_MAX_ENTRIES, an override with unit
 * WEIR_UNIT_NONE, more than WEIR_ENGINE_MAX_LIMITS limits to charge, or
 * a descriptor whose values add up to more than WEIR_MAX_KEY_BYTES;
 * WEIR_ENOMEM; WEIR_ERANGE for an override the algorithm cannot compile.
 * Store failures are not errors here: each limit's failure_mode decides.
 */
WEIR_API weir_status weir_engine_decide(weir_engine_reader *reader, const weir_request *req,
                                        int64_t now_us, weir_descriptor_status *statuses,
                                        weir_decide_cb cb, void *arg);

/* ------------------------------------------------------------------------ */
/* Counters the caller names                                                */

/** Longest counter name weir_engine_decide_key() takes, in bytes. */
#define WEIR_ENGINE_MAX_KEY_NAME 4000u

/**
 * One operation on a counter named by the caller rather than by the
 * rules: redis-cell's CL.THROTTLE (a key and a limit given with each call)
 * and the like. The counter lives in the engine's store under a name of
 * its own ("weir:k:" and @name, docs/ARCHITECTURE.md), apart from every
 * counter of the rules, and is shared by every process on a shared store.
 * A counter keeps its state across calls with different limits of the
 * same algorithm (a GCRA counter is one time, whatever its rate), as
 * redis-cell's keys do; under another algorithm it starts fresh.
 */
typedef struct weir_key_op {
    const void *name;
    size_t name_len; /* 1 .. WEIR_ENGINE_MAX_KEY_NAME */
    /** WEIR_OP_TAKE (hits 0 peeks: changes nothing), WEIR_OP_CHECK, or
     *  WEIR_OP_RESET (forget the counter; @limit and @hits unused). */
    weir_op_kind kind;
    const weir_limit *limit; /* borrowed for the call */
    uint64_t hits;
    /** What a TAKE or CHECK decides while the store fails. */
    weir_failure_mode failure_mode;
} weir_key_op;

/** What a weir_key_op came to. */
typedef struct weir_key_outcome {
    /** WEIR_OK, or why it failed: only a RESET fails (a store that fails a
     *  TAKE or CHECK leaves the verdict to failure_mode). */
    weir_status status;
    /** The verdict (TAKE, CHECK; a RESET: allowed says whether the store
     *  held a state to forget). Valid when status is WEIR_OK. */
    weir_result result;
    /** The store failed and failure_mode decided (result.remaining and the
     *  times are 0 then, unless local). */
    bool failure_mode;
    /** ... and it was failure_mode local: decided on the fallback store,
     *  under the limit's share (weir_engine_options.instances). */
    bool local;
} weir_key_outcome;

/** Completion of weir_engine_decide_key(); @out is valid during the call.
 *  Runs where weir_decide_cb runs (inline on a memory store). */
typedef void (*weir_key_cb)(void *arg, const weir_key_outcome *out);

/**
 * weir_engine_decide_key() - run @op on the counter it names.
 *
 * Returns WEIR_OK when accepted (@cb runs, or has run, exactly once);
 * WEIR_EINVAL for NULL arguments, a name empty or past
 * WEIR_ENGINE_MAX_KEY_NAME, an unknown kind, or a TAKE or CHECK with no
 * limit; WEIR_ERANGE for a limit the store cannot hold
 * (weir_store_check_limit()); WEIR_ENOMEM. Same threads as
 * weir_engine_decide().
 */
WEIR_API weir_status weir_engine_decide_key(weir_engine_reader *reader, const weir_key_op *op,
                                            int64_t now_us, weir_key_cb cb, void *arg);

/**
 * weir_engine_settle() - settle the true cost of a request decided
 * earlier with an estimate (costs known only afterwards: tokens of a
 * language model, bytes, rows). Since 0.2.
 *
 * @req is the request as it was decided, its hits the estimate; every
 * limit it charged is brought to @cost: given back the difference (a
 * REFUND) when the work cost less, charged the overrun (a CHARGE, as far
 * as the limit holds: a full counter carries no debt) when it cost more.
 * A descriptor with hits of its own keeps them; concurrency limits (their
 * leases go back by weir_engine_release()), token buckets with a warm-up
 * and `sketch:` limits are only looked at. The rules in force now decide
 * which counters: settle before a reload changes them.
 *
 * @cb gets the statuses as after a decision, every code OK: remaining and
 * reset are each counter's after the settlement. Same returns and
 * threads as weir_engine_decide().
 */
WEIR_API weir_status weir_engine_settle(weir_engine_reader *reader, const weir_request *req,
                                        uint64_t cost, int64_t now_us,
                                        weir_descriptor_status *statuses, weir_decide_cb cb,
                                        void *arg);

/** A lease to give back: a limit outcome's lease, key and limit. */
typedef struct weir_lease {
    const void *key; /* weir_limit_outcome.key (copied by the caller) */
    size_t key_len;
    uint64_t lease;
    /** The concurrency limit it was taken under (requests_per_unit, and
     *  its window: the lease timeout). */
    uint64_t limit;
    int64_t window_us;
    /** Since 0.2. A lease of an `adaptive:` limit (weir_limit_outcome.
     *  adaptive; 0 for any other): the release feeds that limit's
     *  controller the lease's time in flight, from @acquired_us (the
     *  decision's now_us), with @in_flight (the count in flight with it,
     *  itself included) and @dropped (the work failed from overload: a
     *  timeout, a rejection upstream). A lease given back after its
     *  timeout counts as dropped. */
    uint64_t adaptive;
    int64_t acquired_us;
    uint32_t in_flight;
    bool dropped;
} weir_lease;

/**
 * weir_engine_release() - give back a lease a decision took (a
 * concurrency limit's acquire), before its timeout frees it.
 *
 * @cb gets status WEIR_OK (given back; result is the counter after it),
 * WEIR_ENOLEASE (not held: given back already, or timed out), or the
 * store's failure. Returns WEIR_OK when accepted; WEIR_EINVAL for NULL
 * arguments, a key empty or too long, a limit that does not compile;
 * WEIR_ENOMEM. Same threads as weir_engine_decide().
 */
WEIR_API weir_status weir_engine_release(weir_engine_reader *reader, const weir_lease *lease,
                                         int64_t now_us, weir_key_cb cb, void *arg);

/* ------------------------------------------------------------------------ */
/* Explaining a match                                                       */

/** Since 0.2. How one entry of a descriptor matched a rule. */
typedef enum weir_match_how {
    WEIR_MATCH_EXACT = 1,   /* the rule's value equals the entry's */
    WEIR_MATCH_PATTERN = 2, /* the rule's `*` pattern matched the entry's value */
    WEIR_MATCH_DEFAULT = 3  /* the rule has the entry's key and no value */
} weir_match_how;

/** Since 0.2. Why a descriptor's walk reached no limit (or that it did). */
typedef enum weir_match_miss {
    WEIR_MISS_NONE = 0, /* every entry matched and the rule reached has limits */
    WEIR_MISS_DOMAIN,   /* the request's domain has no rules */
    WEIR_MISS_TOO_DEEP, /* entry `depth` is one more than the rules go: the
                         * rule the walk reached has no rules below it */
    WEIR_MISS_KEY,      /* no rule at entry `depth`'s level has its key */
    WEIR_MISS_VALUE,    /* rules at that level have the key, but none its
                         * value, a pattern matching it, or no value */
    WEIR_MISS_SHALLOW,  /* every entry matched; the rule reached has no
                         * limit of its own, only rules below it: the
                         * request has fewer entries than they need */
    WEIR_MISS_NO_LIMIT  /* every entry matched a rule without limits and
                         * without rules below it (a whitelist) */
} weir_match_miss;

/** Since 0.2. One matched entry. */
typedef struct weir_match_level {
    const weir_rule *rule;
    weir_match_how how;
} weir_match_level;

/** Since 0.2. The walk of one descriptor through the rules. */
typedef struct weir_match_trace {
    weir_match_miss miss;
    /** Entries matched: levels[0 .. depth-1]. On a miss of KEY, VALUE or
     *  TOO_DEEP the walk stopped at entry @depth. */
    size_t depth;
    weir_match_level levels[WEIR_RULES_MAX_DEPTH];
} weir_match_trace;

/** Completion of weir_engine_explain(): one trace per descriptor of the
 *  request, in order; the traces and the rules they point to are valid
 *  during the call. */
typedef void (*weir_explain_cb)(void *arg, const weir_match_trace *traces, size_t n);

/**
 * weir_engine_explain() - how each descriptor of @req walks the rules in
 * force: which rule each entry matched and how (exact value, pattern,
 * default), and where and why a walk that reaches no limit stopped. It
 * charges nothing and touches no store; a decision's verdicts per limit
 * are its outcomes (weir_descriptor_status). The walk is the one
 * weir_engine_decide() makes, on the rules in force when called: run it
 * in a decision's callback to explain that decision (a reload between the
 * two is the only way they can differ).
 *
 * @cb runs once, before this returns, and must not decide on @reader.
 * Returns WEIR_OK; WEIR_EINVAL for NULL arguments or a request that
 * weir_engine_decide() refuses for its shape (no descriptors, too many,
 * an entry missing its bytes); WEIR_ENOMEM. Same threads as
 * weir_engine_decide().
 */
WEIR_API weir_status weir_engine_explain(weir_engine_reader *reader, const weir_request *req,
                                         weir_explain_cb cb, void *arg);

/* X(name, number, text): why weir_engine_decide() refused a request. A
 * descriptor's reason reads after "descriptors[N]"; numbers never change. */
#define WEIR_REFUSAL_MAP(X)                                                                      \
    X(NONE, 0, "not refused")                                                                    \
    X(EMPTY_DOMAIN, 1, "rate limit domain must not be empty")                                    \
    X(NO_DESCRIPTORS, 2, "rate limit descriptor list must not be empty")                         \
    X(TOO_MANY_DESCRIPTORS, 3, "more descriptors than one request may have (64)")                \
    X(NO_ENTRIES, 4, " has no entries")                                                          \
    X(TOO_MANY_ENTRIES, 5, " has more entries than one descriptor may have (64)")                \
    X(MISSING_BYTES, 6, " has an entry whose key or value is missing")                           \
    X(UNKNOWN_UNIT, 7, ".limit.unit must not be UNKNOWN")                                        \
    X(TOO_MANY_LIMITS, 8, "the request puts more limits to the test than one decision may (64)") \
    X(VALUES_TOO_LONG, 9,                                                                        \
      " has values too long for a counter key (4096 bytes with the rule's path)")                \
    X(BAD_OVERRIDE, 10, ".limit is out of the range its limit's algorithm takes")                \
    X(NO_MEMORY, 11, "out of memory")                                                            \
    X(OVERRIDE_REFUSED, 12, ".limit: this service does not take limits from requests")

typedef enum weir_refusal_code {
#define WEIR_REFUSAL_ENUM(name, num, text) WEIR_REFUSAL_##name = num,
    WEIR_REFUSAL_MAP(WEIR_REFUSAL_ENUM)
#undef WEIR_REFUSAL_ENUM
} weir_refusal_code;

/** Why a decision was refused: the reason, and the descriptor it concerns
 *  (its index in the request), -1 when it concerns the request. */
typedef struct weir_refusal {
    weir_refusal_code code;
    int32_t descriptor;
} weir_refusal;

/**
 * weir_engine_refusal() - why the last weir_engine_decide() on @reader
 * refused its request (code WEIR_REFUSAL_NONE when it did not). For the
 * error messages of protocols: each says it in the same words. The reader's
 * thread only, like the reader.
 */
WEIR_API weir_refusal weir_engine_refusal(const weir_engine_reader *reader);

/**
 * weir_refusal_text() - @r in words, as every protocol answers it:
 * "rate limit domain must not be empty", "descriptors[1] has no entries",
 * "descriptors[0].limit.unit must not be UNKNOWN". Writes at most @cap
 * bytes to @buf, NUL-terminated (cut if need be); returns the length the
 * whole text has.
 */
WEIR_API size_t weir_refusal_text(weir_refusal r, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_ENGINE_H */
