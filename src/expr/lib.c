/* lib.c — the registry of built-in functions: one table made of the four
 * library tables (core, strings, time, net), grouped by name.
 *
 * The compiler asks for "every overload named X" and expects them side by
 * side, in the order their library lists them (the first overload whose kinds
 * accept the arguments wins, so order within a name matters). The library
 * tables are separate arrays whose sizes are unknown here, so the merged
 * table is built once, on first use, under pthread_once: after that it is
 * immutable and shared by every thread, like the tables it is made from.
 * Lookup is a binary search over the names.
 *
 * Not here: the functions themselves (lib_*.c) or overload choice at run
 * time (eval.c). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "expr/lib.h"

typedef struct registry {
  builtin *entries; /* grouped by name (sorted), each group in table order; zeroed last entry */
  uint32_t count;
} registry;

static registry reg;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static uint32_t table_len(const builtin *t) {
  uint32_t n = 0;
  while (t[n].name) n++;
  return n;
}

static int name_cmp(const char *a, size_t alen, const char *b) {
  size_t blen = strlen(b);
  size_t m = alen < blen ? alen : blen;
  int c = memcmp(a, b, m);
  if (c) return c;
  return (alen > blen) - (alen < blen);
}

/* Sorted by name, then by place in the tables (so each name's overloads
 * keep their order): runs once per process, and a process that decides
 * once (an agent's hook) should not pay for qsort's calls of strcmp. So
 * each name's first 8 bytes, as a number that orders like the bytes,
 * decide most comparisons, and a merge sort (stable: place breaks ties)
 * does about n log2 n of them. */
typedef struct reg_key {
  uint64_t head; /* the name's first 8 bytes, big-endian, zero-padded */
  const char *name;
} reg_key;

static int key_less(const reg_key *k, uint32_t i, uint32_t j) {
  if (k[i].head != k[j].head) return k[i].head < k[j].head;
  int c = strcmp(k[i].name, k[j].name);
  return c ? c < 0 : i < j;
}

/* order[0..n) sorted; tmp has room for n. */
static void merge_sort(const reg_key *k, uint32_t *order, uint32_t *tmp, uint32_t n) {
  for (uint32_t width = 1; width < n; width *= 2) {
    for (uint32_t lo = 0; lo < n; lo += 2 * width) {
      uint32_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
      uint32_t a = lo, b = mid, o = lo;
      while (a < mid && b < hi)
        tmp[o++] = key_less(k, order[b], order[a]) ? order[b++] : order[a++];
      while (a < mid) tmp[o++] = order[a++];
      while (b < hi) tmp[o++] = order[b++];
    }
    memcpy(order, tmp, (size_t)n * sizeof *order);
  }
}

static void registry_build(void) {
  extern const builtin lib_shell_builtins[]; /* shellCommands, shellWords, shellWrites */
  const builtin *tables[] = {lib_core_builtins, lib_strings_builtins, lib_time_builtins,
                             lib_net_builtins, lib_shell_builtins};
  uint32_t total = 0;
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) total += table_len(tables[t]);
  const builtin **all = malloc(((size_t)total + 1) * sizeof *all);
  reg_key *keys = malloc(((size_t)total + 1) * sizeof *keys);
  uint32_t *order = malloc(2 * ((size_t)total + 1) * sizeof *order);
  builtin *e = calloc((size_t)total + 1, sizeof *e);
  if (!all || !keys || !order || !e) { /* reg stays empty: every function is then unknown */
    free(all);
    free(keys);
    free(order);
    free(e);
    return;
  }
  uint32_t n = 0;
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (const builtin *b = tables[t]; b->name; b++) {
      uint64_t head = 0;
      int stop = 0;
      for (int c = 0; c < 8; c++) {
        uint8_t ch = stop ? 0 : (uint8_t)b->name[c];
        stop = stop || ch == 0;
        head = head << 8 | ch;
      }
      keys[n] = (reg_key){head, b->name};
      order[n] = n;
      all[n++] = b;
    }
  merge_sort(keys, order, order + total + 1, n);
  for (uint32_t i = 0; i < n; i++) e[i] = *all[order[i]];
  free(all);
  free(keys);
  free(order);
  reg.entries = e;
  reg.count = n;
}

static const registry *registry_get(void) {
  pthread_once(&reg_once, registry_build);
  return &reg;
}

const builtin *builtin_table(void) {
  static const builtin empty[1];
  const registry *r = registry_get();
  return r->entries ? r->entries : empty;
}

uint32_t builtin_lookup(const char *name, uint32_t len, const builtin **first) {
  const registry *r = registry_get();
  *first = NULL;
  uint32_t lo = 0, hi = r->count;
  while (lo < hi) { /* first entry whose name is >= name */
    uint32_t mid = lo + (hi - lo) / 2;
    if (name_cmp(name, len, r->entries[mid].name) > 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  uint32_t end = lo;
  while (end < r->count && name_cmp(name, len, r->entries[end].name) == 0) end++;
  if (end == lo) return 0;
  *first = &r->entries[lo];
  return end - lo;
}
