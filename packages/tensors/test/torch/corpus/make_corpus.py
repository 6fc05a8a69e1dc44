"""Writes the hostile/malformed torch-file corpus and expected.json (file -> TensorsError code).

Run: python3 make_corpus.py (any Python 3; no torch needed). Deterministic: the same bytes every run.
Each file breaks one rule of the zip container, the torch layout, the pickle machine or the tensor records.
"""
import json
import os
import struct
import zlib

OUT = os.path.dirname(os.path.abspath(__file__))
expected = {}


# ---- pickle pieces (protocol 2, as torch.save writes) -------------------------------------------
def s(text):
    b = text.encode() if isinstance(text, str) else text
    return b"X" + struct.pack("<I", len(b)) + b


def g(module, name):
    return b"c" + f"{module}\n{name}\n".encode()


def i(n):
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if 0 <= n < 65536:
        return b"M" + struct.pack("<H", n)
    if -(2**31) <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def tup(values):
    return b"(" + b"".join(i(v) for v in values) + b"t"


def pid(key="0", cls="FloatStorage", numel=4, kind="storage"):
    return b"(" + s(kind) + g("torch", cls) + s(key) + s("cpu") + i(numel) + b"tQ"


def tensor(key="0", cls="FloatStorage", numel=4, offset=0, size=(4,), stride=(1,), persistent=None):
    return (
        g("torch._utils", "_rebuild_tensor_v2")
        + b"("
        + (persistent if persistent is not None else pid(key, cls, numel))
        + i(offset)
        + tup(size)
        + tup(stride)
        + b"\x89"
        + g("collections", "OrderedDict")
        + b")R"
        + b"tR"
    )


def state_dict(items):
    body = b"".join(s(k) + v for k, v in items)
    return b"\x80\x02" + g("collections", "OrderedDict") + b")R(" + body + b"u."


GOOD_PICKLE = state_dict([("w", tensor())])
GOOD_DATA = struct.pack("<4f", 1, 2, 3, 4)


# ---- a zip writer with every field under control -----------------------------------------------
def make_zip(members, method=0, mutate_cd=None, mutate_local=None, zip64=False):
    """members: list of (name, data[, declared_size]). Returns the archive bytes."""
    out = b""
    cd = []
    for m in members:
        name, data = m[0], m[1]
        nb = name.encode() if isinstance(name, str) else name
        payload = zlib.compress(data)[2:-4] if method == 8 else data
        usize = m[2] if len(m) > 2 else len(data)
        fields = dict(sig=0x04034B50, need=20, flags=0x0800, method=method, time=0, date=0x21,
                      crc=zlib.crc32(data), csize=len(payload), usize=usize, name=nb, extra=b"")
        if mutate_local:
            mutate_local(name, fields)
        header = struct.pack("<IHHHHHIIIHH", fields["sig"], fields["need"], fields["flags"], fields["method"],
                             fields["time"], fields["date"], fields["crc"], fields["csize"], fields["usize"],
                             len(fields["name"]), fields.get("extra_len", len(fields["extra"]))) + fields["name"] + fields["extra"]
        entry = dict(sig=0x02014B50, made=20, need=20, flags=0x0800, method=method, time=0, date=0x21,
                     crc=zlib.crc32(data), csize=len(payload), usize=usize, name=nb, extra=b"", comment=b"",
                     disk=0, iattr=0, eattr=0, lho=len(out))
        cd.append(entry)
        out += header + payload
    cd_off = len(out)
    cd_bytes = b""
    for entry in cd:
        if mutate_cd:
            mutate_cd(entry)
        cd_bytes += struct.pack("<IHHHHHHIIIHHHHHII", entry["sig"], entry["made"], entry["need"], entry["flags"],
                                entry["method"], entry["time"], entry["date"], entry["crc"], entry["csize"],
                                entry["usize"], len(entry["name"]), len(entry["extra"]), len(entry["comment"]),
                                entry["disk"], entry["iattr"], entry["eattr"], entry["lho"]) \
            + entry["name"] + entry["extra"] + entry["comment"]
    end = b""
    if zip64:
        z64_at = cd_off + len(cd_bytes)
        end += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(cd), len(cd), len(cd_bytes), cd_off)
        end += struct.pack("<IIQI", 0x07064B50, 0, z64_at, 1)
    end += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(cd), len(cd), len(cd_bytes), cd_off, 0)
    return out + cd_bytes + end


def torch_members(pickle=GOOD_PICKLE, data=None, prefix="archive", version=b"3\n", extra=()):
    data = {"0": GOOD_DATA} if data is None else data
    members = [(f"{prefix}/data.pkl", pickle)]
    members += [(f"{prefix}/data/{k}", v) for k, v in data.items()]
    if version is not None:
        members.append((f"{prefix}/version", version))
    return members + list(extra)


def emit(name, content, code):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(content)
    expected[name] = code


def torch_file(name, code, **kw):
    emit(name, make_zip(torch_members(**kw)), code)


def with_pickle(name, code, pickle, **kw):
    torch_file(name, code, pickle=pickle, **kw)


GOOD = make_zip(torch_members())

# ---- zip container ------------------------------------------------------------------------------
emit("zip_empty.pt", b"", "ZIP_TRUNCATED")
emit("zip_short.pt", b"PK\x03\x04tiny", "ZIP_TRUNCATED")
emit("zip_not_a_zip.pt", b"hello, this is not an archive " * 4, "ZIP_EOCD_MISSING")
emit("zip_truncated_half.pt", GOOD[: len(GOOD) // 2], "ZIP_EOCD_MISSING")
emit("zip_truncated_tail.pt", GOOD[:-5], "ZIP_EOCD_MISSING")
emit("zip_eocd_cd_outside.pt", GOOD[:-6] + struct.pack("<I", 10_000_000) + b"\0\0", "ZIP_CENTRAL_DIRECTORY_OUTSIDE")
emit("zip_eocd_entries_lie.pt", GOOD[:-12] + struct.pack("<H", 0xFFFE) + GOOD[-10:], "ZIP_CENTRAL_DIRECTORY_CORRUPT")


def cd_patch(name, code, fn, members=None, **kw):
    emit(name, make_zip(members or torch_members(), mutate_cd=fn, **kw), code)


cd_patch("zip_cd_bad_signature.pt", "ZIP_CENTRAL_DIRECTORY_CORRUPT", lambda e: e.update(sig=0x12345678))
cd_patch("zip_member_offset_outside.pt", "ZIP_MEMBER_OUTSIDE_FILE",
         lambda e: e["name"].endswith(b"data/0") and e.update(lho=9_000_000))
cd_patch("zip_member_size_outside.pt", "ZIP_MEMBER_OUTSIDE_FILE",
         lambda e: e["name"].endswith(b"data/0") and e.update(csize=50_000_000, usize=50_000_000))
cd_patch("zip_overlapping_members.pt", "ZIP_MEMBERS_OVERLAP",
         lambda e: e["name"].endswith(b"version") and e.update(lho=0))
cd_patch("zip_encrypted.pt", "ZIP_ENCRYPTED", lambda e: e.update(flags=0x0801))
cd_patch("zip_method_bzip2.pt", "ZIP_METHOD_UNSUPPORTED", lambda e: e.update(method=12))
cd_patch("zip_multi_disk_member.pt", "ZIP_MULTI_DISK", lambda e: e.update(disk=3))
cd_patch("zip_stored_size_mismatch.pt", "ZIP_SIZE_MISMATCH",
         lambda e: e["name"].endswith(b"data.pkl") and e.update(usize=e["usize"] - 1))
cd_patch("zip_crc_mismatch.pt", "ZIP_CRC_MISMATCH",
         lambda e: e["name"].endswith(b"data.pkl") and e.update(crc=e["crc"] ^ 1))
emit("zip_local_name_differs.pt",
     make_zip(torch_members(), mutate_local=lambda n, f: n.endswith("data.pkl") and f.update(name=b"archive/data.pkm")),
     "ZIP_LOCAL_HEADER_CORRUPT")
emit("zip_local_bad_signature.pt", make_zip(torch_members(), mutate_local=lambda n, f: n.endswith("data.pkl") and f.update(sig=0)),
     "ZIP_LOCAL_HEADER_CORRUPT")
emit("zip_local_extra_overruns.pt",
     make_zip(torch_members(), mutate_local=lambda n, f: n.endswith("data/0") and f.update(extra_len=200)),
     "ZIP_MEMBERS_OVERLAP")
for label, bad in [("dotdot", "archive/../evil"), ("absolute", "/archive/evil"), ("backslash", "archive\\evil"),
                   ("nul", "archive/ev\0il"), ("url", "archive/http://evil"), ("too_long", "archive/" + "x" * 5000)]:
    emit(f"zip_name_{label}.pt", make_zip(torch_members(extra=[(bad, b"x")])), "ZIP_BAD_MEMBER_NAME")
emit("zip_name_not_utf8.pt", make_zip(torch_members(extra=[(b"archive/\xff\xfe", b"x")])), "ZIP_BAD_MEMBER_NAME")
emit("zip_duplicate_member.pt", make_zip(torch_members(extra=[("archive/version", b"3\n")])), "ZIP_DUPLICATE_MEMBER")

# deflate: a bomb that declares its true size, one that lies about it, and a broken stream
bomb = b"\0" * (20 * 1024 * 1024)
emit("zip_bomb_declared.pt", make_zip([("archive/data.pkl", bomb, 200_000_000), ("archive/version", b"3\n")], method=8),
     "ZIP_BOMB")
emit("zip_bomb_undeclared.pt", make_zip([("archive/data.pkl", bomb, 100), ("archive/version", b"3\n")], method=8),
     "ZIP_BOMB")
emit("zip_deflate_corrupt.pt",
     make_zip(torch_members(), method=8)[:46] + b"\xff" * 8 + make_zip(torch_members(), method=8)[54:],
     "ZIP_INFLATE_FAILED")

# zip64 end records
def zip64_end(entries, cd_size, cd_off, locator_at=None):
    body = make_zip(torch_members())
    cut = body.rindex(b"PK\x05\x06")
    head = body[:cut]
    z64_at = len(head)
    z64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, entries, entries, cd_size, cd_off)
    loc = struct.pack("<IIQI", 0x07064B50, 0, z64_at if locator_at is None else locator_at, 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return head + z64 + loc + end, body


_, plain = zip64_end(0, 0, 0)
_eocd = plain[plain.rindex(b"PK\x05\x06"):]
_n, _size, _off = struct.unpack_from("<HII", _eocd, 10)
emit("zip64_locator_points_nowhere.pt", zip64_end(_n, _size, _off, locator_at=3)[0], "ZIP_EOCD_MISSING")
emit("zip64_offset_past_2_53.pt", zip64_end(_n, _size, 2**60)[0], "ZIP_NUMBER_TOO_LARGE")
emit("zip64_too_many_entries.pt", zip64_end(2**40, _size, _off)[0], "ZIP_TOO_MANY_ENTRIES")
emit("zip64_directory_too_large.pt", zip64_end(_n, 2**31, _off)[0], "ZIP_CENTRAL_DIRECTORY_TOO_LARGE")
emit("zip_eocd_multi_disk.pt", GOOD[:-18] + struct.pack("<H", 2) + GOOD[-16:], "ZIP_MULTI_DISK")

# zip64 members claiming 10 GiB (issue 16) through their extended-information field, the file a
# few hundred bytes: nothing may allocate, inflate or hash what a member only claims to hold.
TEN_GIB = 10 * 1024**3


def claims(member, usize=TEN_GIB, csize=None):
    """A mutate hook: `member`'s sizes move to a zip64 extra (0xFFFFFFFF in the 32-bit fields)."""
    def patch(name, fields=None):
        entry = fields if fields is not None else name
        entry_name = name if fields is not None else entry["name"].decode()
        if entry_name.endswith(member):
            entry["extra"] = struct.pack("<HHQQ", 1, 16, usize, entry["csize"] if csize is None else csize)
            entry.update(usize=0xFFFFFFFF, csize=0xFFFFFFFF, need=45)
    return patch


def claiming(name, code, member, pickle=GOOD_PICKLE, method=0, **sizes):
    hook = claims(member, **sizes)
    emit(name, make_zip(torch_members(pickle=pickle), method=method, mutate_local=hook, mutate_cd=hook), code)


claiming("zip64_member_claims_10gib.pt", "ZIP_SIZE_MISMATCH", "data/0")
claiming("zip64_member_claims_10gib_outside.pt", "ZIP_MEMBER_OUTSIDE_FILE", "data/0", csize=TEN_GIB)
claiming("zip64_member_claims_10gib_deflated.pt", "ZIP_BOMB", "data/0", method=8)
claiming("zip64_pickle_claims_10gib.pt", "ZIP_SIZE_MISMATCH", "data.pkl")
claiming("zip64_pickle_claims_10gib_deflated.pt", "ZIP_MEMBER_TOO_LARGE", "data.pkl", method=8)
# The tensor claims the 10 GiB too: a whole read is refused before any member is touched.
claiming("zip64_tensor_claims_10gib_deflated.pt", "TORCH_TENSOR_TOO_LARGE", "data/0", method=8,
         pickle=state_dict([("w", tensor(numel=TEN_GIB // 4, size=(TEN_GIB // 4,)))]))

# ---- torch layout --------------------------------------------------------------------------------
torch_file("torch_nested_prefix.pt", "TORCH_RECORD_MISSING", prefix="a/b")
emit("torch_mixed_prefixes.pt", make_zip([("one/data.pkl", GOOD_PICKLE), ("two/data/0", GOOD_DATA), ("one/version", b"3\n")]),
     "TORCH_MIXED_PREFIXES")
emit("torch_no_prefix.pt", make_zip([("data.pkl", GOOD_PICKLE), ("version", b"3\n")]), "TORCH_RECORD_MISSING")
emit("torch_missing_data_pkl.pt", make_zip(torch_members()[1:]), "TORCH_RECORD_MISSING")
torch_file("torch_missing_version.pt", "TORCH_RECORD_MISSING", version=None)
torch_file("torch_version_999.pt", "TORCH_VERSION_UNSUPPORTED", version=b"999\n")
torch_file("torch_version_text.pt", "TORCH_VERSION_UNSUPPORTED", version=b"three")
torch_file("torch_byteorder_big.pt", "TORCH_BYTEORDER_UNSUPPORTED", extra=[("archive/byteorder", b"big")])
emit("torch_legacy_magic.pt", b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.", "TORCH_LEGACY_FORMAT")

# ---- forbidden globals, by name ------------------------------------------------------------------
for label, module, name in [("os_system", "os", "system"), ("builtins_eval", "builtins", "eval"),
                            ("posix_system", "posix", "system"), ("subprocess_popen", "subprocess", "Popen"),
                            ("builtins_getattr", "builtins", "getattr"), ("torch_load", "torch", "load"),
                            ("load_from_bytes", "torch.storage", "_load_from_bytes"),
                            ("nt_system", "nt", "system"), ("runpy", "runpy", "_run_code")]:
    with_pickle(f"pickle_global_{label}.pt", "PICKLE_GLOBAL_REFUSED",
                b"\x80\x02" + g(module, name) + s("echo pwned") + b"\x85R.")
with_pickle("pickle_stack_global_os_system.pt", "PICKLE_GLOBAL_REFUSED",
            b"\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04echo\x85R.")
with_pickle("pickle_storage_type_qint8.pt", "PICKLE_GLOBAL_REFUSED",
            state_dict([("w", tensor(cls="QInt8Storage"))]))

# ---- opcodes outside the allow-list --------------------------------------------------------------
for label, body in [("inst", b"(ios\nsystem\nS'x'\n."), ("obj", b"(" + g("collections", "OrderedDict") + b"o."),
                    ("ext1", b"\x82\x01."), ("persid_text", b"P0\n."), ("string", b"S'abc'\n."),
                    ("int_text", b"I1\n."), ("long4", b"\x8b\x01\x00\x00\x00\x01.")]:
    with_pickle(f"pickle_opcode_{label}.pt", "PICKLE_OPCODE_REFUSED", b"\x80\x02" + body)
with_pickle("pickle_protocol_6.pt", "PICKLE_PROTOCOL_UNSUPPORTED", b"\x80\x06N.")
with_pickle("pickle_truncated.pt", "PICKLE_TRUNCATED", GOOD_PICKLE[:-10])
with_pickle("pickle_string_length_huge.pt", "PICKLE_TRUNCATED", b"\x80\x02X\xff\xff\xff\xffabc.")
with_pickle("pickle_binbytes8_huge.pt", "PICKLE_TRUNCATED", b"\x80\x04\x8e" + struct.pack("<Q", 2**62) + b".")
with_pickle("pickle_deep_marks.pt", "PICKLE_TOO_DEEP", b"\x80\x02" + b"(" * 5000 + b"t" * 5000 + b".")
with_pickle("pickle_deep_lists.pt", "PICKLE_TOO_DEEP", b"\x80\x02" + b"]" * 20000 + b"a" * 19999 + b".")
with_pickle("pickle_memo_missing.pt", "PICKLE_MEMO_MISSING", b"\x80\x02j\x00\x00\x00\x10.")
with_pickle("pickle_memo_cycle.pt", "PICKLE_TOO_DEEP", b"\x80\x02]q\x00h\x00a.")
# 64 levels of a list holding its predecessor twice: 2^64 paths through shared memo entries.
blowup = b"\x80\x02]q\x000" + b"".join(b"(h" + bytes([k]) + b"h" + bytes([k]) + b"lq" + bytes([k + 1]) + b"0" for k in range(64)) + b"h\x40."
with_pickle("pickle_memo_blowup.pt", "PICKLE_TOO_LARGE", blowup)
with_pickle("pickle_stack_underflow.pt", "PICKLE_STACK_UNDERFLOW", b"\x80\x02R.")
with_pickle("pickle_pop_past_mark.pt", "PICKLE_STACK_UNDERFLOW", b"\x80\x02N(0.")
with_pickle("pickle_reduce_on_string.pt", "PICKLE_INVALID", b"\x80\x02" + s("os") + b")R.")
with_pickle("pickle_setitem_on_list.pt", "PICKLE_INVALID", b"\x80\x02]" + s("k") + s("v") + b"s.")
with_pickle("pickle_unhashable_key.pt", "PICKLE_INVALID", b"\x80\x02}]" + s("v") + b"s.")
with_pickle("pickle_bad_utf8.pt", "PICKLE_BAD_UTF8", b"\x80\x02X\x02\x00\x00\x00\xc3\x28.")
with_pickle("pickle_two_values_at_stop.pt", "PICKLE_INVALID", b"\x80\x02NN.")
with_pickle("pickle_call_storage_class.pt", "PICKLE_CALL_REFUSED", b"\x80\x02" + g("torch", "FloatStorage") + b")R.")
with_pickle("pickle_ordered_dict_args.pt", "PICKLE_CALL_REFUSED",
            b"\x80\x02" + g("collections", "OrderedDict") + s("x") + b"\x85R.")
with_pickle("pickle_newobj.pt", "PICKLE_CALL_REFUSED", b"\x80\x02" + g("collections", "OrderedDict") + b")\x81.")
with_pickle("pickle_build_on_string.pt", "PICKLE_INVALID", b"\x80\x02" + s("x") + b"}b.")

# ---- storages and tensor records -----------------------------------------------------------------
with_pickle("tensor_storage_key_missing.pt", "TORCH_STORAGE_MISSING", state_dict([("w", tensor(key="7"))]))
with_pickle("tensor_numel_past_member.pt", "TORCH_STORAGE_TOO_SHORT",
            state_dict([("w", tensor(numel=1000, size=(1000,)))]))
with_pickle("tensor_out_of_storage.pt", "TORCH_TENSOR_OUT_OF_STORAGE", state_dict([("w", tensor(size=(10,)))]))
with_pickle("tensor_offset_past_storage.pt", "TORCH_TENSOR_OUT_OF_STORAGE",
            state_dict([("w", tensor(offset=4, size=(1,)))]))
with_pickle("tensor_stride_overflows.pt", "TORCH_TENSOR_OUT_OF_STORAGE",
            state_dict([("w", tensor(size=(2, 2), stride=(3, 1)))]))
with_pickle("tensor_negative_stride.pt", "TORCH_NEGATIVE_STRIDE", state_dict([("w", tensor(stride=(-1,)))]))
with_pickle("tensor_bad_persistent_id.pt", "TORCH_BAD_PERSISTENT_ID",
            state_dict([("w", tensor(persistent=pid(kind="module")))]))
with_pickle("tensor_storage_key_path.pt", "TORCH_BAD_STORAGE_KEY", state_dict([("w", tensor(key="../../etc/passwd"))]))
with_pickle("tensor_storage_key_dots.pt", "TORCH_BAD_STORAGE_KEY", state_dict([("w", tensor(key=".."))]))
with_pickle("tensor_size_stride_mismatch.pt", "TORCH_BAD_TENSOR", state_dict([("w", tensor(size=(2, 2), stride=(1,)))]))
with_pickle("tensor_too_many_dims.pt", "TORCH_BAD_TENSOR",
            state_dict([("w", tensor(size=(1,) * 100, stride=(1,) * 100))]))
with_pickle("tensor_huge_shape.pt", "TORCH_BAD_TENSOR",
            state_dict([("w", tensor(size=(2**40, 2**40), stride=(1, 1)))]))
with_pickle("tensor_storage_not_persistent.pt", "TORCH_BAD_TENSOR",
            state_dict([("w", g("torch._utils", "_rebuild_tensor_v2") + b"(" + s("x") + i(0) + tup((1,)) + tup((1,)) + b"\x89}tR")]))
# {"a.b": t, "a": {"b": u}} reads as ["a.b"] and a.b; a third key spelling the quoted name collides.
with_pickle("tensor_duplicate_names.pt", "TORCH_DUPLICATE_TENSOR_NAME",
            b"\x80\x02}(" + s("a.b") + tensor() + s("a") + b"}" + s("b") + tensor() + b"s"
            + s('["a.b"]') + tensor() + b"u.")


# ---- what the format does not allow, though a permissive reader would take it -------------------
def f(x):
    """BINFLOAT: a Python float, where torch.save always writes an int."""
    return b"G" + struct.pack(">d", x)


def tensor_raw(persistent, offset, size, stride):
    return (g("torch._utils", "_rebuild_tensor_v2") + b"(" + persistent + offset + size + stride
            + b"\x89" + g("collections", "OrderedDict") + b")R" + b"tR")


with_pickle("tensor_numel_float.pt", "TORCH_BAD_PERSISTENT_ID", state_dict([("w", tensor_raw(
    b"(" + s("storage") + g("torch", "FloatStorage") + s("0") + s("cpu") + f(4.0) + b"tQ", i(0), tup((4,)), tup((1,))))]))
with_pickle("tensor_offset_float.pt", "TORCH_BAD_TENSOR",
            state_dict([("w", tensor_raw(pid(), f(0.0), tup((4,)), tup((1,))))]))
with_pickle("tensor_size_float.pt", "TORCH_BAD_TENSOR",
            state_dict([("w", tensor_raw(pid(), i(0), b"(" + f(4.0) + b"t", tup((1,))))]))
with_pickle("tensor_stride_float.pt", "TORCH_BAD_TENSOR",
            state_dict([("w", tensor_raw(pid(), i(0), tup((4,)), b"(" + f(1.0) + b"t"))]))
with_pickle("tensor_storage_dtype_conflict.pt", "TORCH_STORAGE_CONFLICT",
            state_dict([("a", tensor()), ("b", tensor(cls="IntStorage"))]))
with_pickle("tensor_storage_numel_conflict.pt", "TORCH_STORAGE_CONFLICT",
            state_dict([("a", tensor()), ("b", tensor(numel=2, size=(2,)))]))
with_pickle("pickle_setitems_empty_on_list.pt", "PICKLE_INVALID", b"\x80\x02](u.")
with_pickle("pickle_setitems_on_tuple.pt", "PICKLE_INVALID", b"\x80\x02)(" + s("k") + s("v") + b"u.")
with_pickle("pickle_setitem_on_tuple.pt", "PICKLE_INVALID", b"\x80\x02)" + s("k") + s("v") + b"s.")

with open(os.path.join(OUT, "expected.json"), "w") as f:
    json.dump(dict(sorted(expected.items())), f, indent=1)
    f.write("\n")
print(len(expected), "files")
