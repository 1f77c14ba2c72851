/* console.h — the files of the console (src/server/console/), embedded in
 * the binary at build time by cmake/embed.cmake, and the route that serves
 * them: GET /console and GET /console/{file}. */
#ifndef VD_SERVER_CONSOLE_H
#define VD_SERVER_CONSOLE_H

#include <stddef.h>

typedef struct console_asset {
  const char *name; /* relative to src/server/console/: "index.html", "vendor/uPlot.min.css" */
  const char *type; /* its Content-Type */
  const unsigned char *data;
  size_t len;
} console_asset;

/* Ends with an entry whose name is NULL. */
extern const console_asset console_assets[];

struct conn;
struct http_request;
/* GET /console (index.html), GET /console/{file}: 404 for a name not embedded. */
void route_console(struct conn *c, const struct http_request *r);

#endif
