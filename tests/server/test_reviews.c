/* test_reviews.c — the review queue rebuilt from a snapshot folder
 * (server/reviews.h) and the reviews log under it (snapshot/reviewlog.h):
 * only review-needed decisions of the window, none with an outcome, at most
 * REVIEWS_MAX_PENDING (the oldest leave first, counted), in id order, with
 * their fields from the payload, paging after an id; the log's torn tail
 * cut at open and journalled, appends after the cut read back, a file that
 * is not a reviews log refused naming it; a write the disk refuses part-way
 * (RLIMIT_FSIZE) reported and cut back off the file, the next append whole. */
#include "../snapshot/helpers.h"

#include <signal.h>
#include <sys/resource.h>
#include "server/reviews.h"
#include "snapshot/reviewlog.h"

#define OLD 5
#define WINDOW (REVIEWS_MAX_PENDING + 50)

static uint8_t ids[WINDOW][16];

static void append(snapshot_log *log, const uint8_t id[16], int review, int n) {
  char payload[200];
  int len = snprintf(payload, sizeof payload,
                     "{\"strategy\":\"s%d\",\"action\":\"ask_mfa\",\"source\":\"rule\","
                     "\"reason\":{\"rule\":\"r%d\",\"message\":\"m\"}}",
                     n % 3, n);
  snapshot_rec r = {0};
  memcpy(r.id, id, 16);
  r.review = (uint8_t)review;
  r.point = "http_request";
  r.point_len = 12;
  r.action = "ask_mfa";
  r.action_len = 7;
  r.payload = payload;
  r.payload_len = (size_t)len;
  CHECK(snapshot_log_append(log, &r, NULL) == 0);
}

typedef struct walk {
  int n;
  char first[37];
  int ordered;
  char last[37];
} walk;

static int on_item(void *ud, const review_item *it) {
  walk *w = ud;
  if (!w->n) memcpy(w->first, it->id, 37);
  if (w->n && strcmp(w->last, it->id) >= 0) w->ordered = 0;
  memcpy(w->last, it->id, 37);
  w->n++;
  return 0;
}

static int first_only(void *ud, const review_item *it) {
  review_item *out = ud;
  *out = *it;
  static char s[64], r[64], o[64];
  snprintf(s, sizeof s, "%s", it->strategy);
  snprintf(r, sizeof r, "%s", it->rule ? it->rule : "");
  snprintf(o, sizeof o, "%s", it->source);
  out->strategy = s;
  out->rule = r;
  out->source = o;
  return 1;
}

static void test_rebuild(void) {
  char *dir = scratch_dir("reviews");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  snapshot_log *log;
  char err[600];
  CHECK(snapshot_log_open(dir, &o, &log, err, sizeof err) == 0);
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  uint64_t now_ms = (uint64_t)(wall_ns() / 1000000);
  uint8_t id[16];
  /* older than the window: never queued */
  for (int i = 0; i < OLD; i++) {
    snapshot_id_new_at(&g, now_ms - 8ull * 86400 * 1000, id);
    append(log, id, 1, i);
  }
  /* the window: review-needed ones, with ones that need none between */
  for (int i = 0; i < WINDOW; i++) {
    snapshot_id_new_at(&g, now_ms - 3600 * 1000, ids[i]);
    append(log, ids[i], 1, i);
    snapshot_id_new_at(&g, now_ms - 3600 * 1000, id);
    append(log, id, 0, i);
  }
  CHECK(snapshot_log_close(log, NULL) == 0);
  /* an outcome for the newest one */
  reviewlog *rl;
  uint64_t cut = 99;
  CHECK(reviewlog_open(dir, &rl, &cut, err, sizeof err) == 0);
  CHECK(cut == 0);
  char body[200], idt[37];
  int n = snprintf(body, sizeof body, "{\"id\":\"%s\",\"action\":\"allow\"}",
                   snapshot_id_format(ids[WINDOW - 1], idt));
  CHECK(reviewlog_append(rl, body, (size_t)n, err, sizeof err) == 0);
  reviewlog_close(rl);

  reviews *rv;
  CHECK_MSG(reviews_open(dir, 0, 0, &rv, NULL, err, sizeof err) == 0, "%s", err);
  /* WINDOW - 1 to queue, REVIEWS_MAX_PENDING kept: the oldest 49 dropped */
  CHECK(reviews_pending(rv) == REVIEWS_MAX_PENDING);
  CHECK(reviews_dropped(rv) == WINDOW - 1 - REVIEWS_MAX_PENDING);
  walk w = {.ordered = 1};
  reviews_each(rv, NULL, on_item, &w);
  CHECK(w.n == REVIEWS_MAX_PENDING);
  CHECK(w.ordered);
  CHECK_STR(w.first, snapshot_id_format(ids[WINDOW - 1 - REVIEWS_MAX_PENDING], idt));
  CHECK_STR(w.last, snapshot_id_format(ids[WINDOW - 2], idt));
  review_item it;
  memset(&it, 0, sizeof it);
  reviews_each(rv, snapshot_id_format(ids[100], idt), first_only, &it);
  CHECK_STR(it.id, snapshot_id_format(ids[101], idt));
  CHECK_STR(it.strategy, "s2"); /* 101 % 3 */
  CHECK_STR(it.rule, "r101");
  CHECK_STR(it.source, "rule");
  CHECK(it.time_ms == (int64_t)(now_ms - 3600 * 1000));
  reviews_close(rv);
  rm_rf(dir);
  free(dir);
}

static void test_log(void) {
  char *dir = scratch_dir("reviewlog");
  char err[600];
  reviewlog_reader *rd;
  CHECK(reviewlog_reader_open(dir, &rd, err, sizeof err) == 1); /* none yet */
  reviewlog *rl;
  uint64_t cut;
  CHECK(reviewlog_open(dir, &rl, &cut, err, sizeof err) == 0);
  CHECK(reviewlog_append(rl, "{\"n\":1}", 7, err, sizeof err) == 0);
  CHECK(reviewlog_append(rl, "{\"n\":2}", 7, err, sizeof err) == 0);
  CHECK(reviewlog_append(rl, "not json", 8, err, sizeof err) == -1);
  reviewlog_close(rl);
  /* a torn frame: header and part of a body */
  char path[600];
  snprintf(path, sizeof path, "%s/reviews.log", dir);
  FILE *f = fopen(path, "ab");
  CHECK(f != NULL);
  if (f) {
    fwrite("\x20\x00\x00\x00\xde\xad\xbe\xef{\"n\":", 1, 13, f);
    fclose(f);
  }
  CHECK(reviewlog_open(dir, &rl, &cut, err, sizeof err) == 0);
  CHECK(cut == 13);
  CHECK(reviewlog_append(rl, "{\"n\":3}", 7, err, sizeof err) == 0);
  reviewlog_close(rl);
  CHECK(reviewlog_reader_open(dir, &rd, err, sizeof err) == 0);
  const char *b;
  uint32_t len;
  uint64_t off, next;
  char got[64] = "";
  while (reviewlog_reader_next(rd, &b, &len, &off, &next, err, sizeof err) == 1)
    strncat(got, b, len);
  reviewlog_reader_close(rd);
  CHECK_STR(got, "{\"n\":1}{\"n\":2}{\"n\":3}");
  char journal[600];
  snprintf(journal, sizeof journal, "%s/repairs.jsonl", dir);
  f = fopen(journal, "r");
  char line[400] = "";
  CHECK(f && fgets(line, sizeof line, f));
  if (f) fclose(f);
  CHECK(strstr(line, "reviews.log") && strstr(line, "cut_tail"));
  /* not a reviews log */
  f = fopen(path, "wb");
  if (f) {
    fputs("something else entirely", f);
    fclose(f);
  }
  CHECK(reviewlog_open(dir, &rl, &cut, err, sizeof err) == -1);
  CHECK(strstr(err, "reviews.log") && strstr(err, "not a reviews log"));
  rm_rf(dir);
  free(dir);
}

static void test_failed_append(void) {
  char *dir = scratch_dir("reviewfail");
  char err[600], path[600];
  snprintf(path, sizeof path, "%s/reviews.log", dir);
  reviewlog *rl;
  CHECK(reviewlog_open(dir, &rl, NULL, err, sizeof err) == 0);
  CHECK(reviewlog_append(rl, "{\"n\":1}", 7, err, sizeof err) == 0);
  struct stat st;
  CHECK(stat(path, &st) == 0 && st.st_size == 8 + 8 + 7);
  /* room for 7 bytes more: the next frame (8 + 20) is written part-way */
  struct rlimit old, rl_small;
  getrlimit(RLIMIT_FSIZE, &old);
  rl_small = old;
  rl_small.rlim_cur = 8 + 8 + 7 + 7;
  signal(SIGXFSZ, SIG_IGN);
  CHECK(setrlimit(RLIMIT_FSIZE, &rl_small) == 0);
  CHECK(reviewlog_append(rl, "{\"n\":2,\"pad\":\"xxxx\"}", 20, err, sizeof err) == -1);
  CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
  CHECK(strstr(err, "reviews.log") && strstr(err, "too large"));
  CHECK(stat(path, &st) == 0 && st.st_size == 8 + 8 + 7); /* nothing of it stays */
  CHECK(reviewlog_append(rl, "{\"n\":3}", 7, err, sizeof err) == 0);
  reviewlog_close(rl);
  reviewlog_reader *rd;
  CHECK(reviewlog_reader_open(dir, &rd, err, sizeof err) == 0);
  const char *b;
  uint32_t len;
  char got[64] = "";
  while (reviewlog_reader_next(rd, &b, &len, NULL, NULL, err, sizeof err) == 1)
    strncat(got, b, len);
  reviewlog_reader_close(rd);
  CHECK_STR(got, "{\"n\":1}{\"n\":3}");
  rm_rf(dir);
  free(dir);
}

int main(void) {
  TEST_RUN(test_failed_append);
  TEST_RUN(test_log);
  TEST_RUN(test_rebuild);
  TEST_END();
}
