"""When a test's kvtierd counts as started: once its unix socket accepts a
connection. The socket's file appears at bind, a moment before the daemon
listens, so its existence is not enough (a first call can be refused).
And free loopback ports for the daemons a test starts.

Shared by tests/integration and tests/engines; each puts this folder on
sys.path before importing it. Shell tests run it: `python3 daemon_socket.py
N` prints N distinct free ports, one per line.
"""

import socket
import sys
import time
from typing import List


def free_ports(n: int) -> List[int]:
    """`n` distinct TCP ports free on 127.0.0.1 now. All `n` sockets stay
    bound until every port is picked: ports asked for one at a time can
    repeat, since the kernel may hand a just-closed port out again."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def listening(sock: str) -> bool:
    """True once something accepts connections on the unix socket `sock`."""
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sock)
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_listening(proc, sock: str, attempts: int = 200, interval: float = 0.05) -> bool:
    """Polls until `sock` accepts a connection (True), or until the process
    `proc` (a subprocess.Popen) exits or `attempts` polls pass (False)."""
    for _ in range(attempts):
        if listening(sock):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(interval)
    return False


if __name__ == "__main__":
    for port in free_ports(int(sys.argv[1])):
        print(port)
