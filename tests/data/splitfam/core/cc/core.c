// The module `splitfam_core._core`: add(a, b) for ints (exact, arbitrary size) or floats.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

// add(a, b): ints give an int, anything else that converts to float gives a float.
static PyObject* Add(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2) {
    PyErr_Format(PyExc_TypeError, "add() takes exactly 2 arguments (%zd given)", nargs);
    return NULL;
  }
  PyObject* a = args[0];
  PyObject* b = args[1];
  if (PyLong_Check(a) && PyLong_Check(b)) {
    int overflow_a = 0;
    int overflow_b = 0;
    long long x = PyLong_AsLongLongAndOverflow(a, &overflow_a);
    long long y = PyLong_AsLongLongAndOverflow(b, &overflow_b);
    long long sum = 0;
    if (!overflow_a && !overflow_b && !__builtin_add_overflow(x, y, &sum)) {
      return PyLong_FromLongLong(sum);
    }
    if (PyErr_Occurred()) return NULL;
    return PyNumber_Add(a, b);  // beyond 64 bits: Python's own arbitrary-precision addition
  }
  double x = PyFloat_AsDouble(a);
  if (x == -1.0 && PyErr_Occurred()) return NULL;
  double y = PyFloat_AsDouble(b);
  if (y == -1.0 && PyErr_Occurred()) return NULL;
  return PyFloat_FromDouble(x + y);
}

static PyMethodDef methods[] = {
    {"add", (PyCFunction)(void (*)(void))Add, METH_FASTCALL, "add(a, b): a + b for ints or floats."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "splitfam_core._core",
    "splitfam's compiled core.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }
