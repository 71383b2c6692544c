/* Calls a compiled module's entry point with the data pointers of a list of NumPy
 * arrays, so that a jitted call costs one ctypes call. Loaded with ctypes.PyDLL: it is
 * entered holding the GIL, reads the pointers, then releases the GIL while the kernels
 * run. A list item that is None passes NULL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>
#include <stdint.h>
#include <stdlib.h>

typedef void (*ember_entry)(void **buffers, int64_t segment);

int ember_launch(void *entry, PyObject *arrays, int64_t segment)
{
    Py_ssize_t count = PyList_GET_SIZE(arrays);
    void *local[64];
    void **pointers = count <= 64 ? local : malloc(sizeof(void *) * (size_t)count);
    if (pointers == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < count; ++i) {
        PyObject *item = PyList_GET_ITEM(arrays, i);
        pointers[i] = item == Py_None ? NULL : PyArray_DATA((PyArrayObject *)item);
    }
    Py_BEGIN_ALLOW_THREADS
    ((ember_entry)entry)(pointers, segment);
    Py_END_ALLOW_THREADS
    if (pointers != local)
        free(pointers);
    return 0;
}
