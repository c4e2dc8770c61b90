"""A stand-in node process for launcher tests: prints, then sleeps or exits as told."""

import signal
import sys
import time

mode = sys.argv[1]
print(f'hello from {mode}', flush=True)
if mode == 'stubborn':  # ignores SIGINT, so the launcher must escalate
    signal.signal(signal.SIGINT, signal.SIG_IGN)
if mode == 'exit':
    sys.exit(3)
if mode.startswith('exit-after-'):
    time.sleep(float(mode.removeprefix('exit-after-')))
    sys.exit(0)
while True:
    time.sleep(0.1)
