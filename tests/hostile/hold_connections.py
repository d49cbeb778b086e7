#!/usr/bin/env python3
"""Opens N TCP connections to HOST:PORT and holds them until stdin closes.

Usage: hold_connections.py HOST:PORT N [PAYLOAD] [--source IP]
Each connection sends PAYLOAD (with Python escapes, e.g. 'GET / HTTP/1.1\\r\\n')
once, or nothing. Prints "open K" once K connections are up (K < N when the
server refused some: they are counted, not retried), then waits; when stdin
closes, closes them all and prints "closed".
"""
import resource
import socket
import sys


def main():
    args = sys.argv[1:]
    source = None
    if "--source" in args:
        i = args.index("--source")
        source = args[i + 1]
        del args[i:i + 2]
    address, count = args[0], int(args[1])
    payload = args[2].encode().decode("unicode_escape").encode() if len(args) > 2 else b""
    host, port = address.rsplit(":", 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
    held = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if source:
            s.bind((source, 0))
        s.settimeout(5)
        try:
            s.connect((host, int(port)))
            if payload:
                s.sendall(payload)
        except OSError:
            s.close()
            continue
        held.append(s)
    print(f"open {len(held)}", flush=True)
    sys.stdin.read()
    for s in held:
        s.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main()
