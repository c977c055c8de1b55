"""The CLI test scripts' one rule."""

def cli_test(name, data = [], size = "medium", mpi = True, binaries = []):
    """A script NAME.sh run with the `tessera` binary's path as its last argument.

    Args:
      name: the test; its script is NAME.sh beside this file.
      data: what the script reads besides cli_test_lib.sh and `tessera`.
      size: Bazel test size.
      mpi: the script runs mpirun (tagged "mpi").
      binaries: other binaries passed before `tessera`, in order.
    """
    native.sh_test(
        name = name,
        size = size,
        srcs = [name + ".sh"],
        args = ["$(location %s)" % b for b in binaries] + ["$(location //tools/cli:tessera)"],
        data = ["cli_test_lib.sh", "//tools/cli:tessera"] + binaries + data,
        tags = ["mpi"] if mpi else [],
    )
