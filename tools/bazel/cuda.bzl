"""cuda_library: .cu files compiled by the toolkit's nvcc (no CUDA rules exist offline).

Each .cu becomes a position-independent object compiled against the headers, include paths and
defines of `deps` (read from their CcInfo, so a header change rebuilds the object), and the objects
join an ordinary cc_library with the host sources. `--config=cpu` makes every target built this
way incompatible, so a CPU-only build skips them.
"""

load("//tools/bazel:defs.bzl", "TS_COPTS")

NVCC = "/usr/local/cuda/bin/nvcc"

# sm_80 (A100) and sm_90 (H100/H200) machine code; PTX for sm_90 lets newer GPUs JIT it.
CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
]

CUDA_FLAGS = [
    "-std=c++20",
    "-O3",
    "-ccbin=/usr/bin/g++",
    "-Xcompiler=-fPIC,-Wall,-Wno-unused-parameter",
    "--expt-relaxed-constexpr",
    "--extended-lambda",
    "-lineinfo",
    "-DTESSERA_CUDA=1",
]

def _cuda_objects_impl(ctx):
    contexts = [d[CcInfo].compilation_context for d in ctx.attr.deps if CcInfo in d]
    headers = depset(ctx.files.hdrs, transitive = [c.headers for c in contexts])
    includes = depset(transitive = [c.includes for c in contexts] + [c.quote_includes for c in contexts])
    system_includes = depset(transitive = [c.system_includes for c in contexts])
    defines = depset(transitive = [c.defines for c in contexts])
    objects = []
    for src in ctx.files.srcs:
        stem = src.basename[:-len(".cu")]
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.pic.o" % (ctx.label.name, stem))
        args = ctx.actions.args()
        args.add_all(CUDA_FLAGS + CUDA_ARCH_FLAGS + ctx.attr.copts)
        args.add("-I.")
        args.add("-I" + ctx.bin_dir.path)
        args.add_all(includes, format_each = "-I%s")
        args.add_all(system_includes, format_each = "-isystem=%s")
        args.add_all(defines, format_each = "-D%s")
        args.add("-c", src)
        args.add("-o", obj)
        ctx.actions.run(
            executable = NVCC,
            arguments = [args],
            inputs = depset([src], transitive = [headers]),
            outputs = [obj],
            mnemonic = "NvccCompile",
            progress_message = "nvcc %s" % src.short_path,
            # A fixed environment keeps the action key (and so the disk cache) the same for every
            # checkout and user; nvcc finds the host compiler through -ccbin.
            env = {"PATH": "/usr/local/cuda/bin:/usr/bin:/bin"},
        )
        objects.append(obj)
    return [DefaultInfo(files = depset(objects))]

_cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
    },
)

def cuda_library(name, srcs = [], cu_srcs = [], hdrs = [], deps = [], linkopts = [], alwayslink = False,
                 visibility = None):
    """A cc_library whose .cu sources (cu_srcs) are compiled by nvcc.

    Args:
      name: the library.
      srcs: host C++ sources (compiled by the C++ toolchain, with the CUDA headers available).
      cu_srcs: CUDA sources.
      hdrs: public headers (.h/.cuh), usable from both.
      deps: cc_library dependencies (their headers reach nvcc too).
      linkopts: extra link options (e.g. -lcublasLt).
      alwayslink: keep every object (for static registration).
      visibility: as usual.
    """
    all_deps = deps + ["@cuda"]
    objects = []
    if cu_srcs:
        _cuda_objects(
            name = name + "_cu_objects",
            srcs = cu_srcs,
            hdrs = hdrs,
            deps = all_deps,
            target_compatible_with = select({
                "//tools/bazel:cuda_off": ["@platforms//:incompatible"],
                "//conditions:default": [],
            }),
        )
        objects = [":" + name + "_cu_objects"]
    native.cc_library(
        name = name,
        srcs = srcs + objects,
        hdrs = hdrs,
        copts = TS_COPTS,
        defines = ["TESSERA_CUDA=1"],
        deps = all_deps,
        linkopts = linkopts,
        alwayslink = alwayslink,
        visibility = visibility,
        target_compatible_with = select({
            "//tools/bazel:cuda_off": ["@platforms//:incompatible"],
            "//conditions:default": [],
        }),
    )
