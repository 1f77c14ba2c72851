/* arena.c — see arena.h. Chunks form a singly linked list, newest first; the
 * header sits at the start of each chunk so one malloc serves both. */
#include "core/arena.h"

#include <stdlib.h>
#include <string.h>

struct arena_chunk {
  arena_chunk *next;
  size_t size; /* bytes after the header */
};

#define ARENA_MIN_CHUNK 4096
#define ARENA_MAX_CHUNK (1u << 20)

void arena_init(arena *a, void *buf, size_t buf_size, size_t limit) {
  memset(a, 0, sizeof *a);
  a->first = buf;
  a->first_size = buf ? buf_size : 0;
  a->ptr = buf;
  a->end = buf ? (char *)buf + buf_size : NULL;
  a->limit = limit;
  a->next_chunk = ARENA_MIN_CHUNK;
}

void arena_first_chunk(arena *a, size_t size) {
  if (!a->chunks) a->next_chunk = size < 256 ? 256 : size;
}

static size_t align_for(size_t size) { return size >= 16 ? 16 : 8; }

static char *align_ptr(char *p, size_t al) {
  uintptr_t u = (uintptr_t)p;
  return (char *)((u + (al - 1)) & ~(uintptr_t)(al - 1));
}

/* Not inlined: arena_alloc is called for nearly every node and string the
 * parser and compiler make, and with this folded in it saves and restores
 * registers on every call for the sake of the rare one that mallocs. */
__attribute__((noinline)) static void *arena_slow(arena *a, size_t size, size_t al) {
  size_t want = size + al + sizeof(arena_chunk);
  size_t csize = a->next_chunk;
  while (csize < want) csize *= 2;
  arena_chunk *c = malloc(csize);
  if (!c) return NULL;
  a->mallocs++;
  c->size = csize - sizeof *c;
  c->next = a->chunks;
  a->chunks = c;
  if (a->next_chunk < ARENA_MAX_CHUNK) a->next_chunk *= 2;
  char *p = align_ptr((char *)(c + 1), al);
  a->ptr = p + size;
  a->end = (char *)(c + 1) + c->size;
  return p;
}

void *arena_alloc(arena *a, size_t size) {
  if (size == 0) size = 1;
  if (a->limit && (size > a->limit || a->used > a->limit - size)) return NULL;
  size_t al = align_for(size);
  char *p = a->ptr ? align_ptr(a->ptr, al) : NULL;
  a->used += size;
  if (p && p <= a->end && (size_t)(a->end - p) >= size) {
    a->ptr = p + size;
    return p;
  }
  return arena_slow(a, size, al);
}

void *arena_zalloc(arena *a, size_t size) {
  void *p = arena_alloc(a, size);
  if (p) memset(p, 0, size);
  return p;
}

char *arena_strndup(arena *a, const char *s, size_t len) {
  char *p = arena_alloc(a, len + 1);
  if (!p) return NULL;
  if (len) memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

void *arena_memdup(arena *a, const void *src, size_t len) {
  void *p = arena_alloc(a, len);
  if (p && len) memcpy(p, src, len);
  return p;
}

void *arena_realloc(arena *a, void *p, size_t old_size, size_t new_size) {
  if (p && (char *)p + old_size == a->ptr && new_size >= old_size &&
      (size_t)(a->end - (char *)p) >= new_size) {
    size_t extra = new_size - old_size;
    if (a->limit && (extra > a->limit || a->used > a->limit - extra)) return NULL;
    a->ptr += extra;
    a->used += extra;
    return p;
  }
  void *q = arena_alloc(a, new_size);
  if (q && p) memcpy(q, p, old_size < new_size ? old_size : new_size);
  return q;
}

void arena_reset(arena *a) {
  /* Keep the newest (largest) chunk; free older ones. */
  arena_chunk *keep = a->chunks;
  if (keep) {
    arena_chunk *c = keep->next;
    while (c) {
      arena_chunk *n = c->next;
      free(c);
      c = n;
    }
    keep->next = NULL;
  }
  a->used = 0;
  if (a->first) {
    a->ptr = a->first;
    a->end = a->first + a->first_size;
    /* The kept chunk is only reached once the first buffer is full; simpler to drop it. */
    if (keep) {
      free(keep);
      a->chunks = NULL;
    }
  } else if (keep) {
    a->ptr = (char *)(keep + 1);
    a->end = a->ptr + keep->size;
  } else {
    a->ptr = a->end = NULL;
  }
}

void arena_free(arena *a) {
  arena_chunk *c = a->chunks;
  while (c) {
    arena_chunk *n = c->next;
    free(c);
    c = n;
  }
  a->chunks = NULL;
  a->ptr = a->end = NULL;
  a->used = 0;
}
