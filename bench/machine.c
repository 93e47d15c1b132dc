/*
 * machine.c - describe what weir-bench runs on: CPU model and cache from
 * /proc/cpuinfo, cores online, kernel, compiler, load and the UTC date.
 * Missing sources leave "unknown"; nothing here fails.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* Copy the value of the first "name : value" line of /proc/cpuinfo. */
static void cpuinfo_field(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    size_t nlen = strlen(name);
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, name, nlen) != 0)
            continue;
        const char *colon = strchr(line, ':');
        if (!colon)
            continue;
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        snprintf(out, cap, "%s", v);
        out[strcspn(out, "\n")] = '\0';
        break;
    }
    fclose(f);
}

void bench_loadavg(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f)
        return;
    double a, b, c;
    if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
        snprintf(out, cap, "%.2f %.2f %.2f", a, b, c);
    fclose(f);
}

void bench_machine_get(bench_machine *m)
{
    memset(m, 0, sizeof(*m));
    cpuinfo_field("model name", m->cpu, sizeof(m->cpu));
    cpuinfo_field("cache size", m->cache, sizeof(m->cache));
    m->cores = sysconf(_SC_NPROCESSORS_ONLN);

    struct utsname u;
    if (uname(&u) == 0)
        snprintf(m->kernel, sizeof(m->kernel), "%s %s %s", u.sysname, u.release, u.machine);
    else
        snprintf(m->kernel, sizeof(m->kernel), "unknown");

    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(m->date, sizeof(m->date), "%Y-%m-%dT%H:%M:%SZ", &tm);

#ifdef __clang__
    snprintf(m->compiler, sizeof(m->compiler), "clang %s", __clang_version__);
#elif defined(__GNUC__)
    snprintf(m->compiler, sizeof(m->compiler), "gcc %s", __VERSION__);
#else
    snprintf(m->compiler, sizeof(m->compiler), "unknown");
#endif

    bench_loadavg(m->loadavg, sizeof(m->loadavg));
#ifdef NDEBUG
    m->release = true;
#endif
}
