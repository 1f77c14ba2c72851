/* lib_shell.h — what the shell reader's two files share (lib_shell.c reads
 * words, lines and bodies; lib_shell_wrap.c knows the wrappers that run
 * their arguments as a command). Private to them: nothing else includes it.
 * The reader itself is described at the top of lib_shell.c. */
#ifndef VD_EXPR_LIB_SHELL_H
#define VD_EXPR_LIB_SHELL_H

#include <string.h>

#include "expr/lib.h"

#define MAX_INPUT (256u << 10)
#define MAX_DEPTH 16
#define MAX_COMMANDS 4096
#define MAX_VARS 64

typedef struct sbuf {
  char *s;
  size_t n, cap;
} sbuf;

typedef struct word {
  sbuf t;
  int eq_at;   /* index of the '=' of NAME=value written unquoted, else -1 */
  int any;     /* something was read (an empty "" is a word) */
  int name_ok; /* only identifier characters so far, unquoted */
} word;

typedef struct wlist {
  value *v;
  uint32_t n, cap;
} wlist;

typedef struct heredoc {
  const char *delim;
  size_t dn;
  int strip_tabs, quoted;
} heredoc;

typedef struct parser {
  eval_ctx *ctx;
  arena *a;
  wlist cmds;   /* list values (argv) */
  wlist writes; /* strings */
  wlist reads;  /* strings: files input redirections read (< FILE) */
  /* The words an echo or printf writes into the pipe before the command
   * being finished, or a here-string's: xargs and parallel read them as
   * their arguments. */
  const struct word *feed;
  uint32_t nfeed;
  int feed_printf;
  wlist dirs; /* strings: where each command of cmds runs, "" when not known */
  /* The working directory the next command runs in: absolute ("/x") or
   * home-relative ("~/x"), normalised; NULL when not known. */
  const char *dir;
  size_t dn;
  int keep_dir; /* the next parse_line runs in this shell (eval): its cd stays */
  struct {
    const char *name, *val;
    size_t nn, vn;
  } vars[MAX_VARS];
  int nvars;
  const char *err; /* first error, or NULL */
} parser;

typedef struct argv_t {
  word *w;
  uint32_t n, cap;
} argv_t;

static inline int wis(const word *w, const char *lit) {
  size_t l = strlen(lit);
  return w->t.n == l && (l == 0 || memcmp(w->t.s, lit, l) == 0);
}

static inline int in_set(const word *w, const char *const *set) {
  for (; *set; set++)
    if (wis(w, *set)) return 1;
  return 0;
}

/* Programs that are shells: their -c BODY, here-strings and heredocs are
 * command lines (lib_shell_wrap.c). */
extern const char *const shell_names[];

int shell_oom(parser *p);
int shell_sb_put(parser *p, sbuf *b, const char *s, size_t n);
int shell_sb_putc(parser *p, sbuf *b, char c);
/* Parses one command line (a -c body, an eval's words) into p's lists. */
int shell_parse_line(parser *p, const char *s, size_t n, int depth);
/* path joined to dir without the file system (see lib_shell.c). */
int shell_path_join(arena *a, const char *dir, size_t dn, const char *path, size_t pn, char **out,
                    size_t *on);
/* A finished simple command: listed, then looked into. */
int shell_emit(parser *p, word *w, uint32_t n, int depth);
/* The commands a wrapper (sudo, env, xargs, sh -c, find -exec, ...) runs,
 * listed through shell_emit / shell_parse_line (lib_shell_wrap.c). */
int shell_unwrap(parser *p, word *w, uint32_t n, int depth);

#endif
