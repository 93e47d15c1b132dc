/*
 * cli.h - the table of `weir` subcommands and their entry points.
 */
#ifndef WEIR_TOOLS_CLI_H
#define WEIR_TOOLS_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "weir/weir.h"

typedef struct weir_cli_command {
    const char *name;
    const char *help;
    int (*run)(int argc, char **argv);
} weir_cli_command;

/* `weir sim`: argv[0] is "sim". Returns the process exit code. */
int weir_cli_sim(int argc, char **argv);

/* "weir sim: " and the message on stderr, with a pointer to --help;
 * returns 2 (bad arguments). */
int weir_cli_sim_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* `weir sim --adaptive` (sim_adaptive_cli.c): argv as weir_cli_sim's. */
int weir_cli_sim_adaptive(int argc, char **argv);

/* Write an SVG that @draw makes of @plot to @path ("-": stdout). A file is
 * written under a temporary name beside it and renamed over it, so a
 * failure leaves no partial file. Returns 0, or 1 after a message on
 * stderr ("weir sim: ..."). */
int weir_cli_write_svg(const char *path, weir_status (*draw)(FILE *f, const void *plot),
                       const void *plot);

/* `weir config check|print PATH`: argv[0] is "config". */
int weir_cli_config(int argc, char **argv);

/* `weir explain RULES REQUEST`: argv[0] is "explain". */
int weir_cli_explain(int argc, char **argv);

/* Loads @path as the daemon does, printing every problem and warning to
 * stderr as "file:line:column: message" (@cmd names the command in the
 * others); with @strict a warning fails the load. 0 with *@out set, or 1. */
int weir_cli_load_rules(const char *cmd, const char *path, const weir_rules_options *opts,
                        bool strict, weir_ctx *ctx, weir_rules **out);

/* `weir bench SUBCOMMAND` (load generators): argv[0] is "bench". */
int weir_cli_bench(int argc, char **argv);

#endif /* WEIR_TOOLS_CLI_H */
