/* redis.c — counters kept in a Redis server, shared by several nodes.
 *
 * One Lua script does what local.c does for one key, atomically on the
 * server (Redis runs a script to the end before any other command): read
 * the key's TAT and penalty end, compute the count, apply the rule of
 * state.h, move the TAT and start the penalty. A counter is one key,
 * `vd:{KEY}`, a string "TAT PENALTY_END"; it expires when both have passed,
 * so Redis holds only live counters. The spacing T is computed here (the
 * same function as the local store's) and passed to the script.
 *
 * Times are the deciding node's clock (the decision's own reading, the one
 * its snapshot records), in whole microseconds, as in the local store: Lua
 * numbers are doubles, exact for integers to 2^53 (today's time in
 * microseconds is about 2^51). The script's count is a division corrected
 * by one multiplication, so it is the integer ceiling, not a rounded one.
 * Nodes sharing a Redis need clocks in step (NTP).
 *
 * Connections: a small pool under a mutex, each connection with a connect
 * and a command timeout. A command that fails or times out closes its
 * connection and the caller falls back (store.c); after a failure no new
 * connection is tried for RETRY_MS, so a Redis that is down costs a
 * decision nothing but the fallback.
 *
 * Not here: what a decision does when Redis fails (store.c). */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "core/clock.h"
#include "state/internal.h"

#define POOL_MAX 64
#define RETRY_MS 1000

static const char SCRIPT[] =
    "local now = tonumber(ARGV[1]) local t = tonumber(ARGV[2])\n"
    "local budget = tonumber(ARGV[3]) local penalty = tonumber(ARGV[4])\n"
    "local tat, pu = 0, 0\n"
    "local v = redis.call('GET', KEYS[1])\n"
    "if v then\n"
    "  local a, b = string.match(v, '^(%-?%d+) (%-?%d+)$')\n"
    "  tat = tonumber(a) or 0 pu = tonumber(b) or 0\n"
    "end\n"
    "local count = 0\n"
    "if tat > now then\n"
    "  local d = tat - now\n"
    "  count = math.floor(d / t)\n"
    "  if count * t < d then count = count + 1 end\n"
    "end\n"
    "local penalized = now < pu\n"
    "local exceeded = penalized or count >= budget\n"
    "local charged = ARGV[5] == '1' and not exceeded\n"
    "if charged then\n"
    "  if tat < now then tat = now end\n"
    "  tat = tat + t\n"
    "  if count + 1 >= budget and penalty > 0 then pu = now + penalty end\n"
    "  local e = tat if pu > e then e = pu end\n"
    "  redis.call('SET', KEYS[1], string.format('%d %d', tat, pu), 'PX',\n"
    "             math.floor((e - now) / 1000) + 1)\n"
    "end\n"
    "return {count, penalized and 1 or 0, charged and 1 or 0}\n";

struct redis_store {
  char host[256];
  int port, db;
  struct timeval timeout;
  pthread_mutex_t lock;
  redisContext *pool[POOL_MAX];
  int npool;
  char sha[41]; /* the script's SHA1 once loaded, "" before */
  _Atomic int64_t retry_after_ms;
};

static int64_t mono_ms(void) { return (int64_t)(clock_mono_ns() / 1000000u); }

redis_store *redis_open(const char *url, uint32_t timeout_ms, char *err, size_t errlen) {
  const char *p = url + strlen("redis://");
  const char *colon = strrchr(p, ':');
  const char *slash = strchr(p, '/');
  redis_store *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  size_t hl = colon ? (size_t)(colon - p) : slash ? (size_t)(slash - p) : strlen(p);
  char *end = NULL;
  long port = 6379, db = 0;
  if (colon) {
    port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || (*end && *end != '/') || port < 1 || port > 65535) goto bad;
  }
  if (slash) {
    db = strtol(slash + 1, &end, 10);
    if (end == slash + 1 || *end || db < 0 || db > 1000000) goto bad;
  }
  if (hl == 0 || hl >= sizeof r->host) goto bad;
  memcpy(r->host, p, hl);
  r->port = (int)port;
  r->db = (int)db;
  r->timeout.tv_sec = timeout_ms / 1000;
  r->timeout.tv_usec = (timeout_ms % 1000) * 1000;
  pthread_mutex_init(&r->lock, NULL);
  return r;
bad:
  free(r);
  snprintf(err, errlen,
           "'%s' is not a Redis address: use redis://HOST:PORT or redis://HOST:PORT/DB", url);
  return NULL;
}

void redis_close(redis_store *r) {
  if (!r) return;
  for (int i = 0; i < r->npool; i++) redisFree(r->pool[i]);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

static int load_script(redis_store *r, redisContext *c) {
  redisReply *rep = redisCommand(c, "SCRIPT LOAD %s", SCRIPT);
  int ok = rep && rep->type == REDIS_REPLY_STRING && rep->len == 40;
  if (ok) {
    pthread_mutex_lock(&r->lock);
    memcpy(r->sha, rep->str, 40);
    r->sha[40] = '\0';
    pthread_mutex_unlock(&r->lock);
  }
  if (rep) freeReplyObject(rep);
  return ok ? 0 : -1;
}

/* A pooled connection, or a new one; NULL when Redis is unreachable. */
static redisContext *take(redis_store *r) {
  pthread_mutex_lock(&r->lock);
  redisContext *c = r->npool ? r->pool[--r->npool] : NULL;
  pthread_mutex_unlock(&r->lock);
  if (c) return c;
  if (mono_ms() < atomic_load(&r->retry_after_ms)) return NULL;
  c = redisConnectWithTimeout(r->host, r->port, r->timeout);
  if (!c || c->err || redisSetTimeout(c, r->timeout) != REDIS_OK) goto fail;
  if (r->db) {
    redisReply *rep = redisCommand(c, "SELECT %d", r->db);
    int ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep) freeReplyObject(rep);
    if (!ok) goto fail;
  }
  if (load_script(r, c) != 0) goto fail;
  return c;
fail:
  if (c) redisFree(c);
  atomic_store(&r->retry_after_ms, mono_ms() + RETRY_MS);
  return NULL;
}

static void give_back(redis_store *r, redisContext *c) {
  pthread_mutex_lock(&r->lock);
  if (r->npool < POOL_MAX) {
    r->pool[r->npool++] = c;
    c = NULL;
  }
  pthread_mutex_unlock(&r->lock);
  if (c) redisFree(c);
}

int redis_hit(redis_store *r, const char *key, size_t klen, const limit_spec *sp, int64_t now_ns,
              bool charge, limit_reading *out) {
  memset(out, 0, sizeof *out);
  redisContext *c = take(r);
  if (!c) return -1;
  char *k1 = malloc(klen + 8);
  if (!k1) {
    give_back(r, c);
    return -1;
  }
  memcpy(k1, "vd:{", 4);
  memcpy(k1 + 4, key, klen);
  k1[4 + klen] = '}';
  char sha[41];
  pthread_mutex_lock(&r->lock);
  memcpy(sha, r->sha, sizeof sha);
  pthread_mutex_unlock(&r->lock);
  long long now_us = now_ns / 1000, t_us = gcra_spacing_us(sp), pen_us = sp->penalty_ns / 1000;
  redisReply *rep = NULL;
  for (int attempt = 0; attempt < 2; attempt++) {
    rep = redisCommand(c, "EVALSHA %s 1 %b %lld %lld %u %lld %d", sha, k1, klen + 5, now_us, t_us,
                       sp->budget, pen_us, charge ? 1 : 0);
    if (rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0 &&
        attempt == 0) {
      freeReplyObject(rep);
      rep = NULL;
      if (load_script(r, c) != 0) break;
      pthread_mutex_lock(&r->lock);
      memcpy(sha, r->sha, sizeof sha);
      pthread_mutex_unlock(&r->lock);
      continue;
    }
    break;
  }
  free(k1);
  int ok = rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 &&
           rep->element[0]->type == REDIS_REPLY_INTEGER &&
           rep->element[1]->type == REDIS_REPLY_INTEGER &&
           rep->element[2]->type == REDIS_REPLY_INTEGER;
  if (ok) {
    out->count = (uint32_t)rep->element[0]->integer;
    out->penalized = rep->element[1]->integer != 0;
    state_apply(sp, charge, out); /* the same rule the script applied */
    out->charged = rep->element[2]->integer != 0;
  }
  if (rep) freeReplyObject(rep);
  if (!ok || c->err) {
    redisFree(c);
    if (!ok) atomic_store(&r->retry_after_ms, mono_ms() + RETRY_MS);
    return ok ? 0 : -1;
  }
  give_back(r, c);
  return 0;
}
