/* batch.c — POST /v1/decide/batch: many decide requests in one HTTP request,
 * as a JSON array or as JSON Lines (Content-Type application/x-ndjson or
 * application/jsonl). Each request is decided on its own, exactly as
 * POST /v1/decide would (its own snapshot, its own metrics), and the answers
 * come back in the same order and shape: an array of decisions, or one
 * decision a line. A bad element does not spoil the batch: its place holds
 * {"error":{"code","message","path","index"}} and the others are decided.
 *
 * The array is split into its elements by a scanner that only tracks
 * strings and nesting; each element's text then goes to the engine's own
 * request parser, which finds whatever else is wrong with it. What the
 * scanner cannot split (the body is not an array, an unterminated string or
 * bracket, a missing comma) refuses the whole batch with 400 and the byte
 * where it broke.
 *
 * Not here: streaming. The whole body is read first (--max-body) and the
 * whole answer is built in memory; --max-batch bounds the elements. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/internal.h"

typedef struct span {
  size_t off, len;
  unsigned line; /* JSON Lines: 1-based line number */
} span;

static int is_ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; }

static int content_type_is(const http_request *r, const char *want) {
  size_t n;
  const char *v = http_header_get(r, "content-type", &n);
  size_t wn = strlen(want);
  if (!v) return 0;
  while (n && is_ws(*v)) v++, n--;
  return n >= wn && strncasecmp(v, want, wn) == 0 && (n == wn || v[wn] == ';' || is_ws(v[wn]));
}

/* Splits a JSON array into element spans. Returns the count, -1 with a
 * message in why (and the byte in *at) when the text is not an array, or
 * -2 when there are more than max elements. */
static long split_array(const char *s, size_t n, span *out, size_t max, char *why, size_t whylen,
                        size_t *at) {
  size_t i = 0, count = 0;
  while (i < n && is_ws(s[i])) i++;
  if (i == n || s[i] != '[') {
    *at = i;
    snprintf(why, whylen,
             "a batch is a JSON array of decide requests (or JSON Lines with Content-Type: "
             "application/x-ndjson)");
    return -1;
  }
  i++;
  while (i < n && is_ws(s[i])) i++;
  if (i < n && s[i] == ']') {
    i++;
    goto tail;
  }
  for (;;) {
    while (i < n && is_ws(s[i])) i++;
    size_t start = i;
    int depth = 0;
    while (i < n) {
      char ch = s[i];
      if (ch == '"') {
        for (i++; i < n && s[i] != '"'; i++)
          if (s[i] == '\\') i++;
        if (i >= n) {
          *at = start;
          snprintf(why, whylen, "unterminated string in element %zu", count);
          return -1;
        }
      } else if (ch == '{' || ch == '[') {
        depth++;
      } else if (ch == '}' || ch == ']') {
        if (depth == 0) break;
        depth--;
      } else if (ch == ',' && depth == 0) {
        break;
      }
      i++;
    }
    if (i >= n) {
      *at = n;
      snprintf(why, whylen, "the array is not closed: ']' missing after element %zu", count);
      return -1;
    }
    size_t end = i;
    while (end > start && is_ws(s[end - 1])) end--;
    if (end == start) {
      *at = start;
      snprintf(why, whylen, "element %zu is empty (a stray comma?)", count);
      return -1;
    }
    if (s[i] == '}') {
      *at = i;
      snprintf(why, whylen, "unbalanced '}' in element %zu", count);
      return -1;
    }
    if (count == max) return -2;
    out[count].off = start;
    out[count].len = end - start;
    out[count].line = 0;
    count++;
    if (s[i] == ']') {
      i++;
      break;
    }
    i++; /* the comma */
  }
tail:
  while (i < n && is_ws(s[i])) i++;
  if (i < n) {
    *at = i;
    snprintf(why, whylen, "text after the closing ']' of the batch");
    return -1;
  }
  return (long)count;
}

/* JSON Lines: one request a line; blank lines are skipped. */
static long split_lines(const char *s, size_t n, span *out, size_t max) {
  size_t i = 0, count = 0;
  unsigned line = 0;
  while (i < n) {
    const char *nl = memchr(s + i, '\n', n - i);
    size_t end = nl ? (size_t)(nl - s) : n;
    line++;
    size_t a = i, b = end;
    while (a < b && is_ws(s[a])) a++;
    while (b > a && is_ws(s[b - 1])) b--;
    if (b > a) {
      if (count == max) return -2;
      out[count].off = a;
      out[count].len = b - a;
      out[count].line = line;
      count++;
    }
    i = end + 1;
  }
  return (long)count;
}

static void element_error(json_buf *b, int jsonl, size_t index, unsigned line,
                          const vd_error *err) {
  const char *code = vd_err_name(err->code);
  char path[300];
  if (jsonl)
    snprintf(path, sizeof path, "%s", err->path[0] ? err->path : "$");
  else
    snprintf(path, sizeof path, "$[%zu]%s", index, err->path[0] ? err->path + 1 : "");
  json_buf_put(b, "{\"error\":{\"code\":", 17);
  json_write_string(b, code, strlen(code));
  json_buf_put(b, ",\"message\":", 11);
  json_write_string(b, err->message, strlen(err->message));
  json_buf_put(b, ",\"path\":", 8);
  json_write_string(b, path, strlen(path));
  char num[64];
  int k = jsonl ? snprintf(num, sizeof num, ",\"index\":%zu,\"line\":%u}}", index, line)
                : snprintf(num, sizeof num, ",\"index\":%zu}}", index);
  json_buf_put(b, num, (size_t)k);
}

void route_batch(conn *c, const http_request *r) {
  worker *w = conn_worker(c);
  const server_opts *o = w->srv->opts;
  int jsonl = content_type_is(r, "application/x-ndjson") ||
              content_type_is(r, "application/jsonl") ||
              content_type_is(r, "application/json-lines");
  span *spans = malloc(((size_t)o->max_batch + 1) * sizeof *spans);
  if (!spans) {
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory reading the batch", NULL);
    return;
  }
  char why[200];
  size_t at = 0;
  long n = jsonl ? split_lines(r->body, r->body_len, spans, o->max_batch)
                 : split_array(r->body, r->body_len, spans, o->max_batch, why, sizeof why, &at);
  if (n == -2) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "the batch has more than %u requests (the limit, --max-batch); split it",
             o->max_batch);
    conn_respond_error(c, 413, "batch_too_large", msg, NULL);
    free(spans);
    return;
  }
  if (n < 0) {
    char msg[300];
    snprintf(msg, sizeof msg, "byte %zu: %s", at, why);
    metrics_count_refused(&w->m);
    stats_count_refused(&w->st);
    conn_respond_error(c, 400, vd_err_name(VD_EJSON), msg, "$");
    free(spans);
    return;
  }
  json_buf out;
  json_buf_init(&out, NULL);
  if (!jsonl) json_buf_putc(&out, '[');
  vd_decision *d = conn_decision(c);
  for (long i = 0; i < n; i++) {
    if (i && !jsonl) json_buf_putc(&out, ',');
    vd_error err;
    const char *text = r->body + spans[i].off;
    if (server_decide_json(w, text, spans[i].len, d, &err) != 0) {
      metrics_count_refused(&w->m);
      stats_count_refused(&w->st);
      element_error(&out, jsonl, (size_t)i, spans[i].line, &err);
    } else {
      const char *s;
      size_t sn;
      if (vd_decision_render(d, 0, &s, &sn) != 0) {
        vd_error oom;
        memset(&oom, 0, sizeof oom);
        oom.code = VD_ENOMEM;
        snprintf(oom.message, sizeof oom.message, "out of memory writing the decision");
        element_error(&out, jsonl, (size_t)i, spans[i].line, &oom);
      } else {
        while (sn && s[sn - 1] == '\n') sn--;
        json_buf_put(&out, s, sn);
      }
      worker_count_decision(w, d);
    }
    if (jsonl) json_buf_putc(&out, '\n');
  }
  if (!jsonl) json_buf_put(&out, "]\n", 2);
  free(spans);
  metrics_bump(&w->m.batches);
  if (out.oom)
    conn_respond_error(c, 503, vd_err_name(VD_ENOMEM), "out of memory writing the batch answer",
                       NULL);
  else
    conn_respond(c, 200, jsonl ? "application/x-ndjson" : "application/json", NULL, out.data,
                 out.len);
  json_buf_free(&out);
}
