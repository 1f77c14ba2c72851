/* fuzz_snapshot.c — the snapshot segment reader on a hostile segment file.
 * The first input byte picks the form of the rest:
 *   even: the rest is the segment file, byte for byte (headers, frames and
 *         CRCs as given: damage and torn tails);
 *   odd:  the rest is turned into a well-formed segment, so that the fuzzer
 *         reaches the record decoder past the CRC checks: a header (day and
 *         first id from the input), then chunks of [u16 length][body], each
 *         framed with its length and correct CRC32C; bytes left over are
 *         appended raw (a torn tail).
 * The file is written into a temporary folder under a segment's name, read
 * with snapshot_reader_next to the end (no filter and a filter), and every
 * id read is looked up with snapshot_reader_find. Checks: no crash, leak,
 * UB or hang; every record returned has fields within the file. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "snapshot/internal.h"

static char dir[256];

static void cleanup(void) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[512];
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') {
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  closedir(d);
}

static void remove_dir(void) {
  cleanup();
  rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *t = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/verdict-fuzz-snap-XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(dir)) abort();
  atexit(remove_dir);
  return 0;
}

/* The structured form of in[0..n) into out; returns its length. */
static size_t build(const uint8_t *in, size_t n, uint8_t *out, uint32_t *day, uint8_t first[16]) {
  seg_header h;
  memset(&h, 0, sizeof h);
  h.day = 20260101;
  if (n >= 16) {
    memcpy(h.first_id, in, 16);
    in += 16;
    n -= 16;
  }
  h.created_ns = (int64_t)1767225600 * 1000000000;
  h.node_len = 4;
  memcpy(h.node, "fuzz", 4);
  size_t len = seg_header_encode(&h, out);
  *day = h.day;
  memcpy(first, h.first_id, 16);
  while (n >= 2) {
    size_t bl = get_le16(in);
    if (bl > n - 2) break;
    put_le32(out + len, (uint32_t)bl);
    put_le32(out + len + 4, snapshot_crc32c(0, in + 2, bl));
    memcpy(out + len + 8, in + 2, bl);
    len += 8 + bl;
    in += 2 + bl;
    n -= 2 + bl;
  }
  memcpy(out + len, in, n);
  return len + n;
}

static void read_all(const snapshot_filter *f) {
  snapshot_reader *r = NULL;
  char err[512];
  if (snapshot_reader_open(dir, f, &r, err, sizeof err) != 0) return;
  snapshot_rec rec;
  uint8_t ids[64][16];
  int nids = 0;
  for (int i = 0; i < 100000; i++) {
    int rc = snapshot_reader_next(r, &rec);
    if (rc <= 0) break;
    FUZZ_CHECK(rec.point_len <= SNAPSHOT_MAX_STRING && rec.action_len <= SNAPSHOT_MAX_STRING &&
                   rec.policy_version_len <= SNAPSHOT_MAX_STRING &&
                   rec.payload_len <= SNAPSHOT_MAX_PAYLOAD,
               "a record with a field longer than the format allows");
    if (nids < 64) memcpy(ids[nids++], rec.id, 16);
  }
  (void)snapshot_reader_skipped_bytes(r);
  for (int i = 0; i < nids; i++) (void)snapshot_reader_find(r, ids[i], &rec);
  snapshot_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 1u << 20) return 0;
  uint8_t *file = malloc(SEG_HEADER_MAX + 8 * size + size);
  if (!file) return 0;
  size_t len;
  uint32_t day = 20260101;
  uint8_t first[16] = {0};
  if (data[0] & 1) {
    len = build(data + 1, size - 1, file, &day, first);
  } else {
    memcpy(file, data + 1, size - 1);
    len = size - 1;
    seg_header h;
    if (seg_header_decode(file, len, &h) == 0) {
      day = h.day;
      memcpy(first, h.first_id, 16);
    }
  }
  char name[SEG_NAME_MAX], path[512];
  seg_name_format(name, day, first, 0);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    FUZZ_CHECK(write_full(fd, file, len, 0) == 0, "cannot write the segment");
    close(fd);
    read_all(NULL);
    snapshot_filter f;
    snapshot_filter_init(&f);
    f.point = "payment";
    f.since_ns = 1;
    read_all(&f);
  }
  free(file);
  cleanup();
  return 0;
}
