"""Interop check of Tessera's safetensors code against an independent Python implementation
written from the format's spec (numpy only; no safetensors package needed).

1. Python writes a file (insertion order, unpadded header, an unaligned F32 after a U8) and the
   C++ tool must read every tensor back exactly.
2. The C++ tool writes a file and Python parses and validates it strictly from the spec.
3. Python writes a file with overlapping offsets and the C++ tool must reject it with a message.
Run: python_interop.py TOOL_BINARY
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4,
         "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}
NUMPY = {"BOOL": np.bool_, "U8": np.uint8, "F16": np.float16, "I32": np.int32, "F32": np.float32,
         "I64": np.int64}


def bf16_bytes(values):
    """bfloat16 is the top half of a float32 (values here are exact, so no rounding needed)."""
    bits = np.asarray(values, dtype="<f4").view("<u4") >> 16
    return bits.astype("<u2").tobytes()


def write_spec_file(path, entries, metadata, pad=False, offsets_override=None):
    """entries: list of (name, dtype, shape, raw bytes), written in this order."""
    header, data, offset = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    if offsets_override:
        for name, offs in offsets_override.items():
            header[name]["data_offsets"] = offs
    text = json.dumps(header).encode("utf-8")
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def read_spec_file(path):
    """A strict reader from the spec; returns (metadata, {name: (dtype, shape, raw bytes)}, n)."""
    blob = open(path, "rb").read()
    assert len(blob) >= 8, "file shorter than the length field"
    (n,) = struct.unpack("<Q", blob[:8])
    assert 8 + n <= len(blob), "header length past the end"
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    buf = blob[8 + n:]
    metadata = header.pop("__metadata__", {})
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
    tensors, spans = {}, []
    for name, e in header.items():
        dtype, shape, (begin, end) = e["dtype"], e["shape"], e["data_offsets"]
        assert dtype in SIZES, dtype
        assert all(isinstance(d, int) and d >= 0 for d in shape), shape
        assert 0 <= begin <= end <= len(buf), (name, begin, end)
        assert end - begin == int(np.prod(shape, dtype=np.int64)) * SIZES[dtype], name
        tensors[name] = (dtype, shape, buf[begin:end])
        spans.append((begin, end, name))
    spans.sort()
    pos = 0
    for begin, end, name in spans:
        assert begin == pos, f"gap or overlap at {name}"
        pos = end
    assert pos == len(buf), "buffer not covered"
    return metadata, tensors, n


def as_array(dtype, shape, raw):
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype("<u4") << 16
        return bits.view("<f4").reshape(shape)
    return np.frombuffer(raw, dtype=np.dtype(NUMPY[dtype]).newbyteorder("<")).reshape(shape)


def run_tool(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True)


def main():
    tool = sys.argv[1]
    tmp = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()

    # 1. Python -> C++.
    py_path = os.path.join(tmp, "from_python.safetensors")
    entries = [
        ("py.u8", "U8", [1], bytes([200])),  # makes the next tensor's offset odd
        ("py.f32", "F32", [3, 2], (np.arange(6, dtype="<f4") * 0.25).tobytes()),
        ("py.f16", "F16", [2, 2], np.array([0.5, -1.0, 1024.0, 2.0 ** -24], dtype="<f2").tobytes()),
        ("py.bf16", "BF16", [2], bf16_bytes([-0.15625, 2.0 ** 127])),
        ("py.i32", "I32", [2], np.array([-2 ** 31, 12345], dtype="<i4").tobytes()),
        ("py.i64", "I64", [3], np.array([-1, 0, 2 ** 62], dtype="<i8").tobytes()),
        ("py.bool", "BOOL", [2, 2], bytes([1, 0, 0, 1])),
        ("py.scalar", "F32", [], np.array(-7.5, dtype="<f4").tobytes()),
        ("py.empty", "F32", [2, 0], b""),
    ]
    write_spec_file(py_path, entries, {"source": "python-from-spec"})
    r = run_tool(tool, "check", py_path)
    assert r.returncode == 0 and r.stdout.strip() == "OK", f"C++ rejected the Python file: {r.stderr}"
    print("python -> c++: OK")

    # 2. C++ -> Python.
    cpp_path = os.path.join(tmp, "from_cpp.safetensors")
    r = run_tool(tool, "write", cpp_path)
    assert r.returncode == 0, r.stderr
    metadata, tensors, n = read_spec_file(cpp_path)
    assert (8 + n) % 8 == 0, "data buffer not 8-byte aligned"
    assert metadata == {"producer": "tessera"}, metadata
    expected = {
        "cpp.f32": ("F32", [2, 3], np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1.0),
        "cpp.f16": ("F16", [4], np.array([1.0, -2.5, 65504.0, 2.0 ** -14], dtype=np.float16)),
        "cpp.bf16": ("BF16", [3], np.array([1.0, -3.0, 2.0 ** 100], dtype=np.float32)),
        "cpp.i32": ("I32", [3], np.array([-5, 7, 2 ** 31 - 1], dtype=np.int32)),
        "cpp.i64": ("I64", [2, 1], np.array([[2 ** 40], [-1]], dtype=np.int64)),
        "cpp.bool": ("BOOL", [3], np.array([True, False, True])),
        "cpp.scalar": ("F32", [], np.array(3.25, dtype=np.float32)),
        "cpp.empty": ("F32", [0, 3], np.zeros((0, 3), dtype=np.float32)),
        "cpp.transposed": ("F32", [3, 2], np.array([[0, 3], [1, 4], [2, 5]], dtype=np.float32)),
    }
    assert sorted(tensors) == sorted(expected), sorted(tensors)
    for name, (dtype, shape, want) in expected.items():
        got_dtype, got_shape, raw = tensors[name]
        assert got_dtype == dtype and got_shape == shape, (name, got_dtype, got_shape)
        got = as_array(dtype, shape, raw)
        assert got.shape == want.shape and np.array_equal(got, want), (name, got, want)
    print("c++ -> python: OK")

    # 3. A file that breaks the spec is refused by C++ with a message naming file and tensor.
    bad_path = os.path.join(tmp, "overlap.safetensors")
    write_spec_file(bad_path, entries[1:3], None, pad=True,
                    offsets_override={"py.f16": [16, 24]})
    r = run_tool(tool, "check", bad_path)
    assert r.returncode == 1, r
    assert f"[safetensors] {bad_path}: tensor 'py.f16'" in r.stderr and "overlap" in r.stderr, r.stderr
    print("corrupt python file rejected: OK")


if __name__ == "__main__":
    main()
