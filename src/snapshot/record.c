/* record.c — a snapshot record's body on disk: encoding, decoding, header
 * filters, and the error/source names of snapshot.h.
 *
 * The body is the record's fixed header fields followed by the payload, all
 * little-endian and length-prefixed (internal.h has the layout), so that a
 * reader can filter and a gc can decide on a record without touching the
 * JSON. Decoding validates structure only (the lengths add up, no unknown
 * flag bits); the frame's CRC has already vouched for the bytes. */
#include <string.h>

#include "core/timefmt.h"
#include "snapshot/internal.h"

const char *snapshot_strerror(int code) {
  switch (code) {
    case SNAPSHOT_OK:
      return "ok";
    case SNAPSHOT_EINVAL:
      return "invalid argument";
    case SNAPSHOT_ENOMEM:
      return "out of memory";
    case SNAPSHOT_EIO:
      return "I/O error";
    case SNAPSHOT_EFULL:
      return "snapshot queue full: record dropped";
    case SNAPSHOT_ECLOSED:
      return "snapshot log closed";
    case SNAPSHOT_EBUSY:
      return "another writer holds the snapshot directory";
    case SNAPSHOT_ETOOBIG:
      return "snapshot record too big";
    case SNAPSHOT_ECORRUPT:
      return "not a snapshot file, or damaged";
    case SNAPSHOT_EREFUSED:
      return "snapshot refused: the log's disk does not take writes";
    default:
      return "unknown error";
  }
}

static const char *const source_names[] = {"rule", "model", "default", "error"};

const char *snapshot_source_name(int source) {
  return source >= 0 && source < 4 ? source_names[source] : NULL;
}

int snapshot_source_parse(const char *s, size_t len) {
  for (int i = 0; i < 4; i++)
    if (strlen(source_names[i]) == len && memcmp(source_names[i], s, len) == 0) return i;
  return -1;
}

size_t rec_body_size(const snapshot_rec *rec) {
  if (rec->point_len > SNAPSHOT_MAX_STRING || rec->action_len > SNAPSHOT_MAX_STRING ||
      rec->policy_version_len > SNAPSHOT_MAX_STRING || rec->payload_len > SNAPSHOT_MAX_PAYLOAD)
    return 0;
  return BODY_FIXED + rec->point_len + rec->action_len + rec->policy_version_len + rec->payload_len;
}

static uint8_t *put_str16(uint8_t *p, const char *s, size_t len) {
  put_le16(p, (uint16_t)len);
  if (len) memcpy(p + 2, s, len);
  return p + 2 + len;
}

void rec_body_encode(const snapshot_rec *rec, uint8_t *out) {
  uint8_t *p = rec_body_encode_head(rec, out);
  put_le32(p, (uint32_t)rec->payload_len);
  if (rec->payload_len) memcpy(p + 4, rec->payload, rec->payload_len);
}

uint8_t *rec_body_encode_head(const snapshot_rec *rec, uint8_t *out) {
  uint8_t *p = out;
  memcpy(p, rec->id, 16);
  int64_t t = rec->time_ns;
  if (t == 0) t = (int64_t)snapshot_id_time_ms(rec->id) * 1000000;
  put_le64(p + 16, (uint64_t)t);
  uint32_t flags =
      (rec->allowed ? 1u : 0u) | (rec->review ? 2u : 0u) | ((uint32_t)(rec->source & 15) << 8);
  put_le32(p + 24, flags);
  uint32_t cbits;
  memcpy(&cbits, &rec->confidence, 4);
  put_le32(p + 28, cbits);
  p += 32;
  p = put_str16(p, rec->point, rec->point_len);
  p = put_str16(p, rec->action, rec->action_len);
  p = put_str16(p, rec->policy_version, rec->policy_version_len);
  return p;
}

/* Reads a u16-prefixed string at *pos; -1 when it runs past len. */
static int get_str16(const uint8_t *b, size_t len, size_t *pos, const char **s, size_t *slen) {
  if (*pos + 2 > len) return -1;
  size_t n = get_le16(b + *pos);
  if (*pos + 2 + n > len) return -1;
  *s = (const char *)b + *pos + 2;
  *slen = n;
  *pos += 2 + n;
  return 0;
}

int rec_body_decode(const uint8_t *b, size_t len, snapshot_rec *rec) {
  if (len < BODY_FIXED) return -1;
  uint32_t flags = get_le32(b + 24);
  if (flags & ~(uint32_t)0xF03) return -1;
  if (((flags >> 8) & 15) > SNAPSHOT_SRC_ERROR) return -1;
  memcpy(rec->id, b, 16);
  rec->time_ns = (int64_t)get_le64(b + 16);
  rec->allowed = flags & 1;
  rec->review = (flags >> 1) & 1;
  rec->source = (uint8_t)((flags >> 8) & 15);
  uint32_t cbits = get_le32(b + 28);
  memcpy(&rec->confidence, &cbits, 4);
  size_t pos = 32;
  if (get_str16(b, len, &pos, &rec->point, &rec->point_len) < 0 ||
      get_str16(b, len, &pos, &rec->action, &rec->action_len) < 0 ||
      get_str16(b, len, &pos, &rec->policy_version, &rec->policy_version_len) < 0)
    return -1;
  if (pos + 4 > len) return -1;
  size_t n = get_le32(b + pos);
  if (pos + 4 + n != len) return -1;
  rec->payload = (const char *)b + pos + 4;
  rec->payload_len = n;
  return 0;
}

static int str_is(const char *s, size_t len, const char *want) {
  return strlen(want) == len && memcmp(s, want, len) == 0;
}

int rec_matches(const snapshot_rec *rec, const snapshot_filter *f) {
  if (!f) return 1;
  if (f->since_ns && rec->time_ns < f->since_ns) return 0;
  if (f->until_ns && rec->time_ns >= f->until_ns) return 0;
  if (f->source >= 0 && rec->source != f->source) return 0;
  if (f->point && !str_is(rec->point, rec->point_len, f->point)) return 0;
  if (f->action && !str_is(rec->action, rec->action_len, f->action)) return 0;
  if (f->policy_version) {
    size_t n = strlen(f->policy_version);
    if (n > rec->policy_version_len || memcmp(rec->policy_version, f->policy_version, n) != 0)
      return 0;
  }
  return 1;
}

void snapshot_filter_init(snapshot_filter *f) {
  memset(f, 0, sizeof *f);
  f->source = -1;
}

#define NS_PER_DAY 86400000000000LL

uint32_t day_of_time_ns(int64_t t) {
  int64_t days = t / NS_PER_DAY;
  if (t % NS_PER_DAY < 0) days--;
  int64_t y;
  int m, d;
  timefmt_civil_from_days(days, &y, &m, &d);
  if (y < 0) y = 0;
  if (y > 9999) y = 9999;
  return (uint32_t)(y * 10000 + m * 100 + d);
}

int64_t day_start_ns(uint32_t day) {
  return timefmt_days_from_civil(day / 10000, (int)(day / 100 % 100), (int)(day % 100)) *
         NS_PER_DAY;
}
