/*
 * lazyfs: a FUSE file system that loses power on command (etcd's LazyFS idea, for etcetera's tests).
 *
 *   lazyfs --disk DIR --work DIR [--log FILE] [--seed N] [--tear] [--writeback P] [--die-with-parent] MOUNTPOINT
 *
 * --writeback P: at the power cut, each 4 KiB page of unsynced data had reached the disk with
 * probability P% (seeded), in no particular order: the kernel's background writeback, which can
 * put a later write on disk without an earlier one. Default 0 (only fsync persists anything).
 *
 * --die-with-parent: a power cut when the process that started lazyfs dies (a test runner killed on
 * a timeout leaves no mount behind).
 *
 * DURABILITY MODEL (what survives a power cut)
 *
 *   The DISK directory is the platter: after lazyfs exits, DISK holds exactly what a machine would
 *   find after losing power at that moment, and nothing else. Everything a process does through the
 *   mount goes first to a volatile layer (the "page cache"): a scratch copy of the tree in
 *   WORK/live, kept by the host's kernel, plus lazyfs's own bookkeeping of which bytes and which
 *   directory entries are not yet durable. Reads see the volatile layer (the newest data), as reads
 *   through a page cache do.
 *
 *   - Data. A write, a truncate, an fallocate changes the volatile file only; lazyfs records the
 *     byte range it touched. fsync or fdatasync of a file (or any write on a handle opened with
 *     O_SYNC/O_DSYNC) copies every recorded range of that file, and its size, into the file's
 *     durable inode and fsyncs the durable inode on the host (write-through + fsync on the backing
 *     fd): that inode is hard-linked into DISK under each of the file's durable names. fdatasync and
 *     fsync are the same here (timestamps and modes are not modelled). Nothing else makes data
 *     durable: not close, not a clean unmount, not time (no 30 s writeback unless --writeback
 *     says so; by default the strictest POSIX reading, so a missing fsync always shows).
 *   - Size. A size change (growing write, truncate) is file data: durable at the file's fsync.
 *   - Names. create, mknod, mkdir, unlink, rmdir, rename, link and symlink change the volatile tree
 *     only. fsync of a directory D makes D's entries on disk equal to its volatile entries: each name
 *     then refers to the same inode as in the volatile tree (a file created and never fsynced
 *     becomes an empty file, as with delayed allocation; a file renamed keeps its durable data), and
 *     names gone from D are gone from disk. fsync of a file does NOT make its name durable (POSIX:
 *     fsync the directory). A rename is durable in the new parent at that parent's fsync; a
 *     directory moved on disk leaves its old place at the same moment (a journalled rename).
 *   - Directories themselves. fsync of a directory also makes that directory exist on disk at its
 *     current path (creating missing ancestors), as ext4's journal commit does; this is the one
 *     place the model is more lenient than POSIX.
 *   - Power cut (SIGUSR1, or any exit: SIGTERM, unmount): lazyfs stops serving, and everything
 *     above that was not made durable is dropped: DISK is left as it is (with --writeback, a seeded
 *     part of the unsynced file data reaches it first). With --tear, the newest
 *     write not covered by an fsync is torn: a seeded prefix of it (1..len-1 bytes) reaches the disk
 *     inode (a torn sector write), if that inode has a durable name. With --log, lazyfs writes what
 *     it dropped (each lost write range, torn write, lost or resurrected directory entry) so that a
 *     failure can be explained and replayed. The caller then mounts a new lazyfs on the same DISK,
 *     which starts from what is left.
 *
 *   Not modelled: background writeback unless --writeback is given (then only of file data,
 *   never of directory entries), modes, owners, timestamps, xattrs,
 *   special files (fifos/sockets are created in the volatile tree only and never on disk).
 *
 * Single-threaded (fuse_loop): every operation is serialized, so a run is reproducible for a given order
 * of operations. WORK must be on the same host file system as DISK (hard links).
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <inttypes.h>
#include <limits.h>
#include <search.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <unistd.h>

#define DIE(...)                                                                                                       \
  do {                                                                                                                 \
    fprintf(stderr, "lazyfs: " __VA_ARGS__);                                                                           \
    fputc('\n', stderr);                                                                                               \
    exit(2);                                                                                                           \
  } while (0)
#define CHECK(cond, ...)                                                                                               \
  do {                                                                                                                 \
    if (!(cond)) DIE(__VA_ARGS__);                                                                                     \
  } while (0)

/* ---- configuration */

static char disk_root[PATH_MAX];  /* durable tree */
static char live_root[PATH_MAX];  /* volatile tree (page cache stand-in) */
static char store_root[PATH_MAX]; /* durable inodes, hard-linked into disk_root */
static char orphan_root[PATH_MAX]; /* durable dirs displaced from the disk tree, waiting for a new place */
static char log_path[PATH_MAX];
static uint64_t seed = 1;
static int tear = 0;
static int writeback_pct = 0; /* --writeback P: each unsynced page reached the disk with probability P% */
static volatile sig_atomic_t cut_requested = 0;

/* ---- bookkeeping: files (by id), directories (by id), volatile inode number -> id */

struct range {
  off_t off;
  off_t len;
  uint64_t seq; /* global write order, for the torn write */
};

struct file {
  char *path;     /* last known volatile path (for the log) */
  int has_store;  /* store_root/<id> exists: the durable inode */
  struct range *r; /* ranges written since the last fsync, in write order (merged when long) */
  size_t n, cap;
  struct range last; /* newest unsynced write (len 0: none) */
};

struct dir {
  int durable;       /* exists on disk (or in the orphanage) */
  int orphan;        /* durable but displaced into orphan_root/<id> */
  int dparent;       /* durable parent dir id */
  char *dname;       /* durable name in dparent */
  ino_t d_ino;       /* inode of the durable directory on the host */
};

static struct file *files;
static size_t nfiles, capfiles;
static struct dir *dirs;
static size_t ndirs, capdirs;
static uint64_t write_seq;

enum kind { K_FILE = 1, K_DIR = 2 };
struct ino_entry {
  ino_t ino;
  int kind;
  int id;
};
static void *ino_tree;

static int ino_cmp(const void *a, const void *b) {
  const struct ino_entry *x = a, *y = b;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  return x->kind - y->kind;
}

static int ino_get(ino_t ino, int kind) {
  struct ino_entry key = {ino, kind, 0};
  struct ino_entry **hit = tfind(&key, &ino_tree, ino_cmp);
  return hit ? (*hit)->id : -1;
}

static void ino_put(ino_t ino, int kind, int id) {
  struct ino_entry *e = malloc(sizeof *e);
  CHECK(e, "out of memory");
  e->ino = ino;
  e->kind = kind;
  e->id = id;
  struct ino_entry **hit = tsearch(e, &ino_tree, ino_cmp);
  CHECK(hit, "out of memory");
  if (*hit != e) {
    (*hit)->id = id;
    free(e);
  }
}

static void ino_drop(ino_t ino, int kind) {
  struct ino_entry key = {ino, kind, 0};
  struct ino_entry **hit = tfind(&key, &ino_tree, ino_cmp);
  if (!hit) return;
  struct ino_entry *e = *hit;
  tdelete(&key, &ino_tree, ino_cmp);
  free(e);
}

static int new_file(const char *path) {
  if (nfiles == capfiles) {
    capfiles = capfiles ? capfiles * 2 : 64;
    files = realloc(files, capfiles * sizeof *files);
    CHECK(files, "out of memory");
  }
  struct file *f = &files[nfiles];
  memset(f, 0, sizeof *f);
  f->path = strdup(path ? path : "?");
  return (int)nfiles++;
}

static int new_dir(void) {
  if (ndirs == capdirs) {
    capdirs = capdirs ? capdirs * 2 : 64;
    dirs = realloc(dirs, capdirs * sizeof *dirs);
    CHECK(dirs, "out of memory");
  }
  memset(&dirs[ndirs], 0, sizeof dirs[ndirs]);
  dirs[ndirs].dparent = -1;
  return (int)ndirs++;
}

static void set_path(int id, const char *path) {
  if (!path) return;
  free(files[id].path);
  files[id].path = strdup(path);
}

static int range_cmp(const void *a, const void *b) {
  const struct range *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* Sorts and merges the ranges of f in place (write order is lost; f->last keeps the newest). */
static void merge_ranges(struct file *f) {
  if (f->n < 2) return;
  qsort(f->r, f->n, sizeof *f->r, range_cmp);
  size_t out = 0;
  for (size_t i = 1; i < f->n; i++) {
    struct range *a = &f->r[out], *b = &f->r[i];
    if (b->off <= a->off + a->len) {
      off_t end = b->off + b->len > a->off + a->len ? b->off + b->len : a->off + a->len;
      a->len = end - a->off;
      if (b->seq > a->seq) a->seq = b->seq;
    } else {
      f->r[++out] = *b;
    }
  }
  f->n = out + 1;
}

static void mark_dirty(int id, off_t off, off_t len) {
  if (len <= 0) return;
  struct file *f = &files[id];
  if (f->n == f->cap) {
    if (f->cap >= (1u << 16)) merge_ranges(f);
    if (f->n == f->cap) {
      f->cap = f->cap ? f->cap * 2 : 16;
      f->r = realloc(f->r, f->cap * sizeof *f->r);
      CHECK(f->r, "out of memory");
    }
  }
  struct range r = {off, len, ++write_seq};
  f->r[f->n++] = r;
  f->last = r;
}

/* ---- paths */

static void live_path(char *out, const char *path) { snprintf(out, PATH_MAX, "%s%s", live_root, path); }

static void store_path(char *out, int id) { snprintf(out, PATH_MAX, "%s/%d", store_root, id); }

/* The host path of a durable directory. */
static void dir_path(char *out, int id) {
  struct dir *d = &dirs[id];
  if (id == 0) {
    snprintf(out, PATH_MAX, "%s", disk_root);
    return;
  }
  if (d->orphan) {
    snprintf(out, PATH_MAX, "%s/%d", orphan_root, id);
    return;
  }
  char parent[PATH_MAX];
  dir_path(parent, d->dparent);
  snprintf(out, PATH_MAX, "%s/%s", parent, d->dname);
}

/* ---- host helpers */

static void copy_range(int from, int to, off_t off, off_t len) {
  static char buf[1 << 20];
  while (len > 0) {
    ssize_t want = len < (off_t)sizeof buf ? (ssize_t)len : (ssize_t)sizeof buf;
    ssize_t got = pread(from, buf, want, off);
    CHECK(got >= 0, "pread: %s", strerror(errno));
    if (got == 0) return; /* past the volatile end: the size is set by the caller */
    for (ssize_t done = 0; done < got;) {
      ssize_t w = pwrite(to, buf + done, got - done, off + done);
      CHECK(w > 0, "pwrite to disk: %s", strerror(errno));
      done += w;
    }
    off += got;
    len -= got;
  }
}

static void fsync_path(const char *p) {
  int fd = open(p, O_RDONLY | O_DIRECTORY);
  CHECK(fd >= 0, "open %s: %s", p, strerror(errno));
  CHECK(fsync(fd) == 0, "fsync %s: %s", p, strerror(errno));
  close(fd);
}

static void rm_rf(const char *p) {
  struct stat st;
  if (lstat(p, &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    CHECK(unlink(p) == 0, "unlink %s: %s", p, strerror(errno));
    return;
  }
  DIR *dp = opendir(p);
  CHECK(dp, "opendir %s: %s", p, strerror(errno));
  struct dirent *de;
  while ((de = readdir(dp)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    char c[PATH_MAX];
    snprintf(c, sizeof c, "%s/%s", p, de->d_name);
    rm_rf(c);
  }
  closedir(dp);
  CHECK(rmdir(p) == 0, "rmdir %s: %s", p, strerror(errno));
}

/* ---- durability: files */

static void ensure_store(int id) {
  if (files[id].has_store) return;
  char sp[PATH_MAX];
  store_path(sp, id);
  int fd = open(sp, O_CREAT | O_EXCL | O_WRONLY, 0644);
  CHECK(fd >= 0, "create %s: %s", sp, strerror(errno));
  close(fd);
  files[id].has_store = 1;
}

/* fsync of a file: its recorded ranges and size reach the durable inode, which is fsynced. */
static int sync_file(int id, int vfd) {
  struct file *f = &files[id];
  struct stat vst;
  if (fstat(vfd, &vst) != 0) return -errno;
  ensure_store(id);
  char sp[PATH_MAX];
  store_path(sp, id);
  int sfd = open(sp, O_WRONLY);
  CHECK(sfd >= 0, "open %s: %s", sp, strerror(errno));
  merge_ranges(f);
  for (size_t i = 0; i < f->n; i++) {
    off_t end = f->r[i].off + f->r[i].len;
    if (end > vst.st_size) end = vst.st_size;
    if (end > f->r[i].off) copy_range(vfd, sfd, f->r[i].off, end - f->r[i].off);
  }
  struct stat sst;
  CHECK(fstat(sfd, &sst) == 0, "fstat %s", sp);
  if (sst.st_size != vst.st_size) CHECK(ftruncate(sfd, vst.st_size) == 0, "ftruncate %s: %s", sp, strerror(errno));
  CHECK(fdatasync(sfd) == 0, "fdatasync %s: %s", sp, strerror(errno));
  close(sfd);
  f->n = 0;
  f->last.len = 0;
  return 0;
}

/* The file id of the volatile inode at host path lp (assigned on first sight). */
static int file_for(const char *lp, const char *path, struct stat *st) {
  int id = ino_get(st->st_ino, K_FILE);
  if (id < 0) {
    id = new_file(path ? path : lp);
    ino_put(st->st_ino, K_FILE, id);
  }
  return id;
}

static int dir_for(const struct stat *st) {
  int id = ino_get(st->st_ino, K_DIR);
  if (id < 0) {
    id = new_dir();
    ino_put(st->st_ino, K_DIR, id);
  }
  return id;
}

/* ---- durability: directories */

static int dir_by_dino(ino_t ino) {
  for (size_t i = 0; i < ndirs; i++)
    if (dirs[i].durable && dirs[i].d_ino == ino) return (int)i;
  return -1;
}

/* Removes disk entry `name` of durable dir `parent`; a durable directory goes to the orphanage. */
static void displace(int parent, const char *name) {
  char pp[PATH_MAX], p[PATH_MAX];
  dir_path(pp, parent);
  snprintf(p, sizeof p, "%s/%s", pp, name);
  struct stat st;
  if (lstat(p, &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    CHECK(unlink(p) == 0, "unlink %s: %s", p, strerror(errno));
    return;
  }
  int id = dir_by_dino(st.st_ino);
  if (id < 0) {
    rm_rf(p);
    return;
  }
  dirs[id].orphan = 1;
  char op[PATH_MAX];
  dir_path(op, id);
  CHECK(rename(p, op) == 0, "rename %s %s: %s", p, op, strerror(errno));
}

/* Makes durable dir `id` be entry `name` of durable dir `parent` on disk. */
static void place_dir(int id, int parent, const char *name) {
  char pp[PATH_MAX], p[PATH_MAX];
  dir_path(pp, parent);
  snprintf(p, sizeof p, "%s/%s", pp, name);
  struct dir *d = &dirs[id];
  struct stat st;
  if (d->durable && lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && st.st_ino == d->d_ino) return;
  displace(parent, name);
  if (d->durable) {
    char from[PATH_MAX];
    dir_path(from, id);
    int was_orphan = d->orphan;
    int old_parent = d->dparent;
    CHECK(rename(from, p) == 0, "rename %s %s: %s", from, p, strerror(errno));
    if (!was_orphan && old_parent != parent) {
      char opp[PATH_MAX];
      d->orphan = 0;
      free(d->dname);
      d->dname = strdup(name);
      d->dparent = parent;
      dir_path(opp, old_parent);
      fsync_path(opp);
      return;
    }
  } else {
    CHECK(mkdir(p, 0755) == 0, "mkdir %s: %s", p, strerror(errno));
    CHECK(lstat(p, &st) == 0, "lstat %s", p);
    d->durable = 1;
    d->d_ino = st.st_ino;
  }
  d->orphan = 0;
  free(d->dname);
  d->dname = strdup(name);
  d->dparent = parent;
}

static int has_name(char **names, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(names[i], name)) return 1;
  return 0;
}

static int reconcile(const char *path);

/* Makes the volatile directory at `path` exist on disk (the lenient part of the model). */
static int ensure_dir_durable(const char *path, int *out) {
  char lp[PATH_MAX];
  live_path(lp, path);
  struct stat st;
  if (lstat(lp, &st) != 0) return -errno;
  int id = dir_for(&st);
  if (id == 0 || (dirs[id].durable && !dirs[id].orphan)) {
    *out = id;
    return 0;
  }
  char parent[PATH_MAX];
  snprintf(parent, sizeof parent, "%s", path);
  char *slash = strrchr(parent, '/');
  char namebuf[NAME_MAX + 1];
  snprintf(namebuf, sizeof namebuf, "%s", slash + 1);
  if (slash == parent) parent[1] = 0;
  else *slash = 0;
  int pid;
  int r = ensure_dir_durable(parent, &pid);
  if (r) return r;
  place_dir(id, pid, namebuf);
  char pp[PATH_MAX];
  dir_path(pp, pid);
  fsync_path(pp);
  *out = id;
  return 0;
}

/* fsync of a directory: its disk entries become its volatile entries. */
static int reconcile(const char *path) {
  int id;
  int r = ensure_dir_durable(path, &id);
  if (r) return r;
  char lp[PATH_MAX], dp[PATH_MAX];
  live_path(lp, path);
  dir_path(dp, id);
  DIR *vd = opendir(lp);
  if (!vd) return -errno;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(vd)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 32;
      names = realloc(names, cap * sizeof *names);
      CHECK(names, "out of memory");
    }
    names[n++] = strdup(de->d_name);
  }
  closedir(vd);
  for (size_t i = 0; i < n; i++) {
    char vc[PATH_MAX], dc[PATH_MAX], rel[PATH_MAX];
    snprintf(vc, sizeof vc, "%s/%s", lp, names[i]);
    snprintf(dc, sizeof dc, "%s/%s", dp, names[i]);
    snprintf(rel, sizeof rel, "%s/%s", strcmp(path, "/") ? path : "", names[i]);
    struct stat vst, dst;
    if (lstat(vc, &vst) != 0) continue;
    int have = lstat(dc, &dst) == 0;
    if (S_ISREG(vst.st_mode)) {
      int fid = file_for(vc, rel, &vst);
      ensure_store(fid);
      char sp[PATH_MAX];
      store_path(sp, fid);
      struct stat sst;
      CHECK(stat(sp, &sst) == 0, "stat %s", sp);
      if (have && dst.st_ino == sst.st_ino) continue;
      displace(id, names[i]);
      CHECK(link(sp, dc) == 0, "link %s %s: %s", sp, dc, strerror(errno));
    } else if (S_ISDIR(vst.st_mode)) {
      place_dir(dir_for(&vst), id, names[i]);
    } else if (S_ISLNK(vst.st_mode)) {
      char vt[PATH_MAX], dt[PATH_MAX];
      ssize_t vn = readlink(vc, vt, sizeof vt - 1);
      if (vn < 0) continue;
      vt[vn] = 0;
      if (have && S_ISLNK(dst.st_mode)) {
        ssize_t dn = readlink(dc, dt, sizeof dt - 1);
        if (dn >= 0) {
          dt[dn] = 0;
          if (!strcmp(vt, dt)) continue;
        }
      }
      displace(id, names[i]);
      CHECK(symlink(vt, dc) == 0, "symlink %s: %s", dc, strerror(errno));
    } else if (have) {
      displace(id, names[i]); /* special files are not modelled on disk */
    }
  }
  DIR *ddp = opendir(dp);
  CHECK(ddp, "opendir %s: %s", dp, strerror(errno));
  char **gone = NULL;
  size_t ng = 0, capg = 0;
  while ((de = readdir(ddp)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (has_name(names, n, de->d_name)) continue;
    if (ng == capg) {
      capg = capg ? capg * 2 : 8;
      gone = realloc(gone, capg * sizeof *gone);
      CHECK(gone, "out of memory");
    }
    gone[ng++] = strdup(de->d_name);
  }
  closedir(ddp);
  for (size_t i = 0; i < ng; i++) {
    displace(id, gone[i]);
    free(gone[i]);
  }
  free(gone);
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  fsync_path(dp);
  return 0;
}

/* ---- start: the volatile tree begins as a copy of the disk */

static void copy_file(const char *from, const char *to) {
  int a = open(from, O_RDONLY), b = open(to, O_CREAT | O_EXCL | O_WRONLY, 0644);
  CHECK(a >= 0 && b >= 0, "copy %s -> %s: %s", from, to, strerror(errno));
  struct stat st;
  CHECK(fstat(a, &st) == 0, "fstat %s", from);
  copy_range(a, b, 0, st.st_size);
  CHECK(ftruncate(b, st.st_size) == 0, "ftruncate %s", to);
  fchmod(b, st.st_mode & 07777);
  close(a);
  close(b);
}

struct seen {
  ino_t d_ino;
  char *live;
};

static void load(int did, const char *dpath, const char *lpath, const char *rel, struct seen **seen, size_t *nseen) {
  DIR *dp = opendir(dpath);
  CHECK(dp, "opendir %s: %s", dpath, strerror(errno));
  struct dirent *de;
  while ((de = readdir(dp)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    char d[PATH_MAX], l[PATH_MAX], r[PATH_MAX];
    snprintf(d, sizeof d, "%s/%s", dpath, de->d_name);
    snprintf(l, sizeof l, "%s/%s", lpath, de->d_name);
    snprintf(r, sizeof r, "%s/%s", rel, de->d_name);
    struct stat st, lst;
    CHECK(lstat(d, &st) == 0, "lstat %s", d);
    if (S_ISDIR(st.st_mode)) {
      CHECK(mkdir(l, st.st_mode & 07777) == 0, "mkdir %s: %s", l, strerror(errno));
      CHECK(lstat(l, &lst) == 0, "lstat %s", l);
      int id = dir_for(&lst);
      dirs[id].durable = 1;
      dirs[id].dparent = did;
      dirs[id].dname = strdup(de->d_name);
      dirs[id].d_ino = st.st_ino;
      load(id, d, l, r, seen, nseen);
    } else if (S_ISREG(st.st_mode)) {
      const char *twin = NULL;
      for (size_t i = 0; i < *nseen; i++)
        if ((*seen)[i].d_ino == st.st_ino) twin = (*seen)[i].live;
      if (twin) {
        CHECK(link(twin, l) == 0, "link %s: %s", l, strerror(errno));
        continue;
      }
      copy_file(d, l);
      CHECK(lstat(l, &lst) == 0, "lstat %s", l);
      int id = file_for(l, r, &lst);
      char sp[PATH_MAX];
      store_path(sp, id);
      CHECK(link(d, sp) == 0, "link %s %s: %s", d, sp, strerror(errno));
      files[id].has_store = 1;
      if (st.st_nlink > 1) {
        *seen = realloc(*seen, (*nseen + 1) * sizeof **seen);
        CHECK(*seen, "out of memory");
        (*seen)[*nseen].d_ino = st.st_ino;
        (*seen)[(*nseen)++].live = strdup(l);
      }
    } else if (S_ISLNK(st.st_mode)) {
      char t[PATH_MAX];
      ssize_t tn = readlink(d, t, sizeof t - 1);
      CHECK(tn >= 0, "readlink %s", d);
      t[tn] = 0;
      CHECK(symlink(t, l) == 0, "symlink %s", l);
    }
  }
  closedir(dp);
}

/* ---- power cut: the log of what is lost, the torn write */

static FILE *logf_;

static void logmsg(const char *fmt, ...) {
  if (!logf_) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(logf_, fmt, ap);
  va_end(ap);
  fputc('\n', logf_);
}

/* Entries that differ between the volatile tree and the disk: lost creates/renames, undone unlinks. */
static void diff_tree(const char *rel, const char *lp, const char *dp) {
  DIR *vd = opendir(lp);
  DIR *dd = dp ? opendir(dp) : NULL;
  struct dirent *de;
  if (vd) {
    while ((de = readdir(vd)) != NULL) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      char l[PATH_MAX], d[PATH_MAX], r[PATH_MAX];
      snprintf(l, sizeof l, "%s/%s", lp, de->d_name);
      snprintf(r, sizeof r, "%s/%s", rel, de->d_name);
      struct stat lst, dst;
      if (lstat(l, &lst) != 0) continue;
      int have = 0;
      if (dp) {
        snprintf(d, sizeof d, "%s/%s", dp, de->d_name);
        have = lstat(d, &dst) == 0;
      }
      if (S_ISDIR(lst.st_mode)) {
        if (!have || !S_ISDIR(dst.st_mode)) logmsg("lost-entry path=%s kind=dir", r);
        diff_tree(r, l, have && S_ISDIR(dst.st_mode) ? d : NULL);
      } else if (S_ISREG(lst.st_mode)) {
        int id = ino_get(lst.st_ino, K_FILE);
        char sp[PATH_MAX];
        struct stat sst;
        int same = 0;
        if (have && id >= 0 && files[id].has_store) {
          store_path(sp, id);
          same = stat(sp, &sst) == 0 && sst.st_ino == dst.st_ino;
        }
        if (!same) logmsg("lost-entry path=%s kind=file%s", r, have ? " (disk has another inode there)" : "");
      } else if (!have) {
        logmsg("lost-entry path=%s kind=other", r);
      }
    }
    closedir(vd);
  }
  if (dd) {
    while ((de = readdir(dd)) != NULL) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      char l[PATH_MAX], r[PATH_MAX];
      snprintf(l, sizeof l, "%s/%s", lp, de->d_name);
      snprintf(r, sizeof r, "%s/%s", rel, de->d_name);
      struct stat lst;
      if (lstat(l, &lst) != 0) logmsg("undone-unlink path=%s", r);
    }
    closedir(dd);
  }
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The live file of `id` through its newest path, if that name still holds the same inode; else -1. */
static int open_live(int id) {
  char vp[PATH_MAX];
  live_path(vp, files[id].path);
  int vfd = open(vp, O_RDONLY);
  struct stat vst;
  if (vfd >= 0 && (fstat(vfd, &vst) != 0 || ino_get(vst.st_ino, K_FILE) != id)) {
    close(vfd);
    vfd = -1;
  }
  return vfd;
}

/* --writeback: a seeded subset of the unsynced pages of files with a durable inode reach it. */
static void write_back(void) {
  uint64_t ws = seed ^ 0x5bd1e9955bd1e995ull;
  const off_t page = 4096;
  for (size_t i = 0; i < nfiles; i++) {
    struct file *f = &files[i];
    if (f->n == 0 || !f->has_store) continue;
    int vfd = open_live((int)i);
    if (vfd < 0) continue;
    char sp[PATH_MAX];
    store_path(sp, (int)i);
    int sfd = open(sp, O_WRONLY);
    CHECK(sfd >= 0, "open %s", sp);
    struct stat vst;
    CHECK(fstat(vfd, &vst) == 0, "fstat live %s", f->path);
    off_t run_lo = -1, run_hi = -1;
    for (size_t j = 0; j < f->n; j++) {
      off_t end = f->r[j].off + f->r[j].len;
      if (end > vst.st_size) end = vst.st_size;
      for (off_t p = f->r[j].off / page * page; p < end; p += page) {
        off_t lo = p > f->r[j].off ? p : f->r[j].off, hi = p + page < end ? p + page : end;
        if (hi <= lo || splitmix(&ws) % 100 >= (uint64_t)writeback_pct) continue;
        copy_range(vfd, sfd, lo, hi - lo);
        if (lo == run_hi) {
          run_hi = hi;
        } else {
          if (run_lo >= 0) logmsg("written-back file=%s id=%zu off=%jd len=%jd", f->path, i, (intmax_t)run_lo, (intmax_t)(run_hi - run_lo));
          run_lo = lo;
          run_hi = hi;
        }
      }
    }
    if (run_lo >= 0) logmsg("written-back file=%s id=%zu off=%jd len=%jd", f->path, i, (intmax_t)run_lo, (intmax_t)(run_hi - run_lo));
    CHECK(fdatasync(sfd) == 0, "fdatasync %s", sp);
    close(sfd);
    close(vfd);
  }
}

static void power_cut(void) {
  if (log_path[0]) {
    logf_ = fopen(log_path, "w");
    CHECK(logf_, "open log %s: %s", log_path, strerror(errno));
  }
  logmsg("power-cut seed=%" PRIu64 " tear=%d writeback=%d trigger=%s", seed, tear, writeback_pct, cut_requested ? "signal" : "exit");
  int tear_id = -1;
  for (size_t i = 0; i < nfiles; i++) {
    struct file *f = &files[i];
    if (f->last.len > 0 && (tear_id < 0 || f->last.seq > files[tear_id].last.seq)) tear_id = (int)i;
  }
  for (size_t i = 0; i < nfiles; i++) {
    struct file *f = &files[i];
    if (f->n == 0) continue;
    merge_ranges(f);
    for (size_t j = 0; j < f->n; j++)
      logmsg("lost-write file=%s id=%zu off=%jd len=%jd", f->path, i, (intmax_t)f->r[j].off, (intmax_t)f->r[j].len);
  }
  if (writeback_pct > 0) write_back();
  if (tear && tear_id >= 0 && files[tear_id].has_store && files[tear_id].last.len > 1) {
    struct file *f = &files[tear_id];
    uint64_t s = seed;
    off_t kept = 1 + (off_t)(splitmix(&s) % (uint64_t)(f->last.len - 1));
    char sp[PATH_MAX];
    store_path(sp, tear_id);
    /* The last write's bytes are in the live file, reached by its newest path (the member is dead by
       now, so no handle is open; a file unlinked since has no durable future worth tearing). */
    int sfd = open(sp, O_WRONLY);
    CHECK(sfd >= 0, "open %s", sp);
    /* The name may now belong to another inode (unlinked and created again): then there is nothing to tear. */
    int vfd = open_live(tear_id);
    if (vfd >= 0) {
      copy_range(vfd, sfd, f->last.off, kept);
      CHECK(fdatasync(sfd) == 0, "fdatasync %s", sp);
      close(vfd);
      logmsg("torn-write file=%s id=%d off=%jd len=%jd kept=%jd", f->path, tear_id, (intmax_t)f->last.off,
             (intmax_t)f->last.len, (intmax_t)kept);
    } else {
      logmsg("torn-write-skipped file=%s (the inode has no live name any more)", f->path);
    }
    close(sfd);
  }
  diff_tree("", live_root, disk_root);
  logmsg("end");
  if (logf_) {
    fflush(logf_);
    fsync(fileno(logf_));
    fclose(logf_);
  }
}

/* ---- FUSE operations: everything goes to the volatile tree */

struct handle {
  int fd;
  int id;
  int sync; /* opened O_SYNC/O_DSYNC: each write is followed by an fdatasync */
};

#define H(fi) ((struct handle *)(uintptr_t)(fi)->fh)

static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
  (void)conn;
  cfg->use_ino = 1;
  cfg->hard_remove = 1; /* unlink open files for real: no .fuse_hidden entries in the tree */
  cfg->nullpath_ok = 1;
  cfg->kernel_cache = 0;
  return NULL;
}

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
  if (fi) return fstat(H(fi)->fd, st) ? -errno : 0;
  char lp[PATH_MAX];
  live_path(lp, path);
  return lstat(lp, st) ? -errno : 0;
}

static int op_readlink(const char *path, char *buf, size_t size) {
  char lp[PATH_MAX];
  live_path(lp, path);
  ssize_t n = readlink(lp, buf, size - 1);
  if (n < 0) return -errno;
  buf[n] = 0;
  return 0;
}

static int op_mknod(const char *path, mode_t mode, dev_t rdev) {
  char lp[PATH_MAX];
  live_path(lp, path);
  return mknod(lp, mode, rdev) ? -errno : 0;
}

static int op_mkdir(const char *path, mode_t mode) {
  char lp[PATH_MAX];
  live_path(lp, path);
  return mkdir(lp, mode) ? -errno : 0;
}

static int op_unlink(const char *path) {
  char lp[PATH_MAX];
  live_path(lp, path);
  struct stat st;
  int known = lstat(lp, &st) == 0;
  if (unlink(lp)) return -errno;
  if (known && S_ISREG(st.st_mode) && st.st_nlink <= 1) ino_drop(st.st_ino, K_FILE);
  return 0;
}

static int op_rmdir(const char *path) {
  char lp[PATH_MAX];
  live_path(lp, path);
  struct stat st;
  int known = lstat(lp, &st) == 0;
  if (rmdir(lp)) return -errno;
  if (known) ino_drop(st.st_ino, K_DIR);
  return 0;
}

static int op_symlink(const char *target, const char *path) {
  char lp[PATH_MAX];
  live_path(lp, path);
  return symlink(target, lp) ? -errno : 0;
}

static int op_rename(const char *from, const char *to, unsigned int flags) {
  char a[PATH_MAX], b[PATH_MAX];
  live_path(a, from);
  live_path(b, to);
  struct stat st, vt;
  int src = lstat(a, &st) == 0;
  int victim = !(flags & RENAME_EXCHANGE) && lstat(b, &vt) == 0 && !(src && vt.st_ino == st.st_ino);
  if (renameat2(AT_FDCWD, a, AT_FDCWD, b, flags)) return -errno;
  if (victim) {
    if (S_ISDIR(vt.st_mode)) ino_drop(vt.st_ino, K_DIR);
    else if (S_ISREG(vt.st_mode) && vt.st_nlink <= 1) ino_drop(vt.st_ino, K_FILE);
  }
  if (src && S_ISREG(st.st_mode)) {
    int id = ino_get(st.st_ino, K_FILE);
    if (id >= 0) set_path(id, to);
  }
  return 0;
}

static int op_link(const char *from, const char *to) {
  char a[PATH_MAX], b[PATH_MAX];
  live_path(a, from);
  live_path(b, to);
  return link(a, b) ? -errno : 0;
}

static int op_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
  if (fi) return fchmod(H(fi)->fd, mode) ? -errno : 0;
  char lp[PATH_MAX];
  live_path(lp, path);
  return chmod(lp, mode) ? -errno : 0;
}

static int op_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
  if (fi) return fchown(H(fi)->fd, uid, gid) ? -errno : 0;
  char lp[PATH_MAX];
  live_path(lp, path);
  return lchown(lp, uid, gid) ? -errno : 0;
}

static int do_truncate(int fd, int id, off_t size) {
  struct stat st;
  if (fstat(fd, &st)) return -errno;
  if (ftruncate(fd, size)) return -errno;
  off_t lo = st.st_size < size ? st.st_size : size, hi = st.st_size < size ? size : st.st_size;
  mark_dirty(id, lo, hi - lo);
  return 0;
}

static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
  if (fi) return do_truncate(H(fi)->fd, H(fi)->id, size);
  char lp[PATH_MAX];
  live_path(lp, path);
  int fd = open(lp, O_WRONLY);
  if (fd < 0) return -errno;
  struct stat st;
  fstat(fd, &st);
  int r = do_truncate(fd, file_for(lp, path, &st), size);
  close(fd);
  return r;
}

static int open_handle(const char *path, int fd, int flags, struct fuse_file_info *fi) {
  struct stat st;
  if (fstat(fd, &st)) {
    int e = errno;
    close(fd);
    return -e;
  }
  struct handle *h = malloc(sizeof *h);
  CHECK(h, "out of memory");
  h->fd = fd;
  h->id = S_ISREG(st.st_mode) ? file_for(NULL, path, &st) : -1;
  h->sync = (flags & (O_SYNC | O_DSYNC)) != 0;
  if (h->id >= 0) set_path(h->id, path);
  fi->fh = (uintptr_t)h;
  return 0;
}

/* The volatile file is opened read-write (an fsync reads it to copy to the disk), without the caller's
   sync and append flags: lazyfs decides what is durable, and writes land at the offset the kernel computed. */
static int live_flags(int flags) {
  return (flags & ~(O_ACCMODE | O_SYNC | O_DSYNC | O_APPEND | O_DIRECT | O_CREAT | O_EXCL)) | O_RDWR;
}

static int op_open(const char *path, struct fuse_file_info *fi) {
  char lp[PATH_MAX];
  live_path(lp, path);
  struct stat before;
  int had = lstat(lp, &before) == 0;
  int fd = open(lp, live_flags(fi->flags) & ~O_TRUNC);
  if (fd < 0) return -errno;
  int r = open_handle(path, fd, fi->flags, fi);
  if (r) return r;
  if ((fi->flags & O_TRUNC) && had && H(fi)->id >= 0) return do_truncate(H(fi)->fd, H(fi)->id, 0);
  return 0;
}

static int op_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
  char lp[PATH_MAX];
  live_path(lp, path);
  struct stat before;
  int had = lstat(lp, &before) == 0;
  int fd = open(lp, (live_flags(fi->flags) & ~O_TRUNC) | O_CREAT | (fi->flags & O_EXCL), mode);
  if (fd < 0) return -errno;
  if (!had) {
    struct stat st;
    fstat(fd, &st);
    ino_drop(st.st_ino, K_FILE); /* a new inode, whatever an old one with this number was */
  }
  int r = open_handle(path, fd, fi->flags, fi);
  if (r) return r;
  if ((fi->flags & O_TRUNC) && had) return do_truncate(H(fi)->fd, H(fi)->id, 0);
  return 0;
}

static int op_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
  (void)path;
  ssize_t n = pread(H(fi)->fd, buf, size, off);
  return n < 0 ? -errno : (int)n;
}

static int op_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
  (void)path;
  struct handle *h = H(fi);
  ssize_t n = pwrite(h->fd, buf, size, off);
  if (n < 0) return -errno;
  if (h->id >= 0) {
    mark_dirty(h->id, off, n);
    if (h->sync) {
      int r = sync_file(h->id, h->fd);
      if (r) return r;
    }
  }
  return (int)n;
}

static int op_statfs(const char *path, struct statvfs *st) {
  (void)path;
  return statvfs(live_root, st) ? -errno : 0;
}

static int op_flush(const char *path, struct fuse_file_info *fi) {
  (void)path;
  (void)fi;
  return 0; /* close is not a durability point */
}

static int op_release(const char *path, struct fuse_file_info *fi) {
  (void)path;
  struct handle *h = H(fi);
  close(h->fd);
  free(h);
  return 0;
}

static int op_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
  (void)path;
  (void)datasync;
  struct handle *h = H(fi);
  if (h->id < 0) return 0;
  return sync_file(h->id, h->fd);
}

/* A directory handle keeps the path it was opened by: fsyncdir may be called without one (nullpath_ok). */
struct dir_handle {
  DIR *d;
  char *path;
};

#define DH(fi) ((struct dir_handle *)(uintptr_t)(fi)->fh)

static int op_opendir(const char *path, struct fuse_file_info *fi) {
  char lp[PATH_MAX];
  live_path(lp, path);
  DIR *d = opendir(lp);
  if (!d) return -errno;
  struct dir_handle *h = malloc(sizeof *h);
  CHECK(h, "out of memory");
  h->d = d;
  h->path = strdup(path);
  fi->fh = (uintptr_t)h;
  return 0;
}

static int op_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags) {
  (void)path;
  (void)off;
  (void)flags;
  DIR *d = DH(fi)->d;
  rewinddir(d);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_ino = de->d_ino;
    st.st_mode = (mode_t)DTTOIF(de->d_type);
    if (fill(buf, de->d_name, &st, 0, 0)) break;
  }
  return 0;
}

static int op_releasedir(const char *path, struct fuse_file_info *fi) {
  (void)path;
  closedir(DH(fi)->d);
  free(DH(fi)->path);
  free(DH(fi));
  return 0;
}

static int op_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi) {
  (void)datasync;
  return reconcile(path ? path : DH(fi)->path);
}

static int op_access(const char *path, int mask) {
  char lp[PATH_MAX];
  live_path(lp, path);
  return access(lp, mask) ? -errno : 0;
}

static int op_utimens(const char *path, const struct timespec ts[2], struct fuse_file_info *fi) {
  if (fi) return futimens(H(fi)->fd, ts) ? -errno : 0;
  char lp[PATH_MAX];
  live_path(lp, path);
  return utimensat(AT_FDCWD, lp, ts, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int op_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
  (void)path;
  struct handle *h = H(fi);
  if (fallocate(h->fd, mode, off, len)) return -errno;
  if (h->id >= 0) mark_dirty(h->id, off, len);
  return 0;
}

static const struct fuse_operations ops = {
    .init = op_init,
    .getattr = op_getattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .chmod = op_chmod,
    .chown = op_chown,
    .truncate = op_truncate,
    .open = op_open,
    .create = op_create,
    .read = op_read,
    .write = op_write,
    .statfs = op_statfs,
    .flush = op_flush,
    .release = op_release,
    .fsync = op_fsync,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsyncdir,
    .access = op_access,
    .utimens = op_utimens,
    .fallocate = op_fallocate,
};

static struct fuse *fuse_instance;

static void on_cut(int sig) {
  (void)sig;
  cut_requested = 1;
  if (fuse_instance) fuse_exit(fuse_instance);
}

static void usage(void) {
  fprintf(stderr, "usage: lazyfs --disk DIR --work DIR [--log FILE] [--seed N] [--tear] [--writeback P] [--die-with-parent] MOUNTPOINT\n");
  exit(2);
}

static void abs_path(char *out, const char *p) {
  char *r = realpath(p, NULL);
  CHECK(r, "realpath %s: %s", p, strerror(errno));
  snprintf(out, PATH_MAX, "%s", r);
  free(r);
}

int main(int argc, char **argv) {
  const char *disk = NULL, *work = NULL, *mnt = NULL;
  int die_with_parent = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--disk") && i + 1 < argc) disk = argv[++i];
    else if (!strcmp(argv[i], "--work") && i + 1 < argc) work = argv[++i];
    else if (!strcmp(argv[i], "--log") && i + 1 < argc) snprintf(log_path, sizeof log_path, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--tear")) tear = 1;
    else if (!strcmp(argv[i], "--writeback") && i + 1 < argc) writeback_pct = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--die-with-parent")) die_with_parent = 1;
    else if (argv[i][0] != '-' && !mnt) mnt = argv[i];
    else usage();
  }
  if (!disk || !work || !mnt) usage();
  abs_path(disk_root, disk);
  char w[PATH_MAX];
  abs_path(w, work);
  snprintf(live_root, sizeof live_root, "%s/live", w);
  snprintf(store_root, sizeof store_root, "%s/store", w);
  snprintf(orphan_root, sizeof orphan_root, "%s/orphans", w);
  rm_rf(live_root);
  rm_rf(store_root);
  rm_rf(orphan_root);
  CHECK(mkdir(live_root, 0755) == 0 && mkdir(store_root, 0755) == 0 && mkdir(orphan_root, 0755) == 0, "mkdir in %s: %s",
        w, strerror(errno));
  struct stat st;
  CHECK(lstat(disk_root, &st) == 0 && S_ISDIR(st.st_mode), "%s is not a directory", disk_root);
  int root = new_dir();
  dirs[root].durable = 1;
  dirs[root].d_ino = st.st_ino;
  struct stat lst;
  CHECK(lstat(live_root, &lst) == 0, "lstat %s", live_root);
  ino_put(lst.st_ino, K_DIR, root);
  struct seen *seen = NULL;
  size_t nseen = 0;
  load(root, disk_root, live_root, "", &seen, &nseen);

  char *fargv[] = {argv[0], "-o", "fsname=lazyfs,subtype=lazyfs", NULL};
  struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
  fuse_instance = fuse_new(&args, &ops, sizeof ops, NULL);
  CHECK(fuse_instance, "fuse_new failed");
  CHECK(fuse_mount(fuse_instance, mnt) == 0, "mount on %s failed", mnt);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_cut;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (die_with_parent) {
    CHECK(prctl(PR_SET_PDEATHSIG, SIGTERM) == 0, "prctl: %s", strerror(errno));
    if (getppid() == 1) on_cut(SIGTERM); /* the parent is already gone */
  }
  fprintf(stderr, "lazyfs: mounted %s (disk %s)\n", mnt, disk_root);
  int rc = fuse_loop(fuse_instance);
  fuse_unmount(fuse_instance);
  power_cut();
  fuse_destroy(fuse_instance);
  fprintf(stderr, "lazyfs: power cut, unmounted %s\n", mnt);
  return rc < 0 ? 1 : 0;
}
