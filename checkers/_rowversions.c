/* The row-version bookkeeping of the serializability checker's replay
 * (checkers/row_versions.py), compiled: which row versions each commit's
 * removed files held, which its added files hold, which of those are new,
 * and how many copies of each version stay alive.
 *
 * A replay of a million commits does this for millions of row versions,
 * and in Python it was a third of the checker's time. The functions here
 * do exactly what the Python ones in row_versions.py do, step for step
 * (a property test compares the two); row keys and writers are any Python
 * values, hashed and compared by Python's own rules. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *s_path;

/* take(alive, removes): the row versions of the files `removes` (remove
 * actions) name, each file's list taken out of `alive`, concatenated. */
static PyObject *take(PyObject *self, PyObject *args) {
    PyObject *alive, *removes;
    if (!PyArg_ParseTuple(args, "O!O:take", &PyDict_Type, &alive, &removes))
        return NULL;
    PyObject *seq = PySequence_Fast(removes, "removes must be a sequence");
    if (seq == NULL)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *path = PyObject_GetItem(PySequence_Fast_GET_ITEM(seq, i), s_path);
        if (path == NULL)
            goto fail;
        PyObject *got = PyDict_GetItemWithError(alive, path);
        if (got == NULL) {
            Py_DECREF(path);
            if (PyErr_Occurred())
                goto fail;
            continue;
        }
        Py_INCREF(got);
        int bad = PyDict_DelItem(alive, path);
        Py_DECREF(path);
        if (bad < 0) {
            Py_DECREF(got);
            goto fail;
        }
        PyObject *joined = PySequence_InPlaceConcat(out, got);
        Py_DECREF(got);
        if (joined == NULL)
            goto fail;
        Py_DECREF(joined); /* `out` itself, extended */
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(seq);
    return NULL;
}

/* A column a file may lack: *out stays NULL for None or an empty column
 * (every row's None), else is the column as a fast sequence, and *n falls
 * to its length where it is shorter. */
static int optional_column(PyObject *col, PyObject **out, Py_ssize_t *n) {
    if (col == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(col, "a column must be a sequence");
    if (seq == NULL)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len == 0) {
        Py_DECREF(seq);
        return 0;
    }
    if (len < *n)
        *n = len;
    *out = seq;
    return 0;
}

/* keep(alive, path, keys, writers, prevs, added): a file's row versions,
 * (key, writer, prev) for each row, as long as the shortest column (None
 * or an empty column for a missing one: every row's None); kept in
 * alive[path] and appended to `added`. */
static PyObject *keep(PyObject *self, PyObject *args) {
    PyObject *alive, *path, *keys, *writers, *prevs, *added;
    if (!PyArg_ParseTuple(args, "O!OOOOO!:keep", &PyDict_Type, &alive, &path, &keys, &writers, &prevs,
                          &PyList_Type, &added))
        return NULL;
    PyObject *k = NULL, *w = NULL, *p = NULL, *versions = NULL;
    k = PySequence_Fast(keys, "keys must be a sequence");
    if (k == NULL)
        goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(k);
    if (optional_column(writers, &w, &n) < 0 || optional_column(prevs, &p, &n) < 0)
        goto fail;
    versions = PyList_New(n);
    if (versions == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_Pack(3, PySequence_Fast_GET_ITEM(k, i), w ? PySequence_Fast_GET_ITEM(w, i) : Py_None,
                                   p ? PySequence_Fast_GET_ITEM(p, i) : Py_None);
        if (t == NULL)
            goto fail;
        PyList_SET_ITEM(versions, i, t);
    }
    if (PyDict_SetItem(alive, path, versions) < 0)
        goto fail;
    if (PyList_SetSlice(added, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, versions) < 0)
        goto fail;
    Py_DECREF(versions);
    Py_DECREF(k);
    Py_XDECREF(w);
    Py_XDECREF(p);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(versions);
    Py_XDECREF(k);
    Py_XDECREF(w);
    Py_XDECREF(p);
    return NULL;
}

/* (key, writer) of a row version (key, writer, prev): a new reference. */
static PyObject *key_writer(PyObject *t) {
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
        PyErr_SetString(PyExc_ValueError, "a row version is a (key, writer, prev) tuple");
        return NULL;
    }
    return PyTuple_Pack(2, PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1));
}

/* ids(versions): [(key, writer) for key, writer, _ in versions]. */
static PyObject *ids_of(PyObject *versions) {
    PyObject *seq = PySequence_Fast(versions, "row versions must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kw = key_writer(PySequence_Fast_GET_ITEM(seq, i));
        if (kw == NULL) {
            Py_DECREF(out);
            Py_DECREF(seq);
            return NULL;
        }
        PyList_SET_ITEM(out, i, kw);
    }
    Py_DECREF(seq);
    return out;
}

/* fresh(live, added) -> (added_ids, new): each added version's (key,
 * writer), and the added versions of which no copy is alive (no count in
 * live, or a count of zero). */
static PyObject *fresh(PyObject *self, PyObject *args) {
    PyObject *live, *added;
    if (!PyArg_ParseTuple(args, "O!O:fresh", &PyDict_Type, &live, &added))
        return NULL;
    PyObject *ids = ids_of(added);
    if (ids == NULL)
        return NULL;
    PyObject *seq = NULL, *new = PyList_New(0);
    if (new == NULL)
        goto fail;
    seq = PySequence_Fast(added, "added must be a sequence");
    if (seq == NULL)
        goto fail;
    Py_ssize_t n = PyList_GET_SIZE(ids);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *count = PyDict_GetItemWithError(live, PyList_GET_ITEM(ids, i));
        int alive = 0;
        if (count == NULL) {
            if (PyErr_Occurred())
                goto fail;
        } else if ((alive = PyObject_IsTrue(count)) < 0) {
            goto fail;
        }
        if (!alive && PyList_Append(new, PySequence_Fast_GET_ITEM(seq, i)) < 0)
            goto fail;
    }
    Py_DECREF(seq);
    PyObject *out = PyTuple_Pack(2, ids, new);
    Py_DECREF(ids);
    Py_DECREF(new);
    return out;
fail:
    Py_XDECREF(seq);
    Py_XDECREF(new);
    Py_DECREF(ids);
    return NULL;
}

/* live[kw] += delta, an absent kw counting 0; a count that reaches 0 is
 * taken out of live and kw put in dropped. */
static int bump(PyObject *live, PyObject *dropped, PyObject *kw, long delta) {
    PyObject *count = PyDict_GetItemWithError(live, kw);
    PyObject *next;
    if (count == NULL) {
        if (PyErr_Occurred())
            return -1;
        next = PyLong_FromLong(delta);
    } else {
        PyObject *d = PyLong_FromLong(delta);
        if (d == NULL)
            return -1;
        next = PyNumber_Add(count, d);
        Py_DECREF(d);
    }
    if (next == NULL)
        return -1;
    int zero = PyObject_Not(next);
    int r = zero < 0 ? -1 : zero ? PyDict_DelItem(live, kw) : PyDict_SetItem(live, kw, next);
    Py_DECREF(next);
    if (r == 0 && zero)
        r = PySet_Add(dropped, kw);
    return r;
}

/* settle(live, dropped, removed, added_ids) -> removed_now: one copy fewer
 * alive of each removed version, one more of each added one; the removed
 * versions (key, writer) the commit did not add back, as a set. */
static PyObject *settle(PyObject *self, PyObject *args) {
    PyObject *live, *dropped, *removed, *added_ids;
    if (!PyArg_ParseTuple(args, "O!O!OO:settle", &PyDict_Type, &live, &PySet_Type, &dropped, &removed, &added_ids))
        return NULL;
    PyObject *rids = ids_of(removed);
    if (rids == NULL)
        return NULL;
    PyObject *aseq = NULL, *gone = PySet_New(rids);
    if (gone == NULL)
        goto fail;
    aseq = PySequence_Fast(added_ids, "added_ids must be a sequence");
    if (aseq == NULL)
        goto fail;
    Py_ssize_t na = PySequence_Fast_GET_SIZE(aseq);
    for (Py_ssize_t i = 0; i < na; i++)
        if (PySet_Discard(gone, PySequence_Fast_GET_ITEM(aseq, i)) < 0)
            goto fail;
    Py_ssize_t nr = PyList_GET_SIZE(rids);
    for (Py_ssize_t i = 0; i < nr; i++)
        if (bump(live, dropped, PyList_GET_ITEM(rids, i), -1) < 0)
            goto fail;
    for (Py_ssize_t i = 0; i < na; i++)
        if (bump(live, dropped, PySequence_Fast_GET_ITEM(aseq, i), 1) < 0)
            goto fail;
    Py_DECREF(aseq);
    Py_DECREF(rids);
    return gone;
fail:
    Py_XDECREF(aseq);
    Py_XDECREF(gone);
    Py_DECREF(rids);
    return NULL;
}

static PyMethodDef methods[] = {
    {"take", take, METH_VARARGS, "The row versions of the removed files, taken out of alive."},
    {"keep", keep, METH_VARARGS, "A file's row versions, kept alive and appended to added."},
    {"fresh", fresh, METH_VARARGS, "(added_ids, new): the added versions no copy of which is alive."},
    {"settle", settle, METH_VARARGS, "Count the removed and added copies; the versions removed for good."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rowversions", NULL, -1, methods};

PyMODINIT_FUNC PyInit__rowversions(void) {
    s_path = PyUnicode_InternFromString("path");
    if (s_path == NULL)
        return NULL;
    return PyModule_Create(&module);
}
