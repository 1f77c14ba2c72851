/* lib_shell_wrap.c — the shell reader's knowledge of programs that run
 * their arguments as a command: sudo, env (-S, -C, -u), nohup, timeout,
 * xargs and parallel (with what echo/printf or a here-string feeds them),
 * find -exec, sh/bash -c, eval, su/script -c, watch, docker/kubectl exec,
 * ssh and ansible. Each inner command is listed after its wrapper's own
 * (shell_emit), so rules see both. Split from lib_shell.c, which reads the
 * words; the reader is described there. */
#include "expr/lib_shell.h"

const char *const shell_names[] = {"sh",   "bash", "zsh",   "dash",       "ksh", "ash",
                                   "mksh", "fish", "rbash", "busybox-sh", NULL};
/* The argv from w[k] on is an inner command (after a wrapper). */
static int inner(parser *p, word *w, uint32_t n, uint32_t k, int depth) {
  if (k >= n) return 0;
  return shell_emit(p, w + k, n - k, depth + 1);
}

/* Skips options of a wrapper: those in with_arg take the next word. */
static uint32_t skip_opts(word *w, uint32_t n, uint32_t k, const char *const *with_arg) {
  while (k < n && w[k].t.n > 1 && w[k].t.s[0] == '-') {
    if (wis(&w[k], "--")) return k + 1;
    int takes = 0;
    for (const char *const *o = with_arg; o && *o; o++)
      if (wis(&w[k], *o)) takes = 1;
    k += takes ? 2 : 1;
  }
  return k;
}

static const char *const plain_wrappers[] = {"nohup",
                                             "setsid",
                                             "busybox",
                                             "unbuffer",
                                             "time",
                                             "chronic",
                                             "caffeinate",
                                             "firejail",
                                             "proxychains",
                                             "proxychains4",
                                             "torsocks",
                                             "xvfb-run",
                                             "dbus-run-session",
                                             "catchsegv",
                                             "unshare",
                                             "nsenter",
                                             "numactl",
                                             "run-one",
                                             "doas",
                                             "pv",
                                             "fakeroot",
                                             "with-contenv",
                                             NULL};

/* A command run elsewhere (in a container, on another machine), read in an
 * unknown directory: its words as an argv (docker exec, kubectl exec), or,
 * when a remote shell reads them (ssh, ansible -a), joined into one line. */
static int in_elsewhere(parser *p, word *w, uint32_t n, int as_line, int depth) {
  if (!as_line) {
    const char *dir = p->dir;
    size_t dn = p->dn;
    p->dir = NULL;
    int r = shell_emit(p, w, n, depth + 1);
    p->dir = dir;
    p->dn = dn;
    return r;
  }
  sbuf line = {0};
  for (uint32_t j = 0; j < n; j++)
    if ((j && shell_sb_putc(p, &line, ' ') < 0) ||
        shell_sb_put(p, &line, w[j].t.s ? w[j].t.s : "", w[j].t.n) < 0)
      return -1;
  if (!line.n) return 0;
  const char *dir = p->dir;
  size_t dn = p->dn;
  p->dir = NULL;
  int r = shell_parse_line(p, line.s, line.n, depth + 1);
  p->dir = dir;
  p->dn = dn;
  return r;
}

/* xargs and parallel with known input (echo a b | xargs rm, parallel rm
 * ::: a b, xargs rm <<< a): the inner command w[0..n) is listed once per
 * input with the replace string rs substituted, or once with every input
 * appended when there is no replace string. */
static int fed(parser *p, word *w, uint32_t n, const word *in, uint32_t nin, const char *rs,
               size_t rn, int depth) {
  /* Split the inputs at blanks. */
  word *items = arena_alloc(p->a, (n + 64) * sizeof *items);
  if (!items) return shell_oom(p);
  word args[64];
  uint32_t na = 0;
  for (uint32_t j = 0; j < nin; j++) {
    const char *t = in[j].t.s ? in[j].t.s : "";
    size_t tn = in[j].t.n, q = 0;
    while (q < tn && na < 64) {
      while (q < tn && (t[q] == ' ' || t[q] == '\t' || t[q] == '\n')) q++;
      size_t b = q;
      while (q < tn && t[q] != ' ' && t[q] != '\t' && t[q] != '\n') q++;
      if (q > b) {
        word x = {{(char *)t + b, q - b, q - b}, -1, 1, 0};
        args[na++] = x;
      }
    }
  }
  if (!na) return shell_emit(p, w, n, depth + 1);
  if (!rs) {
    memcpy(items, w, n * sizeof *items);
    memcpy(items + n, args, na * sizeof *items);
    return shell_emit(p, items, n + na, depth + 1);
  }
  for (uint32_t a = 0; a < na; a++) {
    word *cw = arena_alloc(p->a, n * sizeof *cw);
    if (!cw) return shell_oom(p);
    for (uint32_t j = 0; j < n; j++) {
      cw[j] = w[j];
      const char *t = w[j].t.s ? w[j].t.s : "";
      if (!rn || w[j].t.n < rn) continue;
      sbuf b = {0};
      for (size_t q = 0; q < w[j].t.n;) {
        if (q + rn <= w[j].t.n && memcmp(t + q, rs, rn) == 0) {
          if (shell_sb_put(p, &b, args[a].t.s, args[a].t.n) < 0) return -1;
          q += rn;
        } else if (shell_sb_putc(p, &b, t[q++]) < 0) {
          return -1;
        }
      }
      cw[j].t = b;
      if (!cw[j].t.s && shell_sb_put(p, &cw[j].t, "", 0) < 0) return -1;
    }
    if (shell_emit(p, cw, n, depth + 1) < 0) return -1;
  }
  return 0;
}

int shell_unwrap(parser *p, word *w, uint32_t n, int depth) {
  const word *c = &w[0];
  if (wis(c, "sudo") || wis(c, "doas")) {
    static const char *const a[] = {"-u", "-g", "-C", "-D",     "-h",      "-p",      "-r", "-t",
                                    "-U", "-T", "-R", "--user", "--group", "--chdir", NULL};
    uint32_t k = skip_opts(w, n, 1, a);
    while (k < n && w[k].eq_at > 0) k++;
    return inner(p, w, n, k, depth);
  }
  if (wis(c, "env")) {
    uint32_t k = 1;
    const word *chdir = NULL;
    while (k < n) {
      if (w[k].eq_at > 0) {
        k++;
      } else if (wis(&w[k], "-S") || wis(&w[k], "--split-string") ||
                 (w[k].t.n > 2 && memcmp(w[k].t.s, "-S", 2) == 0) ||
                 (w[k].t.n > 15 && memcmp(w[k].t.s, "--split-string=", 15) == 0)) {
        /* env -S 'STRING' ARGS...: STRING is split into words (assignments
         * and the command included), then ARGS follow it. */
        int sep = wis(&w[k], "-S") || wis(&w[k], "--split-string");
        if (sep && k + 1 >= n) return 0;
        const word *sw = sep ? &w[k + 1] : &w[k];
        size_t off = sep ? 0 : (sw->t.s[1] == 'S' ? 2 : 15);
        sbuf line = {0};
        if (shell_sb_put(p, &line, sw->t.s + off, sw->t.n - off) < 0) return -1;
        for (uint32_t j = k + (sep ? 2 : 1); j < n; j++) {
          if (shell_sb_put(p, &line, " '", 2) < 0) return -1;
          for (size_t q = 0; q < w[j].t.n; q++)
            if (w[j].t.s[q] == '\'' ? shell_sb_put(p, &line, "'\\''", 4) < 0
                                    : shell_sb_putc(p, &line, w[j].t.s[q]) < 0)
              return -1;
          if (shell_sb_putc(p, &line, '\'') < 0) return -1;
        }
        return line.n ? shell_parse_line(p, line.s, line.n, depth + 1) : 0;
      } else if (wis(&w[k], "-C") || wis(&w[k], "--chdir")) {
        if (k + 1 < n) chdir = &w[k + 1];
        k += 2;
      } else if (wis(&w[k], "-u") || wis(&w[k], "--unset") || wis(&w[k], "-P")) {
        k += 2;
      } else if (wis(&w[k], "--")) {
        k++;
        break;
      } else if (w[k].t.n >= 1 && w[k].t.s[0] == '-') { /* also "-", the same as -i */
        k++;
      } else {
        break;
      }
    }
    while (k < n && w[k].eq_at > 0) k++;
    if (!chdir) return inner(p, w, n, k, depth);
    /* env -C DIR runs the command in DIR. */
    const char *saved = p->dir;
    size_t saved_n = p->dn;
    char *d;
    if (shell_path_join(p->a, p->dir, p->dn, chdir->t.s, chdir->t.n, &d, &p->dn) < 0)
      return shell_oom(p);
    p->dir = d;
    int r = inner(p, w, n, k, depth);
    p->dir = saved;
    p->dn = saved_n;
    return r;
  }
  if (wis(c, "su") || wis(c, "runuser")) {
    for (uint32_t k = 1; k + 1 < n; k++)
      if (wis(&w[k], "-c") || wis(&w[k], "--command"))
        return shell_parse_line(p, w[k + 1].t.s, w[k + 1].t.n, depth + 1);
    return 0;
  }
  if (wis(c, "parallel")) {
    /* parallel [options] COMMAND ::: ARGS; a one-word COMMAND is a shell line. */
    static const char *const a[] = {"-j",
                                    "-S",
                                    "-a",
                                    "-d",
                                    "-n",
                                    "-I",
                                    "--jobs",
                                    "--sshlogin",
                                    "--arg-file",
                                    "--delimiter",
                                    "--colsep",
                                    "--max-args",
                                    "--results",
                                    "--joblog",
                                    "--tmpdir",
                                    "--workdir",
                                    "--sshloginfile",
                                    "--basefile",
                                    "--env",
                                    "--retries",
                                    "--timeout",
                                    "--delay",
                                    "--memfree",
                                    "--load",
                                    "--tag-string",
                                    "--halt",
                                    NULL};
    uint32_t k = skip_opts(w, n, 1, a), e = k;
    while (e < n && !wis(&w[e], ":::") && !wis(&w[e], "::::") && !wis(&w[e], ":::+")) e++;
    if (e + 1 < n && e > k) { /* the inputs after ::: */
      uint32_t f = e + 1, g = f;
      while (g < n && !wis(&w[g], ":::") && !wis(&w[g], "::::")) g++;
      if (e == k + 1) { /* one word: a shell line, {} replaced */
        word *line = arena_alloc(p->a, sizeof *line);
        if (!line) return shell_oom(p);
        for (uint32_t a2 = f; a2 < g; a2++) {
          sbuf b = {0};
          const char *t = w[k].t.s ? w[k].t.s : "";
          for (size_t q = 0; q < w[k].t.n;) {
            if (q + 2 <= w[k].t.n && t[q] == '{' && t[q + 1] == '}') {
              if (shell_sb_put(p, &b, w[a2].t.s, w[a2].t.n) < 0) return -1;
              q += 2;
            } else if (shell_sb_putc(p, &b, t[q++]) < 0) {
              return -1;
            }
          }
          if (b.n && shell_parse_line(p, b.s, b.n, depth + 1) < 0) return -1;
        }
        return 0;
      }
      int has_rs = 0;
      for (uint32_t j = k; j < e; j++)
        for (size_t q = 0; q + 1 < w[j].t.n; q++)
          if (w[j].t.s[q] == '{' && w[j].t.s[q + 1] == '}') has_rs = 1;
      return fed(p, w + k, e - k, w + f, g - f, has_rs ? "{}" : NULL, has_rs ? 2 : 0, depth);
    }
    if (e == k && e + 1 < n) { /* parallel ::: 'CMD1' 'CMD2': each input is a line */
      for (uint32_t a2 = e + 1; a2 < n; a2++)
        if (!wis(&w[a2], ":::") && shell_parse_line(p, w[a2].t.s, w[a2].t.n, depth + 1) < 0)
          return -1;
      return 0;
    }
    if (e == n && p->feed && e > k) { /* echo ARGS | parallel CMD: stdin mode */
      const word *in = p->feed;
      uint32_t nin = p->nfeed;
      p->feed = NULL;
      int has_rs = 0;
      for (uint32_t j = k; j < e; j++)
        for (size_t q = 0; q + 1 < w[j].t.n; q++)
          if (w[j].t.s[q] == '{' && w[j].t.s[q + 1] == '}') has_rs = 1;
      if (e == k + 1 && !has_rs) /* one word: a shell line */
        return shell_parse_line(p, w[k].t.s, w[k].t.n, depth + 1);
      return fed(p, w + k, e - k, in, nin, has_rs ? "{}" : NULL, has_rs ? 2 : 0, depth);
    }
    if (e == k + 1) return shell_parse_line(p, w[k].t.s, w[k].t.n, depth + 1);
    return e > k ? shell_emit(p, w + k, e - k, depth + 1) : 0;
  }
  if (wis(c, "command") || wis(c, "builtin")) {
    /* command -v NAME looks NAME up and runs nothing; with more words after
     * it, they are read as the command they spell. */
    uint32_t k = skip_opts(w, n, 1, NULL);
    int lookup = 0;
    for (uint32_t j = 1; j < k; j++)
      if (w[j].t.n > 1 && w[j].t.s[1] != '-' &&
          (memchr(w[j].t.s, 'v', w[j].t.n) || memchr(w[j].t.s, 'V', w[j].t.n)))
        lookup = 1;
    if (lookup && k + 1 >= n) return 0;
    return inner(p, w, n, k, depth);
  }
  if (wis(c, "exec")) {
    static const char *const a[] = {"-a", NULL};
    return inner(p, w, n, skip_opts(w, n, 1, a), depth);
  }
  if (in_set(c, plain_wrappers)) return inner(p, w, n, skip_opts(w, n, 1, NULL), depth);
  if (wis(c, "strace") || wis(c, "ltrace")) {
    static const char *const a[] = {"-o", "-e", "-p", "-s", "-E", "-u",
                                    "-S", "-P", "-I", "-b", "-a", NULL};
    return inner(p, w, n, skip_opts(w, n, 1, a), depth);
  }
  if (wis(c, "systemd-run")) {
    static const char *const a[] = {"-p",       "--property", "-u",        "--unit", "-E",
                                    "--setenv", "-M",         "--machine", NULL};
    return inner(p, w, n, skip_opts(w, n, 1, a), depth);
  }
  if (wis(c, "taskset") || wis(c, "faketime") || wis(c, "chroot") || wis(c, "sg")) {
    uint32_t k = skip_opts(w, n, 1, NULL);
    if (wis(c, "sg") && k + 2 < n && wis(&w[k + 1], "-c"))
      return shell_parse_line(p, w[k + 2].t.s, w[k + 2].t.n, depth + 1);
    return inner(p, w, n, k + 1, depth); /* past the mask, time, new root or group */
  }
  if (wis(c, "script")) { /* script -c CMD [file] */
    for (uint32_t k = 1; k + 1 < n; k++)
      if (wis(&w[k], "-c") || wis(&w[k], "--command"))
        return shell_parse_line(p, w[k + 1].t.s, w[k + 1].t.n, depth + 1);
    return 0;
  }
  if (wis(c, "ansible")) { /* ansible HOSTS -m shell -a 'CMD' */
    int shell = 0;
    for (uint32_t k = 1; k + 1 < n; k++)
      if ((wis(&w[k], "-m") || wis(&w[k], "--module-name")) &&
          (wis(&w[k + 1], "shell") || wis(&w[k + 1], "command") || wis(&w[k + 1], "raw") ||
           wis(&w[k + 1], "ansible.builtin.shell") || wis(&w[k + 1], "ansible.builtin.command")))
        shell = 1;
    for (uint32_t k = 1; shell && k + 1 < n; k++)
      if (wis(&w[k], "-a") || wis(&w[k], "--args")) return in_elsewhere(p, &w[k + 1], 1, 1, depth);
    return 0;
  }
  if (wis(c, "ssh") || wis(c, "autossh")) { /* ssh [options] HOST COMMAND... */
    static const char *const a[] = {"-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R",
                                    "-D", "-E", "-b", "-c", "-m", "-O", "-Q", "-S",
                                    "-W", "-w", "-B", "-e", "-M", NULL};
    uint32_t k = skip_opts(w, n, 1, a);
    return k + 1 < n ? in_elsewhere(p, w + k + 1, n - k - 1, 1, depth) : 0;
  }
  if (wis(c, "docker") || wis(c, "podman") || wis(c, "nerdctl") || wis(c, "docker-compose") ||
      wis(c, "podman-compose")) {
    /* docker exec [options] CONTAINER CMD..., docker compose exec SERVICE CMD... */
    static const char *const a[] = {"-e",      "--env",     "-u",         "--user",
                                    "-w",      "--workdir", "--env-file", "--detach-keys",
                                    "--index", NULL};
    uint32_t k = 1;
    if (!wis(c, "docker-compose") && !wis(c, "podman-compose") && k < n && wis(&w[k], "compose"))
      k++;
    if (k >= n || !wis(&w[k], "exec")) return 0;
    k = skip_opts(w, n, k + 1, a);
    return k + 1 < n ? in_elsewhere(p, w + k + 1, n - k - 1, 0, depth) : 0;
  }
  if (wis(c, "kubectl") || wis(c, "oc")) { /* kubectl exec POD [-c C] -- CMD... */
    int exec = 0;
    for (uint32_t k = 1; k < n; k++) {
      if (wis(&w[k], "exec")) exec = 1;
      if (exec && wis(&w[k], "--"))
        return k + 1 < n ? in_elsewhere(p, w + k + 1, n - k - 1, 0, depth) : 0;
    }
    return 0;
  }
  if (wis(c, "nice") || wis(c, "ionice") || wis(c, "stdbuf") || wis(c, "watch")) {
    static const char *const a[] = {"-n", "-c",           "-p",         "-i", "-o",
                                    "-e", "--adjustment", "--interval", NULL};
    uint32_t k = skip_opts(w, n, 1, a);
    if (wis(c, "watch") && k + 1 == n) /* watch runs one word through sh -c */
      return shell_parse_line(p, w[k].t.s, w[k].t.n, depth + 1);
    return inner(p, w, n, k, depth);
  }
  if (wis(c, "timeout")) {
    static const char *const a[] = {"-s", "-k", "--signal", "--kill-after", NULL};
    uint32_t k = skip_opts(w, n, 1, a);
    return inner(p, w, n, k + 1, depth); /* past the duration */
  }
  if (wis(c, "flock")) {
    static const char *const a[] = {"-w", "-E", "--timeout", "--conflict-exit-code", NULL};
    uint32_t k = skip_opts(w, n, 1, a);
    if (k + 1 < n && (wis(&w[k + 1], "-c") || wis(&w[k + 1], "--command")))
      return k + 2 < n ? shell_parse_line(p, w[k + 2].t.s, w[k + 2].t.n, depth + 1) : 0;
    return inner(p, w, n, k + 1, depth); /* past the lock file */
  }
  if (wis(c, "xargs")) {
    static const char *const a[] = {
        "-I",          "-L",         "-l",          "-n",    "-P",         "-s",
        "-d",          "-E",         "-e",          "-a",    "--max-args", "--max-procs",
        "--delimiter", "--arg-file", "--max-lines", "--eof", NULL};
    uint32_t k = skip_opts(w, n, 1, a);
    const char *rs = NULL;
    size_t rn = 0;
    for (uint32_t j = 1; j < k; j++) {
      if (wis(&w[j], "-I") && j + 1 < k)
        rs = w[j + 1].t.s, rn = w[j + 1].t.n;
      else if (w[j].t.n > 2 && memcmp(w[j].t.s, "-I", 2) == 0)
        rs = w[j].t.s + 2, rn = w[j].t.n - 2;
      else if (wis(&w[j], "-i"))
        rs = "{}", rn = 2;
      else if (w[j].t.n > 10 && memcmp(w[j].t.s, "--replace=", 10) == 0)
        rs = w[j].t.s + 10, rn = w[j].t.n - 10;
      else if (wis(&w[j], "--replace") || wis(&w[j], "--replace="))
        rs = "{}", rn = 2;
    }
    if (k >= n) return 0;
    if (!p->feed) return inner(p, w, n, k, depth);
    const word *in = p->feed;
    uint32_t nin = p->nfeed;
    p->feed = NULL;
    return fed(p, w + k, n - k, in, nin, rs, rn, depth);
  }
  if (wis(c, "eval")) {
    sbuf joined = {0};
    for (uint32_t k = 1; k < n; k++)
      if ((k > 1 && shell_sb_putc(p, &joined, ' ') < 0) ||
          shell_sb_put(p, &joined, w[k].t.s, w[k].t.n) < 0)
        return -1;
    p->keep_dir = 1; /* eval runs its line in this shell: a cd in it stays */
    int r = joined.n ? shell_parse_line(p, joined.s, joined.n, depth + 1) : 0;
    p->keep_dir = 0;
    return r;
  }
  if (wis(c, "find")) {
    for (uint32_t k = 1; k < n; k++) {
      if (wis(&w[k], "-exec") || wis(&w[k], "-execdir") || wis(&w[k], "-ok") ||
          wis(&w[k], "-okdir")) {
        uint32_t e = k + 1;
        while (e < n && !wis(&w[e], ";") && !wis(&w[e], "+")) e++;
        if (e > k + 1 && shell_emit(p, w + k + 1, e - k - 1, depth + 1) < 0) return -1;
        k = e;
      }
    }
    return 0;
  }
  if (in_set(c, shell_names)) {
    /* sh -c BODY, also combined flags (-lc, -ec) and options before it. */
    for (uint32_t k = 1; k < n; k++) {
      const word *o = &w[k];
      if (o->t.n < 2 || (o->t.s[0] != '-' && o->t.s[0] != '+')) return 0; /* a script file */
      if (wis(o, "--")) return 0;
      if (o->t.s[1] != '-' && memchr(o->t.s + 1, 'c', o->t.n - 1)) {
        uint32_t b = k + 1;
        while (b < n && w[b].t.n > 1 && w[b].t.s[0] == '-' && !wis(&w[b], "--")) b++;
        if (b < n && wis(&w[b], "--")) b++;
        return b < n ? shell_parse_line(p, w[b].t.s, w[b].t.n, depth + 1) : 0;
      }
      if (wis(o, "-o") || wis(o, "+o") || wis(o, "--rcfile") || wis(o, "--init-file")) k++;
    }
    return 0;
  }
  return 0;
}
