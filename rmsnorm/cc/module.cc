// The Python module `jaxrel_rmsnorm._rmsnorm`: hands the FFI handlers to Python as capsules.
// It registers nothing itself: the package's __init__ registers them after the import guard.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "rmsnorm/cc/rms_norm.h"

namespace {

// Registering a target is `jax.ffi.register_ffi_target(name, capsule, platform="cpu")`.
PyObject* Handlers(PyObject*, PyObject*) {
  struct Entry {
    const char* name;
    void* handler;
  };
  const Entry entries[] = {
      {"jaxrel_rms_norm_fwd", reinterpret_cast<void*>(JaxrelRmsNormForward)},
      {"jaxrel_rms_norm_bwd", reinterpret_cast<void*>(JaxrelRmsNormBackward)},
  };
  PyObject* handlers = PyDict_New();
  if (handlers == nullptr) return nullptr;
  for (const Entry& entry : entries) {
    PyObject* capsule = PyCapsule_New(entry.handler, nullptr, nullptr);
    if (capsule == nullptr || PyDict_SetItemString(handlers, entry.name, capsule) != 0) {
      Py_XDECREF(capsule);
      Py_DECREF(handlers);
      return nullptr;
    }
    Py_DECREF(capsule);
  }
  return handlers;
}

// The XLA FFI API version of the headers this module was compiled against, e.g. "0.3".
PyObject* FfiApi(PyObject*, PyObject*) {
  return PyUnicode_FromFormat("%d.%d", XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
}

PyMethodDef methods[] = {
    {"handlers", Handlers, METH_NOARGS, "FFI target name -> handler capsule (CPU)."},
    {"ffi_api", FfiApi, METH_NOARGS, "The XLA FFI API version compiled in, as 'MAJOR.MINOR'."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rmsnorm", "XLA FFI handlers for RMS normalisation.", -1, methods,
    nullptr, nullptr, nullptr, nullptr,
};

}  // namespace

PyMODINIT_FUNC PyInit__rmsnorm(void) { return PyModule_Create(&module); }
