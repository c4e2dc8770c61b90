"""A stand-in node process for launcher tests: prints, then sleeps or exits as told."""

import os
import signal
import sys
import time

mode = sys.argv[1]
print(f'hello from {mode}', flush=True)
if mode == 'stubborn':  # ignores SIGINT, so the launcher must escalate
    signal.signal(signal.SIGINT, signal.SIG_IGN)
if mode == 'exit':
    sys.exit(3)
if mode == 'bad-input':  # a node that refuses its configuration at start
    sys.exit(2)
if mode == 'reason':  # on SIGINT, print the stop reason the launcher wrote
    reason_file = os.environ['PALLETIZER_STOP_REASON_FILE']

    def _report(*_args):
        with open(reason_file, encoding='utf-8') as f:
            print('reason: ' + f.read().strip(), flush=True)
        sys.exit(130)

    signal.signal(signal.SIGINT, _report)
if mode.startswith('exit-after-'):
    time.sleep(float(mode.removeprefix('exit-after-')))
    sys.exit(0)
while True:
    time.sleep(0.1)
