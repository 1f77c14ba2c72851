/* cmd_reviews.c — `verdict reviews`: the review queue of a snapshot folder,
 * for people without the console, and its outcomes as a labels file.
 *
 *   list    the decisions waiting for a reviewer (rebuilt from the snapshots
 *           as the server rebuilds its queue), or the outcomes on record
 *   export  the outcomes as a labels file `verdict replay --labels` reads:
 *           one {"id","action","note"} a line, the last outcome of each
 *           decision (a later one supersedes an earlier one)
 *
 * Both only read: they run beside a live server. docs/server.md ("The review
 * queue") has the log's format, docs/cli.md the commands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/arena.h"
#include "core/json.h"
#include "core/timefmt.h"
#include "core/value.h"
#include "server/reviews.h"
#include "snapshot/reviewlog.h"
#include "snapshot/snapshot.h"

const char cmd_reviews_help[] =
    "usage: verdict reviews list   [--snapshots DIR] [--state pending|reviewed]\n"
    "                              [--strategy NAME] [--action NAME] [--json]\n"
    "       verdict reviews export [--snapshots DIR] [--out FILE]\n"
    "\n"
    "The decisions whose action needs a person (review: true), and the outcomes\n"
    "reviewers recorded through POST /v1/reviews/{snapshot_id} (docs/server.md),\n"
    "kept in DIR/reviews.log beside the snapshots. DIR comes from --snapshots,\n"
    "else $VERDICT_SNAPSHOTS. Both only read: they run beside a live server.\n"
    "\n"
    "  list    --state pending (the default): the decisions of the last 7 days\n"
    "          waiting for an outcome, oldest first: id, time (UTC), strategy,\n"
    "          action, source, rule. --state reviewed: every outcome on record,\n"
    "          in the order recorded: id, reviewed at, strategy, decided action,\n"
    "          the reviewer's action, note. --strategy and --action keep the\n"
    "          decisions of that strategy, that decided action. --json: one JSON\n"
    "          object a line instead\n"
    "  export  the outcomes as a labels file for `verdict replay --labels`:\n"
    "          {\"id\": SNAPSHOT_ID, \"action\": ..., \"note\": ...} a line, the last\n"
    "          outcome of each decision, in the order recorded; to --out FILE\n"
    "          (default stdout)\n"
    "\n"
    "options:\n"
    "  -s, --snapshots DIR   the snapshot folder (default: $VERDICT_SNAPSHOTS)\n"
    "  -h, --help            this help\n"
    "\n"
    "Exit status: 0 done; 1 the folder or its log cannot be read; 2 usage error.\n";

static int usage_error(const char *msg, const char *arg) {
  return cli_usage_error("reviews", msg, arg);
}

/* ---- reading outcomes ---- */

typedef struct outcome {
  const char *id, *action, *note, *reviewed_at, *strategy, *decided;
  size_t idn, an, nn, rn, sn, dn;
  int has_note;
} outcome;

static void field(const value *m, const char *k, const char **s, size_t *n) {
  const value *v = value_map_get(m, k, strlen(k));
  if (v && v->kind == V_STRING) {
    *s = v->s;
    *n = v->n;
  } else {
    *s = "";
    *n = 0;
  }
}

/* 0 with o (pointing into a's values and body), -1 not an outcome. */
static int outcome_parse(arena *a, const char *body, size_t len, outcome *o) {
  value v;
  if (json_parse(a, body, len, NULL, &v, NULL) != 0 || v.kind != V_MAP) return -1;
  field(&v, "id", &o->id, &o->idn);
  field(&v, "action", &o->action, &o->an);
  field(&v, "note", &o->note, &o->nn);
  const value *nv = value_map_get(&v, "note", 4);
  o->has_note = nv && nv->kind == V_STRING;
  field(&v, "reviewed_at", &o->reviewed_at, &o->rn);
  field(&v, "strategy", &o->strategy, &o->sn);
  field(&v, "decided", &o->decided, &o->dn);
  return o->idn && o->an ? 0 : -1;
}

static int open_log(const char *dir, reviewlog_reader **lr) {
  char err[700];
  int rc = reviewlog_reader_open(dir, lr, err, sizeof err);
  if (rc < 0) fprintf(stderr, "verdict reviews: %s\n", err);
  return rc;
}

static int same(const char *want, const char *s, size_t n) {
  return !want || (strlen(want) == n && memcmp(want, s, n) == 0);
}

static int list_reviewed(const char *dir, const char *strategy, const char *action, int json) {
  reviewlog_reader *lr;
  int rc = open_log(dir, &lr);
  if (rc < 0) return 1;
  unsigned long n = 0;
  if (rc == 0) {
    const char *body;
    uint32_t len;
    char err[700];
    while ((rc = reviewlog_reader_next(lr, &body, &len, NULL, NULL, err, sizeof err)) == 1) {
      arena a;
      arena_init(&a, NULL, 0, 0);
      outcome o;
      if (outcome_parse(&a, body, len, &o) == 0 && same(strategy, o.strategy, o.sn) &&
          same(action, o.decided, o.dn)) {
        if (json)
          printf("%.*s\n", (int)len, body);
        else
          printf("%.*s  %.*s  %.*s  %.*s -> %.*s  %.*s\n", (int)o.idn, o.id, (int)o.rn,
                 o.reviewed_at, (int)o.sn, o.strategy, (int)o.dn, o.decided, (int)o.an, o.action,
                 (int)o.nn, o.note);
        n++;
      }
      arena_free(&a);
    }
    reviewlog_reader_close(lr);
    if (rc < 0) {
      fprintf(stderr, "verdict reviews: %s\n", err);
      return 1;
    }
  }
  fprintf(stderr, "%lu outcome%s\n", n, n == 1 ? "" : "s");
  return 0;
}

typedef struct pending_ctx {
  const char *strategy, *action;
  int json;
  unsigned long n;
} pending_ctx;

static int print_pending(void *ud, const review_item *it) {
  pending_ctx *c = ud;
  if (!same(c->strategy, it->strategy, strlen(it->strategy)) ||
      !same(c->action, it->action, strlen(it->action)))
    return 0;
  char t[48];
  timefmt_format_rfc3339(it->time_ms / 1000, (int32_t)(it->time_ms % 1000) * 1000000, t);
  if (c->json) {
    json_buf b;
    json_buf_init(&b, NULL);
    json_buf_put(&b, "{\"snapshot_id\":", 15);
    json_write_string(&b, it->id, strlen(it->id));
    json_buf_put(&b, ",\"time\":", 8);
    json_write_string(&b, t, strlen(t));
    json_buf_put(&b, ",\"strategy\":", 12);
    json_write_string(&b, it->strategy, strlen(it->strategy));
    json_buf_put(&b, ",\"action\":", 10);
    json_write_string(&b, it->action, strlen(it->action));
    json_buf_put(&b, ",\"source\":", 10);
    json_write_string(&b, it->source, strlen(it->source));
    json_buf_put(&b, ",\"rule\":", 8);
    if (it->rule)
      json_write_string(&b, it->rule, strlen(it->rule));
    else
      json_buf_put(&b, "null", 4);
    json_buf_putc(&b, '}');
    if (!b.oom) printf("%s\n", b.data);
    json_buf_free(&b);
  } else {
    printf("%s  %s  %s  %s  %s  %s\n", it->id, t, it->strategy, it->action, it->source,
           it->rule ? it->rule : "-");
  }
  c->n++;
  return 0;
}

static int list_pending(const char *dir, const char *strategy, const char *action, int json) {
  reviews *rv;
  char err[700];
  if (reviews_open(dir, 0, 0, &rv, NULL, err, sizeof err) < 0) {
    fprintf(stderr, "verdict reviews: %s\n", err);
    return 1;
  }
  pending_ctx c = {strategy, action, json, 0};
  reviews_each(rv, NULL, print_pending, &c);
  reviews_close(rv);
  fprintf(stderr, "%lu pending\n", c.n);
  return 0;
}

/* ---- export ---- */

typedef struct seen {
  uint8_t id[16];
  uint64_t off;
} seen;

static int by_id_then_off(const void *a, const void *b) {
  const seen *x = a, *y = b;
  int c = memcmp(x->id, y->id, 16);
  return c ? c : (x->off < y->off ? -1 : x->off > y->off);
}

static int by_off(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int export_labels(const char *dir, const char *out_path) {
  reviewlog_reader *lr;
  int rc = open_log(dir, &lr);
  if (rc < 0) return 1;
  FILE *out = stdout;
  if (out_path && strcmp(out_path, "-") != 0) {
    out = cli_open_file("reviews", out_path, "w");
    if (!out) {
      reviewlog_reader_close(lr);
      return 1;
    }
  }
  seen *all = NULL;
  uint64_t *keep = NULL;
  size_t n = 0, cap = 0, nk = 0, written = 0;
  int status = 0;
  char err[700];
  if (rc == 0) {
    /* Pass 1: every outcome's decision and place; the last of each decision
     * is the one that counts (a labels file holds one label an id). */
    const char *body;
    uint32_t len;
    uint64_t off;
    while ((rc = reviewlog_reader_next(lr, &body, &len, &off, NULL, err, sizeof err)) == 1) {
      arena a;
      arena_init(&a, NULL, 0, 0);
      outcome o;
      if (outcome_parse(&a, body, len, &o) == 0) {
        if (n == cap) {
          cap = cap ? cap * 2 : 1024;
          seen *na = realloc(all, cap * sizeof *all);
          if (!na) {
            arena_free(&a);
            snprintf(err, sizeof err, "out of memory");
            rc = -1;
            break;
          }
          all = na;
        }
        if (snapshot_id_parse(o.id, o.idn, all[n].id) == 0) all[n++].off = off;
      }
      arena_free(&a);
    }
    if (rc == 0 && n) {
      qsort(all, n, sizeof *all, by_id_then_off);
      keep = malloc(n * sizeof *keep);
      if (!keep) {
        snprintf(err, sizeof err, "out of memory");
        rc = -1;
      } else {
        for (size_t i = 0; i < n; i++)
          if (i + 1 == n || memcmp(all[i].id, all[i + 1].id, 16) != 0) keep[nk++] = all[i].off;
        qsort(keep, nk, sizeof *keep, by_off);
        /* Pass 2: those, in the order recorded. */
        reviewlog_reader_seek(lr, 0);
        size_t k = 0;
        while (k < nk &&
               (rc = reviewlog_reader_next(lr, &body, &len, &off, NULL, err, sizeof err)) == 1) {
          if (off != keep[k]) continue;
          k++;
          arena a;
          arena_init(&a, NULL, 0, 0);
          outcome o;
          if (outcome_parse(&a, body, len, &o) == 0) {
            json_buf b;
            json_buf_init(&b, NULL);
            json_buf_put(&b, "{\"id\":", 6);
            json_write_string(&b, o.id, o.idn);
            json_buf_put(&b, ",\"action\":", 10);
            json_write_string(&b, o.action, o.an);
            if (o.has_note) {
              json_buf_put(&b, ",\"note\":", 8);
              json_write_string(&b, o.note, o.nn);
            }
            json_buf_putc(&b, '}');
            if (!b.oom) fprintf(out, "%s\n", b.data), written++;
            json_buf_free(&b);
          }
          arena_free(&a);
        }
        if (rc > 0) rc = 0;
      }
    }
  }
  if (rc < 0) {
    fprintf(stderr, "verdict reviews: %s\n", err);
    status = 1;
  }
  if (out != stdout && fclose(out) != 0) {
    fprintf(stderr, "verdict reviews: %s: %s\n", out_path, strerror(errno));
    status = 1;
  } else if (out == stdout && fflush(out) != 0) {
    status = 1;
  }
  if (!status)
    fprintf(stderr, "%zu label%s from %zu outcome%s\n", written, written == 1 ? "" : "s", n,
            n == 1 ? "" : "s");
  free(all);
  free(keep);
  if (lr) reviewlog_reader_close(lr);
  return status;
}

int cmd_reviews(int argc, char **argv) {
  if (argc < 2) return usage_error("give a subcommand: list or export", NULL);
  const char *sub = argv[1];
  if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
    fputs(cmd_reviews_help, stdout);
    return 0;
  }
  int is_list = strcmp(sub, "list") == 0, is_export = strcmp(sub, "export") == 0;
  if (!is_list && !is_export) return usage_error("unknown subcommand", sub);
  const char *dir = getenv("VERDICT_SNAPSHOTS"), *out = NULL, *state = "pending", *strategy = NULL,
             *action = NULL;
  int json = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(cmd_reviews_help, stdout);
      return 0;
    }
    if (strcmp(a, "--json") == 0 && is_list) {
      json = 1;
      continue;
    }
    const char *opt = a, *val;
    char name[64];
    const char *eq = strchr(a, '=');
    if (a[0] != '-') return usage_error("unexpected argument", a);
    if (eq && a[1] == '-' && (size_t)(eq - a) < sizeof name) {
      memcpy(name, a, (size_t)(eq - a));
      name[eq - a] = '\0';
      opt = name;
      val = eq + 1;
    } else {
      if (i + 1 >= argc) return usage_error("missing value after", a);
      val = argv[++i];
    }
    if (strcmp(opt, "--snapshots") == 0 || strcmp(opt, "-s") == 0)
      dir = val;
    else if (is_export && strcmp(opt, "--out") == 0)
      out = val;
    else if (is_list && strcmp(opt, "--state") == 0) {
      if (strcmp(val, "pending") != 0 && strcmp(val, "reviewed") != 0)
        return usage_error("--state is pending or reviewed, not", val);
      state = val;
    } else if (is_list && strcmp(opt, "--strategy") == 0)
      strategy = val;
    else if (is_list && strcmp(opt, "--action") == 0)
      action = val;
    else
      return usage_error("unknown option", opt);
  }
  if (!dir || !*dir) return usage_error("give --snapshots DIR (or set $VERDICT_SNAPSHOTS)", NULL);
  if (is_export) return export_labels(dir, out);
  if (strcmp(state, "reviewed") == 0) return list_reviewed(dir, strategy, action, json);
  return list_pending(dir, strategy, action, json);
}
