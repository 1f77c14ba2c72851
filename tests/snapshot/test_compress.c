/* test_compress.c — compressed blocks (docs/snapshots.md, "Compressed
 * blocks"): segments sealed by rotation and by close are compacted into
 * zstd blocks and read back whole, in order, by id and by time; level 0
 * writes none; a compacted segment reopened for appending takes plain
 * frames after its blocks and recovery cuts a torn one of them without
 * touching the blocks; a damaged block is skipped alone (and its segment is
 * not compacted over it); a compaction's temporary left by a crash goes at
 * the next open. */
#include "helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

/* Records in block entries and in plain entries, over every segment of dir;
 * *v2 counts the segments of version 2. */
static void census(const char *dir, uint64_t *in_blocks, uint64_t *plain, size_t *v2) {
  seg_entry *segs;
  size_t n;
  *in_blocks = *plain = 0;
  *v2 = 0;
  if (seg_list(dir, &segs, &n) < 0) return;
  for (size_t i = 0; i < n; i++) {
    seg_header h;
    seg_index x;
    uint64_t size;
    seg_index_init(&x);
    int fd = seg_open_indexed(dir, segs[i].name, 0, &h, &x, &size, NULL, 0);
    if (fd >= 0) close(fd);
    if (fd >= 0 && h.version == 2) (*v2)++;
    for (size_t k = 0; k < x.n; k++)
      *(x.blocks[k].flags & IDX_FLAG_BLOCK ? in_blocks : plain) += x.blocks[k].count;
    seg_index_free(&x);
  }
  free(segs);
}

static uint64_t dir_bytes(const char *dir) {
  DIR *d = opendir(dir);
  uint64_t total = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (strncmp(e->d_name, "seg-", 4) == 0 && stat(p, &st) == 0) total += (uint64_t)st.st_size;
  }
  if (d) closedir(d);
  return total;
}

/* Appends n records numbered from first, their ids into ids (may be NULL). */
static void write_n(snapshot_log *log, snapshot_idgen *g, uint64_t first, size_t n,
                    uint8_t (*ids)[16]) {
  trec t;
  for (size_t i = 0; i < n; i++) {
    trec_make(&t, g, 1767225600000ull + first + i, first + i, 400);
    CHECK(snapshot_log_append(log, &t.r, NULL) == 0);
    if (ids) memcpy(ids[i], t.r.id, 16);
  }
}

static int all_in_order(const readback *b, size_t n) {
  if (b->n != n || b->bad) return 0;
  for (size_t i = 0; i < n; i++)
    if (b->nums[i] != (long long)i) return 0;
  return 1;
}

static void test_rotation_and_close(void) {
  char *dir = scratch_dir("compress-rot");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_INTERVAL;
  o.segment_bytes = 256 << 10;
  o.block_bytes = 32 << 10;
  enum { N = 3000 };
  static uint8_t ids[N][16];
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  snapshot_log *log = log_open_or_die(dir, &o);
  write_n(log, &g, 0, N, ids);
  snapshot_log_status st;
  CHECK(snapshot_log_close(log, &st) == 0);
  CHECK(st.written == N);
  CHECK(st.segments > 2);
  CHECK(st.compactions == st.segments); /* each rotation, and the close (> a block) */
  CHECK(st.compact_errors == 0);
  CHECK(st.compact_in >= st.bytes && st.compact_out < st.compact_in / 4);
  uint64_t in_blocks, plain;
  size_t v2;
  census(dir, &in_blocks, &plain, &v2);
  CHECK(in_blocks == N && plain == 0);
  CHECK(v2 == st.segments);
  CHECK_MSG(dir_bytes(dir) < st.bytes / 4, "%llu bytes on disk for %llu written",
            (unsigned long long)dir_bytes(dir), (unsigned long long)st.bytes);
  readback b;
  read_all(dir, NULL, &b);
  CHECK(all_in_order(&b, N));
  readback_free(&b);
  /* by id: every one */
  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, NULL, 0) == 0);
  size_t found = 0;
  for (size_t i = 0; i < N; i++) {
    snapshot_rec rec;
    if (snapshot_reader_find(r, ids[i], &rec) == 1 && memcmp(rec.id, ids[i], 16) == 0 &&
        trec_check(&rec) == (long long)i)
      found++;
  }
  CHECK(found == N);
  snapshot_reader_close(r);
  /* by time: the index's block ranges pick the later half */
  snapshot_filter f;
  snapshot_filter_init(&f);
  f.since_ns = (int64_t)(1767225600000ull + N / 2) * 1000000;
  read_all(dir, &f, &b);
  CHECK(b.n == N / 2 && b.bad == 0 && b.nums[0] == N / 2);
  readback_free(&b);
  rm_rf(dir);
  free(dir);
}

static void test_level_zero(void) {
  char *dir = scratch_dir("compress-off");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.compress_level = 0;
  o.segment_bytes = 256 << 10;
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  snapshot_log *log = log_open_or_die(dir, &o);
  write_n(log, &g, 0, 1000, NULL);
  snapshot_log_status st;
  CHECK(snapshot_log_close(log, &st) == 0);
  CHECK(st.compactions == 0);
  uint64_t in_blocks, plain;
  size_t v2;
  census(dir, &in_blocks, &plain, &v2);
  CHECK(in_blocks == 0 && plain == 1000);
  /* an unknown level is refused */
  o.compress_level = 99;
  snapshot_log *bad = NULL;
  char err[SNAPSHOT_ERRLEN] = "";
  CHECK(snapshot_log_open(dir, &o, &bad, err, sizeof err) == SNAPSHOT_EINVAL);
  CHECK_MSG(strstr(err, "compression level 99") != NULL, "%s", err);
  rm_rf(dir);
  free(dir);
}

static char *only_segment(const char *dir) {
  seg_entry *segs;
  size_t n;
  char *p = NULL;
  if (seg_list(dir, &segs, &n) == 0 && n == 1) {
    p = malloc(4096);
    seg_path(p, 4096, dir, segs[0].name, 0);
  }
  if (n) free(segs);
  return p;
}

static void test_reopen_and_torn_tail(void) {
  char *dir = scratch_dir("compress-reopen");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_ALWAYS;
  o.inline_writer = 1;
  o.block_bytes = 32 << 10;
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  snapshot_log *log = log_open_or_die(dir, &o);
  write_n(log, &g, 0, 500, NULL);
  snapshot_log_status st;
  CHECK(snapshot_log_close(log, &st) == 0);
  CHECK(st.compactions == 1);
  /* reopened: five plain frames after the blocks, too few to compact at close */
  log = log_open_or_die(dir, &o);
  write_n(log, &g, 500, 5, NULL);
  CHECK(snapshot_log_close(log, &st) == 0);
  CHECK(st.compactions == 0 && st.segments == 0);
  uint64_t in_blocks, plain;
  size_t v2;
  census(dir, &in_blocks, &plain, &v2);
  CHECK(in_blocks == 500 && plain == 5);
  readback b;
  read_all(dir, NULL, &b);
  CHECK(all_in_order(&b, 505));
  readback_free(&b);
  /* a crash tore the last plain frame: recovery cuts it, the blocks stay */
  char *seg = only_segment(dir);
  CHECK(seg != NULL);
  struct stat sb;
  CHECK(stat(seg, &sb) == 0 && truncate(seg, sb.st_size - 30) == 0);
  char ipath[4200];
  snprintf(ipath, sizeof ipath, "%.4090s", seg);
  memcpy(ipath + strlen(ipath) - 4, ".idx", 5);
  unlink(ipath); /* as after a crash: no index for the torn size */
  log = log_open_or_die(dir, &o);
  snapshot_log_status_get(log, &st);
  CHECK(st.cut_records == 1 && st.cut_bytes > 0 && st.damaged_regions == 0);
  CHECK(snapshot_log_close(log, NULL) == 0);
  read_all(dir, NULL, &b);
  CHECK(all_in_order(&b, 504));
  readback_free(&b);
  free(seg);
  rm_rf(dir);
  free(dir);
}

/* snapshot_verify's problems of kind "damaged", counted. */
static void count_damaged(void *ud, const char *kind, const char *file, const char *detail) {
  (void)file, (void)detail;
  if (strcmp(kind, "damaged") == 0) ++*(int *)ud;
}

static void test_damaged_block(void) {
  char *dir = scratch_dir("compress-damage");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  o.block_bytes = 16 << 10;
  enum { N = 600 };
  static uint8_t ids[N][16];
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  snapshot_log *log = log_open_or_die(dir, &o);
  write_n(log, &g, 0, N, ids);
  CHECK(snapshot_log_close(log, NULL) == 0);
  char *seg = only_segment(dir);
  CHECK(seg != NULL);
  seg_entry *segs;
  size_t n;
  CHECK(seg_list(dir, &segs, &n) == 0 && n == 1);
  seg_header h;
  seg_index x;
  uint64_t size;
  seg_index_init(&x);
  int fd = seg_open_indexed(dir, segs[0].name, 0, &h, &x, &size, NULL, 0);
  CHECK(fd >= 0 && x.n >= 4);
  close(fd);
  /* verify reads the records inside the blocks: all of them, none damaged */
  snapshot_verify_stats vs;
  int damaged = 0;
  char verr[256];
  CHECK(snapshot_verify(dir, count_damaged, &damaged, &vs, verr, sizeof verr) == 0);
  CHECK(vs.records == N && vs.damaged_bytes == 0 && damaged == 0);
  /* a byte in the middle of the second block's compressed data */
  uint64_t lost_first = x.blocks[0].count, lost = x.blocks[1].count;
  uint64_t at = x.blocks[1].off + (x.blocks[2].off - x.blocks[1].off) / 2;
  fd = open(seg, O_RDWR);
  uint8_t c;
  CHECK(pread(fd, &c, 1, (off_t)at) == 1);
  c ^= 0x5a;
  CHECK(pwrite(fd, &c, 1, (off_t)at) == 1);
  close(fd);
  /* verify finds it by the block's checksum: that block's records lost, the
   * others still checked record by record */
  CHECK(snapshot_verify(dir, count_damaged, &damaged, &vs, verr, sizeof verr) == 0);
  CHECK(damaged == 1 && vs.records == N - lost);
  CHECK(vs.damaged_bytes == x.blocks[2].off - x.blocks[1].off);
  /* readers skip that block alone (through the index or scanning) */
  readback b;
  read_all(dir, NULL, &b);
  CHECK(b.n == N - lost && b.bad == 0);
  CHECK(b.nums[lost_first - 1] == (long long)lost_first - 1 &&
        b.nums[lost_first] == (long long)(lost_first + lost));
  readback_free(&b);
  snapshot_reader *r;
  CHECK(snapshot_reader_open(dir, NULL, &r, NULL, 0) == 0);
  snapshot_rec rec;
  CHECK(snapshot_reader_find(r, ids[lost_first], &rec) == 0);
  CHECK(snapshot_reader_find(r, ids[lost_first + lost], &rec) == 1);
  snapshot_reader_close(r);
  /* the writer counts the damage and leaves it: no compaction over it */
  char ipath[4200];
  snprintf(ipath, sizeof ipath, "%.4090s", seg);
  memcpy(ipath + strlen(ipath) - 4, ".idx", 5);
  unlink(ipath);
  log = log_open_or_die(dir, &o);
  snapshot_log_status st;
  snapshot_log_status_get(log, &st);
  CHECK(st.damaged_regions == 1 && st.cut_bytes == 0);
  CHECK(snapshot_log_close(log, &st) == 0);
  CHECK(st.compactions == 0);
  struct stat sb;
  CHECK(stat(seg, &sb) == 0 && (uint64_t)sb.st_size == size);
  seg_index_free(&x);
  free(segs);
  free(seg);
  rm_rf(dir);
  free(dir);
}

static void test_temporary_removed(void) {
  char *dir = scratch_dir("compress-ztmp");
  snapshot_log_opts o;
  snapshot_log_opts_init(&o);
  o.durability = SNAPSHOT_DURABLE_NONE;
  snapshot_idgen g;
  snapshot_idgen_init(&g);
  snapshot_log *log = log_open_or_die(dir, &o);
  write_n(log, &g, 0, 20, NULL);
  CHECK(snapshot_log_close(log, NULL) == 0);
  char *seg = only_segment(dir);
  CHECK(seg != NULL);
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.ztmp", seg);
  FILE *f = fopen(tmp, "w");
  CHECK(f != NULL);
  if (f) fputs("half a compaction", f), fclose(f);
  log = log_open_or_die(dir, &o);
  CHECK(snapshot_log_close(log, NULL) == 0);
  CHECK(access(tmp, F_OK) != 0);
  readback b;
  read_all(dir, NULL, &b);
  CHECK(all_in_order(&b, 20));
  readback_free(&b);
  free(seg);
  rm_rf(dir);
  free(dir);
}

int main(void) {
  test_rotation_and_close();
  test_level_zero();
  test_reopen_and_torn_tail();
  test_damaged_block();
  test_temporary_removed();
  TEST_END();
}
