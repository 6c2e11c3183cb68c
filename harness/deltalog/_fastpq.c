/* The values of a small, flat parquet file as Python lists, for the reader
 * processes that decode a long log's data files (harness/deltalog/_pool.py).
 *
 * Arrow's reader spends 30-60 us on a data file of a few rows, almost all of
 * it per-file setup (the footer, the Arrow schema kept in its metadata, the
 * reader objects), and a run of a million commits has 1.5 million such
 * files. This decodes only what such files hold: one or more row groups of
 * flat columns (REQUIRED or OPTIONAL), data pages of version 1, PLAIN or
 * dictionary encoding, uncompressed or snappy. Anything else it declines,
 * and Arrow reads that file as before.
 *
 * It never decides a column's type: the caller gives, for a footer's schema
 * (the footer's bytes without its row counts and row groups: the key), the
 * kind of Python value each column's Arrow type turns into, as Arrow itself
 * read the first file of that schema. The physical type each kind stands
 * for is checked here; a file that does not match is declined.
 *
 * Every length and offset in the file is checked against the bytes there
 * are: a broken file is declined, never read past. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#define MAX_COLS 256
#define MAX_ROWS (1 << 24)
#define MAX_PAGE (64 << 20)
#define MAX_DEPTH 32

/* Thrift compact protocol */
enum { T_STOP, T_TRUE, T_FALSE, T_BYTE, T_I16, T_I32, T_I64, T_DOUBLE, T_BINARY, T_LIST, T_SET, T_MAP, T_STRUCT };
/* parquet.thrift */
enum { P_BOOLEAN, P_INT32, P_INT64, P_INT96, P_FLOAT, P_DOUBLE, P_BYTE_ARRAY, P_FIXED };
enum { REQUIRED, OPTIONAL, REPEATED };
enum { E_PLAIN = 0, E_PLAIN_DICTIONARY = 2, E_RLE = 3, E_RLE_DICTIONARY = 8 };
enum { C_UNCOMPRESSED = 0, C_SNAPPY = 1 };
enum { PG_DATA = 0, PG_DICTIONARY = 2 };

/* The shape of a footer's row groups: each field's id and type, each
 * list's element type and length, each struct's end; not their values.
 * Arrow's reader turns a file down for a required field missing, a field
 * of another type than declared, a statistics histogram of another length
 * than the column's levels: all of that is in the shape. Files alike in
 * it and in the rest of their footer are alike to that reader. */
#define SHAPE_MAX 32768
typedef struct {
    uint8_t b[SHAPE_MAX];
    size_t n;
} Shape;

typedef struct {
    const uint8_t *p, *end;
    int bad;
    Shape *shape; /* where skip() records what it skips, or NULL */
} Rd;

static void shape_put(Rd *r, const int *v, int n) {
    if (r->shape == NULL)
        return;
    if (r->shape->n + (size_t)n * 5 > SHAPE_MAX) {
        r->bad = 1; /* a footer this large is left to Arrow */
        return;
    }
    for (int i = 0; i < n; i++) { /* as zigzag varints: most take a byte */
        uint32_t z = ((uint32_t)v[i] << 1) ^ (uint32_t)(v[i] >> 31);
        do {
            r->shape->b[r->shape->n++] = (uint8_t)((z & 0x7f) | (z > 0x7f ? 0x80 : 0));
            z >>= 7;
        } while (z);
    }
}

static uint64_t rd_varint(Rd *r) {
    uint64_t v = 0;
    for (int s = 0; s < 64 && r->p < r->end; s += 7) {
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

static int64_t rd_zigzag(Rd *r) {
    uint64_t v = rd_varint(r);
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static int rd_byte(Rd *r) {
    if (r->p >= r->end) {
        r->bad = 1;
        return 0;
    }
    return *r->p++;
}

static size_t left(const Rd *r) { return (size_t)(r->end - r->p); }

/* A field header: its id (from the one before it) and type; 0 at the end. */
static int rd_field(Rd *r, int *id, int *type) {
    int h = rd_byte(r);
    if (r->bad || h == 0)
        return 0;
    *type = h & 0x0f;
    *id = (h >> 4) ? *id + (h >> 4) : (int)rd_zigzag(r);
    return !r->bad;
}

static void skip(Rd *r, int type, int depth, int in_list);

static void skip_struct(Rd *r, int depth) {
    int id = 0, type;
    if (depth > MAX_DEPTH) {
        r->bad = 1;
        return;
    }
    while (rd_field(r, &id, &type)) {
        int field[2] = {id, type};
        shape_put(r, field, 2);
        skip(r, type, depth + 1, 0);
    }
    int end = -1;
    shape_put(r, &end, 1);
}

/* Every element takes at least one byte, so a count beyond the bytes left
 * is a broken file (and no loop runs longer than the file). */
static void skip(Rd *r, int type, int depth, int in_list) {
    uint64_t n;
    int h, kt, vt;
    if (r->bad)
        return;
    switch (type) {
    case T_TRUE:
    case T_FALSE:
        if (in_list) {
            int v = rd_byte(r);
            shape_put(r, &v, 1);
        }
        return;
    case T_BYTE:
        rd_byte(r);
        return;
    case T_I16:
    case T_I32:
    case T_I64:
        rd_varint(r);
        return;
    case T_DOUBLE:
        if (left(r) < 8)
            r->bad = 1;
        else
            r->p += 8;
        return;
    case T_BINARY:
        n = rd_varint(r);
        if (r->bad || n > left(r))
            r->bad = 1;
        else
            r->p += n;
        return;
    case T_LIST:
    case T_SET:
        h = rd_byte(r);
        n = (uint64_t)(h >> 4);
        if (n == 15)
            n = rd_varint(r);
        /* an element type Thrift does not know, even of an empty list, is
           an error to it */
        if (r->bad || n > left(r) || depth > MAX_DEPTH || (h & 0x0f) < T_TRUE || (h & 0x0f) > T_STRUCT) {
            r->bad = 1;
            return;
        }
        int list[3] = {-2, h & 0x0f, (int)n};
        shape_put(r, list, 3);
        for (uint64_t i = 0; i < n && !r->bad; i++)
            skip(r, h & 0x0f, depth + 1, 1);
        return;
    case T_MAP:
        n = rd_varint(r);
        if (n > left(r)) {
            r->bad = 1;
            return;
        }
        int map[3] = {-3, (int)n, 0};
        if (n == 0) {
            shape_put(r, map, 3);
            return;
        }
        h = rd_byte(r);
        map[2] = h;
        shape_put(r, map, 3);
        kt = h >> 4;
        vt = h & 0x0f;
        if (r->bad || n > left(r) || depth > MAX_DEPTH || kt < T_TRUE || kt > T_STRUCT || vt < T_TRUE || vt > T_STRUCT) {
            r->bad = 1;
            return;
        }
        for (uint64_t i = 0; i < n && !r->bad; i++) {
            skip(r, kt, depth + 1, 1);
            skip(r, vt, depth + 1, 1);
        }
        return;
    case T_STRUCT:
        skip_struct(r, depth + 1);
        return;
    default:
        r->bad = 1;
    }
}

/* A list's header: its element type and count (bounded by the bytes left). */
static uint64_t rd_list(Rd *r, int *etype) {
    int h = rd_byte(r);
    uint64_t n = (uint64_t)(h >> 4);
    if (n == 15)
        n = rd_varint(r);
    *etype = h & 0x0f;
    if (r->bad || n > left(r)) {
        r->bad = 1;
        return 0;
    }
    return n;
}

/* An i32 or i64 field's value. Thrift's own readers skip a field of
 * another type than the one declared, which leaves a required field unset
 * and the file unreadable to them: so it is here. */
static int64_t rd_int(Rd *r, int type, int want) {
    if (type != want) {
        r->bad = 1;
        return 0;
    }
    return rd_zigzag(r);
}

static int rd_i32(Rd *r, int type) { return (int)rd_int(r, type, T_I32); }
static int64_t rd_i64(Rd *r, int type) { return rd_int(r, type, T_I64); }

/* What the footer says, as far as decoding needs it. */
typedef struct {
    int ncols;
    int flat;      /* a root and leaves only, none repeated */
    int encrypted; /* or anything else this does not read */
    int ptype[MAX_COLS];
    int optional[MAX_COLS];
    int64_t num_rows;
    const uint8_t *schema;      /* the schema's list, for a nested walk */
    const uint8_t *rg, *rg_end; /* the row groups' list */
    /* The footer minus fields 3 (num_rows) and 4 (row_groups): the key. */
    const uint8_t *cut[2][2];
    int ncut;
    Shape shape; /* of the row groups; last: not cleared, only its length */
} Footer;

static int parse_schema(Rd *r, Footer *f) {
    int et, id, type;
    uint64_t n = rd_list(r, &et);
    if (r->bad || et != T_STRUCT)
        return 0;
    f->flat = n >= 2 && n - 1 <= MAX_COLS;
    f->ncols = 0;
    for (uint64_t i = 0; i < n && !r->bad; i++) {
        int ptype = -1, rep = -1, named = 0;
        int64_t children = 0;
        id = 0;
        while (rd_field(r, &id, &type)) {
            if (id == 1)
                ptype = rd_i32(r, type);
            else if (id == 3)
                rep = rd_i32(r, type);
            else if (id == 5)
                children = rd_i32(r, type);
            else {
                named |= id == 4 && type == T_BINARY;
                skip(r, type, 1, 0);
            }
        }
        if (!named)
            r->bad = 1;
        if (i == 0) {
            if ((uint64_t)children != n - 1 || ptype != -1)
                f->flat = 0;
        } else if (f->flat) {
            if (children != 0 || ptype < 0 || (rep != REQUIRED && rep != OPTIONAL))
                f->flat = 0;
            else {
                f->ptype[f->ncols] = ptype;
                f->optional[f->ncols] = rep == OPTIONAL;
                f->ncols++;
            }
        }
    }
    return !r->bad;
}

static int parse_footer(const uint8_t *p, size_t n, Footer *f) {
    Rd r = {p, p + n, 0, NULL};
    int id = 0, type, seen = 0;
    memset(f, 0, offsetof(Footer, shape));
    f->shape.n = 0;
    f->num_rows = -1;
    for (;;) {
        const uint8_t *start = r.p;
        if (!rd_field(&r, &id, &type))
            break;
        seen |= id >= 1 && id <= 4 ? 1 << id : 0;
        if (id == 1)
            rd_i32(&r, type);
        else if (id == 2) {
            f->schema = r.p;
            if (type != T_LIST || !parse_schema(&r, f))
                return 0;
        } else if (id == 3 && f->ncut < 2) {
            f->num_rows = rd_i64(&r, type);
            f->cut[f->ncut][0] = start;
            f->cut[f->ncut++][1] = r.p;
        } else if (id == 4 && f->ncut < 2) {
            if (type != T_LIST)
                return 0;
            f->rg = r.p;
            r.shape = &f->shape;
            skip(&r, type, 0, 0);
            r.shape = NULL;
            f->rg_end = r.p;
            f->cut[f->ncut][0] = start;
            f->cut[f->ncut++][1] = r.p;
        } else {
            if (id == 8 || id == 9)
                f->encrypted = 1;
            skip(&r, type, 0, 0);
        }
    }
    /* Fields 1-4 are required: with one missing Arrow cannot read the file. */
    return !r.bad && (seen & 0x1e) == 0x1e && f->rg != NULL;
}

/* The footer minus its row counts and row groups, and the row groups' shape. */
static PyObject *footer_key(const uint8_t *p, size_t n, const Footer *f) {
    size_t len = n + f->shape.n;
    for (int i = 0; i < f->ncut; i++)
        len -= (size_t)(f->cut[i][1] - f->cut[i][0]);
    PyObject *key = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (key == NULL)
        return NULL;
    char *out = PyBytes_AS_STRING(key);
    const uint8_t *at = p;
    for (int i = 0; i < f->ncut; i++) {
        memcpy(out, at, (size_t)(f->cut[i][0] - at));
        out += f->cut[i][0] - at;
        at = f->cut[i][1];
    }
    memcpy(out, at, (size_t)(p + n - at));
    out += p + n - at;
    memcpy(out, f->shape.b, f->shape.n);
    return key;
}

/* Raw snappy: the whole of src into exactly dn bytes of dst. */
static int unsnappy(const uint8_t *src, size_t n, uint8_t *dst, size_t dn) {
    Rd r = {src, src + n, 0};
    uint64_t want = rd_varint(&r);
    size_t o = 0;
    if (r.bad || want != dn)
        return 0;
    while (r.p < r.end) {
        int tag = *r.p++;
        size_t len, off;
        if ((tag & 3) == 0) {
            len = (size_t)(tag >> 2);
            if (len >= 60) {
                size_t nb = len - 59;
                if (left(&r) < nb)
                    return 0;
                len = 0;
                for (size_t i = 0; i < nb; i++)
                    len |= (size_t)r.p[i] << (8 * i);
                r.p += nb;
            }
            len += 1;
            if (len > left(&r) || len > dn - o)
                return 0;
            memcpy(dst + o, r.p, len);
            o += len;
            r.p += len;
            continue;
        }
        if ((tag & 3) == 1) {
            if (left(&r) < 1)
                return 0;
            len = 4 + ((size_t)(tag >> 2) & 7);
            off = ((size_t)(tag >> 5) << 8) | r.p[0];
            r.p += 1;
        } else if ((tag & 3) == 2) {
            if (left(&r) < 2)
                return 0;
            len = 1 + (size_t)(tag >> 2);
            off = (size_t)r.p[0] | ((size_t)r.p[1] << 8);
            r.p += 2;
        } else {
            if (left(&r) < 4)
                return 0;
            len = 1 + (size_t)(tag >> 2);
            off = (size_t)r.p[0] | ((size_t)r.p[1] << 8) | ((size_t)r.p[2] << 16) | ((size_t)r.p[3] << 24);
            r.p += 4;
        }
        if (off == 0 || off > o || len > dn - o)
            return 0;
        if (off >= len)
            memcpy(dst + o, dst + o - off, len);
        else
            for (size_t i = 0; i < len; i++) /* a copy that overlaps what it writes */
                dst[o + i] = dst[o + i - off];
        o += len;
    }
    return o == dn;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32); }

/* The RLE / bit-packed hybrid: n values of width bw from all of r. */
static int unhybrid(Rd *r, int bw, uint32_t *out, int64_t n) {
    int64_t i = 0;
    size_t vbytes = (size_t)(bw + 7) / 8;
    if (bw < 0 || bw > 32)
        return 0;
    while (i < n) {
        uint64_t h = rd_varint(r);
        if (r->bad)
            return 0;
        if ((h >> 1) == 0)
            return 0; /* an empty run: Arrow's decoder stops there */
        if (h & 1) {
            uint64_t groups = h >> 1;
            /* width 0 (a dictionary of one value) takes no bytes */
            if (bw > 0 && (groups > left(r) || groups * (uint64_t)bw > left(r)))
                return 0;
            const uint8_t *run = r->p;
            uint64_t count = groups * 8, bytes = groups * (uint64_t)bw;
            uint64_t mask = bw == 32 ? 0xffffffffu : (((uint64_t)1 << bw) - 1);
            for (uint64_t k = 0; k < count && i < n; k++, i++) {
                /* the 8 bytes from the value's first: a width of up to 32
                   bits at any bit offset lies within them */
                uint64_t bit = k * (uint64_t)bw, at = bit >> 3, w = 0;
                if (at + 8 <= bytes)
                    w = le64(run + at);
                else
                    for (uint64_t b = 0; at + b < bytes; b++)
                        w |= (uint64_t)run[at + b] << (8 * b);
                out[i] = (uint32_t)((w >> (bit & 7)) & mask);
            }
            r->p += groups * (uint64_t)bw;
        } else {
            uint64_t count = h >> 1;
            uint32_t v = 0;
            if (vbytes > left(r))
                return 0;
            for (size_t b = 0; b < vbytes; b++)
                v |= (uint32_t)r->p[b] << (8 * b);
            r->p += vbytes;
            if (bw < 32 && (v >> bw) != 0)
                return 0; /* wider than its width: a level or an index out of range */
            for (uint64_t k = 0; k < count && i < n; k++)
                out[i++] = v;
        }
    }
    return 1;
}


/* n PLAIN values of a kind into out (new references); 0 if the bytes run out
 * or a string is no UTF-8 (then nothing is left in out). */
static int unplain(Rd *r, int kind, PyObject **out, int64_t n) {
    int64_t i = 0;
    size_t width = kind == 'q' || kind == 'Q' || kind == 'd' ? 8 : kind == 'i' || kind == 'I' || kind == 'f' ? 4 : 0;
    if (kind == 'b') {
        if ((uint64_t)n > left(r) * 8)
            return 0;
        for (; i < n; i++) {
            out[i] = (r->p[i >> 3] >> (i & 7)) & 1 ? Py_True : Py_False;
            Py_INCREF(out[i]);
        }
        r->p += (n + 7) / 8;
        return 1;
    }
    if (width && (uint64_t)n > left(r) / width)
        return 0;
    for (; i < n; i++) {
        PyObject *v = NULL;
        const uint8_t *p = r->p;
        if (width) {
            r->p += width;
            switch (kind) {
            case 'i':
                v = PyLong_FromLong((int32_t)le32(p));
                break;
            case 'I':
                v = PyLong_FromUnsignedLong(le32(p));
                break;
            case 'q':
                v = PyLong_FromLongLong((int64_t)le64(p));
                break;
            case 'Q':
                v = PyLong_FromUnsignedLongLong(le64(p));
                break;
            case 'f': {
                float x;
                uint32_t bits = le32(p);
                memcpy(&x, &bits, 4);
                v = PyFloat_FromDouble((double)x);
                break;
            }
            default: {
                double x;
                uint64_t bits = le64(p);
                memcpy(&x, &bits, 8);
                v = PyFloat_FromDouble(x);
            }
            }
        } else {
            if (left(r) < 4)
                break;
            size_t len = le32(p);
            if (len > left(r) - 4)
                break;
            r->p += 4 + len;
            v = kind == 's' ? PyUnicode_DecodeUTF8((const char *)p + 4, (Py_ssize_t)len, NULL)
                            : PyBytes_FromStringAndSize((const char *)p + 4, (Py_ssize_t)len);
        }
        if (v == NULL)
            break;
        out[i] = v;
    }
    if (i == n)
        return 1;
    PyErr_Clear();
    while (i > 0)
        Py_DECREF(out[--i]);
    return 0;
}

static int physical_of(int kind) {
    switch (kind) {
    case 'i':
    case 'I':
        return P_INT32;
    case 'q':
    case 'Q':
        return P_INT64;
    case 'f':
        return P_FLOAT;
    case 'd':
        return P_DOUBLE;
    case 'b':
        return P_BOOLEAN;
    case 's':
    case 'y':
        return P_BYTE_ARRAY;
    }
    return -1;
}

typedef struct {
    int ptype, codec;
    int64_t num_values, size, data_off, dict_off;
    int other; /* a file path, encryption: not read here */
} Chunk;

/* A ColumnChunk; 0 (and r->bad) where a field parquet.thrift requires of
 * it or of its ColumnMetaData is missing or of another type. */
static int parse_chunk(Rd *r, Chunk *c) {
    int id = 0, type, seen = 0, mseen = 0;
    memset(c, 0, sizeof *c);
    c->ptype = c->codec = -1;
    c->num_values = c->size = c->data_off = c->dict_off = -1;
    while (rd_field(r, &id, &type)) {
        if (id == 2) {
            rd_i64(r, type);
            seen = 1;
        } else if (id == 3) {
            int mid = 0, mtype;
            if (type != T_STRUCT) {
                r->bad = 1;
                break;
            }
            while (rd_field(r, &mid, &mtype)) {
                switch (mid) {
                case 1:
                    c->ptype = rd_i32(r, mtype);
                    break;
                case 4:
                    c->codec = rd_i32(r, mtype);
                    break;
                case 5:
                    c->num_values = rd_i64(r, mtype);
                    break;
                case 6:
                    rd_i64(r, mtype);
                    break;
                case 7:
                    c->size = rd_i64(r, mtype);
                    break;
                case 9:
                    c->data_off = rd_i64(r, mtype);
                    break;
                case 11:
                    c->dict_off = rd_i64(r, mtype);
                    break;
                default:
                    if ((mid == 2 || mid == 3) && mtype != T_LIST)
                        r->bad = 1;
                    skip(r, mtype, 1, 0);
                }
                mseen |= mid >= 1 && mid <= 9 ? 1 << mid : 0;
            }
        } else {
            if (id == 1 || id == 8 || id == 9)
                c->other = 1;
            skip(r, type, 0, 0);
        }
    }
    if (!seen || (mseen & 0x2fe) != 0x2fe) /* file_offset; fields 1-7 and 9 */
        r->bad = 1;
    return !r->bad;
}

typedef struct {
    int type, usize, csize;
    int64_t nvals;
    int encoding, def_encoding, rep_encoding;
} PageHeader;

static int parse_page_header(Rd *r, PageHeader *h) {
    int id = 0, type, seen = 0, sseen = 0, sub = 0;
    h->type = h->usize = h->csize = h->encoding = h->def_encoding = h->rep_encoding = -1;
    h->nvals = -1;
    while (rd_field(r, &id, &type)) {
        if (id == 1)
            h->type = rd_i32(r, type);
        else if (id == 2)
            h->usize = rd_i32(r, type);
        else if (id == 3)
            h->csize = rd_i32(r, type);
        else if (id == 4)
            rd_i32(r, type);
        else if ((id == 5 || id == 7) && type == T_STRUCT && !sub) {
            /* data_page_header or dictionary_page_header */
            int sid = 0, stype;
            sub = id;
            while (rd_field(r, &sid, &stype)) {
                if (sid == 1)
                    h->nvals = rd_i32(r, stype);
                else if (sid == 2)
                    h->encoding = rd_i32(r, stype);
                else if (sid == 3 && id == 5)
                    h->def_encoding = rd_i32(r, stype);
                else if (sid == 4 && id == 5)
                    h->rep_encoding = rd_i32(r, stype);
                else
                    skip(r, stype, 1, 0);
                sseen |= sid >= 1 && sid <= 4 ? 1 << sid : 0;
            }
        } else
            skip(r, type, 0, 0);
        seen |= id >= 1 && id <= 3 ? 1 << id : 0;
    }
    /* What parquet.thrift requires, and the header that goes with the type. */
    int want = sub == 5 ? 0x1e : 0x6;
    if ((seen & 0xe) != 0xe || sub != (h->type == PG_DATA ? 5 : h->type == PG_DICTIONARY ? 7 : -1) ||
        (sseen & want) != want)
        r->bad = 1;
    return !r->bad;
}

/* A column chunk's bytes, from its first page (the dictionary's, where it
 * has one); 0 where they do not lie within the file. */
static int chunk_bytes(const uint8_t *file, size_t flen, const Chunk *c, Rd *r) {
    int64_t start = c->data_off;
    if (c->dict_off > 0 && c->dict_off < start)
        start = c->dict_off;
    if (start < 4 || c->size < 0 || (uint64_t)start > flen || (uint64_t)c->size > flen - (uint64_t)start)
        return 0;
    r->p = file + start;
    r->end = file + start + c->size;
    r->bad = 0;
    r->shape = NULL;
    return 1;
}

/* The next page of a chunk: its header, and its bytes uncompressed into
 * *pg (into *buf, freed and replaced, where snappy compressed them). */
static int next_page(Rd *r, int codec, PageHeader *h, uint8_t **buf, Rd *pg) {
    if (!parse_page_header(r, h) || h->csize < 0 || h->usize < 0 || h->usize > MAX_PAGE ||
        (size_t)h->csize > left(r))
        return 0;
    const uint8_t *page = r->p;
    r->p += h->csize;
    free(*buf);
    *buf = NULL;
    if (codec == C_SNAPPY) {
        *buf = malloc(h->usize ? (size_t)h->usize : 1);
        if (*buf == NULL || !unsnappy(page, (size_t)h->csize, *buf, (size_t)h->usize))
            return 0;
        page = *buf;
    } else if (h->usize != h->csize)
        return 0;
    pg->p = page;
    pg->end = page + h->usize;
    pg->bad = 0;
    pg->shape = NULL;
    return 1;
}

/* A data page's dictionary indices (its bit width, then the hybrid), each
 * checked against the dictionary's length, into *idx (freed and replaced). */
static int dict_indices(Rd *pg, int64_t present, int64_t ndict, uint32_t **idx) {
    if (ndict < 0 || (present > 0 && left(pg) < 1))
        return 0;
    /* Arrow reads the width wherever there is a byte, values or none */
    int bw = left(pg) > 0 ? *pg->p++ : 0;
    if (bw > 32)
        return 0;
    free(*idx);
    *idx = malloc(sizeof(uint32_t) * (size_t)(present ? present : 1));
    if (*idx == NULL || !unhybrid(pg, bw, *idx, present))
        return 0;
    for (int64_t i = 0; i < present; i++)
        if ((int64_t)(*idx)[i] >= ndict)
            return 0;
    return 1;
}

/* One column chunk's values into list[base:base+rows]. */
static int decode_chunk(const uint8_t *file, size_t flen, const Chunk *c, int kind, int optional, PyObject *list,
                        int64_t base, int64_t rows) {
    int64_t filled = 0, ndict = -1, pages = 0;
    PyObject **dict = NULL, **vals = NULL;
    uint32_t *levels = NULL, *idx = NULL;
    uint8_t *buf = NULL;
    int ok = 0;
    if (c->ptype != physical_of(kind) || c->num_values != rows || c->other ||
        (c->codec != C_UNCOMPRESSED && c->codec != C_SNAPPY))
        return 0;
    if (rows == 0)
        return 1; /* Arrow writes an empty chunk with no pages, at offset 0 */
    Rd r, pg;
    if (!chunk_bytes(file, flen, c, &r))
        return 0;
    while (filled < rows) {
        PageHeader h;
        if (!next_page(&r, c->codec, &h, &buf, &pg))
            goto done;
        if (h.type == PG_DICTIONARY) {
            /* one, before any data page, as Arrow wants it */
            if (dict != NULL || pages > 0 || h.nvals < 0 || h.nvals > MAX_ROWS ||
                (h.encoding != E_PLAIN && h.encoding != E_PLAIN_DICTIONARY))
                goto done;
            dict = malloc(sizeof(PyObject *) * (size_t)(h.nvals ? h.nvals : 1));
            if (dict == NULL || !unplain(&pg, kind, dict, h.nvals))
                goto done;
            ndict = h.nvals;
            continue;
        }
        if (h.type != PG_DATA || h.nvals < 0 || h.nvals > rows - filled)
            goto done;
        pages++;
        int64_t n = h.nvals, present = n;
        free(levels);
        levels = NULL;
        if (optional) {
            if (h.def_encoding != E_RLE || left(&pg) < 4)
                goto done;
            size_t len = le32(pg.p);
            if (len > left(&pg) - 4)
                goto done;
            Rd lv = {pg.p + 4, pg.p + 4 + len, 0};
            pg.p += 4 + len;
            levels = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
            if (levels == NULL || !unhybrid(&lv, 1, levels, n))
                goto done;
            present = 0;
            for (int64_t i = 0; i < n; i++)
                present += levels[i];
        }
        free(vals);
        vals = malloc(sizeof(PyObject *) * (size_t)(present ? present : 1));
        if (vals == NULL)
            goto done;
        if (h.encoding == E_PLAIN) {
            if (!unplain(&pg, kind, vals, present))
                goto done;
        } else if (h.encoding == E_PLAIN_DICTIONARY || h.encoding == E_RLE_DICTIONARY) {
            if (dict == NULL || !dict_indices(&pg, present, ndict, &idx))
                goto done;
            for (int64_t i = 0; i < present; i++) {
                vals[i] = dict[idx[i]];
                Py_INCREF(vals[i]);
            }
        } else
            goto done;
        for (int64_t i = 0, v = 0; i < n; i++) {
            PyObject *x = levels && !levels[i] ? Py_None : vals[v++];
            if (x == Py_None)
                Py_INCREF(x);
            PyList_SET_ITEM(list, base + filled + i, x); /* the slot held NULL */
        }
        free(vals);
        vals = NULL;
        filled += n;
    }
    ok = 1;
done:
    free(buf);
    free(levels);
    free(idx);
    free(vals); /* only after a failure in unplain, which left it empty */
    if (dict != NULL) {
        for (int64_t i = 0; i < ndict; i++)
            Py_DECREF(dict[i]);
        free(dict);
    }
    return ok;
}

/* One RowGroup of the footer's list: its ncols column chunks into cs and
 * its row count; 0 where a field parquet.thrift requires is missing. */
static int parse_row_group(Rd *r, int ncols, Chunk *cs, int64_t *rows) {
    int id = 0, type, seen = 0, et;
    *rows = -1;
    while (rd_field(r, &id, &type)) {
        if (id == 1) {
            uint64_t nc = type == T_LIST ? rd_list(r, &et) : 0;
            if (type != T_LIST || r->bad || et != T_STRUCT || nc != (uint64_t)ncols) {
                r->bad = 1;
                break;
            }
            for (int i = 0; i < ncols && !r->bad; i++)
                parse_chunk(r, &cs[i]);
            seen |= 1;
        } else if (id == 2) {
            rd_i64(r, type);
            seen |= 2;
        } else if (id == 3)
            *rows = rd_i64(r, type);
        else
            skip(r, type, 0, 0);
    }
    return !r->bad && seen == 3 && *rows >= 0;
}

/* A parquet file's footer: where it lies and what it says; NULL where the
 * file has none this can read. */
static const uint8_t *find_footer(const uint8_t *data, size_t n, size_t *flen, Footer *f) {
    if (n < 12 || memcmp(data, "PAR1", 4) != 0 || memcmp(data + n - 4, "PAR1", 4) != 0)
        return NULL;
    *flen = le32(data + n - 8);
    if (*flen > n - 12)
        return NULL;
    const uint8_t *footer = data + n - 8 - *flen;
    return parse_footer(footer, *flen, f) ? footer : NULL;
}

/* decode(data, kinds) -> None | (key, None) | (key, [column values, ...]) */
static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *kinds, *key = NULL, *cols = NULL, *result = NULL;
    Footer f;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyDict_Type, &kinds))
        return NULL;
    const uint8_t *data = view.buf;
    size_t n = (size_t)view.len, flen;
    const uint8_t *footer = find_footer(data, n, &flen, &f);
    if (footer == NULL)
        goto none;
    key = footer_key(footer, flen, &f);
    if (key == NULL)
        goto fail;
    PyObject *want = PyDict_GetItemWithError(kinds, key);
    if (want == NULL && PyErr_Occurred())
        goto fail;
    if (want == NULL || !PyUnicode_Check(want) || !PyUnicode_IS_ASCII(want) || !f.flat || f.encrypted ||
        f.ncols != PyUnicode_GET_LENGTH(want) || f.num_rows < 0 || f.num_rows > MAX_ROWS || f.rg == NULL)
        goto declined;
    const char *kind = (const char *)PyUnicode_1BYTE_DATA(want);
    cols = PyList_New(f.ncols);
    if (cols == NULL)
        goto fail;
    for (int i = 0; i < f.ncols; i++) {
        PyObject *col = PyList_New((Py_ssize_t)f.num_rows);
        if (col == NULL)
            goto fail;
        PyList_SET_ITEM(cols, i, col);
    }
    Rd r = {f.rg, f.rg_end, 0};
    int et;
    uint64_t ngroups = rd_list(&r, &et);
    int64_t base = 0;
    if (r.bad || et != T_STRUCT)
        goto declined;
    for (uint64_t g = 0; g < ngroups; g++) {
        int64_t rows;
        Chunk chunks[8], *cs = chunks;
        Chunk *heap = NULL;
        if (f.ncols > 8) {
            heap = malloc(sizeof(Chunk) * (size_t)f.ncols);
            if (heap == NULL)
                goto declined;
            cs = heap;
        }
        int ok = parse_row_group(&r, f.ncols, cs, &rows) && rows <= f.num_rows - base;
        for (int i = 0; ok && i < f.ncols; i++)
            ok = decode_chunk(data, n, &cs[i], kind[i], f.optional[i], PyList_GET_ITEM(cols, i), base, rows);
        free(heap);
        if (!ok)
            goto declined;
        base += rows;
    }
    if (base != f.num_rows)
        goto declined;
    result = PyTuple_Pack(2, key, cols);
    goto out;
declined:
    PyErr_Clear();
    result = PyTuple_Pack(2, key, Py_None);
    goto out;
none:
    result = Py_None;
    Py_INCREF(result);
    goto out;
fail:
    result = NULL;
out:
    Py_XDECREF(key);
    Py_XDECREF(cols); /* unfilled slots are NULL, which a list's dealloc skips */
    PyBuffer_Release(&view);
    return result;
}

/* ---- Checkpoints ----
 *
 * Comparing a classic checkpoint with the JSON replay needs its adds'
 * paths and its metaData and protocol actions, and a long run has
 * thousands of checkpoints of thousands of adds: through Arrow each costs
 * milliseconds, nearly all of it per-file setup and nested column readers.
 *
 * checkpoint(data) reads the add.path column itself (the paths, as a set),
 * and gives for the metaData and protocol columns not their values but a
 * key: every level and value of their rows that are not null, in order,
 * with the rows that are null (every other action's row) left out. Two
 * checkpoints of one footer key and one such key hold the same metaData
 * and protocol actions, however many other rows lie around them; the
 * caller has Arrow decode each key once. Anything unusual (a sidecar
 * column, a repeated level above add.path, data pages of version 2,
 * encodings other than PLAIN and dictionary) is declined: None. */

#define MAX_LEAVES MAX_COLS

typedef struct {
    const uint8_t *name;
    size_t name_len;
    int ptype, rep, children;
} SchemaEl;

typedef struct {
    int top; /* the schema index of its top-level field */
    int max_def, max_rep, ptype;
    int add_path; /* add.path itself */
    int meta;     /* under metaData or protocol */
} Leaf;

typedef struct {
    SchemaEl els[MAX_LEAVES * 4];
    int nels;
    Leaf leaves[MAX_LEAVES];
    int nleaves;
} Nested;

static int named(const SchemaEl *e, const char *s) {
    size_t n = strlen(s);
    return e->name_len == n && memcmp(e->name, s, n) == 0;
}

static int read_schema(const uint8_t *p, const uint8_t *end, Nested *t) {
    Rd r = {p, end, 0, NULL};
    int et, id, type;
    uint64_t n = rd_list(&r, &et);
    if (r.bad || et != T_STRUCT || n < 2 || n > MAX_LEAVES * 4)
        return 0;
    for (uint64_t i = 0; i < n && !r.bad; i++) {
        SchemaEl *e = &t->els[i];
        e->name = NULL;
        e->name_len = 0;
        e->ptype = e->rep = -1;
        e->children = 0;
        id = 0;
        while (rd_field(&r, &id, &type)) {
            if (id == 1)
                e->ptype = rd_i32(&r, type);
            else if (id == 3)
                e->rep = rd_i32(&r, type);
            else if (id == 5)
                e->children = rd_i32(&r, type);
            else if (id == 4 && type == T_BINARY) {
                uint64_t len = rd_varint(&r);
                if (r.bad || len > left(&r)) {
                    r.bad = 1;
                    break;
                }
                e->name = r.p;
                e->name_len = (size_t)len;
                r.p += len;
            } else
                skip(&r, type, 1, 0);
        }
        if (e->name == NULL || e->children < 0)
            r.bad = 1;
    }
    t->nels = (int)n;
    return !r.bad;
}

/* The leaves under schema element *pos, depth first (the column chunks'
 * order), with the levels each one's values are written at. */
static int walk(Nested *t, int *pos, int depth, int def, int rep, int top, int under_add) {
    if (*pos >= t->nels || depth > MAX_DEPTH)
        return 0;
    int me = (*pos)++;
    const SchemaEl *e = &t->els[me];
    if (e->rep == OPTIONAL)
        def++;
    else if (e->rep == REPEATED) {
        def++;
        rep++;
    } else if (e->rep != REQUIRED)
        return 0;
    if (depth == 1)
        top = me;
    if (e->children > 0) {
        for (int c = 0; c < e->children; c++)
            if (!walk(t, pos, depth + 1, def, rep, top, depth == 1 && named(e, "add")))
                return 0;
        return 1;
    }
    if (e->ptype < 0 || t->nleaves >= MAX_LEAVES)
        return 0;
    Leaf *l = &t->leaves[t->nleaves++];
    l->top = top;
    l->max_def = def;
    l->max_rep = rep;
    l->ptype = e->ptype;
    l->add_path = under_add && depth == 2 && named(e, "path");
    return 1;
}

static int bit_width(int v) {
    int w = 0;
    while (v > 0) {
        w++;
        v >>= 1;
    }
    return w;
}

typedef struct {
    uint8_t *b;
    size_t n, cap;
} Buf;

static int buf_put(Buf *b, const void *p, size_t n) {
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (n > cap - b->n)
            cap *= 2;
        uint8_t *nb = realloc(b->b, cap);
        if (nb == NULL)
            return 0;
        b->b = nb;
        b->cap = cap;
    }
    memcpy(b->b + b->n, p, n);
    b->n += n;
    return 1;
}

/* A value as it lies in a page: its bytes (a string's without its length). */
typedef struct {
    const uint8_t *p;
    size_t n;
} Span;

static const uint8_t BOOL_BYTES[2] = {0, 1};

/* n PLAIN values as spans into the page; 0 if the bytes run out. */
static int plain_spans(Rd *r, int ptype, Span *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (ptype == P_BOOLEAN) {
            if ((uint64_t)n > left(r) * 8)
                return 0;
            for (; i < n; i++) {
                out[i].p = &BOOL_BYTES[(r->p[i >> 3] >> (i & 7)) & 1];
                out[i].n = 1;
            }
            r->p += (n + 7) / 8;
            return 1;
        }
        size_t w = ptype == P_INT32 ? 4 : ptype == P_INT64 ? 8 : 0;
        if (ptype == P_BYTE_ARRAY) {
            if (left(r) < 4)
                return 0;
            w = le32(r->p);
            if (w > left(r) - 4)
                return 0;
            r->p += 4;
        } else if (w == 0 || w > left(r))
            return 0;
        out[i].p = r->p;
        out[i].n = w;
        r->p += w;
    }
    return 1;
}

/* One leaf's column chunk: its paths into `paths` (add.path), or its
 * levels and values, null top-level rows left out, onto `key` (each
 * entry starts with a 1). */
static int leaf_chunk(const uint8_t *file, size_t flen, const Chunk *c, const Leaf *l, int64_t rows, PyObject *paths,
                      Buf *key) {
    int64_t filled = 0, ndict = -1, pages = 0, records = 0;
    Span *dict = NULL, *vals = NULL;
    uint32_t *reps = NULL, *defs = NULL, *idx = NULL;
    uint8_t *buf = NULL, *dict_buf = NULL;
    int ok = 0;
    if (c->ptype != l->ptype || c->other || c->num_values < 0 || c->num_values > MAX_ROWS ||
        (c->codec != C_UNCOMPRESSED && c->codec != C_SNAPPY))
        return 0;
    /* Arrow reads the row group's rows: a chunk of another count is left to it */
    if (l->max_rep == 0 ? c->num_values != rows : c->num_values < rows)
        return 0;
    if (c->num_values == 0)
        return 1;
    Rd r, pg;
    if (!chunk_bytes(file, flen, c, &r))
        return 0;
    while (filled < c->num_values) {
        PageHeader h;
        if (!next_page(&r, c->codec, &h, &buf, &pg))
            goto done;
        if (h.type == PG_DICTIONARY) {
            if (dict != NULL || pages > 0 || h.nvals < 0 || h.nvals > MAX_ROWS ||
                (h.encoding != E_PLAIN && h.encoding != E_PLAIN_DICTIONARY) || l->ptype == P_BOOLEAN)
                goto done;
            dict = malloc(sizeof(Span) * (size_t)(h.nvals ? h.nvals : 1));
            if (dict == NULL || !plain_spans(&pg, l->ptype, dict, h.nvals))
                goto done;
            dict_buf = buf; /* the spans point into it */
            buf = NULL;
            ndict = h.nvals;
            continue;
        }
        if (h.type != PG_DATA || h.nvals < 0 || h.nvals > c->num_values - filled)
            goto done;
        pages++;
        int64_t n = h.nvals, present = 0;
        free(reps);
        free(defs);
        reps = defs = NULL;
        reps = calloc((size_t)(n ? n : 1), sizeof(uint32_t));
        defs = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
        if (reps == NULL || defs == NULL)
            goto done;
        for (int which = 0; which < 2; which++) {
            int max = which == 0 ? l->max_rep : l->max_def;
            int enc = which == 0 ? h.rep_encoding : h.def_encoding;
            if (max == 0)
                continue;
            if (enc != E_RLE || left(&pg) < 4)
                goto done;
            size_t len = le32(pg.p);
            if (len > left(&pg) - 4)
                goto done;
            Rd lv = {pg.p + 4, pg.p + 4 + len, 0, NULL};
            pg.p += 4 + len;
            uint32_t *out = which == 0 ? reps : defs;
            if (!unhybrid(&lv, bit_width(max), out, n))
                goto done;
            for (int64_t i = 0; i < n; i++)
                if (out[i] > (uint32_t)max)
                    goto done;
        }
        if (l->max_def == 0)
            for (int64_t i = 0; i < n; i++)
                defs[i] = 0;
        for (int64_t i = 0; i < n; i++) {
            present += defs[i] == (uint32_t)l->max_def;
            records += reps[i] == 0;
        }
        free(vals);
        vals = malloc(sizeof(Span) * (size_t)(present ? present : 1));
        if (vals == NULL)
            goto done;
        if (h.encoding == E_PLAIN) {
            if (!plain_spans(&pg, l->ptype, vals, present))
                goto done;
        } else if (h.encoding == E_PLAIN_DICTIONARY || h.encoding == E_RLE_DICTIONARY) {
            if (dict == NULL || !dict_indices(&pg, present, ndict, &idx))
                goto done;
            for (int64_t i = 0; i < present; i++)
                vals[i] = dict[idx[i]];
        } else
            goto done;
        for (int64_t i = 0, v = 0; i < n; i++) {
            int full = defs[i] == (uint32_t)l->max_def;
            if (paths != NULL) {
                if (!full)
                    continue;
                PyObject *s = PyUnicode_DecodeUTF8((const char *)vals[v].p, (Py_ssize_t)vals[v].n, NULL);
                v++;
                if (s == NULL)
                    goto done;
                int added = PySet_Add(paths, s);
                Py_DECREF(s);
                if (added < 0)
                    goto done;
                continue;
            }
            if (defs[i] == 0)
                continue; /* a row of another action */
            uint8_t lv[3] = {1, (uint8_t)reps[i], (uint8_t)defs[i]};
            if (!buf_put(key, lv, 3))
                goto done;
            if (full) {
                uint32_t len = (uint32_t)vals[v].n;
                uint8_t lb[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
                if (!buf_put(key, lb, 4) || !buf_put(key, vals[v].p, vals[v].n))
                    goto done;
                v++;
            }
        }
        filled += n;
    }
    ok = records == rows;
done:
    free(buf);
    free(dict_buf);
    free(reps);
    free(defs);
    free(idx);
    free(vals);
    free(dict);
    return ok;
}

/* checkpoint(data) -> None | (footer key, add paths, metaData/protocol key) */
static PyObject *checkpoint(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *key = NULL, *paths = NULL, *meta = NULL, *result = NULL;
    Nested *t = NULL;
    Chunk *cs = NULL;
    Buf mk = {NULL, 0, 0}, *per = NULL;
    int nper = 0;
    Footer f;
    if (!PyArg_ParseTuple(args, "y*", &view))
        return NULL;
    const uint8_t *data = view.buf;
    size_t n = (size_t)view.len, flen;
    const uint8_t *footer = find_footer(data, n, &flen, &f);
    if (footer == NULL || f.encrypted || f.schema == NULL)
        goto declined;
    t = malloc(sizeof(Nested));
    if (t == NULL)
        goto declined;
    t->nleaves = 0;
    if (!read_schema(f.schema, footer + flen, t))
        goto declined;
    const SchemaEl *root = &t->els[0];
    int pos = 1, add_paths = 0;
    for (int c = 0; c < root->children; c++)
        if (!walk(t, &pos, 1, 0, 0, -1, 0))
            goto declined;
    if (pos != t->nels)
        goto declined;
    for (int i = 0; i < t->nleaves; i++) {
        Leaf *l = &t->leaves[i];
        const SchemaEl *top = &t->els[l->top];
        if (named(top, "sidecar"))
            goto declined; /* a v2 checkpoint's files may be elsewhere */
        if (l->add_path && (l->max_rep != 0 || l->ptype != P_BYTE_ARRAY || top->rep != OPTIONAL))
            goto declined;
        l->meta = named(top, "metaData") || named(top, "protocol");
        if (l->meta && (top->rep != OPTIONAL || l->max_def > 255))
            goto declined;
        add_paths += l->add_path;
    }
    if (add_paths != 1)
        goto declined;
    key = footer_key(footer, flen, &f);
    paths = PySet_New(NULL);
    cs = malloc(sizeof(Chunk) * (size_t)t->nleaves);
    per = calloc((size_t)t->nleaves, sizeof(Buf));
    nper = per != NULL ? t->nleaves : 0;
    if (key == NULL || paths == NULL || cs == NULL || per == NULL)
        goto declined;
    Rd r = {f.rg, f.rg_end, 0, NULL};
    int et;
    uint64_t ngroups = rd_list(&r, &et);
    if (r.bad || et != T_STRUCT)
        goto declined;
    int64_t total = 0;
    for (uint64_t g = 0; g < ngroups; g++) {
        int64_t rows;
        if (!parse_row_group(&r, t->nleaves, cs, &rows) || rows > f.num_rows - total)
            goto declined;
        total += rows;
        for (int i = 0; i < t->nleaves; i++) {
            const Leaf *l = &t->leaves[i];
            if ((l->add_path || l->meta) &&
                !leaf_chunk(data, n, &cs[i], l, rows, l->add_path ? paths : NULL, l->add_path ? NULL : &per[i]))
                goto declined;
        }
    }
    if (total != f.num_rows)
        goto declined;
    /* Each leaf's entries of all row groups together, so that where the
       row groups split the rows makes no other key. */
    for (int i = 0; i < t->nleaves; i++) {
        uint8_t head[3] = {0xff, (uint8_t)(i & 0xff), (uint8_t)(i >> 8)};
        if (t->leaves[i].meta &&
            (!buf_put(&mk, head, 3) || (per[i].n && !buf_put(&mk, per[i].b, per[i].n)) || !buf_put(&mk, "", 1)))
            goto declined;
    }
    meta = PyBytes_FromStringAndSize((const char *)mk.b, (Py_ssize_t)mk.n);
    if (meta == NULL)
        goto declined;
    result = PyTuple_Pack(3, key, paths, meta);
    goto out;
declined:
    PyErr_Clear();
    result = Py_None;
    Py_INCREF(result);
out:
    Py_XDECREF(key);
    Py_XDECREF(paths);
    Py_XDECREF(meta);
    free(mk.b);
    for (int i = 0; per != NULL && i < nper; i++)
        free(per[i].b);
    free(per);
    free(cs);
    free(t);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(data, kinds) -> None | (key, None) | (key, columns): a small flat parquet file's values as lists, "
     "given the kind of each column for its footer's key; (key, None) where it declines, None where the footer "
     "cannot be read."},
    {"checkpoint", checkpoint, METH_VARARGS,
     "checkpoint(data) -> None | (key, paths, meta): a classic checkpoint's footer key, its adds' paths as a set, "
     "and its metaData and protocol rows' levels and values as bytes; None where it declines."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastpq", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fastpq(void) { return PyModule_Create(&module); }
