"""Writes torch.save files that torch.load(weights_only=True) reads, and prints what torch reads.

python weights_only_fixture.py DIR
    DIR/complex.pt    complex64 and complex128 tensors (a transposed complex view too)
    DIR/dotted.pt     {"a.b": t, "a": {"b": u}}: a flat dotted key beside the nested path it spells
    DIR/sparse.pt     sparse COO and CSR tensors and a meta tensor beside a dense one
    DIR/legacy_<p>.pt the legacy non-zip format at pickle protocols 0..5 (torch refuses 0, 1, 4, 5
                      weights-only; ckpt refuses all, by name)
Prints JSON: file -> tensor name (as ckpt names it) -> dtype, shape and SHA-256 of the contiguous bytes.
"""
import hashlib
import json
import sys

import torch

out_dir = sys.argv[1]


def digest(t):
    return {"shape": list(t.shape), "sha256": hashlib.sha256(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()}


complex_state = {
    "c64": torch.complex(torch.arange(6, dtype=torch.float32), -torch.arange(6, dtype=torch.float32)).reshape(2, 3),
    "c128": torch.tensor([1 + 2j, -3.5 + 0.25j], dtype=torch.complex128),
}
complex_state["c64_t"] = complex_state["c64"].t()
torch.save(complex_state, f"{out_dir}/complex.pt")
dotted_state = {"a.b": torch.ones(2), "a": {"b": torch.arange(3, dtype=torch.int64)}}
torch.save(dotted_state, f"{out_dir}/dotted.pt")
coo = torch.sparse_coo_tensor(torch.tensor([[0, 1, 1], [2, 0, 2]]), torch.tensor([3.0, 4.0, 5.0]), (2, 3))
csr = torch.tensor([[0.0, 1.5], [2.5, 0.0]]).to_sparse_csr()
torch.save({"coo": coo, "csr": csr, "meta": torch.empty(2, 3, device="meta"), "dense": torch.ones(2)},
           f"{out_dir}/sparse.pt")
for protocol in range(6):
    torch.save({"w": torch.ones(2)}, f"{out_dir}/legacy_{protocol}.pt",
               _use_new_zipfile_serialization=False, pickle_protocol=protocol)

loaded_complex = torch.load(f"{out_dir}/complex.pt", weights_only=True)
loaded_dotted = torch.load(f"{out_dir}/dotted.pt", weights_only=True)
loaded_sparse = torch.load(f"{out_dir}/sparse.pt", weights_only=True)
print(json.dumps({
    "complex.pt": {name: digest(t) for name, t in loaded_complex.items()},
    "dotted.pt": {'["a.b"]': digest(loaded_dotted["a.b"]), "a.b": digest(loaded_dotted["a"]["b"])},
    "sparse.pt": {
        "coo.indices": digest(loaded_sparse["coo"]._indices()),
        "coo.values": digest(loaded_sparse["coo"]._values()),
        "csr.crow_indices": digest(loaded_sparse["csr"].crow_indices()),
        "csr.col_indices": digest(loaded_sparse["csr"].col_indices()),
        "csr.values": digest(loaded_sparse["csr"].values()),
        "dense": digest(loaded_sparse["dense"]),
    },
}))
