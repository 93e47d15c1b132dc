/*
 * static.h - the files of web/ (the simulator's and the dashboard's
 * pages), built into weir: CMakeLists.txt (cmake/web.cmake) turns every
 * file under web/ into a row of gen/web_files.c. A page holds no data
 * (what it shows, it asks the API for), so the admin listener serves
 * these without a token.
 *
 * Paths: web/NAME.html is GET /NAME; any other file web/F is GET
 * /STEM/F, STEM being F's name up to its first '.' (web/sim.js is
 * /sim/sim.js); web/D/F is GET /D/F. A page is also GET /NAME/, and
 * every other path under /NAME/ is this module's: 404 when no file is
 * there, never the admin API's token check.
 */
#ifndef WEIR_DAEMON_ADMIN_STATIC_H
#define WEIR_DAEMON_ADMIN_STATIC_H

#include <stdbool.h>
#include <stddef.h>

#include "http/answer.h"
#include "http1/codec.h"

typedef struct admin_static_file {
    const char *path; /* "/sim", "/sim/sim.js" */
    const char *content_type;
    const char *etag; /* "\"<20 hex digits of its SHA-256>\"" */
    const unsigned char *bytes;
    size_t len;
} admin_static_file;

/* gen/web_files.c */
extern const admin_static_file weir__web_files[];
extern const size_t weir__web_files_count;

/** The file served at @path (@n bytes), or NULL. */
const admin_static_file *admin_static_find(const char *path, size_t n);

/** Answers a request for a file of web/ (GET and HEAD, with its ETag and
 *  If-None-Match: 304; another method: 405) or a path under a page's
 *  folder (404), and returns true; false, nothing answered, for any
 *  other path. */
bool admin_static_handle(http_answer *a, const weir_http1_request *req);

#endif /* WEIR_DAEMON_ADMIN_STATIC_H */
