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
 * short or of an older layout is written again); old ones go as "keeping
 * the store small" (at the end) says.
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
 * For a lazy load the store also keeps each strategy version's compiled
 * programs (compiled/, below), so that a process that decides once neither
 * parses nor compiles the lets and rules it evaluates.
 *
 * Not here: when the cache is used (bundle.c: a store must be configured;
 * `verdict check` and `verdict test` keep none, so they always parse). */
#define _GNU_SOURCE /* memmem */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/dtoa.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/utf8.h"
#include "expr/image.h"
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

/* A cache entry is "used" when its modification time says so (see
 * "keeping the store small"): one found older than this is touched, so
 * that a use costs at most one futimens an hour per file, not a write. */
#define TIDY_TOUCH_AFTER 3600

static void touch_if_stale(int fd, const struct stat *st) {
  int64_t now = clock_wall_ns() / 1000000000;
  if (now - st->st_mtim.tv_sec > TIDY_TOUCH_AFTER)
    (void)futimens(fd, NULL); /* best effort: another user's store stays as it is */
}

static char *read_small(const char *path, size_t max, size_t *len, int touch) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 0 || (size_t)st.st_size > max) {
    close(fd);
    return NULL;
  }
  if (touch) touch_if_stale(fd, &st);
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

/* The file at path mapped read-only, a NUL after its last byte (the rest of
 * its last page is zeros; a file that fills its last page exactly is read
 * into an anonymous mapping instead). Mapped, not read: a hook read the
 * 160 KB stored form of agent_guard into fresh pages (40 page faults) only
 * to check its CRC and find a name in it. Give it back with
 * parse_cache_put_back (munmap of len + 1 bytes). */
static char *map_text(const char *path, size_t max, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  char *at = MAP_FAILED;
  const long page = sysconf(_SC_PAGESIZE);
  if (fstat(fd, &st) == 0 && st.st_size >= 0 && (size_t)st.st_size <= max && page > 0) {
    size_t n = (size_t)st.st_size;
    if (n % (size_t)page != 0) {
      at = mmap(NULL, n + 1, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    } else {
      at = mmap(NULL, n + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      size_t got = 0;
      while (at != MAP_FAILED && got < n) {
        ssize_t r = read(fd, at + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
          munmap(at, n + 1);
          at = MAP_FAILED;
          break;
        }
        got += (size_t)r;
      }
    }
    *len = n;
  }
  close(fd);
  return at == MAP_FAILED ? NULL : at;
}

char *parse_cache_get(const char *store, const char *key, char version[65], size_t *len,
                      uint32_t *crc) {
  char path[4400];
  snprintf(path, sizeof path, "%s/parsed/%s", store, key);
  size_t vlen = 0;
  char *v = read_small(path, 128, &vlen, 1);
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
  if (!ok) { /* not an entry this code writes: removed, so that it is written again */
    unlink(path);
    return NULL;
  }
  snprintf(path, sizeof path, "%s/%s.json", store, version);
  char *canon = map_text(path, 64u << 20, len);
  if (canon && snapshot_crc32c(0, canon, *len) != want) { /* changed since it was verified */
    parse_cache_put_back(canon, *len);
    return NULL;
  }
  *crc = want;
  return canon;
}

void parse_cache_put_back(char *canon, size_t len) {
  if (canon) munmap(canon, len + 1);
}

int parse_cache_put(const char *store, const char *key, const char *version) {
  char dir[4400], err[256], line[80], path[4400], digest[65];
  /* The stored form, checked once here against the digest it is named by;
   * its CRC32C in the entry then catches any later change to it cheaply. */
  snprintf(path, sizeof path, "%s/%.64s.json", store, version);
  size_t len = 0;
  char *canon = read_small(path, 64u << 20, &len, 0);
  if (!canon) return 0;
  sha256_hex(canon, len, digest);
  uint32_t crc = snapshot_crc32c(0, canon, len);
  free(canon);
  if (strncmp(digest, version, 64) != 0) {
    /* damaged, yet of the right size (the store keeps those): removed, so
     * that the next load that parses the file writes it again, whole */
    unlink(path);
    return 0;
  }
  snprintf(dir, sizeof dir, "%s/parsed", store);
  snprintf(line, sizeof line, "%.64s\n%08" PRIx32 "\n", version, crc);
  return policy_store_put_as(dir, key, "", line, 74, err, sizeof err) == 0; /* best effort */
}

/* The tree yaml.c would have built, from the canonical JSON's values:
 * scalars keep their value and the text a YAML loader would hold. */
static ynode *from_value(arena *a, const value *v, int depth) {
  if (depth > YAML_MAX_DEPTH) return NULL;
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

ynode *parse_cache_tree(arena *a, const char *canon, size_t len, int without_tests,
                        cache_hints *hints) {
  json_opts jo = {0};
  jo.lenient = 1;
  value v;
  /* Without the tests (most of the bytes), the rest is read alone: the
   * member is cut out of a copy before json_parse builds anything. Where
   * it is, and that the tree is faithful, a load of this very text by this
   * very build may already have found (hints, from compiled/ below). */
  uint32_t tests_at = UINT32_MAX;
  size_t cut_from = 0, cut_to = 0;
  char *rest = NULL;
  const int known = without_tests && hints && hints->known && hints->cut_from <= hints->cut_to &&
                    hints->cut_to <= len;
  if (known) {
    cut_from = (size_t)hints->cut_from;
    cut_to = (size_t)hints->cut_to;
    tests_at = hints->tests_at;
  }
  if (without_tests && (known || find_tests(canon, len, &cut_from, &cut_to, &tests_at) == 0) &&
      (rest = arena_alloc(a, len - (cut_to - cut_from) + 1)) != NULL) {
    memcpy(rest, canon, cut_from);
    memcpy(rest + cut_from, canon + cut_to, len - cut_to);
    rest[len - (cut_to - cut_from)] = '\0';
    if (json_parse(a, rest, len - (cut_to - cut_from), &jo, &v, NULL) != 0 || v.kind != V_MAP)
      return NULL;
    uint32_t found_at = tests_at;
    if (tests_at == UINT32_MAX) tests_at = v.n; /* the last member */
    if (tests_at > v.n) return NULL;
    ynode *root = from_value(a, &v, 0);
    if (!root || (!known && !same_but_tests(root, tests_at, canon, len))) return NULL;
    if (hints && !known) *hints = (cache_hints){cut_from, cut_to, found_at, 1};
    return root;
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

/* ---- compiled/: the programs of a lazy strategy ----
 *
 * A lazy load still compiled every let and rule a decision reached, and for
 * an agent's hook that was most of its work, the same every call. So the
 * first lazy load of a version compiles all of them and keeps their images
 * (src/expr/image.h) in one file, compiled/<version>-<fingerprint>; later
 * loads map the file and rebuild a program from its image when a decision
 * first needs it (a store the process cannot write gets no file, and
 * nothing is compiled ahead). The fingerprint names the build (image.h),
 * so a different verdict never reads another's images; the version names
 * the strategy's canonical form, constants included.
 *
 *   "VDPROGS4", u32 lets, u32 rules, u32 CRC32C of all that follows these
 *   20 bytes; the stored form it was made from: u32 CRC32C, u64 length;
 *   the hints (below): u64 cut from, u64 cut to, u32 tests member index,
 *   u32 1 when known; the tree: u64 offset, u64 length (0: none); per let
 *   then per rule: u32 offset, u32 length (0: none, that one is compiled
 *   as before), u32 bytes of memory its program takes, u32 offset and u32
 *   length of its regexes' compiled code (image.h, expr_image_write_codes;
 *   0: none); per rule a byte, 1 when a part of its condition is one the
 *   rule index can use (policy_rule.index_part: a rule without one is not
 *   parsed by a later load, which trusts the file); the tree; the images
 *   (each read back once before it is kept), each followed by its codes.
 *
 * The file is used only with the stored form it was made from (its CRC32C
 * and length: a stored form edited by hand, under the same version name,
 * has its programs compiled again). It also saves a later load
 * parse_cache_tree's work on that text: the tree it gave (without the
 * tests), node by node — kind, style, text and value, checked as they are
 * read like everything else here (but for the texts' UTF-8, and the images'
 * strings', in a file of this user's that no one else may write: its CRC
 * says it is the bytes this build wrote, and checked, itself) — and, should that be refused, where
 * the `tests` member is and that the tree read without it writes back to the stored bytes: facts
 * about this text and this build's code (the fingerprint), found once by the load that wrote the
 * file.
 *
 * A file whose CRC, counts or table do not hold is removed (and written
 * again by the load that found it), and so is one whose tree gives a
 * strategy with errors (bundle.c); an image that image.c refuses is
 * compiled from its text instead. The file is mapped, not read: a hook
 * touches most of it once, and page-cache pages mapped many at a time cost
 * less than fresh ones filled by read(). */

#define COMPILED_MAGIC "VDPROGS6"
#define COMPILED_ENTRY 20 /* bytes a let or rule takes in the table */
#define COMPILED_HEAD 72

static void compiled_name(char *name, size_t n, const char *version) {
  snprintf(name, n, "%.64s-%s", version, expr_image_fingerprint());
}

/* A mapped compiled/ file, kept until the bundle is freed. */
struct compiled_map {
  void *at;
  size_t len;
  struct compiled_map *next;
  int own; /* this user's file, that no one else may write: its regex codes are used */
};

/* The whole file at path, mapped read-only (NULL when absent, empty or
 * unreadable). Mapped rather than read: a hook touches most of the file
 * once, and pages of the page cache mapped many at a time cost far less
 * than fresh pages written by read(). */
static char *map_file(const char *path, size_t max, size_t *len, int *own) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  void *at = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_size > 0 && (size_t)st.st_size <= max)
    at = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (at != MAP_FAILED) touch_if_stale(fd, &st);
  close(fd);
  if (at == MAP_FAILED) return NULL;
  *len = (size_t)st.st_size;
  *own = st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH));
  return at;
}

void compiled_cache_release(policy_bundle *b) {
  for (struct compiled_map *m = b->maps; m; m = m->next) munmap(m->at, m->len);
  b->maps = NULL;
}

static uint32_t rd32(const char *p) {
  uint32_t x;
  memcpy(&x, p, 4);
  return x;
}

static uint64_t rd64(const char *p) {
  uint64_t x;
  memcpy(&x, p, 8);
  return x;
}

/* The tree as bytes: per node its kind and style; a collection's count and
 * its nodes (a map's keys and values in turn); a scalar's value kind and
 * flags, 8 bytes of payload (bool, int, uint, double) and its text, NUL
 * included. */
static void tree_put(json_buf *b, const ynode *y) {
  uint8_t h[2] = {y->kind, y->style};
  json_buf_put(b, (const char *)h, 2);
  if (y->kind != Y_SCALAR) {
    json_buf_put(b, (const char *)&y->n, 4);
    uint64_t count = y->kind == Y_MAP ? 2 * (uint64_t)y->n : y->n;
    for (uint64_t i = 0; i < count; i++) tree_put(b, y->kids[i]);
    return;
  }
  uint8_t k[2] = {y->v.kind, y->v.flags};
  uint64_t payload = y->v.kind == V_BOOL ? (uint64_t)y->v.b : y->v.kind == V_STRING ? 0 : y->v.u;
  json_buf_put(b, (const char *)k, 2);
  json_buf_put(b, (const char *)&payload, 8);
  json_buf_put(b, (const char *)&y->len, 4);
  json_buf_put(b, y->text, y->len);
  json_buf_putc(b, '\0'); /* so that the text is used where it lies */
}

typedef struct tree_rd {
  const char *p, *end;
  int trusted; /* this user's own file, its CRC checked: its UTF-8 is as written */
} tree_rd;

static int tree_take(tree_rd *r, void *out, size_t n) {
  if ((size_t)(r->end - r->p) < n) return -1;
  memcpy(out, r->p, n);
  r->p += n;
  return 0;
}

/* The tree from its bytes, in a, its texts where they lie in the mapped
 * file; NULL when the bytes are not one from_value could have made. */
static ynode *tree_get(tree_rd *r, arena *a, int depth) {
  uint8_t h[2];
  if (depth > YAML_MAX_DEPTH || tree_take(r, h, 2) || h[0] > Y_MAP) return NULL;
  ynode *y = arena_zalloc(a, sizeof *y);
  if (!y) return NULL;
  y->kind = h[0];
  y->style = h[1];
  if (y->kind != Y_SCALAR) {
    if (y->style != YS_BLOCK || tree_take(r, &y->n, 4)) return NULL;
    uint64_t count = y->kind == Y_MAP ? 2 * (uint64_t)y->n : y->n;
    if (count > (uint64_t)(r->end - r->p) / 2) return NULL; /* 2 bytes a node at least */
    y->kids = count ? arena_alloc(a, (size_t)count * sizeof *y->kids) : NULL;
    if (count && !y->kids) return NULL;
    for (uint64_t i = 0; i < count; i++) {
      if (!(y->kids[i] = tree_get(r, a, depth + 1))) return NULL;
      if (y->kind == Y_MAP && i % 2 == 0 && y->kids[i]->kind != Y_SCALAR) return NULL;
    }
    return y;
  }
  uint8_t k[2];
  uint64_t payload;
  if (tree_take(r, k, 2) || tree_take(r, &payload, 8) || tree_take(r, &y->len, 4) ||
      y->len >= (size_t)(r->end - r->p) || r->p[y->len] != '\0')
    return NULL;
  const char *text = r->p; /* in the mapped file, which outlives the tree */
  r->p += y->len + 1;
  y->text = text;
  int ascii = 0;
  if (!r->trusted && utf8_validate(text, y->len, &ascii) != y->len) return NULL;
  switch (k[0]) {
    case V_STRING:
      if (y->style != YS_DOUBLE || (k[1] & ~VF_ASCII) ||
          (!r->trusted && (k[1] & VF_ASCII) && !ascii))
        return NULL;
      y->v = value_str(text, y->len);
      y->v.flags = k[1];
      return y;
    case V_NULL:
      y->v = value_null();
      break;
    case V_BOOL:
      if (payload > 1) return NULL;
      y->v = value_bool(payload == 1);
      break;
    case V_INT:
    case V_UINT:
    case V_DOUBLE:
      y->v.kind = k[0];
      y->v.u = payload;
      break;
    default:
      return NULL;
  }
  return y->style == YS_PLAIN && k[1] == 0 ? y : NULL;
}

ynode *compiled_cache_tree(const compiled_map *m, arena *a) {
  const char *f = m->at;
  uint64_t off = rd64(f + 56), len = rd64(f + 64);
  if (!len || off > m->len || len > m->len - off) return NULL;
  tree_rd r = {f + off, f + off + len, m->own};
  ynode *root = tree_get(&r, a, 0);
  return root && root->kind == Y_MAP && r.p == r.end ? root : NULL;
}

const compiled_map *compiled_cache_open(policy_bundle *b, const char *version, uint32_t canon_crc,
                                        size_t canon_len, const char *store, cache_hints *hints) {
  char name[128], path[4400];
  compiled_name(name, sizeof name, version);
  snprintf(path, sizeof path, "%s/compiled/%s", store, name);
  size_t len = 0;
  struct compiled_map *m = arena_alloc(&b->mem, sizeof *m);
  int own = 0;
  char *f = m ? map_file(path, 1u << 30, &len, &own) : NULL;
  if (!f) return NULL;
  *m = (struct compiled_map){f, len, b->maps, own};
  b->maps = m;
  /* damaged, of another layout, or of another text under this version (a
   * stored form edited by hand): this load writes it again */
  if (len < COMPILED_HEAD || memcmp(f, COMPILED_MAGIC, 8) != 0 ||
      snapshot_crc32c(0, f + 20, len - 20) != rd32(f + 16) || rd32(f + 20) != canon_crc ||
      rd64(f + 24) != canon_len) {
    unlink(path);
    return NULL;
  }
  *hints = (cache_hints){rd64(f + 32), rd64(f + 40), rd32(f + 48), rd32(f + 52) == 1};
  return m;
}

void compiled_cache_drop(const char *store, const char *version) {
  char name[128], path[4400];
  compiled_name(name, sizeof name, version);
  snprintf(path, sizeof path, "%s/compiled/%s", store, name);
  unlink(path);
}

int compiled_cache_own(const compiled_map *m) { return m->own; }

const uint8_t *compiled_cache_rule_parts(const compiled_map *m, uint32_t *n) {
  const char *f = m->at;
  uint64_t nlets = rd32(f + 8), nrules = rd32(f + 12);
  uint64_t at = COMPILED_HEAD + COMPILED_ENTRY * (nlets + nrules);
  *n = 0;
  if (at > m->len || nrules > m->len - at) return NULL;
  *n = (uint32_t)nrules;
  return (const uint8_t *)f + at;
}

int compiled_cache_attach(const compiled_map *m, strategy *s, const char *store) {
  const char *f = m->at;
  const size_t len = m->len;
  const uint64_t n = (uint64_t)s->nlets + s->nrules,
                 table_end = COMPILED_HEAD + COMPILED_ENTRY * n + s->nrules; /* and rule parts */
  int ok = rd32(f + 8) == s->nlets && rd32(f + 12) == s->nrules && table_end <= len;
  for (uint64_t i = 0; ok && i < n; i++) {
    const char *e = f + COMPILED_HEAD + COMPILED_ENTRY * i;
    uint32_t off = rd32(e), l = rd32(e + 4), coff = rd32(e + 12), cl = rd32(e + 16);
    ok = (!l || (off >= table_end && off <= len && l <= len - off)) &&
         (!cl || (l && coff >= table_end && coff <= len && cl <= len - coff));
  }
  if (!ok) {
    compiled_cache_drop(store, s->version);
    return 0;
  }
  for (uint32_t i = 0; i < n; i++) {
    const char *e = f + COMPILED_HEAD + COMPILED_ENTRY * (size_t)i;
    uint32_t off = rd32(e), l = rd32(e + 4), cl = rd32(e + 16);
    policy_lazy *lz = i < s->nlets ? (policy_lazy *)&s->lets[i].lazy
                                   : (policy_lazy *)&s->rules[i - s->nlets].lazy;
    lz->image = l ? f + off : NULL;
    lz->image_len = l;
    lz->image_mem = l ? rd32(e + 8) : 0;
    /* PCRE2 trusts a code it decodes: only from a file this user wrote
     * and no one else may change (the CRC guards against damage, not
     * against another user writing a shared store) */
    lz->codes = cl && m->own ? f + rd32(e + 12) : NULL;
    lz->codes_len = lz->codes ? cl : 0;
    lz->trusted = l && m->own;
  }
  return 1;
}

int compiled_cache_fill(strategy *s, const ynode *root, uint32_t canon_crc, size_t canon_len,
                        const char *store, const cache_hints *hints) {
  /* A store this process cannot write (another user's, read-only): then
   * compiling everything now would be work for nothing, every time. */
  char dir[4400];
  snprintf(dir, sizeof dir, "%s/compiled", store);
  if (access(dir, W_OK) != 0 && (errno != ENOENT || access(store, W_OK) != 0)) return 0;
  int wrote = 0;
  const uint32_t n = s->nlets + s->nrules;
  arena why_mem;
  arena_init(&why_mem, NULL, 0, 0);
  json_buf out;
  json_buf_init(&out, NULL);
  char head[COMPILED_HEAD];
  cache_hints h = hints ? *hints : (cache_hints){0, 0, 0, 0};
  memcpy(head, COMPILED_MAGIC, 8);
  memcpy(head + 8, &s->nlets, 4);
  memcpy(head + 12, &s->nrules, 4);
  uint64_t clen = canon_len;
  memset(head + 16, 0, 4);
  memcpy(head + 20, &canon_crc, 4);
  memcpy(head + 24, &clen, 8);
  memcpy(head + 32, &h.cut_from, 8);
  memcpy(head + 40, &h.cut_to, 8);
  memcpy(head + 48, &h.tests_at, 4);
  memcpy(head + 52, &h.known, 4);
  memset(head + 56, 0, 16);
  json_buf_put(&out, head, sizeof head);
  for (uint32_t i = 0; i < COMPILED_ENTRY / 4 * n; i++)
    json_buf_put(&out, "\0\0\0\0", 4); /* the table, below */
  for (uint32_t i = 0; i < s->nrules; i++) json_buf_putc(&out, s->rules[i].index_part ? 1 : 0);
  if (root && !out.oom) {
    uint64_t at = out.len;
    tree_put(&out, root);
    uint64_t tl = out.len - at;
    if (!out.oom) {
      memcpy(out.data + 56, &at, 8);
      memcpy(out.data + 64, &tl, 8);
    }
  }
  for (uint32_t i = 0; i < n && !out.oom; i++) {
    const char *why = NULL;
    const expr_program *p = i < s->nlets ? strategy_let_program(s, i, &why_mem, &why)
                                         : strategy_rule_program(s, i - s->nlets, &why_mem, &why);
    if (!p) continue; /* compiled from its text by whoever needs it */
    size_t at = out.len, mem = 0;
    expr_image_write(p, &out);
    if (out.oom || out.len > UINT32_MAX) break;
    /* kept only when it reads back, with what its program takes */
    if (expr_image_check(out.data + at, out.len - at, &STRATEGY_EXPR_OPTS_LATER, &mem) ||
        mem > UINT32_MAX) {
      out.len = at;
      continue;
    }
    size_t codes = out.len;
    expr_image_write_codes(p, &out);
    if (out.oom || out.len > UINT32_MAX) break;
    uint32_t e[5] = {(uint32_t)at, (uint32_t)(codes - at), (uint32_t)mem, (uint32_t)codes,
                     (uint32_t)(out.len - codes)};
    memcpy(out.data + COMPILED_HEAD + COMPILED_ENTRY * (size_t)i, e, sizeof e);
  }
  if (!out.oom && out.len <= UINT32_MAX) {
    uint32_t crc = snapshot_crc32c(0, out.data + 20, out.len - 20);
    memcpy(out.data + 16, &crc, 4);
    char name[128], err[256];
    compiled_name(name, sizeof name, s->version);
    wrote = policy_store_put_as(dir, name, "", out.data, out.len, err, sizeof err) == 0;
  }
  json_buf_free(&out);
  arena_free(&why_mem);
  return wrote;
}

/* ---- keeping the store small ----
 *
 * parsed/ and compiled/ are caches: everything in them can be made again,
 * from the strategy files and the stored forms, by one parse or one
 * compile. They grow with every edit (a parsed/ entry per edited file, a
 * compiled/ file of ~100 KB per strategy version) and every verdict build
 * (compiled/ files are per build), so a user editing policies under an
 * agent's hook all day, or rebuilding verdict, would pile up megabytes. The
 * stored forms themselves (<store>/<version>.json) and models/ are the
 * record replay needs: they are never removed here.
 *
 * When: by a load that has just written an entry to either cache, once at
 * its end (policy_store_tidy), so the usual call — which finds everything and
 * writes nothing — never lists a folder. The store grows only by such
 * writes, so it is checked exactly when it may have grown.
 *
 * Use: a file's modification time. It is set when the file is written and
 * brought up to date when a load uses a file whose time is more than an
 * hour old (read_small, map_file: one futimens per file per hour at most,
 * on a descriptor already open; the hot path writes nothing else). The
 * access time would need no write but is not kept on most mounts
 * (relatime, noatime).
 *
 * What goes, in this order:
 *  - a temporary file left by a writer that died (".NAME.XXXXXX", not
 *    changed for an hour: a live writer renames its file within a second);
 *  - a compiled/ file of another build not used for a day: that build has
 *    been replaced (a rebuild makes a new fingerprint) or is not in use; one
 *    used daily (a second verdict beside this one) keeps its files;
 *  - any entry not used for 30 days;
 *  - then, beyond 64 files or 16 MiB in compiled/ (1024 entries in parsed/),
 *    the least recently used, other builds' files first. 64 files of ~125
 *    KB (8 MB) hold a dozen bundles of five strategies for two builds; a
 *    parsed/ entry is 74 bytes, a disk block, so 1024 are a few MB.
 * Never the entries the load that tidies has just used: its files' parsed/
 * keys and its strategy versions' compiled/ files of this build, which would
 * only be written again by the next call. Names this code does not write
 * are left alone.
 *
 * Safe beside other processes: a file is only ever unlinked, never
 * truncated or rewritten in place. A reader that has the file mapped or
 * open keeps reading it (Linux keeps an unlinked file's pages until the
 * last reference goes); one that comes after finds no file and compiles or
 * parses, as on a first load, writing the file again. Writers write a
 * temporary file and rename it, so a file being written is never seen
 * under its name, and its temporary name is left alone for an hour. Two
 * processes tidying at once unlink the same names; the second's unlink
 * fails and is ignored. A writer renaming a fresh file over a name just
 * chosen for removal loses that file: the next load writes it again. */

#define TIDY_TEMP_AGE 3600
#define TIDY_OTHER_BUILD_AGE (24 * 3600)
#define TIDY_UNUSED_AGE (30 * 24 * 3600)
#define TIDY_COMPILED_FILES 64
#define TIDY_COMPILED_BYTES (16u << 20)
#define TIDY_PARSED_FILES 1024

typedef struct tidy_file {
  char name[160];
  time_t mtime;
  uint64_t bytes;
  int other; /* 1: a compiled/ file of another build */
} tidy_file;

static int is_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return 1;
}

/* What a compiled/ or parsed/ name is: 1 an entry (*other set for a
 * compiled/ file of another build), 2 a writer's temporary file, 0 a name
 * this code does not write. */
static int tidy_kind(const char *name, int compiled, const char *fingerprint, int *other) {
  size_t n = strlen(name);
  int temp = 0;
  char base[160];
  if (name[0] == '.') { /* ".NAME.XXXXXX" (policy_store_put_as) */
    if (n < 9 || n - 8 >= sizeof base || name[n - 7] != '.') return 0;
    memcpy(base, name + 1, n - 8);
    base[n - 8] = '\0';
    name = base;
    n -= 8;
    temp = 1;
  }
  if (n < 64 || !is_hex(name, 64)) return 0;
  if (!compiled) return n == 64 ? 1 + temp : 0;
  if (n < 66 || name[64] != '-') return 0;
  *other = strcmp(name + 65, fingerprint) != 0;
  return 1 + temp;
}

static int by_eviction(const void *pa, const void *pb) {
  const tidy_file *a = pa, *b = pb;
  if (a->other != b->other) return b->other - a->other; /* other builds' first */
  return (a->mtime > b->mtime) - (a->mtime < b->mtime); /* then the least recently used */
}

static int kept(const char *name, const char *const *keep, size_t nkeep) {
  for (size_t i = 0; i < nkeep; i++)
    if (strcmp(name, keep[i]) == 0) return 1;
  return 0;
}

/* Tidies one folder of store (compiled/ or parsed/): removes what the
 * rules above say (everything, with POLICY_STORE_ALL; nothing, only
 * counting, with POLICY_STORE_DRY) and adds what it found to *st. */
static void tidy_dir(const char *store, int compiled, const char *const *keep, size_t nkeep,
                     unsigned flags, time_t now, policy_store_stats *st) {
  char dir[4400], path[4400 + 258];
  snprintf(dir, sizeof dir, "%s/%s", store, compiled ? "compiled" : "parsed");
  DIR *dh = opendir(dir);
  if (!dh) return;
  const char *fp = expr_image_fingerprint();
  const int all = (flags & POLICY_STORE_ALL) != 0, dry = (flags & POLICY_STORE_DRY) != 0;
  tidy_file *files = NULL;
  size_t n = 0, cap = 0;
  uint64_t count = 0, bytes = 0, other_count = 0, other_bytes = 0, gone = 0, gone_bytes = 0;
  struct dirent *de;
  while ((de = readdir(dh))) {
    int other = 0, kind = strlen(de->d_name) < sizeof files->name
                              ? tidy_kind(de->d_name, compiled, fp, &other)
                              : 0;
    struct stat sb;
    if (!kind || fstatat(dirfd(dh), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(sb.st_mode))
      continue;
    const time_t age = now - sb.st_mtim.tv_sec;
    const int keep_it = kind == 1 && kept(de->d_name, keep, nkeep);
    const int go = kind == 2 ? age > TIDY_TEMP_AGE
                             : !keep_it && (all || (other && age > TIDY_OTHER_BUILD_AGE) ||
                                            age > TIDY_UNUSED_AGE);
    if (kind == 2 && !go) continue; /* being written */
    if (go) {
      other_count += kind == 1 && other;
      other_bytes += kind == 1 && other ? (uint64_t)sb.st_size : 0;
      snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
      if (dry || unlink(path) == 0) {
        gone++;
        gone_bytes += (uint64_t)sb.st_size;
      }
      continue;
    }
    count++;
    bytes += (uint64_t)sb.st_size;
    other_count += other;
    other_bytes += other ? (uint64_t)sb.st_size : 0;
    if (keep_it) continue; /* counted, never evicted */
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 64;
      tidy_file *nf = realloc(files, nc * sizeof *nf);
      if (!nf) break; /* tidied less, this time */
      files = nf;
      cap = nc;
    }
    tidy_file *f = &files[n++];
    memcpy(f->name, de->d_name, strlen(de->d_name) + 1); /* shorter than name: above */
    f->mtime = sb.st_mtim.tv_sec;
    f->bytes = (uint64_t)sb.st_size;
    f->other = other;
  }
  closedir(dh);
  const uint64_t max_files = compiled ? TIDY_COMPILED_FILES : TIDY_PARSED_FILES;
  const uint64_t max_bytes = compiled ? TIDY_COMPILED_BYTES : UINT64_MAX;
  if (n > 1) qsort(files, n, sizeof *files, by_eviction);
  size_t first = 0; /* files[first..n) stay */
  for (; first < n && (count > max_files || bytes > max_bytes); first++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[first].name);
    if (!dry && unlink(path) != 0) continue;
    count--;
    bytes -= files[first].bytes;
    gone++;
    gone_bytes += files[first].bytes;
  }
  free(files);
  if (compiled) {
    st->compiled += count;
    st->compiled_bytes += bytes;
    st->compiled_other += other_count;
    st->compiled_other_bytes += other_bytes;
    st->compiled_removed += gone;
    st->compiled_removed_bytes += gone_bytes;
  } else {
    st->parsed += count;
    st->parsed_bytes += bytes;
    st->parsed_removed += gone;
    st->parsed_removed_bytes += gone_bytes;
  }
}

void policy_store_tidy(const char *store, const char *const *keys, size_t nkeys,
                       const policy_bundle *b, unsigned flags, policy_store_stats *st) {
  memset(st, 0, sizeof *st);
  if (!store || !*store) return;
  const time_t now = time(NULL);
  tidy_dir(store, 0, keys, nkeys, flags, now, st);
  /* this load's strategies, by their compiled/ names */
  const uint32_t ns = b ? b->nstrategies : 0;
  char(*names)[160] = ns ? malloc(ns * sizeof *names) : NULL;
  const char **keep = ns ? malloc(ns * sizeof *keep) : NULL;
  size_t nkeep = 0;
  for (uint32_t i = 0; names && keep && i < ns; i++) {
    compiled_name(names[i], sizeof names[i], b->strategies[i].version);
    keep[nkeep++] = names[i];
  }
  if (nkeep == ns) /* else out of memory: not knowing what to keep, nothing goes */
    tidy_dir(store, 1, keep, nkeep, flags, now, st);
  free(names);
  free(keep);
}
