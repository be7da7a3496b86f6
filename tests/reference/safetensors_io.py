"""safetensors_io.py: a minimal safetensors reader and writer (F32 and F64
tensors), for machines without the `safetensors` package. The format: an
8-byte little-endian header length N, N bytes of JSON (name -> dtype, shape,
data_offsets), then the raw little-endian tensor bytes."""
import json
import os
import struct

import numpy as np

_DT = {"F32": np.float32, "F64": np.float64}


def load(path):
    """{name: numpy array} from a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=_DT[t["dtype"]]).reshape(t["shape"]).copy()
    return out


def save(path, tensors, metadata=None):
    """Writes {name: numpy array} as F32, atomically (temp file + rename)."""
    header, chunks, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        chunks.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)
