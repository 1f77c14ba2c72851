/* repairs.c — the journal of what recovery did to a snapshot folder:
 * DIR/repairs.jsonl, one JSON object a line, appended when a writer opens
 * the log and repairs something (writer.c), read by `verdict snapshots
 * repairs`. A cut tail leaves nothing behind to look at, so without the
 * journal a repair would be known only to whoever watched that one start.
 * Not here: the repairs themselves (writer.c). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/json.h"
#include "snapshot/snapshot.h"

const char *snapshot_repair_kind(int kind) {
  switch (kind) {
    case SNAPSHOT_REPAIR_CUT_TAIL:
      return "cut_tail";
    case SNAPSHOT_REPAIR_CORRUPT:
      return "moved_corrupt";
    case SNAPSHOT_REPAIR_EMPTY:
      return "removed_empty";
    case SNAPSHOT_REPAIR_DAMAGED:
      return "damaged_kept";
    default:
      return "unknown";
  }
}

void snapshot_repair_journal(const char *dir, const snapshot_repair *r) {
  char path[4200];
  if (snprintf(path, sizeof path, "%s/repairs.jsonl", dir) >= (int)sizeof path) return;
  time_t now = (time_t)(clock_wall_ns() / 1000000000);
  struct tm tm;
  gmtime_r(&now, &tm);
  char when[40];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  json_buf b;
  json_buf_init(&b, NULL);
  json_buf_put(&b, "{\"time\":\"", 9);
  json_buf_put(&b, when, strlen(when));
  json_buf_put(&b, "\",\"segment\":", 12);
  json_write_string(&b, r->segment, strlen(r->segment));
  char tail[160];
  int n = snprintf(tail, sizeof tail, ",\"repair\":\"%s\",\"bytes\":%llu,\"records\":%llu}\n",
                   snapshot_repair_kind(r->kind), (unsigned long long)r->bytes,
                   (unsigned long long)r->records);
  json_buf_put(&b, tail, (size_t)n);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd >= 0 && !b.oom) {
    ssize_t w = write(fd, b.data, b.len); /* one write: lines never interleave */
    (void)w;
    fsync(fd);
  }
  if (fd >= 0) close(fd);
  json_buf_free(&b);
}
