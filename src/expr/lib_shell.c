/* lib_shell.c — reading shell command lines the way a POSIX shell would, for
 * rules about what a coding agent's shell command does:
 *
 *   shellCommands(s) / s.shellCommands()  list(list(string)): every simple
 *       command the line would run, each as its argv after quote removal
 *   shellWords(s) / s.shellWords()        list(string): every argv word of
 *       every command, every redirection target and here-string word
 *   shellWrites(s) / s.shellWrites()      list(string): files written by
 *       output redirections (> >> >| &> N>), /dev/null included
 *   shellDirs(s, cwd)                     list(string): for each command of
 *       shellCommands, the directory it runs in ("" when not known)
 *   resolvePath(dir, path)                string: path made absolute against
 *       dir and normalised, without reading the file system
 *
 * Why by hand: a rule like "recursive rm outside the project" is only as good
 * as its view of the command, and regexes over the raw text are fooled by
 * quoting ("r""m" -rf /), wrappers (sudo, env, xargs, bash -c '…'), chains
 * and cd. This is a small recursive reader, not a shell: it never expands
 * globs, runs nothing, and reads no environment.
 *
 * What it sees through: ; && || | & newlines ( ) { } and the reserved words
 * (if/then/while/do/…, function NAME); single, double and $'…' quotes and
 * backslashes; $(…), `…` and <(…) bodies, also inside $(( … )) (their
 * commands are listed too); heredocs and here-strings fed to a shell, and
 * substitutions inside unquoted heredocs; `sh/bash/zsh -c BODY`, `eval ARGS`,
 * su/script -c, watch and parallel lines (BODY parsed as a command line);
 * wrappers that run their arguments — sudo, doas, env (also env -S STRING
 * ARGS and env -C DIR), command, exec, nohup, time, nice, ionice, timeout,
 * stdbuf, setsid, xargs, parallel, busybox, watch, flock, strace, chronic
 * and others — whose inner command is listed after the wrapper's own; find's
 * -exec/-execdir/-ok/-okdir commands; commands run elsewhere (docker/kubectl
 * exec, ssh HOST CMD, ansible -a) in an unknown directory; xargs and parallel
 * fed by echo/printf through a pipe, a here-string or ::: ARGS, whose command
 * is listed once per input (echo / | xargs -I{} rm -rf {} lists rm -rf /);
 * leading NAME=value assignments (dropped from argv); NAME=value statements
 * earlier in the line, whose $NAME and ${NAME} are substituted later in it
 * (X=rm; $X -rf / lists rm -rf /). A program named by a path becomes its base
 * name (/bin/rm, ./../bin/rm → rm).
 *
 * The working directory: cd, pushd and env -C move the commands after them
 * in the same shell; a subshell's cd ends at its ")", and a substitution, an
 * sh -c body or a heredoc fed to a shell starts where its caller is and does
 * not move it (eval's line runs in this shell and does). cd to a place only
 * known at run time ($X, -, popd) makes the directory unknown.
 *
 * What stays unknown, and is left visible for rules to treat as suspect: any
 * other $VAR (kept as the text "$VAR"), command output "$(…)" used as a word
 * (kept as its text), the value of arithmetic, globs, aliases and functions
 * called by name, and what xargs reads from anything but echo and printf.
 *
 * Bounds: input up to 256 KiB, 16 levels of nesting, 4096 commands; past
 * them the call is an evaluation error (a rule then takes on_error), never a
 * crash. Work is charged to the decision's cost limit per byte read. */
#include "expr/lib_shell.h"

int shell_oom(parser *p) {
  if (!p->err) p->err = "out of memory";
  return -1;
}

int shell_sb_put(parser *p, sbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 32;
    while (nc < b->n + n + 1) nc *= 2;
    char *ns = arena_realloc(p->a, b->s, b->cap, nc);
    if (!ns) return shell_oom(p);
    b->s = ns;
    b->cap = nc;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
  return 0;
}

int shell_sb_putc(parser *p, sbuf *b, char c) { return shell_sb_put(p, b, &c, 1); }

static int wl_push(parser *p, wlist *l, value v) {
  if (l->n == l->cap) {
    uint32_t nc = l->cap ? l->cap * 2 : 8;
    value *nv = arena_alloc(p->a, nc * sizeof *nv);
    if (!nv) return shell_oom(p);
    if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
    l->v = nv;
    l->cap = nc;
  }
  l->v[l->n++] = v;
  return 0;
}

static int is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_ident(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Joins path to dir as the kernel would resolve it, without looking at the
 * file system (no symlinks are followed): empty and "." parts are dropped,
 * ".." removes the part before it and stops at "/". A path starting with "~"
 * keeps "~" (or "~user") as its root, and a ".." above that root stays, so
 * the result still reads as "somewhere in or above a home directory". A
 * relative path against a directory that is not known (dir NULL, or not
 * absolute nor home-relative) has no result: *out is NULL. */
int shell_path_join(arena *a, const char *dir, size_t dn, const char *path, size_t pn, char **out,
                    size_t *on) {
  *out = NULL;
  *on = 0;
  const char *src = path, *extra = NULL;
  size_t sn = pn, en = 0;
  if (!(pn && (path[0] == '/' || path[0] == '~'))) {
    if (!dir || !dn || (dir[0] != '/' && dir[0] != '~')) return 0;
    src = dir, sn = dn, extra = path, en = pn;
  }
  char *b = arena_alloc(a, sn + en + 4);
  if (!b) return -1;
  size_t bn = 0, root, k = 0;
  if (src[0] == '/') {
    b[bn++] = '/';
    k = 1;
  } else {
    while (k < sn && src[k] != '/') b[bn++] = src[k++];
  }
  root = bn;
  for (int part = 0; part < 2; part++) {
    const char *t = part ? extra : src;
    size_t tn = part ? en : sn, i = part ? 0 : k;
    if (!t) break;
    while (i < tn) {
      size_t e = i;
      while (e < tn && t[e] != '/') e++;
      size_t cn = e - i;
      int up = cn == 2 && t[i] == '.' && t[i + 1] == '.';
      if (cn == 0 || (cn == 1 && t[i] == '.')) {
        /* nothing */
      } else if (up && bn > root && !(bn >= 3 && memcmp(b + bn - 3, "/..", 3) == 0)) {
        while (b[bn - 1] != '/') bn--; /* the last part */
        if (bn > 1) bn--;              /* its slash, but not the root "/" */
      } else if (up && b[0] == '/') {
        /* ".." of "/" is "/" */
      } else {
        if (b[bn - 1] != '/') b[bn++] = '/';
        memcpy(b + bn, t + i, cn);
        bn += cn;
      }
      i = e + 1;
    }
  }
  b[bn] = '\0';
  *out = b;
  *on = bn;
  return 0;
}

/* ---- words ---- */

static int w_put(parser *p, word *w, const char *s, size_t n, int unquoted_literal) {
  for (size_t i = 0; i < n && w->name_ok; i++) {
    if (!unquoted_literal) {
      w->name_ok = 0;
    } else if (s[i] == '=' && w->eq_at < 0 && w->t.n + i > 0) {
      w->eq_at = (int)(w->t.n + i);
      w->name_ok = 0;
    } else if (!(w->t.n + i == 0 ? is_ident_start(s[i]) : is_ident(s[i]))) {
      w->name_ok = 0;
    }
  }
  w->any = 1;
  return shell_sb_put(p, &w->t, s, n);
}

/* Index just past the ')' that closes the '(' before s[i], honouring quotes
 * and nesting; n when unclosed. */
static size_t match_paren(const char *s, size_t n, size_t i) {
  int depth = 1;
  while (i < n) {
    char c = s[i];
    if (c == '\\') {
      i += 2;
    } else if (c == '\'') {
      i++;
      while (i < n && s[i] != '\'') i++;
      i++;
    } else if (c == '"') {
      i++;
      while (i < n && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
      i++;
    } else if (c == '(') {
      depth++;
      i++;
    } else if (c == ')') {
      if (--depth == 0) return i + 1;
      i++;
    } else {
      i++;
    }
  }
  return n;
}

static const char *var_get(parser *p, const char *name, size_t nn, size_t *vn) {
  for (int k = p->nvars - 1; k >= 0; k--)
    if (p->vars[k].nn == nn && memcmp(p->vars[k].name, name, nn) == 0) {
      *vn = p->vars[k].vn;
      return p->vars[k].val;
    }
  return NULL;
}

/* A substitution body: its commands are listed; the word keeps the text. */
static int subst(parser *p, word *w, const char *s, size_t n, size_t from, size_t body_from,
                 size_t body_to, size_t to, int depth) {
  if (body_to > body_from && shell_parse_line(p, s + body_from, body_to - body_from, depth + 1) < 0)
    return -1;
  return w_put(p, w, s + from, to - from, 0);
}

static int backtick(parser *p, word *w, const char *s, size_t n, size_t *i, int depth);

/* s[*i] == '$'. */
static int dollar(parser *p, word *w, const char *s, size_t n, size_t *i, int in_dq, int depth) {
  size_t at = *i;
  char c = at + 1 < n ? s[at + 1] : '\0';
  if (c == '\'' && !in_dq) { /* $'...' with C escapes */
    size_t k = at + 2;
    sbuf tmp = {0};
    while (k < n && s[k] != '\'') {
      char d = s[k];
      if (d == '\\' && k + 1 < n) {
        char e = s[++k];
        int v = -1;
        if (e == 'n')
          v = '\n';
        else if (e == 't')
          v = '\t';
        else if (e == 'r')
          v = '\r';
        else if (e == 'a')
          v = 7;
        else if (e == 'b')
          v = 8;
        else if (e == 'e' || e == 'E')
          v = 27;
        else if (e == 'f')
          v = 12;
        else if (e == 'v')
          v = 11;
        else if (e == '\\' || e == '\'' || e == '"' || e == '?')
          v = e;
        else if (e == 'x') {
          v = 0;
          int digits = 0;
          while (digits < 2 && k + 1 < n) {
            char h = s[k + 1];
            int hv = is_digit(h)                          ? h - '0'
                     : (h | 32) >= 'a' && (h | 32) <= 'f' ? (h | 32) - 'a' + 10
                                                          : -1;
            if (hv < 0) break;
            v = v * 16 + hv;
            k++;
            digits++;
          }
          if (!digits) v = -2;
        } else if (e >= '0' && e <= '7') {
          v = e - '0';
          for (int digits = 1; digits < 3 && k + 1 < n && s[k + 1] >= '0' && s[k + 1] <= '7';
               digits++)
            v = v * 8 + (s[++k] - '0');
          v &= 0xff;
        }
        if (v == -1 || v == -2) {
          if (shell_sb_putc(p, &tmp, '\\') < 0 || (v == -1 && shell_sb_putc(p, &tmp, e) < 0))
            return -1;
          if (v == -2 && shell_sb_putc(p, &tmp, 'x') < 0) return -1;
        } else if (v != 0 && shell_sb_putc(p, &tmp, (char)v) < 0) {
          return -1;
        }
        k++;
      } else {
        if (shell_sb_putc(p, &tmp, d) < 0) return -1;
        k++;
      }
    }
    *i = k < n ? k + 1 : n;
    return w_put(p, w, tmp.s ? tmp.s : "", tmp.n, 0);
  }
  if (c == '(') {
    if (at + 2 < n && s[at + 2] == '(') {
      /* Arithmetic: kept as text, but the substitutions inside it run
       * ($(( $(rm -rf /) + 1 ))), so their commands are listed. */
      size_t end = match_paren(s, n, at + 2);
      size_t bend = end >= at + 5 && s[end - 1] == ')' && s[end - 2] == ')' ? end - 2 : end;
      word tmp = {{0}, -1, 0, 0};
      for (size_t k = at + 3; k < bend;) {
        if (s[k] == '$') {
          if (dollar(p, &tmp, s, bend, &k, 1, depth) < 0) return -1;
        } else if (s[k] == '`') {
          if (backtick(p, &tmp, s, bend, &k, depth) < 0) return -1;
        } else {
          k++;
        }
      }
      *i = end;
      return w_put(p, w, s + at, end - at, 0);
    }
    size_t end = match_paren(s, n, at + 2);
    *i = end;
    return subst(p, w, s, n, at, at + 2,
                 end > at + 2 && end <= n && s[end - 1] == ')' ? end - 1 : end, end, depth);
  }
  if (c == '{') {
    size_t k = at + 2;
    while (k < n && s[k] != '}') k++;
    size_t end = k < n ? k + 1 : n;
    *i = end;
    size_t nn = k - (at + 2), vn;
    const char *name = s + at + 2;
    int simple = nn > 0 && is_ident_start(name[0]);
    for (size_t j = 1; j < nn && simple; j++) simple = is_ident(name[j]);
    const char *val = simple ? var_get(p, name, nn, &vn) : NULL;
    if (val) return w_put(p, w, val, vn, 0);
    return w_put(p, w, s + at, end - at, 0);
  }
  if (is_ident_start(c)) {
    size_t k = at + 1;
    while (k < n && is_ident(s[k])) k++;
    *i = k;
    size_t vn;
    const char *val = var_get(p, s + at + 1, k - at - 1, &vn);
    if (val) return w_put(p, w, val, vn, 0);
    return w_put(p, w, s + at, k - at, 0);
  }
  if (c && strchr("?$#@*!-0123456789", c)) {
    *i = at + 2;
    return w_put(p, w, s + at, 2, 0);
  }
  *i = at + 1;
  return w_put(p, w, "$", 1, 0);
}

/* s[*i] == '`': up to the next unescaped backtick. */
static int backtick(parser *p, word *w, const char *s, size_t n, size_t *i, int depth) {
  size_t at = *i, k = at + 1;
  sbuf body = {0};
  while (k < n && s[k] != '`') {
    if (s[k] == '\\' && k + 1 < n && (s[k + 1] == '`' || s[k + 1] == '\\' || s[k + 1] == '$')) k++;
    if (shell_sb_putc(p, &body, s[k]) < 0) return -1;
    k++;
  }
  size_t end = k < n ? k + 1 : n;
  *i = end;
  if (body.n && shell_parse_line(p, body.s, body.n, depth + 1) < 0) return -1;
  return w_put(p, w, s + at, end - at, 0);
}

/* Inside double quotes from s[*i] (just past the opening quote). */
static int dquoted(parser *p, word *w, const char *s, size_t n, size_t *i, char close, int depth) {
  size_t k = *i;
  while (k < n && (close == 0 || s[k] != close)) {
    char c = s[k];
    if (c == '\\' && k + 1 < n && strchr("$`\"\\\n", s[k + 1])) {
      if (s[k + 1] != '\n' && w_put(p, w, s + k + 1, 1, 0) < 0) return -1;
      k += 2;
    } else if (c == '$') {
      if (dollar(p, w, s, n, &k, 1, depth) < 0) return -1;
    } else if (c == '`') {
      if (backtick(p, w, s, n, &k, depth) < 0) return -1;
    } else {
      /* A backslash before anything else is kept, with what follows. */
      size_t j = c == '\\' ? k + 1 : k;
      while (j < n && s[j] != '\\' && s[j] != '$' && s[j] != '`' && (close == 0 || s[j] != close))
        j++;
      if (w_put(p, w, s + k, j - k, 0) < 0) return -1;
      k = j;
    }
  }
  *i = k < n ? k + 1 : n;
  w->any = 1;
  return w->t.s ? 0 : shell_sb_put(p, &w->t, "", 0); /* "" is a word, never a NULL one */
}

static int is_meta(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ';' || c == '&' || c == '|' ||
         c == '(' || c == ')' || c == '<' || c == '>';
}

/* One word from s[*i]. */
static int read_word(parser *p, word *w, const char *s, size_t n, size_t *i, int depth) {
  size_t k = *i;
  while (k < n) {
    char c = s[k];
    if ((c == '<' || c == '>') && k + 1 < n && s[k + 1] == '(' && w->t.n == 0) {
      size_t end = match_paren(s, n, k + 2);
      if (subst(p, w, s, n, k, k + 2, end > k + 2 && s[end - 1] == ')' ? end - 1 : end, end,
                depth) < 0)
        return -1;
      k = end;
      continue;
    }
    if (is_meta(c)) break;
    if (c == '\\') {
      if (k + 1 < n && s[k + 1] == '\n') {
        k += 2;
      } else if (k + 1 < n) {
        if (w_put(p, w, s + k + 1, 1, 0) < 0) return -1;
        k += 2;
      } else {
        k++;
      }
    } else if (c == '\'') {
      size_t j = k + 1;
      while (j < n && s[j] != '\'') j++;
      if (w_put(p, w, s + k + 1, j - k - 1, 0) < 0) return -1;
      k = j < n ? j + 1 : n;
    } else if (c == '"') {
      k++;
      if (dquoted(p, w, s, n, &k, '"', depth) < 0) return -1;
    } else if (c == '$') {
      if (dollar(p, w, s, n, &k, 0, depth) < 0) return -1;
    } else if (c == '`') {
      if (backtick(p, w, s, n, &k, depth) < 0) return -1;
    } else {
      size_t j = k;
      while (j < n && !is_meta(s[j]) && !strchr("\\'\"$`", s[j])) j++;
      if (w_put(p, w, s + k, j - k, 1) < 0) return -1;
      k = j;
    }
  }
  *i = k;
  return 0;
}

/* ---- commands ---- */

static int av_push(parser *p, argv_t *av, const word *w) {
  if (av->n == av->cap) {
    uint32_t nc = av->cap ? av->cap * 2 : 8;
    word *nw = arena_alloc(p->a, nc * sizeof *nw);
    if (!nw) return shell_oom(p);
    if (av->n) memcpy(nw, av->w, av->n * sizeof *nw);
    av->w = nw;
    av->cap = nc;
  }
  av->w[av->n++] = *w;
  return 0;
}

static const char *const reserved[] = {"!",     "{",     "}",    "if",     "then",
                                       "else",  "elif",  "fi",   "do",     "done",
                                       "while", "until", "time", "coproc", NULL};
/* cd and pushd move the commands after them (in this shell); a place only
 * known at run time (cd "$X", cd -, popd) makes the directory unknown. */
static int track_cd(parser *p, const word *w, uint32_t n) {
  if (wis(&w[0], "popd")) {
    p->dir = NULL;
    return 0;
  }
  if (!wis(&w[0], "cd") && !wis(&w[0], "pushd") && !wis(&w[0], "chdir")) return 0;
  uint32_t k = 1;
  while (k < n && w[k].t.n > 1 && w[k].t.s[0] == '-') {
    if (wis(&w[k], "--")) {
      k++;
      break;
    }
    k++;
  }
  const char *t = k < n ? w[k].t.s : "~";
  size_t tn = k < n ? w[k].t.n : 1;
  if (!t || memchr(t, '$', tn) || memchr(t, '`', tn) || memchr(t, '*', tn) || memchr(t, '?', tn) ||
      (tn && (t[0] == '+' || t[0] == '-'))) {
    p->dir = NULL;
    return 0;
  }
  char *d;
  size_t dn;
  if (shell_path_join(p->a, p->dir, p->dn, t, tn, &d, &dn) < 0) return shell_oom(p);
  p->dir = d;
  p->dn = dn;
  return 0;
}

/* A finished simple command: assignments, reserved words, the program's
 * base name; listed, then looked into. */
int shell_emit(parser *p, word *w, uint32_t n, int depth) {
  if (depth > MAX_DEPTH) {
    if (!p->err) p->err = "shell command nested too deeply to check (more than 16 levels)";
    return -1;
  }
  uint32_t k = 0;
  for (;;) {
    uint32_t before = k;
    while (k < n && w[k].eq_at > 0) k++;
    if (k == n && before < n && k > before) {
      /* Only assignments: remembered for later $NAME. */
      for (uint32_t j = before; j < n && p->nvars < MAX_VARS; j++) {
        p->vars[p->nvars].name = w[j].t.s;
        p->vars[p->nvars].nn = (size_t)w[j].eq_at;
        p->vars[p->nvars].val = w[j].t.s + w[j].eq_at + 1;
        p->vars[p->nvars].vn = w[j].t.n - (size_t)w[j].eq_at - 1;
        p->nvars++;
      }
      return 0;
    }
    while (k < n && in_set(&w[k], reserved)) k++;
    if (k + 1 < n && wis(&w[k], "function")) k += 2; /* function NAME { … } */
    if (k == before) break;
  }
  if (k >= n) return 0;
  w += k;
  n -= k;
  if (p->cmds.n >= MAX_COMMANDS) {
    if (!p->err) p->err = "shell command has too many parts to check (more than 4096)";
    return -1;
  }
  /* A program named by a path is known by its base name (/bin/rm,
   * ./../../bin/rm and node_modules/.bin/eslint are rm, rm and eslint). */
  if (w[0].t.n > 1 && memchr(w[0].t.s, '/', w[0].t.n) && !memchr(w[0].t.s, '$', w[0].t.n)) {
    const char *slash = w[0].t.s + w[0].t.n;
    while (slash[-1] != '/') slash--;
    size_t bn = (size_t)(w[0].t.s + w[0].t.n - slash);
    if (bn) {
      w[0].t.s = (char *)slash;
      w[0].t.n = bn;
    }
  }
  /* export/declare NAME=value also set variables. */
  if (wis(&w[0], "export") || wis(&w[0], "declare") || wis(&w[0], "local") ||
      wis(&w[0], "readonly") || wis(&w[0], "typeset")) {
    for (uint32_t j = 1; j < n && p->nvars < MAX_VARS; j++)
      if (w[j].eq_at > 0) {
        p->vars[p->nvars].name = w[j].t.s;
        p->vars[p->nvars].nn = (size_t)w[j].eq_at;
        p->vars[p->nvars].val = w[j].t.s + w[j].eq_at + 1;
        p->vars[p->nvars].vn = w[j].t.n - (size_t)w[j].eq_at - 1;
        p->nvars++;
      }
  }
  value *items = arena_alloc(p->a, n * sizeof *items);
  if (!items) return shell_oom(p);
  for (uint32_t j = 0; j < n; j++)
    items[j] = value_str(w[j].t.s ? w[j].t.s : "", (uint32_t)w[j].t.n);
  if (wl_push(p, &p->cmds, value_list(items, n)) < 0) return -1;
  if (wl_push(p, &p->dirs, value_str(p->dir ? p->dir : "", p->dir ? (uint32_t)p->dn : 0)) < 0)
    return -1;
  if (track_cd(p, w, n) < 0) return -1;
  return shell_unwrap(p, w, n, depth);
}

/* After a newline: the bodies of the heredocs opened on that line. Returns
 * the index past them. */
static size_t heredocs(parser *p, const char *s, size_t n, size_t i, heredoc *hd, int nhd,
                       int feed_shell, int depth) {
  for (int h = 0; h < nhd && i <= n; h++) {
    size_t body = i;
    size_t end = n, next = n;
    while (i < n) {
      size_t e = i;
      while (e < n && s[e] != '\n') e++;
      size_t ls = i;
      if (hd[h].strip_tabs)
        while (ls < e && s[ls] == '\t') ls++;
      if (e - ls == hd[h].dn && memcmp(s + ls, hd[h].delim, hd[h].dn) == 0) {
        end = i;
        next = e < n ? e + 1 : n;
        break;
      }
      i = e < n ? e + 1 : n;
    }
    if (end == n) next = n;
    if (end > body) {
      if (feed_shell) {
        if (shell_parse_line(p, s + body, end - body, depth + 1) < 0) return n;
      } else if (!hd[h].quoted) {
        word w = {{0}, -1, 0, 0};
        size_t k = body;
        /* Only the substitutions matter: they run. */
        if (dquoted(p, &w, s, end, &k, 0, depth) < 0) return n;
      }
    }
    i = next;
  }
  return i;
}

/* Whether the command in av reads a script from its stdin: a shell (by its
 * base name, after any NAME=value words) without -c. */
static int feeds_shell(const argv_t *av) {
  uint32_t k = 0;
  while (k < av->n && av->w[k].eq_at > 0) k++;
  if (k >= av->n || !av->w[k].t.s) return 0;
  word b = av->w[k];
  size_t cut = b.t.n;
  while (cut > 0 && b.t.s[cut - 1] != '/') cut--;
  if (cut > 0 && cut < b.t.n) {
    b.t.s += cut;
    b.t.n -= cut;
  }
  if (!in_set(&b, shell_names)) return 0;
  for (uint32_t q = k + 1; q < av->n; q++)
    if (av->w[q].t.n > 1 && av->w[q].t.s[0] == '-' && av->w[q].t.s[1] != '-' &&
        memchr(av->w[q].t.s, 'c', av->w[q].t.n))
      return 0;
  return 1;
}

static int parse_body(parser *p, const char *s, size_t n, int depth);

/* What echo or printf writes into a pipe, as words: echo's arguments after
 * its options, printf's after its format. */
static int producer(parser *p, const argv_t *av, const word **out, uint32_t *nout) {
  *out = NULL;
  *nout = 0;
  if (!av->n) return 0;
  word b = av->w[0];
  size_t cut = b.t.n;
  while (cut > 0 && b.t.s[cut - 1] != '/') cut--;
  b.t.s += cut;
  b.t.n -= cut;
  uint32_t k;
  if (wis(&b, "echo")) {
    k = 1;
    while (k < av->n && (wis(&av->w[k], "-n") || wis(&av->w[k], "-e") || wis(&av->w[k], "-E") ||
                         wis(&av->w[k], "-ne") || wis(&av->w[k], "-en")))
      k++;
  } else if (wis(&b, "printf")) {
    k = 2;
  } else {
    return 0;
  }
  if (k >= av->n) return 0;
  word *c = arena_alloc(p->a, (av->n - k) * sizeof *c);
  if (!c) return shell_oom(p);
  memcpy(c, av->w + k, (av->n - k) * sizeof *c);
  *out = c;
  *nout = av->n - k;
  return 0;
}

/* A command line run by its own shell process (a substitution, sh -c, a
 * heredoc fed to a shell) starts in the current directory, and its cd does
 * not move the caller; only eval's line runs in this shell. */
int shell_parse_line(parser *p, const char *s, size_t n, int depth) {
  const char *dir = p->dir;
  size_t dn = p->dn;
  int keep = p->keep_dir;
  p->keep_dir = 0;
  int r = parse_body(p, s, n, depth);
  if (!keep) {
    p->dir = dir;
    p->dn = dn;
  }
  return r;
}

/* The simple command in av is complete: listed, then the here-strings fed
 * to it read as its script when it is a shell. */
static int finish(parser *p, argv_t *av, word *hs, int *nhs, int depth) {
  int shell = *nhs && feeds_shell(av);
  if (*nhs && av->n && wis(&av->w[0], "xargs")) {
    p->feed = hs;
    p->nfeed = (uint32_t)*nhs;
  }
  int r = av->n ? shell_emit(p, av->w, av->n, depth) : 0;
  p->feed = NULL;
  if (r < 0) return -1;
  av->n = 0;
  for (int h = 0; shell && h < *nhs; h++)
    if (hs[h].t.n && shell_parse_line(p, hs[h].t.s, hs[h].t.n, depth + 1) < 0) return -1;
  *nhs = 0;
  return 0;
}

static int parse_body(parser *p, const char *s, size_t n, int depth) {
  if (p->err) return -1;
  if (depth > MAX_DEPTH) {
    p->err = "shell command nested too deeply to check (more than 16 levels)";
    return -1;
  }
  if (!eval_charge(p->ctx, n / 8 + 1)) {
    p->err = "cost limit exceeded";
    return -1;
  }
  argv_t av = {0};
  heredoc hd[8];
  int nhd = 0, hd_shell = 0;
  word hs[4]; /* here-strings of the current command */
  int nhs = 0;
  const word *feed = NULL; /* what the command before a | writes into it */
  uint32_t nfeed = 0;
  /* The directory at each open "(": a subshell's cd ends at its ")". */
  const char *dstack[MAX_DEPTH];
  size_t dnstack[MAX_DEPTH];
  int dsp = 0, dover = 0;
  size_t i = 0;
  while (i < n) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      i++;
      continue;
    }
    if (c == '\\' && i + 1 < n && s[i + 1] == '\n') {
      i += 2;
      continue;
    }
    if (c == '#') {
      while (i < n && s[i] != '\n') i++;
      continue;
    }
    /* Redirections: [N]op target. */
    size_t j = i;
    while (j < n && is_digit(s[j])) j++;
    int redir = 0;
    if (j < n && (s[j] == '<' || s[j] == '>') && !(j + 1 < n && s[j + 1] == '(')) redir = 1;
    if (j == i && c == '&' && i + 1 < n && s[i + 1] == '>') redir = 1;
    if (redir) {
      int out = 0, here = 0, dup = 0, strip = 0, hstr = 0;
      if (s[j] == '&') {
        j += 2;
        if (j < n && s[j] == '>') j++;
        out = 1;
      } else if (s[j] == '>') {
        out = 1;
        j++;
        if (j < n && (s[j] == '>' || s[j] == '|'))
          j++;
        else if (j < n && s[j] == '&')
          j++, dup = 1;
      } else {
        j++;
        if (j + 1 < n && s[j] == '<' && s[j + 1] == '<')
          j += 2, hstr = 1; /* <<< here-string */
        else if (j < n && s[j] == '<') {
          here = 1;
          j++;
          if (j < n && s[j] == '-') strip = 1, j++;
        } else if (j < n && (s[j] == '&' || s[j] == '>')) {
          dup = s[j] == '&';
          j++;
        }
      }
      while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
      word t = {{0}, -1, 0, 0};
      size_t k = j;
      int quoted = k < n && (s[k] == '\'' || s[k] == '"' || s[k] == '\\');
      if (read_word(p, &t, s, n, &k, depth) < 0) return -1;
      i = k;
      if (hstr) {
        if (nhs < 4) hs[nhs++] = t;
        /* Its words are data the command reads: in shellWords, so that a
         * path in it (sftp <<< 'put ~/.ssh/id_rsa') is seen. */
        for (size_t q = 0; q < t.t.n;) {
          while (q < t.t.n && (t.t.s[q] == ' ' || t.t.s[q] == '\t' || t.t.s[q] == '\n')) q++;
          size_t b = q;
          while (q < t.t.n && t.t.s[q] != ' ' && t.t.s[q] != '\t' && t.t.s[q] != '\n') q++;
          if (q > b && wl_push(p, &p->reads, value_str(t.t.s + b, (uint32_t)(q - b))) < 0)
            return -1;
        }
        continue;
      }
      if (here) {
        if (nhd < 8) {
          hd[nhd].delim = t.t.s ? t.t.s : "";
          hd[nhd].dn = t.t.n;
          hd[nhd].strip_tabs = strip;
          hd[nhd].quoted = quoted;
          nhd++;
        }
        continue;
      }
      int is_fd = t.t.n > 0;
      for (size_t q = 0; q < t.t.n && is_fd; q++) is_fd = is_digit(t.t.s[q]) || t.t.s[q] == '-';
      if (out && t.any && !(dup && is_fd) &&
          wl_push(p, &p->writes, value_str(t.t.s ? t.t.s : "", (uint32_t)t.t.n)) < 0)
        return -1;
      if (!out && !dup && t.any && t.t.n &&
          wl_push(p, &p->reads, value_str(t.t.s, (uint32_t)t.t.n)) < 0)
        return -1;
      continue;
    }
    if (is_meta(c) && !((c == '<' || c == '>') && i + 1 < n && s[i + 1] == '(')) {
      if (av.n) {
        if (nhd && feeds_shell(&av)) hd_shell = 1;
        const word *nf = NULL;
        uint32_t nnf = 0;
        if (c == '|' && !(i + 1 < n && s[i + 1] == '|') && producer(p, &av, &nf, &nnf) < 0)
          return -1;
        p->feed = feed;
        p->nfeed = nfeed;
        if (finish(p, &av, hs, &nhs, depth) < 0) return -1;
        feed = nf;
        nfeed = nnf;
      } else {
        feed = NULL;
      }
      nhs = 0;
      if (c == '(') {
        if (dsp < MAX_DEPTH) {
          dstack[dsp] = p->dir;
          dnstack[dsp++] = p->dn;
        } else {
          dover++;
        }
      } else if (c == ')') {
        if (dover) {
          dover--;
        } else if (dsp) {
          p->dir = dstack[--dsp];
          p->dn = dnstack[dsp];
        }
      }
      i++;
      if (c == '\n' && nhd) {
        i = heredocs(p, s, n, i, hd, nhd, hd_shell, depth);
        if (p->err) return -1;
        nhd = 0;
        hd_shell = 0;
      }
      continue;
    }
    word w = {{0}, -1, 0, 1};
    if (read_word(p, &w, s, n, &i, depth) < 0) return -1;
    if (w.any && av_push(p, &av, &w) < 0) return -1;
  }
  p->feed = feed;
  p->nfeed = nfeed;
  if (av.n && finish(p, &av, hs, &nhs, depth) < 0) return -1;
  return p->err ? -1 : 0;
}

/* ---- the CEL functions ---- */

static value parse_all(eval_ctx *ctx, const value *arg, parser *p);

static value run(eval_ctx *ctx, const value *arg, parser *p) {
  memset(p, 0, sizeof *p);
  p->ctx = ctx;
  p->a = ctx->arena;
  return parse_all(ctx, arg, p);
}

static value parse_all(eval_ctx *ctx, const value *arg, parser *p) {
  if (arg->n > MAX_INPUT) return VALUE_ERR("shell command too long to check (more than 256 KiB)");
  /* Words point into copies owned by the arena; the parser writes nothing
   * into the input. */
  if (shell_parse_line(p, arg->s, arg->n, 0) < 0 || p->err)
    return value_errorf(ctx->arena, "%s", p->err ? p->err : "out of memory");
  return value_null();
}

static value fn_commands(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  parser p;
  value e = run(ctx, &args[0], &p);
  if (e.kind == V_ERROR) return e;
  return value_list(p.cmds.v, p.cmds.n);
}

static value fn_writes(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  parser p;
  value e = run(ctx, &args[0], &p);
  if (e.kind == V_ERROR) return e;
  return value_list(p.writes.v, p.writes.n);
}

static value fn_words(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  parser p;
  value e = run(ctx, &args[0], &p);
  if (e.kind == V_ERROR) return e;
  uint32_t total = p.writes.n + p.reads.n;
  for (uint32_t i = 0; i < p.cmds.n; i++) total += p.cmds.v[i].n;
  value *items = arena_alloc(ctx->arena, (total ? total : 1) * sizeof *items);
  if (!items) return VALUE_ERR("out of memory");
  uint32_t k = 0;
  for (uint32_t i = 0; i < p.cmds.n; i++)
    for (uint32_t j = 0; j < p.cmds.v[i].n; j++) items[k++] = p.cmds.v[i].items[j];
  for (uint32_t i = 0; i < p.writes.n; i++) items[k++] = p.writes.v[i];
  for (uint32_t i = 0; i < p.reads.n; i++) items[k++] = p.reads.v[i];
  return value_list(items, k);
}

/* shellDirs(line, cwd): the directory each command of shellCommands(line)
 * runs in, starting from cwd. */
static value fn_dirs(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  parser p;
  memset(&p, 0, sizeof p);
  p.ctx = ctx;
  p.a = ctx->arena;
  const value *cwd = &args[1];
  if (cwd->n && (cwd->s[0] == '/' || cwd->s[0] == '~')) {
    char *d;
    if (shell_path_join(ctx->arena, NULL, 0, cwd->s, cwd->n, &d, &p.dn) < 0)
      return VALUE_ERR("out of memory");
    p.dir = d;
  }
  value e = parse_all(ctx, &args[0], &p);
  if (e.kind == V_ERROR) return e;
  return value_list(p.dirs.v, p.dirs.n);
}

/* resolvePath(dir, path): path made absolute against dir and normalised;
 * "" when dir is needed and not known. */
static value fn_resolve(eval_ctx *ctx, const value *args, uint32_t nargs, void *aux) {
  char *out;
  size_t on;
  if (shell_path_join(ctx->arena, args[0].s, args[0].n, args[1].s, args[1].n, &out, &on) < 0)
    return VALUE_ERR("out of memory");
  return out ? value_str(out, (uint32_t)on) : value_str("", 0);
}

const builtin lib_shell_builtins[] = {
    {"shellCommands", 0, 1, {V_STRING}, fn_commands, NULL, NULL, 0},
    {"shellCommands", 1, 1, {V_STRING}, fn_commands, NULL, NULL, 0},
    {"shellWords", 0, 1, {V_STRING}, fn_words, NULL, NULL, 0},
    {"shellWords", 1, 1, {V_STRING}, fn_words, NULL, NULL, 0},
    {"shellWrites", 0, 1, {V_STRING}, fn_writes, NULL, NULL, 0},
    {"shellWrites", 1, 1, {V_STRING}, fn_writes, NULL, NULL, 0},
    {"shellDirs", 0, 2, {V_STRING, V_STRING}, fn_dirs, NULL, NULL, 0},
    {"shellDirs", 1, 2, {V_STRING, V_STRING}, fn_dirs, NULL, NULL, 0},
    {"resolvePath", 0, 2, {V_STRING, V_STRING}, fn_resolve, NULL, NULL, 0},
    {NULL, 0, 0, {0}, NULL, NULL, NULL, 0},
};
