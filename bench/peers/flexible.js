// flexible.js - the Node.js peer of weir-bench-peer (bench/peers/weir.c):
// rate-limiter-flexible on the same workload.
//
//   node flexible.js memory KEYS OPS REPS
//   node flexible.js redis PORT KEYS SECONDS CONCURRENCY
//
// memory: RateLimiterMemory (a fixed window per key: a Map of records,
// each with its expiry time and a timer), 60,000 points a minute. Node
// runs JavaScript on one thread, so there is no thread count: the line is
// that of weir.c with THREADS 1 (decisions per second, ns per decision,
// the fraction admitted; the median of REPS passes). Each decision is
// `await limiter.consume(key)`, as a request handler calls it; a denial
// rejects with a RateLimiterRes, which is counted, not thrown.
//
// redis: RateLimiterRedis on the Redis at 127.0.0.1:PORT through ioredis
// (one EVALSHA of its fixed-window script per decision), 60,000 points a
// minute, keys drawn at random from KEYS, CONCURRENCY decisions in flight
// for SECONDS. Prints decisions per second, the fraction admitted and the
// decisions made.
//
// Keys and streams as weir.c: "user:<n>", xorshift32 from 2463534242.
'use strict';

const { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');

const POINTS = 60000;
const DURATION_S = 60;

function stream(keys, ops, seed) {
    const out = new Array(ops);
    let x = seed >>> 0;
    for (let i = 0; i < ops; i++) {
        x ^= x << 13;
        x >>>= 0;
        x ^= x >>> 17;
        x ^= x << 5;
        x >>>= 0;
        out[i] = 'user:' + (x % keys);
    }
    return out;
}

async function decide(limiter, key) {
    try {
        await limiter.consume(key);
        return 1;
    } catch (e) {
        if (e instanceof RateLimiterRes)
            return 0;
        throw e;
    }
}

const median = (v) => v.slice().sort((a, b) => a - b)[v.length >> 1];

async function memory(keys, ops, reps) {
    const limiter = new RateLimiterMemory({ points: POINTS, duration: DURATION_S });
    for (let n = 0; n < keys; n++)
        await decide(limiter, 'user:' + n);
    const s = stream(keys, ops, 2463534242);
    const rates = [], ns = [];
    let admitted = 0;
    for (let r = 0; r < reps; r++) {
        const t0 = process.hrtime.bigint();
        for (let i = 0; i < ops; i++)
            admitted += await decide(limiter, s[i]);
        const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
        rates.push(ops / seconds);
        ns.push(seconds * 1e9 / ops);
    }
    console.log(`${median(rates).toFixed(0)} ${median(ns).toFixed(1)} ${(admitted / (ops * reps)).toFixed(4)}`);
}

async function redis(port, keys, seconds, concurrency) {
    const Redis = require('ioredis');
    const client = new Redis({ host: '127.0.0.1', port, enableOfflineQueue: true });
    const limiter = new RateLimiterRedis({ storeClient: client, points: POINTS, duration: DURATION_S });
    const s = stream(keys, 1 << 20, 2463534242);
    let next = 0, done = 0, admitted = 0;
    const end = Date.now() + seconds * 1000;
    const t0 = process.hrtime.bigint();
    async function lane() {
        while (Date.now() < end) {
            admitted += await decide(limiter, s[next++ & (s.length - 1)]);
            done++;
        }
    }
    await Promise.all(Array.from({ length: concurrency }, lane));
    const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(`${(done / elapsed).toFixed(0)} ${(admitted / Math.max(done, 1)).toFixed(4)} ${done}`);
    client.disconnect();
}

const [mode, ...args] = process.argv.slice(2);
const nums = args.map(Number);
if (mode === 'memory' && nums.length === 3 && nums.every((v) => v > 0))
    memory(...nums);
else if (mode === 'redis' && nums.length === 4 && nums.every((v) => v > 0))
    redis(...nums);
else {
    console.error('usage: node flexible.js memory KEYS OPS REPS | redis PORT KEYS SECONDS CONCURRENCY');
    process.exit(2);
}
