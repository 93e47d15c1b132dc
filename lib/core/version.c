/* version.c - the library's version string. */
#include "weir/weir.h"

const char *weir_version(void)
{
    return WEIR_VERSION_STRING;
}
