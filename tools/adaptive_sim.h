/*
 * adaptive_sim.h - a simulated backend to drive an adaptive concurrency
 * controller (weir/adaptive.h): K parallel servers with a service time,
 * a FIFO queue in front of them, and clients offering more than K.
 *
 * A request is admitted while fewer than the controller's limit are in
 * flight (queued or served); it is served at once when a server is free,
 * else it waits in the queue, else (the queue full) it is dropped. So its
 * latency is the service time while in flight <= K and rises with the
 * queue past that knee. Each completed or dropped request is one
 * weir_adaptive_sample() with the number in flight when it was admitted.
 * A slow phase may take servers away and lengthen the service time for a
 * while, then give them back.
 *
 * Clients are a closed loop (`clients` of them, each sending its next
 * request `think_us` after a response or a rejection) or, with clients =
 * 0, an open loop (arrivals `rate_per_s` a second on average, exponential
 * gaps). Time moves in steps of `tick_us`; the randomness (service times,
 * arrivals) comes from `seed`: the same configuration and controller
 * options always give the same run.
 */
#ifndef WEIR_TOOLS_ADAPTIVE_SIM_H
#define WEIR_TOOLS_ADAPTIVE_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "weir/adaptive.h"
#include "weir/status.h"

#define WEIR_ADAPTIVE_SIM_MAX_SERVERS 65536u
#define WEIR_ADAPTIVE_SIM_MAX_QUEUE (1u << 20)
#define WEIR_ADAPTIVE_SIM_MAX_CLIENTS (1u << 20)
/** Most steps (duration / tick) and points (duration / record) in a run. */
#define WEIR_ADAPTIVE_SIM_MAX_TICKS 100000000u
#define WEIR_ADAPTIVE_SIM_MAX_POINTS 100000u

typedef struct weir_adaptive_sim_config {
    /** K, 1 .. WEIR_ADAPTIVE_SIM_MAX_SERVERS, and the mean service time
     *  (> 0); a service time is uniform in service +- jitter_pct percent
     *  (0 .. 90). */
    uint32_t servers;
    int64_t service_us;
    uint32_t jitter_pct;
    /** Requests that may wait for a server, 0 .. WEIR_ADAPTIVE_SIM_MAX_QUEUE;
     *  one more is dropped. */
    uint32_t queue_cap;
    /** Closed loop: clients (1 .. WEIR_ADAPTIVE_SIM_MAX_CLIENTS) and their
     *  think time (>= 0; the next step at the soonest); 0 clients: the
     *  open loop, rate_per_s > 0 arrivals a second. */
    uint32_t clients;
    int64_t think_us;
    uint64_t rate_per_s;
    /** The step, and the run's length (> 0, at most
     *  WEIR_ADAPTIVE_SIM_MAX_TICKS steps). */
    int64_t tick_us;
    int64_t duration_us;
    /** The slow phase, [slow_from_us, slow_until_us) (none when equal):
     *  slow_servers (1 .. servers) serve, each taking slow_service_us
     *  (0: service_us); a server past slow_servers finishes its request
     *  and takes no other. */
    int64_t slow_from_us;
    int64_t slow_until_us;
    uint32_t slow_servers;
    int64_t slow_service_us;
    /** A point every record_us (> 0, at most WEIR_ADAPTIVE_SIM_MAX_POINTS). */
    int64_t record_us;
    uint64_t seed;
} weir_adaptive_sim_config;

/** What happened in (t_us - record_us, t_us]. */
typedef struct weir_adaptive_sim_point {
    int64_t t_us;
    /** The limit and the knee (servers) at t_us, the most in flight in the
     *  interval. */
    uint32_t limit;
    uint32_t knee;
    uint32_t inflight;
    /** The mean latency of the requests completed in it (0: none). */
    int64_t rtt_us;
    uint64_t completed, rejected, dropped;
} weir_adaptive_sim_point;

typedef struct weir_adaptive_sim_result {
    /** malloc'd; free with weir_adaptive_sim_result_free(). */
    weir_adaptive_sim_point *points;
    size_t n_points;
    uint64_t completed, rejected, dropped;
} weir_adaptive_sim_result;

/**
 * weir_adaptive_sim_run() - run @cfg against @ctl (which it feeds; its
 * limit decides every admission).
 *
 * Returns WEIR_OK with @out filled; WEIR_EINVAL for NULL arguments or a
 * field out of range; WEIR_ENOMEM. On failure @out holds nothing.
 */
weir_status weir_adaptive_sim_run(const weir_adaptive_sim_config *cfg, weir_adaptive *ctl,
                                  weir_adaptive_sim_result *out);

/** Free what @r holds (not @r itself). NULL is a no-op. */
void weir_adaptive_sim_result_free(weir_adaptive_sim_result *r);

/** The mean limit, in thousandths, over the points with from_us <= t_us <
 *  until_us; 0 when there are none. */
uint64_t weir_adaptive_sim_mean_limit(const weir_adaptive_sim_result *r, int64_t from_us,
                                      int64_t until_us);

#endif /* WEIR_TOOLS_ADAPTIVE_SIM_H */
