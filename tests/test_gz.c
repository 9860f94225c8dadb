/*
 * test_gz.c - the streaming gzip writer (src/common/gz.c): a stream written
 * piece by piece and closed with end_copy at many points is a valid .gz file
 * at each of them, holding exactly what was written up to there, and the
 * stream goes on unchanged after each end_copy; a dump's shape (stream bytes,
 * end_copy, then a member of the tail) reads back whole. Checked with the
 * library's own inflate and with Python's gzip module (an independent reader)
 * when a Python is given. Also: zlib missing (MLPROF_ZLIB_LIBRARY naming a
 * library that does not exist) gives a message that names zlib and why;
 * truncated, corrupt and trailing bytes are refused.
 *
 * usage: test_gz OUT_DIR [PYTHON]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/common/gz.h"

static int g_failures;

#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                             \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fprintf(stderr, "\n");                                                                           \
            g_failures++;                                                                                    \
        }                                                                                                    \
    } while (0)

static const char *g_dir;

/* Whether gz holds exactly want (n bytes), read with gz_inflate. */
static int inflates_to(const mlprof__sb *gz, const char *want, size_t n)
{
    mlprof__sb plain;
    mlprof__sb_init(&plain);
    int rc = mlprof__gz_inflate(gz->data, gz->len, &plain);
    int ok = rc == MLPROF_OK && plain.len == n && (n == 0 || memcmp(plain.data, want, n) == 0);
    if (!ok)
        fprintf(stderr, "inflate: rc %d (%s), %zu bytes, want %zu\n", rc, mlprof_last_error(), plain.len, n);
    mlprof__sb_free(&plain);
    return ok;
}

static int write_file(const char *name, const void *p, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* Pieces of the kinds a trace has: JSON-like text that repeats, runs of one
 * byte, bytes that do not compress, an empty piece, and a large piece. */
static void make_piece(int k, mlprof__sb *piece)
{
    mlprof__sb_reset(piece);
    unsigned seed = 12345u + (unsigned)k * 7919u;
    switch (k % 5) {
    case 0:
        for (int i = 0; i < 200 + 50 * k; i++)
            mlprof__sb_printf(piece, "{\"ph\":\"X\",\"name\":\"op%d\",\"ts\":%d.%03d},\n", i % 17, i * 13, i % 1000);
        break;
    case 1:
        for (int i = 0; i < 5000; i++)
            mlprof__sb_putc(piece, 'a');
        break;
    case 2:
        for (int i = 0; i < 20000; i++) {
            seed = seed * 1103515245u + 12345u;
            mlprof__sb_putc(piece, (char)(seed >> 16));
        }
        break;
    case 3:
        break; /* empty */
    default:
        for (int i = 0; i < 60000; i++)
            mlprof__sb_printf(piece, "line %d of a large piece\n", i);
        break;
    }
}

/* Writes pieces; after each, the stream's bytes + end_copy must hold all the
 * pieces so far, and a dump (+ a member of a tail) must hold them + the tail.
 * Snapshots are also written to files for the Python check. */
static int stream_snapshots(int level, int save)
{
    mlprof__gz *z = mlprof__gz_open(level);
    CHECK(z, "gz_open(%d): %s", level, mlprof_last_error());
    if (!z)
        return 0;
    mlprof__sb stream, plain, piece, snap, tail_gz;
    mlprof__sb_init(&stream);
    mlprof__sb_init(&plain);
    mlprof__sb_init(&piece);
    mlprof__sb_init(&snap);
    mlprof__sb_init(&tail_gz);
    static const char tail[] = "\n],\"otherData\":{\"dropped_events\":0}}\n";
    int saved = 0;
    for (int k = 0; k < 12; k++) {
        /* end_copy before any write too (k == 0): an empty member */
        mlprof__sb_reset(&snap);
        mlprof__sb_put(&snap, stream.data ? stream.data : "", stream.len);
        CHECK(mlprof__gz_end_copy(z, &snap) == MLPROF_OK, "end_copy: %s", mlprof_last_error());
        CHECK(inflates_to(&snap, plain.data ? plain.data : "", plain.len), "level %d: snapshot %d", level, k);
        /* the dump's shape: the stream, its end, a whole member of the tail */
        mlprof__sb_reset(&tail_gz);
        CHECK(mlprof__gz_member(tail, sizeof tail - 1, &tail_gz) == MLPROF_OK, "member: %s", mlprof_last_error());
        mlprof__sb_put(&snap, tail_gz.data, tail_gz.len);
        size_t plain_len = plain.len;
        mlprof__sb_put(&plain, tail, sizeof tail - 1);
        CHECK(inflates_to(&snap, plain.data, plain.len), "level %d: dump %d", level, k);
        if (save) {
            char name[64];
            snprintf(name, sizeof name, "snap_%d.gz", k);
            CHECK(write_file(name, snap.data, snap.len), "write %s: %s", name, strerror(errno));
            snprintf(name, sizeof name, "snap_%d.txt", k);
            CHECK(write_file(name, plain.data, plain.len), "write %s: %s", name, strerror(errno));
            saved++;
        }
        plain.len = plain_len; /* the tail was the dump's, not the stream's */
        make_piece(k, &piece);
        size_t before = stream.len;
        CHECK(mlprof__gz_write(z, piece.data ? piece.data : "", piece.len, &stream) == MLPROF_OK, "write: %s",
              mlprof_last_error());
        CHECK(piece.len == 0 || stream.len > before, "piece %d (%zu bytes) gave no output: not flushed", k, piece.len);
        mlprof__sb_put(&plain, piece.data ? piece.data : "", piece.len);
        CHECK(!stream.failed && !plain.failed, "out of memory");
    }
    /* the final state, written twice: end_copy changes nothing */
    mlprof__sb_reset(&snap);
    mlprof__sb_put(&snap, stream.data, stream.len);
    CHECK(mlprof__gz_end_copy(z, &snap) == MLPROF_OK, "end_copy");
    mlprof__sb_reset(&tail_gz);
    CHECK(mlprof__gz_end_copy(z, &tail_gz) == MLPROF_OK, "end_copy again");
    CHECK(tail_gz.len == 10 && memcmp(tail_gz.data, snap.data + snap.len - 10, 10) == 0,
          "two end_copy in a row differ");
    CHECK(inflates_to(&snap, plain.data, plain.len), "level %d: final", level);
    printf("level %d: %zu bytes in, %zu bytes of stream, %d snapshots checked\n", level, plain.len, stream.len, 12);
    mlprof__gz_free(z);
    mlprof__sb_free(&stream);
    mlprof__sb_free(&plain);
    mlprof__sb_free(&piece);
    mlprof__sb_free(&snap);
    mlprof__sb_free(&tail_gz);
    return saved;
}

/* Python's gzip module reads every saved snapshot as its text file. */
static void python_check(const char *python, int count)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'import gzip,sys\n"
             "d=sys.argv[1]\n"
             "for k in range(int(sys.argv[2])):\n"
             "    got=gzip.decompress(open(f\"{d}/snap_{k}.gz\",\"rb\").read())\n"
             "    want=open(f\"{d}/snap_{k}.txt\",\"rb\").read()\n"
             "    assert got==want,(k,len(got),len(want))\n"
             "print(\"python gzip: %d snapshots read back\")' '%s' %d",
             python, count, g_dir, count);
    int rc = system(cmd);
    CHECK(rc == 0, "python's gzip module disagrees (status %d)", rc);
}

static void bad_input(void)
{
    static const char text[] = "some text, some text, some text";
    mlprof__sb gz, plain;
    mlprof__sb_init(&gz);
    mlprof__sb_init(&plain);
    CHECK(mlprof__gz_member(text, sizeof text - 1, &gz) == MLPROF_OK, "member");
    CHECK(inflates_to(&gz, text, sizeof text - 1), "member reads back");
    /* truncated */
    int rc = mlprof__gz_inflate(gz.data, gz.len - 3, &plain);
    CHECK(rc == MLPROF_EPARSE && strstr(mlprof_last_error(), "truncated"), "truncated: %d %s", rc,
          mlprof_last_error());
    /* a wrong CRC */
    gz.data[gz.len - 6] ^= 0x55;
    mlprof__sb_reset(&plain);
    rc = mlprof__gz_inflate(gz.data, gz.len, &plain);
    CHECK(rc == MLPROF_EPARSE && strstr(mlprof_last_error(), "corrupt"), "bad crc: %d %s", rc, mlprof_last_error());
    gz.data[gz.len - 6] ^= 0x55;
    /* bytes after the member that are not gzip */
    mlprof__sb_put(&gz, "junk", 4);
    mlprof__sb_reset(&plain);
    rc = mlprof__gz_inflate(gz.data, gz.len, &plain);
    CHECK(rc == MLPROF_EPARSE && strstr(mlprof_last_error(), "are not gzip"), "trailing: %d %s", rc,
          mlprof_last_error());
    /* not gzip at all */
    mlprof__sb_reset(&plain);
    rc = mlprof__gz_inflate(text, sizeof text - 1, &plain);
    CHECK(rc == MLPROF_EPARSE && strstr(mlprof_last_error(), "magic"), "plain: %d %s", rc, mlprof_last_error());
    /* a level out of range */
    CHECK(mlprof__gz_open(10) == NULL && strstr(mlprof_last_error(), "level 10"), "level 10: %s",
          mlprof_last_error());
    CHECK(mlprof__gz_open(-2) == NULL, "level -2 accepted");
    mlprof__sb_free(&gz);
    mlprof__sb_free(&plain);
}

/* In a child (zlib is looked up once per process): a library that cannot be
 * loaded makes gz_open and gz_member fail with a message naming zlib, the
 * file and why. */
static void zlib_missing(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("MLPROF_ZLIB_LIBRARY", "/nonexistent/libz-for-test.so.1", 1);
        int bad = 0;
        if (mlprof__gz_open(6) != NULL)
            bad |= 1;
        const char *e = mlprof_last_error();
        if (!strstr(e, "zlib") || !strstr(e, "/nonexistent/libz-for-test.so.1") ||
            !strstr(e, "No such file"))
            bad |= 2;
        printf("zlib missing: %s\n", e);
        mlprof__sb sb;
        mlprof__sb_init(&sb);
        if (mlprof__gz_member("x", 1, &sb) != MLPROF_EUNSUPPORTED || mlprof__gz_inflate("\x1f\x8b", 2, &sb) !=
                                                                         MLPROF_EUNSUPPORTED)
            bad |= 4;
        fflush(NULL);
        _exit(bad);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zlib missing: child status %d", st);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_gz OUT_DIR [PYTHON]\n");
        return 2;
    }
    g_dir = argv[1];
    zlib_missing();
    mlprof__gz *probe = mlprof__gz_open(-1);
    if (!probe) {
        printf("gz: skipped: %s\n", mlprof_last_error());
        return g_failures ? 1 : 0;
    }
    mlprof__gz_free(probe);
    int saved = stream_snapshots(6, 1);
    stream_snapshots(0, 0); /* stored blocks */
    stream_snapshots(9, 0);
    stream_snapshots(-1, 0);
    if (argc > 2 && saved)
        python_check(argv[2], saved);
    else
        printf("python check: skipped: no python given\n");
    bad_input();
    if (g_failures) {
        fprintf(stderr, "%d failure(s)\n", g_failures);
        return 1;
    }
    printf("gz: all checks passed\n");
    return 0;
}
