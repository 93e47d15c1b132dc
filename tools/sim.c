/* sim.c - placeholder until the simulator lands. */
#include <stdio.h>

#include "cli.h"

int weir_cli_sim(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "weir sim: not built yet\n");
    return 1;
}
