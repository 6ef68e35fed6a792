"""The child process of one isolated run or timing:

    python -m rr.run.child BACKEND LAUNCH_DIR OUT_DIR [MMA_MODEL [REFERENCE]]   (empty: none)
    python -m rr.run.child time REFERENCE OTHER OUT.json NOISE_TARGET TIME_LIMIT_S BACKEND
"""

import sys

from rr.run.isolate import child_dispatch

if __name__ == "__main__":
    try:
        sys.exit(child_dispatch(sys.argv[1:]))
    except Exception as e:
        # an error of rr's own: its name and text for the parent's record (as the worker reports
        # one, rr.run.worker), not traceback lines
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
