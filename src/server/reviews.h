/* reviews.h — the review queue: decisions whose action needs a person
 * (vd_decision_review), by snapshot id, and the outcomes reviewers record
 * (kept in the snapshot folder's reviews.log, snapshot/reviewlog.h).
 *
 * The queue lives in memory, sorted by snapshot id (time order: ids are
 * UUIDv7), at most REVIEWS_MAX_PENDING entries (the oldest leave first);
 * reviews_open rebuilds it from the snapshot log: the review-needed
 * decisions of the last REVIEWS_WINDOW_DAYS without an outcome in the
 * reviews log. `verdict serve` keeps one (routes in reviews.c); `verdict
 * reviews list` builds one to print it. */
#ifndef VD_SERVER_REVIEWS_H
#define VD_SERVER_REVIEWS_H

#include <stddef.h>
#include <stdint.h>

#include "verdict.h"

#define REVIEWS_MAX_PENDING 10000
#define REVIEWS_WINDOW_DAYS 7

typedef struct reviews reviews;

/* One queued decision, as reviews_each hands it out (strings valid during
 * the callback). */
typedef struct review_item {
  char id[37];
  int64_t time_ms;                               /* of the decision: the id's time */
  const char *strategy, *action, *source, *rule; /* rule NULL when none */
} review_item;

/* Opens the queue of the snapshot folder dir: the reviews log for appends
 * when writable (a server; *cut gets the bytes of a torn tail cut, may be
 * NULL) or read-only (writable 0: a CLI beside a running server), and the
 * pending decisions rebuilt from the snapshots — before it returns, or, when
 * background, on a thread of its own while the caller goes on (a server is
 * ready at once; reviews_rebuilding says whether it is still going, and its
 * end or failure is logged). 0, or -1 with err. */
int reviews_open(const char *dir, int writable, int background, reviews **out, uint64_t *cut,
                 char *err, size_t errlen);
/* 1 while the queue is still being rebuilt from the snapshots. */
int reviews_rebuilding(reviews *rv);
void reviews_close(reviews *rv);
/* Queues d when its action needs review and it has a snapshot. Any thread. */
void reviews_note(reviews *rv, const vd_decision *d);
size_t reviews_pending(reviews *rv);
uint64_t reviews_dropped(reviews *rv);
/* Calls fn on the pending decisions in id order, from just after the id
 * `after` (NULL: from the start), until it returns nonzero. Holds the
 * queue's lock meanwhile: fn must be quick and not call back in. */
void reviews_each(reviews *rv, const char *after, int (*fn)(void *ud, const review_item *it),
                  void *ud);

#endif
