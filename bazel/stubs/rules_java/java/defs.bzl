"""Offline stand-in for rules_java's `java/defs.bzl`: the native Java rules Bazel 4 has built in."""

java_binary = native.java_binary
java_import = native.java_import
java_library = native.java_library
java_runtime = native.java_runtime
java_toolchain = native.java_toolchain
