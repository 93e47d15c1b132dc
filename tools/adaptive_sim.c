/*
 * adaptive_sim.c - the simulated backend of adaptive_sim.h.
 *
 * Each step, in this order: requests whose service is done complete
 * (a sample each), free servers take queued requests, then the clients
 * due send theirs (admitted against the controller's limit of that
 * moment). Servers are interchangeable, so they are a count: the requests
 * in service sit in a min-heap by the time they finish, and a new one
 * starts while fewer than the servers of the moment are busy (so when the
 * slow phase takes servers away, the busy ones finish and are not
 * replaced). Invariant: in flight = in service + queued, and a closed
 * loop's clients are each either in flight or in the wake-up queue, whose
 * times never decrease (every push is now + think, or now + a step for a
 * rejected client, so its front is always the soonest).
 */
#include "adaptive_sim.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bench_mix.h"

typedef struct request {
    int64_t start_us;
    uint32_t inflight; /* in flight when it was admitted, itself included */
} request;

typedef struct job {
    int64_t finish_us;
    request rq;
} job;

typedef struct run {
    const weir_adaptive_sim_config *c;
    weir_adaptive *ctl;
    uint64_t rng;
    job *heap; /* in service, the soonest to finish first */
    uint32_t busy;
    request *queue; /* a ring of queue_cap */
    uint32_t q_head, q_len, q_cap;
    int64_t *wake; /* closed loop: a ring of `clients` wake-up times */
    uint32_t w_head, w_len;
    uint32_t inflight, active;
    int64_t service_us;
    /* the interval being recorded */
    weir_adaptive_sim_point cur;
    uint64_t rtt_sum_us, rtt_n;
    weir_adaptive_sim_result *out;
} run;

static bool check(const weir_adaptive_sim_config *c)
{
    if (c->servers < 1 || c->servers > WEIR_ADAPTIVE_SIM_MAX_SERVERS || c->service_us <= 0 ||
        c->jitter_pct > 90 || c->queue_cap > WEIR_ADAPTIVE_SIM_MAX_QUEUE ||
        c->clients > WEIR_ADAPTIVE_SIM_MAX_CLIENTS || c->think_us < 0 ||
        (c->clients == 0 && (c->rate_per_s == 0 || c->rate_per_s > 1000000000u)) ||
        c->tick_us <= 0 || c->duration_us <= 0 || c->record_us <= 0 ||
        c->duration_us / c->tick_us > WEIR_ADAPTIVE_SIM_MAX_TICKS ||
        c->duration_us / c->record_us > WEIR_ADAPTIVE_SIM_MAX_POINTS ||
        c->slow_until_us < c->slow_from_us || c->slow_service_us < 0)
        return false;
    if (c->slow_until_us > c->slow_from_us && (c->slow_servers < 1 || c->slow_servers > c->servers))
        return false;
    /* a service time (with its jitter) plus a time stays far from overflow */
    return c->service_us <= INT64_MAX / 4 && c->slow_service_us <= INT64_MAX / 4 &&
           c->think_us <= INT64_MAX / 4 && c->duration_us <= INT64_MAX / 4;
}

static int64_t service_time(run *r)
{
    int64_t s = r->service_us;
    int64_t j = s / 100 * r->c->jitter_pct + s % 100 * r->c->jitter_pct / 100;
    if (j == 0)
        return s;
    return s - j + (int64_t)weir_bench_below(&r->rng, (uint64_t)(2 * j + 1));
}

static void wake_at(run *r, int64_t t_us)
{
    r->wake[(r->w_head + r->w_len) % r->c->clients] = t_us;
    r->w_len++;
}

static void start(run *r, request rq, int64_t now_us)
{
    int64_t svc = service_time(r);
    job j = {now_us + (svc > 0 ? svc : 1), rq};
    uint32_t i = r->busy++;
    while (i > 0 && r->heap[(i - 1) / 2].finish_us > j.finish_us) {
        r->heap[i] = r->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    r->heap[i] = j;
}

static job finish(run *r)
{
    job top = r->heap[0], last = r->heap[--r->busy];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= r->busy)
            break;
        if (c + 1 < r->busy && r->heap[c + 1].finish_us < r->heap[c].finish_us)
            c++;
        if (r->heap[c].finish_us >= last.finish_us)
            break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (r->busy)
        r->heap[i] = last;
    return top;
}

/* A request leaves: a sample, and its client (closed loop) thinks. */
static void done(run *r, const request *rq, int64_t now_us, int64_t rtt_us, bool dropped)
{
    weir_adaptive_sample(r->ctl, now_us, rtt_us, rq->inflight, dropped);
    r->inflight--;
    if (dropped) {
        r->cur.dropped++;
    } else {
        r->cur.completed++;
        r->rtt_sum_us += (uint64_t)rtt_us;
        r->rtt_n++;
    }
    if (r->c->clients) {
        int64_t think = r->c->think_us;
        if (dropped && think < r->c->tick_us)
            think = r->c->tick_us;
        wake_at(r, now_us + think);
    }
}

static void attempt(run *r, int64_t now_us)
{
    if (r->inflight >= weir_adaptive_limit(r->ctl)) {
        r->cur.rejected++;
        if (r->c->clients)
            wake_at(r, now_us + (r->c->think_us > r->c->tick_us ? r->c->think_us : r->c->tick_us));
        return;
    }
    r->inflight++;
    if (r->inflight > r->cur.inflight)
        r->cur.inflight = r->inflight;
    request rq = {now_us, r->inflight};
    if (r->q_len == 0 && r->busy < r->active) {
        start(r, rq, now_us);
        return;
    }
    if (r->q_len < r->q_cap) {
        r->queue[(r->q_head + r->q_len) % r->q_cap] = rq;
        r->q_len++;
        return;
    }
    done(r, &rq, now_us, 0, true);
}

static void step(run *r, int64_t now_us, int64_t *next_arrival_us)
{
    const weir_adaptive_sim_config *c = r->c;
    bool slow = now_us >= c->slow_from_us && now_us < c->slow_until_us;
    r->active = slow ? c->slow_servers : c->servers;
    r->service_us = slow && c->slow_service_us ? c->slow_service_us : c->service_us;

    while (r->busy && r->heap[0].finish_us <= now_us) {
        job j = finish(r);
        done(r, &j.rq, now_us, j.finish_us - j.rq.start_us, false);
    }
    while (r->busy < r->active && r->q_len) {
        start(r, r->queue[r->q_head], now_us);
        r->q_head = (r->q_head + 1) % r->q_cap;
        r->q_len--;
    }
    if (c->clients) {
        while (r->w_len && r->wake[r->w_head] <= now_us) {
            r->w_head = (r->w_head + 1) % c->clients;
            r->w_len--;
            attempt(r, now_us);
        }
    } else {
        while (*next_arrival_us <= now_us) {
            attempt(r, now_us);
            /* exponential gaps: 1 - u is in (0, 1] */
            double u = (double)(weir_bench_rand(&r->rng) >> 11) / 9007199254740992.0;
            double gap = -log(1.0 - u) * 1e6 / (double)c->rate_per_s;
            *next_arrival_us += gap < 1.0 ? 1 : gap > 1e12 ? (int64_t)1e12 : (int64_t)gap;
        }
    }
}

static void record(run *r, int64_t now_us)
{
    weir_adaptive_sim_point *p = &r->out->points[r->out->n_points++];
    *p = r->cur;
    p->t_us = now_us;
    p->limit = weir_adaptive_limit(r->ctl);
    p->knee = r->active;
    p->rtt_us = r->rtt_n ? (int64_t)(r->rtt_sum_us / r->rtt_n) : 0;
    r->out->completed += p->completed;
    r->out->rejected += p->rejected;
    r->out->dropped += p->dropped;
    memset(&r->cur, 0, sizeof(r->cur));
    r->cur.inflight = r->inflight;
    r->rtt_sum_us = r->rtt_n = 0;
}

weir_status weir_adaptive_sim_run(const weir_adaptive_sim_config *cfg, weir_adaptive *ctl,
                                  weir_adaptive_sim_result *out)
{
    if (!cfg || !ctl || !out || !check(cfg))
        return WEIR_EINVAL;
    memset(out, 0, sizeof(*out));
    run r = {.c = cfg, .ctl = ctl, .rng = cfg->seed, .out = out};
    r.q_cap = cfg->queue_cap ? cfg->queue_cap : 1;
    size_t n_points = (size_t)(cfg->duration_us / cfg->record_us) + 1;
    r.heap = calloc(cfg->servers, sizeof(*r.heap));
    r.queue = calloc(r.q_cap, sizeof(*r.queue));
    r.wake = calloc(cfg->clients ? cfg->clients : 1, sizeof(*r.wake));
    out->points = calloc(n_points, sizeof(*out->points));
    if (!r.heap || !r.queue || !r.wake || !out->points) {
        free(r.heap);
        free(r.queue);
        free(r.wake);
        free(out->points);
        memset(out, 0, sizeof(*out));
        return WEIR_ENOMEM;
    }
    if (cfg->queue_cap == 0)
        r.q_cap = 0;        /* the ring's one slot is never used */
    r.w_len = cfg->clients; /* every client sends at 0 */
    int64_t next_arrival = 0, next_record = cfg->record_us;
    for (int64_t t = 0; t <= cfg->duration_us; t += cfg->tick_us) {
        step(&r, t, &next_arrival);
        if (t >= next_record && out->n_points < n_points) {
            record(&r, t);
            next_record += cfg->record_us;
        }
    }
    free(r.heap);
    free(r.queue);
    free(r.wake);
    return WEIR_OK;
}

void weir_adaptive_sim_result_free(weir_adaptive_sim_result *r)
{
    if (!r)
        return;
    free(r->points);
    memset(r, 0, sizeof(*r));
}

uint64_t weir_adaptive_sim_mean_limit(const weir_adaptive_sim_result *r, int64_t from_us,
                                      int64_t until_us)
{
    if (!r)
        return 0;
    uint64_t sum = 0, n = 0;
    for (size_t i = 0; i < r->n_points; i++)
        if (r->points[i].t_us >= from_us && r->points[i].t_us < until_us) {
            sum += r->points[i].limit;
            n++;
        }
    return n ? (sum * 1000 + n / 2) / n : 0;
}
