/* Calls a compiled module's entry point with the data pointers of a list of NumPy
 * arrays, so that a jitted call costs one call of a builtin function. The library is
 * loaded with ctypes.PyDLL once, to make that function (``ember_launch_function``); the
 * function reads the pointers holding the GIL, then releases it while the kernels run.
 * A list item that is None passes NULL, an int that address (memory a front end owns,
 * such as a tensor's: ember.torch passes its tensors so). Also the native loops of
 * control flow (below), loaded with ctypes.CDLL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef void (*ember_entry)(void **buffers, int64_t segment);

static PyTypeObject *ndarray_type;

/* launch(entry_address, arrays, segment) -> bool: False, running nothing, when an item
 * of ``arrays`` is neither None, an int nor a C-contiguous NumPy array (the caller makes
 * it one and calls again). A builtin, not a ctypes function: ctypes converting the three
 * arguments cost more than a small program runs. */
static PyObject *ember_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "launch(entry_address, arrays: list, segment)");
        return NULL;
    }
    void *entry = PyLong_AsVoidPtr(args[0]);
    int64_t segment = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *arrays = args[1];
    Py_ssize_t count = PyList_GET_SIZE(arrays);
    void *local[64];
    void **pointers = count <= 64 ? local : malloc(sizeof(void *) * (size_t)count);
    if (pointers == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < count; ++i) {
        PyObject *item = PyList_GET_ITEM(arrays, i);
        if (item == Py_None) {
            pointers[i] = NULL;
            continue;
        }
        if (PyLong_CheckExact(item)) {
            pointers[i] = PyLong_AsVoidPtr(item);
            if (pointers[i] == NULL && PyErr_Occurred()) {
                if (pointers != local)
                    free(pointers);
                return NULL;
            }
            continue;
        }
        if (!PyObject_TypeCheck(item, ndarray_type)
                || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)item)) {
            if (pointers != local)
                free(pointers);
            Py_RETURN_FALSE;
        }
        pointers[i] = PyArray_DATA((PyArrayObject *)item);
    }
    Py_BEGIN_ALLOW_THREADS
    ((ember_entry)entry)(pointers, segment);
    Py_END_ALLOW_THREADS
    if (pointers != local)
        free(pointers);
    Py_RETURN_TRUE;
}

static PyMethodDef ember_launch_method = {
    "ember_launch", (PyCFunction)(void (*)(void))ember_launch, METH_FASTCALL,
    "launch(entry_address, arrays, segment): run a compiled module's segment"};

/* The builtin ``launch``; ``ndarray`` is numpy.ndarray (kept for the process's life). */
PyObject *ember_launch_function(PyObject *ndarray)
{
    Py_INCREF(ndarray);
    ndarray_type = (PyTypeObject *)ndarray;
    return PyCFunction_New(&ember_launch_method, NULL);
}

/* Loops of compiled programs (control.py): lax.scan and while_loop run their compiled
 * body (and condition) from here, not from a Python loop. ``b`` is a program's pointer
 * array (arena, inputs, constants, outputs, then any literal results); the loop points
 * its carry (and scanned) input slots at the current values before each call.
 * ``results`` gives, per result of the body, the slot of ``b`` holding it after a call.
 * With ``swap`` (every carry is an output of its own), a carry's output buffer becomes
 * the carry and the carry's buffer takes the output's slot: nothing is copied. Otherwise
 * (a body may return an input as it is, or one value twice) the new carries are copied
 * into ``staging``, which then becomes ``carries``. Either way the buffers of
 * ``carries`` and those of the other set trade places once per iteration.
 * Called through ctypes.CDLL: the GIL is released meanwhile. */

static void ember_next_carries(void **b, const int64_t *results, int64_t n_carry,
                               const int64_t *carry_bytes, void **carries, void **staging,
                               int64_t swap)
{
    if (swap) {
        for (int64_t k = 0; k < n_carry; ++k) {
            void *output = b[results[k]];
            b[results[k]] = carries[k];
            carries[k] = output;
        }
        return;
    }
    for (int64_t k = 0; k < n_carry; ++k)
        memcpy(staging[k], b[results[k]], (size_t)carry_bytes[k]);
    for (int64_t k = 0; k < n_carry; ++k) {
        void *other = carries[k];
        carries[k] = staging[k];
        staging[k] = other;
    }
}

/* Returns the number of iterations run (its parity says which buffers hold the carries). */
int64_t ember_scan(void *entry, void **b, int64_t length, int64_t reverse,
                   int64_t n_carry, int64_t carry_at, const int64_t *carry_bytes,
                   void **carries, void **staging, int64_t swap,
                   int64_t n_xs, int64_t xs_at, void **xs, const int64_t *x_bytes,
                   int64_t n_ys, void **ys, const int64_t *y_bytes, const int64_t *results)
{
    for (int64_t step = 0; step < length; ++step) {
        int64_t i = reverse ? length - 1 - step : step;
        for (int64_t k = 0; k < n_carry; ++k)
            b[carry_at + k] = carries[k];
        for (int64_t k = 0; k < n_xs; ++k)
            b[xs_at + k] = (char *)xs[k] + i * x_bytes[k];
        ((ember_entry)entry)(b, 0);
        for (int64_t k = 0; k < n_ys; ++k)
            memcpy((char *)ys[k] + i * y_bytes[k], b[results[n_carry + k]], (size_t)y_bytes[k]);
        ember_next_carries(b, results, n_carry, carry_bytes, carries, staging, swap);
    }
    return length;
}

int64_t ember_while(void *cond_entry, void **cond_b, int64_t cond_carry_at, int64_t pred_slot,
                    void *body_entry, void **body_b, int64_t body_carry_at,
                    int64_t n_carry, const int64_t *carry_bytes, void **carries, void **staging,
                    int64_t swap, const int64_t *results)
{
    int64_t count = 0;
    for (;; ++count) {
        for (int64_t k = 0; k < n_carry; ++k)
            cond_b[cond_carry_at + k] = carries[k];
        ((ember_entry)cond_entry)(cond_b, 0);
        if (!*(const unsigned char *)cond_b[pred_slot])
            return count;
        for (int64_t k = 0; k < n_carry; ++k)
            body_b[body_carry_at + k] = carries[k];
        ((ember_entry)body_entry)(body_b, 0);
        ember_next_carries(body_b, results, n_carry, carry_bytes, carries, staging, swap);
    }
}
