/* cmd_hook.c — `verdict hook AGENT`: one coding-agent tool call in on stdin,
 * the agent's answer out on stdout with its exit-code convention. A new
 * process per tool call, so this stays short: open the engine, decide once,
 * answer, close (which writes the snapshot). Once the agent is known every
 * failure is answered in that agent's format as a refusal (fail closed);
 * the formats themselves are src/agent/hook.c. */
#define _GNU_SOURCE /* clone, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "agent/hook.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/json.h"
#include "verdict.h"

const char cmd_hook_help[] =
    "usage: verdict hook claude|codex|gemini|opencode --policy DIR [options]\n"
    "\n"
    "Answers a coding agent's hook before a tool call: reads the hook's JSON on\n"
    "stdin, decides the request {\"action\": \"tool_call\", \"context\": {agent, event,\n"
    "tool, agent_tool, input, cwd, project, session, call_id}} against the bundle in\n"
    "DIR, and answers in the agent's own format for that event:\n"
    "\n"
    "  claude    PreToolUse: {\"hookSpecificOutput\": {\"permissionDecision\":\n"
    "            \"allow\"|\"deny\"|\"ask\", \"permissionDecisionReason\": ...,\n"
    "            \"additionalContext\": ... (deny, ask)}}, exit 0; PermissionRequest:\n"
    "            {\"hookSpecificOutput\": {\"decision\": {\"behavior\": \"allow\"|\"deny\"}}},\n"
    "            an ask leaves the prompt to the developer (systemMessage)\n"
    "  codex     PreToolUse: deny JSON (hookSpecificOutput, 3 fields), exit 0;\n"
    "            allow prints nothing; ask: systemMessage and additionalContext\n"
    "            (Codex's own approvals then apply); PermissionRequest as claude\n"
    "  gemini    BeforeTool: {\"decision\": \"allow\"|\"deny\"|\"ask\", \"reason\": ...,\n"
    "            \"systemMessage\": ...}\n"
    "  opencode  for integrations/opencode/verdict.js: {\"decision\", \"reason\"},\n"
    "            exit 0 allow, 2 otherwise\n"
    "\n"
    "Any other event (PostToolUse, AfterTool, ...) gets no opinion: exit 0, nothing\n"
    "decided or recorded. Tool names are mapped to one vocabulary (run_shell_command\n"
    "and bash become Bash, invoke_agent and task Agent, filePath becomes file_path,\n"
    "...); read_many_files is a Read per file, the strictest answering. If verdict\n"
    "itself fails (bad stdin, a bundle that does not load) the call is refused with\n"
    "the reason. Every decision is recorded as a snapshot.\n"
    "\n"
    "options:\n"
    "  -p, --policy DIR     the policy bundle (required; default $VERDICT_POLICY)\n"
    "  -s, --snapshots DIR  record decisions in DIR (default: $VERDICT_SNAPSHOTS,\n"
    "                       else DIR/.verdict/snapshots of the bundle)\n"
    "      --no-snapshots   record nothing\n"
    "      --store DIR      keep the policy versions loaded in DIR (default: versions\n"
    "                       beside the snapshot folder); --no-store: none\n"
    "      --durability none|interval|always   as for `verdict decide` (interval:\n"
    "                       the snapshot is written before the answer and synced\n"
    "                       by a child of the hook once the agent has it)\n"
    "      --server HOST:PORT  ask a running `verdict serve` (POST /v1/decide)\n"
    "                       instead of loading the bundle: the bundle is loaded once,\n"
    "                       the server records the snapshots; --policy is then not\n"
    "                       needed. If the server cannot be reached the call is refused\n"
    "      --headless       nobody can be asked (CI, background agents): offer only\n"
    "                       allow and deny, so the policy turns an ask into its\n"
    "                       on_no_candidate answer (deny in agent_guard)\n"
    "  -h, --help           this text\n"
    "\n"
    "examples:\n"
    "  echo '{\"session_id\":\"s\",\"cwd\":\"/repo\",\"hook_event_name\":\"PreToolUse\",\n"
    "        \"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"rm -rf /\"}}' |\n"
    "    verdict hook claude --policy examples/policies\n"
    "\n"
    "Configuration for each agent: docs/agents.md\n";

/* After the answer, the snapshot's sync (durability interval) is all that
 * is left, and an agent waits for the hook to exit and its pipes to close:
 * a child does the engine's close (the sync, then the segment's seal, the
 * snapshot folder held until then, as before) with its stdio on /dev/null
 * and in a session of its own, so the agent neither waits for the disk nor
 * has the child stopped with its process group. The record itself was
 * written before the answer, and the child waits for the hook's exit before
 * it syncs: it reads a pipe whose only writer is the hook, so end of file is
 * the hook's exit.
 *
 * The child is made with clone(CLONE_VM) rather than fork: it shares the
 * hook's memory instead of copying its page tables, and the hook's exit then
 * leaves the address space's teardown to the child. On this kind of machine
 * (page-table work trapped by the hypervisor) fork and the exit of a forked
 * process were most of what the default call cost above `--durability
 * none` (bench/README.md). Sharing is safe because of the gate: until the
 * hook is gone the child makes only system calls on its own stack and its
 * own copy of the descriptor table, and the hook leaves by _exit (no atexit
 * handler, no destructor, nothing freed), so the child finds the memory as
 * the hook left it and is then its only user. The hook has no other thread
 * by then. Under the sanitizers, whose runtimes keep per-thread state a
 * second user of the same memory would confuse, it forks. */
#define SYNC_STACK (256 * 1024)

typedef struct {
  vd_engine *e;
  int gate[2];
} sync_child;

/* The child's first steps: stdio on /dev/null, its own session, then the
 * wait for the hook's exit. System calls only. */
static void sync_child_detach(sync_child *c) {
  int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (nul >= 0) {
    dup2(nul, 0);
    dup2(nul, 1);
    dup2(nul, 2);
    if (nul > 2) close(nul);
  } else {
    close(0);
    close(1);
    close(2);
  }
  setsid();
  if (c->gate[1] >= 0) {
    close(c->gate[1]);
    char ch;
    while (read(c->gate[0], &ch, 1) < 0 && errno == EINTR) {
    }
    close(c->gate[0]);
  }
}

#ifndef VD_SANITIZE
static int sync_child_main(void *arg) {
  sync_child *c = arg;
  sync_child_detach(c);
  vd_engine_close(c->e);
  _exit(0);
}
#endif

/* Returns 1 in the hook, which then exits at once by _exit without closing
 * the engine; 0 when there is no child (the hook closes the engine itself,
 * syncing as before). A forked child (sanitizer builds) returns 0 too, and
 * closes the engine on the caller's path. */
static int sync_after_exit(vd_engine *e, int *in_child) {
  static sync_child c;
  *in_child = 0;
  fflush(stdout);
  fflush(stderr);
  c.e = e;
  if (pipe2(c.gate, O_CLOEXEC) != 0) c.gate[0] = c.gate[1] = -1;
  pid_t pid = -1;
#ifndef VD_SANITIZE
  void *stack = mmap(NULL, SYNC_STACK, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
  if (stack != MAP_FAILED) {
    pid = clone(sync_child_main, (char *)stack + SYNC_STACK, CLONE_VM | SIGCHLD, &c);
    if (pid < 0) munmap(stack, SYNC_STACK);
  }
#else
  pid = fork();
  if (pid == 0) {
    sync_child_detach(&c);
    *in_child = 1;
    return 0;
  }
#endif
  if (c.gate[0] >= 0) close(c.gate[0]); /* gate[1] stays open until the hook exits */
  if (pid < 0 && c.gate[1] >= 0) close(c.gate[1]);
  return pid > 0;
}

/* Writes the answer and returns the exit status. */
static int emit(json_buf *out, json_buf *err, int code) {
  if (out->len) fwrite(out->data, 1, out->len, stdout);
  if (err->len) fwrite(err->data, 1, err->len, stderr);
  fflush(stdout);
  return code;
}

/* ev: the event the refusal answers (PreToolUse's shape until the input
 * says otherwise). */
static int fail(hook_agent ag, hook_event ev, const char *why) {
  json_buf out, err;
  json_buf_init(&out, NULL);
  json_buf_init(&err, NULL);
  int code = hook_fail(ag, ev, why, &out, &err);
  code = emit(&out, &err, code);
  json_buf_free(&out);
  json_buf_free(&err);
  return code;
}

/* One POST /v1/decide to a running `verdict serve`, HTTP/1.1 with
 * Connection: close. On success *body (malloc'd) holds the answer's body
 * and 0 is returned; else -1 with the reason in why. */
static int ask_server(const char *server, const char *req, size_t n, char **body, size_t *blen,
                      char *why, size_t whylen) {
  char host[256], port[16];
  const char *s = server;
  if (strncmp(s, "http://", 7) == 0) s += 7;
  const char *colon = s[0] == '[' ? strstr(s, "]:") : strrchr(s, ':');
  if (!colon) {
    snprintf(why, whylen, "--server %s: give HOST:PORT (e.g. 127.0.0.1:8181)", server);
    return -1;
  }
  size_t hl = (size_t)(colon - s) + (s[0] == '[' ? 1 : 0);
  const char *p = colon + (s[0] == '[' ? 2 : 1);
  size_t pl = strcspn(p, "/");
  if (hl == 0 || hl >= sizeof host || pl == 0 || pl >= sizeof port) {
    snprintf(why, whylen, "--server %s: give HOST:PORT (e.g. 127.0.0.1:8181)", server);
    return -1;
  }
  memcpy(host, s, hl);
  host[hl] = '\0';
  memcpy(port, p, pl);
  port[pl] = '\0';
  char *h = host;
  if (h[0] == '[') {
    h++;
    h[strlen(h) - 1] = '\0';
  }
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int g = getaddrinfo(h, port, &hints, &ai);
  if (g != 0) {
    snprintf(why, whylen, "--server %s: %s", server, gai_strerror(g));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(ai);
  if (fd < 0) {
    snprintf(why, whylen, "cannot reach verdict serve at %s: %s", server, strerror(errno));
    return -1;
  }
  char head[512];
  int hn = snprintf(head, sizeof head,
                    "POST /v1/decide HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                    host, port, n);
  int ok = hn > 0 && (size_t)hn < sizeof head && write(fd, head, (size_t)hn) == hn &&
           write(fd, req, n) == (ssize_t)n;
  size_t cap = 8192, len = 0;
  char *buf = malloc(cap);
  while (ok && buf) {
    if (len + 1 >= cap) {
      char *nb = cap < (4u << 20) ? realloc(buf, cap * 2) : NULL;
      if (!nb) {
        ok = 0;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t got = read(fd, buf + len, cap - len - 1);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) ok = 0;
    if (got <= 0) break;
    len += (size_t)got;
  }
  int err = errno;
  close(fd);
  if (!ok || !buf) {
    snprintf(why, whylen, "verdict serve at %s did not answer: %s", server,
             buf ? strerror(err) : "out of memory");
    free(buf);
    return -1;
  }
  buf[len] = '\0';
  char *sep = strstr(buf, "\r\n\r\n");
  int status = 0;
  if (!sep || sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
    snprintf(why, whylen, "verdict serve at %s sent no HTTP answer", server);
    free(buf);
    return -1;
  }
  *sep = '\0';
  for (char *c = buf; *c; c++)
    if (*c >= 'A' && *c <= 'Z') *c = (char)(*c + 32);
  int chunked = strstr(buf, "\ntransfer-encoding: chunked") != NULL;
  char *b = sep + 4;
  size_t bl = len - (size_t)(b - buf);
  if (chunked) {
    snprintf(why, whylen, "verdict serve at %s answered in chunks; this hook reads whole answers",
             server);
    free(buf);
    return -1;
  }
  if (status != 200) {
    snprintf(why, whylen, "verdict serve at %s answered %d: %.*s", server, status,
             (int)(bl > 600 ? 600 : bl), b);
    free(buf);
    return -1;
  }
  memmove(buf, b, bl);
  buf[bl] = '\0';
  *body = buf;
  *blen = bl;
  return 0;
}

int cmd_hook(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-')
    return cli_usage_error("hook", "name the agent: claude, codex, gemini or opencode", NULL);
  hook_agent ag;
  if (hook_agent_parse(argv[1], &ag) != 0)
    return cli_usage_error("hook", "unknown agent (claude, codex, gemini or opencode):", argv[1]);
  const char *policy = getenv("VERDICT_POLICY"), *store = NULL, *snapshots = NULL;
  const char *server = NULL;
  int no_store = 0, no_snapshots = 0, headless = 0, durability = VD_DURABILITY_INTERVAL;
  char why[1200];
  hook_event fev = HOOK_EV_PRE;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = strcmp(a, "-p") == 0 || strcmp(a, "--policy") == 0 || strcmp(a, "-s") == 0 ||
                strcmp(a, "--snapshots") == 0 || strcmp(a, "--store") == 0 ||
                strcmp(a, "--durability") == 0 || strcmp(a, "--server") == 0;
    if (takes && !next) {
      snprintf(why, sizeof why, "the hook command is wrong: missing value after %s", a);
      return fail(ag, fev, why);
    }
    if (strcmp(a, "-p") == 0 || strcmp(a, "--policy") == 0) {
      policy = argv[++i];
    } else if (strncmp(a, "--policy=", 9) == 0) {
      policy = a + 9;
    } else if (strcmp(a, "-s") == 0 || strcmp(a, "--snapshots") == 0) {
      snapshots = argv[++i];
    } else if (strncmp(a, "--snapshots=", 12) == 0) {
      snapshots = a + 12;
    } else if (strcmp(a, "--no-snapshots") == 0) {
      no_snapshots = 1;
    } else if (strcmp(a, "--store") == 0) {
      store = argv[++i];
    } else if (strcmp(a, "--no-store") == 0) {
      no_store = 1;
    } else if (strcmp(a, "--server") == 0) {
      server = argv[++i];
    } else if (strcmp(a, "--headless") == 0) {
      headless = 1;
    } else if (strcmp(a, "--durability") == 0) {
      const char *v = argv[++i];
      if (strcmp(v, "none") == 0)
        durability = VD_DURABILITY_NONE;
      else if (strcmp(v, "interval") == 0)
        durability = VD_DURABILITY_INTERVAL;
      else if (strcmp(v, "always") == 0)
        durability = VD_DURABILITY_ALWAYS;
      else {
        snprintf(why, sizeof why,
                 "the hook command is wrong: --durability %s (none, interval "
                 "or always)",
                 v);
        return fail(ag, fev, why);
      }
    } else {
      snprintf(why, sizeof why,
               "the hook command is wrong: unknown argument %s (see verdict "
               "hook --help)",
               a);
      return fail(ag, fev, why);
    }
  }
  if (!server && (!policy || !*policy))
    return fail(ag, fev, "the hook command is wrong: give --policy DIR (or set VERDICT_POLICY)");

  size_t len;
  char *in = cli_read_file("hook", "-", &len);
  if (!in) return fail(ag, fev, "cannot read the hook input on stdin");

  char stack[16384];
  arena a;
  arena_init(&a, stack, sizeof stack, 64u << 20);
  json_buf req, out, err;
  json_buf_init(&req, &a);
  json_buf_init(&out, NULL);
  json_buf_init(&err, NULL);
  hook_call call;
  vd_engine *e = NULL;
  vd_decision *d = NULL;
  int code;
  if (hook_parse(ag, &a, in, len, &call, why, sizeof why) != 0) {
    code = fail(ag, fev, why);
    goto done;
  }
  fev = call.ev;
  if (call.ev == HOOK_EV_OTHER) {
    /* Nothing to guard (the tool has run, or it is not a tool call): no
     * opinion, no engine, no snapshot. */
    code = emit(&out, &err, hook_pass(ag, &call, &out, &err));
    goto done;
  }
  /* Claude Code and Gemini CLI name the project root in the environment of
   * the hooks they run; the input's cwd is where the session stands now. */
  const char *pdir = ag == HOOK_CLAUDE   ? getenv("CLAUDE_PROJECT_DIR")
                     : ag == HOOK_GEMINI ? getenv("GEMINI_PROJECT_DIR")
                                         : NULL;
  if (pdir && pdir[0] == '/' && call.project == NULL) {
    call.project = pdir;
    call.project_len = strlen(pdir);
  }

  /* One decision, or one a part (each file of read_many_files, each URL of
   * a web_fetch prompt): the strictest answers, with its reason. */
  size_t nparts = hook_part_count(&call);
  hook_verdict verdict = HOOK_ALLOW;
  char reason[1400], part_reason[1400];
  reason[0] = '\0';
  if (!server) {
    char *default_dir = NULL;
    if (cli_default_snapshots(policy, no_snapshots, &snapshots, &default_dir) != 0) {
      code = fail(ag, fev, "out of memory");
      goto done;
    }
    vd_engine_opts opts;
    cli_agent_opts(&opts, store, no_store, snapshots, no_snapshots, durability);
    /* One decision and out: only the files that can serve tool_call are
     * loaded (a hook never asks the others). */
    opts.only_point = "tool_call";
    /* ... and on one thread: what the decision never reaches is never
     * compiled (a cached strategy; the answer is the same). */
    opts.lazy_compile = 1;
    vd_error verr;
    int rc;
    /* Parallel tool calls take turns at the snapshot folder; wait a little
     * (by the clock: each try loads the bundle), well inside the agents' hook
     * timeouts, then refuse rather than hang. */
    uint64_t start = clock_mono_ns();
    for (;;) {
      rc = vd_engine_open(policy, &opts, &e, &verr);
      if (rc != VD_EBUSY) break;
      if (clock_mono_ns() - start >= 2000000000u) {
        snprintf(verr.message, sizeof verr.message,
                 "the snapshot folder %s is held by another verdict process (a `verdict mcp` or "
                 "`verdict serve` using the same folder?): give this hook its own --snapshots DIR",
                 snapshots ? snapshots : "");
        break;
      }
      struct timespec ts = {0, 5 * 1000000};
      nanosleep(&ts, NULL);
    }
    free(default_dir);
    if (rc != 0) {
      e = NULL;
      snprintf(why, sizeof why, "%s", verr.message);
      code = fail(ag, fev, why);
      goto done;
    }
    d = vd_decision_new();
    if (!d) {
      code = fail(ag, fev, "out of memory");
      goto done;
    }
  }
  for (size_t i = 0; i < nparts; i++) {
    hook_call part;
    req.len = 0;
    if (hook_part(&call, &a, i, &part) != 0 || hook_write_request(&part, headless, &req) != 0) {
      code = fail(ag, fev, "the tool input cannot be turned into a request (out of memory)");
      goto done;
    }
    hook_verdict v;
    if (server) {
      char *body = NULL;
      size_t blen = 0;
      if (ask_server(server, req.data, req.len, &body, &blen, why, sizeof why) != 0) {
        code = fail(ag, fev, why);
        goto done;
      }
      int bad = hook_describe_json(body, blen, &v, part_reason, sizeof part_reason) != 0;
      free(body);
      if (bad) {
        code = fail(ag, fev, part_reason);
        goto done;
      }
    } else {
      vd_error verr;
      if (vd_decide_json(e, req.data, (long)req.len, d, &verr) != 0) {
        snprintf(why, sizeof why, "the policy refused the request: %s", verr.message);
        code = fail(ag, fev, why);
        goto done;
      }
      v = hook_verdict_of(d);
      hook_describe(d, part_reason, sizeof part_reason);
    }
    if (i == 0 || hook_verdict_stricter(verdict, v) != verdict) {
      verdict = v;
      memcpy(reason, part_reason, sizeof reason);
    }
    if (verdict == HOOK_DENY) break; /* nothing is stricter */
  }
  code = emit(&out, &err, hook_answer(ag, call.ev, verdict, reason, &out, &err));

done:
  vd_decision_free(d);
  if (e) {
    vd_engine_counters c;
    if (vd_engine_stats(e, &c) == 0 && (c.snapshots_dropped || c.snapshots_failed))
      fprintf(stderr, "verdict hook: the decision was not recorded: %s\n", c.snapshot_last_error);
    /* the hook's own exit (nothing of its is left to flush): the child
     * closes the engine */
    int in_child = 0;
    if (snapshots && !no_snapshots && durability == VD_DURABILITY_INTERVAL &&
        sync_after_exit(e, &in_child))
      _exit(code);
    vd_engine_close(e);
    if (in_child) _exit(0);
  }
  json_buf_free(&out);
  json_buf_free(&err);
  arena_free(&a);
  free(in);
  return code;
}
