// The Python modules `jaxrel_rmsnorm._rmsnorm` (CPU) and, built with -DJAXREL_RMSNORM_CUDA,
// `jaxrel_rmsnorm_cuda<MAJOR>._rmsnorm_cuda` (CUDA): each hands its FFI handlers to Python as capsules.
// Neither registers anything itself: jaxrel_rmsnorm registers them after the import guards.
// Only CPython's limited API: with the GIL, Bazel defines Py_LIMITED_API (bazel/stable_abi.bzl), so one abi3 module
// serves every CPython from 3.11 on. Built for a free-threaded CPython (its pyconfig.h defines Py_GIL_DISABLED),
// the module declares that it runs without the GIL: it has no state of its own (a const table of function
// pointers; the handlers keep nothing between calls), so nothing here needs the GIL's protection.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef JAXREL_RMSNORM_CUDA
#include "rmsnorm/cc/rms_norm_cuda.h"
#include "rmsnorm/cc/rms_norm_gpu.h"
#define JAXREL_MODULE_NAME "_rmsnorm_cuda"
#define JAXREL_PLATFORM "CUDA"
#else
#include "rmsnorm/cc/rms_norm.h"
#define JAXREL_MODULE_NAME "_rmsnorm"
#define JAXREL_PLATFORM "cpu"
#endif

namespace {

struct Entry {
  const char* name;
  void* handler;
};

#ifdef JAXREL_RMSNORM_CUDA
const Entry kEntries[] = {
    {"jaxrel_rms_norm_fwd", reinterpret_cast<void*>(JaxrelRmsNormForwardCuda)},
    {"jaxrel_rms_norm_bwd", reinterpret_cast<void*>(JaxrelRmsNormBackwardCuda)},
};
#else
const Entry kEntries[] = {
    {"jaxrel_rms_norm_fwd", reinterpret_cast<void*>(JaxrelRmsNormForward)},
    {"jaxrel_rms_norm_bwd", reinterpret_cast<void*>(JaxrelRmsNormBackward)},
};
#endif

// Registering a target is `jax.ffi.register_ffi_target(name, capsule, platform=platform())`.
PyObject* Handlers(PyObject*, PyObject*) {
  PyObject* handlers = PyDict_New();
  if (handlers == nullptr) return nullptr;
  for (const Entry& entry : kEntries) {
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

PyObject* Platform(PyObject*, PyObject*) { return PyUnicode_FromString(JAXREL_PLATFORM); }

// The XLA FFI API version of the headers this module was compiled against, e.g. "0.3".
PyObject* FfiApi(PyObject*, PyObject*) {
  return PyUnicode_FromFormat("%d.%d", XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR);
}

#ifdef JAXREL_RMSNORM_CUDA
// (built, loaded): CUDA runtime versions as CUDART_VERSION numbers (13000 = 13.0); loaded is 0 if none.
PyObject* CudaRuntime(PyObject*, PyObject*) {
  return Py_BuildValue("(ii)", JaxrelCudaRuntimeBuilt(), JaxrelCudaRuntimeLoaded());
}
#endif

PyMethodDef methods[] = {
    {"handlers", Handlers, METH_NOARGS, "FFI target name -> handler capsule."},
    {"platform", Platform, METH_NOARGS, "The XLA platform the handlers are for ('cpu', 'CUDA')."},
    {"ffi_api", FfiApi, METH_NOARGS, "The XLA FFI API version compiled in, as 'MAJOR.MINOR'."},
#ifdef JAXREL_RMSNORM_CUDA
    {"cuda_runtime", CudaRuntime, METH_NOARGS, "(built, loaded) CUDA runtime versions, e.g. (13000, 13000)."},
#endif
    {nullptr, nullptr, 0, nullptr},
};

// Multi-phase initialisation (PEP 489), the only way to declare Py_mod_gil; no per-module state (m_size 0).
PyModuleDef_Slot slots[] = {
#ifdef Py_GIL_DISABLED
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, nullptr},
};

PyModuleDef module = {
    PyModuleDef_HEAD_INIT, JAXREL_MODULE_NAME, "XLA FFI handlers for RMS normalisation.", 0, methods,
    slots, nullptr, nullptr, nullptr,
};

}  // namespace

#ifdef JAXREL_RMSNORM_CUDA
PyMODINIT_FUNC PyInit__rmsnorm_cuda(void) { return PyModuleDef_Init(&module); }
#else
PyMODINIT_FUNC PyInit__rmsnorm(void) { return PyModuleDef_Init(&module); }
#endif
