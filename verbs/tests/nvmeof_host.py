"""An NVMe over Fabrics host on RDMA, for verbs/tests/nvmeof.rs.

PyPI's `nvmeof` (a userspace NVMe/RDMA initiator in Python, over the
`ibverbs` bindings, which dlopen libibverbs.so.1 and librdmacm.so.1)
connects to a target, identifies the controller and namespace 1, reads
a range the target's side filled (--preset), writes patterns at several
LBAs and sizes (--write), one command after another, reading each back
into a zeroed buffer and comparing, then writes new patterns to all of
them with every command outstanding at once (the target's RDMA Reads of
several commands interleave), and reads them all back the same way
(its RDMA Writes interleave). The data lie at odd offsets in their
registered buffers, and the octets around them must stay as they were.
The last patterns' SHA-256 are printed, for a check of the target's
block device.

Run under uwarp-run, it runs on uwarp's drop-in libraries. It prints
what it did, one line per step (the test parses them), ends with
"passed", and exits non-zero at the first thing found wrong.

Usage: python3 nvmeof_host.py --target IP --nqn NQN --size BYTES
    [--port PORT] [--source IP] [--preset LBA:BYTES] [--write LBA:BYTES]...
"""

import argparse
import hashlib
import sys
import time

import nvmeof
from nvmeof import protocol

#: Octets left before and after each transfer in its buffer, so that the
#: data starts at an odd address and an overrun shows.
GUARD = 129
#: What the guards hold.
GUARD_OCTET = 0xA5


def fail(message):
    print("FAILED: " + message, flush=True)
    sys.exit(1)


def pattern(lba, length, generation):
    """The data written at ``lba`` the ``generation``th time:
    deterministic, different per range and per time."""
    seed = b"uwarp nvmeof %d %d %d" % (lba, length, generation)
    return hashlib.shake_256(seed).digest(length)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def range_arg(text):
    lba, length = text.split(":")
    return int(lba), int(length)


class Transfer:
    """One range: its LBA, its length, and a buffer registered for it,
    zeroed, with GUARD octets of guard on each side."""

    def __init__(self, controller, lba, length):
        self.lba = lba
        self.length = length
        self.buffer = controller.allocate(GUARD + length + GUARD)
        guard = bytes([GUARD_OCTET]) * GUARD
        self.buffer.write(guard + bytes(length) + guard)

    def data(self):
        return self.buffer.read(self.length, GUARD)

    def check_guards(self, what):
        before = self.buffer.read(GUARD, 0)
        after = self.buffer.read(GUARD, GUARD + self.length)
        if before != bytes([GUARD_OCTET]) * GUARD or after != bytes([GUARD_OCTET]) * GUARD:
            fail("%s at lba %d: octets outside the %d octets changed" % (what, self.lba, self.length))


def blocks(namespace, length):
    if length % namespace.lba_size:
        fail("%d octets are not a whole number of %d-octet blocks" % (length, namespace.lba_size))
    return length // namespace.lba_size


def all_at_once(controller, namespace, opcode, transfers):
    """Submits ``opcode`` (a read or a write) for every transfer, all
    outstanding at once (a transfer longer than the controller takes in one
    command in several commands), and waits for them all to succeed."""
    name = {protocol.OPC_READ: "reads", protocol.OPC_WRITE: "writes"}[opcode]
    io = controller.io
    most = blocks(namespace, controller.max_transfer_bytes)
    requests = []
    for transfer in transfers:
        done = 0
        while done < blocks(namespace, transfer.length):
            count = min(most, blocks(namespace, transfer.length) - done)
            command = protocol.rw_command(
                opcode, namespace.nsid, transfer.lba + done, count, transfer.buffer,
                lba_size=namespace.lba_size, buffer_offset=GUARD + done * namespace.lba_size,
            )
            requests.append(io.submit(command, data_owner=transfer.buffer))
            done += count
    print("%s outstanding at once: %d" % (name, io.outstanding), flush=True)
    deadline = time.monotonic() + 60
    while not all(request.done for request in requests):
        io.poll()
        if time.monotonic() > deadline:
            fail("the concurrent %s did not complete in 60 s" % name)
    for request in requests:
        request.response.raise_for_status()
    for transfer in transfers:
        transfer.check_guards("concurrent " + name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--port", type=int, default=protocol.NVME_RDMA_PORT)
    parser.add_argument("--nqn", required=True)
    parser.add_argument("--source", help="the host's address to connect from")
    parser.add_argument("--size", type=int, required=True, help="the namespace's size in octets")
    parser.add_argument("--preset", type=range_arg)
    parser.add_argument("--write", type=range_arg, action="append", default=[])
    args = parser.parse_args()

    with nvmeof.Controller.connect(
        args.target, args.nqn, port=args.port, source=args.source, timeout=60.0
    ) as controller:
        info = controller.info
        print(
            "controller: cntlid=%d model=%r serial=%r firmware=%r version=%#x mdts=%d "
            "max_transfer=%d sgls=%#x namespaces=%d ioccsz=%d iorcsz=%d"
            % (
                info.controller_id, info.model, info.serial, info.firmware, info.version,
                info.mdts, controller.max_transfer_bytes, info.sgls, info.namespace_count,
                info.ioccsz, info.iorcsz,
            ),
            flush=True,
        )
        namespace = controller.namespace(1)
        size = namespace.info.size_lbas * namespace.lba_size
        print(
            "namespace 1: lbas=%d lba_size=%d size=%d capacity=%d"
            % (namespace.info.size_lbas, namespace.lba_size, size, namespace.info.capacity_lbas),
            flush=True,
        )
        if size != args.size:
            fail("namespace 1 holds %d octets, not %d" % (size, args.size))

        if args.preset:
            lba, length = args.preset
            preset = Transfer(controller, lba, length)
            namespace.read(preset.buffer, lba, blocks(namespace, length), buffer_offset=GUARD)
            preset.check_guards("read of the preset")
            print("preset lba=%d octets=%d sha256=%s" % (lba, length, sha256(preset.data())), flush=True)
            preset.buffer.close()

        transfers = []
        for lba, length in args.write:
            data = pattern(lba, length, 0)
            source = Transfer(controller, lba, length)
            source.buffer.write(data, GUARD)
            namespace.write(source.buffer, lba, blocks(namespace, length), buffer_offset=GUARD)
            source.check_guards("write")
            print("write lba=%d octets=%d sha256=%s" % (lba, length, sha256(data)), flush=True)
            sink = Transfer(controller, lba, length)
            namespace.read(sink.buffer, lba, blocks(namespace, length), buffer_offset=GUARD)
            sink.check_guards("read")
            if sink.data() != data:
                fail("read lba=%d octets=%d: not what was written" % (lba, length))
            print("read lba=%d octets=%d: equal" % (lba, length), flush=True)
            source.buffer.close()
            transfers.append(sink)

        # Every range again, new data, all the writes outstanding at once,
        # then all the reads.
        for transfer in transfers:
            transfer.buffer.write(pattern(transfer.lba, transfer.length, 1), GUARD)
        all_at_once(controller, namespace, protocol.OPC_WRITE, transfers)
        for transfer in transfers:
            data = pattern(transfer.lba, transfer.length, 1)
            print(
                "rewrote lba=%d octets=%d sha256=%s" % (transfer.lba, transfer.length, sha256(data)),
                flush=True,
            )
            transfer.buffer.write(bytes(transfer.length), GUARD)
        all_at_once(controller, namespace, protocol.OPC_READ, transfers)
        for transfer in transfers:
            if transfer.data() != pattern(transfer.lba, transfer.length, 1):
                fail(
                    "concurrent read lba=%d octets=%d: not what was written"
                    % (transfer.lba, transfer.length)
                )
            transfer.buffer.close()
        print("concurrent reads: equal", flush=True)
        namespace.flush()
    print("passed", flush=True)


if __name__ == "__main__":
    main()
