/*
 * main.c - the `weir` command: dispatches to its subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "serve.h"
#include "weir/weir.h"

static const weir_cli_command commands[] = {
    {"serve", "run the rate limit service (HTTP and gRPC)", weir_cli_serve},
    {"sim", "replay a traffic pattern through every algorithm", weir_cli_sim},
    {"config", "check or print a rule file or directory", weir_cli_config},
    {"explain", "show how rules match a request and decide it", weir_cli_explain},
    {"bench", "load-test a running weir (gRPC)", weir_cli_bench},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: weir COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "  %-8s %s\n", "version", "print the version");
    fprintf(f, "\n'weir COMMAND --help' describes a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("weir %s\n", weir_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "weir: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
