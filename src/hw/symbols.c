/*
 * symbols.c - names for sampled code addresses, after the run (off the hot
 * path): the executable mappings of /proc/self/maps, and for each object the
 * function symbols of its ELF .symtab (or .dynsym when stripped), read from
 * the file with mmap and sorted once. An address no symbol covers is named
 * by its object and offset (JIT code, stripped objects, [vdso]). The
 * names come from the symbol tables, which need no library and are there in
 * objects without debug info (libdw names what they miss, from separate
 * debug info where it is installed); the source file and line come from the debug
 * info's line tables through libdw (unwind.c's, loaded with dlopen), where
 * the object or its separate debug info (/usr/lib/debug) has them. C++
 * names stay mangled.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stacks.h"
#include "unwind.h"

typedef struct sym {
    uint64_t value, size;
    const char *name; /* in the object's mapped file */
} sym;

typedef struct object {
    char *path;
    int loaded;     /* its symbols were looked for */
    void *file;     /* the mapped file, or NULL */
    size_t file_len;
    sym *syms;
    size_t nsyms;
    Elf64_Phdr *load; /* its PT_LOAD headers (in file) */
    size_t nload;
} object;

typedef struct mapping {
    uint64_t start, end, offset;
    size_t object; /* index in objects */
} mapping;

struct mlprof__syms {
    mapping *maps;
    size_t nmaps;
    object *objs;
    size_t nobjs;
};

static int by_value(const void *a, const void *b)
{
    const sym *x = a, *y = b;
    return x->value < y->value ? -1 : x->value > y->value;
}

/* Whether [off, off+len) lies inside a file of n bytes. */
static int inside(uint64_t off, uint64_t len, size_t n) { return off <= n && len <= n - off; }

/* The function symbols of one table (SHT_SYMTAB or SHT_DYNSYM). */
static void add_table(object *o, const Elf64_Shdr *sh, const Elf64_Shdr *shdrs, size_t nsh)
{
    const char *base = o->file;
    if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_link >= nsh || !inside(sh->sh_offset, sh->sh_size, o->file_len))
        return;
    const Elf64_Shdr *strs = &shdrs[sh->sh_link];
    if (!inside(strs->sh_offset, strs->sh_size, o->file_len) || strs->sh_size == 0)
        return;
    const Elf64_Sym *s = (const Elf64_Sym *)(base + sh->sh_offset);
    size_t n = sh->sh_size / sizeof *s, have = 0;
    for (size_t i = 0; i < n; i++) {
        int type = ELF64_ST_TYPE(s[i].st_info);
        have += (type == STT_FUNC || type == STT_GNU_IFUNC) && s[i].st_value && s[i].st_shndx != SHN_UNDEF;
    }
    if (!have)
        return;
    sym *grown = mlprof__realloc(o->syms, (o->nsyms + have) * sizeof *grown);
    if (!grown)
        return;
    o->syms = grown;
    const char *names = base + strs->sh_offset;
    for (size_t i = 0; i < n; i++) {
        int type = ELF64_ST_TYPE(s[i].st_info);
        if (!((type == STT_FUNC || type == STT_GNU_IFUNC) && s[i].st_value && s[i].st_shndx != SHN_UNDEF))
            continue;
        /* the string table ends in a NUL (checked below): a name is bounded */
        if (s[i].st_name >= strs->sh_size || names[strs->sh_size - 1] != '\0')
            continue;
        o->syms[o->nsyms++] = (sym){s[i].st_value, s[i].st_size, names + s[i].st_name};
    }
}

static void load_object(object *o)
{
    o->loaded = 1;
    int fd = open(o->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
        close(fd);
        return;
    }
    void *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f == MAP_FAILED)
        return;
    o->file = f;
    o->file_len = (size_t)st.st_size;
    const Elf64_Ehdr *eh = f;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_phentsize != sizeof(Elf64_Phdr) ||
        !inside(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), o->file_len) ||
        !inside(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), o->file_len))
        return;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)f + eh->e_phoff);
    o->load = mlprof__calloc(eh->e_phnum ? eh->e_phnum : 1, sizeof *o->load);
    for (size_t i = 0; o->load && i < eh->e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD)
            o->load[o->nload++] = ph[i];
    }
    const Elf64_Shdr *sh = (const Elf64_Shdr *)((const char *)f + eh->e_shoff);
    int symtab = 0;
    for (size_t i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type == SHT_SYMTAB) {
            add_table(o, &sh[i], sh, eh->e_shnum);
            symtab = 1;
        }
    }
    for (size_t i = 0; !symtab && i < eh->e_shnum; i++) { /* stripped: the dynamic symbols */
        if (sh[i].sh_type == SHT_DYNSYM)
            add_table(o, &sh[i], sh, eh->e_shnum);
    }
    if (o->nsyms)
        qsort(o->syms, o->nsyms, sizeof *o->syms, by_value);
}

mlprof__syms *mlprof__syms_load(void)
{
    mlprof__syms *s = mlprof__calloc(1, sizeof *s);
    FILE *f = s ? fopen("/proc/self/maps", "re") : NULL;
    if (!f)
        return s;
    char line[4096 + 128];
    size_t mcap = 0, ocap = 0;
    while (fgets(line, sizeof line, f)) {
        uint64_t start, end, offset;
        char perms[8];
        int path_at = 0;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %n", &start, &end, perms, &offset,
                   &path_at) < 4 || perms[2] != 'x')
            continue;
        char *path = line + path_at;
        path[strcspn(path, "\n")] = '\0';
        if (!path[0])
            path = "[anon]";
        size_t k;
        for (k = 0; k < s->nobjs && strcmp(s->objs[k].path, path) != 0; k++)
            ;
        if (k == s->nobjs) {
            object *o = mlprof__grow(s->objs, &ocap, s->nobjs, sizeof *o, 16);
            char *copy = o ? mlprof__strdup(path) : NULL;
            if (!copy)
                break;
            s->objs = o;
            memset(&o[k], 0, sizeof o[k]);
            o[k].path = copy;
            o[k].loaded = path[0] != '/'; /* [vdso], [anon]: no file to read */
            s->nobjs++;
        }
        mapping *m = mlprof__grow(s->maps, &mcap, s->nmaps, sizeof *m, 64);
        if (!m)
            break;
        s->maps = m;
        m[s->nmaps++] = (mapping){start, end, offset, k};
    }
    fclose(f);
    return s;
}

void mlprof__syms_free(mlprof__syms *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nobjs; i++) {
        if (s->objs[i].file)
            munmap(s->objs[i].file, s->objs[i].file_len);
        mlprof__free(s->objs[i].syms);
        mlprof__free(s->objs[i].load);
        mlprof__free(s->objs[i].path);
    }
    mlprof__free(s->objs);
    mlprof__free(s->maps);
    mlprof__free(s);
}

void mlprof__syms_name(mlprof__syms *s, uint64_t ip, char *name, size_t len, const char **object_out)
{
    *object_out = "?";
    const mapping *m = NULL;
    for (size_t i = 0; s && i < s->nmaps && !m; i++) {
        if (ip >= s->maps[i].start && ip < s->maps[i].end)
            m = &s->maps[i];
    }
    if (!m) {
        snprintf(name, len, "0x%" PRIx64, ip);
        return;
    }
    object *o = &s->objs[m->object];
    const char *slash = strrchr(o->path, '/');
    *object_out = slash ? slash + 1 : o->path;
    uint64_t file_off = ip - m->start + m->offset;
    if (!o->loaded)
        load_object(o);
    /* the file offset as the object's own address: through its PT_LOAD
     * segment (for an executable that is not PIE, the address itself) */
    uint64_t vaddr = 0;
    int placed = 0;
    for (size_t i = 0; i < o->nload && !placed; i++) {
        if (file_off >= o->load[i].p_offset && file_off < o->load[i].p_offset + o->load[i].p_filesz) {
            vaddr = file_off - o->load[i].p_offset + o->load[i].p_vaddr;
            placed = 1;
        }
    }
    if (placed && o->nsyms) {
        size_t lo = 0, hi = o->nsyms; /* the last symbol at or below vaddr */
        while (hi - lo > 1) {
            size_t mid = lo + (hi - lo) / 2;
            if (o->syms[mid].value <= vaddr)
                lo = mid;
            else
                hi = mid;
        }
        const sym *y = &o->syms[lo];
        /* a symbol of unknown size covers up to the next one */
        if (y->value <= vaddr && (vaddr < y->value + y->size || (y->size == 0 && lo + 1 < o->nsyms))) {
            snprintf(name, len, "%s", y->name);
            return;
        }
    }
    if (mlprof__unwind_symbol(ip, name, len)) /* a stripped object's separate debug info */
        return;
    snprintf(name, len, "%s+0x%" PRIx64, *object_out, file_off);
}

int mlprof__syms_mapping(mlprof__syms *s, uint64_t ip, const char **path, uint64_t *start, uint64_t *end,
                         uint64_t *offset)
{
    for (size_t i = 0; s && i < s->nmaps; i++) {
        if (ip >= s->maps[i].start && ip < s->maps[i].end) {
            *path = s->objs[s->maps[i].object].path;
            *start = s->maps[i].start;
            *end = s->maps[i].end;
            *offset = s->maps[i].offset;
            return 1;
        }
    }
    return 0;
}

int mlprof__syms_srcpos(mlprof__syms *s, uint64_t ip, mlprof__srcpos *out, int max)
{
    (void)s; /* libdw keeps its own view of the mappings (unwind.c) */
    return mlprof__unwind_srcpos(ip, out, max);
}
