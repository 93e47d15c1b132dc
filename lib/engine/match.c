/*
 * match.c - the match index and the descriptor lookup (see match.h).
 *
 * Layout. Every domain gets a root node and every descriptor a node, all
 * in one array. A node's children are described by one KEY entry per
 * distinct key (consecutive, in order of first appearance), naming the
 * key's first DEFAULT child and its runs of EXACT children (values[]) and
 * of pattern children (wild[]), each in file order. So a level finds the
 * key once, then tries the exact run, the first matching pattern, the
 * default. A run of strings (a node's keys, a key's values, the domain
 * names) of at most SCAN_MAX entries is scanned in order; a longer one is
 * found through hash slots (linear probing, at most half full) seeded by
 * the run's owner and accepted only inside the owner's run. A scan meets
 * repeated strings in file order and a repeated string never gets a slot,
 * so the first in file order always wins. An entry matches only after a
 * full length-aware byte comparison: hashes and the first-word copies kept
 * in entries are shortcuts that never decide a match.
 *
 * Invariant: after weir__match_index_new() returns, nothing is written
 * again until weir__match_index_free(); a lookup only reads and allocates
 * nothing.
 */
#include "engine/match.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define NO_NODE UINT32_MAX
#define MAX_NODES (UINT32_MAX / 4u)
/* Longest run searched in order: up to about this many entries, comparing
 * lengths and first words costs less than hashing the string and probing. */
#define SCAN_MAX 8u

/* Salts keeping the hashes of keys, values and domains apart, and the
 * multiplier spreading the owners of runs. */
#define SALT_KEY 0x3c6ef372fe94f82bull
#define SALT_OWNER 0x9e3779b97f4a7c15ull
#define SALT_VALUE 0x6a09e667f3bcc908ull
#define SALT_DOMAIN 0xa54ff53a5f1d36f1ull
#define FALLBACK_SEED 0x510e527fade682d1ull

/* The fields a lookup reads come first. */
typedef struct mnode {
    const weir_rule *rule; /* NULL for a domain's root */
    uint32_t first_key;    /* the key entries of its children */
    uint32_t n_keys;
    bool share;
    bool wildcard;
    const weir_rules_domain *domain; /* roots only */
    const char *key;                 /* a root: the domain's name */
    const char *value;               /* NULL: none */
    uint32_t key_len;
    uint32_t value_len;
    uint32_t depth; /* 0 for a root */
    uint32_t first_child;
    uint32_t n_children;
    uint32_t key_entry; /* while building: the key entry it belongs to */
} mnode;

/* A string of a run: a key, an exact value or a domain name. */
typedef struct strent {
    uint64_t head; /* head_of(s, len) */
    const char *s;
    uint32_t len;
    uint32_t id; /* a key: its DEFAULT child or NO_NODE; a value: the exact
                  * child; a domain: its root */
} strent;

/* A hash slot naming an entry. */
typedef struct hslot {
    uint32_t tag; /* the high half of the hash */
    uint32_t ref; /* the entry's index + 1; 0: an empty slot */
} hslot;

/* The strings of one kind, run after run, and their hash slots. */
typedef struct strtab {
    strent *ents;
    uint32_t n;
    uint64_t salt;
    hslot *slots; /* twice as many as entries can be, a power of 2 */
    size_t mask;
} strtab;

/* The exact and pattern runs of a key entry. */
typedef struct keyruns {
    uint32_t first_exact;
    uint32_t n_exact;
    uint32_t first_wild;
    uint32_t n_wild;
} keyruns;

/* A pattern child, with the places of its first and last '*'. */
typedef struct wentry {
    const char *pattern;
    uint32_t len;
    uint32_t prefix;
    uint32_t last_star;
    uint32_t node;
} wentry;

struct weir__match_index {
    weir_ctx *ctx;
    uint64_t seed;
    mnode *nodes;
    uint32_t n_nodes;
    uint32_t max_depth;
    strtab keys;   /* runs owned by parent nodes */
    keyruns *runs; /* one per entry of keys */
    strtab values; /* runs owned by key entries */
    strtab domains;
    wentry *wild;
    uint32_t n_wild;
};

/* ------------------------------------------------------------ strings */

static uint64_t load64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint32_t load32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Whether the n bytes at a and b are equal. Up to 16 bytes without a
 * library call, by two overlapping loads; a pointer may be NULL when n is
 * 0. */
static inline bool same_bytes(const char *a, const char *b, size_t n)
{
    if (n >= 8) {
        if (n > 16)
            return memcmp(a, b, n) == 0;
        return load64(a) == load64(b) && load64(a + n - 8) == load64(b + n - 8);
    }
    if (n >= 4)
        return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
    if (n == 0)
        return true;
    return a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1];
}

/* A string's first bytes in one word, read without going past its end.
 * With the length it determines a string of at most 8 bytes. */
static inline uint64_t head_of(const char *s, size_t len)
{
    if (len >= 8)
        return load64(s);
    if (len >= 4)
        return load32(s) | (uint64_t)load32(s + len - 4) << 32;
    if (len == 0)
        return 0;
    return (uint64_t)(unsigned char)s[0] | (uint64_t)(unsigned char)s[len / 2] << 8 |
           (uint64_t)(unsigned char)s[len - 1] << 16;
}

/* Whether entry x holds the string (s, len) whose head is head. */
static inline bool holds(const strent *x, uint64_t head, const char *s, size_t len)
{
    return x->len == len && x->head == head && (len <= 8 || same_bytes(x->s + 8, s + 8, len - 8));
}

static uint32_t tag_of(uint64_t hash)
{
    return (uint32_t)(hash >> 32);
}

/* The hash of a string of the run owned by `owner`. XXH3 mixes its seed
 * fully, so distinct owners' seeds only need to differ. */
static uint64_t run_hash(const weir__match_index *idx, const strtab *t, uint32_t owner,
                         const char *s, size_t len)
{
    return XXH3_64bits_withSeed(s, len, idx->seed ^ t->salt ^ ((uint64_t)owner * SALT_OWNER));
}

/* The entry of (s, len) among entries first..first+n-1 of t through the
 * hash slots, or NO_NODE. */
static uint32_t strtab_probe(const strtab *t, uint64_t hash, uint32_t first, uint32_t n,
                             uint64_t head, const char *s, size_t len)
{
    uint32_t tag = tag_of(hash);
    for (size_t i = (size_t)hash & t->mask;; i = (i + 1) & t->mask) {
        const hslot *slot = &t->slots[i];
        if (!slot->ref)
            return NO_NODE;
        uint32_t e = slot->ref - 1;
        if (slot->tag == tag && e - first < n && holds(&t->ents[e], head, s, len))
            return e;
    }
}

/* The first entry of (s, len) in the run first..first+n-1 of t, which
 * `owner` owns, or NO_NODE. */
static inline uint32_t strtab_find(const weir__match_index *idx, const strtab *t, uint32_t owner,
                                   uint32_t first, uint32_t n, const char *s, size_t len)
{
    uint64_t head = head_of(s, len);
    if (n <= SCAN_MAX) {
        for (uint32_t e = first; e < first + n; e++) {
            if (holds(&t->ents[e], head, s, len))
                return e;
        }
        return NO_NODE;
    }
    return strtab_probe(t, run_hash(idx, t, owner, s, len), first, n, head, s, len);
}

/* Write entry e of t: the string (s, len) in the run that starts at
 * `first` and that `owner` owns. Unless an earlier entry of the run holds
 * the same string, give e a hash slot and return e; else return that
 * earlier entry (e gets no slot, so a probe never finds it). */
static uint32_t strtab_put(const weir__match_index *idx, strtab *t, uint32_t owner, uint32_t first,
                           uint32_t e, const char *s, uint32_t len, uint32_t id)
{
    uint64_t hash = run_hash(idx, t, owner, s, len);
    uint64_t head = head_of(s, len);
    t->ents[e] = (strent){.head = head, .s = s, .len = len, .id = id};
    uint32_t had = strtab_probe(t, hash, first, e - first, head, s, len);
    if (had != NO_NODE)
        return had;
    size_t i = (size_t)hash & t->mask;
    while (t->slots[i].ref)
        i = (i + 1) & t->mask;
    t->slots[i] = (hslot){.tag = tag_of(hash), .ref = e + 1};
    return e;
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 8;
    while (p < n)
        p <<= 1;
    return p;
}

/* Room for up to n entries; false when out of memory. */
static bool strtab_init(const weir_ctx *ctx, strtab *t, size_t n, uint64_t salt)
{
    size_t n_slots = pow2_at_least(2 * n);
    t->salt = salt;
    t->mask = n_slots - 1;
    t->ents = weir__calloc(ctx, n ? n : 1, sizeof(*t->ents));
    t->slots = weir__calloc(ctx, n_slots, sizeof(*t->slots));
    return t->ents && t->slots;
}

static void strtab_free(const weir_ctx *ctx, strtab *t)
{
    weir__free(ctx, t->ents);
    weir__free(ctx, t->slots);
}

/* ------------------------------------------------------------ glob */

/* Leftmost occurrence of needle in hay, or NULL. */
static const char *find_bytes(const char *hay, size_t hay_len, const char *needle,
                              size_t needle_len)
{
    if (needle_len > hay_len)
        return NULL;
    const char *last = hay + (hay_len - needle_len);
    for (const char *p = hay; p <= last; p++) {
        p = memchr(p, needle[0], (size_t)(last - p) + 1);
        if (!p)
            return NULL;
        if (memcmp(p, needle, needle_len) == 0)
            return p;
    }
    return NULL;
}

/* Whether the middle of a pattern, the bytes strictly between its first
 * '*' at `prefix` and its last at `last_star`, matches somewhere in v. Each
 * segment between stars is taken at its leftmost place after the previous
 * one, which is always safe: a later place only leaves less room for what
 * follows. So no choice is ever revisited. */
static bool glob_middle(const char *pattern, size_t prefix, size_t last_star, const char *v,
                        const char *v_end)
{
    size_t pi = prefix + 1;
    while (pi < last_star) {
        if (pattern[pi] == '*') {
            pi++;
            continue;
        }
        const char *seg = pattern + pi;
        /* the star at last_star bounds the search */
        const char *seg_end = memchr(seg, '*', last_star - pi + 1);
        size_t seg_len = (size_t)(seg_end - seg);
        const char *at = find_bytes(v, (size_t)(v_end - v), seg, seg_len);
        if (!at)
            return false;
        v = at + seg_len;
        pi += seg_len;
    }
    return true;
}

/*
 * The pattern is prefix*seg*seg*...*suffix, with its first '*' at @prefix
 * and its last at @last_star (the index knows both in advance). The prefix
 * and the suffix are anchored; the middle is looked at only when there is
 * one. @value is not NULL.
 */
static inline bool glob_stars(const char *pattern, size_t pattern_len, size_t prefix,
                              size_t last_star, const char *value, size_t value_len)
{
    size_t suffix = pattern_len - last_star - 1;
    if (prefix + suffix > value_len || !same_bytes(pattern, value, prefix) ||
        !same_bytes(pattern + last_star + 1, value + (value_len - suffix), suffix))
        return false;
    return prefix + 1 >= last_star ||
           glob_middle(pattern, prefix, last_star, value + prefix, value + (value_len - suffix));
}

bool weir__glob_match(const char *pattern, size_t pattern_len, const char *value, size_t value_len)
{
    const char *star = pattern_len ? memchr(pattern, '*', pattern_len) : NULL;
    if (!star)
        return pattern_len == value_len && same_bytes(pattern, value, value_len);
    size_t last_star = pattern_len - 1;
    while (pattern[last_star] != '*')
        last_star--;
    return glob_stars(pattern, pattern_len, (size_t)(star - pattern), last_star, value ? value : "",
                      value_len);
}

/* ------------------------------------------------------------ building */

static size_t child_count(const mnode *n)
{
    return n->rule ? weir_rule_child_count(n->rule) : weir_rules_domain_rule_count(n->domain);
}

static const weir_rule *child_at(const mnode *n, size_t i)
{
    return n->rule ? weir_rule_child(n->rule, i) : weir_rules_domain_rule(n->domain, i);
}

/* Describe the children of p: its key entries, then their runs. */
static void link_children(weir__match_index *idx, uint32_t p)
{
    mnode *pn = &idx->nodes[p];
    strtab *keys = &idx->keys;
    uint32_t first = pn->first_child, end = pn->first_child + pn->n_children;
    pn->first_key = keys->n;
    for (uint32_t c = first; c < end; c++) {
        mnode *cn = &idx->nodes[c];
        /* a key met before leaves the entry just written unused */
        uint32_t k =
            strtab_put(idx, keys, p, pn->first_key, keys->n, cn->key, cn->key_len, NO_NODE);
        if (k == keys->n)
            idx->runs[keys->n++] = (keyruns){0};
        cn->key_entry = k;
        if (cn->wildcard)
            idx->runs[k].n_wild++;
        else if (cn->value)
            idx->runs[k].n_exact++;
        else if (keys->ents[k].id == NO_NODE)
            keys->ents[k].id = c;
    }
    pn->n_keys = keys->n - pn->first_key;

    /* Place the runs, then fill them in file order, counting again. */
    for (uint32_t k = pn->first_key; k < keys->n; k++) {
        keyruns *kr = &idx->runs[k];
        kr->first_exact = idx->values.n;
        idx->values.n += kr->n_exact;
        kr->n_exact = 0;
        kr->first_wild = idx->n_wild;
        idx->n_wild += kr->n_wild;
        kr->n_wild = 0;
    }
    for (uint32_t c = first; c < end; c++) {
        const mnode *cn = &idx->nodes[c];
        keyruns *kr = &idx->runs[cn->key_entry];
        if (cn->wildcard) {
            const char *star = memchr(cn->value, '*', cn->value_len);
            uint32_t last = cn->value_len - 1;
            while (cn->value[last] != '*')
                last--;
            idx->wild[kr->first_wild + kr->n_wild++] =
                (wentry){.pattern = cn->value,
                         .len = cn->value_len,
                         .prefix = (uint32_t)(star - cn->value),
                         .last_star = last,
                         .node = c};
        } else if (cn->value) {
            /* a repeated value gets no slot; a scan meets it second */
            strtab_put(idx, &idx->values, cn->key_entry, kr->first_exact,
                       kr->first_exact + kr->n_exact++, cn->value, cn->value_len, c);
        }
    }
}

static weir_status build(weir__match_index *idx, const weir_rules *rules)
{
    uint32_t next = 0;
    size_t n_domains = weir_rules_domain_count(rules);
    for (size_t d = 0; d < n_domains; d++) {
        const weir_rules_domain *dom = weir_rules_domain_at(rules, d);
        const char *name = weir_rules_domain_name(dom);
        mnode *r = &idx->nodes[next];
        *r = (mnode){.domain = dom, .key = name, .key_len = (uint32_t)strlen(name)};
        strtab *t = &idx->domains;
        if (strtab_put(idx, t, 0, 0, t->n, r->key, r->key_len, next) == t->n)
            t->n++;
        next++;
    }

    /* Breadth first: the array itself is the queue, so a node's children
     * get consecutive ids in file order. */
    uint32_t n_exact = 0, n_wild = 0;
    for (uint32_t p = 0; p < next; p++) {
        size_t n = child_count(&idx->nodes[p]);
        if (n > idx->n_nodes - next)
            return WEIR_ERANGE; /* the rules' node count was wrong */
        uint32_t depth = idx->nodes[p].depth + 1;
        if (n > 0 && depth > WEIR__MATCH_MAX_DEPTH)
            return WEIR_ERANGE;
        idx->nodes[p].first_child = next;
        idx->nodes[p].n_children = (uint32_t)n;
        for (size_t i = 0; i < n; i++) {
            const weir_rule *rule = child_at(&idx->nodes[p], i);
            const char *key = weir_rule_key(rule);
            const char *value = weir_rule_value(rule);
            mnode *c = &idx->nodes[next];
            size_t key_len = strlen(key), value_len = value ? strlen(value) : 0;
            if (key_len > UINT32_MAX || value_len > UINT32_MAX)
                return WEIR_ERANGE;
            *c = (mnode){.rule = rule,
                         .key = key,
                         .value = value,
                         .key_len = (uint32_t)key_len,
                         .value_len = (uint32_t)value_len,
                         .depth = depth,
                         .wildcard = value && weir_rule_is_wildcard(rule),
                         .share = (weir_rule_flags(rule) & WEIR_RULE_SHARE_THRESHOLD) != 0};
            if (c->wildcard)
                n_wild++;
            else if (value)
                n_exact++;
            if (depth > idx->max_depth)
                idx->max_depth = depth;
            next++;
        }
    }

    idx->wild = weir__calloc(idx->ctx, n_wild ? n_wild : 1, sizeof(*idx->wild));
    if (!idx->wild || !strtab_init(idx->ctx, &idx->values, n_exact, SALT_VALUE))
        return WEIR_ENOMEM;
    for (uint32_t p = 0; p < next; p++)
        link_children(idx, p);
    return WEIR_OK;
}

weir_status weir__match_index_new(weir_ctx *ctx, const weir_rules *rules, weir__match_index **out)
{
    if (!ctx || !rules || !out)
        return WEIR_EINVAL;
    size_t n_domains = weir_rules_domain_count(rules);
    size_t n_rules = weir_rules_rule_count(rules);
    if (n_domains > MAX_NODES || n_rules > MAX_NODES - n_domains)
        return WEIR_ERANGE;
    size_t n_nodes = n_domains + n_rules;

    weir__match_index *idx = weir__calloc(ctx, 1, sizeof(*idx));
    if (!idx)
        return WEIR_ENOMEM;
    idx->ctx = ctx;
    idx->n_nodes = (uint32_t)n_nodes;
    if (weir__random(&idx->seed, sizeof(idx->seed)) != WEIR_OK)
        idx->seed = FALLBACK_SEED; /* the seed only spreads slots; any value is correct */
    idx->nodes = weir__calloc(ctx, n_nodes ? n_nodes : 1, sizeof(*idx->nodes));
    /* every key entry holds at least one descriptor */
    idx->runs = weir__calloc(ctx, n_rules ? n_rules : 1, sizeof(*idx->runs));
    if (!idx->nodes || !idx->runs || !strtab_init(ctx, &idx->keys, n_rules, SALT_KEY) ||
        !strtab_init(ctx, &idx->domains, n_domains, SALT_DOMAIN)) {
        weir__match_index_free(idx);
        return WEIR_ENOMEM;
    }

    weir_status st = build(idx, rules);
    if (st != WEIR_OK) {
        weir__match_index_free(idx);
        return st;
    }
    *out = idx;
    return WEIR_OK;
}

void weir__match_index_free(weir__match_index *idx)
{
    if (!idx)
        return;
    weir_ctx *ctx = idx->ctx;
    weir__free(ctx, idx->nodes);
    weir__free(ctx, idx->runs);
    weir__free(ctx, idx->wild);
    strtab_free(ctx, &idx->keys);
    strtab_free(ctx, &idx->values);
    strtab_free(ctx, &idx->domains);
    weir__free(ctx, idx);
}

/* ------------------------------------------------------------ lookup */

/* The child of p matching one entry, or NO_NODE; *kind says how. */
static uint32_t match_level(const weir__match_index *idx, uint32_t p, const weir__entry *e,
                            weir__match_kind *kind)
{
    const mnode *pn = &idx->nodes[p];
    uint32_t k = strtab_find(idx, &idx->keys, p, pn->first_key, pn->n_keys, e->key, e->key_len);
    if (k == NO_NODE)
        return NO_NODE;
    const keyruns *kr = &idx->runs[k];
    const char *value = e->value ? e->value : "";
    if (kr->n_exact) {
        uint32_t x =
            strtab_find(idx, &idx->values, k, kr->first_exact, kr->n_exact, value, e->value_len);
        if (x != NO_NODE) {
            *kind = WEIR__MATCH_EXACT;
            return idx->values.ents[x].id;
        }
    }
    for (const wentry *w = idx->wild + kr->first_wild, *end = w + kr->n_wild; w < end; w++) {
        if (glob_stars(w->pattern, w->len, w->prefix, w->last_star, value, e->value_len)) {
            *kind = WEIR__MATCH_WILDCARD;
            return w->node;
        }
    }
    *kind = WEIR__MATCH_DEFAULT;
    return idx->keys.ents[k].id;
}

/* The public handle is the domain's entry. */
const weir__match_domain *weir__match_domain_find(const weir__match_index *idx, const char *domain,
                                                  size_t domain_len)
{
    if (!idx || !domain)
        return NULL;
    const strtab *t = &idx->domains;
    uint32_t d = strtab_find(idx, t, 0, 0, t->n, domain, domain_len);
    return d == NO_NODE ? NULL : (const weir__match_domain *)&t->ents[d];
}

void weir__match_walk(const weir__match_index *idx, const weir__match_domain *dom,
                      const weir__entry *entries, size_t n, weir__match_result *out)
{
    const strent *d = (const strent *)dom;
    out->domain_found = true;
    out->domain = idx->nodes[d->id].domain;
    out->rule = NULL;
    out->depth = 0;
    if (n > idx->max_depth)
        return; /* deeper than every rule path: no match */
    uint32_t cur = d->id;
    for (size_t i = 0; i < n; i++) {
        weir__match_kind kind = WEIR__MATCH_EXACT;
        uint32_t c = match_level(idx, cur, &entries[i], &kind);
        if (c == NO_NODE)
            return;
        const mnode *cn = &idx->nodes[c];
        out->levels[i] = (weir__match_level){
            .rule = cn->rule,
            .kind = kind,
            .value_in_key =
                kind == WEIR__MATCH_DEFAULT || (kind == WEIR__MATCH_WILDCARD && !cn->share),
        };
        out->depth = i + 1;
        cur = c;
    }
    out->rule = idx->nodes[cur].rule;
}

void weir__match_explain(const weir__match_index *idx, const weir__match_domain *dom,
                         const weir__entry *entries, size_t n, weir_match_trace *out)
{
    out->depth = 0;
    if (!dom) {
        out->miss = WEIR_MISS_DOMAIN;
        return;
    }
    /* match_level() with the misses told apart: no child at all, no child
     * with the key, or the key without a value that fits */
    uint32_t cur = ((const strent *)dom)->id;
    for (size_t i = 0; i < n; i++) {
        const mnode *pn = &idx->nodes[cur];
        const weir__entry *e = &entries[i];
        if (pn->n_children == 0) {
            out->miss = i ? WEIR_MISS_TOO_DEEP : WEIR_MISS_KEY;
            return;
        }
        if (strtab_find(idx, &idx->keys, cur, pn->first_key, pn->n_keys, e->key, e->key_len) ==
            NO_NODE) {
            out->miss = WEIR_MISS_KEY;
            return;
        }
        weir__match_kind kind = WEIR__MATCH_EXACT;
        uint32_t c = match_level(idx, cur, e, &kind);
        if (c == NO_NODE) {
            out->miss = WEIR_MISS_VALUE;
            return;
        }
        out->levels[i].rule = idx->nodes[c].rule;
        out->levels[i].how = kind == WEIR__MATCH_EXACT      ? WEIR_MATCH_EXACT
                             : kind == WEIR__MATCH_WILDCARD ? WEIR_MATCH_PATTERN
                                                            : WEIR_MATCH_DEFAULT;
        out->depth = i + 1;
        cur = c;
    }
    const weir_rule *rule = idx->nodes[cur].rule;
    if (weir_rule_limit_count(rule) > 0)
        out->miss = WEIR_MISS_NONE;
    else
        out->miss = weir_rule_child_count(rule) ? WEIR_MISS_SHALLOW : WEIR_MISS_NO_LIMIT;
}

weir_status weir__match(const weir__match_index *idx, const char *domain, size_t domain_len,
                        const weir__entry *entries, size_t n, weir__match_result *out)
{
    if (!idx || !domain || !entries || !out || n == 0 || n > WEIR__MATCH_MAX_ENTRIES)
        return WEIR_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if ((!entries[i].key && entries[i].key_len) || (!entries[i].value && entries[i].value_len))
            return WEIR_EINVAL;
    }
    const weir__match_domain *dom = weir__match_domain_find(idx, domain, domain_len);
    if (!dom) {
        *out = (weir__match_result){.domain_found = false};
        return WEIR_OK;
    }
    weir__match_walk(idx, dom, entries, n, out);
    return WEIR_OK;
}

/* ------------------------------------------------------------ counter keys */

#define KEY_FORMAT_VERSION 1u

typedef struct writer {
    char *buf;
    size_t cap;
    size_t len;
    bool ok;
} writer;

static void put_bytes(writer *w, const void *p, size_t n)
{
    if (!w->ok || n == 0)
        return;
    if (n > w->cap - w->len) {
        w->ok = false;
        return;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put_u8(writer *w, uint8_t v)
{
    put_bytes(w, &v, 1);
}

static void put_u32(writer *w, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    put_bytes(w, b, sizeof(b));
}

static void put_u64(writer *w, uint64_t v)
{
    put_u32(w, (uint32_t)(v >> 32));
    put_u32(w, (uint32_t)v);
}

static void put_str(writer *w, const char *s, size_t len)
{
    if (len > UINT32_MAX) {
        w->ok = false;
        return;
    }
    put_u32(w, (uint32_t)len);
    put_bytes(w, s, len);
}

static void put_cstr(writer *w, const char *s)
{
    put_str(w, s, s ? strlen(s) : 0);
}

size_t weir__counter_key(const weir__match_result *m, const weir__entry *entries,
                         size_t limit_index, char *buf, size_t cap)
{
    if (!m || !entries || (!buf && cap) || !m->rule || !m->domain || m->depth == 0 ||
        m->depth > WEIR__MATCH_MAX_DEPTH)
        return 0;
    const weir_rule_limit *l = weir_rule_limit_at(m->rule, limit_index);
    if (!l || limit_index > UINT32_MAX)
        return 0;

    writer w = {.buf = buf, .cap = cap, .len = 0, .ok = true};
    put_u8(&w, 'w');
    put_u8(&w, KEY_FORMAT_VERSION);
    put_cstr(&w, weir_rules_domain_name(m->domain));
    put_u32(&w, (uint32_t)m->depth);
    for (size_t i = 0; i < m->depth; i++) {
        const weir__match_level *lv = &m->levels[i];
        const weir__entry *e = &entries[i];
        put_cstr(&w, weir_rule_key(lv->rule));
        switch (lv->kind) {
        case WEIR__MATCH_EXACT:
            put_u8(&w, 'E');
            put_cstr(&w, weir_rule_value(lv->rule));
            break;
        case WEIR__MATCH_DEFAULT:
            put_u8(&w, 'D');
            put_str(&w, e->value, e->value_len);
            break;
        case WEIR__MATCH_WILDCARD:
            if (lv->value_in_key) {
                put_u8(&w, 'W');
                put_cstr(&w, weir_rule_value(lv->rule));
                put_str(&w, e->value, e->value_len);
            } else {
                put_u8(&w, 'S');
                put_cstr(&w, weir_rule_value(lv->rule));
            }
            break;
        default:
            return 0;
        }
    }
    put_u8(&w, 'L');
    put_u32(&w, (uint32_t)limit_index);
    put_u32(&w, (uint32_t)l->algorithm);
    put_u32(&w, l->requests_per_unit);
    put_u64(&w, (uint64_t)l->window_us);
    put_u64(&w, l->burst);
    put_u32(&w, l->sub_windows);
    if (l->warmup_us) {
        /* a warm-up's state is another shape: a counter of its own (and
         * the keys of limits without one as they always were) */
        put_u8(&w, 'H');
        put_u64(&w, (uint64_t)l->warmup_us);
        put_u32(&w, l->cold_factor);
    }
    put_u8(&w, l->unlimited ? 1 : 0);
    put_u8(&w, l->name ? 1 : 0);
    put_cstr(&w, l->name);
    return w.ok ? w.len : 0;
}
