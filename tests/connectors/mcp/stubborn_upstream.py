"""A stdio upstream that outlives its closed stdin and SIGTERM, and so does the child it starts.

Run: ``python stubborn_upstream.py ARGS...``: ignores SIGTERM (its children inherit that), starts a
grandchild of the gateway that sleeps for an hour, runs the test upstream server
(``upstream_server.py ARGS``) on its own stdin/stdout, and keeps sleeping after the server exits
(a closed stdin does not end it). Only a SIGKILL to the whole process group ends all three.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

SERVER = str(Path(__file__).with_name("upstream_server.py"))

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], stdin=subprocess.DEVNULL)
    server = subprocess.Popen([sys.executable, SERVER, *sys.argv[1:]])
    server.wait()
    time.sleep(3600)
