/* bench-expr — ns per evaluation of a typical gate condition over 100k
 * varied contexts, next to the same condition written by hand in C, in the
 * same run.
 *
 *   ctx.country == "CN" && ctx.path.startsWith("/api/v1") && !(ctx.ua in ["curl", "sqlmap"])
 *
 * Two baselines:
 *  - "C, map lookups": hand-written C that reads the same parsed context maps
 *    (value_map_get) and tests the same things: the fair comparison, since a
 *    policy engine must find the fields in the request either way.
 *  - "C, struct fields": the fields pre-extracted into a C struct; the floor.
 * Each round times batches of 1,000 evaluations; the report gives the median
 * and p99 of the per-batch ns/eval over all rounds, and the ratio of medians.
 * It also checks that the compiled condition allocated nothing (arena bytes
 * and mallocs stay 0) and that every engine agrees on every context. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/arena.h"
#include "core/value.h"
#include "expr/expr.h"

#define NCTX 100000
#define BATCH 1000
#define NFIELDS 12

static const char *countries[] = {"CN", "US", "DE", "FR", "BR", "IN", "JP", "CN", "CN", "GB"};
static const char *paths[] = {"/api/v1/orders", "/api/v2/orders", "/static/app.js",
                              "/api/v1/users/17", "/login", "/api/v1", "/api/v10/x",
                              "/healthz"};
static const char *uas[] = {"Mozilla/5.0 (X11; Linux x86_64)", "curl", "sqlmap", "python-requests/2.31",
                            "Mozilla/5.0 (Macintosh)", "Go-http-client/1.1", "curl/8.4.0"};
static const char *keys[NFIELDS] = {"method", "host", "ip", "user", "session", "country",
                                    "region", "path", "query", "ua", "referer", "lang"};

typedef struct flat {
  const char *country, *path, *ua;
  size_t country_len, path_len, ua_len;
} flat;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int str_eq(const value *v, const char *s, size_t n) {
  return v && v->kind == V_STRING && v->n == n && memcmp(v->s, s, n) == 0;
}

/* The condition by hand, over the same maps. */
static int by_hand_maps(const value *ctx) {
  const value *c = value_map_get(ctx, "country", 7);
  if (!str_eq(c, "CN", 2)) return 0;
  const value *p = value_map_get(ctx, "path", 4);
  if (!p || p->kind != V_STRING || p->n < 7 || memcmp(p->s, "/api/v1", 7) != 0) return 0;
  const value *u = value_map_get(ctx, "ua", 2);
  if (!u || u->kind != V_STRING) return 0;
  return !(str_eq(u, "curl", 4) || str_eq(u, "sqlmap", 6));
}

static int by_hand_struct(const flat *f) {
  if (!(f->country_len == 2 && memcmp(f->country, "CN", 2) == 0)) return 0;
  if (!(f->path_len >= 7 && memcmp(f->path, "/api/v1", 7) == 0)) return 0;
  if ((f->ua_len == 4 && memcmp(f->ua, "curl", 4) == 0) ||
      (f->ua_len == 6 && memcmp(f->ua, "sqlmap", 6) == 0))
    return 0;
  return 1;
}

typedef struct bind {
  const value *ctx;
} bind;

static int lookup(void *user, const char *name, size_t len, value *out) {
  bind *b = user;
  if (len == 3 && memcmp(name, "ctx", 3) == 0) {
    *out = *b->ctx;
    return 0;
  }
  return -1;
}

typedef struct series {
  const char *name;
  double *samples;
  size_t n;
} series;

static void report(series *s, double base_median) {
  qsort(s->samples, s->n, sizeof(double), cmp_double);
  double med = s->samples[s->n / 2], p99 = s->samples[(size_t)(s->n * 0.99)];
  printf("  %-28s median %7.2f ns/eval   p99 %7.2f   ratio %5.2fx\n", s->name, med, p99,
         base_median > 0 ? med / base_median : 1.0);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  if (rounds < 1) rounds = 1;
  const char *src =
      "ctx.country == \"CN\" && ctx.path.startsWith(\"/api/v1\") && !(ctx.ua in [\"curl\", "
      "\"sqlmap\"])";
  expr_program *prog;
  expr_error err;
  /* As the policy engine compiles conditions: variables have plain names. */
  expr_opts opts = {.simple_names = 1};
  if (expr_compile(src, strlen(src), &opts, &prog, &err)) {
    fprintf(stderr, "compile: %s\n", err.message);
    return 1;
  }

  /* 100k contexts, each a 12-field map with the tested fields in varied places. */
  map_entry *entries = calloc((size_t)NCTX * NFIELDS, sizeof *entries);
  value *ctxs = calloc(NCTX, sizeof *ctxs);
  flat *flats = calloc(NCTX, sizeof *flats);
  unsigned seed = 12345;
  for (size_t i = 0; i < NCTX; i++) {
    map_entry *e = entries + i * NFIELDS;
    seed = seed * 1103515245u + 12345u;
    const char *country = countries[(seed >> 8) % 10];
    const char *path = paths[(seed >> 12) % 8];
    const char *ua = uas[(seed >> 16) % 7];
    for (int k = 0; k < NFIELDS; k++) {
      const char *val = "x";
      if (strcmp(keys[k], "country") == 0) val = country;
      if (strcmp(keys[k], "path") == 0) val = path;
      if (strcmp(keys[k], "ua") == 0) val = ua;
      e[k].key = value_str(keys[k], (uint32_t)strlen(keys[k]));
      e[k].val = value_str(val, (uint32_t)strlen(val));
    }
    ctxs[i] = value_map(e, NFIELDS);
    flats[i] = (flat){country, path, ua, strlen(country), strlen(path), strlen(ua)};
  }

  size_t nb = (size_t)rounds * (NCTX / BATCH);
  series s_expr = {"verdict (compiled CEL)", calloc(nb, sizeof(double)), 0};
  series s_maps = {"C, map lookups", calloc(nb, sizeof(double)), 0};
  series s_flat = {"C, struct fields (floor)", calloc(nb, sizeof(double)), 0};

  char buf[4096];
  arena a;
  arena_init(&a, buf, sizeof buf, 0);
  eval_ctx ectx = {.arena = &a};
  bind b;
  expr_activation act = {.lookup = lookup, .user = &b};
  volatile long sink = 0;
  long mismatches = 0, trues = 0;

  for (size_t i = 0; i < NCTX; i++) {
    b.ctx = &ctxs[i];
    value r = expr_eval(prog, &act, &ectx);
    int want = by_hand_maps(&ctxs[i]);
    if (r.kind != V_BOOL || r.b != want || by_hand_struct(&flats[i]) != want) mismatches++;
    trues += want;
  }

  for (int round = 0; round < rounds; round++) {
    for (size_t start = 0; start < NCTX; start += BATCH) {
      double t0 = now_ns();
      for (size_t i = start; i < start + BATCH; i++) {
        b.ctx = &ctxs[i];
        value r = expr_eval(prog, &act, &ectx);
        sink += r.b;
      }
      double t1 = now_ns();
      for (size_t i = start; i < start + BATCH; i++) sink += by_hand_maps(&ctxs[i]);
      double t2 = now_ns();
      for (size_t i = start; i < start + BATCH; i++) sink += by_hand_struct(&flats[i]);
      double t3 = now_ns();
      s_expr.samples[s_expr.n++] = (t1 - t0) / BATCH;
      s_maps.samples[s_maps.n++] = (t2 - t1) / BATCH;
      s_flat.samples[s_flat.n++] = (t3 - t2) / BATCH;
    }
  }

  printf("bench-expr: %d rounds x %d contexts (%ld true), batches of %d\n", rounds, NCTX, trues,
         BATCH);
  printf("  condition: %s\n", src);
  qsort(s_maps.samples, s_maps.n, sizeof(double), cmp_double);
  double base = s_maps.samples[s_maps.n / 2];
  report(&s_maps, base);
  report(&s_expr, base);
  report(&s_flat, base);
  printf("  arena bytes used by evaluation: %zu, mallocs: %zu\n", a.used, a.mallocs);
  printf("  disagreements with hand-written C: %ld\n", mismatches);
  expr_free(prog);
  arena_free(&a);
  free(entries);
  free(ctxs);
  free(flats);
  free(s_expr.samples);
  free(s_maps.samples);
  free(s_flat.samples);
  return mismatches || a.used ? 1 : 0;
}
