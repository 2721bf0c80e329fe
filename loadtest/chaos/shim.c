/* The chaos suite's LD_PRELOAD shim (loadtest/chaos/shim.py builds and drives it).
 *
 * A slow disk and a wrong clock for one process, without touching the product's code:
 * - write/pwrite/writev/pwritev on a regular file sleep YAK_CHAOS_CONTROL's write delay first, and
 *   fsync/fdatasync sleep its fsync delay (sockets and pipes are never delayed: fstat);
 * - clock_gettime(CLOCK_REALTIME*), gettimeofday and time return the real time plus its clock
 *   offset (monotonic clocks are left alone: a stepped wall clock is what NTP does).
 * - a full disk: while the control file's fourth number is 1, writes to a regular file whose
 *   path starts with YAK_CHAOS_FULL_DIR fail with ENOSPC (nothing written), as on a file
 *   system without space; reads, fsyncs and other files are untouched.
 * The control file holds "<write_delay_us> <fsync_delay_us> <clock_offset_ms> [<full>]" and is
 * read again at most every 50 ms. Thread-safe: the three values are atomics, a racing refresh
 * reads the same file.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static long write_delay_us, fsync_delay_us, clock_offset_ms, disk_full;
static long long next_read_ns;

static int (*real_clock_gettime)(clockid_t, struct timespec *);

static long long monotonic_ns(void) {
    struct timespec ts;
    if (!real_clock_gettime) real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
    real_clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void refresh(void) {
    long long now = monotonic_ns();
    if (now < __atomic_load_n(&next_read_ns, __ATOMIC_RELAXED)) return;
    __atomic_store_n(&next_read_ns, now + 50000000LL, __ATOMIC_RELAXED);
    const char *path = getenv("YAK_CHAOS_CONTROL");
    if (!path) return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    long w = 0, f = 0, c = 0, full = 0;
    if (sscanf(buf, "%ld %ld %ld %ld", &w, &f, &c, &full) >= 3) {
        __atomic_store_n(&disk_full, full, __ATOMIC_RELAXED);
        __atomic_store_n(&write_delay_us, w, __ATOMIC_RELAXED);
        __atomic_store_n(&fsync_delay_us, f, __ATOMIC_RELAXED);
        __atomic_store_n(&clock_offset_ms, c, __ATOMIC_RELAXED);
    }
}

static void delay_file(int fd, long *which) {
    refresh();
    long us = __atomic_load_n(which, __ATOMIC_RELAXED);
    if (us <= 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) usleep((useconds_t)us);
}

/* Whether a write to fd must fail with ENOSPC: the disk is "full" and fd is a regular file
 * under YAK_CHAOS_FULL_DIR (its path read from /proc/self/fd only while full). */
static int no_space(int fd) {
    refresh();
    if (!__atomic_load_n(&disk_full, __ATOMIC_RELAXED)) return 0;
    const char *dir = getenv("YAK_CHAOS_FULL_DIR");
    if (!dir || !*dir) return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = 0;
    return strncmp(path, dir, strlen(dir)) == 0;
}

#define FULL_CHECK(fd)          \
    if (no_space(fd)) {         \
        errno = ENOSPC;         \
        return -1;              \
    }

#define REAL(ret, name, ...)                                  \
    static ret (*real_##name)(__VA_ARGS__);                   \
    if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name);

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(ssize_t, write, int, const void *, size_t)
    FULL_CHECK(fd)
    delay_file(fd, &write_delay_us);
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(ssize_t, pwrite, int, const void *, size_t, off_t)
    FULL_CHECK(fd)
    delay_file(fd, &write_delay_us);
    return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    REAL(ssize_t, pwrite64, int, const void *, size_t, off_t)
    FULL_CHECK(fd)
    delay_file(fd, &write_delay_us);
    return real_pwrite64(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    REAL(ssize_t, writev, int, const struct iovec *, int)
    FULL_CHECK(fd)
    delay_file(fd, &write_delay_us);
    return real_writev(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    REAL(ssize_t, pwritev, int, const struct iovec *, int, off_t)
    FULL_CHECK(fd)
    delay_file(fd, &write_delay_us);
    return real_pwritev(fd, iov, iovcnt, offset);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    REAL(ssize_t, pwritev64, int, const struct iovec *, int, off_t)
    FULL_CHECK(fd)
    delay_file(fd, &write_delay_us);
    return real_pwritev64(fd, iov, iovcnt, offset);
}

ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    REAL(ssize_t, pwritev2, int, const struct iovec *, int, off_t, int)
    FULL_CHECK(fd)
    delay_file(fd, &write_delay_us);
    return real_pwritev2(fd, iov, iovcnt, offset, flags);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    REAL(ssize_t, pwritev64v2, int, const struct iovec *, int, off_t, int)
    FULL_CHECK(fd)
    delay_file(fd, &write_delay_us);
    return real_pwritev64v2(fd, iov, iovcnt, offset, flags);
}

int fsync(int fd) {
    REAL(int, fsync, int)
    delay_file(fd, &fsync_delay_us);
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(int, fdatasync, int)
    delay_file(fd, &fsync_delay_us);
    return real_fdatasync(fd);
}

static long long offset_ns(void) {
    refresh();
    return (long long)__atomic_load_n(&clock_offset_ms, __ATOMIC_RELAXED) * 1000000LL;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    if (!real_clock_gettime) real_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real_clock_gettime(clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ns();
        ts->tv_sec = ns / 1000000000LL;
        ts->tv_nsec = ns % 1000000000LL;
    }
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    (void)tz;
    if (rc == 0 && tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
