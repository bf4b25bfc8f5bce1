/* runtime/program/bytecode.c — the bytecode file: serialisation (little-endian, fixed-size
 * records, CRC-32C) and decoding with framing checks; the semantic checks are the
 * verifier's (verify.c), which the loader always runs. Layout: rplan(5), BYTECODE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/program/program.h"

/* 1.5 with limb cuts or limb counts, 1.4 with seeded fields, 1.3 with engine data, fields
 * or kernel costs, 1.2 with seeded values, else 1.1: a program without the newer features
 * is written as older readers read it. */
int rp_prog_minor(const rplan_program *p)
{
    for (uint32_t i = 0; i < p->ncode; i++)
        if (p->code[i].op == RPLAN_OP_DROP && p->code[i].y)
            return 6;
    for (uint32_t i = 0; i < p->nvals; i++)
        if (p->vals[i].cut)
            return 5;
    for (uint32_t i = 0; i < p->ncode; i++)
        if (rp_ops[p->code[i].op < RPLAN_OP_COUNT_ ? p->code[i].op : 0].y == RPLAN_OPD_LIMBS &&
            p->code[i].y)
            return 5;
    for (uint32_t i = 0; i < p->nfields; i++)
        if (p->fields[i].regen)
            return 4;
    int minor = p->nfields || p->nkerns ? 3 : 1;
    for (uint32_t i = 0; i < p->nvals && minor < 3; i++)
        minor = p->vals[i].data == RPLAN_DATA_ENGINE ? 3 : p->vals[i].seeded ? 2 : minor;
    return minor;
}

static void put16(unsigned char *b, uint16_t v)
{
    b[0] = (unsigned char)v;
    b[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get16(const unsigned char *b) { return (uint16_t)(b[0] | b[1] << 8); }

static uint32_t get32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t get64(const unsigned char *b)
{
    return (uint64_t)get32(b) | (uint64_t)get32(b + 4) << 32;
}

static const uint32_t recsize[RP_NSECTIONS + 1] = {
    [RP_SEC_STRS] = 1, [RP_SEC_CONS] = 8, [RP_SEC_VALS] = RP_VAL_SIZE,
    [RP_SEC_BUDG] = RP_BUDG_SIZE, [RP_SEC_POLI] = RP_POLI_SIZE, [RP_SEC_CHAI] = RP_CHAI_SIZE,
    [RP_SEC_CODE] = RP_CODE_SIZE, [RP_SEC_LINE] = RP_LINE_SIZE, [RP_SEC_SRCE] = 1,
    [RP_SEC_REGN] = RP_REGN_SIZE, [RP_SEC_FLDS] = RP_FLDS_SIZE, [RP_SEC_KERN] = RP_KERN_SIZE,
    [RP_SEC_RFLD] = RP_RFLD_SIZE, [RP_SEC_LIMB] = RP_LIMB_SIZE,
};

static uint32_t nseeded(const rplan_program *p)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->nvals; i++)
        n += p->vals[i].seeded != 0;
    return n;
}

static uint32_t nregen_fields(const rplan_program *p)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->nfields; i++)
        n += p->fields[i].regen != 0;
    return n;
}

static uint32_t ncut(const rplan_program *p)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->nvals; i++)
        n += p->vals[i].cut != 0;
    return n;
}

/* The sections of a file of the given minor version. */
static int nsections_of(int minor)
{
    return minor >= 5   ? RP_NSECTIONS
         : minor == 4 ? RP_NSECTIONS_1_4
         : minor == 3 ? RP_NSECTIONS_1_3
         : minor == 2 ? RP_NSECTIONS_1_2
                      : RP_NSECTIONS_1_0;
}

static uint32_t sec_count(const rplan_program *p, int id)
{
    switch (id) {
    case RP_SEC_STRS: return p->nstrs;
    case RP_SEC_CONS: return p->ncons;
    case RP_SEC_VALS: return p->nvals;
    case RP_SEC_BUDG: return p->nbuds;
    case RP_SEC_POLI: return p->npols;
    case RP_SEC_CHAI: return p->nchains;
    case RP_SEC_CODE: return p->ncode;
    case RP_SEC_LINE: return p->ncode;
    case RP_SEC_REGN: return nseeded(p);
    case RP_SEC_FLDS: return p->nfields;
    case RP_SEC_KERN: return p->nkerns;
    case RP_SEC_RFLD: return nregen_fields(p);
    case RP_SEC_LIMB: return ncut(p);
    default: return p->src ? p->srclen : 0;
    }
}

int rp_bytecode_restamp(void *buf, size_t len)
{
    unsigned char *b = buf;
    if (len < RP_HDR_SIZE)
        return 0;
    put32(b + 20, 0);
    put32(b + 20, rp_crc32c(0, b, len));
    return 1;
}

fhr_status rplan_write_mem(const rplan_program *p, void **out, size_t *outlen)
{
    if (!p || !out || !outlen)
        return FHR_E_INVALID;
    const int minor = rp_prog_minor(p), nsec = nsections_of(minor);
    uint64_t total = RP_HDR_SIZE + RP_DIR_SIZE * (uint64_t)nsec;
    uint64_t size[RP_NSECTIONS + 1];
    for (int id = 1; id <= nsec; id++) {
        size[id] = (uint64_t)sec_count(p, id) * recsize[id] + (id == RP_SEC_SRCE ? 4 : 0);
        total += size[id];
    }
    if (total > UINT32_MAX)
        return FHR_E_INVALID;
    unsigned char *b = calloc(1, (size_t)total);
    if (!b)
        return FHR_E_NOMEM;
    memcpy(b, RP_MAGIC, 8);
    put16(b + 8, RP_MAJOR);
    put16(b + 10, (uint16_t)minor);
    put32(b + 12, (uint32_t)nsec);
    put32(b + 16, (uint32_t)total);
    uint32_t off = RP_HDR_SIZE + RP_DIR_SIZE * (uint32_t)nsec;
    for (int id = 1; id <= nsec; id++) {
        unsigned char *d = b + RP_HDR_SIZE + RP_DIR_SIZE * (id - 1);
        put32(d, (uint32_t)id);
        put32(d + 4, off);
        put32(d + 8, (uint32_t)size[id]);
        put32(d + 12, sec_count(p, id));
        unsigned char *q = b + off;
        switch (id) {
        case RP_SEC_STRS: memcpy(q, p->strs, p->nstrs); break;
        case RP_SEC_CONS:
            for (uint32_t i = 0; i < p->ncons; i++)
                put64(q + 8 * i, p->cons[i]);
            break;
        case RP_SEC_VALS:
            for (uint32_t i = 0; i < p->nvals; i++, q += RP_VAL_SIZE) {
                const rp_value *v = &p->vals[i];
                put32(q, v->name);
                q[4] = v->mode;
                q[5] = v->recov;
                q[6] = v->init_slot;
                q[7] = v->data;
                put64(q + 8, v->nbytes);
                put64(q + 16, v->arg);
                put32(q + 24, (uint32_t)v->prio);
                put32(q + 28, v->line);
                put16(q + 32, v->col);
                put16(q + 34, v->len);
                put32(q + 36, v->data == RPLAN_DATA_ENGINE ? v->loader : 0);
            }
            break;
        case RP_SEC_BUDG:
            for (uint32_t i = 0; i < p->nbuds; i++, q += RP_BUDG_SIZE) {
                q[0] = p->buds[i].slot;
                put16(q + 2, p->buds[i].col);
                put32(q + 4, p->buds[i].line);
                put64(q + 8, p->buds[i].nbytes);
            }
            break;
        case RP_SEC_POLI:
            for (uint32_t i = 0; i < p->npols; i++, q += RP_POLI_SIZE) {
                put32(q, p->pols[i].name);
                put32(q + 4, p->pols[i].kind);
                put32(q + 8, p->pols[i].first);
                put32(q + 12, p->pols[i].n);
            }
            break;
        case RP_SEC_CHAI:
            for (uint32_t i = 0; i < p->nchains; i++)
                memcpy(q + 8 * i, p->chains[i].s, 8);
            break;
        case RP_SEC_CODE:
            for (uint32_t i = 0; i < p->ncode; i++, q += RP_CODE_SIZE) {
                const rp_ins *in = &p->code[i];
                q[0] = in->op;
                q[1] = in->a;
                q[2] = in->b;
                q[3] = in->c;
                put32(q + 4, in->x);
                put32(q + 8, in->y);
            }
            break;
        case RP_SEC_LINE:
            for (uint32_t i = 0; i < p->ncode; i++, q += RP_LINE_SIZE) {
                put32(q, p->lines[i].line);
                put16(q + 4, p->lines[i].col);
                put16(q + 6, p->lines[i].len);
            }
            break;
        case RP_SEC_SRCE:
            put32(q, p->src_name);
            if (p->src)
                memcpy(q + 4, p->src, p->srclen);
            break;
        case RP_SEC_REGN:
            for (uint32_t i = 0; i < p->nvals; i++) {
                const rp_value *v = &p->vals[i];
                if (!v->seeded)
                    continue;
                put32(q, i);
                put32(q + 4, v->gen);
                put64(q + 8, v->seed);
                q[16] = v->keep;
                q += RP_REGN_SIZE;
            }
            break;
        case RP_SEC_FLDS:
            for (uint32_t i = 0; i < p->nfields; i++, q += RP_FLDS_SIZE) {
                put32(q, p->fields[i].value);
                put32(q + 4, p->fields[i].name);
                put64(q + 8, p->fields[i].nbytes);
            }
            break;
        case RP_SEC_KERN:
            for (uint32_t i = 0; i < p->nkerns; i++, q += RP_KERN_SIZE) {
                put32(q, p->kerns[i].name);
                put32(q + 4, p->kerns[i].kind);
                put64(q + 8, p->kerns[i].imm);
            }
            break;
        case RP_SEC_RFLD:
            for (uint32_t i = 0; i < p->nfields; i++)
                if (p->fields[i].regen) {
                    put32(q, i);
                    q += RP_RFLD_SIZE;
                }
            break;
        case RP_SEC_LIMB:
            for (uint32_t i = 0; i < p->nvals; i++)
                if (p->vals[i].cut) {
                    put32(q, i);
                    put32(q + 4, p->vals[i].limb_q);
                    put32(q + 8, p->vals[i].limb_special);
                    put32(q + 12, p->vals[i].limb_parts);
                    put32(q + 16, p->vals[i].limb_alpha);
                    q += RP_LIMB_SIZE;
                }
            break;
        }
        off += (uint32_t)size[id];
    }
    rp_bytecode_restamp(b, (size_t)total);
    *out = b;
    *outlen = (size_t)total;
    return FHR_OK;
}

int rplan_is_bytecode(const void *buf, size_t len)
{
    return buf && len >= 8 && memcmp(buf, RP_MAGIC, 8) == 0;
}

/* Framing only: header, checksum, directory, record sizes. Sets msg on failure. */
fhr_status rp_decode(const void *buf, size_t len, rplan_program **out, char *msg, size_t cap);

/* A file's sections as its directory places them, with its version. */
typedef struct rp_secs {
    const unsigned char *sec[RP_NSECTIONS + 1];
    uint32_t cnt[RP_NSECTIONS + 1];
    int nsec;       /* sections this version has */
    uint16_t minor; /* the version's minor number */
} rp_secs;

/* The header: magic, version, length, section count, checksum. */
static fhr_status decode_header(const unsigned char *b, size_t len, rp_secs *x, char *msg,
                                size_t cap)
{
    if (!b || len < RP_HDR_SIZE) {
        snprintf(msg, cap, "not a bytecode file: %zu bytes is shorter than the %d-byte header",
                 len, RP_HDR_SIZE);
        return FHR_E_INVALID;
    }
    if (memcmp(b, RP_MAGIC, 8) != 0) {
        snprintf(msg, cap, "not a bytecode file: bad magic");
        return FHR_E_INVALID;
    }
    uint16_t major = get16(b + 8), minor = get16(b + 10);
    if (major != RP_MAJOR || minor > RP_MINOR) {
        snprintf(msg, cap, "unsupported bytecode version %u.%u (this reader knows %d.%d)",
                 major, minor, RP_MAJOR, RP_MINOR);
        return FHR_E_INVALID;
    }
    if (get32(b + 16) != len) {
        snprintf(msg, cap, "truncated or padded: the header says %u bytes, the file has %zu",
                 get32(b + 16), len);
        return FHR_E_INVALID;
    }
    x->minor = minor;
    x->nsec = nsections_of(minor);
    if (get32(b + 12) != (uint32_t)x->nsec || get32(b + 24) != 0 || get32(b + 28) != 0) {
        snprintf(msg, cap, "bad header: section count or reserved fields");
        return FHR_E_INVALID;
    }
    uint32_t want = get32(b + 20);
    uint32_t crc = rp_crc32c(0, b, 20);
    static const unsigned char zero[4] = {0, 0, 0, 0};
    crc = rp_crc32c(crc, zero, 4); /* the CRC field counts as zero */
    crc = rp_crc32c(crc, b + 24, len - 24);
    if (crc != want) {
        snprintf(msg, cap, "checksum mismatch (stored %08x, computed %08x)", want, crc);
        return FHR_E_INVALID;
    }
    return FHR_OK;
}

/* The section directory: each section in order, back to back, to the file's end. */
static fhr_status decode_directory(const unsigned char *b, size_t len, rp_secs *x, char *msg,
                                   size_t cap)
{
    uint64_t off = RP_HDR_SIZE + RP_DIR_SIZE * (uint64_t)x->nsec;
    if (len < off) {
        snprintf(msg, cap, "truncated section directory");
        return FHR_E_INVALID;
    }
    for (int id = 1; id <= x->nsec; id++) {
        const unsigned char *d = b + RP_HDR_SIZE + RP_DIR_SIZE * (id - 1);
        uint32_t sid = get32(d), so = get32(d + 4), ss = get32(d + 8), sc = get32(d + 12);
        uint64_t expect = (uint64_t)sc * recsize[id] + (id == RP_SEC_SRCE ? 4 : 0);
        if (sid != (uint32_t)id || so != off || ss != expect || off + ss > len) {
            snprintf(msg, cap, "bad section directory entry %d", id);
            return FHR_E_INVALID;
        }
        x->sec[id] = b + so;
        x->cnt[id] = sc;
        off += ss;
    }
    if (off != len) {
        snprintf(msg, cap, "%zu stray bytes after the last section", len - (size_t)off);
        return FHR_E_INVALID;
    }
    if (x->cnt[RP_SEC_LINE] != x->cnt[RP_SEC_CODE]) {
        snprintf(msg, cap, "line table has %u entries for %u instructions",
                 x->cnt[RP_SEC_LINE], x->cnt[RP_SEC_CODE]);
        return FHR_E_INVALID;
    }
    return FHR_OK;
}

/* A program with every table allocated at the directory's counts; NULL: no memory. */
static rplan_program *alloc_program(const rp_secs *x)
{
    rplan_program *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->nstrs = x->cnt[RP_SEC_STRS];
    p->ncons = x->cnt[RP_SEC_CONS];
    p->nvals = x->cnt[RP_SEC_VALS];
    p->nbuds = x->cnt[RP_SEC_BUDG];
    p->npols = x->cnt[RP_SEC_POLI];
    p->nchains = x->cnt[RP_SEC_CHAI];
    p->ncode = x->cnt[RP_SEC_CODE];
    p->srclen = x->cnt[RP_SEC_SRCE];
#define ALLOC(f, n) ((p->f = calloc((n) ? (n) : 1, sizeof *p->f)) != NULL)
    if (!ALLOC(strs, p->nstrs) || !ALLOC(cons, p->ncons) || !ALLOC(vals, p->nvals) ||
        !ALLOC(buds, p->nbuds) || !ALLOC(pols, p->npols) || !ALLOC(chains, p->nchains) ||
        !ALLOC(code, p->ncode) || !ALLOC(lines, p->ncode) ||
        !ALLOC(fields, x->cnt[RP_SEC_FLDS]) || !ALLOC(kerns, x->cnt[RP_SEC_KERN])) {
        rplan_program_free(p);
        return NULL;
    }
#undef ALLOC
    return p;
}

/* The value records; a reserved field must be zero. */
static fhr_status decode_values(rplan_program *p, const rp_secs *x, char *msg, size_t cap)
{
    const unsigned char *q = x->sec[RP_SEC_VALS];
    for (uint32_t i = 0; i < p->nvals; i++, q += RP_VAL_SIZE) {
        rp_value *v = &p->vals[i];
        v->name = get32(q);
        v->mode = q[4];
        v->recov = q[5];
        v->init_slot = q[6];
        v->data = q[7];
        v->nbytes = get64(q + 8);
        v->arg = get64(q + 16);
        v->prio = (int32_t)get32(q + 24);
        v->line = get32(q + 28);
        v->col = get16(q + 32);
        v->len = get16(q + 34);
        if (v->data == RPLAN_DATA_ENGINE && x->minor >= 3)
            v->loader = get32(q + 36);
        else if (get32(q + 36) != 0) {
            snprintf(msg, cap, "value %u: reserved field is not zero", i);
            return FHR_E_INVALID;
        }
    }
    return FHR_OK;
}

/* Strings, constants, budgets, policies, chains, code and lines. */
static fhr_status decode_tables(rplan_program *p, const rp_secs *x, char *msg, size_t cap)
{
    memcpy(p->strs, x->sec[RP_SEC_STRS], p->nstrs);
    for (uint32_t i = 0; i < p->ncons; i++)
        p->cons[i] = get64(x->sec[RP_SEC_CONS] + 8 * i);
    const unsigned char *q = x->sec[RP_SEC_BUDG];
    for (uint32_t i = 0; i < p->nbuds; i++, q += RP_BUDG_SIZE) {
        if (q[1]) {
            snprintf(msg, cap, "budget %u: reserved byte is not zero", i);
            return FHR_E_INVALID;
        }
        p->buds[i].slot = q[0];
        p->buds[i].col = get16(q + 2);
        p->buds[i].line = get32(q + 4); /* 1.0 files: zero, unknown */
        p->buds[i].nbytes = get64(q + 8);
    }
    q = x->sec[RP_SEC_POLI];
    for (uint32_t i = 0; i < p->npols; i++, q += RP_POLI_SIZE)
        p->pols[i] = (rp_policyrec){get32(q), get32(q + 4), get32(q + 8), get32(q + 12)};
    for (uint32_t i = 0; i < p->nchains; i++)
        memcpy(p->chains[i].s, x->sec[RP_SEC_CHAI] + 8 * i, 8);
    q = x->sec[RP_SEC_CODE];
    for (uint32_t i = 0; i < p->ncode; i++, q += RP_CODE_SIZE)
        p->code[i] = (rp_ins){q[0], q[1], q[2], q[3], get32(q + 4), get32(q + 8)};
    q = x->sec[RP_SEC_LINE];
    for (uint32_t i = 0; i < p->ncode; i++, q += RP_LINE_SIZE)
        p->lines[i] = (rp_linerec){get32(q), get16(q + 4), get16(q + 6)};
    return FHR_OK;
}

/* Seeded values (1.2 on): value indexes increasing, reserved bytes zero. */
static fhr_status decode_seeded(rplan_program *p, const rp_secs *x, char *msg, size_t cap)
{
    const unsigned char *q = x->nsec >= RP_NSECTIONS_1_2 ? x->sec[RP_SEC_REGN] : NULL;
    for (uint32_t i = 0; q && i < x->cnt[RP_SEC_REGN]; i++, q += RP_REGN_SIZE) {
        uint32_t vi = get32(q);
        int bad = vi >= p->nvals || p->vals[vi].seeded || (i && vi <= get32(q - RP_REGN_SIZE));
        for (int k = 17; k < RP_REGN_SIZE; k++)
            bad |= q[k] != 0;
        if (bad) {
            snprintf(msg, cap, "seeded value record %u: value %u out of order, repeated or "
                     "unknown, or reserved bytes not zero", i, vi);
            return FHR_E_INVALID;
        }
        rp_value *v = &p->vals[vi];
        v->seeded = 1;
        v->gen = get32(q + 4);
        v->seed = get64(q + 8);
        v->keep = q[16];
    }
    return FHR_OK;
}

/* Fields and kernel costs (1.3 on): fields grouped by value in value order, each value's
 * in declaration order. */
static fhr_status decode_fields(rplan_program *p, const rp_secs *x, char *msg, size_t cap)
{
    p->nfields = x->cnt[RP_SEC_FLDS];
    const unsigned char *q = x->nsec >= RP_NSECTIONS_1_3 ? x->sec[RP_SEC_FLDS] : NULL;
    for (uint32_t i = 0; q && i < p->nfields; i++, q += RP_FLDS_SIZE) {
        rp_fieldrec f = {get32(q), get32(q + 4), get64(q + 8), 0};
        uint32_t prev = i ? p->fields[i - 1].value : 0;
        if (f.value >= p->nvals || (i && f.value < prev) ||
            (p->vals[f.value].nfields && f.value != prev) ||
            p->vals[f.value].nfields >= RP_MAX_FIELDS) {
            snprintf(msg, cap, "field record %u: value %u out of order, unknown, or with more "
                     "than %d fields", i, f.value, RP_MAX_FIELDS);
            return FHR_E_INVALID;
        }
        if (!p->vals[f.value].nfields)
            p->vals[f.value].field0 = i;
        p->vals[f.value].nfields++;
        p->fields[i] = f;
    }
    p->nkerns = x->cnt[RP_SEC_KERN];
    q = x->nsec >= RP_NSECTIONS_1_3 ? x->sec[RP_SEC_KERN] : NULL;
    for (uint32_t i = 0; q && i < p->nkerns; i++, q += RP_KERN_SIZE)
        p->kerns[i] = (rp_kernrec){get32(q), get32(q + 4), get64(q + 8)};
    return FHR_OK;
}

/* Seeded fields (1.4): indexes into the field records, increasing, reserved bytes zero
 * (the verifier checks that their values are seeded). */
static fhr_status decode_seeded_fields(rplan_program *p, const rp_secs *x, char *msg, size_t cap)
{
    const unsigned char *q = x->nsec >= RP_NSECTIONS_1_4 ? x->sec[RP_SEC_RFLD] : NULL;
    for (uint32_t i = 0; q && i < x->cnt[RP_SEC_RFLD]; i++, q += RP_RFLD_SIZE) {
        uint32_t fi = get32(q);
        if (fi >= p->nfields || (i && fi <= get32(q - RP_RFLD_SIZE)) || get32(q + 4) != 0) {
            snprintf(msg, cap, "seeded field record %u: field %u out of order, repeated or "
                     "unknown, or reserved bytes not zero", i, fi);
            return FHR_E_INVALID;
        }
        p->fields[fi].regen = 1;
    }
    return FHR_OK;
}

/* Limb cuts (1.5 on): value indexes increasing, reserved bytes zero (the verifier checks
 * the counts against the value). */
static fhr_status decode_cuts(rplan_program *p, const rp_secs *x, char *msg, size_t cap)
{
    const unsigned char *q = x->nsec >= RP_NSECTIONS ? x->sec[RP_SEC_LIMB] : NULL;
    for (uint32_t i = 0; q && i < x->cnt[RP_SEC_LIMB]; i++, q += RP_LIMB_SIZE) {
        uint32_t vi = get32(q);
        if (vi >= p->nvals || (i && vi <= get32(q - RP_LIMB_SIZE))) {
            snprintf(msg, cap, "limb record %u: value %u out of order, repeated or unknown", i,
                     vi);
            return FHR_E_INVALID;
        }
        rp_value *v = &p->vals[vi];
        v->cut = 1;
        v->limb_q = get32(q + 4);
        v->limb_special = get32(q + 8);
        v->limb_parts = get32(q + 12);
        v->limb_alpha = get32(q + 16);
    }
    return FHR_OK;
}

fhr_status rp_decode(const void *buf, size_t len, rplan_program **out, char *msg, size_t cap)
{
    const unsigned char *b = buf;
    *out = NULL;
    rp_secs x;
    memset(&x, 0, sizeof x);
    fhr_status st = decode_header(b, len, &x, msg, cap);
    if (st == FHR_OK)
        st = decode_directory(b, len, &x, msg, cap);
    if (st != FHR_OK)
        return st;
    rplan_program *p = alloc_program(&x);
    if (!p)
        goto nomem;
    if ((st = decode_values(p, &x, msg, cap)) != FHR_OK ||
        (st = decode_tables(p, &x, msg, cap)) != FHR_OK ||
        (st = decode_seeded(p, &x, msg, cap)) != FHR_OK ||
        (st = decode_fields(p, &x, msg, cap)) != FHR_OK ||
        (st = decode_seeded_fields(p, &x, msg, cap)) != FHR_OK ||
        (st = decode_cuts(p, &x, msg, cap)) != FHR_OK) {
        rplan_program_free(p);
        return st;
    }
    p->src_name = get32(x.sec[RP_SEC_SRCE]);
    if (p->srclen) {
        p->src = malloc((size_t)p->srclen + 1);
        if (!p->src)
            goto nomem;
        memcpy(p->src, x.sec[RP_SEC_SRCE] + 4, p->srclen);
        p->src[p->srclen] = '\0';
    }
    p->capstrs = p->nstrs;
    p->minor = x.minor;
    *out = p;
    return FHR_OK;
nomem:
    rplan_program_free(p);
    snprintf(msg, cap, "out of memory");
    return FHR_E_NOMEM;
}
