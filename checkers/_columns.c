/* ColumnsBuilder.add of checkers/txn_columns.py, compiled: one committed
 * transaction appended to the columns of the dependency analysis (its id,
 * versions and level; the row versions it observed as key codes and writer
 * indexes; the keys it installed and inserted; its predicates).
 *
 * The serializability checker appends every commit of a long log this way,
 * and in Python it was a sixth of the replay's time. The function does
 * exactly what `_add` in txn_columns.py does, step for step, in the same
 * order (a key's code is the order keys were first seen in); a property
 * test holds the two to the same columns and the same errors. Keys and
 * writers are any Python values, hashed and compared by Python's rules. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *s_append, *s_extend, *s_get, *s_key, *s_writer, *s_prev, *s_attr, *s_lo, *s_hi;

/* The builder's columns and lookups, in the order of ColumnsBuilder._state. */
enum {
    S_INDEX, S_IDS, S_OPERATION, S_VERSION, S_READ_VERSION, S_SERIALIZABLE,
    S_REF_KEY, S_REF_WRITER, S_REF_OFF, S_INST_KEY, S_INST_OFF, S_INS_KEY, S_INS_OFF,
    S_INS_ATTR, S_PRED_LO, S_PRED_HI, S_PRED_OFF, S_KEY_CODE, S_KEYS, S_KEY_RANGE,
    S_LATER, S_TWICE, S_INITIAL, S_SERIALIZABLE_NAME, S_LEN
};

/* seq.append(v): a list directly, anything else (array.array) by its method. */
static int append(PyObject *seq, PyObject *v) {
    if (PyList_CheckExact(seq))
        return PyList_Append(seq, v);
    PyObject *r = PyObject_CallMethodOneArg(seq, s_append, v);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int append_size(PyObject *seq, Py_ssize_t n) {
    PyObject *v = PyLong_FromSsize_t(n);
    if (v == NULL)
        return -1;
    int r = append(seq, v);
    Py_DECREF(v);
    return r;
}

/* len(seq) appended to `to`. */
static int append_len(PyObject *to, PyObject *seq) {
    Py_ssize_t n = PyObject_Size(seq);
    return n < 0 ? -1 : append_size(to, n);
}

/* The code of row key k (a new reference): in a declared key range the key
 * itself, checked; else its position among the keys, a new key appended. */
static PyObject *code(PyObject *const *st, PyObject *k) {
    PyObject *range = st[S_KEY_RANGE];
    if (range != Py_None) {
        int ok = PyLong_CheckExact(k);
        if (ok) {
            PyObject *zero = PyLong_FromLong(0);
            if (zero == NULL)
                return NULL;
            ok = PyObject_RichCompareBool(zero, k, Py_LE);
            Py_DECREF(zero);
            if (ok > 0)
                ok = PyObject_RichCompareBool(k, range, Py_LT);
            if (ok < 0)
                return NULL;
        }
        if (!ok) {
            PyErr_Format(PyExc_ValueError, "row key %R is not an int in [0, %S)", k, range);
            return NULL;
        }
        Py_INCREF(k);
        return k;
    }
    PyObject *c = PyDict_GetItemWithError(st[S_KEY_CODE], k);
    if (c != NULL) {
        Py_INCREF(c);
        return c;
    }
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyObject_Size(st[S_KEYS]);
    if (n < 0 || (c = PyLong_FromSsize_t(n)) == NULL)
        return NULL;
    if (PyDict_SetItem(st[S_KEY_CODE], k, c) < 0 || append(st[S_KEYS], k) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    return c;
}

/* index.get(tid) as a new reference, or Py_None's. */
static PyObject *index_get(PyObject *index, PyObject *tid) {
    if (PyDict_CheckExact(index)) {
        PyObject *got = PyDict_GetItemWithError(index, tid);
        if (got == NULL) {
            if (PyErr_Occurred())
                return NULL;
            got = Py_None;
        }
        Py_INCREF(got);
        return got;
    }
    return PyObject_CallMethodOneArg(index, s_get, tid);
}

/* `obj.name` appended to `to`. */
static int append_attr(PyObject *to, PyObject *obj, PyObject *name) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int r = append(to, v);
    Py_DECREF(v);
    return r;
}

/* add(state, tid, version, read_version, reads, writes, deletes,
 * predicates, isolation, operation): ColumnsBuilder.add on the builder's
 * state tuple. */
static PyObject *add(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "add takes 10 arguments");
        return NULL;
    }
    PyObject *state = args[0], *tid = args[1], *version = args[2], *read_version = args[3];
    PyObject *isolation = args[8], *operation = args[9];
    if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != S_LEN) {
        PyErr_SetString(PyExc_TypeError, "state must be the builder's state tuple");
        return NULL;
    }
    PyObject *const *st = &PyTuple_GET_ITEM(state, 0);
    PyObject *index = st[S_INDEX];
    PyObject *installed = NULL, *obs_k = NULL, *obs_w = NULL, *seq = NULL, *c = NULL, *v = NULL;
    PyObject *k = NULL, *w = NULL;

    int seen = PySequence_Contains(index, tid);
    if (seen < 0 || (seen && append(st[S_TWICE], tid) < 0))
        return NULL;
    Py_ssize_t n = PyObject_Size(st[S_IDS]);
    if (n < 0 || (v = PyLong_FromSsize_t(n)) == NULL)
        return NULL;
    int bad = PyObject_SetItem(index, tid, v);
    Py_CLEAR(v);
    if (bad < 0 || append(st[S_IDS], tid) < 0 || append(st[S_OPERATION], operation) < 0 ||
        append(st[S_VERSION], version) < 0)
        return NULL;
    if (read_version == Py_None) {
        if ((v = PyLong_FromLong(-1)) == NULL)
            return NULL;
        bad = append(st[S_READ_VERSION], v);
        Py_CLEAR(v);
    } else {
        bad = append(st[S_READ_VERSION], read_version);
    }
    if (bad < 0 || (v = PyObject_RichCompare(isolation, st[S_SERIALIZABLE_NAME], Py_EQ)) == NULL)
        return NULL;
    bad = append(st[S_SERIALIZABLE], v);
    Py_CLEAR(v);
    if (bad < 0)
        return NULL;

    if ((installed = PyList_New(0)) == NULL || (obs_k = PyList_New(0)) == NULL || (obs_w = PyList_New(0)) == NULL)
        goto fail;
    /* What it read, each (key, writer) taken before anything else is coded. */
    if ((seq = PySequence_Fast(args[4], "reads must be a sequence")) == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
        if (append_attr(obs_k, r, s_key) < 0 || append_attr(obs_w, r, s_writer) < 0)
            goto fail;
    }
    Py_CLEAR(seq);
    if ((seq = PySequence_Fast(args[5], "writes must be a sequence")) == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *wr = PySequence_Fast_GET_ITEM(seq, i);
        if ((k = PyObject_GetAttr(wr, s_key)) == NULL || (c = code(st, k)) == NULL || PyList_Append(installed, c) < 0)
            goto fail;
        PyObject *prev = PyObject_GetAttr(wr, s_prev);
        if (prev == NULL)
            goto fail;
        if (prev != Py_None) {
            bad = PyList_Append(obs_k, k) < 0 || PyList_Append(obs_w, prev) < 0;
            Py_DECREF(prev);
            if (bad)
                goto fail;
        } else {
            Py_DECREF(prev);
            if (append(st[S_INS_KEY], c) < 0 || (v = PyObject_GetAttr(wr, s_attr)) == NULL)
                goto fail;
            bad = append(st[S_INS_ATTR], v == Py_None ? k : v);
            Py_CLEAR(v);
            if (bad < 0)
                goto fail;
        }
        Py_CLEAR(k);
        Py_CLEAR(c);
    }
    Py_CLEAR(seq);
    if ((seq = PySequence_Fast(args[6], "deletes must be a sequence")) == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *d = PySequence_Fast_GET_ITEM(seq, i);
        if ((k = PyObject_GetAttr(d, s_key)) == NULL || (c = code(st, k)) == NULL || PyList_Append(installed, c) < 0 ||
            PyList_Append(obs_k, k) < 0 || append_attr(obs_w, d, s_writer) < 0)
            goto fail;
        Py_CLEAR(k);
        Py_CLEAR(c);
    }
    Py_CLEAR(seq);
    /* Each version observed: its key's code, its writer's index (a writer
     * not committed yet is settled when the columns are finished). */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obs_k); i++) {
        PyObject *writer = PyList_GET_ITEM(obs_w, i);
        if ((c = code(st, PyList_GET_ITEM(obs_k, i))) == NULL || append(st[S_REF_KEY], c) < 0 ||
            (w = index_get(index, writer)) == NULL)
            goto fail;
        Py_CLEAR(c);
        if (w == Py_None) {
            Py_DECREF(w);
            if ((w = PyLong_FromLong(-1)) == NULL)
                goto fail;
            int other = PyObject_RichCompareBool(writer, st[S_INITIAL], Py_NE);
            if (other < 0)
                goto fail;
            if (other) {
                n = PyObject_Size(st[S_REF_WRITER]);
                if (n < 0 || (v = Py_BuildValue("(nO)", n, writer)) == NULL)
                    goto fail;
                bad = append(st[S_LATER], v);
                Py_CLEAR(v);
                if (bad < 0)
                    goto fail;
            }
        }
        bad = append(st[S_REF_WRITER], w);
        Py_CLEAR(w);
        if (bad < 0)
            goto fail;
    }
    if ((seq = PySequence_Fast(args[7], "predicates must be a sequence")) == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *p = PySequence_Fast_GET_ITEM(seq, i);
        if (append_attr(st[S_PRED_LO], p, s_lo) < 0 || append_attr(st[S_PRED_HI], p, s_hi) < 0)
            goto fail;
    }
    Py_CLEAR(seq);
    if (append_len(st[S_REF_OFF], st[S_REF_KEY]) < 0)
        goto fail;
    /* The keys installed, each once, in the order first installed. */
    if (PyList_GET_SIZE(installed) > 1) {
        PyObject *once = PyDict_New();
        if (once == NULL)
            goto fail;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(installed); i++)
            if (PyDict_SetDefault(once, PyList_GET_ITEM(installed, i), Py_None) == NULL) {
                Py_DECREF(once);
                goto fail;
            }
        v = PyDict_Keys(once);
        Py_DECREF(once);
        if (v == NULL)
            goto fail;
        Py_SETREF(installed, v);
        v = NULL;
    }
    if ((v = PyObject_CallMethodOneArg(st[S_INST_KEY], s_extend, installed)) == NULL)
        goto fail;
    Py_CLEAR(v);
    if (append_len(st[S_INST_OFF], st[S_INST_KEY]) < 0 || append_len(st[S_INS_OFF], st[S_INS_KEY]) < 0 ||
        append_len(st[S_PRED_OFF], st[S_PRED_LO]) < 0)
        goto fail;
    Py_DECREF(installed);
    Py_DECREF(obs_k);
    Py_DECREF(obs_w);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(installed);
    Py_XDECREF(obs_k);
    Py_XDECREF(obs_w);
    Py_XDECREF(seq);
    Py_XDECREF(k);
    Py_XDECREF(c);
    Py_XDECREF(w);
    Py_XDECREF(v);
    return NULL;
}

static PyMethodDef methods[] = {
    {"add", (PyCFunction)(void (*)(void))add, METH_FASTCALL, "ColumnsBuilder.add on the builder's state tuple."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_columns", NULL, -1, methods};

PyMODINIT_FUNC PyInit__columns(void) {
    struct {
        PyObject **at;
        const char *name;
    } names[] = {{&s_append, "append"}, {&s_extend, "extend"}, {&s_get, "get"},   {&s_key, "key"}, {&s_writer, "writer"},
                 {&s_prev, "prev"},     {&s_attr, "attr"},     {&s_lo, "lo"},     {&s_hi, "hi"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].at = PyUnicode_InternFromString(names[i].name)) == NULL)
            return NULL;
    return PyModule_Create(&module);
}
