/* The chaos suite's LD_PRELOAD shim (loadtest/chaos/shim.py builds and drives it).
 *
 * A slow disk and a wrong clock for one process, without touching the product's code:
 * - write/pwrite/writev/pwritev on a regular file sleep YAK_CHAOS_CONTROL's write delay first, and
 *   fsync/fdatasync sleep its fsync delay (sockets and pipes are never delayed: fstat);
 * - clock_gettime(CLOCK_REALTIME*), gettimeofday and time return the real time plus its clock
 *   offset (monotonic clocks are left alone: a stepped wall clock is what NTP does).
 * The control file holds "<write_delay_us> <fsync_delay_us> <clock_offset_ms>" and is read
 * again at most every 50 ms. Thread-safe: the three values are atomics, a racing refresh
 * reads the same file.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static long write_delay_us, fsync_delay_us, clock_offset_ms;
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
    long w = 0, f = 0, c = 0;
    if (sscanf(buf, "%ld %ld %ld", &w, &f, &c) == 3) {
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

#define REAL(ret, name, ...)                                  \
    static ret (*real_##name)(__VA_ARGS__);                   \
    if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name);

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(ssize_t, write, int, const void *, size_t)
    delay_file(fd, &write_delay_us);
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(ssize_t, pwrite, int, const void *, size_t, off_t)
    delay_file(fd, &write_delay_us);
    return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    REAL(ssize_t, pwrite64, int, const void *, size_t, off_t)
    delay_file(fd, &write_delay_us);
    return real_pwrite64(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    REAL(ssize_t, writev, int, const struct iovec *, int)
    delay_file(fd, &write_delay_us);
    return real_writev(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    REAL(ssize_t, pwritev, int, const struct iovec *, int, off_t)
    delay_file(fd, &write_delay_us);
    return real_pwritev(fd, iov, iovcnt, offset);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    REAL(ssize_t, pwritev64, int, const struct iovec *, int, off_t)
    delay_file(fd, &write_delay_us);
    return real_pwritev64(fd, iov, iovcnt, offset);
}

ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    REAL(ssize_t, pwritev2, int, const struct iovec *, int, off_t, int)
    delay_file(fd, &write_delay_us);
    return real_pwritev2(fd, iov, iovcnt, offset, flags);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
    REAL(ssize_t, pwritev64v2, int, const struct iovec *, int, off_t, int)
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
