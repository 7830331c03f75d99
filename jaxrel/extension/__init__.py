"""C++ extension wheels: the Bazel driver and the XLA pin."""
