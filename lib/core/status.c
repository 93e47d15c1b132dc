/*
 * status.c - weir_strerror() and weir_status_name(), generated from the
 * same X-macro list as the enum.
 */
#include "weir/status.h"

const char *weir_strerror(weir_status status)
{
    switch (status) {
#define WEIR_STATUS_MSG_(name, num, msg) \
    case WEIR_##name:                    \
        return msg;
        WEIR_STATUS_MAP(WEIR_STATUS_MSG_)
#undef WEIR_STATUS_MSG_
    }
    return "unknown status";
}

const char *weir_status_name(weir_status status)
{
    switch (status) {
#define WEIR_STATUS_NAME_(name, num, msg) \
    case WEIR_##name:                     \
        return "WEIR_" #name;
        WEIR_STATUS_MAP(WEIR_STATUS_NAME_)
#undef WEIR_STATUS_NAME_
    }
    return "WEIR_UNKNOWN";
}
