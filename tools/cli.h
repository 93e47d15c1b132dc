/*
 * cli.h - the table of `weir` subcommands and their entry points.
 */
#ifndef WEIR_TOOLS_CLI_H
#define WEIR_TOOLS_CLI_H

typedef struct weir_cli_command {
    const char *name;
    const char *help;
    int (*run)(int argc, char **argv);
} weir_cli_command;

/* `weir sim`: argv[0] is "sim". Returns the process exit code. */
int weir_cli_sim(int argc, char **argv);

/* `weir config check|print PATH`: argv[0] is "config". */
int weir_cli_config(int argc, char **argv);

/* `weir bench SUBCOMMAND` (load generators): argv[0] is "bench". */
int weir_cli_bench(int argc, char **argv);

#endif /* WEIR_TOOLS_CLI_H */
