"""What the tests of the training program share (tests/test_train_ddp.py, tests/test_train_zero.py,
tests/test_train_faults.py): bounded runs, free ports, the killed-rank scenario, a reader of
safetensors files that checks they are whole, and the entry point that takes the program's path
and skips without Fashion-MNIST."""
import json
import os
import re
import socket
import struct
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path("/usr/share/datasets/fashion-mnist")
RUN_LIMIT_S = 90
DIST_TIMEOUT_S = 3  # --dist-timeout of the fault cases


def run(args, **kw):
    """(exit status, stdout, stderr) of a run bounded by RUN_LIMIT_S."""
    r = subprocess.run(args, capture_output=True, text=True, timeout=RUN_LIMIT_S, **kw)
    return r.returncode, r.stdout, r.stderr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_rank_1_in_epoch_2(args):
    """Starts `args` (a train command line with --epochs >= 2 and --dist-timeout DIST_TIMEOUT_S) as
    ranks 0 and 1 with torchrun's variables, kills rank 1 once rank 0 is in epoch 2 (epoch 1's
    checkpoint written), and checks that rank 0 fails within the timeout, naming rank 1."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), EMBER_STORE_PORT=str(free_port()),
               WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", OMP_NUM_THREADS="1")
    ranks = [subprocess.Popen(args, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    try:
        for line in ranks[0].stdout:
            if line.startswith("Epoch(train)  [2]"):
                break
        else:
            raise AssertionError("rank 0 never reached epoch 2: " + ranks[0].stderr.read())
        ranks[1].kill()
        killed = time.monotonic()
        _, err = ranks[0].communicate(timeout=DIST_TIMEOUT_S + 15)
        took = time.monotonic() - killed
    finally:
        for p in ranks:
            p.kill()
            p.wait()
    assert ranks[0].returncode != 0, "rank 0 exited 0 after its peer died"
    # A collective that waits names "rank(s) 1"; a send that meets the closed socket names "rank 1".
    assert "train: rank 0: error:" in err and re.search(r"rank(\(s\))? 1 did not answer", err), err
    assert took < DIST_TIMEOUT_S + 10, f"rank 0 took {took:.1f} s to fail"
    print(f"  rank 0 failed {took:.2f} s after rank 1 was killed")


DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def safetensors_content(path):
    """A safetensors file's metadata and each tensor's header entry and bytes; AssertionError unless
    the file is whole: its header parses and the tensors' data_offsets, each the size of its shape,
    tile the rest of the file exactly."""
    data = Path(path).read_bytes()
    assert len(data) >= 8, f"{path}: {len(data)} bytes, no header size"
    size = struct.unpack("<Q", data[:8])[0]
    assert 8 + size <= len(data), f"{path}: a header of {size} bytes in a file of {len(data)}"
    header = json.loads(data[8:8 + size])
    meta = header.pop("__metadata__", {})
    body = data[8 + size:]
    covered = 0
    for name, t in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin, end = t["data_offsets"]
        count = 1
        for dim in t["shape"]:
            count *= dim
        assert begin == covered and end - begin == count * DTYPE_BYTES[t["dtype"]], \
            f"{path}: {name} at {t['data_offsets']} (a {t['dtype']} {t['shape']}) does not follow byte {covered}"
        covered = end
    assert covered == len(body), f"{path}: the tensors end at byte {covered} of {len(body)}"
    return meta, {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def main(argv, cases, doc, use_program):
    """Runs `cases` on the program argv[0] (handed to use_program first); doctest's --count."""
    if cases.count_requested(argv):
        return 0
    if not argv:
        print(doc)
        return 2
    use_program(argv[0])
    if not DATA.is_dir():
        return cases.skip(f"{DATA} is missing (Debian: dataset-fashion-mnist)")
    return cases.run()
