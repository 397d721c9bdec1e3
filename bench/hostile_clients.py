#!/usr/bin/env python3
"""Hostile clients for bench/run_listen_replay.sh: IDLE connections opened
and held silent, and DRIP connections each sending a 58 KiB request head a
few bytes at a time over SECONDS (slowloris), while wrk measures a normal
sender beside them. Loopback only; stops by itself after SECONDS.

    hostile_clients.py PORT --idle 10000 --drip 8 --seconds 10
Prints one line: how many idle connections were held and drips finished."""
import argparse
import resource
import socket
import sys
import threading
import time


def drip(port, seconds, results):
    head = b"POST /drip HTTP/1.1\r\nHost: h\r\n" + b"".join(b"X-Pad-%05d: %s\r\n" % (n, b"v" * 40) for n in range(1200))
    head = head[:58 * 1024] + b"\r\nContent-Length: 2\r\n\r\n{}"
    pieces = [head[at:at + 16] for at in range(0, len(head), 16)]
    pause = seconds / len(pieces)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=seconds + 30) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for piece in pieces:
                sock.sendall(piece)
                time.sleep(pause)
            answer = sock.recv(100)
            results.append(answer.split(b" ", 2)[1].decode() if answer else "closed")
    except OSError as error:
        results.append(f"error {error.errno}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--idle", type=int, default=10000)
    parser.add_argument("--drip", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, args.idle + 256)), hard))
    held = []
    for _ in range(args.idle):
        try:
            held.append(socket.create_connection(("127.0.0.1", args.port), timeout=10))
        except OSError as error:
            print(f"stopped opening idle connections at {len(held)}: {error}", file=sys.stderr)
            break
    results = []
    drippers = [threading.Thread(target=drip, args=(args.port, args.seconds, results)) for _ in range(args.drip)]
    for thread in drippers:
        thread.start()
    for thread in drippers:
        thread.join()
    # Still open at the end? A closed one reads b"" without blocking.
    still_open = 0
    for sock in held:
        sock.setblocking(False)
        try:
            still_open += 0 if sock.recv(1) == b"" else 1
        except BlockingIOError:
            still_open += 1
        sock.close()
    print(f"{len(held)} idle connections opened, {still_open} still open at the end; "
          f"drips answered {','.join(sorted(results))}")


if __name__ == "__main__":
    main()
