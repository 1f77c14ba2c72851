/* cache.c — strategy files read back from the version store instead of
 * being parsed again.
 *
 * Why: a process that loads a bundle to make one decision and exit — an
 * agent's hook, `verdict decide` — spent half its time in libfyaml and in
 * building our YAML tree (the inline tests are most of a strategy file's
 * bytes). The version store already holds each strategy's canonical form
 * (JSON, version.c), which our JSON reader turns into the same tree many
 * times faster; what is missing is knowing, without reading the file, which
 * version a file is. So the store keeps `parsed/<key>`, where the key is the
 * SHA-256 of the file's path, device, inode, size and modification and
 * change times, and the content is the version the file compiled to (and a
 * checksum, below). Any edit, copy or move changes the key; a key never
 * changes meaning, so entries are written once and never updated (one cut
 * short or of an older layout is written again); old ones are a few bytes
 * each, left for whoever cleans the store.
 *
 * The entry also holds the CRC32C of the stored form, which was checked
 * against its SHA-256 name when the entry was written: a stored form changed
 * since (a damaged disk, a hand edit) is not used, at the cost of a CRC
 * rather than a digest on every load.
 *
 * Only files that loaded without a single diagnostic are cached — a cached
 * tree has no source positions (line and column 0), which only diagnostics
 * would show. A cached tree is checked before use: written back in canonical
 * form it must give exactly the stored bytes, or the file is parsed as usual.
 * A lazy load (policy_load_opts.lazy), which keeps no tests, leaves the
 * top-level `tests` out of the tree and checks every byte but that value's:
 * the inline tests are most of a strategy file, and nothing reads them.
 *
 * Not here: when the cache is used (bundle.c: a store must be configured;
 * `verdict check` and `verdict test` keep none, so they always parse). */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dtoa.h"
#include "core/json.h"
#include "core/sha256.h"
#include "policy/internal.h"
#include "snapshot/snapshot.h" /* snapshot_crc32c */

void parse_cache_key(const char *path, const struct stat *st, char key[65]) {
  char buf[4400];
  int n =
      snprintf(buf, sizeof buf, "%s\n%ju %ju %jd %jd.%09ld %jd.%09ld", path, (uintmax_t)st->st_dev,
               (uintmax_t)st->st_ino, (intmax_t)st->st_size, (intmax_t)st->st_mtim.tv_sec,
               st->st_mtim.tv_nsec, (intmax_t)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof buf) n = (int)sizeof buf - 1;
  sha256_hex(buf, (size_t)n, key);
}

static char *read_small(const char *path, size_t max, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 0 || (size_t)st.st_size > max) {
    close(fd);
    return NULL;
  }
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n + 1);
  size_t got = 0;
  while (buf && got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      free(buf);
      buf = NULL;
      break;
    }
    got += (size_t)r;
  }
  close(fd);
  if (!buf) return NULL;
  buf[n] = '\0';
  *len = n;
  return buf;
}

char *parse_cache_get(const char *store, const char *key, char version[65], size_t *len) {
  char path[4400];
  snprintf(path, sizeof path, "%s/parsed/%s", store, key);
  size_t vlen = 0;
  char *v = read_small(path, 128, &vlen);
  if (!v) return NULL;
  /* "<version>\n<crc32c of the stored form, 8 hex digits>\n" */
  int ok = vlen == 74 && v[64] == '\n' && v[73] == '\n';
  for (size_t i = 0; ok && i < 73; i++)
    ok = i == 64 || (v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f');
  uint32_t want = 0;
  if (ok) {
    memcpy(version, v, 64);
    version[64] = '\0';
    want = (uint32_t)strtoul(v + 65, NULL, 16);
  }
  free(v);
  if (!ok) return NULL;
  snprintf(path, sizeof path, "%s/%s.json", store, version);
  char *canon = read_small(path, 64u << 20, len);
  if (canon && snapshot_crc32c(0, canon, *len) != want) { /* changed since it was verified */
    free(canon);
    return NULL;
  }
  return canon;
}

void parse_cache_put(const char *store, const char *key, const char *version) {
  char dir[4400], err[256], line[80], path[4400], digest[65];
  /* The stored form, checked once here against the digest it is named by;
   * its CRC32C in the entry then catches any later change to it cheaply. */
  snprintf(path, sizeof path, "%s/%.64s.json", store, version);
  size_t len = 0;
  char *canon = read_small(path, 64u << 20, &len);
  if (!canon) return;
  sha256_hex(canon, len, digest);
  uint32_t crc = snapshot_crc32c(0, canon, len);
  free(canon);
  if (strncmp(digest, version, 64) != 0) {
    /* damaged, yet of the right size (the store keeps those): removed, so
     * that the next load that parses the file writes it again, whole */
    unlink(path);
    return;
  }
  snprintf(dir, sizeof dir, "%s/parsed", store);
  snprintf(line, sizeof line, "%.64s\n%08" PRIx32 "\n", version, crc);
  (void)policy_store_put_as(dir, key, "", line, 74, err, sizeof err); /* best effort */
}

/* The tree yaml.c would have built, from the canonical JSON's values:
 * scalars keep their value and the text a YAML loader would hold. */
static ynode *from_value(arena *a, const value *v, int depth) {
  if (depth > 256) return NULL;
  ynode *y = arena_zalloc(a, sizeof *y);
  if (!y) return NULL;
  switch (v->kind) {
    case V_MAP: {
      y->kind = Y_MAP;
      y->style = YS_BLOCK;
      y->n = v->n;
      y->kids = v->n ? arena_alloc(a, 2 * (size_t)v->n * sizeof *y->kids) : NULL;
      if (v->n && !y->kids) return NULL;
      for (uint32_t i = 0; i < v->n; i++) {
        ynode *k = from_value(a, &v->entries[i].key, depth + 1);
        ynode *x = from_value(a, &v->entries[i].val, depth + 1);
        if (!k || !x || k->kind != Y_SCALAR) return NULL;
        y->kids[2 * i] = k;
        y->kids[2 * i + 1] = x;
      }
      return y;
    }
    case V_LIST: {
      y->kind = Y_SEQ;
      y->style = YS_BLOCK;
      y->n = v->n;
      y->kids = v->n ? arena_alloc(a, (size_t)v->n * sizeof *y->kids) : NULL;
      if (v->n && !y->kids) return NULL;
      for (uint32_t i = 0; i < v->n; i++)
        if (!(y->kids[i] = from_value(a, &v->items[i], depth + 1))) return NULL;
      return y;
    }
    default:
      break;
  }
  y->kind = Y_SCALAR;
  y->style = YS_PLAIN;
  char t[48];
  const char *text = t;
  size_t n;
  switch (v->kind) {
    case V_STRING:
      y->style = YS_DOUBLE;
      text = v->s;
      n = v->n;
      break;
    case V_INT:
      n = (size_t)snprintf(t, sizeof t, "%" PRId64, v->i);
      break;
    case V_UINT:
      n = (size_t)snprintf(t, sizeof t, "%" PRIu64, v->u);
      break;
    case V_DOUBLE:
      n = isnan(v->d)   ? (size_t)snprintf(t, sizeof t, ".nan")
          : isinf(v->d) ? (size_t)snprintf(t, sizeof t, "%s", v->d > 0 ? ".inf" : "-.inf")
                        : dtoa_shortest(v->d, t);
      break;
    case V_BOOL:
      n = (size_t)snprintf(t, sizeof t, "%s", v->b ? "true" : "false");
      break;
    case V_NULL:
      n = (size_t)snprintf(t, sizeof t, "null");
      break;
    default:
      return NULL;
  }
  char *s = arena_strndup(a, text, n);
  if (!s) return NULL;
  y->text = s;
  y->len = (uint32_t)n;
  y->v = *v;
  if (v->kind == V_STRING) y->v.s = s;
  return y;
}

/* The same check for a tree whose `tests` member was left out: what is
 * around that member's value must be the canonical form of the rest. The
 * value's own bytes are then not checked — nothing reads them (a lazy load
 * keeps no tests), and the bytes that are read are all checked. */
static int same_but_tests(const ynode *root, uint32_t tests_at, const char *canon, size_t len) {
  json_buf b;
  json_buf_init(&b, NULL);
  size_t mid = 0;
  json_buf_putc(&b, '{');
  for (uint32_t i = 0; i < root->n + 1; i++) {
    if (i) json_buf_putc(&b, ',');
    if (i == tests_at) {
      json_buf_put(&b, "\"tests\":", 8);
      mid = b.len;
      continue;
    }
    uint32_t k = i < tests_at ? i : i - 1;
    const ynode *key = root->kids[2 * k];
    json_write_string(&b, key->text, key->len);
    json_buf_putc(&b, ':');
    size_t n = 0;
    char *v = policy_canonical_json(root->kids[2 * k + 1], &n);
    if (!v) b.oom = 1;
    if (v) json_buf_put(&b, v, n);
    free(v);
  }
  json_buf_putc(&b, '}');
  size_t tail = b.len - mid;
  int same = !b.oom && len > b.len && memcmp(canon, b.data, mid) == 0 &&
             memcmp(canon + len - tail, b.data + mid, tail) == 0;
  json_buf_free(&b);
  return same;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Past the closing quote of the JSON string whose body starts at s[i], or
 * 0 when it has none: from quote to quote (memchr), an escaped one passed. */
static size_t skip_string(const char *s, size_t len, size_t i) {
  while (i < len) {
    const char *q = memchr(s + i, '"', len - i);
    if (!q) return 0;
    size_t at = (size_t)(q - s), bs = 0;
    while (at - bs > i && s[at - bs - 1] == '\\') bs++;
    if (bs % 2 == 0) return at + 1;
    i = at + 1;
  }
  return 0;
}

/* Past the JSON value at s[i] (any kind, whitespace before it skipped),
 * or 0 when there is none. Only finds where the value ends: json_parse
 * judges the rest. */
static size_t skip_value(const char *s, size_t len, size_t i) {
  while (i < len && is_ws(s[i])) i++;
  if (i >= len) return 0;
  size_t depth = 0;
  do {
    char c = s[i++];
    if (c == '"') {
      if (!(i = skip_string(s, len, i))) return 0;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (depth-- == 0) return 0;
    } else if (depth == 0) { /* a number, true, false, null */
      while (i < len && s[i] != ',' && s[i] != '}' && s[i] != ']' && !is_ws(s[i])) i++;
    }
  } while (depth > 0 && i < len);
  return depth ? 0 : i;
}

/* Where the top-level member "tests" of the object canon[0..len) is:
 * [*from, *to) covers it and one comma beside it, so that what is left is
 * the object without it; *index is its place among the members. 0, or -1
 * when there is none (or the text is not an object). */
static int find_tests(const char *s, size_t len, size_t *from, size_t *to, uint32_t *index) {
  /* Where a file keeps its tests, last: a `,"tests":` (outside any string,
   * as a quote inside one is escaped) whose value ends at the closing brace
   * of the whole text is the top-level member (the brace after a member's
   * value closes that member's object), and only its value is scanned.
   * *index is then the members' count, known once the rest is read:
   * UINT32_MAX says so. There is at most one such; the first occurrence is
   * almost always it. */
  static const char key[] = ",\"tests\":";
  const char *p = s;
  while (len > 10 && s[len - 1] == '}' &&
         (p = memmem(p, len - (size_t)(p - s), key, sizeof key - 1)) != NULL) {
    size_t c = (size_t)(p - s);
    if (skip_value(s, len, c + sizeof key - 1) == len - 1) {
      *from = c;
      *to = len - 1;
      *index = UINT32_MAX;
      return 0;
    }
    p++;
  }
  size_t i = 0;
  if (len < 2 || s[0] != '{') return -1;
  i = 1;
  size_t comma = 0; /* the comma before this member (k > 0) */
  for (uint32_t k = 0;; k++) {
    while (i < len && is_ws(s[i])) i++;
    size_t at = i, key_end = skip_value(s, len, i);
    if (!key_end || s[at] != '"') return -1;
    i = key_end;
    while (i < len && is_ws(s[i])) i++;
    if (i >= len || s[i] != ':') return -1;
    size_t end = skip_value(s, len, i + 1);
    if (!end) return -1;
    while (end < len && is_ws(s[end])) end++;
    if (end >= len || (s[end] != ',' && s[end] != '}')) return -1;
    if (key_end - at == 7 && memcmp(s + at, "\"tests\"", 7) == 0) {
      if (s[end] == ',') { /* its comma after it, else the one before it */
        end++;
      } else if (k > 0) {
        at = comma;
      }
      *from = at;
      *to = end;
      *index = k;
      return 0;
    }
    if (s[end] == '}') return -1;
    comma = end;
    i = end + 1;
  }
}

ynode *parse_cache_tree(arena *a, const char *canon, size_t len, int without_tests) {
  json_opts jo = {0};
  jo.lenient = 1;
  value v;
  /* Without the tests (most of the bytes), the rest is read alone: the
   * member is cut out of a copy before json_parse builds anything. */
  uint32_t tests_at = UINT32_MAX;
  size_t cut_from = 0, cut_to = 0;
  char *rest = NULL;
  if (without_tests && find_tests(canon, len, &cut_from, &cut_to, &tests_at) == 0 &&
      (rest = arena_alloc(a, len - (cut_to - cut_from) + 1)) != NULL) {
    memcpy(rest, canon, cut_from);
    memcpy(rest + cut_from, canon + cut_to, len - cut_to);
    rest[len - (cut_to - cut_from)] = '\0';
    if (json_parse(a, rest, len - (cut_to - cut_from), &jo, &v, NULL) != 0 || v.kind != V_MAP)
      return NULL;
    if (tests_at == UINT32_MAX) tests_at = v.n; /* the last member */
    if (tests_at > v.n) return NULL;
    ynode *root = from_value(a, &v, 0);
    return root && same_but_tests(root, tests_at, canon, len) ? root : NULL;
  }
  tests_at = UINT32_MAX;
  if (json_parse(a, canon, len, &jo, &v, NULL) != 0 || v.kind != V_MAP) return NULL;
  for (uint32_t i = 0; without_tests && i < v.n && tests_at == UINT32_MAX; i++) {
    const value *k = &v.entries[i].key;
    if (k->kind == V_STRING && k->n == 5 && memcmp(k->s, "tests", 5) == 0) tests_at = i;
  }
  ynode *root = NULL;
  map_entry *e = tests_at != UINT32_MAX ? arena_alloc(a, v.n * sizeof *e) : NULL;
  if (e) { /* the rest of the document, as a tree */
    memcpy(e, v.entries, tests_at * sizeof *e);
    memcpy(e + tests_at, v.entries + tests_at + 1, (v.n - tests_at - 1) * sizeof *e);
    v = value_map(e, v.n - 1);
  }
  if (tests_at == UINT32_MAX || e) root = from_value(a, &v, 0);
  if (!root) return NULL;
  if (tests_at != UINT32_MAX) return same_but_tests(root, tests_at, canon, len) ? root : NULL;
  /* the same tree, or none: its canonical form must be the stored bytes */
  size_t n = 0;
  char *again = policy_canonical_json(root, &n);
  int same = again && n == len && memcmp(again, canon, len) == 0;
  free(again);
  return same ? root : NULL;
}
