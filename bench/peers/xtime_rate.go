// xtime_rate.go - the Go peer of weir-bench-peer (bench/peers/weir.c):
// golang.org/x/time/rate, one rate.Limiter per key, on the same workload.
//
//	xtime_rate KEYS OPS THREADS REPS
//
// A Limiter decides for one key and has no key lookup of its own, so the
// driver keeps them as a server would: 64 shards, each a map from the key
// to its *rate.Limiter under a sync.Mutex (weir's memory store is 64
// locked shards too), the shard chosen by hash/maphash. A decision finds
// or creates the key's Limiter, then calls Allow(), which reads the clock.
// Limit: 60,000 a minute as a token bucket whose burst is the limit
// (rate.NewLimiter(1000, 60000)). Keys, warm-up, streams (xorshift32) and
// the output line are those of weir.c: decisions per second (all threads),
// ns per decision (one thread's), the fraction admitted, the median of REPS
// passes. THREADS goroutines run on GOMAXPROCS threads (the number of
// cores unless set).
package main

import (
	"fmt"
	"hash/maphash"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const shards = 64

type shard struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
	_  [40]byte // a shard per cache line, as weir's
}

type table struct {
	seed   maphash.Seed
	shards [shards]shard
}

func (t *table) allow(key string) bool {
	s := &t.shards[maphash.String(t.seed, key)%shards]
	s.mu.Lock()
	l, ok := s.m[key]
	if !ok {
		l = rate.NewLimiter(1000, 60000)
		s.m[key] = l
	}
	s.mu.Unlock()
	return l.Allow()
}

func stream(keys, ops, seed uint32) []string {
	out := make([]string, ops)
	x := seed
	for i := range out {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		out[i] = "user:" + strconv.FormatUint(uint64(x%keys), 10)
	}
	return out
}

func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

func arg(i int) uint32 {
	v, err := strconv.ParseUint(os.Args[i], 10, 32)
	if err != nil || v == 0 {
		fmt.Fprintf(os.Stderr, "xtime_rate: '%s' is not a positive number\n", os.Args[i])
		os.Exit(2)
	}
	return uint32(v)
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: xtime_rate KEYS OPS THREADS REPS")
		os.Exit(2)
	}
	keys, ops, threads, reps := arg(1), arg(2), int(arg(3)), int(arg(4))
	t := &table{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].m = make(map[string]*rate.Limiter)
	}
	for n := uint32(0); n < keys; n++ {
		t.allow("user:" + strconv.FormatUint(uint64(n), 10))
	}
	streams := make([][]string, threads)
	for i := range streams {
		streams[i] = stream(keys, ops, 2463534242+uint32(i))
	}

	rates, ns := make([]float64, reps), make([]float64, reps)
	var admitted uint64
	for r := 0; r < reps; r++ {
		seconds := make([]float64, threads)
		counts := make([]uint64, threads)
		var wg sync.WaitGroup
		for i := 0; i < threads; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				t0 := time.Now()
				var c uint64
				for _, k := range streams[i] {
					if t.allow(k) {
						c++
					}
				}
				seconds[i] = time.Since(t0).Seconds()
				counts[i] = c
			}(i)
		}
		wg.Wait()
		slowest, sum := 0.0, 0.0
		for i := 0; i < threads; i++ {
			if seconds[i] > slowest {
				slowest = seconds[i]
			}
			sum += seconds[i]
			admitted += counts[i]
		}
		rates[r] = float64(ops) * float64(threads) / slowest
		ns[r] = sum / float64(threads) * 1e9 / float64(ops)
	}
	fmt.Printf("%.0f %.1f %.4f\n", median(rates), median(ns),
		float64(admitted)/(float64(ops)*float64(threads)*float64(reps)))
}
