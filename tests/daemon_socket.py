"""When a test's kvtierd counts as started: once its unix socket accepts a
connection. The socket's file appears at bind, a moment before the daemon
listens, so its existence is not enough (a first call can be refused).

Shared by tests/integration and tests/engines; each puts this folder on
sys.path before importing it.
"""

import socket
import time


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
