#!/usr/bin/env python3
"""Reports and checks the resources of every CUDA kernel compiled into a library, with no GPU and no
cuobjdump: the device code nvcc embeds (the .nv_fatbin section) holds one cubin per SM target, each an
ELF file whose sections say, per kernel, its registers, its stack frame and its static shared memory.

  tools/kernel_resources.py LIBRARY [--report FILE] [--allow-frame REGEX=BYTES ...]

writes one line per kernel and SM target (registers, stack frame bytes, static shared bytes, name) to
FILE (or stdout), and exits 1 when
  - a kernel has a stack frame larger than the BYTES of the first --allow-frame whose REGEX its name
    matches (0 when none does). A frame is per-thread local memory: registers ptxas spilled, or an
    array it could not keep in registers (one indexed by a run-time value). Neither belongs in an
    elementwise or reduction kernel, so a new one fails here whether or not anyone read the build
    log's -warn-spills lines; the allowances name the kernels where it is known and why;
  - a kernel's static shared memory exceeds 48 KiB, the most a kernel may declare statically (larger
    tiles must be dynamic shared memory, opted into at launch).
  tools/kernel_resources.py --self-test   checks the parser and the rules on a cubin built in memory.

Formats (NVIDIA does not document them; these are the fields cuobjdump --dump-resource-usage reports,
as laid out by CUDA 13.0's nvcc and read by open-source cubin readers):
  fatbin: header {u32 magic 0xBA55ED50, u16 version, u16 header size, u64 payload size}, then entries
    {u16 kind (2 = cubin), u16 version, u32 header size, u64 payload size, ..., u32 SM at offset 28};
  cubin: ELF64; ".text.<kernel>" with registers in sh_info bits 24-31; ".nv.shared.<kernel>" sized
    by its static shared memory; the cubin-wide ".nv.info", a list of attributes {u8 format, u8
    attribute, u16 value or size (format 4: that many bytes follow)}, holds per kernel symbol index
    EIATTR_REGCOUNT (0x2f) and EIATTR_FRAME_SIZE (0x11), each {u32 symbol index, u32 value}.
"""
import re
import struct
import sys
from pathlib import Path
from typing import NamedTuple

FATBIN_MAGIC = 0xBA55ED50
KIND_CUBIN = 2
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F
STATIC_SHARED_LIMIT = 48 * 1024


class FormatError(Exception):
    pass


class Section(NamedTuple):
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int


def elf_sections(elf, what):
    """The sections of a 64-bit little-endian ELF file, in table order."""
    if len(elf) < 64 or elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise FormatError(f"{what}: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    if shentsize != 64 or shoff + shnum * 64 > len(elf) or shstrndx >= shnum:
        raise FormatError(f"{what}: section table at offset {shoff} ({shnum} entries of {shentsize} bytes) "
                          f"does not fit its {len(elf)} bytes")
    raw = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + 64 * i) for i in range(shnum)]
    names = contents(elf, raw[shstrndx][4], raw[shstrndx][5], f"{what}: the section names")
    sections = []
    for name, sh_type, _flags, _addr, offset, size, link, info, _align, _entsize in raw:
        sections.append(Section(c_string(names, name), sh_type, offset, size, link, info))
    return sections


def contents(data, offset, size, what):
    if offset + size > len(data):
        raise FormatError(f"{what}: {size} bytes at offset {offset} run past the end ({len(data)} bytes)")
    return data[offset:offset + size]


def c_string(table, at):
    end = table.find(b"\0", at)
    return table[at:end if end >= 0 else len(table)].decode("ascii", "replace")


def attributes(data, what):
    """(attribute, value bytes) of each entry of an .nv.info section: {u8 format, u8 attribute, u16 value
    or size}, the size's bytes following for format 4 (a value of its own), none for formats 1-3."""
    out, i = [], 0
    while i + 4 <= len(data):
        fmt, attr, value = struct.unpack_from("<BBH", data, i)
        if fmt not in (1, 2, 3, 4):
            raise FormatError(f"{what}: attribute 0x{attr:x} has format {fmt} at offset {i}")
        if fmt == 4:
            out.append((attr, contents(data, i + 4, value, f"{what}: attribute 0x{attr:x}")))
            i += 4 + value
        else:
            out.append((attr, struct.pack("<H", value)))
            i += 4
    return out


def cubin_kernels(elf, sm, what):
    """(sm, name, registers, frame bytes, static shared bytes) of each kernel of a cubin. Registers and
    the frame are attributes of the cubin-wide .nv.info section, keyed by the kernel's symbol index."""
    sections = elf_sections(elf, what)
    by_name = {s.name: s for s in sections}
    symtab = by_name.get(".symtab")
    if symtab is None:
        raise FormatError(f"{what}: no .symtab")
    strings = contents(elf, sections[symtab.link].offset, sections[symtab.link].size, f"{what}: .strtab")
    table = contents(elf, symtab.offset, symtab.size, f"{what}: .symtab")
    symbols = [c_string(strings, struct.unpack_from("<I", table, at)[0]) for at in range(0, len(table) - 23, 24)]
    per_symbol = {}
    info = by_name.get(".nv.info")
    for attr, value in attributes(contents(elf, info.offset, info.size, what), f"{what} .nv.info") if info else []:
        if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and len(value) == 8:
            symbol, amount = struct.unpack("<II", value)
            if symbol < len(symbols):
                per_symbol.setdefault(symbols[symbol], {})[attr] = amount
    kernels = []
    for s in sections:
        if s.name.startswith(".text."):
            kernel = s.name[len(".text."):]
            attrs = per_symbol.get(kernel, {})
            shared = by_name[".nv.shared." + kernel].size if ".nv.shared." + kernel in by_name else 0
            kernels.append((sm, kernel, attrs.get(EIATTR_REGCOUNT, s.info >> 24), attrs.get(EIATTR_FRAME_SIZE, 0),
                            shared))
    return kernels


def fatbin_kernels(blob, what):
    """The kernels of every cubin in a .nv_fatbin section: fatbins laid end to end (one per object)."""
    kernels, at = [], 0
    while at + 16 <= len(blob):
        magic, _version, header, size = struct.unpack_from("<IHHQ", blob, at)
        if magic != FATBIN_MAGIC:  # padding between objects' fatbins
            at += 8
            continue
        entry, end = at + header, at + header + size
        if end > len(blob):
            raise FormatError(f"{what}: fatbin at offset {at} claims {size} bytes past the section's end")
        while entry + 32 <= end:
            kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", blob, entry)
            sm, = struct.unpack_from("<I", blob, entry + 28)
            if kind == KIND_CUBIN:
                cubin = blob[entry + entry_header:entry + entry_header + payload]
                if cubin[:4] != b"\x7fELF":
                    raise FormatError(f"{what}: the sm_{sm} cubin at offset {entry} is compressed; "
                                      "build with nvcc --no-compress to read it")
                kernels += cubin_kernels(cubin, sm, f"{what} sm_{sm} cubin at offset {entry}")
            entry += entry_header + payload
        at = end
    return kernels


def library_kernels(path):
    data = Path(path).read_bytes()
    sections = elf_sections(data, str(path))
    fatbins = [s for s in sections if s.name == ".nv_fatbin"]
    if not fatbins:
        raise FormatError(f"{path}: no .nv_fatbin section (built without CUDA?)")
    return [k for s in fatbins for k in fatbin_kernels(contents(data, s.offset, s.size, str(path)), str(path))]


def frame_allowance(name, allowances):
    """The frame bytes the first (regex, bytes) allowance matching `name` grants; 0 when none does."""
    return next((limit for pattern, limit in allowances if re.search(pattern, name)), 0)


def check(kernels, allowances):
    problems = []
    for sm, name, _regs, frame, shared in kernels:
        allowed = frame_allowance(name, allowances)
        if frame > allowed:
            problems.append(f"sm_{sm} {name}: {frame} bytes of stack frame (spilled registers or a local array)"
                            f", {allowed} allowed")
        if shared > STATIC_SHARED_LIMIT:
            problems.append(f"sm_{sm} {name}: {shared} bytes of static shared memory, over {STATIC_SHARED_LIMIT}")
    return problems


def parse_allowance(text):
    pattern, sep, limit = text.rpartition("=")
    if not sep or not pattern or not limit.isdigit():
        raise ValueError(f"--allow-frame {text!r}: expected REGEX=BYTES")
    re.compile(pattern)
    return pattern, int(limit)


def report(kernels):
    lines = [f"{'sm':>4} {'regs':>5} {'frame':>6} {'shared':>7}  kernel"]
    for sm, name, regs, frame, shared in sorted(kernels):
        lines.append(f"{sm:>4} {regs:>5} {frame:>6} {shared:>7}  {name}")
    return "\n".join(lines) + "\n"


def synthetic_cubin(kernels):
    """An ELF64 cubin laid out as ptxas writes one, holding per (name, registers, frame, shared) the
    parts the parser reads: the kernel's .text and .nv.shared sections, its symbol, and its register
    count and frame size in the cubin-wide .nv.info (keyed by symbol index)."""
    strtab = b"\0" + b"".join(name.encode() + b"\0" for name, *_ in kernels)
    symtab, info, at = b"\0" * 24, b"", 1
    for index, (name, regs, frame, _shared) in enumerate(kernels, start=1):
        symtab += struct.pack("<IBBHQQ", at, 0x12, 0, 0, 0, 0)
        at += len(name) + 1
        info += struct.pack("<BBHII", 4, EIATTR_REGCOUNT, 8, index, regs)
        info += struct.pack("<BBHII", 4, EIATTR_FRAME_SIZE, 8, index, frame)
        info += struct.pack("<BBH", 3, 0x12, 0)  # a format-3 attribute between them, as ptxas writes
    # (name, type, data, link, info, size): .strtab is section 1, the link of .symtab
    sections = [("", 0, b"", 0, 0, 0), (".strtab", 3, strtab, 0, 0, None), (".symtab", 2, symtab, 1, 0, None),
                (".nv.info", 0x70000000, info, 2, 0, None)]
    for name, regs, _frame, shared in kernels:
        sections.append((".text." + name, 1, b"\0" * 16, 2, regs << 24, None))
        if shared:
            sections.append((".nv.shared." + name, 8, b"", 0, 0, shared))
    sections.append((".shstrtab", 3, None, 0, 0, None))
    names, name_at = b"\0", []
    for name, *_ in sections:
        name_at.append(len(names) if name else 0)
        names += name.encode() + b"\0" if name else b""
    body, table = b"", []
    for (name, sh_type, data, link, info, size), at in zip(sections, name_at):
        data = names if data is None else data
        table.append((at, sh_type, 64 + len(body), len(data) if size is None else size, link, info))
        body += data
    header = b"\x7fELF\x02\x01" + b"\0" * 34 + struct.pack("<Q", 64 + len(body)) + b"\0" * 10
    header += struct.pack("<HHH", 64, len(table), len(table) - 1)
    return header + body + b"".join(struct.pack("<IIQQQQIIQQ", n, t, 0, 0, o, sz, l, i, 0, 0)
                                    for n, t, o, sz, l, i in table)


def self_test():
    cubin = synthetic_cubin([("ok", 32, 0, 1024), ("spills", 255, 8, 0), ("attention_fwd", 128, 16, 0),
                             ("big_tile", 64, 0, 64 * 1024)])
    entry = struct.pack("<HHIQ", KIND_CUBIN, 0x101, 64, len(cubin)) + b"\0" * 12 + struct.pack("<I", 90)
    entry += b"\0" * (64 - len(entry))
    blob = struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(entry) + len(cubin)) + entry + cubin
    kernels = fatbin_kernels(b"\0" * 8 + blob, "self-test")
    expected = [(90, "ok", 32, 0, 1024), (90, "spills", 255, 8, 0), (90, "attention_fwd", 128, 16, 0),
                (90, "big_tile", 64, 0, 65536)]
    failures = []
    if kernels != expected:
        failures.append(f"parsed {kernels}, expected {expected}")
    problems = check(kernels, [("attention", 16), ("spills", 4)])
    if len(problems) != 2 or "spills" not in problems[0] or "big_tile" not in problems[1]:
        failures.append(f"check flagged {problems}, expected the 8-byte frame over its 4 and the 64 KiB tile")
    if check(kernels, [("attention", 8), ("spills", 8)])[0].find("attention_fwd") < 0:
        failures.append("a frame over its allowance passed")
    try:
        fatbin_kernels(blob[:40], "truncated")
        failures.append("a truncated fatbin was accepted")
    except FormatError:
        pass
    for f in failures:
        print("self-test FAILED:", f)
    print("self-test:", "FAILED" if failures else "passed")
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    args, report_path, allowances = argv[1:], None, []
    try:
        while len(args) > 1 and args[-2] in ("--report", "--allow-frame"):
            if args[-2] == "--report":
                report_path = args[-1]
            else:
                allowances.insert(0, parse_allowance(args[-1]))
            args = args[:-2]
    except (ValueError, re.error) as e:
        print(f"kernel_resources: {e}", file=sys.stderr)
        return 2
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        kernels = library_kernels(args[0])
    except (OSError, FormatError, struct.error) as e:
        print(f"kernel_resources: {e}", file=sys.stderr)
        return 1
    text = report(kernels)
    if report_path:
        Path(report_path).write_text(text)
        print(f"{len(kernels)} kernels (per SM target) reported in {report_path}")
    else:
        sys.stdout.write(text)
    problems = check(kernels, allowances)
    for p in problems:
        print("FAIL", p)
    print(f"{len(kernels)} kernels checked, {len(problems)} over the limits")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
