/* c_decide.c — the C lanes of bench/bindings: decides every request of
 * REQUESTS (one JSON request a line; an "expect" member, the generator's
 * answer and the last member of the line, is checked and not sent) with the
 * bundle in BUNDLE on a reused vd_decision, snapshots off: through
 * vd_decide_json on the line, then through vd_decide_built from the four
 * fields {country, path, ua, score} held in C (read out of the line before
 * timing; the builder is reset and filled for every decision), and prints
 * one line a lane:
 *   {"lane":"C vd_decide_json","ns_per_decision":N,"cpu_ns_per_decision":C,"decisions":K}
 * The lines are read into memory before timing; N is the median of three
 * timed passes (wall clock) after a warm-up pass, C the process CPU time of
 * that same pass.
 *
 *   bindings-c-lane REQUESTS BUNDLE
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "verdict.h"

typedef struct {
  char *text;
  size_t len;
  char expect[16];
  /* the context's fields, for the builder lane */
  char country[8], path[64], ua[64];
  double score;
  int score_is_int; /* "0", not "0.0": the JSON reader reads an int */
} line;

/* The string member "name":"..." of text into out (no escapes in these). */
static int field(const char *text, const char *name, char *out, size_t cap) {
  char key[32];
  snprintf(key, sizeof key, "\"%s\":\"", name);
  const char *at = strstr(text, key), *end;
  if (!at || !(end = strchr(at += strlen(key), '"')) || (size_t)(end - at) >= cap) return -1;
  memcpy(out, at, (size_t)(end - at));
  out[end - at] = '\0';
  return 0;
}

static int fields_of(line *l) {
  const char *sc = strstr(l->text, "\"score\":");
  if (field(l->text, "country", l->country, sizeof l->country) ||
      field(l->text, "path", l->path, sizeof l->path) ||
      field(l->text, "ua", l->ua, sizeof l->ua) || !sc)
    return -1;
  char *end;
  sc += strlen("\"score\":");
  l->score = strtod(sc, &end);
  l->score_is_int = !memchr(sc, '.', (size_t)(end - sc)) && !memchr(sc, 'e', (size_t)(end - sc));
  return 0;
}

static int build(vd_builder *b, const line *l) {
  vd_builder_reset(b);
  return vd_build_map_begin(b) || vd_build_key(b, "country", 7) ||
         vd_build_string(b, l->country, strlen(l->country)) || vd_build_key(b, "path", 4) ||
         vd_build_string(b, l->path, strlen(l->path)) || vd_build_key(b, "ua", 2) ||
         vd_build_string(b, l->ua, strlen(l->ua)) || vd_build_key(b, "score", 5) ||
         (l->score_is_int ? vd_build_int(b, (int64_t)l->score) : vd_build_double(b, l->score)) ||
         vd_build_map_end(b);
}

static double now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Cuts `,"expect":"X"}` off the end of l into l->expect. */
static void cut_expect(line *l) {
  char *at = strstr(l->text, ",\"expect\":\"");
  l->expect[0] = '\0';
  if (!at) return;
  char *v = at + strlen(",\"expect\":\""), *end = strchr(v, '"');
  if (!end || (size_t)(end - v) >= sizeof l->expect) return;
  memcpy(l->expect, v, (size_t)(end - v));
  l->expect[end - v] = '\0';
  at[0] = '}';
  at[1] = '\0';
  l->len = (size_t)(at + 1 - l->text);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: bindings-c-lane REQUESTS BUNDLE\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "r");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  line *lines = NULL;
  size_t n = 0, cap = 0, lcap = 0;
  char *buf = NULL;
  ssize_t got;
  while ((got = getline(&buf, &lcap, f)) > 0) {
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r')) buf[--got] = '\0';
    if (!got) continue;
    if (n == cap && !(lines = realloc(lines, (cap = cap ? cap * 2 : 1024) * sizeof *lines))) {
      fprintf(stderr, "out of memory\n");
      return 1;
    }
    lines[n].text = strdup(buf);
    lines[n].len = (size_t)got;
    cut_expect(&lines[n]);
    if (fields_of(&lines[n])) {
      fprintf(stderr, "line %zu: not a {country, path, ua, score} request\n", n + 1);
      return 1;
    }
    n++;
  }
  free(buf);
  fclose(f);
  vd_engine_opts o;
  memset(&o, 0, sizeof o);
  o.store_dir = "";
  vd_engine *e;
  vd_error err;
  if (vd_engine_open(argv[2], &o, &e, &err) < 0) {
    fprintf(stderr, "%s: %s\n", argv[2], err.message);
    return 1;
  }
  vd_decision *d = vd_decision_new();
  vd_builder *b = vd_builder_new();
  vd_request req = {.action = "peer_gate"};
  for (size_t i = 0; i < n; i++) { /* warm-up, and the check: both ways */
    for (int way = 0; way < 2; way++) {
      int rc = way == 0              ? vd_decide_json(e, lines[i].text, (long)lines[i].len, d, &err)
               : build(b, &lines[i]) ? -1
                                     : vd_decide_built(e, &req, b, d, &err);
      const char *a = rc == 0 ? vd_decision_action(d) : NULL;
      if (rc < 0 || (lines[i].expect[0] && (!a || strcmp(a, lines[i].expect) != 0))) {
        fprintf(stderr, "line %zu (%s): %s, expected %s\n", i + 1, way ? "built" : "json",
                rc < 0 ? err.message
                : a    ? a
                       : "(none)",
                lines[i].expect);
        return 1;
      }
    }
  }
  for (int way = 0; way < 2; way++) {
    double wall[3], cpu[3];
    for (int r = 0; r < 3; r++) {
      double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
      if (way == 0) {
        for (size_t i = 0; i < n; i++)
          vd_decide_json(e, lines[i].text, (long)lines[i].len, d, &err);
      } else {
        for (size_t i = 0; i < n; i++) {
          build(b, &lines[i]);
          vd_decide_built(e, &req, b, d, &err);
        }
      }
      wall[r] = (now_ns(CLOCK_MONOTONIC) - w0) / (double)n;
      cpu[r] = (now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double)n;
    }
    qsort(wall, 3, sizeof *wall, cmp);
    qsort(cpu, 3, sizeof *cpu, cmp);
    printf(
        "{\"lane\":\"%s\",\"ns_per_decision\":%.0f,\"cpu_ns_per_decision\":%.0f,"
        "\"decisions\":%zu}\n",
        way ? "C vd_decide_built from C fields" : "C vd_decide_json", wall[1], cpu[1], n);
  }
  vd_builder_free(b);
  vd_decision_free(d);
  vd_engine_close(e);
  for (size_t i = 0; i < n; i++) free(lines[i].text);
  free(lines);
  return 0;
}
