/*
 * web.h - the dashboard's files (web/), built into the binary
 * (gen/web_files.c, made by CMakeLists.txt) and served by the admin
 * listener without a token: they hold no data. The page asks for the
 * token and sends it with each request for data (/admin/v1/stats).
 */
#ifndef WEIR_DAEMON_ADMIN_WEB_H
#define WEIR_DAEMON_ADMIN_WEB_H

#include <stdbool.h>
#include <stddef.h>

#include "http/answer.h"
#include "http1/codec.h"

/** One file of web/: its name there, Content-Type, ETag (quoted) and
 *  bytes. */
typedef struct admin_web_file {
    const char *name;
    const char *type;
    const char *etag;
    const char *bytes;
    size_t len;
} admin_web_file;

/** Every file of web/, by name (gen/web_files.c). */
extern const admin_web_file weir__web_files[];
extern const size_t weir__web_files_count;

/** The file served at @path: web/NAME at /dashboard/NAME, and
 *  web/dashboard.html at /dashboard and /dashboard/. NULL for another
 *  path. */
const admin_web_file *admin_web_find(const char *path, size_t n);

/** Answers @req when its path is the dashboard's (/dashboard, or under
 *  /dashboard/): the file (304 when If-None-Match names its ETag), or
 *  404 or 405; false, nothing answered, for any other path. */
bool admin_web_handle(http_answer *a, const weir_http1_request *req);

#endif /* WEIR_DAEMON_ADMIN_WEB_H */
