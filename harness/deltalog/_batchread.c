/* Small files read whole, a batch at a time, through one io_uring.

Reading a long run's log from disk is mostly the kernel's work per file:
a request to the disk for each small file, and on a virtual disk a costly
notification for each. Submitted together, the reads of a batch go to the
disk under one plug: one notification for the batch, and files that lie
next to each other on disk merged into one request.

read(paths): for each path (str or bytes, or None), the file's bytes, or
None where this module did not read it (no path, an error, a file that
changed size while read, io_uring refused): the caller reads those the
ordinary way, which raises what it should. Returns None for the whole
batch where this kernel or sandbox offers no io_uring.

A process keeps one ring (setting one up costs tens of microseconds, as
much as reading a few files); a call that finds it in use by another
thread, or inherited from the parent of a fork, sets up its own. The
interpreter's lock is released while the files are opened and read. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef __linux__
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__NR_io_uring_setup) && defined(__NR_io_uring_enter)
#define HAVE_URING 1
#endif
#endif

#ifdef HAVE_URING

#define RING_ENTRIES 256

/* Set once io_uring_setup has failed: later batches go the ordinary way
   without asking again (seccomp or the io_uring_disabled sysctl). */
static int unavailable = 0;

typedef struct {
    int fd;
    unsigned entries;
    unsigned *sq_tail, *sq_mask, *sq_array;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
    void *sq_map, *cq_map;
    size_t sq_len, cq_len, sqes_len;
} Ring;

static void ring_close(Ring *r) {
    if (r->sqes != NULL && r->sqes != MAP_FAILED)
        munmap(r->sqes, r->sqes_len);
    if (r->cq_map != NULL && r->cq_map != MAP_FAILED && r->cq_map != r->sq_map)
        munmap(r->cq_map, r->cq_len);
    if (r->sq_map != NULL && r->sq_map != MAP_FAILED)
        munmap(r->sq_map, r->sq_len);
    if (r->fd >= 0)
        close(r->fd);
}

static int ring_open(Ring *r, unsigned entries) {
    struct io_uring_params p;
    memset(r, 0, sizeof *r);
    memset(&p, 0, sizeof p);
    r->fd = (int)syscall(__NR_io_uring_setup, entries, &p);
    if (r->fd < 0)
        return -1;
    r->entries = p.sq_entries;
    r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (p.features & IORING_FEAT_SINGLE_MMAP) {
        if (r->cq_len > r->sq_len)
            r->sq_len = r->cq_len;
        r->cq_len = r->sq_len;
    }
    r->sq_map = mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    if (r->sq_map == MAP_FAILED)
        goto fail;
    if (p.features & IORING_FEAT_SINGLE_MMAP)
        r->cq_map = r->sq_map;
    else {
        r->cq_map = mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
        if (r->cq_map == MAP_FAILED)
            goto fail;
    }
    r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
    r->sqes = mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED)
        goto fail;
    char *sq = r->sq_map, *cq = r->cq_map;
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
fail:
    ring_close(r);
    r->fd = -1;
    return -1;
}

static Ring kept = {.fd = -1};
static pid_t kept_pid = 0;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

/* The process's ring, locked for this call (*own = 0), or a ring of the
   call's own (*own = 1); -1 where none can be set up. */
static int ring_take(Ring *r, int *own) {
    if (pthread_mutex_trylock(&kept_lock) == 0) {
        if (kept_pid != getpid()) {
            if (kept.fd >= 0)
                ring_close(&kept); /* the parent's, shared with it: let go in this process only */
            kept.fd = -1;
            if (ring_open(&kept, RING_ENTRIES) != 0) {
                pthread_mutex_unlock(&kept_lock);
                return -1;
            }
            kept_pid = getpid();
        }
        *r = kept;
        *own = 0;
        return 0;
    }
    *own = 1;
    return ring_open(r, RING_ENTRIES);
}

static void ring_give(Ring *r, int own) {
    if (own)
        ring_close(r);
    else
        pthread_mutex_unlock(&kept_lock);
}

typedef struct {
    const char *path; /* NULL: not read here */
    int fd;
    Py_ssize_t size;  /* from fstat; the buffer holds one byte more, to see a file that grew */
    char *buf;
    Py_ssize_t got;   /* bytes read; -1: not read here */
} Item;

/* Reads items[0..n) (opened, with buffers) through the ring, `entries` at
   a time; sets each item's got. Runs without the interpreter's lock.
   -1: the ring failed with reads in flight, which may still write to
   their buffers: the caller keeps the buffers and the ring. */
static int read_all(Ring *r, Item *items, Py_ssize_t n) {
    Py_ssize_t next = 0;
    while (next < n) {
        unsigned tail = *r->sq_tail, k = 0;
        Py_ssize_t first = next;
        for (; next < n && k < r->entries; next++) {
            Item *it = &items[next];
            if (it->fd < 0)
                continue;
            unsigned idx = (tail + k) & *r->sq_mask;
            struct io_uring_sqe *s = &r->sqes[idx];
            memset(s, 0, sizeof *s);
            s->opcode = IORING_OP_READ;
            s->fd = it->fd;
            s->addr = (uint64_t)(uintptr_t)it->buf;
            s->len = (unsigned)(it->size + 1);
            s->off = 0;
            s->user_data = (uint64_t)next;
            r->sq_array[idx] = idx;
            k++;
        }
        if (k == 0)
            continue;
        __atomic_store_n(r->sq_tail, tail + k, __ATOMIC_RELEASE);
        unsigned submitted = 0, done = 0;
        while (done < k) {
            unsigned want = k - done;
            int ret = (int)syscall(__NR_io_uring_enter, r->fd, k - submitted, want, IORING_ENTER_GETEVENTS, NULL, 0);
            if (ret < 0) {
                if (errno == EINTR || errno == EAGAIN || errno == EBUSY)
                    ret = 0;
                else
                    return -1;
            }
            submitted += (unsigned)ret;
            if (submitted > k)
                submitted = k;
            unsigned head = *r->cq_head, ctail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
            for (; head != ctail; head++) {
                struct io_uring_cqe *c = &r->cqes[head & *r->cq_mask];
                Item *it = &items[(Py_ssize_t)c->user_data];
                it->got = c->res < 0 ? -1 : c->res;
                done++;
            }
            __atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
        }
        /* A short read of a file that has more: the rest read directly. */
        for (Py_ssize_t i = first; i < next; i++) {
            Item *it = &items[i];
            if (it->fd < 0 || it->got < 0 || it->got >= it->size)
                continue;
            while (it->got <= it->size) {
                ssize_t m = pread(it->fd, it->buf + it->got, (size_t)(it->size + 1 - it->got), it->got);
                if (m < 0 && errno == EINTR)
                    continue;
                if (m <= 0) {
                    if (m < 0)
                        it->got = -1;
                    break;
                }
                it->got += m;
            }
        }
    }
    return 0;
}

/* No batch of this process uses io_uring again: this one is read the
   ordinary way. */
static PyObject *give_up(Item *items, PyObject **names, PyObject **bufs, Py_ssize_t n, PyObject *out) {
    unavailable = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(names[i]);
        Py_XDECREF(bufs[i]);
    }
    PyMem_Free(items);
    PyMem_Free(names);
    PyMem_Free(bufs);
    Py_DECREF(out);
    Py_RETURN_NONE;
}

static PyObject *batch_read(PyObject *self, PyObject *arg) {
    if (!PyList_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "read() takes a list of paths");
        return NULL;
    }
    if (unavailable)
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(arg);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(out, i, Py_None);
    }
    if (n == 0)
        return out;
    Item *items = PyMem_Calloc((size_t)n, sizeof(Item));
    PyObject **names = PyMem_Calloc((size_t)n, sizeof(PyObject *)); /* the encoded paths, alive while read */
    PyObject **bufs = PyMem_Calloc((size_t)n, sizeof(PyObject *));
    if (items == NULL || names == NULL || bufs == NULL) {
        PyMem_Free(items);
        PyMem_Free(names);
        PyMem_Free(bufs);
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        items[i].fd = -1;
        items[i].got = -1;
        PyObject *p = PyList_GET_ITEM(arg, i);
        PyObject *enc = NULL;
        if (PyUnicode_Check(p))
            enc = PyUnicode_EncodeFSDefault(p);
        else if (PyBytes_Check(p)) {
            enc = p;
            Py_INCREF(enc);
        }
        if (enc == NULL) {
            PyErr_Clear(); /* not encodable: the ordinary way says why */
            continue;
        }
        const char *s = PyBytes_AS_STRING(enc);
        if ((Py_ssize_t)strlen(s) != PyBytes_GET_SIZE(enc)) {
            Py_DECREF(enc); /* an embedded NUL */
            continue;
        }
        names[i] = enc;
        items[i].path = s;
    }

    Ring ring;
    int ok, own = 0;
    Py_BEGIN_ALLOW_THREADS
    ok = ring_take(&ring, &own) == 0;
    if (ok) {
        for (Py_ssize_t i = 0; i < n; i++) {
            Item *it = &items[i];
            if (it->path == NULL)
                continue;
            int fd = open(it->path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            struct stat st;
            if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size >= PY_SSIZE_T_MAX - 1) {
                close(fd);
                continue;
            }
            it->fd = fd;
            it->size = (Py_ssize_t)st.st_size;
        }
    }
    Py_END_ALLOW_THREADS
    if (!ok)
        return give_up(items, names, bufs, n, out);
    for (Py_ssize_t i = 0; i < n; i++) {
        Item *it = &items[i];
        if (it->fd < 0)
            continue;
        bufs[i] = PyBytes_FromStringAndSize(NULL, it->size + 1);
        if (bufs[i] == NULL) {
            PyErr_Clear(); /* read the ordinary way, which raises MemoryError itself */
            close(it->fd);
            it->fd = -1;
            continue;
        }
        it->buf = PyBytes_AS_STRING(bufs[i]);
    }
    int broken;
    Py_BEGIN_ALLOW_THREADS
    broken = read_all(&ring, items, n) != 0;
    if (!broken) {
        for (Py_ssize_t i = 0; i < n; i++)
            if (items[i].fd >= 0)
                close(items[i].fd);
        ring_give(&ring, own);
    }
    Py_END_ALLOW_THREADS
    if (broken) {
        /* Not seen on a working kernel (every error but an interruption is
           the caller's): the buffers, descriptors and ring are left as
           they are, the kernel may still write to them. */
        memset(bufs, 0, (size_t)n * sizeof(PyObject *));
        return give_up(items, names, bufs, n, out);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Item *it = &items[i];
        Py_XDECREF(names[i]);
        if (bufs[i] == NULL)
            continue;
        /* got == size + 1: the file grew while read; the ordinary way reads it to its end. */
        if (it->got >= 0 && it->got <= it->size && _PyBytes_Resize(&bufs[i], it->got) == 0) {
            PyObject *old = PyList_GET_ITEM(out, i);
            PyList_SET_ITEM(out, i, bufs[i]);
            Py_DECREF(old);
        } else {
            PyErr_Clear();
            Py_XDECREF(bufs[i]);
        }
    }
    PyMem_Free(items);
    PyMem_Free(names);
    PyMem_Free(bufs);
    return out;
}

#else /* no io_uring on this platform */

static PyObject *batch_read(PyObject *self, PyObject *arg) {
    if (!PyList_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "read() takes a list of paths");
        return NULL;
    }
    Py_RETURN_NONE;
}

#endif

static PyMethodDef methods[] = {
    {"read", batch_read, METH_O,
     "read(paths): each file's bytes, read in one batch; None for a file not read here (read it the ordinary "
     "way), or None for the whole batch where io_uring is not offered."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batchread", NULL, -1, methods};

PyMODINIT_FUNC PyInit__batchread(void) { return PyModule_Create(&module); }
