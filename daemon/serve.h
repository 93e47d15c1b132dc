/*
 * serve.h - `weir serve`, the rate limit service (argv[0] is "serve").
 * Returns the process exit code.
 */
#ifndef WEIR_DAEMON_SERVE_H
#define WEIR_DAEMON_SERVE_H

int weir_cli_serve(int argc, char **argv);

#endif /* WEIR_DAEMON_SERVE_H */
