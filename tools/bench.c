/*
 * bench.c - `weir bench`: dispatches to the load generators, one per
 * protocol (`weir bench grpc`).
 */
#include <stdio.h>
#include <string.h>

#include "bench_grpc.h"
#include "cli.h"

static const weir_cli_command benches[] = {
    {"grpc", "Envoy's ShouldRateLimit over HTTP/2 (weir serve --grpc)", weir_cli_bench_grpc},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: weir bench TARGET [OPTIONS]\n\n"
               "Load-tests a running weir and reports throughput, answers, errors and\n"
               "latency percentiles.\n\ntargets:\n");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        fprintf(f, "  %-6s %s\n", benches[i].name, benches[i].help);
    fprintf(f, "\n'weir bench TARGET --help' describes its options.\n");
}

int weir_cli_bench(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        if (strcmp(argv[1], benches[i].name) == 0)
            return benches[i].run(argc - 1, argv + 1);
    fprintf(stderr, "weir bench: unknown target '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
