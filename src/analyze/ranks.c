/*
 * ranks.c - the traces of a distributed job's ranks: a directory of them, a
 * list, or a merged trace split by rank. Each rank is read, analysed and
 * freed before the next: the ranks' ids (correlation, External id, flows)
 * never meet, and memory holds one rank's trace at a time, whatever the
 * number of ranks. What is kept of a rank is its analysis as text, the few
 * fields that say its clock, and its summary (dist_ranks.h: totals and one
 * record per collective), from which the stragglers of kernels DIR and the
 * report of mlprof ranks are made at the end: the k-th collective of a name on
 * one rank is the k-th of that name on the others (NCCL runs a communicator's
 * collectives in the same order on every rank), and the rank that starts it
 * last is the one the others waited for.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dist_ranks.h"
#include "gpu.h"
#include "json.h"
#include "merge.h"
#include "ranks.h"

typedef struct rank_in {
    char *path;
    long long rank;
    int rank_given;  /* from distributedInfo */
    mlprof__sb out;  /* its analysis */
    an_merge_input clock; /* what an_merge_offsets reads: otherData, base, clock, span */
    const char *rank_from; /* NULL: distributedInfo or file order */
    long long world_size;  /* distributedInfo.world_size, or -1 */
    char *job;             /* distributedInfo.job_id, or NULL */
    int partial;           /* read only in part: its distributedInfo may be in the part lost */
    an_dist_rank d;  /* mlprof ranks: its summary (dist_ranks.h) */
} rank_in;

typedef struct skipped {
    char *path;
    char *why;
} skipped;

typedef struct ranks {
    const char *dir;
    rank_in *r;
    size_t n, cap;
    skipped *s;
    size_t ns, scap;
    skipped *left;        /* traces read, then left out: no rank beside ranks (the launcher's) */
    size_t nl, lcap;
    char *jobs_differ;    /* the jobs and their traces, when the ranks are of several (an_jobs_differ) */
    an_dist_names names; /* the collectives' names (and MPI's communicators), shared by the ranks */
    int strict;          /* traces named one by one: one that is not a trace is an error */
} ranks;

/* One matched collective: the k-th of its name on every rank that runs it. */
typedef struct matched {
    uint32_t name;
    uint32_t k;
    long long last_rank;
    int64_t skew;  /* the last start less the earliest */
    int64_t first; /* the earliest start, on the first rank's clock */
} matched;

typedef struct rank_late {
    size_t collectives, last;
    int64_t late_total;
} rank_late;

typedef struct stragglers {
    int method;
    matched *m;
    size_t nm, mcap;
    rank_late *late; /* per rank, in rank order */
    size_t names_matched, names_unmatched;
    mlprof__sb unmatched_json, unmatched_text;
} stragglers;

static const char *const k_clock_names[] = {"shared clock", "given offsets", "sync marker", "trace starts",
                                            "system clock", "clock sync"};

/* The name of an alignment (AN_ALIGN_*); one added to merge.h later than
 * this table is still named, not read out of bounds. */
static const char *clock_name(int method)
{
    size_t n = sizeof k_clock_names / sizeof *k_clock_names;
    return method >= 0 && (size_t)method < n ? k_clock_names[method] : "measured offsets";
}

int an_is_directory(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n > m && strcmp(s + n - m, tail) == 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_to(skipped **list, size_t *n, size_t *cap, const char *path, const char *why)
{
    skipped *s = mlprof__grow(*list, cap, *n, sizeof **list, 8);
    if (!s)
        return -1;
    *list = s;
    s[*n].path = mlprof__strdup(path);
    s[*n].why = mlprof__strdup(why);
    if (!s[*n].path || !s[*n].why) {
        mlprof__free(s[*n].path);
        mlprof__free(s[*n].why);
        return -1;
    }
    (*n)++;
    return 0;
}

static int add_skipped(ranks *rs, const char *path, const char *why)
{
    return add_to(&rs->s, &rs->ns, &rs->scap, path, why);
}

static void skipped_free(skipped *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        mlprof__free(s[i].path);
        mlprof__free(s[i].why);
    }
    mlprof__free(s);
}

/* The entries of dir, sorted by name; NULL with err set when it cannot be read. */
static char **list_dir(const char *dir, size_t *n, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "%s: cannot read the directory: %s", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    size_t cap = 0;
    *n = 0;
    struct dirent *de;
    int failed = 0;
    while (!failed && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char **p = mlprof__grow(names, &cap, *n, sizeof *names, 16);
        if (!p || !(p[*n] = mlprof__strdup(de->d_name))) {
            names = p ? p : names;
            failed = 1;
            break;
        }
        names = p;
        (*n)++;
    }
    closedir(d);
    if (failed || !names) {
        for (size_t i = 0; i < *n; i++)
            mlprof__free(names[i]);
        mlprof__free(names);
        if (failed) {
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
        *n = 0;
        names = mlprof__calloc(1, sizeof *names); /* an empty directory: an empty list */
        if (!names)
            snprintf(err, errlen, "out of memory");
        return names;
    }
    mlprof__sort(names, *n, sizeof *names, name_cmp);
    return names;
}

/* distributedInfo.world_size, or -1. */
static long long world_size(const an_trace *t)
{
    return an_dist_info_world_size(t->distributed_info);
}

/* A copy of the job id distributedInfo says (info: its compact JSON), or
 * NULL: none, or out of memory (*oom set). */
static char *job_of(const char *info, int *oom)
{
    char buf[256];
    const char *job = an_dist_info_job_id(info, buf, sizeof buf);
    char *copy = job ? mlprof__strdup(job) : NULL;
    *oom |= job && !copy;
    return copy;
}

static size_t merged_ranks_in(const an_trace *t);

/* Analyses one trace t, read from path (rc: an_trace_read's answer), into a
 * new rank, or skips it (said in rs); t is freed. */
static int take_one(ranks *rs, const char *path, an_trace *tp, int rc, const an_options *o, an_analysis_fn fn,
                    const an_ranks_options *ro, mlprof__sb *notes, int *damaged, char *err, size_t errlen)
{
    an_trace t = *tp;
    int empty = t.nev == 0 && !t.distributed_info && !t.other_data;
    if (rc != 0 && (!t.partial || empty)) {
        /* nothing read: not a trace (a JSON file of another kind), or damaged from its start */
        size_t n = strlen(path);
        const char *why = t.error;
        if (strncmp(why, path, n) == 0 && why[n] == ':')
            why += n + 1 + (why[n + 1] == ' ');
        int other_json = strncmp(why, "not a trace", 11) == 0;
        if (!other_json)
            *damaged = 1;
        char msg[700];
        snprintf(msg, sizeof msg, "%s%s", other_json ? "" : "not read as a trace: ", why);
        rc = add_skipped(rs, path, msg);
        an_trace_free(&t);
        if (rc != 0)
            snprintf(err, errlen, "out of memory");
        return rc;
    }
    if (rc != 0) {
        mlprof__sb_printf(notes, "warning: %s; using the %zu events read before it\n", t.error, t.nev);
        *damaged = 1;
    }
    if (t.note[0])
        mlprof__sb_printf(notes, "note: %s\n", t.note);
    const char *skip = empty ? "holds no trace event" : NULL;
    if (!skip && ro->dist && merged_ranks_in(&t) >= 2)
        skip = "a merged trace of several ranks, beside the ranks' own (give it alone: mlprof ranks MERGED)";
    if (skip) {
        rc = add_skipped(rs, path, skip);
        an_trace_free(&t);
        if (rc != 0)
            snprintf(err, errlen, "out of memory");
        return rc;
    }
    rank_in *r = mlprof__grow(rs->r, &rs->cap, rs->n, sizeof *rs->r, 8);
    if (!r) {
        an_trace_free(&t);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    rs->r = r;
    r = &rs->r[rs->n++];
    memset(r, 0, sizeof *r);
    mlprof__sb_init(&r->out);
    r->path = mlprof__strdup(path);
    r->rank = an_trace_rank(&t);
    r->rank_given = r->rank >= 0;
    r->partial = rc != 0;
    r->world_size = world_size(&t);
    int oom = 0;
    r->job = job_of(t.distributed_info, &oom);
    rc = oom || !r->path || an_merge_summarize(&t, NULL, &r->clock) != 0 ? -1 : 0;
    /* one summary serves both: kernels' stragglers take its communication kernels */
    if (rc == 0 && (ro->stragglers || ro->dist))
        rc = an_dist_collect(&t, NULL, 0, &rs->names, ro->stragglers ? AN_DIST_SRC_KERNEL : AN_DIST_SRC_NONE,
                             &r->d);
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    else if (fn && (rc = an_run_steps(&t, o, fn, &r->out, notes)) != 0)
        snprintf(err, errlen, "%s: the analysis failed (out of memory)", path);
    an_trace_free(&t);
    return rc;
}

/* Reads one trace and takes it (take_one). */
static int read_one(ranks *rs, const char *path, const an_options *o, an_analysis_fn fn,
                    const an_ranks_options *ro, mlprof__sb *notes, int *damaged, char *err, size_t errlen)
{
    an_trace t;
    int rc = an_trace_read(&t, path);
    return take_one(rs, path, &t, rc, o, fn, ro, notes, damaged, err, errlen);
}

static int by_rank(const void *pa, const void *pb)
{
    const rank_in *a = pa, *b = pb;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static void rank_free(rank_in *r)
{
    mlprof__free(r->path);
    mlprof__free(r->job);
    an_merge_input_free(&r->clock);
    an_dist_rank_free(&r->d);
    mlprof__sb_free(&r->out);
}

/* When some traces say their rank and others do not, those others are not
 * ranks of the job: the trace of the launcher that mlprof run wraps
 * (mlprof run -o job.json -- torchrun ...), of a helper process. They are
 * left out, each said in a line, so that they neither count as ranks nor
 * stop the ranks' clock sync from applying. A trace read only in part is
 * kept (numbered in file-name order): the part lost may be where it said its
 * rank (a trace cut short before its distributedInfo). */
static int leave_out_unranked(ranks *rs, mlprof__sb *notes, char *err, size_t errlen)
{
    size_t given = 0;
    for (size_t i = 0; i < rs->n; i++)
        given += rs->r[i].rank_given != 0;
    if (!given || given == rs->n)
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < rs->n; i++) {
        rank_in *r = &rs->r[i];
        if (r->rank_given || r->partial) {
            rs->r[k++] = *r;
            continue;
        }
        mlprof__sb_printf(notes, "left out: %s (no rank: the launcher?)\n", r->path);
        int rc = add_to(&rs->left, &rs->nl, &rs->lcap, r->path,
                        "no rank (distributedInfo.rank) beside traces that have one: the launcher's, or a helper "
                        "process's");
        rank_free(r);
        if (rc != 0) {
            for (size_t j = i + 1; j < rs->n; j++) /* the rest kept, to be freed with the others */
                rs->r[k++] = rs->r[j];
            rs->n = k;
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    rs->n = k;
    return 0;
}

/* Whether the ranks are of several jobs (their distributedInfo's job_id or
 * world_size differ: a part of an earlier job left in job.json.parts/,
 * traces of two runs in one directory): said in notes and kept in
 * rs->jobs_differ; with refuse, an error instead. */
static int check_jobs(ranks *rs, int refuse, mlprof__sb *notes, char *err, size_t errlen)
{
    size_t n = rs->n;
    const char **job = mlprof__calloc(n ? n : 1, sizeof *job), **what = mlprof__calloc(n ? n : 1, sizeof *what);
    long long *world = mlprof__calloc(n ? n : 1, sizeof *world);
    mlprof__sb names, desc;
    mlprof__sb_init(&names);
    mlprof__sb_init(&desc);
    size_t *at = mlprof__calloc(n ? n : 1, sizeof *at);
    int rc = job && what && world && at ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const rank_in *r = &rs->r[i];
        job[i] = r->job;
        world[i] = r->world_size;
        at[i] = names.len;
        if (r->rank_from) /* the ranks of one merged trace */
            mlprof__sb_printf(&names, "rank %lld", r->rank);
        else
            mlprof__sb_printf(&names, "%s (rank %lld)", r->path, r->rank);
        mlprof__sb_putc(&names, '\0');
    }
    rc = rc == 0 && !names.failed ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++)
        what[i] = names.data + at[i];
    int differ = rc == 0 && n > 1 && an_jobs_differ(job, world, what, n, &desc);
    if (desc.failed)
        rc = -1;
    if (rc == 0 && differ && refuse) {
        snprintf(err, errlen, "%s: the traces are of different jobs (their distributedInfo's job_id or world_size "
                              "differ): %s; collectives are not matched across jobs: give one job's traces, or "
                              "--any-job to compare them anyway",
                 rs->dir, desc.data);
        rc = -2;
    } else if (rc == 0 && differ) {
        mlprof__sb_printf(notes, "%s: warning: the traces are of different jobs (their distributedInfo's job_id or "
                                 "world_size differ), compared as one: %s\n",
                          rs->dir, desc.data);
        rs->jobs_differ = mlprof__strdup(desc.data);
        rc = rs->jobs_differ ? 0 : -1;
    }
    if (rc == -1)
        snprintf(err, errlen, "out of memory");
    mlprof__free(job);
    mlprof__free(what);
    mlprof__free(world);
    mlprof__free(at);
    mlprof__sb_free(&names);
    mlprof__sb_free(&desc);
    return rc == 0 ? 0 : -1;
}

/* Ranks from distributedInfo; the others numbered on from the largest, in
 * file-name order (the order they were read in). */
static int number_ranks(ranks *rs, mlprof__sb *notes, char *err, size_t errlen)
{
    long long next = 0;
    size_t given = 0;
    for (size_t i = 0; i < rs->n; i++) {
        if (rs->r[i].rank_given) {
            given++;
            if (rs->r[i].rank + 1 > next)
                next = rs->r[i].rank + 1;
        }
    }
    for (size_t i = 0; i < rs->n; i++) {
        if (!rs->r[i].rank_given)
            rs->r[i].rank = next++;
    }
    if (given < rs->n)
        mlprof__sb_printf(notes, "%s: %zu of %zu traces say no rank (distributedInfo.rank; mlprof writes it when "
                                 "the launcher or the rank key gives one): they are numbered from %lld in "
                                 "file-name order\n",
                          rs->dir, rs->n - given, rs->n, next - (long long)(rs->n - given));
    mlprof__sort(rs->r, rs->n, sizeof *rs->r, by_rank);
    for (size_t i = 1; i < rs->n; i++) {
        if (rs->r[i].rank == rs->r[i - 1].rank) {
            snprintf(err, errlen, "%s: two traces say they are rank %lld: %s and %s (give each rank's trace "
                                  "alone, or one run's traces; for a rank of several processes, the job's "
                                  "merged trace)",
                     rs->dir, rs->r[i].rank, rs->r[i - 1].path, rs->r[i].path);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- stragglers */

static int by_skew(const void *pa, const void *pb)
{
    const matched *a = pa, *b = pb;
    if (a->skew != b->skew)
        return a->skew > b->skew ? -1 : 1;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    return a->name < b->name ? -1 : a->name > b->name;
}

/* The names' counts on each rank where they differ: in text and JSON. */
static void note_unmatched(const ranks *rs, stragglers *st, uint32_t name, const size_t *count, size_t matched_k)
{
    const char *nm = rs->names.s[name];
    mlprof__sb *j = &st->unmatched_json, *x = &st->unmatched_text;
    mlprof__sb_puts(j, st->names_unmatched ? ",{\"name\":" : "{\"name\":");
    mlprof__sb_json_str(j, nm, strlen(nm));
    mlprof__sb_printf(j, ",\"matched\":%zu,\"counts\":[", matched_k);
    mlprof__sb_printf(x, "  %s: matched %zu; per rank", nm, matched_k);
    for (size_t i = 0; i < rs->n; i++) {
        mlprof__sb_printf(j, "%s{\"rank\":%lld,\"count\":%zu}", i ? "," : "", rs->r[i].rank, count[i]);
        mlprof__sb_printf(x, "%s %lld: %zu", i ? "," : "", rs->r[i].rank, count[i]);
    }
    mlprof__sb_puts(j, "]}");
    mlprof__sb_putc(x, '\n');
    st->names_unmatched++;
}

static int find_stragglers(ranks *rs, stragglers *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    mlprof__sb_init(&st->unmatched_json);
    mlprof__sb_init(&st->unmatched_text);
    size_t n = rs->n;
    an_merge_input *clocks = mlprof__calloc(n, sizeof *clocks); /* copies of the ranks' (not owned) */
    int64_t *offset = mlprof__calloc(n, sizeof *offset);
    size_t *pos = mlprof__calloc(n, sizeof *pos), *count = mlprof__calloc(n, sizeof *count);
    st->late = mlprof__calloc(n, sizeof *st->late);
    int rc = clocks && offset && pos && count && st->late ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++)
        clocks[i] = rs->r[i].clock;
    an_merge_options mo = {NULL, NULL, NULL, 0};
    if (rc == 0 && an_merge_offsets(clocks, n, &mo, offset, &st->method, err, errlen) != 0)
        rc = -2;
    /* each rank's kernels come grouped by name, in the order they start (an_dist_collect) */
    for (uint32_t name = 0; rc == 0 && name < rs->names.n; name++) {
        size_t ranks_with = 0, k_min = SIZE_MAX, k_max = 0;
        for (size_t i = 0; i < n; i++) {
            const rank_in *r = &rs->r[i];
            size_t c = 0;
            while (pos[i] + c < r->d.nc && r->d.c[pos[i] + c].name == name)
                c++;
            count[i] = c;
            if (c) {
                ranks_with++;
                k_min = c < k_min ? c : k_min;
                k_max = c > k_max ? c : k_max;
            }
        }
        size_t k_matched = ranks_with >= 2 ? k_min : 0;
        if (k_matched)
            st->names_matched++;
        if (ranks_with < n || k_min != k_max)
            note_unmatched(rs, st, name, count, k_matched);
        for (size_t k = 0; k < k_matched; k++) {
            int64_t first = INT64_MAX, last = INT64_MIN;
            long long last_rank = -1;
            for (size_t i = 0; i < n; i++) {
                if (!count[i])
                    continue;
                int64_t ts = rs->r[i].d.c[pos[i] + k].ts + offset[i];
                if (ts < first)
                    first = ts;
                if (ts > last) {
                    last = ts;
                    last_rank = (long long)i;
                }
            }
            for (size_t i = 0; i < n; i++) {
                if (!count[i])
                    continue;
                st->late[i].collectives++;
                st->late[i].late_total += rs->r[i].d.c[pos[i] + k].ts + offset[i] - first;
            }
            if (last > first)
                st->late[last_rank].last++;
            matched *m = mlprof__grow(st->m, &st->mcap, st->nm, sizeof *st->m, 256);
            if (!m) {
                rc = -1;
                break;
            }
            st->m = m;
            m[st->nm++] = (matched){name, (uint32_t)k + 1, last > first ? rs->r[last_rank].rank : -1,
                                    last - first, first};
        }
        for (size_t i = 0; i < n; i++)
            pos[i] += count[i];
    }
    if (rc == 0)
        mlprof__sort(st->m, st->nm, sizeof *st->m, by_skew);
    if (rc == -1)
        snprintf(err, errlen, "out of memory");
    mlprof__free(clocks);
    mlprof__free(offset);
    mlprof__free(pos);
    mlprof__free(count);
    return rc == 0 && !st->unmatched_json.failed && !st->unmatched_text.failed ? 0 : -1;
}

static void stragglers_free(stragglers *st)
{
    mlprof__free(st->m);
    mlprof__free(st->late);
    mlprof__sb_free(&st->unmatched_json);
    mlprof__sb_free(&st->unmatched_text);
}

/* s padded on the left to width w. */
static void put_padded_duration(mlprof__sb *out, int64_t ns, int w)
{
    mlprof__sb d;
    mlprof__sb_init(&d);
    an_put_duration(&d, ns);
    for (int i = (int)d.len; i < w; i++)
        mlprof__sb_putc(out, ' ');
    mlprof__sb_put(out, d.data ? d.data : "", d.len);
    mlprof__sb_free(&d);
}

static int64_t mean_late(const rank_late *l)
{
    return l->collectives ? (int64_t)((l->late_total + (int64_t)l->collectives / 2) / (int64_t)l->collectives) : 0;
}

static void put_stragglers_table(mlprof__sb *out, const ranks *rs, const stragglers *st, int top)
{
    mlprof__sb_printf(out, "\n== stragglers: %zu collectives matched across %zu ranks (clock: %s) ==\n", st->nm,
                      rs->n, clock_name(st->method));
    mlprof__sb_puts(out, "a collective is the k-th communication kernel of one name on each rank that runs it;\n"
                         "its lateness on a rank is that rank's start less the earliest rank's start\n");
    if (st->method == AN_ALIGN_STARTS)
        mlprof__sb_puts(out, "warning: the traces do not say they share a clock: their starts are lined up, "
                             "and lateness is only as good as that\n");
    if (rs->jobs_differ)
        mlprof__sb_printf(out, "warning: the traces are of different jobs, their collectives matched all the same: "
                               "%s\n",
                          rs->jobs_differ);
    mlprof__sb_printf(out, "%6s %12s %8s %14s %14s\n", "rank", "collectives", "last", "total late", "mean late");
    for (size_t i = 0; i < rs->n; i++) {
        const rank_late *l = &st->late[i];
        mlprof__sb_printf(out, "%6lld %12zu %8zu ", rs->r[i].rank, l->collectives, l->last);
        put_padded_duration(out, l->late_total, 14);
        mlprof__sb_putc(out, ' ');
        put_padded_duration(out, mean_late(l), 14);
        mlprof__sb_putc(out, '\n');
    }
    size_t shown = top > 0 && (size_t)top < st->nm ? (size_t)top : st->nm;
    if (shown) {
        mlprof__sb_printf(out, "\ncollectives that started furthest apart (%zu of %zu):\n", shown, st->nm);
        mlprof__sb_printf(out, "%14s %10s %6s  %s\n", "by", "last rank", "#", "name");
    }
    for (size_t i = 0; i < shown; i++) {
        const matched *m = &st->m[i];
        put_padded_duration(out, m->skew, 14);
        if (m->last_rank >= 0)
            mlprof__sb_printf(out, " %10lld", m->last_rank);
        else
            mlprof__sb_printf(out, " %10s", "(none)");
        mlprof__sb_printf(out, " %6u  %s\n", m->k, rs->names.s[m->name]);
    }
    if (st->names_unmatched) {
        mlprof__sb_printf(out, "\n%zu collective names do not run as often on every rank; the first ones of each "
                               "(as many as the ranks that run it all have) are matched:\n",
                          st->names_unmatched);
        mlprof__sb_put(out, st->unmatched_text.data ? st->unmatched_text.data : "", st->unmatched_text.len);
    }
    if (rs->n < 2)
        mlprof__sb_puts(out, "(one rank: no other to compare its collectives with)\n");
    else if (!st->nm && !st->names_unmatched)
        mlprof__sb_puts(out, "(no communication kernel in the traces)\n");
}

static void put_stragglers_json(mlprof__sb *out, const ranks *rs, const stragglers *st, int top)
{
    mlprof__sb_printf(out, ",\n\"stragglers\":{\"clock\":\"%s\",\"matched_by\":\"name and order\",\"collectives\":%zu,"
                           "\"names_matched\":%zu,\"ranks\":[",
                      clock_name(st->method), st->nm, st->names_matched);
    for (size_t i = 0; i < rs->n; i++) {
        const rank_late *l = &st->late[i];
        mlprof__sb_printf(out, "%s{\"rank\":%lld,\"collectives\":%zu,\"last\":%zu,\"late_total_ns\":%lld,"
                               "\"late_mean_ns\":%lld}",
                          i ? "," : "", rs->r[i].rank, l->collectives, l->last, (long long)l->late_total,
                          (long long)mean_late(l));
    }
    mlprof__sb_puts(out, "],\"by_skew\":[");
    size_t shown = top > 0 && (size_t)top < st->nm ? (size_t)top : st->nm;
    for (size_t i = 0; i < shown; i++) {
        const matched *m = &st->m[i];
        mlprof__sb_puts(out, i ? ",{\"name\":" : "{\"name\":");
        mlprof__sb_json_str(out, rs->names.s[m->name], strlen(rs->names.s[m->name]));
        mlprof__sb_printf(out, ",\"occurrence\":%u,\"last_rank\":", m->k);
        if (m->last_rank >= 0)
            mlprof__sb_printf(out, "%lld", m->last_rank);
        else
            mlprof__sb_puts(out, "null");
        mlprof__sb_printf(out, ",\"skew_ns\":%lld,\"earliest_start_ns\":%lld}", (long long)m->skew,
                          (long long)m->first);
    }
    mlprof__sb_puts(out, "],\"unmatched\":[");
    mlprof__sb_put(out, st->unmatched_json.data ? st->unmatched_json.data : "", st->unmatched_json.len);
    mlprof__sb_puts(out, "]}");
}

/* ------------------------------------------------------------- output */

/* The length of the CSV record at p (through its line break; a quoted field
 * may hold line breaks). */
static size_t csv_record(const char *p, const char *end)
{
    int quoted = 0;
    const char *q = p;
    for (; q < end; q++) {
        if (*q == '"')
            quoted = !quoted;
        else if (*q == '\n' && !quoted)
            return (size_t)(q - p) + 1;
    }
    return (size_t)(q - p);
}

/* A rank's CSV with a first column "rank"; the header once, again (with a
 * note) when a rank's columns differ from the previous header's. */
static void put_csv_rank(mlprof__sb *out, const rank_in *r, mlprof__sb *header, mlprof__sb *notes,
                         const char *dir)
{
    const char *p = r->out.data ? r->out.data : "";
    const char *end = p + r->out.len;
    size_t n = csv_record(p, end);
    if (!n)
        return;
    if (header->len != n || memcmp(header->data, p, n) != 0) {
        if (header->len && notes)
            mlprof__sb_printf(notes, "%s: rank %lld's CSV columns differ from the rank before's: a new header "
                                     "line precedes its rows\n",
                              dir, r->rank);
        mlprof__sb_reset(header);
        mlprof__sb_put(header, p, n);
        mlprof__sb_puts(out, "rank,");
        mlprof__sb_put(out, p, n);
    }
    for (p += n; p < end; p += n) {
        n = csv_record(p, end);
        mlprof__sb_printf(out, "%lld,", r->rank);
        mlprof__sb_put(out, p, n);
    }
}

static void put_list_json(mlprof__sb *out, const char *name, const skipped *s, size_t n)
{
    mlprof__sb_printf(out, ",\n\"%s\":[", name);
    for (size_t i = 0; i < n; i++) {
        mlprof__sb_puts(out, i ? ",{\"path\":" : "{\"path\":");
        mlprof__sb_json_str(out, s[i].path, strlen(s[i].path));
        mlprof__sb_puts(out, ",\"why\":");
        mlprof__sb_json_str(out, s[i].why, strlen(s[i].why));
        mlprof__sb_putc(out, '}');
    }
    mlprof__sb_putc(out, ']');
}

static void put_skipped_json(mlprof__sb *out, const ranks *rs)
{
    put_list_json(out, "skipped", rs->s, rs->ns);
}

/* The traces left out (no rank beside ranks) and the warnings about the
 * inputs as a whole (traces of different jobs), as JSON members. */
static void put_left_and_warnings_json(mlprof__sb *out, const ranks *rs)
{
    put_list_json(out, "left_out", rs->left, rs->nl);
    mlprof__sb_puts(out, ",\n\"warnings\":[");
    if (rs->jobs_differ) {
        mlprof__sb jobs;
        mlprof__sb_init(&jobs);
        mlprof__sb_printf(&jobs, "the traces are of different jobs (their distributedInfo's job_id or world_size "
                                 "differ): %s",
                          rs->jobs_differ);
        mlprof__sb_json_str(out, jobs.data ? jobs.data : "", jobs.len);
        out->failed |= jobs.failed;
        mlprof__sb_free(&jobs);
    }
    mlprof__sb_putc(out, ']');
}

/* The same as lines of text, under a table's first line. */
static void put_left_and_warnings_text(mlprof__sb *out, const ranks *rs)
{
    for (size_t i = 0; i < rs->nl; i++)
        mlprof__sb_printf(out, "left out: %s (no rank: the launcher?)\n", rs->left[i].path);
    if (rs->jobs_differ)
        mlprof__sb_printf(out, "warning: the traces are of different jobs, compared as one: %s\n", rs->jobs_differ);
}

static void put_output(mlprof__sb *out, const ranks *rs, const an_options *o, const stragglers *st,
                       mlprof__sb *notes)
{
    if (o->format == AN_JSON) {
        mlprof__sb_puts(out, "{\"directory\":");
        mlprof__sb_json_str(out, rs->dir, strlen(rs->dir));
        mlprof__sb_puts(out, ",\"each_rank_alone\":true,\"ranks\":[");
        for (size_t i = 0; i < rs->n; i++) {
            const rank_in *r = &rs->r[i];
            mlprof__sb_printf(out, "%s\n{\"rank\":%lld,\"rank_from\":\"%s\",\"path\":", i ? "," : "", r->rank,
                              r->rank_given ? "distributedInfo" : "file order");
            mlprof__sb_json_str(out, r->path, strlen(r->path));
            mlprof__sb_puts(out, ",\"analysis\":\n");
            mlprof__sb_put(out, r->out.data ? r->out.data : "null", r->out.data ? r->out.len : 4);
            mlprof__sb_putc(out, '}');
        }
        mlprof__sb_puts(out, "\n]");
        put_skipped_json(out, rs);
        put_left_and_warnings_json(out, rs);
        if (st)
            put_stragglers_json(out, rs, st, o->top);
        mlprof__sb_puts(out, "}\n");
        return;
    }
    if (o->format == AN_CSV) {
        mlprof__sb header;
        mlprof__sb_init(&header);
        for (size_t i = 0; i < rs->n; i++)
            put_csv_rank(out, &rs->r[i], &header, notes, rs->dir);
        mlprof__sb_free(&header);
        if (st)
            mlprof__sb_printf(notes, "%s: CSV holds each rank's rows; the stragglers across ranks are in "
                                     "--format table and json\n",
                              rs->dir);
        return;
    }
    mlprof__sb_printf(out, "directory %s: %zu ranks, each analysed alone", rs->dir, rs->n);
    if (rs->ns)
        mlprof__sb_printf(out, " (%zu %s skipped: not traces)", rs->ns, rs->ns == 1 ? "entry" : "entries");
    mlprof__sb_putc(out, '\n');
    put_left_and_warnings_text(out, rs);
    for (size_t i = 0; i < rs->n; i++) {
        const rank_in *r = &rs->r[i];
        mlprof__sb_printf(out, "\n== rank %lld%s: %s ==\n", r->rank, r->rank_given ? "" : " (file order)", r->path);
        mlprof__sb_put(out, r->out.data ? r->out.data : "", r->out.len);
    }
    if (st)
        put_stragglers_table(out, rs, st, o->top);
}

static void ranks_free(ranks *rs)
{
    for (size_t i = 0; i < rs->n; i++)
        rank_free(&rs->r[i]);
    mlprof__free(rs->r);
    skipped_free(rs->s, rs->ns);
    skipped_free(rs->left, rs->nl);
    mlprof__free(rs->jobs_differ);
    an_dist_names_free(&rs->names);
}

/* Reads every entry of dir that is named like a trace; the others are skipped. */
static int read_dir(ranks *rs, const an_options *o, an_analysis_fn fn, const an_ranks_options *ro,
                    mlprof__sb *notes, int *damaged, char *err, size_t errlen)
{
    size_t n;
    char **names = list_dir(rs->dir, &n, err, errlen);
    if (!names)
        return -1;
    mlprof__sb path;
    mlprof__sb_init(&path);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        mlprof__sb_reset(&path);
        mlprof__sb_printf(&path, "%s%s%s", rs->dir, ends_with(rs->dir, "/") ? "" : "/", names[i]);
        if (path.failed) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        struct stat s;
        const char *why = NULL;
        if (stat(path.data, &s) != 0)
            why = strerror(errno);
        else if (S_ISDIR(s.st_mode))
            why = "a directory (traces are read from DIR itself, not below it)";
        else if (!S_ISREG(s.st_mode))
            why = "not a regular file";
        else if (!ends_with(names[i], ".json") && !ends_with(names[i], ".json.gz") &&
                 !ends_with(names[i], ".pftrace") && !ends_with(names[i], ".pftrace.gz") &&
                 !ends_with(names[i], ".perfetto-trace") && !ends_with(names[i], ".perfetto-trace.gz"))
            why = "not named *.json or *.json.gz (nor *.pftrace or *.perfetto-trace, Perfetto's protobuf)";
        if (why)
            rc = add_skipped(rs, path.data, why);
        else
            rc = read_one(rs, path.data, o, fn, ro, notes, damaged, err, errlen);
        if (rc != 0 && !err[0])
            snprintf(err, errlen, "out of memory");
    }
    mlprof__sb_free(&path);
    for (size_t i = 0; i < n; i++)
        mlprof__free(names[i]);
    mlprof__free(names);
    return rc;
}

/* Lists dir, reads (and with fn, analyses) its traces, numbers their ranks and
 * sorts them by rank. */
static int open_ranks(ranks *rs, const char *dir, const an_options *o, an_analysis_fn fn,
                      const an_ranks_options *ro, mlprof__sb *notes, int *damaged, char *err, size_t errlen)
{
    memset(rs, 0, sizeof *rs);
    rs->dir = dir;
    an_dist_names_init(&rs->names);
    if (errlen)
        err[0] = '\0';
    int rc = read_dir(rs, o, fn, ro, notes, damaged, err, errlen);
    for (size_t i = 0; rc == 0 && i < rs->ns; i++)
        mlprof__sb_printf(notes, "%s: skipped: %s\n", rs->s[i].path, rs->s[i].why);
    if (rc == 0 && rs->n == 0) {
        snprintf(err, errlen, "%s: no trace in the directory (a trace is a file named *.json or *.json.gz, "
                              "plain or gzip, that holds trace events; %zu %s skipped)",
                 dir, rs->ns, rs->ns == 1 ? "entry" : "entries");
        rc = -1;
    }
    if (rc == 0)
        rc = leave_out_unranked(rs, notes, err, errlen);
    if (rc == 0)
        rc = check_jobs(rs, 0, notes, err, errlen);
    if (rc == 0)
        rc = number_ranks(rs, notes, err, errlen);
    return rc;
}

int an_ranks_run(const char *dir, const an_options *o, an_analysis_fn fn, const an_ranks_options *ro,
                 mlprof__sb *out, mlprof__sb *notes, int *damaged, char *err, size_t errlen)
{
    ranks rs;
    int rc = open_ranks(&rs, dir, o, fn, ro, notes, damaged, err, errlen);
    stragglers st;
    int have_st = 0;
    if (rc == 0 && ro->stragglers) {
        have_st = 1;
        rc = find_stragglers(&rs, &st, err, errlen);
        if (rc == 0 && st.method == AN_ALIGN_STARTS)
            mlprof__sb_printf(notes, "%s: warning: the traces do not say they share a clock; their starts are "
                                     "lined up for the stragglers\n",
                              dir);
    }
    if (rc == 0)
        put_output(out, &rs, o, have_st ? &st : NULL, notes);
    if (have_st)
        stragglers_free(&st);
    ranks_free(&rs);
    if (rc == 0 && (out->failed || notes->failed)) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    return rc;
}

/* ------------------------------------------------------------- mlprof ranks */

typedef struct pid_rank {
    int64_t pid;
    long long rank;
    long long world;  /* its input's distributedInfo.world_size, or -1 */
    char job[128];    /* its input's distributedInfo.job_id, or "" */
} pid_rank;

static int by_pid_rank(const void *pa, const void *pb)
{
    const pid_rank *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return a->pid < b->pid ? -1 : a->pid > b->pid;
}

/* The processes of a merged trace that say their rank in their name, as
 * mlprof merge labels them ("rank N: python"), sorted by rank; *n = 0 when
 * none does. NULL when out of memory. */
static pid_rank *merged_ranks(const an_trace *t, size_t *n)
{
    pid_rank *p = mlprof__calloc(t->nnames + 1, sizeof *p);
    *n = 0;
    for (size_t i = 0; p && i < t->nnames; i++) {
        const an_name *nm = &t->names[i];
        long long rank;
        int used = 0;
        if (nm->tid == AN_PROCESS_TID && sscanf(nm->name, "rank %lld:%n", &rank, &used) == 1 && used > 0 &&
            rank >= 0)
            p[(*n)++] = (pid_rank){nm->pid, rank, -1, ""};
    }
    if (p)
        mlprof__sort(p, *n, sizeof *p, by_pid_rank);
    return p;
}

/* At the value of the member want of the object that starts at in: 1; 0
 * when the object has none; -1 on an error. */
static int find_member(an_input *in, mlprof__sb *key, const char *want)
{
    int more = an_json_open(in, '{', "an object");
    size_t n = strlen(want);
    while (more == 1) {
        if (an_json_key(in, key) != 0)
            return -1;
        if (key->len == n && memcmp(key->data, want, n) == 0)
            return 1;
        if (an_json_skip(in, NULL) != 0)
            return -1;
        more = an_json_next(in, '}');
    }
    return more;
}

/* One input of otherData.merge.inputs: its rank and its processes' pids in
 * the merged trace (the values of "pids"), appended to p. */
static int merge_input(an_input *in, mlprof__sb *key, pid_rank **p, size_t *n, size_t *cap)
{
    long long rank = -1, world = -1;
    char job[128] = "";
    size_t start = *n;
    int more = an_json_open(in, '{', "an input");
    while (more == 1) {
        if (an_json_key(in, key) != 0)
            return -1;
        double v;
        int64_t iv;
        int is_int = 0;
        if (key->len == 4 && memcmp(key->data, "rank", 4) == 0 && an_json_peek(in) != '"') {
            if (an_json_number(in, &v, &iv, &is_int) != 0)
                return -1;
            rank = is_int && iv >= 0 ? iv : -1;
        } else if (key->len == 4 && memcmp(key->data, "pids", 4) == 0) {
            int q = an_json_open(in, '{', "pids");
            while (q == 1) {
                pid_rank *g = mlprof__grow(*p, cap, *n, sizeof **p, 16);
                if (!g || an_json_key(in, key) != 0 || an_json_number(in, &v, &iv, &is_int) != 0)
                    return -1;
                *p = g;
                g[(*n)++] = (pid_rank){is_int ? iv : an_to_i64(v), -1, -1, ""};
                q = an_json_next(in, '}');
            }
            if (q < 0)
                return -1;
        } else if (key->len == 15 && memcmp(key->data, "distributedInfo", 15) == 0) {
            mlprof__sb raw;
            mlprof__sb_init(&raw);
            int rc = an_json_skip(in, &raw);
            if (rc == 0 && raw.data && !raw.failed) {
                world = an_dist_info_world_size(raw.data);
                if (!an_dist_info_job_id(raw.data, job, sizeof job))
                    job[0] = '\0';
            }
            mlprof__sb_free(&raw);
            if (rc != 0)
                return -1;
        } else if (an_json_skip(in, NULL) != 0) {
            return -1;
        }
        more = an_json_next(in, '}');
    }
    if (more < 0)
        return -1;
    if (rank < 0)
        *n = start; /* an input without a rank says nothing of its processes' */
    for (size_t i = start; i < *n; i++) {
        (*p)[i].rank = rank;
        (*p)[i].world = world;
        snprintf((*p)[i].job, sizeof (*p)[i].job, "%s", job);
    }
    return 0;
}

/* The processes of a merged trace by rank, as its otherData.merge.inputs
 * say (mlprof merge writes each input's rank and the pids it was given);
 * sorted by rank. NULL with *n = 0 when it says none (or cannot be read). */
static pid_rank *merge_inputs(const an_trace *t, size_t *n)
{
    *n = 0;
    if (!t->other_data || !strstr(t->other_data, "\"merge\""))
        return NULL;
    an_input in;
    if (an_input_open_mem(&in, "otherData", t->other_data, strlen(t->other_data)) != 0)
        return NULL;
    mlprof__sb key;
    mlprof__sb_init(&key);
    pid_rank *p = NULL;
    size_t cap = 0;
    int rc = find_member(&in, &key, "merge") == 1 && find_member(&in, &key, "inputs") == 1 ? 0 : -1;
    int more = rc == 0 ? an_json_open(&in, '[', "inputs") : -1;
    while (more == 1 && rc == 0) {
        rc = merge_input(&in, &key, &p, n, &cap);
        more = rc == 0 ? an_json_next(&in, ']') : -1;
    }
    if (rc != 0 || more < 0 || key.failed) {
        mlprof__free(p);
        p = NULL;
        *n = 0;
    }
    mlprof__sb_free(&key);
    an_input_close(&in);
    mlprof__sort(p, *n, sizeof *p, by_pid_rank);
    return p;
}

static size_t distinct_ranks(const pid_rank *p, size_t n)
{
    size_t d = n ? 1 : 0;
    for (size_t i = 1; i < n; i++)
        d += p[i].rank != p[i - 1].rank;
    return d;
}

/* The (pid, rank) pairs of a merged trace: its otherData.merge.inputs, else
 * its processes' names; *from says which. NULL when out of memory. */
static pid_rank *merged_pids(const an_trace *t, size_t *np, const char **from)
{
    *from = "otherData.merge";
    pid_rank *p = merge_inputs(t, np);
    if (distinct_ranks(p, *np) >= 2)
        return p;
    mlprof__free(p);
    *from = "process name";
    return merged_ranks(t, np);
}

/* How many ranks a merged trace holds (0 or 1 for a trace of one rank). */
static size_t merged_ranks_in(const an_trace *t)
{
    size_t np;
    const char *from;
    pid_rank *p = merged_pids(t, &np, &from);
    size_t d = p ? distinct_ranks(p, np) : 0;
    mlprof__free(p);
    return d;
}

/* What otherData.merge.method of a merged trace says, into buf. */
static void merge_method(const an_trace *t, char *buf, size_t len)
{
    const char *m = t->other_data ? strstr(t->other_data, "\"method\":\"") : NULL;
    size_t k = 0;
    if (m) {
        for (m += 10; *m && *m != '"' && k + 1 < len; m++)
            buf[k++] = *m;
    }
    buf[k] = '\0';
    if (!k)
        snprintf(buf, len, "not said");
}

/* Each rank of a merged trace, summarized from its own processes. */
static int split_merged(ranks *rs, an_trace *t, const pid_rank *p, size_t np, const char *from, char *err,
                        size_t errlen)
{
    int64_t *pids = mlprof__calloc(np, sizeof *pids);
    int rc = pids ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < np;) {
        size_t j = i;
        while (j < np && p[j].rank == p[i].rank) {
            pids[j - i] = p[j].pid;
            j++;
        }
        rank_in *r = mlprof__grow(rs->r, &rs->cap, rs->n, sizeof *rs->r, 8);
        if (!r) {
            rc = -1;
            break;
        }
        rs->r = r;
        r = &rs->r[rs->n++];
        memset(r, 0, sizeof *r);
        mlprof__sb_init(&r->out);
        r->rank = p[i].rank;
        r->rank_given = 1;
        r->rank_from = from;
        /* its own input's, as otherData.merge.inputs keeps them, else the merged trace's */
        r->world_size = p[i].world > 0 ? p[i].world : world_size(t);
        r->job = p[i].job[0] ? mlprof__strdup(p[i].job) : NULL;
        r->path = mlprof__strdup(t->path);
        rc = r->path && (r->job || !p[i].job[0]) ? an_dist_collect(t, pids, j - i, &rs->names, AN_DIST_SRC_NONE, &r->d)
                                                 : -1;
        i = j;
    }
    mlprof__free(pids);
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    return rc;
}

/* A trace named alone must be one: what take_one skipped is an error here.
 * t: the trace read from path (rc: an_trace_read's answer), freed here; read
 * once, so that a pipe works. */
static int strict_take(ranks *rs, const char *path, an_trace *t, int rc, mlprof__sb *notes, int *damaged, char *err,
                       size_t errlen)
{
    an_ranks_options ro = {0, 1};
    size_t before = rs->ns;
    if (take_one(rs, path, t, rc, NULL, NULL, &ro, notes, damaged, err, errlen) != 0)
        return -1;
    if (rs->ns > before) {
        snprintf(err, errlen, "%s: %s", rs->s[before].path, rs->s[before].why);
        return -1;
    }
    return 0;
}

/* One trace: a merged one split by rank, else one rank alone. *merged is set
 * for the first, with the method its merge used in clock. */
static int read_single(ranks *rs, const char *path, mlprof__sb *notes, int *damaged, int *merged, char *clock,
                       size_t clen, char *err, size_t errlen)
{
    an_trace t;
    int rc = an_trace_read(&t, path);
    size_t np = 0;
    pid_rank *p = NULL;
    const char *from = "";
    if ((rc == 0 || (t.partial && t.nev)) && !(p = merged_pids(&t, &np, &from))) {
        an_trace_free(&t);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (distinct_ranks(p, np) < 2) { /* not merged: one rank, taken as any other */
        mlprof__free(p);
        return strict_take(rs, path, &t, rc, notes, damaged, err, errlen);
    }
    if (rc != 0) {
        mlprof__sb_printf(notes, "warning: %s; using the %zu events read before it\n", t.error, t.nev);
        *damaged = 1;
    }
    if (t.note[0])
        mlprof__sb_printf(notes, "note: %s\n", t.note);
    *merged = 1;
    char method[64];
    merge_method(&t, method, sizeof method);
    snprintf(clock, clen, "one merged trace (its merge's alignment: %s)", method);
    rc = split_merged(rs, &t, p, np, from, err, errlen);
    mlprof__free(p);
    an_trace_free(&t);
    return rc;
}

/* A rank's times on the reference clock its clock sync measured. */
static void sync_times(an_dist_rank *d, const an_clock_sync *cs)
{
    d->t0 += an_clock_sync_shift(cs, d->t0);
    d->t1 += an_clock_sync_shift(cs, d->t1);
    for (size_t k = 0; k < d->nc; k++) {
        d->c[k].ts += an_clock_sync_shift(cs, d->c[k].ts);
        d->c[k].end += an_clock_sync_shift(cs, d->c[k].end);
    }
}

int an_ranks_dist(const char *const *paths, size_t n, const an_options *o, int csv, int any_job, mlprof__sb *out,
                  mlprof__sb *notes, int *damaged, char *err, size_t errlen)
{
    ranks rs;
    memset(&rs, 0, sizeof rs);
    an_dist_names_init(&rs.names);
    if (errlen)
        err[0] = '\0';
    char what[300], clock[200];
    int merged = 0, rc = 0;
    if (n == 1)
        snprintf(what, sizeof what, "%s", paths[0]);
    else
        snprintf(what, sizeof what, "%zu traces", n);
    rs.dir = what;
    if (n == 1 && an_is_directory(paths[0])) {
        an_ranks_options ro = {0, 1};
        rc = read_dir(&rs, o, NULL, &ro, notes, damaged, err, errlen);
        for (size_t i = 0; rc == 0 && i < rs.ns; i++)
            mlprof__sb_printf(notes, "%s: skipped: %s\n", rs.s[i].path, rs.s[i].why);
        if (rc == 0 && rs.n == 0) {
            snprintf(err, errlen, "%s: no trace in the directory (a trace is a file named *.json or *.json.gz, "
                                  "plain or gzip, that holds trace events; %zu %s skipped)",
                     paths[0], rs.ns, rs.ns == 1 ? "entry" : "entries");
            rc = -1;
        }
    } else if (n == 1) {
        rc = read_single(&rs, paths[0], notes, damaged, &merged, clock, sizeof clock, err, errlen);
    } else {
        for (size_t i = 0; rc == 0 && i < n; i++) {
            if (an_is_directory(paths[i])) {
                snprintf(err, errlen, "%s is a directory: give one directory alone, or trace files", paths[i]);
                rc = -1;
            } else {
                an_trace t;
                int read = an_trace_read(&t, paths[i]);
                rc = strict_take(&rs, paths[i], &t, read, notes, damaged, err, errlen);
            }
        }
    }
    if (rc == 0 && !merged)
        rc = leave_out_unranked(&rs, notes, err, errlen);
    /* before the ranks are numbered: two jobs may each have a rank 0 */
    if (rc == 0)
        rc = check_jobs(&rs, !any_job, notes, err, errlen);
    if (rc == 0 && !merged)
        rc = number_ranks(&rs, notes, err, errlen);
    if (rc == 0 && merged) {
        mlprof__sort(rs.r, rs.n, sizeof *rs.r, by_rank);
    }
    an_dist_input *in = rc == 0 ? mlprof__calloc(rs.n, sizeof *in) : NULL;
    an_merge_input *clocks = rc == 0 ? mlprof__calloc(rs.n, sizeof *clocks) : NULL; /* not owned */
    int64_t *offset = rc == 0 ? mlprof__calloc(rs.n, sizeof *offset) : NULL;
    if (rc == 0 && (!in || !clocks || !offset)) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (rc == 0 && !merged) {
        for (size_t i = 0; i < rs.n; i++)
            clocks[i] = rs.r[i].clock;
        an_merge_options mo = {NULL, NULL, NULL, 0};
        int method = 0;
        rc = an_merge_offsets(clocks, rs.n, &mo, offset, &method, err, errlen);
        snprintf(clock, sizeof clock, "%s", rs.n < 2 ? "one rank" : clock_name(method));
        if (rc == 0 && method == AN_ALIGN_CLOCK_SYNC && rs.n > 1) {
            /* offsets and drift the ranks measured: each time moved as merge moves it */
            int64_t worst = -1;
            for (size_t i = 0; i < rs.n; i++) {
                an_clock_sync cs;
                if (an_merge_input_sync(clocks, rs.n, i, &cs) < 0)
                    continue; /* a trace without a rank, its start lined up: offset[i] holds it */
                sync_times(&rs.r[i].d, &cs);
                offset[i] = 0;
                worst = cs.bound_ns > worst ? cs.bound_ns : worst;
            }
            if (worst >= 0)
                snprintf(clock, sizeof clock, "clock sync, within %lld ns", (long long)worst);
        }
        if (rc == 0 && method == AN_ALIGN_STARTS && rs.n > 1)
            mlprof__sb_printf(notes, "%s: warning: the traces do not say they share a clock; their starts are lined "
                                     "up, and arrivals are only as good as that\n",
                              what);
    }
    for (size_t i = 0; rc == 0 && i < rs.n; i++) {
        const rank_in *r = &rs.r[i];
        in[i] = (an_dist_input){r->rank, r->path,
                                r->rank_from ? r->rank_from : r->rank_given ? "distributedInfo" : "file order",
                                r->world_size, offset[i], &r->d};
    }
    mlprof__sb said_json, said_text;
    mlprof__sb_init(&said_json);
    mlprof__sb_init(&said_text);
    if (rc == 0) {
        put_left_and_warnings_json(&said_json, &rs);
        put_left_and_warnings_text(&said_text, &rs);
    }
    an_dist_said said = {said_json.data ? said_json.data : "", said_text.data ? said_text.data : ""};
    if (rc == 0 && (said_json.failed || said_text.failed ||
                    an_dist_report(in, rs.n, &rs.names, what, clock, &said, o, csv, out, notes) != 0)) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    mlprof__sb_free(&said_json);
    mlprof__sb_free(&said_text);
    mlprof__free(in);
    mlprof__free(clocks);
    mlprof__free(offset);
    ranks_free(&rs);
    return rc;
}

/* ------------------------------------------------------------- diff */

/* Reads a trace a first pass read already; a damaged one is used with a
 * warning, as the first pass did. */
static int reread(an_trace *t, const char *path, mlprof__sb *notes, char *err, size_t errlen)
{
    if (an_trace_read(t, path) == 0)
        return 0;
    if (!t->partial) {
        snprintf(err, errlen, "%s", t->error);
        return -1;
    }
    mlprof__sb_printf(notes, "warning: %s; using the %zu events read before it\n", t->error, t->nev);
    return 0;
}

/* One rank's diff in the output's shape; side: NULL when both runs have the
 * rank, else "a" or "b" (the run that has it alone). */
static void put_diff_section(mlprof__sb *out, const an_options *o, long long rank, const rank_in *a,
                             const rank_in *b, const mlprof__sb *one, int *first, mlprof__sb *header)
{
    if (o->format == AN_JSON) {
        mlprof__sb_printf(out, "%s\n{\"rank\":%lld,\"a\":", *first ? "" : ",", rank);
        if (a)
            mlprof__sb_json_str(out, a->path, strlen(a->path));
        else
            mlprof__sb_puts(out, "null");
        mlprof__sb_puts(out, ",\"b\":");
        if (b)
            mlprof__sb_json_str(out, b->path, strlen(b->path));
        else
            mlprof__sb_puts(out, "null");
        mlprof__sb_puts(out, ",\"diff\":\n");
        mlprof__sb_put(out, one->len ? one->data : "null", one->len ? one->len : 4);
        mlprof__sb_putc(out, '}');
    } else if (o->format == AN_CSV) {
        rank_in r;
        memset(&r, 0, sizeof r);
        r.rank = rank;
        r.out = *one;
        put_csv_rank(out, &r, header, NULL, NULL);
    } else if (a && b) {
        mlprof__sb_printf(out, "\n== rank %lld: %s -> %s ==\n", rank, a->path, b->path);
        mlprof__sb_put(out, one->data ? one->data : "", one->len);
    } else {
        mlprof__sb_printf(out, "\n== rank %lld: only in %s (%s) ==\n", rank, a ? "A" : "B", a ? a->path : b->path);
    }
    *first = 0;
}

int an_ranks_diff(const char *dir_a, const char *dir_b, const an_options *o, const an_diff_options *d,
                  mlprof__sb *out, mlprof__sb *notes, size_t *regressions, int *damaged, char *err, size_t errlen)
{
    ranks ra, rb;
    an_ranks_options ro = {0};
    *regressions = 0;
    int rc = open_ranks(&ra, dir_a, o, NULL, &ro, notes, damaged, err, errlen);
    int rc_b = rc == 0 ? open_ranks(&rb, dir_b, o, NULL, &ro, notes, damaged, err, errlen) : -1;
    if (rc != 0 || rc_b != 0) {
        ranks_free(&ra);
        if (rc == 0)
            ranks_free(&rb);
        return -1;
    }
    if (o->format == AN_JSON) {
        mlprof__sb_puts(out, "{\"directories\":[");
        mlprof__sb_json_str(out, dir_a, strlen(dir_a));
        mlprof__sb_putc(out, ',');
        mlprof__sb_json_str(out, dir_b, strlen(dir_b));
        mlprof__sb_puts(out, "],\"each_rank_alone\":true,\"ranks\":[");
    } else if (o->format == AN_TABLE) {
        mlprof__sb_printf(out, "directories %s (A: %zu ranks) and %s (B: %zu ranks): each rank of A compared with "
                               "the same rank of B\n",
                          dir_a, ra.n, dir_b, rb.n);
    }
    mlprof__sb one, header;
    mlprof__sb_init(&one);
    mlprof__sb_init(&header);
    int first = 1;
    size_t i = 0, j = 0;
    while (rc == 0 && (i < ra.n || j < rb.n)) {
        const rank_in *a = i < ra.n ? &ra.r[i] : NULL, *b = j < rb.n ? &rb.r[j] : NULL;
        if (a && b && a->rank != b->rank) {
            if (a->rank < b->rank)
                b = NULL;
            else
                a = NULL;
        }
        long long rank = a ? a->rank : b->rank;
        mlprof__sb_reset(&one);
        if (a && b) {
            an_trace ta, tb;
            size_t reg = 0;
            int r1 = reread(&ta, a->path, notes, err, errlen);
            int r2 = r1 == 0 ? reread(&tb, b->path, notes, err, errlen) : -1;
            if (r1 == 0 && r2 == 0 && an_diff(&ta, &tb, o, d, &one, &reg) != 0) {
                snprintf(err, errlen, "rank %lld: the comparison failed (out of memory)", rank);
                r2 = -1;
            }
            an_trace_free(&ta);
            if (r1 == 0)
                an_trace_free(&tb);
            rc = r1 != 0 || r2 != 0 ? -1 : 0;
            *regressions += reg;
        } else {
            mlprof__sb_printf(notes, "rank %lld is only in %s (%s): not compared\n", rank, a ? dir_a : dir_b,
                              a ? a->path : b->path);
        }
        if (rc == 0 && (a && b ? 1 : o->format != AN_CSV))
            put_diff_section(out, o, rank, a, b, &one, &first, &header);
        i += a != NULL;
        j += b != NULL;
    }
    if (rc == 0 && o->format == AN_JSON)
        mlprof__sb_puts(out, "\n]}\n");
    mlprof__sb_free(&one);
    mlprof__sb_free(&header);
    ranks_free(&ra);
    ranks_free(&rb);
    if (rc == 0 && (out->failed || notes->failed)) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    return rc;
}
