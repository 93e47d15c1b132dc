/*
 * bench_mix.c - the request mix of the load generators: templates parsed
 * from flags or a file, `{n}` substitution, and the gRPC encoding of each
 * request (ahead of time into one table, or per request).
 *
 * A template owns one copy of its text; its entries point into it. The
 * descriptor list is parsed twice: once to count and check (so errors
 * come before any allocation), once to fill.
 */
#include "bench_mix.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/rls.h"

/* A mark ("{n}", 3 bytes) becomes at most 20 digits. */
#define MARK_LEN 3u
#define MARK_GROWTH 17u

void weir_bench_mix_init(weir_bench_mix *m)
{
    memset(m, 0, sizeof *m);
}

static void template_free(weir_bench_template *t)
{
    free(t->text);
    free(t->descs);
}

void weir_bench_mix_free(weir_bench_mix *m)
{
    for (size_t i = 0; i < m->n; i++)
        template_free(&m->t[i]);
    free(m->t);
    free(m->table);
    free(m->off);
    free(m->first);
    memset(m, 0, sizeof *m);
}

/* Fill @err; returns false, for `return fail(...)`. */
static bool fail(weir_bench_mix_error *err, uint64_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(weir_bench_mix_error *err, uint64_t line, const char *fmt, ...)
{
    err->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->reason, sizeof err->reason, fmt, ap);
    va_end(ap);
    return false;
}

static uint32_t count_marks(const char *s, size_t len)
{
    uint32_t n = 0;
    for (size_t i = 0; i + MARK_LEN <= len; i++)
        if (memcmp(s + i, WEIR_BENCH_MARK, MARK_LEN) == 0) {
            n++;
            i += MARK_LEN - 1;
        }
    return n;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Printable enough to go into a descriptor: no spaces, no control bytes. */
static bool bad_byte(char c)
{
    unsigned char u = (unsigned char)c;
    return u <= 0x20 || u == 0x7f;
}

/* Fit @s (@len bytes) into an error message: at most 40 bytes. */
static int show_len(size_t len)
{
    return len > 40 ? 40 : (int)len;
}

/*
 * Walk the descriptor list @s (@len bytes). With @t NULL: check it and
 * count into *n_descs and *n_entries. With @t: fill t->descs (allocated to
 * the counts) and the entries after them.
 */
static bool walk_descriptors(const char *s, size_t len, weir_bench_template *t, size_t *n_descs,
                             size_t *n_entries, weir_bench_mix_error *err, uint64_t line)
{
    size_t nd = 0, ne = 0;
    weir_bench_entry *entries = t ? (weir_bench_entry *)(t->descs + t->n_descs) : NULL;
    size_t i = 0;
    for (;;) {
        /* one descriptor: entries up to ';' or the end */
        size_t in_desc = 0;
        if (i == len || s[i] == ';')
            return fail(err, line, "empty descriptor (';' separates descriptors, ',' entries)");
        if (nd == WEIR_BENCH_MAX_DESCRIPTORS)
            return fail(err, line, "more than %u descriptors in one request",
                        WEIR_BENCH_MAX_DESCRIPTORS);
        for (;;) {
            size_t e_start = i;
            while (i < len && s[i] != ',' && s[i] != ';')
                i++;
            const char *e = s + e_start;
            size_t e_len = i - e_start;
            const char *eq = memchr(e, '=', e_len);
            if (e_len == 0)
                return fail(err, line, "empty entry (write key=value)");
            if (!eq)
                return fail(err, line, "'%.*s' has no '=' (write key=value)", show_len(e_len), e);
            if (eq == e)
                return fail(err, line, "'%.*s' has an empty key", show_len(e_len), e);
            for (size_t k = 0; k < e_len; k++)
                if (bad_byte(e[k]))
                    return fail(err, line,
                                "'%.*s' holds a space or a control character; keys and "
                                "values may not",
                                show_len(e_len), e);
            if (in_desc == WEIR_BENCH_MAX_ENTRIES)
                return fail(err, line, "more than %u entries in one descriptor",
                            WEIR_BENCH_MAX_ENTRIES);
            if (t) {
                weir_bench_entry *x = &entries[ne];
                x->key = e;
                x->key_len = (size_t)(eq - e);
                x->value = eq + 1;
                x->value_len = e_len - x->key_len - 1;
                x->marks = count_marks(x->value, x->value_len);
                if (x->marks)
                    t->has_mark = true;
                t->expanded_max += x->value_len + (size_t)x->marks * MARK_GROWTH;
            }
            in_desc++;
            ne++;
            if (i < len && s[i] == ',') {
                i++;
                continue;
            }
            break;
        }
        if (t) {
            t->descs[nd].entries = entries + ne - in_desc;
            t->descs[nd].n_entries = in_desc;
        }
        nd++;
        if (i == len)
            break;
        i++; /* the ';' */
    }
    *n_descs = nd;
    *n_entries = ne;
    return true;
}

/* Add a template for @domain and the descriptor list @list. */
static bool add_template(weir_bench_mix *m, const char *domain, size_t domain_len, const char *list,
                         size_t list_len, weir_bench_mix_error *err, uint64_t line)
{
    size_t nd = 0, ne = 0;
    if (!walk_descriptors(list, list_len, NULL, &nd, &ne, err, line))
        return false;
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        weir_bench_template *nt = realloc(m->t, cap * sizeof *nt);
        if (!nt)
            return fail(err, line, "out of memory");
        m->t = nt;
        m->cap = cap;
    }
    weir_bench_template t;
    memset(&t, 0, sizeof t);
    t.text = malloc(domain_len + list_len + 1);
    t.descs = malloc(nd * sizeof(weir_bench_desc) + ne * sizeof(weir_bench_entry));
    if (!t.text || !t.descs) {
        template_free(&t);
        return fail(err, line, "out of memory");
    }
    memcpy(t.text, domain, domain_len);
    memcpy(t.text + domain_len, list, list_len);
    t.text[domain_len + list_len] = '\0';
    t.domain = t.text;
    t.domain_len = domain_len;
    t.n_descs = nd;
    t.n_entries = ne;
    walk_descriptors(t.text + domain_len, list_len, &t, &nd, &ne, err, line);
    m->t[m->n++] = t;
    if (ne > m->max_entries)
        m->max_entries = ne;
    if (nd > m->max_descs)
        m->max_descs = nd;
    if (t.expanded_max > m->max_expanded)
        m->max_expanded = t.expanded_max;
    if (t.has_mark)
        m->has_mark = true;
    return true;
}

bool weir_bench_mix_add_flags(weir_bench_mix *m, const char *domain, const char *const *descs,
                              size_t n_descs, weir_bench_mix_error *err)
{
    size_t domain_len = strlen(domain);
    if (domain_len == 0)
        return fail(err, 0, "--domain is empty");
    if (domain_len > WEIR_BENCH_MAX_LINE)
        return fail(err, 0, "--domain is longer than %u bytes", WEIR_BENCH_MAX_LINE);
    if (n_descs == 0)
        return fail(err, 0, "no --descriptor");
    if (n_descs > WEIR_BENCH_MAX_DESCRIPTORS)
        return fail(err, 0, "more than %u --descriptor flags", WEIR_BENCH_MAX_DESCRIPTORS);
    /* the descriptors joined with ';', each checked on its own first */
    size_t total = 0;
    for (size_t i = 0; i < n_descs; i++) {
        size_t len = strlen(descs[i]);
        if (len > WEIR_BENCH_MAX_LINE)
            return fail(err, 0, "--descriptor is longer than %u bytes", WEIR_BENCH_MAX_LINE);
        if (memchr(descs[i], ';', len))
            return fail(err, 0,
                        "--descriptor '%.*s': one descriptor per flag (give --descriptor "
                        "again for another)",
                        show_len(len), descs[i]);
        size_t nd, ne;
        weir_bench_mix_error sub;
        if (!walk_descriptors(descs[i], len, NULL, &nd, &ne, &sub, 0))
            return fail(err, 0, "--descriptor '%.*s': %s", show_len(len), descs[i], sub.reason);
        total += len + 1;
    }
    char *joined = malloc(total);
    if (!joined)
        return fail(err, 0, "out of memory");
    size_t at = 0;
    for (size_t i = 0; i < n_descs; i++) {
        size_t len = strlen(descs[i]);
        if (i)
            joined[at++] = ';';
        memcpy(joined + at, descs[i], len);
        at += len;
    }
    bool ok = add_template(m, domain, domain_len, joined, at, err, 0);
    free(joined);
    return ok;
}

bool weir_bench_mix_parse_file(weir_bench_mix *m, const char *data, size_t len,
                               weir_bench_mix_error *err)
{
    uint64_t line = 0;
    size_t i = 0;
    while (i < len) {
        line++;
        const char *nl = memchr(data + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - data) : len;
        const char *s = data + i;
        size_t n = end - i;
        i = nl ? end + 1 : len;
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (n > WEIR_BENCH_MAX_LINE)
            return fail(err, line, "longer than %u bytes", WEIR_BENCH_MAX_LINE);
        if (memchr(s, '\0', n))
            return fail(err, line, "a NUL byte");
        while (n > 0 && is_blank(*s)) {
            s++;
            n--;
        }
        while (n > 0 && is_blank(s[n - 1]))
            n--;
        if (n == 0 || s[0] == '#')
            continue;
        size_t d = 0;
        while (d < n && !is_blank(s[d]))
            d++;
        for (size_t k = 0; k < d; k++)
            if (bad_byte(s[k]))
                return fail(err, line, "a control character in the domain");
        if (memchr(s, '=', d))
            return fail(err, line, "no domain: a line is 'DOMAIN key=value[,key=value][;...]'");
        size_t rest = d;
        while (rest < n && is_blank(s[rest]))
            rest++;
        if (rest == n)
            return fail(err, line, "domain '%.*s' has no descriptors after it", show_len(d), s);
        if (m->n == WEIR_BENCH_MAX_TEMPLATES)
            return fail(err, line, "more than %u requests", WEIR_BENCH_MAX_TEMPLATES);
        if (!add_template(m, s, d, s + rest, n - rest, err, line))
            return false;
    }
    if (m->n == 0)
        return fail(err, line, "no requests in the file (only blank lines and comments)");
    return true;
}

uint64_t weir_bench_mix_distinct(const weir_bench_mix *m, uint64_t keys)
{
    uint64_t n = 0;
    for (size_t i = 0; i < m->n; i++) {
        uint64_t add = m->t[i].has_mark ? keys : 1;
        if (n > UINT64_MAX - add)
            return UINT64_MAX;
        n += add;
    }
    return n;
}

size_t weir_bench_expand(const char *value, size_t len, uint64_t n, char *out)
{
    char digits[20];
    size_t nd = 0;
    do {
        digits[sizeof digits - 1 - nd++] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    const char *num = digits + sizeof digits - nd;
    size_t o = 0, i = 0;
    while (i < len) {
        if (i + MARK_LEN <= len && memcmp(value + i, WEIR_BENCH_MARK, MARK_LEN) == 0) {
            memcpy(out + o, num, nd);
            o += nd;
            i += MARK_LEN;
        } else {
            out[o++] = value[i++];
        }
    }
    return o;
}

bool weir_bench_scratch_init(weir_bench_scratch *s, const weir_bench_mix *m)
{
    memset(s, 0, sizeof *s);
    s->entries = malloc((m->max_entries ? m->max_entries : 1) * sizeof *s->entries);
    s->descs = malloc((m->max_descs ? m->max_descs : 1) * sizeof *s->descs);
    s->text = malloc(m->max_expanded ? m->max_expanded : 1);
    weir_buf_init(&s->msg, (size_t)1 << 24);
    if (!s->entries || !s->descs || !s->text) {
        weir_bench_scratch_free(s);
        return false;
    }
    return true;
}

void weir_bench_scratch_free(weir_bench_scratch *s)
{
    free(s->entries);
    free(s->descs);
    free(s->text);
    weir_buf_free(&s->msg);
    memset(s, 0, sizeof *s);
}

bool weir_bench_encode(const weir_bench_template *t, uint64_t n, uint64_t hits,
                       weir_bench_scratch *s, weir_buf *out)
{
    char *p = s->text;
    size_t k = 0;
    for (size_t i = 0; i < t->n_descs; i++) {
        const weir_bench_desc *d = &t->descs[i];
        weir_descriptor *wd = &s->descs[i];
        memset(wd, 0, sizeof *wd);
        wd->entries = &s->entries[k];
        wd->n_entries = d->n_entries;
        for (size_t j = 0; j < d->n_entries; j++, k++) {
            const weir_bench_entry *e = &d->entries[j];
            weir_entry *we = &s->entries[k];
            we->key = e->key;
            we->key_len = e->key_len;
            if (e->marks) {
                we->value = p;
                we->value_len = weir_bench_expand(e->value, e->value_len, n, p);
                p += we->value_len;
            } else {
                we->value = e->value;
                we->value_len = e->value_len;
            }
        }
    }
    weir_request req = {
        .domain = t->domain,
        .domain_len = t->domain_len,
        .descriptors = s->descs,
        .n_descriptors = t->n_descs,
        .hits = hits,
    };
    weir_buf_clear(&s->msg);
    weir_rls_encode_request(&s->msg, &req);
    if (!weir_buf_ok(&s->msg))
        return false;
    weir_grpc_frame_prefix(out, s->msg.len);
    weir_buf_put(out, s->msg.p, s->msg.len);
    return weir_buf_ok(out);
}

bool weir_bench_mix_encode_all(weir_bench_mix *m, uint64_t keys, uint64_t hits)
{
    uint64_t distinct = weir_bench_mix_distinct(m, keys);
    if (distinct > WEIR_BENCH_MAX_TABLE)
        return false;
    weir_bench_scratch s;
    if (!weir_bench_scratch_init(&s, m))
        return false;
    size_t *off = malloc(((size_t)distinct + 1) * sizeof *off);
    size_t *first = malloc(m->n * sizeof *first);
    weir_buf table;
    weir_buf_init(&table, WEIR_BENCH_MAX_TABLE_BYTES);
    bool ok = off && first;
    size_t r = 0;
    for (size_t i = 0; ok && i < m->n; i++) {
        first[i] = r;
        uint64_t count = m->t[i].has_mark ? keys : 1;
        for (uint64_t n = 0; ok && n < count; n++) {
            off[r++] = table.len;
            ok = weir_bench_encode(&m->t[i], n, hits, &s, &table);
        }
    }
    weir_bench_scratch_free(&s);
    if (!ok) {
        free(off);
        free(first);
        weir_buf_free(&table);
        return false;
    }
    off[r] = table.len;
    free(m->table);
    free(m->off);
    free(m->first);
    m->table = (uint8_t *)table.p;
    m->off = off;
    m->first = first;
    m->n_encoded = r;
    return true;
}
