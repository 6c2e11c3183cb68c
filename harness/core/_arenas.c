/* Python's small-object arenas, kept and reused instead of handed back.
 *
 * A long check builds gigabytes of small objects and frees much of it as
 * it goes (a million commits: 3.7 million page faults for a 7 GB peak).
 * CPython unmaps an arena once it is empty and maps a new one later, and
 * each 4 KB page of it is faulted in again, 2.6 us of kernel time each on
 * the machines this runs on. Here arenas are cut from 2 MB-aligned regions,
 * past the first GB backed by huge pages where the kernel offers them (one
 * fault for 512 pages, and fewer misses of the address translation cache
 * on a heap of gigabytes), and an arena Python frees goes on a list the
 * next allocation takes from. The memory stays with the process until it
 * exits, as a check's peak does anyway.
 *
 * install() sets this allocator through PyObject_SetArenaAllocator, the
 * documented hook; arenas mapped before it are freed into the same list
 * (any mapping of the arena size serves). Not thread-safe by itself: the
 * interpreter calls arena functions with the GIL held. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)
#define REGION ((size_t)64 << 20) /* mapped at a time, cut into arenas */
/* The first regions go in small pages: on a virtual machine the first touch
 * of a huge page costs more than its 512 small faults until the heap is
 * large (a 100k-commit check, 0.6 GB of arenas: 0.7 s more kernel time with
 * huge pages from the start; a 1M-commit check, 6 GB: the check 0.87 to
 * 0.92 of the time with them after the first GB). */
static Py_ssize_t small_regions = 16;

static PyObjectArenaAllocator previous;
static int installed = 0;
static size_t arena_size = 0; /* the size CPython asks for: one size only */
static char *next = NULL;     /* the unused rest of the current region */
static size_t left = 0;
static void *free_list = NULL; /* freed arenas, linked through their first word */
static Py_ssize_t kept = 0, cut = 0, reused = 0, regions = 0;

static int new_region(void) {
    /* One huge page more than the region, to start it on a 2 MB boundary. */
    size_t span = REGION + HUGE_PAGE;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    char *start = (char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (start > p)
        munmap(p, (size_t)(start - p));
    char *end = start + REGION;
    if (p + span > end)
        munmap(end, (size_t)(p + span - end));
#ifdef MADV_HUGEPAGE
    if (regions >= small_regions)
        madvise(start, REGION, MADV_HUGEPAGE); /* a hint: without huge pages the list still saves the faults */
#endif
    regions++;
    next = start;
    left = REGION;
    return 0;
}

static void *arena_alloc(void *ctx, size_t size) {
    if (arena_size == 0 && size > 0 && REGION % size == 0)
        arena_size = size;
    if (size != arena_size)
        return previous.alloc(previous.ctx, size);
    if (free_list != NULL) {
        void *a = free_list;
        free_list = *(void **)a;
        kept--;
        reused++;
        return a;
    }
    if (left < size && new_region() < 0)
        return NULL;
    void *a = next;
    next += size;
    left -= size;
    cut++;
    return a;
}

static void arena_free(void *ctx, void *ptr, size_t size) {
    if (ptr == NULL)
        return;
    if (size != arena_size) {
        previous.free(previous.ctx, ptr, size);
        return;
    }
    *(void **)ptr = free_list;
    free_list = ptr;
    kept++;
}

static PyObject *install(PyObject *self, PyObject *args) {
    Py_ssize_t small = small_regions;
    if (!PyArg_ParseTuple(args, "|n:install", &small))
        return NULL;
    if (!installed) {
        small_regions = small < 0 ? 0 : small;
        PyObjectArenaAllocator mine = {NULL, arena_alloc, arena_free};
        PyObject_GetArenaAllocator(&previous);
        PyObject_SetArenaAllocator(&mine);
        installed = 1;
    }
    Py_RETURN_NONE;
}

static PyObject *stats(PyObject *self, PyObject *unused) {
    return Py_BuildValue("{s:i,s:n,s:n,s:n,s:n,s:n}", "installed", installed, "arena_size", (Py_ssize_t)arena_size,
                         "cut", cut, "reused", reused, "kept", kept, "regions", regions);
}

static PyMethodDef methods[] = {
    {"install", install, METH_VARARGS,
     "install(small_regions=16): keep and reuse Python's arenas, cut from 64 MB regions, huge pages after the first "
     "small_regions of them. Once per process: later calls change nothing."},
    {"stats", stats, METH_NOARGS, "What the allocator has done: arenas cut, reused, kept free."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_arenas", NULL, -1, methods};

PyMODINIT_FUNC PyInit__arenas(void) { return PyModule_Create(&module); }
