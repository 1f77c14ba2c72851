/* console.c — serves the console's embedded files (console.h). The page is
 * read-only: it reads /v1/stats, /v1/stats/recent and /v1/snapshots/{id}
 * like any other client, so serving it gives nothing away that those do
 * not. Its Content-Security-Policy lets it load only its own files and talk
 * only to this server. */
#include <stdio.h>
#include <string.h>

#include "server/console.h"
#include "server/internal.h"

static const char headers[] =
    "Cache-Control: no-cache\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "Referrer-Policy: no-referrer\r\n"
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self' "
    "'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'\r\n";

void route_console(conn *c, const http_request *r) {
  const char *name = r->path + 8; /* after "/console" */
  size_t n = r->path_len - 8;
  if (n > 0 && name[0] == '/') name++, n--;
  if (n == 0) name = "index.html", n = 10;
  for (const console_asset *a = console_assets; a->name; a++)
    if (strlen(a->name) == n && memcmp(a->name, name, n) == 0)
      return conn_respond(c, 200, a->type, headers, (const char *)a->data, a->len);
  char msg[200], q[120];
  snprintf(msg, sizeof msg, "the console has no file %s",
           json_quote_text(q, sizeof q, name, n, 64));
  conn_respond_error(c, 404, "no_endpoint", msg, NULL);
}
