/* arena.h — bump allocator for per-decision and per-compile work.
 *
 * Everything a decision or a compile needs is carved from one arena and
 * released in one step (arena_reset / arena_free). Allocation is a pointer
 * bump in the current chunk; a new chunk (doubling, capped) is malloc'd only
 * when the current one is full. A caller may hand in a first buffer (e.g. on
 * the stack) so that small decisions never touch malloc at all.
 *
 * An arena may carry a byte limit: past it, arena_alloc returns NULL and the
 * caller turns that into an error. Not thread-safe: one arena, one thread. */
#ifndef VD_CORE_ARENA_H
#define VD_CORE_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct arena_chunk arena_chunk;

typedef struct arena {
  char *ptr;          /* next free byte in the current chunk */
  char *end;          /* end of the current chunk */
  arena_chunk *chunks; /* malloc'd chunks, newest first */
  char *first;        /* caller's initial buffer (not owned), or NULL */
  size_t first_size;
  size_t used;        /* bytes handed out since init/reset */
  size_t limit;       /* 0 = unlimited */
  size_t next_chunk;  /* size of the next chunk to malloc */
  size_t mallocs;     /* chunks malloc'd since init (for zero-alloc checks) */
} arena;

/* buf may be NULL. limit 0 means no limit. */
void arena_init(arena *a, void *buf, size_t buf_size, size_t limit);
/* The size of the first chunk malloc'd (default 4 KiB; at least 256 bytes):
 * smaller for the many small arenas that live long, like compiled programs. */
void arena_first_chunk(arena *a, size_t size);
/* Aligned to 8 bytes (16 for sizes >= 16). Returns NULL past the limit or on OOM. */
void *arena_alloc(arena *a, size_t size);
void *arena_zalloc(arena *a, size_t size);
/* Copies len bytes and appends a NUL (not counted in len). */
char *arena_strndup(arena *a, const char *s, size_t len);
void *arena_memdup(arena *a, const void *p, size_t len);
/* Grows the most recent allocation in place when possible, else copies. */
void *arena_realloc(arena *a, void *p, size_t old_size, size_t new_size);
/* Keeps the largest chunk for reuse, frees the rest; everything handed out is invalid. */
void arena_reset(arena *a);
void arena_free(arena *a);

#endif
