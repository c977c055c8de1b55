"""static_package: a set of cc_libraries as an outside (non-Bazel) build consumes them.

From `deps` and everything they link (read from CcInfo, so a new layer or dependency is never
forgotten) it makes:
  <name>.a        every object file, in one archive;
  <name>.headers  the public headers (the `hdrs` of every cc_library of this workspace that deps
                  reach), one workspace-relative path a line;
  <name>.flags    what a consumer's compiler and linker need, `key=value` lines:
                  defines= (the -D flags the libraries propagate, e.g. SPDLOG_FMT_EXTERNAL),
                  include_flags= (-I for `include_dirs`: system headers outside /usr/include),
                  link_flags= (their linkopts, in link order: -L, -l, -Wl,-rpath),
                  whole_archive= (1 when a library is alwayslink: objects that register
                  themselves from static constructors, which a plain archive link would drop),
                  cuda= (1 when built with CUDA).
tools/install/install_files.sh turns them into an installed prefix. The headers travel as the
target's runfiles, so a test can install from them.
"""

_HeadersInfo = provider(fields = ["headers"])

def _headers_aspect_impl(target, ctx):
    own = []
    if target.label.workspace_name == "" and hasattr(ctx.rule.files, "hdrs"):
        own = ctx.rule.files.hdrs
    transitive = [
        dep[_HeadersInfo].headers
        for dep in getattr(ctx.rule.attr, "deps", [])
        if _HeadersInfo in dep
    ]
    return [_HeadersInfo(headers = depset(own, transitive = transitive))]

_headers_aspect = aspect(
    implementation = _headers_aspect_impl,
    attr_aspects = ["deps"],
)

def _static_package_impl(ctx):
    # Topological: each library before those it depends on, as a link line wants them.
    linker_inputs = depset(
        order = "topological",
        transitive = [dep[CcInfo].linking_context.linker_inputs for dep in ctx.attr.deps],
    ).to_list()

    objects = []
    archives = []
    seen = {}
    link_flags = []
    whole_archive = False
    for linker_input in linker_inputs:
        for flag in linker_input.user_link_flags:
            if flag not in link_flags:
                link_flags.append(flag)
        for lib in linker_input.libraries:
            if lib.alwayslink:
                whole_archive = True

            # Objects when Bazel kept them (cc_library does), else the library's archive.
            objs = lib.pic_objects or lib.objects
            if objs:
                for obj in objs:
                    if obj.path not in seen:
                        seen[obj.path] = True
                        objects.append(obj)
            else:
                archive = lib.pic_static_library or lib.static_library
                if archive and archive.path not in seen:
                    seen[archive.path] = True
                    archives.append(archive)

    out = ctx.actions.declare_file(ctx.label.name + ".a")

    # `ar q` appends without replacing, so two objects with one basename (kernels/cpu/reduce.o and
    # kernels/cuda/reduce.o) both stay; archives are unpacked member by member into a scratch
    # directory first for the same reason.
    object_list = ctx.actions.declare_file(ctx.label.name + ".objects")
    ctx.actions.write(object_list, "".join([o.path + "\n" for o in objects]))
    archive_list = ctx.actions.declare_file(ctx.label.name + ".archives")
    ctx.actions.write(archive_list, "".join([a.path + "\n" for a in archives]))
    ctx.actions.run_shell(
        inputs = objects + archives + [object_list, archive_list],
        outputs = [out],
        command = """
set -eu
out="$1"; objects="$2"; archives="$3"
rm -f "$out"
if [ -s "$objects" ]; then xargs ar qcD "$out" < "$objects"; fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
n=0
while read -r archive; do
  n=$((n + 1))
  mkdir "$scratch/$n"
  (cd "$scratch/$n" && ar x "$OLDPWD/$archive")
  find "$scratch/$n" -type f | sort | xargs -r ar qcD "$out"
done < "$archives"
[ -e "$out" ] || ar qcD "$out"
ar sD "$out"
""",
        arguments = [out.path, object_list.path, archive_list.path],
        mnemonic = "StaticPackageArchive",
        progress_message = "Archiving %s" % out.short_path,
    )

    headers = depset(transitive = [dep[_HeadersInfo].headers for dep in ctx.attr.deps]).to_list()
    installed = [h for h in headers]
    header_list = ctx.actions.declare_file(ctx.label.name + ".headers")
    ctx.actions.write(header_list, "".join([h.short_path + "\n" for h in installed]))

    defines = depset(transitive = [
        dep[CcInfo].compilation_context.defines
        for dep in ctx.attr.deps
    ]).to_list()
    flags = ctx.actions.declare_file(ctx.label.name + ".flags")
    ctx.actions.write(flags, "".join([
        "defines=%s\n" % " ".join(["-D" + d for d in defines]),
        "include_flags=%s\n" % " ".join(["-I" + d for d in ctx.attr.include_dirs]),
        "link_flags=%s\n" % " ".join(link_flags),
        "whole_archive=%d\n" % (1 if whole_archive else 0),
        "cuda=%d\n" % (1 if ctx.attr.cuda else 0),
    ]))

    files = [out, header_list, flags]
    return [DefaultInfo(
        files = depset(files),
        runfiles = ctx.runfiles(files = files + installed),
    )]

static_package = rule(
    implementation = _static_package_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo], aspects = [_headers_aspect]),
        "include_dirs": attr.string_list(
            doc = "system include directories the public headers need (absolute paths)",
        ),
        "cuda": attr.bool(doc = "built with CUDA (recorded in the flags file)"),
    },
)
