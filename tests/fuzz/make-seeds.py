#!/usr/bin/env python3
# Writes the hand-made seeds of fuzz_engine_frame, fuzz_engine_net,
# fuzz_btl_wire, fuzz_control_wire and some of fuzz_shm_ring, so that each reaches one path
# on its first run:
#   tests/fuzz/make-seeds.py [CORPUS_DIR]   (default: corpus/ here)
# The layouts are the harnesses' (see their sources); inputs of defects
# found are kept beside these seeds and are not made here.
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")


def write_seeds(harness, seeds, prefix=b""):
    d = os.path.join(top, harness)
    os.makedirs(d, exist_ok=True)
    for name, body in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(prefix + body)
    print(f"{len(seeds)} seeds in {d}")


EAGER, RTS, ACK, FIN, CTS, DATA, SHORT, CANCEL, CANCELLED = range(1, 10)


def recv(buflen, cid, src, tag):
    return bytes([0, buflen // 4, cid]) + struct.pack("<bb", src, tag)


def send(nbytes, sync=False, cid=1, tag=2, to=0):
    return bytes([1, to, int(sync), nbytes // 4, cid]) + struct.pack("<b", tag)


def cancel(index):
    return bytes([2, index])


def frame(ftype, body=b"", flags=0, cid=1, src=1, tag=2, sender=1, fid=0, req=None, ring=1,
          cut=None):
    idsel = 0 if req is None else 0x80 | req  # 0x80: the id of request 'req' of A
    b = bytes([0x83 if ring == 2 else 3, ftype, flags])
    b += struct.pack("<IIIIQ", cid, src, tag, sender, fid) + bytes([idsel])
    b += bytes([len(body)]) + body
    b += bytes([1]) if cut is None else bytes([0, cut])
    return b


def rts_body(length):
    # len, addr, cookie_addr, cookie, pid, rails, the keys on 3 more NICs
    return struct.pack("<QQQQIIQQQ", length, 0, 0, 0, 0, 0, 0, 0, 0)


def ipc_body(handle=b"", alloc_len=0, offset=0, held=0):
    # efa_device_ipc_t: the handle (64 bytes), the allocation's length, the
    # offset, what the sender holds for the message (a descriptor + 1)
    return handle.ljust(64, b"\0") + struct.pack("<QQQ", alloc_len, offset, held)


DEVICE = 8  # kFrameDevice


def device_send(nbytes, cid=1, tag=2):
    return bytes([1, 0, 2, nbytes // 4, cid]) + struct.pack("<b", tag)


seeds = {
    # A's receive takes an eager message; a truncated one; an unexpected one.
    "eager-matched": recv(64, 1, 1, 2) + frame(EAGER, b"hello"),
    "eager-truncated": recv(4, 1, 1, 2) + frame(EAGER, b"0123456789"),
    "eager-unexpected-then-recv": frame(EAGER, b"early") + recv(64, 1, -1, -1),
    "short-header": frame(EAGER, b"x" * 40, cut=20),
    # A's synchronous send answered by ACK; a rendezvous send by FIN, by
    # CTS (A streams DATA to B).
    "sync-send-ack": send(40, sync=True) + frame(ACK, req=0),
    "rndv-send-fin": send(1000) + frame(FIN, req=0),
    "rndv-send-cts": send(1000) + frame(CTS, struct.pack("<Q", 0x100000007), req=0),
    # An RTS matched by A's receive without single copy: A answers CTS,
    # B's DATA frames (offsets 0 and 200) complete it.
    "rts-streamed": recv(400, 1, 1, 2) + frame(RTS, rts_body(300), fid=77) +
    frame(DATA, struct.pack("<Q", 0) + b"d" * 200, req=0) +
    frame(DATA, struct.pack("<Q", 200) + b"e" * 100, req=0),
    # DATA at the wrong offset, and beyond the message.
    "rts-data-bad-offset": recv(400, 1, 1, 2) + frame(RTS, rts_body(300), fid=77) +
    frame(DATA, struct.pack("<Q", 8) + b"d" * 200, req=0) +
    frame(DATA, struct.pack("<Q", 0) + b"d" * 200, req=0) +
    frame(DATA, struct.pack("<Q", 200) + b"e" * 200, req=0),
    # B withdraws an unexpected message; A's cancelled send.
    "cancel-unexpected": frame(EAGER, b"hi", flags=1, fid=55) + frame(CANCEL, fid=55),
    "send-cancelled": send(40, sync=True) + cancel(0) + frame(CANCELLED, req=0),
    # Senders that are not who they say: vpid 2 (no inbox) by its ring,
    # vpid 0 (A itself) by B's ring, vpids outside the job.
    "sender-without-inbox": frame(RTS, rts_body(300), sender=2, ring=2),
    "sender-self-by-ring-1": send(40, sync=True) + frame(ACK, sender=0, req=0),
    "sender-outside-job": frame(EAGER, b"x", flags=1, sender=0x80000009) +
    frame(RTS, rts_body(10), sender=4),
    # A short eager frame asking for an ACK (it names no sender): A once
    # acknowledged itself, vpid 0 request 0, and crashed.
    "regress-short-eager-sync-ack-to-self": recv(64, 1, 1, 2) + frame(SHORT, b"abc", flags=1),
    # Device RTS frames: no handle (A asks for DATA), a handle of the fake
    # that names no allocation of B, the same with a descriptor said to be
    # held for it (as VMM memory's exports: the file it names is not that
    # allocation), one whose message runs past its allocation, one cut
    # before its handle; A's own device sends (an RTS
    # with a handle, answered by FIN, by CTS: A streams from the device).
    "device-rts-no-handle": recv(400, 1, 1, 2) +
    frame(RTS, rts_body(300) + ipc_body(), flags=DEVICE, fid=77) +
    frame(DATA, struct.pack("<Q", 0) + b"d" * 200, req=0) +
    frame(DATA, struct.pack("<Q", 200) + b"e" * 100, req=0),
    "device-rts-forged-handle": recv(400, 1, 1, 2) +
    frame(RTS, rts_body(300) + ipc_body(b"efafake\0" + struct.pack("<Qi", 1, 3), 4096),
          flags=DEVICE, fid=77),
    "device-rts-forged-held": recv(400, 1, 1, 2) +
    frame(RTS, rts_body(300) + ipc_body(b"efafake\0" + struct.pack("<Qi", 1, -1), 4096, 0, 3),
          flags=DEVICE, fid=77),
    "device-rts-past-allocation": frame(RTS, rts_body(300) + ipc_body(b"x", 256, 128),
                                        flags=DEVICE, fid=78) + recv(400, 1, 1, 2),
    "device-rts-cut": frame(RTS, rts_body(300) + b"\0" * 20, flags=DEVICE) + recv(400, 1, 1, 2),
    "device-send-fin": device_send(40) + frame(FIN, req=0),
    "device-send-cts": device_send(400) + frame(CTS, struct.pack("<Q", 0x100000007), req=0),
}
# Byte 0 of every input: single copy off (the streamed path is reachable).
write_seeds("fuzz_engine_frame", seeds, prefix=b"\0")

# fuzz_engine_net: byte 0 the mode (window 1 + mode % 4; 0x10 no packing;
# 0x20 the swap shim), then steps.  A provider message: hsel (0x01 a raw
# sequence number, 0x02 a little early, 0x04 a raw magic and version, 0x08
# a raw frame count, 0x40 cut to a length), the sender, then its frames,
# each as in frame() plus a length-word selector (0x80: a raw length).


def net_frame(ftype, body=b"", flags=0, cid=1, src=1, tag=2, sender=1, fid=0, req=None,
              raw_len=None):
    idsel = 0 if req is None else 0x80 | req
    b = bytes([ftype, flags]) + struct.pack("<IIIIQ", cid, src, tag, sender, fid)
    b += bytes([idsel, len(body)]) + body + bytes([1])
    return b + (bytes([0]) if raw_len is None else bytes([0x80]) + struct.pack("<I", raw_len))


def net_msg(frames, sender=1, seq=None, early=0, magic=None, count=None, cut=None):
    hsel = (0x01 if seq is not None else 0) | (0x02 | (early << 4) if early else 0)
    hsel |= (0x04 if magic else 0) | (0x08 if count is not None else 0)
    hsel |= 0x40 if cut is not None else 0
    b = bytes([3, hsel]) + struct.pack("<I", sender)
    if seq is not None:
        b += struct.pack("<Q", seq)
    if magic:
        b += bytes(magic)
    b += bytes([len(frames) - 1]) + b"".join(frames)
    if count is not None:
        b += struct.pack("<H", count)
    if cut is not None:
        b += bytes([cut])
    return b


def net_send(nbytes, sync=False, peer=0, cid=1, tag=2):
    return bytes([1, peer, int(sync), nbytes // 4, cid]) + struct.pack("<b", tag)


net_seeds = {
    # A's receive takes a message from the other node; two packed in one
    # provider message; one before its receive.
    "eager-matched": recv(64, 1, 1, 2) + net_msg([net_frame(EAGER, b"hello")]),
    "packed-two": recv(64, 1, 1, 2) + recv(64, 1, 1, 2) +
    net_msg([net_frame(EAGER, b"one"), net_frame(EAGER, b"two")]),
    "unexpected-then-recv": net_msg([net_frame(EAGER, b"early")]) + recv(64, 1, -1, -1),
    # Out of order: number 1 first (held), then 0 (both go on); a
    # duplicate; a number absurdly far ahead.
    "early-then-in-order": recv(64, 1, 1, 2) + recv(64, 1, 1, 2) +
    net_msg([net_frame(EAGER, b"second")], early=1) + net_msg([net_frame(EAGER, b"first")]),
    "duplicate": net_msg([net_frame(EAGER, b"a")]) + net_msg([net_frame(EAGER, b"a")], seq=0),
    "too-far": net_msg([net_frame(EAGER, b"a")], seq=1 << 40),
    # Malformed: a bad version, a frame count beyond the frames, a length
    # word past the end, a message cut inside its header.
    "bad-version": net_msg([net_frame(EAGER, b"v")], magic=(0xE5, 9)),
    "count-too-high": net_msg([net_frame(EAGER, b"c")], count=40),
    "length-past-end": recv(64, 1, 1, 2) + net_msg([net_frame(EAGER, b"l", raw_len=0x10000)]),
    "cut-header": net_msg([net_frame(EAGER, b"h")], cut=10),
    # Senders: outside the job, A itself, one with no address (3).
    "sender-outside-job": net_msg([net_frame(EAGER, b"x", flags=1)], sender=0x80000009),
    "sender-unreachable": net_msg([net_frame(RTS, rts_body(300), sender=3)], sender=3),
    # A's sends to itself through the provider: eager, synchronous,
    # rendezvous streamed (over net_eager, 256 bytes).
    "self-eager": recv(64, 1, 0, 2) + net_send(40),
    "self-sync": recv(64, 1, 0, 2) + net_send(40, sync=True),
    "self-rndv": recv(1020, 1, 0, 2) + net_send(1000),
    # Answers for A's requests from the other node: ACK for a synchronous
    # send, CTS for a rendezvous one, then a cancel.
    "sync-send-ack": net_send(40, sync=True, peer=2) +
    net_msg([net_frame(ACK, sender=2, req=0)], sender=2),
    "rndv-send-cts": net_send(1000, peer=2) +
    net_msg([net_frame(CTS, struct.pack("<Q", 0x100000007), sender=2, req=0)], sender=2),
    "send-cancelled": net_send(40, sync=True, peer=2) + cancel(0) +
    net_msg([net_frame(CANCELLED, sender=2, req=0)], sender=2),
}
write_seeds("fuzz_engine_net", net_seeds, prefix=b"\0")

# fuzz_btl_wire: 2 bytes (fragment size less the headers), 4 bytes (the
# size of the get an answer is for), then one btl_efa message.
AM, PUT, GET, ATOMIC, RESP, CREDIT, BATCH = range(1, 8)


def hdr(mtype, plen, tag=0, credits=0, src=0x100000002):
    return struct.pack("<BBHIQ", mtype, tag, credits, plen, src)


def rma(req=1, addr=0x1000, key=3, length=0, offset=0, operand=0, operand2=0, op=0, status=0,
        flags=0):
    return struct.pack("<QQQQQQQIiII", req, addr, key, length, offset, operand, operand2, op,
                       status, flags, 0)


pre = struct.pack("<HI", 8000, 4096)
btl = {
    "credit": hdr(CREDIT, 0, credits=16),
    "am": hdr(AM, 5, tag=65) + b"hello",
    "am-truncated": hdr(AM, 50, tag=65) + b"hello",
    "short": hdr(AM, 0)[:12],
    "put": hdr(PUT, 8) + rma(length=8) + b"12345678",
    "put-length-mismatch": hdr(PUT, 8) + rma(length=4096) + b"12345678",
    "get": hdr(GET, 0) + rma(length=4096),
    "get-above-chunk": hdr(GET, 0) + rma(length=9000),
    "atomic-cswap-32": hdr(ATOMIC, 0) + rma(addr=0x1004, op=0x100, flags=1),
    "atomic-misaligned": hdr(ATOMIC, 0) + rma(addr=0x1004, op=1),
    "resp-get": hdr(RESP, 16) + rma(length=16, offset=4080) + b"r" * 16,
    "resp-get-wraps": hdr(RESP, 16) + rma(length=16, offset=2**64 - 8) + b"r" * 16,
    "request-truncated": hdr(GET, 100) + rma(length=4),
    "unknown-type": hdr(9, 0) + rma(),
}
entry = hdr(AM, 5, tag=65) + b"hello" + b"\0" * 3  # padded to 8 bytes
btl["batch"] = hdr(BATCH, 2 * len(entry)) + entry * 2
btl["batch-bad-entry"] = hdr(BATCH, 2 * len(entry)) + entry + hdr(AM, 500, tag=65) + b"x" * 8
btl["batch-truncated"] = hdr(BATCH, 100) + entry
write_seeds("fuzz_btl_wire", btl, prefix=pre)

# fuzz_shm_ring (layout in fuzz_shm_ring.cpp): a valid segment attached,
# then its words changed under the sender between frames; an owner whose
# header fields and ring 0 (no sender attached) are rewritten.
def frame16(mult=0):
    return bytes([0, 16]) + b"f" * 16 + bytes([mult])


def poke(off, v):
    return bytes([1]) + struct.pack("<IQ", off, v)


ring1 = 4096 + 4096  # 2 rings of 8 slots of 256 bytes: one page each
shm = {
    "attach-then-corrupt": bytes([0, 1, 2, 2, 0, 1, 0]) + frame16() +
    poke(ring1 + 64, 2**64 - 1) + frame16() + poke(16, 0) + poke(ring1, 5) + frame16(3),
    "poll-header-fields": bytes([1, 1, 0, 2]) +
    bytes([3, 3]) + struct.pack("<Q", 0xdeadbeef) +
    bytes([3, 4]) + struct.pack("<Q", 1 << 40) +
    bytes([0x82]) + struct.pack("<IQ", 128, 1) +
    bytes([2]) + struct.pack("<I", 7) +
    bytes([0x83]) + struct.pack("<HI", 0, 4000) +
    bytes([0x83]) + struct.pack("<HI", 1, 16) + bytes([4, 8, 0, 0]),
}
write_seeds("fuzz_shm_ring", shm)


# fuzz_emul_target (layout in fuzz_emul_target.cpp): requests against a
# block of 96 bytes, [0, 32) read-only (key 1), [32, 96) everything (key 2),
# and 64 bytes of the fake device's memory (key 3).  mode: 0 an offset into
# the block, 1 into the device block, 2 a raw address.
BLOCK, DEVICE, RAW = 0, 1, 2


def emul(kind, where, length, key, op=0, flags=0, a=0, b=0, payload=b"", mode=BLOCK):
    return (bytes([kind, mode]) + struct.pack("<QQBIIQQ", where, length, key, op, flags, a, b) +
            payload)


PUT, GET, ATOMIC = 0, 1, 2
OP_ADD, OP_MIN, OP_CSWAP = 0x01, 0x20, 0x100
emul_seeds = {
    "put-inside": emul(PUT, 40, 8, 2, payload=b"12345678"),
    "put-read-only": emul(PUT, 0, 8, 1, payload=b"12345678"),
    "put-straddles": emul(PUT, 28, 8, 2, payload=b"12345678"),
    "get-read-only": emul(GET, 4, 16, 1),
    "get-past-end": emul(GET, 90, 16, 2),
    "add-64": emul(ATOMIC, 40, 0, 2, OP_ADD, 0, 5),
    "min-32": emul(ATOMIC, 44, 0, 2, OP_MIN, 1, 2**32 - 3),
    "cswap-other-key": emul(ATOMIC, 48, 0, 9, OP_CSWAP, 0, 0, 7),
    "misaligned": emul(ATOMIC, 41, 0, 2, OP_ADD, 0, 1),
    "wrap": emul(PUT, 2**64 - 4, 8, 2, payload=b"12345678", mode=RAW),
    "device-put": emul(PUT, 8, 8, 3, payload=b"12345678", mode=DEVICE),
    "device-get": emul(GET, 0, 64, 3, mode=DEVICE),
    "device-add": emul(ATOMIC, 8, 0, 3, OP_ADD, 0, 5, mode=DEVICE),
    "device-put-past-end": emul(PUT, 60, 8, 3, payload=b"12345678", mode=DEVICE),
}
write_seeds("fuzz_emul_target", emul_seeds)


# fuzz_control_wire: 8 bytes (the tag), then the message (layout in
# common/core/control_tags.hpp): pings and answers, notices of a NIC taken
# out, withdraw requests and replies, rendezvous notes and answers, each cut
# short, and tags just outside their spaces.
PROBE, ANSWER, WITHDRAW, REPLY = 3 << 62, 1 << 61, 1 << 60, 1 << 59
PEER = 0x00ABCDEF01234567  # a probe id (56 bits)


def ctl(tag, body=b""):
    return struct.pack("<Q", tag) + body


request = struct.pack("<QQQ", 0x8000000000000007, 42, 1 << 20)  # tag, id, length
RDV, FIN, RAIL_OUT = 1 << 58, 1 << 57, 1 << 56
note = struct.pack("<QQQQQ4Q", 42, (1 << 61) | (7 << 48) | 0x2A, 1 << 22, 0x7F0000001000, 2, 11, 12, 0, 0)
control = {
    "ping": ctl(PROBE | PEER),
    "answer": ctl(PROBE | ANSWER | PEER),
    "rail-out": ctl(PROBE | RAIL_OUT | PEER),
    "rail-out-and-answer": ctl(PROBE | RAIL_OUT | ANSWER | PEER),
    "withdraw-request": ctl(PROBE | WITHDRAW | PEER, request),
    "withdraw-request-short": ctl(PROBE | WITHDRAW | PEER, request[:23]),
    "withdraw-request-long": ctl(PROBE | WITHDRAW | PEER, request + b"x" * 16),
    "withdraw-reply-taken": ctl(PROBE | WITHDRAW | REPLY, struct.pack("<Qq", 42, 1)),
    "withdraw-reply-error": ctl(PROBE | WITHDRAW | REPLY, struct.pack("<Qq", 42, -103)),
    "withdraw-reply-wide": ctl(PROBE | WITHDRAW | REPLY, struct.pack("<QQ", 42, (1 << 32) | 1)),
    "withdraw-reply-short": ctl(PROBE | WITHDRAW | REPLY, struct.pack("<Q", 42)),
    "zero-bit-set": ctl(PROBE | WITHDRAW | (1 << 57) | PEER, request),
    "zero-bit-58-set": ctl(PROBE | WITHDRAW | REPLY | (1 << 58), struct.pack("<Qq", 42, 1)),
    "answer-and-withdraw": ctl(PROBE | ANSWER | WITHDRAW | PEER, request),
    "reply-bit-on-ping": ctl(PROBE | REPLY | PEER),
    "component-message": ctl((1 << 62) | PEER, request),
    # rendezvous notes (id, tag, length, address, key count, 4 keys) and
    # answers (id, result)
    "rdv-note": ctl(PROBE | RDV | PEER, note),
    "rdv-note-short": ctl(PROBE | RDV | PEER, note[:71]),
    "rdv-note-no-keys": ctl(PROBE | RDV | PEER, note[:32] + struct.pack("<Q", 0) + note[40:]),
    "rdv-note-five-keys": ctl(PROBE | RDV | PEER, note[:32] + struct.pack("<Q", 5) + note[40:]),
    "rdv-fin": ctl(PROBE | RDV | FIN | PEER, struct.pack("<Qq", 42, 0)),
    "rdv-fin-error": ctl(PROBE | RDV | FIN | PEER, struct.pack("<Qq", 42, -113)),
    "rdv-fin-short": ctl(PROBE | RDV | FIN | PEER, struct.pack("<Q", 42)),
    "rdv-and-withdraw": ctl(PROBE | RDV | WITHDRAW | PEER, note),
    "rdv-zero-bit-set": ctl(PROBE | RDV | RAIL_OUT | PEER, note),
}
write_seeds("fuzz_control_wire", control)
