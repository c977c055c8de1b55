"""Shared build settings for Tessera's own code."""

# Project code compiles warning-free with these.
TS_COPTS = ["-Wall", "-Wextra", "-Wno-unused-parameter"]

def ts_cc_tests(name, srcs, deps, size = "small", data = [], tags = []):
    """One cc_test per *_test.cc file, all linked with Catch2's shared main.

    Args:
      name: name of the test_suite that groups them.
      srcs: the test sources, one test binary each.
      deps: libraries each test links.
      size: Bazel test size.
      data: runtime files (fixtures).
      tags: tags for every test.
    """
    tests = []
    for src in srcs:
        test_name = src[:-3]
        native.cc_test(
            name = test_name,
            srcs = [src],
            copts = TS_COPTS,
            deps = deps + ["//tests:catch_main"],
            size = size,
            data = data,
            tags = tags,
        )
        tests.append(test_name)
    native.test_suite(name = name, tests = tests)
