/*
 * match.c - the match index and the descriptor lookup (see match.h).
 *
 * Layout. Every domain gets a root node and every descriptor a node, all
 * in one array. One open-addressing table (linear probing, at most half
 * full) holds every parent -> child edge: EXACT slots keyed by (parent,
 * key, value), DEFAULT slots by (parent, key), and WILD slots by (parent,
 * key) pointing at a run of the parent's pattern children with that key,
 * in file order, in a shared array. A second small table maps domain names
 * to roots. A slot matches only after a full length-aware byte comparison,
 * so hashes are only a shortcut and never decide a match.
 *
 * Invariant: after weir__match_index_new() returns, nothing is written
 * again until weir__match_index_free(); a lookup only reads and allocates
 * nothing.
 */
#include "engine/match.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

enum { SLOT_EMPTY = 0, SLOT_EXACT = 1, SLOT_WILD = 2, SLOT_DEFAULT = 3 };

enum { HAS_EXACT = 1u << SLOT_EXACT, HAS_WILD = 1u << SLOT_WILD, HAS_DEFAULT = 1u << SLOT_DEFAULT };

#define NO_NODE UINT32_MAX
#define MAX_NODES (UINT32_MAX / 4u)

/* Salts keeping the hashes of the three slot kinds and of domains apart. */
#define SALT_EXACT 0x6a09e667f3bcc908ull
#define SALT_WILD 0xbb67ae8584caa73bull
#define SALT_DEFAULT 0x3c6ef372fe94f82bull
#define SALT_DOMAIN 0xa54ff53a5f1d36f1ull
#define SALT_PARENT 0x9e3779b97f4a7c15ull
#define FALLBACK_SEED 0x510e527fade682d1ull

typedef struct mnode {
    const weir_rule *rule;           /* NULL for a domain's root */
    const weir_rules_domain *domain; /* roots only */
    const char *key;                 /* a root: the domain's name */
    const char *value;               /* NULL: none */
    uint32_t key_len;
    uint32_t value_len;
    uint32_t depth; /* 0 for a root */
    bool wildcard;
    bool share;
    uint8_t has; /* HAS_* of its children: lookups of absent kinds are skipped */
} mnode;

typedef struct mslot {
    uint64_t hash;
    uint32_t parent;
    uint32_t node;  /* EXACT/DEFAULT: the child; WILD: a child bearing the key */
    uint32_t first; /* WILD: the run's start in wild[] */
    uint32_t count; /* WILD: the run's length */
    uint32_t kind;  /* SLOT_* */
} mslot;

typedef struct dslot {
    uint64_t hash;
    uint32_t root; /* NO_NODE: empty */
} dslot;

struct weir__match_index {
    weir_ctx *ctx;
    uint64_t seed;
    mnode *nodes;
    uint32_t n_nodes;
    mslot *slots;
    size_t slot_mask;
    uint32_t *wild;
    uint32_t n_wild;
    dslot *dslots;
    size_t dslot_mask;
    uint32_t max_depth;
};

/* ------------------------------------------------------------ hashing */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The hash of (parent, key); the slot hashes derive from it so a lookup
 * reads the key once per level. */
static uint64_t key_hash(const weir__match_index *idx, uint32_t parent, const char *key,
                         size_t key_len)
{
    return XXH3_64bits_withSeed(key, key_len, idx->seed ^ mix64(parent + SALT_PARENT));
}

static uint64_t exact_hash(uint64_t kh, const char *value, size_t value_len)
{
    return XXH3_64bits_withSeed(value, value_len, kh ^ SALT_EXACT);
}

static uint64_t kind_hash(uint64_t kh, uint32_t kind)
{
    return mix64(kh ^ (kind == SLOT_WILD ? SALT_WILD : SALT_DEFAULT));
}

static uint64_t domain_hash(const weir__match_index *idx, const char *name, size_t len)
{
    return XXH3_64bits_withSeed(name, len, idx->seed ^ SALT_DOMAIN);
}

/* memcmp that accepts NULL pointers with a zero length. */
static bool bytes_eq(const char *a, size_t a_len, const char *b, size_t b_len)
{
    return a_len == b_len && (a_len == 0 || memcmp(a, b, a_len) == 0);
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

/*
 * The pattern is prefix*seg*seg*...*suffix. The prefix and the suffix are
 * anchored; each middle segment is taken at its leftmost place after the
 * previous one, which is always safe: a later place only leaves less room
 * for what follows. So no choice is ever revisited.
 */
bool weir__glob_match(const char *pattern, size_t pattern_len, const char *value, size_t value_len)
{
    const char *star = pattern_len ? memchr(pattern, '*', pattern_len) : NULL;
    if (!star)
        return bytes_eq(pattern, pattern_len, value, value_len);
    size_t prefix = (size_t)(star - pattern);
    size_t last_star = pattern_len - 1;
    while (pattern[last_star] != '*')
        last_star--;
    size_t suffix = pattern_len - last_star - 1;
    if (prefix + suffix > value_len)
        return false;
    if (!bytes_eq(pattern, prefix, value, prefix) ||
        !bytes_eq(pattern + last_star + 1, suffix, value + (value_len - suffix), suffix))
        return false;

    size_t pi = prefix + 1;
    const char *v = value + prefix;
    const char *v_end = value + (value_len - suffix);
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

/* ------------------------------------------------------------ tables */

static mslot *slot_find(const weir__match_index *idx, uint64_t hash, uint32_t parent, uint32_t kind,
                        const char *key, size_t key_len, const char *value, size_t value_len)
{
    for (size_t i = (size_t)hash & idx->slot_mask;; i = (i + 1) & idx->slot_mask) {
        mslot *s = &idx->slots[i];
        if (s->kind == SLOT_EMPTY)
            return NULL;
        if (s->hash != hash || s->parent != parent || s->kind != kind)
            continue;
        const mnode *c = &idx->nodes[s->node];
        if (!bytes_eq(c->key, c->key_len, key, key_len))
            continue;
        if (kind == SLOT_EXACT && !bytes_eq(c->value, c->value_len, value, value_len))
            continue;
        return s;
    }
}

/* An empty slot for hash (the table never fills: it has twice the room). */
static mslot *slot_claim(weir__match_index *idx, uint64_t hash)
{
    size_t i = (size_t)hash & idx->slot_mask;
    while (idx->slots[i].kind != SLOT_EMPTY)
        i = (i + 1) & idx->slot_mask;
    return &idx->slots[i];
}

/* Insert an EXACT or DEFAULT edge unless one with the same identity is
 * there already (the first in file order wins). */
static void edge_add(weir__match_index *idx, uint32_t parent, uint32_t child, uint32_t kind)
{
    const mnode *c = &idx->nodes[child];
    uint64_t kh = key_hash(idx, parent, c->key, c->key_len);
    uint64_t h = kind == SLOT_EXACT ? exact_hash(kh, c->value, c->value_len) : kind_hash(kh, kind);
    if (slot_find(idx, h, parent, kind, c->key, c->key_len, c->value, c->value_len))
        return;
    mslot *s = slot_claim(idx, h);
    *s = (mslot){.hash = h, .parent = parent, .node = child, .kind = kind};
}

static const dslot *domain_find(const weir__match_index *idx, const char *name, size_t len)
{
    uint64_t h = domain_hash(idx, name, len);
    for (size_t i = (size_t)h & idx->dslot_mask;; i = (i + 1) & idx->dslot_mask) {
        const dslot *d = &idx->dslots[i];
        if (d->root == NO_NODE)
            return NULL;
        const mnode *r = &idx->nodes[d->root];
        if (d->hash == h && bytes_eq(r->key, r->key_len, name, len))
            return d;
    }
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 8;
    while (p < n)
        p <<= 1;
    return p;
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

/* Group the pattern children of p (ids first..first+n-1, in file order)
 * by key into runs of wild[], keeping file order inside each run. */
static void group_patterns(weir__match_index *idx, uint32_t p, uint32_t first, uint32_t n)
{
    /* Pass 1: one WILD slot per key, counting its patterns. */
    for (uint32_t c = first; c < first + n; c++) {
        const mnode *cn = &idx->nodes[c];
        if (!cn->wildcard)
            continue;
        uint64_t h = kind_hash(key_hash(idx, p, cn->key, cn->key_len), SLOT_WILD);
        mslot *s = slot_find(idx, h, p, SLOT_WILD, cn->key, cn->key_len, NULL, 0);
        if (!s) {
            s = slot_claim(idx, h);
            *s = (mslot){.hash = h, .parent = p, .node = c, .first = NO_NODE, .kind = SLOT_WILD};
        }
        s->count++;
    }
    /* Pass 2: a key's run starts where its first pattern is met; count is
     * rebuilt as the run fills. */
    for (uint32_t c = first; c < first + n; c++) {
        const mnode *cn = &idx->nodes[c];
        if (!cn->wildcard)
            continue;
        uint64_t h = kind_hash(key_hash(idx, p, cn->key, cn->key_len), SLOT_WILD);
        mslot *s = slot_find(idx, h, p, SLOT_WILD, cn->key, cn->key_len, NULL, 0);
        if (s->first == NO_NODE) {
            s->first = idx->n_wild;
            idx->n_wild += s->count;
            s->count = 0;
        }
        idx->wild[s->first + s->count++] = c;
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
        uint64_t h = domain_hash(idx, r->key, r->key_len);
        if (!domain_find(idx, r->key, r->key_len)) {
            size_t i = (size_t)h & idx->dslot_mask;
            while (idx->dslots[i].root != NO_NODE)
                i = (i + 1) & idx->dslot_mask;
            idx->dslots[i] = (dslot){.hash = h, .root = next};
        }
        next++;
    }

    /* Breadth first: the array itself is the queue, so a node's children
     * get consecutive ids in file order. */
    for (uint32_t p = 0; p < next; p++) {
        size_t n = child_count(&idx->nodes[p]);
        if (n > idx->n_nodes - next)
            return WEIR_ERANGE; /* the rules' node count was wrong */
        uint32_t depth = idx->nodes[p].depth + 1;
        if (n > 0 && depth > WEIR__MATCH_MAX_DEPTH)
            return WEIR_ERANGE;
        uint32_t first = next;
        uint32_t n_pattern = 0;
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
            uint32_t kind = c->wildcard ? SLOT_WILD : value ? SLOT_EXACT : SLOT_DEFAULT;
            idx->nodes[p].has = (uint8_t)(idx->nodes[p].has | (1u << kind));
            if (c->wildcard)
                n_pattern++;
            else
                edge_add(idx, p, next, kind);
            if (depth > idx->max_depth)
                idx->max_depth = depth;
            next++;
        }
        if (n_pattern)
            group_patterns(idx, p, first, (uint32_t)n);
    }
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
    size_t n_slots = pow2_at_least(2 * n_nodes);
    size_t n_dslots = pow2_at_least(2 * n_domains);
    idx->slot_mask = n_slots - 1;
    idx->dslot_mask = n_dslots - 1;
    idx->nodes = weir__calloc(ctx, n_nodes ? n_nodes : 1, sizeof(*idx->nodes));
    idx->slots = weir__calloc(ctx, n_slots, sizeof(*idx->slots));
    idx->wild = weir__calloc(ctx, n_nodes ? n_nodes : 1, sizeof(*idx->wild));
    idx->dslots = weir__calloc(ctx, n_dslots, sizeof(*idx->dslots));
    if (!idx->nodes || !idx->slots || !idx->wild || !idx->dslots) {
        weir__match_index_free(idx);
        return WEIR_ENOMEM;
    }
    for (size_t i = 0; i < n_dslots; i++)
        idx->dslots[i].root = NO_NODE;

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
    weir__free(ctx, idx->slots);
    weir__free(ctx, idx->wild);
    weir__free(ctx, idx->dslots);
    weir__free(ctx, idx);
}

/* ------------------------------------------------------------ lookup */

/* The child of p matching one entry, or NO_NODE; *kind says how. */
static uint32_t match_level(const weir__match_index *idx, uint32_t p, const weir__entry *e,
                            weir__match_kind *kind)
{
    unsigned has = idx->nodes[p].has;
    uint64_t kh = key_hash(idx, p, e->key, e->key_len);
    const mslot *s = NULL;
    if (has & HAS_EXACT)
        s = slot_find(idx, exact_hash(kh, e->value, e->value_len), p, SLOT_EXACT, e->key,
                      e->key_len, e->value, e->value_len);
    if (s) {
        *kind = WEIR__MATCH_EXACT;
        return s->node;
    }
    if (has & HAS_WILD)
        s = slot_find(idx, kind_hash(kh, SLOT_WILD), p, SLOT_WILD, e->key, e->key_len, NULL, 0);
    if (s) {
        for (uint32_t i = 0; i < s->count; i++) {
            uint32_t c = idx->wild[s->first + i];
            const mnode *cn = &idx->nodes[c];
            if (weir__glob_match(cn->value, cn->value_len, e->value, e->value_len)) {
                *kind = WEIR__MATCH_WILDCARD;
                return c;
            }
        }
    }
    s = NULL;
    if (has & HAS_DEFAULT)
        s = slot_find(idx, kind_hash(kh, SLOT_DEFAULT), p, SLOT_DEFAULT, e->key, e->key_len, NULL,
                      0);
    if (s) {
        *kind = WEIR__MATCH_DEFAULT;
        return s->node;
    }
    return NO_NODE;
}

/* The public handle is the domain's slot. */
const weir__match_domain *weir__match_domain_find(const weir__match_index *idx, const char *domain,
                                                  size_t domain_len)
{
    if (!idx || !domain)
        return NULL;
    return (const weir__match_domain *)domain_find(idx, domain, domain_len);
}

weir_status weir__match_from(const weir__match_index *idx, const weir__match_domain *dom,
                             const weir__entry *entries, size_t n, weir__match_result *out)
{
    if (!idx || !entries || !out || n == 0 || n > WEIR__MATCH_MAX_ENTRIES)
        return WEIR_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if ((!entries[i].key && entries[i].key_len) || (!entries[i].value && entries[i].value_len))
            return WEIR_EINVAL;
    }

    out->domain_found = false;
    out->domain = NULL;
    out->rule = NULL;
    out->depth = 0;
    const dslot *d = (const dslot *)dom;
    if (!d)
        return WEIR_OK;
    out->domain_found = true;
    out->domain = idx->nodes[d->root].domain;
    if (n > idx->max_depth)
        return WEIR_OK; /* deeper than every rule path: no match */

    uint32_t cur = d->root;
    for (size_t i = 0; i < n; i++) {
        weir__match_kind kind = WEIR__MATCH_EXACT;
        uint32_t c = match_level(idx, cur, &entries[i], &kind);
        if (c == NO_NODE)
            return WEIR_OK;
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
    return WEIR_OK;
}

weir_status weir__match(const weir__match_index *idx, const char *domain, size_t domain_len,
                        const weir__entry *entries, size_t n, weir__match_result *out)
{
    if (!idx || !domain)
        return WEIR_EINVAL;
    return weir__match_from(idx, weir__match_domain_find(idx, domain, domain_len), entries, n, out);
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
    put_u8(&w, l->unlimited ? 1 : 0);
    put_u8(&w, l->name ? 1 : 0);
    put_cstr(&w, l->name);
    return w.ok ? w.len : 0;
}
